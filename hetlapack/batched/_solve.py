"""Compiled batched solves from LU and Cholesky factors, one matrix at a time, for orders above the few where the
interleaved kernels (``_lu.getrs_stack``, ``_cholesky.potrs_stack``) are faster.

A solve reads each factor once and does two flops per element read, so gathering a factor into the interleaved
chunk layout costs as much as the solve itself. Above order 8 to 24 (by dtype: ``kernels.INTERLEAVED_SOLVE_ORDERS``)
solving each matrix where it lies is faster.
Each triangular solve walks the factor along its contiguous axis: by columns (``x[i] -= t[i, k] x[k]`` for every
``i`` below or above ``k``) when its columns are contiguous, by rows otherwise. Either way every unknown takes its
updates in the order the other unknowns were solved (reference BLAS ``trsv``'s order).
"""

from __future__ import annotations

import numba
import numpy as np

from ._interleave import JIT_OPTIONS, chunk_range, divide

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
def _load(b, m, x, nonfinite, thread):
    """Copy ``b[m]`` (``n x nrhs``) into ``x`` (``nrhs x n``: one row per right-hand side); flag the thread in
    ``nonfinite`` (when not empty) for an infinity or NaN."""
    bad = False
    for i in range(b.shape[1]):
        for r in range(b.shape[2]):
            value = b[m, i, r]
            x[r, i] = value
            bad |= (value - value) != 0
    if bad and nonfinite.size:
        nonfinite[thread] = 1


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


@numba.njit(parallel=True, **JIT_OPTIONS)
def getrs_each(lu, piv, b, trans, out, nonfinite, threads):
    """Solve ``op(A) X = B`` for each matrix from its packed LU and 0-based pivots, as LAPACK's getrs (``op`` is
    ``A``, ``A^T``, ``A^H`` for ``trans`` 0, 1, 2); ``out`` is (batch, n, nrhs). Given a ``nonfinite`` flag per
    thread (else an empty array), a thread that meets an infinity or NaN in ``b`` sets its own (SciPy's
    ``lu_solve`` checks ``b`` only)."""
    batch, n, nrhs = b.shape
    conjugate = trans == 2
    for thread in numba.prange(threads):
        start, stop = chunk_range(thread, threads, batch)
        x = np.empty((nrhs, n), dtype=out.dtype)
        for m in range(start, stop):
            _load(b, m, x, nonfinite, thread)
            for r in range(nrhs):
                if trans == 0:
                    _swap_rows(x[r], piv, m, False)
                    _triangular(lu[m], x[r], False, True, False)
                    _triangular(lu[m], x[r], True, False, False)
                else:
                    _triangular(lu[m].T, x[r], False, False, conjugate)
                    _triangular(lu[m].T, x[r], True, True, conjugate)
                    _swap_rows(x[r], piv, m, True)
            _store(x, out, m)


@numba.njit(parallel=True, **JIT_OPTIONS)
def potrs_each(c, lower, b, out, threads):
    """Solve ``A X = B`` for each matrix, ``A = L L^H`` (``lower``) or ``U^H U``, as LAPACK's potrs; ``out`` is
    (batch, n, nrhs)."""
    batch, n, nrhs = b.shape
    no_check = np.zeros(0, dtype=np.uint8)
    for thread in numba.prange(threads):
        start, stop = chunk_range(thread, threads, batch)
        x = np.empty((nrhs, n), dtype=out.dtype)
        for m in range(start, stop):
            _load(b, m, x, no_check, thread)
            for r in range(nrhs):
                if lower:
                    _triangular(c[m], x[r], False, False, False)
                    _triangular(c[m].T, x[r], True, False, True)
                else:
                    _triangular(c[m].T, x[r], False, False, True)
                    _triangular(c[m], x[r], True, False, False)
            _store(x, out, m)
