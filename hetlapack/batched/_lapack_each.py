"""LAPACK loops: SciPy's own LAPACK routine called on each matrix of a stack, from compiled code.

Each kernel calls, per matrix, the routines SciPy's function calls for one matrix, in SciPy's LAPACK (through the
function pointers ``scipy.linalg.cython_lapack`` exports, passed in as arguments so that the kernel stays cached on
disk), on a Fortran-ordered copy, with the workspace sizes SciPy asks for: the results are SciPy's, bit for bit, in
every dtype. What they save is SciPy's Python loop around each call (about 5 µs a matrix); the matrices are shared
among threads, each with its own buffers, and no kernel holds the GIL.

They serve where our own interleaved kernels may not or cannot: where the contract fixes results that depend on
rounding (column pivoting's pivots, by norms that tie to rounding in rank-deficient matrices), for single precision,
whose results stay LAPACK's, and for orders past those where interleaving pays. The caller caps LAPACK's own threads
at one per kernel thread (``kernels``), so that a routine large enough to thread does not oversubscribe the cores.

Every kernel takes a ``nonfinite`` flag per thread (or an empty array): a thread that meets an infinity or NaN in
what it checks sets its own and leaves that matrix's results unwritten (SciPy's ``check_finite``, on the one pass
that reads the matrix).
"""

from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload

from ._interleave import JIT_OPTIONS, chunk_range, copy_checked, flag_nonfinite


@numba.njit(**JIT_OPTIONS)
def _integer(value):
    """A LAPACK integer argument (passed by reference)."""
    return np.full(1, value, dtype=np.int32)


@numba.njit(**JIT_OPTIONS)
def _option(code):
    """A LAPACK character argument (``uplo``, ``trans``) from its character code."""
    return np.full(1, code, dtype=np.uint8)


@numba.njit(**JIT_OPTIONS)
def potrf_each(a, lower, clean, out, info_out, nonfinite, potrf, thread, threads):
    """``potrf`` on each matrix (SciPy's ``cholesky`` / ``cho_factor``): the factor in the ``lower`` (else upper)
    triangle, the other one zero if ``clean``, else the input's; LAPACK's ``info`` per matrix."""
    batch, n = a.shape[0], a.shape[2]
    start, stop = chunk_range(thread, threads, batch)
    n_, info, uplo = _integer(n), _integer(0), _option(ord("L") if lower else ord("U"))
    buf = np.empty((n, n), dtype=a.dtype).T  # Fortran order
    for b in range(start, stop):
        if not copy_checked(a, b, buf) and flag_nonfinite(nonfinite, thread):
            continue
        potrf(uplo.ctypes, n_.ctypes, buf.ctypes, n_.ctypes, info.ctypes)
        info_out[b] = info[0]
        for j in range(n):
            for i in range(n):
                kept = not clean or (i >= j if lower else i <= j)
                out[b, i, j] = buf[i, j] if kept else 0.0


@numba.njit(**JIT_OPTIONS)
def getrf_each(a, out, piv_out, info_out, nonfinite, getrf, thread, threads):
    """``getrf`` on each matrix (SciPy's ``lu_factor``): the packed LU, the 0-based pivots and ``info``."""
    batch, m, n = a.shape
    start, stop = chunk_range(thread, threads, batch)
    m_, n_, info = _integer(m), _integer(n), _integer(0)
    buf = np.empty((n, m), dtype=a.dtype).T
    ipiv = np.empty(min(m, n), dtype=np.int32)
    for b in range(start, stop):
        if not copy_checked(a, b, buf) and flag_nonfinite(nonfinite, thread):
            continue
        getrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, ipiv.ctypes, info.ctypes)
        out[b] = buf
        for k in range(ipiv.size):  # no temporary: an allocation a matrix cost 17-20 ns at orders 2-8
            piv_out[b, k] = ipiv[k] - 1
        info_out[b] = info[0]


