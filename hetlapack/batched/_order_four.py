"""Stacks of 4 x 4 matrices LU-factored on SIMD vectors straight from the caller's stack, with no buffer between.

Where a stack's matrices lie one after another (C- or Fortran-ordered each), ``WIDTH`` of them are one load of
``16 x WIDTH`` numbers (twice that for complex ones) dealt into a vector per element (:func:`~._simd.load_records`),
factored in registers and written back the same way into the packed LU, or for ``lu`` of a real stack into its
pieces (the row places, ``L``, ``U`` and ``P``), as ``_order_two`` does at order 2. The
arithmetic is the buffered kernels', operation for operation: ``_lu._factor_vector``'s for real matrices (the
pivot's reciprocal by one division, each multiplier one product, each update one fused ``c - l u``),
``_lu._factor_split``'s for complex ones (pivots by ``|re| + |im|``, Smith's reciprocal, numba's complex product),
with the pivot rows exchanged across the lanes (:func:`~._simd.exchange_where`); so the results are the same bits
either way. A group that is not the common case (a pivot below the smallest normal number, twice that for complex
ones, where those kernels take pivots lane by lane; a factor that is not finite) sends the caller's whole chunk to
the buffered kernel. The pivot steps (:func:`pivot_first` and the next two), the loads and the group's store serve
the single-precision replay of order 4 too (``_lu_replay``), whose updates follow OpenBLAS's roundings instead.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from ._interleave import BY_COLUMNS, BY_ROWS, JIT_OPTIONS
from ._simd import (WIDTH, Vector, add, any_below, any_not_a_number, exchange_where, load_records, magnitude,
                    multiply, quotient, splat, store, store_records, subtract, subtract_product, where_greater)
from ._split_complex import product, reciprocal
from ._split_complex import subtract_product as subtract_complex_product


#: The options of the helpers below that take and return vectors only (no array, so no reference counts to save by
#: inlining them in numba's IR, as ``_interleave``'s note says of the helpers that take arrays): compiled once,
#: inlined by LLVM. Inlined in numba's IR they had made ``getrf``'s kernel compile in 160 s (float64) and 235 s
#: (complex128) instead of 131 and 145 without this module; by LLVM it takes 137 and 164 s.
_BY_LLVM = {"forceinline": True, "fastmath": {"contract"}, "error_model": "numpy"}


def _size(x):
    """A pivot candidate's magnitude: ``|x|`` for a real vector, ``|re| + |im|`` for a complex one (a pair of
    vectors: real parts, imaginary parts), as LAPACK's ``i?amax``."""


@overload(_size, jit_options=_BY_LLVM)
def _size_for(x):
    if isinstance(x, Vector):
        return lambda x: magnitude(x)
    return lambda x: add(magnitude(x[0]), magnitude(x[1]))


def _exchanged(rows, row, x, y):
    """``(x, y)`` exchanged in the lanes where the pivot ``rows`` equal ``row`` (a vector of that integer)."""


@overload(_exchanged, jit_options=_BY_LLVM)
def _exchanged_for(rows, row, x, y):
    if isinstance(x, Vector):
        return lambda rows, row, x, y: exchange_where(rows, row, x, y)

    def parts(rows, row, x, y):
        real = exchange_where(rows, row, x[0], y[0])
        imag = exchange_where(rows, row, x[1], y[1])
        return (real[0], imag[0]), (real[1], imag[1])
    return parts


def _scale(pivot):
    """What the column below ``pivot`` is multiplied by: its reciprocal, by one division (real) or Smith's
    (complex)."""


@overload(_scale, jit_options=_BY_LLVM)
def _scale_for(pivot):
    if isinstance(pivot, Vector):
        one = as_dtype(pivot.dtype).type(1.0)
        return lambda pivot: quotient(splat(one), pivot)
    return lambda pivot: reciprocal(pivot[0], pivot[1])


def _times(x, scale):
    """``x * scale``, rounded as the buffered kernels round it."""


@overload(_times, jit_options=_BY_LLVM)
def _times_for(x, scale):
    if isinstance(x, Vector):
        return lambda x, scale: multiply(x, scale)
    return lambda x, scale: product(x[0], x[1], scale[0], scale[1])


