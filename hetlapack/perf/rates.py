"""Rates and counts the whole performance model shares: flop counts (LAWN 41), the tile order per operation, the
runtime's measured overheads, the host's GEMM rate measured once per process, and the names calibration gives the
paths' timed calls."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import time
from collections.abc import Iterator

import numpy as np

from .. import blas_threads
from ..forking import fork_safe_lock

#: Tile order per operation, by matrix order (measured best tiles on a 2-core AMD EPYC, AVX2,
#: benchmarks/test_tile_sizes.py): the default tile until ``hetlapack calibrate`` times this machine's
#: (``model.default_tile``), and the tile over several devices.
TILE_SIZE: dict[str, tuple[tuple[int, int], ...]] = {
    "potrf": ((0, 192), (1500, 256), (6000, 512)),
    "getrf": ((0, 256), (6000, 384)),
    "geqrf": ((0, 128), (1500, 192), (5000, 256)),
}

#: Fixed seconds of one call to the tiled runtime (starting and joining workers: 3-4 ms measured) and per inserted task
#: (benchmarks/test_runtime_overhead.py measures the latter).
RUNTIME_CALL_OVERHEAD_S = 3e-3
RUNTIME_TASK_OVERHEAD_S = 1.5e-5

_COMPLEX_FLOP_FACTOR = 4.0

#: The input layouts the paths' calls are timed on and priced for: ``"C"``, a matrix not Fortran-contiguous
#: (NumPy's default order, or a strided view, which SciPy's call converts before LAPACK reads it), and ``"F"``, a
#: Fortran-contiguous one (which it copies, unless it may overwrite it).
MEMORY_ORDERS = ("C", "F")


#: What :func:`call_name` adds to ``geqrf`` for a QR that also forms Q (``qr``'s economic and full modes), a call
#: calibration times and dispatch prices apart from ``mode='r'``'s: on a 2-core Zen 4 EPYC at orders 1000-2000,
#: SciPy 1.18's economic QR took 2.2-3.6x its ``mode='r'`` call and the tile path's 1.8-1.9x, so priced by
#: ``mode='r'`` the economic QR of order 2000 stayed on the host, where the tile path ran 1.3-1.4x faster.
WITH_Q = "+Q"


def call_name(op: str, forms_q: bool = False) -> str:
    """What calibration's tables call a path's whole call for ``op``: ``op`` itself, or for a QR that also forms Q
    ``op`` and :data:`WITH_Q`."""
    return op + WITH_Q if forms_q else op


def call_op(call: str) -> str:
    """The factorization a call named by :func:`call_name` runs: its rate is that factorization's flops over the
    call's time (so a price from it is the call's time), and its tile that factorization's."""
    return call.removesuffix(WITH_Q)


def call_table(call: str, memory_order: str) -> str:
    """The name of a calibrated table of a path's whole ``call`` (:func:`call_name`: ``potrf``, ``getrf``,
    ``geqrf``, ``geqrf+Q``) on an input of ``memory_order``. The host path's call is the installed SciPy's, and
    the others shape their results as it does, so its version is in the name: a measurement under another version
    is not this one's price."""
    import scipy  # noqa: PLC0415 - the version only; SciPy is loaded by then

    return f"{call} {memory_order} scipy {scipy.__version__}"


#: The orders ``calibration.host_threads`` times the host path's calls at, on one BLAS thread and on every core:
#: from where OpenBLAS starts threading a call to where two threads won at every order on a 2-core AMD EPYC VM
#: (Zen 4). The host path runs no call of a smaller order on one thread.
HOST_THREADS_ORDERS = (64, 96, 128, 192, 256, 384, 512)


def host_threads_table(call: str, dtype: np.dtype, library: str = "scipy") -> str:
    """The name of the calibrated table of the host path's ``call`` (:func:`call_name`) in ``dtype`` on one BLAS
    thread against every core (``calibration.host_threads``): ``library``'s call (``"scipy"`` or ``"numpy"``) on its
    own BLAS, so its version is in the name, as in :func:`potrf_blocks_table`'s."""
    import scipy  # noqa: PLC0415 - the version only; SciPy is loaded by then

    version = scipy.__version__ if library == "scipy" else np.__version__
    return f"{call} {np.dtype(dtype).name} {library} {version}"


#: The smallest matrix order ``calibration.potrf_blocks`` times and the host path looks a block up for: below it
#: the host path keeps LAPACK's ``potrf``. At order 1000 the right-looking Cholesky ran 1.15-1.20x faster than
#: OpenBLAS's ``dpotrf`` on a 2-core Xeon VM (SkylakeX kernels, block 64-128). At 500 the variant's kernels gained
#: 0.15 ms of a 1.2 ms ``dpotrf`` and the host path's own Python, run right after a BLAS call in cold caches, took
#: 0.07-0.15 ms of it back: under SciPy 1.18, whose compiled loop has none, the call users make was 0.86-0.94x.
POTRF_BLOCKS_MIN_ORDER = 1000