@numba.njit(**JIT_OPTIONS)
def potrs_each(c, lower, rhs, out, nonfinite, potrs, thread, threads):
    """``potrs`` on each system (SciPy's ``cho_solve``) from the Cholesky factor in ``c``'s ``lower`` (else upper)
    triangle; checks the right-hand sides where asked."""
    batch, n, nrhs = out.shape
    start, stop = chunk_range(thread, threads, batch)
    n_, nrhs_, info, uplo = _integer(n), _integer(nrhs), _integer(0), _option(ord("L") if lower else ord("U"))
    factor = np.empty((n, n), dtype=out.dtype).T
    x = np.empty((nrhs, n), dtype=out.dtype).T
    for b in range(start, stop):
        if not copy_checked(rhs, b, x) and flag_nonfinite(nonfinite, thread):
            continue
        factor[:, :] = c[b]
        potrs(uplo.ctypes, n_.ctypes, nrhs_.ctypes, factor.ctypes, n_.ctypes, x.ctypes, n_.ctypes, info.ctypes)
        out[b] = x


@numba.njit(**JIT_OPTIONS)
def getrs_each(lu, piv, rhs, trans, out, nonfinite, getrs, thread, threads):
    """``getrs`` on each system (SciPy's ``lu_solve``) from the packed LU and 0-based pivots; ``trans`` 0, 1, 2
    solves with ``A``, ``A^T``, ``A^H``. Checks the right-hand sides (SciPy's ``lu_solve`` checks those only)."""
    batch, n, nrhs = out.shape
    start, stop = chunk_range(thread, threads, batch)
    n_, nrhs_, info = _integer(n), _integer(nrhs), _integer(0)
    code = _option(ord("N") if trans == 0 else ord("T") if trans == 1 else ord("C"))
    factor = np.empty((n, n), dtype=out.dtype).T
    x = np.empty((nrhs, n), dtype=out.dtype).T
    ipiv = np.empty(n, dtype=np.int32)
    for b in range(start, stop):
        if not copy_checked(rhs, b, x) and flag_nonfinite(nonfinite, thread):
            continue
        factor[:, :] = lu[b]
        ipiv[:] = piv[b]
        ipiv += 1
        getrs(code.ctypes, n_.ctypes, nrhs_.ctypes, factor.ctypes, n_.ctypes, ipiv.ctypes, x.ctypes, n_.ctypes,
              info.ctypes)
        out[b] = x


@numba.njit(**JIT_OPTIONS)
def _query_orgqr(orgqr, m_, ncols_, k_, q, tau, size, info):
    """The workspace ``orgqr`` asks for (LAPACK's query, as SciPy makes it); 1 when no Q is wanted."""
    if q.shape[1] == 0:
        return 1
    query = _integer(-1)
    orgqr(m_.ctypes, ncols_.ctypes, k_.ctypes, q.ctypes, m_.ctypes, tau.ctypes, size.ctypes, query.ctypes,
          info.ctypes)
    return int(size[0].real)


@numba.njit(**JIT_OPTIONS)
def workspaces(size, orgqr, m_, ncols_, k_, q, tau, info):
    """The factorization's workspace size (its query's answer, in ``size``) and ``orgqr``'s, as LAPACK integers, and
    a workspace large enough for both."""
    factor_lwork = _integer(int(size[0].real))
    orgqr_lwork = _integer(_query_orgqr(orgqr, m_, ncols_, k_, q, tau, size, info))
    return factor_lwork, orgqr_lwork, np.empty(max(factor_lwork[0], orgqr_lwork[0]), dtype=q.dtype)


@numba.njit(**JIT_OPTIONS)
def write_qr(buf, tau, q, work, lwork_, orgqr, m_, ncols_, k_, info, q_out, r_out, b):
    """R's first ``r_out.shape[1]`` rows from a factored ``buf`` into ``r_out[b]``, and Q's first
    ``q_out.shape[2]`` columns (none when that is 0) by ``orgqr`` into ``q_out[b]``."""
    n, k = buf.shape[1], tau.shape[0]
    for i in range(r_out.shape[1]):
        for j in range(n):
            r_out[b, i, j] = buf[i, j] if j >= i else 0.0
    if q.shape[1]:
        q[:, :k] = buf[:, :k]
        orgqr(m_.ctypes, ncols_.ctypes, k_.ctypes, q.ctypes, m_.ctypes, tau.ctypes, work.ctypes, lwork_.ctypes,
              info.ctypes)
        q_out[b] = q


