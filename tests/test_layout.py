"""The 1-D block-column cyclic distribution used by owner-computes placement."""

import pytest

from hetlapack.layout import BlockColumnCyclic


def test_columns_are_dealt_round_robin_and_rows_do_not_matter():
    layout = BlockColumnCyclic(3)
    assert [layout.owner(5, j) for j in range(5)] == [0, 1, 2, 0, 1]
    assert {layout.owner(i, 4) for i in range(6)} == {1}


def test_one_device_owns_everything():
    assert {BlockColumnCyclic(1).owner(i, j) for i in range(3) for j in range(3)} == {0}


def test_zero_devices_is_a_value_error():
    with pytest.raises(ValueError, match="at least one device"):
        BlockColumnCyclic(0)


@pytest.mark.parametrize("op", ["potrf", "geqrf"])
def test_the_runtime_runs_two_level_tiles_with_the_host_slice_on_the_cpu(op):
    """Seed 003 §3.4-3.6 on the real runtime: big tiles for 2 emulated accelerators, the host slice on the CPU."""
    import numpy as np
    import scipy.linalg as sl

    from hetlapack.algorithms.geqrf import householder_tiles, insert_geqrf
    from hetlapack.algorithms.potrf import insert_potrf
    from hetlapack.devices import EmulatedDevice
    from hetlapack.layout import TwoLevelColumns, host_slice
    from hetlapack.runtime import OwnerComputes, Runtime, Trace
    from hetlapack.testing import general, spd

    n, tile = 150, 48
    layout = TwoLevelColumns(tile, host_slice(tile, core_rate=10.0, cores=2, gpu_rate=30.0, gpus=2), gpus=2)
    bounds = layout.bounds(n, small_tile=8)
    assert layout.host_cols == 12 and bounds[:4] == [0, 6, 12, 48]
    a = np.asfortranarray(spd(n) if op == "potrf" else general(n))
    reference = a.copy()
    trace = Trace()
    placement = OwnerComputes(layout.tile_owner(bounds), panels_on_cpu=False)
    with Runtime(["cpu", EmulatedDevice(0), EmulatedDevice(1)], placement, trace) as rt:
        A = rt.matrix(a, bounds)
        if op == "potrf":
            insert_potrf(rt, A, lower=True)
        else:
            tau = np.zeros((n, 1), order="F")
            insert_geqrf(rt, A, *householder_tiles(A, tau, np.zeros((tile, n), order="F")))
    if op == "potrf":
        assert np.allclose(np.tril(a), sl.cholesky(reference, lower=True))
    else:
        assert np.allclose(np.abs(np.diag(a)), np.abs(np.diag(sl.qr(reference, mode="r")[0])))
    host_columns = {j for j in range(len(bounds) - 1) if layout.owner(0, bounds[j]) == 0}
    for event in trace.events:
        column = int(event.tiles.split(",")[1].split(":")[0].rstrip("]"))
        assert (event.device == "cpu") == (column in host_columns), event
