"""OpenBLAS's LU of a small single-precision matrix, replayed over the interleaved lanes: its results to the bit,
many at a time.

SciPy's ``lu_factor`` of one single-precision matrix is OpenBLAS's ``sgetrf``, which for ``min(m, n) <= 16`` runs
its unblocked ``getf2`` (``lapack/getf2/getf2_k.c``): column by column, left-looking. Column ``j`` takes the earlier
row swaps, then each of its entries above the diagonal is reduced by ``sdot`` with the row of ``L`` to its left, the
entries from the diagonal down by ``sgemv_n`` of the columns to its left against the column above, the first largest
magnitude is the pivot, its row is swapped in and the column below it multiplied by its reciprocal.

The kernel here does the same operations in the same order, each rounding where OpenBLAS's kernels round (every
fused multiply-add written as one, nothing else contracted), as its SkylakeX kernels (AVX-512) or its Haswell ones
(AVX2, and Zen's, the same files) do: on machines running those, its results are the LAPACK loop's bit for bit, at
the interleaved kernels' speed. :mod:`.replay` checks that in each process before it is used. A buffer of one
vector of matrices (the default past order 4) runs :func:`_replay_vector`, the same operations on ``_simd`` vectors.
How ``sdot`` and ``sgemv_n`` round is in :func:`strided_dot` and :func:`matrix_vector_update` (docs/batched.md,
"Single precision: replays of OpenBLAS's own roundings", has the whole account). :mod:`._cholesky_replay` uses
both.

Past order 16 ``sgetrf`` splits the matrix into panels, each factored by ``getf2`` (or split again), with
triangular solves and matrix products between them: :func:`_replay_blocked` replays that on its SkylakeX kernels.

What OpenBLAS does its own way is left to LAPACK (``REDO_INFO``): a matrix whose factors hold an infinity or NaN
(``isamax``'s rule for a NaN), and one with a nonzero pivot below the smallest normal number, which OpenBLAS neither
swaps in nor divides by.
"""

from __future__ import annotations

import numba
import numpy as np

from ..perf.model import GETF2_MAX_N
from ._borrowed import borrowed, keep_alive
from ._interleave import (JIT_OPTIONS, NEITHER, chunk_range, gather, on_cache_lines, record_order, small_order_lanes,
                          smallest_normal)
from ._lu import REDO_INFO, pivot_vector_rows, scatter_chunk, search_pivot, straight_from_stack, swap_pivot_rows
from ._lu_pieces import lu_scratch
from ._order_four import pivot_first, pivot_second, pivot_third, rows_of, stored
from ._order_two import lu_chunk as order_two_chunk
from ._simd import (WIDTH, add, add_rounded_product, any_below, fused_multiply_add, load, magnitude, multiply,
                    narrowed, negative, quotient, splat, store, subtract, widened)

#: No contraction: each fused multiply-add is written as one (``fused_multiply_add``), each other product rounded.
REPLAY_JIT_OPTIONS = {**JIT_OPTIONS, "fastmath": False}

#: OpenBLAS's kernels a replay can follow (``kernels`` arguments): its SkylakeX ones (AVX-512) and its Haswell ones
#: (AVX2; also its Zen kernels', which are the same files).
SKYLAKEX, HASWELL = 0, 1
KERNEL_NAMES = {SKYLAKEX: "SkylakeX", HASWELL: "Haswell"}

