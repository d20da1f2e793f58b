"""The simulator: the real runtime and tile algorithms on a virtual clock over modeled devices."""

import json

import numpy as np
import pytest

import hetlapack
from hetlapack.algorithms.geqrf import geqrf
from hetlapack.algorithms.getrf import getrf, insert_getrf, pivot_tiles
from hetlapack.algorithms.potrf import potrf
from hetlapack.cli import main
from hetlapack.devices import EmulatedDevice
from hetlapack.devices.cpu import CpuDevice
from hetlapack.perf.modeled import ModeledDevice, Power
from hetlapack.perf.profiles import parse, registry
from hetlapack.perf.rates import flops as flop_count
from hetlapack.layout.two_level import TWO_LEVEL_SMALL_TILE
from hetlapack.layout import TwoLevelColumns
from hetlapack.perf.simulated import SimulatedRuntime
from hetlapack.runtime import TiledMatrix, Trace
from hetlapack.perf.simulator import grid_shape, simulate, simulate_distributed
from hetlapack.testing import general, spd

pytestmark = pytest.mark.own_machinery


def cpu(rate=10.0, workers=1, cores=1, **kwargs):
    return ModeledDevice("cpu", "cpu", {"blas3": rate, "panel": rate, "memory": rate}, workers=workers,
                         cores=cores, **kwargs)


def gpu(name="gpu", rate=100.0, bandwidth=1.0, latency=0.0, **kwargs):
    return ModeledDevice(name, "accelerator", {"blas3": rate, "panel": rate, "memory": rate},
                         bandwidth_gbs=bandwidth, latency_s=latency, **kwargs)


def test_a_chain_takes_the_sum_and_independent_tasks_share_the_workers():
    A = TiledMatrix(None, 1, shape=(1, 4), dtype="d")
    with SimulatedRuntime([cpu(workers=1)]) as chain:
        for _ in range(3):
            chain.insert("gemm", writes=[A(0, 0)], flops=1e9)
    assert chain.makespan == pytest.approx(0.3)
    with SimulatedRuntime([cpu(workers=2, cores=2)]) as pair:
        for j in range(4):
            pair.insert("gemm", writes=[A(0, j)], flops=1e9)
    assert pair.makespan == pytest.approx(0.2)
    assert {(e.worker, round(e.start, 9)) for e in pair.trace.events} == {(0, 0), (1, 0), (0, 0.1), (1, 0.1)}


