"""A CUDA GPU as a :class:`Device`, on CuPy: device memory, one stream per worker, cuBLAS/cuSOLVER tile kernels.

The only module that imports CuPy (when a ``CudaDevice`` is created, never by ``import hetlapack``). It
differs from the emulated accelerator only in the array module and the library calls: LAPACK routines are
cuSOLVER's (``potrf``, ``getrf``, ``geqrf``, ``orgqr``) called in place on tile views with the mirror's
leading dimension, and their ``info`` codes are read back and returned like LAPACK's (CuPy's own wrappers
ignore them). BLAS-3 goes through CuPy's matmul and ``solve_triangular`` (cuBLAS GEMM/TRSM); LARFT and
LARFB are written with GEMMs (seed 000 §6.7). A tile view is packed into one contiguous buffer on the device before
it crosses the link and unpacked after, by CuPy's strided copy: a numba-cuda copy kernel did the same at ten times the
cost per tile, its launch alone about 0.22 ms against CuPy's 0.02 ms (H100, tiles of 256 and 512). LASWP is a
numba-cuda kernel (:mod:`hetlapack.devices.cuda_panel`) that runs with the pivots where getrf left them. Every
kernel synchronizes its stream before returning, so a task that finished has its results in device memory for
whichever device reads them next.

Measured once, on an H100 (``docs/hybrid.md``); CI runs its array code against a NumPy stand-in for CuPy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .lapack_pointers import PREFIX, ROUTINE_NAME
from .base import Device, zero_other_triangle
from .capability import load_capability

#: cuBLAS fill modes (``cublasFillMode_t``).
FILL_LOWER, FILL_UPPER = 0, 1

#: LAPACK routine -> cuSOLVER name per prefix where it is not prefix + routine (cuBLAS/cuSOLVER take LAPACK's
#: ``PREFIX``): the complex orgqr is ungqr.
_NAME = {"orgqr": ROUTINE_NAME["orgqr"]}


def solver_routines(cusolver, kernel: str, dtype_char: str) -> tuple[Callable, Callable]:
    """cuSOLVER's routine for LAPACK's ``kernel`` in the precision of ``dtype_char``, and its workspace query."""
    prefix = PREFIX[dtype_char]
    name = _NAME.get(kernel, {}).get(prefix, prefix + kernel)
    return getattr(cusolver, name), getattr(cusolver, name + "_bufferSize")


def _import_cupy():
    import cupy  # noqa: PLC0415 - optional dependency, imported only when a CUDA device is used
    from cupy_backends.cuda.libs import cusolver  # noqa: PLC0415
    from cupyx.scipy.linalg import solve_triangular  # noqa: PLC0415

    return cupy, cusolver, solve_triangular


def _panel_kernels():
    from . import cuda_panel  # noqa: PLC0415 - numba-cuda, imported with the device

    return cuda_panel


def _contiguous(a) -> bool:
    """Whether ``a`` (host or device) lies in one block of memory, C- or Fortran-ordered: it crosses the link as it
    lies; a tile view is first packed into one buffer."""
    return a.flags.c_contiguous or a.flags.f_contiguous


def _leading_dimension(a) -> int:
    rows = a.shape[0]
    if a.ndim != 2 or (rows > 1 and a.strides[0] != a.itemsize):
        raise ValueError("tile kernels need 2-D views with contiguous columns (Fortran order)")
    return max(a.strides[1] // a.itemsize if a.shape[1] > 1 else rows, rows, 1)


class CudaDevice(Device):
    """GPU number ``index`` (named ``"cuda:{index}"``), fed by ``workers`` runtime threads, one stream each."""

    kind = "accelerator"
    host_compute = False

    def __init__(self, index: int = 0, workers: int = 1, memory_bytes: int | None = None) -> None:
        super().__init__()
        self.cupy, self._cusolver, self._solve_triangular = _import_cupy()
        self.index = int(index)
        self.name = f"cuda:{self.index}"
        self.workers = max(1, workers)
        self.memory_bytes = memory_bytes
        self._device = self.cupy.cuda.Device(self.index)
        self._local = threading.local()
        load_capability(self)

    @property
    def memory_space(self) -> str:
        return self.name

    def free_memory_bytes(self) -> int:
        """The driver's free memory plus what CuPy's pool holds unused (the runtime streams tiles beyond it)."""
        with self._device:
            return int(self._device.mem_info[0] + self.cupy.get_default_memory_pool().free_bytes())

    def copy_within(self, data, out) -> None:
        self._run(lambda: out.__setitem__(Ellipsis, data))

    def _stream(self):
        stream = getattr(self._local, "stream", None)
        if stream is None:
            with self._device:
                stream = self._local.stream = self.cupy.cuda.Stream(non_blocking=True)
        return stream

    def _run(self, work: Callable[[], Any]) -> Any:
        """Run ``work`` on this GPU and this thread's stream, and wait for it (the task is then complete)."""
        stream = self._stream()
        with self._device, stream:
            result = work()
            stream.synchronize()
        return result

    # --- memory ---------------------------------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        with self._device:
            return self.cupy.empty(shape, dtype=dtype, order="F")

    def zero_other_triangle(self, a, lower: bool) -> None:
        self._run(lambda: zero_other_triangle(a, lower, self.cupy))

    def all_finite(self, a) -> bool:
        return bool(self._run(lambda: self.cupy.isfinite(a).all()))

    def to_device(self, host: np.ndarray) -> Any:
        return self._run(lambda: self.cupy.asfortranarray(self.cupy.asarray(host)))

    def upload(self, host: np.ndarray, out) -> None:
        """Copy ``host`` into the device array ``out`` (a matrix or a tile view): it crosses as one buffer, as it
        lies when contiguous, C- or Fortran-ordered (the host makes no transposed copy), and the device lays it out
        into ``out``."""
        packed = host if _contiguous(host) else np.asfortranarray(host)

        def copy() -> None:
            out[...] = self.cupy.asarray(packed)

        self._run(copy)

    def to_host(self, data, out: np.ndarray) -> None:
        """Copy the device array ``data`` into ``out``: straight into it when ``out`` is contiguous (a whole matrix),
        else through one buffer; a tile view is packed into one buffer on the device before it crosses the link."""
        direct = _contiguous(out)

        def fetch():
            packed = data if _contiguous(data) else self.cupy.asfortranarray(data)
            return self.cupy.asnumpy(packed, stream=self._stream(), out=out if direct else None)

        fetched = self._run(fetch)
        if not direct:
            out[...] = fetched

    # --- cuSOLVER calls -------------------------------------------------------------------------------------
    def _lapack(self, kernel: str, a, buffer_args: tuple, call_args: Callable[[Any, int, Any], tuple]) -> int:
        """Query the workspace, call the cuSOLVER routine, return its ``info`` (read back from the GPU)."""
        cupy = self.cupy
        routine, buffer_size = solver_routines(self._cusolver, kernel, a.dtype.char)

        def call() -> Any:
            handle = cupy.cuda.device.get_cusolver_handle()
            lwork = buffer_size(handle, *buffer_args)
            work = cupy.empty(max(lwork, 1), dtype=a.dtype)
            info = cupy.zeros(1, dtype=np.int32)
            routine(handle, *call_args(work, lwork, info))
            return info

        return int(self._run(call).get()[0])

    def potrf(self, a, lower: bool) -> int:
        n, lda, uplo = a.shape[0], _leading_dimension(a), FILL_LOWER if lower else FILL_UPPER
        if n == 0:
            return 0
        return self._lapack("potrf", a, (uplo, n, a.data.ptr, lda),
                            lambda work, lwork, info: (uplo, n, a.data.ptr, lda, work.data.ptr, lwork, info.data.ptr))

    def getrf(self, a, piv) -> int:
        m, n = a.shape
        if m == 0 or n == 0:
            return 0
        lda = _leading_dimension(a)
        return self._lapack("getrf", a, (m, n, a.data.ptr, lda),
                            lambda work, lwork, info: (m, n, a.data.ptr, lda, work.data.ptr, piv.data.ptr,
                                                       info.data.ptr))

    def geqrf(self, a, tau) -> None:
        m, n = a.shape
        if m == 0 or n == 0:
            return
        lda = _leading_dimension(a)
        self._lapack("geqrf", a, (m, n, a.data.ptr, lda),
                     lambda work, lwork, info: (m, n, a.data.ptr, lda, tau.data.ptr, work.data.ptr, lwork,
                                                info.data.ptr))

    def orgqr(self, a, tau, t=None) -> None:
        m, n = a.shape
        k = len(tau)
        if m == 0 or n == 0:
            return
        lda = _leading_dimension(a)
        self._lapack("orgqr", a, (m, n, k, a.data.ptr, lda, tau.data.ptr),
                     lambda work, lwork, info: (m, n, k, a.data.ptr, lda, tau.data.ptr, work.data.ptr, lwork,
                                                info.data.ptr))

    # --- BLAS-3 through CuPy (cuBLAS) -------------------------------------------------------------------------
    @staticmethod
    def _op(a, conj: bool):
        return a.conj().T if conj else a

    def trsm(self, a, b, *, side, lower, conj, unit, alpha=1) -> None:
        if b.size == 0:
            return
        solve = self._solve_triangular

        def work() -> None:
            if side == "L":
                b[...] = solve(a, alpha * b, trans="C" if conj else "N", lower=lower, unit_diagonal=unit)
            elif conj:
                # X A^H = alpha B  <=>  A X^H = (alpha B)^H
                b[...] = solve(a, (alpha * b).conj().T, trans="N", lower=lower, unit_diagonal=unit).conj().T
            else:
                # X A = alpha B  <=>  A^T X^T = (alpha B)^T
                b[...] = solve(a, (alpha * b).T, trans="T", lower=lower, unit_diagonal=unit).T

        self._run(work)

    def herk(self, a, c, *, lower, conj_first, alpha=-1.0, beta=1.0) -> None:
        if c.size == 0:
            return
        cupy = self.cupy

        def work() -> None:
            product = a.conj().T @ a if conj_first else a @ a.conj().T
            n = c.shape[0]
            mask = cupy.tri(n, dtype=bool) if lower else cupy.tri(n, dtype=bool).T
            c[...] = cupy.where(mask, alpha * product + beta * c, c)
            if c.dtype.kind == "c":
                # HERK leaves a real diagonal, as LAPACK's does
                diagonal = cupy.arange(n)
                c[diagonal, diagonal] = c[diagonal, diagonal].real

        self._run(work)

    def gemm(self, a, b, c, *, conj_a=False, conj_b=False, alpha=-1.0, beta=1.0) -> None:
        if c.size == 0:
            return

        def work() -> None:
            c[...] = alpha * (self._op(a, conj_a) @ self._op(b, conj_b)) + beta * c

        self._run(work)

    def laswp(self, a, piv) -> None:
        """LAPACK's row interchanges (1-based ``piv``, host pivots sent over first) in place, by the numba-cuda LASWP
        kernel: the rows never cross the link."""
        if a.shape[1] == 0 or len(piv) == 0:
            return
        cupy = self.cupy
        self._run(lambda: _panel_kernels().laswp_rows(a, cupy.asarray(piv.ravel() - 1, dtype=np.int32)))

    # --- solves with factors on the device (a single CuPy matrix) ---------------------------------------------
    def potrs(self, c, b, lower: bool) -> None:
        """``b <- A^{-1} b`` in place, ``A`` given by the Cholesky factor in the ``lower`` (else upper) triangle of
        ``c``; only that triangle is read (cuBLAS TRSM)."""
        solve = self._solve_triangular
        # A = L L^H: L Y = B, L^H X = Y ;  A = U^H U: U^H Y = B, U X = Y
        first, second = ("N", "C") if lower else ("C", "N")

        def work() -> None:
            b[...] = solve(c, b, trans=first, lower=lower)
            b[...] = solve(c, b, trans=second, lower=lower)

        self._run(work)

    def getrs(self, lu, piv, b, trans: int) -> None:
        """``b <- op(A)^{-1} b`` in place from getrf's packed ``lu`` and 0-based ``piv`` (``op`` by ``trans`` 0, 1, 2
        as ``scipy.linalg.lu_solve``): the row interchanges by the LASWP kernel, the triangles by cuBLAS TRSM."""
        solve, mode, panel = self._solve_triangular, "NTC"[trans], _panel_kernels()

        def work() -> None:
            if trans == 0:
                # X = U^{-1} L^{-1} P B
                panel.laswp_rows(b, piv)
                b[...] = solve(lu, b, lower=True, unit_diagonal=True)
                b[...] = solve(lu, b, lower=False)
            else:
                # X = P^T op(L)^{-1} op(U)^{-1} B
                b[...] = solve(lu, b, trans=mode, lower=False)
                b[...] = solve(lu, b, trans=mode, lower=True, unit_diagonal=True)
                panel.laswp_rows(b, piv, backward=True)

        self._run(work)

    def _reflectors(self, v, k: int):
        """The unit lower trapezoidal ``V`` (m x k) stored below the diagonal of ``v``."""
        cupy = self.cupy
        return cupy.tril(v[:, :k], -1) + cupy.eye(v.shape[0], k, dtype=v.dtype)

    def larft(self, v, tau, t) -> None:
        k = len(tau)
        if v.shape[0] == 0 or k == 0:
            return
        cupy = self.cupy

        def work() -> None:
            reflectors = self._reflectors(v, k)
            gram = reflectors.conj().T @ reflectors
            factor = cupy.zeros((k, k), dtype=v.dtype)
            taus = tau.ravel()
            for i in range(k):
                # T[:i,i] = -tau_i T[:i,:i] V[:,:i]^H v_i ;  T[i,i] = tau_i
                factor[:i, i] = -taus[i] * (factor[:i, :i] @ gram[:i, i])
                factor[i, i] = taus[i]
            t[:k, :k] = factor

        self._run(work)

    def larfb(self, v, t, c, *, conj) -> None:
        k = t.shape[1]
        if c.size == 0 or k == 0:
            return
        cupy = self.cupy

        def work() -> None:
            reflectors = self._reflectors(v, k)
            factor = cupy.triu(t[:k, :k])
            # C = C - V op(T) V^H C  (op = ^H for H^H C)
            c[...] = c - reflectors @ (self._op(factor, conj) @ (reflectors.conj().T @ c))

        self._run(work)
