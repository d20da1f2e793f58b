"""How a batched kernel call runs on numba's threads: how many to start, how many matrices each buffer takes, and
whether this process can start them at all.

numba's parallel kernels run on its threading layer; a thread is worth starting only for enough matrices, and a
LAPACK loop runs each LAPACK call on one BLAS thread. On GNU OpenMP (numba's layer where TBB is not installed) the
threads do not survive ``fork``: :func:`unusable_after_fork` says so before a forked child starts them. The launches
here hand each kernel its buffer size and thread count and raise SciPy's ``check_finite`` error for the kernels that
check their input as they read it.
"""

from __future__ import annotations

import functools
import math
import os
import threading

import numba
import numpy as np

from ..blas_threads import one_thread_per_call
from ..machine import vector_bytes
from ..perf import model
from ._interleave import SMALL_ORDER, SPREAD_MAX_BYTES, lanes_for, small_order_lanes
from ._simd import WIDTH
from .compiling import lapack_routines, run

_forked_after_gnu_openmp = False

#: How many times numba's OpenMP threads (GNU's: numba's threading layer where TBB is not installed) spin waiting
#: for the next kernel before they sleep (libgomp's ``GOMP_SPINCOUNT``), where the environment does not set OpenMP's
#: waiting itself. libgomp's default kept a core spinning after every batched call long enough that a 12 ms LAPACK
#: call made right after it ran on the other core alone (17-21 ms): on a 2-core AMD EPYC, a batched Cholesky of 1,000
#: matrices of order 8 and then SciPy's Cholesky of order 300 took 7.8 ms a pair where the two apart took 2.0; 1.6
#: with this count. The price: a batched call after the process idled a few milliseconds wakes a sleeping thread
#: (0.4-0.9 ms more on that VM after 5 ms asleep; docs/batched.md, "Leaving the cores to BLAS").
OPENMP_SPIN_COUNT = 10_000

#: What OpenMP reads for how long its threads wait awake; where the environment has either, it is the user's choice.
_OPENMP_WAITING = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")

_pool_lock = threading.Lock()
_pool_started = False

#: Reads the calling thread's count (``numba.set_num_threads``'s, else the pool's size): numba's C function behind
#: ``get_num_threads`` once the pool started, without the two locks numba's Python function takes on every call
#: (1 µs alone, 4-5 µs of a batched ``lu_factor`` of 16 matrices, 52 µs in all, on a 2-core AMD EPYC VM); numba's
#: public function where a version of numba lacks it.
_thread_count = numba.get_num_threads


def pool_threads() -> int:
    """numba's thread count (its pool's size), the pool started first if this process has not started it: then
    with its OpenMP threads spinning :data:`OPENMP_SPIN_COUNT` times before they sleep (libgomp reads
    ``GOMP_SPINCOUNT`` as it loads; the variable is set for that moment only, so child processes do not inherit it).
    A pool started before hetlapack used it (by another numba user) keeps its settings."""
    global _pool_started
    if not _pool_started:
        with _pool_lock:
            if not _pool_started:
                _start_pool()
                _pool_started = True
    return _thread_count()


def _start_pool() -> None:
    """Start numba's pool (its first ``get_num_threads`` does) with :data:`OPENMP_SPIN_COUNT` set where the
    environment leaves OpenMP's waiting to its default, and take the pool's own reader of the thread count."""
    global _thread_count
    ours = not any(name in os.environ for name in _OPENMP_WAITING)
    if ours:
        os.environ["GOMP_SPINCOUNT"] = str(OPENMP_SPIN_COUNT)
    try:
        numba.get_num_threads()
    finally:
        if ours:
            os.environ.pop("GOMP_SPINCOUNT", None)
    from numba.np.ufunc import parallel  # noqa: PLC0415 - its reader is set once the pool started

    _thread_count = getattr(parallel, "_get_num_threads", numba.get_num_threads)


def _gnu_openmp_started() -> bool:
    """Whether numba's parallel kernels have run in this process on GNU OpenMP (its threading layer without TBB)."""
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run
        return False
    from numba.np.ufunc import omppool  # noqa: PLC0415 - present whenever the omp layer runs

    return layer == "omp" and getattr(omppool, "openmp_vendor", "GNU") == "GNU"


def _note_fork() -> None:
    global _forked_after_gnu_openmp
    _forked_after_gnu_openmp = _forked_after_gnu_openmp or _gnu_openmp_started()


os.register_at_fork(after_in_child=_note_fork)


def unusable_after_fork() -> str | None:
    """Why this process cannot run the compiled kernels: it was forked (``multiprocessing``'s default on Linux)
    after they ran on GNU OpenMP, whose threads do not survive ``fork``; numba terminates a child that starts them.
    ``None`` where they can run."""
    if not _forked_after_gnu_openmp:
        return None
    return ("this process was forked after numba's kernels ran on GNU OpenMP, which numba refuses to restart in a "
            "child (multiprocessing's 'spawn' and 'forkserver' start methods keep them)")


