"""Batched QR with column pivoting: LAPACK's own ``geqp3`` and ``orgqr``, called on each matrix from compiled code.

Column pivoting picks each pivot by column norms that LAPACK downdates as it goes. Where two columns' remaining
norms agree to rounding, which they do in the rank-deficient matrices pivoting exists for, the pivot depends on
every rounding before it, so a kernel of our own would give other pivots there. This one calls the routines SciPy's
``qr(pivoting=True)`` calls, in SciPy's LAPACK (through the function pointers ``scipy.linalg.cython_lapack``
exports, passed in as arguments), with the workspace size SciPy asks for: the results are SciPy's, bit for bit, in
every dtype. What it saves is SciPy's Python loop around each call, and the matrices are shared among threads.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload

from ._interleave import JIT_OPTIONS, chunk_range, copy_checked


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
def _integer(value):
    """A LAPACK integer argument (passed by reference)."""
    return np.full(1, value, dtype=np.int32)


@numba.njit(parallel=True, **JIT_OPTIONS)
def geqp3_each(a, q_out, r_out, p_out, nonfinite, geqp3, orgqr, threads):
    """``scipy.linalg.qr(a[b], pivoting=True)`` for every matrix ``b`` of the stack: ``Q`` (its first
    ``q_out.shape[2]`` columns; none when that is 0), the first ``r_out.shape[1]`` rows of ``R`` and the 0-based
    pivots ``p_out``. Given a ``nonfinite`` flag per thread (else an empty array), a thread that meets an infinity or
    NaN in ``a`` sets its own and leaves that matrix's results unwritten."""
    batch, m, n = a.shape
    k, ncols, rows = min(m, n), q_out.shape[2], r_out.shape[1]
    for thread in numba.prange(threads):
        start, stop = chunk_range(thread, threads, batch)
        m_, n_, k_, ncols_, info = _integer(m), _integer(n), _integer(k), _integer(ncols), _integer(0)
        buf = np.empty((n, m), dtype=a.dtype).T  # Fortran order, leading dimension m
        q = np.empty((ncols, m), dtype=a.dtype).T
        jpvt = np.empty(n, dtype=np.int32)
        tau = np.empty(k, dtype=a.dtype)
        rwork = np.empty(2 * n, dtype=buf.real.dtype)
        size = np.zeros(1, dtype=a.dtype)
        query = _integer(-1)  # LAPACK's workspace query, as SciPy makes it before each call
        _call_geqp3(geqp3, m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, jpvt.ctypes, tau.ctypes, size.ctypes,
                    query.ctypes, rwork.ctypes, info.ctypes)
        factor_lwork = _integer(int(size[0].real))
        orgqr_lwork = _integer(1)
        if ncols:
            orgqr(m_.ctypes, ncols_.ctypes, k_.ctypes, q.ctypes, m_.ctypes, tau.ctypes, size.ctypes, query.ctypes,
                  info.ctypes)
            orgqr_lwork[0] = int(size[0].real)
        work = np.empty(max(factor_lwork[0], orgqr_lwork[0]), dtype=a.dtype)
        for b in range(start, stop):
            if not copy_checked(a, b, buf) and nonfinite.size:
                nonfinite[thread] = 1
                continue
            jpvt[:] = 0  # every column free to move
            _call_geqp3(geqp3, m_.ctypes, n_.ctypes, buf.ctypes, m_.ctypes, jpvt.ctypes, tau.ctypes, work.ctypes,
                        factor_lwork.ctypes, rwork.ctypes, info.ctypes)
            for i in range(rows):
                for j in range(n):
                    r_out[b, i, j] = buf[i, j] if j >= i else 0.0
            for j in range(n):
                p_out[b, j] = jpvt[j] - 1
            if ncols:
                q[:, :k] = buf[:, :k]
                orgqr(m_.ctypes, ncols_.ctypes, k_.ctypes, q.ctypes, m_.ctypes, tau.ctypes, work.ctypes,
                      orgqr_lwork.ctypes, info.ctypes)
                q_out[b] = q
