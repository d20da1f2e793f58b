"""OpenBLAS's QR of a small single-precision matrix, replayed matrix by matrix: its results to the bit, without a
LAPACK call per matrix.

SciPy's ``qr`` of one single-precision matrix is ``sgeqrf`` then ``sorgqr``; at the orders replayed here both run
their unblocked forms, ``sgeqr2`` and ``sorg2r`` (reference LAPACK, compiled without fused multiply-adds), on
OpenBLAS's BLAS:

- ``slarfg``: the column's norm by ``snrm2`` (``nrm2_sse.S``: squares summed in double precision into eight partial
  sums, the first element alone into the seventh where the column's address is not a multiple of 8 bytes, then
  ``((s0 + s2) + (s4 + s6)) + ((s1 + s3) + (s5 + s7))``, its root rounded to single; a single element's norm is its
  magnitude), ``slapy2`` (``w * sqrt(1 + (z / w)**2)``), ``tau = (beta - alpha) / beta`` and the column scaled by
  ``1 / (alpha - beta)``;
- ``slarf``: the reflector's last nonzero row and the block's last nonzero column (``ilaslc``), then ``sgemv_t``
  (``sgemv_t_4.c``: the kernel of :mod:`._cholesky_replay`, blocks of four rows then the last ``rows % 4`` rows in C,
  whose products the SkylakeX build fuses; that build's own small kernels where the block is the whole matrix of at
  most 8 rows, each with its own order of sums), and ``sger`` (``saxpy`` per column: fused in blocks of 32 rows, and
  in the remaining rows on SkylakeX only);
- ``sorg2r``: the same ``slarf``, the column scaled by ``-tau``, the diagonal ``1 - tau``.

The matrices' addresses are those LAPACK is given by SciPy and by the LAPACK loop: Fortran-ordered, the leading
dimension their rows, the first element 8-byte aligned. A matrix that is not finite, or whose ``slarfg`` would
rescale (a reflector norm below ``SAFE_MINIMUM``), is left to LAPACK; :mod:`.replay` checks the replay against
LAPACK before it is used.

The replay is written once, for one matrix and for a buffer of one ``_simd`` vector of matrices (``WIDTH`` of them,
each entry a vector: :func:`~._simd.entry`), and runs a chunk of ``WIDTH`` matrices on vectors where every branch
LAPACK takes is the same in every lane: a dense matrix's reflectors are never shortened by ``ilaslr`` and
``ilaslc``, nor any ``tau`` zero. A chunk where some lane's would be (a zero column, a matrix already triangular, a
rescale, an overflow), or that is not finite, is replayed matrix by matrix.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.extending import overload

from ._interleave import chunk_range, copy_checked, flag_nonfinite, gather, on_cache_lines, poison_lanes, scatter
from ._lapack_each import qr_arguments, workspaces, write_qr
from ._lu_replay import REPLAY_JIT_OPTIONS, SKYLAKEX
from ._qr import scatter_upper
from ._simd import (WIDTH, any_below, any_zero, constant_like, copy_sign, element, entry, fused_multiply_add,
                    magnitude, narrowed, set_element, set_entry, splat, square_root, where_greater, widened)

#: The helpers' options: each compiled once and inlined by LLVM into its caller (``forceinline``), which calls them
#: per matrix or vector of matrices: as plain calls, the arrays' reference counts had cost more than the arithmetic,
#: and inlined in numba's IR, written once for matrices and vectors, they took eight minutes to compile.
_HELPER_OPTIONS = {**REPLAY_JIT_OPTIONS, "forceinline": True}

#: ``slamch('S') / slamch('E')``: ``slarfg`` rescales a column whose reflector is smaller (left to LAPACK).
SAFE_MINIMUM = np.float32(2.0**-102)

#: ``slamch('O')``: ``slapy2`` returns the larger magnitude when it exceeds this.
_HUGE = np.float32(np.finfo(np.float32).max)

#: Rows up to which SkylakeX's ``sgemv_t`` runs its small kernels (on a whole matrix: rows equal to its leading
#: dimension).
SMALL_KERNEL_ROWS = 8

#: Rows ``saxpy`` takes in its vector kernel (32 at a time, fused multiply-adds in both builds) before its C loop.
_AXPY_BLOCK = 32


@numba.njit(**_HELPER_OPTIONS)
def _square(a, r, c):
    """The square of entry ``[r, c]`` in double precision (exact)."""
    x = widened(entry(a, r, c))
    return x * x


@numba.njit(**_HELPER_OPTIONS)
def _sum_of_squares(a, col, top, count):
    """``snrm2``'s sum of the squares of ``a[top:top + count, col]`` (``count >= 2``; Fortran-ordered, leading
    dimension the rows), in double precision."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = widened(constant_like(a, 0))
    r, left = top, count
    if (col * a.shape[0] + top) & 1:
        s6 = s6 + _square(a, r, col)
        r, left = r + 1, left - 1
    while left >= 8:
        s0, s1 = s0 + _square(a, r, col), s1 + _square(a, r + 1, col)
        s2, s3 = s2 + _square(a, r + 2, col), s3 + _square(a, r + 3, col)
        s4, s5 = s4 + _square(a, r + 4, col), s5 + _square(a, r + 5, col)
        s6, s7 = s6 + _square(a, r + 6, col), s7 + _square(a, r + 7, col)
        r, left = r + 8, left - 8
    if left & 4:
        s0, s1 = s0 + _square(a, r, col), s1 + _square(a, r + 1, col)
        s2, s3 = s2 + _square(a, r + 2, col), s3 + _square(a, r + 3, col)
        r += 4
    if left & 2:
        s4, s5 = s4 + _square(a, r, col), s5 + _square(a, r + 1, col)
        r += 2
    if left & 1:
        s6 = s6 + _square(a, r, col)
    return ((s0 + s2) + (s4 + s6)) + ((s1 + s3) + (s5 + s7))


