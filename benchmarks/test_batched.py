"""Batched small-matrix factorizations: hetlapack beside NumPy, torch, JAX and SciPy on the same stacks.

hetlapack is timed as a user calls it: ``hetlapack.linalg``'s SciPy-compatible function on the path dispatch picks
(``extra_info["path"]`` names it), with SciPy's default ``check_finite`` and SciPy's output layout, so the shim's
costs count as the peers' own do.

Run ``pytest benchmarks/test_batched.py --benchmark-only --benchmark-json=batched.json``. Each benchmark group is
one (operation, dtype, n, batch) case; every row records in ``extra_info`` its ns/matrix, achieved GB/s (minimal
bytes read + written over the time) and the roofline bound of seed 004 §4.1 (those bytes over the measured copy
bandwidth), so ratios are read within one run on one machine. torch and JAX (benchmark-only peers; JAX on the CPU,
jitted, with 64-bit types enabled; its ``lu`` takes no stacks) are skipped when absent. SciPy's loop (a Python
loop before SciPy 1.18, a C loop since; ``extra_info["scipy"]`` names the version), and pivoted QR (LAPACK's
``geqp3`` per matrix on every path), run only at the smaller batch (their per-matrix cost does not depend on the
batch). Cases whose input exceeds
``MAX_INPUT_BYTES`` are skipped to keep the suite within minutes and memory. ``benchmarks/batched_table.py`` turns
the JSON into the table of every case against the fastest peer, the copy bound and the machine's head.

Dispatch sends every stack of these cases to the batched path and picks its kernels: the interleaved kernels for
double-precision stacks up to their crossover order, the LAPACK loop (SciPy's LAPACK per matrix from compiled code)
in single precision and past it. ``test_batched_large_orders`` times the factorizations at orders 96-384, where only
the loop runs. ``test_batched_lists`` times the list API (``hetlapack.batched``) on single-precision lists, on either
kernel. ``test_numpy_single_precision_stacks`` times NumPy's ``cholesky`` and ``qr`` as ``hetlapack.compat.install()``
gives them (computing in double, as NumPy does) against NumPy's own.
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest
import scipy
import scipy.linalg as sla
from threadpoolctl import threadpool_limits

import hetlapack
import hetlapack.linalg as la
from hetlapack import batched
from hetlapack.compat import numpy_linalg
from hetlapack.contract.originals import numpy_functions
from hetlapack.testing.matrices import random_matrix

QUICK = os.environ.get("HETLAPACK_BENCH_QUICK") == "1"
SIZES = [4, 16] if QUICK else [2, 4, 8, 16, 32, 64]
BATCHES = [10_000] if QUICK else [10_000, 100_000]
DTYPES = [np.float64, np.float32, np.complex128]
MAX_INPUT_BYTES = 1 << 30
THREADS = 2


@functools.lru_cache(maxsize=1)
def copy_bandwidth(case: tuple) -> float:
    """Bytes per second of a large in-memory copy (read + write), the roofline's beta, best of five: read once per
    ``case``, right after its first peer (the peers of a case run one after another), so that its bound is of the
    same minute as its times. This VM's copy rate moved between runs and within one (16.5-37.8 GB/s in two runs on
    the 2-core AMD EPYC, stop 81)."""
    source = np.ones(1 << 26, dtype=np.uint8)
    target = np.empty_like(source)
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


@functools.lru_cache(maxsize=2)
def stack(kind: str, dtype: type, n: int, batch: int) -> np.ndarray:
    """A read-only stack of ``batch`` random (``kind='general'``) or Hermitian positive definite matrices of order
    ``n``."""
    a = random_matrix((batch, n, n), dtype, seed=n)
    if kind == "spd":
        a = a @ np.swapaxes(a, -1, -2).conj() / n + np.eye(n, dtype=dtype)
    a.flags.writeable = False
    return a


def _torch(name: str):
    """torch.linalg's ``name`` on its own thread pool, taking a tensor prepared outside the timing."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(THREADS)
    return lambda a: torch.from_numpy(a.copy()), getattr(torch.linalg, name)


