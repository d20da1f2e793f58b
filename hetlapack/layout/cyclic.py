"""1-D block-column cyclic distribution (seed 000 §6.5, seed 003 §3.4): tile column ``j`` on device ``j mod p``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockColumnCyclic:
    """Deals tile columns round-robin over ``ndevices`` devices; every tile of a column has one owner, so the
    row interchanges of LU and the reflector updates of QR never cross devices (seed 002 §2.4)."""

    ndevices: int

    def __post_init__(self) -> None:
        if self.ndevices < 1:
            raise ValueError(f"a distribution needs at least one device, got {self.ndevices}")

    def owner(self, tile_row: int, tile_col: int) -> int:
        """Index of the device that owns tile ``(tile_row, tile_col)``."""
        return tile_col % self.ndevices
