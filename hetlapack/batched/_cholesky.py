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
from numba import types
from numba.extending import overload

from ._borrowed import borrowed, keep_alive
from ._interleave import (JIT_OPTIONS, LOWER, NEITHER, SMALL_ORDER_LANES, WHOLE, blocked, buffer_as_stack,
                          chunk_as_buffer, chunk_range, copy_blocks_along, copy_records, divide, flag_poisoned, gather,
                          in_records, on_cache_lines, permuted, record_order, rows_along_memory, scatter)
from ._order_two import potrf_chunk, takes
from ._simd import (WIDTH, load, multiply, negative, quotient, splat, square_root, store, subtract_product,
                    where_at_most)
from ._split_complex import ELEMENT, join, product, split
from ._split_complex import subtract_product as subtract_complex_product
from ._transpose import store_fence


@numba.njit(**JIT_OPTIONS)
def gather_hermitian(a, first, lower, buf, n, lanes, whole):
    """Load the ``lower`` (else upper, conjugate-transposed) triangle of each matrix into lower form in the
    ``n x n x lanes`` buffer (sizes as arguments, as for :func:`~._interleave.gather`), and the other triangle
    mirrored above it where ``whole`` (for a check of both triangles, as SciPy checks them, in the buffer:
    :func:`~._interleave.flag_poisoned`); return the number of real lanes. Full chunks are copied whole, as records
    or in blocks along memory where :func:`~._interleave.gather` copies so (a triangle's short rows would be copied
    element by element: float64, order 32, 8 lanes, one thread, 495 ns a matrix for the triangle, 471 whole).

    Checked in the buffer, the whole matrices cost less than a check of ``a``'s rows, whose strides the compiler
    does not know (float64, one vector of matrices per buffer, one thread, ns a matrix, gathered and checked in
    ``a`` -> checked in the buffer: order 16 266 -> 81, order 32 794 -> 471; 47 and 495 unchecked)."""
    count = min(lanes, a.shape[0] - first)
    order = in_records(a, buf, count, n, n, lanes)
    if order != NEITHER:
        copy_records(a, first, buf, n, n, lanes, order, True, not lower, not lower)
        return count
    if blocked(a, count, n, n, lanes):
        source = a if lower else permuted(a, 0, 2, 1)
        copy_blocks_along(source[first:first + lanes], buf, n, n, lanes, rows_along_memory(source), WHOLE, not lower)
        return count
    for lane in range(count):
        for i in range(n):
            for j in range(n if whole else i + 1):
                buf[i, j, lane] = a[first + lane, i, j] if lower else np.conj(a[first + lane, j, i])
    for lane in range(count, lanes):
        for i in range(n):
            for j in range(n if whole else i + 1):
                buf[i, j, lane] = 1.0 if i == j else 0.0
    return count


@numba.njit(**JIT_OPTIONS, inline="always")
def _mark_failure(info, lane, j, diagonal):
    """``info[lane] = j + 1`` where ``diagonal`` (column ``j``'s) is the lane's first that is not positive (OpenBLAS's
    potf2 test, SciPy's: a NaN runs through), as an addition made on every lane: a store under that condition
    compiles, in a loop over the lanes, to a masked store (microcode on AVX2)."""
    info[lane] += (j + 1) * ((diagonal <= 0.0) & (info[lane] == 0))


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
            _mark_failure(info, lane, j, diagonal)
            root = 1.0 if diagonal <= 0.0 else math.sqrt(diagonal)
            buf[j, j, lane] = root
            recip[lane] = 1.0 / root
        for i in range(j + 1, n):
            for lane in range(lanes):
                buf[i, j, lane] *= recip[lane]


