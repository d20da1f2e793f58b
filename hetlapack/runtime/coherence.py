"""Memory spaces: each tile's home is the host array; other memory spaces hold a mirror of the matrix.

A device that computes on a matrix gets one allocation of the matrix's shape in its memory (seed 000 §6.5: one
allocation per device, so a block of tiles is a view with the matrix's leading dimension, never a copy), made on
first use. Validity is tracked per tile: before a task runs, each tile it touches is copied into the device's
mirror only if the device lacks its current version (from the host, or through the host from another device);
after the task, the tiles it wrote are valid only where it ran. So no version of a tile ever crosses to the
same memory space twice. ``flush`` brings every tile home. ``log`` records every copy, for tests and traces.

Copies of different tiles run in parallel, and a tile already valid where it is needed costs no lock: the
task graph already orders writers and readers of a tile; a per-tile lock only stops two readers from copying
the same tile at once.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

from ..devices.base import Device
from ..devices.cpu import HOST_MEMORY
from .data import Block, TiledMatrix


class Transfer(NamedTuple):
    """One tile copied from one memory space to another; ``version`` counts the tasks that had written it."""

    tile: Block
    source: Hashable
    destination: Hashable
    nbytes: int
    version: int


class Coherence:
    """Valid copies per tile, the mirrors that hold them, and the transfers that keep them right."""

    def __init__(self, devices: Sequence[Device]) -> None:
        self.devices = list(devices)
        self.trivial = all(d.memory_space == HOST_MEMORY for d in self.devices)
        self.log: list[Transfer] = []
        self._lock = threading.Lock()
        self._valid: dict[Block, set] = {}
        self._version: dict[Block, int] = {}
        self._mirrors: dict[tuple[int, Hashable], Any] = {}
        self._device_of_space = {d.memory_space: d for d in self.devices}
        self._tile_locks: dict[Block, threading.Lock] = {}

    def _tile_lock(self, part: Block) -> threading.Lock:
        with self._lock:
            lock = self._tile_locks.get(part)
            if lock is None:
                lock = self._tile_locks[part] = threading.Lock()
            return lock

    @property
    def bytes_moved(self) -> int:
        return sum(t.nbytes for t in self.log)

    def _mirror(self, matrix: TiledMatrix, device: Device) -> Any:
        key = (id(matrix), device.memory_space)
        mirror = self._mirrors.get(key)
        if mirror is not None:
            return mirror
        with self._lock:
            mirror = self._mirrors.get(key)
            if mirror is None:
                mirror = self._mirrors[key] = device.empty(matrix.shape, matrix.dtype)
            return mirror

    def _view(self, block: Block, device: Device) -> Any:
        if device.memory_space == HOST_MEMORY:
            return block.host
        r0, r1 = block.matrix.row_range(block.i0, block.i1)
        c0, c1 = block.matrix.col_range(block.j0, block.j1)
        return self._mirror(block.matrix, device)[r0:r1, c0:c1]

    def _copy(self, part: Block, source: Hashable, destination: Hashable) -> int:
        self._copy_data(part, source, destination)
        with self._lock:
            self.log.append(Transfer(part, source, destination, part.nbytes, self._version.get(part, 0)))
        return part.nbytes

    def _copy_data(self, part: Block, source: Hashable, destination: Hashable) -> None:
        if destination == HOST_MEMORY:
            device = self._device_of_space[source]
            device.to_host(self._view(part, device), part.host)
        else:
            device = self._device_of_space[destination]
            device.upload(part.host, self._view(part, device))

    def _make_valid(self, part: Block, space: Hashable) -> int:
        valid = self._valid.get(part)
        if valid is not None and space in valid:
            return 0  # no lock: the task graph keeps writers of this tile away while its readers run
        with self._tile_lock(part):
            return self._make_valid_locked(part, space)

    def _make_valid_locked(self, part: Block, space: Hashable) -> int:
        valid = self._valid.setdefault(part, {HOST_MEMORY})
        if space in valid:
            return 0
        moved = 0
        if HOST_MEMORY not in valid:
            moved += self._copy(part, next(iter(valid)), HOST_MEMORY)
            valid.add(HOST_MEMORY)
        if space != HOST_MEMORY:
            moved += self._copy(part, HOST_MEMORY, space)
            valid.add(space)
        return moved

    def missing(self, blocks: Sequence[Block], device: Device) -> bool:
        """Whether some tile of ``blocks`` has no valid copy in ``device``'s memory."""
        if self.trivial:
            return False
        space = device.memory_space
        return any(space not in self._valid.get(part, (HOST_MEMORY,)) for block in blocks for part in block.parts)

    def acquire(self, blocks: Sequence[Block], device: Device) -> tuple[dict[Block, Any], int]:
        """Make ``blocks`` valid on ``device``; returns each block's data there and the bytes moved."""
        if self.trivial:
            return {block: block.host for block in blocks}, 0
        space = device.memory_space
        moved = sum(self._make_valid(part, space) for block in blocks for part in block.parts)
        return {block: self._view(block, device) for block in blocks}, moved

    def release(self, written: Sequence[Block], device: Device) -> None:
        """After a task wrote ``written`` on ``device``: that device now holds the only valid copy."""
        if self.trivial:
            return
        for block in written:
            for part in block.parts:
                # no lock: until this task's dependents start, nothing else touches a tile it wrote
                self._valid[part] = {device.memory_space}
                self._version[part] = self._version.get(part, 0) + 1

    def close(self) -> None:
        """Give every mirror back to its device (after :meth:`flush`, or after a failure)."""
        with self._lock:
            mirrors, self._mirrors = self._mirrors, {}
        for (_, space), mirror in mirrors.items():
            self._device_of_space[space].free(mirror)

    def flush(self) -> int:
        """Copy every tile whose host copy is stale back home; returns bytes moved."""
        if self.trivial:
            return 0
        with self._lock:
            parts = list(self._valid)
        return sum(self._make_valid(part, HOST_MEMORY) for part in parts)
