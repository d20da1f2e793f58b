"""Batched solves ``op(A) X = B`` from packed LU factors and their 0-based pivots, over the interleaved chunk layout
(LAPACK ``getrs``'s operations, each right-hand side in turn): where the orders are small enough that gathering the
factors pays (``perf.model.interleaved_solve_max_n``; above them ``_solve`` solves each matrix where it lies).
"""

from __future__ import annotations

import numba
import numpy as np

from ._borrowed import borrowed, keep_alive
from ._interleave import JIT_OPTIONS, chunk_range, divide, flag_poisoned, gather, on_cache_lines, scatter


@numba.njit(**JIT_OPTIONS, inline="always")
def _maybe_conj(value, conjugate):
    return np.conj(value) if conjugate else value


@numba.njit(**JIT_OPTIONS)
def _solve_chunk(lu, piv, rhs, trans, count, first):
    """Overwrite ``rhs[i, r, lane]`` with the solution of ``op(A) X = B``; ``op`` by ``trans`` as LAPACK getrs."""
    n, nrhs, lanes = rhs.shape
    conjugate = trans == 2
    if trans == 0:
        for lane in range(count):
            for i in range(n):
                row = piv[first + lane, i]
                for r in range(nrhs):
                    held = rhs[i, r, lane]
                    rhs[i, r, lane] = rhs[row, r, lane]
                    rhs[row, r, lane] = held
    for r in range(nrhs):
        if trans == 0:
            for i in range(n):
                for k in range(i):
                    for lane in range(lanes):
                        rhs[i, r, lane] -= lu[i, k, lane] * rhs[k, r, lane]
            for i in range(n - 1, -1, -1):
                for k in range(i + 1, n):
                    for lane in range(lanes):
                        rhs[i, r, lane] -= lu[i, k, lane] * rhs[k, r, lane]
                for lane in range(lanes):
                    rhs[i, r, lane] = divide(rhs[i, r, lane], lu[i, i, lane])
        else:
            for i in range(n):
                for k in range(i):
                    for lane in range(lanes):
                        rhs[i, r, lane] -= _maybe_conj(lu[k, i, lane], conjugate) * rhs[k, r, lane]
                for lane in range(lanes):
                    rhs[i, r, lane] = divide(rhs[i, r, lane], _maybe_conj(lu[i, i, lane], conjugate))
            for i in range(n - 1, -1, -1):
                for k in range(i + 1, n):
                    for lane in range(lanes):
                        rhs[i, r, lane] -= _maybe_conj(lu[k, i, lane], conjugate) * rhs[k, r, lane]
    if trans != 0:
        for lane in range(count):
            for i in range(n - 1, -1, -1):
                row = piv[first + lane, i]
                for r in range(nrhs):
                    held = rhs[i, r, lane]
                    rhs[i, r, lane] = rhs[row, r, lane]
                    rhs[row, r, lane] = held


@numba.njit(**JIT_OPTIONS)
def getrs_stack(lu, piv, b, trans, out, nonfinite, lanes, thread, threads):
    """Solve ``op(A) X = B`` for each matrix from its packed LU and 0-based pivots; ``out`` is (batch, n, k).
    ``nonfinite`` as for :func:`~._lu.getrf_stack`, for ``b`` only (SciPy's ``lu_solve`` checks ``b`` only)."""
    lu, piv, b, out, nonfinite = borrowed((lu, piv, b, out, nonfinite))
    batch, n, nrhs = b.shape
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    owned = (on_cache_lines((n, n, lanes), out.dtype), on_cache_lines((n, nrhs, lanes), out.dtype),
             on_cache_lines((lanes,), out.real.dtype))
    factor, rhs, poison = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather(lu, first, factor, n, n, lanes)
        gather(b, first, rhs, n, nrhs, lanes)
        flag_poisoned(rhs, poison, count, nonfinite, thread, n, nrhs, lanes)
        _solve_chunk(factor, piv, rhs, trans, count, first)
        scatter(rhs, count, out, first, n, nrhs)
    keep_alive(owned)
