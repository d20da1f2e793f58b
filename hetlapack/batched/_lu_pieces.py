"""SciPy's ``lu`` (``P``, ``L`` and ``U``, or ``L`` with its rows permuted) written from LU factors: from a factored
chunk of the interleaved layout straight into the three outputs, in blocks (:func:`scatter_pieces`), or a matrix at
a time from a packed LU and its 0-based pivots (:func:`write_plu`, :func:`plu_stack`). The factorizations that feed
them are ``_lu``'s and ``_lu_replay``'s.
"""

from __future__ import annotations

import numba
import numpy as np

from ._interleave import JIT_OPTIONS, chunk_range, on_cache_lines, scatter
from ._simd import WIDTH, exchange_where, load, splat, store


#: Orders up to which :func:`_write_rows` keeps a permutation in one integer, 4 bits an index.
PACKED_PERMUTATION_ORDER = 16


@numba.njit(**JIT_OPTIONS, inline="always")
def _nibble(word, i):
    """Index ``i`` of a permutation packed 4 bits an index in ``word``."""
    return (word >> (4 * i)) & 15


@numba.njit(**JIT_OPTIONS, inline="always")
def _write_rows(pivots, s, b, order, rows, m, k):
    """Write ``rows[b, i]``, the column of row ``i``'s one in ``P`` (``A = P L U``), from the 0-based pivots
    ``pivots[s]`` (row ``i`` swapped with row ``pivots[s, i]``, in turn). Up to ``PACKED_PERMUTATION_ORDER`` the
    permutation lies in one integer, in registers; the swaps through the scratch ``order`` (``m`` integers) wait on
    one another: at n = 4 (one thread, a chunk in cache) they took 10-14 ns a matrix against 6."""
    if m <= PACKED_PERMUTATION_ORDER:
        word = 0
        for t in range(m):
            word |= t << (4 * t)
        for i in range(k):
            row = pivots[s, i]
            differ = _nibble(word, i) ^ _nibble(word, row)
            word ^= (differ << (4 * i)) | (differ << (4 * row))
        inverse = 0
        for t in range(m):
            inverse |= t << (4 * _nibble(word, t))
        for i in range(m):
            rows[b, i] = _nibble(inverse, i)
    else:
        for i in range(m):
            order[i] = i
        for i in range(k):
            row = pivots[s, i]
            order[i], order[row] = order[row], order[i]
        for i in range(m):
            rows[b, order[i]] = i


@numba.njit(**JIT_OPTIONS, inline="always")
def write_plu(packed, pivots, s, b, permute_l, order, rows, lower, upper, permutation, m, n):
    """Write SciPy's ``lu`` of matrix ``b`` from its packed LU ``packed[s]`` and 0-based pivots ``pivots[s]``:
    ``rows[b, i]`` the column of row ``i``'s one in ``P`` (``A = P L U``; :func:`_write_rows`), ``P`` itself where
    ``permutation`` is not empty, the unit lower ``L`` (rows permuted to ``P L`` if ``permute_l``) and the upper
    ``U``; ``order`` is scratch of ``m`` integers. ``permute_l`` is to be a constant in each copy, its callers
    branching on it outside their loops: unpermuted, ``L``'s loops then have constant bounds and no branch on the
    data, and the versions compiled for small orders unroll them. With the flag a variable, LLVM merged the two copies
    into one whose loops branched on the pivots; so did P's ones written as ``j == one`` beside its zeros (a branch
    an element). Measured at n = 4 (float64, 10^4 matrices, one thread, the gather and factorization included, ns a
    matrix): 93 before, 61 now, 52 without P. ``L``'s and ``U``'s constants are of their own dtype: a float64 zero
    beside a float32 element converted each element twice."""
    k = min(m, n)
    zero, one = upper.dtype.type(0.0), upper.dtype.type(1.0)
    _write_rows(pivots, s, b, order, rows, m, k)
    if permutation.size:
        for i in range(m):
            for j in range(m):
                permutation[b, i, j] = 0.0
            permutation[b, i, rows[b, i]] = 1.0
    for i in range(m):
        if permute_l:
            source = rows[b, i]
            below = min(source, k)
            for j in range(below):
                lower[b, i, j] = packed[s, source, j]
            for j in range(below, k):
                lower[b, i, j] = zero
            if source < k:
                lower[b, i, source] = one
        else:
            for j in range(k):
                lower[b, i, j] = packed[s, i, j] if j < i else (one if j == i else zero)
    for i in range(k):
        for j in range(n):
            upper[b, i, j] = packed[s, i, j] if j >= i else zero


@numba.njit(**JIT_OPTIONS, inline="always")
def lu_scratch(like, m: int, n: int, lanes: int, pieces):
    """One thread's scratch for writing ``lu``'s ``pieces`` (those of :func:`~._lu.getrf_stack`, or none where the
    packed LU is written) of chunks of ``m x n`` matrices of the dtype of ``like``: ``order``, ``m`` integers for
    :func:`_write_rows`, and for square matrices the buffers of :func:`scatter_pieces`: ``lane_rows``, each lane's
    row order, ``unit_lower``, ``L``'s buffer, an identity whose strict lower triangle each chunk fills, and
    ``ones``, ``P``'s; empty where not used."""
    _, rows, _, _, permutation = pieces
    square = m == n and rows.shape[0] > 0
    unit_lower = on_cache_lines((m, m, lanes) if square else (0, 0, lanes), like.dtype)
    for i in range(unit_lower.shape[0]):
        for lane in range(lanes):
            unit_lower[i, i, lane] = 1.0
    return (on_cache_lines((m,), np.int64), on_cache_lines((m if square else 0, lanes), np.int64), unit_lower,
            on_cache_lines((m, m, lanes) if square and permutation.size else (0, 0, lanes), like.real.dtype))


