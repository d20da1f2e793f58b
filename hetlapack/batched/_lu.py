"""Compiled batched LU with partial pivoting over the interleaved chunk layout (SciPy's ``lu`` written from it:
``_lu_pieces``; the solve from its factors: ``_lu_solve``).

Right-looking ``getf2`` order, two columns a step: pivot search in column ``k`` (first maximum of ``|re| + |im|``,
as LAPACK's ``i?amax``), row swap, column scaled by the pivot's reciprocal, rank-1 update of the trailing matrix.
The search and the update are SIMD loops over the lanes; the row swap, a different row in each matrix, is a select
across the lanes where few rows are left below the pivot, a scalar loop per lane otherwise
(:func:`swap_pivot_rows`). An exactly zero pivot sets ``info`` and leaves its (all-zero) column unscaled, as LAPACK
does.

A buffer of one vector of real matrices takes :func:`_factor_vector`, the same arithmetic in the same order written
on ``_simd`` vectors (bitwise the same results): written as loops over the lanes, each row-and-column step of the
update reached the compiler as a loop guarded by run-time overlap checks, nothing held in registers. Wider buffers
keep the loops: there a vector's rows lie ``8 x lanes`` bytes apart, at 16-64 lanes in one set of the L1 cache.
``hetlapack calibrate``'s choice of matrices per buffer therefore picks the kernel, order by order. A buffer of one
vector of complex matrices takes :func:`_factor_split`, the same on vectors of real and of imaginary parts
(``_split_complex``), its row swaps by exchanges across the lanes.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ..machine import vector_bytes
from ._borrowed import borrowed, keep_alive
from ._interleave import (BY_ROWS, JIT_OPTIONS, NEITHER, buffer_as_stack, chunk_buffer, chunk_range, divide, gather,
                          is_finite, on_cache_lines, poison_lanes, prefetch_slice, record_order, scatter,
                          small_order_lanes, smallest_normal, spreads_prefetch)
from ._lu_pieces import lu_scratch, scatter_pieces, write_plu
from ._order_four import lu_chunk as order_four_chunk
from ._order_four import lu_pieces_chunk as order_four_pieces
from ._order_two import lu_chunk, takes
from ._simd import (WIDTH, add, any_below, any_equal, exchange_where, load, magnitude, multiply, quotient, splat, store,
                    subtract_product, where_greater)
from ._split_complex import ELEMENT, join, product, reciprocal, split
from ._split_complex import subtract_product as subtract_complex_product
from ._transpose import store_fence


@numba.njit(**JIT_OPTIONS, inline="always")
def _magnitude(value):
    """``|re| + |im|``: the pivot magnitude of LAPACK's ``i?amax`` (``|x|`` for real ``x``)."""
    return abs(value.real) + abs(value.imag)


@numba.njit(**JIT_OPTIONS, inline="always")
def divides_by_pivot(pivot, tiny) -> bool:
    """Whether getf2 divides by ``pivot`` instead of multiplying by its reciprocal, which would overflow (the CPU
    kernel's rule, and the GPU kernel's in ``cuda_kernels``). A part of at least ``tiny`` settles it without the
    modulus, which for a complex pivot is a call of ``hypot`` per matrix and column."""
    if abs(pivot.real) >= tiny or abs(pivot.imag) >= tiny:
        return False
    return pivot != 0 and abs(pivot) < tiny


@numba.njit(**JIT_OPTIONS, inline="always")
def _swap_each_lane(buf, k, piv, n, lanes):
    """Swap row ``k`` with the pivot row ``piv[k, lane]`` lane by lane, element by element, in the lanes whose
    pivot is not on the diagonal already."""
    for lane in range(lanes):
        row = piv[k, lane]
        if row == k:
            continue
        for j in range(n):
            held = buf[row, j, lane]
            buf[row, j, lane] = buf[k, j, lane]
            buf[k, j, lane] = held


#: Bytes of lanes per row below the pivot up to which a row swap is done by exchanges across the lanes: an exchange
#: costs about seven vector operations (compare, two loads, three logical operations, two stores) a row below and column
#: per vector of lanes, a swap element by element four memory operations a lane and column, so exchanges are cheaper
#: while the rows below hold fewer than 4 / 7 of a vector's elements: with AVX-512 (64-byte vectors) 4 rows of float64,
#: 9 of float32. Measured there with selects, which cost as many operations (``kernels.getrf``, float64, B = 10^4, 2
#: threads, ns per matrix, 32 / 64 lanes, before / after): n = 2 12 / 13 -> 9-10 / 10-11, n = 4 23 / 24 -> 18-19 /
#: 18-19, n = 8 70-73 / 54-62 -> 56-69 / 42-51, n = 12-24 within the spread; selects at every step took n = 16 from
#: 290-323 to 307-394 and n = 32 from 1,944-2,261 to 2,690-2,768.
EXCHANGE_BYTES = 4 * vector_bytes() // 7


