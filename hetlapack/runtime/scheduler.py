"""The task runtime: serial insertion, a DAG from access annotations, per-device priority queues, workers.

An algorithm inserts its tasks in ``Runtime(devices).run(insert)`` (or inside ``with Runtime(devices) as rt:``), by
``rt.insert(kernel, *args, reads=..., writes=..., priority=...)``. Workers start first so tasks run while insertion goes
on; a task runs as soon as its predecessors finished, highest priority first on its device (lookahead comes from
priorities, seed 000 §6.4). Where devices have memory spaces of their own, each device also has a copy thread: a ready
task whose tiles are elsewhere first has them copied in, highest priority first, while the device's workers compute, and
joins the device's queue once they have arrived (seed 002 §2.3: panel transfers as high-priority work; seed 003 §4: a
data-availability-driven runtime); meanwhile the device's workers start no task it outranks. On an accelerator with a
memory capacity every task passes through the copy thread, which also pins the task's tiles there until it has run
(out-of-core streaming, see :mod:`~hetlapack.runtime.device_memory`); a task too big for that capacity runs where it
fits (the host). Leaving ``run`` (or the block) waits for every task, brings data home and joins every worker thread. If
a task raises, nothing else starts, running tasks finish, and the task's exception is raised in the caller. Once the
algorithm has inserted its last task (``wait``), a tile whose last writer has run on an accelerator is final: that
device's copy thread writes it home when it has nothing to fetch, so the final gather overlaps the end of the
factorization.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

import numpy as np

from ..devices import resolve
from ..devices.base import KERNEL_CLASS, Device
from ..devices.capability import refine
from ..devices.cpu import HOST_MEMORY
from ..signals import signals_held
from ..blas_threads import blas_threads
from .coherence import Coherence, MemoryStats
from .data import Block, TiledMatrix
from .placement import Placement, make_placement
from .task import DependencyTracker, Task
from .trace import Trace


class Runtime:
    """A task-superscalar scheduler over ``devices`` (default: the host CPU).

    ``devices`` may mix Device objects and names (``"cpu"``, ``"cuda:0"``, ``"emulated:1"``), resolved by
    :func:`hetlapack.devices.resolve`.
    ``placement`` is ``"owner"`` (panels on the CPU among accelerators, the rest where the HGDD layout puts
    the tile written; equal weights give the 1-D block-column cyclic layout), ``"capability"``
    (greedy by capability) or a :class:`~hetlapack.runtime.placement.Placement`. ``trace`` collects one record
    per task when given. Observed kernel rates refine the devices' capability weights as tasks finish
    (seed 000 §6.2); ``transfers`` lists every tile copied between memory spaces and ``memory`` each
    accelerator's memory statistics.
    """

    def __init__(self, devices: Sequence[Device | str] | None = None, placement: str | Placement = "owner",
                 trace: Trace | None = None) -> None:
        self.devices = self._resolve(devices)
        self.placement = make_placement(placement)
        self.placement.bind(self.devices)
        self.trace = trace
        self._coherence = Coherence(self.devices)
        self._tracker = DependencyTracker()
        # Reentrant for one property: a Condition over an RLock takes the lock back after a wait without being
        # interruptible (over a Lock, a Ctrl-C landing there left the lock released inside ``with``).
        self._lock = threading.RLock()
        self._ready_signal = [threading.Condition(self._lock) for _ in self.devices]
        self._idle_signal = threading.Condition(self._lock)
        self._queues: list[list[Task]] = [[] for _ in self.devices]
        self._fetch_queues: list[list[Task]] = [[] for _ in self.devices]
        self._fetch_signal = [threading.Condition(self._lock) for _ in self.devices]
        self._fetching: list[Task | None] = [None for _ in self.devices]
        self._holding = [0 for _ in self.devices]
        self._writebacks: list[list[Block]] = [[] for _ in self.devices]
        self._all_inserted = False
        self._threads: list[threading.Thread] = []
        self._inserted = 0
        self._finished = 0
        self._running = 0
        self._stopping = False
        self._error: BaseException | None = None
        self._blas_limit: contextlib.ExitStack | None = None

    @staticmethod
    def _resolve(devices):
        return resolve(devices)

    # --- lifecycle --------------------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        """Start the workers; an interrupt or error while they start stops those started and lifts the BLAS cap
        (``__exit__`` does not run when ``__enter__`` raises)."""
        try:
            self.start()
        except BaseException as error:
            self._cancel(error)
            self.wait(reraise=False)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Wait for the tasks (after an error, cancel them) and stop the workers. An interrupt that lands as
        :meth:`wait` is called or as it returns, outside its own handling, stops everything all the same."""
        try:
            if exc is not None:
                self._cancel(exc)
            self.wait(reraise=exc is None)
        except BaseException as error:
            if self._error is None:  # else wait handled it, or a second interrupt goes on at once (see wait)
                self._cancel(error)
                self.wait(reraise=False)
            raise

    def run(self, insert: Callable[[Self], Any]) -> Any:
        """Start the workers, call ``insert(self)`` to insert the tasks, wait for them and stop the workers; what
        ``insert`` returns. Like ``with self: insert(self)``, but an interrupt that lands as ``__exit__`` is entered,
        before its first line (Python runs a pending signal's handler as a function starts), stops everything too:
        after such a ``with`` the workers would wait forever and BLAS would stay capped (a CI run, 1 of 240
        interrupted hybrid calls)."""
        try:
            with self:
                return insert(self)
        except BaseException as error:
            if self._threads or self._blas_limit is not None:  # __exit__ never ran: stop here
                self._cancel(error)
                self.wait(reraise=False)
            raise

    def start(self) -> None:
        """Start the worker threads (several for a device with ``workers > 1``) and cap BLAS threads."""
        host_workers = sum(d.workers for d in self.devices if d.host_compute)
        self._blas_limit = contextlib.ExitStack()
        # Signal handlers held back meanwhile (hetlapack.signals): an interrupt between setting the cap and
        # recording its undoing would keep it, and one inside Thread.start can leave a thread registered with
        # ``threading`` but never started.
        with signals_held():
            self._blas_limit.enter_context(blas_threads(host_workers))
            for index, device in enumerate(self.devices):
                for worker in range(device.workers):
                    self._start_thread(self._work, (index, worker), f"hetlapack-{device.name}-{worker}")
                if not self._coherence.trivial:
                    self._start_thread(self._fetch, (index,), f"hetlapack-{device.name}-copy")

    def _start_thread(self, target: Callable, args: tuple, name: str) -> None:
        """Start a worker, listed before it starts so that an interrupt before ``Thread.start`` leaves none
        unjoined."""
        thread = threading.Thread(target=target, args=args, daemon=True, name=name)
        self._threads.append(thread)
        thread.start()

    def wait(self, reraise: bool = True) -> None:
        """Wait for every inserted task (or, after a failure, for the running ones), then stop the workers. An
        interrupt while waiting (Ctrl-C's KeyboardInterrupt) cancels the graph: the running tasks end, nothing else
        starts, the workers stop and BLAS's limits come back before the interrupt goes on. A second interrupt
        while the running tasks end goes on at once (a task that hangs cannot hold the caller)."""
        try:
            self._stop_workers()
            interrupted = None
        except BaseException as interrupt:  # noqa: BLE001 - re-raised below, once no worker runs
            interrupted = interrupt
            self._cancel(interrupt)
            self._stop_workers()
        try:
            if self._error is None:
                self._coherence.flush()
            if self.trace is not None:
                self.trace.transfers.extend(self._coherence.log)
        finally:
            with signals_held():
                if self._blas_limit is not None:
                    self._blas_limit.close()
                    self._blas_limit = None
            self._coherence.close()
        if interrupted is not None:
            raise interrupted
        if self._error is not None and reraise:
            raise self._error

    def _stop_workers(self) -> None:
        """Let the inserted tasks (after a failure, the running ones) finish, then stop and join every worker."""
        with self._lock:
            if not self._coherence.trivial and self._error is None:
                self._all_inserted = True
                for task in {t for t in self._tracker.last_writer.values() if t.done}:
                    self._write_back(task)
            while not self._quiescent():
                self._wait_for_idle()
            self._stopping = True
            for waiting in (*self._ready_signal, *self._fetch_signal):
                waiting.notify_all()
        for thread in self._threads:
            with contextlib.suppress(RuntimeError):  # an interrupt came before it started: nothing to join
                thread.join()
        self._threads.clear()

    def _wait_for_idle(self) -> None:
        """Wait on the idle signal, holding the lock again whatever interrupts the wait: ``Condition.wait`` lets the
        lock go before the ``try`` that takes it back, so Ctrl-C landing in between left it released inside
        ``with self._lock`` (whose exit then raised RuntimeError in place of the interrupt: a CI run, 1 of 80
        interrupted hybrid calls)."""
        try:
            self._idle_signal.wait()
        except BaseException:
            with signals_held():
                if not self._lock._is_owned():
                    self._lock.acquire()
            raise

    @property
    def transfers(self) -> list:
        """Every tile copy between memory spaces so far (:class:`~hetlapack.runtime.coherence.Transfer`)."""
        return self._coherence.log

    @property
    def memory(self) -> dict[str, MemoryStats]:
        """Per accelerator: capacity, peak bytes held, evictions, bytes written back to make room."""
        return self._coherence.stats()

    def _quiescent(self) -> bool:
        if self._error is not None:
            return self._running == 0
        return self._finished == self._inserted

    def _cancel(self, error: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = error
            self._clear_queues()
            self._idle_signal.notify_all()
        self._coherence.abort()

    def _fail(self, error: BaseException) -> None:
        """Record the first failure of a copy or a task (under the lock): nothing else starts."""
        if self._error is None:
            self._error = error
            self._clear_queues()
            self._coherence.abort()

    def _clear_queues(self) -> None:
        for queue in (*self._queues, *self._fetch_queues, *self._writebacks):
            queue.clear()

    # --- insertion --------------------------------------------------------------------------------------------
    def matrix(self, array: np.ndarray, tile_rows: int | Sequence[int], tile_cols: int | Sequence[int] | None = None,
               name: str = "A") -> TiledMatrix:
        """Cut a Fortran-ordered host array into tiles (the handles name its tiles, no data is copied)."""
        return TiledMatrix(array, tile_rows, tile_cols, name)

    def column_blocks(self, first: int, stop: int, per_worker: int = 1) -> list[tuple[int, int]]:
        """Tile columns ``first .. stop-1`` of one step's trailing update, as ``(j0, j1)`` blocks that one task each
        updates. On the CPU alone they are cut into ``per_worker`` near-equal blocks a worker: one LARFB call on a
        wider block runs faster (one core, 3600 x 384 reflectors: 75-79 GFLOP/s on 384 columns, 80-81 on 768-1536).
        One a worker where a step's lookahead column is a task of its own or nothing waits for the blocks as a whole;
        two where the step's next task waits for all of them, so that the workers finish them together (timed in
        ``docs/hybrid.md``). Elsewhere every column is a block of its own: among several devices each is its owner's,
        as the layout deals them, and no accelerator was timed with blocks."""
        columns = stop - first
        if columns <= 0:
            return []
        cpu_alone = len(self.devices) == 1 and self.devices[0].kind == "cpu"
        parts = min(per_worker * self.devices[0].workers, columns) if cpu_alone else columns
        bounds = [first + columns * part // parts for part in range(parts + 1)]
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    def insert(self, kernel: str | Callable[..., Any], *args: Any, reads: Sequence[Block] = (),
               writes: Sequence[Block] = (), priority: int = 0, device: int | Device | None = None,
               name: str | None = None, flops: float = 0.0, **kwargs: Any) -> Task:
        """Insert one task (insertion is serial: one thread inserts, the workers execute).

        ``kernel`` is a :class:`Device` method name (``"gemm"``) or a callable ``f(device, *args, **kwargs)``.
        Block handles among ``args`` are replaced by the block's data on the device that runs the task.
        ``device`` pins the task (an index into the runtime's devices, or the device); otherwise the placement
        policy chooses when the task becomes ready. Raises the pending error if an earlier task failed, which stops
        the inserting algorithm.
        """
        if self._error is not None:
            raise self._error
        task_name = name or (kernel if isinstance(kernel, str) else getattr(kernel, "__name__", "task"))
        task = Task(self._inserted, kernel, args, kwargs, reads, writes, priority, task_name, flops)
        predecessors = self._tracker.predecessors(task)
        with self._lock:
            if device is not None:
                task.device_index = device if isinstance(device, int) else self.devices.index(device)
            self._inserted += 1
            for before in predecessors:
                if not before.done:
                    before.dependents.append(task)
                    task.remaining += 1
            if task.remaining == 0:
                self._push(task)
        return task

    def _place(self, task: Task) -> int:
        """The device of a task that just became ready: pinned, or chosen by the placement policy now, when the
        device queues say how busy each device is (under the lock)."""
        if task.device_index is None:
            task.device_index = self.placement.place(task)
            blocks = task.blocks
            if not self._coherence.fits(blocks, self.devices[task.device_index]):
                roomy = [i for i, d in enumerate(self.devices) if self._coherence.fits(blocks, d)]
                if roomy:
                    self.placement.finished(task)  # the policy's booking moves with the task
                    task.expected_seconds = 0.0
                    task.device_index = roomy[0]
        return task.device_index

    def _push(self, task: Task) -> None:
        index = self._place(task)
        if self._coherence.missing(task.blocks, self.devices[index]):
            heapq.heappush(self._fetch_queues[index], task)
            self._fetch_signal[index].notify()
            return
        heapq.heappush(self._queues[index], task)
        self._ready_signal[task.device_index].notify()

    # --- execution --------------------------------------------------------------------------------------------
    def _work(self, index: int, worker: int) -> None:
        device = self.devices[index]
        queue = self._queues[index]
        signal = self._ready_signal[index]
        while True:
            with self._lock:
                while (not queue or not self._holding[index] and self._outranked(index)) and not self._stopping:
                    holding = bool(queue)  # this worker waits for an outranking copy, not for work
                    self._holding[index] += holding
                    if holding:
                        signal.notify()  # another idle worker of the device may take the ready task
                    signal.wait()
                    self._holding[index] -= holding
                if not queue:
                    return
                task = heapq.heappop(queue)
                self._running += 1
            started = time.perf_counter()
            error = self._execute(task, device, worker)
            seconds = time.perf_counter() - started
            with self._lock:
                refine(device.capability, KERNEL_CLASS.get(task.name, "blas3"), task.flops, seconds)
                self._complete(task, error)

    def _fetch(self, index: int) -> None:
        """The copy thread of device ``index``: bring ready tasks' tiles in, then queue the tasks to compute."""
        device = self.devices[index]
        queue = self._fetch_queues[index]
        signal = self._fetch_signal[index]
        writebacks = self._writebacks[index]
        while True:
            with self._lock:
                while not queue and not (writebacks or self._stopping):
                    signal.wait()
                if not queue and self._stopping:
                    return
                if not queue:
                    task, block = None, writebacks.pop(0)
                else:
                    task, block = heapq.heappop(queue), None
                    self._fetching[index] = task
                    self._running += 1
            error = self._copy_job(device, task, block)
            with self._lock:
                if task is not None:
                    self._running -= 1
                    self._fetching[index] = None
                if error is not None:
                    self._fail(error)
                if task is not None and self._error is None:
                    heapq.heappush(self._queues[index], task)
                    self._ready_signal[index].notify_all()  # also the workers that waited for it (_outranked)
                elif self._quiescent():
                    self._idle_signal.notify_all()

    def _copy_job(self, device: Device, task: Task | None, block: Block | None) -> BaseException | None:
        """One job of a copy thread: bring ``task``'s tiles to ``device``, or (no task) write ``block`` home; traced
        when it moved bytes. Returns the failure, if any."""
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            if task is None:
                moved = self._coherence.write_home(block)
            else:
                moved = task.prefetched = self._coherence.acquire(task.blocks, device, task)[1]
        except BaseException as failure:  # noqa: BLE001 - a failed copy cancels the graph like a failed task
            return failure
        if self.trace is not None and moved:
            what = repr(block) if task is None else f"{task.name} {task.written}"
            self.trace.record_copy(device.name, "home" if task is None else "fetch", what, started,
                                   time.perf_counter(), moved, time.thread_time() - cpu)
        return None

    def _in_transit(self, index: int) -> list[Task]:
        """The tasks whose tiles device ``index``'s copy thread is bringing in, or will next (under the lock)."""
        waiting = self._fetch_queues[index]
        return [task for task in (self._fetching[index], waiting[0] if waiting else None) if task is not None]

    def _outranked(self, index: int) -> bool:
        """Whether a task in transit to device ``index`` outranks the device's best ready task (under the lock). An
        idle worker then waits for it, unless another worker of the device already does, rather than start a long
        lower-priority kernel just before the critical one arrives (a priority inversion that traces showed at every
        step of the hybrid Cholesky). Not on a device with a memory capacity: there the copy may itself wait for
        ready tasks to free memory."""
        if self._coherence.bounded(self.devices[index]):
            return False
        head = self._queues[index][0]
        return any(task < head for task in self._in_transit(index))

    def _complete(self, task: Task, error: BaseException | None) -> None:
        """Book a finished task (under the lock): release its dependents, or stop everything on an error."""
        self._running -= 1
        self._finished += 1
        task.done = True
        self.placement.finished(task)
        if error is not None:
            self._fail(error)
        if self._error is None:
            for after in task.dependents:
                after.remaining -= 1
                if after.remaining == 0:
                    self._push(after)
            if self._all_inserted:
                self._write_back(task)
        task.dependents = []
        if self._quiescent():
            self._idle_signal.notify_all()

    def _write_back(self, task: Task) -> None:
        """Queue the blocks ``task`` wrote on an accelerator that no later task writes, to go home (under the
        lock, once every task is inserted)."""
        index = task.device_index
        if self.devices[index].memory_space == HOST_MEMORY:
            return
        final = [b for b in task.writes if all(self._tracker.last_writer.get(p) is task for p in b.parts)]
        if final:
            self._writebacks[index].extend(final)
            self._fetch_signal[index].notify()

    def _execute(self, task: Task, device: Device, worker: int) -> BaseException | None:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            data, moved = self._coherence.acquire(task.blocks, device, task)
            args = [data[arg] if isinstance(arg, Block) else arg for arg in task.args]
            if isinstance(task.kernel, str):
                getattr(device, task.kernel)(*args, **task.kwargs)
            else:
                task.kernel(device, *args, **task.kwargs)
            self._coherence.release([b for b in task.writes if b in data], device, task)
        except BaseException as error:  # noqa: BLE001 - any failure cancels the graph and reaches the caller
            return error
        finally:
            self._coherence.unpin(task, device)
        if self.trace is not None:
            self.trace.record(task.name, task.written, device.name, worker, start, time.perf_counter(),
                              task.prefetched + moved, time.thread_time() - cpu)
        return None