def test_priorities_order_ready_tasks_and_can_be_switched_off():
    A = TiledMatrix(None, 1, shape=(1, 3), dtype="d")
    with SimulatedRuntime([cpu()]) as rt:
        for j, priority in enumerate((0, 5, 1)):
            rt.insert("gemm", writes=[A(0, j)], flops=1e9, priority=priority)
    assert [e.tiles for e in sorted(rt.trace.events, key=lambda e: e.start)] == ["A[0,1]", "A[0,2]", "A[0,0]"]
    with SimulatedRuntime([cpu()], priorities=False) as fifo:
        for j, priority in enumerate((0, 5, 1)):
            fifo.insert("gemm", writes=[A(0, j)], flops=1e9, priority=priority)
    assert [e.tiles for e in sorted(fifo.trace.events, key=lambda e: e.start)] == ["A[0,0]", "A[0,1]", "A[0,2]"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_waits_for_an_outranking_task_whose_tiles_are_on_the_way(workers):
    """As in real runs (tests/test_runtime.py): the accelerator's worker waits for the urgent task whose tile is
    crossing the link instead of starting the later task it could run at once; a second worker runs that one."""
    A = TiledMatrix(None, 1, shape=(2, 2), dtype="d")
    with SimulatedRuntime([cpu(), gpu(latency=0.5, workers=workers)]) as rt:
        rt.insert("gemm", A(0, 0), writes=[A(0, 0)], flops=1e9, device=1)
        rt.insert("gemm", A(0, 0), reads=[A(0, 0)], writes=[A(1, 1)], flops=1e9, device=0)
        rt.insert("gemm", A(1, 1), writes=[A(1, 1)], flops=1e9, priority=10, device=1)
        rt.insert("gemm", A(0, 0), writes=[A(0, 0)], flops=1e9, device=1)
    host_end = next(e.end for e in rt.trace.events if e.device == "cpu")
    after_host = {e.tiles: e for e in rt.trace.events if e.device == "gpu" and e.start >= host_end}
    urgent, later = after_host["A[1,1]"], after_host["A[0,0]"]
    assert urgent.start == pytest.approx(host_end + 0.5)
    assert later.start == pytest.approx(host_end if workers == 2 else urgent.end)


def _most_held_at_once(events, held) -> int:
    """The most of something (cores, kernels) the trace's ``events`` hold at once, ``held[device]`` each."""
    edges = sorted((t, step) for e in events for t, step in ((e.start, held[e.device]), (e.end, -held[e.device])))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


@pytest.mark.parametrize(("host_compute", "makespan"), [(True, 0.2), (False, 0.1)])
def test_host_computing_devices_share_the_hosts_cores_others_do_not(host_compute, makespan):
    A = TiledMatrix(None, 1, shape=(1, 4), dtype="d")
    devices = [cpu(workers=2, cores=2, host_compute=host_compute),
               *(gpu(name, rate=10.0, cores=2, host_compute=host_compute) for name in ("a", "b"))]
    with SimulatedRuntime(devices) as rt:
        for j, (device, priority) in enumerate(((0, 1), (0, 0), (1, 2), (2, 3))):
            rt.insert("gemm", writes=[A(0, j)], flops=1e9, priority=priority, device=device)
    assert rt.makespan == pytest.approx(makespan)
    assert _most_held_at_once(rt.trace.events, {"cpu": 1, "a": 1, "b": 1}) == (2 if host_compute else 4)
    if host_compute:  # the two highest priorities take the two cores first
        assert {e.device for e in rt.trace.events if e.start == 0} == {"a", "b"}


def test_cpu_and_emulated_accelerators_never_hold_more_cores_than_the_host_has(monkeypatch):
    from hetlapack.devices import cpu as cpu_module
    from hetlapack.perf import model

    monkeypatch.setattr(cpu_module, "usable_cores", lambda: 2)
    for layout in ("hgdd", "two-level"):
        devices = model.modeled(("cpu", EmulatedDevice(0), EmulatedDevice(1)))
        assert [(d.host_compute, d.cores) for d in devices] == [(True, 2)] * 3
        prediction = simulate("cholesky", 2000, devices, tile=256, layout=layout)
        threads = {d.name: d.threads for d in devices}  # as the simulation ran them (two-level: one per core)
        assert _most_held_at_once(prediction.trace.events, threads) <= 2
        assert _most_held_at_once(prediction.trace.events, dict.fromkeys(threads, 1)) <= 2


def test_profiles_and_gpu_like_devices_do_not_compute_on_the_host():
    assert not any(d.host_compute for d in parse("sandybridge:16,k20c,k20c"))
    cuda_like = EmulatedDevice(0)
    cuda_like.host_compute = False
    assert (ModeledDevice.of(cuda_like).host_compute, ModeledDevice.of(cuda_like).cores) == (False, 1)


def test_tiles_cross_the_link_once_per_version_one_engine_per_direction():
    A = TiledMatrix(None, 100, shape=(100, 300), dtype="d")  # three 80 kB tiles
    accelerator = gpu(bandwidth=8e-5, latency=0.5)  # 80 kB take 1 s, plus 0.5 s latency
    with SimulatedRuntime([accelerator]) as rt:
        for j in range(3):
            rt.insert("gemm", A(0, j), reads=[A(0, j)], writes=[A(0, j)], flops=0)
        rt.insert("gemm", A(0, 0), reads=[A(0, 0)], writes=[A(0, 0)], flops=0)
    uploads = sorted(end for name, direction, *_, end in rt._coherence.copies if direction == "up")
    assert uploads == pytest.approx([1.5, 3.0, 4.5])  # serialised on the one upload engine, the reread is free
    assert rt.makespan == pytest.approx(4.5 + 3 * 1.5)  # then every tile comes home on the download engine
    assert sum(t.nbytes for t in rt.trace.transfers) == 6 * 80_000


def test_the_cpu_shares_the_host_memory_and_moves_nothing():
    A = TiledMatrix(None, 10, shape=(10, 10), dtype="d")
    with SimulatedRuntime([cpu()]) as rt:
        rt.insert("gemm", A(0, 0), reads=[A(0, 0)], writes=[A(0, 0)], flops=1e9)
    assert rt.trace.transfers == [] and rt.makespan == pytest.approx(0.1)


def test_rates_follow_tile_size_precision_kernels_and_threads():
    device = ModeledDevice("x", "accelerator", {"blas3": 100.0}, half_tile=100.0,
                           kernels={"potrf": ((100, 10.0), (400, 30.0))}, single_rates={"blas3": 300.0})
    assert device.rate("gemm", 100) == pytest.approx(50.0)
    assert device.rate("gemm", 100, single=True) == pytest.approx(150.0)
    assert device.rate("potrf", 200) == pytest.approx(20.0)  # halfway in log tile
    assert device.rate("potrf", 1000) == pytest.approx(30.0)
    assert cpu(rate=10.0, workers=2, cores=8).rate("gemm", 1000) == pytest.approx(40.0)  # 4 cores a worker
    with pytest.raises(ValueError, match="positive"):
        ModeledDevice("bad", "cpu", {"blas3": -1.0})
    with pytest.raises(ValueError, match="kind"):
        ModeledDevice("bad", "fpga", {"blas3": 1.0})


def test_energy_is_idle_over_the_makespan_plus_busy_increments_and_spin():
    hot = cpu(power=Power(idle=10.0, busy={"blas3": 110.0}))
    A = TiledMatrix(None, 1, shape=(1, 1), dtype="d")
    with SimulatedRuntime([hot], idle_devices=[gpu(power=Power(idle=5.0))]) as rt:
        rt.insert("gemm", writes=[A(0, 0)], flops=1e9)
    assert rt.energy_joules() == pytest.approx(0.1 * (10 + 5) + 0.1 * 100)
    spinning = cpu(power=Power(idle=10.0, busy={"blas3": 110.0}), spin_s=0.05)
    with SimulatedRuntime([spinning, gpu(rate=1.0, power=Power())]) as rt:
        rt.insert("gemm", writes=[A(0, 0)], flops=1e9, device=0)
        rt.insert("gemm", A(0, 0), reads=[A(0, 0)], writes=[], flops=1e9, device=1)
    cpu_busy = 0.1 * 100 + 0.05 * 100  # the task, then 50 ms of spinning while the accelerator works
    assert rt.energy_joules() == pytest.approx(rt.makespan * 10 + cpu_busy)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("op", ["potrf", "getrf", "geqrf"])
def test_the_simulator_runs_the_same_tasks_as_a_real_run(op, workers):
    """The same tasks for the same workers (how QR cuts a step's trailing columns depends on them)."""
    n, tile = 70, 16
    a = np.asfortranarray(spd(n) if op == "potrf" else general(n))
    real = Trace()
    devices = [CpuDevice(workers=workers)]
    {"potrf": lambda: potrf(a, lower=True, tile=tile, trace=real, devices=devices),
     "getrf": lambda: getrf(a, tile=tile, trace=real, devices=devices),
     "geqrf": lambda: geqrf(a, tile=tile, trace=real, devices=devices)}[op]()
    predicted = simulate(op, n, [cpu(workers=workers, cores=workers)], tile=tile)
    assert predicted.tasks == len(real.events)
    assert sorted((e.kernel, e.tiles) for e in predicted.trace.events) == sorted((e.kernel, e.tiles)
                                                                                for e in real.events)


@pytest.mark.parametrize("op", ["cholesky", "lu", "qr"])
def test_the_tasks_flops_add_up_to_the_factorizations(op):
    prediction = simulate(op, 640, [cpu(rate=10.0)], tile=64)
    seconds = sum(e.end - e.start for e in prediction.trace.events if e.kernel != "laswp")
    extra = 0.12 if op == "qr" else 0.02  # the tile QR also forms each panel's T (LARFT), as LAPACK's does
    assert prediction.flops * 0.99 <= seconds * 10e9 <= prediction.flops * (1 + extra)


def test_profiles_parse_counts_workers_and_reject_unknown_names():
    devices = parse("sandybridge:16,k20c:2,phi")
    assert [d.name for d in devices] == ["sandybridge", "k20c:0", "k20c:1", "phi:0"]
    assert devices[0].cores == 16 and devices[0].workers == 1 and devices[0].threads == 16
    assert parse("sandybridge:16/15,k40c")[0].workers == 15 and parse("sandybridge:16/15,k40c")[0].threads == 1
    assert parse("sandybridge")[0].workers == 16
    assert devices[1].bandwidth_gbs == 6.0 and "seed 000" in devices[1].source
    for spec, message in (("k99", "unknown device profile"), ("k20c:x", "bad device"), ("", "no devices")):
        with pytest.raises(ValueError, match=message):
            parse(spec)


def test_user_profile_files_add_and_override_profiles(tmp_path):
    toml = tmp_path / "mine.toml"
    toml.write_text('[profiles.a100]\nkind = "accelerator"\nrates = { blas3 = 19500.0, panel = 500.0 }\n'
                    'bandwidth_gbs = 25.0\n')
    jsonfile = tmp_path / "mine.json"
    jsonfile.write_text(json.dumps({"profiles": {"k20c": {"kind": "accelerator", "rates": {"blas3": 1.0}}}}))
    devices = parse("a100:2,k20c", toml, jsonfile)
    assert [d.name for d in devices] == ["a100:0", "a100:1", "k20c:0"]
    assert devices[0].rates["blas3"] == 19500.0 and devices[2].rates["blas3"] == 1.0
    bad = tmp_path / "bad.toml"
    bad.write_text('[profiles.x]\nkind = "accelerator"\nrates = { flops = 1.0 }\n')
    with pytest.raises(ValueError, match="blas3"):
        parse("x", bad)


def test_the_builtin_registry_names_its_sources():
    reg = registry()
    assert {"sandybridge", "k20c", "k20beta", "phi", "m2090", "m2070", "k40c", "tk1-gpu", "tk1-arm"} <= set(
        reg.profiles)
    assert all(profile["source"] for profile in reg.profiles.values())
    assert [d.name for d in reg.node("keeneland")] == ["westmere", "m2070:0", "m2070:1", "m2070:2"]
    assert reg.interconnect("qdr-ib").bandwidth_gbs > 0


def test_prediction_reports_rates_utilisation_and_energy():
    prediction = simulate("cholesky", 8000, "sandybridge:16,k20c:2", tile=512)
    assert prediction.gflops == pytest.approx(8000**3 / 3 / prediction.seconds / 1e9)
    assert set(prediction.utilisation) == {"sandybridge", "k20c:0", "k20c:1"}
    assert all(0 < u <= 1 for u in prediction.utilisation.values())
    assert prediction.imbalance >= 1 and prediction.joules > 0 and prediction.bytes_moved > 0
    assert "GFLOP/s" in prediction.summary() and "k20c:1" in prediction.summary()
    single = simulate("cholesky", 8000, "sandybridge:16,k20c:2", tile=512, dtype="float32")
    assert single.seconds < prediction.seconds


def test_bad_requests_are_value_errors():
    with pytest.raises(ValueError, match="op must be"):
        simulate("svd", 100, "sandybridge")
    with pytest.raises(ValueError, match="gpu path"):
        simulate("cholesky", 100, "sandybridge", path="gpu")
    with pytest.raises(ValueError, match="layout"):
        simulate("cholesky", 100, "sandybridge", layout="spiral")
    with pytest.raises(ValueError, match="square"):
        simulate("cholesky", 100, "sandybridge", m=50)
    with pytest.raises(ValueError, match="two-level layout needs one CPU"):
        simulate("lu", 1000, "westmere:3", layout="two-level")


@pytest.mark.parametrize("op", ["lu", "qr"])
def test_two_level_prices_lu_and_qr_of_square_tall_and_wide_matrices(op):
    """The host slice and the big tiles both work at every shape; rows past the square part add work."""
    square = simulate(op, 2000, "westmere:3,m2070", tile=480, layout="two-level")
    tall = simulate(op, 2000, "westmere:3,m2070", m=3000, tile=480, layout="two-level")
    wide = simulate(op, 3000, "westmere:3,m2070", m=2000, tile=480, layout="two-level")
    lapack = {"lu": "getrf", "qr": "geqrf"}[op]
    for prediction, (m, n) in ((square, (2000, 2000)), (tall, (3000, 2000)), (wide, (2000, 3000))):
        assert prediction.layout == "two-level" and prediction.tasks > 0
        assert prediction.flops == pytest.approx(flop_count(lapack, m, n))
        assert min(prediction.utilisation.values()) > 0
    assert square.seconds < tall.seconds and square.seconds < wide.seconds


def test_two_level_bounds_cut_the_host_slice_small_and_leave_one_big_tile():
    layout = TwoLevelColumns(tile=960, host_cols=300, gpus=2)
    bounds = layout.bounds(2000, TWO_LEVEL_SMALL_TILE)
    assert bounds[:6] == [0, 100, 200, 300, 960, 1060]
    assert bounds[-1] == 2000 and all(b > a for a, b in zip(bounds, bounds[1:]))
    wide = TiledMatrix(None, bounds, shape=(1500, 2000), dtype=np.float64)
    assert wide.col_bounds == tuple(bounds) and wide.row_bounds == (*(b for b in bounds if b < 1500), 1500)
    with pytest.raises(ValueError, match="at least 2100"):
        TiledMatrix(None, bounds, shape=(2100, 2000), dtype=np.float64)


def test_distributed_cholesky_on_a_2d_grid():
    assert grid_shape(12) == (3, 4) and grid_shape(7) == (1, 7) and grid_shape(100) == (10, 10)
    one = simulate_distributed(8192, 1, tile=2048)
    four = simulate_distributed(16384, 4, tile=2048)
    assert four.layout == "2-D block-cyclic 2x2" and len(four.devices) == 4
    assert four.bytes_moved > 0 and one.bytes_moved == 0
    assert 2.5 < four.gflops / one.gflops < 4.5


@pytest.mark.parametrize("op,name", [("cholesky", "cholesky"), ("lu", "lu_factor"), ("qr", "qr")])
def test_explain_and_simulate_on_this_cpu_agree(op, name):
    plan = hetlapack.explain(name, np.empty((3000, 2000) if op != "cholesky" else (3000, 3000)))
    simulated = simulate(op, plan.shape[1], "cpu", m=plan.shape[0])
    assert plan.predicted_s["hybrid"] == pytest.approx(simulated.seconds)


def test_the_simulate_command_prints_predictions_and_writes_the_trace(tmp_path, capsys):
    assert main(["simulate", "cholesky", "--n", "6000", "--devices", "sandybridge:16,k20c,phi",
                 "--layout", "cyclic", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "PREDICTED" in out and "k20c:0" in out and "cyclic" in out
    assert (tmp_path / "simulate-cholesky-6000.png").stat().st_size > 0
    assert json.loads((tmp_path / "simulate-cholesky-6000.json").read_text())["traceEvents"]
    assert main(["simulate", "qr", "--n", "4000", "--devices", "sandybridge:16/1,k40c", "--paths",
                 "--output", str(tmp_path)]) == 0
    assert "GFLOP/s/W" in capsys.readouterr().out
    assert main(["simulate", "--nodes", "4", "--n", "16384", "--tile", "4096", "--output", str(tmp_path)]) == 0
    assert "per node" in capsys.readouterr().out
    assert main(["simulate", "--list"]) == 0
    assert "k20beta" in capsys.readouterr().out


def _lu_on_a_bounded_gpu(memory_bytes):
    devices = [cpu(cores=4), gpu(rate=500.0, bandwidth=6.0, latency=1e-5, memory_bytes=memory_bytes)]
    A = TiledMatrix(None, 250, shape=(2000, 2000), dtype="d")  # 32 MB in 0.5 MB tiles
    with SimulatedRuntime(devices) as rt:
        insert_getrf(rt, A, pivot_tiles(A), {})
    return rt


def test_a_matrix_larger_than_the_accelerator_streams_through_its_memory():
    unlimited, bounded = _lu_on_a_bounded_gpu(None), _lu_on_a_bounded_gpu(8_000_000)
    stats = bounded.memory["gpu"]
    assert unlimited.memory == {} and stats.capacity == 8_000_000
    assert stats.evictions > 0 and stats.written_back > 0 and stats.peak_bytes <= stats.capacity
    assert bounded.tasks == unlimited.tasks
    moved = [sum(t.nbytes for t in rt.trace.transfers) for rt in (unlimited, bounded)]
    assert moved[1] > moved[0] and bounded.transfer_seconds > unlimited.transfer_seconds
    assert bounded.makespan > unlimited.makespan
    prediction = simulate("lu", 2000, [cpu(cores=4), gpu(rate=500.0, bandwidth=6.0, memory_bytes=8_000_000)], tile=250)
    assert prediction.memory["gpu"].evictions > 0
    assert "written back to make room" in prediction.summary()


def test_memory_that_holds_the_matrix_predicts_what_unlimited_memory_does():
    unlimited, ample = _lu_on_a_bounded_gpu(None), _lu_on_a_bounded_gpu(40_000_000)
    assert ample.memory["gpu"].evictions == 0
    assert ample.makespan == unlimited.makespan and ample.transfer_seconds == unlimited.transfer_seconds
    assert [t.nbytes for t in ample.trace.transfers] == [t.nbytes for t in unlimited.trace.transfers]


def test_a_task_bigger_than_the_accelerators_memory_runs_on_the_host():
    A = TiledMatrix(None, 100, shape=(100, 100), dtype="d")  # one 80 kB tile
    with SimulatedRuntime([cpu(), gpu(memory_bytes=40_000)]) as rt:
        rt.insert("gemm", A(0, 0), reads=[A(0, 0)], writes=[A(0, 0)], flops=1e6)
    assert [e.device for e in rt.trace.events] == ["cpu"]


def test_memory_capacities_come_from_profiles_and_real_devices():
    assert parse("k20c")[0].memory_bytes == 5_000_000_000 and parse("k40c")[0].memory_bytes == 12_000_000_000
    assert parse("phi")[0].memory_bytes is None and parse("sandybridge")[0].memory_bytes is None
    assert ModeledDevice.of(EmulatedDevice(0, memory_bytes=1 << 20)).memory_bytes == 1 << 20
    with pytest.raises(ValueError, match="memory_bytes must be positive"):
        gpu(memory_bytes=0)


def test_non_positive_tiles_and_node_counts_are_refused():
    from hetlapack.perf.simulator import simulate, simulate_distributed

    with pytest.raises(ValueError, match="tile must be positive"):
        simulate("cholesky", 1000, "cpu", tile=-3)
    with pytest.raises(ValueError, match="must be positive"):
        simulate_distributed(1000, 0)


def test_capability_placement_says_no_layout_applied_and_refuses_two_level():
    greedy = simulate("cholesky", 2000, "sandybridge:16,k20c", placement="capability", layout="cyclic")
    assert greedy.layout == "capability" and "tasks placed greedily by capability" in greedy.summary()
    with pytest.raises(ValueError, match="places tasks greedily, not by a layout"):
        simulate("cholesky", 2000, "sandybridge:16,k20c", placement="capability", layout="two-level")
    with pytest.raises(ValueError, match="placement must be"):
        simulate("cholesky", 2000, "sandybridge:16,k20c", placement="greedy")
