"""HGDD, hardware-guided data distribution (seed 000 §6.6): tile columns dealt in proportion to capability.

Devices of weights 10:8:5 get 10, 8 and 5 of every 23 tile columns, interleaved smoothly (each device's share
holds in every window of columns, not in runs), by the smooth weighted round robin: each column, every device
earns its weight in credit and the richest device takes the column and pays the total weight. Every tile of a
column has one owner, as in the 1-D block-column cyclic layout it generalises (equal weights give exactly
``j mod p``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction


def _ratios(weights: Sequence[float], resolution: int) -> tuple[int, ...]:
    """Positive integers proportional to ``weights``, each relative weight rounded to a fraction with a
    denominator of at most ``resolution``."""
    if not weights or any(w <= 0 for w in weights):
        raise ValueError(f"capability weights must be positive, got {list(weights)}")
    top = max(weights)
    fractions = [max(Fraction(w / top).limit_denominator(resolution), Fraction(1, resolution)) for w in weights]
    common = math.lcm(*(f.denominator for f in fractions))
    return tuple(int(f * common) for f in fractions)


@dataclass(frozen=True)
class WeightedColumns:
    """Tile column ``j`` goes to device ``owner(_, j)``, shares proportional to ``weights``, smoothly interleaved.

    ``weights`` are rounded to integer ratios with at most ``resolution`` steps (e.g. measured rates of
    41.3 and 20.1 GFLOP/s become about 2:1).
    """

    weights: tuple[float, ...]
    resolution: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", tuple(float(w) for w in self.weights))
        object.__setattr__(self, "_pattern", self._deal(_ratios(self.weights, self.resolution)))

    @property
    def ndevices(self) -> int:
        """How many devices the columns are dealt to."""
        return len(self.weights)

    @staticmethod
    def _deal(ratios: tuple[int, ...]) -> tuple[int, ...]:
        total = sum(ratios)
        credit = [0] * len(ratios)
        pattern = []
        for _ in range(total):
            for device, weight in enumerate(ratios):
                credit[device] += weight
            richest = max(range(len(ratios)), key=lambda d: credit[d])
            credit[richest] -= total
            pattern.append(richest)
        return tuple(pattern)

    @property
    def period(self) -> int:
        """Columns after which the pattern repeats (the sum of the integer ratios)."""
        return len(self._pattern)

    def owner(self, tile_row: int, tile_col: int) -> int:
        """Index of the device that owns tile ``(tile_row, tile_col)``."""
        return self._pattern[tile_col % len(self._pattern)]

    def shares(self, ncols: int) -> list[int]:
        """How many of the first ``ncols`` tile columns each device owns."""
        counts = [0] * self.ndevices
        for j in range(ncols):
            counts[self.owner(0, j)] += 1
        return counts
