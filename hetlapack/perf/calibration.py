"""Capability weights measured on this machine (seed 000 §6.2–6.3), written to the devices' cache.

``calibrate(devices)`` times each device's tile kernels with one worker: the BLAS-3 class (GEMM at the working
tile size), the panel class (GETRF on a tall panel) and the memory class (LASWP), in GFLOP/s (GB/s for LASWP),
and for accelerators the host-to-device link: bandwidth from a large copy, latency from a one-element copy. It
also times each device's routine on a whole matrix (:func:`whole_rates`: the host's LAPACK call, the gpu path's
library call) and, on the host, the host and tile paths' whole calls on C- and Fortran-ordered matrices
(:func:`call_rates`), which dispatch prices those paths with. The cache itself (where it lives, how a device reads
its entry) is :mod:`hetlapack.devices.capability`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np
import scipy.linalg.blas

from ..blas_threads import all_cores, blas_threads, one_thread_per_call
from ..contract.originals import numpy_functions, scipy_functions
from ..contract.scipy_rules import COMPILED_BATCH_LOOPS
from ..devices import lapack_pointers
from ..devices.base import Device
from ..devices.capability import apply_measurements, check_writable, save_results
from ..machine import usable_cores
from .rates import (MEMORY_ORDERS, POTRF_BLOCKS_MIN_ORDER, call_name, call_op, call_table, flops,
                    HOST_THREADS_ORDERS, host_threads_table, potrf_blocks_table, tile_size,
                    timing_potrf_blocks)

Key = TypeVar("Key")

#: Tile order the kernels are timed at (the hybrid path's working tile size on this kind of machine).
DEFAULT_TILE = 256


def best_seconds(run: Callable[[], object], repeats: int, setup: Callable[[], object] | None = None,
                 enough_s: float = float("inf"), least: int = 1) -> float:
    """The best of ``repeats`` timed calls of ``run``, each after an untimed ``setup`` (a fresh copy of the input a
    call factors in place); once ``least`` calls have run and the best took over ``enough_s``, the timing stops
    (long enough to trust)."""
    best = float("inf")
    for calls in range(1, max(repeats, least) + 1):
        if setup is not None:
            setup()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
        if best > enough_s and calls >= least:
            break
    return max(best, 1e-9)


def _kernel_rates(device: Device, tile: int, repeats: int) -> dict[str, float]:
    """GFLOP/s of GEMM (blas3) and tall GETRF (panel), GB/s of LASWP (memory), on ``device``'s memory."""
    rng = np.random.default_rng(0)
    tall = 4 * tile
    a, b, c = (device.empty((tile, tile), np.float64) for _ in range(3))
    panel = device.empty((tall, tile), np.float64)
    host_square = np.asfortranarray(rng.standard_normal((tile, tile)))
    host_panel = np.asfortranarray(rng.standard_normal((tall, tile)))
    for target in (a, b, c):
        device.upload(host_square, target)
    piv = device.empty((tile,), np.dtype(np.int32))
    swaps = np.asarray(rng.integers(1, tile + 1, tile), dtype=np.int32)
    gemm = best_seconds(lambda: device.gemm(a, b, c, alpha=1.0, beta=0.0), repeats)
    getrf = best_seconds(lambda: device.getrf(panel, piv), repeats, setup=lambda: device.upload(host_panel, panel))
    laswp = best_seconds(lambda: device.laswp(c, swaps), repeats)
    getrf_flops = tall * tile ** 2 - tile ** 3 / 3
    return {"blas3": 2 * tile ** 3 / gemm / 1e9, "panel": getrf_flops / getrf / 1e9,
            "memory": 2 * tile * tile * 8 / laswp / 1e9}


