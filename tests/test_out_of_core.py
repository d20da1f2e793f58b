"""Out-of-core streaming: accelerators whose memory holds only a few tiles still give SciPy's results.

Each emulated accelerator gets a capacity (``EmulatedDevice(i, memory_bytes=...)``); the runtime keeps its segments
within it, evicting the least recently used unpinned ones (clean first, dirty ones written home first). With ample
memory nothing is evicted and the transfers are exactly those of an unbounded run.
"""

import threading
from collections import Counter

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hl
from hetlapack.algorithms.geqrf import geqrf
from hetlapack.algorithms.getrf import getrf
from hetlapack.algorithms.potrf import potrf
from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.devices.base import MEMORY_HEADROOM
from hetlapack.runtime import Runtime, Trace
from hetlapack.runtime import scheduler
from hetlapack.testing import cholesky_residual, general, lu_residual, qr_residual, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS_FACTOR = 50
TILE = 16


def tile_bytes(dtype) -> int:
    return TILE * TILE * np.dtype(dtype).itemsize


def no_worker_threads_left() -> bool:
    return not any(t.name.startswith("hetlapack-") for t in threading.enumerate())


@pytest.fixture
def memory_stats(monkeypatch):
    """The memory statistics of every runtime that finishes during the test, in order."""
    seen = []
    wait = scheduler.Runtime.wait

    def recording_wait(self, reraise=True):
        try:
            wait(self, reraise)
        finally:
            seen.append(self.memory)

    monkeypatch.setattr(scheduler.Runtime, "wait", recording_wait)
    return seen


def bounded(tiles: float, dtype, count: int = 2) -> list:
    return ["cpu", *(EmulatedDevice(i, memory_bytes=int(tiles * tile_bytes(dtype))) for i in range(count))]


@pytest.mark.parametrize("tiles", [4, 9])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_lu_qr_stream_through_a_few_tiles_of_memory(dtype, tiles):
    a_spd = spd(110, dtype=dtype, seed=3)  # 7 x 7 tiles, the last one ragged
    a_gen = general(110, 90, dtype=dtype, seed=3)
    kept_spd, kept_gen = a_spd.copy(), a_gen.copy()
    with hetlapack.using(path="hybrid", devices=bounded(tiles, dtype), tile=TILE):
        c = hl.cholesky(a_spd, lower=False)
        lu, piv = hl.lu_factor(a_gen)
        q, r = hl.qr(a_gen, mode="economic")
    assert np.array_equal(a_spd, kept_spd) and np.array_equal(a_gen, kept_gen)
    assert cholesky_residual(a_spd, c, False) < EPS_FACTOR
    assert np.array_equal(piv, sl.lu_factor(a_gen)[1]) and lu_residual(a_gen, lu, piv) < EPS_FACTOR
    assert np.array_equal(np.sign(np.diag(r).real), np.sign(np.diag(sl.qr(a_gen, mode="r")[0]).real))
    assert qr_residual(a_gen, q, r) < EPS_FACTOR
    assert no_worker_threads_left()


@pytest.mark.parametrize("op", ["potrf", "getrf", "geqrf"])
def test_segments_stay_within_the_capacity_and_tiles_stream(op, memory_stats):
    a = np.asfortranarray(spd(160) if op == "potrf" else general(160))
    reference = a.copy()
    capacity = 24 * tile_bytes(np.float64)  # a quarter of the matrix
    devices = ["cpu", EmulatedDevice(0, memory_bytes=capacity), EmulatedDevice(1, memory_bytes=capacity)]
    trace = Trace()
    if op == "potrf":
        potrf(a, lower=True, tile=TILE, devices=devices, trace=trace)
        assert cholesky_residual(reference, np.tril(a), True) < EPS_FACTOR
    elif op == "getrf":
        piv, _ = getrf(a, tile=TILE, devices=devices, trace=trace)
        assert np.array_equal(piv, sl.lu_factor(reference)[1])
    else:
        geqrf(a, tile=TILE, devices=devices, trace=trace)
        assert np.allclose(np.abs(np.diag(a)), np.abs(np.diag(sl.qr(reference, mode="r")[0])))
    stats = memory_stats[-1]
    assert all(s.capacity == capacity and s.peak_bytes <= capacity for s in stats.values())
    assert sum(s.evictions for s in stats.values()) > 0
    update = "larfb" if op == "geqrf" else "gemm"
    assert {e.device for e in trace.events if e.kernel == update} >= {"emulated:0", "emulated:1"}


