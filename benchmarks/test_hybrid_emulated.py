"""The hybrid path over the CPU and 2 emulated accelerators beside the pure-CPU tile path (float64).

The emulated accelerators compute with the host's BLAS on the host's cores, so this measures the cost of the
accelerator machinery (separate memory spaces, tile transfers, panels pinned to the CPU, HGDD placement), not
any speed-up: the issue's target is "not slower than 1.2x the CPU tile path". Speed on real heterogeneous
hardware is not measured here. The out-of-core case caps each accelerator's memory at a quarter of the matrix,
so tiles stream through it (evicted and written back as the factorization goes).

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_hybrid_emulated.py --benchmark-only``.
Sizes: ``HETLAPACK_BENCH_SIZES`` (default 1000,2000,4000); ``HETLAPACK_BENCH_TILE`` overrides the tile.
"""

import os

import numpy as np
import pytest

from hetlapack.algorithms.geqrf import geqrf
from hetlapack.algorithms.getrf import getrf
from hetlapack.algorithms.potrf import potrf
from hetlapack.devices import EmulatedDevice
from hetlapack.perf import model, simulator
from hetlapack.runtime.placement import two_level, two_level_devices
from hetlapack.testing import general, spd

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_SIZES", "1000,2000,4000").split(",")]
#: Tiles of the CPU tile path per operation and order (benchmarks/test_tile_*.py), used by both sides.
TILE = {"potrf": {1000: 192, 2000: 256, 4000: 384}, "getrf": {1000: 128, 2000: 192, 4000: 256},
        "geqrf": {1000: 128, 2000: 192, 4000: 256}}
OPS = {
    "potrf": (spd, lambda a, tile, devices, placement: potrf(a, lower=True, tile=tile, devices=devices,
                                                            placement=placement)),
    "getrf": (general, lambda a, tile, devices, placement: getrf(a, tile=tile, devices=devices, placement=placement)),
    "geqrf": (general, lambda a, tile, devices, placement: geqrf(a, tile=tile, devices=devices, placement=placement)),
}


def tile_for(op, n):
    return int(os.environ.get("HETLAPACK_BENCH_TILE", TILE[op].get(n, 256)))


@pytest.fixture(scope="module", params=[(op, n) for op in OPS for n in SIZES], ids=lambda p: f"{p[0]}-n={p[1]}")
def case(request):
    op, n = request.param
    return op, np.asfortranarray(OPS[op][0](n))


def run(benchmark, case, devices_factory, label, placement="owner", tile=None):
    op, matrix = case
    n = matrix.shape[0]
    tile = tile or tile_for(op, n)
    benchmark.group = f"{op} n={n}"
    benchmark.extra_info.update(tile=tile if isinstance(tile, int) else "two-level", devices=label)
    factor = OPS[op][1]

    def setup():
        return (np.array(matrix, order="F"), devices_factory()), {}

    benchmark.pedantic(lambda a, devices: factor(a, tile, devices, placement), setup=setup,
                       rounds=max(3, 12000 // n), warmup_rounds=1)


def test_cpu_tile_path(benchmark, case):
    run(benchmark, case, lambda: None, "cpu")


def test_hybrid_cpu_and_two_emulated(benchmark, case):
    run(benchmark, case, lambda: ["cpu", EmulatedDevice(0), EmulatedDevice(1)], "cpu+emulated:0+emulated:1")


def test_hybrid_two_level_tiles(benchmark, case):
    """Seed 003's two-level layout: the CPU's cores take each big tile's host slice, with the slice dispatch would
    use (the formula over the calibrated rates)."""
    op, matrix = case
    names = ["cpu", EmulatedDevice(0), EmulatedDevice(1)]
    tile, n = tile_for(op, matrix.shape[0]), matrix.shape[0]
    placement, bounds = two_level(n, tile, simulator.two_level_host_cols(model.modeled(tuple(names)), tile), 2)
    devices = lambda: two_level_devices(["cpu", EmulatedDevice(0), EmulatedDevice(1)])  # noqa: E731
    run(benchmark, case, devices, "two-level: cpu slices + emulated:0 + emulated:1", placement, bounds)


def test_hybrid_out_of_core_a_quarter_of_the_matrix_per_accelerator(benchmark, case):
    quarter = case[1].nbytes // 4
    devices = lambda: ["cpu", *(EmulatedDevice(i, memory_bytes=quarter) for i in range(2))]  # noqa: E731
    run(benchmark, case, devices, "cpu+2 emulated, each holding a quarter of the matrix")
