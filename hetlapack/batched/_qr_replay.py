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
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._interleave import chunk_range, copy_checked, flag_nonfinite
from ._lapack_each import qr_arguments, workspaces, write_qr
from ._lu_replay import REPLAY_JIT_OPTIONS, SKYLAKEX
from ._simd import fused_multiply_add

#: The helpers' options: inlined into the kernel (numba IR), which calls them per matrix, so that a call passes no
#: array and counts no references (a call with its arrays' reference counts had cost more than the arithmetic).
_HELPER_OPTIONS = {**REPLAY_JIT_OPTIONS, "inline": "always"}

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
def _norm(a, col, top, count, sums):
    """``snrm2`` of ``a[top:top + count, col]`` (Fortran-ordered ``a``, leading dimension its rows)."""
    if count == 1:
        return abs(a[top, col])
    for k in range(8):
        sums[k] = 0.0
    r, left = top, count
    if (col * a.shape[0] + top) & 1:
        sums[6] += np.float64(a[r, col]) * np.float64(a[r, col])
        r, left = r + 1, left - 1
    while left >= 8:
        for k in range(8):
            sums[k] += np.float64(a[r + k, col]) * np.float64(a[r + k, col])
        r, left = r + 8, left - 8
    if left & 4:
        for k in range(4):
            sums[k] += np.float64(a[r + k, col]) * np.float64(a[r + k, col])
        r += 4
    if left & 2:
        for k in range(2):
            sums[4 + k] += np.float64(a[r + k, col]) * np.float64(a[r + k, col])
        r += 2
    if left & 1:
        sums[6] += np.float64(a[r, col]) * np.float64(a[r, col])
    total = ((sums[0] + sums[2]) + (sums[4] + sums[6])) + ((sums[1] + sums[3]) + (sums[5] + sums[7]))
    return np.float32(math.sqrt(total))


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
def _reflector(a, i, sums):
    """``slarfg`` on ``a[i:, i]``: ``beta`` into ``a[i, i]``, ``v[1:]`` below it, and ``tau``; -1 where it would
    rescale (left to LAPACK)."""
    m = a.shape[0]
    if m - i <= 1:
        return np.float32(0)
    norm = _norm(a, i, i + 1, m - i - 1, sums)
    if norm == 0:
        return np.float32(0)
    alpha = a[i, i]
    beta = -np.float32(math.copysign(_hypot(alpha, norm), alpha))
    if abs(beta) < SAFE_MINIMUM:
        return np.float32(-1)
    tau = (beta - alpha) / beta
    scale = np.float32(1) / (alpha - beta)
    for r in range(i + 1, m):
        a[r, i] = a[r, i] * scale
    a[i, i] = beta
    return tau


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
def _blocked_sum(a, v, c, top, blocked, fused, eight):
    """``a[top:top + blocked, c] . a[top:top + blocked, v]`` as an ``sgemv_t`` kernel sums it (the order of
    :func:`._cholesky_replay._subtract_blocked_sum`): a first block of four rows (where ``blocked % 8``) into sums
    0-3, then each eight rows into sums 0-7 (``eight``) or twice into sums 0-3, ``((s0 + s4) + (s1 + s5)) + ((s2 +
    s6) + (s3 + s7))``."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = np.float32(0)
    r, stop = top, top + blocked
    if blocked & 4:
        s0 = _accumulate(s0, a[r, c], a[r, v], fused)
        s1 = _accumulate(s1, a[r + 1, c], a[r + 1, v], fused)
        s2 = _accumulate(s2, a[r + 2, c], a[r + 2, v], fused)
        s3 = _accumulate(s3, a[r + 3, c], a[r + 3, v], fused)
        r += 4
    while r < stop:
        s0 = _accumulate(s0, a[r, c], a[r, v], fused)
        s1 = _accumulate(s1, a[r + 1, c], a[r + 1, v], fused)
        s2 = _accumulate(s2, a[r + 2, c], a[r + 2, v], fused)
        s3 = _accumulate(s3, a[r + 3, c], a[r + 3, v], fused)
        if eight:
            s4 = _accumulate(s4, a[r + 4, c], a[r + 4, v], fused)
            s5 = _accumulate(s5, a[r + 5, c], a[r + 5, v], fused)
            s6 = _accumulate(s6, a[r + 6, c], a[r + 6, v], fused)
            s7 = _accumulate(s7, a[r + 7, c], a[r + 7, v], fused)
        else:
            s0 = _accumulate(s0, a[r + 4, c], a[r + 4, v], fused)
            s1 = _accumulate(s1, a[r + 5, c], a[r + 5, v], fused)
            s2 = _accumulate(s2, a[r + 6, c], a[r + 6, v], fused)
            s3 = _accumulate(s3, a[r + 7, c], a[r + 7, v], fused)
        r += 8
    return ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))


@numba.njit(**_HELPER_OPTIONS)
def _tail_sum(a, v, c, top, blocked, rows, y, kernels):
    """``y`` plus the last ``rows % 4`` rows' products, as ``sgemv_t_4.c``'s C adds them (SkylakeX: products fused
    but the second, a lone one fused into ``y``; Haswell: every product rounded)."""
    first, tail = top + blocked, rows - blocked
    a0, x0 = a[first, c], a[first, v]
    if kernels == SKYLAKEX and tail == 1:
        return fused_multiply_add(a0, x0, y)
    if kernels == SKYLAKEX:
        total = fused_multiply_add(a0, x0, a[first + 1, c] * a[first + 1, v])
        if tail == 3:
            total = fused_multiply_add(a[first + 2, c], a[first + 2, v], total)
        return y + total
    total = a0 * x0
    for r in range(first + 1, top + rows):
        total = total + a[r, c] * a[r, v]
    return y + total


@numba.njit(**_HELPER_OPTIONS)
def _small_kernel_sum(a, v, c, rows, path, p):
    """``a[:rows, c] . a[:rows, v]`` as SkylakeX's ``sgemv_kernel_t_<rows>`` sums it for fewer than 8 columns:
    ``path`` 4 for a column of its blocks of four columns, 2 of two, 1 for the last (``p``: scratch for the
    products)."""
    zero = np.float32(0)
    for r in range(rows):
        p[r] = a[r, c] * a[r, v]
    if rows == 2:
        return (p[0] + p[1]) + zero
    if rows == 3 and path == 2:
        return (p[0] + p[1]) + (p[2] + zero) + zero
    if rows == 3:
        total = fused_multiply_add(a[0, c], a[0, v], p[1])
        return fused_multiply_add(a[2, c], a[2, v], total) + zero
    if rows == 4 and path == 1:
        return ((p[0] + p[1]) + p[2]) + p[3] + zero
    if rows == 4:
        return (p[0] + p[1]) + (p[2] + p[3]) + zero
    if rows == 5 and path == 4:
        total = p[0]
        for r in range(1, 5):
            total = fused_multiply_add(a[r, c], a[r, v], total)
        return total + zero
    if rows == 5:
        return (((p[0] + p[1]) + p[2]) + p[3]) + p[4] + zero
    if rows == 6 and path == 4:  # products paired by a multiply and add the compiler fused
        middle = fused_multiply_add(a[1, c], a[1, v], p[2])
        return ((p[0] + zero) + middle) + ((p[3] + zero) + fused_multiply_add(a[4, c], a[4, v], p[5])) + zero
    if rows == 7 and path == 4:
        first = fused_multiply_add(a[0, c], a[0, v], p[1]) + fused_multiply_add(a[4, c], a[4, v], p[5])
        return first + (fused_multiply_add(a[2, c], a[2, v], p[3]) + (p[6] + zero)) + zero
    if rows in (6, 7):
        total = zero
        for r in range(rows):
            total = total + p[r]
        return total
    if path == 4:
        return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])) + zero
    if path == 2:
        return ((p[0] + p[1]) + (p[4] + p[5])) + ((p[2] + p[3]) + (p[6] + p[7])) + zero
    return (((p[0] + p[4]) + (p[1] + p[5])) + (p[2] + p[6])) + (p[3] + p[7]) + zero


@numba.njit(**_HELPER_OPTIONS)
def _transposed_product(a, v, top, rows, first, columns, work, sums, kernels):
    """``work[:columns] = a[top:top + rows, first:first + columns].T @ a[top:top + rows, v]`` as ``sgemv_t`` with
    ``alpha = 1``, ``beta = 0`` computes it."""
    if kernels == SKYLAKEX and top == 0 and rows == a.shape[0] and rows <= SMALL_KERNEL_ROWS:
        quads, pairs = columns - columns % 4, columns - columns % 2
        for k in range(columns):
            path = 4 if k < quads else (2 if k < pairs else 1)
            work[k] = _small_kernel_sum(a, v, first + k, rows, path, sums)
        return
    blocked = rows - rows % 4
    fours = columns - columns % 4
    for k in range(columns):
        total = np.float32(0)
        if blocked:
            four, eight = k < fours, k == columns - 1 and columns % 2 == 1
            total = total + _blocked_sum(a, v, first + k, top, blocked, four, four or eight)
        if rows % 4:
            total = _tail_sum(a, v, first + k, top, blocked, rows, total, kernels)
        work[k] = total


@numba.njit(**_HELPER_OPTIONS)
def _apply_reflector(a, v, top, tau, work, sums, kernels):
    """``slarf('Left')``: ``H = I - tau v v^T`` (``v = a[top:, v]``, its first entry 1) applied to the columns of
    ``a`` right of ``v``, rows ``top:``."""
    if tau == 0:
        return
    rows = a.shape[0] - top
    while rows > 0 and a[top + rows - 1, v] == 0:
        rows -= 1
    first = v + 1
    columns = _last_nonzero_column(a, top, rows, first)
    if columns == 0:
        return
    _transposed_product(a, v, top, rows, first, columns, work, sums, kernels)
    minus_tau = -tau
    fused_rows = rows if kernels == SKYLAKEX else rows - rows % _AXPY_BLOCK
    for k in range(columns):
        scale = minus_tau * work[k]
        c = first + k
        for r in range(top, top + fused_rows):
            a[r, c] = fused_multiply_add(scale, a[r, v], a[r, c])
        for r in range(top + fused_rows, top + rows):
            a[r, c] = a[r, c] + scale * a[r, v]


@numba.njit(**_HELPER_OPTIONS)
def factor(a, tau, work, sums, norms, kernels):
    """``sgeqr2`` on the Fortran-ordered ``a`` (``m >= n``): R above the diagonal, the reflectors below, ``tau``;
    False where a matrix is left to LAPACK."""
    for i in range(a.shape[1]):
        t = _reflector(a, i, norms)
        if t < 0:
            return False
        tau[i] = t
        if i < a.shape[1] - 1:
            diagonal = a[i, i]
            a[i, i] = 1
            _apply_reflector(a, i, i, t, work, sums, kernels)
            a[i, i] = diagonal
    return True


@numba.njit(**_HELPER_OPTIONS)
def form_q(q, k, tau, work, sums, kernels):
    """``sorg2r`` on the Fortran-ordered ``q`` holding ``k`` reflectors in its first columns: Q's columns."""
    m, n = q.shape
    for j in range(k, n):
        for r in range(m):
            q[r, j] = 0
        q[j, j] = 1
    for i in range(k - 1, -1, -1):
        if i < n - 1:
            q[i, i] = 1
            _apply_reflector(q, i, i, tau[i], work, sums, kernels)
        minus_tau = -tau[i]
        for r in range(i + 1, m):
            q[r, i] = minus_tau * q[r, i]
        q[i, i] = np.float32(1) - tau[i]
        for r in range(i):
            q[r, i] = 0


