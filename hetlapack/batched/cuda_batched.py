"""The GPU batched path: stacks ``(..., m, n)`` factorized and solved where they live, on the GPU.

Entry points with the contract of :mod:`hetlapack.batched.kernels` (LAPACK's per-matrix results, pivots and ``info``
codes; inputs untouched), in the input's array type: CuPy stacks on their GPU, or NumPy stacks under Numba's CUDA
simulator, which is how CI runs the custom kernels. Measured on an H100 (``benchmarks/test_gpu.py``, 2026-11-24,
B = 10^4 and 10^5, n = 4-64), each operation runs what was fastest among the routes that keep LAPACK's contract:

- Cholesky: cuSOLVER's ``potrfBatched`` at every order, its ``info`` array returned to the caller like the kernels'
  (CuPy's own wrappers ignore it). Seed 004's one-thread-per-matrix kernel (:mod:`.cuda_kernels`), which was to beat
  it up to n = 16, took 0.8-3.3x its time.
- LU: seed 004's shared-memory kernel wherever a matrix fits one thread block, and cuSOLVER's ``getrf`` one matrix
  at a time beyond. cuBLAS's ``getrfBatched`` ran 2-3x faster than the kernel, but its pivots are not LAPACK's: after
  an exactly zero column it pivoted differently (n = 4), and in complex arithmetic it pivots on ``|z|`` where
  LAPACK pivots on ``|re| + |im|`` (n = 40); it also takes square matrices only.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..devices.cuda import FILL_LOWER, FILL_UPPER, PREFIX, solver_routines
from . import cuda_kernels
from ..devices.cuda_launch import array_module
from .cuda_solve import getrs, potrs
from .compiling import INDEX_DTYPE

__all__ = ["getrf", "getrs", "potrf", "potrs"]


def _libraries():
    """CuPy and its cuSOLVER bindings (only reached with CuPy arrays, so CuPy is already imported)."""
    import cupy  # noqa: PLC0415 - optional dependency
    from cupy_backends.cuda.libs import cusolver  # noqa: PLC0415

    return cupy, cusolver


def _column_major_stack(cupy, stack):
    """A private copy of ``stack`` whose every matrix is column-major (as cuSOLVER reads it), and the pointer array
    of its matrices that the batched routines take."""
    work = cupy.array(cupy.swapaxes(stack, -1, -2), order="C")
    step = work.shape[-1] * work.shape[-2] * work.itemsize
    start = work.data.ptr
    pointers = cupy.arange(start, start + step * work.shape[0], step, dtype=cupy.uintp)
    return work, pointers


def _potrf_library(a, lower: bool, clean: bool):
    """cuSOLVER ``potrfBatched``; it uses the other triangle as workspace, so that triangle is restored after. The
    factors are returned in the column-major copy cuSOLVER wrote (Fortran-ordered matrices, SciPy's layout)."""
    cupy, cusolver = _libraries()
    n = a.shape[-1]
    stack = a.reshape((math.prod(a.shape[:-2]), n, n))
    work, pointers = _column_major_stack(cupy, stack)
    info = cupy.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    routine = getattr(cusolver, PREFIX[a.dtype.char] + "potrfBatched")
    uplo = FILL_LOWER if lower else FILL_UPPER
    routine(cupy.cuda.device.get_cusolver_handle(), uplo, n, pointers.data.ptr, n, info.data.ptr, stack.shape[0])
    factor = cupy.swapaxes(work, -1, -2)
    cuda_kernels.factor_triangle(cupy, factor, stack, lower=lower, clean=clean)
    return factor.reshape(a.shape), info.reshape(a.shape[:-2])


def _getrf_each(a):
    """cuSOLVER ``getrf`` matrix by matrix (as the CUDA device calls it, but with one workspace for the stack and
    no wait between matrices): LAPACK's pivots for every shape and dtype."""
    cupy, cusolver = _libraries()
    m, n = a.shape[-2:]
    stack = a.reshape((math.prod(a.shape[:-2]), m, n))
    work, _ = _column_major_stack(cupy, stack)
    k = min(m, n)
    piv = cupy.empty((stack.shape[0], k), dtype=INDEX_DTYPE)
    info = cupy.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    routine, buffer_size = solver_routines(cusolver, "getrf", a.dtype.char)
    handle = cupy.cuda.device.get_cusolver_handle()
    buffer = cupy.empty(max(buffer_size(handle, m, n, work.data.ptr, m), 1), dtype=a.dtype)
    step, index_bytes = m * n * a.dtype.itemsize, np.dtype(INDEX_DTYPE).itemsize
    for i in range(stack.shape[0]):
        routine(handle, m, n, work.data.ptr + i * step, m, buffer.data.ptr, piv.data.ptr + i * k * index_bytes,
                info.data.ptr + i * index_bytes)
    lu = cupy.swapaxes(work, -1, -2).reshape(a.shape)
    return lu, (piv - 1).reshape((*a.shape[:-2], k)), info.reshape(a.shape[:-2])


def _library_available(a) -> bool:
    """Whether the vendor's routines run this stack: CuPy arrays on a real GPU (not the simulator), non-empty."""
    return array_module(a) is not np and not numba.config.ENABLE_CUDASIM and a.size > 0


def potrf(a, *, lower: bool, clean: bool):
    """Cholesky factors and LAPACK ``info`` per matrix of a stack ``(..., n, n)``; see
    :func:`hetlapack.batched.kernels.potrf`."""
    if _library_available(a):
        return _potrf_library(a, lower, clean)
    return cuda_kernels.potrf(a, lower=lower, clean=clean)


def getrf(a):
    """LU with partial pivoting per matrix of a stack ``(..., m, n)``: ``lu``, 0-based pivots, ``info``; see
    :func:`hetlapack.batched.kernels.getrf`.

    Under the simulator (no vendor library), raises ``ValueError`` for matrices the kernel cannot hold in one
    thread block.
    """
    m, n = a.shape[-2:]
    if cuda_kernels.lu_kernel_fits(m, n, a.dtype):
        return cuda_kernels.getrf(a)
    if _library_available(a):
        return _getrf_each(a)
    raise ValueError(f"batched LU of {m}x{n} {a.dtype} matrices under the CUDA simulator: the kernel needs each "
                     f"matrix in one thread block ({cuda_kernels.LU_SHARED_BYTES} bytes of shared memory, at most "
                     f"{cuda_kernels.LU_MAX_ROWS} rows), and cuSOLVER needs a GPU")