def _jax(name: str, **options):
    """``jax.scipy.linalg``'s ``name``, jitted for the CPU, taking an array placed on the device outside the timing
    (the first call, before the timing, compiles it)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    function = jax.jit(functools.partial(getattr(jax.scipy.linalg, name), **options))
    return jax.device_put, lambda a: jax.block_until_ready(function(a))


def _ours(call, prepare=None):
    """``call`` as a user makes it: dispatch picks the path (:data:`EXPLAINED` records which in ``extra_info``).
    Forcing the batched path in a ``using`` block, as the benchmark did before, added that block's 7-10 us to each
    call (1 ns a matrix at 10^4)."""
    return lambda: (prepare or _same, call)


#: The function and keywords ``hetlapack.explain`` reads the plan of each factorization's call from.
EXPLAINED = {"cholesky": ("cholesky", {}), "lu": ("lu_factor", {}), "plu": ("lu", {}),
             "qr": ("qr", {"mode": "economic"}), "qr_pivoted": ("qr", {"mode": "economic", "pivoting": True})}


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _rhs(a) -> np.ndarray:
    """One right-hand side per matrix, shaped (batch, n, 1) as SciPy's batch rule reads a stack of columns."""
    return random_matrix((*a.shape[:-1], 1), a.dtype, seed=1)


def _factored(factor):
    """Prepare a solve: ``factor``'s output for the stack (SciPy's, which hetlapack's equals) and a right-hand side."""
    return lambda a: (factor(a), _rhs(a))


def _torch_solve(factor: str, solve):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(THREADS)
    return (lambda a: (getattr(torch.linalg, factor)(torch.from_numpy(a.copy())), torch.from_numpy(_rhs(a))),
            lambda operands: solve(torch, *operands))


#: For each operation and peer, a factory of ``(prepare, call)``: ``prepare`` converts the stack to the peer's
#: array type outside the timing, ``call`` factorizes it as that library returns it.
PEERS = {
    "cholesky": {"hetlapack": _ours(lambda a: la.cholesky(a, lower=True)),
                 "numpy": lambda: (_same, np.linalg.cholesky), "torch": lambda: _torch("cholesky"),
                 "jax": lambda: _jax("cholesky", lower=True),
                 "scipy": lambda: (_same, lambda a: sla.cholesky(a, lower=True))},
    "lu": {"hetlapack": _ours(la.lu_factor), "torch": lambda: _torch("lu_factor"), "jax": lambda: _jax("lu_factor"),
           "scipy": lambda: (_same, sla.lu_factor)},
    "plu": {"hetlapack": _ours(la.lu), "torch": lambda: _torch("lu"), "scipy": lambda: (_same, sla.lu)},
    "qr": {"hetlapack": _ours(lambda a: la.qr(a, mode="economic")), "numpy": lambda: (_same, np.linalg.qr),
           "torch": lambda: _torch("qr"), "jax": lambda: _jax("qr", mode="economic"),
           "scipy": lambda: (_same, lambda a: sla.qr(a, mode="economic"))},
    "qr_pivoted": {"hetlapack": _ours(lambda a: la.qr(a, mode="economic", pivoting=True)),
                   "scipy": lambda: (_same, lambda a: sla.qr(a, mode="economic", pivoting=True))},
    "cho_solve": {"hetlapack": _ours(lambda ops: la.cho_solve(*ops), _factored(sla.cho_factor)),
                  "torch": lambda: _torch_solve("cholesky", lambda torch, c, b: torch.cholesky_solve(b, c)),
                  "scipy": lambda: (_factored(sla.cho_factor), lambda ops: sla.cho_solve(*ops))},
    "lu_solve": {"hetlapack": _ours(lambda ops: la.lu_solve(*ops), _factored(sla.lu_factor)),
                 "torch": lambda: _torch_solve("lu_factor", lambda torch, f, b: torch.linalg.lu_solve(*f, b)),
                 "scipy": lambda: (_factored(sla.lu_factor), lambda ops: sla.lu_solve(*ops))},
}


#: Elements written per matrix for each operation's results (Q and R for QR, P, L and U for ``lu``), for the
#: roofline's byte count; a solve reads its factor and writes a column (not counted).
OUTPUT_MATRICES = {"cholesky": 1, "lu": 1, "plu": 3, "qr": 2, "qr_pivoted": 2, "cho_solve": 0, "lu_solve": 0}

#: Operations whose batched path is a LAPACK call per matrix (its cost per matrix, like SciPy's loop's, does not
#: depend on the batch), measured at the smaller batch only.
PER_MATRIX_OPS = frozenset({"qr_pivoted"})

