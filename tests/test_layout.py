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
