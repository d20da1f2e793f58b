"""The GPU paths on a real GPU beside CuPy's and torch's own calls on the same arrays (skipped without one).

Three tables, each group one case, every call synchronized with the GPU before its clock stops:

- **batched**: CuPy stacks ``(B, n, n)`` through ``hetlapack.linalg`` (the user's call: the GPU batched path,
  ``check_finite`` and ``info`` read back), its two engines alone (seed 004's numba-cuda kernels and cuSOLVER's /
  cuBLAS's batched routines, as :mod:`hetlapack.batched.cuda_batched` calls them), ``cupy.linalg.cholesky`` and
  torch's ``linalg.cholesky`` / ``linalg.lu_factor`` on a CUDA tensor.
- **single**: one CuPy matrix (the gpu path: cuSOLVER through the CUDA device, CuPy in and out) beside
  ``cupy.linalg.cholesky``, ``cupyx.scipy.linalg.lu_factor`` and torch (CuPy matrices have no QR here).
- **host**: one NumPy matrix through the hybrid path (the CPU's panels, updates on the GPU), the gpu path (one
  round trip) and what dispatch picks, beside SciPy's LAPACK on the host's cores and torch with its transfers.
- **tile transfers**: one tile between a host array and a view of a larger device matrix, as the hybrid path moves
  tiles (``CudaDevice.upload`` / ``to_host``: packed on the device), beside CuPy's copy of a contiguous tile.

Run on a GPU machine: ``pytest benchmarks/test_gpu.py --benchmark-only``. Sizes:
``HETLAPACK_BENCH_GPU_SIZES`` (single and host, default 4000,8000), ``HETLAPACK_BENCH_GPU_BATCHED``
(``n`` values, default 4,8,16,32,64).
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
import scipy.linalg as sla

import hetlapack
import hetlapack.linalg as la
from hetlapack.testing import general, spd
from hetlapack.testing.matrices import random_matrix

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the GPU benchmarks need CuPy and a GPU")
try:
    GPUS = cupy.cuda.runtime.getDeviceCount()
except Exception as exc:  # noqa: BLE001 - any CUDA failure means there is no usable GPU
    pytest.skip(f"CuPy sees no GPU ({exc})", allow_module_level=True)
if GPUS == 0:
    pytest.skip("CuPy sees no GPU", allow_module_level=True)

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_GPU_SIZES", "4000,8000").split(",")]
BATCHED_N = [int(n) for n in os.environ.get("HETLAPACK_BENCH_GPU_BATCHED", "4,8,16,32,64").split(",")]
BATCHES = [10_000, 100_000]
DTYPES = [np.float64, np.float32]


def _synchronized(call, synchronize=lambda: cupy.cuda.Device().synchronize()):
    """``call`` whose clock stops only when the GPU has finished its work (``synchronize``: CuPy's, or torch's)."""
    def timed(*args):
        result = call(*args)
        synchronize()
        return result
    return timed


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


def _torch_synchronized(call):
    return _synchronized(call, _torch().cuda.synchronize)


@functools.lru_cache(maxsize=2)
def host_stack(kind: str, dtype: type, n: int, batch: int) -> np.ndarray:
    a = random_matrix((batch, n, n), dtype, seed=n)
    if kind == "spd":
        a = a @ np.swapaxes(a, -1, -2) / n + np.eye(n, dtype=dtype)
    return a


def _cublas_getrf_batched(a):
    """cuBLAS ``getrfBatched`` on a column-major copy of the stack, its ``info`` array kept (the vendor's batched
    LU; not hetlapack's route, whose pivots must be LAPACK's)."""
    from cupy_backends.cuda.libs import cublas  # noqa: PLC0415

    from hetlapack.batched.cuda_batched import _column_major_stack  # noqa: PLC0415 - needs numba-cuda
    from hetlapack.devices.cuda import PREFIX  # noqa: PLC0415

    n, batch = a.shape[-1], a.shape[0]
    work, pointers = _column_major_stack(cupy, a)
    piv = cupy.empty((batch, n), dtype=np.int32)
    info = cupy.zeros(batch, dtype=np.int32)
    getattr(cublas, PREFIX[a.dtype.char] + "getrfBatched")(cupy.cuda.device.get_cublas_handle(), n,
                                                          pointers.data.ptr, n, piv.data.ptr, info.data.ptr, batch)
    return work, piv, info


def _batched_engines(op: str):
    """``(engine name, call)``: seed 004's numba-cuda kernel and the vendor's batched routine, each alone."""
    from hetlapack.batched import cuda_batched, cuda_kernels  # noqa: PLC0415 - needs numba-cuda

    if op == "cholesky":
        return {"kernel": lambda a: cuda_kernels.potrf(a, lower=True, clean=True),
                "cusolver": lambda a: cuda_batched._potrf_library(a, True, True)}
    return {"kernel": cuda_kernels.getrf, "cublas": _cublas_getrf_batched}


BATCHED_PEERS = ["hetlapack", "kernel", "vendor", "cupy", "torch"]


@pytest.mark.parametrize("peer", BATCHED_PEERS)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("n", BATCHED_N)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["cholesky", "lu_factor"])
def test_batched(benchmark, op, dtype, n, batch, peer):
    """One stack factorized on the GPU; ns per matrix in ``extra_info``."""
    if dtype == np.float32 and batch != BATCHES[-1]:
        pytest.skip("float32 at the larger batch only")
    host = host_stack("spd" if op == "cholesky" else "general", dtype, n, batch)
    if peer == "torch":
        torch = _torch()
        x = torch.from_numpy(host).cuda()
        call = _torch_synchronized(torch.linalg.cholesky if op == "cholesky" else torch.linalg.lu_factor)
    else:
        x = cupy.asarray(host)
        if peer == "hetlapack":
            call = _synchronized(functools.partial(la.cholesky, lower=True) if op == "cholesky" else la.lu_factor)
        elif peer == "cupy":
            if op != "cholesky":
                pytest.skip("CuPy has no batched LU")
            call = _synchronized(cupy.linalg.cholesky)
        else:
            engines = _batched_engines(op)
            name = "kernel" if peer == "kernel" else next(k for k in engines if k != "kernel")
            from hetlapack.batched import cuda_kernels  # noqa: PLC0415
            if peer == "kernel" and n > (16 if op == "cholesky" else 32) and (
                    op == "cholesky" or not cuda_kernels.lu_kernel_fits(n, n, np.dtype(dtype))):
                pytest.skip("past the sizes seed 004 designed the kernels for")
            call = _synchronized(engines[name])
    benchmark.group = f"gpu {op} {np.dtype(dtype).name} n={n} B={batch}"
    benchmark.extra_info["peer"] = peer
    benchmark.pedantic(call, args=(x,), rounds=7, iterations=1, warmup_rounds=2)
    benchmark.extra_info["ns_per_matrix"] = benchmark.stats.stats.median / batch * 1e9


def _single_calls(op: str):
    """For one CuPy matrix: hetlapack (gpu path), CuPy's own and torch's factorization."""
    import cupyx.scipy.linalg as cla  # noqa: PLC0415

    torch = _torch()
    if op == "cholesky":
        return {"hetlapack": lambda a: la.cholesky(a, lower=True), "cupy": cupy.linalg.cholesky,
                "torch": torch.linalg.cholesky}
    return {"hetlapack": la.lu_factor, "cupy": cla.lu_factor, "torch": torch.linalg.lu_factor}


@pytest.mark.parametrize("peer", ["hetlapack", "cupy", "torch"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["cholesky", "lu_factor"])
def test_single_cupy_matrix(benchmark, op, n, peer):
    """One float64 matrix already on the GPU."""
    host = spd(n) if op == "cholesky" else general(n)
    calls = _single_calls(op)
    if peer == "torch":
        torch = _torch()
        x = torch.from_numpy(host).cuda()
        call = _torch_synchronized(calls[peer])
    else:
        x = cupy.asarray(host)
        call = _synchronized(calls[peer])
    benchmark.group = f"gpu single {op} n={n}"
    benchmark.extra_info["peer"] = peer
    benchmark.pedantic(call, args=(x,), rounds=5, iterations=1, warmup_rounds=1)


def _host_call(op: str):
    if op == "cholesky":
        return lambda f, a: f.cholesky(a, lower=True)
    if op == "lu_factor":
        return lambda f, a: f.lu_factor(a)
    return lambda f, a: f.qr(a, mode="r")


@pytest.mark.parametrize("peer", ["scipy", "dispatch", "hybrid", "gpu", "torch"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["cholesky", "lu_factor", "qr"])
def test_host_matrix(benchmark, op, n, peer):
    """One float64 NumPy matrix in host memory, result in host memory (transfers counted)."""
    host = np.asfortranarray(spd(n) if op == "cholesky" else general(n))
    factor = _host_call(op)
    if peer == "scipy":
        call = functools.partial(factor, sla)
    elif peer == "torch":
        torch = _torch()
        name = {"cholesky": "cholesky", "lu_factor": "lu_factor", "qr": "qr"}[op]
        kwargs = {"mode": "r"} if op == "qr" else {}

        def call(a):
            out = getattr(torch.linalg, name)(torch.from_numpy(a).cuda(), **kwargs)
            return [t.cpu().numpy() for t in (out if isinstance(out, tuple) else (out,))]
    else:
        def call(a):
            if peer == "dispatch":
                return factor(la, a)
            devices = ["cpu", "cuda:0"] if peer == "hybrid" else None
            with hetlapack.using(path=peer, devices=devices):
                return factor(la, a)
    benchmark.group = f"gpu host {op} n={n}"
    benchmark.extra_info["peer"] = peer
    if peer == "dispatch":
        benchmark.extra_info["path"] = hetlapack.explain(op, host, mode="r").path
    benchmark.pedantic(call, args=(host,), rounds=3, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("peer", ["hetlapack", "cupy contiguous"])
@pytest.mark.parametrize("direction", ["upload", "download"])
@pytest.mark.parametrize("tile", [256, 512])
def test_tile_transfers(benchmark, tile, direction, peer):
    """One float64 tile crossing the link: into or out of a view of a device matrix (leading dimension > rows), or,
    for the peer, CuPy's copy of a contiguous tile of the same size."""
    from hetlapack.devices import resolve  # noqa: PLC0415

    device = resolve(["cuda:0"])[0]
    host = np.asfortranarray(general(tile))
    view = device.empty((4 * tile, 4 * tile), np.float64)[32:32 + tile, tile:2 * tile]
    contiguous = cupy.asarray(host)
    calls = {("hetlapack", "upload"): lambda: device.upload(host, view),
             ("hetlapack", "download"): lambda: device.to_host(view, host),
             ("cupy contiguous", "upload"): lambda: cupy.asarray(host),
             ("cupy contiguous", "download"): lambda: cupy.asnumpy(contiguous, out=host)}
    benchmark.group = f"gpu tile {direction} t={tile}"
    benchmark.extra_info["peer"] = peer
    benchmark.pedantic(_synchronized(calls[peer, direction]), rounds=50, iterations=1, warmup_rounds=2)