def threads_for(batch: int, lanes: int) -> int:
    """Threads worth starting: numba's pool size, but no more than there are chunks of ``lanes`` matrices."""
    return max(1, min(pool_threads(), math.ceil(batch / lanes)))


#: Matrices per thread below which :func:`~.kernels.plu` and the solves do not start another (a pass over memory
#: with two flops per element at most, not worth a thread).
MIN_BATCH_PER_THREAD = 256

#: Matrices of order 4 per thread below which a LAPACK loop does not start another: a LAPACK call takes 0.1-0.7 µs
#: at orders 2-4, so 16 of them take about what starting a thread does. A call's work grows as the order cubed, so
#: from order 8 two matrices are worth a thread each, and from order 16 one is (:func:`_lapack_threads`).
MIN_BATCH_PER_LAPACK_THREAD = 16


def _lapack_threads(batch: int, order: int) -> int:
    """Threads worth starting for a LAPACK loop over ``batch`` matrices of ``order``."""
    return threads_for(batch, max(1, MIN_BATCH_PER_LAPACK_THREAD * 4**3 // max(order, 1) ** 3))


#: Kernels whose buffers take ``WIDE_LANES`` matrices (the Householder ones, bound by loop overhead, not cache).
_WIDE = frozenset({"geqrf", "orgqr", "qr"})

#: Kernels with versions compiled for each square order up to ``SMALL_ORDER`` (in buffers of that many lanes).
_SMALL_ORDER = frozenset({"getrf", "getrf_replay", "potrf", "potrf_replay"})

#: Kernels with a version on SIMD vectors (``_simd``) for a buffer of one vector of matrices, by the dtype kinds it
#: takes, whose elements then lie next to one another, a cache line each (wider buffers run the loops over lanes):
#: such buffers are their default, and ``hetlapack calibrate``'s measured choice of lanes picks between the two
#: versions per order. The single-precision LU replay's choice is not calibrated: one vector against its loops over
#: 64 lanes (2-core AMD EPYC, AVX2, 2 threads, 10^4 matrices, ns a matrix): n = 5 112-130 / 104-117, 8 221-258 /
#: 185-216, 12 532-560 / 564-609, 16 713-861 / 847-887.
_VECTOR = {"getrf": "fc", "potrf": "fc", "getrf_replay": "f", "qr": "f"}

#: The order (of the smaller side) from which a kernel of :data:`_VECTOR` defaults to one vector of lanes; below it,
#: its loops over ``WIDE_LANES``. The fused QR's vectors won from order 12 on both kinds of machine (``kernels.qr``,
#: 2 threads, float64, 10^4 matrices, ns a matrix, 128 lanes / one vector): 2-core AMD EPYC, AVX2, n = 8 307 / 551,
#: 10 524 / 526, 11 555 / 537, 12 698 / 588, 16 1,210 / 889, 24 3,332 / 1,935, 32 7,796 / 4,815; 2-core AVX-512
#: machine n = 4 22 / 35, 8 89 / 104, 16 611 / 427, 32 4,223 / 2,873. Since the vectors ask for the next chunk a slice
#: a step (``_interleave.SPREAD_MAX_BYTES``) they win from order 8 where a vector is one AVX-512 register (AVX-512
#: AMD EPYC, 10^4 / 10^5 matrices, best of 20, two runs: n = 7 103-105 / 133-149 against 122-127 / 140-141, n = 8
#: 132-178 / 184-194 against 136-142 / 154-157, n = 9 230-240 / 205-228 against 173-183 / 150-182, n = 10 256-299
#: / 252-280 against 211-219 / 186-222); on AVX2 the order-8 vectors were 1.8x slower, and stay from order 12 there.
_VECTOR_FROM_ORDER = {"qr": 8 if vector_bytes() >= 64 else 12}


@functools.lru_cache(maxsize=1024)
def kernel_lanes(op: str, dtype: np.dtype, batch: int, m: int, n: int, lanes: int | None = None) -> int:
    """Matrices per buffer for ``op``'s kernel: :func:`~._interleave.lanes_for` with the kernel's kind, or with
    ``lanes`` (a measured choice) where given. Square orders up to ``SMALL_ORDER`` in a kernel with versions
    compiled for them take :func:`~._interleave.small_order_lanes`; larger matrices in a kernel with a version on
    SIMD vectors for their dtype take one vector of lanes (:data:`~._simd.WIDTH`) from the order
    :data:`_VECTOR_FROM_ORDER` gives, unless measured otherwise.
    Remembered per call's shape: worked out afresh, it took 4 µs of a batched call of 16 matrices."""
    if lanes is None and op in _SMALL_ORDER and m == n <= SMALL_ORDER:
        lanes = small_order_lanes(op, dtype.kind, m)
    elif lanes is None and dtype.kind in _VECTOR.get(op, "") and min(m, n) >= _VECTOR_FROM_ORDER.get(op, 0):
        lanes = WIDTH
    return lanes_for(m, n, dtype.itemsize, batch, wide=op in _WIDE, small_order=op in _SMALL_ORDER, lanes=lanes)


def spread_limit(op: str, chosen: int | None = None) -> int:
    """The largest buffer (bytes) on which the kernel of factorization ``op`` (``getrf``, ``geqrf``: the names
    calibration times them under) asks for the next chunk a slice a step (``_interleave.spreads_prefetch``):
    ``chosen`` where given, else as ``hetlapack calibrate`` timed it (:func:`~hetlapack.perf.model.
    batched_spread_bytes`), else ``_interleave.SPREAD_MAX_BYTES``."""
    if chosen is not None:
        return int(chosen)
    timed = model.batched_spread_bytes(op)
    return SPREAD_MAX_BYTES if timed is None else timed


def launch(op: str, dtype: np.dtype, batch: int, m: int, n: int, *arguments: object) -> None:
    """Run interleaved kernel ``op`` on ``batch`` matrices of ``m`` by ``n``: its ``arguments``, then the matrices
    per buffer and the threads worth starting for them."""
    lanes = kernel_lanes(op, dtype, batch, m, n)
    run(op, dtype, *arguments, lanes, threads_for(batch, lanes))


def launch_checked(op: str, check_finite: bool, dtype: np.dtype, batch: int, m: int, n: int,
                   *arguments: object, lanes: int | None = None) -> None:
    """:func:`launch` for a kernel that checks its input for infinities and NaNs as it reads it (as it gathers it, or
    for the LU kernels, where it reads the factors); ``lanes`` overrides the matrices per buffer
    (:func:`kernel_lanes`)."""
    lanes = kernel_lanes(op, dtype, batch, m, n, lanes)
    call_checked(op, dtype, check_finite, threads_for(batch, lanes), arguments, lanes)


def call_checked(op: str, dtype: np.dtype, check_finite: bool, threads: int, arrays: tuple, *rest: object) -> None:
    """Run kernel ``op`` on ``(*arrays, nonfinite, *rest, threads)`` with one ``nonfinite`` flag per thread (none
    when not asked), which a thread sets on meeting an infinity or NaN as it reads its input: SciPy's
    ``check_finite`` without a pass of its own over memory. Raises SciPy's ValueError after the kernel."""
    nonfinite = np.zeros(threads if check_finite else 0, dtype=np.uint8)
    run(op, dtype, *arrays, nonfinite, *rest, threads)
    if np.count_nonzero(nonfinite):
        raise ValueError("array must not contain infs or NaNs")


#: The LAPACK routine each loop calls per matrix (the cost model's name for it).
_LOOP_ROUTINE = {"potrf_each": "potrf", "getrf_each": "getrf", "qr_each": "geqrf", "geqp3_each": "geqp3",
                 "potrs_each": "potrs", "getrs_each": "getrs"}


def lapack_loop(op: str, dtype: np.dtype, batch: int, order: int, check_finite: bool, arrays: tuple,
                loop_threads: int | None = None, rest: tuple = ()) -> None:
    """Run the LAPACK loop ``op`` (``_lapack_each``) on ``batch`` matrices of ``order``: threads share the matrices,
    and each LAPACK call runs on one BLAS thread. Measured: a Cholesky of order 128 that threads inside the kernel's
    thread took 8 ms for 16 matrices instead of 1.5 (its threads and the kernel's spin for the same two cores).
    The threads are capped at ``loop_threads``, by default at the model's for the routine, dtype and order (1 where
    concurrent calls of OpenBLAS's routine ran slower than one thread's: :func:`~hetlapack.perf.model.
    lapack_loop_threads`). ``rest`` follows the routines among the kernel's arguments."""
    if loop_threads is None:
        loop_threads = model.lapack_loop_threads(_LOOP_ROUTINE[op], dtype, order)
    threads = _lapack_threads(batch, order)
    if loop_threads is not None:
        threads = min(threads, loop_threads)
    with one_thread_per_call():
        call_checked(op, dtype, check_finite, threads, arrays, *lapack_routines(op, dtype), *rest)


def replay_loop(op: str, dtype: np.dtype, batch: int, order: int, check_finite: bool, arrays: tuple,
                kernels: int, lanes: int = WIDTH) -> None:
    """Run ``op``, a replay of LAPACK's roundings that hands the matrices it leaves to LAPACK's routines
    (``_qr_replay``), with ``kernels``' roundings, ``lanes`` matrices at a time (``WIDTH`` on vectors, 1 one by
    one): threads as for a LAPACK loop of ``order``, not capped as OpenBLAS's routines are (the replay takes none of
    their locks)."""
    lapack_loop(op, dtype, batch, order, check_finite, arrays, pool_threads(), (kernels, lanes))

