"""Benchmark-session setup: quick sizes for ``HETLAPACK_BENCH_QUICK=1``, GFLOP/s in every single-matrix row, and
the machine's head (CPU, OpenBLAS kernels, this run's DGEMM) in the JSON's ``hetlapack_machine``.

Groups name their operation and ``n=<n>`` (``"potrf n=1000"``, ``"gpu host qr n=4000"``); for single-matrix
factorizations (not stacks, ``B=``, nor lists, ``count=``) the JSON's ``extra_info`` gets ``n``, ``op`` and
``gflops`` (LAWN 41 flop counts over the best time), which ``hetlapack bench`` plots.
"""

import os
import re
import time

import numpy as np
import pytest

from hetlapack.perf import model, rates
from hetlapack.hardware import detect

QUICK = os.environ.get("HETLAPACK_BENCH_QUICK") == "1"
if QUICK:
    os.environ.setdefault("HETLAPACK_BENCH_SIZES", "500,1000")
    os.environ.setdefault("HETLAPACK_BENCH_MPI_SIZES", "1000")
# the batched rows time the compiled kernels: one missing from numba's cache compiles in the first (untimed) call,
# not in a background process while SciPy's function answers the timed ones
os.environ.setdefault("HETLAPACK_BATCHED_COMPILE", "inline")

_LAPACK_OP = {"potrf": "potrf", "cholesky": "potrf", "getrf": "getrf", "lu": "getrf", "lu_factor": "getrf",
              "geqrf": "geqrf", "qr": "geqrf"}


def _flops(group: str, n: int) -> float | None:
    words = group.split()
    if words[:1] == ["gpu"]:  # "gpu host qr n=4000", "gpu single cholesky n=4000"
        words = words[2:]
    op = _LAPACK_OP.get(words[0]) if words else None
    if op is None:
        return None
    factor = 2.0 if "economic" in group else 1.0
    return factor * rates.flops(op, n, n)


def pytest_report_header(config) -> list[str]:
    """Every benchmark table's head: the CPU, BLAS and its kernels (test_dgemm.py gives the same run's DGEMM), and
    the variables of :data:`PINNING` the run set."""
    return [*str(detect()).splitlines()[:2], f"kernels pinned by: {_pinned() or 'nothing (each library its own)'}"]


#: Variables that pin a library to other kernels than the host's: OpenBLAS's (a benchmark command unsets these),
#: numba's target (our compiled kernels), torch's, MKL's and XLA's instruction sets (set to time AVX2 code on an
#: AVX-512 CPU).
PINNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "ATEN_CPU_CAPABILITY",
           "MKL_ENABLE_INSTRUCTIONS", "XLA_FLAGS")


def _pinned() -> dict[str, str]:
    """The variables of ``PINNING`` this run set."""
    return {name: os.environ[name] for name in PINNING if name in os.environ}


@pytest.fixture
def record_prediction(benchmark):
    """Call after timing a float64 factorization: stores what the cost model predicted for it (``predicted_s``
    and ``measured_over_predicted`` in ``extra_info``): for the tile path the simulator over this machine's
    calibrated CPU (what ``hetlapack.explain`` and ``hetlapack simulate --devices cpu`` report), for SciPy's call
    the host model. Dispatch decides by these predictions, so this is the evidence that it decides right."""
    def record(op: str, n: int, tile: int | None = None) -> None:
        dtype = np.dtype(np.float64)
        predicted = model.predict_tiled(op, n, n, dtype, tile) if tile else model.predict_host(op, n, n, dtype)
        measured = benchmark.stats.stats.min
        benchmark.extra_info.update(predicted_s=predicted, measured_over_predicted=measured / predicted)
    return record


def _dgemm_gflops(n: int = 2000, repeats: int = 3) -> float:
    """This run's DGEMM rate (BLAS on every core, best of ``repeats``), for the head of every table."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    c = np.empty((n, n))
    best = np.inf
    for _ in range(repeats + 1):
        start = time.perf_counter()
        np.matmul(a, b, out=c)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def machine_head() -> dict:
    """What heads every benchmark table: the CPU, each OpenBLAS's kernels (threadpoolctl's ``architecture``), the
    variables that would pin them, and this run's DGEMM."""
    hardware = detect()
    return {"cpu": hardware.cpu_model, "cores": hardware.cores, "blas": hardware.blas_summary(), "pinned": _pinned(),
            "dgemm_gflops": _dgemm_gflops()}


def _case(item: pytest.Item) -> tuple:
    """What a benchmark compares its peers on: the test and its parameters but ``peer``; a test without peers is a
    case of its own."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "peer" not in params:
        return (item.nodeid,)
    return (str(item.path), item.originalname, tuple((name, repr(value)) for name, value in params.items()
                                                     if name != "peer"))


def pytest_collection_modifyitems(session, config, items):
    """Each case's peers run one after another, in the order they were collected: a ratio then compares times taken
    within seconds of each other. Collected as parametrized, a peer's whole series ran before the next peer's, minutes
    apart on a VM whose speed moves from minute to minute (2-core AMD EPYC, a full batched run: ``cholesky``
    complex128, n = 8, 10^4 matrices, 216 ns a matrix there, 79-102 in runs of that case, or of our series, alone)."""
    first: dict[tuple, int] = {}
    for index, item in enumerate(items):
        first.setdefault(_case(item), index)
    items.sort(key=lambda item: first[_case(item)])


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["hetlapack_machine"] = machine_head()
    for bench in output_json["benchmarks"]:
        group = bench.get("group") or ""
        match = re.search(r"\bn=(\d+)", group)
        if match is None or "B=" in group or "count=" in group:  # stacks and lists: not one matrix's flops
            continue
        n = int(match.group(1))
        flops = _flops(group, n)
        if flops is None:
            continue
        bench.setdefault("extra_info", {}).update(
            n=n, op=re.sub(r"\s*n=\d+", "", group), gflops=flops / bench["stats"]["min"] / 1e9)
