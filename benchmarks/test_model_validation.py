"""Is the model right here? The real CPU tile path beside the simulator's prediction for it.

Each row times a tile factorization at dispatch's tile size and stores ``predicted_s`` (the simulator on this
machine's calibrated CPU, what ``hetlapack.explain`` and ``hetlapack simulate --devices cpu`` report) and
``measured_over_predicted`` in ``extra_info``. Calibrate first on a quiet machine: ``hetlapack calibrate``.

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_model_validation.py --benchmark-only``.
Sizes: ``HETLAPACK_BENCH_SIZES`` (default 2000,4000,8000).
"""

import os

import numpy as np
import pytest

from hetlapack.algorithms.geqrf import geqrf
from hetlapack.algorithms.getrf import getrf
from hetlapack.algorithms.potrf import potrf
from hetlapack.dispatch import model
from hetlapack.testing import general, spd

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_SIZES", "2000,4000,8000").split(",")]
FACTOR = {"potrf": lambda a, tile: potrf(a, lower=True, tile=tile), "getrf": lambda a, tile: getrf(a, tile=tile),
          "geqrf": lambda a, tile: geqrf(a, tile=tile)}


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"n={n}")
@pytest.mark.parametrize("op", sorted(FACTOR))
def test_measured_against_predicted(benchmark, op, n):
    a = np.asfortranarray(spd(n) if op == "potrf" else general(n))
    tile = model.tile_size(op, n)
    predicted = model.predict_tiled(op, n, n, a.dtype, tile)
    benchmark.group = f"{op} n={n} model"
    benchmark.pedantic(FACTOR[op], setup=lambda: ((np.array(a, order="F"), tile), {}),
                       rounds=max(3, 16000 // n), warmup_rounds=1)
    measured = benchmark.stats.stats.min
    benchmark.extra_info.update(tile=tile, predicted_s=predicted, measured_over_predicted=measured / predicted)
