"""Compiled batched solves from LU and Cholesky factors, one matrix at a time, for orders above the few where the
interleaved kernels (``_lu_solve.getrs_stack``, ``_cholesky.potrs_stack``) are faster.

A solve reads each factor once and does two flops per element read, so gathering a factor into the interleaved
chunk layout costs as much as the solve itself. Above an order that depends on the machine and dtype (8 to 48
where timed; ``perf.model.interleaved_solve_max_n``) solving each matrix where it lies is faster.
Each triangular solve walks the factor along its contiguous axis: by columns (``x[i] -= t[i, k] x[k]`` for every
``i`` below or above ``k``) when its columns are contiguous, by rows otherwise. Either way every unknown takes its
updates in the order the other unknowns were solved (reference BLAS ``trsv``'s order).
"""

from __future__ import annotations

import numba
import numpy as np

from ._interleave import JIT_OPTIONS, chunk_range, copy_checked, divide, flag_nonfinite

#: The kernels' options without FMA contraction, which the compiler applies to one walk and not to the other: without
#: it, a real solution does not depend on the factor's memory layout. (Complex ones still differ in the last bits
#: between the walks, for a reason in the compiler that was not found.)
JIT_OPTIONS = {**JIT_OPTIONS, "fastmath": False}


@numba.njit(**JIT_OPTIONS)
def _entry(t, i, k, conjugate):
    """``t[i, k]``, conjugated if ``conjugate``."""
    return np.conj(t[i, k]) if conjugate else t[i, k]


@numba.njit(**JIT_OPTIONS)
def _solve_unknown(t, x, j, unit, conjugate):
    """Divide ``x[j]``, updated by every unknown it depends on, by the diagonal (unless ``unit``); return it."""
    if not unit:
        x[j] = divide(x[j], _entry(t, j, j, conjugate))
    return x[j]


@numba.njit(**JIT_OPTIONS)
def _position(q, n, backward):
    """The unknown solved ``q``-th: forward from the first, or backward from the last."""
    return n - 1 - q if backward else q


@numba.njit(**JIT_OPTIONS)
def _by_columns(t, x, backward, unit, conjugate):
    """:func:`_triangular` for a ``t`` with contiguous columns: solve each unknown, then update the ones not yet
    solved by it."""
    n = x.shape[0]
    for q in range(n):
        j = _position(q, n, backward)
        solved = _solve_unknown(t, x, j, unit, conjugate)
        for later in range(q + 1, n):
            i = _position(later, n, backward)
            x[i] -= _entry(t, i, j, conjugate) * solved


@numba.njit(**JIT_OPTIONS)
def _by_rows(t, x, backward, unit, conjugate):
    """:func:`_triangular` for a ``t`` with contiguous rows: update each unknown by the ones already solved, in the
    order they were solved, then solve it."""
    n = x.shape[0]
    for p in range(n):
        j = _position(p, n, backward)
        value = x[j]
        for q in range(p):
            k = _position(q, n, backward)
            value -= _entry(t, j, k, conjugate) * x[k]
        x[j] = value
        _solve_unknown(t, x, j, unit, conjugate)


@numba.njit(**JIT_OPTIONS)
def _triangular(t, x, backward, unit, conjugate):
    """Overwrite the vector ``x`` with ``T^-1 x`` for the triangle of ``t`` (``n x n``, any strides) below the
    diagonal (above it if ``backward``), its diagonal taken as ones if ``unit``, its entries conjugated if
    ``conjugate``; walked along whichever axis of ``t`` is contiguous."""
    if abs(t.strides[0]) <= abs(t.strides[1]):
        _by_columns(t, x, backward, unit, conjugate)
    else:
        _by_rows(t, x, backward, unit, conjugate)


@numba.njit(**JIT_OPTIONS)
def _store(x, out, m):
    for i in range(out.shape[1]):
        for r in range(out.shape[2]):
            out[m, i, r] = x[r, i]


@numba.njit(**JIT_OPTIONS)
def _swap_rows(x, piv, m, backward):
    """Apply LAPACK's row interchanges ``piv[m]`` (0-based) to the vector ``x``: in order, or undone in reverse."""
    n = x.shape[0]
    first, last, direction = (n - 1, -1, -1) if backward else (0, n, 1)
    for i in range(first, last, direction):
        row = piv[m, i]
        x[i], x[row] = x[row], x[i]


#: The systems :func:`solve_each` solves, by code: ``op(A) X = B`` from an LU factorization, with ``op`` by LAPACK's
#: ``trans`` (0, 1, 2: ``A``, ``A^T``, ``A^H``), and ``A X = B`` from a lower or upper Cholesky factor.
LU, LU_TRANSPOSED, LU_CONJUGATE_TRANSPOSED, CHOLESKY_LOWER, CHOLESKY_UPPER = range(5)


@numba.njit(**JIT_OPTIONS)
def _solve_matrix(t, piv, m, x, system):
    """Overwrite the vector ``x`` with the solution of ``system`` for matrix ``m``'s factor ``t`` (and pivots
    ``piv[m]``, 0-based, for LU), as LAPACK's getrs and potrs."""
    if system == LU:
        _swap_rows(x, piv, m, False)
        _triangular(t, x, False, True, False)
        _triangular(t, x, True, False, False)
    elif system == CHOLESKY_LOWER:
        _triangular(t, x, False, False, False)
        _triangular(t.T, x, True, False, True)
    elif system == CHOLESKY_UPPER:
        _triangular(t.T, x, False, False, True)
        _triangular(t, x, True, False, False)
    else:
        conjugate = system == LU_CONJUGATE_TRANSPOSED
        _triangular(t.T, x, False, False, conjugate)
        _triangular(t.T, x, True, True, conjugate)
        _swap_rows(x, piv, m, True)


@numba.njit(**JIT_OPTIONS)
def solve_each(factor, piv, b, system, out, nonfinite, thread, threads):
    """Solve ``system`` for each matrix of the stack from its factor (and 0-based pivots for LU; Cholesky ignores
    ``piv``); ``out`` is (batch, n, nrhs). Given a ``nonfinite`` flag per thread (else an empty array), a thread that
    meets an infinity or NaN in ``b`` sets its own and leaves that system unsolved."""
    batch, n, nrhs = b.shape
    start, stop = chunk_range(thread, threads, batch)
    x = np.empty((nrhs, n), dtype=out.dtype)  # one row per right-hand side
    for m in range(start, stop):
        if not copy_checked(b, m, x.T) and flag_nonfinite(nonfinite, thread):
            continue
        for r in range(nrhs):
            _solve_matrix(factor[m], piv, m, x[r], system)
        _store(x, out, m)