def potrf_blocks_table(dtype: np.dtype, uplo: str, library: str = "scipy") -> str:
    """The name of the calibrated table of the host Cholesky's block (``calibration.potrf_blocks``) for ``dtype``,
    the triangle LAPACK factors (``uplo``, ``"L"`` or ``"U"``) and ``library``'s BLAS (``"scipy"`` or ``"numpy"``,
    each the one its wheels ship): that library's version is in the name, as SciPy's is in :func:`call_table`'s."""
    import scipy  # noqa: PLC0415 - the version only; SciPy is loaded by then

    version = scipy.__version__ if library == "scipy" else np.__version__
    return f"{np.dtype(dtype).name} {uplo} {library} {version}"


_potrf_blocks_timing: contextvars.ContextVar[dict | None] = contextvars.ContextVar("potrf_blocks_timing",
                                                                                    default=None)


@contextlib.contextmanager
def timing_potrf_blocks(tables: dict[str, list[list[int]]]) -> Iterator[None]:
    """Within it the host path's Cholesky takes its blocks from ``tables``, the ones a calibration has just timed
    (``calibration.potrf_blocks``), not from the cache: the host path's calls it times next are the ones it will
    make from then on."""
    token = _potrf_blocks_timing.set(tables)
    try:
        yield
    finally:
        _potrf_blocks_timing.reset(token)


def potrf_blocks_timing() -> dict[str, list[list[int]]] | None:
    """The tables :func:`timing_potrf_blocks` put in effect, else None."""
    return _potrf_blocks_timing.get()


def potrf_block(n: int, timed: tuple[tuple[float, float], ...]) -> int | None:
    """The block LAPACK's right-looking Cholesky runs at on an order-``n`` matrix, from ``timed`` (``(order,
    block)`` rows, :func:`potrf_blocks_table`'s): the row at the order nearest ``n`` in ratio (:func:`timed_tile_row`);
    None, LAPACK's own ``potrf``, below the smallest order timed or where ``potrf`` was the faster there (a block as
    large as its order)."""
    row = timed_tile_row(n, timed)
    return None if row is None or row[1] >= min(row[0], n) else int(row[1])


def flops(op: str, m: int, n: int, complex_: bool = False) -> float:
    """Real floating-point operations of one factorization (LAWN 41 counts)."""
    k = min(m, n)
    if op in ("potrf",):
        count = n**3 / 3
    elif op == "getrf":
        count = max(m, n) * k**2 - k**3 / 3
    elif op in ("geqrf", "geqp3"):
        count = 2 * max(m, n) * k**2 - 2 * k**3 / 3
    elif op in ("potrs", "getrs"):
        count = 2 * m * m * n
    else:
        raise ValueError(f"no flop count for {op!r}")
    return count * (_COMPLEX_FLOP_FACTOR if complex_ else 1.0)


def tile_size(op: str, n: int, timed: tuple[tuple[float, float], ...] = ()) -> int:
    """The tile order for ``op`` on an order-``n`` matrix: of ``timed`` (``(order, tile)`` rows, the tiles
    ``hetlapack calibrate`` timed fastest on this machine, by order), the one at the order nearest ``n`` in ratio,
    and beyond the largest order timed no smaller than ``TILE_SIZE``'s (larger matrices run best on larger tiles);
    ``TILE_SIZE``'s without rows or below the smallest order timed."""
    table = TILE_SIZE.get(op, TILE_SIZE["potrf"])
    chosen = table[0][1]
    for threshold, tile in table:
        if n >= threshold:
            chosen = tile
    row = timed_tile_row(n, timed)
    if row is None:
        return chosen
    return max(int(row[1]), chosen) if n > timed[-1][0] else int(row[1])


def timed_tile_row(n: int, timed: tuple[tuple[float, float], ...]) -> tuple[float, float] | None:
    """The row of ``timed`` (``(order, tile)``, by order) :func:`tile_size` takes for order ``n``: the order nearest
    ``n`` in ratio; None without rows or below the smallest order timed."""
    if not timed or n < timed[0][0]:
        return None
    return min(timed, key=lambda row: abs(math.log(n / row[0])))


_measuring = fork_safe_lock()


def host_gemm_gflops(dtype_char: str = "d") -> float:
    """The host's GEMM rate in GFLOP/s with every usable core, measured once per process on a 768 matrix (tens of
    milliseconds): the best of several calls after a warm-up, with BLAS explicitly given all cores so that a first
    call made while a runtime caps BLAS threads does not measure one core. Threads asking at once share one
    measurement, so that one request is never priced at two rates."""
    with _measuring:
        return _measured_gemm_gflops(dtype_char)


@functools.cache
def _measured_gemm_gflops(dtype_char: str) -> float:
    dtype = np.dtype(dtype_char)
    n = 768
    a = np.ones((n, n), dtype=dtype)
    b = np.ones((n, n), dtype=dtype)
    out = np.empty((n, n), dtype=dtype)
    best = math.inf
    with blas_threads.all_cores():
        for _ in range(2):
            np.matmul(a, b, out=out)
        for _ in range(5):
            start = time.perf_counter()
            np.matmul(a, b, out=out)
            best = min(best, time.perf_counter() - start)
    factor = _COMPLEX_FLOP_FACTOR if dtype.kind == "c" else 1.0
    return factor * 2 * n**3 / best / 1e9
