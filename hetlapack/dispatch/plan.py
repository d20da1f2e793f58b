"""The Plan: which path a factorization takes, on which devices, and why."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..options import KERNELS, LAYOUTS
from .paths import BY_NAME, Path


@dataclass(frozen=True)
class Plan:
    """A dispatch decision. ``str(plan)`` explains it to a person.

    ``predicted_s`` maps every candidate path that could run this input to the model's predicted seconds
    (a prediction, not a measurement); paths that cannot run it are listed in ``unavailable`` with the reason.
    A hybrid plan names its ``layout``, with ``layout_s`` the predicted seconds of each layout that could run
    it (a layout that cannot is in ``unavailable`` too) and, for the two-level layout, ``host_cols``: the columns
    of each top-level tile of order ``tile`` that the CPU takes. A batched plan on NumPy arrays names its
    ``kernels``: ``"interleaved"`` (ours, SIMD across matrices) or ``"lapack"`` (SciPy's LAPACK on each matrix),
    and ``lanes``, the matrices per buffer of the interleaved kernels where ``hetlapack calibrate`` timed them
    (``None``: the kernels' buffer-size rule), or ``loop_threads``, the most threads the LAPACK loop runs on (the
    cost model's cap, which the loop takes itself: 1 where concurrent calls of the routine ran slower; ``None``: as
    many as the batch is worth). ``host_threads`` says, where the host path's call runs on one BLAS thread, why.
    ``host_rate`` says at what rate the host path was priced, and where that rate came from; ``tile_rate`` the
    same of the hybrid path, where this machine's timing of it corrected the simulator's price; ``tile_basis``
    where the hybrid path's tile came from.
    """

    op: str
    path: str
    reason: str
    shape: tuple[int, ...]
    dtype: str
    devices: tuple[str, ...] = ("cpu",)
    tile: int | None = None
    placement: str = "owner"
    forced: bool = False
    predicted_s: dict[str, float] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    layout: str | None = None
    host_cols: int | None = None
    layout_s: dict[str, float] = field(default_factory=dict)
    kernels: str | None = None
    host_rate: str | None = None
    tile_rate: str | None = None
    tile_basis: str | None = None
    lanes: int | None = None
    loop_threads: int | None = None
    host_threads: str | None = None

    @property
    def runner(self) -> Path:
        """The path object that runs this plan."""
        return BY_NAME[self.path]

    def __str__(self) -> str:
        lines = [
            f"hetlapack plan for {self.op} on {self.dtype} {self.shape}",
            f"  path:    {self.path}{' (forced)' if self.forced else ''}",
            f"  devices: {', '.join(map(str, self.devices))}",
            *([f"  threads: {self.host_threads}"] if self.host_threads else []),
            *([f"  kernels: {KERNELS[self.kernels]}" + (f", {self.lanes} matrices per buffer (timed on this machine)"
                                                         if self.lanes else "")
               + (f", on at most {self.loop_threads} thread{'' if self.loop_threads == 1 else 's'}"
                  if self.loop_threads else "")] if self.kernels else []),
            *([f"  layout:  {self.layout}" + (f" (host slice: {self.host_cols} of every {self.tile} columns)"
                                              if self.host_cols is not None else "")] if self.layout else []),
            f"  tile:    {self.tile if self.tile is not None else '-'}"
            + (f" (placement: {self.placement}" + (f"; {self.tile_basis})" if self.tile_basis else ")")
               if self.layout else ""),
            f"  reason:  {self.reason}",
        ]
        paths = {name: why for name, why in self.unavailable.items() if name not in LAYOUTS}
        layouts = {name: why for name, why in self.unavailable.items() if name in LAYOUTS}
        if self.predicted_s:
            lines.append("  predicted seconds (model, not measured):")
            lines += _table(self.predicted_s, self.path, paths, width=8)
            if self.host_rate:
                lines.append(f"  host priced at {self.host_rate}")
            if self.tile_rate:
                lines.append(f"  hybrid priced at {self.tile_rate}")
        if len(self.layout_s) > 1 or (self.layout_s and layouts):
            lines.append("  predicted seconds of the hybrid path by layout (model, not measured):")
            lines += _table(self.layout_s, self.layout, layouts, width=9)
        return "\n".join(lines)


def _table(predicted: dict[str, float], chosen: str | None, unavailable: dict[str, str], width: int) -> list[str]:
    """Lines of a plan's price table: the candidates, cheapest first with the chosen one starred, then those that
    cannot run and why."""
    lines = [f"   {'*' if name == chosen else ' '} {name:<{width}} {seconds:.3g}"
             for name, seconds in sorted(predicted.items(), key=lambda item: item[1])]
    return lines + [f"     {name:<{width}} unavailable: {why}" for name, why in unavailable.items()]
