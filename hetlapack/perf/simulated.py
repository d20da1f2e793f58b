"""The runtime on a virtual clock: the same insertion, dependencies, queues and placement, no kernel executed.

:class:`SimulatedRuntime` is a :class:`~hetlapack.runtime.Runtime` whose workers are events instead of threads.
Algorithms insert tasks exactly as they do for a real run (on virtual matrices: no data exists); when the block
ends, a discrete-event loop runs the graph: each idle worker takes the highest-priority ready task of its
device (or, as in real runs, waits for a task that outranks it and whose tiles are still arriving), which starts
once its tiles have arrived and lasts what the device's model says
(:meth:`~hetlapack.perf.modeled.ModeledDevice.seconds`). Tiles move with the same coherence protocol as real
runs; each copy is priced on the device's link, one DMA engine per direction per link (seed 000 §6.2:
communication = bytes / bandwidth + latency), and starts as soon as the task that needs it is ready (prefetch),
as the engines allow. An accelerator with a memory capacity (``ModeledDevice.memory_bytes``) holds its tiles
within it as the real runtime does (:mod:`~hetlapack.runtime.device_memory`): a tile that does not fit evicts the
least recently used tile no ready or running task holds, a clean one first, and a tile whose only valid copy is
there is first written home over the link; the copy in waits for that, and a task waits while the memory is full
of tiles other tasks hold. Devices whose kernels run on the host's cores (``ModeledDevice.host_compute``: this
machine's CPU and emulated accelerators) share those cores: each running kernel holds its ``threads`` of them, and
a kernel that would start while too few are free waits for them, highest priority first across those devices. The
operating system would time-share the cores instead; waiting for free cores costs the same core-seconds and keeps
the model simple and deterministic. The result is a trace with virtual times, per-device busy time and energy.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ..devices.cpu import HOST_MEMORY
from .modeled import ModeledDevice
from ..runtime.coherence import Coherence, MemoryStats
from ..runtime.data import Block, TiledMatrix
from ..runtime.placement import Placement
from ..runtime.scheduler import Runtime
from ..runtime.task import Task
from ..runtime.trace import Trace


class ModeledMemory:
    """The tiles one modeled accelerator holds within its capacity. Tiles held for no ready or running task wait
    for eviction in least-recently-used order, the clean ones (valid elsewhere too) apart from the dirty ones;
    ``pins`` counts the tasks holding each tile. A tile that stopped being current stays (and takes room) until
    evicted, as the real runtime's segments do."""

    def __init__(self, device: ModeledDevice) -> None:
        self.device = device
        self.space = device.memory_space
        self.capacity = device.memory_bytes
        self.tiles: set[Block] = set()
        self.pins: Counter[Block] = Counter()
        self.clean: OrderedDict[Block, None] = OrderedDict()
        self.dirty: OrderedDict[Block, None] = OrderedDict()
        self.used = self.evictable = self.peak = self.evictions = self.written_back = self.link_copies = 0

    def stats(self) -> MemoryStats:
        return MemoryStats(self.capacity, self.peak, self.evictions, self.written_back, 0, self.link_copies)

    def pin(self, part: Block) -> None:
        self.pins[part] += 1
        self._unlist(part)

    def unpin(self, part: Block, dirty: bool) -> None:
        self.pins[part] -= 1
        if not self.pins[part] and part in self.tiles:
            (self.dirty if dirty else self.clean)[part] = None
            self.evictable += part.nbytes

    def cleaned(self, part: Block) -> None:
        """``part`` became valid elsewhere too: evicting it needs no write-back."""
        if part in self.dirty:
            del self.dirty[part]
            self.clean[part] = None

    def add(self, part: Block) -> None:
        self.tiles.add(part)
        self.used += part.nbytes
        self.peak = max(self.peak, self.used)

    def victim(self) -> Block | None:
        """The least recently used tile no task holds, a clean one if there is one."""
        return next(iter(self.clean or self.dirty), None)

    def remove(self, part: Block) -> None:
        self._unlist(part)
        self.tiles.discard(part)
        self.used -= part.nbytes
        self.evictions += 1

    def room_for(self, parts: Sequence[Block]) -> bool:
        """Whether ``parts`` fit once every tile no task holds has gone, or no task holds any (then, as in the real
        runtime, a task bigger than the memory runs over its capacity rather than stall)."""
        if self.used == self.evictable:
            return True
        own = [p for p in parts if p in self.tiles]
        need = sum(p.nbytes for p in parts) - sum(p.nbytes for p in own)
        spare = self.evictable - sum(p.nbytes for p in own if not self.pins[p])
        return self.used - spare + need <= self.capacity

    def _unlist(self, part: Block) -> None:
        for listed in (self.clean, self.dirty):
            if part in listed:
                del listed[part]
                self.evictable -= part.nbytes


