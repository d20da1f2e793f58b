"""The gpu path: the whole factorization as one library call on one accelerator (seed 001), through
:mod:`hetlapack.algorithms.whole`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ...contract.arrays import upload_operand
from ...devices import resolve
from ...hardware import detect
from ...imports import load
from ...options import Options
from ...perf import model, rates
from .base import TILED_OPS, Path, Request, kind, module_present, one_matrix_refusal

if TYPE_CHECKING:
    from ...algorithms import whole


def _whole() -> whole:
    """The whole-matrix routines, imported when a plan first runs them."""
    return load("hetlapack.algorithms.whole")


def gpu_probe():
    """The hardware probe's findings where CuPy is installed, else ``None`` (the probe imports CuPy and starts
    CUDA, once per process)."""
    return detect() if module_present("cupy") else None


def detected_gpus() -> tuple[str, ...]:
    """``cuda:0 … cuda:N-1`` for the GPUs CuPy sees."""
    hardware = gpu_probe()
    return tuple(f"cuda:{i}" for i in range(len(hardware.gpus))) if hardware else ()


def _accelerators(options: Options, gpus: tuple[str, ...] | None) -> tuple:
    """The accelerators a gpu plan may use: those among the user's devices, else ``gpus`` (the detected GPUs, or
    ``None`` where dispatch did not look)."""
    if options.devices is not None:
        return tuple(d for d in options.devices if kind(d) != "cpu")
    return gpus or ()


def _does_not_fit(req: Request, accelerator) -> str | None:
    """Why the gpu path cannot hold ``req``'s matrix whole in ``accelerator``'s memory (the capacity the runtime
    would give it: 90% of its free memory, or its ``memory_bytes``); ``None`` when it fits or has no known limit."""
    capacity = model.modeled((accelerator,))[0].memory_bytes
    need = math.prod(req.shape) * req.dtype.itemsize
    if capacity is None or need <= capacity:
        return None
    name = getattr(accelerator, "name", accelerator)
    return (f"the matrix ({need / 1e9:.3g} GB) does not fit {name}'s memory ({capacity / 1e9:.3g} GB usable): the "
            f"gpu path holds it whole, the hybrid path streams its tiles")


class GpuPath(Path):
    """One accelerator factors the whole matrix: uploaded as it lies, checked for infinities and NaNs there."""

    name = "gpu"
    reorders_arithmetic = True
    checks_where_read = True

    def unavailable(self, req: Request, options: Options, gpus: tuple[str, ...] | None) -> str | None:
        if req.array_module != "numpy":
            return f"{req.array_module} arrays are not supported (NumPy and CuPy arrays are)"
        if req.op not in TILED_OPS:
            return f"{req.op} has no whole-matrix device routine here (one LAPACK call on the host does it)"
        if (why := one_matrix_refusal(req)) is not None:
            return why
        if accelerators := _accelerators(options, gpus):
            return _does_not_fit(req, accelerators[0])
        if options.devices is not None:
            return "the devices given include no accelerator"
        if gpus is None:
            return (f"no GPU was looked for: one LAPACK call on the host is predicted to finish within the "
                    f"{rates.RUNTIME_CALL_OVERHEAD_S * 1e3:g} ms that any device path costs")
        hardware = gpu_probe()
        return hardware.gpu_reason if hardware else "CuPy is not installed (pip install 'hetlapack[gpu]')"

    def devices(self, options: Options, gpus: tuple[str, ...] | None) -> tuple:
        """The first accelerator among the user's devices, else the first detected GPU."""
        return _accelerators(options, gpus)[:1]

    def predict(self, req: Request, options: Options, gpus: tuple[str, ...] | None) -> float:
        """Seconds of the library call on the device and the matrix's trips over the link."""
        return model.predict_gpu(req.op, *req.core, req.dtype, self.devices(options, gpus)[0], options.tile)

    def operand(self, a1: np.ndarray, original, dtype: np.dtype, overwrite: bool) -> np.ndarray:
        """``a1`` in ``dtype`` as it lies (the device lays it out), read-only unless its factors may be written back
        into it."""
        return upload_operand(a1, original, dtype, overwrite)

    @staticmethod
    def _device(plan):
        return resolve(list(plan.devices))[0]

    def potrf(self, plan, a, lower, clean, fortran=False, check_finite=False):
        c, info = _whole().potrf(a, lower=lower, clean=clean, device=self._device(plan), check_finite=check_finite)
        return c, np.asarray(info, dtype=np.int32)

    def getrf(self, plan, a, fortran=False, check_finite=False):
        lu, piv, info = _whole().getrf(a, device=self._device(plan), check_finite=check_finite)
        return lu, piv, np.asarray(info)

    def geqrf(self, plan, a, check_finite=False):
        return _whole().geqrf(a, device=self._device(plan), check_finite=check_finite)

    def orgqr(self, plan, qr, tau, ncols):
        return _whole().orgqr(qr, tau, ncols=ncols, device=self._device(plan))


GPU = GpuPath()