@numba.njit(**JIT_OPTIONS, inline="always")
def _update_vector_rows(buf, j, first, n):
    """Rows ``first`` to ``first + 3`` (clamped to the last row, which a short group takes again: same loads, same
    result) of column ``j`` after the updates of columns ``0..j-1``, in a buffer of one vector of real matrices, in
    ``potf2``'s order; four independent chains of multiply-adds sharing each load of row ``j``. Returned unstored."""
    last = n - 1
    row0, row1 = first * n * WIDTH, min(first + 1, last) * n * WIDTH
    row2, row3 = min(first + 2, last) * n * WIDTH, min(first + 3, last) * n * WIDTH
    column, at = j * n * WIDTH, j * WIDTH
    u0, u1, u2, u3 = load(buf, row0 + at), load(buf, row1 + at), load(buf, row2 + at), load(buf, row3 + at)
    for k in range(0, j * WIDTH, WIDTH):
        pivot = load(buf, column + k)
        u0 = subtract_product(load(buf, row0 + k), pivot, u0)
        u1 = subtract_product(load(buf, row1 + k), pivot, u1)
        u2 = subtract_product(load(buf, row2 + k), pivot, u2)
        u3 = subtract_product(load(buf, row3 + k), pivot, u3)
    return u0, u1, u2, u3


@numba.njit(**JIT_OPTIONS, inline="always")
def _store_scaled(buf, row, j, n, value, scale):
    """Element ``(row, j)`` of every matrix times ``scale``, where ``row`` is a row of the matrices."""
    if row < n:
        store(buf, (row * n + j) * WIDTH, multiply(value, scale))


@numba.njit(**JIT_OPTIONS, inline="always")
def _diagonal_root(words, recip, info, j, value):
    """The square root of the diagonal ``value`` (a vector of real parts), 1 where it is not positive, as
    :func:`_factor_chunk` takes it; ``info`` set for the lanes whose first non-positive diagonal this is
    (``recip`` is scratch)."""
    store(recip, 0, value)
    for lane in range(WIDTH):
        _mark_failure(info, lane, j, recip[lane])
    one = splat(words.dtype.type(1.0))
    return where_at_most(value, splat(words.dtype.type(0.0)), one, square_root(value))


@numba.njit(**JIT_OPTIONS)
def _factor_vector(buf, info, recip, n):
    """:func:`_factor_chunk` for a buffer of one SIMD vector of real matrices (``WIDTH`` lanes), on ``_simd``
    vectors, bitwise its results (``recip`` is scratch): each element of column ``j`` is updated in a register
    through all earlier columns (the same multiply-adds in the same order as the column passes, one load and store
    instead of one per two columns), four rows at a time, and the column below the diagonal is scaled by the
    diagonal's reciprocal before the store. Factorization alone, float64, one thread, ns a matrix, loops over 8
    lanes -> vectors: order 8 56 -> 43, 16 244 -> 88, 32 1,605 -> 318 (the loops over the lanes reach the compiler
    with run-time overlap checks, nothing held in registers: :mod:`._simd`)."""
    for lane in range(WIDTH):
        info[lane] = 0
    for j in range(n):
        u0, u1, u2, u3 = _update_vector_rows(buf, j, j, n)
        root = _diagonal_root(buf, recip, info, j, u0)
        store(buf, (j * n + j) * WIDTH, root)
        scale = quotient(splat(buf.dtype.type(1.0)), root)
        _store_scaled(buf, j + 1, j, n, u1, scale)
        _store_scaled(buf, j + 2, j, n, u2, scale)
        _store_scaled(buf, j + 3, j, n, u3, scale)
        for first in range(j + 4, n, 4):
            u0, u1, u2, u3 = _update_vector_rows(buf, j, first, n)
            _store_scaled(buf, first + 3, j, n, u3, scale)
            _store_scaled(buf, first + 2, j, n, u2, scale)
            _store_scaled(buf, first + 1, j, n, u1, scale)
            _store_scaled(buf, first, j, n, u0, scale)


