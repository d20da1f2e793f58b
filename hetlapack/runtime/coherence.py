"""Memory spaces and the copies that keep them coherent, within each accelerator's memory capacity.

Each tile's home is the host array. An accelerator holds *segments*: rectangles of tiles of one matrix, each in an
allocation of its own, so a block a task names is a view of one segment with the segment's leading dimension (seed
000 §6.5), never a per-task copy. Validity is versioned per tile, and on an accelerator per segment: before a task
runs, each tile it touches is copied into the segment that serves it only if that segment lacks the tile's current
version (from another segment of the same device by a device-local copy, else from the host, or through the host
from another device); after the task, the tiles it wrote are valid only in that segment. So no version of a tile
crosses to a memory space twice while it stays there. ``flush`` brings every tile home; ``log`` records every copy
between memory spaces, for tests and traces.

Out of core (as MAGMA's ``_m`` routines): an accelerator with a capacity (:meth:`Device.memory_capacity`) keeps its
segments within it. To make room, the least recently used segment that no running or prefetched task holds is
freed, clean ones first; a tile whose only valid copy is in it is written back home first. A task's segments are
pinned from the moment its tiles are fetched until it has finished; a copy that finds every byte pinned by other
tasks waits for them.

Copies of different tiles run in parallel, and a tile already valid where it is needed costs no lock: the task graph
orders writers and readers of a tile; a per-tile lock stops two readers from copying the same tile at once. Lock
order: an accelerator's memory lock, then a tile's lock.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

from ..devices.base import Device
from ..devices.cpu import HOST_MEMORY
from .data import Block


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


class Cancelled(Exception):
    """A copy stopped waiting for accelerator memory because the run was cancelled."""


class Segment:
    """A rectangle of tiles (``block``) held in one allocation (``data``) of an accelerator's memory."""

    __slots__ = ("block", "data", "pins", "last_use")

    def __init__(self, block: Block, data: Any, last_use: int) -> None:
        self.block, self.data, self.pins, self.last_use = block, data, 0, last_use

    def contains(self, block: Block) -> bool:
        return covers(self.block, block)

    def view(self, block: Block) -> Any:
        """The part of the allocation that holds ``block`` (which the segment contains)."""
        matrix, own = block.matrix, self.block
        top, left = matrix.row_bounds[own.i0], matrix.col_bounds[own.j0]
        return self.data[matrix.row_bounds[block.i0] - top:matrix.row_bounds[block.i1] - top,
                         matrix.col_bounds[block.j0] - left:matrix.col_bounds[block.j1] - left]