def _less(c, left, above):
    """``c - left * above``, rounded as the buffered kernels' update rounds it."""


@overload(_less, jit_options=_BY_LLVM)
def _less_for(c, left, above):
    if isinstance(c, Vector):
        return lambda c, left, above: subtract_product(left, above, c)
    return lambda c, left, above: subtract_complex_product(c[0], c[1], left[0], left[1], above[0], above[1])


def _nan_unless_finite(x):
    """``x - x``: 0 in the lanes where ``x`` is finite, NaN elsewhere (summed over a complex one's parts)."""


@overload(_nan_unless_finite, jit_options=_BY_LLVM)
def _nan_unless_finite_for(x):
    if isinstance(x, Vector):
        return lambda x: subtract(x, x)
    return lambda x: add(subtract(x[0], x[0]), subtract(x[1], x[1]))


def _least_pivot(a):
    """The smallest pivot magnitude the buffered kernel takes the reciprocal of on vectors, in the precision of
    ``a``: the smallest normal number (real), twice it (complex, whose magnitude is ``|re| + |im|``)."""


@overload(_least_pivot, jit_options=JIT_OPTIONS, inline="always")
def _least_pivot_for(a):
    tiny = np.finfo(as_dtype(a.dtype)).tiny
    least = tiny + tiny if isinstance(a.dtype, types.Complex) else tiny
    return lambda a: splat(least)


def rows_of(a, order, group):
    """The ``WIDTH`` matrices of ``a`` from matrix ``group`` on as four rows of four elements (vectors, or pairs of
    vectors of real and imaginary parts), from records laid by rows or by ``order`` ``BY_COLUMNS``."""


@overload(rows_of, jit_options=JIT_OPTIONS, inline="always")
def _rows_of_for(a, order, group):
    if isinstance(a.dtype, types.Complex):
        def pairs(a, order, group):
            v = load_records(a, 16 * group, 16)
            e = ((v[0], v[1]), (v[2], v[3]), (v[4], v[5]), (v[6], v[7]), (v[8], v[9]), (v[10], v[11]),
                 (v[12], v[13]), (v[14], v[15]), (v[16], v[17]), (v[18], v[19]), (v[20], v[21]), (v[22], v[23]),
                 (v[24], v[25]), (v[26], v[27]), (v[28], v[29]), (v[30], v[31]))
            return _arranged(order, e)
        return pairs
    return lambda a, order, group: _arranged(order, load_records(a, 16 * group, 16))


def _arranged(order, e):
    """A record's 16 elements ``e`` as four rows (its own inverse, with :func:`_flat`)."""


@overload(_arranged, jit_options=_BY_LLVM)
def _arranged_for(order, e):
    def arranged(order, e):
        if order == BY_COLUMNS:
            return ((e[0], e[4], e[8], e[12]), (e[1], e[5], e[9], e[13]), (e[2], e[6], e[10], e[14]),
                    (e[3], e[7], e[11], e[15]))
        return ((e[0], e[1], e[2], e[3]), (e[4], e[5], e[6], e[7]), (e[8], e[9], e[10], e[11]),
                (e[12], e[13], e[14], e[15]))
    return arranged


def _flat(order, rows):
    """:func:`_arranged`'s inverse: four rows as a record's 16 elements."""


@overload(_flat, jit_options=_BY_LLVM)
def _flat_for(order, rows):
    def flat(order, rows):
        if order == BY_COLUMNS:
            return (rows[0][0], rows[1][0], rows[2][0], rows[3][0], rows[0][1], rows[1][1], rows[2][1], rows[3][1],
                    rows[0][2], rows[1][2], rows[2][2], rows[3][2], rows[0][3], rows[1][3], rows[2][3], rows[3][3])
        return (rows[0][0], rows[0][1], rows[0][2], rows[0][3], rows[1][0], rows[1][1], rows[1][2], rows[1][3],
                rows[2][0], rows[2][1], rows[2][2], rows[2][3], rows[3][0], rows[3][1], rows[3][2], rows[3][3])
    return flat


def store_rows(out, order, group, rows):
    """:func:`rows_of`'s inverse: four rows into ``out``'s records from matrix ``group`` on."""