@numba.njit(**JIT_OPTIONS, inline="always")
def _update_split_rows(words, j, first, n):
    """:func:`_update_vector_rows` in a split buffer of one vector of complex matrices (``_split_complex``): rows
    ``first`` to ``first + 3`` of column ``j`` after ``-= A[i, k] * conj(A[j, k])`` for ``k < j``, as real and
    imaginary vectors."""
    last = n - 1
    row0, row1 = first * n * ELEMENT, min(first + 1, last) * n * ELEMENT
    row2, row3 = min(first + 2, last) * n * ELEMENT, min(first + 3, last) * n * ELEMENT
    column, at = j * n * ELEMENT, j * ELEMENT
    u0r, u0i = load(words, row0 + at), load(words, row0 + at + WIDTH)
    u1r, u1i = load(words, row1 + at), load(words, row1 + at + WIDTH)
    u2r, u2i = load(words, row2 + at), load(words, row2 + at + WIDTH)
    u3r, u3i = load(words, row3 + at), load(words, row3 + at + WIDTH)
    for k in range(0, j * ELEMENT, ELEMENT):
        pr, pi = load(words, column + k), negative(load(words, column + k + WIDTH))
        u0r, u0i = subtract_complex_product(u0r, u0i, load(words, row0 + k), load(words, row0 + k + WIDTH), pr, pi)
        u1r, u1i = subtract_complex_product(u1r, u1i, load(words, row1 + k), load(words, row1 + k + WIDTH), pr, pi)
        u2r, u2i = subtract_complex_product(u2r, u2i, load(words, row2 + k), load(words, row2 + k + WIDTH), pr, pi)
        u3r, u3i = subtract_complex_product(u3r, u3i, load(words, row3 + k), load(words, row3 + k + WIDTH), pr, pi)
    return u0r, u0i, u1r, u1i, u2r, u2i, u3r, u3i


@numba.njit(**JIT_OPTIONS, inline="always")
def _store_split_scaled(words, row, j, n, real, imag, scale):
    """Element ``(row, j)`` of every matrix times the real ``scale`` (a complex product, as the loops' ``*=``),
    where ``row`` is a row of the matrices."""
    if row < n:
        at = (row * n + j) * ELEMENT
        real, imag = product(real, imag, scale, splat(words.dtype.type(0.0)))
        store(words, at, real)
        store(words, at + WIDTH, imag)


@numba.njit(**JIT_OPTIONS)
def _factor_split(buf, info, recip, n):
    """:func:`_factor_vector` for a buffer of one SIMD vector of complex matrices, split in place into vectors of
    real and imaginary parts while it is factored (``_split_complex``), with :func:`_factor_chunk`'s roundings in
    its order: bitwise its results. ``kernels.potrf``, complex128, 10^4 matrices, 2 threads, ns a matrix, loops over
    16 lanes -> split vectors: order 12 357 -> 265, 16 849 -> 621, 32 4,689 -> 2,741."""
    words = buf.reshape(-1).view(buf.real.dtype)
    split(words, n * n)
    for lane in range(WIDTH):
        info[lane] = 0
    for j in range(n):
        u0r, u0i, u1r, u1i, u2r, u2i, u3r, u3i = _update_split_rows(words, j, j, n)
        root = _diagonal_root(words, recip, info, j, u0r)
        at = (j * n + j) * ELEMENT
        store(words, at, root)
        store(words, at + WIDTH, splat(words.dtype.type(0.0)))
        scale = quotient(splat(words.dtype.type(1.0)), root)
        _store_split_scaled(words, j + 1, j, n, u1r, u1i, scale)
        _store_split_scaled(words, j + 2, j, n, u2r, u2i, scale)
        _store_split_scaled(words, j + 3, j, n, u3r, u3i, scale)
        for first in range(j + 4, n, 4):
            u0r, u0i, u1r, u1i, u2r, u2i, u3r, u3i = _update_split_rows(words, j, first, n)
            _store_split_scaled(words, first + 3, j, n, u3r, u3i, scale)
            _store_split_scaled(words, first + 2, j, n, u2r, u2i, scale)
            _store_split_scaled(words, first + 1, j, n, u1r, u1i, scale)
            _store_split_scaled(words, first, j, n, u0r, u0i, scale)
    join(words, n * n)


def _factor(buf, info, recip, n, lanes):
    """Cholesky of an interleaved chunk: :func:`_factor_vector` (real) or :func:`_factor_split` (complex) where the
    buffer is one vector of matrices, :func:`_factor_chunk` otherwise."""


@overload(_factor, jit_options=JIT_OPTIONS, inline="always")
def _factor_for(buf, info, recip, n, lanes):
    vector = _factor_split if isinstance(buf.dtype, types.Complex) else _factor_vector

    def factor(buf, info, recip, n, lanes):
        if lanes == WIDTH:
            vector(buf, info, recip, n)
        else:
            _factor_chunk(buf, info, recip, n, lanes)

    return factor


