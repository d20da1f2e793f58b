"""The device seam: everything that differs between a CPU and an accelerator is a method of :class:`Device`.

Tile kernels work **in place** on 2-D arrays of the device's memory space whose first axis is contiguous
(Fortran-ordered tiles, or tile views into one Fortran-ordered matrix with the matrix's leading dimension).
Names and argument conventions follow BLAS/LAPACK, with ``conj`` meaning the conjugate transpose for complex
dtypes and the transpose for real ones.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable
from typing import Any

import numpy as np

from ..contract import arrays

#: Columns per block of :func:`zero_other_triangle`.
_ZERO_BLOCK = 512


def zero_other_triangle(a: Any, lower: bool, xp: Any = np) -> None:
    """Zero, in place, the triangle a ``lower`` (else upper) Cholesky factor does not use. A NumPy matrix is zeroed
    in runs along memory (:func:`~..contract.arrays.zero_other_triangle`); a stack, or an array of another module
    ``xp`` (CuPy: one launch per block, not per column), a block of columns at a time: the part off the diagonal
    block is a plain fill, so only the diagonal blocks pass through ``tril`` / ``triu``."""
    if xp is np and a.ndim == 2:
        arrays.zero_other_triangle(a, lower)
        return
    n = a.shape[-1]
    for start in range(0, n, _ZERO_BLOCK):
        stop = min(start + _ZERO_BLOCK, n)
        diagonal = a[..., start:stop, start:stop]
        if lower:
            a[..., :start, start:stop] = 0
            diagonal[...] = xp.tril(diagonal)
        else:
            a[..., stop:, start:stop] = 0
            diagonal[...] = xp.triu(diagonal)


#: Kernel classes of the capability model (seed 000 §6.3: one weight per device per BLAS level).
KERNEL_CLASSES = ("blas3", "panel", "memory")

#: Which class each tile kernel belongs to, for placement by capability and for the trace.
KERNEL_CLASS = {
    "potrf": "panel",
    "getrf": "panel",
    "geqrf": "panel",
    "geqrt": "panel",
    "larft": "panel",
    "orgqr": "panel",
    "laswp": "memory",
    "trsm": "blas3",
    "herk": "blas3",
    "gemm": "blas3",
    "larfb": "blas3",
}

#: Default capability (GFLOP/s of one worker per kernel class, plus link bandwidth in GB/s and latency in
#: seconds for accelerators) until calibration measures it.
DEFAULT_CAPABILITY = {"blas3": 50.0, "panel": 10.0, "memory": 5.0}

#: Share of an accelerator's reported free memory that the runtime's tiles may take by default; the rest is left
#: to the kernels' own workspaces and temporaries.
MEMORY_HEADROOM = 0.9


class Device(abc.ABC):
    """One compute device with its own memory space and tile kernels.

    ``kind`` is ``"cpu"`` or ``"accelerator"``; two devices with equal ``memory_space`` share data without a
    transfer. ``workers`` is how many runtime worker threads feed the device (several for a multicore CPU).
    ``host_compute`` says whether its kernels run on the host's cores (so the runtime counts its workers when
    it caps BLAS threads). ``capability`` is the rate of one worker per kernel class in GFLOP/s, measured by
    :mod:`hetlapack.devices.capability` when a cached calibration exists. ``memory_bytes`` caps the bytes of
    tiles the runtime keeps in the device's own memory at once (out-of-core streaming beyond it); ``None`` means
    what :meth:`free_memory_bytes` reports when a run starts.
    """

    name: str
    kind: str
    workers: int = 1
    host_compute: bool = True
    memory_bytes: int | None = None

    def __init__(self) -> None:
        self.capability: dict[str, float] = dict(DEFAULT_CAPABILITY)
        #: Per tile kernel, ``((tile, GFLOP/s), ...)`` of one worker, when calibration measured them.
        self.kernel_rates: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per factorization, ``((order, GFLOP/s), ...)`` of the device's routine on a whole matrix (float64), when
        #: calibration measured them: what dispatch prices the host and gpu paths with.
        self.whole_rates: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per factorization, input layout and SciPy version (``"potrf C scipy 1.17.1"``), ``((order, GFLOP/s),
        #: ...)`` of the host path's call (SciPy's function as hetlapack makes it, default flags) on a whole float64
        #: matrix, when calibration measured them (a CPU's only): the host path's price, layout conversion included.
        self.host_call_rates: dict[str, tuple[tuple[float, float], ...]] = {}
        #: The same of the tile path's call on the CPU alone (its default tile): how far the simulator's price of
        #: that call is from this machine's.
        self.tile_call_rates: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per factorization, ``((order, tile), ...)``: the tile the tile path's call on the CPU alone ran fastest
        #: with on a C-ordered float64 matrix of that order, when calibration measured it (a CPU's only).
        self.tile_orders: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per batched factorization and dtype (``"getrf float64"``), ``((order, LAPACK loop's time over the
        #: interleaved kernel's), ...)`` on stacks, when calibration measured them (a CPU's only): where dispatch
        #: switches from the one to the other.
        self.batched_rates: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per batched factorization and dtype, ``((order, matrices per buffer), ...)``: the buffer size its
        #: interleaved kernel ran fastest with on stacks, when calibration measured it (a CPU's only).
        self.batched_lanes: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per batched factorization (``"getrf float64"``), ``((buffer bytes, time asking for the next chunk all at
        #: once over a slice a step), ...)`` for one vector of matrices, when calibration measured it (a CPU's only):
        #: up to which buffer its kernel asks a slice a step.
        self.batched_spread: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per batched factorization (``"getrf float64"``), ``((matrix bytes, time with ordinary stores over streaming
        #: ones), ...)`` on stacks past the last-level cache, when calibration measured it (a CPU's only): up to which
        #: matrix its kernel writes the results with streaming stores.
        self.batched_stream: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per batched factorization (``"lu float64"``), ``((bytes of a stack of matrices of order 8 and its results,
        #: time with ordinary stores over streaming ones), ...)`` up to the last-level cache, when calibration
        #: measured it (a CPU's only): from which stacks on the kernels write with streaming stores.
        self.batched_stream_stack: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per solve and dtype (``"getrs float32"``), ``((order, the solve a matrix at a time's time over the
        #: interleaved one's), ...)`` on stacks, when calibration measured them (a CPU's only): up to where a solve
        #: runs in the interleaved layout.
        self.batched_solves: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per LAPACK loop and dtype (``"getrf float32"``), ``((order, every thread's time over one thread's), ...)``
        #: on stacks, when calibration measured them (a CPU's only): up to where the loop runs on one thread.
        self.loop_threads: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per dtype and SciPy version (``"float64 scipy 1.17.1"``), ``((order, block), ...)``: the block LAPACK's
        #: right-looking Cholesky ran fastest at on a whole matrix, its order where SciPy's BLAS's ``potrf`` was the
        #: faster, when calibration measured it (a CPU's only): the host path's Cholesky.
        self.potrf_blocks: dict[str, tuple[tuple[float, float], ...]] = {}
        #: Per host call, dtype and SciPy version (``"geqrf float64 scipy 1.17.1"``), ``((order, every core's time over
        #: one BLAS thread's), ...)`` of SciPy's call on a C-ordered matrix, when calibration measured it (a CPU's
        #: only): where the host path's call runs on one BLAS thread.
        self.host_threads: dict[str, tuple[tuple[float, float], ...]] = {}

    @property
    @abc.abstractmethod
    def memory_space(self) -> Hashable:
        """Identifier of the memory this device computes on."""

    # --- memory -------------------------------------------------------------------------------------------
    def free_memory_bytes(self) -> int | None:
        """Free memory the device reports (an accelerator's driver); ``None`` where it is unknown or unbounded."""
        return None

    def memory_capacity(self) -> int | None:
        """Bytes of tiles the runtime may keep in this device's memory: ``memory_bytes``, else a share
        (``MEMORY_HEADROOM``) of :meth:`free_memory_bytes`; ``None`` for no limit."""
        if self.memory_bytes is not None:
            return int(self.memory_bytes)
        free = self.free_memory_bytes()
        return None if free is None else int(free * MEMORY_HEADROOM)

    @abc.abstractmethod
    def to_device(self, host: np.ndarray) -> Any:
        """A Fortran-ordered copy of the host array in this device's memory."""

    def free(self, data: Any) -> None:
        """Give back an array made by :meth:`empty` that is no longer used (devices with a pool reuse it)."""

    @abc.abstractmethod
    def upload(self, host: np.ndarray, out: Any) -> None:
        """Copy the host array into ``out``, a same-shaped array (or view) in this device's memory."""

    @abc.abstractmethod
    def to_host(self, data: Any, out: np.ndarray) -> None:
        """Copy device data back into the host array ``out`` (same shape)."""

    def copy_within(self, data: Any, out: Any) -> None:
        """Copy ``data`` into ``out``, both in this device's memory (two allocations holding the same tile)."""
        out[...] = data

    @abc.abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """An uninitialized Fortran-ordered array in this device's memory."""

    def zero_other_triangle(self, a: Any, lower: bool) -> None:
        """Zero the triangle of the square ``a`` (in this device's memory) that a ``lower`` (else upper) Cholesky
        factor does not use."""
        zero_other_triangle(a, lower)

    def all_finite(self, a: Any) -> bool:
        """Whether ``a`` (in this device's memory) holds no infinity or NaN: SciPy's ``check_finite`` made where the
        matrix is, instead of in a pass over host memory."""
        return bool(np.isfinite(a).all())

    # --- tile kernels (in place) ----------------------------------------------------------------------------
    @abc.abstractmethod
    def potrf(self, a: Any, lower: bool) -> int:
        """Cholesky of a diagonal tile; returns LAPACK's ``info`` (0, or the 1-based failing minor)."""

    @abc.abstractmethod
    def trsm(self, a: Any, b: Any, *, side: str, lower: bool, conj: bool, unit: bool, alpha: complex = 1) -> None:
        """``B = alpha op(A)^{-1} B`` (side ``"L"``) or ``B = alpha B op(A)^{-1}`` (side ``"R"``)."""

    @abc.abstractmethod
    def herk(self, a: Any, c: Any, *, lower: bool, conj_first: bool, alpha: float = -1.0, beta: float = 1.0) -> None:
        """``C = alpha A A^H + beta C`` (or ``A^H A`` when ``conj_first``) on C's ``lower``/upper triangle."""

    @abc.abstractmethod
    def gemm(self, a: Any, b: Any, c: Any, *, conj_a: bool = False, conj_b: bool = False,
             alpha: complex = -1.0, beta: complex = 1.0) -> None:
        """``C = alpha op(A) op(B) + beta C``."""

    @abc.abstractmethod
    def getrf(self, a: Any, piv: Any) -> int:
        """LU with partial pivoting of a (tall) panel; 1-based LAPACK pivots into ``piv`` (int32, in this device's
        memory, as :meth:`empty` makes it); returns ``info``."""

    @abc.abstractmethod
    def laswp(self, a: Any, piv: Any) -> None:
        """Apply the row interchanges ``piv`` (1-based, relative to ``a``'s first row; on the host or in this
        device's memory) in order."""

    @abc.abstractmethod
    def geqrf(self, a: Any, tau: Any) -> None:
        """Householder QR of a (tall) panel in LAPACK's storage; ``tau`` receives the scalar factors."""

    @abc.abstractmethod
    def larft(self, v: Any, tau: Any, t: Any) -> None:
        """The upper triangular factor ``T`` of the compact-WY block reflector ``H = I - V T V^H``."""

    def geqrt(self, a: Any, tau: Any, t: Any) -> None:
        """Householder QR of a (tall) panel with its compact-WY factor: ``a`` and ``tau`` as :meth:`geqrf`
        leaves them, ``t`` as :meth:`larft` would compute it. Devices with a recursive kernel (LAPACK's geqrt3)
        override this; the default makes the two calls."""
        self.geqrf(a, tau)
        self.larft(a, tau, t)

    @abc.abstractmethod
    def larfb(self, v: Any, t: Any, c: Any, *, conj: bool) -> None:
        """``C = H^H C`` (``conj``) or ``C = H C`` from the left, ``H = I - V T V^H``, ``V`` unit lower; the
        number of reflectors is ``T.shape[1]``."""

    @abc.abstractmethod
    def orgqr(self, a: Any, tau: Any, t: Any = None) -> None:
        """Overwrite a panel of reflectors with the first columns of the orthogonal factor they define; ``t``, where
        given, is their compact-WY factor ``T`` (:meth:`larft`'s), which a device may use instead of ``tau``."""

    @property
    def weight(self) -> float:
        """The device's BLAS-3 rate (all workers), the share it gets in capability-weighted layouts."""
        return self.capability["blas3"] * self.workers

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, workers={self.workers})"
