"""The machine's DGEMM rate in the same run as the factorizations, the yardstick for "% of DGEMM".

Run with the tile suites: ``pytest benchmarks/test_dgemm.py benchmarks/test_tile_potrf.py ... --benchmark-only``;
``extra_info["gflops"]`` is ``2 n^3`` over the best time (BLAS on every core).
Sizes: ``HETLAPACK_BENCH_SIZES`` (default 1000,2000,4000,8000).
"""

import os

import numpy as np
import pytest

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_SIZES", "1000,2000,4000,8000").split(",")]


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"n={n}")
def test_numpy_dgemm(benchmark, n):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    c = np.empty((n, n))
    benchmark.group = f"dgemm n={n}"
    benchmark.pedantic(np.matmul, args=(a, b), kwargs={"out": c}, rounds=max(3, 8000 // n), warmup_rounds=1)
    benchmark.extra_info.update(n=n, gflops=2 * n**3 / benchmark.stats.stats.min / 1e9)