#: Largest order whose clean factors are scattered as whole rows (see :func:`scatter_triangle`). Measured (1
#: thread, 32 lanes, in cache, ns per matrix, lower / upper factor): n = 8, Fortran-ordered output 95 -> 59 /
#: 107 -> 43, C-ordered 87 -> 40 / 71 -> 66; at n = 16 and 32 whole rows were slower (up to 2.3x).
FULL_ROW_SCATTER_N = 8


@numba.njit(**JIT_OPTIONS)
def scatter_triangle(buf, count, a, lower, clean, out, first, n, stream=False):
    """Write each lane's factor into ``out[first + lane]``: the ``lower`` (else upper, conjugate-transposed)
    triangle from ``buf``, the other triangle zero if ``clean`` else copied from ``a``; whole records with
    streaming stores if ``stream`` (:func:`~._interleave.copy_records`).

    The triangles are separate loops, not one loop with a per-element branch, so each row is a plain copy; full
    chunks write the factor's in blocks where :func:`gather_hermitian` reads in blocks, and a clean factor as whole
    matrices, after zeroing the buffer's upper triangle: the blocks of a triangle's short rows and the zeros beside
    them are copied element by element (float64, one thread, ns a matrix, C / Fortran-ordered output, triangle and
    zeros -> whole: order 32, 8 lanes 964 / 690 -> 500 / 572; order 24, 16 lanes 526 / 391 -> 339 / 334). Up to
    ``FULL_ROW_SCATTER_N``, a clean factor is written as whole rows instead, zero chosen over the buffer's upper
    triangle: rows of constant length beat two short loops per row there; and as whole records, after zeroing the
    buffer's upper triangle, where its matrices lie one after another (:func:`~._interleave.in_records`).
    """
    order = in_records(out, buf, count, n, n, buf.shape[2])
    if clean and order != NEITHER:
        for i in range(n):
            for j in range(i + 1, n):
                for lane in range(buf.shape[2]):
                    buf[i, j, lane] = 0.0
        copy_records(out, first, buf, n, n, buf.shape[2], order, False, not lower, not lower, stream)
        return
    if clean and n <= FULL_ROW_SCATTER_N:
        for lane in range(count):
            m = first + lane
            for i in range(n):
                for j in range(n):
                    factor = buf[i, j, lane] if lower else np.conj(buf[j, i, lane])
                    out[m, i, j] = factor if (j <= i if lower else j >= i) else 0.0
        return
    lanes = buf.shape[2]
    in_blocks = blocked(out, count, n, n, lanes)
    if in_blocks:  # the lower triangle of out's matrices as they are, or conjugate-transposed
        target = out if lower else permuted(out, 0, 2, 1)
        if clean:
            for i in range(n):
                for j in range(i + 1, n):
                    for lane in range(lanes):
                        buf[i, j, lane] = 0.0
        copy_blocks_along(buffer_as_stack(buf), chunk_as_buffer(target, first, lanes), n, n, lanes,
                          rows_along_memory(target), WHOLE if clean else LOWER, not lower)
        if clean:
            return
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


@numba.njit(**JIT_OPTIONS, inline="always")
def _chunk_buffers(out, n, lanes):
    """One thread's buffers for chunks of order ``n``, ``lanes`` matrices at a time, each on cache lines
    (:func:`~._interleave.on_cache_lines`): the chunk (rows of exactly ``n``), its ``info``, the diagonal's
    reciprocals and the lanes' infinity-or-NaN marks."""
    return (on_cache_lines((n, n, lanes), out.dtype), on_cache_lines((lanes,), np.int64),
            on_cache_lines((lanes,), out.real.dtype), on_cache_lines((lanes,), out.real.dtype))


@numba.njit(**JIT_OPTIONS, inline="always")
def _potrf_chunk(a, lower, clean, out, info, stream, nonfinite, thread, chunk, buffers, n, lanes):
    """Factorize chunk ``chunk`` of the stack in the ``buffers`` of :func:`_chunk_buffers`; where ``nonfinite`` holds
    a flag per thread, check the chunk's input as it is gathered and set ``thread``'s flag on an infinity or NaN."""
    buf, chunk_info, recip, poison = buffers
    first = chunk * lanes
    count = gather_hermitian(a, first, lower, buf, n, lanes, nonfinite.size > 0)
    flag_poisoned(buf, poison, count, nonfinite, thread, n, n, lanes)
    _factor(buf, chunk_info, recip, n, lanes)
    for lane in range(count):
        info[first + lane] = chunk_info[lane]
    scatter_triangle(buf, count, a, lower, clean, out, first, n, stream)