def transfer_counts(transfers) -> Counter:
    return Counter((repr(t.tile), t.destination.split("@")[0], t.version) for t in transfers)


@pytest.mark.parametrize("op", ["potrf", "getrf"])
def test_ample_memory_moves_exactly_what_unbounded_memory_moves(op, memory_stats):
    def run(memory_bytes):
        a = np.asfortranarray(spd(128) if op == "potrf" else general(128))
        devices = ["cpu", EmulatedDevice(0, memory_bytes=memory_bytes), EmulatedDevice(1, memory_bytes=memory_bytes)]
        trace = Trace()
        if op == "potrf":
            potrf(a, lower=True, tile=TILE, devices=devices, trace=trace)
        else:
            getrf(a, tile=TILE, devices=devices, trace=trace)
        return trace.transfers

    unbounded = run(None)
    ample = run(a_matrix := 128 * 128 * 8)
    assert all(s.evictions == 0 and s.written_back == 0 and s.peak_bytes <= a_matrix
               for s in memory_stats[-1].values())
    assert transfer_counts(ample) == transfer_counts(unbounded)
    assert all(n == 1 for n in transfer_counts(ample).values())  # no version of a tile moves twice


def chained(rt, token, kernel, *blocks, writes=()):
    """Insert ``kernel`` on device 1 after the previous chained task (all read and write ``token``)."""
    rt.insert(kernel, token, *blocks, reads=[*blocks], writes=[token, *writes], device=1)


def test_least_recently_used_clean_segments_go_first_and_dirty_ones_are_written_back():
    a = np.asfortranarray(general(64))
    reference = a.copy()
    tile = 16 * 16 * 8
    accelerator = EmulatedDevice(0, memory_bytes=2 * tile + 8)  # two tiles and the one-element token

    def scale(device, token, block):
        block *= 2.0

    def touch(device, token, *blocks):
        pass

    with Runtime(["cpu", accelerator]) as rt:
        A = rt.matrix(a, 16)
        token = rt.matrix(np.zeros((1, 1), order="F"), 1, name="token")(0, 0)
        chained(rt, token, scale, A(0, 0), writes=[A(0, 0)])  # A(0,0) dirty on the device
        chained(rt, token, touch, A(1, 0))
        chained(rt, token, touch, A(2, 0))  # evicts the clean A(1,0), keeps the dirty A(0,0)
        chained(rt, token, touch, A(1, 0), A(2, 0))  # A(2,0) resident; A(0,0) written home for A(1,0)
        chained(rt, token, scale, A(0, 0), writes=[A(0, 0)])  # back in, in place of a clean tile
    log, stats = rt.transfers, rt.memory["emulated:0"]
    uploads = [(t.tile.i0, t.tile.j0) for t in log if t.destination != "host" and t.tile.matrix is A]
    downloads = [(t.tile.i0, t.tile.j0) for t in log if t.destination == "host" and t.tile.matrix is A]
    assert uploads == [(0, 0), (1, 0), (2, 0), (1, 0), (0, 0)]
    assert downloads == [(0, 0), (0, 0)]  # written back to make room, then its final version at the end
    assert stats.evictions == 3 and stats.written_back == tile and stats.peak_bytes <= 2 * tile + 8
    expected = reference.copy()
    expected[:16, :16] *= 4.0
    assert np.array_equal(a, expected)


def test_a_task_bigger_than_the_accelerator_runs_on_the_host():
    a = np.asfortranarray(general(96))
    reference = a.copy()
    devices = bounded(5, np.float64)  # early updates of the 6 x 6 tile LU need more
    trace = Trace()
    piv, _ = getrf(a, tile=TILE, devices=devices, trace=trace)
    assert np.array_equal(piv, sl.lu_factor(reference)[1]) and lu_residual(reference, a, piv) < EPS_FACTOR
    gemm_devices = Counter(e.device for e in trace.events if e.kernel == "gemm")
    assert gemm_devices["cpu"] > 0 and gemm_devices["emulated:0"] + gemm_devices["emulated:1"] > 0


