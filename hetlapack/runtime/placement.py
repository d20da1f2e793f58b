"""Placement policies: which device runs a task, decided when the task becomes ready.

``OwnerComputes`` (seed 003 §4, seed 000 §6.1): panel kernels (latency-bound) run on the CPU when the devices
mix a CPU and accelerators; every other task runs where the tile it writes lives, by a layout's owner function
(HGDD over the devices' capability weights unless told otherwise); :func:`two_level` builds it for seed 003's
two-level hybrid tiles, with the tile boundaries they need.
``GreedyByCapability`` (seed 000 §6.3): the task goes to the device expected to finish it first, pricing each
device's queued work and this task by the device's capability (GFLOP/s per kernel class).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence

from ..devices import resolve
from ..devices.base import KERNEL_CLASS, Device
from ..devices.cpu import HOST_MEMORY, CpuDevice
from ..layout import Layout, TwoLevelColumns, WeightedColumns
from ..layout.two_level import TWO_LEVEL_SMALL_TILE
from .data import Block
from .task import Task


class Placement(abc.ABC):
    """Chooses the device index of each task when it becomes ready; told when tasks finish so it can track load."""

    def bind(self, devices: Sequence[Device]) -> None:
        """Take the run's devices, in the runtime's order, before the first task is placed."""
        self.devices = list(devices)

    @abc.abstractmethod
    def place(self, task: Task) -> int:
        """Index into the bound devices for ``task``, called under the scheduler's lock when its predecessors
        have finished."""

    def finished(self, task: Task) -> None:
        """Called (under the scheduler's lock) when ``task`` completes."""


class OwnerComputes(Placement):
    """Panels on the CPU among accelerators; other tasks on the owner of the first tile they write.

    ``layout`` is ``"hgdd"`` (the default: tile columns dealt in proportion to capability weights), ``"cyclic"``
    (1-D block-column cyclic) or any object with ``owner(tile_row, tile_col)`` and ``ndevices`` indexing the
    runtime's devices. The named layouts deal columns over the accelerators when there are any, since the CPU
    factors the panels (seed 000 §6.1; ``placement="capability"`` lets it take updates too), else over all
    devices. ``panels_on_cpu=False`` makes the owner compute panels too (seed 003's runtime: the owner of a
    tile runs every task that writes it).
    """

    def __init__(self, layout: str | Layout = "hgdd", panels_on_cpu: bool = True) -> None:
        if isinstance(layout, str) and layout not in ("hgdd", "cyclic"):
            raise ValueError(f"layout must be 'hgdd', 'cyclic' or a layout object, got {layout!r}")
        self.layout_spec = layout
        self.panels_on_cpu = panels_on_cpu

    def bind(self, devices: Sequence[Device]) -> None:
        super().bind(devices)
        kinds = {d.kind for d in self.devices}
        cpus = [i for i, d in enumerate(self.devices) if d.kind == "cpu"]
        self.panel_device = cpus[0] if cpus and len(kinds) > 1 and self.panels_on_cpu else None
        if not isinstance(self.layout_spec, str):
            self.layout, self.owners = self.layout_spec, tuple(range(len(self.devices)))
            return
        self.owners = tuple(i for i, d in enumerate(self.devices) if d.kind != "cpu") or tuple(
            range(len(self.devices)))
        weights = [self.devices[i].weight if self.layout_spec == "hgdd" else 1.0 for i in self.owners]
        self.layout = WeightedColumns(tuple(weights))

    def place(self, task: Task) -> int:
        if self.panel_device is not None and KERNEL_CLASS.get(task.name) == "panel":
            return self.panel_device
        if not task.writes:
            return self.owners[0]
        block = task.writes[0]
        return self.owners[self.layout.owner(block.i0, block.j0)]


def two_level(extent: int, tile: int, host_cols: int, accelerators: int) -> tuple[OwnerComputes, list[int]]:
    """Seed 003's two-level hybrid tiles for a matrix whose longer side is ``extent``: the tile boundaries (per
    ``tile``-wide top-level tile, ``host_cols`` columns cut into small tiles for the CPU, the rest one big tile
    for an accelerator; rows are cut alike, and each axis of the matrix and of its factors takes the boundaries
    below its length) and the placement that runs every task, panels included, on the owner of the tile it
    writes."""
    layout = TwoLevelColumns(tile, host_cols, accelerators)
    bounds = layout.bounds(extent, TWO_LEVEL_SMALL_TILE)
    return OwnerComputes(layout.tile_owner(bounds), panels_on_cpu=False), bounds


def two_level_devices(devices: Sequence[Device | str]) -> list[Device]:
    """The devices of a real two-level run: a CPU named ``"cpu"`` gets one worker per core, since each small tile
    of the host slice runs on one core (seed 003 §3.4; the simulator models it so); the rest as
    :func:`~hetlapack.devices.resolve` makes them."""
    return resolve([CpuDevice() if d == "cpu" else d for d in devices])


class GreedyByCapability(Placement):
    """Earliest expected finish: queued seconds on the device (shared by its workers) plus this task's seconds
    there, which are
    ``flops / capability`` plus moving the tiles it touches that were last written in another memory space
    (seed 000 §6.2: communication = bytes / bandwidth). Placement happens when the task is ready, so the queues
    hold only work that can run, and where each tile was last written is known from earlier placements."""

    def bind(self, devices: Sequence[Device]) -> None:
        super().bind(devices)
        self.queued_seconds = [0.0] * len(self.devices)
        self._written_in: dict[Block, object] = {}

    @staticmethod
    def _link_gbs(device: Device) -> float:
        return getattr(device, "bandwidth_gbs", None) or device.capability.get("bandwidth_gbs", math.inf)

    def _seconds(self, task: Task, device: Device) -> float:
        rate = device.capability.get(KERNEL_CLASS.get(task.name, "blas3"), 1.0)
        seconds = max(task.flops, 1.0) / (rate * 1e9)
        space = device.memory_space
        for block in (*task.reads, *task.writes):
            for part in block.parts:
                where = self._written_in.get(part, HOST_MEMORY)
                if where != space:
                    link = min(self._link_gbs(self._by_space[s]) for s in (where, space) if s in self._by_space)
                    seconds += part.nbytes / (link * 1e9)
        return seconds

    def place(self, task: Task) -> int:
        self._by_space = {d.memory_space: d for d in self.devices}
        costs = [self._seconds(task, d) for d in self.devices]
        best = min(range(len(self.devices)),
                   key=lambda i: self.queued_seconds[i] / self.devices[i].workers + costs[i])
        task.expected_seconds = costs[best]
        self.queued_seconds[best] += costs[best]
        for block in task.writes:
            for part in block.parts:
                self._written_in[part] = self.devices[best].memory_space
        return best

    def finished(self, task: Task) -> None:
        self.queued_seconds[task.device_index] -= task.expected_seconds


POLICIES = {"owner": OwnerComputes, "capability": GreedyByCapability}


def make_placement(policy: str | Placement) -> Placement:
    """A placement object from its name (``"owner"`` or ``"capability"``) or the object itself."""
    if isinstance(policy, Placement):
        return policy
    try:
        return POLICIES[policy]()
    except KeyError:
        raise ValueError(f"placement must be one of {sorted(POLICIES)}, got {policy!r}") from None
