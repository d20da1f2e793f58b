"""Compiled batched Householder QR (``geqrf``) and explicit Q (``orgqr``) over the interleaved chunk layout.

The reflectors follow LAPACK's ``larfg`` convention exactly (``beta = -sign(Re alpha) ||(alpha, x)||``,
``tau = (beta - alpha) / beta``, ``v = x / (alpha - beta)``, ``tau = 0`` when ``x = 0`` and ``alpha`` is real, a
scaled norm and larfg's rescaling where the plain one would over- or underflow), so ``R``'s signs and the stored
reflectors match SciPy's. ``geqr2`` applies ``H^H`` to the trailing columns; ``org2r``
accumulates ``Q = H_0 H_1 ... H_{k-1}`` backwards from the identity. ``qr_stack`` does both on one gathered chunk
and writes ``Q`` and ``R`` directly: the reflectors never leave the cache, so main memory sees one read of ``A``
and one write of each result instead of the five passes of ``geqrf``, ``orgqr`` and a separate ``triu``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ._interleave import JIT_OPTIONS, WIDE_LANES, chunk_range, divide, flag_poisoned, gather, scatter
from ._simd import (WIDTH, add_rounded_product, any_below, copy_sign, load, multiply, negative, quotient, splat,
                    square_root, store, subtract, subtract_rounded_product, where_at_least, where_at_most,
                    where_greater)


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


@numba.njit(**JIT_OPTIONS, forceinline=True)
def _factor_chunk(buf, tau, norm, dots):
    """Householder QR of the interleaved ``m x n`` matrices in ``buf``; ``tau[k, lane]`` as LAPACK's geqrf.

    A plain sum of squares makes each reflector (:func:`_reflectors`)."""
    m, n, lanes = buf.shape
    safmin, largest = _limits(norm)
    for k in range(min(m, n)):
        for lane in range(lanes):
            norm[lane] = 0.0
        for i in range(k + 1, m):
            for lane in range(lanes):
                norm[lane] += buf[i, k, lane].real ** 2 + buf[i, k, lane].imag ** 2
        _reflectors(buf, k, tau, norm, dots, safmin, largest)
        for i in range(k + 1, m):
            for lane in range(lanes):
                buf[i, k, lane] *= dots[lane]
        for j in range(k + 1, n):
            for lane in range(lanes):
                dots[lane] = buf[k, j, lane]
            for i in range(k + 1, m):
                for lane in range(lanes):
                    dots[lane] += np.conj(buf[i, k, lane]) * buf[i, j, lane]
            for lane in range(lanes):
                dots[lane] *= np.conj(tau[k, lane])
                buf[k, j, lane] -= dots[lane]
            for i in range(k + 1, m):
                for lane in range(lanes):
                    buf[i, j, lane] -= buf[i, k, lane] * dots[lane]


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_four(target, reflectors, top, column, scale, j):
    """Apply the reflector in ``reflectors[top:, column]`` (``v[top] = 1``; ``scale`` = its ``tau``, a vector) to
    columns ``j`` to ``j + 3`` of ``target`` from row ``top`` down, in a buffer of one vector of real matrices: the
    four dot products run as independent chains over the rows. Each product is rounded before its sum, as in
    :func:`_factor_chunk`'s loops over the lanes (which the compiler leaves unfused): bitwise its results."""
    rows, width, depth = target.shape[0], target.shape[1], reflectors.shape[1]
    at = (top * width + j) * WIDTH
    d0, d1 = load(target, at), load(target, at + WIDTH)
    d2, d3 = load(target, at + 2 * WIDTH), load(target, at + 3 * WIDTH)
    for i in range(top + 1, rows):
        v = load(reflectors, (i * depth + column) * WIDTH)
        row = (i * width + j) * WIDTH
        d0 = add_rounded_product(d0, v, load(target, row))
        d1 = add_rounded_product(d1, v, load(target, row + WIDTH))
        d2 = add_rounded_product(d2, v, load(target, row + 2 * WIDTH))
        d3 = add_rounded_product(d3, v, load(target, row + 3 * WIDTH))
    store(target, at, subtract_rounded_product(d0, scale, load(target, at)))
    store(target, at + WIDTH, subtract_rounded_product(d1, scale, load(target, at + WIDTH)))
    store(target, at + 2 * WIDTH, subtract_rounded_product(d2, scale, load(target, at + 2 * WIDTH)))
    store(target, at + 3 * WIDTH, subtract_rounded_product(d3, scale, load(target, at + 3 * WIDTH)))
    d0, d1, d2, d3 = multiply(d0, scale), multiply(d1, scale), multiply(d2, scale), multiply(d3, scale)
    for i in range(top + 1, rows):
        v = load(reflectors, (i * depth + column) * WIDTH)
        row = (i * width + j) * WIDTH
        store(target, row, subtract_rounded_product(v, d0, load(target, row)))
        store(target, row + WIDTH, subtract_rounded_product(v, d1, load(target, row + WIDTH)))
        store(target, row + 2 * WIDTH, subtract_rounded_product(v, d2, load(target, row + 2 * WIDTH)))
        store(target, row + 3 * WIDTH, subtract_rounded_product(v, d3, load(target, row + 3 * WIDTH)))