class DeviceMemory:
    """The segments of one accelerator, within its capacity; ``holders`` maps a tile to the segments holding its
    current version; ``pins`` maps a task to the segment serving each of its blocks."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.space = device.memory_space
        self.capacity = device.memory_capacity()
        self.lock = threading.Condition()
        self.segments: list[Segment] = []
        self.by_column: dict[tuple[int, int], list[Segment]] = {}  # (matrix id, tile column) -> segments over it
        self.holders: dict[Block, set[Segment]] = {}
        self.incoming: dict[Block, Segment] = {}
        self.pins: dict[object, dict[Block, Segment]] = {}
        self.used = self.peak = self.evictions = self.written_back = self.local_bytes = self.link_copies = 0
        self.cancelled = False
        self.clock = itertools.count()

    @property
    def bounded(self) -> bool:
        return self.capacity is not None

    def stats(self) -> MemoryStats:
        return MemoryStats(self.capacity, self.peak, self.evictions, self.written_back, self.local_bytes,
                           self.link_copies)


def covers(outer: Block, inner: Block) -> bool:
    """Whether block ``outer`` contains block ``inner``."""
    return (inner.matrix is outer.matrix and outer.i0 <= inner.i0 and inner.i1 <= outer.i1
            and outer.j0 <= inner.j0 and inner.j1 <= outer.j1)


def outermost(blocks: Sequence[Block]) -> list[Block]:
    """The distinct blocks among ``blocks`` that no other of them contains (each gets a segment of its own)."""
    distinct = list(dict.fromkeys(blocks))
    return [b for b in distinct if not any(o is not b and covers(o, b) for o in distinct)]


def footprint(blocks: Sequence[Block]) -> int:
    """Bytes of the outermost blocks among ``blocks`` (what a task pins)."""
    return sum(b.nbytes for b in outermost(blocks))


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
        self._memories = {d.memory_space: DeviceMemory(d) for d in self.devices
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
        return {memory.device.name: memory.stats() for memory in self._memories.values()}

    def _view(self, block: Block, device: Device) -> Any:
        """The data of ``block`` where it is used without a segment: the host's view."""
        return block.host

    # --- copies between memory spaces ---------------------------------------------------------------------------
    def _copy(self, part: Block, source: Hashable, destination: Hashable) -> int:
        self._copy_data(part, source, destination)
        return self._record(part.parts, source, destination)

    def _record(self, parts: Sequence[Block], source: Hashable, destination: Hashable) -> int:
        """Log the tiles ``parts`` as moved by one copy over a link; returns their bytes."""
        memory = self._memories.get(destination if source == HOST_MEMORY else source)
        with self._lock:
            self.log.extend(Transfer(p, source, destination, p.nbytes, self._version.get(p, 0)) for p in parts)
            if memory is not None:
                memory.link_copies += 1
        return sum(p.nbytes for p in parts)

    def _copy_data(self, part: Block, source: Hashable, destination: Hashable) -> None:
        if destination == HOST_MEMORY:
            memory = self._memories[source]
            memory.device.to_host(next(iter(memory.holders[part])).view(part), part.host)
        else:
            memory = self._memories[destination]
            memory.device.upload(part.host, memory.incoming[part].view(part))

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
        memory = self._memories.get(space)
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
            if memory is not None:
                memory.device.upload(block.host, segment.view(block))
                moved += self._record(parts, HOST_MEMORY, space)
                for part, v in zip(parts, valid):
                    v.add(space)
                    memory.holders[part] = {segment}
            return moved
        finally:
            for lock in locks:
                lock.release()

    def _single_holder(self, block: Block, valid: Sequence[set]) -> DeviceMemory | None:
        """The accelerator one of whose segments holds every tile of ``block``, if one does."""
        for space in set.intersection(*valid):
            memory = self._memories.get(space)
            if memory is not None and self._serving(memory, block) is not None:
                return memory
        return None

    def _make_resident(self, part: Block, memory: DeviceMemory, segment: Segment) -> int:
        """Give ``segment`` the current version of tile ``part``; returns the bytes moved between memory spaces."""
        holders = memory.holders.get(part)
        if holders is not None and segment in holders:
            return 0  # no lock, as in _make_valid
        with self._tile_lock(part):
            holders = memory.holders.get(part)
            if holders:
                memory.device.copy_within(next(iter(holders)).view(part), segment.view(part))
                holders.add(segment)
                with self._lock:
                    memory.local_bytes += part.nbytes
                return 0
            moved = self._make_valid_locked(part, HOST_MEMORY)  # through the host from another device
            memory.incoming[part] = segment
            try:
                moved += self._copy(part, HOST_MEMORY, memory.space)
            finally:
                del memory.incoming[part]
            self._valid[part].add(memory.space)
            memory.holders[part] = {segment}
            return moved

    # --- segments -------------------------------------------------------------------------------------------------
    def _hold(self, memory: DeviceMemory, block: Block, holder: object, allocate: bool = True,
              segment: Segment | None = None) -> Segment | None:
        """The segment that serves ``block`` for task ``holder``, pinned for it: ``segment`` if given, else one
        that contains the block (the one holding most of its tiles), else a new one (``None`` without
        ``allocate``)."""
        with memory.lock:
            held = memory.pins.get(holder) if holder is not None else None
            found = held.get(block) if held else None
            if found is None:
                candidates = memory.by_column.get((id(block.matrix), block.j0), ())
                found = segment or max((s for s in candidates if s.contains(block)), default=None,
                                       key=lambda s: sum(s in memory.holders.get(p, ()) for p in block.parts))
                if found is None:
                    if not allocate:
                        return None
                    found = self._allocate(memory, block, holder)
                if holder is not None:
                    found.pins += 1
                    memory.pins.setdefault(holder, {})[block] = found
            found.last_use = next(memory.clock)
            return found

    def _allocate(self, memory: DeviceMemory, block: Block, holder: object) -> Segment:
        """A new segment for ``block``, evicting others to stay within the capacity (under the memory lock)."""
        need = block.nbytes
        while memory.bounded and memory.used + need > memory.capacity:
            victim = self._victim(memory)
            if victim is not None:
                self._evict(memory, victim)
                continue
            own = memory.pins.get(holder, {}).values()
            if all(s.pins == sum(o is s for o in own) for s in memory.segments):
                break  # only this task's own segments are left: run it over the capacity rather than stall
            if memory.cancelled:
                raise Cancelled("the run was cancelled while a copy waited for accelerator memory")
            memory.lock.wait()
        segment = Segment(block, memory.device.empty(block.shape, block.matrix.dtype), next(memory.clock))
        memory.segments.append(segment)
        for j in range(block.j0, block.j1):
            memory.by_column.setdefault((id(block.matrix), j), []).append(segment)
        memory.used += need
        memory.peak = max(memory.peak, memory.used)
        return segment

    def _dirty(self, memory: DeviceMemory, segment: Segment) -> bool:
        """Whether ``segment`` holds the only valid copy of one of its tiles."""
        return any(memory.holders.get(p) == {segment} and self._valid.get(p) == {memory.space}
                   for p in segment.block.parts)

    def _victim(self, memory: DeviceMemory) -> Segment | None:
        """The least recently used unpinned segment, a clean one if there is one."""
        unpinned = [s for s in memory.segments if s.pins == 0]
        clean = [s for s in unpinned if not self._dirty(memory, s)]
        return min(clean or unpinned, key=lambda s: s.last_use, default=None)

    def _evict(self, memory: DeviceMemory, segment: Segment) -> None:
        """Free ``segment`` (under the memory lock), first writing home the tiles only it holds."""
        for part in segment.block.parts:
            if segment not in memory.holders.get(part, ()):
                continue
            with self._tile_lock(part):
                holders = memory.holders.get(part)
                if not holders or segment not in holders:
                    continue
                if len(holders) > 1:
                    holders.discard(segment)
                    continue
                valid = self._valid[part]
                if valid == {memory.space}:
                    memory.written_back += self._copy(part, memory.space, HOST_MEMORY)
                    valid.add(HOST_MEMORY)
                valid.discard(memory.space)
                del memory.holders[part]
        memory.segments.remove(segment)
        own = segment.block
        for j in range(own.j0, own.j1):
            memory.by_column[(id(own.matrix), j)].remove(segment)
        memory.used -= segment.block.nbytes
        memory.evictions += 1
        memory.device.free(segment.data)

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
        memory = self._memories.get(device.memory_space)
        return memory is not None and memory.bounded

    def fits(self, blocks: Sequence[Block], device: Device) -> bool:
        """Whether a task on ``blocks`` fits in ``device``'s memory at all."""
        memory = self._memories.get(device.memory_space)
        return memory is None or not memory.bounded or footprint(blocks) <= memory.capacity

    def acquire(self, blocks: Sequence[Block], device: Device, holder: object = None) -> tuple[dict[Block, Any], int]:
        """Make ``blocks`` valid on ``device`` for task ``holder`` (whose segments stay pinned until
        :meth:`unpin`); returns each block's data there and the bytes moved between memory spaces."""
        if self.trivial:
            return {block: block.host for block in blocks}, 0
        space = device.memory_space
        memory = self._memories.get(space)
        if memory is None:
            moved = sum(self.write_home(block) if space == HOST_MEMORY
                        else sum(self._make_valid(p, space) for p in block.parts) for block in blocks)
            return {block: self._view(block, device) for block in blocks}, moved
        distinct = list(dict.fromkeys(blocks))
        outer = outermost(distinct)
        # pin what is already resident before making room, so that the task never evicts its own tiles
        segments = {b: self._hold(memory, b, holder, allocate=False) for b in outer}
        for block in sorted(outer, key=lambda b: -b.nbytes):
            segments[block] = segments[block] or self._hold(memory, block, holder)
        for block in distinct:
            if block not in segments:  # a block inside another one of the task is a view of that one's segment
                segments[block] = self._hold(memory, block, holder, segment=next(
                    segments[o] for o in outer if covers(o, block)))
        moved = 0
        for block in outer:
            packed = self._packed(block, space, segments[block]) if not block.is_tile else None
            if packed is None:
                packed = sum(self._make_resident(part, memory, segments[block]) for part in block.parts)
            moved += packed
        return {block: segments[block].view(block) for block in blocks}, moved

    def release(self, written: Sequence[Block], device: Device, holder: object = None) -> None:
        """After task ``holder`` wrote ``written`` on ``device``: that device (and there, the segment that served
        the task) now holds the only valid copy."""
        if self.trivial:
            return
        memory = self._memories.get(device.memory_space)
        if memory is not None:
            with memory.lock:
                self._release(written, device, memory, memory.pins.get(holder, {}))
        else:
            self._release(written, device, None, {})

    def _release(self, written: Sequence[Block], device: Device, memory: DeviceMemory | None, segments) -> None:
        others = [m for m in self._memories.values() if m is not memory]
        for block in written:
            for part in block.parts:
                # no lock: until this task's dependents start, nothing else touches a tile it wrote
                self._valid[part] = {device.memory_space}
                self._version[part] = self._version.get(part, 0) + 1
                for other in others:
                    other.holders.pop(part, None)
                if memory is not None:
                    memory.holders[part] = {segments.get(block) or self._serving(memory, block)}

    @staticmethod
    def _serving(memory: DeviceMemory, block: Block) -> Segment | None:
        """The segment of ``memory`` holding every tile of ``block``, if one does."""
        candidates = tuple(memory.by_column.get((id(block.matrix), block.j0), ()))
        return next((s for s in candidates
                     if s.contains(block) and all(s in memory.holders.get(p, ()) for p in block.parts)), None)

    def unpin(self, holder: object, device: Device) -> None:
        """Task ``holder`` has finished with its segments on ``device``: they may be evicted again."""
        memory = self._memories.get(device.memory_space)
        if memory is None:
            return
        with memory.lock:
            for segment in memory.pins.pop(holder, {}).values():
                segment.pins -= 1
            memory.lock.notify_all()

    def abort(self) -> None:
        """Wake every copy waiting for memory, to give up (the run failed)."""
        for memory in self._memories.values():
            with memory.lock:
                memory.cancelled = True
                memory.lock.notify_all()

    def close(self) -> None:
        """Give every segment back to its device (after :meth:`flush`, or after a failure)."""
        for memory in self._memories.values():
            with memory.lock:
                segments, memory.segments = memory.segments, []
                memory.by_column.clear()
                memory.holders.clear()
                memory.pins.clear()
                memory.used = 0
            for segment in segments:
                memory.device.free(segment.data)

    def write_home(self, block: Block) -> int:
        """Make the host's copy of ``block`` current (one packed copy where one segment holds all of it)."""
        packed = self._packed(block, HOST_MEMORY) if not block.is_tile else None
        return packed if packed is not None else sum(self._make_valid(p, HOST_MEMORY) for p in block.parts)

    def flush(self) -> int:
        """Copy every tile whose host copy is stale back home (a segment stale at home as a whole in one packed
        copy); returns bytes moved."""
        if self.trivial:
            return 0
        moved = sum(self._packed(segment.block, HOST_MEMORY) or 0 for memory in self._memories.values()
                    for segment in list(memory.segments) if not segment.block.is_tile)
        with self._lock:
            parts = list(self._valid)
        return moved + sum(self._make_valid(part, HOST_MEMORY) for part in parts)