@overload(store_rows, jit_options=JIT_OPTIONS, inline="always")
def _store_rows_for(out, order, group, rows):
    if isinstance(out.dtype, types.Complex):
        def pairs(out, order, group, rows):
            e = _flat(order, rows)
            store_records(out, 16 * group, (
                e[0][0], e[0][1], e[1][0], e[1][1], e[2][0], e[2][1], e[3][0], e[3][1], e[4][0], e[4][1], e[5][0],
                e[5][1], e[6][0], e[6][1], e[7][0], e[7][1], e[8][0], e[8][1], e[9][0], e[9][1], e[10][0], e[10][1],
                e[11][0], e[11][1], e[12][0], e[12][1], e[13][0], e[13][1], e[14][0], e[14][1], e[15][0], e[15][1]))
        return pairs
    return lambda out, order, group, rows: store_records(out, 16 * group, _flat(order, rows))


def candidate(rows, best, x, row):
    """The pivot search's step at candidate ``x`` of row ``row``: its row and magnitude where it is larger than
    ``best`` (the first largest wins, as ``_lu.pivot_vector_rows`` searches)."""


@overload(candidate, jit_options=_BY_LLVM)
def _candidate_for(rows, best, x, row):
    def step(rows, best, x, row):
        size = _size(x)
        return where_greater(size, best, splat(np.int32(row)), rows), where_greater(size, best, size, best)
    return step


def swap(rows, row, top, other):
    """Rows ``top`` and ``other`` (number ``row``) exchanged, every element, in the lanes whose pivot ``rows`` is
    ``row``."""


@overload(swap, jit_options=_BY_LLVM)
def _swap_for(rows, row, top, other):
    def exchanged(rows, row, top, other):
        at = splat(np.int32(row))
        e0, f0 = _exchanged(rows, at, top[0], other[0])
        e1, f1 = _exchanged(rows, at, top[1], other[1])
        e2, f2 = _exchanged(rows, at, top[2], other[2])
        e3, f3 = _exchanged(rows, at, top[3], other[3])
        return (e0, e1, e2, e3), (f0, f1, f2, f3)
    return exchanged


def _eliminate(row, top, scale):
    """Row ``row`` after step 0: its multiplier (column 0 times ``scale``) in column 0, and ``row - multiplier *
    top`` right of it (:func:`_eliminate_right` for the later steps)."""


@overload(_eliminate, jit_options=_BY_LLVM)
def _eliminate_for(row, top, scale):
    def eliminate(row, top, scale):
        left = _times(row[0], scale)
        return left, _less(row[1], left, top[1]), _less(row[2], left, top[2]), _less(row[3], left, top[3])
    return eliminate


def _eliminate_right(row, top, scale):
    """:func:`_eliminate` on the three right columns of ``row`` and ``top`` (a step after the first), its first
    element kept."""


@overload(_eliminate_right, jit_options=_BY_LLVM)
def _eliminate_right_for(row, top, scale):
    def eliminate(row, top, scale):
        rest = _eliminate((row[1], row[2], row[3], row[3]), (top[1], top[2], top[3], top[3]), scale)
        return row[0], rest[0], rest[1], rest[2]
    return eliminate


def _nan_in_row(row):
    """The sum of ``x - x`` over a row's elements: NaN in the lanes where one is not finite, else 0."""


@overload(_nan_in_row, jit_options=_BY_LLVM)
def _nan_in_row_for(row):
    return lambda row: add(add(_nan_unless_finite(row[0]), _nan_unless_finite(row[1])),
                           add(_nan_unless_finite(row[2]), _nan_unless_finite(row[3])))


def _nan_in_rows(rows):
    """The sum of ``x - x`` over four rows' elements: NaN in the lanes where one is not finite, else 0."""


@overload(_nan_in_rows, jit_options=_BY_LLVM)
def _nan_in_rows_for(rows):
    return lambda rows: add(add(_nan_in_row(rows[0]), _nan_in_row(rows[1])),
                            add(_nan_in_row(rows[2]), _nan_in_row(rows[3])))