@numba.njit(**_HELPER_OPTIONS)
def _hypot(x, y):
    """``slapy2(x, y)`` of finite ``x`` and ``y``."""
    xabs, yabs = abs(x), abs(y)
    w, z = max(xabs, yabs), min(xabs, yabs)
    if z == 0 or w > _HUGE:
        return w
    ratio = z / w
    return w * np.sqrt(np.float32(1) + ratio * ratio)


@numba.njit(**_HELPER_OPTIONS)
def _matrix_reflector(a, i):
    """``slarfg`` on ``a[i:, i]`` of one matrix: ``beta`` into ``a[i, i]``, ``v[1:]`` below it; ``tau``, and False
    where it would rescale (left to LAPACK)."""
    m = a.shape[0]
    if m - i <= 1:
        return np.float32(0), True
    count = m - i - 1
    norm = abs(a[m - 1, i]) if count == 1 else np.float32(math.sqrt(_sum_of_squares(a, i, i + 1, count)))
    if norm == 0:
        return np.float32(0), True
    alpha = a[i, i]
    beta = -np.float32(math.copysign(_hypot(alpha, norm), alpha))
    if abs(beta) < SAFE_MINIMUM:
        return np.float32(0), False
    tau = (beta - alpha) / beta
    scale = np.float32(1) / (alpha - beta)
    for r in range(i + 1, m):
        a[r, i] = a[r, i] * scale
    a[i, i] = beta
    return tau, True


@numba.njit(**_HELPER_OPTIONS)
def _vector_reflector(a, i):
    """:func:`_matrix_reflector` on a buffer of one vector of matrices, where in every lane the column below the
    diagonal is not zero and ``slapy2`` and ``slarfg`` take their usual branch; False otherwise."""
    m = a.shape[0]
    if m - i <= 1:
        return constant_like(a, 0), True
    count = m - i - 1
    norm = magnitude(entry(a, m - 1, i)) if count == 1 else narrowed(square_root(_sum_of_squares(a, i, i + 1, count)))
    alpha = entry(a, i, i)
    size = magnitude(alpha)
    larger, smaller = where_greater(size, norm, size, norm), where_greater(size, norm, norm, size)
    if any_zero(norm) or any_below(splat(_HUGE), larger):
        return norm, False
    ratio = smaller / larger
    beta = -copy_sign(larger * square_root(constant_like(a, 1) + ratio * ratio), alpha)
    if any_below(magnitude(beta), splat(SAFE_MINIMUM)):
        return beta, False
    tau = (beta - alpha) / beta
    scale = constant_like(a, 1) / (alpha - beta)
    for r in range(i + 1, m):
        set_entry(a, r, i, entry(a, r, i) * scale)
    set_entry(a, i, i, beta)
    return tau, True


