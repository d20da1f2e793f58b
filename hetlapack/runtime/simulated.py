"""The runtime on a virtual clock: the same insertion, dependencies, queues and placement, no kernel executed.

:class:`SimulatedRuntime` is a :class:`~hetlapack.runtime.Runtime` whose workers are events instead of threads.
Algorithms insert tasks exactly as they do for a real run (on virtual matrices: no data exists); when the block
ends, a discrete-event loop runs the graph: each idle worker takes the highest-priority ready task of its
device, which starts once its tiles have arrived and lasts what the device's model says
(:meth:`~hetlapack.devices.modeled.ModeledDevice.seconds`). Tiles move with the same coherence protocol as real
runs; each copy is priced on the device's link, one DMA engine per direction per link (seed 000 §6.2:
communication = bytes / bandwidth + latency), and starts as soon as the task that needs it is ready (prefetch),
as the engines allow. The result is a trace with virtual times, per-device busy time and energy.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

from ..devices.cpu import HOST_MEMORY
from ..devices.modeled import ModeledDevice
from .coherence import Coherence
from .data import Block, TiledMatrix
from .placement import Placement
from .scheduler import Runtime
from .task import Task
from .trace import Trace


class TimedCoherence(Coherence):
    """The coherence protocol of real runs, moving no data: each copy is priced and queued on a link engine.

    ``arrival[(tile, space)]`` is when a tile's current version is there; ``now`` is the virtual time of the
    request.
    """

    def __init__(self, devices: Sequence[ModeledDevice]) -> None:
        super().__init__(devices)
        self.now = 0.0
        self.arrival: dict[tuple[Block, Hashable], float] = {}
        self.engine_free: dict[tuple[Hashable, str], float] = {}
        self.copies: list[tuple[str, str, int, float, float]] = []

    def _view(self, block: Block, device: ModeledDevice) -> None:
        return None

    def acquire(self, blocks: Sequence[Block], device: ModeledDevice) -> tuple[dict, int]:
        """Make ``blocks`` valid on ``device`` (pricing the copies); there is no data to return."""
        return ({}, 0) if self.trivial else super().acquire(blocks, device)

    def _copy(self, part: Block, source: Hashable, destination: Hashable) -> int:
        link_space, direction = (source, "down") if destination == HOST_MEMORY else (destination, "up")
        device = self._device_of_space[link_space]
        engine = (link_space, direction)
        ready = max(self.now, self.arrival.get((part, source), 0.0))
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
        """``blocks`` were written on ``device`` at ``when``: that copy is the only valid one from then on."""
        self.release(blocks, device)
        for block in blocks:
            for part in block.parts:
                self.arrival[(part, device.memory_space)] = when

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

    @staticmethod
    def _resolve(devices: Sequence[ModeledDevice]) -> list[ModeledDevice]:
        devices = list(devices)
        if not devices or not all(isinstance(d, ModeledDevice) for d in devices):
            raise ValueError("a simulated runtime needs ModeledDevice objects (hetlapack.devices.profiles.parse)")
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            raise ValueError(f"modeled devices need distinct names, got {names}")
        return devices

    def distribute(self, matrix: TiledMatrix, owner) -> None:
        """Start every tile of ``matrix`` in the memory of ``devices[owner(i, j)]`` instead of the host's (the
        matrix of a distributed run lives with its owners). Call before inserting tasks."""
        for j in range(matrix.nt):
            for i in range(matrix.mt):
                self._coherence.place(matrix(i, j), self.devices[owner(i, j)])

    def start(self) -> None:
        """Nothing starts: the graph runs on the virtual clock when the block ends."""

    def insert(self, kernel, *args, priority: int = 0, **kwargs) -> Task:
        """:meth:`Runtime.insert`; with ``priorities=False`` every task gets priority 0 (to measure lookahead)."""
        return super().insert(kernel, *args, priority=priority if self.priorities else 0, **kwargs)

    def _push(self, task: Task) -> None:
        """A ready task: its device starts fetching its tiles now (prefetch); the task joins its device's queue
        once they have arrived (a data-availability-driven runtime, seed 003 §4)."""
        device = self.devices[self._place(task)]
        blocks = [arg for arg in task.args if isinstance(arg, Block)]
        self._coherence.acquire(blocks, device)
        arrival = self._coherence.ready_time(blocks, device)
        if arrival <= self._coherence.now:
            heapq.heappush(self._queues[task.device_index], task)
        else:
            heapq.heappush(self._arriving, (arrival, task.seq, task))

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
        from tqdm import tqdm  # noqa: PLC0415 - only the simulator shows progress

        with tqdm(total=self._inserted, desc="simulating", unit="task", disable=not self.progress,
                  mininterval=0.5) as bar:
            self._run_events(bar)
        if self._finished != self._inserted:
            raise RuntimeError(f"simulation stalled with {self._inserted - self._finished} tasks unfinished")

    def _run_events(self, bar) -> None:
        free = [[0.0] * device.workers for device in self.devices]
        events: list[tuple[float, int, Task]] = []
        now = 0.0
        while True:
            with self._lock:
                while self._arriving and self._arriving[0][0] <= now:
                    task = heapq.heappop(self._arriving)[2]
                    heapq.heappush(self._queues[task.device_index], task)
                for index, device in enumerate(self.devices):
                    queue = self._queues[index]
                    for worker, free_at in enumerate(free[index]):
                        if not queue:
                            break
                        if free_at <= now:
                            task = heapq.heappop(queue)
                            self._running += 1
                            free[index][worker] = end = self._run(task, device, worker, now)
                            heapq.heappush(events, (end, task.seq, task))
            if not events and not self._arriving:
                break
            if self._arriving and (not events or self._arriving[0][0] < events[0][0]):
                now = self._coherence.now = self._arriving[0][0]
                continue
            now, _, task = heapq.heappop(events)
            with self._lock:
                self._coherence.now = now
                self._complete(task, None)
            bar.update()
        self.makespan = now

    def _run(self, task: Task, device: ModeledDevice, worker: int, start: float) -> float:
        """Price ``task`` on ``device`` from ``start``; record it; returns its end."""
        tile = min(task.writes[0].shape) if task.writes else 1
        single = bool(task.writes) and task.writes[0].matrix.dtype.char in "fF"
        end = start + device.seconds(task.name, task.flops, tile, single)
        self._coherence.written(list(task.writes), device, end)
        self.busy[device.name] += end - start
        self._busy_energy += (device.watts(task.name, device.threads) - device.power.idle) * (end - start)
        self.tasks += 1
        self.trace.record(task.name, ",".join(map(repr, task.writes)), device.name, worker, start, end, 0)
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
