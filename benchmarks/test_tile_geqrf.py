"""Tile QR on the runtime beside ``scipy.linalg.qr`` (float64; mode 'r' and 'economic'; ratios within groups).

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_tile_geqrf.py --benchmark-only``.
Sizes: ``HETLAPACK_BENCH_SIZES`` (default 1000,2000,4000,8000); ``HETLAPACK_BENCH_TILE`` overrides dispatch's tile.
"""

import os

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hla
from hetlapack.algorithms.geqrf import geqrf, orgqr
from hetlapack.perf.model import default_tile
from hetlapack.testing import general

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_SIZES", "1000,2000,4000,8000").split(",")]
def tile_for(n):
    """Dispatch's tile for order ``n`` (as ``hetlapack calibrate`` timed it, else the table from
    benchmarks/test_tile_sizes.py), unless overridden."""
    return int(os.environ.get("HETLAPACK_BENCH_TILE", default_tile("geqrf", n)))


def run(benchmark, function, a):
    benchmark.pedantic(function, setup=lambda: ((np.array(a, order="F"),), {}), rounds=max(2, 8000 // a.shape[0]),
                       warmup_rounds=1)


def r_only(a, tile):
    """``qr(a, mode='r')`` from the tile kernels."""
    geqrf(a, tile=tile)
    return np.triu(a[: min(a.shape)])


def economic(a, tile):
    """``qr(a, mode='economic')`` from the tile kernels: R and the first min(m, n) columns of Q."""
    tau = geqrf(a, tile=tile)
    return orgqr(a, tau, ncols=len(tau), tile=tile), np.triu(a[: len(tau)])


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"n={n}")
def matrix(request):
    return np.asfortranarray(general(request.param))


def test_scipy_qr_r(benchmark, matrix, record_prediction):
    benchmark.group = f"geqrf mode=r n={matrix.shape[0]}"
    run(benchmark, lambda a: sl.qr(a, mode="r", overwrite_a=True, check_finite=False), matrix)
    record_prediction("geqrf", matrix.shape[0])


def test_hetlapack_tile_geqrf_r(benchmark, matrix, record_prediction):
    n = matrix.shape[0]
    benchmark.group = f"geqrf mode=r n={n}"
    benchmark.extra_info["tile"] = tile_for(n)
    run(benchmark, lambda a: r_only(a, tile_for(n)), matrix)
    record_prediction("geqrf", n, tile_for(n))


def test_scipy_qr_economic(benchmark, matrix):
    benchmark.group = f"geqrf mode=economic n={matrix.shape[0]}"
    run(benchmark, lambda a: sl.qr(a, mode="economic", overwrite_a=True, check_finite=False), matrix)


def test_hetlapack_tile_geqrf_orgqr_economic(benchmark, matrix):
    n = matrix.shape[0]
    benchmark.group = f"geqrf mode=economic n={n}"
    benchmark.extra_info["tile"] = tile_for(n)
    run(benchmark, lambda a: economic(a, tile_for(n)), matrix)


@pytest.mark.parametrize("mode", ["r", "economic"])
def test_hetlapack_dispatched_qr(benchmark, matrix, mode):
    """What ``hetlapack.linalg.qr`` users get: the path dispatch picks (``extra_info['path']``)."""
    benchmark.group = f"geqrf mode={mode} n={matrix.shape[0]}"
    benchmark.extra_info["path"] = hetlapack.explain("qr", matrix, mode=mode).path
    run(benchmark, lambda a: hla.qr(a, mode=mode, overwrite_a=True, check_finite=False), matrix)
