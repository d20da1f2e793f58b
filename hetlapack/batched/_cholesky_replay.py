"""OpenBLAS's Cholesky of a small single-precision matrix, replayed over the interleaved lanes: its results to the
bit, many at a time.

SciPy's ``cholesky`` and ``cho_factor`` of one single-precision matrix (upper, their default) are OpenBLAS's
``spotrf``, which for orders up to 16 runs its unblocked ``potf2_U`` (``lapack/potf2/potf2_U.c``): for each column
``j``, the diagonal less ``sdot`` of the column above it with itself (unit stride: each product rounded to single
precision, the sum in double), its square root, then the row to its right less ``sgemv_t`` of the columns to the
right against that column, times the root's reciprocal. ``sgemv_t`` (``sgemv_t_4.c``) takes the rows in blocks of
four, the columns four at a time (the Haswell kernel, in both builds: eight partial sums per column in the order the
rows come, added pairwise), then two (four partial sums, nothing fused) and one (two sets of four), and adds the last
``j % 4`` rows after every column's blocks, in C whose products the SkylakeX build fuses and the Haswell one does not.

A lower factor is ``potf2_L``: row by row, the strided ``sdot`` and the ``sgemv_n`` of :mod:`._lu_replay` (its ``x``
strided, so the Haswell kernels take the columns four at a time rather than eight).

The buffer holds each matrix's upper triangle transposed (lower form, as :mod:`._cholesky` keeps it): ``U[r, c]`` is
``buf[c, r]``. A matrix whose factorization fails (a diagonal not above zero, or NaN) is left to LAPACK
(``REDO_INFO``); :mod:`.replay` checks the replay against LAPACK before it is used, as for the LU.
"""

from __future__ import annotations

import numba
import numpy as np

from ._cholesky import gather_hermitian, scatter_triangle
from ._interleave import SMALL_ORDER_LANES, chunk_range, flag_poisoned, on_cache_lines
from ._lu import REDO_INFO
from ._lu_replay import REPLAY_JIT_OPTIONS, SKYLAKEX, matrix_vector_update, strided_dot
from ._simd import fused_multiply_add


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _take_root(buf, j, info, dot, recip, lanes):
    """``A[j, j] = sqrt(A[j, j] - dot)`` (``dot`` rounded to single precision first) and ``recip`` its reciprocal,
    ``REDO_INFO`` where the difference is not above zero."""
    for lane in range(lanes):
        diagonal = buf[j, j, lane] - np.float32(dot[lane])
        if not diagonal > 0:
            info[lane] = REDO_INFO
            diagonal = np.float32(1)
        root = np.sqrt(diagonal)
        buf[j, j, lane] = root
        recip[lane] = np.float32(1) / root


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _unit_stride_dot(buf, j, dot, lanes):
    """``dot = U[:j, j] . U[:j, j]`` as ``sdot`` sums two contiguous vectors shorter than 32: each product rounded
    to single precision, summed in double."""
    for lane in range(lanes):
        dot[lane] = 0.0
    for r in range(j):
        for lane in range(lanes):
            dot[lane] += np.float64(buf[j, r, lane] * buf[j, r, lane])


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _subtract_blocked_sum(buf, j, c, blocked, sums, lanes, fused, eight):
    """``U[j, c] -= U[:blocked, c] . U[:blocked, j]`` as an ``sgemv_t`` kernel sums it: partial sums by row, a first
    block of four rows (where ``blocked % 8``) into sums 0-3, then each eight rows into sums 0-7 (``eight``: the
    kernels of four columns and of one) or twice into 0-3 (of two columns); by fused multiply-adds (``fused``: four
    columns, AVX2) or rounded products added (SSE); then ``((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))``."""
    zero = np.float32(0)
    for k in range(8):
        for lane in range(lanes):
            sums[k, lane] = zero
    r = 0
    if blocked & 4:
        r = 4
    for row in range(blocked):
        into = row if row < r else ((row - r) % 8 if eight else (row - r) % 4)
        for lane in range(lanes):
            if fused:
                sums[into, lane] = fused_multiply_add(buf[c, row, lane], buf[j, row, lane], sums[into, lane])
            else:
                sums[into, lane] = sums[into, lane] + buf[c, row, lane] * buf[j, row, lane]
    for lane in range(lanes):
        total = ((sums[0, lane] + sums[4, lane]) + (sums[1, lane] + sums[5, lane])) + (
            (sums[2, lane] + sums[6, lane]) + (sums[3, lane] + sums[7, lane]))
        buf[c, j, lane] = buf[c, j, lane] - total


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _subtract_tail_rows(buf, j, c, blocked, lanes, kernels):
    """``U[j, c] -= U[blocked:j, c] . U[blocked:j, j]`` for the last ``j % 4`` rows, as ``sgemv_t_4.c``'s C adds
    them: the column's entries times ``-x``, summed left to right and added. The SkylakeX build fuses each product
    but the second into the sum, and a lone product into the update; the Haswell build rounds every product."""
    minus_one = np.float32(-1)
    tail = j - blocked
    for lane in range(lanes):
        y = buf[c, j, lane]
        a0, x0 = buf[c, blocked, lane], buf[j, blocked, lane] * minus_one
        if kernels == SKYLAKEX and tail == 1:
            y = fused_multiply_add(a0, x0, y)
        elif kernels == SKYLAKEX:
            total = fused_multiply_add(a0, x0, buf[c, blocked + 1, lane] * (buf[j, blocked + 1, lane] * minus_one))
            if tail == 3:
                total = fused_multiply_add(buf[c, blocked + 2, lane], buf[j, blocked + 2, lane] * minus_one, total)
            y = y + total
        else:
            total = a0 * x0
            for r in range(blocked + 1, j):
                total = total + buf[c, r, lane] * (buf[j, r, lane] * minus_one)
            y = y + total
        buf[c, j, lane] = y


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _replay_chunk(buf, info, dot, recip, sums, n, lanes, kernels):
    """OpenBLAS's ``potf2_U`` on the interleaved matrices of ``buf`` (lower form); ``info[lane]`` 0, or
    ``REDO_INFO`` where the factorization fails."""
    for lane in range(lanes):
        info[lane] = 0
    for j in range(n):
        _unit_stride_dot(buf, j, dot, lanes)
        _take_root(buf, j, info, dot, recip, lanes)
        blocked = j - j % 4
        columns = n - j - 1
        if blocked:
            for c in range(j + 1, j + 1 + columns - columns % 4):
                _subtract_blocked_sum(buf, j, c, blocked, sums, lanes, True, True)
            for c in range(j + 1 + columns - columns % 4, n):  # two columns, then one
                _subtract_blocked_sum(buf, j, c, blocked, sums, lanes, False, c == n - 1 and columns % 2 == 1)
        if j % 4:
            for c in range(j + 1, n):
                _subtract_tail_rows(buf, j, c, blocked, lanes, kernels)
        for c in range(j + 1, n):
            for lane in range(lanes):
                buf[c, j, lane] = recip[lane] * buf[c, j, lane]


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _replay_lower_chunk(buf, info, dot, recip, acc, n, lanes, kernels):
    """OpenBLAS's ``potf2_L`` on the interleaved matrices of ``buf``: for each row ``j``, the diagonal less the
    strided ``sdot`` of the row to its left with itself, its root, the column below less ``sgemv_n`` of the rows below
    against that row (a strided ``x``: the Haswell kernels take its columns four at a time), times the reciprocal."""
    for lane in range(lanes):
        info[lane] = 0
    for j in range(n):
        strided_dot(buf[j], buf[j], j, dot, lanes, kernels)
        _take_root(buf, j, info, dot, recip, lanes)
        if j:
            matrix_vector_update(buf, buf[j], j, j + 1, acc, n, lanes, kernels, 4)
        for r in range(j + 1, n):
            for lane in range(lanes):
                buf[r, j, lane] = recip[lane] * buf[r, j, lane]