def _reflector(a, i):
    """``slarfg`` on column ``i`` of a matrix or of a buffer of one vector of matrices: ``tau``, and whether the
    replay goes on."""


@overload(_reflector, jit_options=_HELPER_OPTIONS)
def _reflector_for(a, i):
    return (lambda a, i: _matrix_reflector(a, i)) if a.ndim == 2 else (lambda a, i: _vector_reflector(a, i))


@numba.njit(**_HELPER_OPTIONS)
def _last_nonzero_column(a, top, rows, first):
    """``ilaslc``: the columns from ``first`` up to the last with a nonzero among rows ``top:top + rows``."""
    n = a.shape[1]
    if n == first or a[top, n - 1] != 0 or a[top + rows - 1, n - 1] != 0:
        return n - first
    for c in range(n - 1, first - 1, -1):
        for r in range(top, top + rows):
            if a[r, c] != 0:
                return c + 1 - first
    return 0


@numba.njit(**_HELPER_OPTIONS)
def _accumulate(total, a, x, fused):
    """``total + a * x``: rounded once (``fused``) or twice."""
    return fused_multiply_add(a, x, total) if fused else total + a * x


@numba.njit(**_HELPER_OPTIONS)
def _product(a, r, c, v):
    """``a[r, c] * a[r, v]``."""
    return entry(a, r, c) * entry(a, r, v)


@numba.njit(**_HELPER_OPTIONS)
def _add_row(total, a, r, c, v, fused):
    """``total + a[r, c] * a[r, v]``, rounded once (``fused``) or twice."""
    return _accumulate(total, entry(a, r, c), entry(a, r, v), fused)