@numba.njit(**JIT_OPTIONS, inline="always")
def swap_pivot_rows(buf, k, piv, m, n, lanes):
    """Swap row ``k`` with the pivot row ``piv[k, lane]`` in every lane (a different row in each): by an exchange
    per row below ``k`` and column, vector operations across the lanes, where few rows are left below (up to
    ``EXCHANGE_BYTES`` of lanes), element by element in each lane otherwise. The exchange is of the words' bits by
    exclusive ors (as :func:`~._simd.exchange_where`): written as selects, LLVM stored float64 and float32 ones with
    masked stores, microcode on AVX2 machines."""
    if (m - k - 1) * buf.itemsize > EXCHANGE_BYTES:
        _swap_each_lane(buf, k, piv, n, lanes)
        return
    words = as_words(buf)
    parts = words.shape[2] // lanes
    for row in range(k + 1, m):
        for j in range(n):
            for word in range(lanes * parts):
                change = (words[row, j, word] ^ words[k, j, word]) & -np.int64(piv[k, word // parts] == row)
                words[row, j, word] ^= change
                words[k, j, word] ^= change


def as_words(buf):
    """A C-ordered real or complex array seen as integers as wide as its real precision's numbers (a view)."""
    return buf.view(np.int64 if buf.real.dtype.itemsize == 8 else np.int32)


@overload(as_words, jit_options=JIT_OPTIONS)
def _as_words_for(buf):
    bits = buf.dtype.bitwidth // (2 if isinstance(buf.dtype, types.Complex) else 1)
    word = np.int64 if bits == 64 else np.int32
    return lambda buf: buf.view(word)


@numba.njit(**JIT_OPTIONS, inline="always")
def _kept_pivot(pivot, k, lane, info, tiny):
    """Record ``pivot`` (row ``k``'s, in ``lane``) in ``info`` if it is zero; return whether getf2 divides by it
    (:func:`divides_by_pivot`, ``tiny`` the smallest normal number of its precision) and what column ``k`` is to be
    multiplied by the reciprocal of: the pivot, or 1 where it is zero or divided by instead (its reciprocal then
    taken in double precision, as numba's ``1.0 / pivot``)."""
    if pivot == 0 and info[lane] == 0:
        info[lane] = k + 1
    divides = divides_by_pivot(pivot, tiny)
    return divides, pivot if pivot != 0 and not divides else 1.0


@numba.njit(**JIT_OPTIONS, inline="always")
def _take_pivots(buf, k, info, recip, lanes):
    """With the pivots swapped in: record a zero pivot in ``info`` and set ``recip[lane]``
    to what column ``k`` is to be multiplied by: the pivot's reciprocal, or 1 where the pivot is zero or divided by
    instead (:func:`_kept_pivot`). Returns whether any lane divides. Where every pivot has a part of at least the
    smallest normal number (neither zero nor divided by), the reciprocals are taken in one loop with no branch, which
    the compiler runs on vectors (float64, 10^4 matrices of order 2 and 4, 2 threads: 13 -> 7 and 33 -> 21 ns a
    matrix)."""
    tiny = smallest_normal(recip)
    normal = True
    for lane in range(lanes):
        normal &= abs(buf[k, k, lane].real) >= tiny or abs(buf[k, k, lane].imag) >= tiny
    if normal:  # no zero or subnormal pivot: a loop the compiler can run on vectors
        for lane in range(lanes):
            recip[lane] = 1.0 / buf[k, k, lane]
        return False
    subnormal = False
    for lane in range(lanes):
        divides, kept = _kept_pivot(buf[k, k, lane], k, lane, info, tiny)
        subnormal |= divides
        recip[lane] = 1.0 / kept
    return subnormal


@numba.njit(**JIT_OPTIONS, inline="always")
def _divide_by_subnormal_pivots(buf, k, m, lanes):
    """Divide column ``k`` below the diagonal by its pivot in the lanes whose pivot is too small for
    its reciprocal (multiplied by 1 so far)."""
    tiny = smallest_normal(buf)
    for lane in range(lanes):
        if divides_by_pivot(buf[k, k, lane], tiny):
            for i in range(k + 1, m):
                buf[i, k, lane] = divide(buf[i, k, lane], buf[k, k, lane])


@numba.njit(**JIT_OPTIONS)
def search_pivot(buf, k, piv, best, m, lanes):
    """``piv[k, lane]``: the row of the first largest magnitude in column ``k`` from the diagonal down (LAPACK's
    ``i?amax``); ``best`` is scratch of ``lanes`` real numbers.

    Compiled as a function of its own, not inlined: inlined into the versions compiled per small order (constant
    sizes, 32 lanes), its copies unrolled row by row held 84 masked stores of ``best`` and ``piv`` (where a lane
    finds a larger magnitude; microcode on AVX2 machines, each read back by the next row's comparison); on its own
    it is one loop with two, and ran faster (float64, 2 threads, ns a matrix, inlined / on its own: n = 3 47-55 /
    19-27, n = 4 54-63 / 34-41; n = 2 8-14 / 9-14)."""
    for lane in range(lanes):
        best[lane] = _magnitude(buf[k, k, lane])
        piv[k, lane] = k
    for i in range(k + 1, m):
        for lane in range(lanes):
            size = _magnitude(buf[i, k, lane])
            if size > best[lane]:
                best[lane] = size
                piv[k, lane] = i


@numba.njit(**JIT_OPTIONS, inline="always")
def _pivot_column(buf, k, piv, info, best, recip, m, n, lanes):
    """Pivot search, row swap and scaling of column ``k`` (already updated by every earlier column) in the
    ``m x n x lanes`` buffer."""
    search_pivot(buf, k, piv, best, m, lanes)
    swap_pivot_rows(buf, k, piv, m, n, lanes)
    subnormal = _take_pivots(buf, k, info, recip, lanes)
    for i in range(k + 1, m):
        for lane in range(lanes):
            buf[i, k, lane] *= recip[lane]
    if subnormal:
        _divide_by_subnormal_pivots(buf, k, m, lanes)


@numba.njit(**JIT_OPTIONS, inline="always")
def _factor_chunk(buf, piv, info, best, recip, m, n, lanes):
    """LU of the interleaved ``m x n`` matrices in the ``m x n x lanes`` buffer; ``piv[k, lane]`` 0-based,
    ``info[lane]`` as LAPACK. The sizes are arguments, not read from ``buf``, so that a caller giving them as
    constants gets a version compiled for them.

    Columns are pivoted two at a time and the trailing matrix receives both rank-1 updates in one pass (half the
    passes over the buffer; 15-20% faster at n = 16..32). The subtractions keep getf2's order, so the results are
    bitwise those of one rank-1 update per column.
    """
    for lane in range(lanes):
        info[lane] = 0
    steps = min(m, n)
    for k in range(0, steps, 2):
        _pivot_column(buf, k, piv, info, best, recip, m, n, lanes)
        if k + 1 == steps:
            for j in range(k + 1, n):
                for i in range(k + 1, m):
                    for lane in range(lanes):
                        buf[i, j, lane] -= buf[i, k, lane] * buf[k, j, lane]
            break
        for i in range(k + 1, m):
            for lane in range(lanes):
                buf[i, k + 1, lane] -= buf[i, k, lane] * buf[k, k + 1, lane]
        _pivot_column(buf, k + 1, piv, info, best, recip, m, n, lanes)
        for j in range(k + 2, n):
            for lane in range(lanes):
                buf[k + 1, j, lane] -= buf[k + 1, k, lane] * buf[k, j, lane]
            for i in range(k + 2, m):
                for lane in range(lanes):
                    buf[i, j, lane] = ((buf[i, j, lane] - buf[i, k, lane] * buf[k, j, lane])
                                       - buf[i, k + 1, lane] * buf[k + 1, j, lane])


@numba.njit(**JIT_OPTIONS, inline="always")
def pivot_vector_rows(buf, k, piv, m, n):
    """In a buffer of one vector of real matrices, ``piv[k]``: each lane's first largest magnitude in column ``k``
    from the diagonal down, searched on vectors; that row swapped with row ``k`` element by element (a different row
    in each lane). Returns the pivots' magnitudes. The buffer's rows may be wider than ``n``
    (:func:`~._interleave.padded_width`)."""
    width = buf.shape[1]
    at = (k * width + k) * WIDTH
    best = magnitude(load(buf, at))
    rows = splat(k)
    for i in range(k + 1, m):
        size = magnitude(load(buf, at + (i - k) * width * WIDTH))
        rows = where_greater(size, best, splat(i), rows)
        best = where_greater(size, best, size, best)
    store(piv, k * WIDTH, rows)
    _swap_each_lane(buf, k, piv, n, WIDTH)  # selects across the vector ran slower (n = 24: 769 -> 843 ns), exchanges
    # (as _swap_split_rows, row k held in registers or not) no faster (held, best of 300 alternations, twice: n = 8
    # 85-89 -> 85-99 ns, n = 16 336-404 -> 414-453)
    return best


@numba.njit(**JIT_OPTIONS, inline="always")
def _pivot_vector_column(buf, k, piv, info, recip, m, n):
    """:func:`_pivot_column` on a buffer of one vector of real matrices: the search, the scaling and, where no pivot
    is zero or subnormal, the reciprocals on vectors; the row swap (:func:`pivot_vector_rows`) element by
    element."""
    width = buf.shape[1]
    stride = width * WIDTH
    at = (k * width + k) * WIDTH
    best = pivot_vector_rows(buf, k, piv, m, n)
    subnormal = False
    if any_below(best, splat(smallest_normal(buf))):
        subnormal = _take_pivots(buf, k, info, recip, WIDTH)
        scale = load(recip, 0)
    else:  # no zero or subnormal pivot: the reciprocals in one vector division
        scale = quotient(splat(buf.dtype.type(1.0)), load(buf, at))
    for i in range(k + 1, m):
        store(buf, at + (i - k) * stride, multiply(load(buf, at + (i - k) * stride), scale))
    if subnormal:
        _divide_by_subnormal_pivots(buf, k, m, WIDTH)


@numba.njit(**JIT_OPTIONS, inline="always")
def _update_column(buf, k, j, first, m):
    """``A[first:, j] -= A[first:, k] * A[k, j]`` in a buffer of one vector of matrices (``first > k``)."""
    width = buf.shape[1]
    above = load(buf, (k * width + j) * WIDTH)
    for i in range(first, m):
        at = (i * width + j) * WIDTH
        store(buf, at, subtract_product(load(buf, (i * width + k) * WIDTH), above, load(buf, at)))


@numba.njit(**JIT_OPTIONS, inline="always")
def _factor_vector(buf, piv, info, recip, m, n, ahead):
    """:func:`_factor_chunk` for a buffer of one SIMD vector of real matrices (``WIDTH`` lanes), written on ``_simd``
    vectors, with the same roundings in the same order: bitwise its results. The trailing update takes two columns
    of the pass at once, their four multipliers held in registers while it runs down the rows (4 FMAs to 4 loads and
    2 stores). The buffer's rows may be wider than ``n`` (:func:`~._interleave.padded_width`). ``ahead`` is
    ``(a, out, first, spread, stream)``: where ``spread``, each pair of columns asks for a slice of the chunk after
    the one at ``first`` in the input ``a`` and, unless written with streaming stores (``stream``), the packed LU
    ``out`` (:func:`~._interleave.prefetch_slice`)."""
    a, out, first, spread, stream = ahead
    for lane in range(WIDTH):
        info[lane] = 0
    steps = min(m, n)
    width = buf.shape[1]
    stride = width * WIDTH
    for k in range(0, steps, 2):
        if spread:
            prefetch_slice(a, first, WIDTH, m, n, k // 2, (steps + 1) // 2, False)
            if out.shape[0] and not stream:
                prefetch_slice(out, first, WIDTH, m, n, k // 2, (steps + 1) // 2, True)
        _pivot_vector_column(buf, k, piv, info, recip, m, n)
        if k + 1 == steps:
            for j in range(k + 1, n):
                _update_column(buf, k, j, k + 1, m)
            break
        _update_column(buf, k, k + 1, k + 1, m)
        _pivot_vector_column(buf, k + 1, piv, info, recip, m, n)
        below = load(buf, ((k + 1) * width + k) * WIDTH)
        for j in range(k + 2, n, 2):
            second = min(j + 1, n - 1)  # a last column alone is taken twice: same loads, same results
            top = (k * width + j) * WIDTH
            u0, v0 = load(buf, top), load(buf, top + (second - j) * WIDTH)
            u1 = subtract_product(below, u0, load(buf, top + stride))
            v1 = subtract_product(below, v0, load(buf, top + stride + (second - j) * WIDTH))
            store(buf, top + stride + (second - j) * WIDTH, v1)
            store(buf, top + stride, u1)
            for i in range(k + 2, m):
                row = (i * width + k) * WIDTH
                l0, l1 = load(buf, row), load(buf, row + WIDTH)
                at = row + (j - k) * WIDTH
                other = at + (second - j) * WIDTH
                u, v = load(buf, at), load(buf, other)
                store(buf, other, subtract_product(l1, v1, subtract_product(l0, v0, v)))
                store(buf, at, subtract_product(l1, u1, subtract_product(l0, u0, u)))


#: Vectors of row ``k`` that :func:`_swap_split_rows` holds in registers while the rows below pass.
HELD_VECTORS = 8


@numba.njit(**JIT_OPTIONS, inline="always")
def _load_held(words, at):
    """The ``HELD_VECTORS`` vectors from word ``at``."""
    return (load(words, at), load(words, at + WIDTH), load(words, at + 2 * WIDTH), load(words, at + 3 * WIDTH),
            load(words, at + 4 * WIDTH), load(words, at + 5 * WIDTH), load(words, at + 6 * WIDTH),
            load(words, at + 7 * WIDTH))


@numba.njit(**JIT_OPTIONS, inline="always")
def _store_held(words, at, held):
    """Write the ``HELD_VECTORS`` vectors ``held`` from word ``at``."""
    h0, h1, h2, h3, h4, h5, h6, h7 = held
    store(words, at, h0)
    store(words, at + WIDTH, h1)
    store(words, at + 2 * WIDTH, h2)
    store(words, at + 3 * WIDTH, h3)
    store(words, at + 4 * WIDTH, h4)
    store(words, at + 5 * WIDTH, h5)
    store(words, at + 6 * WIDTH, h6)
    store(words, at + 7 * WIDTH, h7)


@numba.njit(**JIT_OPTIONS, inline="always")
def _exchange_held(words, below, rows, row, held):
    """``held`` exchanged with the vectors from word ``below`` in the lanes whose pivot ``rows`` equal ``row``:
    those of ``below`` written, the new ``held`` returned."""
    lower = _load_held(words, below)
    h0, b0 = exchange_where(rows, row, held[0], lower[0])
    h1, b1 = exchange_where(rows, row, held[1], lower[1])
    h2, b2 = exchange_where(rows, row, held[2], lower[2])
    h3, b3 = exchange_where(rows, row, held[3], lower[3])
    h4, b4 = exchange_where(rows, row, held[4], lower[4])
    h5, b5 = exchange_where(rows, row, held[5], lower[5])
    h6, b6 = exchange_where(rows, row, held[6], lower[6])
    h7, b7 = exchange_where(rows, row, held[7], lower[7])
    _store_held(words, below, (b0, b1, b2, b3, b4, b5, b6, b7))
    return h0, h1, h2, h3, h4, h5, h6, h7


@numba.njit(**JIT_OPTIONS, inline="always")
def _swap_split_rows(words, k, rows, m, n):
    """Swap row ``k`` with each lane's pivot row (the vector ``rows``, a different row in each lane) in a split
    complex buffer (``_split_complex``): each row some lane pivots on exchanges its words with row ``k``'s in those
    lanes, vector by vector (:func:`~._simd.exchange_where`), ``HELD_VECTORS`` of row ``k``'s vectors at a time held
    in registers while the rows below pass (the last ``2 n mod 8`` one at a time), so that row ``k`` is read and
    written once, not once per row below. Measured (complex128, one thread, a chunk in cache, ns a matrix, by selects
    of the words / by exchanges): n = 8 345-418 / 212-213, n = 16 2,036-2,114 / 1,083-1,139, n = 24 5,612-5,804 /
    3,129-3,260. Row ``k`` read and written per row below / held (the factorization and a copy of the buffer, 64-byte
    aligned, best of 300 alternations, bitwise the same): one chunk, twice, n = 8 150-151 / 136, n = 12 385 / 334,
    n = 16 751-759 / 652-656, n = 24 2,024-2,030 / 1,740-1,744, n = 32 5,585-5,819 / 5,219-5,512; 64 chunks in
    turn (pivots the branch predictor cannot learn) n = 8 157 / 142, n = 12 395 / 342, n = 16 768 / 666, n = 24
    2,215 / 1,931; order 4 within 1 ns. Exchanging every row below, with no test for a lane pivoting there, ran
    slower (n = 8 200 -> 206, n = 16 721 -> 820, n = 24 1,838 -> 2,409)."""
    stride = n * ELEMENT
    top = k * stride
    held_stop = top + (2 * n - 2 * n % HELD_VECTORS) * WIDTH
    for at in range(top, held_stop, HELD_VECTORS * WIDTH):
        held = _load_held(words, at)
        for i in range(k + 1, m):
            row = splat(i)
            if any_equal(rows, row):
                held = _exchange_held(words, at + (i - k) * stride, rows, row, held)
        _store_held(words, at, held)
    for at in range(held_stop, top + stride, WIDTH):
        one = load(words, at)
        for i in range(k + 1, m):
            row = splat(i)
            if any_equal(rows, row):
                one, lower = exchange_where(rows, row, one, load(words, at + (i - k) * stride))
                store(words, at + (i - k) * stride, lower)
        store(words, at, one)


@numba.njit(**JIT_OPTIONS, inline="always")
def _split_element(words, at, lane, like):
    """The complex number of ``lane`` in the split element at word ``at`` (``_split_complex``), of the type of the
    complex array ``like``."""
    return like.dtype.type(complex(words[at + lane], words[at + WIDTH + lane]))


@numba.njit(**JIT_OPTIONS, inline="always")
def _pivot_split_column(words, k, piv, info, recip, m, n):
    """:func:`_pivot_column` on a split buffer of one vector of complex matrices: the search, the swap and the
    scaling on vectors; the pivots are checked for zeros and for division lane by lane only in a column where some
    pivot's magnitude ``|re| + |im|`` is below twice the smallest normal number (else each has a part above it)."""
    at = (k * n + k) * ELEMENT
    stride = n * ELEMENT
    best = add(magnitude(load(words, at)), magnitude(load(words, at + WIDTH)))
    rows = splat(k)
    for i in range(k + 1, m):
        below = at + (i - k) * stride
        size = add(magnitude(load(words, below)), magnitude(load(words, below + WIDTH)))
        rows = where_greater(size, best, splat(i), rows)
        best = where_greater(size, best, size, best)
    store(piv, k * WIDTH, rows)
    _swap_split_rows(words, k, rows, m, n)
    tiny = smallest_normal(words)
    subnormal = False
    if not any_below(best, splat(words.dtype.type(2 * tiny))):
        scale_real, scale_imag = reciprocal(load(words, at), load(words, at + WIDTH))
    else:
        parts = recip.view(words.dtype)  # the pivots to take the reciprocals of, real parts then imaginary
        for lane in range(WIDTH):
            divides, kept = _kept_pivot(_split_element(words, at, lane, recip), k, lane, info, tiny)
            subnormal |= divides
            parts[lane], parts[WIDTH + lane] = kept.real, kept.imag
        scale_real, scale_imag = reciprocal(load(parts, 0), load(parts, WIDTH))
    for below in range(at + stride, at + (m - k) * stride, stride):
        real, imag = product(load(words, below), load(words, below + WIDTH), scale_real, scale_imag)
        store(words, below, real)
        store(words, below + WIDTH, imag)
    if subnormal:
        for lane in range(WIDTH):
            pivot = _split_element(words, at, lane, recip)
            if divides_by_pivot(pivot, tiny):
                for below in range(at + stride, at + (m - k) * stride, stride):
                    quotient = divide(_split_element(words, below, lane, recip), pivot)
                    words[below + lane], words[below + WIDTH + lane] = quotient.real, quotient.imag


@numba.njit(**JIT_OPTIONS, inline="always")
def _update_split_column(words, k, j, first, m, n):
    """``A[first:, j] -= A[first:, k] * A[k, j]`` in a split buffer of one vector of complex matrices."""
    top = (k * n + j) * ELEMENT
    upper_real, upper_imag = load(words, top), load(words, top + WIDTH)
    for i in range(first, m):
        at, left = (i * n + j) * ELEMENT, (i * n + k) * ELEMENT
        real, imag = subtract_complex_product(load(words, at), load(words, at + WIDTH), load(words, left),
                                              load(words, left + WIDTH), upper_real, upper_imag)
        store(words, at, real)
        store(words, at + WIDTH, imag)


@numba.njit(**JIT_OPTIONS, inline="always")
def _factor_split(buf, piv, info, recip, m, n):
    """:func:`_factor_chunk` for a buffer of one SIMD vector of complex matrices (``WIDTH`` lanes), split in place
    into vectors of real and imaginary parts while it is factored (``_split_complex``), with the same roundings in
    the same order: bitwise its results. The trailing update takes two columns of the pass at once, their eight
    multiplier vectors held in registers while it runs down the rows."""
    words = buf.reshape(-1).view(buf.real.dtype)
    split(words, m * n)
    for lane in range(WIDTH):
        info[lane] = 0
    steps = min(m, n)
    stride = n * ELEMENT
    for k in range(0, steps, 2):
        _pivot_split_column(words, k, piv, info, recip, m, n)
        if k + 1 == steps:
            for j in range(k + 1, n):
                _update_split_column(words, k, j, k + 1, m, n)
            break
        _update_split_column(words, k, k + 1, k + 1, m, n)
        _pivot_split_column(words, k + 1, piv, info, recip, m, n)
        below = ((k + 1) * n + k) * ELEMENT
        below_real, below_imag = load(words, below), load(words, below + WIDTH)
        for j in range(k + 2, n, 2):
            second = min(j + 1, n - 1)  # a last column alone is taken twice: same loads, same results
            top, other = (k * n + j) * ELEMENT, (second - j) * ELEMENT
            u0r, u0i = load(words, top), load(words, top + WIDTH)
            v0r, v0i = load(words, top + other), load(words, top + other + WIDTH)
            u1r, u1i = subtract_complex_product(load(words, top + stride), load(words, top + stride + WIDTH),
                                                below_real, below_imag, u0r, u0i)
            v1r, v1i = subtract_complex_product(load(words, top + stride + other),
                                                load(words, top + stride + other + WIDTH),
                                                below_real, below_imag, v0r, v0i)
            store(words, top + stride + other, v1r)
            store(words, top + stride + other + WIDTH, v1i)
            store(words, top + stride, u1r)
            store(words, top + stride + WIDTH, u1i)
            for i in range(k + 2, m):
                row = (i * n + k) * ELEMENT
                l0r, l0i = load(words, row), load(words, row + WIDTH)
                l1r, l1i = load(words, row + ELEMENT), load(words, row + ELEMENT + WIDTH)
                at = row + (j - k) * ELEMENT
                vr, vi = subtract_complex_product(load(words, at + other), load(words, at + other + WIDTH),
                                                  l0r, l0i, v0r, v0i)
                vr, vi = subtract_complex_product(vr, vi, l1r, l1i, v1r, v1i)
                ur, ui = subtract_complex_product(load(words, at), load(words, at + WIDTH), l0r, l0i, u0r, u0i)
                ur, ui = subtract_complex_product(ur, ui, l1r, l1i, u1r, u1i)
                store(words, at + other, vr)
                store(words, at + other + WIDTH, vi)
                store(words, at, ur)
                store(words, at + WIDTH, ui)
    join(words, m * n)


def _factor(buf, piv, info, best, recip, m, n, lanes, ahead):
    """LU of an interleaved chunk: :func:`_factor_vector` (real, which takes ``ahead``) or :func:`_factor_split`
    (complex) where the buffer is one vector of matrices, :func:`_factor_chunk` otherwise."""


@overload(_factor, jit_options=JIT_OPTIONS)
def _factor_for(buf, piv, info, best, recip, m, n, lanes, ahead):
    if isinstance(buf.dtype, types.Complex):
        def factor(buf, piv, info, best, recip, m, n, lanes, ahead):
            if lanes == WIDTH:
                _factor_split(buf, piv, info, recip, m, n)
            else:
                _factor_chunk(buf, piv, info, best, recip, m, n, lanes)

        return factor

    def factor(buf, piv, info, best, recip, m, n, lanes, ahead):
        if lanes == WIDTH:
            _factor_vector(buf, piv, info, recip, m, n, ahead)
        else:
            _factor_chunk(buf, piv, info, best, recip, m, n, lanes)

    return factor


#: ``info`` of a matrix the caller factors again with LAPACK: one whose factors hold an infinity or NaN, whose pivots
#: are LAPACK's to choose (OpenBLAS's SIMD ``i?amax`` kernels each place a NaN by a rule of their own), or one that
#: ``_lu_replay`` leaves to it.
REDO_INFO = -1


@numba.njit(**JIT_OPTIONS, inline="always")
def _flag_nonfinite_marked(a, chunk_info, count, first, nonfinite, thread, m, n):
    """Where asked (``nonfinite`` not empty), set ``thread``'s flag if a matrix of the chunk marked ``REDO_INFO`` (its
    factors hold an infinity or NaN, or a replay left it to LAPACK) held an infinity or NaN in ``a``: SciPy's
    ``check_finite``, with the input read again for those matrices only, in the LU kernel and its replay alike. An
    infinity or NaN in the input always leaves one in the factors, which marks the matrix: each element reaches its
    own place in L or U through subtractions and multiplications, which keep it non-finite (an infinity times zero is
    NaN), and the division that turns an infinity into zero divides by a pivot, which U keeps. Checked as the chunk
    was gathered instead, it took 2.4 of 23.4 ns a matrix (complex128, order 2, 10^4 matrices, 2 threads)."""
    if nonfinite.size:
        for lane in range(count):
            if chunk_info[lane] == REDO_INFO:
                for i in range(m):
                    for j in range(n):
                        if not is_finite(a[first + lane, i, j]):
                            nonfinite[thread] = 1


@numba.njit(**JIT_OPTIONS, inline="always")
def _record(a, buf, chunk_piv, chunk_info, poison, count, piv, info, nonfinite, thread, first, m, n, lanes):
    """Write a factored chunk's pivots and ``info`` to the stack's, with ``REDO_INFO`` (in ``chunk_info`` too) for
    each matrix whose factors hold an infinity or NaN; SciPy's ``check_finite`` of the chunk's input ``a`` where asked
    (:func:`_flag_nonfinite_marked`)."""
    poison_lanes(buf, poison, m, buf.shape[1], lanes)
    for lane in range(count):
        if poison[lane] != 0:
            chunk_info[lane] = REDO_INFO
        info[first + lane] = chunk_info[lane]
        for k in range(min(m, n)):
            piv[first + lane, k] = chunk_piv[k, lane]
    _flag_nonfinite_marked(a, chunk_info, count, first, nonfinite, thread, m, n)


@numba.njit(**JIT_OPTIONS, inline="always")
def scatter_factored(a, buf, chunk_piv, chunk_info, poison, count, out, piv, info, nonfinite, thread, first, m, n,
                     lanes, ahead, stream):
    """Write a factored chunk's LU, pivots and ``info`` to the stack's, with ``REDO_INFO`` for each matrix whose
    factors hold an infinity or NaN, and flag ``thread``'s infinity or NaN in ``a`` where asked (:func:`_record`);
    ``ahead`` and ``stream`` as for :func:`~._interleave.scatter`."""
    _record(a, buf, chunk_piv, chunk_info, poison, count, piv, info, nonfinite, thread, first, m, n, lanes)
    scatter(buf, count, out, first, m, n, ahead, stream)


@numba.njit(**JIT_OPTIONS, inline="always")
def scatter_lu(a, buf, chunk_piv, chunk_info, poison, count, piv, info, nonfinite, thread, first, pieces, scratch, m,
               n, lanes, stream):
    """:func:`scatter_factored` for ``lu``: each matrix's ``pieces`` (``permute_l, rows, lower, upper,
    permutation`` of :func:`~._lu_pieces.write_plu`) written from the buffer instead of its packed LU, but for a
    matrix marked ``REDO_INFO``: in blocks where the matrices are square and ``L`` unpermuted
    (:func:`~._lu_pieces.scatter_pieces`, in the ``scratch`` of :func:`~._lu_pieces.lu_scratch`, with streaming
    stores if ``stream``), else a matrix at a time."""
    _record(a, buf, chunk_piv, chunk_info, poison, count, piv, info, nonfinite, thread, first, m, n, lanes)
    permute_l, rows, lower, upper, permutation = pieces
    order, _, unit_lower, _ = scratch
    if unit_lower.shape[0] and not permute_l:
        scatter_pieces(buf, chunk_piv, count, first, pieces, scratch, n, stream)
        return
    packed, pivots = buffer_as_stack(buf), chunk_piv.T
    if permute_l:
        for lane in range(count):
            if chunk_info[lane] != REDO_INFO:
                write_plu(packed, pivots, lane, first + lane, True, order, rows, lower, upper, permutation, m, n)
    else:  # a loop of its own, so that this copy of write_plu has a constant permute_l (see there)
        for lane in range(count):
            if chunk_info[lane] != REDO_INFO:
                write_plu(packed, pivots, lane, first + lane, False, order, rows, lower, upper, permutation, m, n)


@numba.njit(**JIT_OPTIONS, inline="always")
def scatter_chunk(a, buf, chunk_piv, chunk_info, poison, count, out, piv, info, nonfinite, thread, first, pieces,
                  scratch, m, n, lanes, ahead=True, stream=False):
    """Write a factored chunk as the call asks: its packed LU into ``out`` (:func:`scatter_factored`, the next
    chunk's asked for unless ``ahead`` is false), or, where ``out`` is empty, ``lu``'s ``pieces`` (:func:`scatter_lu`,
    in the ``scratch`` of :func:`~._lu_pieces.lu_scratch`); with streaming stores if ``stream``
    (:func:`~._interleave.scatter`); ``poison`` is a row of scratch of ``lanes``."""
    if out.shape[0]:
        scatter_factored(a, buf, chunk_piv, chunk_info, poison, count, out, piv, info, nonfinite, thread, first, m, n,
                         lanes, ahead, stream)
    else:
        scatter_lu(a, buf, chunk_piv, chunk_info, poison, count, piv, info, nonfinite, thread, first, pieces, scratch,
                   m, n, lanes, stream)


@numba.njit(**JIT_OPTIONS, inline="always")
def _chunk_buffers(a, pieces, m, n, lanes):
    """One thread's buffers for chunks of ``m x n`` matrices of ``a``, ``lanes`` at a time, each on cache lines
    (:func:`~._interleave.on_cache_lines`): the chunk (rows padded, :func:`~._interleave.chunk_buffer`), its
    pivots and ``info``, the pivot search's magnitudes, the pivots' reciprocals and the scratch for ``lu``'s
    ``pieces`` (:func:`~._lu_pieces.lu_scratch`)."""
    return (chunk_buffer(a, m, n, lanes),
            on_cache_lines((min(m, n), lanes), np.int64), on_cache_lines((lanes,), np.int64),
            on_cache_lines((lanes,), a.real.dtype), on_cache_lines((lanes,), a.dtype),
            lu_scratch(a, m, n, lanes, pieces))


@numba.njit(**JIT_OPTIONS, inline="always")
def _getrf_chunk(a, out, piv, info, pieces, spread_bytes, stream, nonfinite, thread, chunk, buffers, m, n, lanes):
    """Factorize chunk ``chunk`` of the stack in the ``buffers`` of :func:`_chunk_buffers`."""
    buf, chunk_piv, chunk_info, best, recip, scratch = buffers
    first = chunk * lanes
    spread = spreads_prefetch(buf, lanes, spread_bytes)
    count = gather(a, first, buf, m, n, lanes, not spread)
    _factor(buf, chunk_piv, chunk_info, best, recip, m, n, lanes, (a, out, first, spread, stream))
    scatter_chunk(a, buf, chunk_piv, chunk_info, best, count, out, piv, info, nonfinite, thread, first, pieces,
                  scratch, m, n, lanes, not spread, stream)


@numba.njit(**JIT_OPTIONS, inline="always")
def _getrf_chunks(a, out, piv, info, pieces, spread_bytes, stream, nonfinite, thread, start, stop, m, n, lanes):
    """Factorize chunks ``start:stop`` of the stack in buffers (one thread's share)."""
    owned = _chunk_buffers(a, pieces, m, n, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        _getrf_chunk(a, out, piv, info, pieces, spread_bytes, stream, nonfinite, thread, chunk, buffers, m, n, lanes)
    keep_alive(owned)


@numba.njit(**JIT_OPTIONS, inline="always")
def straight_from_stack(a, out, pieces, a_order, out_order, order, lanes):
    """Whether full chunks of ``order x order`` matrices may be factored straight from the stack (``_order_two``,
    ``_order_four``): the matrices lie one after another (``a_order``), a chunk is whole vectors, and what the call
    writes lies so too: the packed LU (``out_order``), or ``lu``'s pieces, C-ordered, of a real stack."""
    _, _, lower, upper, permutation = pieces
    if out.shape[0]:
        writes = out_order != NEITHER
    else:
        writes = (takes(a) and record_order(lower, order, order) == BY_ROWS
                  and record_order(upper, order, order) == BY_ROWS
                  and (permutation.shape[0] == 0 or record_order(permutation, order, order) == BY_ROWS))
    return writes and a_order != NEITHER and lanes % WIDTH == 0


@numba.njit(**JIT_OPTIONS, inline="always")
def _getrf_order_two(a, out, piv, info, pieces, spread_bytes, nonfinite, thread, start, stop, lanes):
    """:func:`_getrf_chunks` for 2 x 2 matrices: a full chunk whose matrices, and those it writes, lie one after
    another on vectors straight from the stack (:func:`._order_two.lu_chunk`; ``lu``'s pieces of a real stack only),
    any other in a buffer. The buffered chunk is inlined once (each copy adds to the kernel's compile time)."""
    a_order, out_order = record_order(a, 2, 2), record_order(out, 2, 2)
    direct = straight_from_stack(a, out, pieces, a_order, out_order, 2, lanes)
    owned = _chunk_buffers(a, pieces, 2, 2, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * lanes
        if not (direct and first + lanes <= a.shape[0]
                and lu_chunk(a, a_order, out, out_order, piv, info, pieces, first, lanes, True)):
            _getrf_chunk(a, out, piv, info, pieces, spread_bytes, False, nonfinite, thread, chunk, buffers, 2, 2, lanes)
    keep_alive(owned)


@numba.njit(**JIT_OPTIONS, inline="always")
def _getrf_order_four(a, out, piv, info, pieces, spread_bytes, nonfinite, thread, start, stop, lanes):
    """:func:`_getrf_chunks` for 4 x 4 matrices: a full chunk whose matrices, and the packed LU or ``lu``'s pieces
    (of a real stack) it writes, lie one after another on vectors straight from the stack
    (:func:`._order_four.lu_chunk`), any other in a buffer, inlined once as in :func:`_getrf_order_two`."""
    a_order, out_order = record_order(a, 4, 4), record_order(out, 4, 4)
    direct = straight_from_stack(a, out, pieces, a_order, out_order, 4, lanes)
    owned = _chunk_buffers(a, pieces, 4, 4, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * lanes
        whole = direct and first + lanes <= a.shape[0]
        if out.shape[0]:  # the packed LU's chunks and lu's pieces' apart: one call site each, as before the pieces
            whole = whole and order_four_chunk(a, a_order, out, out_order, piv, info, first, lanes)
        else:
            whole = whole and order_four_pieces(a, a_order, piv, info, pieces, first, lanes)
        if not whole:
            _getrf_chunk(a, out, piv, info, pieces, spread_bytes, False, nonfinite, thread, chunk, buffers, 4, 4, lanes)
    keep_alive(owned)


def small_orders_lanes(a):
    """Matrices per buffer of ``getrf_stack``'s versions compiled for orders 2, 3 and 4 in the dtype of ``a``
    (``_interleave.small_order_lanes``), as constants: the loops over ``SMALL_ORDER_LANES`` lanes for a real stack
    (unrolled over the matrix) below order 4, one vector (``WIDTH``) for a real one of order 4
    (:func:`_factor_vector`) and for a complex one, which runs on split vectors
    (:func:`_factor_split`; at n = 4 its factorization in cache took 42 ns a matrix against 95 for the loops over 32
    lanes, one thread)."""


@overload(small_orders_lanes, jit_options=JIT_OPTIONS)
def _small_orders_lanes_for(a):
    kind = "c" if isinstance(a.dtype, types.Complex) else "f"
    lanes = tuple(small_order_lanes("getrf", kind, order) for order in (2, 3, 4))
    return lambda a: lanes


@numba.njit(**JIT_OPTIONS)
def getrf_stack(a, out, piv, info, permute_l, rows, lower, upper, permutation, spread_bytes, stream, nonfinite, lanes,
                thread, threads):
    """Factorize every matrix of the 3-D stack ``a`` into ``out``; ``piv`` (batch, min(m, n)), ``info`` (batch,),
    ``REDO_INFO`` for a matrix whose factors hold an infinity or NaN. Where ``out`` is empty, SciPy's ``lu`` instead,
    written from the buffers without a packed LU in between: ``rows`` (batch, m), ``lower`` (batch, m, k), ``upper``
    (batch, k, n) and, unless empty, ``permutation`` (batch, m, m), as :func:`~._lu_pieces.plu_stack` (nothing for a
    matrix marked ``REDO_INFO``).
    Given a ``nonfinite`` flag per thread (else an empty array), a thread that meets an infinity or NaN in ``a``
    sets its own. A buffer of up to ``spread_bytes`` asks for the next chunk a slice a step
    (:func:`~._interleave.spreads_prefetch`); ``stream``: whole records written with streaming stores
    (:mod:`.streaming`). Square orders up to ``SMALL_ORDER`` in buffers of
    :func:`small_orders_lanes` run versions compiled for their sizes (given as constants, numba compiles one version
    each)."""
    a, out, piv, info, rows, lower, upper, permutation, nonfinite = borrowed(
        (a, out, piv, info, rows, lower, upper, permutation, nonfinite))
    batch, m, n = a.shape
    chunks = (batch + lanes - 1) // lanes
    lanes_2, lanes_3, lanes_4 = small_orders_lanes(a)
    pieces = (permute_l, rows, lower, upper, permutation)
    start, stop = chunk_range(thread, threads, chunks)
    if m == n == 2 and lanes == lanes_2:
        _getrf_order_two(a, out, piv, info, pieces, spread_bytes, nonfinite, thread, start, stop, lanes_2)
    elif m == n == 3 and lanes == lanes_3:
        _getrf_chunks(a, out, piv, info, pieces, spread_bytes, stream, nonfinite, thread, start, stop, 3, 3, lanes_3)
    elif m == n == 4 and lanes == lanes_4:
        _getrf_order_four(a, out, piv, info, pieces, spread_bytes, nonfinite, thread, start, stop, lanes_4)
    else:
        _getrf_chunks(a, out, piv, info, pieces, spread_bytes, stream, nonfinite, thread, start, stop, m, n, lanes)
    if stream:
        store_fence()
