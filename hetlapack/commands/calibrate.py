"""``hetlapack calibrate``: measure each device's capability weights and cache them for this machine."""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Callable, Iterator

import numpy as np

from .. import linalg
from ..devices import available
from ..options import using
from ..perf import model
from ..perf.calibration import (DEFAULT_TILE, HOST_THREAD_CALLS, KERNEL_TILES, PASSES, POTRF_BLOCKS,
                                TILE_CHOICE_MARGIN, calibrate, host_threads, least_gains)
from ..perf.rates import MEMORY_ORDERS, call_name, call_table
from ..devices.capability import ENV_CACHE_DIR, apply_measurements, cache_path, check_writable, save_results
from . import device_list
from ..mpi.arguments import positive_int


def register(subparsers) -> None:
    parser = subparsers.add_parser("calibrate", help="measure device rates and link speeds; cache them")
    parser.add_argument("--devices", type=device_list, default=None,
                        help="comma-separated device names (default: every available device), e.g. cpu,emulated:0")
    parser.add_argument("--tile", type=positive_int, default=DEFAULT_TILE,
                        help="tile order the scalar weights (blas3, panel, laswp) are timed at; they set each "
                             "device's share of the hybrid path's tiles. The per-kernel tables are always timed at "
                             f"tile orders {KERNEL_TILES[0]}-{KERNEL_TILES[-1]}")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timings per kernel (the best is kept)")
    parser.add_argument("--orders", type=_orders, default=None,
                        help="comma-separated matrix orders the whole-matrix factorizations are timed at (default: "
                             "64 to 4000 for the host's cores, 512 to 8192 for GPUs). Dispatch prices the host and "
                             "gpu paths from these rates: for the host it ignores orders below 64 and follows the "
                             "reference machine's curve beyond the largest, while a GPU's rate stays flat beyond it, "
                             "so time orders as large as the matrices you factor")
    parser.add_argument("--no-batched", action="store_true",
                        help="skip timing the batched kernels on stacks of small matrices: against the LAPACK "
                             "loop, which sets the order where dispatch switches from the one to the other, with "
                             "each number of matrices per buffer, which sets the one they run with, and the LAPACK "
                             "loop on one thread against every core, which sets up to where it runs on one")
    parser.add_argument("--no-save", action="store_true", help="print the measurement without caching it")
    parser.set_defaults(func=run)