class TimedCoherence(Coherence):
    """The coherence protocol of real runs, moving no data: each copy is priced and queued on a link engine,
    within the accelerators' memory capacities (see the module docstring).

    ``arrival[(tile, space)]`` is when a tile's current version is there; ``now`` is the virtual time of the
    request.
    """

    def __init__(self, devices: Sequence[ModeledDevice]) -> None:
        super().__init__(devices)
        self.now = 0.0
        self.arrival: dict[tuple[Block, Hashable], float] = {}
        self.engine_free: dict[tuple[Hashable, str], float] = {}
        self.copies: list[tuple[str, str, int, float, float]] = []
        self._bounded = {d.memory_space: ModeledMemory(d) for d in self.devices
                         if d.memory_space != HOST_MEMORY and d.memory_bytes is not None}
        self._held: dict[object, tuple[ModeledMemory, list[Block]]] = {}

    def _view(self, block: Block, device: ModeledDevice) -> None:
        return None

    @staticmethod
    def _parts(blocks: Sequence[Block]) -> list[Block]:
        return list(dict.fromkeys(part for block in blocks for part in block.parts))

    def fits(self, blocks: Sequence[Block], device: ModeledDevice) -> bool:
        """Whether a task on ``blocks`` fits in ``device``'s memory at all."""
        memory = self._bounded.get(device.memory_space)
        return memory is None or sum(p.nbytes for p in self._parts(blocks)) <= memory.capacity

    def bounded(self, device: ModeledDevice) -> bool:
        """Whether ``device``'s memory has a capacity."""
        return device.memory_space in self._bounded

    def room(self, blocks: Sequence[Block], device: ModeledDevice) -> bool:
        """Whether ``blocks`` can be made resident on ``device`` now, evicting only tiles no task holds (else the
        task waits for one to finish, as the real runtime's copy thread does)."""
        memory = self._bounded.get(device.memory_space)
        return memory is None or memory.room_for(self._parts(blocks))

    def acquire(self, blocks: Sequence[Block], device: ModeledDevice, holder: object = None) -> tuple[dict, int]:
        """Make ``blocks`` valid on ``device`` for task ``holder`` (pricing the copies), whose tiles stay pinned
        there until :meth:`unpin`; there is no data to return."""
        if self.trivial:
            return {}, 0
        memory = self._bounded.get(device.memory_space)
        if memory is not None and holder is not None:
            parts = self._parts(blocks)
            for part in parts:
                memory.pin(part)
            self._held[holder] = (memory, parts)
        return super().acquire(blocks, device)

    def unpin(self, holder: object, device: ModeledDevice) -> None:
        """Task ``holder`` has finished: its tiles may be evicted again, least recently used first."""
        memory, parts = self._held.pop(holder, (None, ()))
        for part in parts:
            memory.unpin(part, self._valid.get(part) == {memory.space})

    def stats(self) -> dict[str, MemoryStats]:
        """Memory statistics per modeled accelerator with a capacity."""
        return {memory.device.name: memory.stats() for memory in self._bounded.values()}

    def _make_room(self, memory: ModeledMemory, part: Block) -> float:
        """Give ``part`` a place in ``memory``, evicting as needed; returns when that place is free."""
        if part in memory.tiles:
            return self.now
        free_at = self.now
        while memory.used + part.nbytes > memory.capacity and (victim := memory.victim()) is not None:
            free_at = max(free_at, self._evict(memory, victim))
        memory.add(part)
        return free_at

    def _evict(self, memory: ModeledMemory, part: Block) -> float:
        """Drop ``part`` from ``memory``, first writing it home if that is its only valid copy; returns when its
        place is free."""
        valid = self._valid.setdefault(part, {HOST_MEMORY})
        free_at = self.now
        memory.remove(part)
        if valid == {memory.space}:
            memory.written_back += self._copy(part, memory.space, HOST_MEMORY)
            valid.add(HOST_MEMORY)
            free_at = self.arrival[(part, HOST_MEMORY)]
        valid.discard(memory.space)
        return free_at

    def _copy(self, part: Block, source: Hashable, destination: Hashable) -> int:
        link_space, direction = (source, "down") if destination == HOST_MEMORY else (destination, "up")
        device = self._device_of_space[link_space]
        engine = (link_space, direction)
        ready = max(self.now, self.arrival.get((part, source), 0.0))
        memory = self._bounded.get(link_space)
        if memory is not None:
            memory.link_copies += 1
            if direction == "up":
                ready = max(ready, self._make_room(memory, part))
            else:
                memory.cleaned(part)
        start = max(ready, self.engine_free.get(engine, 0.0))
        end = start + device.transfer_seconds(part.nbytes)
        self.engine_free[engine] = end
        self.arrival[(part, destination)] = end
        self.copies.append((device.name, direction, part.nbytes, start, end))
        return super()._copy(part, source, destination)

    def _copy_data(self, part: Block, source: Hashable, destination: Hashable) -> None:
        """Nothing to copy: the matrix is virtual."""

    def place(self, part: Block, device: ModeledDevice) -> None:
        """Tile ``part`` starts in ``device``'s memory only (a distributed matrix), available at time zero."""
        self._valid[part] = {device.memory_space}
        self.arrival[(part, device.memory_space)] = 0.0

    def ready_time(self, blocks: Sequence[Block], device: ModeledDevice) -> float:
        """When every tile of ``blocks`` is valid in ``device``'s memory (after :meth:`acquire`)."""
        space = device.memory_space
        return max((self.arrival.get((part, space), 0.0) for block in blocks for part in block.parts), default=0.0)

    def written(self, blocks: Sequence[Block], device: ModeledDevice, when: float) -> None:
        """``blocks`` were written on ``device`` at ``when``: that copy is the only valid one from then on (the
        other accelerators' copies are stale: clean to evict)."""
        self.release(blocks, device)
        others = [m for m in self._bounded.values() if m.space != device.memory_space]
        for block in blocks:
            for part in block.parts:
                self.arrival[(part, device.memory_space)] = when
                for memory in others:
                    memory.cleaned(part)

    def close(self) -> None:
        """No memory was allocated."""