@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def strided_dot(x, y, count, dot, lanes, kernels):
    """``dot[lane] = x[:count, lane] . y[:count, lane]`` as ``sdot`` sums vectors of which one is strided: the
    products in pairs (the SkylakeX build fuses the first onto the second, the Haswell one rounds both and adds),
    each pair added in double precision, a last odd product alone; the caller rounds the sum to single precision."""
    for lane in range(lanes):
        dot[lane] = 0.0
    k = 0
    while k + 1 < count:
        for lane in range(lanes):
            second = x[k + 1, lane] * y[k + 1, lane]
            if kernels == SKYLAKEX:
                pair = fused_multiply_add(x[k, lane], y[k, lane], second)
            else:
                pair = x[k, lane] * y[k, lane] + second
            dot[lane] += np.float64(pair)
        k += 2
    if k < count:
        for lane in range(lanes):
            dot[lane] += np.float64(x[k, lane] * y[k, lane])


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _columns_in_two_chains(buf, x, j, first, stop, rows, lanes):
    """Rows ``rows`` of ``A[:, j] -= A[:, first:stop] @ x[first:stop]`` as OpenBLAS's Haswell kernels take a group
    of four or eight columns in their blocks of four and eight rows: the even and the odd columns in a chain of fused
    multiply-adds each, their sum negated and added."""
    zero, minus_one = np.float32(0), np.float32(-1)
    for r in rows:
        for lane in range(lanes):
            even = odd = zero
            for k in range(first, stop, 2):
                even = fused_multiply_add(buf[r, k, lane], x[k, lane], even)
                odd = fused_multiply_add(buf[r, k + 1, lane], x[k + 1, lane], odd)
            buf[r, j, lane] = (even + odd) * minus_one + buf[r, j, lane]


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _columns_in_one_chain(buf, x, j, first, stop, rows, acc, lanes):
    """Rows ``rows`` of ``A[:, j] -= A[:, first:stop] @ x[first:stop]`` as one chain of fused multiply-adds per row
    from zero, subtracted at the end (OpenBLAS's SkylakeX kernel, and its Haswell ones in blocks of 16 rows)."""
    for r in rows:
        for lane in range(lanes):
            acc[lane] = 0
        for k in range(first, stop):
            for lane in range(lanes):
                acc[lane] = fused_multiply_add(buf[r, k, lane], x[k, lane], acc[lane])
        for lane in range(lanes):
            buf[r, j, lane] = fused_multiply_add(acc[lane], np.float32(-1), buf[r, j, lane])


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def matrix_vector_update(buf, x, j, top, acc, m, lanes, kernels, widest):
    """``A[top:, j] -= A[top:, :j] @ x[:j]``, as ``sgemv_n`` rounds it on OpenBLAS's ``kernels``: its rows in blocks
    of four (``blocked``), the first ``blocked & 12`` of them in the Haswell kernels' blocks of four and eight rows,
    the others in blocks of 16, the last ``(m - top) % 4`` one by one; its columns in groups of ``widest`` (8 for a
    contiguous ``x``, 4 for a strided one), then four, then one by one."""
    rows = m - top
    blocked = rows - rows % 4
    split = blocked & 12
    if kernels == SKYLAKEX and j != 4:
        _columns_in_one_chain(buf, x, j, 0, j, range(top, m), acc, lanes)
        return
    first = 0
    while j - first >= 4:
        stop = first + (8 if widest == 8 and j - first >= 8 else 4)
        _columns_in_two_chains(buf, x, j, first, stop, range(top, top + split), lanes)
        _columns_in_one_chain(buf, x, j, first, stop, range(top + split, top + blocked), acc, lanes)
        first = stop
    minus_one = np.float32(-1)
    for r in range(top, top + blocked):  # the SSE kernels of the last columns: nothing fused
        for k in range(first, j):
            for lane in range(lanes):
                buf[r, j, lane] = buf[r, j, lane] + buf[r, k, lane] * (x[k, lane] * minus_one)
    for r in range(top + blocked, m):
        for lane in range(lanes):
            acc[lane] = 0
        for k in range(j):
            for lane in range(lanes):
                if kernels == SKYLAKEX:
                    acc[lane] = fused_multiply_add(buf[r, k, lane], x[k, lane], acc[lane])
                else:
                    acc[lane] = acc[lane] + buf[r, k, lane] * x[k, lane]
        for lane in range(lanes):
            buf[r, j, lane] = buf[r, j, lane] + minus_one * acc[lane]


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _scale_below_pivot(buf, j, info, recip, m, lanes):
    """Multiply column ``j`` below the diagonal by the pivot's reciprocal; an exactly zero pivot sets ``info`` and
    leaves the column, a subnormal one (which OpenBLAS neither swaps in nor divides by) ``REDO_INFO``."""
    tiny = smallest_normal(buf)
    for lane in range(lanes):
        pivot = buf[j, j, lane]
        size = abs(pivot)
        usable = size >= tiny
        recip[lane] = np.float32(1) / pivot if usable else np.float32(1)
        if pivot == 0 and info[lane] == 0:
            info[lane] = j + 1
        if 0 < size < tiny:
            info[lane] = REDO_INFO
    for r in range(j + 1, m):
        for lane in range(lanes):
            buf[r, j, lane] = recip[lane] * buf[r, j, lane]


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _replay_chunk(buf, piv, info, acc, dot, recip, column, m, n, lanes, kernels):
    """OpenBLAS's ``getf2`` on the interleaved ``m x n`` matrices of ``buf``: ``piv[k, lane]`` 0-based, ``info[lane]``
    as LAPACK, ``REDO_INFO`` where a pivot is subnormal; ``column`` is scratch of ``m x lanes``."""
    for lane in range(lanes):
        info[lane] = 0
    for j in range(n):
        for k in range(min(j, m)):  # column j above the diagonal, contiguous for the products below
            for lane in range(lanes):
                column[k, lane] = buf[k, j, lane]
        for i in range(1, min(j, m)):  # U[i, j] -= L[i, :i] . U[:i, j]
            strided_dot(buf[i], column, i, dot, lanes, kernels)
            for lane in range(lanes):
                column[i, lane] -= np.float32(dot[lane])
                buf[i, j, lane] = column[i, lane]
        if j >= m:
            continue
        if j:
            matrix_vector_update(buf, column, j, j, acc, m, lanes, kernels, 8)
        search_pivot(buf, j, piv, acc, m, lanes)
        swap_pivot_rows(buf, j, piv, m, n, lanes)
        _scale_below_pivot(buf, j, info, recip, m, lanes)


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _vector_dot(buf, column, i, n, kernels):
    """:func:`strided_dot` of row ``i`` of a buffer of one vector of matrices with ``column[:i]``, on vectors: the
    products in pairs, each pair added in double precision; the sum as a vector of doubles."""
    row = i * n * WIDTH
    total = splat(np.float64(0))
    k = 0
    while k + 1 < i:
        second = multiply(load(buf, row + (k + 1) * WIDTH), load(column, (k + 1) * WIDTH))
        x, y = load(buf, row + k * WIDTH), load(column, k * WIDTH)
        if kernels == SKYLAKEX:
            pair = fused_multiply_add(x, y, second)
        else:
            pair = add_rounded_product(second, x, y)
        total = add(total, widened(pair))
        k += 2
    if k < i:
        total = add(total, widened(multiply(load(buf, row + k * WIDTH), load(column, k * WIDTH))))
    return total


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _vector_two_chains(buf, column, j, first, stop, start, end, n):
    """:func:`_columns_in_two_chains` for rows ``start:end`` of a buffer of one vector of matrices. Its ``(even +
    odd) * -1 + a`` is ``a - (even + odd)``: the product by -1 is exact."""
    zero = splat(buf.dtype.type(0))
    for r in range(start, end):
        row = r * n * WIDTH
        even = odd = zero
        for k in range(first, stop, 2):
            even = fused_multiply_add(load(buf, row + k * WIDTH), load(column, k * WIDTH), even)
            odd = fused_multiply_add(load(buf, row + (k + 1) * WIDTH), load(column, (k + 1) * WIDTH), odd)
        store(buf, row + j * WIDTH, subtract(load(buf, row + j * WIDTH), add(even, odd)))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _vector_one_chain(buf, column, j, first, stop, start, end, n):
    """:func:`_columns_in_one_chain` for rows ``start:end`` of a buffer of one vector of matrices."""
    zero, minus_one = splat(buf.dtype.type(0)), splat(buf.dtype.type(-1))
    for r in range(start, end):
        row = r * n * WIDTH
        total = zero
        for k in range(first, stop):
            total = fused_multiply_add(load(buf, row + k * WIDTH), load(column, k * WIDTH), total)
        store(buf, row + j * WIDTH, fused_multiply_add(total, minus_one, load(buf, row + j * WIDTH)))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _vector_update(buf, column, j, m, n, kernels):
    """:func:`matrix_vector_update` from the diagonal down (``top = j``, a contiguous ``x``) in a buffer of one
    vector of matrices, with the same roundings in the same order. Its last ``a + (-1) * total`` is ``a - total``."""
    blocked = (m - j) - (m - j) % 4
    split = blocked & 12
    if kernels == SKYLAKEX and j != 4:
        _vector_one_chain(buf, column, j, 0, j, j, m, n)
        return
    first = 0
    while j - first >= 4:
        stop = first + (8 if j - first >= 8 else 4)
        _vector_two_chains(buf, column, j, first, stop, j, j + split, n)
        _vector_one_chain(buf, column, j, first, stop, j + split, j + blocked, n)
        first = stop
    for r in range(j, j + blocked):  # the SSE kernels of the last columns: nothing fused
        at = (r * n + j) * WIDTH
        value = load(buf, at)
        for k in range(first, j):
            value = add_rounded_product(value, load(buf, at + (k - j) * WIDTH), negative(load(column, k * WIDTH)))
        store(buf, at, value)
    for r in range(j + blocked, m):
        row = r * n * WIDTH
        total = splat(buf.dtype.type(0))
        for k in range(j):
            if kernels == SKYLAKEX:
                total = fused_multiply_add(load(buf, row + k * WIDTH), load(column, k * WIDTH), total)
            else:
                total = add_rounded_product(total, load(buf, row + k * WIDTH), load(column, k * WIDTH))
        store(buf, row + j * WIDTH, subtract(load(buf, row + j * WIDTH), total))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _vector_pivot(buf, j, piv, info, recip, m, n):
    """Pivot search and row swap (:func:`~._lu.pivot_vector_rows`) and scaling of column ``j`` in a buffer of one
    vector of matrices: the reciprocals in one vector division where every pivot is at least the smallest normal
    number, else lane by lane (:func:`_scale_below_pivot`)."""
    at = (j * n + j) * WIDTH
    best = pivot_vector_rows(buf, j, piv, m, n)
    if any_below(best, splat(smallest_normal(buf))):
        _scale_below_pivot(buf, j, info, recip, m, WIDTH)
        return
    scale = quotient(splat(buf.dtype.type(1)), load(buf, at))
    for i in range(j + 1, m):
        below = at + (i - j) * n * WIDTH
        store(buf, below, multiply(scale, load(buf, below)))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _replay_vector(buf, piv, info, recip, column, m, n, kernels):
    """:func:`_replay_chunk` for a buffer of one vector of matrices (``WIDTH`` lanes), on ``_simd`` vectors: the
    same operations in the same order, bitwise its results. Written as loops over the lanes, the replay's short
    loops reached the compiler as scalar code (float32, order 16: about 4,600 scalar moves to a few dozen
    fused multiply-adds)."""
    for lane in range(WIDTH):
        info[lane] = 0
    for j in range(n):
        for k in range(min(j, m)):
            store(column, k * WIDTH, load(buf, (k * n + j) * WIDTH))
        for i in range(1, min(j, m)):
            value = subtract(load(column, i * WIDTH), narrowed(_vector_dot(buf, column, i, n, kernels)))
            store(column, i * WIDTH, value)
            store(buf, (i * n + j) * WIDTH, value)
        if j >= m:
            continue
        if j:
            _vector_update(buf, column, j, m, n, kernels)
        _vector_pivot(buf, j, piv, info, recip, m, n)