def _orders(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated positive matrix orders."""
    return tuple(positive_int(item) for item in text.split(","))


@contextlib.contextmanager
def _writing_cache() -> Iterator[None]:
    """Turn a failure to write the cache into one ``OSError`` naming the cache file and the ways around it."""
    try:
        yield
    except OSError as error:
        reason = f"{error.strerror}: {error.filename}" if error.strerror and error.filename else str(error)
        raise OSError(f"cannot write the calibration cache {cache_path()} ({reason}); rerun with --no-save, or set "
                      f"{ENV_CACHE_DIR} to a folder you can write") from error


def run(args: argparse.Namespace) -> int:
    devices = args.devices or available()
    if not args.no_save:
        with _writing_cache():
            check_writable()
    cpu = next((device for device in devices if device.kind == "cpu"), None)
    before = _host_threads(args.repeats) if cpu is not None else None
    results = calibrate(devices, tile=args.tile, repeats=args.repeats, save=False, progress=True,
                        whole_orders=args.orders,
                        host_calls=_host_calls(), tile_calls=_tile_calls())
    if cpu is not None:
        results[cpu.name]["host_threads"] = least_gains(before, _host_threads(args.repeats))
    if cpu is not None and not args.no_batched:
        results[cpu.name].update(_batched_timings(args.repeats))
    if cpu is not None:
        apply_measurements(cpu, results[cpu.name])
    _print_results(results, args.tile)
    if not args.no_save:
        with _writing_cache():
            path = save_results(results, args.tile)
        print(f"saved to {path}")
    return 0


#: The SciPy function dispatch prices each call with (``call_name``: each factorization, and QR forming Q),
#: default flags.
_FUNCTIONS: dict[str, Callable[[np.ndarray], object]] = {
    "potrf": linalg.cholesky, "getrf": linalg.lu_factor, "geqrf": lambda a: linalg.qr(a, mode="r"),
    call_name("geqrf", forms_q=True): lambda a: linalg.qr(a, mode="economic")}


def _forced(path: str, function: Callable[[np.ndarray], object], a: np.ndarray, tile: int | None = None) -> object:
    """``hetlapack.linalg``'s ``function`` on ``a`` with its default flags, ``path`` forced on the CPU alone (and
    the tile path at ``tile``, where given)."""
    with using(path=path, devices=["cpu"], tile=tile):
        return function(a)


def _host_calls() -> dict[str, Callable[[np.ndarray], object]]:
    """The host path's call per call dispatch prices (:data:`_FUNCTIONS`): ``hetlapack.linalg``'s with its default
    flags, the host path forced (SciPy's own function, handed a Fortran-ordered copy where SciPy would make it the
    slow way)."""
    return {op: functools.partial(_forced, "host", function) for op, function in _FUNCTIONS.items()}


def _tile_calls() -> dict[str, Callable[[np.ndarray, int], object]]:
    """The tile path's call per call dispatch prices (:data:`_FUNCTIONS`) on the CPU alone, default flags, at a
    tile given with the matrix."""
    return {op: functools.partial(_forced, "hybrid", function) for op, function in _FUNCTIONS.items()}


def _host_threads(repeats: int) -> dict[str, list[list[float]]]:
    """:func:`~hetlapack.perf.calibration.host_threads` with a progress bar over the host's calls: timed before and
    after the other measurements, the device entry's ``"host_threads"`` table is the two's
    :func:`~hetlapack.perf.calibration.least_gains`."""
    from tqdm import tqdm  # noqa: PLC0415 - a CLI dependency

    with tqdm(total=sum(len(calls) for calls, *_ in HOST_THREAD_CALLS.values()), desc="host calls on one thread",
              unit="call") as bar:
        def done(call: str) -> None:
            bar.set_postfix_str(call)
            bar.update()
        return host_threads(repeats * PASSES, progress=done)


def _batched_timings(repeats: int) -> dict[str, dict[str, list[list[float]]]]:
    """:func:`~hetlapack.batched.crossover.measure`, :func:`~hetlapack.batched.crossover.measure_lanes`,
    :func:`~hetlapack.batched.crossover.measure_spread`, :func:`~hetlapack.batched.crossover.measure_stream`,
    :func:`~hetlapack.batched.crossover.measure_stream_stacks`, :func:`~hetlapack.batched.crossover.measure_solves` and
    :func:`~hetlapack.batched.crossover.measure_loop_threads` as a device entry's ``"batched"``, ``"lanes"``,
    ``"spread"``, ``"stream"``, ``"stream_stack"``, ``"solves"`` and ``"loop_threads"`` tables, with a progress bar
    over their cases, after compiling the kernels numba's cache lacks on every core (``hetlapack compile``'s work,
    with its own bar) rather than one at a time in the cases that meet them."""
    from tqdm import tqdm  # noqa: PLC0415 - numba (for the kernels) loads only where this runs

    from ..batched import crossover, precompile  # noqa: PLC0415

    precompile.precompile()

    cases = sum(len(cases) for cases in (crossover.CASES, crossover.LANE_CASES, crossover.SPREAD_CASES,
                                         crossover.STREAM_CASES, crossover.STACK_CASES, crossover.SOLVE_CASES,
                                         crossover.LOOP_CASES))
    with tqdm(total=cases, desc="batched kernels", unit="case") as bar:
        def done(case: str) -> None:
            bar.set_postfix_str(case)
            bar.update()
        return {"batched": crossover.measure(repeats, progress=done),
                "lanes": crossover.measure_lanes(repeats, progress=done),
                "spread": crossover.measure_spread(repeats, progress=done),
                "stream": crossover.measure_stream(repeats, progress=done),
                "stream_stack": crossover.measure_stream_stacks(repeats, progress=done),
                "solves": crossover.measure_solves(repeats, progress=done),
                "loop_threads": crossover.measure_loop_threads(repeats, progress=done)}


def _print_by_order(tables: dict[str, list[list[float]]], cell: Callable[[float], str], first: str = "order") -> None:
    """One column per case of ``tables`` (``{case: [[order, value], ...]}``), one row per order (or what ``first``
    names), each value as ``cell`` writes it in 20 characters."""
    print(f"\n{first:>7}" + "".join(f"{case:>20}" for case in tables))
    orders = sorted({int(order) for rows in tables.values() for order, _ in rows})
    for order in orders:
        values = (dict((int(n), value) for n, value in rows).get(order) for rows in tables.values())
        print(f"{order:>7}" + "".join(f"{'':>20}" if value is None else cell(value) for value in values))


def _print_ratios(ratios: dict[str, list[list[float]]], meaning: str, choice: str,
                  up_to: Callable[[list[list[float]]], int]) -> None:
    """Ratios of two choices' times per order (``meaning`` says which), and the order up to which dispatch takes the
    ``choice`` (``up_to`` of a case's rows)."""
    _print_by_order(ratios, lambda ratio: f"{ratio:>19.2f}x")
    switches = (f"{case} {up_to(rows)}" for case, rows in ratios.items())
    print(f"stacks: {meaning}; {choice} up to order: {', '.join(switches)}")


def _print_lanes(fastest: dict[str, list[list[float]]]) -> None:
    """The matrices per buffer each interleaved kernel ran fastest with, per order."""
    from ..batched.crossover import LANE_MARGIN  # noqa: PLC0415 - loaded where the batched kernels were timed

    _print_by_order(fastest, lambda lanes: f"{int(lanes):>20}")
    print("stacks: the matrices per buffer each interleaved kernel runs with, timed fastest (the buffer-size rule's "
          f"unless another ran {LANE_MARGIN}x faster)")


def _print_spread(ratios: dict[str, list[list[float]]]) -> None:
    """Each interleaved kernel's time asking for the next chunk all at once over a slice a step, per buffer, and the
    largest buffer it asks a slice a step on from now on."""
    _print_by_order(ratios, lambda ratio: f"{ratio:>19.2f}x", "bytes")
    limits = ", ".join(f"{case} {model.crossover_order(rows) // 1024} KiB" for case, rows in ratios.items())
    print("stacks: the time of a kernel on one vector of float64 matrices asking for the next chunk all at once over "
          f"a slice a step, by buffer (above 1x slices win); a slice a step up to: {limits}")


def _print_stream(ratios: dict[str, list[list[float]]]) -> None:
    """Each interleaved kernel's time with ordinary stores over streaming ones, per matrix, and the largest matrix
    whose results it streams from now on."""
    _print_by_order(ratios, lambda ratio: f"{ratio:>19.2f}x", "bytes")
    limits = ", ".join(f"{case} {model.crossover_order(rows)} bytes" for case, rows in ratios.items())
    print("stacks past the last-level cache: the time of a kernel writing its results with ordinary stores over "
          f"streaming ones, by matrix (above 1x streaming wins); streaming up to: {limits}")


def _print_stream_stacks(ratios: dict[str, list[list[float]]]) -> None:
    """Each interleaved kernel's time with ordinary stores over streaming ones, per stack up to the last-level
    cache, and the stack from which the kernels stream."""
    print("\n" + "".join(f"{case:>20}" for case in ratios))
    for row in zip(*ratios.values()):
        print("".join(f"{nbytes / 2**20:>9.1f} MiB {ratio:>7.2f}x" for nbytes, ratio in row))
    print("stacks (MiB of small matrices and their results) up to the last-level cache: the time of a kernel "
          "writing with ordinary stores over streaming ones (above 1x streaming wins); streaming from "
          f"{model.stream_stack_reach(ratios) / 2**20:.1f} MiB")


def _print_calls(tables: dict[str, list[list[float]]], path: str) -> None:
    """A path's call per order, for each call dispatch prices and input memory order."""
    calls = [call for call in _FUNCTIONS if call_table(call, "C") in tables]
    columns = [(call, layout) for layout in MEMORY_ORDERS for call in calls]
    print(f"\n{'order':>7}" + "".join(f"{f'{call} {layout}':>11}" for call, layout in columns))
    for row, (order, _) in enumerate(tables[call_table("potrf", "C")]):
        print(f"{order:>7}" + "".join(f"{tables[call_table(call, layout)][row][1]:>11.1f}"
                                      for call, layout in columns))
    print(f"GFLOP/s of the {path} call (cholesky, lu_factor, qr(mode='r'), qr(mode='economic') as geqrf+Q: geqrf's "
          "flops over its time), default flags, on C- and Fortran-ordered float64 matrices: what dispatch prices "
          "it at")



def _print_results(results: dict[str, dict], tile: int) -> None:
    """The measured scalar weights and link of each device, then its whole-matrix rates per order."""
    print(f"{'device':<14}{'blas3 GFLOP/s':>15}{'panel GFLOP/s':>15}{'laswp GB/s':>12}{'link GB/s':>11}"
          f"{'latency us':>12}")
    for name, measured in results.items():
        link = ""
        if "latency_s" in measured:
            link = f"{measured['bandwidth_gbs']:>11.1f}{measured['latency_s'] * 1e6:>12.1f}"
        print(f"{name:<14}{measured['blas3']:>15.1f}{measured['panel']:>15.1f}{measured['memory']:>12.1f}{link}")
    print("rates are per worker with one BLAS thread, at tile order", tile)
    print(f"\n{'device':<14}{'order':>7}{'potrf GFLOP/s':>15}{'getrf GFLOP/s':>15}{'geqrf GFLOP/s':>15}")
    for name, measured in results.items():
        whole = measured.get("whole", {})
        for row, (order, _) in enumerate(whole.get("potrf", ())):
            rates = "".join(f"{whole[op][row][1]:>15.1f}" for op in ("potrf", "getrf", "geqrf"))
            print(f"{name:<14}{order:>7}{rates}")
    print("whole matrices, float64: the host path's LAPACK call on every core, a GPU's library call")
    for measured in results.values():
        if measured.get("tiles"):
            _print_tiles(measured["tiles"])
        if measured.get("potrf_blocks"):
            _print_potrf_blocks(measured["potrf_blocks"])
        for table, path in (("host_call", "host path's"), ("tile_call", "tile path's (the CPU alone)")):
            if table in measured:
                _print_calls(measured[table], path)
    for measured in results.values():
        if "batched" in measured:
            _print_ratios(measured["batched"], "the LAPACK loop's time over the interleaved kernel's (above 1x the "
                          "interleaved kernel wins)", "interleaved", model.crossover_order)
        if "lanes" in measured:
            _print_lanes(measured["lanes"])
        if "spread" in measured:
            _print_spread(measured["spread"])
        if "stream" in measured:
            _print_stream(measured["stream"])
        if measured.get("stream_stack"):
            _print_stream_stacks(measured["stream_stack"])
        if "solves" in measured:
            _print_ratios(measured["solves"], "a solve's time a matrix at a time over the interleaved one's (above 1x "
                          "the interleaved solve wins)", "interleaved", model.crossover_order)
        if measured.get("host_threads"):
            _print_host_threads(measured["host_threads"])
        if "loop_threads" in measured:
            _print_ratios(measured["loop_threads"], "the LAPACK loop's time on every core over one thread's (one "
                          f"thread unless every core took {1 / model.LOOP_THREADS_MARGIN:.2f}x its time or less)",
                          "one thread", model.one_thread_order)


def _print_host_threads(ratios: dict[str, list[list[float]]]) -> None:
    """Each host call's time on every core over one BLAS thread's, a row per call, dtype and library, a column per
    order, and the orders it runs on one thread at."""
    orders = sorted({int(order) for rows in ratios.values() for order, _ in rows})
    print(f"\n{'call':<26}" + "".join(f"{order:>7}" for order in orders) + "  on one thread")
    for name, rows in ratios.items():
        by_order = dict((int(order), ratio) for order, ratio in rows)
        one_thread = model.one_thread_orders(rows)
        print(f"{name.rsplit(' ', 1)[0]:<26}"  # the library's version left out
              + "".join(f"{by_order[order]:>6.2f}x" if order in by_order else f"{'':>7}" for order in orders)
              + f"  {'-'.join(map(str, one_thread)) if one_thread else 'none'}")
    print("each library's call on a C-ordered matrix, default flags: its time on every core over one BLAS thread's; "
          f"on one thread at orders where that was {model.HOST_ONE_THREAD_MARGIN}x or more")


def _print_potrf_blocks(tables: dict[str, list[list[int]]]) -> None:
    """The block the host path's Cholesky runs LAPACK's right-looking variant at, per triangle LAPACK factors,
    dtype, library and order."""
    for uplo, triangle in (("L", "lower"), ("U", "upper")):
        print(f"\nLAPACK's {triangle} triangle:", end="")
        _print_by_order({f"{dtype} {library}": rows for name, rows in tables.items()
                         for dtype, which, library, *_ in [name.split()] if which == uplo},
                        lambda block: f"{int(block):>20}")
    print("the block LAPACK's right-looking Cholesky ran fastest at on every core, of "
          f"{', '.join(map(str, POTRF_BLOCKS))}; the order itself where the BLAS's potrf ran within "
          f"{TILE_CHOICE_MARGIN}x of it: the host path's Cholesky from now on")


def _print_tiles(tiles: dict[str, list[list[int]]]) -> None:
    """The tile the tile path's call ran fastest at, per factorization and order: its default tile from now on."""
    ops = list(tiles)
    print(f"\n{'order':>7}" + "".join(f"{op + ' tile':>12}" for op in ops))
    for row, (order, _) in enumerate(tiles[ops[0]]):
        print(f"{order:>7}" + "".join(f"{tiles[op][row][1]:>12}" for op in ops))
    print("the tile the tile path's call (the CPU alone, C-ordered float64) ran fastest at, of "
          f"{', '.join(map(str, KERNEL_TILES))}: its default tile on this machine from now on")