@numba.njit(**JIT_OPTIONS, inline="always")
def _lane_rows(chunk_piv, lane_rows, lane0, m):
    """``lane_rows[t, lane]``, for the vector of lanes from ``lane0``: the row of each matrix that its ``t``-th row
    of ``L U`` comes from, after its pivots ``chunk_piv`` (0-based, ``chunk_piv[i, lane]`` the row swapped with row
    ``i``, in turn). Each swap is taken as exchanges across the lanes where the pivot is each row below ``i``; a
    pivot out of ``i + 1 .. m - 1`` (no swap, or scratch in a lane that LAPACK factors again) exchanges nothing."""
    lanes = lane_rows.shape[1]
    for t in range(m):
        store(lane_rows, t * lanes + lane0, splat(np.int64(t)))
    for i in range(chunk_piv.shape[0]):
        pivot = load(chunk_piv, i * lanes + lane0)
        top = load(lane_rows, i * lanes + lane0)
        for r in range(i + 1, m):
            top, below = exchange_where(pivot, splat(np.int64(r)), top, load(lane_rows, r * lanes + lane0))
            store(lane_rows, r * lanes + lane0, below)
        store(lane_rows, i * lanes + lane0, top)


@numba.njit(**JIT_OPTIONS, inline="always")
def _fill_permutation(lane_rows, ones, lane0, m):
    """``P`` of the lanes from ``lane0`` in ``ones``: a one at ``(i, j)`` where row ``j`` of ``L U`` comes from row
    ``i`` (``A = P L U``; :func:`_lane_rows`), zeros elsewhere."""
    lanes = lane_rows.shape[1]
    zero, one = splat(ones.dtype.type(0.0)), splat(ones.dtype.type(1.0))
    for i in range(m):
        row = splat(np.int64(i))
        for j in range(m):
            value, _ = exchange_where(load(lane_rows, j * lanes + lane0), row, zero, one)
            store(ones, (i * m + j) * lanes + lane0, value)


@numba.njit(**JIT_OPTIONS, inline="always")
def scatter_pieces(buf, chunk_piv, count, first, pieces, scratch, n, stream):
    """``lu``'s pieces of a factored chunk of square matrices, unpermuted ``L``, each copied in blocks as a packed LU
    is (:func:`~._interleave.scatter`): ``L``'s strict lower triangle moved into ``unit_lower``, ``U`` left in the
    buffer and ``P`` built in ``ones`` from the rows' order, worked out across the lanes (:func:`_lane_rows`), as are
    the row indices where ``P`` is not asked for. A matrix marked ``REDO_INFO`` is written too, and written again
    by LAPACK. Each copy asks for the next chunk's lines as it starts, the kernel's slices a step being the input's
    and the packed LU's only: left to the hardware, the stores of three outputs missed the cache one after another.
    Written one matrix at a time (:func:`write_plu`), read across the buffer's lanes, ``lu`` took 2.4x
    ``lu_factor``'s time at n = 8 (float64, 10^4 matrices, 2 threads). ``stream`` as for
    :func:`~._interleave.scatter`."""
    _, rows, lower, upper, permutation = pieces
    _, lane_rows, unit_lower, ones = scratch
    lanes = buf.shape[2]
    for i in range(1, n):
        for j in range(i):
            for lane in range(lanes):
                unit_lower[i, j, lane] = buf[i, j, lane]
                buf[i, j, lane] = 0.0
    scatter(unit_lower, count, lower, first, n, n, True, stream)
    scatter(buf, count, upper, first, n, n, True, stream)
    for lane0 in range(0, lanes, WIDTH):
        _lane_rows(chunk_piv, lane_rows, lane0, n)
        if permutation.size:
            _fill_permutation(lane_rows, ones, lane0, n)
    if permutation.size:
        scatter(ones, count, permutation, first, n, n, True, stream)
    else:
        for lane in range(count):
            for t in range(n):
                rows[first + lane, lane_rows[t, lane]] = t


@numba.njit(**JIT_OPTIONS)
def plu_stack(packed, piv, permute_l, rows, lower, upper, permutation, thread, threads):
    """SciPy's ``lu`` from each packed LU of a stack and its 0-based pivots (:func:`write_plu`)."""
    batch, m, n = packed.shape
    start, stop = chunk_range(thread, threads, batch)
    order = np.empty(m, dtype=np.int64)
    if permute_l:
        for b in range(start, stop):
            write_plu(packed, piv, b, b, True, order, rows, lower, upper, permutation, m, n)
    else:  # a loop of its own, as in _lu.scatter_lu
        for b in range(start, stop):
            write_plu(packed, piv, b, b, False, order, rows, lower, upper, permutation, m, n)
