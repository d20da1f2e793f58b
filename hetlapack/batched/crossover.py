"""What ``hetlapack calibrate`` times of the batched kernels on this machine: where the interleaved kernels stop
beating the LAPACK loop, and how many matrices per buffer they run fastest with.

The batched path runs a factorization of a stack of small matrices on one of two kernels (:mod:`.kernels`): the
interleaved one (our own arithmetic, SIMD across matrices) or the LAPACK loop (SciPy's LAPACK on each matrix). The
interleaved kernel wins at small orders, the loop at larger ones, and where they cross depends on the machine's
SIMD width, caches and LAPACK. :func:`measure` times both on the same stacks at each of ``ORDERS`` in float64 and
complex128, and returns for each factorization and dtype the loop's time over the interleaved kernel's per order
(above 1: interleaved wins), which the cost model turns into the order it switches at
(:func:`hetlapack.perf.model.interleaved_max_n`). :func:`measure_lanes` times the interleaved Cholesky and LU with
each of ``LANE_CHOICES`` matrices per buffer, whose best depends on the caches too
(:func:`hetlapack.perf.model.batched_lanes`), :func:`measure_spread` whether their buffers of one vector of
matrices ask for the next chunk a slice a step or all at once (:func:`hetlapack.perf.model.batched_spread_bytes`),
and :func:`measure_stream` up to which matrices they write their results with streaming stores
(:func:`hetlapack.perf.model.batched_stream_bytes`), :func:`measure_stream_stacks` from which stacks on
(:func:`hetlapack.perf.model.batched_stream_stack_bytes`).
:func:`measure_solves` times up to where the solves run in the interleaved layout rather than a matrix at a time
(:func:`hetlapack.perf.model.interleaved_solve_max_n`), and :func:`measure_loop_threads` each LAPACK loop on one
thread against every core: concurrent calls of some of OpenBLAS's routines run slower than one thread's
(:func:`hetlapack.perf.model.lapack_loop_threads`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..machine import last_level_cache
from ..perf.calibration import fastest_in_turn
from ..perf.model import SOLVES, batched_case
from . import kernels
from ._interleave import chunk_buffer
from ._simd import WIDTH
from .threads import kernel_lanes, pool_threads

#: Orders timed: from where the interleaved kernels are sure to win to past where the reference machine's loop won.
ORDERS = (4, 8, 16, 24, 32, 40, 48, 64)

#: Dtypes timed: the interleaved kernels run by default in double precision only (float64 and complex128).
DTYPES = (np.dtype(np.float64), np.dtype(np.complex128))

#: The (factorization, dtype) pairs timed, each a key of :func:`measure`'s result.
CASES = tuple(batched_case(op, dtype) for op in ("potrf", "getrf", "geqrf") for dtype in DTYPES)

#: Bytes of each timed stack (within the last-level cache of most machines' cores, so the two kernels' arithmetic,
#: not the memory both read at the same rate, decides), and the fewest matrices per stack (a few chunks per thread).
STACK_BYTES, MIN_BATCH = 8 << 20, 256


def _stack(op: str, n: int, dtype: np.dtype, rng: np.random.Generator, nbytes: int = STACK_BYTES) -> np.ndarray:
    """A stack of about ``nbytes`` of general (Hermitian positive definite for ``potrf``) matrices of order ``n``."""
    batch = max(MIN_BATCH, nbytes // (n * n * dtype.itemsize))
    a = rng.standard_normal((batch, n, n))
    if dtype.kind == "c":
        a = a + 1j * rng.standard_normal((batch, n, n))
    a = a.astype(dtype)
    if op == "potrf":
        a = a @ np.swapaxes(a, -1, -2).conj() / n + np.eye(n, dtype=dtype)
    return a


#: Each factorization on a stack, on the LAPACK loop (``True``, on at most ``threads`` threads where given) or the
#: interleaved kernel.
_CALLS: dict[str, Callable[[np.ndarray, bool, int | None], object]] = {
    "potrf": lambda a, lapack, threads=None: kernels.potrf(a, lower=True, clean=True, fortran=True, lapack=lapack,
                                                           loop_threads=threads),
    "getrf": lambda a, lapack, threads=None: kernels.getrf(a, fortran=True, lapack=lapack, loop_threads=threads),
    "geqrf": lambda a, lapack, threads=None: kernels.qr(a, a.shape[-1], a.shape[-1], fortran=True, lapack=lapack,
                                                        loop_threads=threads),
}


def _fastest_in_turn(calls: dict, repeats: int) -> dict:
    """The best seconds of each of ``calls`` (key -> a call without arguments): one untimed round (first touch of
    the kernels' buffers and outputs), then ``repeats`` rounds that call each in turn (:func:`fastest_in_turn`:
    this VM's hypervisor took up to a third of the CPU at moments)."""
    for call in calls.values():
        call()
    return fastest_in_turn(calls, repeats)


def _tabled(cases: tuple[str, ...], orders: tuple[int, ...], row: Callable[[str, int, np.dtype], list[float]],
            progress: Callable[[str], None] | None) -> dict[str, list[list[float]]]:
    """``{case: [row(op, order, dtype), ...]}`` for each of ``cases`` (``"getrf float64"``) and ``orders``;
    ``progress`` is told each case as it is done."""
    table = {}
    for case in cases:
        op, dtype = case.split()
        table[case] = [row(op, n, np.dtype(dtype)) for n in orders]
        if progress:
            progress(case)
    return table


def measure(repeats: int = 3, orders: tuple[int, ...] = ORDERS,
            progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"potrf float64": [[order, loop seconds / interleaved seconds], ...], ...}`` for each of ``CASES``: both
    kernels timed on the same stack in turn (:func:`_fastest_in_turn`); ``progress`` is told each case as it is
    done."""
    rng = np.random.default_rng(2)

    def ratio(op: str, n: int, dtype: np.dtype) -> list[float]:
        a = _stack(op, n, dtype, rng)
        seconds = _fastest_in_turn({lapack: lambda lapack=lapack: _CALLS[op](a, lapack) for lapack in (False, True)},
                                   repeats)
        return [n, seconds[True] / seconds[False]]

    return _tabled(CASES, orders, ratio, progress)


#: Matrices per buffer tried by :func:`measure_lanes` (multiples of 8, up to twice the buffer-size rule's 32 for
#: float64), and the orders it tries them at (past ``SMALL_ORDER``, whose kernels are compiled for their lanes: the
#: model keeps the rule below the smallest order timed).
LANE_CHOICES, LANE_ORDERS = (8, 16, 32, 64), (8, 12, 16, 24, 32, 48)

#: Bytes of each stack :func:`measure_lanes` times: past the last-level cache, as the stacks users factor, where
#: the buffer's size decides how the gather and scatter stream (in cache, the choices differ less: at order 16 on a
#: 2-core AMD EPYC with AVX-512, 16 matrices per buffer beat 32 by 4-13% on 8 MB, by 18-25% on 80-800 MB, while
#: a buffer beyond the L1 cache was copied element by element).
LANE_STACK_BYTES = 48 << 20

#: How much faster another choice must run than the buffer-size rule's before :func:`measure_lanes` records it: the
#: timing's own spread (at order 8 two runs picked 16 and 32 matrices per buffer, 49 against 58 ns a matrix later).
LANE_MARGIN = 1.05

#: The (factorization, dtype) pairs :func:`measure_lanes` times: QR's in double precision only, the one whose kernel
#: has a version on SIMD vectors (complex QR's loops over 128 lanes are bound by their overhead, not the cache).
LANE_CASES = (*(batched_case(op, dtype) for op in ("potrf", "getrf") for dtype in DTYPES),
              batched_case("geqrf", np.dtype(np.float64)))

#: Each interleaved factorization on a stack with ``lanes`` matrices per buffer (``qr``: Q and R, the kernel that
#: ``scipy.linalg.qr`` runs), and the kernel whose buffer-size rule it has.
_LANE_CALLS: dict[str, Callable[[np.ndarray, int], object]] = {
    "potrf": lambda a, lanes: kernels.potrf(a, lower=True, clean=True, fortran=True, lanes=lanes),
    "getrf": lambda a, lanes: kernels.getrf(a, fortran=True, lanes=lanes),
    "geqrf": lambda a, lanes: kernels.qr(a, a.shape[-1], a.shape[-1], fortran=True, lanes=lanes),
}
_LANE_KERNELS = {"potrf": "potrf", "getrf": "getrf", "geqrf": "qr"}


def measure_lanes(repeats: int = 3, orders: tuple[int, ...] = LANE_ORDERS, choices: tuple[int, ...] = LANE_CHOICES,
                  progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"potrf float64": [[order, fastest matrices per buffer], ...], ...}`` for each of ``LANE_CASES``: the
    interleaved kernel timed on one stack per order with each of ``choices`` and the buffer-size rule's choice in
    turn (:func:`_fastest_in_turn`); the rule's choice stands unless another ran ``LANE_MARGIN`` faster.
    ``progress`` is told each case as it is done."""
    rng = np.random.default_rng(3)

    def fastest(op: str, n: int, dtype: np.dtype) -> list[float]:
        a = _stack(op, n, dtype, rng, LANE_STACK_BYTES)
        rule = kernel_lanes(_LANE_KERNELS[op], a.dtype, len(a), n, n)
        seconds = _fastest_in_turn({lanes: lambda lanes=lanes: _LANE_CALLS[op](a, lanes)
                                    for lanes in sorted({*choices, rule})}, repeats)
        best = min(seconds, key=seconds.get)
        return [n, best if seconds[best] * LANE_MARGIN < seconds[rule] else rule]

    return _tabled(LANE_CASES, orders, fastest, progress)


#: The kernels :func:`measure_spread` times on one vector of float64 matrices.
SPREAD_CASES = tuple(batched_case(op, np.dtype(np.float64)) for op in ("getrf", "geqrf"))

#: The orders :func:`measure_spread` times them at: from order 8 (4 KiB buffers, where slices won on every machine
#: measured) past half a 32 KiB L1 cache (order 16, where the default stops asking a slice a step) to beyond any L1.
SPREAD_ORDERS = (8, 16, 24, 32, 48, 64)

#: Each kernel of :data:`SPREAD_CASES` on one vector of matrices per buffer, asking a slice a step on buffers of up
#: to ``spread_bytes``.
_SPREAD_CALLS: dict[str, Callable[[np.ndarray, int], object]] = {
    "getrf": lambda a, spread_bytes: kernels.getrf(a, fortran=True, lanes=WIDTH, spread_bytes=spread_bytes),
    "geqrf": lambda a, spread_bytes: kernels.qr(a, a.shape[-1], a.shape[-1], fortran=True, lanes=WIDTH,
                                                spread_bytes=spread_bytes),
}


def measure_spread(repeats: int = 3, orders: tuple[int, ...] = SPREAD_ORDERS,
                   progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"getrf float64": [[buffer bytes, time asking all at once over a slice a step], ...], ...}`` for each of
    ``SPREAD_CASES`` (above 1: slices win, as the other tables' ratios say the choice named wins): the kernel on one
    vector of matrices per buffer timed both ways on one stack per order, past the last-level cache
    (:data:`LANE_STACK_BYTES`), in turn (:func:`_fastest_in_turn`). On a 2-core Zen 5 EPYC (48 KiB L1) slices won
    from order 24 to 48 by 2-24%, against a loss at order 32 on a Zen 3 one (32 KiB L1). ``progress`` is told each
    case as it is done."""
    rng = np.random.default_rng(4)

    def ratio(op: str, n: int, dtype: np.dtype) -> list[float]:
        a = _stack(op, n, dtype, rng, LANE_STACK_BYTES)
        size = chunk_buffer(a, n, n, WIDTH).nbytes
        seconds = _fastest_in_turn({spread: lambda limit=size if spread else 0: _SPREAD_CALLS[op](a, limit)
                                    for spread in (False, True)}, repeats)
        return [size, seconds[False] / seconds[True]]

    return _tabled(SPREAD_CASES, orders, ratio, progress)


#: The kernels :func:`measure_stream` times on float64 stacks (``lu``: the LU kernel writing ``lu``'s three results
#: rather than ``getrf``'s packed one), and the orders: from matrices of 512 bytes (order 8) to 8 KiB (order 32),
#: where streaming won for some kernels and lost for others on one machine, and lost from order 16 on another.
STREAM_CASES = tuple(batched_case(op, np.dtype(np.float64)) for op in ("potrf", "getrf", "lu", "geqrf"))
STREAM_ORDERS = (8, 12, 16, 24, 32)

#: Each kernel of :data:`STREAM_CASES` writing its results with streaming stores or ordinary ones.
_STREAM_CALLS: dict[str, Callable[[np.ndarray, bool], object]] = {
    "potrf": lambda a, stream: kernels.potrf(a, lower=True, clean=True, stream=stream),
    "getrf": lambda a, stream: kernels.getrf(a, stream=stream),
    "lu": lambda a, stream: kernels.lu(a, permute_l=False, p_matrix=True, stream=stream),
    "geqrf": lambda a, stream: kernels.qr(a, a.shape[-1], a.shape[-1], stream=stream),
}


def _streaming_gain(op: str, a: np.ndarray, repeats: int) -> float:
    """``op``'s kernel of :data:`_STREAM_CALLS` on the stack ``a``: its time with ordinary stores over streaming ones,
    both timed in turn (:func:`_fastest_in_turn`)."""
    seconds = _fastest_in_turn({stream: functools.partial(_STREAM_CALLS[op], a, stream) for stream in (False, True)},
                               repeats)
    return seconds[False] / seconds[True]


def measure_stream(repeats: int = 3, orders: tuple[int, ...] = STREAM_ORDERS,
                   progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"getrf float64": [[matrix bytes, time with ordinary stores over streaming ones], ...], ...}`` for each of
    :data:`STREAM_CASES` (above 1: streaming wins): the kernel timed both ways on one stack per order past the
    last-level cache (:data:`LANE_STACK_BYTES`), in turn (:func:`_fastest_in_turn`). ``progress`` is told each case
    as it is done."""
    rng = np.random.default_rng(5)

    def ratio(op: str, n: int, dtype: np.dtype) -> list[float]:
        return [n * n * dtype.itemsize, _streaming_gain(op, _stack(op, n, dtype, rng, LANE_STACK_BYTES), repeats)]

    return _tabled(STREAM_CASES, orders, ratio, progress)


#: The kernels :func:`measure_stream_stacks` times, on float64 matrices of order ``STACK_ORDER`` (where streaming won
#: past the last-level cache on every machine measured), with the number of results each writes per matrix
#: (``lu``: P, L and U), and the shares of the last-level cache their stack and results fill together.
STACK_CASES = tuple(batched_case(op, np.dtype(np.float64)) for op in ("potrf", "lu"))
STACK_ORDER, STACK_RESULTS = 8, {"potrf": 1, "lu": 3}
STACK_SHARES = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)


def measure_stream_stacks(repeats: int = 3, shares: tuple[float, ...] = STACK_SHARES,
                          progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"lu float64": [[bytes of the stack and its results, time with ordinary stores over streaming ones], ...],
    ...}`` for each of :data:`STACK_CASES` (above 1: streaming wins), at each of ``shares`` of the last-level cache,
    both ways in turn (:func:`_fastest_in_turn`); ``{}`` where the system does not say the cache's size. What the
    system says is the whole cache, but a virtual machine shares it with others': on a 2-core Zen 4 EPYC VM (a 32 MB
    L3) the ``lu`` kernel wrote 10^4 matrices of order 8 (20 MB in all) with streaming stores in 99-102 ns a matrix
    against 127-150 with ordinary ones. ``progress`` is told each case as it is done."""
    cache = last_level_cache()
    if cache is None:
        return {}
    rng = np.random.default_rng(6)

    def ratio(op: str, share: float, dtype: np.dtype) -> list[float]:
        a = _stack(op, STACK_ORDER, dtype, rng, int(share * cache) // (1 + STACK_RESULTS[op]))
        return [a.nbytes * (1 + STACK_RESULTS[op]), _streaming_gain(op, a, repeats)]

    return _tabled(STACK_CASES, shares, ratio, progress)


#: The solves :func:`measure_solves` times, in every dtype (our own solves compute in each), and the orders: from
#: where the interleaved layout is sure to win to the largest order it runs at.
SOLVE_CASES = tuple(f"{op} {np.dtype(code).name}" for op in SOLVES for code in "fdFD")
SOLVE_ORDERS = (8, 12, 16, 24, 32, 48, 64)


def _solve(op: str, a: np.ndarray, rng: np.random.Generator, lapack: bool) -> Callable[..., object]:
    """The solve ``op`` (``potrs``, ``getrs``) on the factors of the stack ``a`` (Hermitian positive definite for
    ``potrs``), SciPy's Fortran-ordered ones, with one right-hand side each: a call that takes the solve's options,
    the factors and the solve by the LAPACK loop where ``lapack``."""
    b = rng.standard_normal((*a.shape[:-1], 1)).astype(a.dtype)
    if op == "potrs":
        c = kernels.potrf(a, lower=True, clean=True, fortran=True, lapack=lapack)[0]
        return lambda **options: kernels.potrs(c, b, lower=True, fortran=True, lapack=lapack, **options)
    lu, piv, _ = kernels.getrf(a, fortran=True, lapack=lapack)
    return lambda **options: kernels.getrs(lu, piv, b, trans=0, fortran=True, lapack=lapack, **options)


def measure_solves(repeats: int = 3, orders: tuple[int, ...] = SOLVE_ORDERS,
                   progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"getrs float32": [[order, the solve a matrix at a time's time over the interleaved one's], ...], ...}``
    for each of :data:`SOLVE_CASES` (above 1: the interleaved layout wins), on the same stack both ways, in turn
    (:func:`_fastest_in_turn`). On a 2-core Zen 5 EPYC the interleaved float64 solves won to order 48, against 8-12
    on the machine that set the defaults (:data:`~hetlapack.perf.model.INTERLEAVED_SOLVE_MAX_N`). ``progress`` is
    told each case as it is done."""
    rng = np.random.default_rng(5)

    def ratio(op: str, n: int, dtype: np.dtype) -> list[float]:
        solve = _solve(op, _stack("potrf" if op == "potrs" else "getrf", n, dtype, rng), rng, lapack=False)
        seconds = _fastest_in_turn({interleaved: lambda limit=n if interleaved else 0: solve(interleaved_max_n=limit)
                                    for interleaved in (False, True)}, repeats)
        return [n, seconds[False] / seconds[True]]

    return _tabled(SOLVE_CASES, orders, ratio, progress)