@numba.njit(**REPLAY_JIT_OPTIONS)
def qr_replay_each(a, q_out, r_out, nonfinite, geqrf, orgqr, kernels, thread, threads):
    """:func:`._lapack_each.qr_each`'s results with OpenBLAS's roundings replayed, for ``m >= n``: a matrix the
    replay leaves (not finite, or rescaled) goes to ``geqrf`` and ``orgqr`` as there."""
    start, stop = chunk_range(thread, threads, a.shape[0])
    m_, n_, k_, ncols_, info, buf, q, tau, size, query = qr_arguments(a, q_out.shape[2])
    geqrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, tau.ctypes, size.ctypes, query.ctypes, info.ctypes)
    factor_lwork, orgqr_lwork, lapack_work = workspaces(size, orgqr, m_, ncols_, k_, q, tau, info)
    work = np.empty(max(buf.shape[0], q.shape[1]), dtype=buf.dtype)
    sums = np.empty(8, dtype=buf.dtype)
    norms = np.empty(8, dtype=np.float64)
    k = tau.shape[0]
    for b in range(start, stop):
        finite = copy_checked(a, b, buf)
        if not finite and flag_nonfinite(nonfinite, thread):
            continue
        if finite and factor(buf, tau, work, sums, norms, kernels):
            for i in range(r_out.shape[1]):
                for j in range(buf.shape[1]):
                    r_out[b, i, j] = buf[i, j] if j >= i else 0.0
            if q.shape[1]:
                q[:, :k] = buf[:, :k]
                form_q(q, k, tau, work, sums, kernels)
                q_out[b] = q
            continue
        copy_checked(a, b, buf)
        geqrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, tau.ctypes, lapack_work.ctypes, factor_lwork.ctypes,
              info.ctypes)
        write_qr(buf, tau, q, lapack_work, orgqr_lwork, orgqr, m_, ncols_, k_, info, q_out, r_out, b)