#: :func:`_replay_vector` compiled on its own for the blocked replay's panels (:func:`_factor_panel`): ``getrf_replay``
#: compiled in 238 s against 267 s with it inlined there too (the two compiling side by side; 195 s before the
#: blocked replay). Not inlined in the chunks either it took 185 s, but order 3 ran 66-82 ns a matrix instead of 52-55
#: (``lu``'s pieces, 10^4 matrices): there the chunk's sizes are constants.
_panel_getf2 = numba.njit(**REPLAY_JIT_OPTIONS)(_replay_vector.py_func)

#: Rows of the blocks in which OpenBLAS's ``strsm`` kernels solve a triangle, then halves for the rest: its SkylakeX
#: kernel (``kernel/generic/trsm_kernel_LT.c``) the ``sgemm`` kernel's 16, its Haswell one
#: (``strsm_kernel_8x4_haswell_LT.c``) 8.
_SKYLAKEX_SOLVE_ROWS, _HASWELL_SOLVE_ROWS = 16, 8

#: How a product is subtracted from an element (``_less_*``): a chain of fused multiply-adds from zero, then
#: ``total * -1 + c`` fused (the ``sgemm`` kernels); as two chains, the products of even and odd steps of each 8
#: apart, added (the Haswell ``sgemm`` kernel's 8 x 4 and 8 x 6 tiles); a chain of negated products from zero, added
#: to ``c`` (the Haswell ``strsm`` kernel on 4 columns).
CHAIN, SPLIT, NEGATED = 0, 1, 2