class SimulatedRuntime(Runtime):
    """A :class:`Runtime` over :class:`ModeledDevice` objects with a virtual clock (see the module docstring).

    ``gather`` brings every tile home at the end (a hybrid call returns its result in host memory); a
    distributed run leaves tiles where they are. ``idle_devices`` are powered but given no work (the host CPU
    of a GPU-only run); ``call_overhead_s`` is added once (starting and joining the runtime);
    ``priorities=False`` drops the algorithm's priorities (no deliberate lookahead); ``progress`` shows a bar
    over the tasks simulated. After the block: ``makespan`` in seconds, ``trace`` events in
    virtual time, ``busy`` seconds per device, and :meth:`energy_joules`.
    """

    def __init__(self, devices: Sequence[ModeledDevice], placement: str | Placement = "owner",
                 trace: Trace | None = None, gather: bool = True, idle_devices: Sequence[ModeledDevice] = (),
                 call_overhead_s: float = 0.0, priorities: bool = True, progress: bool = False) -> None:
        super().__init__(devices, placement, trace if trace is not None else Trace(origin=0.0))
        self._coherence = TimedCoherence(self.devices)
        self.gather = gather
        self.idle_devices = list(idle_devices)
        self.call_overhead_s = call_overhead_s
        self.priorities = priorities
        self.progress = progress
        self.makespan = 0.0
        self.tasks = 0
        self._busy_energy = 0.0
        self.busy = {d.name: 0.0 for d in self.devices}
        self._arriving: list[tuple[float, int, Task]] = []
        self._transit: list[list[Task]] = [[] for _ in self.devices]  # _arriving's tasks, by device
        self._waiting: list[list[Task]] = [[] for _ in self.devices]
        self._on_host = [i for i, d in enumerate(self.devices) if d.host_compute]
        self._host_cores = max((self.devices[i].cores for i in self._on_host), default=0)
        self._host_cores_busy = 0

    @staticmethod
    def _resolve(devices: Sequence[ModeledDevice]) -> list[ModeledDevice]:
        devices = list(devices)
        if not devices or not all(isinstance(d, ModeledDevice) for d in devices):
            raise ValueError("a simulated runtime needs ModeledDevice objects (hetlapack.perf.profiles.parse)")
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise ValueError(f"modeled devices need distinct names, got {names}")
        return devices

    def distribute(self, matrix: TiledMatrix, owner: Callable[[int, int], int]) -> None:
        """Start every tile of ``matrix`` in the memory of ``devices[owner(i, j)]`` instead of the host's (the
        matrix of a distributed run lives with its owners). Call before inserting tasks."""
        for j in range(matrix.nt):
            for i in range(matrix.mt):
                self._coherence.place(matrix(i, j), self.devices[owner(i, j)])

    def start(self) -> None:
        """Nothing starts: the graph runs on the virtual clock when the block ends."""

    def insert(self, kernel: str | Callable[..., Any], *args: Any, priority: int = 0, **kwargs: Any) -> Task:
        """:meth:`Runtime.insert`; with ``priorities=False`` every task gets priority 0 (to measure lookahead)."""
        return super().insert(kernel, *args, priority=priority if self.priorities else 0, **kwargs)

    def _push(self, task: Task) -> None:
        """A ready task: its device starts fetching its tiles now (prefetch); the task joins its device's queue
        once they have arrived (a data-availability-driven runtime, seed 003 §4). On a device whose memory is
        full of tiles other tasks hold, it first waits, highest priority first, for one of them to finish."""
        index = self._place(task)
        heapq.heappush(self._waiting[index], task)
        self._admit(index)

    def _admit(self, index: int) -> None:
        """Fetch the tiles of device ``index``'s waiting tasks, in priority order, while they have room."""
        device, waiting = self.devices[index], self._waiting[index]
        while waiting and self._coherence.room(waiting[0].blocks, device):
            task = heapq.heappop(waiting)
            blocks = task.blocks
            self._coherence.acquire(blocks, device, task)
            arrival = self._coherence.ready_time(blocks, device)
            if arrival <= self._coherence.now:
                heapq.heappush(self._queues[index], task)
            else:
                heapq.heappush(self._arriving, (arrival, task.seq, task))
                self._transit[index].append(task)

    def wait(self, reraise: bool = True) -> None:
        """Run the graph on the virtual clock, then (with ``gather``) bring every tile home."""
        if self._error is None:
            self._simulate()
            end = self._coherence.now = self.makespan
            if self.gather:
                self._coherence.flush()
                end = max([end, *self._coherence.arrival.values()])
            self.makespan = end + self.call_overhead_s
            self.trace.transfers.extend(self._coherence.log)
        if self._error is not None and reraise:
            raise self._error

    def _simulate(self) -> None:
        if self.progress:
            from tqdm import tqdm  # noqa: PLC0415 - only the simulator shows progress

            with tqdm(total=self._inserted, desc="simulating", unit="task", mininterval=0.5) as bar:
                self._run_events(bar.update)
        else:  # no bar at all: even a disabled one starts tqdm's monitor thread, which outlives every call
            self._run_events(lambda: None)
        if self._finished != self._inserted:
            raise RuntimeError(f"simulation stalled with {self._inserted - self._finished} tasks unfinished")

    def _run_events(self, task_done: Callable[[], None]) -> None:
        free = [[0.0] * device.workers for device in self.devices]
        events: list[tuple[float, int, Task]] = []
        now = 0.0
        while True:
            with self._lock:
                while self._arriving and self._arriving[0][0] <= now:
                    task = heapq.heappop(self._arriving)[2]
                    self._transit[task.device_index].remove(task)
                    heapq.heappush(self._queues[task.device_index], task)
                self._start_on_host_cores(free, events, now)
                for index, device in enumerate(self.devices):
                    if device.host_compute:
                        continue  # started above, within the host's cores
                    queue = self._queues[index]
                    for worker, free_at in enumerate(free[index]):
                        if not queue:
                            break
                        if free_at <= now:  # _may_start changes only when a task starts: asked of idle workers alone
                            if not self._may_start(index, free, now):
                                break
                            self._start(heapq.heappop(queue), index, worker, free, events, now)
            if not events and not self._arriving:
                break
            if self._arriving and (not events or self._arriving[0][0] < events[0][0]):
                now = self._coherence.now = self._arriving[0][0]
                continue
            now, _, task = heapq.heappop(events)
            with self._lock:
                device = self.devices[task.device_index]
                if device.host_compute:
                    self._host_cores_busy -= device.threads
                self._coherence.now = now
                self._coherence.unpin(task, device)
                self._complete(task, None)
                self._admit(task.device_index)
            task_done()
        self.makespan = now

    def _start_on_host_cores(self, free: list[list[float]], events: list, now: float) -> None:
        """Start the ready tasks of the host-computing devices that have an idle worker, highest priority first
        across them, while the host has the cores each needs; the first that does not fit waits for cores to free,
        and so do the tasks after it (no overtaking, as in one priority queue)."""
        while True:
            heads = [(self._queues[i][0], i) for i in self._on_host
                     if self._queues[i] and min(free[i]) <= now and self._may_start(i, free, now)]
            if not heads:
                return
            task, index = min(heads, key=lambda head: head[0])
            threads = self.devices[index].threads
            if self._host_cores_busy + threads > self._host_cores:
                return
            self._host_cores_busy += threads
            worker = next(w for w, free_at in enumerate(free[index]) if free_at <= now)
            self._start(heapq.heappop(self._queues[index]), index, worker, free, events, now)

    def _in_transit(self, index: int) -> list[Task]:
        """The tasks whose tiles are still arriving on device ``index``."""
        return self._transit[index]

    def _may_start(self, index: int, free: list[list[float]], now: float) -> bool:
        """As in real runs: device ``index`` may start its best ready task now unless a task in transit outranks it
        (:meth:`Runtime._outranked`) and only one of its workers is idle (that one waits for it)."""
        return sum(free_at <= now for free_at in free[index]) > 1 or not self._outranked(index)

    def _start(self, task: Task, index: int, worker: int, free: list[list[float]], events: list,
               now: float) -> None:
        """Run ``task`` on worker ``worker`` of device ``index`` from ``now``; its end joins ``events``."""
        self._running += 1
        free[index][worker] = end = self._run(task, self.devices[index], worker, now)
        heapq.heappush(events, (end, task.seq, task))

    def _run(self, task: Task, device: ModeledDevice, worker: int, start: float) -> float:
        """Price ``task`` on ``device`` from ``start``; record it; returns its end."""
        tile = min(task.writes[0].shape) if task.writes else 1
        single = bool(task.writes) and task.writes[0].matrix.dtype.char in "fF"
        end = start + device.seconds(task.name, task.flops, tile, single)
        self._coherence.written(list(task.writes), device, end)
        self.busy[device.name] += end - start
        self._busy_energy += (device.watts(task.name, device.threads) - device.power.idle) * (end - start)
        self.tasks += 1
        self.trace.record(task.name, task.written, device.name, worker, start, end, 0)
        return end

    def energy_joules(self) -> float:
        """Joules over the makespan: every device (and idle device) at idle power, plus each task's busy power,
        plus, on a CPU, the busy power of cores that spin-wait after a task (up to the profile's ``spin_s``,
        as OpenMP runtimes do) before they sleep."""
        idle = sum(d.power.idle for d in (*self.devices, *self.idle_devices)) * self.makespan
        return idle + self._busy_energy + self._spin_energy()

    def _spin_energy(self) -> float:
        by_worker: dict[tuple[str, int], list] = {}
        for event in self.trace.events:
            by_worker.setdefault((event.device, event.worker), []).append(event)
        devices = {d.name: d for d in self.devices}
        joules = 0.0
        for (name, _), events in by_worker.items():
            device = devices[name]
            if device.spin_s <= 0:
                continue
            events.sort(key=lambda e: e.start)
            ends = [e.end for e in events]
            starts = [e.start for e in events[1:]] + [self.makespan]
            for event, end, start in zip(events, ends, starts):
                spin = min(max(start - end, 0.0), device.spin_s)
                joules += (device.watts(event.kernel, device.threads) - device.power.idle) * spin
        return joules

    @property
    def transfer_seconds(self) -> float:
        """Seconds the link engines were busy moving tiles."""
        return sum(end - start for *_, start, end in self._coherence.copies)
