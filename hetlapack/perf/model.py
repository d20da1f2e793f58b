"""The cost model that prices each path: flop counts, measured efficiencies and the host's GEMM rate.

Every heuristic of dispatch lives here as a named, documented value. Host efficiencies are fractions of the
host's GEMM rate, interpolated in log n: this machine's when ``hetlapack calibrate`` has timed them (the host path's
whole call on a C- or Fortran-ordered input, whichever the caller's is, else the LAPACK call alone), else the
reference machine's (2 cores, OpenBLAS, float64, quiet). The gpu path is priced from the accelerator's
calibrated library calls and link (:func:`predict_gpu`). The tile paths are priced by the simulator
(:func:`predict_tiled`), the same model ``hetlapack simulate`` reports.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..contract.scipy_rules import COMPILED_BATCH_LOOPS
from ..devices import capability, resolve
from ..machine import usable_cores
from .modeled import ModeledDevice, interpolate
from . import rates
from .rates import RUNTIME_TASK_OVERHEAD_S, flops, tile_size
from .simulator import simulate

#: Fraction of the host's DGEMM rate that one LAPACK call reaches, by matrix order (scipy 1.17 + OpenBLAS 0.3.31
#: Haswell kernels, 2 threads, quiet machine; DGEMM 80 GFLOP/s at n = 4000; benchmarks/test_tile_*.py).
HOST_EFFICIENCY: dict[str, tuple[tuple[int, float], ...]] = {
    "potrf": ((64, 0.05), (256, 0.25), (1000, 0.65), (2000, 0.80), (4000, 0.78), (8000, 0.75)),
    "getrf": ((64, 0.05), (256, 0.20), (1000, 0.42), (2000, 0.67), (4000, 0.80), (8000, 0.83)),
    "geqrf": ((64, 0.04), (256, 0.15), (1000, 0.44), (2000, 0.42), (4000, 0.41), (8000, 0.48)),
}

#: Seconds of Python overhead of the library's call on one matrix (SciPy's checks before its LAPACK call: 5-10 µs;
#: a stack's loop is priced by ``STACK_LOOP_S``).
HOST_CALL_OVERHEAD_S = 5e-6

#: Seconds hetlapack's batched path pays on every call whatever the stack: dispatch's plan, SciPy's rules, the
#: kernels' argument checks and their launch (33-76 µs on the same machine, stacks of 1-4 matrices of order 4, by
#: operation). Both these and the library's costs are this interpreter's work on this machine, so where they cross
#: (a stack of a few matrices against SciPy 1.17's loops, of tens to hundreds against 1.18's compiled ones) moves
#: little from one machine to another.
BATCHED_CALL_S = 4.5e-5

#: Host memory copy bandwidth, bytes/s (the roofline bound of the batched path; seed 004 §4.1).
MEMORY_BANDWIDTH_BPS = 25.4e9

#: How far the batched kernels run above the bandwidth bound (measured ns/matrix over bound, benchmarks/test_batched.py:
#: 2-4x for Cholesky and LU at n = 8..32, 5-20x for QR).
BATCHED_OVER_BOUND = {"potrf": 3.0, "getrf": 3.5, "geqrf": 8.0, "potrs": 3.0, "getrs": 3.5}

#: dtypes the interleaved batched factorizations compute in. In single precision their results would differ from
#: LAPACK's in the last bit (a different, not worse, rounding order), and SciPy's own batch tests demand agreement with
#: a loop of LAPACK calls to rtol=1e-7, below float32 rounding; so single-precision stacks run the LAPACK loop (SciPy's
#: results to the bit), or its replay, and no interleaved factorization is compiled for them: it would add a third to
#: the kernels' compile time for a path no call takes by default.
INTERLEAVED_DTYPES = frozenset(np.dtype(c) for c in "dD")

#: The solves, which compute in every precision: SciPy's own batch tests check a stack's solutions by their residuals
#: (``atol`` 1e-6 to 3e-6 in single precision), as the solutions of a float64 stack are held to its rounding, not to a
#: loop's bits; and the LAPACK loop, OpenBLAS's solve a call, took 85-225 ns a matrix at orders 2-8 in float32, 4-14x
#: the interleaved float64 solves and 0.2-0.5x torch (2-core Zen 5 EPYC, 10^4-10^5 matrices, one right-hand side).
SOLVES = ("potrs", "getrs")

#: The dtypes the solves compute in: every one LAPACK has.
SOLVE_DTYPES = frozenset(np.dtype(c) for c in "fdFD")


def interleaved_dtypes(op: str) -> frozenset[np.dtype]:
    """The dtypes the interleaved kernels of ``op`` compute in (:data:`INTERLEAVED_DTYPES`, :data:`SOLVES`)."""
    return SOLVE_DTYPES if op in SOLVES else INTERLEAVED_DTYPES

#: How much faster the model must predict the tile path than one LAPACK call before dispatch leaves LAPACK, where
#: ``hetlapack calibrate`` timed this machine's LAPACK calls (or the host path's whole call): the model's error. Where
#: it also timed the tile path's call (:func:`tile_call_factor`) the margin stays: the same call timed minutes apart
#: on a 2-core Xeon VM read 0.58-1.0x of the fastest (2026-12-03: the host path's Cholesky of order 4096 on a
#: C-ordered matrix, 39.0-66.9 GFLOP/s in three calibrations). Measured on a quiet machine
#: (2026-11-23, benchmarks/test_tile_*.py): measured times were 0.92-1.33x the tile predictions and 0.63-1.29x the
#: host predictions, and where the tile path was predicted 1.1-1.2x faster (Cholesky n = 3000-4000, LU at every
#: size) it measured 0.82-0.99x SciPy.
TILE_MARGIN = 1.25

#: The same margin where the host's LAPACK rate is the reference machine's (``HOST_EFFICIENCY``), not this one's:
#: the model's error with the host rate guessed. On a 2-core AMD EPYC (Haswell kernels, DGEMM 65-69 GFLOP/s;
#: two sessions of 2026-11-28, the forced paths timed side by side on C-ordered inputs with default flags), where
#: the tile path was priced 1.25-1.39x faster than one LAPACK call (LU at n = 1000) it measured 0.60-0.83x of it,
#: and where it was priced 1.58x faster or more (QR at n >= 2000) it measured 0.99-1.57x: the guessed host rate
#: was 0.63-1.46x the measured one. Calibrated, the host rate is measured and ``TILE_MARGIN`` applies.
UNCALIBRATED_TILE_MARGIN = 1.5

#: The same margin where ``hetlapack calibrate`` timed both calls dispatch compares, the host path's and the tile
#: path's on the CPU alone, in turn on the same matrices, each after the same SciPy call
#: (``calibration.call_rates``): the price is then their measured ratio, and its error the ratio's spread between
#: calibrations. Two calibrations minutes apart on a 2-core Xeon VM (C-ordered float64) read the tile path's rate
#: over the host path's as 0.94 and 1.04 for Cholesky at order 4000, 0.99 and 0.93 for LU, 1.24 and 1.23 for QR;
#: at 2000, 0.69 and 0.76, 0.61 and 0.72, 1.13 and 1.16. With ``TILE_MARGIN`` QR at 4000, 1.8x SciPy's call on the
#: tile path against 1.3x on the host path's, went to the host.
TIMED_TILE_MARGIN = 1.1

#: How much cheaper the model must price the two-level layout than HGDD before the hybrid path takes it: the
#: model's error between the two, which it cannot see (per-task hand-offs between many small tiles' threads).
#: Measured on CPU + 2 emulated accelerators (2026-11-23, benchmarks/test_hybrid_emulated.py, n = 2000 and 4000):
#: two-level over HGDD measured 1.19-1.85x while the model priced it 0.98-1.13x, an error of up to 1.9x.
TWO_LEVEL_MARGIN = 1.9

#: Largest matrix order for which the interleaved kernels beat the LAPACK loop, by operation, for real and for
#: complex dtypes, where ``hetlapack calibrate`` has not timed them on this machine (:func:`interleaved_max_n`).
#: Timed as calibration times them (``batched.crossover.measure``, 2 threads, quiet) on a 2-core Intel Xeon with
#: AVX-512 (2026-12-03, three runs; the kernels had not changed since stop 73), the loop's time over the kernel's:
#: float64 Cholesky, LU and QR 1.6-5.6x at every order to 64 (the largest timed); complex128 Cholesky and LU 1.2-5.3x
#: to 64, QR 1.03-1.13x at 24 and 0.86-1.26x at 32. On a 2-core AMD EPYC the kernels then won too where timed: LU
#: float64 2.1-2.5x at 48, complex128 1.1-1.25x at 32 and 64. (The table before, from the eighteenth session's
#: kernels, sent LU past 40 and complex Cholesky and LU past 24 to a loop 1.2-2.4x slower.) The interleaved solves
#: beat the loop at every order to 64 (they are not calibrated).
INTERLEAVED_MAX_N = {"potrf": (64, 64), "getrf": (64, 64), "geqrf": (64, 24), "potrs": (64, 64), "getrs": (64, 64)}

#: Largest matrix order for which the LAPACK loop was measured to beat SciPy's Python loop over a stack (64
#: matrices and more): the factorizations 1.3-4.8x faster at 96-384 in float32 and float64, pivoted QR 2.0-3.6x at
#: 128-384 (each thread runs one LAPACK call on one core, where SciPy runs one call on both;
#: benchmarks/test_batched.py -k large_orders); the solves, two flops per element read, lose from order 128
#: (0.5-0.9x).
LAPACK_LOOP_MAX_N = {"potrf": 384, "getrf": 384, "geqrf": 384, "geqp3": 384, "potrs": 64, "getrs": 64}

#: Largest order (``min(m, n)`` for LU, rows for QR) at which a single-precision LAPACK loop runs as a replay of
#: OpenBLAS's own roundings (``batched/_lu_replay``, ``_cholesky_replay``, ``_qr_replay``) where the process found it
#: gives the loop's bits: where OpenBLAS's ``getrf`` runs its unblocked ``getf2`` alone (its block size, half the
#: order rounded up to the GEMM kernel's four columns, is at most twice that) and ``potrf`` its ``potf2`` (up to half
#: its ``DTB_ENTRIES``, 32 on the kernels replayed), and ``geqrf`` (with ``orgqr``) its ``geqr2`` (to its block size,
#: 32). The QR replay, a matrix at a time, had beaten the loop only to order 16 (one thread, ns per matrix, loop /
#: replay: n = 16 3,786 / 3,258, 24 8,199 / 9,404); on SIMD vectors of matrices it does to 32 (2-core AMD EPYC,
#: AVX2, 2 threads, 4,000 matrices, full Q and R: n = 16 11,386 / 1,300, 24 13,305 / 2,699, 32 24,088 / 4,949).
#: LU past ``getf2``'s orders (:data:`GETF2_MAX_N`), to 64 rows and columns, replays ``getrf``'s blocked
#: levels on either kernel family (checked apart: ``replay.replayed_blocked_getrf_kernels``).
REPLAY_MAX_N = {"getrf": 64, "potrf": 16, "geqrf": 32}

#: The largest ``min(m, n)`` OpenBLAS's ``sgetrf`` factors by ``getf2`` alone (its block size, half the order rounded
#: up to its ``sgemm`` kernel's 4 columns, is at most 8), the order to which the LU replay runs unblocked; past it,
#: ``batched._lu_replay._replay_blocked``.
GETF2_MAX_N = 16

#: Largest order at which a LAPACK loop runs on one thread where ``hetlapack calibrate`` has not timed it
#: (:func:`lapack_loop_threads`; routines not named run on every core worth starting). OpenBLAS's ``potrf``,
#: ``getrf`` and triangular solves (``potrs``, ``getrs``) take a buffer from a process-wide pool under a lock on every
#: call (OpenBLAS issues #478, #5589). Measured on the reference machine (2-core AMD EPYC, AVX-512, OpenBLAS 0.3.30,
#: quiet, ns per matrix on one thread / on both): float32 ``getrf`` n = 2 57 / 95-182 (each call alone, no copies),
#: ``potrf`` n = 4 107 / 229, ``potrs`` n = 8 218-223 / 366-391; at n = 8 the factorizations ran 0.6-1.6x faster on
#: both from one run to the next, and ``geqrf``, ``orgqr`` and ``geqp3`` ran 1.9-2.0x faster on both at every order.
LOOP_ONE_THREAD_MAX_N = {"potrf": 4, "getrf": 4, "potrs": 8, "getrs": 8}

#: How much faster a LAPACK loop must have run on every core than on one thread, where ``hetlapack calibrate``
#: timed it, before dispatch starts more than one: one thread's time does not depend on where the threads run, every
#: core's does. On the reference machine (a VM) float32 ``getrf`` of order 8, each call alone, ran 1.17-1.56x faster
#: on both cores for a minute or so, then 0.58-0.70x for the next, alternating over ten minutes (16 of 40 samples
#: slow), while plain arithmetic on both cores ran 1.95-2.02x faster throughout (likely the lock's cache line
#: crossing between cores, at a cost that depends on where the hypervisor places them).
LOOP_THREADS_MARGIN = 1.25

#: Seconds a LAPACK loop pays per call whatever the batch (starting threads, capping BLAS at one thread per call:
#: 13 µs measured) and per matrix on top of LAPACK's own time (0.2-0.7 µs in all at orders 2-4, most of it LAPACK's).
LAPACK_LOOP_START_S = 1.5e-5
LAPACK_LOOP_CALL_S = 5e-7


#: What the library's own call on a stack pays beyond LAPACK's work, in seconds, by how it loops over the stack:
#: once per call, and per matrix. ``"python"``: SciPy's batch decorator (1.17's ``cholesky`` and ``qr``, every
#: version's ``lu_factor`` and solves); ``"cython"``: SciPy 1.17's ``lu`` (its ``lu_dispatcher``); ``"compiled"``:
#: SciPy 1.18's C loops (``cholesky``, ``cho_factor``, ``lu``, ``qr``) and NumPy's gufuncs, whose LAPACK calls cost
#: what the LAPACK loop's do. Measured on a 2-core AMD EPYC (Zen 3), float64, stacks of 1-10,000 matrices of order
#: 2-8 (2026-12-01): in Python 31-45 µs once (60 for ``qr``) and 8-11 µs a matrix; 1.17's ``lu`` 25 µs and 1.9;
#: 1.18's loops 6-19 µs once, and 0.2 (``cholesky``), 0.45 (``lu``) and 1.1-1.5 µs (``qr``) a matrix of order 4.
STACK_LOOP_S = {"python": (3e-5, 9e-6), "cython": (2.5e-5, 2e-6), "compiled": (1e-5, LAPACK_LOOP_CALL_S)}


def crossover_order(timed, at_least: float = 1.0) -> int:
    """From ``((order, the other choice's time over this one's), ...)`` by increasing order (the LAPACK loop's over
    the interleaved kernel's, or a loop on every core over one on one thread): the largest order up to which the
    ratio was ``at_least`` (this choice won) at every order timed (0 where it was not at the first)."""
    crossover = 0
    for order, other_over_this in timed:
        if other_over_this < at_least:
            break
        crossover = int(order)
    return crossover


def one_thread_order(timed) -> int:
    """From ``((order, a LAPACK loop's time on every core over one thread's), ...)`` by increasing order: the largest
    order up to which every core never ran ``LOOP_THREADS_MARGIN`` times faster than one thread."""
    return crossover_order(timed, 1 / LOOP_THREADS_MARGIN)


def _cpu_tables(key: str) -> dict[str, tuple[tuple[float, float], ...]]:
    """The host CPU's calibrated tables under ``key`` of its cache entry (``capability.TABLE_ATTRIBUTES``: ``"whole"``,
    ``"host_call"``, ``"tiles"``, ...), ``{name: ((x, rate), ...)}``, as a CPU device would hold them, read from the
    parsed cache with no device made: dispatch looks these up on every call, and making a device took 18 us alone
    and 90 us right after a BLAS call (2-core Xeon VM)."""
    return capability.load().get("cpu", {}).get(key, {})


def batched_case(op: str, dtype: np.dtype) -> str:
    """The key of ``op``'s crossover timing for ``dtype`` in a CPU's ``batched_rates`` (``"getrf float64"``): timed
    in float64 for real dtypes and complex128 for complex ones, where the interleaved kernels run by default."""
    return f"{op} {'complex128' if np.dtype(dtype).kind == 'c' else 'float64'}"


def _calibrated_crossover(op: str, dtype: np.dtype) -> int | None:
    """:func:`crossover_order` of what ``hetlapack calibrate`` timed on this machine for ``op`` in ``dtype``'s kind
    (:func:`batched_case`); ``None`` where it timed none."""
    timed = _cpu_tables("batched").get(batched_case(op, dtype))
    return crossover_order(timed) if timed else None


def batched_lanes(op: str, dtype: np.dtype, order: int) -> int | None:
    """The matrices per buffer ``op``'s interleaved kernel ran fastest with on stacks of ``order`` (its timed order
    nearest in ratio) in ``dtype``, as ``hetlapack calibrate`` timed them on this machine; ``None`` where it timed
    none, and below the smallest order it timed (single precision is not timed: its kernels do not run by
    default; the smallest orders run versions compiled for the rule's buffer). On a 2-core AMD EPYC with AVX-512,
    order 16 ran 1.1-1.25x faster with 16 than with the 32 the buffer-size rule (``batched._interleave.lanes_for``)
    gives while a buffer beyond the L1 cache was copied element by element; copied in blocks, the choices from 16
    to 64 ran within 10% of one another."""
    timed = _cpu_tables("lanes").get(f"{op} {np.dtype(dtype).name}")  # float64, complex128 timed
    if not timed or order < timed[0][0]:
        return None
    return int(min(timed, key=lambda row: abs(math.log(row[0] / order)))[1])


@functools.lru_cache(maxsize=16)
def batched_spread_bytes(op: str) -> int | None:
    """The largest buffer (bytes) on which ``op``'s interleaved kernel over one vector of float64 matrices asks for
    the next chunk a slice a step, as ``hetlapack calibrate`` timed it on this machine: :func:`crossover_order` of
    its times asking all at once over a slice a step, by buffer bytes (0: slices lost at the smallest buffer timed);
    ``None`` where it timed none. Remembered as :func:`_calibrated_potrf_block` is: read afresh at each batched call,
    the cache's lookup took 7.8 us, a fifth of ``lu_factor`` on 10^4 matrices of order 2 (2-core Zen 5 EPYC)."""
    timed = _cpu_tables("spread").get(f"{op} float64")
    return crossover_order(timed) if timed else None


@functools.lru_cache(maxsize=16)
def batched_stream_bytes(op: str) -> int | None:
    """The largest matrix (bytes) whose results ``op``'s interleaved kernel writes with streaming stores past the
    last-level cache, as ``hetlapack calibrate`` timed it on float64 stacks of this machine: :func:`crossover_order`
    of its times with ordinary stores over streaming ones, by matrix bytes (0: streaming lost at the smallest
    matrix timed); ``None`` where it timed none. Remembered as :func:`batched_spread_bytes` is."""
    timed = _cpu_tables("stream").get(f"{op} float64")
    return crossover_order(timed) if timed else None


#: How much faster streaming stores must have run on a stack for :func:`batched_stream_stack_bytes` to count it a
#: win: the timing's own spread (at 2 MB, where neither store reaches memory, the two ran within 4%).
STREAM_STACK_MARGIN = 1.05


def stream_stack_reach(tables: dict) -> int:
    """From ``{kernel: ((bytes of a stack and its results, time with ordinary stores over streaming ones), ...)}``
    by increasing bytes: for each kernel, the smallest stack from which streaming won by ``STREAM_STACK_MARGIN`` at
    every larger one timed (past the largest where it lost there), and the largest of those over the kernels."""
    def smallest_won(rows) -> int:
        reach = int(rows[-1][0]) + 1
        for nbytes, ordinary_over_streaming in reversed(rows):
            if ordinary_over_streaming < STREAM_STACK_MARGIN:
                break
            reach = int(nbytes)
        return reach

    return max(smallest_won(rows) for rows in tables.values())


@functools.lru_cache(maxsize=1)
def batched_stream_stack_bytes() -> int | None:
    """The fewest bytes of a stack and its results from which the interleaved kernels write the results with
    streaming stores, as ``hetlapack calibrate`` timed them on this machine (:func:`stream_stack_reach`); ``None``
    where it timed none (the last-level cache's size then decides, :func:`~hetlapack.batched.streaming.streams`).
    Remembered as :func:`batched_spread_bytes` is."""
    tables = _cpu_tables("stream_stack")
    return stream_stack_reach(tables) if tables else None


#: Largest order a solve (``potrs``, ``getrs``) runs in the interleaved chunk layout, by dtype (its character), where
#: ``hetlapack calibrate`` has not timed this machine's (:func:`interleaved_solve_max_n`); above it each matrix is
#: solved where it lies (``batched._solve``). Measured (2 threads, B = 20,000, one right-hand side, ns per matrix,
#: interleaved / one at a time), double precision on the machine of the sixteenth session: ``getrs`` float64 n = 8
#: 51 / 113, 12 170 / 126; complex128 n = 8 125 / 109, 16 615 / 248. ``potrs`` float64 n = 12 80 / 139, 16 192 /
#: 188; complex128 n = 8 86 / 125, 12 246 / 220. Single precision on a 2-core Zen 5 EPYC (AVX-512, stop 96):
#: float32 ``getrs`` n = 12 32 / 113, 16 77 / 154, 24 150 / 288, ``potrs`` n = 16 30 / 142, 24 122 / 224; complex64
#: ``getrs`` n = 8 48 / 99, 16 215 / 263, 20 349 / 339, ``potrs`` n = 8 40 / 107, 16 204 / 210, 20 312 / 275. There
#: double precision's interleaved solves won to order 48 (float64 ``getrs`` n = 32 460 / 516, 48 1,118 / 1,673, 64
#: 2,618 / 1,596): the crossover is the machine's, and single precision's default stops where the other machine's
#: double precision suggests it may, a float32 vector holding twice a float64 one's lanes.
INTERLEAVED_SOLVE_MAX_N = {"getrs": {"f": 16, "d": 8, "F": 8, "D": 8}, "potrs": {"f": 16, "d": 12, "F": 8, "D": 8}}


@functools.lru_cache(maxsize=16)
def interleaved_solve_max_n(op: str, dtype: np.dtype) -> int:
    """The largest order at which the solve ``op`` runs in the interleaved chunk layout in ``dtype`` rather than a
    matrix at a time: :func:`crossover_order` of what ``hetlapack calibrate`` timed on this machine (the one at a
    time solve's time over the interleaved one's, by order), else :data:`INTERLEAVED_SOLVE_MAX_N`. Remembered as
    :func:`batched_spread_bytes` is."""
    dtype = np.dtype(dtype)
    timed = _cpu_tables("solves").get(f"{op} {dtype.name}")
    return crossover_order(timed) if timed else INTERLEAVED_SOLVE_MAX_N[op][dtype.char]


def loop_one_thread_max_n(op: str, dtype: np.dtype) -> int:
    """The largest order up to which ``op``'s LAPACK loop in ``dtype`` runs on one thread (0: none): as ``hetlapack
    calibrate`` timed it on this machine (:func:`one_thread_order`), else ``LOOP_ONE_THREAD_MAX_N``."""
    timed = _cpu_tables("loop_threads").get(f"{op} {np.dtype(dtype).name}")
    return one_thread_order(timed) if timed else LOOP_ONE_THREAD_MAX_N.get(op, 0)


def lapack_loop_threads(op: str, dtype: np.dtype, order: int) -> int | None:
    """The most threads ``op``'s LAPACK loop runs on for matrices of ``order``: 1 up to
    :func:`loop_one_thread_max_n`, where concurrent calls ran slower than one thread's or not clearly faster; else
    ``None`` (as many as the batch is worth)."""
    return 1 if order <= loop_one_thread_max_n(op, dtype) else None


def loop_threads_basis(op: str, dtype: np.dtype) -> str:
    """Where :func:`loop_one_thread_max_n`'s order comes from."""
    timed = f"{op} {np.dtype(dtype).name}" in _cpu_tables("loop_threads")
    return "timed on this machine by `hetlapack calibrate`" if timed else "measured on the reference machine"


#: How much faster the host path's call must have run on one BLAS thread than on every core, where ``hetlapack
#: calibrate`` timed it (the cap's own cost included), before the host path runs it on one: the spread of the
#: timing, whose every-core side varied 1.2-2.6x from minute to minute on a 2-core AMD EPYC VM (one thread's by 1%).
HOST_ONE_THREAD_MARGIN = 1.1


def one_thread_orders(timed) -> tuple[int, int] | None:
    """From ``((order, a call's time on every core over one BLAS thread's), ...)`` by increasing order: the smallest
    and largest order of the first run of orders at which one thread ran :data:`HOST_ONE_THREAD_MARGIN` times faster
    (None where none did)."""
    run: list[int] = []
    for order, every_over_one in timed:
        if every_over_one >= HOST_ONE_THREAD_MARGIN:
            run.append(int(order))
        elif run:
            break
    return (run[0], run[-1]) if run else None


@functools.lru_cache(maxsize=1024)
def host_one_thread_orders(op: str, dtype: np.dtype, forms_q: bool = False,
                           library: str = "scipy") -> tuple[int, int] | None:
    """The orders (smallest, largest) at which the host path's call of ``library``'s function (``"scipy"`` or
    ``"numpy"``) for ``op`` (a QR that ``forms_q`` or not) in ``dtype`` runs on one BLAS thread: where ``hetlapack
    calibrate`` timed that call on this machine faster so (:func:`one_thread_orders`); None elsewhere and without a
    calibration (every core, as the library runs it). Remembered for the process's life (until
    ``dispatch.choose.forget_decisions``), as the host Cholesky's blocks."""
    timed = _cpu_tables("host_threads").get(rates.host_threads_table(rates.call_name(op, forms_q), dtype, library))
    return one_thread_orders(timed) if timed else None


def host_blas_threads(op: str, dtype: np.dtype, order: int, forms_q: bool = False,
                      library: str = "scipy") -> int | None:
    """The most BLAS threads the host path's call of ``library``'s function for ``op`` on a matrix of ``order`` in
    ``dtype`` runs on: 1 within :func:`host_one_thread_orders`, else None (as many as BLAS takes)."""
    orders = host_one_thread_orders(op, dtype, forms_q, library)
    return 1 if orders is not None and orders[0] <= order <= orders[1] else None


def interleaved_max_n(op: str, dtype: np.dtype) -> int:
    """The largest order at which ``op``'s interleaved kernel beats the LAPACK loop in ``dtype`` (0: it has none):
    as ``hetlapack calibrate`` measured it on this machine, else :data:`INTERLEAVED_MAX_N`."""
    if op not in INTERLEAVED_MAX_N:
        return 0
    calibrated = _calibrated_crossover(op, dtype)
    if calibrated is not None:
        return calibrated
    real, complex_ = INTERLEAVED_MAX_N[op]
    return complex_ if np.dtype(dtype).kind == "c" else real


def interleaved_basis(op: str, dtype: np.dtype) -> str:
    """Where :func:`interleaved_max_n`'s order comes from."""
    calibrated = _calibrated_crossover(op, dtype) is not None
    return ("timed on this machine by `hetlapack calibrate`" if calibrated
            else "the default, timed on a 2-core AVX-512 Xeon; `hetlapack calibrate` times this machine's")


#: How a library whose function was called is spelled.
LIBRARY_NAMES = {"scipy": "SciPy", "numpy": "NumPy"}


def batched_kernels(op: str, order: int, dtype: np.dtype, library: str, forced_path: bool = False,
                    forced: str | None = None) -> tuple[str | None, str | None]:
    """The kernels a batched plan runs for a stack of order-``order`` matrices, and ``None``; or ``None`` and why
    SciPy's (or NumPy's, as ``library`` says) own function should run instead. The kernels are ``"interleaved"``
    (our own arithmetic, SIMD across matrices) or ``"lapack"`` (SciPy's LAPACK on each matrix from compiled code,
    its results to the bit). The ``forced`` kernels run where ``op`` has them in ``dtype``; a ``forced_path`` runs the
    faster kernel at this order where none would run unforced."""
    has = {"interleaved": op in INTERLEAVED_MAX_N and np.dtype(dtype) in interleaved_dtypes(op),
           "lapack": op in LAPACK_LOOP_MAX_N}
    if forced is not None and has[forced]:
        return forced, None
    interleaved = order <= interleaved_max_n(op, dtype)
    if interleaved and has["interleaved"]:
        return "interleaved", None
    loop_max = LAPACK_LOOP_MAX_N.get(op, 0)
    if order <= loop_max:
        return "lapack", None
    if forced_path:
        return ("interleaved" if has["interleaved"] and (interleaved or not has["lapack"]) else "lapack"), None
    return None, f"matrices of order {order} > {loop_max}: {LIBRARY_NAMES[library]}'s call per matrix wins (measured)"


#: How ``explain`` names the memory orders the paths' calls were timed on.
_ORDER_NAMES = {"C": "C-ordered (or strided)", "F": "Fortran-ordered"}


def _host_rates(op: str, memory_order: str | None,
                forms_q: bool = False) -> tuple[tuple[tuple[float, float], ...], str]:
    """This machine's timed rates of the host path's call for ``op`` (a QR that ``forms_q`` or not) at the orders
    the model uses, and what was timed: the host path's whole call (SciPy's function as hetlapack makes it) on an
    input of ``memory_order`` (``rates.MEMORY_ORDERS``; None: not a SciPy call) where ``hetlapack calibrate`` timed
    it (:func:`_timed_call`), else the LAPACK call alone; empty where neither was timed."""
    def usable(rows: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
        return tuple((n, rate) for n, rate in rows if n >= HOST_EFFICIENCY["getrf"][0][0])

    if memory_order is not None:
        call, timed = _timed_call("host_call", op, memory_order, forms_q)
        if usable(timed):
            return usable(timed), (f"the host path's SciPy call{_FORMING_Q[call != op]} on "
                                   f"{_ORDER_NAMES[memory_order]} matrices")
    return usable(_cpu_tables("whole").get(op, ())), "this machine's LAPACK calls"


def _timed_call(table: str, op: str, memory_order: str,
                forms_q: bool) -> tuple[str, tuple[tuple[float, float], ...]]:
    """The call (``rates.call_name``) whose timing in the CPU's ``table`` (``"host_call"``, ``"tile_call"``) prices
    ``op`` on an input of ``memory_order``, and its rows: a QR that ``forms_q`` by its own call's where calibration
    timed it (a cache calibrated before it was timed: by ``mode='r'``'s), anything else by ``op``'s."""
    tables = _cpu_tables(table)
    for call in dict.fromkeys((rates.call_name(op, forms_q), op)):
        if timed := tables.get(rates.call_table(call, memory_order), ()):
            return call, timed
    return op, ()


#: How :func:`host_rate_basis` and :func:`tile_call_basis` name a call timed with Q formed or without.
_FORMING_Q = {True: " forming Q (its rate at geqrf's flops)", False: ""}


def host_potrf_block(dtype: np.dtype, n: int, uplo: str, library: str = "scipy") -> int | None:
    """The block of LAPACK's right-looking Cholesky the host path of ``library``'s function (``"scipy"`` or
    ``"numpy"``) factors the ``uplo`` triangle (as LAPACK names it) of an order-``n`` matrix of ``dtype`` with on
    that library's BLAS, where ``hetlapack calibrate`` timed it faster than that BLAS's ``potrf``
    (:func:`rates.potrf_block`; during a calibration, the blocks it has just timed:
    :func:`rates.timing_potrf_blocks`); else None, ``potrf`` itself (:func:`_cpu_tables`: at order 500 making a
    device was 6% of the call). None for SciPy from 1.18, whose compiled call the variant's whole call did not beat
    (a cache calibrated under it may still hold its tables)."""
    if n < rates.POTRF_BLOCKS_MIN_ORDER or (library == "scipy" and COMPILED_BATCH_LOOPS):
        return None
    tables = rates.potrf_blocks_timing()
    if tables is None:
        return _calibrated_potrf_block(np.dtype(dtype), n, uplo, library)
    return _potrf_block_in(tables, dtype, n, uplo, library)


def _potrf_block_in(tables: dict, dtype: np.dtype, n: int, uplo: str, library: str) -> int | None:
    """:func:`host_potrf_block` from ``tables`` (a CPU entry's ``"potrf_blocks"``)."""
    return rates.potrf_block(n, tuple(map(tuple, tables.get(rates.potrf_blocks_table(dtype, uplo, library), ()))))


@functools.lru_cache(maxsize=1024)
def _calibrated_potrf_block(dtype: np.dtype, n: int, uplo: str, library: str) -> int | None:
    """:func:`host_potrf_block` from the cached calibration, remembered as dispatch remembers its plans, for the
    process's life (until ``dispatch.choose.forget_decisions``; a calibration runs in a process of its own): the
    cache's lookup (its path built, the file's ``stat``) took 7 us alone but 83-114 us right after a multi-threaded
    ``potrf``, 0.14 ms of a 4.2 ms ``cho_factor`` of order 1000 (2-core AMD EPYC, Zen 5: median of 100 shuffled
    rounds, 4.22 against 4.08 ms without it)."""
    return _potrf_block_in(_cpu_tables("potrf_blocks"), dtype, n, uplo, library)


def forget_calibrated_lookups() -> None:
    """Forget the blocks :func:`host_potrf_block`, the orders :func:`host_one_thread_orders`, the buffers
    :func:`batched_spread_bytes`, the matrices :func:`batched_stream_bytes`, the stacks
    :func:`batched_stream_stack_bytes` and the orders :func:`interleaved_solve_max_n` read from the cache, so that
    the next calls read it afresh."""
    _calibrated_potrf_block.cache_clear()
    host_one_thread_orders.cache_clear()
    batched_spread_bytes.cache_clear()
    batched_stream_bytes.cache_clear()
    batched_stream_stack_bytes.cache_clear()
    interleaved_solve_max_n.cache_clear()


def host_calibrated(op: str, memory_order: str | None = None) -> bool:
    """Whether ``hetlapack calibrate`` timed this machine's call for ``op`` at an order the model uses: the host
    path's call on ``memory_order``, or the LAPACK call (:func:`_host_rates`)."""
    return bool(_host_rates(op, memory_order)[0])


def tile_margin(op: str, memory_order: str | None = None, tile_timed: bool = False) -> float:
    """How much faster the tile path must be priced than the host's call before dispatch takes it: the model's
    error, larger where the host's rate for ``op`` is the reference machine's guess, smaller where the tile path's
    price is its own call timed in turn with the host path's (``tile_timed``: :func:`tile_call_factor` priced it)."""
    if not host_calibrated(op, memory_order):
        return UNCALIBRATED_TILE_MARGIN
    return TIMED_TILE_MARGIN if tile_timed else TILE_MARGIN


def host_rate_basis(op: str, order: int, dtype: np.dtype, memory_order: str | None = None,
                    forms_q: bool = False) -> str:
    """The host rate :func:`predict_host` prices the call of ``op`` (a QR that ``forms_q`` or not) at, and where it
    came from."""
    gemm = rates.host_gemm_gflops(np.dtype(dtype).char)
    efficiency = host_efficiency(op, order, memory_order, forms_q)
    timed, what = _host_rates(op, memory_order, forms_q)
    source = (f"{what}, timed by `hetlapack calibrate`" if timed else
              "the reference machine's table (2 cores, OpenBLAS); run `hetlapack calibrate` to time this machine's")
    return (f"{gemm * efficiency:.1f} GFLOP/s: {efficiency:.2f} of the {gemm:.1f} GFLOP/s GEMM measured in this "
            f"process, the fraction from {source}")


def host_potrf_basis(dtype: np.dtype, order: int, library: str = "scipy") -> str:
    """What the host path's call of ``library``'s Cholesky on one matrix runs, where it is not the BLAS's ``potrf``
    on either triangle LAPACK may factor (:func:`host_potrf_block`; which one depends on the call's flag and the
    input's layout); else empty."""
    blocks = {uplo: host_potrf_block(dtype, order, uplo, library) for uplo in "LU"}
    if not any(blocks.values()):
        return ""
    kernels = ", ".join(f"{_TRIANGLES[uplo]} potrf" if block is None else f"{_TRIANGLES[uplo]} at block {block}"
                        for uplo, block in blocks.items())
    return (f"; its Cholesky LAPACK's right-looking variant on {_LIBRARY_NAMES[library]}'s BLAS where `hetlapack "
            f"calibrate` timed it faster than that BLAS's potrf ({kernels})")


_TRIANGLES = {"L": "a lower triangle", "U": "an upper one"}


_LIBRARY_NAMES = {"scipy": "SciPy", "numpy": "NumPy"}


def host_efficiency(op: str, order: int, memory_order: str | None = None, forms_q: bool = False) -> float:
    """The fraction of the host's GEMM rate the host path's call of ``op`` (a QR that ``forms_q`` or not) reaches at
    this order: this machine's, where ``hetlapack calibrate`` timed it (:func:`_host_rates`: the host path's call on
    an input of ``memory_order``, its conversion included, else the LAPACK call; their float64 rate over the GEMM
    rate, a QR forming Q at ``geqrf``'s flops over its time), else
    the reference machine's LAPACK call (``HOST_EFFICIENCY``). Many cores can leave LAPACK far below their GEMM
    rate: on 16 Xeon cores, SciPy's Cholesky at n = 4000 ran at 0.22 of it, against 0.78 on the reference machine's 2.

    Timings below the reference table's smallest order (64) are not used: they say nothing about larger matrices,
    and the table is flat there, so it cannot carry them up. Beyond the largest order timed, the efficiency follows
    the reference curve, scaled to agree there (capped at the GEMM rate, or at the last timed efficiency if that is
    higher). Held flat instead, a calibration at small orders would price every larger call at a small one's rate."""
    reference = HOST_EFFICIENCY.get(op, HOST_EFFICIENCY["getrf"])
    measured = _host_rates(op, memory_order, forms_q)[0]
    if not measured:
        return interpolate(reference, order)
    largest = measured[-1][0]
    efficiency = interpolate(measured, min(order, largest)) / rates.host_gemm_gflops("d")
    if order <= largest:
        return efficiency
    scaled = efficiency * interpolate(reference, order) / interpolate(reference, largest)
    return min(scaled, max(efficiency, 1.0))


def predict_host(op: str, m: int, n: int, dtype: np.dtype, memory_order: str | None = None,
                 forms_q: bool = False) -> float:
    """Seconds for the library's call on one matrix: a LAPACK call from Python, priced as the host path's SciPy
    call on an input of ``memory_order`` (a QR that ``forms_q`` or not) where that was timed (None: a call that is
    not SciPy's)."""
    return _lapack_seconds(op, m, n, dtype, memory_order, forms_q) + HOST_CALL_OVERHEAD_S


def predict_host_stack(op: str, m: int, n: int, batch: int, dtype: np.dtype, loop: str) -> float:
    """Seconds for the library's own call on a stack of ``batch`` matrices: its fixed cost and a LAPACK call per
    matrix, made by a ``loop`` of the kind :data:`STACK_LOOP_S` prices."""
    start, per_call = STACK_LOOP_S[loop]
    return start + batch * (_lapack_seconds(op, m, n, dtype) + per_call)


def _lapack_seconds(op: str, m: int, n: int, dtype: np.dtype, memory_order: str | None = None,
                    forms_q: bool = False) -> float:
    """LAPACK's own time for ``op`` on one ``m x n`` matrix, at this machine's rate for the order (that of the host
    path's SciPy call on an input of ``memory_order``, a QR that ``forms_q`` or not, where given and timed)."""
    eff = host_efficiency(op, max(min(m, n), 1), memory_order, forms_q)
    rate = rates.host_gemm_gflops(dtype.char) * 1e9
    return flops(op, m, n, dtype.kind == "c") / (rate * eff)


#: Most tiles along a matrix's longer side that pricing simulates. The simulation's tasks grow as the cube of the
#: tiles (Cholesky at n = 64000 priced for over 100 s and 1.2 GB); a larger matrix is priced as the same matrix with
#: this many tiles, its time scaled by the flop ratio (the tile algorithms run at their asymptotic rate there), so
#: pricing costs the same at any n.
PRICED_TILES = 16


def default_tile(op: str, order: int, devices: tuple | None = None) -> int:
    """The tile order the tile path runs ``op`` at on an order-``order`` matrix over ``devices`` (names or Device
    objects; default the host CPU): ``rates.tile_size``'s, from the tiles ``hetlapack calibrate`` timed on this
    machine (the CPU's ``tile_orders``) on the CPU alone, from its table otherwise."""
    return tile_size(op, order, _timed_tiles(op, devices))


def tile_basis(op: str, order: int, devices: tuple | None = None) -> str:
    """Where :func:`default_tile`'s tile for ``op`` at this order over ``devices`` came from."""
    if not cpu_alone(devices):
        return "the default table: `hetlapack calibrate` times this machine's tiles for the CPU alone"
    timed = _timed_tiles(op, devices)
    row = rates.timed_tile_row(order, timed)
    if row is not None:
        return f"this machine's fastest at order {int(row[0])}, timed by `hetlapack calibrate`"
    if timed:
        return f"the default table: `hetlapack calibrate` timed this machine's from order {int(timed[0][0])}"
    return "the default table: `hetlapack calibrate` times this machine's"


def cpu_alone(devices: tuple | None) -> bool:
    """Whether ``devices`` (names; None: the default) are the host CPU alone: where ``hetlapack calibrate`` timed
    the tile path's calls and tiles, so where those timings apply."""
    return tuple(devices or ("cpu",)) == ("cpu",)


def _timed_tiles(op: str, devices: tuple | None) -> tuple[tuple[float, float], ...]:
    """The tiles ``hetlapack calibrate`` timed for ``op`` (the CPU's ``tile_orders``) where ``devices`` are the CPU
    alone, else none."""
    return _cpu_tables("tiles").get(op, ()) if cpu_alone(devices) else ()


def predict_tiled(op: str, m: int, n: int, dtype: np.dtype, tile: int | None = None,
                  devices: tuple | None = None, path: str = "hybrid", layout: str = "hgdd") -> float:
    """Seconds for the tile path on ``devices`` (names or Device objects; default the host CPU) over ``layout``
    (``"hgdd"`` or ``"two-level"``), or with ``path="gpu"`` for the whole factorization on one accelerator: the
    simulator runs the tile algorithm over models of those devices (their calibrated rates, links and memory
    capacities), plus the runtime's measured per-task and per-call overheads. ``hetlapack.perf.simulator.simulate``
    gives the same number."""
    tile = tile or default_tile(op, min(m, n), devices)
    dtype = np.dtype(dtype)
    shrink = max(m, n) / (PRICED_TILES * tile)
    if shrink <= 1:
        return _predict_tiled(op, m, n, dtype.char, tile, tuple(devices or ("cpu",)), path, layout)
    small_m, small_n = max(1, round(m / shrink)), max(1, round(n / shrink))
    seconds = _predict_tiled(op, small_m, small_n, dtype.char, tile, tuple(devices or ("cpu",)), path, layout)
    return seconds * flops(op, m, n) / flops(op, small_m, small_n)


def tile_call_factor(op: str, order: int, memory_order: str | None, forms_q: bool = False) -> float | None:
    """How many times the simulator's price this machine's tile path took on the CPU alone at its default tile,
    for ``op`` at this order: its call on an input of ``memory_order`` (:func:`_timed_call`'s, for a QR that
    ``forms_q`` or not: the simulator prices ``geqrf`` alone, so forming Q is in the factor) as ``hetlapack
    calibrate`` timed it (the runtime's start, copy-in tasks, the finiteness check and the threads' contention
    included, which the simulator does not see: at order 1000 the call took 1.3-2.6x its price on a 2-core Xeon VM)
    over the simulator's price of it, interpolated in log n between the orders timed; None where it was not timed.

    Beyond the largest order timed, the factor keeps the tile path's price in the ratio to the host path's that was
    timed there (:func:`_host_growth_over_simulated`): the two prices are carried up by different models, the host's
    by the reference machine's curve and the tiles' by the simulator, and where they part, a call the two paths
    tied on at every order timed changed path on the models alone (2-core Xeon VM, SciPy 1.18.1, Fortran-ordered
    float64, timed up to 4000, level there: ``cho_factor`` of order 8000 went to the tiles, priced 1.17x faster,
    and took 1.78 s against SciPy's 1.63)."""
    if memory_order is None:
        return None
    timed = _timed_call("tile_call", op, memory_order, forms_q)[1]
    if not timed:
        return None
    factors = _tile_call_factors(op, timed, _cpu_tables("tiles").get(op, ()))
    largest = int(factors[-1][0])
    if order <= largest:
        return interpolate(factors, order)
    return factors[-1][1] * _host_growth_over_simulated(op, largest, order, memory_order, forms_q)


def _host_growth_over_simulated(op: str, timed_order: int, order: int, memory_order: str, forms_q: bool) -> float:
    """How many times more the host path's price grows from ``timed_order`` to ``order`` than the simulator's price
    of the tile path on the CPU alone (float64, square)."""
    dtype = np.dtype("d")
    host = (_lapack_seconds(op, order, order, dtype, memory_order, forms_q)
            / _lapack_seconds(op, timed_order, timed_order, dtype, memory_order, forms_q))
    simulated = predict_tiled(op, order, order, dtype) / predict_tiled(op, timed_order, timed_order, dtype)
    return host / simulated


@functools.lru_cache(maxsize=64)
def _tile_call_factors(op: str, timed: tuple[tuple[float, float], ...],
                       tiles: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """``(order, timed seconds over simulated seconds)`` for each order of a timed tile-call table, each call
    simulated at the default tile it ran at (``tiles``, the calibrated default tiles, is there to key the cache)."""
    return tuple((n, flops(op, int(n), int(n)) / (rate * 1e9) / predict_tiled(op, int(n), int(n), np.dtype("d")))
                 for n, rate in timed)


def tile_call_basis(factor: float, op: str, memory_order: str, forms_q: bool = False) -> str:
    """What the tile path on the CPU alone was priced from: the simulator's price times :func:`tile_call_factor`'s
    ``factor`` for ``op`` (a QR that ``forms_q`` or not) on an input of ``memory_order``."""
    call = _timed_call("tile_call", op, memory_order, forms_q)[0]
    return (f"the simulator's price x {factor:.2f}: its call{_FORMING_Q[call != op]} on the CPU alone on "
            f"{_ORDER_NAMES[memory_order]} matrices, timed by `hetlapack calibrate`, over the simulator's price of "
            "that call")


def predict_gpu(op: str, m: int, n: int, dtype: np.dtype, device, tile: int | None = None) -> float:
    """Seconds for the gpu path on ``device`` (a name or Device object): the matrix up and its factors down over the
    calibrated link, and the device's library call at the rate ``hetlapack calibrate`` timed for whole matrices of
    this order (float64's, complex counted in real flops; flat beyond the orders timed). Without that measurement,
    the simulator's tile model of the device (:func:`predict_tiled`), which on an H100 priced QR at 4.5 s where it
    took 0.76 s."""
    accelerator = resolve((device,))[0]
    measured = accelerator.whole_rates.get(op)
    if not measured:
        return predict_tiled(op, m, n, dtype, tile, (device,), path="gpu")
    dtype = np.dtype(dtype)
    link = 2 * modeled((accelerator,))[0].transfer_seconds(m * n * dtype.itemsize)
    return link + flops(op, m, n, dtype.kind == "c") / (interpolate(measured, max(min(m, n), 1)) * 1e9)


def unmeasured_accelerators(devices: tuple) -> list[str]:
    """The names of the accelerators among ``devices`` (names or Device objects) that compute off the host's cores
    and whose link ``hetlapack calibrate`` has not measured. Their model would be guesses: a free link and default
    kernel rates (on an H100 beside 16 cores, uncalibrated, dispatch sent QR at n = 4000 to the hybrid path, 3.5x
    slower than SciPy). Accelerators that compute on the host's cores (emulated ones) are priced from the host."""
    return [d.name for d in resolve(devices) if not d.host_compute and "bandwidth_gbs" not in d.capability]


def modeled(devices: tuple) -> list[ModeledDevice]:
    """Models of the devices a plan names (names or Device objects), with the runtime's per-task overhead."""
    return [ModeledDevice.of(d, task_overhead_s=RUNTIME_TASK_OVERHEAD_S) for d in resolve(devices)]


@functools.lru_cache(maxsize=1024)
def _predict_tiled(op: str, m: int, n: int, dtype_char: str, tile: int, devices: tuple, path: str,
                   layout: str) -> float:
    return simulate(op, n, modeled(devices), m=m, dtype=dtype_char, tile=tile, path=path, layout=layout).seconds


def predict_batched(op: str, m: int, n: int, batch: int, dtype: np.dtype, kernels: str) -> float:
    """Seconds for the batched path: for the interleaved kernels, the memory-bandwidth roofline (read + write every
    matrix) times the measured distance from it; for the LAPACK loop, the host's LAPACK calls without Python's cost
    per call, shared by the cores (one, where the loop runs on one thread: :func:`lapack_loop_threads`), plus the
    loop's fixed cost."""
    if kernels == "lapack":
        per_call = _lapack_seconds(op, m, n, dtype) + LAPACK_LOOP_CALL_S
        cores = lapack_loop_threads(op, dtype, max(m, n)) or usable_cores()
        return BATCHED_CALL_S + LAPACK_LOOP_START_S + math.ceil(batch / cores) * per_call
    bytes_moved = 2 * batch * m * n * dtype.itemsize
    return BATCHED_CALL_S + BATCHED_OVER_BOUND[op] * bytes_moved / MEMORY_BANDWIDTH_BPS
