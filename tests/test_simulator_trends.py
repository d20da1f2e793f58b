"""The simulator reproduces the seeds' published trends (direction and rough size; every number a prediction)."""

import math

import pytest

from hetlapack.perf.simulator import simulate, simulate_distributed, tune_two_level

pytestmark = pytest.mark.own_machinery

PUBLISHED_6_K20C_CHOLESKY_GFLOPS = 5100.0  # seed 000 §7.2, n = 60,000
PUBLISHED_100_NODE_CHOLESKY_GFLOPS = 75000.0  # seed 003 §5.4, Keeneland


@pytest.mark.parametrize("op", ["cholesky", "qr"])
def test_hgdd_scales_where_the_cyclic_layout_is_held_back_by_the_slow_device(op):
    """Seed 000 Fig. 14-17: adding the K20-beta to K20c + Phi gives nothing with 1-D block-column cyclic columns;
    HGDD scales, and gains of the order of 200-300 GFLOP/s."""
    rate = {(devices, layout): simulate(op, 30000, f"sandybridge:16,{devices}", layout=layout, tile=960).gflops
            for devices in ("k20c,phi", "k20c,phi,k20beta") for layout in ("cyclic", "hgdd")}
    assert rate["k20c,phi,k20beta", "cyclic"] < 1.05 * rate["k20c,phi", "cyclic"]
    assert rate["k20c,phi,k20beta", "hgdd"] > 1.15 * rate["k20c,phi", "hgdd"]
    assert 100 < rate["k20c,phi", "hgdd"] - rate["k20c,phi", "cyclic"] < 400
    assert rate["k20c,phi,k20beta", "hgdd"] - rate["k20c,phi,k20beta", "cyclic"] > 300


def test_capability_placement_lets_the_cpu_add_updates_and_panel_priority_helps():
    """Seed 000 Fig. 12: capability weights give a 16-core Sandy Bridge some updates, ~80-100 GFLOP/s more with
    one GPU; §6.4: panel priorities add ~5%. As in the seed's runtime, each core is a worker (``/15``: one core
    drives the GPU)."""
    owner = simulate("cholesky", 30000, "sandybridge:16/15,k20c", tile=960)
    capability = simulate("cholesky", 30000, "sandybridge:16/15,k20c", tile=960, placement="capability")
    assert 50 < capability.gflops - owner.gflops < 250
    assert capability.utilisation["sandybridge"] > 5 * owner.utilisation["sandybridge"]
    prioritised = simulate("cholesky", 20000, "sandybridge:16/15,k20c", tile=960, placement="capability")
    unprioritised = simulate("cholesky", 20000, "sandybridge:16/15,k20c", tile=960, placement="capability",
                             priorities=False)
    assert 1.01 < prioritised.gflops / unprioritised.gflops < 1.10


def test_hybrid_beats_gpu_only_on_a_server_and_gpu_only_is_more_energy_efficient():
    """Seed 001 Fig. 4-5: QR n=16,000 on K40c + 16 Sandy Bridge cores: the hybrid path is ~10-15% faster; the
    GPU-only path reaches ~4 GFLOP/s/W against the hybrid's ~3."""
    hybrid = simulate("qr", 16000, "sandybridge:16,k40c", tile=256)
    gpu_only = simulate("qr", 16000, "sandybridge:16,k40c", tile=256, path="gpu")
    assert 1.05 < gpu_only.seconds / hybrid.seconds < 1.35
    assert 1.1 < gpu_only.gflops_per_watt / hybrid.gflops_per_watt < 1.6
    assert gpu_only.gflops_per_watt == pytest.approx(4.0, rel=0.35)
    assert hybrid.gflops_per_watt == pytest.approx(3.0, rel=0.35)


@pytest.mark.parametrize("n", [2000, 4000, 8000])
def test_on_a_jetson_the_hybrid_path_collapses_and_gpu_only_wins(n):
    """Seed 001 Fig. 6: with a 30:1 GPU:CPU ratio (Jetson TK1, single precision) the ARM panel throttles the
    hybrid path; the GPU-only path wins."""
    hybrid = simulate("qr", n, "tk1-arm:4,tk1-gpu", tile=128, dtype="float32")
    gpu_only = simulate("qr", n, "tk1-arm:4,tk1-gpu", tile=128, dtype="float32", path="gpu")
    assert hybrid.seconds > 1.5 * gpu_only.seconds
    assert gpu_only.gflops_per_watt > hybrid.gflops_per_watt


@pytest.mark.parametrize("cores,gpus", [(3, 1), (6, 2), (9, 3)])
def test_two_level_tiles_with_the_host_slice_formula_keep_imbalance_within_5_percent(cores, gpus):
    """Seed 003 Fig. 12: imbalance max/avg <= 5% in most cases (not with too few top-level tiles)."""
    devices, tile = f"westmere:{cores},m2070:{gpus}", 960
    for tiles_per_gpu in (9, 12):
        prediction = simulate("cholesky", tiles_per_gpu * tile * gpus, devices, tile=tile, layout="two-level")
        assert prediction.imbalance <= 1.05
    host_cols, ratio = tune_two_level("cholesky", devices, tile)
    assert ratio <= 1.05 and 0 < host_cols < tile // 4


def test_six_k20c_reach_the_published_cholesky_rate():
    """Seed 000 §7.2: 5.1 TFLOP/s for a 60,000 Cholesky on 6 K20c (plus the host)."""
    prediction = simulate("cholesky", 60000, "sandybridge:16,k20c:6", tile=960)
    assert prediction.gflops == pytest.approx(PUBLISHED_6_K20C_CHOLESKY_GFLOPS, rel=0.25)


@pytest.mark.slow
def test_distributed_cholesky_scales_weakly_to_100_keeneland_nodes():
    """Seed 003 Fig. 13: weak scaling to 100 nodes (12 cores + 3 M2070 each) near-linear, 75 TFLOP/s."""
    per_node_order = 34560
    one = simulate_distributed(per_node_order, 1, tile=4320)
    hundred = simulate_distributed(per_node_order * 10, 100, tile=4320)
    assert hundred.gflops == pytest.approx(PUBLISHED_100_NODE_CHOLESKY_GFLOPS, rel=0.25)
    assert hundred.gflops / 100 > 0.7 * one.gflops
    assert math.isclose(hundred.flops, (per_node_order * 10) ** 3 / 3)