#: Per-kernel tables measured by :func:`kernel_tables` on the reference machine (2-core AMD EPYC VM, OpenBLAS
#: 0.3.31 Haswell kernels, one thread, quiet), where :func:`hetlapack.perf.rates.host_gemm_gflops` per core
#: is ``REFERENCE_GEMM_GFLOPS``. Without a cached calibration, a CPU's tables are these scaled by its own quickly
#: measured GEMM rate per core. The ``geqrt`` row is geqrf's times the geqrt/geqrf ratio of a later run. The ``orgqr``
#: row is the panel's Q from its ``T`` (two TRMMs, ``m t^2`` flops as the task counts them): LAPACK orgqr's row there
#: (``4 m t^2 - 2 t^3`` flops) times the ratio of the two calls' rates on a 2-core Xeon VM (2.1-2.7x, one thread).
REFERENCE_GEMM_GFLOPS = 33.7
REFERENCE_KERNELS: dict[str, tuple[tuple[int, float], ...]] = {
    "gemm": ((128, 28.3), (192, 33.4), (256, 33.2), (384, 35.0), (512, 36.4)),
    "trsm": ((128, 19.2), (192, 23.8), (256, 24.7), (384, 24.7), (512, 31.1)),
    "herk": ((128, 15.0), (192, 21.8), (256, 25.9), (384, 27.1), (512, 29.6)),
    "potrf": ((128, 8.3), (192, 17.9), (256, 17.8), (384, 22.4), (512, 24.3)),
    "getrf": ((128, 12.1), (192, 18.2), (256, 20.2), (384, 21.5), (512, 22.4)),
    "laswp": ((128, 3.6), (192, 4.2), (256, 3.7), (384, 3.6), (512, 3.2)),
    "geqrf": ((128, 9.0), (192, 12.9), (256, 13.9), (384, 16.4), (512, 19.1)),
    "geqrt": ((128, 17.0), (192, 20.9), (256, 20.5), (384, 26.4), (512, 27.5)),
    "larft": ((128, 12.4), (192, 16.8), (256, 22.6), (384, 24.0), (512, 25.6)),
    "larfb": ((128, 23.4), (192, 28.5), (256, 30.1), (384, 31.5), (512, 33.7)),
    "orgqr": ((128, 15.6), (192, 18.9), (256, 18.1), (384, 22.1), (512, 20.8)),
}


def scaled_reference_kernels(gemm_gflops: float) -> dict[str, tuple[tuple[float, float], ...]]:
    """The reference machine's kernel tables scaled to a core whose one-thread GEMM runs at ``gemm_gflops``."""
    factor = gemm_gflops / REFERENCE_GEMM_GFLOPS
    return {k: tuple((t, r * factor) for t, r in table) for k, table in REFERENCE_KERNELS.items()}


#: Tile orders the per-kernel tables are measured at (the range the tile paths use), and the height of the tall
#: blocks (panels, block columns) in tiles.
KERNEL_TILES = (128, 192, 256, 384, 512)
PANEL_HEIGHT = 4

#: Bytes of operand copies the per-kernel timings cycle through, so that no call finds its data in cache (twice a
#: 32 MB last-level cache).
COLD_BYTES = 64 << 20


#: A timed case: a call that refreshes its input (or None), the call itself, and its flops.
KernelCase = tuple[Callable[[], object] | None, Callable[[], object], float]


def _kernel_cases(device: Device, t: int, rng: np.random.Generator) -> dict[str, KernelCase]:
    """Per tile kernel: ``(refresh its input or None, the call, its flops)`` at tile order ``t`` (blocks
    ``PANEL_HEIGHT * t`` tall), flops (bytes for laswp) counted as the tile algorithms count them."""
    h = PANEL_HEIGHT * t
    square = np.asfortranarray(rng.standard_normal((t, t)))
    spd = np.asfortranarray(square @ square.T + t * np.eye(t))
    tall = np.asfortranarray(rng.standard_normal((h, t)))
    buffers = {name: device.empty(shape, np.float64)
               for name, shape in (("t", (t, t)), ("u", (t, t)), ("tall", (h, t)), ("tall2", (h, t)))}
    device.upload(spd, buffers["u"])
    device.upload(tall, buffers["tall2"])
    piv = device.empty((t,), np.dtype(np.int32))
    swaps = np.asarray(rng.integers(1, h + 1, t), dtype=np.int32)
    tau = device.to_device(np.zeros(t))
    factor = device.empty((t, t), np.float64)

    def fresh(name: str, host: np.ndarray) -> Callable[[], None]:
        return lambda: device.upload(host, buffers[name])

    return {
        "gemm": (None, lambda: device.gemm(buffers["tall2"], buffers["u"], buffers["tall"], conj_b=True),
                 2 * h * t * t),
        "trsm": (fresh("tall", tall), lambda: device.trsm(buffers["u"], buffers["tall"], side="R", lower=True,
                                                          conj=True, unit=False), h * t * t),
        "herk": (None, lambda: device.herk(buffers["u"], buffers["t"], lower=True, conj_first=False), t**3),
        "potrf": (fresh("t", spd), lambda: device.potrf(buffers["t"], True), t**3 / 3),
        "getrf": (fresh("tall", tall), lambda: device.getrf(buffers["tall"], piv), h * t * t - t**3 / 3),
        "laswp": (None, lambda: device.laswp(buffers["tall"], swaps), 4 * t * t * 8),
        "geqrf": (fresh("tall", tall), lambda: device.geqrf(buffers["tall"], tau), 2 * h * t * t - 2 * t**3 / 3),
        "geqrt": (fresh("tall", tall), lambda: device.geqrt(buffers["tall"], tau, factor),
                  3 * h * t * t - 2 * t**3 / 3),
        "larft": (None, lambda: device.larft(buffers["tall2"], tau, factor), h * t * t),
        "larfb": (None, lambda: device.larfb(buffers["tall2"], factor, buffers["tall"], conj=True), 4 * h * t * t),
        "orgqr": (fresh("tall", tall), lambda: device.orgqr(buffers["tall"], tau, factor), h * t * t),
    }