#: The LAPACK loops :func:`measure_loop_threads` times (every routine the batched path loops over), the dtypes (all
#: four: single precision runs the loop at every order, double past the interleaved kernels' crossover) and orders.
LOOP_OPS = ("potrf", "getrf", "geqrf", "geqp3", "potrs", "getrs")
LOOP_DTYPES = tuple(np.dtype(code) for code in "fdFD")
LOOP_CASES = tuple(f"{op} {dtype.name}" for op in LOOP_OPS for dtype in LOOP_DTYPES)
LOOP_ORDERS = (4, 8, 16, 32, 64)

#: Bytes of each stack :func:`measure_loop_threads` times, and its fewest and most matrices (enough for every thread
#: the loop starts; few enough that the smallest orders take milliseconds, not a second).
LOOP_STACK_BYTES, LOOP_MIN_BATCH, LOOP_MAX_BATCH = 4 << 20, 256, 20_000


def _loop_call(op: str, a: np.ndarray, rng: np.random.Generator) -> Callable[[int], object]:
    """``op``'s LAPACK loop on the stack ``a`` (on its factors for the solves, with one right-hand side each), run
    on at most the threads it is given."""
    if op in _CALLS:
        return lambda threads: _CALLS[op](a, True, threads)
    if op == "geqp3":
        return lambda threads: kernels.geqp3(a, a.shape[-1], a.shape[-1], loop_threads=threads)
    solve = _solve(op, a, rng, lapack=True)
    return lambda threads: solve(loop_threads=threads)