@numba.njit(**_HELPER_OPTIONS)
def _blocked_sum(a, v, c, top, blocked, fused, eight):
    """``a[top:top + blocked, c] . a[top:top + blocked, v]`` as an ``sgemv_t`` kernel sums it (the order of
    :func:`._cholesky_replay._subtract_blocked_sum`): a first block of four rows (where ``blocked % 8``) into sums
    0-3, then each eight rows into sums 0-7 (``eight``) or twice into sums 0-3, ``((s0 + s4) + (s1 + s5)) + ((s2 +
    s6) + (s3 + s7))``."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = constant_like(a, 0)
    r, stop = top, top + blocked
    if blocked & 4:
        s0, s1 = _add_row(s0, a, r, c, v, fused), _add_row(s1, a, r + 1, c, v, fused)
        s2, s3 = _add_row(s2, a, r + 2, c, v, fused), _add_row(s3, a, r + 3, c, v, fused)
        r += 4
    while r < stop:
        s0, s1 = _add_row(s0, a, r, c, v, fused), _add_row(s1, a, r + 1, c, v, fused)
        s2, s3 = _add_row(s2, a, r + 2, c, v, fused), _add_row(s3, a, r + 3, c, v, fused)
        if eight:
            s4, s5 = _add_row(s4, a, r + 4, c, v, fused), _add_row(s5, a, r + 5, c, v, fused)
            s6, s7 = _add_row(s6, a, r + 6, c, v, fused), _add_row(s7, a, r + 7, c, v, fused)
        else:
            s0, s1 = _add_row(s0, a, r + 4, c, v, fused), _add_row(s1, a, r + 5, c, v, fused)
            s2, s3 = _add_row(s2, a, r + 6, c, v, fused), _add_row(s3, a, r + 7, c, v, fused)
        r += 8
    return ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))


@numba.njit(**_HELPER_OPTIONS)
def _tail_sum(a, v, c, top, blocked, rows, y, kernels):
    """``y`` plus the last ``rows % 4`` rows' products, as ``sgemv_t_4.c``'s C adds them (SkylakeX: products fused
    but the second, a lone one fused into ``y``; Haswell: every product rounded)."""
    first, tail = top + blocked, rows - blocked
    if kernels == SKYLAKEX and tail == 1:
        return _add_row(y, a, first, c, v, True)
    if kernels == SKYLAKEX:
        total = _add_row(_product(a, first + 1, c, v), a, first, c, v, True)
        if tail == 3:
            total = _add_row(total, a, first + 2, c, v, True)
        return y + total
    total = _product(a, first, c, v)
    for r in range(first + 1, top + rows):
        total = total + _product(a, r, c, v)
    return y + total


@numba.njit(**_HELPER_OPTIONS)
def _small_kernel_sum(a, v, c, rows, path):
    """``a[:rows, c] . a[:rows, v]`` as SkylakeX's ``sgemv_kernel_t_<rows>`` sums it for fewer than 8 columns:
    ``path`` 4 for a column of its blocks of four columns, 2 of two, 1 for the last."""
    zero = constant_like(a, 0)
    if rows == 2:
        return (_product(a, 0, c, v) + _product(a, 1, c, v)) + zero
    if rows == 3 and path == 2:
        return (_product(a, 0, c, v) + _product(a, 1, c, v)) + (_product(a, 2, c, v) + zero) + zero
    if rows == 3:
        return _add_row(_add_row(_product(a, 1, c, v), a, 0, c, v, True), a, 2, c, v, True) + zero
    if rows == 4 and path == 1:
        return ((_product(a, 0, c, v) + _product(a, 1, c, v)) + _product(a, 2, c, v)) + _product(a, 3, c, v) + zero
    if rows == 4:
        return (_product(a, 0, c, v) + _product(a, 1, c, v)) + (_product(a, 2, c, v) + _product(a, 3, c, v)) + zero
    if rows == 5 and path == 4:
        total = _product(a, 0, c, v)
        for r in range(1, 5):
            total = _add_row(total, a, r, c, v, True)
        return total + zero
    if rows == 5:
        return ((((_product(a, 0, c, v) + _product(a, 1, c, v)) + _product(a, 2, c, v)) + _product(a, 3, c, v))
                + _product(a, 4, c, v) + zero)
    if rows == 6 and path == 4:  # products paired by a multiply and add the compiler fused
        middle = _add_row(_product(a, 2, c, v), a, 1, c, v, True)
        last = _add_row(_product(a, 5, c, v), a, 4, c, v, True)
        return ((_product(a, 0, c, v) + zero) + middle) + ((_product(a, 3, c, v) + zero) + last) + zero
    if rows == 7 and path == 4:
        first = _add_row(_product(a, 1, c, v), a, 0, c, v, True) + _add_row(_product(a, 5, c, v), a, 4, c, v, True)
        return first + (_add_row(_product(a, 3, c, v), a, 2, c, v, True) + (_product(a, 6, c, v) + zero)) + zero
    if rows == 6 or rows == 7:
        total = zero
        for r in range(rows):
            total = total + _product(a, r, c, v)
        return total
    p0, p1, p2, p3 = _product(a, 0, c, v), _product(a, 1, c, v), _product(a, 2, c, v), _product(a, 3, c, v)
    p4, p5, p6, p7 = _product(a, 4, c, v), _product(a, 5, c, v), _product(a, 6, c, v), _product(a, 7, c, v)
    if path == 4:
        return ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)) + zero
    if path == 2:
        return ((p0 + p1) + (p4 + p5)) + ((p2 + p3) + (p6 + p7)) + zero
    return (((p0 + p4) + (p1 + p5)) + (p2 + p6)) + (p3 + p7) + zero


@numba.njit(**_HELPER_OPTIONS)
def _transposed_product(a, v, top, rows, first, columns, work, kernels):
    """``work[:columns] = a[top:top + rows, first:first + columns].T @ a[top:top + rows, v]`` as ``sgemv_t`` with
    ``alpha = 1``, ``beta = 0`` computes it."""
    if kernels == SKYLAKEX and top == 0 and rows == a.shape[0] and rows <= SMALL_KERNEL_ROWS:
        quads, pairs = columns - columns % 4, columns - columns % 2
        for k in range(columns):
            path = 4 if k < quads else (2 if k < pairs else 1)
            set_element(work, k, _small_kernel_sum(a, v, first + k, rows, path))
        return
    blocked = rows - rows % 4
    fours = columns - columns % 4
    for k in range(columns):
        total = constant_like(a, 0)
        if blocked:
            four, eight = k < fours, k == columns - 1 and columns % 2 == 1
            total = total + _blocked_sum(a, v, first + k, top, blocked, four, four or eight)
        if rows % 4:
            total = _tail_sum(a, v, first + k, top, blocked, rows, total, kernels)
        set_element(work, k, total)


@numba.njit(**_HELPER_OPTIONS)
def _reflect(a, v, top, rows, first, columns, tau, work, kernels):
    """``H = I - tau v v^T`` (``v = a[top:top + rows, v]``, its first entry 1) applied to ``columns`` columns of
    ``a`` from ``first``, rows ``top:top + rows``: ``sgemv_t``, then ``sger``."""
    _transposed_product(a, v, top, rows, first, columns, work, kernels)
    minus_tau = -tau
    fused_rows = rows if kernels == SKYLAKEX else rows - rows % _AXPY_BLOCK
    for k in range(columns):
        scale = minus_tau * element(work, k)
        c = first + k
        for r in range(top, top + fused_rows):
            set_entry(a, r, c, fused_multiply_add(scale, entry(a, r, v), entry(a, r, c)))
        for r in range(top + fused_rows, top + rows):
            set_entry(a, r, c, entry(a, r, c) + scale * entry(a, r, v))


@numba.njit(**_HELPER_OPTIONS)
def _matrix_apply(a, v, top, tau, work, kernels):
    """``slarf('Left')`` on one matrix: :func:`_reflect` to the columns right of ``v``, the reflector shortened to
    its last nonzero row (``ilaslr``) and the columns to the last nonzero one (``ilaslc``)."""
    if tau == 0:
        return True
    rows = a.shape[0] - top
    while rows > 0 and a[top + rows - 1, v] == 0:
        rows -= 1
    columns = _last_nonzero_column(a, top, rows, v + 1)
    if columns:
        _reflect(a, v, top, rows, v + 1, columns, tau, work, kernels)
    return True


@numba.njit(**_HELPER_OPTIONS)
def _vector_apply(a, v, top, tau, work, kernels):
    """:func:`_matrix_apply` on a buffer of one vector of matrices, where in every lane ``tau`` is not zero and
    nothing is shortened; False otherwise."""
    m, n = a.shape[0], a.shape[1]
    if any_zero(tau) or (m - 1 > top and any_zero(entry(a, m - 1, v))):
        return False
    if v + 1 < n and any_zero(magnitude(entry(a, top, n - 1)) + magnitude(entry(a, m - 1, n - 1))):
        return False
    if v + 1 < n:
        _reflect(a, v, top, m - top, v + 1, n - v - 1, tau, work, kernels)
    return True


def _apply_reflector(a, v, top, tau, work, kernels):
    """``slarf('Left')`` of the reflector in column ``v`` from row ``top``, on a matrix or a buffer of one vector of
    them: whether the replay goes on."""


@overload(_apply_reflector, jit_options=_HELPER_OPTIONS)
def _apply_reflector_for(a, v, top, tau, work, kernels):
    if a.ndim == 2:
        return lambda a, v, top, tau, work, kernels: _matrix_apply(a, v, top, tau, work, kernels)
    return lambda a, v, top, tau, work, kernels: _vector_apply(a, v, top, tau, work, kernels)


@numba.njit(**_HELPER_OPTIONS)
def factor(a, tau, work, kernels):
    """``sgeqr2`` on the Fortran-ordered ``a`` (``m >= n``) or a buffer of one vector of such matrices: R above the
    diagonal, the reflectors below, ``tau``; False where the replay leaves the matrix (to LAPACK) or the vector (to
    the replay of each matrix)."""
    n = a.shape[1]
    one = constant_like(a, 1)
    for i in range(n):
        t, kept = _reflector(a, i)
        if not kept:
            return False
        set_element(tau, i, t)
        if i < n - 1:
            diagonal = entry(a, i, i)
            set_entry(a, i, i, one)
            if not _apply_reflector(a, i, i, t, work, kernels):
                return False
            set_entry(a, i, i, diagonal)
    return True


@numba.njit(**_HELPER_OPTIONS)
def form_q(q, k, tau, work, kernels):
    """``sorg2r`` on the Fortran-ordered ``q`` holding ``k`` reflectors in its first columns, or a buffer of one
    vector of such: Q's columns; False where a vector is left to the replay of each matrix."""
    m, n = q.shape[0], q.shape[1]
    zero, one = constant_like(q, 0), constant_like(q, 1)
    for j in range(k, n):
        for r in range(m):
            set_entry(q, r, j, zero)
        set_entry(q, j, j, one)
    for i in range(k - 1, -1, -1):
        t = element(tau, i)
        if i < n - 1:
            set_entry(q, i, i, one)
            if not _apply_reflector(q, i, i, t, work, kernels):
                return False
        minus_tau = -t
        for r in range(i + 1, m):
            set_entry(q, r, i, minus_tau * entry(q, r, i))
        set_entry(q, i, i, one - t)
        for r in range(i):
            set_entry(q, r, i, zero)
    return True