@numba.njit(**JIT_OPTIONS, inline="always")
def _reflect_one(target, reflectors, top, column, scale, j):
    """:func:`_reflect_four` for column ``j`` alone."""
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
def _reflect_columns(target, reflectors, top, column, scale, first):
    """Apply the reflector of ``reflectors[top:, column]`` to the columns of ``target`` from ``first`` on, four at a
    time."""
    width = target.shape[1]
    for j in range(first, width - 3, 4):
        _reflect_four(target, reflectors, top, column, scale, j)
    for j in range(width - (width - first) % 4, width):
        _reflect_one(target, reflectors, top, column, scale, j)


@numba.njit(**JIT_OPTIONS, inline="always")
def _factor_vector(buf, tau, norm, dots):
    """:func:`_factor_chunk` for a buffer of one SIMD vector of real matrices (``WIDTH`` lanes), on ``_simd``
    vectors: the sums of squares, the scaling and the reflections with the products held in registers, four columns
    at a time, in the chunk kernel's order of operations."""
    m, n = buf.shape[0], buf.shape[1]
    safmin, largest = _limits(norm)
    zero = splat(buf.dtype.type(0.0))
    for k in range(min(m, n)):
        total = zero
        for i in range(k + 1, m):
            x = load(buf, (i * n + k) * WIDTH)
            total = add_rounded_product(total, x, x)
        store(norm, 0, total)
        _reflectors_vector(buf, k, tau, norm, dots, safmin, largest)
        scale = load(dots, 0)
        for i in range(k + 1, m):
            store(buf, (i * n + k) * WIDTH, multiply(load(buf, (i * n + k) * WIDTH), scale))
        _reflect_columns(buf, buf, k, k, load(tau, k * WIDTH), k + 1)


@numba.njit(**JIT_OPTIONS, inline="always")
def _build_q_vector(reflectors, tau, q, dots):
    """:func:`_build_q_chunk` for buffers of one SIMD vector of real matrices, on ``_simd`` vectors."""
    m, ncols = q.shape[0], q.shape[1]
    depth = reflectors.shape[1]
    for i in range(m):
        for j in range(ncols):
            for lane in range(WIDTH):
                q[i, j, lane] = 1.0 if i == j else 0.0
    one = splat(q.dtype.type(1.0))
    for r in range(tau.shape[0] - 1, -1, -1):
        scale = load(tau, r * WIDTH)
        _reflect_columns(q, reflectors, r, r, scale, r + 1)
        for i in range(r + 1, m):
            store(q, (i * ncols + r) * WIDTH, multiply(negative(scale), load(reflectors, (i * depth + r) * WIDTH)))
        store(q, (r * ncols + r) * WIDTH, subtract_rounded_product(one, scale, one))


def _qr_in_chunk(buf, tau, norm, dots, q, lanes):
    """Householder QR of an interleaved chunk, and its ``Q`` into ``q`` where that has columns: on SIMD vectors
    (:func:`_factor_vector`, :func:`_build_q_vector`) where the buffers are one vector of real matrices, in loops
    over the lanes otherwise."""


@overload(_qr_in_chunk, jit_options=JIT_OPTIONS, inline="always")
def _qr_in_chunk_for(buf, tau, norm, dots, q, lanes):
    vector = not isinstance(buf.dtype, types.Complex)

    def qr_in_chunk(buf, tau, norm, dots, q, lanes):
        if vector and lanes == WIDTH:
            _factor_vector(buf, tau, norm, dots)
            if q.shape[1]:
                _build_q_vector(buf, tau, q, dots)
        else:
            _factor_chunk(buf, tau, norm, dots)
            if q.shape[1]:
                _build_q_chunk(buf, tau, q, dots)

    return qr_in_chunk


