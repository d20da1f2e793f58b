"""The task runtime: hazards, priorities, placement, memory spaces, tracing, failure and BLAS threads."""

import contextlib
import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from hetlapack.algorithms.potrf import potrf
from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.machine import usable_cores
from hetlapack.perf.modeled import ModeledDevice
from hetlapack.perf.simulated import SimulatedRuntime
from hetlapack.runtime import scheduler
from hetlapack.runtime import GreedyByCapability, OwnerComputes, Runtime, TiledMatrix, Trace
from hetlapack.blas_threads import share_cores, threads_per_worker
from hetlapack.signals import signals_held
from hetlapack.testing import cholesky_residual, spd

pytestmark = pytest.mark.own_machinery


def record(log, label, delay=0.0):
    def kernel(device, *args):
        if delay:
            time.sleep(delay)
        log.append(label)
    kernel.__name__ = label
    return kernel


def worker_threads():
    return [t for t in threading.enumerate() if t.name.startswith("hetlapack-")]


@pytest.fixture
def matrix():
    return TiledMatrix(np.zeros((8, 8), order="F"), 2)


def test_read_after_write_write_after_read_and_write_after_write_are_ordered(matrix):
    log = []
    with Runtime([CpuDevice(workers=2)]) as rt:
        rt.insert(record(log, "w1", 0.05), writes=[matrix(0, 0)])
        rt.insert(record(log, "r1", 0.02), reads=[matrix(0, 0)], writes=[matrix(1, 1)])
        rt.insert(record(log, "r2", 0.02), reads=[matrix(0, 0)], writes=[matrix(2, 2)])
        rt.insert(record(log, "w2"), writes=[matrix(0, 0)])
        rt.insert(record(log, "w3"), writes=[matrix(0, 0)])
    assert log[0] == "w1" and set(log[1:3]) == {"r1", "r2"} and log[3:] == ["w2", "w3"]


def test_a_block_depends_on_the_tiles_it_covers(matrix):
    log = []
    with Runtime([CpuDevice(workers=2)]) as rt:
        rt.insert(record(log, "tile", 0.05), writes=[matrix(3, 1)])
        rt.insert(record(log, "block"), reads=[matrix.block(0, 4, 1, 2)], writes=[matrix(0, 0)])
    assert log == ["tile", "block"]


def test_ready_tasks_run_highest_priority_first(matrix):
    log = []
    gate = threading.Event()
    with Runtime([CpuDevice(workers=1)]) as rt:
        rt.insert(lambda device: gate.wait(5), writes=[matrix(0, 0)])
        for p in (1, 5, 3):
            rt.insert(record(log, f"p{p}"), reads=[matrix(0, 0)], writes=[matrix(p, p % 4)], priority=p)
        gate.set()
    assert log == ["p5", "p3", "p1"]


def test_block_handles_are_views_of_the_tiles():
    a = np.asfortranarray(np.arange(35.0).reshape(7, 5))
    m = TiledMatrix(a, 3, 2)
    assert (m.mt, m.nt) == (3, 3)
    assert np.shares_memory(m(2, 2).host, a) and m(2, 2).host.shape == (1, 1)
    assert m.block(1, 3, 0, 1).host.shape == (4, 2) and len(m.block(1, 3, 0, 2).parts) == 4
    assert m(1, 1) == m.block(1, 2, 1, 2) and hash(m(1, 1)) == hash(m.block(1, 2, 1, 2))
    with pytest.raises(ValueError, match="Fortran"):
        TiledMatrix(np.zeros((3, 3)), 2)


def test_owner_computes_follows_the_block_column_cyclic_layout(matrix):
    devices = [CpuDevice(workers=1, name="cpu0"), CpuDevice(workers=1, name="cpu1")]
    trace = Trace()
    with Runtime(devices, placement=OwnerComputes(), trace=trace) as rt:
        for j in range(4):
            rt.insert(record([], "touch"), writes=[matrix(0, j)])
    where = {e.tiles: e.device for e in trace.events}
    assert where == {"A[0,0]": "cpu0", "A[0,1]": "cpu1", "A[0,2]": "cpu0", "A[0,3]": "cpu1"}


