"""The host CPU as a :class:`Device`: GIL-free BLAS/LAPACK tile kernels working in place on tile views."""

from __future__ import annotations

import threading
from ctypes import byref

import numpy as np

from ..machine import usable_cores
from . import lapack_pointers as lp
from .base import Device, zero_other_triangle
from .capability import load_capability

HOST_MEMORY = "host"


def _trans(conj: bool, dtype_char: str) -> str:
    """BLAS ``trans`` for op(A) = A^H when ``conj`` (A^T for real dtypes), else A."""
    return ("C" if dtype_char in "FD" else "T") if conj else "N"


def _conj_flag(conj: bool, dtype_char: str):
    return byref(lp.char(_trans(conj, dtype_char)))


#: Block size the workspace of geqrf/orgqr is sized for (LAPACK's usual ILAENV answer).
_HOUSEHOLDER_BLOCK = 64


class CpuDevice(Device):
    """The host's cores: kernels call SciPy's BLAS/LAPACK function pointers, releasing the GIL.

    ``workers`` runtime threads feed it (default: one per core); the runtime gives each kernel
    ``cores // workers`` BLAS threads so the cores are never oversubscribed.
    """

    kind = "cpu"

    def __init__(self, workers: int | None = None, name: str = "cpu") -> None:
        super().__init__()
        self.name = name
        self.cores = usable_cores()
        self.workers = max(1, workers if workers is not None else self.cores)
        self._local = threading.local()
        load_capability(self)

    @property
    def memory_space(self) -> str:
        return HOST_MEMORY

    # --- memory: the host is its own memory space, nothing moves ----------------------------------------------
    def to_device(self, host: np.ndarray) -> np.ndarray:
        return np.asfortranarray(host)

    def upload(self, host: np.ndarray, out: np.ndarray) -> None:
        if host is not out:
            out[...] = host

    def to_host(self, data: np.ndarray, out: np.ndarray) -> None:
        if data is not out:
            out[...] = data

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.empty(shape, dtype=dtype, order="F")

    def _workspace(self, size: int, dtype: np.dtype) -> np.ndarray:
        """A per-thread scratch buffer of at least ``size`` elements, reused across calls."""
        buffers = self._local.__dict__.setdefault("buffers", {})
        buffer = buffers.get(dtype.char)
        if buffer is None or buffer.size < size:
            buffer = buffers[dtype.char] = np.empty(max(size, 1), dtype=dtype)
        return buffer

    def _blocked_workspace(self, n: int, dtype: np.dtype) -> tuple[np.ndarray, int]:
        """Workspace and its length for blocked Householder routines on ``n`` columns (LAPACK's nb = 64)."""
        lwork = max(1, n * _HOUSEHOLDER_BLOCK)
        return self._workspace(lwork, dtype), lwork

    # --- tile kernels ---------------------------------------------------------------------------------------
    def potrf(self, a: np.ndarray, lower: bool) -> int:
        return lp.potrf("L" if lower else "U", a)

    def trsm(self, a, b, *, side, lower, conj, unit, alpha=1):
        lp.trsm_by_halves(side, "L" if lower else "U", _trans(conj, b.dtype.char), "U" if unit else "N", alpha, a, b)

    def herk(self, a, c, *, lower, conj_first, alpha=-1.0, beta=1.0):
        lp.herk("L" if lower else "U", _trans(conj_first, c.dtype.char), alpha, a, beta, c)

    def gemm(self, a, b, c, *, conj_a=False, conj_b=False, alpha=-1.0, beta=1.0):
        lp.gemm(_trans(conj_a, c.dtype.char), _trans(conj_b, c.dtype.char), alpha, a, b, beta, c)

    def getrf(self, a, piv):
        m, n = a.shape
        info = lp.integer(0)
        if m == 0 or n == 0:
            return 0
        lp.routine("getrf", a.dtype.char)(
            byref(lp.integer(m)), byref(lp.integer(n)), lp.address(a), byref(lp.integer(lp.leading_dimension(a))),
            lp.address(piv), byref(info))
        return info.value

    def laswp(self, a, piv):
        if a.shape[1] == 0 or len(piv) == 0:
            return
        lp.routine("laswp", a.dtype.char)(
            byref(lp.integer(a.shape[1])), lp.address(a), byref(lp.integer(lp.leading_dimension(a))),
            byref(lp.integer(1)), byref(lp.integer(len(piv))), lp.address(piv), byref(lp.integer(1)))

    def geqrf(self, a, tau):
        m, n = a.shape
        if m == 0 or n == 0:
            return
        work, lwork = self._blocked_workspace(n, a.dtype)
        info = lp.integer(0)
        lp.routine("geqrf", a.dtype.char)(
            byref(lp.integer(m)), byref(lp.integer(n)), lp.address(a), byref(lp.integer(lp.leading_dimension(a))),
            lp.address(tau), lp.address(work), byref(lp.integer(lwork)), byref(info))

    def geqrt(self, a, tau, t):
        """Recursive QR of the panel (LAPACK geqrt3, BLAS-3 down to single columns: 2x geqrf's speed on a tall
        panel here) giving ``T`` at once, whose diagonal holds ``tau``. A panel wider than tall falls back."""
        m, n = a.shape
        if m < n or n == 0:
            super().geqrt(a, tau, t)
            return
        info = lp.integer(0)
        lp.routine("geqrt3", a.dtype.char)(
            byref(lp.integer(m)), byref(lp.integer(n)), lp.address(a), byref(lp.integer(lp.leading_dimension(a))),
            lp.address(t), byref(lp.integer(lp.leading_dimension(t))), byref(info))
        tau[:n] = t[:n, :n].diagonal().reshape(tau[:n].shape)

    def larft(self, v, tau, t):
        n, k = v.shape[0], len(tau)
        if n == 0 or k == 0:
            return
        lp.routine("larft", v.dtype.char)(
            byref(lp.char("F")), byref(lp.char("C")), byref(lp.integer(n)), byref(lp.integer(k)),
            lp.address(v), byref(lp.integer(lp.leading_dimension(v))), lp.address(tau),
            lp.address(t), byref(lp.integer(lp.leading_dimension(t))))

    def larfb(self, v, t, c, *, conj):
        char = c.dtype.char
        m, n = c.shape
        k = t.shape[1]
        if m == 0 or n == 0 or k == 0:
            return
        work = self._workspace(n * k, c.dtype)
        lp.routine("larfb", char)(
            byref(lp.char("L")), _conj_flag(conj, char), byref(lp.char("F")), byref(lp.char("C")),
            byref(lp.integer(m)), byref(lp.integer(n)), byref(lp.integer(k)),
            lp.address(v), byref(lp.integer(lp.leading_dimension(v))),
            lp.address(t), byref(lp.integer(lp.leading_dimension(t))),
            lp.address(c), byref(lp.integer(lp.leading_dimension(c))), lp.address(work), byref(lp.integer(n)))

    def orgqr(self, a, tau, t=None):
        """With ``T``: ``Q = [I; 0] - V T V_1^H`` by two triangular multiplies, half LAPACK orgqr's flops and all
        of them BLAS-3 (a third of its time on a 3616 x 384 panel on one core)."""
        m, n = a.shape
        if m == 0 or n == 0:
            return
        if t is not None and m >= n == len(tau):
            top = a[:n]
            w = np.asfortranarray(np.triu(t[:n, :n]))  # becomes W = T V_1^H
            lp.trmm("R", "L", _trans(True, a.dtype.char), "U", 1.0, top, w)
            zero_other_triangle(top, lower=True)
            np.fill_diagonal(top, 1)
            lp.trmm("R", "U", "N", "N", -1.0, w, a)
            top[np.diag_indices(n)] += 1
            return
        work, lwork = self._blocked_workspace(n, a.dtype)
        info = lp.integer(0)
        lp.routine("orgqr", a.dtype.char)(
            byref(lp.integer(m)), byref(lp.integer(n)), byref(lp.integer(len(tau))), lp.address(a),
            byref(lp.integer(lp.leading_dimension(a))), lp.address(tau), lp.address(work),
            byref(lp.integer(lwork)), byref(info))