def measure_loop_threads(repeats: int = 3, orders: tuple[int, ...] = LOOP_ORDERS,
                         progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"getrf float32": [[order, every thread's seconds / one thread's], ...], ...}`` for each of ``LOOP_CASES``
    (above 1: one thread wins): the loop timed on one stack per order, on one thread and on as many as the batch is
    worth (up to numba's pool), in turn (:func:`_fastest_in_turn`). ``progress`` is told each case as it is done.

    OpenBLAS's ``potrf``, ``getrf`` and triangular solves take a buffer from a process-wide pool under a lock on
    every call (OpenBLAS issues #478, #5589), and on a 2-core AMD EPYC two threads calling them at once ran 1.3-3x
    slower than one at orders 2-4 (the solves to 8), while ``geqrf``, ``orgqr`` and ``geqp3`` ran 1.9-2.0x faster
    at every order."""
    rng = np.random.default_rng(4)
    every = pool_threads()

    def ratio(op: str, n: int, dtype: np.dtype) -> list[float]:
        nbytes = dtype.itemsize * n * n
        batch = min(max(LOOP_STACK_BYTES // nbytes, LOOP_MIN_BATCH), LOOP_MAX_BATCH)
        a = _stack("potrf" if op in ("potrf", "potrs") else "getrf", n, dtype, rng, batch * nbytes)
        call = _loop_call(op, a, rng)
        seconds = _fastest_in_turn({threads: lambda threads=threads: call(threads) for threads in {1, every}}, repeats)
        return [n, seconds[every] / seconds[1]]

    return _tabled(LOOP_CASES, orders, ratio, progress)
