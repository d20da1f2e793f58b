"""Placement policies: which device runs a task, decided when the task is inserted.

``OwnerComputes`` (seed 003 §4, seed 000 §6.1): panel kernels (latency-bound) run on the CPU when the devices
mix a CPU and accelerators; every other task runs where the tile it writes lives, by a layout's owner function
(HGDD over the devices' capability weights unless told otherwise).
``GreedyByCapability`` (seed 000 §6.3): the task goes to the device expected to finish it first, pricing each
device's queued work and this task by the device's capability (GFLOP/s per kernel class).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from ..devices.base import KERNEL_CLASS, Device
from ..layout import WeightedColumns
from .task import Task


class Placement(abc.ABC):
    """Chooses the device index of each task; told when tasks finish so it can track load."""

    def bind(self, devices: Sequence[Device]) -> None:
        self.devices = list(devices)

    @abc.abstractmethod
    def place(self, task: Task) -> int:
        """Index into the bound devices for ``task`` (called under the scheduler's lock)."""

    def finished(self, task: Task) -> None:
        """Called (under the scheduler's lock) when ``task`` completes."""


class OwnerComputes(Placement):
    """Panels on the CPU among accelerators; other tasks on the owner of the first tile they write.

    ``layout`` is any object with ``owner(tile_row, tile_col)`` and ``ndevices``; by default HGDD over the
    devices' weights (equal weights give the 1-D block-column cyclic layout).
    """

    def __init__(self, layout=None) -> None:
        self.layout = layout

    def bind(self, devices: Sequence[Device]) -> None:
        super().bind(devices)
        if self.layout is None or self.layout.ndevices != len(self.devices):
            self.layout = WeightedColumns(tuple(d.weight for d in self.devices))
        kinds = {d.kind for d in self.devices}
        cpus = [i for i, d in enumerate(self.devices) if d.kind == "cpu"]
        self.panel_device = cpus[0] if cpus and len(kinds) > 1 else None

    def place(self, task: Task) -> int:
        if self.panel_device is not None and KERNEL_CLASS.get(task.name) == "panel":
            return self.panel_device
        if not task.writes:
            return 0
        block = task.writes[0]
        return self.layout.owner(block.i0, block.j0)


class GreedyByCapability(Placement):
    """Earliest expected finish: queued seconds on the device plus ``flops / capability`` of this task."""

    def bind(self, devices: Sequence[Device]) -> None:
        super().bind(devices)
        self.queued_seconds = [0.0] * len(self.devices)

    def _seconds(self, task: Task, device: Device) -> float:
        rate = device.capability.get(KERNEL_CLASS.get(task.name, "blas3"), 1.0)
        return max(task.flops, 1.0) / (rate * 1e9)

    def place(self, task: Task) -> int:
        costs = [self._seconds(task, d) for d in self.devices]
        best = min(range(len(self.devices)), key=lambda i: self.queued_seconds[i] + costs[i])
        task.expected_seconds = costs[best]
        self.queued_seconds[best] += costs[best]
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
