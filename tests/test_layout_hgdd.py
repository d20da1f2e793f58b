"""HGDD (capability-weighted columns, smoothly interleaved) and two-level hybrid tiles with the host slice."""

import pytest

from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.layout import (
    TwoLevelColumns,
    WeightedColumns,
    host_slice,
    imbalance,
    tune_host_slice,
)
from hetlapack.runtime import Runtime
from hetlapack.runtime.placement import OwnerComputes

pytestmark = pytest.mark.own_machinery


def test_10_8_5_gives_each_device_its_share_in_every_period_window():
    layout = WeightedColumns((10, 8, 5))
    owners = [layout.owner(0, j) for j in range(5 * 23)]
    assert layout.period == 23 and layout.shares(23) == [10, 8, 5]
    for start in range(len(owners) - 23):
        window = owners[start:start + 23]
        assert [window.count(d) for d in range(3)] == [10, 8, 5]


def test_10_8_5_is_interleaved_not_in_runs():
    layout = WeightedColumns((10, 8, 5))
    owners = [layout.owner(0, j) for j in range(230)]
    for length in range(1, 24):
        for start in range(len(owners) - length):
            window = owners[start:start + length]
            for device, weight in enumerate((10, 8, 5)):
                assert abs(window.count(device) - length * weight / 23) < 2
    assert max(len(run) for run in "".join(map(str, owners)).replace("1", " ").replace("2", " ").split()) <= 2


def test_measured_rates_are_rounded_to_small_ratios_and_equal_weights_are_cyclic():
    assert WeightedColumns((41.3, 20.1)).shares(3) == [2, 1]
    assert [WeightedColumns((7.0, 7.0, 7.0)).owner(4, j) for j in range(6)] == [0, 1, 2, 0, 1, 2]
    assert {WeightedColumns((3, 1)).owner(i, 5) for i in range(8)} == {WeightedColumns((3, 1)).owner(0, 5)}


@pytest.mark.parametrize("weights", [(), (1.0, 0.0), (2.0, -1.0)])
def test_weights_must_be_positive(weights):
    with pytest.raises(ValueError, match="positive"):
        WeightedColumns(weights)


def test_owner_computes_deals_columns_to_accelerators_by_weight_and_pins_panels_to_the_cpu():
    cpu, a, b, c = CpuDevice(workers=1), EmulatedDevice(0), EmulatedDevice(1), EmulatedDevice(2)
    a.capability["blas3"], b.capability["blas3"], c.capability["blas3"] = 10.0, 8.0, 5.0
    placement = OwnerComputes()
    rt = Runtime([cpu, a, b, c], placement)
    assert placement.layout.shares(23) == [10, 8, 5] and placement.owners == (1, 2, 3)
    assert placement.panel_device == 0
    cyclic = OwnerComputes("cyclic")
    Runtime([cpu, a, b, c], cyclic)
    assert cyclic.layout.shares(6) == [2, 2, 2]
    alone = OwnerComputes()
    Runtime([EmulatedDevice(0), EmulatedDevice(1)], alone)
    assert alone.panel_device is None and alone.owners == (0, 1)
    rt.wait()
    with pytest.raises(ValueError, match="layout"):
        OwnerComputes("diagonal")


def test_host_slice_formula_and_its_extremes():
    assert host_slice(960, core_rate=10.0, cores=8, gpu_rate=300.0, gpus=2) == round(80 / 680 * 960)
    assert host_slice(64, core_rate=1.0, cores=1, gpu_rate=1e9, gpus=1) == 0
    assert host_slice(64, core_rate=1e9, cores=4, gpu_rate=1.0, gpus=1) == 64


def test_two_level_columns_give_each_top_tile_a_host_slice_and_deal_the_rest():
    layout = TwoLevelColumns(tile=8, host_cols=2, gpus=3)
    owners = [layout.owner(0, c) for c in range(32)]
    assert owners[:8] == [0, 0, 1, 1, 1, 1, 1, 1] and owners[8:16] == [0, 0] + [2] * 6 and owners[24:26] == [0, 0]
    assert owners[26:32] == [1] * 6 and layout.ndevices == 4
    with pytest.raises(ValueError):
        TwoLevelColumns(tile=8, host_cols=9, gpus=1)


def test_imbalance_is_max_over_average():
    assert imbalance([1.0, 1.0, 1.0]) == 1.0
    assert imbalance([3.0, 1.0]) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        imbalance([])


def test_tuning_the_host_slice_lowers_the_imbalance_in_a_few_trials():
    n, tile, rates = 2048, 128, [40.0, 400.0, 400.0]
    start = host_slice(tile, core_rate=5.0, cores=8, gpu_rate=400.0, gpus=2) // 2
    measured = []

    def measure(bh):
        measured.append(bh)
        return imbalance(TwoLevelColumns(tile, bh, 2).loads(n, rates))

    best, ratio = tune_host_slice(start, tile, measure, trials=3)
    assert ratio < measure(start) and len(measured) <= 1 + 2 * 3 + 1
    assert 0 <= best <= tile
