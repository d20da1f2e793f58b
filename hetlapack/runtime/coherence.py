"""The coherence directory: which copy of each tile is valid in which memory space, and the copies that keep it so.

Each tile's home is the host array. On an accelerator a tile lives in a *segment* of that accelerator's memory
(:mod:`~hetlapack.runtime.device_memory` allocates, pins and evicts them within its capacity); this module records
which segments hold each tile's current version and moves tiles between memory spaces. Validity is versioned per
tile, and on an accelerator per segment: before a task runs, each tile it touches is copied into the segment that
serves it only if that segment lacks the tile's current version (from another segment of the same device by a
device-local copy, else from the host, or through the host from another device); after the task, the tiles it wrote
are valid only in that segment. So no version of a tile crosses to a memory space twice while it stays there. When
an accelerator's memory evicts a segment, the directory first writes home the tiles whose only valid copy is in it.
``flush`` brings every tile home; ``log`` records every copy between memory spaces, for tests and traces.

Copies of different tiles run in parallel, and a tile already valid where it is needed costs no lock: the task graph
orders writers and readers of a tile; a per-tile lock stops two readers from copying the same tile at once. Lock
order: an accelerator's memory lock, then a tile's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any, NamedTuple

from ..devices.base import Device
from ..devices.cpu import HOST_MEMORY
from .data import Block
from .device_memory import DeviceMemory, Segment, covers, outermost


class Transfer(NamedTuple):
    """One tile copied from one memory space to another; ``version`` counts the tasks that had written it."""

    tile: Block
    source: Hashable
    destination: Hashable
    nbytes: int
    version: int


class MemoryStats(NamedTuple):
    """One accelerator's memory over a run: its capacity (``None``: unbounded), the most bytes of segments held at
    once, segments evicted, bytes written home to make room, bytes copied between its own segments, and copies
    over its link (a packed block is one copy)."""

    capacity: int | None
    peak_bytes: int
    evictions: int
    written_back: int
    local_bytes: int
    link_copies: int


class Residency:
    """The directory's record of one accelerator: its memory (:class:`DeviceMemory`, which asks the directory
    through ``dirty`` and ``vacate`` before it evicts), ``holders`` mapping a tile to the segments holding its
    current version, ``incoming`` mapping a tile being uploaded to the segment it goes into, and copy counts."""

    def __init__(self, device: Device, dirty: Callable[[Residency, Segment], bool],
                 vacate: Callable[[Residency, Segment], None]) -> None:
        self.device = device
        self.space = device.memory_space
        self.memory = DeviceMemory(device, dirty=partial(dirty, self), vacate=partial(vacate, self))
        self.holders: dict[Block, set[Segment]] = {}
        self.incoming: dict[Block, Segment] = {}
        self.written_back = self.local_bytes = self.link_copies = 0

    def stats(self) -> MemoryStats:
        memory = self.memory
        return MemoryStats(memory.capacity, memory.peak, memory.evictions, self.written_back, self.local_bytes,
                           self.link_copies)


class Coherence:
    """Valid copies per tile, the accelerators' segments that hold them, and the transfers that keep them right."""

    def __init__(self, devices: Sequence[Device]) -> None:
        self.devices = list(devices)
        self.trivial = all(d.memory_space == HOST_MEMORY for d in self.devices)
        self.log: list[Transfer] = []
        self._lock = threading.Lock()
        self._valid: dict[Block, set] = {}
        self._version: dict[Block, int] = {}
        self._device_of_space = {d.memory_space: d for d in self.devices}
        self._residencies = {d.memory_space: Residency(d, self._dirty, self._vacate) for d in self.devices
                             if d.memory_space != HOST_MEMORY and isinstance(d, Device)}
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

    def stats(self) -> dict[str, MemoryStats]:
        """Memory statistics per accelerator name."""
        return {residency.device.name: residency.stats() for residency in self._residencies.values()}

    def _view(self, block: Block, device: Device) -> Any:
        """The data of ``block`` where it is used without a segment: the host's view."""
        return block.host

    # --- copies between memory spaces ---------------------------------------------------------------------------
    def _copy(self, part: Block, source: Hashable, destination: Hashable) -> int:
        self._copy_data(part, source, destination)
        return self._record(part.parts, source, destination)

    def _record(self, parts: Sequence[Block], source: Hashable, destination: Hashable) -> int:
        """Log the tiles ``parts`` as moved by one copy over a link; returns their bytes."""
        residency = self._residencies.get(destination if source == HOST_MEMORY else source)
        with self._lock:
            self.log.extend(Transfer(p, source, destination, p.nbytes, self._version.get(p, 0)) for p in parts)
            if residency is not None:
                residency.link_copies += 1
        return sum(p.nbytes for p in parts)

    def _copy_data(self, part: Block, source: Hashable, destination: Hashable) -> None:
        if destination == HOST_MEMORY:
            residency = self._residencies[source]
            residency.device.to_host(next(iter(residency.holders[part])).view(part), part.host)
        else:
            residency = self._residencies[destination]
            residency.device.upload(part.host, residency.incoming[part].view(part))

    def _make_valid(self, part: Block, space: Hashable) -> int:
        valid = self._valid.get(part)
        if valid is not None and space in valid:
            return 0  # no lock: the task graph keeps writers of this tile away while its readers run
        with self._tile_lock(part):
            return self._make_valid_locked(part, space)

    def _make_valid_locked(self, part: Block, space: Hashable) -> int:
        """Without segments (the host, or a simulated device): copy through the host where the tile is stale."""
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

    def _packed(self, block: Block, space: Hashable, segment: Segment | None = None) -> int | None:
        """Copy a block of several tiles that ``space`` lacks entirely as one packed transfer (seed 002 §2.3: a
        2-D panel becomes one contiguous buffer and one copy, not one copy per tile): first home, in one copy
        when a single segment of one accelerator holds all of it, then into ``segment``. ``None`` when the block
        is partly there already (the tile-by-tile path then copies what is missing). A block of no tile (rows past
        the last tile row) moves nothing."""
        parts = block.parts
        if not parts:
            return 0
        residency = self._residencies.get(space)
        locks = [self._tile_lock(p) for p in parts]
        for lock in locks:
            lock.acquire()  # in the order of the tiles, the same for every block of a matrix: no deadlock
        try:
            valid = [self._valid.setdefault(p, {HOST_MEMORY}) for p in parts]
            if any(space in v for v in valid):
                return None
            moved = 0
            stale = [p for p, v in zip(parts, valid) if HOST_MEMORY not in v]
            source = self._single_holder(block, valid) if len(stale) == len(parts) else None
            if source is not None:
                source.device.to_host(self._serving(source, block).view(block), block.host)
                moved += self._record(parts, source.space, HOST_MEMORY)
            else:
                for part in stale:
                    moved += self._copy(part, next(iter(self._valid[part])), HOST_MEMORY)
            for v in valid:
                v.add(HOST_MEMORY)
            if residency is not None:
                residency.device.upload(block.host, segment.view(block))
                moved += self._record(parts, HOST_MEMORY, space)
                for part, v in zip(parts, valid):
                    v.add(space)
                    residency.holders[part] = {segment}
            return moved
        finally:
            for lock in locks:
                lock.release()

    def _single_holder(self, block: Block, valid: Sequence[set]) -> Residency | None:
        """The accelerator one of whose segments holds every tile of ``block``, if one does."""
        for space in set.intersection(*valid):
            residency = self._residencies.get(space)
            if residency is not None and self._serving(residency, block) is not None:
                return residency
        return None

    def _make_resident(self, part: Block, residency: Residency, segment: Segment) -> int:
        """Give ``segment`` the current version of tile ``part``; returns the bytes moved between memory spaces."""
        holders = residency.holders.get(part)
        if holders is not None and segment in holders:
            return 0  # no lock, as in _make_valid
        with self._tile_lock(part):
            holders = residency.holders.get(part)
            if holders:
                residency.device.copy_within(next(iter(holders)).view(part), segment.view(part))
                holders.add(segment)
                with self._lock:
                    residency.local_bytes += part.nbytes
                return 0
            moved = self._make_valid_locked(part, HOST_MEMORY)  # through the host from another device
            residency.incoming[part] = segment
            try:
                moved += self._copy(part, HOST_MEMORY, residency.space)
            finally:
                del residency.incoming[part]
            self._valid[part].add(residency.space)
            residency.holders[part] = {segment}
            return moved

    # --- segments: the directory's side of their allocation and eviction -----------------------------------------
    @staticmethod
    def _hold(residency: Residency, block: Block, holder: object, allocate: bool = True,
              segment: Segment | None = None) -> Segment | None:
        """The segment that serves ``block`` for task ``holder``, pinned for it (:meth:`DeviceMemory.hold`): of
        the segments that contain the block, the one holding most of its tiles' current versions."""
        holders = residency.holders
        return residency.memory.hold(block, holder, lambda s: sum(s in holders.get(p, ()) for p in block.parts),
                                     allocate, segment)

    def _dirty(self, residency: Residency, segment: Segment) -> bool:
        """Whether ``segment`` holds the only valid copy of one of its tiles."""
        return any(residency.holders.get(p) == {segment} and self._valid.get(p) == {residency.space}
                   for p in segment.block.parts)

    def _vacate(self, residency: Residency, segment: Segment) -> None:
        """Forget the tiles ``segment`` holds, before its memory frees it (under the memory lock), first writing
        home those only it holds."""
        for part in segment.block.parts:
            if segment not in residency.holders.get(part, ()):
                continue
            with self._tile_lock(part):
                holders = residency.holders.get(part)
                if not holders or segment not in holders:
                    continue
                if len(holders) > 1:
                    holders.discard(segment)
                    continue
                valid = self._valid[part]
                if valid == {residency.space}:
                    residency.written_back += self._copy(part, residency.space, HOST_MEMORY)
                    valid.add(HOST_MEMORY)
                valid.discard(residency.space)
                del residency.holders[part]

    @staticmethod
    def _serving(residency: Residency, block: Block) -> Segment | None:
        """The segment of ``residency`` holding every tile of ``block``, if one does."""
        return next((s for s in residency.memory.containing(block)
                     if all(s in residency.holders.get(p, ()) for p in block.parts)), None)

    # --- the runtime's interface ----------------------------------------------------------------------------------
    def missing(self, blocks: Sequence[Block], device: Device) -> bool:
        """Whether ``blocks`` need the copy thread before a task on ``device`` can run: some tile has no valid copy
        there, or the device's memory is bounded (the copy thread then also reserves the task's segments)."""
        if self.trivial:
            return False
        if self.bounded(device):
            return True
        space = device.memory_space
        return any(space not in self._valid.get(part, (HOST_MEMORY,)) for block in blocks for part in block.parts)

    def bounded(self, device: Device) -> bool:
        """Whether ``device``'s memory has a capacity (its copies may then wait for room)."""
        residency = self._residencies.get(device.memory_space)
        return residency is not None and residency.memory.bounded

    def fits(self, blocks: Sequence[Block], device: Device) -> bool:
        """Whether a task on ``blocks`` fits in ``device``'s memory at all."""
        residency = self._residencies.get(device.memory_space)
        return residency is None or residency.memory.fits(blocks)

    def acquire(self, blocks: Sequence[Block], device: Device, holder: object = None) -> tuple[dict[Block, Any], int]:
        """Make ``blocks`` valid on ``device`` for task ``holder`` (whose segments stay pinned until
        :meth:`unpin`); returns each block's data there and the bytes moved between memory spaces."""
        if self.trivial:
            return {block: block.host for block in blocks}, 0
        space = device.memory_space
        residency = self._residencies.get(space)
        if residency is None:
            moved = sum(self.write_home(block) if space == HOST_MEMORY
                        else sum(self._make_valid(p, space) for p in block.parts) for block in blocks)
            return {block: self._view(block, device) for block in blocks}, moved
        distinct = list(dict.fromkeys(blocks))
        outer = outermost(distinct)
        # pin what is already resident before making room, so that the task never evicts its own tiles
        segments = {b: self._hold(residency, b, holder, allocate=False) for b in outer}
        for block in sorted(outer, key=lambda b: -b.nbytes):
            segments[block] = segments[block] or self._hold(residency, block, holder)
        for block in distinct:
            if block not in segments:  # a block inside another one of the task is a view of that one's segment
                segments[block] = self._hold(residency, block, holder, segment=next(
                    segments[o] for o in outer if covers(o, block)))
        moved = 0
        for block in outer:
            packed = self._packed(block, space, segments[block]) if not block.is_tile else None
            if packed is None:
                packed = sum(self._make_resident(part, residency, segments[block]) for part in block.parts)
            moved += packed
        return {block: segments[block].view(block) for block in blocks}, moved

    def release(self, written: Sequence[Block], device: Device, holder: object = None) -> None:
        """After task ``holder`` wrote ``written`` on ``device``: that device (and there, the segment that served
        the task) now holds the only valid copy."""
        if self.trivial:
            return
        residency = self._residencies.get(device.memory_space)
        if residency is not None:
            with residency.memory.lock:
                self._release(written, device, residency, residency.memory.pinned(holder))
        else:
            self._release(written, device, None, {})

    def _release(self, written: Sequence[Block], device: Device, residency: Residency | None,
                 segments: dict[Block, Segment]) -> None:
        others = [r for r in self._residencies.values() if r is not residency]
        for block in written:
            for part in block.parts:
                # no lock: until this task's dependents start, nothing else touches a tile it wrote
                self._valid[part] = {device.memory_space}
                self._version[part] = self._version.get(part, 0) + 1
                for other in others:
                    other.holders.pop(part, None)
                if residency is not None:
                    residency.holders[part] = {segments.get(block) or self._serving(residency, block)}

    def unpin(self, holder: object, device: Device) -> None:
        """Task ``holder`` has finished with its segments on ``device``: they may be evicted again."""
        residency = self._residencies.get(device.memory_space)
        if residency is not None:
            residency.memory.unpin(holder)

    def abort(self) -> None:
        """Wake every copy waiting for memory, to give up (the run failed)."""
        for residency in self._residencies.values():
            residency.memory.cancel()

    def close(self) -> None:
        """Give every segment back to its device (after :meth:`flush`, or after a failure)."""
        for residency in self._residencies.values():
            with residency.memory.lock:
                residency.holders.clear()
            residency.memory.close()

    def write_home(self, block: Block) -> int:
        """Make the host's copy of ``block`` current (one packed copy where one segment holds all of it)."""
        packed = self._packed(block, HOST_MEMORY) if not block.is_tile else None
        return packed if packed is not None else sum(self._make_valid(p, HOST_MEMORY) for p in block.parts)

    def flush(self) -> int:
        """Copy every tile whose host copy is stale back home (a segment stale at home as a whole in one packed
        copy); returns bytes moved."""
        if self.trivial:
            return 0
        moved = sum(self._packed(segment.block, HOST_MEMORY) or 0 for residency in self._residencies.values()
                    for segment in list(residency.memory.segments) if not segment.block.is_tile)
        with self._lock:
            parts = list(self._valid)
        return moved + sum(self._make_valid(part, HOST_MEMORY) for part in parts)