def test_accelerators_only_with_tight_memory_and_an_error_from_a_task():
    a = np.asfortranarray(spd(96, dtype=np.complex128))
    a[70, 70] = -3.0
    devices = [EmulatedDevice(i, memory_bytes=5 * tile_bytes(np.complex128)) for i in range(2)]
    with pytest.raises(np.linalg.LinAlgError, match="^leading minor 71 is not positive definite$"):
        potrf(a, lower=True, tile=TILE, devices=devices)
    assert no_worker_threads_left()
    good = np.asfortranarray(spd(96, dtype=np.complex128))
    reference = good.copy()
    potrf(good, lower=True, tile=TILE, devices=devices)
    assert cholesky_residual(reference, np.tril(good), True) < EPS_FACTOR


def test_capacity_comes_from_memory_bytes_or_the_free_memory_the_device_reports():
    assert EmulatedDevice(0).memory_capacity() is None
    assert EmulatedDevice(0, memory_bytes=4096).memory_capacity() == 4096

    class Reporting(EmulatedDevice):
        def free_memory_bytes(self):
            return 1000

    assert Reporting(0).memory_capacity() == int(1000 * MEMORY_HEADROOM)
    assert Reporting(0, memory_bytes=50).memory_capacity() == 50
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match="memory_bytes"):
            EmulatedDevice(0, memory_bytes=bad)


def test_a_panel_crosses_each_link_as_one_packed_copy():
    a = np.asfortranarray(general(64))
    first, second = EmulatedDevice(0), EmulatedDevice(1)

    def scale(device, block):
        block *= 2.0

    with Runtime(["cpu", first, second]) as rt:
        A = rt.matrix(a, 16)
        panel = A.block(0, 4, 1, 2)
        rt.insert(scale, panel, reads=[panel], writes=[panel], device=1)  # in packed, written on the first
        rt.insert(scale, panel, reads=[panel], writes=[panel], device=2)  # home packed, then to the second
    expected = general(64)
    expected[:, 16:32] *= 4.0
    assert np.array_equal(a, expected)
    tiles = Counter((t.source.split("@")[0], t.destination.split("@")[0]) for t in rt.transfers)
    assert tiles == {("host", "emulated:0"): 4, ("emulated:0", "host"): 4, ("host", "emulated:1"): 4,
                     ("emulated:1", "host"): 4}
    assert rt.memory["emulated:0"].link_copies == 2 and rt.memory["emulated:1"].link_copies == 2
    assert first.uploaded_bytes == first.downloaded_bytes == 4 * 16 * 16 * 8


def test_capability_placement_moves_a_task_too_big_for_its_choice_to_the_host():
    a = np.asfortranarray(general(64))
    reference = a.copy()
    cpu = CpuDevice(workers=1)
    cpu.capability = dict.fromkeys(cpu.capability, 1e-6)  # the policy would pick the accelerator

    def scale(device, block):
        block *= 2.0

    trace = Trace()
    with Runtime([cpu, EmulatedDevice(0, memory_bytes=tile_bytes(np.float64))], "capability", trace) as rt:
        A = rt.matrix(a, TILE)
        panel = A.block(0, 4, 0, 1)  # four tiles: more than the accelerator holds
        rt.insert(scale, panel, reads=[panel], writes=[panel], flops=1e9)
    assert [e.device for e in trace.events] == ["cpu"] and rt.placement.queued_seconds == [0.0, 0.0]
    assert np.array_equal(a[:, :TILE], 2 * reference[:, :TILE])


def test_a_capped_accelerator_keeps_no_more_host_memory_than_its_capacity():
    """Freed buffers an emulated device keeps for reuse count against its capacity: they piled up to ten times
    it during a streamed run (buffers of many shapes), and stayed after the call."""
    from hetlapack.devices import emulated

    cap = 200_000
    devices = ["cpu", EmulatedDevice(37, memory_bytes=cap), EmulatedDevice(38, memory_bytes=cap)]
    with hetlapack.using(path="hybrid", tile=32, devices=devices):
        hl.cholesky(spd(400))
        hl.lu_factor(general(400))
        hl.qr(general(400))
    assert all(emulated._pooled_bytes[index] <= cap for index in (37, 38))