@numba.njit(**JIT_OPTIONS)
def geqrf_stack(a, out, tau, lanes, thread, threads):
    """QR-factorize every matrix of the 3-D stack ``a`` into ``out`` (R and reflectors) and ``tau``."""
    batch, m, n = a.shape
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    buf = np.empty((m, n, lanes), dtype=out.dtype)
    chunk_tau = np.empty((min(m, n), lanes), dtype=out.dtype)
    norm = np.empty(lanes, dtype=out.real.dtype)
    dots = np.empty(lanes, dtype=out.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather(a, first, buf, m, n, lanes)
        _factor_chunk(buf, chunk_tau, norm, dots)
        scatter(buf, count, out, first, m, n)
        for lane in range(count):
            for k in range(min(m, n)):
                tau[first + lane, k] = chunk_tau[k, lane]


@numba.njit(**JIT_OPTIONS, forceinline=True)
def _build_q_chunk(reflectors, tau, q, dots):
    """``q[:, :, lane]`` = first columns of ``H_0 ... H_{k-1}`` from interleaved reflectors (LAPACK org2r)."""
    m, ncols, lanes = q.shape
    k = tau.shape[0]
    for i in range(m):
        for j in range(ncols):
            for lane in range(lanes):
                q[i, j, lane] = 1.0 if i == j else 0.0
    for r in range(k - 1, -1, -1):
        for j in range(r + 1, ncols):
            for lane in range(lanes):
                dots[lane] = q[r, j, lane]
            for i in range(r + 1, m):
                for lane in range(lanes):
                    dots[lane] += np.conj(reflectors[i, r, lane]) * q[i, j, lane]
            for lane in range(lanes):
                dots[lane] *= tau[r, lane]
                q[r, j, lane] -= dots[lane]
            for i in range(r + 1, m):
                for lane in range(lanes):
                    q[i, j, lane] -= reflectors[i, r, lane] * dots[lane]
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
    reflectors = np.empty((m, k, lanes), dtype=out.dtype)
    chunk_tau = np.zeros((k, lanes), dtype=out.dtype)
    q = np.empty((m, ncols, lanes), dtype=out.dtype)
    dots = np.empty(lanes, dtype=out.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather(qr, first, reflectors, m, k, lanes)
        for lane in range(count):
            for r in range(k):
                chunk_tau[r, lane] = tau[first + lane, r]
        _build_q_chunk(reflectors, chunk_tau, q, dots)
        scatter(q, count, out, first, m, ncols)


@numba.njit(**JIT_OPTIONS, inline="always")
def scatter_upper(buf, count, out, first):
    """Write the first ``out.shape[1]`` rows of each lane's upper triangle to ``out[first + lane]``, zeros below:
    the buffer's reflectors are zeroed and whole rows scattered, in blocks where :func:`scatter` copies in blocks."""
    rows, n, lanes = out.shape[1], out.shape[2], buf.shape[2]
    for i in range(1, rows):
        for j in range(min(i, n)):
            for lane in range(lanes):
                buf[i, j, lane] = 0.0
    scatter(buf, count, out, first, rows, n)


@numba.njit(**JIT_OPTIONS, inline="always")
def _qr_chunks(a, q_out, r_out, nonfinite, thread, start, stop, m, n, ncols, lanes):
    """Chunks ``start:stop`` of :func:`qr_stack`'s stack (one thread's share) in ``m x n x lanes`` buffers, with
    ``Q``'s first ``ncols`` columns."""
    buf = np.empty((m, n, lanes), dtype=r_out.dtype)
    chunk_tau = np.empty((min(m, n), lanes), dtype=r_out.dtype)
    q = np.empty((m, ncols, lanes), dtype=r_out.dtype)
    norm = np.empty(lanes, dtype=r_out.real.dtype)
    dots = np.empty(lanes, dtype=r_out.dtype)
    poison = np.empty(lanes, dtype=r_out.real.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather(a, first, buf, m, n, lanes)
        flag_poisoned(buf, poison, count, nonfinite, thread, m, n, lanes)
        _qr_in_chunk(buf, chunk_tau, norm, dots, q, lanes)
        scatter_upper(buf, count, r_out, first)
        if ncols:
            scatter(q, count, q_out, first, m, ncols)


@numba.njit(**JIT_OPTIONS)
def qr_stack(a, q_out, r_out, nonfinite, lanes, thread, threads):
    """``Q`` (batch, m, ncols; none when ``ncols`` is 0) and ``R`` (batch, rows, n) of every matrix of ``a``, as
    ``orgqr(geqrf(a))`` and ``triu`` of its first rows would give them, from one gathered chunk. Given a
    ``nonfinite`` flag per thread (else an empty array), a thread that meets an infinity or NaN in ``a`` sets its
    own. Square orders up to ``SMALL_ORDER`` with their whole ``Q``, in buffers of ``WIDE_LANES``, run versions
    compiled for their sizes (given as constants, numba compiles one version each)."""
    batch, m, n = a.shape
    ncols = q_out.shape[2]
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    small = m == n == ncols and lanes == WIDE_LANES
    if small and m == 2:
        _qr_chunks(a, q_out, r_out, nonfinite, thread, start, stop, 2, 2, 2, WIDE_LANES)
    elif small and m == 3:
        _qr_chunks(a, q_out, r_out, nonfinite, thread, start, stop, 3, 3, 3, WIDE_LANES)
    elif small and m == 4:
        _qr_chunks(a, q_out, r_out, nonfinite, thread, start, stop, 4, 4, 4, WIDE_LANES)
    else:
        _qr_chunks(a, q_out, r_out, nonfinite, thread, start, stop, m, n, ncols, lanes)