def test_greedy_by_capability_feeds_the_faster_device_more():
    fast = ModeledDevice("fast", "cpu", {"blas3": 30.0}, memory_space="shared")
    slow = ModeledDevice("slow", "cpu", {"blas3": 10.0}, memory_space="shared")
    with SimulatedRuntime([fast, slow], placement="capability") as rt:
        A = TiledMatrix(None, 1, shape=(4, 10), dtype="d")
        for t in range(40):
            rt.insert("gemm", writes=[A(t % 4, t // 4)], flops=1e6)
    counts = {"fast": 0, "slow": 0}
    for e in rt.trace.events:
        counts[e.device] += 1
    assert counts == {"fast": 30, "slow": 10}
    assert isinstance(rt.placement, GreedyByCapability)


def test_unknown_placement_is_a_value_error():
    with pytest.raises(ValueError, match="placement"):
        Runtime(placement="random")


def test_data_moves_to_a_separate_memory_space_and_back():
    a = np.asfortranarray(np.arange(16.0).reshape(4, 4))
    host, fake = CpuDevice(workers=1), EmulatedDevice(0)
    trace = Trace()

    def double(device, tile):
        tile *= 2

    with Runtime([host, fake], trace=trace) as rt:
        A = rt.matrix(a, 2)
        rt.insert(double, A(0, 0), writes=[A(0, 0)], device=fake)
        rt.insert(double, A(0, 0), writes=[A(0, 0)], device=fake)
        rt.insert(double, A(0, 0), writes=[A(0, 0)], device=host)
        rt.insert(double, A.block(0, 2, 1, 2), writes=[A.block(0, 2, 1, 2)], device=fake)
    expected = np.arange(16.0).reshape(4, 4)
    expected[:2, :2] *= 8
    expected[:, 2:] *= 2
    assert np.array_equal(a, expected)
    assert [e.bytes_moved for e in trace.events if e.tiles == "A[0,0]"] == [32, 0, 32]
    assert [e.bytes_moved for e in trace.events if e.tiles == "A[0:2,1]"] == [64]  # written back at the end
    assert fake.uploaded_bytes == 32 + 64 and fake.downloaded_bytes == 32 + 64


def test_the_trace_records_each_job_of_a_copy_thread():
    """A task on an accelerator whose tile is at home: its copy thread fetches the tile (one job, the tile's
    bytes, named by the task), and the task's record counts those bytes as moved for it."""
    a = np.asfortranarray(np.arange(16.0).reshape(4, 4))
    fake = EmulatedDevice(0)
    trace = Trace()

    def double(device, tile):
        tile *= 2

    with Runtime([CpuDevice(workers=1), fake], trace=trace) as rt:
        A = rt.matrix(a, 2)
        rt.insert(double, A(1, 0), writes=[A(1, 0)], device=fake)
    fetches = [c for c in trace.copies if c.purpose == "fetch"]
    assert [(c.device, c.tiles, c.nbytes) for c in fetches] == [("emulated:0", "double A[1,0]", 32)]
    assert {c.purpose for c in trace.copies} <= {"fetch", "home"}
    assert all(0 <= c.start <= c.end and c.cpu_seconds >= 0 for c in trace.copies)
    assert [e.bytes_moved for e in trace.events] == [32] and trace.events[0].start >= fetches[0].end


def test_the_trace_summary_says_how_long_how_many_tasks_ran_at_once():
    trace = Trace(origin=0.0)
    trace.record("gemm", "A[0,0]", "emulated:0", 0, 0.0, 2.0, 0, cpu_seconds=1.5)
    trace.record("trsm", "A[1,0]", "emulated:1", 0, 1.0, 3.0, 0, cpu_seconds=2.0)
    trace.record("potrf", "A[1,1]", "cpu", 0, 4.0, 5.0, 0, cpu_seconds=1.0)
    trace.record_copy("emulated:1", "fetch", "trsm A[1,0]", 0.5, 1.0, 2_000_000, 0.25)
    assert trace.concurrency() == {1: 3.0, 2: 1.0, 0: 1.0}
    rows = {line.split()[0]: line.split()[1:] for line in trace.summary().splitlines()[1:-1]}
    assert rows["emulated:1"] == ["1", "2.0000", "2.0000", "1", "0.5000", "0.2500", "2.0"]
    assert rows["cpu"] == ["1", "1.0000", "1.0000", "0", "0.0000", "0.0000", "0.0"]
    assert trace.summary().splitlines()[-1] == ("makespan 5.0000 s; tasks running at once (count: seconds) "
                                                "0: 1.0000 s, 1: 3.0000 s, 2: 1.0000 s")


def test_results_written_on_another_memory_space_are_flushed_home():
    a = np.asfortranarray(np.ones((4, 4)))
    with Runtime([EmulatedDevice(0)]) as rt:
        A = rt.matrix(a, 2)
        rt.insert(lambda device, tile: tile.fill(7), A(1, 1), writes=[A(1, 1)])
    assert a[2:, 2:].tolist() == [[7, 7], [7, 7]] and a[:2].sum() == 8


def test_a_block_of_no_tile_moves_nothing_between_memory_spaces():
    """The rows past a wide matrix's last tile row are a block of no tile: the host and an accelerator get an
    empty view of it, whoever wrote the column last, and no copy is made for it."""
    a = np.asfortranarray(np.ones((4, 6)))
    shapes = []
    with Runtime(["cpu", EmulatedDevice(0)]) as rt:
        A = rt.matrix(a, 2)
        below = A.block(A.mt, A.mt, 2, 3)
        rt.insert(lambda device, tile: tile.fill(7), A(1, 2), writes=[A(1, 2)], device=1)
        for device in (0, 1):
            rt.insert(lambda device, column, empty: shapes.append(empty.shape), A.block(0, A.mt, 2, 3), below,
                      reads=[A.block(0, A.mt, 2, 3), below], device=device)
    assert shapes == [(0, 2), (0, 2)] and a[2:, 4:].tolist() == [[7, 7], [7, 7]]


def test_trace_writes_chrome_json_and_a_gantt_png(tmp_path, matrix):
    trace = Trace()
    with Runtime([CpuDevice(workers=2)], trace=trace) as rt:
        for j in range(4):
            rt.insert(record([], "work", 0.01), writes=[matrix(0, j)])
    assert len(trace.events) == 4 and trace.makespan > 0
    events = json.loads(trace.to_chrome_json(tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["name"] for e in events} == {"work"} and all(e["ph"] == "X" and e["dur"] > 0 for e in events)
    png = trace.plot(tmp_path / "t.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failing_task_cancels_the_rest_and_reraises(matrix):
    log = []

    def explode(device):
        raise ArithmeticError("injected")

    with pytest.raises(ArithmeticError, match="injected"):
        with Runtime([CpuDevice(workers=2)]) as rt:
            rt.insert(record(log, "slow", 0.1), writes=[matrix(1, 1)])
            rt.insert(explode, writes=[matrix(0, 0)])
            for j in range(50):
                rt.insert(record(log, "after"), reads=[matrix(0, 0)], writes=[matrix(2, j % 4)])
    assert log == ["slow"]
    assert worker_threads() == []
    with Runtime() as rt:
        rt.insert(record(log, "next"), writes=[matrix(0, 0)])
    assert log[-1] == "next" and worker_threads() == []


def test_an_exception_in_the_inserting_code_stops_the_workers(matrix):
    with pytest.raises(KeyError):
        with Runtime() as rt:
            rt.insert(record([], "ok"), writes=[matrix(0, 0)])
            raise KeyError("algorithm bug")
    assert worker_threads() == []


def test_an_interrupt_while_waiting_stops_the_workers_before_it_goes_on(matrix):
    """Ctrl-C while the caller waits for its tasks: the running task ends, the next never starts, no worker runs on
    (writing into the caller's matrix) and BLAS's limits are back when the interrupt reaches the caller."""

    class Interrupted(BaseException):
        """Stands in for KeyboardInterrupt, which would stop pytest itself if it came at the wrong moment."""

    def interrupt(signum, frame):
        raise Interrupted

    before = _blas_threads_now()
    started, release, ran = threading.Event(), threading.Event(), []

    def send_interrupt():
        started.wait(10)
        time.sleep(0.1)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(0.1)
        release.set()

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        threading.Thread(target=send_interrupt).start()
        with pytest.raises(Interrupted):
            with Runtime([EmulatedDevice(0), CpuDevice(workers=2)]) as rt:
                rt.insert(lambda device: (started.set(), release.wait(10)), writes=[matrix(0, 0)])
                rt.insert(record(ran, "after"), writes=[matrix(0, 0)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert release.is_set() and ran == [] and worker_threads() == []
    assert _blas_threads_now() == before


def test_an_interrupt_after_the_wait_lets_the_lock_go_still_stops_everything(matrix, monkeypatch):
    """``Condition.wait`` releases the lock before the ``try`` that takes it back: Ctrl-C landing in between left
    the runtime's lock released inside ``with``, whose exit raised RuntimeError in place of the interrupt (a CI
    run). The interrupt reaches the caller, the workers stop and BLAS's limits come back."""

    class Interrupted(BaseException):
        pass

    before = _blas_threads_now()
    rt = Runtime([EmulatedDevice(0), CpuDevice(workers=2)])
    waits = []

    def interrupted_after_release(timeout=None):
        waits.append(timeout)
        if len(waits) == 1:
            rt._lock._release_save()  # what Condition.wait does before its try
            raise Interrupted
        return threading.Condition.wait(rt._idle_signal, timeout)

    monkeypatch.setattr(rt._idle_signal, "wait", interrupted_after_release)
    with pytest.raises(Interrupted):
        with rt:
            rt.insert(record([], "running", 0.05), writes=[matrix(0, 0)])
    assert waits and worker_threads() == [] and _blas_threads_now() == before


@pytest.mark.parametrize("moment", ["as wait is called", "as wait gives BLAS's limits back"])
def test_an_interrupt_outside_waits_own_handling_still_stops_everything(matrix, monkeypatch, moment):
    """Python runs a signal's handler as a function is entered: Ctrl-C can land as ``__exit__`` calls ``wait``,
    before its own handling, or as ``wait`` enters its signal-holding block to give BLAS's limits back (a CI run
    was left with both workers running and BLAS capped). Either way the workers stop and the limits come back."""

    class Interrupted(BaseException):
        pass

    before = _blas_threads_now()
    rt = Runtime([EmulatedDevice(0), CpuDevice(workers=2)])
    if moment == "as wait is called":
        calls = []

        def wait(reraise=True):
            calls.append(reraise)
            if len(calls) == 1:
                raise Interrupted
            Runtime.wait(rt, reraise)

        monkeypatch.setattr(rt, "wait", wait)
    else:
        held = []

        @contextlib.contextmanager
        def interrupted_on_entry():
            held.append(True)
            if len(held) == 2:  # the first holds signals as the workers start; the second is wait's
                raise Interrupted
            with signals_held():
                yield

        monkeypatch.setattr(scheduler, "signals_held", interrupted_on_entry)
    with pytest.raises(Interrupted):
        with rt:
            rt.insert(record([], "running", 0.05), writes=[matrix(0, 0)])
    assert worker_threads() == [] and _blas_threads_now() == before


def test_a_second_interrupt_does_not_wait_for_a_running_task(matrix):
    """The first Ctrl-C waits for the running tasks to end; a second one goes on at once, so that a task that hangs
    cannot hold the caller (every further interrupt was swallowed until the task ended)."""

    class Interrupted(BaseException):
        pass

    def interrupt(signum, frame):
        raise Interrupted

    started, release = threading.Event(), threading.Event()

    def send_two_interrupts():
        started.wait(10)
        for _ in range(2):
            time.sleep(0.1)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, interrupt)
    rt = Runtime([CpuDevice(workers=1)])
    try:
        threading.Thread(target=send_two_interrupts).start()
        begun = time.perf_counter()
        with pytest.raises(Interrupted):
            with rt:
                rt.insert(lambda device: (started.set(), release.wait(10)), writes=[matrix(0, 0)])
        assert time.perf_counter() - begun < 5 and not release.is_set()
    finally:
        signal.signal(signal.SIGINT, previous)
        release.set()
    rt.wait(reraise=False)  # what the interrupted caller left: the task ended, now the workers stop
    assert worker_threads() == []


def test_blas_threads_never_oversubscribe():
    assert threads_per_worker(2, cores=2) == 1
    assert threads_per_worker(1, cores=8) == 8
    assert threads_per_worker(3, cores=8) == 2
    assert threads_per_worker(16, cores=2) == 1


def test_blas_threads_are_capped_while_running_and_restored(matrix):
    from threadpoolctl import threadpool_info

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    seen = []
    with Runtime([CpuDevice(workers=2)]) as rt:
        rt.insert(lambda device: seen.extend(i["num_threads"] for i in threadpool_info()
                                             if i["user_api"] == "blas"), writes=[matrix(0, 0)])
    assert seen and set(seen) == {threads_per_worker(2)}
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_sharing_cores_between_processes_never_raises_a_lower_limit():
    """MPI ranks cap their BLAS at their share of the node; a user's lower limit stays."""
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        assert share_cores(1) == 1
        assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {1}


def test_a_runtime_never_raises_a_lower_blas_limit_set_before_it(matrix):
    from threadpoolctl import threadpool_limits

    seen = []
    with threadpool_limits(limits=1, user_api="blas"):
        with Runtime([CpuDevice(workers=1)]) as rt:
            rt.insert(lambda device: seen.extend(_blas_threads_now()), writes=[matrix(0, 0)])
        assert set(_blas_threads_now()) == {1}
    assert set(seen) == {1}


def test_overlapping_runtimes_share_the_blas_cap_and_the_last_restores_the_limits(matrix):
    """Runtimes in threads of one process overlap: BLAS keeps the smallest running cap, and the limits from
    before the first come back when the last one stops, whichever order they stop in."""
    from threadpoolctl import threadpool_info

    def blas_threads_now():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads_now()
    first, second = Runtime([CpuDevice(workers=1)]), Runtime([CpuDevice(workers=usable_cores() + 1)])
    first.start()
    second.start()
    assert set(blas_threads_now()) == {1}
    first.wait()
    assert set(blas_threads_now()) == {1}
    second.wait()
    assert blas_threads_now() == before
    results = []
    threads = [threading.Thread(target=lambda: results.append(hybrid_cholesky_residual())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and max(results) < 50
    assert blas_threads_now() == before


def _blas_threads_now() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_runtimes_in_threads_that_live_on_leave_the_blas_limits_as_they_were():
    """threadpoolctl 3.8 lets one thread at a time set OpenBLAS's limit: a runtime's thread that lived on after it
    (a pool's) kept that control, so the last runtime to stop, in another thread, could not restore the limits, and
    a runtime in a third thread could not cap them."""
    before = _blas_threads_now()
    if max(before) < 2:
        pytest.skip("BLAS runs one thread here (OPENBLAS_NUM_THREADS=1 or one core): a cap cannot be seen")
    first_started, first_may_end, first_ended, second_started, all_done = (threading.Event() for _ in range(5))
    seen = []

    def first():
        with Runtime(["cpu"]) as rt:
            rt.insert(lambda device: (first_started.set(), first_may_end.wait(10)))
        first_ended.set()
        all_done.wait(10)  # lives on, as a pool's thread does

    def second():
        first_started.wait(10)
        with Runtime(["cpu"]) as rt:
            rt.insert(lambda device: (second_started.set(), first_ended.wait(10)))

    def third():
        with Runtime(["cpu"]) as rt:
            rt.insert(lambda device: seen.extend(_blas_threads_now()))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    second_started.wait(10)
    first_may_end.set()
    threads[1].join()
    assert _blas_threads_now() == before
    late = threading.Thread(target=third)
    late.start()
    late.join()
    all_done.set()
    threads[0].join()
    assert set(seen) == {threads_per_worker(usable_cores())}
    assert _blas_threads_now() == before


def test_a_users_blas_limit_works_while_a_thread_that_called_hetlapack_lives():
    from threadpoolctl import OpenBLASController, threadpool_limits

    if max(_blas_threads_now()) < 2:
        pytest.skip("BLAS runs one thread here (OPENBLAS_NUM_THREADS=1 or one core): a limit of one cannot be seen")
    if hasattr(OpenBLASController, "clear_controlling_thread"):  # as in a fresh process: no thread holds control
        OpenBLASController.clear_controlling_thread(force=True)
    called, finish = threading.Event(), threading.Event()

    def worker():
        with Runtime(["cpu"]) as rt:
            rt.insert(lambda device: None)
        called.set()
        finish.wait(10)

    thread = threading.Thread(target=worker)
    thread.start()
    called.wait(10)
    with threadpool_limits(limits=1, user_api="blas"):
        limited = _blas_threads_now()
    finish.set()
    thread.join()
    assert set(limited) == {1}


def test_a_process_forked_during_another_threads_run_has_the_earlier_blas_limits():
    before = _blas_threads_now()
    running, may_end = threading.Event(), threading.Event()

    def run():
        with Runtime(["cpu"]) as rt:
            rt.insert(lambda device: (running.set(), may_end.wait(10)))

    thread = threading.Thread(target=run)
    thread.start()
    running.wait(10)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if _blas_threads_now() == before else 1)
    may_end.set()
    thread.join()
    assert os.waitpid(pid, 0)[1] == 0


def hybrid_cholesky_residual() -> float:
    a = spd(96, seed=1)
    factor = a.copy(order="F")
    potrf(factor, lower=True, tile=32, devices=["cpu", EmulatedDevice(0)])
    return cholesky_residual(a, np.tril(factor), True)


class RecordingDevice(EmulatedDevice):
    """An emulated accelerator that notes which thread uploads, and can be told to fail an upload."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(5)
        self.fail = fail
        self.uploaders: set[str] = set()

    def upload(self, host, out) -> None:
        self.uploaders.add(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("link down")
        super().upload(host, out)


def test_a_copy_thread_brings_tiles_in_before_the_task_is_queued():
    a = np.asfortranarray(np.ones((6, 6)))
    device = RecordingDevice()
    trace = Trace()
    with Runtime(["cpu", device], trace=trace) as rt:
        A = rt.matrix(a, 2)
        for j in range(3):
            rt.insert(lambda dev, tile: tile.__imul__(3), A(0, j), writes=[A(0, j)], device=device)
    assert device.uploaders == {"hetlapack-emulated:5-copy"}
    assert np.array_equal(a[:2], 3 * np.ones((2, 6))) and np.array_equal(a[2:], np.ones((4, 6)))
    assert sorted(e.bytes_moved for e in trace.events) == [32, 32, 32]


class SlowLinkDevice(EmulatedDevice):
    """An emulated accelerator whose every upload takes ``delay`` seconds."""

    def __init__(self, delay: float, workers: int = 1) -> None:
        super().__init__(7, workers=workers)
        self.delay = delay

    def upload(self, host, out) -> None:
        time.sleep(self.delay)
        super().upload(host, out)


@pytest.mark.parametrize("workers, order", [(1, ["urgent", "later"]), (2, ["later", "urgent"])])
def test_a_worker_waits_for_an_outranking_task_whose_tiles_are_on_the_way(workers, order):
    """When a host task finishes, the accelerator gets an urgent task whose tile must first cross the link and a
    later one whose tiles are already there: its worker waits for the urgent one rather than start the later; a
    second worker runs the later one meanwhile."""
    log = []
    with Runtime(["cpu", SlowLinkDevice(0.1, workers)]) as rt:
        A = rt.matrix(np.asfortranarray(np.ones((4, 4))), 2)
        rt.insert(record(log, "resident"), A(0, 0), writes=[A(0, 0)], device=1)
        rt.insert(record(log, "host", 0.05), A(0, 0), reads=[A(0, 0)], writes=[A(1, 1)], device=0)
        rt.insert(record(log, "urgent"), A(1, 1), writes=[A(1, 1)], priority=10, device=1)
        rt.insert(record(log, "later"), A(0, 0), writes=[A(0, 0)], device=1)
    assert log == ["resident", "host", *order]


def test_a_failed_copy_cancels_the_graph_and_leaves_no_thread():
    a = np.asfortranarray(np.ones((4, 4)))
    with pytest.raises(RuntimeError, match="link down"):
        with Runtime(["cpu", RecordingDevice(fail=True)]) as rt:
            A = rt.matrix(a, 2)
            rt.insert(lambda dev, tile: None, A(0, 0), writes=[A(0, 0)], device=1)
            rt.insert(lambda dev, tile: None, A(0, 0), writes=[A(0, 0)], device=0)
    assert not any(t.name.startswith("hetlapack-") for t in threading.enumerate())
    with Runtime(["cpu", EmulatedDevice(6)]) as rt:
        A = rt.matrix(a, 2)
        rt.insert(lambda dev, tile: tile.__imul__(2), A(0, 0), writes=[A(0, 0)], device=1)
    assert a[0, 0] == 2.0


@pytest.mark.parametrize("workers, per_worker, first, stop, blocks", [
    (2, 1, 2, 12, [(2, 7), (7, 12)]),
    (2, 2, 2, 12, [(2, 4), (4, 7), (7, 9), (9, 12)]),
    (1, 1, 3, 10, [(3, 10)]),
    (1, 2, 3, 10, [(3, 6), (6, 10)]),
    (4, 1, 0, 3, [(0, 1), (1, 2), (2, 3)]),
    (2, 1, 5, 5, []),
    (2, 2, 6, 5, []),
])
def test_column_blocks_on_the_cpu_alone_are_so_many_a_worker(workers, per_worker, first, stop, blocks):
    assert Runtime([CpuDevice(workers=workers)]).column_blocks(first, stop, per_worker) == blocks


@pytest.mark.parametrize("devices", [(CpuDevice(workers=1), EmulatedDevice(0)), (EmulatedDevice(0),)])
def test_column_blocks_elsewhere_are_single_columns(devices):
    assert Runtime(list(devices)).column_blocks(2, 6) == [(2, 3), (3, 4), (4, 5), (5, 6)]
