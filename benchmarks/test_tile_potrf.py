"""Tile Cholesky on the runtime beside ``scipy.linalg.cholesky`` (float64; ratios within each group).

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_tile_potrf.py --benchmark-only``.
Sizes: ``HETLAPACK_BENCH_SIZES`` (default 1000,2000,4000,8000); ``HETLAPACK_BENCH_TILE`` overrides dispatch's tile.
"""

import os

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hla
from hetlapack.algorithms.potrf import potrf
from hetlapack.perf.model import default_tile
from hetlapack.testing import spd

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_SIZES", "1000,2000,4000,8000").split(",")]
def tile_for(n):
    """Dispatch's tile for order ``n`` (as ``hetlapack calibrate`` timed it, else the table from
    benchmarks/test_tile_sizes.py), unless overridden."""
    return int(os.environ.get("HETLAPACK_BENCH_TILE", default_tile("potrf", n)))


def run(benchmark, function, a):
    benchmark.pedantic(function, setup=lambda: ((np.array(a, order="F"),), {}), rounds=max(2, 12000 // a.shape[0]),
                       warmup_rounds=1)


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"n={n}")
def matrix(request):
    return np.asfortranarray(spd(request.param))


def test_scipy_cholesky(benchmark, matrix, record_prediction):
    benchmark.group = f"potrf n={matrix.shape[0]}"
    run(benchmark, lambda a: sl.cholesky(a, lower=True, overwrite_a=True, check_finite=False), matrix)
    record_prediction("potrf", matrix.shape[0])


def test_hetlapack_tile_potrf(benchmark, matrix, record_prediction):
    n = matrix.shape[0]
    benchmark.group = f"potrf n={n}"
    benchmark.extra_info["tile"] = tile_for(n)
    run(benchmark, lambda a: potrf(a, lower=True, tile=tile_for(n)), matrix)
    record_prediction("potrf", n, tile_for(n))


def test_hetlapack_dispatched_cholesky(benchmark, matrix):
    """What ``hetlapack.linalg.cholesky`` users get: the path dispatch picks (``extra_info['path']``)."""
    benchmark.group = f"potrf n={matrix.shape[0]}"
    benchmark.extra_info["path"] = hetlapack.explain("cholesky", matrix).path
    run(benchmark, lambda a: hla.cholesky(a, lower=True, overwrite_a=True, check_finite=False), matrix)