#: Steps of the Haswell ``sgemm`` kernel's unrolled loop, the two chains' turns alternating within it.
_SPLIT_STEPS = 8


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _less_one(buf, r, c, inner, depth, n, rounding):
    """``A[r, c] -= A[r, inner:inner + depth] . A[inner:inner + depth, c]`` in a buffer of one vector of matrices,
    rounded as ``rounding`` says (:data:`CHAIN`, :data:`SPLIT` or :data:`NEGATED`)."""
    total, other = splat(np.float32(0)), splat(np.float32(0))
    paired = inner + depth // _SPLIT_STEPS * _SPLIT_STEPS if rounding == SPLIT else inner
    for k in range(inner, paired, 2):
        total = fused_multiply_add(load(buf, (r * n + k) * WIDTH), load(buf, (k * n + c) * WIDTH), total)
        other = fused_multiply_add(load(buf, (r * n + k + 1) * WIDTH), load(buf, ((k + 1) * n + c) * WIDTH), other)
    for k in range(paired, inner + depth):
        a = load(buf, (r * n + k) * WIDTH)
        total = fused_multiply_add(negative(a) if rounding == NEGATED else a, load(buf, (k * n + c) * WIDTH), total)
    at = (r * n + c) * WIDTH
    if rounding == NEGATED:
        store(buf, at, add(load(buf, at), total))
    else:
        _less_total(buf, r, c, add(total, other) if rounding == SPLIT else total, n)


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _less_four_by_four(buf, r, c, inner, depth, n):
    """:func:`_less_one`'s :data:`CHAIN` on rows ``r:r + 4`` and columns ``c:c + 4``, the sixteen chains side by
    side: a chain's steps wait on one another, sixteen chains' do not, and each element loaded serves four of them."""
    t00 = t01 = t02 = t03 = t10 = t11 = t12 = t13 = splat(np.float32(0))
    t20 = t21 = t22 = t23 = t30 = t31 = t32 = t33 = t00
    for k in range(inner, inner + depth):
        a0, a1 = load(buf, (r * n + k) * WIDTH), load(buf, ((r + 1) * n + k) * WIDTH)
        a2, a3 = load(buf, ((r + 2) * n + k) * WIDTH), load(buf, ((r + 3) * n + k) * WIDTH)
        b0, b1 = load(buf, (k * n + c) * WIDTH), load(buf, (k * n + c + 1) * WIDTH)
        b2, b3 = load(buf, (k * n + c + 2) * WIDTH), load(buf, (k * n + c + 3) * WIDTH)
        t00, t01 = fused_multiply_add(a0, b0, t00), fused_multiply_add(a0, b1, t01)
        t02, t03 = fused_multiply_add(a0, b2, t02), fused_multiply_add(a0, b3, t03)
        t10, t11 = fused_multiply_add(a1, b0, t10), fused_multiply_add(a1, b1, t11)
        t12, t13 = fused_multiply_add(a1, b2, t12), fused_multiply_add(a1, b3, t13)
        t20, t21 = fused_multiply_add(a2, b0, t20), fused_multiply_add(a2, b1, t21)
        t22, t23 = fused_multiply_add(a2, b2, t22), fused_multiply_add(a2, b3, t23)
        t30, t31 = fused_multiply_add(a3, b0, t30), fused_multiply_add(a3, b1, t31)
        t32, t33 = fused_multiply_add(a3, b2, t32), fused_multiply_add(a3, b3, t33)
    _less_total(buf, r, c, t00, n)
    _less_total(buf, r, c + 1, t01, n)
    _less_total(buf, r, c + 2, t02, n)
    _less_total(buf, r, c + 3, t03, n)
    _less_total(buf, r + 1, c, t10, n)
    _less_total(buf, r + 1, c + 1, t11, n)
    _less_total(buf, r + 1, c + 2, t12, n)
    _less_total(buf, r + 1, c + 3, t13, n)
    _less_total(buf, r + 2, c, t20, n)
    _less_total(buf, r + 2, c + 1, t21, n)
    _less_total(buf, r + 2, c + 2, t22, n)
    _less_total(buf, r + 2, c + 3, t23, n)
    _less_total(buf, r + 3, c, t30, n)
    _less_total(buf, r + 3, c + 1, t31, n)
    _less_total(buf, r + 3, c + 2, t32, n)
    _less_total(buf, r + 3, c + 3, t33, n)


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _less_total(buf, r, c, total, n):
    """``A[r, c] = total * -1 + A[r, c]``, fused: how the ``sgemm`` kernels subtract a product."""
    at = (r * n + c) * WIDTH
    store(buf, at, fused_multiply_add(total, splat(np.float32(-1)), load(buf, at)))