def pivot_first(r0, r1, r2, r3):
    """Step 0's partial pivoting: each lane's first row of largest magnitude in column 0 (``_lu.pivot_vector_rows``'
    rule), swapped into row 0; the pivot rows, their magnitudes and the four rows."""


@overload(pivot_first, jit_options=_BY_LLVM)
def _pivot_first_for(r0, r1, r2, r3):
    def first(r0, r1, r2, r3):
        rows, best = candidate(splat(np.int32(0)), _size(r0[0]), r1[0], 1)
        rows, best = candidate(rows, best, r2[0], 2)
        rows, best = candidate(rows, best, r3[0], 3)
        r0, r1 = swap(rows, 1, r0, r1)
        r0, r2 = swap(rows, 2, r0, r2)
        r0, r3 = swap(rows, 3, r0, r3)
        return rows, best, r0, r1, r2, r3
    return first


def pivot_second(r1, r2, r3):
    """:func:`pivot_first` at step 1, in column 1 of rows 1-3."""


@overload(pivot_second, jit_options=_BY_LLVM)
def _pivot_second_for(r1, r2, r3):
    def second(r1, r2, r3):
        rows, best = candidate(splat(np.int32(1)), _size(r1[1]), r2[1], 2)
        rows, best = candidate(rows, best, r3[1], 3)
        r1, r2 = swap(rows, 2, r1, r2)
        r1, r3 = swap(rows, 3, r1, r3)
        return rows, best, r1, r2, r3
    return second


def pivot_third(r2, r3):
    """:func:`pivot_first` at step 2, in column 2 of rows 2-3."""


@overload(pivot_third, jit_options=_BY_LLVM)
def _pivot_third_for(r2, r3):
    def third(r2, r3):
        rows, best = candidate(splat(np.int32(2)), _size(r2[2]), r3[2], 3)
        r2, r3 = swap(rows, 3, r2, r3)
        return rows, best, r2, r3
    return third


def stored(out, out_order, piv, info, group, rows, pivots, low) -> bool:
    """Write a factored group's four ``rows`` into ``out``'s records from matrix ``group`` on, its ``pivots`` (the
    first three steps'; the last is row 3) and ``info`` 0; nothing, and false, where ``low`` (a pivot the buffered
    kernel takes lane by lane) or a factor is not finite."""


@overload(stored, jit_options=JIT_OPTIONS, inline="always")
def _stored_for(out, out_order, piv, info, group, rows, pivots, low):
    def store_group(out, out_order, piv, info, group, rows, pivots, low):
        if not _pivots_stored(piv, info, group, rows, pivots, low):
            return False
        store_rows(out, out_order, group, rows)
        return True
    return store_group


def _pivots_stored(piv, info, group, rows, pivots, low) -> bool:
    """The check :func:`stored` and :func:`stored_pieces` share: false, nothing written, where ``low`` or a factor is
    not finite; else the group's ``pivots`` (the last step's is row 3) and ``info`` 0 written, and true."""


@overload(_pivots_stored, jit_options=JIT_OPTIONS, inline="always")
def _pivots_stored_for(piv, info, group, rows, pivots, low):
    def check_and_store(piv, info, group, rows, pivots, low):
        if low or any_not_a_number(_nan_in_rows(rows)):
            return False
        store_records(piv, 4 * group, (pivots[0], pivots[1], pivots[2], splat(np.int32(3))))
        store(info, group, splat(np.int32(0)))
        return True
    return check_and_store


def _pick(index, choices):
    """Lane by lane, ``choices[index]`` of four vectors, ``index`` a vector of integers 0-3."""


@overload(_pick, jit_options=_BY_LLVM)
def _pick_for(index, choices):
    def pick(index, choices):
        chosen = exchange_where(index, splat(np.int32(1)), choices[0], choices[1])[0]
        chosen = exchange_where(index, splat(np.int32(2)), chosen, choices[2])[0]
        return exchange_where(index, splat(np.int32(3)), chosen, choices[3])[0]
    return pick


def _row_places(pivots):
    """Each row of the matrix's place among the rows of ``L U`` (the column of its one in ``P``, ``A = P L U``) from
    the three steps' pivot ``rows``, as ``_lu_pieces._write_rows`` works it out lane by lane."""


