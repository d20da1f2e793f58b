"""An accelerator's memory: segments allocated within its capacity, pinned for tasks, evicted to make room.

An accelerator holds *segments*: rectangles of tiles of one matrix, each in an allocation of its own, so a block a
task names is a view of one segment with the segment's leading dimension (seed 000 §6.5), never a per-task copy.
:class:`DeviceMemory` finds, allocates, pins and frees them. Which tiles' current versions a segment holds is the
coherence directory's record (:mod:`~hetlapack.runtime.coherence`), not this module's: the directory says which
segments are dirty and empties a segment before it is freed, so this module only decides what to free and when.

Out of core (as MAGMA's ``_m`` routines): an accelerator with a capacity (:meth:`Device.memory_capacity`) keeps its
segments within it. To make room, the least recently used segment that no running or prefetched task holds is
freed, clean ones first (the directory writes a dirty one's tiles home first). A task's segments are pinned from
the moment its tiles are fetched until it has finished; an allocation that finds every byte pinned by other tasks
waits for them, and one that finds only its own task's segments left goes over the capacity rather than stall.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ..devices.base import Device
from .data import Block


class Cancelled(Exception):
    """An allocation stopped waiting for accelerator memory because the run was cancelled."""


class Segment:
    """A rectangle of tiles (``block``) held in one allocation (``data``) of an accelerator's memory; ``pins``
    counts the tasks it serves now, ``last_use`` orders segments for eviction."""

    __slots__ = ("block", "data", "last_use", "pins")

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


def _closed(segment: Segment) -> NoReturn:
    """A closed memory's ``dirty`` and ``vacate``: it holds no segment to ask about."""
    raise RuntimeError(f"{segment} belongs to a closed device memory")


class DeviceMemory:
    """The segments of one accelerator, within its capacity (see the module docstring).

    ``dirty(segment)`` says whether a segment holds the only valid copy of one of its tiles (it is then evicted
    only when no clean one can be); ``vacate(segment)`` writes such tiles home and forgets which tiles the segment
    holds, just before it is freed. Both are the directory's and are called under :attr:`lock`, which guards the
    segments and their pins; the directory holds it too while it changes which segments hold a tile.
    """

    def __init__(self, device: Device, dirty: Callable[[Segment], bool], vacate: Callable[[Segment], None]) -> None:
        self.device = device
        self.capacity = device.memory_capacity()
        self.lock = threading.Condition()
        self.segments: list[Segment] = []
        self.used = self.peak = self.evictions = 0
        self._dirty, self._vacate = dirty, vacate
        self._by_column: dict[tuple[int, int], list[Segment]] = {}  # (matrix id, tile column) -> segments over it
        self._pins: dict[object, dict[Block, Segment]] = {}  # task -> the segment serving each of its blocks
        self._cancelled = False
        self._clock = itertools.count()

    @property
    def bounded(self) -> bool:
        return self.capacity is not None

    def fits(self, blocks: Sequence[Block]) -> bool:
        """Whether a task on ``blocks`` fits in this memory at all."""
        return not self.bounded or footprint(blocks) <= self.capacity

    def containing(self, block: Block) -> list[Segment]:
        """The segments that contain ``block``, oldest first (safe without the lock: it reads a snapshot)."""
        candidates = tuple(self._by_column.get((id(block.matrix), block.j0), ()))
        return [s for s in candidates if s.contains(block)]

    def hold(self, block: Block, holder: object, rank: Callable[[Segment], int], allocate: bool = True,
             segment: Segment | None = None) -> Segment | None:
        """The segment that serves ``block`` for task ``holder``, pinned for it: the one already serving it, else
        ``segment`` if given, else the segment containing the block that ``rank`` puts highest, else a new one
        (``None`` without ``allocate``). A ``holder`` of ``None`` pins nothing."""
        with self.lock:
            held = self._pins.get(holder) if holder is not None else None
            found = held.get(block) if held else None
            if found is None:
                found = segment or max(self.containing(block), default=None, key=rank)
                if found is None:
                    if not allocate:
                        return None
                    found = self._allocate(block, holder)
                if holder is not None:
                    found.pins += 1
                    self._pins.setdefault(holder, {})[block] = found
            found.last_use = next(self._clock)
            return found

    def pinned(self, holder: object) -> dict[Block, Segment]:
        """The segment serving each block of task ``holder`` (call under :attr:`lock`)."""
        return self._pins.get(holder, {})

    def unpin(self, holder: object) -> None:
        """Task ``holder`` has finished with its segments: they may be evicted again."""
        with self.lock:
            for segment in self._pins.pop(holder, {}).values():
                segment.pins -= 1
            self.lock.notify_all()

    def cancel(self) -> None:
        """Wake every allocation waiting for room, to give up (the run failed)."""
        with self.lock:
            self._cancelled = True
            self.lock.notify_all()

    def close(self) -> None:
        """Give every segment back to the device, and drop the directory's callbacks: they hold the directory,
        which holds this memory, a cycle that would keep the run's tiles (and the matrix they view) alive after
        it until the cyclic garbage collector ran."""
        with self.lock:
            segments, self.segments = self.segments, []
            self._by_column.clear()
            self._pins.clear()
            self.used = 0
            self._dirty = self._vacate = _closed
        for segment in segments:
            self.device.free(segment.data)

    def _allocate(self, block: Block, holder: object) -> Segment:
        """A new segment for ``block``, evicting others to stay within the capacity (under the lock)."""
        need = block.nbytes
        while self.bounded and self.used + need > self.capacity:
            victim = self._victim()
            if victim is not None:
                self._evict(victim)
                continue
            own = self._pins.get(holder, {}).values()
            if all(s.pins == sum(o is s for o in own) for s in self.segments):
                break  # only this task's own segments are left: run it over the capacity rather than stall
            if self._cancelled:
                raise Cancelled("the run was cancelled while a copy waited for accelerator memory")
            self.lock.wait()
        segment = Segment(block, self.device.empty(block.shape, block.matrix.dtype), next(self._clock))
        self.segments.append(segment)
        for j in range(block.j0, block.j1):
            self._by_column.setdefault((id(block.matrix), j), []).append(segment)
        self.used += need
        self.peak = max(self.peak, self.used)
        return segment

    def _victim(self) -> Segment | None:
        """The least recently used unpinned segment, a clean one if there is one."""
        unpinned = [s for s in self.segments if s.pins == 0]
        clean = [s for s in unpinned if not self._dirty(s)]
        return min(clean or unpinned, key=lambda s: s.last_use, default=None)

    def _evict(self, segment: Segment) -> None:
        """Free ``segment`` (under the lock), once the directory has written home the tiles only it holds."""
        self._vacate(segment)
        self.segments.remove(segment)
        own = segment.block
        for j in range(own.j0, own.j1):
            self._by_column[(id(own.matrix), j)].remove(segment)
        self.used -= own.nbytes
        self.evictions += 1
        self.device.free(segment.data)