@numba.njit(**REPLAY_JIT_OPTIONS)
def _less_region(buf, start, end, first, stop, inner, depth, n, rounding):
    """``A[start:end, first:stop] -= A[start:end, inner:inner + depth] @ A[inner:inner + depth, first:stop]`` in a
    buffer of one vector of matrices, each element as :func:`_less_one` rounds it: a :data:`CHAIN` in tiles of four
    rows by four columns (:func:`_less_four_by_four`), the rest element by element. Compiled once, for its callers.
    A :data:`NEGATED` region of no depth still adds zero to each element (a negative zero turns positive), as the
    Haswell ``strsm`` kernel's first block does."""
    rows = start + (end - start) // 4 * 4 if rounding == CHAIN else start
    columns = first + (stop - first) // 4 * 4 if rounding == CHAIN else first
    for c in range(first, columns, 4):
        for r in range(start, rows, 4):
            _less_four_by_four(buf, r, c, inner, depth, n)
    for c in range(first, stop):
        for r in range(rows if c < columns else start, end):
            _less_one(buf, r, c, inner, depth, n, rounding)


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _less_side(buf, start, split, end, first, stop, inner, depth, n):
    """:func:`_less_region` on rows ``start:end`` of columns ``first:stop``, rows ``split:split + 8`` of them as
    :data:`SPLIT` (none where ``split`` is ``end``), the others as :data:`CHAIN`."""
    _less_region(buf, start, split, first, stop, inner, depth, n, CHAIN)
    _less_region(buf, split, min(split + 8, end), first, stop, inner, depth, n, SPLIT)
    _less_region(buf, min(split + 8, end), end, first, stop, inner, depth, n, CHAIN)


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _last_rows_of_twelve(rows):
    """Where the Haswell ``sgemm`` kernel's 12 columns over ``rows >= 16`` rows end in a tile of 8 rows by 6 columns:
    its first row, and whether on the left 6 columns. The kernel starts with rows 0-7 on the left, then runs tiles of
    16 rows by 6 columns 8 rows apart, right and left in turn, while 16 rows are left."""
    left, row = rows, 0
    while True:
        left, row = left - 8, row + 8
        if left < 16:
            return row, True
        left, row = left - 8, row + 8
        if left < 16:
            return row, False


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _less_product(buf, start, end, inner, depth, first, stop, n, kernels):
    """``getrf``'s update of the columns right of a panel below it, as the ``sgemm`` kernel of ``kernels`` rounds
    each element: the SkylakeX kernel as a :data:`CHAIN`; the Haswell one as a :data:`SPLIT` where its tiles of 8
    rows keep two sums (in columns of 12, rows 0-7 of the left 6 and the last 8-row tile
    (:func:`_last_rows_of_twelve`); in the 4 columns after the 12s and 8s, every whole 8 rows), a chain elsewhere."""
    if kernels == SKYLAKEX:
        _less_region(buf, start, end, first, stop, inner, depth, n, CHAIN)
        return
    c = first
    while stop - c >= 12:
        if end - start < 16:
            _less_region(buf, start, end, c, c + 12, inner, depth, n, CHAIN)
        else:
            last, on_left = _last_rows_of_twelve(end - start)
            _less_region(buf, start, start + 8, c, c + 6, inner, depth, n, SPLIT)
            _less_side(buf, start + 8, start + last if on_left else end, end, c, c + 6, inner, depth, n)
            _less_side(buf, start, end if on_left else start + last, end, c + 6, c + 12, inner, depth, n)
        c += 12
    if stop - c >= 8:
        _less_region(buf, start, end, c, c + 8, inner, depth, n, CHAIN)
        c += 8
    if stop - c >= 4:
        eights = start + (end - start) // 8 * 8
        _less_region(buf, start, eights, c, c + 4, inner, depth, n, SPLIT)
        _less_region(buf, eights, end, c, c + 4, inner, depth, n, CHAIN)
        c += 4
    _less_region(buf, start, end, c, stop, inner, depth, n, CHAIN)


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _solve_unit_lower(buf, top, size, first, stop, n, kernels):
    """Rows ``top:top + size`` of columns ``first:stop`` solved with the unit lower triangle at ``top`` (``getrf``'s
    rows of ``U`` right of a panel) in a buffer of one vector of matrices, as OpenBLAS's ``strsm`` kernel of
    ``kernels`` rounds it: in blocks of rows (16 or 8, then halves), each less the rows solved before it
    (:func:`_less_region`: the Haswell kernel's own code, on each 4 columns, :data:`NEGATED`; its ``sgemm`` on the
    last 1-3 columns, and the SkylakeX kernel's, a :data:`CHAIN`), then solved within the block, row by row, each
    ``c - x * l`` fused (on the Haswell kernel's last 1-3 columns, its C code, the product rounded first)."""
    done, rows = 0, _SKYLAKEX_SOLVE_ROWS if kernels == SKYLAKEX else _HASWELL_SOLVE_ROWS
    fours = first + (stop - first) // 4 * 4 if kernels == HASWELL else first
    fused = fours if kernels == HASWELL else stop
    while done < size:
        while done + rows > size:
            rows //= 2
        _less_region(buf, top + done, top + done + rows, first, fours, top, done, n, NEGATED)
        if done:
            _less_region(buf, top + done, top + done + rows, fours, stop, top, done, n, CHAIN)
        for i in range(top + done, top + done + rows):
            for c in range(first, stop):
                x = negative(load(buf, (i * n + c) * WIDTH))
                for r in range(i + 1, top + done + rows):
                    at, step = (r * n + c) * WIDTH, load(buf, (r * n + i) * WIDTH)
                    if c < fused:
                        store(buf, at, fused_multiply_add(x, step, load(buf, at)))
                    else:
                        store(buf, at, add_rounded_product(load(buf, at), x, step))
        done += rows


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _swap_outside(buf, k, row, lane, top, columns, n):
    """Swap rows ``k`` and ``row`` of lane ``lane`` in the columns left and right of the panel at ``top``. Whole-row
    swaps by :func:`~._lu.swap_pivot_rows` after each panel column gave the same bits 2.5x slower at orders 17-64
    (one thread, 10^4 matrices: 2,600-3,300 ns a matrix at order 17 against 970-1,360)."""
    for c in range(top):
        held = buf[row, c, lane]
        buf[row, c, lane] = buf[k, c, lane]
        buf[k, c, lane] = held
    for c in range(top + columns, n):
        held = buf[row, c, lane]
        buf[row, c, lane] = buf[k, c, lane]
        buf[k, c, lane] = held


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _copy_panel(buf, panel, top, columns, rows, n, out):
    """Copy ``buf[top:top + rows, top:top + columns]`` into the contiguous ``panel`` (``out``), or back, a vector at a
    time (numba's copy of a slice of three dimensions took 7.6 µs of a matrix's 12 at order 64)."""
    for r in range(rows):
        for c in range(columns):
            at, there = ((top + r) * n + top + c) * WIDTH, (r * columns + c) * WIDTH
            if out:
                store(panel, there, load(buf, at))
            else:
                store(buf, at, load(panel, there))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _factor_panel(buf, piv, info, scratch, top, columns, m, n, kernels):
    """``getf2`` on the panel ``buf[top:, top:top + columns]``, copied into ``scratch`` and factored there by the
    unblocked replay; its row swaps then made across the rest of each row, its pivots and ``info`` made the
    matrix's. OpenBLAS swaps the columns right of a panel before it next computes on them and those left of it at the
    end: the same values, since no arithmetic reads a column between its swaps."""
    panel_flat, panel_piv, panel_info, recip, column = scratch
    rows = m - top
    panel = panel_flat[:rows * columns * WIDTH].reshape((rows, columns, WIDTH))
    _copy_panel(buf, panel, top, columns, rows, n, True)
    _panel_getf2(panel, panel_piv, panel_info, recip, column, rows, columns, kernels)
    _copy_panel(buf, panel, top, columns, rows, n, False)
    for k in range(min(rows, columns)):
        for lane in range(WIDTH):
            row = panel_piv[k, lane]
            piv[top + k, lane] = top + row
            if row != k:
                _swap_outside(buf, top + k, top + row, lane, top, columns, n)
    for lane in range(WIDTH):
        if panel_info[lane] == REDO_INFO:
            info[lane] = REDO_INFO
        elif panel_info[lane] > 0 and info[lane] == 0:
            info[lane] = top + panel_info[lane]