@numba.njit(**JIT_OPTIONS, inline="always")
def _potrf_chunks(a, lower, clean, out, info, stream, nonfinite, thread, start, stop, n, lanes):
    """Factorize chunks ``start:stop`` of the stack in buffers (one thread's share)."""
    owned = _chunk_buffers(out, n, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        _potrf_chunk(a, lower, clean, out, info, stream, nonfinite, thread, chunk, buffers, n, lanes)
    keep_alive(owned)


@numba.njit(**JIT_OPTIONS, inline="always")
def _potrf_order_two(a, lower, clean, out, info, nonfinite, thread, start, stop, lanes):
    """:func:`_potrf_chunks` for 2 x 2 matrices: a full chunk of a real stack whose matrices, and those of ``out``,
    lie one after another on vectors straight from the stack (:func:`._order_two.potrf_chunk`), any other in a
    buffer (inlined once: each copy adds to the kernel's compile time)."""
    a_order, out_order = record_order(a, 2, 2), record_order(out, 2, 2)
    direct = takes(a) and a_order != NEITHER and out_order != NEITHER and lanes % WIDTH == 0
    owned = _chunk_buffers(out, 2, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * lanes
        if not (direct and first + lanes <= a.shape[0]
                and potrf_chunk(a, a_order, lower, clean, out, out_order, info, nonfinite.size > 0, first, lanes)):
            _potrf_chunk(a, lower, clean, out, info, False, nonfinite, thread, chunk, buffers, 2, lanes)
    keep_alive(owned)


@numba.njit(**JIT_OPTIONS)
def potrf_stack(a, lower, clean, out, info, stream, nonfinite, lanes, thread, threads):
    """Factorize every matrix of the 3-D stack ``a`` into ``out`` (C- or Fortran-ordered matrices); ``info`` per
    matrix; ``nonfinite`` as for ``_lu.getrf_stack`` (both triangles are checked, as SciPy checks them); ``stream``:
    whole records written with streaming stores (:mod:`.streaming`). Orders up to ``SMALL_ORDER`` in buffers of
    ``SMALL_ORDER_LANES`` run versions compiled for them."""
    a, out, info, nonfinite = borrowed((a, out, info, nonfinite))
    batch, n = a.shape[0], a.shape[1]
    chunks = (batch + lanes - 1) // lanes
    small = lanes == SMALL_ORDER_LANES
    start, stop = chunk_range(thread, threads, chunks)
    if small and n == 2:
        _potrf_order_two(a, lower, clean, out, info, nonfinite, thread, start, stop, SMALL_ORDER_LANES)
    elif small and n == 3:
        _potrf_chunks(a, lower, clean, out, info, stream, nonfinite, thread, start, stop, 3, SMALL_ORDER_LANES)
    elif small and n == 4:
        _potrf_chunks(a, lower, clean, out, info, stream, nonfinite, thread, start, stop, 4, SMALL_ORDER_LANES)
    else:
        _potrf_chunks(a, lower, clean, out, info, stream, nonfinite, thread, start, stop, n, lanes)
    if stream:
        store_fence()


@numba.njit(**JIT_OPTIONS)
def potrs_stack(c, lower, b, out, lanes, thread, threads):
    """Solve ``A X = B`` for each matrix, ``A = L L^H`` (``lower``) or ``U^H U``; ``out`` is (batch, n, k)."""
    batch, n, nrhs = b.shape[0], b.shape[1], b.shape[2]
    chunks = (batch + lanes - 1) // lanes
    start, stop = chunk_range(thread, threads, chunks)
    factor = on_cache_lines((n, n, lanes), out.dtype)
    rhs = on_cache_lines((n, nrhs, lanes), out.dtype)
    for chunk in range(start, stop):
        first = chunk * lanes
        count = gather_hermitian(c, first, lower, factor, n, lanes, False)
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
