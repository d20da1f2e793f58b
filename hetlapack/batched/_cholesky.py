"""Compiled batched Cholesky factorization and solve over the interleaved chunk layout.

The factorization is LAPACK ``potf2``'s left-looking column order (seed 004 §4.3: the left-looking variant moves
the least data): column ``j`` receives the updates of columns ``0..j-1``, then its diagonal is square-rooted and the
column below is scaled by the reciprocal. Both triangles are computed in lower form: the upper factor is the
conjugate transpose of the lower factor of ``A^H``, so ``lower=False`` only changes how the chunk is read and
written.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._interleave import (JIT_OPTIONS, LOWER, SMALL_ORDER_LANES, all_finite, blocked, buffer_as_stack,
                          chunk_as_buffer, chunk_range, copy_blocks_along, divide, gather, is_finite,
                          rows_along_memory, scatter)


@numba.njit(**JIT_OPTIONS)
def gather_hermitian(a, first, lower, buf, n, lanes, check):
    """Load the ``lower`` (else upper, conjugate-transposed) triangle of each matrix into lower form in the
    ``n x n x lanes`` buffer (sizes as arguments, as for :func:`~._interleave.gather`); return the number of real
    lanes and, if ``check``, whether the matrices hold only finite numbers in both triangles (SciPy checks both,
    the factorization reads one), else ``True``.

    Full chunks in a buffer beyond the L1 cache are copied in blocks along memory, as :func:`~._interleave.gather`
    copies them (the lower triangle of the matrices as they are, or conjugate-transposed), and checked from ``a``
    right after, whose long rows vectorize while their cache lines are still held. Chunks copied element by element
    are copied whole when checked, the other triangle mirrored above the one factored (nothing else reads it), and
    checked in the buffer by one SIMD loop over the lanes: there a check of ``a``'s short rows cost more than the
    factorization (float64, order 8, kernel alone: 51-74 ns a matrix checked that way, 29-51 checked in the buffer,
    23-43 unchecked), while a blocked copy of the other triangle costs more than the check of ``a`` (order 32:
    1,819 ns a matrix against 1,306)."""
    count = min(lanes, a.shape[0] - first)
    if blocked(a, count, n, n, lanes, triangle=True):
        source = a if lower else a.transpose(0, 2, 1)
        copy_blocks_along(source[first:first + lanes], buf, n, n, lanes, rows_along_memory(source), LOWER, not lower)
        return count, not check or _matrices_finite(a, first, count, n)
    for lane in range(count):
        for i in range(n):
            for j in range(n if check else i + 1):
                buf[i, j, lane] = a[first + lane, i, j] if lower else np.conj(a[first + lane, j, i])
    for lane in range(count, lanes):
        for i in range(n):
            for j in range(n if check else i + 1):
                buf[i, j, lane] = 1.0 if i == j else 0.0
    return count, not check or all_finite(buf, count, n, n)


@numba.njit(**JIT_OPTIONS)
def _matrices_finite(a, first, count, n):
    """Whether the ``count`` matrices from ``a[first]`` hold only finite numbers. One plain loop nest, the same in
    every per-order version of the kernel (their compile time grows with each loop they inline)."""
    finite = True
    for lane in range(count):
        for i in range(n):
            for j in range(n):
                finite &= is_finite(a[first + lane, i, j])
    return finite


@numba.njit(**JIT_OPTIONS)
def _factor_chunk(buf, info, recip, n, lanes):
    """Lower Cholesky of the interleaved matrices in the ``n x n x lanes`` buffer; ``info[lane]`` as LAPACK's potrf.

    Column ``j`` takes the updates of two earlier columns per pass (one load and store of column ``j`` per two
    multiply-adds instead of per one); the subtractions keep potf2's order, so the results are unchanged.
    """
    for lane in range(lanes):
        info[lane] = 0
    for j in range(n):
        for k in range(0, j - 1, 2):
            for i in range(j, n):
                for lane in range(lanes):
                    buf[i, j, lane] = ((buf[i, j, lane] - buf[i, k, lane] * np.conj(buf[j, k, lane]))
                                       - buf[i, k + 1, lane] * np.conj(buf[j, k + 1, lane]))
        if j % 2:
            for i in range(j, n):
                for lane in range(lanes):
                    buf[i, j, lane] -= buf[i, j - 1, lane] * np.conj(buf[j, j - 1, lane])
        for lane in range(lanes):
            diagonal = buf[j, j, lane].real
            if diagonal <= 0.0 and info[lane] == 0:  # OpenBLAS's potf2 test (SciPy's): a NaN runs through
                info[lane] = j + 1
            root = 1.0 if diagonal <= 0.0 else math.sqrt(diagonal)
            buf[j, j, lane] = root
            recip[lane] = 1.0 / root
        for i in range(j + 1, n):
            for lane in range(lanes):
                buf[i, j, lane] *= recip[lane]


#: Largest order whose clean factors are scattered as whole rows (see :func:`scatter_triangle`). Measured (1
#: thread, 32 lanes, in cache, ns per matrix, lower / upper factor): n = 8, Fortran-ordered output 95 -> 59 /
#: 107 -> 43, C-ordered 87 -> 40 / 71 -> 66; at n = 16 and 32 whole rows were slower (up to 2.3x).
FULL_ROW_SCATTER_N = 8


@numba.njit(**JIT_OPTIONS)
def scatter_triangle(buf, count, a, lower, clean, out, first, n):
    """Write each lane's factor into ``out[first + lane]``: the ``lower`` (else upper, conjugate-transposed)
    triangle from ``buf``, the other triangle zero if ``clean`` else copied from ``a``.

    The triangles are separate loops, not one loop with a per-element branch, so each row is a plain copy; full
    chunks of large matrices write the factor's in blocks, as :func:`gather_hermitian` reads it. Up to
    ``FULL_ROW_SCATTER_N``, a clean factor is written as whole rows instead, zero chosen over the buffer's upper
    triangle: rows of constant length beat two short loops per row there.
    """
    if clean and n <= FULL_ROW_SCATTER_N:
        for lane in range(count):
            m = first + lane
            for i in range(n):
                for j in range(n):
                    factor = buf[i, j, lane] if lower else np.conj(buf[j, i, lane])
                    out[m, i, j] = factor if (j <= i if lower else j >= i) else 0.0
        return
    lanes = buf.shape[2]
    in_blocks = blocked(out, count, n, n, lanes, triangle=True)
    if in_blocks:  # the lower triangle of out's matrices as they are, or conjugate-transposed
        target = out if lower else out.transpose(0, 2, 1)
        copy_blocks_along(buffer_as_stack(buf), chunk_as_buffer(target, first, lanes), n, n, lanes,
                          rows_along_memory(target), LOWER, not lower)
    for lane in range(count):
        m = first + lane
        for i in range(n):
            start, stop = (0, i + 1) if lower else (i, n)
            if not in_blocks:
                for j in range(start, stop):
                    out[m, i, j] = buf[i, j, lane] if lower else np.conj(buf[j, i, lane])
            for j in range(0, start):
                out[m, i, j] = 0.0 if clean else a[m, i, j]
            for j in range(stop, n):
                out[m, i, j] = 0.0 if clean else a[m, i, j]


@numba.njit(**JIT_OPTIONS)
def _potrf_chunks(a, lower, clean, out, info, nonfinite, thread, start, stop, n, lanes):
    """Factorize chunks ``start:stop`` of the stack in ``n x n x lanes`` buffers (one thread's share); where
    ``nonfinite`` holds a flag per thread, check each chunk's input as it is gathered and set ``thread``'s flag on
    an infinity or NaN."""
    buf = np.empty((n, n, lanes), dtype=out.dtype)
    chunk_info = np.empty(lanes, dtype=np.int64)
    recip = np.empty(lanes, dtype=out.real.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count, finite = gather_hermitian(a, first, lower, buf, n, lanes, nonfinite.size > 0)
        if not finite:
            nonfinite[thread] = 1
        _factor_chunk(buf, chunk_info, recip, n, lanes)
        for lane in range(count):
            info[first + lane] = chunk_info[lane]
        scatter_triangle(buf, count, a, lower, clean, out, first, n)


@numba.njit(parallel=True, **JIT_OPTIONS)
def potrf_stack(a, lower, clean, out, info, nonfinite, lanes, threads):
    """Factorize every matrix of the 3-D stack ``a`` into ``out`` (C- or Fortran-ordered matrices); ``info`` per
    matrix; ``nonfinite`` as for ``_lu.getrf_stack`` (both triangles are checked, as SciPy checks them). Orders up
    to ``SMALL_ORDER`` in buffers of ``SMALL_ORDER_LANES`` run versions compiled for them."""
    batch, n = a.shape[0], a.shape[1]
    chunks = (batch + lanes - 1) // lanes
    small = lanes == SMALL_ORDER_LANES
    for thread in numba.prange(threads):
        start, stop = chunk_range(thread, threads, chunks)
        if small and n == 2:
            _potrf_chunks(a, lower, clean, out, info, nonfinite, thread, start, stop, 2, SMALL_ORDER_LANES)
        elif small and n == 3:
            _potrf_chunks(a, lower, clean, out, info, nonfinite, thread, start, stop, 3, SMALL_ORDER_LANES)
        elif small and n == 4:
            _potrf_chunks(a, lower, clean, out, info, nonfinite, thread, start, stop, 4, SMALL_ORDER_LANES)
        else:
            _potrf_chunks(a, lower, clean, out, info, nonfinite, thread, start, stop, n, lanes)


@numba.njit(parallel=True, **JIT_OPTIONS)
def potrs_stack(c, lower, b, out, lanes, threads):
    """Solve ``A X = B`` for each matrix, ``A = L L^H`` (``lower``) or ``U^H U``; ``out`` is (batch, n, k)."""
    batch, n, nrhs = b.shape[0], b.shape[1], b.shape[2]
    chunks = (batch + lanes - 1) // lanes
    for thread in numba.prange(threads):
        start, stop = chunk_range(thread, threads, chunks)
        factor = np.empty((n, n, lanes), dtype=out.dtype)
        rhs = np.empty((n, nrhs, lanes), dtype=out.dtype)
        for chunk in range(start, stop):
            first = chunk * lanes
            count, _ = gather_hermitian(c, first, lower, factor, n, lanes, False)
            gather(b, first, rhs, n, nrhs, lanes)
            for r in range(nrhs):
                for i in range(n):
                    for k in range(i):
                        for lane in range(lanes):
                            rhs[i, r, lane] -= factor[i, k, lane] * rhs[k, r, lane]
                    for lane in range(lanes):
                        rhs[i, r, lane] = divide(rhs[i, r, lane], factor[i, i, lane])
                for i in range(n - 1, -1, -1):
                    for k in range(i + 1, n):
                        for lane in range(lanes):
                            rhs[i, r, lane] -= np.conj(factor[k, i, lane]) * rhs[k, r, lane]
                    for lane in range(lanes):
                        rhs[i, r, lane] = divide(rhs[i, r, lane], np.conj(factor[i, i, lane]))
            scatter(rhs, count, out, first, n, nrhs)
