"""Memory spaces: each tile's home is the host array; copies on other memory spaces are made on demand.

Before a task runs on a device, every block it touches is made valid in the device's memory space (copied from
wherever a valid copy is); after the task, the blocks it wrote are valid only where it ran. Single tiles keep a
cached copy per memory space; a block of several tiles is shipped whole and, if written, written straight back
to the host (panels are the only multi-tile blocks and they are short-lived). ``flush`` brings every tile home.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..devices.base import Device
from ..devices.cpu import HOST_MEMORY
from .data import Block


class Coherence:
    """Valid copies per tile and the transfers that keep them right."""

    def __init__(self, devices: Sequence[Device]) -> None:
        self.devices = list(devices)
        self.trivial = all(d.memory_space == HOST_MEMORY for d in self.devices)
        self._lock = threading.Lock()
        self._valid: dict[Block, set] = {}
        self._copies: dict[Block, dict[Any, Any]] = {}
        self._device_of_space = {d.memory_space: d for d in self.devices}

    def _valid_spaces(self, part: Block) -> set:
        return self._valid.setdefault(part, {HOST_MEMORY})

    def _make_host_valid(self, part: Block) -> int:
        valid = self._valid_spaces(part)
        if HOST_MEMORY in valid:
            return 0
        space = next(iter(valid))
        self._device_of_space[space].to_host(self._copies[part][space], part.host)
        valid.add(HOST_MEMORY)
        return part.nbytes

    def acquire(self, blocks: Sequence[Block], device: Device) -> tuple[dict[Block, Any], int]:
        """Make ``blocks`` valid on ``device``; returns each block's data there and the bytes moved."""
        if self.trivial:
            return {block: block.host for block in blocks}, 0
        space = device.memory_space
        moved = 0
        data: dict[Block, Any] = {}
        with self._lock:
            for block in blocks:
                if space == HOST_MEMORY:
                    moved += sum(self._make_host_valid(part) for part in block.parts)
                    data[block] = block.host
                elif block.is_tile and space in self._valid_spaces(block):
                    data[block] = self._copies[block][space]
                else:
                    moved += sum(self._make_host_valid(part) for part in block.parts)
                    data[block] = device.to_device(block.host)
                    moved += block.nbytes
                    if block.is_tile:
                        self._copies.setdefault(block, {})[space] = data[block]
                        self._valid[block].add(space)
        return data, moved

    def release(self, written: Sequence[Block], data: dict[Block, Any], device: Device) -> int:
        """After a task wrote ``written`` on ``device``: invalidate other copies; returns bytes moved."""
        if self.trivial:
            return 0
        space = device.memory_space
        moved = 0
        with self._lock:
            for block in written:
                if space != HOST_MEMORY and not block.is_tile:
                    device.to_host(data[block], block.host)
                    moved += block.nbytes
                    for part in block.parts:
                        self._valid[part] = {HOST_MEMORY}
                        self._copies.pop(part, None)
                    continue
                for part in block.parts:
                    self._valid[part] = {space}
        return moved

    def flush(self) -> int:
        """Copy every tile whose host copy is stale back home; returns bytes moved."""
        if self.trivial:
            return 0
        with self._lock:
            return sum(self._make_host_valid(part) for part in list(self._valid))