#: Levels of panels within panels :func:`_replay_blocked` keeps track of: each halves the columns, so 64 bits of
#: order would not fill them.
_LEVELS = 64


@numba.njit(**REPLAY_JIT_OPTIONS)
def _replay_blocked(buf, piv, info, scratch, m, n, kernels):
    """OpenBLAS's ``sgetrf`` (``lapack/getrf/getrf_single.c``) on the interleaved ``m x n`` matrices of ``buf`` as
    its SkylakeX kernels round it. It factors a block of columns (from the diagonal down) as panels of half its
    columns rounded up to the ``sgemm`` kernel's 4, each panel the same way, then the rows of ``U`` right of it
    (:func:`_solve_unit_lower`) and the rest of the block's columns below them (:func:`_less_product`); a block whose
    panels would be 8 columns or fewer is ``getf2``'s whole (:func:`_factor_panel`). OpenBLAS recurses; here a stack
    of blocks does, as numba's cache cannot load a recursive function."""
    info[:] = 0
    tops, widths = np.zeros(_LEVELS, dtype=np.int64), np.zeros(_LEVELS, dtype=np.int64)
    panels, factored = np.zeros(_LEVELS, dtype=np.int64), np.zeros(_LEVELS, dtype=np.bool_)
    widths[0], depth = n, 1
    while depth:
        level = depth - 1
        top, columns, j = tops[level], widths[level], panels[level]
        size = min(m - top, columns)
        blocking = (size // 2 + 3) // 4 * 4
        if blocking <= 8:
            _factor_panel(buf, piv, info, scratch, top, columns, m, n, kernels)
            depth -= 1
        elif factored[level]:
            width = min(size - j, blocking)
            if j + width < columns:
                right, stop = top + j + width, top + columns
                _solve_unit_lower(buf, top + j, width, right, stop, n, kernels)
                _less_product(buf, right, m, top + j, width, right, stop, n, kernels)
            panels[level], factored[level] = j + blocking, False
        elif j >= size:
            depth -= 1
        else:
            factored[level] = True
            tops[depth], widths[depth] = top + j, min(size - j, blocking)
            panels[depth], factored[depth] = 0, False
            depth += 1


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _replay_buffers(out, pieces, m, n, lanes):
    """One thread's buffers for chunks of ``m x n`` matrices, ``lanes`` at a time, each on cache lines
    (:func:`~._interleave.on_cache_lines`): the chunk, its pivots and ``info``, the replay's scratch (sums,
    reciprocals, double-precision dot products, one column), the scratch for ``lu``'s ``pieces``
    (:func:`~._lu_pieces.lu_scratch`) and the blocked replay's panel, pivots and ``info``."""
    return (on_cache_lines((m, n, lanes), out.dtype), on_cache_lines((min(m, n), lanes), np.int64),
            on_cache_lines((lanes,), np.int32), on_cache_lines((lanes,), out.dtype),
            on_cache_lines((lanes,), out.dtype), on_cache_lines((lanes,), np.float64),
            on_cache_lines((m, lanes), out.dtype), lu_scratch(out, m, n, lanes, pieces),
            on_cache_lines((m * n * lanes if min(m, n) > GETF2_MAX_N else 0,), out.dtype),
            on_cache_lines((min(m, n), lanes), np.int64), on_cache_lines((lanes,), np.int32))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _replay_stack_chunk(a, out, piv, info, kernels, pieces, nonfinite, thread, chunk, buffers, m, n, lanes):
    """Replay chunk ``chunk`` of the stack in the ``buffers`` of :func:`_replay_buffers`, writing its packed LU, or,
    where ``out`` is empty, ``lu``'s ``pieces`` as :func:`~._lu.getrf_stack` does. Past ``getf2``'s orders the
    blocked replay runs on a buffer of one vector of matrices; a wider buffer's matrices are left to LAPACK."""
    buf, chunk_piv, chunk_info, acc, recip, dot, column, scratch, panel, panel_piv, panel_info = buffers
    first = chunk * lanes
    count = gather(a, first, buf, m, n, lanes)
    if min(m, n) > GETF2_MAX_N and lanes != WIDTH:
        chunk_info[:] = REDO_INFO
    elif min(m, n) > GETF2_MAX_N:
        _replay_blocked(buf, chunk_piv, chunk_info, (panel, panel_piv, panel_info, recip, column), m, n, kernels)
    elif lanes == WIDTH:
        _replay_vector(buf, chunk_piv, chunk_info, recip, column, m, n, kernels)
    else:
        _replay_chunk(buf, chunk_piv, chunk_info, acc, dot, recip, column, m, n, lanes, kernels)
    scatter_chunk(a, buf, chunk_piv, chunk_info, acc, count, out, piv, info, nonfinite, thread, first, pieces,
                  scratch, m, n, lanes)


@numba.njit(**REPLAY_JIT_OPTIONS)
def _replay_chunks(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop, m, n, lanes):
    """Replay chunks ``start:stop`` of the stack in buffers (one thread's share; the sizes as arguments, so that the
    small orders get versions compiled for them)."""
    owned = _replay_buffers(out, pieces, m, n, lanes)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        _replay_stack_chunk(a, out, piv, info, kernels, pieces, nonfinite, thread, chunk, buffers, m, n, lanes)
    keep_alive(owned)


#: The options of the order-4 helpers below, which take and return vectors only: inlined by LLVM, as
#: ``_order_four``'s are, nothing contracted.
_VECTORS_BY_LLVM = {**REPLAY_JIT_OPTIONS, "forceinline": True}


@numba.njit(**_VECTORS_BY_LLVM)
def _less_chain(c, left, above, kernels):
    """``c`` less ``left . above`` as :func:`_vector_update` computes a row at order 4 (no block of four rows below
    the diagonal): the SkylakeX kernel in one fused chain, ``total * -1 + c``; the Haswell one each product rounded
    and added, ``c - total``."""
    total = splat(np.float32(0))
    if kernels == SKYLAKEX:
        for k in range(len(left)):
            total = fused_multiply_add(left[k], above[k], total)
        return fused_multiply_add(total, splat(np.float32(-1)), c)
    for k in range(len(left)):
        total = add_rounded_product(total, left[k], above[k])
    return subtract(c, total)


@numba.njit(**_VECTORS_BY_LLVM)
def _less_dot(c, left, above, kernels):
    """``c`` less ``left . above`` as :func:`_replay_vector` computes an element above the diagonal: the products
    in pairs added in double precision (:func:`_vector_dot`), the sum rounded to single."""
    total = splat(np.float64(0))
    k = 0
    while k + 1 < len(left):
        second = multiply(left[k + 1], above[k + 1])
        if kernels == SKYLAKEX:
            pair = fused_multiply_add(left[k], above[k], second)
        else:
            pair = add_rounded_product(second, left[k], above[k])
        total = add(total, widened(pair))
        k += 2
    if k < len(left):
        total = add(total, widened(multiply(left[k], above[k])))
    return subtract(c, narrowed(total))


@numba.njit(**REPLAY_JIT_OPTIONS, inline="always")
def _order_four_groups(a, a_order, out, out_order, piv, info, first, count, kernels) -> bool:
    """:func:`_replay_vector` on matrices ``first`` to ``first + count`` (a multiple of ``WIDTH``) of the 4 x 4
    stack ``a``, ``WIDTH`` at a time in registers straight from the stack, as ``_order_four.lu_chunk`` does: the same
    operations in the same order, so the same bits. False at the first group that is not the common case (a pivot
    below the smallest normal number, a factor that is not finite), which it leaves unwritten."""
    least, one = splat(smallest_normal(out)), splat(np.float32(1))
    for group in range(first, first + count, WIDTH):
        p0, best, r0, r1, r2, r3 = pivot_first(*rows_of(a, a_order, group))
        low = any_below(best, least)
        scale = quotient(one, r0[0])
        r1 = (multiply(scale, r1[0]), r1[1], r1[2], r1[3])
        r2 = (multiply(scale, r2[0]), r2[1], r2[2], r2[3])
        r3 = (multiply(scale, r3[0]), r3[1], r3[2], r3[3])
        above = (r0[1],)
        r1 = (r1[0], _less_chain(r1[1], (r1[0],), above, kernels), r1[2], r1[3])
        r2 = (r2[0], _less_chain(r2[1], (r2[0],), above, kernels), r2[2], r2[3])
        r3 = (r3[0], _less_chain(r3[1], (r3[0],), above, kernels), r3[2], r3[3])
        p1, best, r1, r2, r3 = pivot_second(r1, r2, r3)
        low |= any_below(best, least)
        scale = quotient(one, r1[1])
        r2 = (r2[0], multiply(scale, r2[1]), r2[2], r2[3])
        r3 = (r3[0], multiply(scale, r3[1]), r3[2], r3[3])
        above = (r0[2], _less_dot(r1[2], (r1[0],), (r0[2],), kernels))
        r1 = (r1[0], r1[1], above[1], r1[3])
        r2 = (r2[0], r2[1], _less_chain(r2[2], (r2[0], r2[1]), above, kernels), r2[3])
        r3 = (r3[0], r3[1], _less_chain(r3[2], (r3[0], r3[1]), above, kernels), r3[3])
        p2, best, r2, r3 = pivot_third(r2, r3)
        low |= any_below(best, least)
        r3 = (r3[0], r3[1], multiply(quotient(one, r2[2]), r3[2]), r3[3])
        second = _less_dot(r1[3], (r1[0],), (r0[3],), kernels)
        above = (r0[3], second, _less_dot(r2[3], (r2[0], r2[1]), (r0[3], second), kernels))
        r1 = (r1[0], r1[1], r1[2], above[1])
        r2 = (r2[0], r2[1], r2[2], above[2])
        r3 = (r3[0], r3[1], r3[2], _less_chain(r3[3], (r3[0], r3[1], r3[2]), above, kernels))
        low |= any_below(magnitude(r3[3]), least)
        if not stored(out, out_order, piv, info, group, (r0, r1, r2, r3), (p0, p1, p2), low):
            return False
    return True


@numba.njit(**REPLAY_JIT_OPTIONS)
def _replay_order_four(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop):
    """:func:`_replay_chunks` for 4 x 4 matrices in buffers of one vector (``_LANES_4``): a full chunk whose
    matrices, and the packed LU it writes, lie one after another is factored in registers straight from the stack
    (:func:`_order_four_groups`), any other (and ``lu``'s pieces) in a buffer, the buffered chunk inlined once as
    in ``_lu._getrf_order_four``."""
    a_order, out_order = record_order(a, 4, 4), record_order(out, 4, 4)
    direct = out.shape[0] > 0 and out_order != NEITHER and a_order != NEITHER
    owned = _replay_buffers(out, pieces, 4, 4, _LANES_4)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * _LANES_4
        if not (direct and first + _LANES_4 <= a.shape[0]
                and _order_four_groups(a, a_order, out, out_order, piv, info, first, _LANES_4, kernels)):
            _replay_stack_chunk(a, out, piv, info, kernels, pieces, nonfinite, thread, chunk, buffers, 4, 4,
                                _LANES_4)
    keep_alive(owned)


#: ``_interleave.small_order_lanes`` of the replay (single precision only) at orders 2, 3 and 4: each reaches
#: :func:`_replay_chunks` as a constant, so that its loops over the lanes have constant bounds.
_LANES_2, _LANES_3, _LANES_4 = (small_order_lanes("getrf_replay", "f", order) for order in (2, 3, 4))


@numba.njit(**REPLAY_JIT_OPTIONS)
def _replay_order_two(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop):
    """:func:`_replay_chunks` for 2 x 2 matrices in buffers of ``_LANES_2``: a full chunk whose matrices, and those
    it writes, lie one after another is factored on vectors straight from the stack (``_order_two.lu_chunk`` in
    OpenBLAS's roundings, which at order 2 its SkylakeX and Haswell kernels share), any other in a buffer. In a
    buffer the replay cost 10.7 ns a matrix, 9x the double-precision kernel straight from the stack (2-core Zen 5,
    10^5 matrices)."""
    a_order, out_order = record_order(a, 2, 2), record_order(out, 2, 2)
    direct = straight_from_stack(a, out, pieces, a_order, out_order, 2, _LANES_2)
    owned = _replay_buffers(out, pieces, 2, 2, _LANES_2)
    buffers = borrowed(owned)
    for chunk in range(start, stop):
        first = chunk * _LANES_2
        if not (direct and first + _LANES_2 <= a.shape[0]
                and order_two_chunk(a, a_order, out, out_order, piv, info, pieces, first, _LANES_2, False)):
            _replay_stack_chunk(a, out, piv, info, kernels, pieces, nonfinite, thread, chunk, buffers, 2, 2,
                                _LANES_2)
    keep_alive(owned)


@numba.njit(**REPLAY_JIT_OPTIONS)
def getrf_replay_stack(a, out, piv, info, kernels, permute_l, rows, lower, upper, permutation, nonfinite, lanes,
                       thread, threads):
    """:func:`~._lu.getrf_stack`'s contract (``lu``'s pieces too) with OpenBLAS's roundings (:func:`_replay_chunk`),
    for the matrices :func:`~.replay.getrf_kernels` gives it. Square orders up to ``SMALL_ORDER`` in
    buffers of ``_interleave.small_order_lanes`` run versions compiled for their sizes (:func:`_replay_vector` on one
    vector of matrices, or the loops over the lanes, unrolled over the matrix)."""
    a, out, piv, info, rows, lower, upper, permutation, nonfinite = borrowed(
        (a, out, piv, info, rows, lower, upper, permutation, nonfinite))
    batch, m, n = a.shape
    chunks = (batch + lanes - 1) // lanes
    pieces = (permute_l, rows, lower, upper, permutation)
    start, stop = chunk_range(thread, threads, chunks)
    if m == n == 2 and lanes == _LANES_2:
        _replay_order_two(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop)
    elif m == n == 3 and lanes == _LANES_3:
        _replay_chunks(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop, 3, 3, _LANES_3)
    elif m == n == 4 and lanes == _LANES_4:
        _replay_order_four(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop)
    else:
        _replay_chunks(a, out, piv, info, kernels, pieces, nonfinite, thread, start, stop, m, n, lanes)
