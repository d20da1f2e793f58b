"""Two-level hybrid tiles (seed 003 §3.4–3.6): big tiles for the accelerators with a thin host slice each.

Top-level block columns of width ``B`` are dealt 1-D cyclically over the accelerators; from each, a slice of
``Bh`` columns goes to the host's cores, ``Bh = Perf_core * cores / (Perf_core * cores + Perf_gpu * gpus) * B``,
so host and accelerators finish a step together. The slice is then tuned by measurement in a few trials,
judged by the load imbalance ``max / avg`` (1.0 is perfect balance). The runtime runs it on tiles of varying
size: :meth:`TwoLevelColumns.bounds` cuts the columns (and the rows alike, so diagonal tiles are square; a
rectangular matrix is cut along its longer side, each axis taking the boundaries below its length),
:meth:`TwoLevelColumns.tile_owner` maps tile columns to devices for owner-computes placement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: The host's device index in a two-level layout; accelerators are 1 .. gpus.
HOST = 0

#: Width of the host's small tiles in the two-level layout, at most (seed 003 cuts the host slice finer: one small
#: tile per core's worth of work).
TWO_LEVEL_SMALL_TILE = 128

#: LAPACK operations the two-level layout runs: seed 003 §3's Cholesky and QR, and LU with partial pivoting (its
#: panel, like QR's, is a whole tile column below the diagonal, factored by the owner of that column), on square
#: and rectangular matrices alike.
TWO_LEVEL_OPS = frozenset({"potrf", "getrf", "geqrf"})


def two_level_unavailable(kinds: Sequence[str]) -> str | None:
    """Why devices of these kinds (in order) cannot run the two-level layout, or None: it needs one CPU, listed
    first (device ``HOST`` owns the host slices), and at least one accelerator."""
    if len(kinds) < 2 or kinds[HOST] != "cpu" or "cpu" in kinds[HOST + 1:]:
        return "the two-level layout needs one CPU, listed first, and at least one accelerator"
    return None


def host_slice(tile: int, core_rate: float, cores: int, gpu_rate: float, gpus: int) -> int:
    """Columns of each top-level tile the host takes (seed 003 §3.6), between 0 and ``tile``."""
    host = core_rate * cores
    share = host / (host + gpu_rate * gpus)
    return min(tile, max(0, round(share * tile)))


def imbalance(loads: Sequence[float]) -> float:
    """Load imbalance ``max / avg`` of per-device loads (seed 003 §5.3); 1.0 when perfectly balanced."""
    if not loads or sum(loads) <= 0:
        raise ValueError("imbalance needs at least one positive load")
    return max(loads) / (sum(loads) / len(loads))


@dataclass(frozen=True)
class TwoLevelColumns:
    """Column ``c`` of an ``n``-column matrix belongs to the host if it lies in the first ``host_cols`` columns
    of its top-level tile, else to accelerator ``1 + (top-level tile index mod gpus)``."""

    tile: int
    host_cols: int
    gpus: int

    def __post_init__(self) -> None:
        if self.tile < 1 or self.gpus < 1 or not 0 <= self.host_cols <= self.tile:
            raise ValueError(f"need tile >= 1, gpus >= 1 and 0 <= host_cols <= tile, got {self}")

    @property
    def ndevices(self) -> int:
        """How many devices own tiles: the GPUs and the host."""
        return self.gpus + 1

    def owner(self, tile_row: int, column: int) -> int:
        """Owner of element column ``column`` (the layout is a function column -> device)."""
        top, offset = divmod(column, self.tile)
        return HOST if offset < self.host_cols else 1 + top % self.gpus

    def bounds(self, n: int, small_tile: int) -> list[int]:
        """Boundaries of the two-level tiles along ``n`` columns (or rows: they are cut alike): per top-level
        tile, the host slice cut into small tiles (at most ``small_tile`` wide, one per core's worth of work),
        then one large tile for its accelerator."""
        bounds = [0]
        for top in range(0, n, self.tile):
            end = min(top + self.tile, n)
            host_end = min(top + self.host_cols, end)
            pieces = math.ceil((host_end - top) / small_tile)
            bounds += [top + round((host_end - top) * (i + 1) / pieces) for i in range(pieces)]
            if end > host_end:
                bounds.append(end)
        return bounds

    def tile_owner(self, bounds: Sequence[int]) -> TileColumnOwner:
        """The layout read per tile column of the given boundaries (for ``OwnerComputes``)."""
        return TileColumnOwner(self, tuple(bounds))

    def loads(self, n: int, rates: Sequence[float]) -> list[float]:
        """Seconds of trailing-update work per device for an ``n``-column right-looking factorization: column
        ``c`` is updated at every step before it (work ~ ``c``), at each device's rate (host first)."""
        work = [0.0] * self.ndevices
        for column in range(n):
            work[self.owner(0, column)] += column
        return [w / rate for w, rate in zip(work, rates)]


def tune_host_slice(start: int, tile: int, measure: Callable[[int], float], trials: int = 3,
                    step: int | None = None) -> tuple[int, float]:
    """Refine a host slice by measurement: try ``start`` and ``step`` around it (default ``tile // 16``; seed
    003 tunes by 64 columns), keep the lowest imbalance, halving the step when neither side is better.

    ``measure(bh)`` returns the imbalance observed with slice ``bh``; ``trials`` rounds of at most two
    measurements each. Returns ``(best slice, its imbalance)``.
    """
    best, best_ratio = start, measure(start)
    step = max(1, step or tile // 16)
    for _ in range(trials):
        candidates = [b for b in (best - step, best + step) if 0 <= b <= tile]
        if not candidates:
            break
        ratio, choice = min((measure(b), b) for b in candidates)
        if ratio >= best_ratio:
            step = max(1, step // 2)
            continue
        best, best_ratio = choice, ratio
    return best, best_ratio


@dataclass(frozen=True)
class TileColumnOwner:
    """A two-level layout read per tile column: tile column ``j`` starts at element column ``bounds[j]``."""

    layout: TwoLevelColumns
    bounds: tuple[int, ...]

    @property
    def ndevices(self) -> int:
        """How many devices own tiles, as the top-level layout says."""
        return self.layout.ndevices

    def owner(self, tile_row: int, tile_col: int) -> int:
        return self.layout.owner(tile_row, self.bounds[tile_col])
