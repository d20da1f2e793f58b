"""numba-cuda batched Cholesky and LU for stacks of small matrices on a GPU (seed 004).

Two designs, one per factorization, each the one seed 004 finds best at the sizes it runs:

- **Cholesky, one thread per matrix** over the interleaved layout (seed 004 §4.5): the stack is stored
  batch-innermost, ``a[i, j, matrix]``, so the 32 threads of a warp read 32 consecutive matrices' same element in one
  coalesced transaction. Seed 004 finds this the best design up to 16x16 in double precision.
- **LU, one matrix per thread row of a block** (seed 004 §4.4, its shared-memory design; the register design needs
  fully unrolled per-size code): thread ``x`` of a block owns row ``x`` of a matrix held in shared memory; below 16
  rows a block holds several matrices (a 2-D block, ``threadIdx.y`` naming the matrix), so a block keeps ~128
  threads busy. Row swaps are **delayed**: rows never move in shared memory; a permutation records where each row
  will land, LAPACK's pivots are read off it, and each row is written once, to its final place, at the end (the
  block's threads read and write the matrix element by element in memory order, coalesced). The pivot search is one
  thread's scan of the column in LAPACK's current row order (first maximum of ``|re| + |im|``, as ``i?amax``), so
  pivots are LAPACK's; the rank-1 update is one row per thread. Kernels are compiled per matrix shape and dtype
  (shared-memory arrays have compile-time sizes), as MAGMA instantiates its batched kernels per size.

Every kernel takes arrays exposing ``__cuda_array_interface__`` (CuPy, zero copy) and, under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``), NumPy arrays: that is how CI checks their logic on a machine without a GPU. On an
H100 (``docs/batched.md``) neither beat the vendor's batched routine: the LU kernel runs on a GPU all the same, its
pivots being LAPACK's where cuBLAS's are not; the Cholesky kernel took 0.85-3.3x cuSOLVER's time, so a GPU runs
cuSOLVER's and this kernel runs only in the simulator, the starting point for a faster one.
"""

from __future__ import annotations

import functools
import math
from types import ModuleType

import numba
import numpy as np
from numba import cuda

from ..devices.base import zero_other_triangle
from ..devices.cuda_launch import THREADS_PER_BLOCK, array_module, launch
from ._interleave import smith_quotient
from ._lu import divides_by_pivot
from .compiling import INDEX_DTYPE

#: Shared memory of one LU block: the 48 KiB of static shared memory every CUDA GPU grants a block.
LU_SHARED_BYTES = 48 * 1024

#: Most rows the LU kernel takes (one thread per row; a block has at most 1024 threads).
LU_MAX_ROWS = 1024


@cuda.jit
def _potrf_interleaved(a, info):
    """Lower Cholesky, in place, of matrix ``cuda.grid(1)`` of the interleaved stack ``a[i, j, matrix]``."""
    matrix = cuda.grid(1)
    n, batch = a.shape[0], a.shape[2]
    if matrix >= batch:
        return
    info[matrix] = 0
    for j in range(n):
        for k in range(j):
            factor = a[j, k, matrix].conjugate()
            for i in range(j, n):
                a[i, j, matrix] -= a[i, k, matrix] * factor
        diagonal = a[j, j, matrix].real
        if diagonal <= 0.0:  # OpenBLAS's potf2 test (SciPy's): a NaN runs through
            info[matrix] = j + 1
            return
        root = math.sqrt(diagonal)
        a[j, j, matrix] = root
        for i in range(j + 1, n):
            a[i, j, matrix] /= root


def factor_triangle(xp: ModuleType, factor, stack, *, lower: bool, clean: bool):
    """Make the other triangle of the ``lower`` (else upper) factors in ``factor`` zero when ``clean``, else
    ``stack``'s (the input's, as ``cho_factor`` leaves it), in place: no new array, and ``factor``'s layout kept
    (cuSOLVER's column-major matrices are SciPy's Fortran-ordered output as they are)."""
    if clean:
        zero_other_triangle(factor, lower, xp)
        return
    n = factor.shape[-1]
    other = xp.triu(xp.ones((n, n), dtype=bool), 1) if lower else xp.tril(xp.ones((n, n), dtype=bool), -1)
    xp.copyto(factor, stack, where=other)


def potrf(a, *, lower: bool, clean: bool):
    """Cholesky factors and LAPACK ``info`` of a stack ``(..., n, n)`` on the GPU; same contract as
    :func:`hetlapack.batched.kernels.potrf` (results in ``a``'s array type, ``a`` untouched)."""
    xp = array_module(a)
    n = a.shape[-1]
    stack = a.reshape((math.prod(a.shape[:-2]), n, n))
    lower_form = stack if lower else xp.conj(xp.swapaxes(stack, -1, -2))
    interleaved = xp.ascontiguousarray(xp.moveaxis(xp.tril(lower_form), 0, -1))
    info = xp.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    if interleaved.size:
        blocks = math.ceil(stack.shape[0] / THREADS_PER_BLOCK)
        launch(_potrf_interleaved, blocks, THREADS_PER_BLOCK, xp, interleaved, info)
    factor = xp.moveaxis(interleaved, -1, 0)
    factor = factor if lower else xp.conj(xp.swapaxes(factor, -1, -2))
    factor_triangle(xp, factor, stack, lower=lower, clean=clean)
    return xp.ascontiguousarray(factor).reshape(a.shape), info.reshape(a.shape[:-2])


def _lu_shared_bytes(m: int, n: int, itemsize: int) -> int:
    """Shared memory of one matrix in the LU kernel: the matrix, its two row permutations and its pivot row."""
    return m * n * itemsize + 2 * m * INDEX_DTYPE.itemsize + INDEX_DTYPE.itemsize


