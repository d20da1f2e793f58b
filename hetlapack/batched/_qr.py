"""Compiled batched Householder QR (``geqrf``) and explicit Q (``orgqr``) over the interleaved chunk layout.

The reflectors follow LAPACK's ``larfg`` convention exactly (``beta = -sign(Re alpha) ||(alpha, x)||``,
``tau = (beta - alpha) / beta``, ``v = x / (alpha - beta)``, ``tau = 0`` when ``x = 0`` and ``alpha`` is real, a
scaled norm and larfg's rescaling where the plain one would over- or underflow), so ``R``'s signs and the stored
reflectors match SciPy's. ``geqr2`` applies ``H^H`` to the trailing columns; ``org2r``
accumulates ``Q = H_0 H_1 ... H_{k-1}`` backwards from the identity; both apply their reflectors two at a time, each
column read twice and written once per pair (a block of two, LAPACK's compact WY with ``T`` of order 2), the loops
over the lanes and the SIMD vectors in the same order of roundings. ``qr_stack`` does both on one gathered chunk
and writes ``Q`` and ``R`` directly: the reflectors never leave the cache, so main memory sees one read of ``A``
and one write of each result instead of the five passes of ``geqrf``, ``orgqr`` and a separate ``triu``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ..machine import vector_bytes
from ._borrowed import borrowed, keep_alive
from ._interleave import (BY_ROWS, JIT_OPTIONS, NEITHER, WIDE_LANES, chunk_buffer, chunk_range, divide, flag_poisoned,
                          gather, on_cache_lines, prefetch_slice, record_order, scatter, spreads_prefetch)
from ._order_two import qr_chunk, takes
from ._simd import (WIDTH, add_rounded_product, any_below, copy_sign, load, multiply, negative, quotient, splat,
                    square_root, store, subtract, subtract_rounded_product, where_at_least, where_at_most,
                    where_greater)
from ._transpose import store_fence


#: Rows of lanes the loops over the lanes work in: a pair's two scales, its coupling and its two dot products.
WORK_ROWS = 5

#: Columns a pass of a pair of reflectors holds the dot products of in registers (``_reflect_columns_by_pair``):
#: four where a vector of ``WIDTH`` lanes is one register (AVX-512's 32), two where it takes two (AVX2's 16, which
#: four columns' eight dot products fill alone). Measured with every library pinned to AVX2 code on a 2-core Zen 5
#: EPYC (stop 99; ``kernels.qr`` float64, 2 threads, full Q and R / R alone, best of 9, ns a matrix, four / two
#: columns a pass, bitwise the same): n = 24 773-858 / 645-761 and 383-404 / 351-359, n = 32 1,789-1,832 /
#: 1,566-1,613 and 946-992 / 871-886, n = 64 12,303-12,311 / 10,245-11,659; n = 16 within the spread.
PASS_COLUMNS = 4 if vector_bytes() >= 64 else 2

@numba.njit(**JIT_OPTIONS, inline="always")
def _column_norm(buf, k, lane):
    """``||buf[k + 1:, k, lane]||`` without overflow or underflow, NaN where an entry is NaN and else infinite
    where one is (LAPACK's ``nrm2``)."""
    scale = 0.0
    for i in range(k + 1, buf.shape[0]):
        for part in (abs(buf[i, k, lane].real), abs(buf[i, k, lane].imag)):
            if part > scale or part != part:  # a NaN stays, as max() would drop it
                scale = part
    if scale == 0.0 or math.isinf(scale):
        return scale
    total = 0.0
    for i in range(k + 1, buf.shape[0]):
        total += (buf[i, k, lane].real / scale) ** 2 + (buf[i, k, lane].imag / scale) ** 2
    return scale * math.sqrt(total)


@numba.njit(**JIT_OPTIONS, inline="always")
def _larfg_scaled(buf, k, lane, tau, dots, safmin):
    """LAPACK's ``larfg`` for column ``k`` of one lane whose plain sum of squares is zero, over- or underflowed: a
    scaled norm, and below ``safmin`` the column and ``alpha`` scaled up (at most 20 times) until ``beta`` is not
    tiny. Sets ``tau``, ``dots[lane]`` (the factor that makes ``v``) and the diagonal."""
    alpha = buf[k, k, lane]
    norm = _column_norm(buf, k, lane)
    if norm == 0.0 and alpha.imag == 0.0:
        tau[k, lane] = 0.0
        dots[lane] = 0.0
        return
    beta = -math.copysign(math.hypot(abs(alpha), norm), alpha.real)
    rescaled = 0
    while abs(beta) < safmin and rescaled < 20:
        rescaled += 1
        for i in range(k + 1, buf.shape[0]):
            buf[i, k, lane] /= safmin
        alpha /= safmin
        beta /= safmin
    if rescaled:
        beta = -math.copysign(math.hypot(abs(alpha), _column_norm(buf, k, lane)), alpha.real)
    tau[k, lane] = divide(beta - alpha, beta)
    dots[lane] = divide(1.0, alpha - beta)
    for _ in range(rescaled):
        beta *= safmin
    buf[k, k, lane] = beta


@numba.njit(**JIT_OPTIONS, inline="always")
def _limits(norm):
    """LAPACK's safe minimum for ``larfg`` (``dlamch('S') / dlamch('E')``) and the largest finite number, in the
    precision of ``norm``: read once per chunk (``np.finfo`` per column cost 15 ns a matrix at order 2)."""
    limits = np.finfo(norm.dtype)
    return limits.tiny / (limits.eps / 2), limits.max


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflectors(buf, k, tau, norm, dots, safmin, largest):
    """Each lane's reflector of column ``k`` from ``norm[lane]``, the plain sum of squares below the diagonal: its
    ``tau``, ``beta`` on the diagonal and in ``dots[lane]`` the factor that makes ``v`` from the column. A lane
    whose sum is zero, overflows (beyond ``largest``) or is small enough to have lost digits to underflow (below
    ``safmin``) takes :func:`_larfg_scaled`."""
    lanes = buf.shape[2]
    if k == buf.shape[0] - 1:  # nothing below the diagonal: H = I where alpha is real, as _larfg_scaled makes it
        for lane in range(lanes):
            if buf[k, k, lane].imag == 0.0:
                tau[k, lane] = 0.0
                dots[lane] = 0.0
            else:
                _larfg_scaled(buf, k, lane, tau, dots, safmin)
        return
    rare = 0
    for lane in range(lanes):  # rare lanes are only marked here, so that this stays one SIMD loop over the lanes
        alpha = buf[k, k, lane]
        total = alpha.real ** 2 + alpha.imag ** 2 + norm[lane]
        plain = norm[lane] != 0.0 and safmin <= total <= largest
        rare += not plain
        beta = -math.copysign(math.sqrt(total), alpha.real)
        # every store unconditional (a rare lane's alpha kept in its tau until _larfg_scaled replaces it): the
        # compiler vectorizes a store of beta or the element's own value as masked stores, microcode on AVX2
        tau[k, lane] = divide(beta - alpha, beta) if plain else alpha
        dots[lane] = divide(1.0, alpha - beta)
        buf[k, k, lane] = beta
        norm[lane] = 1.0 if plain else -1.0
    if rare:
        for lane in range(lanes):
            if norm[lane] < 0.0:
                buf[k, k, lane] = tau[k, lane]
                _larfg_scaled(buf, k, lane, tau, dots, safmin)


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflectors_vector(buf, k, tau, norm, dots, safmin, largest):
    """:func:`_reflectors` for a buffer of one vector of real matrices, on ``_simd`` vectors: the same operations,
    lane by lane, with the rare lanes (a sum of zero, beyond ``largest`` or below ``safmin``) left to
    :func:`_larfg_scaled`."""
    at = (k * buf.shape[1] + k) * WIDTH
    zero = splat(buf.dtype.type(0.0))
    if k == buf.shape[0] - 1:  # nothing below the diagonal: H = I, as in _reflectors
        store(tau, k * WIDTH, zero)
        store(dots, 0, zero)
        return
    alpha, sums = load(buf, at), load(norm, 0)
    total = add_rounded_product(sums, alpha, alpha)
    beta = negative(copy_sign(square_root(total), alpha))
    one = splat(buf.dtype.type(1.0))
    store(tau, k * WIDTH, quotient(subtract(beta, alpha), beta))
    store(dots, 0, quotient(one, subtract(alpha, beta)))
    # safmin and largest are numbers of the buffer's precision, so exact in it
    plain = where_greater(sums, zero, where_at_least(total, splat(buf.dtype.type(safmin)), where_at_most(
        total, splat(buf.dtype.type(largest)), one, zero), zero), zero)
    store(buf, at, where_greater(plain, zero, beta, alpha))
    if any_below(plain, one):
        store(norm, 0, where_greater(plain, zero, sums, splat(buf.dtype.type(-1.0))))
        for lane in range(WIDTH):
            if norm[lane] < 0.0:
                _larfg_scaled(buf, k, lane, tau, dots, safmin)


@numba.njit(**JIT_OPTIONS, inline="always")
def _column_reflector(buf, k, tau, norm, dots, safmin, largest):
    """Column ``k``'s reflector in every lane (:func:`_reflectors` from the plain sum of squares below the
    diagonal), ``v`` stored below the diagonal."""
    m, lanes = buf.shape[0], buf.shape[2]
    for lane in range(lanes):
        norm[lane] = 0.0
    for i in range(k + 1, m):
        for lane in range(lanes):
            norm[lane] += buf[i, k, lane].real ** 2 + buf[i, k, lane].imag ** 2
    _reflectors(buf, k, tau, norm, dots, safmin, largest)
    for i in range(k + 1, m):
        for lane in range(lanes):
            buf[i, k, lane] *= dots[lane]


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_column(target, reflectors, top, column, scale, j, dots):
    """``target[top:, j] -= v * (scale * (v^H target[top:, j]))`` in every lane, ``v`` the reflector in
    ``reflectors[top:, column]`` (``v[top] = 1``): ``H^H`` applied where ``scale`` is ``conj(tau)``, ``H`` where it
    is ``tau``."""
    m, lanes = target.shape[0], target.shape[2]
    for lane in range(lanes):
        dots[lane] = target[top, j, lane]
    for i in range(top + 1, m):
        for lane in range(lanes):
            dots[lane] += np.conj(reflectors[i, column, lane]) * target[i, j, lane]
    for lane in range(lanes):
        dots[lane] *= scale[lane]
        target[top, j, lane] -= dots[lane]
    for i in range(top + 1, m):
        for lane in range(lanes):
            target[i, j, lane] -= reflectors[i, column, lane] * dots[lane]


@numba.njit(**JIT_OPTIONS, inline="always")
def _coupling(reflectors, top, coupling):
    """``coupling[lane]``: the product of the real reflectors of columns ``top`` and ``top + 1`` (each with 1 at its
    start, on the diagonal), the same either way round."""
    m, lanes = reflectors.shape[0], reflectors.shape[2]
    for lane in range(lanes):
        coupling[lane] = reflectors[top + 1, top, lane]
    for i in range(top + 2, m):
        for lane in range(lanes):
            coupling[lane] += reflectors[i, top + 1, lane] * reflectors[i, top, lane]


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_column_by_pair(target, reflectors, top, high_first, scales, coupling, j, upper, lower):
    """The real reflectors of columns ``top`` and ``top + 1`` applied to column ``j`` of ``target`` from row ``top``
    in one pass over it, the one of ``top`` first where ``high_first`` (``geqr2``'s order, scaled by ``scales[0]``,
    then ``scales[1]``), else the one of ``top + 1`` (``org2r``'s): both dot products (``upper``, ``lower``) taken on
    the column as it was and the second corrected by ``coupling`` (:func:`_coupling`), a block of two reflectors
    (LAPACK's compact WY with ``T`` of order 2), so the column is read twice and written once instead of read four
    times and written twice."""
    m, lanes = target.shape[0], target.shape[2]
    for lane in range(lanes):
        upper[lane] = target[top, j, lane]
        lower[lane] = target[top + 1, j, lane]
        upper[lane] += reflectors[top + 1, top, lane] * target[top + 1, j, lane]
    for i in range(top + 2, m):
        for lane in range(lanes):
            upper[lane] += reflectors[i, top, lane] * target[i, j, lane]
            lower[lane] += reflectors[i, top + 1, lane] * target[i, j, lane]
    if high_first:
        for lane in range(lanes):
            upper[lane] *= scales[0, lane]
            lower[lane] -= coupling[lane] * upper[lane]
            lower[lane] *= scales[1, lane]
    else:
        for lane in range(lanes):
            lower[lane] *= scales[0, lane]
            upper[lane] -= coupling[lane] * lower[lane]
            upper[lane] *= scales[1, lane]
    for lane in range(lanes):
        target[top, j, lane] -= upper[lane]
        target[top + 1, j, lane] -= reflectors[top + 1, top, lane] * upper[lane]
        target[top + 1, j, lane] -= lower[lane]
    for i in range(top + 2, m):
        for lane in range(lanes):
            target[i, j, lane] -= reflectors[i, top, lane] * upper[lane]
            target[i, j, lane] -= reflectors[i, top + 1, lane] * lower[lane]


def _in_pairs(buf):
    """Whether the loops over the lanes apply reflectors to ``buf``'s columns in pairs: for real matrices, as the
    SIMD vectors do (so both give the same bits). Complex ones take one reflector at a time, which ran faster in
    those loops (complex128, 2 threads, 10^4 matrices, ns a matrix, one at a time / pairs: n = 4 167 / 185, 8 945 /
    1,031, 16 5,368 / 5,867)."""


@overload(_in_pairs, jit_options=JIT_OPTIONS, inline="always")
def _in_pairs_for(buf):
    real = not isinstance(buf.dtype, types.Complex)
    return lambda buf: real


@numba.njit(**JIT_OPTIONS, forceinline=True)
def _factor_chunk(buf, n, tau, norm, dots, work):
    """Householder QR of the interleaved ``m x n`` matrices in ``buf``; ``tau[k, lane]`` as LAPACK's geqrf.

    A plain sum of squares makes each reflector (:func:`_reflectors`). Real columns are factored two at a time
    (:func:`_in_pairs`): the first reflector is applied to the second column alone, and the pair to the columns
    right of them in one pass (:func:`_reflect_column_by_pair`). One step a column, as :func:`_factor_vector` takes
    them. ``work`` holds five rows of lanes: the pair's scales, coupling and dot products."""
    m, lanes = buf.shape[0], buf.shape[2]
    safmin, largest = _limits(norm)
    scales, coupling, upper, lower = work[0:2], work[2], work[3], work[4]
    paired = _in_pairs(buf)
    steps = min(m, n)
    for k in range(steps):
        _column_reflector(buf, k, tau, norm, dots, safmin, largest)
        if paired and k % 2:  # the second of a pair: both to the columns right of them
            if k + 1 < n:
                for lane in range(lanes):
                    scales[0, lane] = tau[k - 1, lane]
                    scales[1, lane] = tau[k, lane]
                _coupling(buf, k - 1, coupling)
                for j in range(k + 1, n):
                    _reflect_column_by_pair(buf, buf, k - 1, True, scales, coupling, j, upper, lower)
        else:  # the first of a pair to the next column alone; one unpaired to every column right
            for lane in range(lanes):
                scales[0, lane] = np.conj(tau[k, lane])
            for j in range(k + 1, k + 2 if paired and k + 1 < steps else n):
                _reflect_column(buf, buf, k, k, scales[0], j, dots)


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_one(target, reflectors, top, column, scale, j):
    """:func:`_reflect_column` for a buffer of one vector of real matrices, on ``_simd`` vectors: the reflector in
    ``reflectors[top:, column]`` (``v[top] = 1``; ``scale`` = its ``tau``, a vector) applied to column ``j`` of
    ``target`` from row ``top`` down. Each product and sum as in the loops over the lanes, which LLVM fuses alike
    (:func:`~._simd.add_rounded_product`): bitwise their results."""
    rows, width, depth = target.shape[0], target.shape[1], reflectors.shape[1]
    at = (top * width + j) * WIDTH
    d = load(target, at)
    for i in range(top + 1, rows):
        v = load(reflectors, (i * depth + column) * WIDTH)
        d = add_rounded_product(d, v, load(target, (i * width + j) * WIDTH))
    store(target, at, subtract_rounded_product(d, scale, load(target, at)))
    d = multiply(d, scale)
    for i in range(top + 1, rows):
        row = (i * width + j) * WIDTH
        store(target, row, subtract_rounded_product(load(reflectors, (i * depth + column) * WIDTH), d,
                                                    load(target, row)))


@numba.njit(**JIT_OPTIONS, inline="always")
def _column_reflector_vector(buf, k, tau, norm, dots, safmin, largest):
    """:func:`_column_reflector` for a buffer of one vector of real matrices, on ``_simd`` vectors."""
    m, width = buf.shape[0], buf.shape[1]
    total = splat(buf.dtype.type(0.0))
    for i in range(k + 1, m):
        x = load(buf, (i * width + k) * WIDTH)
        total = add_rounded_product(total, x, x)
    store(norm, 0, total)
    _reflectors_vector(buf, k, tau, norm, dots, safmin, largest)
    scale = load(dots, 0)
    for i in range(k + 1, m):
        store(buf, (i * width + k) * WIDTH, multiply(load(buf, (i * width + k) * WIDTH), scale))


@numba.njit(**JIT_OPTIONS, inline="always")
def _coupling_vector(reflectors, top):
    """:func:`_coupling` of the reflectors of columns ``top`` and ``top + 1`` in a buffer of one vector of real
    matrices, whose product is the same either way round."""
    depth = reflectors.shape[1]
    coupling = load(reflectors, ((top + 1) * depth + top) * WIDTH)
    for i in range(top + 2, reflectors.shape[0]):
        coupling = add_rounded_product(coupling, load(reflectors, (i * depth + top + 1) * WIDTH),
                                       load(reflectors, (i * depth + top) * WIDTH))
    return coupling


@numba.njit(**JIT_OPTIONS, inline="always")
def _pair_products(upper, lower, high_first, scales, coupling):
    """The scaled products of :func:`_reflect_column_by_pair` from the dot products ``upper`` and ``lower`` with
    the reflectors starting at ``top`` and ``top + 1``: ``(s0 upper, s1 (lower - coupling s0 upper))`` where
    ``high_first`` is a vector of ones (``geqr2``'s order), ``(s1 (upper - coupling s0 lower), s0 lower)`` where it
    is zeros (``org2r``'s). Both are computed and one selected: a branch here, inlined, broke numba's SSA checks."""
    high = multiply(upper, scales[0])
    after_high = multiply(subtract_rounded_product(coupling, high, lower), scales[1])
    low = multiply(lower, scales[0])
    after_low = multiply(subtract_rounded_product(coupling, low, upper), scales[1])
    below = negative(high_first)  # 1 > -1, but 0 > -0 is false
    return where_greater(high_first, below, high, after_low), where_greater(high_first, below, after_high, low)


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_two_by_pair(target, reflectors, top, high_first, scales, coupling, j):
    """:func:`_reflect_column_by_pair` for columns ``j`` and ``j + 1`` of a buffer of one vector of real matrices,
    on ``_simd`` vectors, the reflectors those of columns ``top`` and ``top + 1`` in the order ``high_first`` says
    (:func:`_pair_products`): the four dot products in registers, each product and sum as in the loops over the
    lanes."""
    rows, width, depth = target.shape[0], target.shape[1], reflectors.shape[1]
    high, low = top, top + 1
    at0, at1 = (top * width + j) * WIDTH, ((top + 1) * width + j) * WIDTH
    v1 = load(reflectors, ((top + 1) * depth + high) * WIDTH)
    x0, x1 = load(target, at1), load(target, at1 + WIDTH)
    upper0 = add_rounded_product(load(target, at0), v1, x0)
    upper1 = add_rounded_product(load(target, at0 + WIDTH), v1, x1)
    lower0, lower1 = x0, x1
    for i in range(top + 2, rows):
        vh, vl = load(reflectors, (i * depth + high) * WIDTH), load(reflectors, (i * depth + low) * WIDTH)
        row = (i * width + j) * WIDTH
        y0, y1 = load(target, row), load(target, row + WIDTH)
        upper0, upper1 = add_rounded_product(upper0, vh, y0), add_rounded_product(upper1, vh, y1)
        lower0, lower1 = add_rounded_product(lower0, vl, y0), add_rounded_product(lower1, vl, y1)
    upper0, lower0 = _pair_products(upper0, lower0, high_first, scales, coupling)
    upper1, lower1 = _pair_products(upper1, lower1, high_first, scales, coupling)
    store(target, at0, subtract(load(target, at0), upper0))
    store(target, at0 + WIDTH, subtract(load(target, at0 + WIDTH), upper1))
    store(target, at1, subtract(subtract_rounded_product(v1, upper0, load(target, at1)), lower0))
    store(target, at1 + WIDTH, subtract(subtract_rounded_product(v1, upper1, load(target, at1 + WIDTH)), lower1))
    for i in range(top + 2, rows):
        vh, vl = load(reflectors, (i * depth + high) * WIDTH), load(reflectors, (i * depth + low) * WIDTH)
        row = (i * width + j) * WIDTH
        store(target, row, subtract_rounded_product(vl, lower0, subtract_rounded_product(vh, upper0,
                                                                                          load(target, row))))
        store(target, row + WIDTH, subtract_rounded_product(vl, lower1, subtract_rounded_product(
            vh, upper1, load(target, row + WIDTH))))


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_one_by_pair(target, reflectors, top, high_first, scales, coupling, j):
    """:func:`_reflect_two_by_pair` for column ``j`` alone."""
    rows, width, depth = target.shape[0], target.shape[1], reflectors.shape[1]
    high, low = top, top + 1
    at0, at1 = (top * width + j) * WIDTH, ((top + 1) * width + j) * WIDTH
    v1 = load(reflectors, ((top + 1) * depth + high) * WIDTH)
    x = load(target, at1)
    upper, lower = add_rounded_product(load(target, at0), v1, x), x
    for i in range(top + 2, rows):
        y = load(target, (i * width + j) * WIDTH)
        upper = add_rounded_product(upper, load(reflectors, (i * depth + high) * WIDTH), y)
        lower = add_rounded_product(lower, load(reflectors, (i * depth + low) * WIDTH), y)
    upper, lower = _pair_products(upper, lower, high_first, scales, coupling)
    store(target, at0, subtract(load(target, at0), upper))
    store(target, at1, subtract(subtract_rounded_product(v1, upper, load(target, at1)), lower))
    for i in range(top + 2, rows):
        row = (i * width + j) * WIDTH
        store(target, row, subtract_rounded_product(load(reflectors, (i * depth + low) * WIDTH), lower,
                                                    subtract_rounded_product(load(reflectors, (i * depth + high)
                                                                                  * WIDTH), upper, load(target, row))))


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_four_by_pair(target, reflectors, top, high_first, scales, coupling, j):
    """:func:`_reflect_two_by_pair` for columns ``j`` to ``j + 3``: each row's two reflector vectors loaded once for
    four columns, the eight dot products in registers (with AVX-512; :data:`PASS_COLUMNS`), each column's roundings
    in :func:`_reflect_column_by_pair`'s order, so bitwise its results."""
    rows, width, depth = target.shape[0], target.shape[1], reflectors.shape[1]
    high, low = top, top + 1
    at0, at1 = (top * width + j) * WIDTH, ((top + 1) * width + j) * WIDTH
    v1 = load(reflectors, ((top + 1) * depth + high) * WIDTH)
    x0, x1 = load(target, at1), load(target, at1 + WIDTH)
    x2, x3 = load(target, at1 + 2 * WIDTH), load(target, at1 + 3 * WIDTH)
    upper0 = add_rounded_product(load(target, at0), v1, x0)
    upper1 = add_rounded_product(load(target, at0 + WIDTH), v1, x1)
    upper2 = add_rounded_product(load(target, at0 + 2 * WIDTH), v1, x2)
    upper3 = add_rounded_product(load(target, at0 + 3 * WIDTH), v1, x3)
    lower0, lower1, lower2, lower3 = x0, x1, x2, x3
    for i in range(top + 2, rows):
        vh, vl = load(reflectors, (i * depth + high) * WIDTH), load(reflectors, (i * depth + low) * WIDTH)
        row = (i * width + j) * WIDTH
        y0, y1 = load(target, row), load(target, row + WIDTH)
        y2, y3 = load(target, row + 2 * WIDTH), load(target, row + 3 * WIDTH)
        upper0, upper1 = add_rounded_product(upper0, vh, y0), add_rounded_product(upper1, vh, y1)
        upper2, upper3 = add_rounded_product(upper2, vh, y2), add_rounded_product(upper3, vh, y3)
        lower0, lower1 = add_rounded_product(lower0, vl, y0), add_rounded_product(lower1, vl, y1)
        lower2, lower3 = add_rounded_product(lower2, vl, y2), add_rounded_product(lower3, vl, y3)
    upper0, lower0 = _pair_products(upper0, lower0, high_first, scales, coupling)
    upper1, lower1 = _pair_products(upper1, lower1, high_first, scales, coupling)
    upper2, lower2 = _pair_products(upper2, lower2, high_first, scales, coupling)
    upper3, lower3 = _pair_products(upper3, lower3, high_first, scales, coupling)
    for c, upper, lower in ((0, upper0, lower0), (1, upper1, lower1), (2, upper2, lower2), (3, upper3, lower3)):
        store(target, at0 + c * WIDTH, subtract(load(target, at0 + c * WIDTH), upper))
        store(target, at1 + c * WIDTH, subtract(subtract_rounded_product(v1, upper, load(target, at1 + c * WIDTH)),
                                                lower))
    for i in range(top + 2, rows):
        vh, vl = load(reflectors, (i * depth + high) * WIDTH), load(reflectors, (i * depth + low) * WIDTH)
        row = (i * width + j) * WIDTH
        for c, upper, lower in ((0, upper0, lower0), (1, upper1, lower1), (2, upper2, lower2), (3, upper3, lower3)):
            at = row + c * WIDTH
            store(target, at, subtract_rounded_product(vl, lower, subtract_rounded_product(vh, upper,
                                                                                            load(target, at))))


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_columns_by_fours(target, reflectors, top, high_first, scales, coupling, start, stop):
    """Apply the reflectors of columns ``top`` and ``top + 1`` in ``high_first``'s order (as
    :func:`_reflect_column_by_pair`) to columns ``start`` to ``stop - 1`` of ``target``: four at a time, then two,
    then one. Four a pass load each reflector vector once for four columns instead of two (``geqr2`` and ``org2r``
    on one vector of float64 matrices in cache, buffers on cache lines, one thread, ns a matrix, pairs / fours,
    bitwise the same: n = 8 148 / 145, 16 603 / 605, 24 1,515 / 1,419, 32 3,192 / 2,992, 64 24,061 / 21,312). Each
    pass holds its columns' dot products in registers, so each width is its own function: a remainder of two taken
    one column at a time made ``qr`` 7% slower at n = 16 (float64, B = 2,000, one thread, median of 6 runs: 870
    against 811 ns a matrix), and the four-column pass with its last columns clamped to the last (taken twice, stored
    alike) made the kernel 7-10% slower at n = 8-32."""
    fours = start + (stop - start) // 4 * 4
    for j in range(start, fours, 4):
        _reflect_four_by_pair(target, reflectors, top, high_first, scales, coupling, j)
    if stop - fours >= 2:
        _reflect_two_by_pair(target, reflectors, top, high_first, scales, coupling, fours)
    if (stop - fours) % 2:
        _reflect_one_by_pair(target, reflectors, top, high_first, scales, coupling, stop - 1)


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_columns_by_twos(target, reflectors, top, high_first, scales, coupling, start, stop):
    """:func:`_reflect_columns_by_fours` two columns at a time, then one: where four columns' dot products would fill
    the registers (:data:`PASS_COLUMNS`)."""
    twos = start + (stop - start) // 2 * 2
    for j in range(start, twos, 2):
        _reflect_two_by_pair(target, reflectors, top, high_first, scales, coupling, j)
    if stop - twos:
        _reflect_one_by_pair(target, reflectors, top, high_first, scales, coupling, stop - 1)


#: The pair pass for this machine's registers (:data:`PASS_COLUMNS`), chosen once: one function written for both
#: ways, its remainder of two in a loop, made the four-column kernel slower at n = 24 (532-618 against 513-523 ns a
#: matrix, stop 99), and an overload choosing between them as the kernel compiled set numba's SSA checks warning of
#: variables out of scope.
_reflect_columns_by_pair = _reflect_columns_by_fours if PASS_COLUMNS == 4 else _reflect_columns_by_twos


@numba.njit(**JIT_OPTIONS, inline="always")
def _factor_vector(buf, n, tau, norm, dots, ahead):
    """:func:`_factor_chunk` for a buffer of one SIMD vector of real matrices (``WIDTH`` lanes), on ``_simd``
    vectors, in the chunk kernel's order of operations; the buffer's rows may be wider than ``n`` columns
    (:func:`~._interleave.padded_width`). One step a column, each helper inlined once (inlined twice in one loop,
    numba's SSA checks warned of variables out of scope). Each step asks for a slice of the next chunk's input and
    ``R`` (unless written with streaming stores) where ``ahead`` says (:func:`_qr_vector`)."""
    m = buf.shape[0]
    safmin, largest = _limits(norm)
    steps = min(m, n)
    a, _, r_out, first, spread, stream = ahead
    for k in range(steps):
        if spread:
            prefetch_slice(a, first, WIDTH, m, n, k, steps, False)
            if not stream:
                prefetch_slice(r_out, first, WIDTH, r_out.shape[1], n, k, steps, True)
        _column_reflector_vector(buf, k, tau, norm, dots, safmin, largest)
        scale = load(tau, k * WIDTH)
        if k % 2 and k + 1 < n:  # the second of a pair: both to the columns right of them
            _reflect_columns_by_pair(buf, buf, k - 1, splat(buf.dtype.type(1.0)), (load(tau, (k - 1) * WIDTH), scale),
                                     _coupling_vector(buf, k - 1), k + 1, n)
        elif k % 2 == 0:  # the first of a pair to the next column alone; the last, unpaired, to every column right
            for j in range(k + 1, k + 2 if k + 1 < steps else n):
                _reflect_one(buf, buf, k, k, scale, j)


@numba.njit(**JIT_OPTIONS, inline="always")
def _set_q_column(reflectors, q, r, scale):
    """Column ``r`` of ``Q`` from row ``r`` down, ``H_r e_r``: ``1 - tau`` on the diagonal, ``-tau v`` below."""
    m, width, depth = q.shape[0], q.shape[1], reflectors.shape[1]
    for i in range(r + 1, m):
        store(q, (i * width + r) * WIDTH, multiply(negative(scale), load(reflectors, (i * depth + r) * WIDTH)))
    one = splat(q.dtype.type(1.0))
    store(q, (r * width + r) * WIDTH, subtract_rounded_product(one, scale, one))


@numba.njit(**JIT_OPTIONS, inline="always")
def _build_q_vector(reflectors, tau, q, ncols, dots, ahead):
    """:func:`_build_q_chunk` for buffers of one SIMD vector of real matrices, on ``_simd`` vectors, one reflector a
    step as :func:`_factor_vector`; ``q``'s rows may be wider than ``ncols``. Asks for the next chunk's ``Q`` a
    slice a step as :func:`_factor_vector` asks for its input, unless ``Q`` is written with streaming stores."""
    m, count = q.shape[0], tau.shape[0]
    _, q_out, _, first, spread, stream = ahead
    for i in range(m):
        for j in range(ncols):
            for lane in range(WIDTH):
                q[i, j, lane] = 1.0 if i == j else 0.0
    for r in range(count - 1, -1, -1):
        if spread and not stream:
            prefetch_slice(q_out, first, WIDTH, m, ncols, r, count, True)
        scale = load(tau, r * WIDTH)
        single = r == count - 1 and count % 2
        if not single and (count - count % 2 - r) % 2:  # the later of a pair: both to the columns right of them
            if r + 1 < ncols:
                _reflect_columns_by_pair(q, reflectors, r - 1, splat(q.dtype.type(0.0)),
                                         (scale, load(tau, (r - 1) * WIDTH)), _coupling_vector(reflectors, r - 1),
                                         r + 1, ncols)
        else:  # the earlier of a pair to the next column alone; the last, unpaired, to every column right
            for j in range(r + 1, ncols if single else r + 2):
                _reflect_one(q, reflectors, r, r, scale, j)
        _set_q_column(reflectors, q, r, scale)


@numba.njit(**JIT_OPTIONS)
def _qr_vector(buf, n, tau, norm, dots, q, ncols, ahead):
    """:func:`_factor_vector` and, where ``Q`` has columns, :func:`_build_q_vector`: one compiled call per chunk
    (inlined into the kernel with the loops over the lanes, numba's SSA checks warned of variables out of scope;
    its explicit vector loads and stores need no knowledge that the buffers do not overlap). ``ahead`` is ``(a,
    q_out, r_out, first, spread, stream)``: where ``spread``, each step asks for a slice of the chunk after the one
    at ``first`` (:func:`~._interleave.prefetch_slice`), of the outputs only where not written with streaming
    stores (``stream``)."""
    _factor_vector(buf, n, tau, norm, dots, ahead)
    if ncols:
        _build_q_vector(buf, tau, q, ncols, dots, ahead)


def _qr_in_chunk(buf, n, tau, norm, dots, work, q, ncols, lanes, ahead):
    """Householder QR of an interleaved chunk's ``n`` columns, and its ``Q``'s first ``ncols`` columns into ``q``
    where there are any: on SIMD vectors (:func:`_qr_vector`, which takes ``ahead``) where the buffers are one vector
    of real matrices, in loops over the lanes otherwise."""


@overload(_qr_in_chunk, jit_options=JIT_OPTIONS, inline="always")
def _qr_in_chunk_for(buf, n, tau, norm, dots, work, q, ncols, lanes, ahead):
    vector = not isinstance(buf.dtype, types.Complex)

    def qr_in_chunk(buf, n, tau, norm, dots, work, q, ncols, lanes, ahead):
        if vector and lanes == WIDTH:
            _qr_vector(buf, n, tau, norm, dots, q, ncols, ahead)
        else:
            _factor_chunk(buf, n, tau, norm, dots, work)
            if ncols:
                _build_q_chunk(buf, tau, q, ncols, dots, work)

    return qr_in_chunk


@numba.njit(**JIT_OPTIONS)
def geqrf_stack(a, out, tau, lanes, thread, threads):
    """QR-factorize every matrix of the 3-D stack ``a`` into ``out`` (R and reflectors) and ``tau``."""
    batch, m, n = a.shape
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    buf = on_cache_lines((m, n, lanes), out.dtype)
    chunk_tau = on_cache_lines((min(m, n), lanes), out.dtype)
    norm = on_cache_lines((lanes,), out.real.dtype)
    dots = on_cache_lines((lanes,), out.dtype)
    work = on_cache_lines((WORK_ROWS, lanes), out.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather(a, first, buf, m, n, lanes)
        _factor_chunk(buf, n, chunk_tau, norm, dots, work)
        scatter(buf, count, out, first, m, n)
        for lane in range(count):
            for k in range(min(m, n)):
                tau[first + lane, k] = chunk_tau[k, lane]


@numba.njit(**JIT_OPTIONS, forceinline=True)
def _build_q_chunk(reflectors, tau, q, ncols, dots, work):
    """``q[:, :ncols, lane]`` = first columns of ``H_0 ... H_{k-1}`` from interleaved reflectors (LAPACK org2r),
    backwards from the identity, one reflector a step as :func:`_build_q_vector` takes them. Real reflectors
    (:func:`_in_pairs`): the last alone where there is an odd number, then two at a time to the columns right of
    them (:func:`_reflect_column_by_pair`); ``work`` as for :func:`_factor_chunk`."""
    m, lanes = q.shape[0], q.shape[2]
    scales, coupling, upper, lower = work[0:2], work[2], work[3], work[4]
    paired = _in_pairs(q)
    count = tau.shape[0]
    for i in range(m):
        for j in range(ncols):
            for lane in range(lanes):
                q[i, j, lane] = 1.0 if i == j else 0.0
    for r in range(count - 1, -1, -1):
        single = not paired or r == count - 1 and count % 2
        if not single and (count - count % 2 - r) % 2:  # the later of a pair: both to the columns right of them
            if r + 1 < ncols:
                for lane in range(lanes):
                    scales[0, lane] = tau[r, lane]
                    scales[1, lane] = tau[r - 1, lane]
                _coupling(reflectors, r - 1, coupling)
                for j in range(r + 1, ncols):
                    _reflect_column_by_pair(q, reflectors, r - 1, False, scales, coupling, j, upper, lower)
        else:  # the earlier of a pair to the next column alone; one unpaired to every column right
            for j in range(r + 1, ncols if single else r + 2):
                _reflect_column(q, reflectors, r, r, tau[r], j, dots)
        _set_q_column_chunk(reflectors, tau, q, r)


@numba.njit(**JIT_OPTIONS, inline="always")
def _set_q_column_chunk(reflectors, tau, q, r):
    """Column ``r`` of ``Q`` from row ``r`` down in every lane, ``H_r e_r`` (as :func:`_set_q_column`)."""
    m, lanes = q.shape[0], q.shape[2]
    for i in range(r + 1, m):
        for lane in range(lanes):
            q[i, r, lane] = -tau[r, lane] * reflectors[i, r, lane]
    for lane in range(lanes):
        q[r, r, lane] = 1.0 - tau[r, lane]


@numba.njit(**JIT_OPTIONS)
def orgqr_stack(qr, tau, out, lanes, thread, threads):
    """Explicit ``Q`` (batch, m, ncols) of every factorization from its reflectors ``qr[:, :, :k]`` and ``tau``."""
    batch, m, k = qr.shape
    ncols = out.shape[2]
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    reflectors = on_cache_lines((m, k, lanes), out.dtype)
    chunk_tau = on_cache_lines((k, lanes), out.dtype)
    q = on_cache_lines((m, ncols, lanes), out.dtype)
    dots = on_cache_lines((lanes,), out.dtype)
    work = on_cache_lines((WORK_ROWS, lanes), out.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather(qr, first, reflectors, m, k, lanes)
        for lane in range(count):
            for r in range(k):
                chunk_tau[r, lane] = tau[first + lane, r]
        _build_q_chunk(reflectors, chunk_tau, q, ncols, dots, work)
        scatter(q, count, out, first, m, ncols)


@numba.njit(**JIT_OPTIONS, inline="always")
def scatter_upper(buf, count, out, first, ahead=True, stream=False):
    """Write the first ``out.shape[1]`` rows of each lane's upper triangle to ``out[first + lane]``, zeros below:
    the buffer's reflectors are zeroed and whole rows scattered, in blocks where :func:`scatter` copies in blocks
    (``ahead`` and ``stream`` as there)."""
    rows, n, lanes = out.shape[1], out.shape[2], buf.shape[2]
    for i in range(1, rows):
        for j in range(min(i, n)):
            for lane in range(lanes):
                buf[i, j, lane] = 0.0
    scatter(buf, count, out, first, rows, n, ahead, stream)


@numba.njit(**JIT_OPTIONS, inline="always")
def _chunk_buffers(r_out, m, n, ncols, lanes):
    """One thread's buffers for chunks of ``m x n`` matrices, ``lanes`` at a time, with ``Q``'s first ``ncols``
    columns, each on cache lines (:func:`~._interleave.on_cache_lines`): the chunk and ``Q`` (rows padded,
    :func:`~._interleave.chunk_buffer`), the reflectors' ``tau``, norms, dot products, the update's work rows and the
    lanes' infinity-or-NaN marks."""
    return (chunk_buffer(r_out, m, n, lanes),
            on_cache_lines((min(m, n), lanes), r_out.dtype),
            chunk_buffer(r_out, m, ncols, lanes),
            on_cache_lines((lanes,), r_out.real.dtype), on_cache_lines((lanes,), r_out.dtype),
            on_cache_lines((WORK_ROWS, lanes), r_out.dtype), on_cache_lines((lanes,), r_out.real.dtype))


@numba.njit(**JIT_OPTIONS, inline="always")
def _qr_chunk(a, q_out, r_out, spread_bytes, stream, nonfinite, thread, chunk, buffers, m, n, ncols, lanes):
    """Chunk ``chunk`` of :func:`qr_stack`'s stack in the ``buffers`` of :func:`_chunk_buffers`."""
    buf, chunk_tau, q, norm, dots, work, poison = buffers
    first = chunk * lanes
    spread = spreads_prefetch(buf, lanes, spread_bytes)
    count = gather(a, first, buf, m, n, lanes, not spread)
    flag_poisoned(buf, poison, count, nonfinite, thread, m, buf.shape[1], lanes)
    _qr_in_chunk(buf, n, chunk_tau, norm, dots, work, q, ncols, lanes, (a, q_out, r_out, first, spread, stream))
    scatter_upper(buf, count, r_out, first, not spread, stream)
    if ncols:
        scatter(q, count, q_out, first, m, ncols, not spread, stream)


@numba.njit(**JIT_OPTIONS, inline="always")
def _qr_chunks(a, q_out, r_out, spread_bytes, stream, nonfinite, thread, start, stop, m, n, ncols, lanes):
    """Chunks ``start:stop`` of :func:`qr_stack`'s stack (one thread's share) in buffers."""
    owned = _chunk_buffers(r_out, m, n, ncols, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        _qr_chunk(a, q_out, r_out, spread_bytes, stream, nonfinite, thread, chunk, buffers, m, n, ncols, lanes)
    keep_alive(owned)


@numba.njit(**JIT_OPTIONS, inline="always")
def _qr_order_two(a, q_out, r_out, spread_bytes, nonfinite, thread, start, stop, lanes):
    """:func:`_qr_chunks` for 2 x 2 matrices and their whole ``Q``: a full chunk of a real stack whose matrices, and
    those of ``Q`` and ``R``, lie one after another on vectors straight from the stack
    (:func:`._order_two.qr_chunk`), any other in a buffer (inlined once: each copy adds to the kernel's compile
    time)."""
    a_order, q_order = record_order(a, 2, 2), record_order(q_out, 2, 2)
    direct = (takes(a) and a_order != NEITHER and q_order != NEITHER and record_order(r_out, 2, 2) == BY_ROWS
              and lanes % WIDTH == 0)
    owned = _chunk_buffers(r_out, 2, 2, 2, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * lanes
        if not (direct and first + lanes <= a.shape[0]
                and qr_chunk(a, a_order, q_out, q_order, r_out, nonfinite.size > 0, first, lanes)):
            _qr_chunk(a, q_out, r_out, spread_bytes, False, nonfinite, thread, chunk, buffers, 2, 2, 2, lanes)
    keep_alive(owned)


@numba.njit(**JIT_OPTIONS)
def qr_stack(a, q_out, r_out, spread_bytes, stream, nonfinite, lanes, thread, threads):
    """``Q`` (batch, m, ncols; none when ``ncols`` is 0) and ``R`` (batch, rows, n) of every matrix of ``a``, as
    ``orgqr(geqrf(a))`` and ``triu`` of its first rows would give them, from one gathered chunk. Given a
    ``nonfinite`` flag per thread (else an empty array), a thread that meets an infinity or NaN in ``a`` sets its
    own; a buffer of up to ``spread_bytes`` asks for the next chunk a slice a step
    (:func:`~._interleave.spreads_prefetch`); ``stream``: whole records written with streaming stores
    (:mod:`.streaming`). Square orders up to ``SMALL_ORDER`` with their whole ``Q``, in buffers
    of ``WIDE_LANES``, run versions compiled for their sizes (given as constants, numba compiles one version
    each)."""
    a, q_out, r_out, nonfinite = borrowed((a, q_out, r_out, nonfinite))
    batch, m, n = a.shape
    ncols = q_out.shape[2]
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    small = m == n == ncols and lanes == WIDE_LANES
    if small and m == 2:
        _qr_order_two(a, q_out, r_out, spread_bytes, nonfinite, thread, start, stop, WIDE_LANES)
    elif small and m == 3:
        _qr_chunks(a, q_out, r_out, spread_bytes, stream, nonfinite, thread, start, stop, 3, 3, 3, WIDE_LANES)
    elif small and m == 4:
        _qr_chunks(a, q_out, r_out, spread_bytes, stream, nonfinite, thread, start, stop, 4, 4, 4, WIDE_LANES)
    else:
        _qr_chunks(a, q_out, r_out, spread_bytes, stream, nonfinite, thread, start, stop, m, n, ncols, lanes)
    if stream:
        store_fence()
