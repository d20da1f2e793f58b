"""Stacks of 2 x 2 matrices factored on SIMD vectors straight from the caller's stack, with no buffer between.

Where a stack's matrices lie one after another (C- or Fortran-ordered each), ``WIDTH`` of them are one load of
``4 x WIDTH`` numbers dealt into a vector per element (:func:`~._simd.load_records`), factored in registers and
written back the same way: at order 2 the interleaved kernels' copies into and out of their buffers, their loops
over the lanes and their bookkeeping per chunk cost several times the arithmetic. Each group of ``WIDTH`` matrices
is the common case or nothing: a zero or subnormal pivot, a factor that is not finite or an exactly singular ``U``
sends the caller's whole chunk to the interleaved kernel, which computes the same roundings in the same order, so
the results are the same bits either way. Real stacks take every factorization here; complex ones take
``lu_factor``'s packed LU, on vectors of real and of imaginary parts in the split kernel's roundings
(``_lu._factor_split``). Single-precision LU takes OpenBLAS's roundings instead (``_lu_replay``'s, whose buffered
kernel then takes what is not the common case).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from ._interleave import BY_COLUMNS, JIT_OPTIONS, smallest_normal
from ._split_complex import product, reciprocal
from ._split_complex import subtract_product as subtract_complex_product
from ._simd import (WIDTH, add, add_rounded_product, any_below, any_not_a_number, any_zero, copy_sign, load_records,
                    magnitude, multiply, negative, quotient, splat, square_root, store, store_records, subtract,
                    subtract_product, subtract_rounded_product, where_greater)


def takes(a) -> bool:
    """Whether every kernel here factors a stack of the dtype of ``a`` (real ones; complex ones only
    :func:`lu_chunk`'s packed LU): a caller that is told no sends all its chunks to the interleaved kernel in one
    call, whose buffers are made once, not once a chunk. (The Cholesky's and QR's complex versions, which answer
    false at once, exist so that a caller's guarded call compiles.)"""


@overload(takes, jit_options=JIT_OPTIONS, inline="always")
def _takes_for(a):
    real = not isinstance(a.dtype, types.Complex)
    return lambda a: real


@numba.njit(**JIT_OPTIONS, inline="always")
def _as_rows(order, e0, e1, e2, e3):
    """A matrix's four elements (vectors) as they lie in a record, by rows or by columns, in the order ``[0, 0],
    [0, 1], [1, 0], [1, 1]``; its own inverse. Every helper called per group takes and returns vectors, no arrays:
    an array passed into code inlined in a loop is counted and released (two atomic operations) at each pass."""
    if order == BY_COLUMNS:
        return e0, e2, e1, e3
    return e0, e1, e2, e3


@numba.njit(**JIT_OPTIONS, inline="always")
def _not_finite(a, b, c, d):
    """Whether any lane of the four vectors holds an infinity or NaN (``x - x`` is NaN there, 0 elsewhere)."""
    return any_not_a_number(add(add(subtract(a, a), subtract(b, b)), add(subtract(c, c), subtract(d, d))))


@numba.njit(**JIT_OPTIONS, inline="always")
def _lu_vectors(a00, a01, a10, a11, unit, tiny, fused):
    """getf2 on ``WIDTH`` matrices in the interleaved kernel's roundings (the pivot's reciprocal, the multiplier, one
    fused update; ``unit`` is a vector of ones), or where not ``fused`` in OpenBLAS's (``sgetf2``'s update rounds the
    product, then subtracts it, on its SkylakeX and Haswell kernels alike: ``_lu_replay``): whether each is the
    common case (no pivot zero or below ``tiny``, every factor finite, ``U[1, 1]`` not zero), the packed LU's four
    elements, and the magnitudes whose comparison chose the pivot (rows were swapped where the second is
    greater)."""
    size0, size1 = magnitude(a00), magnitude(a10)
    pivot = where_greater(size1, size0, a10, a00)  # the first largest magnitude, as i?amax
    right = where_greater(size1, size0, a11, a01)
    multiplier = multiply(where_greater(size1, size0, a00, a10), quotient(unit, pivot))
    other = where_greater(size1, size0, a01, a11)
    last = subtract_product(multiplier, right, other) if fused else subtract_rounded_product(multiplier, right, other)
    usual = not (any_below(magnitude(pivot), tiny) or any_zero(last)
                 or _not_finite(pivot, right, multiplier, last))
    return usual, pivot, right, multiplier, last, size0, size1


@numba.njit(**JIT_OPTIONS, inline="always")
def _chosen(swapped, pair, other):
    """The complex vector ``pair`` (real parts, imaginary parts), or ``other`` in the lanes ``swapped`` (a
    :func:`where_greater`'s operands) names."""
    size1, size0 = swapped
    return where_greater(size1, size0, other[0], pair[0]), where_greater(size1, size0, other[1], pair[1])


@numba.njit(**JIT_OPTIONS, inline="always")
def _complex_lu_vectors(a00, a01, a10, a11, two_tiny):
    """getf2 on ``WIDTH`` complex matrices (each element a pair of vectors: real parts, imaginary parts) in the
    split kernel's roundings (``_lu._pivot_split_column`` and ``_update_split_column`` at order 2: the pivot by
    ``|re| + |im|``, the multiplier by the pivot's Smith reciprocal, one complex product subtracted): whether each is
    the common case (both pivots' ``|re| + |im|`` at least twice the smallest normal number, where that kernel takes
    reciprocals on vectors and ``U`` is not singular, and every factor finite), the packed LU's four elements, and
    the magnitudes whose comparison chose the pivot (rows were swapped where the second is greater)."""
    size0 = add(magnitude(a00[0]), magnitude(a00[1]))
    size1 = add(magnitude(a10[0]), magnitude(a10[1]))
    swapped = (size1, size0)
    pivot, right = _chosen(swapped, a00, a10), _chosen(swapped, a01, a11)
    below, below_right = _chosen(swapped, a10, a00), _chosen(swapped, a11, a01)
    scale = reciprocal(pivot[0], pivot[1])
    multiplier = product(below[0], below[1], scale[0], scale[1])
    last = subtract_complex_product(below_right[0], below_right[1], multiplier[0], multiplier[1], right[0], right[1])
    usual = not (any_below(where_greater(size1, size0, size1, size0), two_tiny)
                 or any_below(add(magnitude(last[0]), magnitude(last[1])), two_tiny)
                 or _not_finite(pivot[0], pivot[1], right[0], right[1])
                 or _not_finite(multiplier[0], multiplier[1], last[0], last[1]))
    return usual, pivot, right, multiplier, last, size0, size1


def lu_chunk(a, a_order, out, out_order, piv, info, pieces, first, count, fused) -> bool:
    """getf2 on matrices ``first`` to ``first + count`` (a multiple of ``WIDTH``) of ``a``, ``WIDTH`` at a time
    (real ones in the roundings ``fused`` names, :func:`_lu_vectors`), into ``piv`` (0-based), ``info`` and the
    packed LU ``out``, or where ``out`` is empty into SciPy's ``lu``'s ``pieces`` (``permute_l``, the row indices,
    ``L``, ``U`` and ``P`` unless empty, as ``_lu_pieces.write_plu``, each C-ordered; real stacks only); false at the
    first group that is not the common case (:func:`_lu_vectors`, :func:`_complex_lu_vectors`), which it leaves
    unwritten."""


def _complex_lu_groups(a, a_order, out, out_order, piv, info, pieces, first, count, fused):
    """:func:`lu_chunk` for a complex stack, into the packed LU (``out`` not empty)."""
    tiny = smallest_normal(a)  # a complex dtype's: its parts' precision
    two_tiny = splat(tiny + tiny)
    one, zero = splat(np.int32(1)), splat(np.int32(0))
    for group in range(first, first + count, WIDTH):
        r0, i0, r1, i1, r2, i2, r3, i3 = load_records(a, 4 * group, 4)
        a00, a01, a10, a11 = _as_rows(a_order, (r0, i0), (r1, i1), (r2, i2), (r3, i3))
        usual, u00, u01, l10, u11, size0, size1 = _complex_lu_vectors(a00, a01, a10, a11, two_tiny)
        if not usual:
            return False
        e0, e1, e2, e3 = _as_rows(out_order, u00, u01, l10, u11)
        store_records(out, 4 * group, (e0[0], e0[1], e1[0], e1[1], e2[0], e2[1], e3[0], e3[1]))
        store_records(piv, 2 * group, (where_greater(size1, size0, one, zero), one))
        store(info, group, zero)
    return True


@overload(lu_chunk, jit_options=JIT_OPTIONS, inline="always")
def _lu_chunk_for(a, a_order, out, out_order, piv, info, pieces, first, count, fused):
    if isinstance(a.dtype, types.Complex):
        return _complex_lu_groups

    def lu_groups(a, a_order, out, out_order, piv, info, pieces, first, count, fused):
        unit, nought, tiny = splat(a.dtype.type(1.0)), splat(a.dtype.type(0.0)), splat(smallest_normal(a))
        one, zero = splat(np.int32(1)), splat(np.int32(0))
        permute_l, rows, lower, upper, permutation = pieces
        for group in range(first, first + count, WIDTH):
            e0, e1, e2, e3 = load_records(a, 4 * group, 4)
            a00, a01, a10, a11 = _as_rows(a_order, e0, e1, e2, e3)
            usual, u00, u01, l10, u11, size0, size1 = _lu_vectors(a00, a01, a10, a11, unit, tiny, fused)
            if not usual:
                return False
            swapped = where_greater(size1, size0, one, zero)
            if out.shape[0]:
                store_records(out, 4 * group, _as_rows(out_order, u00, u01, l10, u11))
            else:
                store_records(rows, 2 * group, (swapped, where_greater(size1, size0, zero, one)))
                if permute_l:  # P L: L's rows in the order of A's
                    store_records(lower, 4 * group, (where_greater(size1, size0, l10, unit),
                                                     where_greater(size1, size0, unit, nought),
                                                     where_greater(size1, size0, unit, l10),
                                                     where_greater(size1, size0, nought, unit)))
                else:
                    store_records(lower, 4 * group, (unit, nought, l10, unit))
                store_records(upper, 4 * group, (u00, u01, nought, u11))
                if permutation.shape[0]:
                    kept, moved = where_greater(size1, size0, nought, unit), where_greater(size1, size0, unit, nought)
                    store_records(permutation, 4 * group, (kept, moved, moved, kept))
            store_records(piv, 2 * group, (swapped, one))
            store(info, group, zero)
        return True

    return lu_groups


@numba.njit(**JIT_OPTIONS, inline="always")
def _cholesky_vectors(a00, a10, a11, unit, tiny):
    """potf2 in lower form on ``WIDTH`` matrices in the interleaved kernel's roundings (the root's reciprocal, the
    scaled column, one fused update; ``unit`` is a vector of ones): whether each is the common case (both diagonals
    at least ``tiny`` before their roots, or NaN: a NaN runs through, as in LAPACK), and ``L``'s three elements."""
    root0 = square_root(a00)
    below = multiply(a10, quotient(unit, root0))
    last = subtract_product(below, below, a11)
    usual = not (any_below(a00, tiny) or any_below(last, tiny))
    return usual, root0, below, square_root(last)


def potrf_chunk(a, a_order, lower, clean, out, out_order, info, check, first, count) -> bool:
    """Cholesky of matrices ``first`` to ``first + count`` (a multiple of ``WIDTH``) of ``a``, ``WIDTH`` at a time,
    into ``out`` and ``info`` as ``_cholesky.potrf_stack`` writes them (the ``lower`` factor, else the upper; the
    other triangle zero if ``clean``, else the input's); false at the first group that is not the common case
    (:func:`_cholesky_vectors`), or that holds an infinity or NaN where ``check`` (SciPy's ``check_finite``, left to
    the interleaved kernel to flag), which it leaves unwritten, and for a complex stack."""


@overload(potrf_chunk, jit_options=JIT_OPTIONS, inline="always")
def _potrf_chunk_for(a, a_order, lower, clean, out, out_order, info, check, first, count):
    if isinstance(a.dtype, types.Complex):
        return lambda a, a_order, lower, clean, out, out_order, info, check, first, count: False

    def potrf_groups(a, a_order, lower, clean, out, out_order, info, check, first, count):
        unit, nought, tiny = splat(a.dtype.type(1.0)), splat(a.dtype.type(0.0)), splat(smallest_normal(a))
        zero = splat(np.int32(0))
        for group in range(first, first + count, WIDTH):
            e0, e1, e2, e3 = load_records(a, 4 * group, 4)
            a00, a01, a10, a11 = _as_rows(a_order, e0, e1, e2, e3)
            if check and _not_finite(a00, a01, a10, a11):
                return False
            usual, root0, below, root1 = _cholesky_vectors(a00, a10 if lower else a01, a11, unit, tiny)
            if not usual:
                return False
            if lower:
                store_records(out, 4 * group, _as_rows(out_order, root0, nought if clean else a01, below, root1))
            else:
                store_records(out, 4 * group, _as_rows(out_order, root0, below, nought if clean else a10, root1))
            store(info, group, zero)
        return True

    return potrf_groups


@numba.njit(**JIT_OPTIONS, inline="always")
def _qr_vectors(a00, a01, a10, a11, unit, nought, safmin, largest):
    """geqr2 and org2r on ``WIDTH`` matrices in the interleaved kernel's roundings (``_qr._factor_vector`` and
    ``_qr._build_q_vector`` at order 2: larfg from the plain sum of squares, each product and sum as there):
    whether each is the common case (larfg's sum of squares neither zero nor beyond ``safmin`` and ``largest``,
    where it scales), ``Q``'s four elements and ``R``'s upper three."""
    sums = add_rounded_product(nought, a10, a10)
    total = add_rounded_product(sums, a00, a00)
    beta = negative(copy_sign(square_root(total), a00))
    tau = quotient(subtract(beta, a00), beta)
    reflector = multiply(a10, quotient(unit, subtract(a00, beta)))
    usual = not (any_zero(sums) or any_below(total, safmin) or any_below(largest, total)
                 or any_not_a_number(total))
    dot = add_rounded_product(a01, reflector, a11)
    r01 = subtract_rounded_product(dot, tau, a01)
    r11 = subtract_rounded_product(reflector, multiply(dot, tau), a11)
    q_dot = add_rounded_product(nought, reflector, unit)
    q01 = subtract_rounded_product(q_dot, tau, nought)
    q11 = subtract_rounded_product(reflector, multiply(q_dot, tau), unit)
    q00 = subtract_rounded_product(unit, tau, unit)
    q10 = multiply(negative(tau), reflector)
    return usual, q00, q01, q10, q11, beta, r01, r11


def _larfg_limits(a):
    """``_qr._limits`` for the precision of ``a``: larfg's safe minimum and the largest finite number, as constants."""


@overload(_larfg_limits, jit_options=JIT_OPTIONS, inline="always")
def _larfg_limits_for(a):
    limits = np.finfo(as_dtype(a.dtype))
    safmin, largest = float(limits.tiny / (limits.eps / 2)), float(limits.max)
    return lambda a: (safmin, largest)


def qr_chunk(a, a_order, q, q_order, r, check, first, count) -> bool:
    """``Q`` and ``R`` (C-ordered) of matrices ``first`` to ``first + count`` (a multiple of ``WIDTH``) of ``a``,
    ``WIDTH`` at a time, as ``_qr.qr_stack`` writes them; false at the first group that is not the common case
    (:func:`_qr_vectors`), or that holds an infinity or NaN where ``check`` (left to the interleaved kernel to
    flag), which it leaves unwritten, and for a complex stack."""


@overload(qr_chunk, jit_options=JIT_OPTIONS, inline="always")
def _qr_chunk_for(a, a_order, q, q_order, r, check, first, count):
    if isinstance(a.dtype, types.Complex):
        return lambda a, a_order, q, q_order, r, check, first, count: False

    def qr_groups(a, a_order, q, q_order, r, check, first, count):
        unit, nought = splat(a.dtype.type(1.0)), splat(a.dtype.type(0.0))
        safmin, largest = _larfg_limits(a)
        safmin, largest = splat(a.dtype.type(safmin)), splat(a.dtype.type(largest))
        for group in range(first, first + count, WIDTH):
            e0, e1, e2, e3 = load_records(a, 4 * group, 4)
            a00, a01, a10, a11 = _as_rows(a_order, e0, e1, e2, e3)
            if check and _not_finite(a00, a01, a10, a11):
                return False
            usual, q00, q01, q10, q11, r00, r01, r11 = _qr_vectors(a00, a01, a10, a11, unit, nought, safmin, largest)
            if not usual:
                return False
            store_records(q, 4 * group, _as_rows(q_order, q00, q01, q10, q11))
            store_records(r, 4 * group, (r00, r01, nought, r11))
        return True

    return qr_groups
