"""The GPU batched path: stacks ``(..., m, n)`` factorized and solved where they live, on the GPU.

Entry points with the contract of :mod:`hetlapack.batched.kernels` (LAPACK's per-matrix results, pivots and ``info``
codes; inputs untouched), in the input's array type: CuPy stacks on their GPU, or NumPy stacks under Numba's CUDA
simulator, which is how CI runs the custom kernels' share of this path. Per operation and size the work goes to

- seed 004's numba-cuda kernels (:mod:`.cuda_kernels`, :mod:`.cuda_solve`) within the sizes its designs target
  (``KERNEL_MAX_N``), and
- the vendor baseline above them, through CuPy: cuSOLVER ``potrfBatched``, cuBLAS ``getrfBatched``, whose ``info``
  arrays are returned to the caller like the kernels' (CuPy's own wrappers ignore them).

The split follows the seed's measurements on its GPUs; none was measured on a GPU in this project.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..devices.cuda import FILL_LOWER, FILL_UPPER, PREFIX
from . import cuda_kernels
from .cuda_kernels import array_module
from .cuda_solve import getrs, potrs
from .kernels import INDEX_DTYPE

__all__ = ["KERNEL_MAX_N", "getrf", "getrs", "potrf", "potrs"]

#: Largest matrix order the numba-cuda factorization kernels take before the vendor's batched routine does: seed
#: 004's ranges (interleaved one-thread-per-matrix Cholesky up to 16 in double precision, shared-memory LU up to 32).
KERNEL_MAX_N = {"potrf": 16, "getrf": 32}


def _libraries():
    """CuPy and its cuSOLVER and cuBLAS bindings (only reached with CuPy arrays, so CuPy is already imported)."""
    import cupy  # noqa: PLC0415 - optional dependency
    from cupy_backends.cuda.libs import cublas, cusolver  # noqa: PLC0415

    return cupy, cusolver, cublas


def _column_major_stack(cupy, stack):
    """A private copy of ``stack`` whose every matrix is column-major (as cuSOLVER reads it), and the pointer array
    of its matrices that the batched routines take."""
    work = cupy.array(cupy.swapaxes(stack, -1, -2), order="C")
    step = work.shape[-1] * work.shape[-2] * work.itemsize
    start = work.data.ptr
    pointers = cupy.arange(start, start + step * work.shape[0], step, dtype=cupy.uintp)
    return work, pointers


def _potrf_library(a, lower: bool, clean: bool):
    """cuSOLVER ``potrfBatched``; it uses the other triangle as workspace, so that triangle is restored after."""
    cupy, cusolver, _ = _libraries()
    n = a.shape[-1]
    stack = a.reshape((math.prod(a.shape[:-2]), n, n))
    work, pointers = _column_major_stack(cupy, stack)
    info = cupy.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    routine = getattr(cusolver, PREFIX[a.dtype.char] + "potrfBatched")
    uplo = FILL_LOWER if lower else FILL_UPPER
    routine(cupy.cuda.device.get_cusolver_handle(), uplo, n, pointers.data.ptr, n, info.data.ptr, stack.shape[0])
    keep = cuda_kernels.factor_triangle(cupy, cupy.swapaxes(work, -1, -2), stack, lower=lower, clean=clean)
    return keep.reshape(a.shape), info.reshape(a.shape[:-2])


def _getrf_library(a):
    """cuBLAS ``getrfBatched`` (square matrices); its 1-based pivots become LAPACK's 0-based ones."""
    cupy, _, cublas = _libraries()
    n = a.shape[-1]
    stack = a.reshape((math.prod(a.shape[:-2]), n, n))
    work, pointers = _column_major_stack(cupy, stack)
    piv = cupy.empty((stack.shape[0], n), dtype=INDEX_DTYPE)
    info = cupy.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    routine = getattr(cublas, PREFIX[a.dtype.char] + "getrfBatched")
    routine(cupy.cuda.device.get_cublas_handle(), n, pointers.data.ptr, n, piv.data.ptr, info.data.ptr,
            stack.shape[0])
    lu = cupy.swapaxes(work, -1, -2).reshape(a.shape)
    return lu, (piv - 1).reshape((*a.shape[:-2], n)), info.reshape(a.shape[:-2])


def _library_available(a, op: str) -> bool:
    """Whether the vendor routine runs this stack: CuPy arrays on a real GPU (not the simulator), non-empty, past the
    kernels' sizes."""
    on_gpu = array_module(a) is not np and not numba.config.ENABLE_CUDASIM
    return on_gpu and a.size > 0 and max(a.shape[-2:]) > KERNEL_MAX_N[op]


def potrf(a, *, lower: bool, clean: bool):
    """Cholesky factors and LAPACK ``info`` per matrix of a stack ``(..., n, n)``; see
    :func:`hetlapack.batched.kernels.potrf`."""
    if _library_available(a, "potrf"):
        return _potrf_library(a, lower, clean)
    return cuda_kernels.potrf(a, lower=lower, clean=clean)


def getrf(a):
    """LU with partial pivoting per matrix of a stack ``(..., m, n)``: ``lu``, 0-based pivots, ``info``; see
    :func:`hetlapack.batched.kernels.getrf`.

    Raises ``ValueError`` for matrices the kernel cannot hold in one thread block when cuBLAS cannot take them
    either (its batched LU takes square matrices only, and only on a GPU).
    """
    m, n = a.shape[-2:]
    if m == n and _library_available(a, "getrf"):
        return _getrf_library(a)
    if not cuda_kernels.lu_kernel_fits(m, n, a.dtype):
        raise ValueError(f"batched LU of {m}x{n} {a.dtype} matrices on the GPU: the kernel needs each matrix in one "
                         f"thread block ({cuda_kernels.LU_SHARED_BYTES} bytes of shared memory, at most "
                         f"{cuda_kernels.LU_MAX_ROWS} rows), and cuBLAS's getrfBatched takes square matrices only")
    return cuda_kernels.getrf(a)