CASES = [(op, peer) for op, peers in PEERS.items() for peer in peers]


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(("op", "peer"), CASES)
def test_batched(benchmark, op, peer, dtype, n, batch):
    itemsize = np.dtype(dtype).itemsize
    if batch * n * n * itemsize > MAX_INPUT_BYTES:
        pytest.skip("input larger than MAX_INPUT_BYTES")
    if (peer == "scipy" or op in PER_MATRIX_OPS) and batch != min(BATCHES):
        pytest.skip("a loop of LAPACK calls per matrix is measured at the smaller batch only")
    seconds = _measure(benchmark, op, peer, dtype, n, batch, rounds=3 if batch * n * n > 10**7 else 5)
    moved = batch * n * n * itemsize * (1 + OUTPUT_MATRICES[op])
    copy = copy_bandwidth((op, np.dtype(dtype).name, n, batch))
    benchmark.extra_info.update({
        "achieved_GBps": moved / seconds / 1e9,
        "bound_ns": moved / copy / batch * 1e9,
        "copy_GBps": copy / 1e9,
    })


#: Seconds of timed calls a case aims at, in at most ``MAX_ROUNDS`` rounds: the best of 5 calls of a fraction of a
#: millisecond is this noisy VM's, not the code's (2-core AMD EPYC: ``lu_factor``, float64, n = 2, B = 10^4 read 20
#: ns a matrix as the best of 5 rounds in a full run, 14.1 as the best of 200 calls in a script minutes later). The
#: rounds fill the target time whatever a call takes (the cap only stops calls under 25 us): on that VM every call
#: of a stretch of 0.1-0.5 s can take 0.25-0.85 ms more (numba's OpenMP thread waking slowly), and 50 rounds of a 60
#: us call, 3 ms, fell inside one (``cholesky`` float32 n = 2, B = 10^4: 35.5 ns a matrix in one run, 5.9 in the
#: next). Every peer of a case gets the same rule.
TARGET_SECONDS, MAX_ROUNDS = 0.25, 10_000


#: Seconds each case waits before its first call, so that the thread pools of the case before it have gone to sleep:
#: OpenBLAS's threads spin for about 0.1 s after a call (2^28 cycles), holding the cores that a case of sub-millisecond
#: calls is timed on (2-core Intel Xeon, quiet: ``lu`` float64, n = 2, B = 10^4 took 45.8 ns a matrix right after
#: SciPy's loop of complex LU at order 64, 11.1 on its own).
QUIET_SECONDS = 0.3


def _rounds(call, a, least: int) -> int:
    """Rounds for ``call`` on ``a``: at least ``least``, else as many as fill ``TARGET_SECONDS`` (up to
    ``MAX_ROUNDS``), from the time of one call (which also warms it up)."""
    start = time.perf_counter()
    call(a)
    once = time.perf_counter() - start
    return max(least, min(MAX_ROUNDS, int(TARGET_SECONDS / max(once, 1e-9))))


def _measure(benchmark, op: str, peer: str, dtype: type, n: int, batch: int, rounds: int) -> float:
    """Time ``peer``'s ``op`` on a stack of ``batch`` matrices of order ``n`` (best of at least ``rounds``, more for
    short calls: :func:`_rounds`; on ``THREADS`` BLAS threads), record the case and its ns per matrix in
    ``extra_info``, and return the best seconds."""
    prepare, call = PEERS[op][peer]()
    a = prepare(stack("spd" if op.startswith("cho") else "general", dtype, n, batch))
    benchmark.group = f"{op} {np.dtype(dtype).name} n={n} B={batch}"
    time.sleep(QUIET_SECONDS)
    with threadpool_limits(THREADS):
        call(a)
        benchmark.pedantic(call, args=(a,), rounds=_rounds(call, a, rounds), warmup_rounds=1)
    seconds = benchmark.stats.stats.min
    benchmark.extra_info.update({"op": f"{op} {np.dtype(dtype).name} B={batch}", "n": n, "peer": peer,
                                 "ns_per_matrix": seconds / batch * 1e9, "scipy": scipy.__version__})
    if peer == "hetlapack" and op in EXPLAINED:
        name, options = EXPLAINED[op]
        benchmark.extra_info["path"] = hetlapack.explain(name, a, **options).path
    return seconds