@overload(_row_places, jit_options=_BY_LLVM)
def _row_places_for(pivots):
    def places(pivots):
        p0, p1, p2 = pivots
        o0, o1, o2, o3 = splat(np.int32(0)), splat(np.int32(1)), splat(np.int32(2)), splat(np.int32(3))
        o0, o1 = exchange_where(p0, splat(np.int32(1)), o0, o1)  # o[t]: the row of A at row t of L U
        o0, o2 = exchange_where(p0, splat(np.int32(2)), o0, o2)
        o0, o3 = exchange_where(p0, splat(np.int32(3)), o0, o3)
        o1, o2 = exchange_where(p1, splat(np.int32(2)), o1, o2)
        o1, o3 = exchange_where(p1, splat(np.int32(3)), o1, o3)
        o2, o3 = exchange_where(p2, splat(np.int32(3)), o2, o3)
        order = (o0, o1, o2, o3)
        return (_where_row(order, 0), _where_row(order, 1), _where_row(order, 2), _where_row(order, 3))
    return places


def _where_row(order, row):
    """The place ``t`` where ``order[t]`` is ``row``, lane by lane."""


@overload(_where_row, jit_options=_BY_LLVM)
def _where_row_for(order, row):
    def where(order, row):
        at = splat(np.int32(row))
        place = exchange_where(order[1], at, splat(np.int32(0)), splat(np.int32(1)))[0]
        place = exchange_where(order[2], at, place, splat(np.int32(2)))[0]
        return exchange_where(order[3], at, place, splat(np.int32(3)))[0]
    return where


def stored_pieces(pieces, piv, info, group, rows, pivots, low) -> bool:
    """:func:`stored` for SciPy's ``lu`` of a real stack: a factored group's ``pieces`` (``permute_l``, the row
    places, ``L``, ``U`` and ``P`` unless empty, as ``_lu_pieces.write_plu`` writes them, each C-ordered) from its four
    ``rows`` and ``pivots``, with ``piv`` and ``info``; nothing, and false, where ``low`` or a factor is not
    finite."""


@overload(stored_pieces, jit_options=JIT_OPTIONS, inline="always")
def _stored_pieces_for(pieces, piv, info, group, rows, pivots, low):
    if isinstance(pieces[2].dtype, types.Complex):  # complex stacks' pieces are the buffered kernel's
        return lambda pieces, piv, info, group, rows, pivots, low: False

    def store_group(pieces, piv, info, group, rows, pivots, low):
        if not _pivots_stored(piv, info, group, rows, pivots, low):
            return False
        permute_l, places, lower, upper, permutation = pieces
        r0, r1, r2, r3 = rows
        unit, nought = splat(upper.dtype.type(1.0)), splat(upper.dtype.type(0.0))
        w = _row_places(pivots)
        store_records(places, 4 * group, w)
        l0, l1 = (unit, nought, nought, nought), (r1[0], unit, nought, nought)
        l2, l3 = (r2[0], r2[1], unit, nought), (r3[0], r3[1], r3[2], unit)
        if permute_l:  # P L: row i is L's row w[i]
            l0, l1, l2, l3 = (_picked_row(w[0], l0, l1, l2, l3), _picked_row(w[1], l0, l1, l2, l3),
                              _picked_row(w[2], l0, l1, l2, l3), _picked_row(w[3], l0, l1, l2, l3))
        store_records(lower, 16 * group, _flat(BY_ROWS, (l0, l1, l2, l3)))
        u1, u2, u3 = (nought, r1[1], r1[2], r1[3]), (nought, nought, r2[2], r2[3]), (nought, nought, nought, r3[3])
        store_records(upper, 16 * group, _flat(BY_ROWS, (r0, u1, u2, u3)))
        if permutation.shape[0]:
            p_rows = (_one_at(w[0], unit, nought), _one_at(w[1], unit, nought), _one_at(w[2], unit, nought),
                      _one_at(w[3], unit, nought))
            store_records(permutation, 16 * group, _flat(BY_ROWS, p_rows))
        return True
    return store_group


def _picked_row(index, l0, l1, l2, l3):
    """Lane by lane, row ``index`` (a vector of integers 0-3) of the four rows."""


