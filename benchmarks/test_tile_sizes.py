"""Tile-size sweep of the tile factorizations beside one LAPACK call, to pick dispatch's tile table and crossover.

Each group is one (operation, dtype, n): SciPy's single call and the tile algorithm at each candidate tile.
Configure with ``HETLAPACK_SWEEP_OPS`` (potrf,getrf,geqrf), ``HETLAPACK_SWEEP_SIZES`` (500,1000,2000,4000),
``HETLAPACK_SWEEP_DTYPES`` (float64) and ``HETLAPACK_SWEEP_TILES`` (128,192,256,384,512).
Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_tile_sizes.py --benchmark-only``.
"""

import os

import numpy as np
import pytest
import scipy.linalg as sl

from hetlapack.algorithms.geqrf import geqrf
from hetlapack.algorithms.getrf import getrf
from hetlapack.algorithms.potrf import potrf
from hetlapack.testing import general, spd


def listed(name, default, cast=str):
    return [cast(v) for v in os.environ.get(name, default).split(",")]


OPS = listed("HETLAPACK_SWEEP_OPS", "potrf,getrf,geqrf")
SIZES = listed("HETLAPACK_SWEEP_SIZES", "500,1000,2000,4000", int)
DTYPES = listed("HETLAPACK_SWEEP_DTYPES", "float64")
TILES = listed("HETLAPACK_SWEEP_TILES", "128,192,256,384,512", int)

#: operation -> (matrix generator, SciPy's single call, tile algorithm)
OPERATIONS = {
    "potrf": (spd, lambda a: sl.cholesky(a, lower=True, overwrite_a=True, check_finite=False),
              lambda a, tile: potrf(a, lower=True, tile=tile)),
    "getrf": (general, lambda a: sl.lu_factor(a, overwrite_a=True, check_finite=False),
              lambda a, tile: getrf(a, tile=tile)),
    "geqrf": (general, lambda a: sl.qr(a, mode="r", overwrite_a=True, check_finite=False),
              lambda a, tile: geqrf(a, tile=tile)),
}

CASES = [(op, dtype, n) for op in OPS for dtype in DTYPES for n in SIZES]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-{c[1]}-n={c[2]}")
def case(request):
    op, dtype, n = request.param
    return op, np.asfortranarray(OPERATIONS[op][0](n, dtype=np.dtype(dtype))), n


def run(benchmark, function, a):
    benchmark.pedantic(function, setup=lambda: ((np.array(a, order="F"),), {}), rounds=max(2, 4000 // a.shape[0]),
                       warmup_rounds=1)


def test_scipy_single_call(benchmark, case):
    op, a, n = case
    benchmark.group = f"{op} {a.dtype} n={n}"
    run(benchmark, OPERATIONS[op][1], a)


@pytest.mark.parametrize("tile", TILES)
def test_tile_algorithm(benchmark, case, tile):
    op, a, n = case
    if tile >= n:
        pytest.skip("one tile is the single call")
    benchmark.group = f"{op} {a.dtype} n={n}"
    run(benchmark, lambda c: OPERATIONS[op][2](c, tile), a)