def lu_matrices_per_block(m: int, n: int, itemsize: int) -> int:
    """Matrices one LU block holds: ~``THREADS_PER_BLOCK`` threads (one per row), within the shared memory."""
    return max(1, min(THREADS_PER_BLOCK // max(m, 1), LU_SHARED_BYTES // _lu_shared_bytes(m, n, itemsize)))


def lu_kernel_fits(m: int, n: int, dtype: np.dtype) -> bool:
    """Whether one ``m x n`` matrix of ``dtype`` fits one LU block (threads and shared memory)."""
    return m <= LU_MAX_ROWS and _lu_shared_bytes(m, n, np.dtype(dtype).itemsize) <= LU_SHARED_BYTES


@cuda.jit(device=True)
def _real_quotient(a, b):
    return a / b


_complex_quotient = cuda.jit(device=True)(smith_quotient)
_divides = cuda.jit(device=True)(divides_by_pivot.py_func)


@functools.cache
def _getrf_kernel(m: int, n: int, slots: int, dtype: np.dtype):
    """The LU kernel for ``m x n`` matrices of ``dtype``, ``slots`` matrices per block (compile-time sizes)."""
    scalar = numba.from_dtype(dtype)
    one = dtype.type(1)
    tiny = np.finfo(dtype).tiny
    quotient = _complex_quotient if dtype.kind == "c" else _real_quotient
    steps = min(m, n)

    @cuda.jit
    def getrf_shared(a, out, piv, info):
        row, slot = cuda.threadIdx.x, cuda.threadIdx.y
        matrix = cuda.blockIdx.x * slots + slot
        active = matrix < a.shape[0]
        work = cuda.shared.array((slots, m, n), scalar)
        position = cuda.shared.array((slots, m), numba.int32)
        row_at = cuda.shared.array((slots, m), numba.int32)
        pivot_row = cuda.shared.array(slots, numba.int32)
        if active:
            # the block's threads read the matrix together: consecutive threads, consecutive addresses
            for element in range(row, m * n, m):
                work[slot, element // n, element % n] = a[matrix, element // n, element % n]
            position[slot, row] = row
            row_at[slot, row] = row
            if row == 0:
                info[matrix] = 0
        cuda.syncthreads()
        for k in range(steps):
            if active and row == 0:
                # i?amax in the current row order: the first largest |re| + |im| at or below position k
                best_at = k
                best = abs(work[slot, row_at[slot, k], k].real) + abs(work[slot, row_at[slot, k], k].imag)
                for i in range(k + 1, m):
                    value = work[slot, row_at[slot, i], k]
                    size = abs(value.real) + abs(value.imag)
                    if size > best:
                        best, best_at = size, i
                piv[matrix, k] = best_at
                chosen, displaced = row_at[slot, best_at], row_at[slot, k]
                row_at[slot, k], row_at[slot, best_at] = chosen, displaced
                position[slot, chosen], position[slot, displaced] = k, best_at
                pivot_row[slot] = chosen
                if best == 0 and info[matrix] == 0:
                    info[matrix] = k + 1
            cuda.syncthreads()
            if active and position[slot, row] > k:
                # A[i,k] = A[i,k] / A[k,k];  A[i,k+1:] -= A[i,k] A[k,k+1:]  (as LAPACK's getf2: a zero column stays
                # unscaled, and a pivot whose reciprocal would overflow divides)
                source = pivot_row[slot]
                pivot = work[slot, source, k]
                if _divides(pivot, tiny):
                    factor = quotient(work[slot, row, k], pivot)
                elif pivot != 0:
                    factor = work[slot, row, k] * (one / pivot)
                else:
                    factor = work[slot, row, k]
                work[slot, row, k] = factor
                for j in range(k + 1, n):
                    work[slot, row, j] -= factor * work[slot, source, j]
            cuda.syncthreads()
        if active:
            # the delayed swaps: row i of the result is the row that ended at position i; the threads write a
            # column together (consecutive addresses of the Fortran-ordered result)
            for j in range(n):
                out[matrix, row, j] = work[slot, row_at[slot, row], j]

    return getrf_shared


def getrf(a):
    """LU with partial pivoting of a stack ``(..., m, n)`` on the GPU: packed ``lu`` (Fortran-ordered matrices,
    SciPy's layout), 0-based LAPACK pivots (int32) and ``info`` per matrix; same contract as
    :func:`hetlapack.batched.kernels.getrf`.

    Raises ``ValueError`` when one matrix does not fit a block (see :func:`lu_kernel_fits`).
    """
    xp = array_module(a)
    m, n = a.shape[-2:]
    if not lu_kernel_fits(m, n, a.dtype):
        raise ValueError(f"a {m}x{n} {a.dtype} matrix does not fit one LU thread block")
    stack = xp.ascontiguousarray(a.reshape((math.prod(a.shape[:-2]), m, n)))
    out = xp.swapaxes(xp.empty((stack.shape[0], n, m), dtype=a.dtype), -1, -2)
    piv = xp.empty((stack.shape[0], min(m, n)), dtype=INDEX_DTYPE)
    info = xp.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    if out.size:
        slots = lu_matrices_per_block(m, n, a.dtype.itemsize)
        kernel = _getrf_kernel(m, n, slots, np.dtype(a.dtype))
        launch(kernel, math.ceil(stack.shape[0] / slots), (m, slots), xp, stack, out, piv, info)
    return out.reshape(a.shape), piv.reshape((*a.shape[:-2], min(m, n))), info.reshape(a.shape[:-2])