@overload(_picked_row, jit_options=_BY_LLVM)
def _picked_row_for(index, l0, l1, l2, l3):
    def picked(index, l0, l1, l2, l3):
        return (_pick(index, (l0[0], l1[0], l2[0], l3[0])), _pick(index, (l0[1], l1[1], l2[1], l3[1])),
                _pick(index, (l0[2], l1[2], l2[2], l3[2])), _pick(index, (l0[3], l1[3], l2[3], l3[3])))
    return picked


def _one_at(place, unit, nought):
    """A row of ``P``: ``unit`` in column ``place`` (lane by lane), ``nought`` elsewhere."""


@overload(_one_at, jit_options=_BY_LLVM)
def _one_at_for(place, unit, nought):
    def row(place, unit, nought):
        return (exchange_where(place, splat(np.int32(0)), nought, unit)[0],
                exchange_where(place, splat(np.int32(1)), nought, unit)[0],
                exchange_where(place, splat(np.int32(2)), nought, unit)[0],
                exchange_where(place, splat(np.int32(3)), nought, unit)[0])
    return row


def _factored_group(a, a_order, group, least):
    """getf2 on the ``WIDTH`` matrices of ``a`` from matrix ``group`` on, in registers: the four rows of their
    packed LU, the three steps' pivot rows, and whether a pivot's magnitude fell below ``least``."""


@overload(_factored_group, jit_options=JIT_OPTIONS, inline="always")
def _factored_group_for(a, a_order, group, least):
    def factored(a, a_order, group, least):
        p0, best, r0, r1, r2, r3 = pivot_first(*rows_of(a, a_order, group))
        low = any_below(best, least)
        scale = _scale(r0[0])
        r1, r2, r3 = _eliminate(r1, r0, scale), _eliminate(r2, r0, scale), _eliminate(r3, r0, scale)
        p1, best, r1, r2, r3 = pivot_second(r1, r2, r3)
        low |= any_below(best, least)
        scale = _scale(r1[1])
        r2, r3 = _eliminate_right(r2, r1, scale), _eliminate_right(r3, r1, scale)
        p2, best, r2, r3 = pivot_third(r2, r3)
        low |= any_below(best, least)
        below = _eliminate_right((r3[1], r3[2], r3[3], r3[3]), (r2[1], r2[2], r2[3], r2[3]), _scale(r2[2]))
        r3 = (r3[0], below[0], below[1], below[2])
        low |= any_below(_size(r3[3]), least)
        return (r0, r1, r2, r3), (p0, p1, p2), low
    return factored


def lu_chunk(a, a_order, out, out_order, piv, info, first, count) -> bool:
    """getf2 on matrices ``first`` to ``first + count`` (a multiple of ``WIDTH``) of the 4 x 4 stack ``a``,
    ``WIDTH`` at a time, into ``piv`` (0-based), ``info`` and the packed LU ``out``; false at the first group that is
    not the common case, which it leaves unwritten."""


@overload(lu_chunk, jit_options=JIT_OPTIONS, inline="always")
def _lu_chunk_for(a, a_order, out, out_order, piv, info, first, count):
    def lu_groups(a, a_order, out, out_order, piv, info, first, count):
        least = _least_pivot(a)
        for group in range(first, first + count, WIDTH):
            rows, pivots, low = _factored_group(a, a_order, group, least)
            if not stored(out, out_order, piv, info, group, rows, pivots, low):
                return False
        return True
    return lu_groups


def lu_pieces_chunk(a, a_order, piv, info, pieces, first, count) -> bool:
    """:func:`lu_chunk` into SciPy's ``lu``'s ``pieces`` (:func:`stored_pieces`; real stacks only) instead of the
    packed LU."""


@overload(lu_pieces_chunk, jit_options=JIT_OPTIONS, inline="always")
def _lu_pieces_chunk_for(a, a_order, piv, info, pieces, first, count):
    def lu_groups(a, a_order, piv, info, pieces, first, count):
        least = _least_pivot(a)
        for group in range(first, first + count, WIDTH):
            rows, pivots, low = _factored_group(a, a_order, group, least)
            if not stored_pieces(pieces, piv, info, group, rows, pivots, low):
                return False
        return True
    return lu_groups