@numba.njit(**JIT_OPTIONS)
def qr_arguments(a, ncols):
    """One thread's arguments for the QR loops: ``m``, ``n``, ``k = min(m, n)`` and Q's columns as LAPACK
    integers, ``info``, the matrix's Fortran buffer, Q's, ``tau``, a one-element workspace for LAPACK's queries and
    the query flag."""
    m, n = a.shape[1], a.shape[2]
    k = min(m, n)
    return (_integer(m), _integer(n), _integer(k), _integer(ncols), _integer(0), np.empty((n, m), dtype=a.dtype).T,
            np.empty((ncols, m), dtype=a.dtype).T, np.empty(k, dtype=a.dtype), np.zeros(1, dtype=a.dtype),
            _integer(-1))


@numba.njit(**JIT_OPTIONS)
def qr_each(a, q_out, r_out, nonfinite, geqrf, orgqr, thread, threads):
    """``geqrf`` then ``orgqr`` on each matrix (SciPy's ``qr``): Q's first ``q_out.shape[2]`` columns (none when
    that is 0) and R's first ``r_out.shape[1]`` rows."""
    start, stop = chunk_range(thread, threads, a.shape[0])
    m_, n_, k_, ncols_, info, buf, q, tau, size, query = qr_arguments(a, q_out.shape[2])
    geqrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, tau.ctypes, size.ctypes, query.ctypes, info.ctypes)
    factor_lwork, orgqr_lwork, work = workspaces(size, orgqr, m_, ncols_, k_, q, tau, info)
    for b in range(start, stop):
        if not copy_checked(a, b, buf) and flag_nonfinite(nonfinite, thread):
            continue
        geqrf(m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, tau.ctypes, work.ctypes, factor_lwork.ctypes,
              info.ctypes)
        write_qr(buf, tau, q, work, orgqr_lwork, orgqr, m_, ncols_, k_, info, q_out, r_out, b)


def _call_geqp3(geqp3, m, n, a, lda, jpvt, tau, work, lwork, rwork, info):
    """Call ``geqp3`` with the arguments its precision takes (compiled code only)."""
    raise NotImplementedError("only called from compiled code")


@overload(_call_geqp3)
def _call_geqp3_typed(geqp3, m, n, a, lda, jpvt, tau, work, lwork, rwork, info):
    """The complex routines take a real workspace (``rwork``) before ``info``; the real ones do not."""
    if len(geqp3.sig.args) == 10:
        def with_rwork(geqp3, m, n, a, lda, jpvt, tau, work, lwork, rwork, info):
            geqp3(m, n, a, lda, jpvt, tau, work, lwork, rwork, info)
        return with_rwork

    def without_rwork(geqp3, m, n, a, lda, jpvt, tau, work, lwork, rwork, info):
        geqp3(m, n, a, lda, jpvt, tau, work, lwork, info)
    return without_rwork


@numba.njit(**JIT_OPTIONS)
def geqp3_each(a, q_out, r_out, p_out, nonfinite, geqp3, orgqr, thread, threads):
    """``geqp3`` then ``orgqr`` on each matrix (SciPy's ``qr(pivoting=True)``): Q and R as :func:`qr_each`, and the
    0-based pivots ``p_out``.

    Column pivoting picks each pivot by column norms that LAPACK downdates as it goes. Where two columns' remaining
    norms agree to rounding, which they do in the rank-deficient matrices pivoting exists for, the pivot depends on
    every rounding before it, so only LAPACK's own routine gives SciPy's pivots there."""
    n = a.shape[2]
    start, stop = chunk_range(thread, threads, a.shape[0])
    m_, n_, k_, ncols_, info, buf, q, tau, size, query = qr_arguments(a, q_out.shape[2])
    jpvt = np.empty(n, dtype=np.int32)
    rwork = np.empty(2 * n, dtype=buf.real.dtype)
    _call_geqp3(geqp3, m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, jpvt.ctypes, tau.ctypes, size.ctypes,
                query.ctypes, rwork.ctypes, info.ctypes)
    factor_lwork, orgqr_lwork, work = workspaces(size, orgqr, m_, ncols_, k_, q, tau, info)
    for b in range(start, stop):
        if not copy_checked(a, b, buf) and flag_nonfinite(nonfinite, thread):
            continue
        jpvt[:] = 0  # every column free to move
        _call_geqp3(geqp3, m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, jpvt.ctypes, tau.ctypes, work.ctypes,
                    factor_lwork.ctypes, rwork.ctypes, info.ctypes)
        for j in range(n):
            p_out[b, j] = jpvt[j] - 1
        write_qr(buf, tau, q, work, orgqr_lwork, orgqr, m_, ncols_, k_, info, q_out, r_out, b)