@numba.njit(**REPLAY_JIT_OPTIONS)
def _replay_chunks(a, lower, clean, out, info, kernels, nonfinite, thread, start, stop, n, lanes):
    """Replay chunks ``start:stop`` of the stack in ``n x n x lanes`` buffers (one thread's share; the order as an
    argument, so that the small orders get versions compiled for them)."""
    buf = on_cache_lines((n, n, lanes), out.dtype)
    chunk_info = on_cache_lines((lanes,), np.int32)
    dot = on_cache_lines((lanes,), np.float64)
    recip = on_cache_lines((lanes,), out.dtype)
    sums = on_cache_lines((8, lanes), out.dtype)
    poison = on_cache_lines((lanes,), out.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather_hermitian(a, first, lower, buf, n, lanes, nonfinite.size > 0)
        flag_poisoned(buf, poison, count, nonfinite, thread, n, n, lanes)
        if lower:
            _replay_lower_chunk(buf, chunk_info, dot, recip, sums[0], n, lanes, kernels)  # a row of sums: scratch
        else:
            _replay_chunk(buf, chunk_info, dot, recip, sums, n, lanes, kernels)
        for lane in range(count):
            info[first + lane] = chunk_info[lane]
        scatter_triangle(buf, count, a, lower, clean, out, first, n)


@numba.njit(**REPLAY_JIT_OPTIONS)
def potrf_replay_stack(a, lower, clean, out, info, kernels, nonfinite, lanes, thread, threads):
    """The Cholesky factor of every matrix of the 3-D stack ``a`` with OpenBLAS's roundings, in the contract of
    :func:`~._cholesky.potrf_stack`, ``REDO_INFO`` where it fails."""
    batch, n = a.shape[0], a.shape[1]
    chunks = (batch + lanes - 1) // lanes
    small = lanes == SMALL_ORDER_LANES
    start, stop = chunk_range(thread, threads, chunks)
    if small and n == 2:
        _replay_chunks(a, lower, clean, out, info, kernels, nonfinite, thread, start, stop, 2, SMALL_ORDER_LANES)
    elif small and n == 3:
        _replay_chunks(a, lower, clean, out, info, kernels, nonfinite, thread, start, stop, 3, SMALL_ORDER_LANES)
    elif small and n == 4:
        _replay_chunks(a, lower, clean, out, info, kernels, nonfinite, thread, start, stop, 4, SMALL_ORDER_LANES)
    else:
        _replay_chunks(a, lower, clean, out, info, kernels, nonfinite, thread, start, stop, n, lanes)