#: Orders and stack size of :func:`test_batched_large_orders`.
LARGE_SIZES = [96, 128] if QUICK else [96, 128, 256, 384]
LARGE_BATCH = 64 if QUICK else 200


@pytest.mark.parametrize("n", LARGE_SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(("op", "peer"), [(op, peer) for op in ("cholesky", "lu", "qr") for peer in PEERS[op]])
def test_batched_large_orders(benchmark, op, peer, dtype, n):
    """Stacks of matrices of orders 96-384 (200 of them), where each LAPACK call does enough work that only the
    threads sharing the matrices and SciPy's Python loop differ: the LAPACK loop against SciPy's loop, NumPy's and
    torch's."""
    _measure(benchmark, op, peer, dtype, n, LARGE_BATCH, rounds=3)


#: Orders and list lengths of :func:`test_batched_lists`.
LIST_CASES = [(4, 10_000), (16, 5_000)] if QUICK else [(4, 10_000), (16, 5_000), (64, 1_000)]

#: The list API's calls (``hetlapack.batched``), with SciPy's loop over the same list as the peer.
LIST_CALLS = {"cholesky": (batched.cholesky, sla.cholesky), "lu_factor": (batched.lu_factor, sla.lu_factor),
              "qr": (batched.qr, sla.qr)}


@pytest.mark.parametrize(("n", "count"), LIST_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kernels", ["lapack", "interleaved", "scipy"])
@pytest.mark.parametrize("op", list(LIST_CALLS))
def test_batched_lists(benchmark, op, kernels, dtype, n, count):
    """Lists of single-precision matrices (``hetlapack.batched``, its Python bookkeeping included) on the LAPACK
    loop, which dispatch picks for them, on the interleaved kernels, and SciPy's loop over the list."""
    ours, scipys = LIST_CALLS[op]
    matrices = list(stack("spd" if op == "cholesky" else "general", dtype, n, count))
    if kernels == "scipy":
        def call():
            return [scipys(a) for a in matrices]
    else:
        def call():
            with hetlapack.using(kernels=kernels):
                return ours(matrices)
    benchmark.group = f"list {op} {np.dtype(dtype).name} n={n} count={count}"
    time.sleep(QUIET_SECONDS)
    with threadpool_limits(THREADS):
        call()
        benchmark.pedantic(call, rounds=3 if kernels == "scipy" else 5, warmup_rounds=1)
    benchmark.extra_info.update({"op": f"list {op} {np.dtype(dtype).name}", "n": n, "peer": kernels,
                                 "ns_per_matrix": benchmark.stats.stats.min / count * 1e9})


#: Orders and stack sizes of :func:`test_numpy_single_precision_stacks`.
NUMPY_CASES = [(4, 10_000), (16, 5_000)] if QUICK else [(4, 20_000), (16, 5_000), (64, 500), (128, 100)]

#: NumPy's functions as the shim gives them and as NumPy has them.
NUMPY_CALLS = {"cholesky": (numpy_linalg.cholesky, numpy_functions["cholesky"]),
               "qr": (numpy_linalg.qr, numpy_functions["qr"])}


@pytest.mark.parametrize(("n", "batch"), NUMPY_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("library", ["hetlapack", "numpy"])
@pytest.mark.parametrize("op", list(NUMPY_CALLS))
def test_numpy_single_precision_stacks(benchmark, op, library, dtype, n, batch):
    """Single-precision stacks through NumPy's ``cholesky`` and ``qr``: the shim, unforced (it computes in double
    precision and rounds, as NumPy does, on the batched kernels dispatch picks for double), and NumPy's own."""
    ours, numpys = NUMPY_CALLS[op]
    call = ours if library == "hetlapack" else numpys
    a = stack("spd" if op == "cholesky" else "general", dtype, n, batch)
    benchmark.group = f"numpy {op} {np.dtype(dtype).name} n={n} B={batch}"
    with threadpool_limits(THREADS):
        call(a)
        benchmark.pedantic(call, args=(a,), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update({"op": f"numpy {op} {np.dtype(dtype).name} B={batch}", "n": n, "peer": library,
                                 "ns_per_matrix": benchmark.stats.stats.min / batch * 1e9})