def kernel_tables(device: Device, tiles: Sequence[int] = KERNEL_TILES, repeats: int = 3,
                  cold_bytes: int = COLD_BYTES) -> dict[str, list[list[float]]]:
    """Per tile kernel, ``[[tile, GFLOP/s], ...]`` (GB/s for laswp) of one worker: the rates the simulator
    prices tasks with.

    Operands are cache-cold, as in a factorization whose tiles stream through memory: each kernel runs in turn on
    enough independent copies of its operands to fill ``cold_bytes`` (more than a last-level cache), inputs
    refreshed for all copies before any is timed; the rate is from the median call."""
    rng = np.random.default_rng(0)
    tables: dict[str, list[list[float]]] = {}
    for t in tiles:
        per_copy = 8 * (2 * t * t + 2 * PANEL_HEIGHT * t * t)
        copies = [_kernel_cases(device, t, rng) for _ in range(max(2, min(64, -(-cold_bytes // per_copy))))]
        for name, (_, _, work) in copies[0].items():
            calls = []
            for _ in range(repeats):
                for case in copies:
                    setup = case[name][0]
                    if setup is not None:
                        setup()
                for case in copies:
                    start = time.perf_counter()
                    case[name][1]()
                    calls.append(time.perf_counter() - start)
            seconds = max(float(np.median(calls)), 1e-9)
            tables.setdefault(name, []).append([t, work / seconds / 1e9])
    return tables


#: Matrix orders the whole-matrix routines are timed at: the host path's (LAPACK on the host's cores; also for
#: emulated accelerators, which compute there) and the gpu path's (an accelerator's library call, which needs large
#: matrices to reach its rate). Rates beyond the largest order are taken as flat. A call over
#: ``WHOLE_REPEAT_S`` is timed once (about 5 s for the host's orders on 2 cores). The host's orders past the L2
#: cache are not powers of two: there a column's elements fall in a few cache sets, and every call ran slower than
#: at the orders around it, the host path's more than the tile path's (2-core Xeon VM, C-ordered float64, in turn:
#: host / tile path 0.269 / 0.267 s for Cholesky at 4096 against 0.209 / 0.224 s at 4000; LU 0.070 / 0.090 s at
#: 2048 against 0.055 / 0.076 at 2000; the Fortran copy of order 2048 18.2 ms against 3.2 at 2000): timed there,
#: dispatch priced the orders between as the worst case of the two paths.
WHOLE_REPEAT_S = 0.5
WHOLE_ORDERS_HOST = (64, 128, 256, 500, 1000, 2000, 4000)
WHOLE_ORDERS_ACCELERATOR = (512, 1024, 2048, 4096, 8192)


def _whole_inputs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A general and a symmetric positive definite (diagonally dominant) Fortran-ordered float64 matrix of order
    ``n``, made without a product (the largest order is 8192)."""
    general = np.asfortranarray(rng.standard_normal((n, n)))
    spd = np.asfortranarray(general + general.T)
    spd[np.diag_indices(n)] += 8.0 * n
    return general, spd


def whole_rates(device: Device, orders: Sequence[int], repeats: int) -> dict[str, list[list[float]]]:
    """Per factorization (potrf, getrf, geqrf), ``[[n, GFLOP/s], ...]`` of ``device``'s routine on a whole float64
    matrix of each order already in its memory: on a CPU the host path's LAPACK call (every core), on an
    accelerator the gpu path's library call (its ``info`` read back). Each call factors a fresh copy, not timed;
    the best of ``repeats`` calls counts, or the first if it took over ``WHOLE_REPEAT_S``."""
    rng = np.random.default_rng(1)
    rates: dict[str, list[list[float]]] = {}
    for n in orders:
        general, spd = _whole_inputs(n, rng)
        data = device.empty((n, n), np.float64)
        piv, tau = device.empty((n,), np.dtype(np.int32)), device.empty((n,), np.float64)
        calls = {"potrf": (spd, lambda: device.potrf(data, True)), "getrf": (general, lambda: device.getrf(data, piv)),
                 "geqrf": (general, lambda: device.geqrf(data, tau))}
        for op, (host, call) in calls.items():
            seconds = best_seconds(call, repeats, setup=lambda host=host: device.upload(host, data),
                                   enough_s=WHOLE_REPEAT_S)
            rates.setdefault(op, []).append([n, flops(op, n, n) / seconds / 1e9])
        for array in (data, piv, tau):
            device.free(array)
    return rates


def fastest_in_turn(calls: dict[Key, Callable[[], object]], rounds: int, enough_s: float = float("inf"),
                    least: int = 1, setup: Callable[[], object] | None = None) -> dict[Key, float]:
    """The best seconds of each of ``calls`` (key -> a call without arguments) over ``rounds`` rounds that call each
    in turn, so that a slow moment of the machine slows every one, not the one it fell on, and their ratios come from
    the same minutes, each call after an untimed ``setup``; once ``least`` rounds have run and every best took over
    ``enough_s``, the rounds stop."""
    seconds = dict.fromkeys(calls, float("inf"))
    for done in range(1, max(rounds, least) + 1):
        for key, call in calls.items():
            seconds[key] = min(seconds[key], best_seconds(call, 1, setup))
        if done >= least and min(seconds.values()) > enough_s:
            break
    return seconds


#: What :func:`_after_scipy` multiplies: large enough that OpenBLAS runs it on every core (its worker thread then spun
#: for 0.11 s on a 2-core Xeon VM), small enough to take about 0.1 ms.
_WAKE = np.eye(128)


def _after_scipy() -> None:
    """A small SciPy GEMM, which leaves OpenBLAS's pool (SciPy's, the one the host path's LAPACK and the tile path's
    kernels call) awake and spinning, as a caller's SciPy call before a factorization does."""
    scipy.linalg.blas.dgemm(1.0, _WAKE, _WAKE)


def call_rates(paths: dict[str, dict[str, Callable[[np.ndarray], object]]], orders: Iterable[int],
               rounds: int) -> dict[str, dict[str, list[list[float]]]]:
    """Per path (a table name, ``"host_call"`` or ``"tile_call"``, and its calls, named by ``rates.call_name``),
    per call and input memory order (:func:`rates.call_table`'s names), ``[[n, GFLOP/s], ...]`` of the path's call
    (SciPy's function as hetlapack makes it on that path, with its default flags) on a float64 matrix of each order
    in each of ``rates.MEMORY_ORDERS``: what the path costs the caller, with the conversion of the input's layout
    and the finiteness check. A rate is the flops of the factorization the call runs (``rates.call_op``) over its
    time, a QR that forms Q included.

    The paths' calls on one matrix are timed in turn (:func:`fastest_in_turn`), in the order of ``paths``, so that
    dispatch compares two calls timed in the same minutes: timed minutes apart, the host path's Cholesky of order
    4096 on a C-ordered matrix read 39.0-66.9 GFLOP/s on a 2-core Xeon VM, and one calibration priced the tile
    path level with it where the two, timed in turn, ran 1.16-1.29x apart. Every call follows the same SciPy call
    (:func:`_after_scipy`), as a caller who also calls SciPy meets it: OpenBLAS's idle threads spin for about 0.1 s
    after a call, on the cores the calls need (the tile Cholesky of order 2000 took 49 ms alone, 85 ms right after
    SciPy's, on the same VM). When each call followed the other path's, the host path's call followed the tile
    path's, which leaves no pool spinning, and was priced as no caller meets it: at order 4000 on a C-ordered matrix
    the host path's Cholesky took 0.205-0.207 s after a pause and 0.230-0.235 s right after SciPy's, the tile
    path's 0.175-0.180 s and 0.205-0.211 s. The best of ``rounds`` rounds counts, or of three once every call took
    over ``WHOLE_REPEAT_S``: the first call on a matrix larger than the caches ran up to 1.9x slower than the next
    (the same VM, Cholesky of order 4096, C-ordered)."""
    rng = np.random.default_rng(1)
    rates: dict[str, dict[str, list[list[float]]]] = {table: {} for table in paths}
    names = {name for calls in paths.values() for name in calls}
    for n in orders:
        general, spd = _whole_inputs(n, rng)
        for memory_order in MEMORY_ORDERS:
            for name in sorted(names):
                op = call_op(name)
                matrix = np.array(spd if op == "potrf" else general, order=memory_order)
                seconds = fastest_in_turn({table: functools.partial(calls[name], matrix)
                                           for table, calls in paths.items() if name in calls},
                                          rounds, enough_s=WHOLE_REPEAT_S, least=3, setup=_after_scipy)
                for table, best in seconds.items():
                    rates[table].setdefault(call_table(name, memory_order), []).append(
                        [n, flops(op, n, n) / best / 1e9])
    return rates


#: How many times :func:`calibrate` times the paths' calls, one order after another, each time with its share of the
#: rounds: the same call at the same order is timed minutes apart. On a 2-core AMD EPYC VM, SciPy's ``qr`` of order
#: 256 took 1.9 ms at one moment and 2.8-3.1 ms ten minutes later, while the tile path's call, one BLAS thread a
#: worker, moved less; a calibration made in such a slow stretch sent QR of orders 128-700 to the tile path, which
#: then ran at 0.68-0.73x SciPy's call.
CALL_STRETCHES = 2


def each_row(pick: Callable[[Iterable[float]], float],
             timings: Sequence[dict[str, list[list[float]]]]) -> dict[str, list[list[float]]]:
    """Of several timings of the same tables (``{name: [[x, value], ...]}``, the same names and rows), each row's
    value ``pick`` chooses among them (``min``, ``max``)."""
    return {name: [[x, pick(timing[name][row][1] for timing in timings)] for row, (x, _) in enumerate(rows)]
            for name, rows in timings[0].items()}


def fastest_rates(stretches: list[dict[str, dict[str, list[list[float]]]]]) -> dict[str, dict[str, list[list[float]]]]:
    """Of :func:`call_rates`' tables from several stretches (the same paths, calls and orders), each call's fastest
    rate at each order."""
    return {path: each_row(max, [stretch[path] for stretch in stretches]) for path in stretches[0]}


#: The smallest matrix order :func:`best_tiles` is timed at in a calibration: below it one LAPACK call beats the
#: tile path on the CPU alone at any tile (2-core Xeon VM: 0.57-0.79x of the host path's call at order 2048 right
#: after it, docs/dispatch.md), so no default tile there is worth a calibration's time.
TILE_TIMING_MIN_ORDER = 1000


#: How much faster another tile must run than the table's (``rates.TILE_SIZE``) before :func:`best_tiles` records
#: it: the timing's spread. On a 2-core Xeon VM, each tile timed in turn at order 4000, the tiles of LU ran within
#: 1.00-1.17x of the fastest and two runs ranked them differently; three calibrations within half an hour chose 256,
#: 384 and 192 for LU at 4096.
TILE_CHOICE_MARGIN = 1.05


def best_tiles(calls: dict[str, Callable[[np.ndarray, int], object]], orders: Iterable[int],
               choices: Sequence[int], rounds: int) -> dict[str, list[list[int]]]:
    """Per factorization, ``[[n, tile], ...]``: the tile of ``choices`` (those below ``n``) at which its tile-path
    call (``calls[op](matrix, tile)``) ran fastest on a C-ordered float64 matrix of each order, the tiles timed in
    turn (:func:`fastest_in_turn`, the table's tile among them); the table's tile stands unless another ran
    :data:`TILE_CHOICE_MARGIN` faster. The best tile depends on the machine: on a 2-core Xeon VM (AVX-512) the tile
    Cholesky of order 4000 ran 1.08-1.33x faster at 512 than at the 256 a table from a 2-core AMD EPYC (AVX2) gave
    it."""
    rng = np.random.default_rng(3)
    tiles: dict[str, list[list[int]]] = {}
    for n in orders:
        general, spd = (np.ascontiguousarray(matrix) for matrix in _whole_inputs(n, rng))
        for op, call in calls.items():
            matrix = spd if op == "potrf" else general
            table = tile_size(op, n)
            seconds = fastest_in_turn({tile: functools.partial(call, matrix, tile)
                                       for tile in sorted({*choices, table}) if tile < n},
                                      rounds, enough_s=WHOLE_REPEAT_S, least=3)
            fastest = min(seconds, key=seconds.get)
            keep = table in seconds and seconds[table] <= TILE_CHOICE_MARGIN * seconds[fastest]
            tiles.setdefault(op, []).append([n, table if keep else fastest])
    return tiles


#: The blocks :func:`potrf_blocks` tries. On a 2-core Xeon VM (SkylakeX kernels, float64) 64 ran fastest at orders
#: 500-1000 (1.05 against 1.20 ms for ``potrf`` at 500, where 128 took 1.19), 128 at 2000 and 256 at 4000.
POTRF_BLOCKS = (64, 128, 256, 384)

#: The dtypes NumPy's Cholesky computes in (its single-precision factors are rounded from double ones).
NUMPY_COMPUTES = "dD"


def potrf_blocks(orders: Iterable[int], rounds: int) -> dict[str, list[list[int]]]:
    """Per dtype, triangle and library (:func:`rates.potrf_blocks_table`), ``[[n, block], ...]``: the block of
    :data:`POTRF_BLOCKS` at which LAPACK's right-looking Cholesky (``lapack_pointers.potrf_right_looking``, every
    core) ran fastest on a Fortran-ordered matrix of each order, timed in turn with the same BLAS's own ``potrf``
    (:func:`fastest_in_turn`, each call on a fresh copy, not timed); ``n`` itself where no block ran
    :data:`TILE_CHOICE_MARGIN` faster than ``potrf``, which then stays the host path's. Timed on SciPy's BLAS and,
    where NumPy ships its own (``lapack_pointers.numpy_library``), on NumPy's in the dtypes NumPy computes in
    (:data:`NUMPY_COMPUTES`), for NumPy's shim; SciPy's from 1.18 is not: its Cholesky is a compiled call with no
    f2py copy, which the variant's whole call, copy and all, did not beat (``model.host_potrf_block``). Each
    triangle is timed, as it is factored: the upper one's blocked solve is on a short, wide panel, slower in
    OpenBLAS (order 4000: 185-199 against 175-178 ms for the lower one,
    and no faster than ``potrf`` at order 500 where the lower one was 1.14x). Which is faster depends on the BLAS's
    kernels and the dtype: on a 2-core Xeon VM (OpenBLAS on its SkylakeX kernels) float64 ran 1.10-1.17x faster at
    orders 1000-4000 and the complex dtypes level, and with OpenBLAS pinned to its Haswell kernels ``potrf`` won."""
    rng = np.random.default_rng(5)
    numpy_library = lapack_pointers.numpy_library()
    libraries = [] if COMPILED_BATCH_LOOPS else [(np.dtype(char), lapack_pointers.SCIPY) for char in "fdFD"]
    libraries += [(np.dtype(char), numpy_library) for char in NUMPY_COMPUTES if numpy_library is not None]
    cases = [(dtype, library, uplo) for dtype, library in libraries for uplo in "LU"]
    table: dict[str, list[list[int]]] = {}
    for n in orders:
        _, spd = _whole_inputs(n, rng)
        for dtype, library, uplo in cases:
            matrix = np.asfortranarray(spd.astype(dtype))
            work = np.empty_like(matrix, order="F")
            calls: dict[Key, Callable[[], object]] = {n: functools.partial(lapack_pointers.potrf, uplo, work,
                                                                           library=library)}
            calls |= {block: functools.partial(lapack_pointers.potrf_right_looking, uplo, work, block,
                                               library=library)
                      for block in POTRF_BLOCKS if block < n}
            seconds = fastest_in_turn(calls, rounds, enough_s=WHOLE_REPEAT_S, least=2,
                                      setup=functools.partial(np.copyto, work, matrix))
            fastest = min(seconds, key=seconds.get)
            keep = seconds[n] <= TILE_CHOICE_MARGIN * seconds[fastest]
            table.setdefault(potrf_blocks_table(dtype, uplo, library.name), []).append([n, n if keep else fastest])
    return table


def _after_numpy() -> None:
    """:func:`_after_scipy` on NumPy's own OpenBLAS, whose pool NumPy's LAPACK calls run on."""
    np.matmul(_WAKE, _WAKE)


#: Each library's call (SciPy's, NumPy's) of each host call (``rates.call_name``) as users make it, default flags,
#: the dtypes it computes in, and a call on the same BLAS that leaves its pool as a caller's earlier call leaves it.
HOST_THREAD_CALLS: dict[str, tuple[dict[str, Callable[[np.ndarray], object]], str, Callable[[], None]]] = {
    "scipy": ({"potrf": lambda a: scipy_functions["cholesky"](a), "getrf": lambda a: scipy_functions["lu_factor"](a),
               "geqrf": lambda a: scipy_functions["qr"](a, mode="r"),
               call_name("geqrf", forms_q=True): lambda a: scipy_functions["qr"](a, mode="economic")}, "fdFD",
              _after_scipy),
    "numpy": ({"potrf": lambda a: numpy_functions["cholesky"](a), "geqrf": lambda a: numpy_functions["qr"](a, mode="r"),
               call_name("geqrf", forms_q=True): lambda a: numpy_functions["qr"](a)}, NUMPY_COMPUTES, _after_numpy)}


def _on_one_thread(call: Callable[[], object]) -> object:
    """``call()`` with every BLAS capped at one thread, as the host path caps it (its cost included)."""
    with one_thread_per_call():
        return call()


def host_threads(rounds: int, orders: Iterable[int] = HOST_THREADS_ORDERS,
                 progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """Per library, host call and dtype (:func:`rates.host_threads_table`), ``[[n, every core's seconds / one
    thread's], ...]`` (above 1: one thread wins): SciPy's call, and NumPy's in the dtypes NumPy computes in, as users
    make it (a C-ordered matrix of order ``n``, default flags) on every core and on one BLAS thread, capped as the
    host path caps it, timed in turn (:func:`fastest_in_turn`, ``rounds`` rounds), each after a GEMM on the same
    library's OpenBLAS that leaves its pool spinning (:func:`_after_scipy`, :func:`_after_numpy`), as a caller's
    earlier call leaves it. ``progress`` is told each library and call as it is done (``"scipy potrf"``).

    After a SciPy GEMM, NumPy's Cholesky of order 128 on every core took 15x its time on one thread: NumPy's pool
    woke on a core SciPy's spinning pool held.

    OpenBLAS threads the level-2 BLAS of LAPACK's unblocked panels (``geqr2``'s ``gemv`` and ``ger`` a column)
    from small orders on, and on a 2-core AMD EPYC VM each such call paid for waking the other core: SciPy's
    ``qr(mode='r')`` of order 200 took 552 us on one thread and 668-1,419 us on both, varying from minute to
    minute, while at order 512 both threads won."""
    rng = np.random.default_rng(6)
    table: dict[str, list[list[float]]] = {}
    inputs = {n: _whole_inputs(n, rng) for n in orders}
    for library, (calls, chars, after) in HOST_THREAD_CALLS.items():
        for name, call in calls.items():
            for char in chars:
                dtype = np.dtype(char)
                for n, (general, spd) in inputs.items():
                    matrix = np.ascontiguousarray(spd if name == "potrf" else general, dtype=dtype)
                    on_every_core = functools.partial(call, matrix)
                    seconds = fastest_in_turn({"every": on_every_core,
                                               "one": functools.partial(_on_one_thread, on_every_core)},
                                              rounds, enough_s=WHOLE_REPEAT_S, least=2, setup=after)
                    table.setdefault(host_threads_table(name, dtype, library), []).append(
                        [n, seconds["every"] / seconds["one"]])
            if progress:
                progress(f"{library} {name}")
    return table


def least_gains(*timings: dict[str, list[list[float]]]) -> dict[str, list[list[float]]]:
    """Of several :func:`host_threads` timings of the same cases, each case's lowest ratio per order: one thread's
    smallest gain. Timed minutes apart, the calls on every core ran 1.2-2.6x apart on a 2-core AMD EPYC VM (one
    thread's within 1%), so a call runs on one thread only where it won each time."""
    return each_row(min, timings)


def _at_default_tile(call: Callable[[np.ndarray, int], object], op: str, tiles: tuple[tuple[int, int], ...],
                     a: np.ndarray) -> object:
    """``call(a, tile)`` at the tile path's default tile for ``op`` on ``a`` given the calibrated ``tiles``."""
    return call(a, tile_size(op, min(a.shape), tiles))


#: Times :func:`calibrate` measures every rate, one pass after another, keeping each rate's fastest: the host's
#: rates and the tiles' then both come from the machine's faster minutes. On a VM whose speed drifted by the minute
#: (2-core AMD EPYC, three calibrations each way in one quarter of an hour): LAPACK's Cholesky at n = 2,048 read
#: 40.8-47.4 GFLOP/s in one pass and 48.0-50.8 in two (30.8-51.5 over the afternoon in one); the tiled Cholesky at
#: n = 4,000 was priced 0.41-0.60 s and 0.39-0.42 s. With one pass, one calibration sent QR at n = 4,000 to one
#: LAPACK call (1.0x SciPy where the tiles ran 1.45-1.78x) and another the order-2,000 Cholesky to the tiles (0.85-
#: 0.96x SciPy where one LAPACK call ran 0.99-1.10x); the three two-pass calibrations chose the faster path for both.
PASSES = 2


def _one_pass(device: Device, tile: int, repeats: int, kernels: bool, orders: Sequence[int]) -> dict:
    """One measurement of every rate :func:`calibrate` takes (the link and the host path's calls aside)."""
    measured: dict = _kernel_rates(device, tile, repeats)
    if kernels:
        measured["kernels"] = kernel_tables(device, repeats=repeats)
    if orders:
        with all_cores():
            measured["whole"] = whole_rates(device, orders, repeats)
    return measured


def _fastest(passes: list[dict]) -> dict:
    """Each rate's highest over ``passes`` (:func:`_one_pass`'s): the scalars, and each table's rows."""
    fastest = dict(passes[0])
    for later in passes[1:]:
        for key, value in later.items():
            if isinstance(value, dict):
                fastest[key] = {name: [[x, max(rate, other)] for (x, rate), (_, other) in zip(rows, value[name],
                                                                                            strict=True)]
                                for name, rows in fastest[key].items()}
            else:
                fastest[key] = max(fastest[key], value)
    return fastest


def _link(device: Device, nbytes: int, repeats: int) -> dict[str, float]:
    """Host-to-device bandwidth (GB/s) from an ``nbytes`` copy and latency (s) from a one-element copy."""
    big = np.ones(nbytes // 8)
    small = np.ones(1)
    big_out, small_out = device.empty(big.shape, big.dtype), device.empty(small.shape, small.dtype)
    latency = best_seconds(lambda: device.upload(small, small_out), repeats)
    seconds = best_seconds(lambda: device.upload(big, big_out), repeats)
    return {"bandwidth_gbs": nbytes / max(seconds - latency, 1e-9) / 1e9, "latency_s": latency}


def calibrate(devices: Sequence[Device], *, tile: int = DEFAULT_TILE, repeats: int = 3,
              link_bytes: int = 64 << 20, save: bool = True, progress: bool = False,
              kernels: bool = True, whole_orders: Sequence[int] | None = None,
              host_calls: dict[str, Callable[[np.ndarray], object]] | None = None,
              tile_calls: dict[str, Callable[[np.ndarray, int], object]] | None = None) -> dict[str, dict]:
    """Measure ``devices`` (one worker each, one BLAS thread) and return name -> capability; cache it if ``save``.
    Each rate is the fastest of :data:`PASSES` passes over them all, one after another.

    With ``kernels`` the entry also holds per-kernel rate tables over tile orders (:func:`kernel_tables`), which
    the simulator and dispatch price tile tasks with. Each entry holds the whole-matrix rates (:func:`whole_rates`)
    at ``whole_orders`` (default: ``WHOLE_ORDERS_HOST`` for devices computing on the host's cores,
    ``WHOLE_ORDERS_ACCELERATOR`` for others; empty: none). Given the host path's calls (``host_calls``) and the
    tile path's at a given tile (``tile_calls``), each named by ``rates.call_name`` (a factorization, or a QR that
    also forms Q), the CPU's entry also holds, timed last and with BLAS threaded as a caller's call is (the calls go
    through dispatch):

    - ``"tiles"``: :func:`best_tiles` of the factorizations at those orders from :data:`TILE_TIMING_MIN_ORDER`, the
      tile path's default tile from then on (``rates.tile_size``; a QR that forms Q runs at ``geqrf``'s);
    - ``"potrf_blocks"``: :func:`potrf_blocks` at those orders from ``rates.POTRF_BLOCKS_MIN_ORDER``, the host
      path's Cholesky from then on;
    - ``"host_call"`` and ``"tile_call"``: :func:`call_rates` of the two paths at those orders, in turn in
      :data:`PASSES` times ``repeats`` rounds shared by :data:`CALL_STRETCHES` stretches (the fastest of them:
      :func:`fastest_rates`), the tile path's at its new default tile and the host path's Cholesky at its new
      blocks.

    The devices' ``capability`` is updated in place, so a runtime built on them right after uses the
    measurement. With ``save``, an unwritable cache raises ``OSError`` before anything is measured.
    """
    if tile < 1 or repeats < 1:
        raise ValueError(f"calibrate: tile and repeats must be positive, got tile={tile}, repeats={repeats}")
    if save:
        check_writable()
    from tqdm import tqdm  # noqa: PLC0415 - a CLI dependency, not needed to load cached weights

    results: dict[str, dict[str, float]] = {}
    with blas_threads(usable_cores()), tqdm(devices, desc="calibrating", unit="device",
                                            disable=not progress) as bar:
        for device in bar:
            bar.set_postfix_str(device.name)
            orders = sorted(whole_orders if whole_orders is not None else (
                WHOLE_ORDERS_HOST if device.host_compute else WHOLE_ORDERS_ACCELERATOR))
            measured = _fastest([_one_pass(device, tile, repeats, kernels, orders) for _ in range(PASSES)])
            if device.kind != "cpu":
                measured.update(_link(device, link_bytes, repeats))
            apply_measurements(device, measured)
            results[device.name] = measured
    cpu = next((device for device in devices if device.kind == "cpu"), None)
    orders = sorted(whole_orders if whole_orders is not None else WHOLE_ORDERS_HOST)
    if host_calls and tile_calls and cpu is not None and orders:
        tiled = tqdm([n for n in orders if n >= TILE_TIMING_MIN_ORDER], desc="tiles", unit="order",
                     disable=not progress)
        tiles = best_tiles({name: call for name, call in tile_calls.items() if call_op(name) == name}, tiled,
                           KERNEL_TILES, repeats)
        if tiles:
            results[cpu.name]["tiles"] = tiles
        at_default_tile = {name: functools.partial(_at_default_tile, call, call_op(name),
                                                   tuple(map(tuple, tiles.get(call_op(name), ()))))
                           for name, call in tile_calls.items()}
        blocked = tqdm([n for n in orders if n >= POTRF_BLOCKS_MIN_ORDER], desc="host Cholesky blocks",
                       unit="order", disable=not progress)
        if blocks := potrf_blocks(blocked, repeats):
            results[cpu.name]["potrf_blocks"] = blocks
        with timing_potrf_blocks(blocks):
            stretches = [call_rates({"host_call": host_calls, "tile_call": at_default_tile},
                                    tqdm(orders, desc=f"paths' calls {stretch + 1}/{CALL_STRETCHES}", unit="order",
                                         disable=not progress), max(repeats * PASSES // CALL_STRETCHES, 1))
                         for stretch in range(CALL_STRETCHES)]
        results[cpu.name].update(fastest_rates(stretches))
        apply_measurements(cpu, results[cpu.name])
    if save:
        save_results(results, tile)
    return results
