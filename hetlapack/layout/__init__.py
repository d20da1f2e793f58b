"""Tiles and their distribution over devices. A layout is an object with ``owner(tile_row, tile_col) -> device
index`` (as SLATE's ``func::`` distributions), so a new distribution is one small class."""

from typing import Protocol

from .cyclic import BlockColumnCyclic
from .hgdd import WeightedColumns
from .two_level import TWO_LEVEL_OPS, TwoLevelColumns, host_slice, imbalance, tune_host_slice, two_level_unavailable

__all__ = ["TWO_LEVEL_OPS", "BlockColumnCyclic", "Layout", "TwoLevelColumns", "WeightedColumns", "host_slice",
           "imbalance", "tune_host_slice", "two_level_unavailable"]


class Layout(Protocol):
    """What the runtime asks of a layout: the index of the device that owns a tile."""

    def owner(self, tile_row: int, tile_col: int) -> int: ...
