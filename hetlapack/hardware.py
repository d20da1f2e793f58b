"""What this machine has: CPU, BLAS, GPUs through CuPy, MPI. Detection never imports CuPy or mpi4py eagerly."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import platform
from dataclasses import dataclass

from .machine import usable_cores


@dataclass(frozen=True)
class Hardware:
    """A summary of the detected hardware and the optional backends that can use it."""

    cpu_model: str
    cores: int
    blas: tuple[dict, ...]
    cupy: str | None
    gpus: tuple[str, ...]
    gpu_reason: str
    mpi: str | None

    def blas_summary(self) -> str:
        """Each BLAS loaded, its version, its kernels (threadpoolctl's ``architecture``) and threads."""
        return "; ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture') or '?'} kernels, "
                         f"{b.get('num_threads')} threads)" for b in self.blas)

    def __str__(self) -> str:
        blas = self.blas_summary()
        gpus = ", ".join(self.gpus) if self.gpus else f"none ({self.gpu_reason})"
        return "\n".join(
            [
                f"CPU:   {self.cpu_model}, {self.cores} cores",
                f"BLAS:  {blas or 'not detected'}",
                f"CuPy:  {self.cupy or 'not installed'}",
                f"GPUs:  {gpus}",
                f"MPI:   {self.mpi or 'mpi4py not installed'}",
            ]
        )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cupy_version() -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return None
    for dist in ("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"):
        version = _version(dist)
        if version:
            return f"{dist} {version}"
    return "cupy (version unknown)"


def _gpus(cupy_version: str | None) -> tuple[tuple[str, ...], str]:
    if cupy_version is None:
        return (), "CuPy is not installed (pip install 'hetlapack[gpu]')"
    try:
        import cupy  # noqa: PLC0415 - optional backend, imported only here

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy without a driver raises CUDARuntimeError or ImportError
        return (), f"CuPy could not reach a CUDA device: {exc}"
    names = tuple(f"cuda:{i}" for i in range(count))
    return names, "" if names else "CUDA reports no devices"


@functools.cache
def detect() -> Hardware:
    """Detect once per process; the GPU probe runs only when CuPy is installed."""
    from threadpoolctl import threadpool_info  # noqa: PLC0415 - keeps import hetlapack light

    cupy_version = _cupy_version()
    gpus, gpu_reason = _gpus(cupy_version)
    mpi = _version("mpi4py")
    return Hardware(
        cpu_model=_cpu_model(),
        cores=usable_cores(),
        blas=tuple(info for info in threadpool_info() if info.get("user_api") == "blas"),
        cupy=cupy_version,
        gpus=gpus,
        gpu_reason=gpu_reason,
        mpi=f"mpi4py {mpi}" if mpi else None,
    )
