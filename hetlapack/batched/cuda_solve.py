"""numba-cuda batched solves with Cholesky and LU factors: one GPU thread per right-hand-side column of a matrix.

Each thread applies the row interchanges (LU) and the two triangular solves to its column in place, reading the
factor from global memory; the threads of a warp are the columns of one matrix, then the next matrices, so the
factor is read by neighbouring threads together. Only the factor's own triangle is read (``cho_factor`` leaves the
input in the other one). Summation follows LAPACK's TRSM order. Runs on CuPy arrays (zero copy) and, under
Numba's CUDA simulator, on NumPy arrays. The factor is read where it lies, broadcast over the right-hand sides
with a zero stride where it is (on an H100, ``docs/batched.md``: one factor over 100,000 vectors, 29 MB and
1.2 ms where a copy per vector took 861 MB and 2.1 ms).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..devices.cuda_launch import THREADS_PER_BLOCK, array_module, launch
from .compiling import INDEX_DTYPE

#: ``op`` codes of the triangular solves: ``T``, ``T^T``, ``T^H`` (``lu_solve``'s ``trans``).
NO_TRANSPOSE, TRANSPOSE, CONJUGATE_TRANSPOSE = 0, 1, 2


@cuda.jit(device=True)
def _element(t, matrix, i, k, op):
    """``op(T)[i, k]`` of matrix ``matrix`` of the stack ``t``."""
    if op == NO_TRANSPOSE:
        return t[matrix, i, k]
    if op == CONJUGATE_TRANSPOSE:
        return t[matrix, k, i].conjugate()
    return t[matrix, k, i]


@cuda.jit(device=True)
def _triangular_solve(t, matrix, x, column, lower, op, unit):
    """``x[matrix, :, column] <- op(T)^{-1} x[matrix, :, column]``, ``T`` the lower (else upper) triangle of
    ``t[matrix]``, with a unit diagonal when ``unit``."""
    n = x.shape[1]
    forward = lower == (op == NO_TRANSPOSE)
    for step in range(n):
        i = step if forward else n - 1 - step
        total = x[matrix, i, column]
        for done in range(step):
            k = done if forward else n - 1 - done
            total -= _element(t, matrix, i, k, op) * x[matrix, k, column]
        x[matrix, i, column] = total if unit else total / _element(t, matrix, i, i, op)


@cuda.jit(device=True)
def _swap_rows(x, matrix, column, i, k):
    held = x[matrix, i, column]
    x[matrix, i, column] = x[matrix, k, column]
    x[matrix, k, column] = held


@cuda.jit
def _potrs_columns(c, lower, x):
    """Solve ``A X = B`` in place in ``x`` with ``A = L L^H`` (``lower``) or ``U^H U``; thread = (matrix, column)."""
    thread = cuda.grid(1)
    nrhs = x.shape[2]
    if thread < x.shape[0] * nrhs:
        matrix, column = thread // nrhs, thread % nrhs
        # L Y = B, L^H X = Y   or   U^H Y = B, U X = Y
        _triangular_solve(c, matrix, x, column, lower, NO_TRANSPOSE if lower else CONJUGATE_TRANSPOSE, False)
        _triangular_solve(c, matrix, x, column, lower, CONJUGATE_TRANSPOSE if lower else NO_TRANSPOSE, False)


@cuda.jit
def _getrs_columns(lu, piv, trans, x):
    """Solve ``op(A) X = B`` in place in ``x`` from ``P A = L U`` (0-based LAPACK pivots); thread = (matrix, column)."""
    thread = cuda.grid(1)
    n, nrhs = x.shape[1], x.shape[2]
    if thread < x.shape[0] * nrhs:
        matrix, column = thread // nrhs, thread % nrhs
        if trans == NO_TRANSPOSE:
            # X = U^{-1} L^{-1} P B
            for k in range(n):
                _swap_rows(x, matrix, column, k, piv[matrix, k])
            _triangular_solve(lu, matrix, x, column, True, NO_TRANSPOSE, True)
            _triangular_solve(lu, matrix, x, column, False, NO_TRANSPOSE, False)
        else:
            # X = P^T op(L)^{-1} op(U)^{-1} B
            _triangular_solve(lu, matrix, x, column, False, trans, False)
            _triangular_solve(lu, matrix, x, column, True, trans, True)
            for k in range(n - 1, -1, -1):
                _swap_rows(x, matrix, column, k, piv[matrix, k])


def _operands(factor, b, *extra):
    """Broadcast batch dimensions: the factor (and extras) as stacks the kernels only read, views wherever the batch
    flattens without a copy (a factor broadcast over many right-hand sides is not repeated per matrix), and a private
    C-ordered copy of ``b``, the output to solve in (the caller's arrays stay untouched)."""
    xp = array_module(factor)
    dtype = np.result_type(factor.dtype, b.dtype)
    batch = np.broadcast_shapes(factor.shape[:-2], b.shape[:-2], *(e.shape[:-1] for e in extra))
    n, nrhs = b.shape[-2:]
    count = math.prod(batch)

    def stacked(array, shape):
        return xp.broadcast_to(array, (*batch, *shape)).reshape((count, *shape))

    stack = stacked(factor.astype(dtype, copy=False), (n, n))
    x = xp.array(xp.broadcast_to(b.astype(dtype, copy=False), (*batch, n, nrhs)), order="C").reshape((count, n, nrhs))
    extra = tuple(stacked(e, e.shape[-1:]) for e in extra)
    return xp, batch, stack, x, extra


def _launch(kernel, xp, x, *arguments) -> None:
    threads = x.shape[0] * x.shape[2]
    if x.size:
        launch(kernel, math.ceil(threads / THREADS_PER_BLOCK), THREADS_PER_BLOCK, xp, *arguments)


def potrs(c, b, *, lower: bool):
    """Solve ``A X = B`` per matrix from the Cholesky factor ``c`` of ``A``; ``b`` is ``(..., n, k)``. Same contract
    as :func:`hetlapack.batched.kernels.potrs`, in ``c``'s array type."""
    xp, batch, stack, x, _ = _operands(c, b)
    _launch(_potrs_columns, xp, x, stack, bool(lower), x)
    return x.reshape((*batch, *b.shape[-2:]))


def getrs(lu, piv, b, *, trans: int):
    """Solve ``op(A) X = B`` per matrix from ``getrf``'s ``lu`` and 0-based ``piv`` (``op`` by ``trans`` 0, 1, 2 as
    ``scipy.linalg.lu_solve``). Same contract as :func:`hetlapack.batched.kernels.getrs`, in ``lu``'s array type."""
    if trans not in (0, 1, 2):
        raise ValueError("trans must be 0, 1 or 2")
    xp, batch, stack, x, (pivots,) = _operands(lu, b, piv.astype(INDEX_DTYPE, copy=False))
    _launch(_getrs_columns, xp, x, stack, pivots, int(trans), x)
    return x.reshape((*batch, *b.shape[-2:]))