@numba.njit(**REPLAY_JIT_OPTIONS)
def _replayed_on_vectors(a, first, buf, q, tau, work, poison, q_out, r_out, kernels):
    """Replay matrices ``first:first + WIDTH`` of ``a`` on vectors and write their Q and R; False, with nothing
    written, where one is not finite or the vectors' branches would differ from a lane's."""
    m, n, ncols = buf.shape[0], buf.shape[1], q.shape[1]
    gather(a, first, buf, m, n, WIDTH)
    poison_lanes(buf, poison, m, n, WIDTH)
    for lane in range(WIDTH):
        if poison[lane] != 0:
            return False
    if not factor(buf, tau, work, kernels):
        return False
    if ncols:
        for r in range(m):
            for j in range(tau.shape[0]):
                set_entry(q, r, j, entry(buf, r, j))
        if not form_q(q, tau.shape[0], tau, work, kernels):
            return False
        scatter(q, WIDTH, q_out, first, m, ncols)
    scatter_upper(buf, WIDTH, r_out, first)
    return True


@numba.njit(**REPLAY_JIT_OPTIONS)
def qr_replay_each(a, q_out, r_out, nonfinite, geqrf, orgqr, kernels, lanes, thread, threads):
    """:func:`._lapack_each.qr_each`'s results with OpenBLAS's roundings replayed, for ``m >= n``: ``WIDTH``
    matrices at a time on vectors (``lanes``; 1 for one at a time), a chunk the vectors leave matrix by matrix, and
    a matrix the replay leaves (not finite, or rescaled) to ``geqrf`` and ``orgqr`` as there."""
    batch, m, n = a.shape
    start, stop = chunk_range(thread, threads, (batch + lanes - 1) // lanes)
    m_, n_, k_, ncols_, info, buf, q, tau, size, query = qr_arguments(a, q_out.shape[2])
    geqrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, tau.ctypes, size.ctypes, query.ctypes, info.ctypes)
    factor_lwork, orgqr_lwork, lapack_work = workspaces(size, orgqr, m_, ncols_, k_, q, tau, info)
    work = np.empty(max(m, q.shape[1]), dtype=buf.dtype)
    vectors = on_cache_lines((m, n, WIDTH), buf.dtype)
    q_vectors = on_cache_lines((m, q.shape[1], WIDTH), buf.dtype)
    tau_vectors = on_cache_lines((tau.shape[0], WIDTH), buf.dtype)
    work_vectors = on_cache_lines((work.shape[0], WIDTH), buf.dtype)
    poison = on_cache_lines((WIDTH,), buf.dtype)
    k = tau.shape[0]
    for chunk in range(start, stop):
        first = chunk * lanes
        if lanes == WIDTH and first + WIDTH <= batch and _replayed_on_vectors(
                a, first, vectors, q_vectors, tau_vectors, work_vectors, poison, q_out, r_out, kernels):
            continue
        for b in range(first, min(first + lanes, batch)):
            finite = copy_checked(a, b, buf)
            if not finite and flag_nonfinite(nonfinite, thread):
                continue
            if finite and factor(buf, tau, work, kernels):
                for i in range(r_out.shape[1]):
                    for j in range(buf.shape[1]):
                        r_out[b, i, j] = buf[i, j] if j >= i else 0.0
                if q.shape[1]:
                    q[:, :k] = buf[:, :k]
                    form_q(q, k, tau, work, kernels)
                    q_out[b] = q
                continue
            copy_checked(a, b, buf)
            geqrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, tau.ctypes, lapack_work.ctypes, factor_lwork.ctypes,
                  info.ctypes)
            write_qr(buf, tau, q, lapack_work, orgqr_lwork, orgqr, m_, ncols_, k_, info, q_out, r_out, b)
