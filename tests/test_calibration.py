"""Calibration: measured rates per kernel class, the per-machine JSON cache, devices loading it, refinement."""

import json
import math

import pytest

from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.devices.base import DEFAULT_CAPABILITY
from hetlapack.devices.capability import ENV_CACHE_DIR, cache_path, load, refine
from hetlapack.perf.calibration import calibrate

pytestmark = pytest.mark.own_machinery


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    return tmp_path


def test_measures_every_kernel_class_and_the_link_of_accelerators(cache_dir):
    cpu, accelerator = CpuDevice(workers=1), EmulatedDevice(3)
    results = calibrate([cpu, accelerator], tile=32, repeats=1, link_bytes=1 << 20, whole_orders=())
    assert set(results) == {"cpu", "emulated:3"}
    assert all(results["cpu"][k] > 0 for k in ("blas3", "panel", "memory")) and "latency_s" not in results["cpu"]
    assert results["emulated:3"]["bandwidth_gbs"] > 0 and results["emulated:3"]["latency_s"] > 0
    assert cpu.capability["blas3"] == results["cpu"]["blas3"]
    assert "kernels" in results["cpu"] and not any(isinstance(v, dict) for v in cpu.capability.values())
    assert cache_path() == cache_dir / "calibration.json"
    assert json.loads(cache_path().read_text())["tile"] == 32


def test_devices_created_later_load_the_cache_and_unknown_ones_keep_defaults():
    calibrate([CpuDevice(workers=1)], tile=16, repeats=1, whole_orders=(), kernels=False)
    assert CpuDevice().capability["blas3"] == load()["cpu"]["blas3"]
    assert EmulatedDevice(7).capability == DEFAULT_CAPABILITY


def test_the_cache_is_parsed_once_a_version_and_a_new_version_is_seen(cache_dir, monkeypatch):
    """Dispatch creates a device on every call to look up a calibrated choice: the file is parsed once for each
    version of it (parsing it each time cost half a millisecond a call), and a calibration written later is seen."""
    from hetlapack.devices import capability

    parses, parse = [], json.loads
    monkeypatch.setattr(capability.json, "loads", lambda text: parses.append(text) or parse(text))
    (cache_dir / "calibration.json").write_text(json.dumps({"devices": {"cpu": {"blas3": 50.0, "lanes": {
        "getrf float64": [[16, 64], [8, 32]]}}}}))
    first, second = CpuDevice(), CpuDevice()
    assert first.capability["blas3"] == second.capability["blas3"] == 50.0 and len(parses) == 1
    assert first.batched_lanes == {"getrf float64": ((8, 32), (16, 64))}
    assert first.batched_lanes is not second.batched_lanes
    (cache_dir / "calibration.json").write_text(json.dumps({"devices": {"cpu": {"blas3": 61.25}}}))
    assert CpuDevice().capability["blas3"] == 61.25 and len(parses) == 2


def test_a_second_calibration_keeps_other_devices_entries():
    calibrate([EmulatedDevice(0)], tile=16, repeats=1, link_bytes=1 << 16, whole_orders=(), kernels=False)
    calibrate([CpuDevice(workers=1)], tile=16, repeats=1, whole_orders=(), kernels=False)
    assert set(load()) == {"cpu", "emulated:0"}


def test_no_save_and_an_unreadable_cache_leave_defaults(cache_dir):
    calibrate([CpuDevice(workers=1)], tile=16, repeats=1, save=False, whole_orders=(), kernels=False)
    assert load() == {}
    (cache_dir / "calibration.json").write_text("not json")
    assert load() == {} and CpuDevice().capability == DEFAULT_CAPABILITY


def test_a_cache_nested_past_the_json_parsers_depth_is_ignored(cache_dir):
    (cache_dir / "calibration.json").write_text('{"devices": {"cpu": {"x": ' + "[" * 100_000 + "}}}")
    assert load() == {} and CpuDevice().capability == DEFAULT_CAPABILITY


def test_a_damaged_cache_cannot_break_later_calls(cache_dir):
    """Zero, negative, NaN or non-numeric values in the cache (a hand edit, an old bug) are ignored: the device
    keeps its defaults for them, and a call still runs."""
    import numpy as np

    import hetlapack.linalg as la

    entry = {"blas3": 0.0, "panel": float("nan"), "memory": -1, "bandwidth_gbs": True,
             "kernels": {"gemm": [[256, 0.0]], "trsm": [[256, 5.0]]},
             "whole": {"potrf": [[64, -1.0], [128, 3.0]], "getrf": "junk", "geqrf": [[64]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    cpu = CpuDevice()
    assert cpu.capability == DEFAULT_CAPABILITY and cpu.kernel_rates == {"trsm": ((256, 5.0),)}
    assert cpu.whole_rates == {"potrf": ((128, 3.0),)}
    np.testing.assert_allclose(la.cholesky(np.eye(4) * 4), np.eye(4) * 2)


def test_whole_matrix_rates_are_measured_cached_and_loaded():
    """Each device's routine on whole matrices (the host path's LAPACK call, the gpu path's library call) is timed
    per order and factorization, cached, and loaded by devices created later."""
    results = calibrate([CpuDevice(workers=1), EmulatedDevice(3)], tile=16, repeats=1, link_bytes=1 << 16,
                        kernels=False, whole_orders=(48, 24))
    for name, device in (("cpu", CpuDevice()), ("emulated:3", EmulatedDevice(3))):
        whole = results[name]["whole"]
        assert set(whole) == {"potrf", "getrf", "geqrf"}
        assert all([n for n, _ in rows] == [24, 48] and all(rate > 0 for _, rate in rows) for rows in whole.values())
        assert device.whole_rates == {op: tuple(map(tuple, rows)) for op, rows in whole.items()}


def test_dispatch_prices_the_host_and_gpu_paths_from_whole_matrix_rates(cache_dir):
    """Calibrated whole-matrix rates replace the reference machine's host efficiencies and the simulated gpu path:
    the gpu path costs the matrix up and down the link plus the library call at its measured rate."""
    import numpy as np

    import hetlapack
    from hetlapack.perf import model, rates

    rows = {op: [[64, 2.0], [4096, 4.0]] for op in ("potrf", "getrf", "geqrf")}
    fast = {op: [[64, 1e6]] for op in rows}
    devices = {"cpu": {"whole": rows}, "emulated:5": {"bandwidth_gbs": 10.0, "latency_s": 1e-4, "whole": fast}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": devices}))
    assert model.host_efficiency("potrf", 64) == pytest.approx(2.0 / rates.host_gemm_gflops("d"))
    assert model.host_efficiency("getrf", 512) == pytest.approx(3.0 / rates.host_gemm_gflops("d"))
    assert model.predict_host("potrf", 4096, 4096, np.dtype("d")) == pytest.approx(
        rates.flops("potrf", 4096, 4096) / 4e9 + model.HOST_CALL_OVERHEAD_S)
    accelerator = EmulatedDevice(5)
    link = 2 * (1e-4 + 3000 * 3000 * 16 / 10e9)
    assert model.predict_gpu("getrf", 3000, 3000, np.dtype("D"), accelerator) == pytest.approx(
        link + rates.flops("getrf", 3000, 3000, True) / 1e15)
    with hetlapack.using(devices=["cpu", accelerator]):
        plan = hetlapack.explain("cholesky", np.eye(3000))
    assert plan.path == "gpu" and plan.predicted_s["gpu"] < plan.predicted_s["host"] / 100


def test_the_paths_calls_are_timed_on_c_and_fortran_inputs_for_the_installed_scipy(cache_dir, monkeypatch):
    """Given the paths' calls, calibration times each on a C- and a Fortran-ordered matrix of each order, for the
    CPU alone, under names that carry the installed SciPy's version, each right after the same SciPy call (so
    that both paths meet OpenBLAS's pool as a caller of SciPy does); devices created later load them, and a later
    calibration keeps another version's tables."""
    import scipy

    from hetlapack.perf import calibration, rates

    seen, woken = [], []
    monkeypatch.setattr(calibration, "_after_scipy", lambda: woken.append(len(seen)))
    ops = ("potrf", "getrf", "geqrf", rates.call_name("geqrf", forms_q=True))
    host_calls = {op: lambda a, op=op: seen.append(("host_call", op, a.flags.c_contiguous, a.flags.f_contiguous))
                  for op in ops}
    tile_calls = {op: lambda a, tile, op=op: seen.append(("tile_call", op, a.flags.c_contiguous, a.flags.f_contiguous,
                                                          tile == rates.tile_size(rates.call_op(op), a.shape[0])))
                  for op in ops}
    calls = {"host_call": host_calls, "tile_call": tile_calls}
    results = calibrate([CpuDevice(workers=1), EmulatedDevice(3)], tile=16, repeats=1, link_bytes=1 << 16,
                        kernels=False, whole_orders=(48, 24), host_calls=host_calls, tile_calls=tile_calls)
    cpu = CpuDevice()
    for table, attribute in (("host_call", "host_call_rates"), ("tile_call", "tile_call_rates")):
        tables = results["cpu"][table]
        assert set(tables) == {f"{op} {order} scipy {scipy.__version__}" for op in calls[table] for order in "CF"}
        assert all([n for n, _ in rows] == [24, 48] and all(rate > 0 for _, rate in rows) for rows in tables.values())
        assert getattr(cpu, attribute) == {name: tuple(map(tuple, rows)) for name, rows in tables.items()}
    assert set(seen) == {(table, op, *layout, *((True,) if table == "tile_call" else ())) for table in calls
                         for op in ops for layout in ((True, False), (False, True))}
    timed_tiles = [i for i, (table, *_) in enumerate(seen) if table == "tile_call"]
    assert all(seen[i - 1][0] == "host_call" and seen[i - 1][1:] == seen[i][1:4] for i in timed_tiles)
    assert woken == list(range(len(seen)))  # one SciPy call before each timed call
    assert "tiles" not in results["cpu"]
    assert "host_call" not in results["emulated:3"] and "tile_call" not in results["emulated:3"]
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 16, "devices": {"cpu": {
        "host_call": {"potrf C scipy 0.1.0": [[64, 1.0]]}, "tile_call": {"potrf C scipy 0.1.0": [[64, 2.0]]}}}}))
    calibrate([CpuDevice(workers=1)], tile=16, repeats=1, kernels=False, whole_orders=(24,), host_calls=host_calls,
              tile_calls=tile_calls)
    for table in ("host_call", "tile_call"):
        assert len(load()["cpu"][table]) == 9 and "potrf C scipy 0.1.0" in load()["cpu"][table]


def test_the_paths_calls_are_timed_in_stretches_each_keeping_its_fastest_rate(cache_dir, monkeypatch):
    """The rounds of the paths' calls are shared by ``CALL_STRETCHES`` stretches, one order after another, so that a
    call is timed minutes apart; each call keeps its fastest rate at each order, so a slow stretch of the machine
    prices neither path."""
    from hetlapack.perf import calibration

    stretches = [{"host_call": {"geqrf C": [[24, 3.0], [48, 9.0]]}, "tile_call": {"geqrf C": [[24, 4.0], [48, 5.0]]}},
                 {"host_call": {"geqrf C": [[24, 6.0], [48, 7.0]]}, "tile_call": {"geqrf C": [[24, 2.0], [48, 8.0]]}}]
    timed = []
    monkeypatch.setattr(calibration, "call_rates", lambda paths, orders, rounds: timed.append(
        (sorted(paths), list(orders), rounds)) or stretches[len(timed) - 1])
    calls = {"geqrf": lambda a, *tile: None}
    results = calibrate([CpuDevice(workers=1)], tile=16, repeats=3, kernels=False, whole_orders=(48, 24),
                        host_calls=calls, tile_calls=calls)
    assert calibration.CALL_STRETCHES == 2
    assert timed == [(["host_call", "tile_call"], [24, 48], 3 * calibration.PASSES // 2)] * 2
    assert results["cpu"]["host_call"] == {"geqrf C": [[24, 6.0], [48, 9.0]]}
    assert results["cpu"]["tile_call"] == {"geqrf C": [[24, 4.0], [48, 8.0]]}


def test_a_qr_forming_q_is_timed_as_a_call_of_its_own_at_geqrfs_tile(cache_dir, monkeypatch):
    """A QR that forms Q is timed beside ``mode='r'`` under a name of its own, its rate in ``geqrf``'s flops (so
    that a price from it is its time), on the tile path at ``geqrf``'s default tile; tiles are chosen for the
    factorizations alone."""
    import time

    import scipy

    from hetlapack.perf import calibration, rates

    with_q = rates.call_name("geqrf", forms_q=True)
    assert with_q != "geqrf" and rates.call_op(with_q) == "geqrf" and rates.call_op("geqrf") == "geqrf"
    chosen, tiles_run = [], []
    monkeypatch.setattr(calibration, "best_tiles", lambda calls, orders, *_: chosen.extend(calls) or {
        "geqrf": [[n, 96] for n in orders]})
    monkeypatch.setattr(calibration, "potrf_blocks", lambda orders, repeats: {})
    pause = {"geqrf": 0.001, with_q: 0.004}
    host_calls = {call: lambda a, call=call: time.sleep(pause[call]) for call in pause}
    tile_calls = {call: lambda a, tile, call=call: tiles_run.append((call, tile)) for call in pause}
    n = calibration.TILE_TIMING_MIN_ORDER
    results = calibrate([CpuDevice(workers=1)], tile=16, repeats=1, kernels=False, whole_orders=(n,),
                        host_calls=host_calls, tile_calls=tile_calls)
    assert chosen == ["geqrf"] and set(tiles_run) == {("geqrf", 96), (with_q, 96)}
    geqrf_flops = rates.flops("geqrf", n, n) / 1e9
    for call, seconds in pause.items():
        (order, rate), = results["cpu"]["host_call"][f"{call} C scipy {scipy.__version__}"]
        assert order == n and geqrf_flops / (3 * seconds) < rate <= geqrf_flops / seconds


def test_the_host_choleskys_block_is_read_from_the_cache_once_until_dispatch_forgets(cache_dir):
    """The host path's Cholesky block comes from the cache once per key, as dispatch's plans do (a lookup of the
    cache right after a BLAS call took 83-114 us), and afresh after ``forget_decisions``."""
    import numpy as np

    from hetlapack.dispatch.choose import forget_decisions
    from hetlapack.perf import model, rates

    table = rates.potrf_blocks_table(np.dtype(np.float64), "L", "numpy")

    def calibrated(block: int) -> None:
        (cache_dir / "calibration.json").write_text(json.dumps({"tile": 16, "devices": {"cpu": {
            "potrf_blocks": {table: [[2000, block]]}}}}))

    calibrated(64)
    assert model.host_potrf_block(np.dtype(np.float64), 2000, "L", "numpy") == 64
    calibrated(128)
    assert model.host_potrf_block(np.dtype(np.float64), 2000, "L", "numpy") == 64
    forget_decisions()
    assert model.host_potrf_block(np.dtype(np.float64), 2000, "L", "numpy") == 128
    with rates.timing_potrf_blocks({table: [[2000, 256]]}):  # a calibration's own blocks come first
        assert model.host_potrf_block(np.dtype(np.float64), 2000, "L", "numpy") == 256


def test_dispatch_prices_the_host_path_at_its_timed_call_on_the_inputs_memory_order(cache_dir):
    """Where the host path's call was timed, a C-ordered (or strided) matrix is priced at its rate on C-ordered
    input and a Fortran-ordered one at its rate on Fortran-ordered input, and explain says so; an operation not
    timed that way, another SciPy version's timing and NumPy's functions are priced at LAPACK's call."""
    import numpy as np

    import hetlapack
    from hetlapack.dispatch import Request
    from hetlapack.perf import model, rates

    gemm = rates.host_gemm_gflops("d")
    whole = {op: [[64, 0.5 * gemm], [4096, 0.5 * gemm]] for op in ("potrf", "getrf", "geqrf")}
    host_call = {rates.call_table("potrf", "C"): [[64, 0.2 * gemm], [4096, 0.2 * gemm]],
                 rates.call_table("potrf", "F"): [[64, 0.4 * gemm], [4096, 0.4 * gemm]],
                 "getrf C scipy 0.1.0": [[64, 0.1 * gemm], [4096, 0.1 * gemm]]}
    entry = {"whole": whole, "host_call": host_call}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert model.host_efficiency("potrf", 1000, "C") == pytest.approx(0.2)
    assert model.host_efficiency("potrf", 1000, "F") == pytest.approx(0.4)
    assert model.host_efficiency("potrf", 1000) == pytest.approx(0.5)
    assert model.host_efficiency("getrf", 1000, "C") == pytest.approx(0.5)
    assert Request("potrf", (9, 9), np.dtype("d"), library="numpy", memory_order="C").scipy_input_order is None

    spd = np.eye(1000) * 2
    plans = {name: hetlapack.explain("cholesky", a) for name, a in (
        ("C", spd), ("F", np.asfortranarray(spd)), ("strided", np.asfortranarray(np.eye(2000))[::2, ::2]))}
    flops = rates.flops("potrf", 1000, 1000)
    for name, efficiency in (("C", 0.2), ("F", 0.4), ("strided", 0.2)):
        assert plans[name].predicted_s["host"] == pytest.approx(
            flops / (efficiency * gemm * 1e9) + model.HOST_CALL_OVERHEAD_S)
    assert "the host path's SciPy call on C-ordered (or strided) matrices" in plans["C"].host_rate
    assert "the host path's SciPy call on Fortran-ordered matrices" in plans["F"].host_rate
    assert "this machine's LAPACK calls" in hetlapack.explain("lu_factor", spd).host_rate


def test_the_tile_paths_timed_call_corrects_the_simulators_price_on_the_cpu_alone(cache_dir):
    """Where calibration timed the tile path's call on the CPU alone, its price is the simulator's times the ratio
    of the timed call to the simulator's price of it at the orders timed (interpolated between them; beyond them, in
    the ratio to the host path's price timed at the largest), and explain says so; named devices, a forced tile or
    another memory order keep the simulator's price."""
    import numpy as np

    import hetlapack
    from hetlapack.perf import model, rates

    def rate(op, n, factor):
        return rates.flops(op, n, n) / (factor * model.predict_tiled(op, n, n, np.dtype("d"))) / 1e9

    timed = {rates.call_table("potrf", "C"): [[1024, rate("potrf", 1024, 2.0)], [4096, rate("potrf", 4096, 1.5)]]}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": {"tile_call": timed}}}))
    assert model.tile_call_factor("potrf", 1024, "C") == pytest.approx(2.0)
    assert model.tile_call_factor("potrf", 2048, "C") == pytest.approx(1.75)
    beyond = model.tile_call_factor("potrf", 8192, "C")  # the ratio to the host path's price timed at 4096 kept
    tile_over_host = [(model.tile_call_factor("potrf", n, "C") * model.predict_tiled("potrf", n, n, np.dtype("d")))
                      / model.predict_host("potrf", n, n, np.dtype("d"), "C") for n in (4096, 8192)]
    assert beyond != pytest.approx(1.5) and tile_over_host[1] == pytest.approx(tile_over_host[0], rel=1e-3)
    assert model.tile_call_factor("potrf", 2048, "F") is None and model.tile_call_factor("getrf", 2048, "C") is None
    spd = np.eye(2048) * 2
    plan = hetlapack.explain("cholesky", spd)
    assert plan.predicted_s["hybrid"] == pytest.approx(1.75 * model.predict_tiled("potrf", 2048, 2048, spd.dtype))
    assert "hybrid priced at the simulator's price x 1.75: its call on the CPU alone on C-ordered" in str(plan)
    fortran = hetlapack.explain("cholesky", np.asfortranarray(spd))
    assert fortran.tile_rate is None and fortran.predicted_s["hybrid"] == pytest.approx(
        model.predict_tiled("potrf", 2048, 2048, spd.dtype))
    for options in ({"tile": 256}, {"devices": ["cpu", "emulated:0"]}):
        with hetlapack.using(**options):
            assert hetlapack.explain("cholesky", spd).tile_rate is None


def test_the_fastest_tile_is_timed_on_c_ordered_matrices_from_the_smallest_order_worth_it(cache_dir, monkeypatch):
    """Calibration times the tile path's call at every kernel tile below each order from
    ``TILE_TIMING_MIN_ORDER`` and the table's, on a C-ordered matrix, in turn; it keeps the fastest per order unless
    the table's ran within ``TILE_CHOICE_MARGIN`` of it, and hands the table to the CPU (and the cache); the tile
    path's calls are then timed at the default tile it gives."""
    from hetlapack.perf import calibration, rates

    monkeypatch.setattr(calibration, "TILE_TIMING_MIN_ORDER", 200)
    monkeypatch.setattr(calibration, "KERNEL_TILES", (16, 32, 64))
    table = {op: rates.tile_size(op, 400) for op in ("potrf", "getrf")}
    fastest = {"potrf": 32, "getrf": 64}
    seconds = {"potrf": {32: 1.0, table["potrf"]: 1.1}, "getrf": {64: 1.0, table["getrf"]: 1.04}}
    seen = []
    timed_in_turn = calibration.fastest_in_turn

    def in_turn(calls, rounds, **limits):
        for call in calls.values():
            call()
        if seen[-1][1] != 400 or not seen[-1][3]:
            return timed_in_turn(calls, rounds, **limits)
        op = seen[-1][0]
        return {tile: seconds[op].get(tile, 2.0) for tile in calls}

    monkeypatch.setattr(calibration, "fastest_in_turn", in_turn)

    def tile_call(op):
        return lambda a, tile: seen.append((op, a.shape[0], tile, a.flags.c_contiguous))

    results = calibrate([CpuDevice(workers=1)], tile=16, repeats=2, kernels=False, whole_orders=(100, 400),
                        host_calls={op: lambda a: None for op in fastest},
                        tile_calls={op: tile_call(op) for op in fastest})
    assert results["cpu"]["tiles"] == {"potrf": [[400, 32]], "getrf": [[400, table["getrf"]]]}
    assert {(op, tile) for op, n, tile, c_order in seen if n == 400 and c_order} >= {
        (op, tile) for op in fastest for tile in (16, 32, 64, table[op])}
    assert {(op, tile) for op, n, tile, c_order in seen if n == 400 and not c_order} == {
        ("potrf", 32), ("getrf", table["getrf"])}
    assert {(op, tile) for op, n, tile, _ in seen if n == 100} == {(op, rates.tile_size(op, 100)) for op in fastest}
    assert CpuDevice().tile_orders == {"potrf": ((400, 32),), "getrf": ((400, table["getrf"]),)}


def test_the_default_tile_follows_the_calibrated_tiles_on_the_cpu_alone(cache_dir):
    """Nearest timed order in ratio; below the smallest, or over other devices, the table's tile; beyond the
    largest, no smaller than the table's. Dispatch runs and prices the tile path at it."""
    import numpy as np

    import hetlapack
    from hetlapack.perf import model, rates

    tiles = {"potrf": [[1024, 128], [4096, 384]]}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": {"tiles": tiles}}}))
    assert model.default_tile("potrf", 1000) == rates.tile_size("potrf", 1000)
    assert model.default_tile("potrf", 1500) == 128 and model.default_tile("potrf", 3000) == 384
    assert model.default_tile("potrf", 5000) == 384
    assert model.default_tile("potrf", 8000) == max(384, rates.tile_size("potrf", 8000))
    assert model.default_tile("getrf", 3000) == rates.tile_size("getrf", 3000)
    assert model.default_tile("potrf", 3000, ("cpu", "emulated:0")) == rates.tile_size("potrf", 3000)
    spd = np.eye(3000) * 2
    with hetlapack.using(path="hybrid"):
        plan = hetlapack.explain("cholesky", spd)
    assert plan.tile == 384
    assert plan.predicted_s["hybrid"] == pytest.approx(model.predict_tiled("potrf", 3000, 3000, spd.dtype, 384))
    assert "tile:    384 (placement: owner; this machine's fastest at order 4096, timed by `hetlapack calibrate`)" in (
        str(plan))
    with hetlapack.using(path="hybrid"):
        assert "the default table: `hetlapack calibrate` timed this machine's from order 1024" in str(
            hetlapack.explain("cholesky", np.eye(500) * 2))
    with hetlapack.using(path="hybrid", tile=128):
        assert "tile:    128 (placement: owner; forced by hetlapack.using(tile=...))" in str(
            hetlapack.explain("cholesky", spd))
    with hetlapack.using(path="hybrid", devices=["cpu", "emulated:0"]):
        plan = hetlapack.explain("cholesky", spd)
    assert plan.tile == rates.tile_size("potrf", 3000) and "tiles for the CPU alone" in str(plan)
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": {}}}))
    with hetlapack.using(path="hybrid"):  # another order: plans are remembered per request
        assert "the default table: `hetlapack calibrate` times this machine's)" in str(
            hetlapack.explain("cholesky", np.eye(2999) * 2))


def test_the_host_choleskys_block_is_timed_against_potrf_per_dtype_and_is_what_the_host_path_runs(cache_dir,
                                                                                                  monkeypatch):
    """From ``POTRF_BLOCKS_MIN_ORDER``, calibration times LAPACK's right-looking Cholesky at each block below the
    order in turn with the BLAS's ``potrf``, per dtype, on fresh copies of one matrix; a block counts only where it
    ran ``TILE_CHOICE_MARGIN`` faster, else the row holds the order itself (``potrf``). The table, named by dtype
    and library (SciPy's BLAS, and NumPy's own where it ships one, in the dtypes NumPy computes in) with its version,
    reaches the CPU, the cache and the host path's calls timed next; the host path's Cholesky then runs at it, and
    ``explain`` says so. Under SciPy 1.18, whose Cholesky is a compiled call, SciPy's BLAS is not timed and its
    Cholesky stays that call."""
    import numpy as np
    import scipy
    import scipy.linalg as sl

    import hetlapack
    import hetlapack.linalg as la
    from hetlapack import testing
    from hetlapack.contract.scipy_rules import COMPILED_BATCH_LOOPS
    from hetlapack.devices import lapack_pointers
    from hetlapack.perf import calibration, model, rates

    monkeypatch.setattr(calibration, "POTRF_BLOCKS_MIN_ORDER", 40)
    monkeypatch.setattr(rates, "POTRF_BLOCKS_MIN_ORDER", 40)
    monkeypatch.setattr(calibration, "POTRF_BLOCKS", (8, 16, 64))
    seconds = {("float64", "L"): {8: 0.9, 16: 0.97}, ("float64", "U"): {8: 0.97, 16: 0.9},
               ("complex64", "L"): {8: 0.97, 16: 0.99}}
    timed = []
    timed_in_turn = calibration.fastest_in_turn

    def in_turn(calls, rounds, setup=None, **limits):
        if not all(isinstance(key, int) for key in calls):  # the paths' calls
            return timed_in_turn(calls, rounds, setup=setup, **limits)
        setup()
        for call in calls.values():
            call()
        (uplo, work), library = calls[min(calls)].args[:2], calls[min(calls)].keywords["library"]
        assert work.flags.f_contiguous and all(call.args[0] == uplo and call.args[1] is work
                                               and call.keywords["library"] is library for call in calls.values())
        timed.append((work.dtype.name, uplo, library.name, work.shape[0], sorted(calls)))
        return {key: seconds.get((work.dtype.name, uplo), {}).get(key, 1.0) for key in calls}

    monkeypatch.setattr(calibration, "fastest_in_turn", in_turn)
    in_effect = []
    host_calls = {op: lambda a: in_effect.append(model.host_potrf_block(a.dtype, a.shape[0], "L"))
                  for op in ("potrf", "getrf", "geqrf")}
    results = calibrate([CpuDevice(workers=1)], tile=16, repeats=1, kernels=False, whole_orders=(24, 48),
                        host_calls=host_calls, tile_calls={op: lambda a, tile: None for op in host_calls})
    version = scipy.__version__
    scipys = not COMPILED_BATCH_LOOPS  # SciPy 1.18's Cholesky is a compiled call: its BLAS's blocks are not timed
    cases = [(dtype, "scipy", version) for dtype in ("float32", "float64", "complex64", "complex128") if scipys]
    if lapack_pointers.numpy_library() is not None:  # NumPy's BLAS, in the dtypes NumPy computes in
        cases += [(dtype, "numpy", np.__version__) for dtype in ("float64", "complex128")]
    assert timed == [(dtype, uplo, library, 48, [8, 16, 48]) for dtype, library, _ in cases for uplo in "LU"]
    chosen = {"L": 8, "U": 16}
    assert results["cpu"].get("potrf_blocks", {}) == {
        f"{dtype} {uplo} {library} {number}": [[48, chosen[uplo] if dtype == "float64" else 48]]
        for dtype, library, number in cases for uplo in "LU"}
    assert in_effect and set(in_effect) == ({None, 8} if scipys else {None})  # at 24, other dtypes: potrf
    if scipys:
        assert CpuDevice().potrf_blocks[f"float64 U scipy {version}"] == ((48, 16),)
    assert model.host_potrf_block(np.dtype(np.float64), 50, "L") == (8 if scipys else None)
    assert model.host_potrf_block(np.dtype(np.float64), 50, "U") == (16 if scipys else None)
    assert model.host_potrf_block(np.dtype(np.float64), 30, "L") is None
    assert model.host_potrf_block(np.dtype(np.complex64), 50, "L") is None

    ran = []
    right_looking = lapack_pointers.potrf_right_looking
    monkeypatch.setattr(lapack_pointers, "potrf_right_looking",
                        lambda *args, **kwargs: ran.append((args[0], args[2])) or right_looking(*args, **kwargs))
    a = testing.spd(50)
    with hetlapack.using(path="host"):
        for order in "CF":
            matrix = np.array(a, order=order)
            for lower in (False, True):  # SciPy's layout and other triangle (1.18: C-ordered, zeroed)
                c, expected = la.cholesky(matrix, lower=lower), sl.cholesky(matrix, lower=lower)
                assert c.flags.f_contiguous == expected.flags.f_contiguous and c.dtype == expected.dtype
                assert testing.cholesky_residual(a, c, lower) < 50
                np.testing.assert_allclose(c, expected, rtol=1e-12, atol=1e-12)
                np.testing.assert_array_equal((np.triu if lower else np.tril)(c, 1 if lower else -1), 0)
                (factor, flag), (expected, flag_expected) = la.cho_factor(matrix, lower=lower), sl.cho_factor(
                    matrix, lower=lower)
                other = np.triu(np.ones(a.shape, bool), 1) if lower else np.tril(np.ones(a.shape, bool), -1)
                assert repr(flag) == repr(flag_expected) and factor.flags.f_contiguous == expected.flags.f_contiguous
                np.testing.assert_array_equal(factor[other], expected[other])
                np.testing.assert_array_equal(matrix, a)
        assert len(ran) == (8 if scipys else 0)
        assert {uplo for uplo, _ in ran} == ({"L", "U"} if scipys else set())  # each triangle at its own block
        assert all(block == chosen[uplo] for uplo, block in ran)
        bad = a.copy()
        bad[4, 4] = -1.0
        with pytest.raises(np.linalg.LinAlgError) as theirs:
            sl.cholesky(bad)
        with pytest.raises(np.linalg.LinAlgError) as ours:
            la.cholesky(bad)
        assert str(ours.value) == str(theirs.value)
        plan = hetlapack.explain("cholesky", a)
        stack = hetlapack.explain("cholesky", np.stack([a, a]))  # SciPy's loop: LAPACK's potrf per matrix
    assert ("LAPACK's right-looking variant on SciPy's BLAS" in str(plan)) == scipys
    assert ("(a lower triangle at block 8, an upper one at block 16)" in str(plan)) == scipys
    assert "right-looking" not in str(stack)


@pytest.mark.parametrize(("order", "block"), [(400, None), (600, 128), (1800, None), (3000, 256), (9000, 256)])
def test_the_host_choleskys_block_is_the_nearest_timed_orders_and_none_where_potrf_won(order, block):
    """The row of the order nearest in ratio; none below the smallest order timed, or where that row holds the
    order itself (``potrf`` was the faster)."""
    from hetlapack.perf import rates

    assert rates.potrf_block(order, ((500, 128), (2000, 2000), (4000, 256))) == block


@pytest.mark.parametrize("arguments", [{"tile": 0}, {"repeats": 0}])
def test_calibration_refuses_non_positive_sizes(arguments):
    with pytest.raises(ValueError, match="must be positive"):
        calibrate([CpuDevice(workers=1)], **arguments)
    assert load() == {}


def test_refine_moves_towards_observed_rates_and_ignores_tiny_tasks():
    capability = {"blas3": 10.0}
    refine(capability, "blas3", flops=2e9, seconds=0.1, smoothing=0.5)
    assert capability["blas3"] == pytest.approx(15.0)
    refine(capability, "blas3", flops=2e9, seconds=1e-5)
    refine(capability, "blas3", flops=0.0, seconds=1.0)
    assert capability["blas3"] == pytest.approx(15.0)


def test_the_command_prints_a_table_and_caches(cache_dir, capsys, fast_kernel_tables):
    import argparse

    from hetlapack.commands import calibrate as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["calibrate", "--devices", "cpu,emulated:1", "--tile", "16", "--repeats", "1",
                              "--orders", "40,20", "--no-batched"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "emulated:1" in out and "saved to" in out and set(load()) == {"cpu", "emulated:1"}
    assert [line.split()[:2] for line in out.splitlines() if line.split()[1:2] in (["20"], ["40"])] == [
        ["cpu", "20"], ["cpu", "40"], ["emulated:1", "20"], ["emulated:1", "40"]]


@pytest.fixture
def fast_kernel_tables(monkeypatch):
    """Stand in for the per-kernel tables (always timed at tiles 128-512: seconds) and the batched kernels'
    crossover (and the compilation of the kernels it would time) in command tests; the devices timed, in order."""
    from hetlapack.batched import crossover, precompile
    from hetlapack.perf import calibration

    timed = []

    def kernel_tables(device, repeats):
        timed.append(device.name)
        return {"gemm": [[128, 30.0]]}

    monkeypatch.setattr(calibration, "kernel_tables", kernel_tables)
    monkeypatch.setattr(precompile, "precompile", lambda: {})
    monkeypatch.setattr(crossover, "measure", lambda repeats, progress: {"getrf float64": [[4, 3.0], [8, 0.5]]})
    monkeypatch.setattr(crossover, "measure_lanes", lambda repeats, progress: {"getrf float64": [[8, 64], [16, 16]]})
    monkeypatch.setattr(crossover, "measure_spread",
                        lambda repeats, progress: {"geqrf float64": [[16384, 1.1], [36864, 1.25], [65536, 0.9]]})
    monkeypatch.setattr(crossover, "measure_stream",
                        lambda repeats, progress: {"getrf float64": [[512, 1.4], [1152, 1.2], [2048, 0.9]]})
    monkeypatch.setattr(crossover, "measure_stream_stacks",
                        lambda repeats, progress: {"lu float64": [[2 << 20, 1.5], [4 << 20, 1.02], [8 << 20, 1.3]]})
    monkeypatch.setattr(crossover, "measure_loop_threads",
                        lambda repeats, progress: {"getrf float32": [[4, 1.6], [8, 0.7]]})
    monkeypatch.setattr(crossover, "measure_solves",
                        lambda repeats, progress: {"getrs float32": [[8, 2.0], [12, 1.4], [16, 0.9]]})
    return timed


@pytest.mark.parametrize("devices", [[1, 2], "cpu", {"cpu": [1, 2]}, {"cpu": {"blas3": "fast", "whole": []}}])
def test_a_cache_whose_devices_or_entries_are_not_objects_is_ignored_and_overwritten(devices, cache_dir, capsys,
                                                                                     fast_kernel_tables):
    """A damaged ``"devices"`` or device entry breaks neither calls nor commands: ``info`` says defaults, and
    ``hetlapack calibrate`` replaces it."""
    import numpy as np

    import hetlapack.linalg as la
    from hetlapack.cli import main

    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": devices}))
    assert load() == {} and CpuDevice().capability == DEFAULT_CAPABILITY
    np.testing.assert_allclose(la.cholesky(np.eye(2) * 4), np.eye(2) * 2)
    assert main(["info"]) == 0
    assert "(defaults" in next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Device cpu"))
    assert main(["calibrate", "--devices", "cpu", "--tile", "16", "--repeats", "1", "--orders", "16"]) == 0
    assert set(load()) == {"cpu"} and load()["cpu"]["kernels"] == {"gemm": ((128, 30.0),)}


def test_calibrate_refuses_an_unwritable_cache_before_measuring(cache_dir, monkeypatch, capsys, fast_kernel_tables):
    """One line naming the cache file and the ways around it (exit status 1), before anything is timed."""
    from hetlapack.cli import main

    (cache_dir / "afile").write_text("")
    monkeypatch.setenv(ENV_CACHE_DIR, str(cache_dir / "afile" / "sub"))
    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", "--devices", "cpu", "--tile", "16", "--repeats", "1", "--orders", "16"])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and fast_kernel_tables == [] and "Traceback" not in err
    assert f"cannot write the calibration cache {cache_path()}" in err
    assert "--no-save" in err and ENV_CACHE_DIR in err


def test_calibrate_prints_its_results_when_the_cache_write_fails_after_measuring(monkeypatch, capsys,
                                                                                  fast_kernel_tables):
    from hetlapack.cli import main
    from hetlapack.commands import calibrate as command
    from hetlapack.perf import calibration

    def save_results(results, tile):
        raise PermissionError(13, "Permission denied", str(cache_path()))

    monkeypatch.setattr(command, "save_results", save_results)
    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", "--devices", "cpu", "--tile", "16", "--repeats", "1", "--orders", "16"])
    captured = capsys.readouterr()
    assert exit_.value.code == 1 and fast_kernel_tables == ["cpu"] * calibration.PASSES
    assert "blas3 GFLOP/s" in captured.out and "cannot write the calibration cache" in captured.err


def test_host_efficiency_ignores_tiny_orders_and_follows_the_reference_curve_beyond_the_timed_ones(cache_dir):
    """A calibration at small orders is not held flat over every larger matrix: orders below the reference table's
    (64) are not used, and past the largest order timed the efficiency follows the reference machine's curve,
    scaled to agree there, at most the GEMM rate."""
    from hetlapack.perf import model, rates

    gemm = rates.host_gemm_gflops("d")
    whole = {"potrf": [[16, 0.01 * gemm], [32, 0.03 * gemm]], "getrf": [[64, 0.1 * gemm], [256, 0.2 * gemm]],
             "geqrf": [[64, 0.2 * gemm]]}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 16, "devices": {"cpu": {"whole": whole}}}))
    for n in (32, 600, 2000):
        assert model.host_efficiency("potrf", n) == model.interpolate(model.HOST_EFFICIENCY["potrf"], n)
    assert model.host_efficiency("getrf", 128) == pytest.approx(0.15)
    assert model.host_efficiency("getrf", 1000) == pytest.approx(0.2 * 0.42 / 0.20)
    assert model.host_efficiency("geqrf", 4000) == pytest.approx(1.0)


@pytest.mark.parametrize("entry", [{"blas3": 1e308}, {"whole": {"potrf": [[64, 1e308]]}},
                                   {"kernels": {"potrf": [[1e308, 10.0]]}}, {"latency_s": 1e-300}])
def test_implausibly_large_or_small_cached_values_are_ignored(entry, cache_dir):
    """Finite values no measurement can give (a hand edit) are damage too: left out, they cannot overflow the device
    weights and the cost model into NaN."""
    import numpy as np

    import hetlapack

    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    cpu = CpuDevice()
    assert load() == {} and cpu.capability == DEFAULT_CAPABILITY and cpu.kernel_rates == cpu.whole_rates == {}
    a = np.random.default_rng(0).standard_normal((600, 600))
    assert hetlapack.explain("cholesky", a @ a.T + 600 * np.eye(600)).path


def test_batched_crossover_is_timed_on_this_machine_cached_and_read_by_dispatch(cache_dir, capsys, fast_kernel_tables):
    """``hetlapack calibrate`` times the interleaved kernels against the LAPACK loop on stacks; dispatch then runs
    the interleaved kernel up to the last order where it won at every order timed, and says where that came from.
    Where nothing was timed (here complex dtypes), the reference machine's orders stay."""
    import numpy as np

    import hetlapack
    from hetlapack.cli import main
    from hetlapack.perf import model

    assert main(["calibrate", "--devices", "cpu", "--tile", "16", "--repeats", "1", "--orders", "16"]) == 0
    out = capsys.readouterr().out
    assert "interleaved up to order: getrf float64 4" in out
    assert load()["cpu"]["batched"] == {"getrf float64": ((4, 3.0), (8, 0.5))}
    assert load()["cpu"]["lanes"] == {"getrf float64": ((8, 64), (16, 16))}
    assert load()["cpu"]["spread"] == {"geqrf float64": ((16384, 1.1), (36864, 1.25), (65536, 0.9))}
    assert "a slice a step up to: geqrf float64 36 KiB" in out
    assert load()["cpu"]["stream"] == {"getrf float64": ((512, 1.4), (1152, 1.2), (2048, 0.9))}
    assert "streaming up to: getrf float64 1152 bytes" in out
    assert load()["cpu"]["stream_stack"] == {"lu float64": ((2 << 20, 1.5), (4 << 20, 1.02), (8 << 20, 1.3))}
    assert "streaming from 8.0 MiB" in out
    assert load()["cpu"]["loop_threads"] == {"getrf float32": ((4, 1.6), (8, 0.7))}
    assert "one thread up to order: getrf float32 4" in out
    assert load()["cpu"]["solves"] == {"getrs float32": ((8, 2.0), (12, 1.4), (16, 0.9))}
    assert "the interleaved solve wins); interleaved up to order: getrs float32 12" in out
    assert model.interleaved_max_n("getrf", np.dtype(np.float64)) == 4
    assert model.interleaved_max_n("getrf", np.dtype(np.complex128)) == model.INTERLEAVED_MAX_N["getrf"][1]
    assert model.interleaved_max_n("potrf", np.dtype(np.float64)) == model.INTERLEAVED_MAX_N["potrf"][0]
    stack = np.random.default_rng(0).standard_normal((1000, 4, 4))
    plan = hetlapack.explain("lu_factor", stack)
    assert plan.kernels == "interleaved" and "up to n=4, timed on this machine" in plan.reason
    assert hetlapack.explain("lu_factor", np.random.default_rng(0).standard_normal((1000, 8, 8))).kernels == "lapack"


def test_crossover_order_is_the_last_order_won_before_the_first_loss():
    from hetlapack.perf import model

    assert model.crossover_order(((4, 2.0), (8, 1.1), (16, 0.9), (24, 1.2))) == 8
    assert model.crossover_order(((4, 0.8), (8, 1.5))) == 0
    assert model.crossover_order(((4, 2.0), (64, 1.0))) == 64
    assert model.crossover_order(((4, 2.0), (8, 0.9), (16, 0.7)), at_least=0.8) == 8
    margin = model.LOOP_THREADS_MARGIN  # one thread stands until every core ran that much faster
    assert model.one_thread_order(((4, 2.0), (8, 1.01 / margin), (16, 0.99 / margin))) == 8


def test_batched_crossover_times_both_kernels_on_every_case():
    from hetlapack.batched import crossover

    done = []
    ratios = crossover.measure(repeats=1, orders=(4, 9), progress=done.append)
    assert list(ratios) == list(crossover.CASES) == done
    assert all([row[0] for row in rows] == [4, 9] and all(row[1] > 0 for row in rows) for rows in ratios.values())


def test_calibrated_spread_is_what_the_kernels_ask_with(cache_dir):
    """The LU and QR kernels ask for the next chunk a slice a step on buffers up to the largest before the first
    where calibration found slices slower (``model.crossover_order`` of its times, by bytes; 0 where they lost at
    the first); a kernel not timed, and a machine never calibrated, keep half the L1 cache
    (``_interleave.SPREAD_MAX_BYTES``); a kernel's caller may give its own limit."""
    from hetlapack.batched._interleave import SPREAD_MAX_BYTES
    from hetlapack.batched.threads import spread_limit
    from hetlapack.dispatch.choose import forget_decisions

    assert spread_limit("getrf") == spread_limit("geqrf") == SPREAD_MAX_BYTES
    entry = {"spread": {"geqrf float64": [[16384, 1.1], [36864, 1.0], [65536, 0.9], [147456, 1.2]],
                        "getrf float64": [[4096, 0.95], [16384, 1.3]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert CpuDevice().batched_spread["geqrf float64"] == ((16384, 1.1), (36864, 1.0), (65536, 0.9), (147456, 1.2))
    assert spread_limit("geqrf") == SPREAD_MAX_BYTES  # remembered until dispatch forgets, as its plans are
    forget_decisions()
    assert spread_limit("geqrf") == 36864 and spread_limit("getrf") == 0 and spread_limit("potrf") == SPREAD_MAX_BYTES
    assert spread_limit("geqrf", 4096) == 4096


def test_calibrated_streaming_is_what_the_kernels_write_with(cache_dir, monkeypatch):
    """Past the last-level cache, a kernel writes its results with streaming stores up to the largest matrix before
    the first where calibration timed streaming slower (``model.crossover_order`` of its times, by matrix bytes);
    a kernel not timed, and a machine never calibrated, stream up to ``STREAM_MAX_MATRIX_BYTES``; a caller may
    choose."""

    from hetlapack.batched import streaming
    from hetlapack.dispatch.choose import forget_decisions
    from hetlapack.testing.matrices import on_cache_line

    monkeypatch.setattr(streaming, "last_level_cache", lambda: 1)
    stacks = {n: on_cache_line((1, n, n)) for n in (8, 12, 16)}  # matrices of 512, 1152 and 2048 bytes
    assert [streaming.streams("getrf", a) for a in stacks.values()] == [True, False, False]
    entry = {"stream": {"getrf float64": [[512, 1.4], [1152, 1.2], [2048, 0.9]], "geqrf float64": [[512, 0.8]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert CpuDevice().batched_stream["geqrf float64"] == ((512, 0.8),)
    assert streaming.streams("getrf", stacks[12]) is False  # remembered until dispatch forgets, as its plans are
    forget_decisions()
    assert [streaming.streams("getrf", a) for a in stacks.values()] == [True, True, False]
    assert not streaming.streams("geqrf", stacks[8]) and streaming.streams("potrf", stacks[8])
    assert streaming.streams("geqrf", stacks[16], chosen=True)
    assert not streaming.streams("getrf", stacks[8], chosen=False)
    monkeypatch.setattr(streaming, "last_level_cache", lambda: stacks[8].nbytes)
    assert not streaming.streams("getrf", stacks[8]) and streaming.streams("getrf", stacks[8], stacks[8])


def test_calibrated_stacks_are_where_the_kernels_start_streaming(cache_dir, monkeypatch):
    """A call streams its results from the smallest stack (with its results) from which calibration timed streaming
    faster by ``STREAM_STACK_MARGIN`` at every larger stack, the largest of those over the kernels timed, rather
    than past the last-level cache the system gives (a virtual machine shares it); where it lost at the largest,
    past that; never calibrated, past the cache."""
    from hetlapack.batched import streaming
    from hetlapack.dispatch.choose import forget_decisions
    from hetlapack.perf import model
    from hetlapack.testing.matrices import on_cache_line

    assert model.stream_stack_reach({"lu float64": ((100, 1.2), (200, 1.01), (400, 1.1), (800, 1.3))}) == 400
    assert model.stream_stack_reach({"lu float64": ((100, 1.2), (200, 0.9)), "potrf float64": ((100, 1.2),)}) == 201
    assert model.stream_stack_reach({"lu float64": ((100, 1.2), (200, 1.2)), "potrf float64": ((100, 1.0),
                                                                                              (200, 1.1))}) == 200
    stack = on_cache_line((4, 8, 8))  # 2 KiB
    result = on_cache_line((4, 8, 8))
    monkeypatch.setattr(streaming, "last_level_cache", lambda: 4096)
    assert not streaming.streams("getrf", stack, result)
    entry = {"stream_stack": {"lu float64": [[1024, 0.98], [4096, 1.2], [16384, 1.3]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    forget_decisions()
    assert model.batched_stream_stack_bytes() == 4096
    assert streaming.streams("getrf", stack, result) and not streaming.streams("getrf", stack)
    monkeypatch.setattr(streaming, "last_level_cache", lambda: None)
    assert not streaming.streams("getrf", stack, result)


def test_streaming_is_timed_both_ways_on_stacks_up_to_the_last_level_cache(monkeypatch):
    from hetlapack.batched import crossover

    monkeypatch.setattr(crossover, "last_level_cache", lambda: 4 << 20)
    done = []
    ratios = crossover.measure_stream_stacks(repeats=1, shares=(1 / 4, 1), progress=done.append)
    assert list(ratios) == list(crossover.STACK_CASES) == done
    for case, rows in ratios.items():
        results = 1 + crossover.STACK_RESULTS[case.split()[0]]
        assert [row[0] for row in rows] == [(share * (4 << 20)) // results // 512 * 512 * results
                                           for share in (1 / 4, 1)]
        assert all(row[1] > 0 for row in rows)
    monkeypatch.setattr(crossover, "last_level_cache", lambda: None)
    assert crossover.measure_stream_stacks(repeats=1) == {}


def test_streaming_is_timed_both_ways_on_every_case_by_matrix_bytes():
    from hetlapack.batched import crossover

    done = []
    ratios = crossover.measure_stream(repeats=1, orders=(8, 12), progress=done.append)
    assert list(ratios) == list(crossover.STREAM_CASES) == done
    assert all([row[0] for row in rows] == [512, 1152] and all(row[1] > 0 for row in rows) for rows in ratios.values())


def test_calibrated_solve_orders_are_where_the_solves_leave_the_interleaved_layout(cache_dir):
    """A solve runs in the interleaved layout up to the last order before the first where calibration timed it
    slower than a matrix at a time (``model.crossover_order``); a solve or dtype not timed, and a machine never
    calibrated, keep the defaults (``model.INTERLEAVED_SOLVE_MAX_N``); the lookup is remembered until dispatch
    forgets its decisions."""
    import numpy as np

    from hetlapack.dispatch.choose import forget_decisions
    from hetlapack.perf import model

    float32, float64 = np.dtype(np.float32), np.dtype(np.float64)
    assert model.interleaved_solve_max_n("getrs", float32) == model.INTERLEAVED_SOLVE_MAX_N["getrs"]["f"]
    entry = {"solves": {"getrs float32": [[8, 2.0], [16, 1.3], [24, 0.8], [32, 1.1]], "potrs float64": [[8, 0.9]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert CpuDevice().batched_solves["potrs float64"] == ((8, 0.9),)
    assert model.interleaved_solve_max_n("getrs", float32) == model.INTERLEAVED_SOLVE_MAX_N["getrs"]["f"]
    forget_decisions()
    assert model.interleaved_solve_max_n("getrs", float32) == 16
    assert model.interleaved_solve_max_n("potrs", float64) == 0
    assert model.interleaved_solve_max_n("getrs", float64) == model.INTERLEAVED_SOLVE_MAX_N["getrs"]["d"]


def test_solves_are_timed_both_ways_on_every_case():
    from hetlapack.batched import crossover

    done = []
    ratios = crossover.measure_solves(repeats=1, orders=(4, 9), progress=done.append)
    assert list(ratios) == list(crossover.SOLVE_CASES) == done and len(done) == 8
    assert all([row[0] for row in rows] == [4, 9] and all(row[1] > 0 for row in rows) for rows in ratios.values())


def test_spread_is_timed_both_ways_on_every_case_by_buffer_bytes():
    from hetlapack.batched import crossover

    done = []
    ratios = crossover.measure_spread(repeats=1, orders=(8, 16, 24), progress=done.append)
    assert list(ratios) == list(crossover.SPREAD_CASES) == done
    assert all([row[0] for row in rows] == [8 * 8 * 64, 16 * 16 * 64, 24 * 24 * 64] and all(row[1] > 0 for row in rows)
               for rows in ratios.values())


def test_calibrated_matrices_per_buffer_are_what_the_kernels_run_with(cache_dir, monkeypatch):
    """Dispatch gives the interleaved Cholesky and LU the matrices per buffer calibration timed fastest, at the
    timed order nearest in ratio, in the dtype timed, and the batched path runs the kernel with them; orders below
    the smallest timed (whose kernels are compiled for the rule's buffer), dtypes and kernels not timed and a
    machine never calibrated keep the buffer-size rule (``lanes`` None)."""
    import numpy as np

    import hetlapack
    import hetlapack.linalg as hla
    from hetlapack.batched import kernels
    from hetlapack.dispatch.choose import forget_decisions
    from hetlapack.perf import model

    f64, c128, f32 = np.dtype(np.float64), np.dtype(np.complex128), np.dtype(np.float32)
    stack = np.random.default_rng(0).standard_normal((500, 16, 16))
    assert model.batched_lanes("getrf", f64, 16) is None and hetlapack.explain("lu_factor", stack).lanes is None
    entry = {"lanes": {"getrf float64": [[8, 64], [16, 16]], "potrf complex128": [[16, 8]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert CpuDevice().batched_lanes == {"getrf float64": ((8, 64), (16, 16)), "potrf complex128": ((16, 8),)}
    assert [model.batched_lanes("getrf", f64, n) for n in (4, 8, 10, 12, 16, 40)] == [None, 64, 64, 16, 16, 16]
    assert model.batched_lanes("potrf", c128, 24) == 8 and model.batched_lanes("potrf", f64, 16) is None
    assert model.batched_lanes("getrf", f32, 16) is None
    forget_decisions()  # dispatch remembers its plans within a process; calibration runs in a process of its own
    plan = hetlapack.explain("lu_factor", stack)
    assert plan.kernels == "interleaved" and plan.lanes == 16 and "16 matrices per buffer" in str(plan)
    assert hetlapack.explain("lu_factor", stack[:, :, :12]).lanes is None
    ran = []
    getrf = kernels.getrf
    monkeypatch.setattr(kernels, "getrf", lambda *args, **kwargs: ran.append(kwargs["lanes"]) or getrf(*args, **kwargs))
    lu, piv = hla.lu_factor(stack)
    assert ran == [16]
    assert np.array_equal(lu, getrf(stack, fortran=True)[0]) and np.array_equal(piv, getrf(stack)[1])


def test_calibrated_loop_threads_are_what_the_lapack_loops_run_with(cache_dir, monkeypatch):
    """Dispatch runs a LAPACK loop on one thread up to the last order where one thread beat every core, from the
    smallest order timed on, in the dtype timed; routines and dtypes not timed keep the reference machine's orders
    (``LOOP_ONE_THREAD_MAX_N``), and the plan says which, and where from."""
    import numpy as np

    import hetlapack
    import hetlapack.linalg as hla
    from hetlapack.batched import kernels, threads
    from hetlapack.dispatch.choose import forget_decisions
    from hetlapack.machine import usable_cores
    from hetlapack.perf import model

    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    stack = np.random.default_rng(0).standard_normal((500, 8, 8)).astype(np.float32)
    default = model.LOOP_ONE_THREAD_MAX_N["getrf"]
    assert model.lapack_loop_threads("getrf", f32, default) == 1 and model.lapack_loop_threads("getrf", f32, 9) is None
    assert model.lapack_loop_threads("geqrf", f32, 2) is None
    assert hetlapack.explain("lu_factor", stack).loop_threads is None
    fixed = model.BATCHED_CALL_S + model.LAPACK_LOOP_START_S
    on_one = model.predict_batched("getrf", default, default, 1200, f32, "lapack") - fixed
    with monkeypatch.context() as patch:  # the model prices the cores the loop runs on
        patch.setitem(model.LOOP_ONE_THREAD_MAX_N, "getrf", 0)
        on_every = model.predict_batched("getrf", default, default, 1200, f32, "lapack") - fixed
    assert on_one == pytest.approx(on_every * 1200 / math.ceil(1200 / usable_cores()))
    clearly_faster = 0.99 / model.LOOP_THREADS_MARGIN  # every core's time over one thread's
    entry = {"loop_threads": {"getrf float32": [[4, 1.5], [8, 0.9], [16, clearly_faster], [32, 1.1]]}}
    (cache_dir / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert CpuDevice().loop_threads == {"getrf float32": ((4, 1.5), (8, 0.9), (16, clearly_faster), (32, 1.1))}
    assert [model.lapack_loop_threads("getrf", f32, n) for n in (2, 8, 9, 16, 32)] == [1, 1, None, None, None]
    assert model.loop_one_thread_max_n("getrf", f64) == default and model.loop_one_thread_max_n("potrs", f32) > 0
    forget_decisions()  # dispatch remembers its plans within a process; calibration runs in a process of its own
    plan = hetlapack.explain("lu_factor", stack)
    assert plan.kernels == "lapack" and plan.loop_threads == 1 and "at most 1 thread" in str(plan)
    assert "up to n=8 (timed on this machine" in plan.reason
    assert hetlapack.explain("lu_factor", stack[:, :, :5].repeat(3, axis=2)).loop_threads is None
    started = []
    call_checked = threads.call_checked
    monkeypatch.setattr(threads, "call_checked",
                        lambda op, *rest: started.append((op, rest[2])) or call_checked(op, *rest))
    monkeypatch.setattr(kernels, "getrf_kernels", lambda *shape: None)  # the LAPACK loop, not its replay
    lu, piv = hla.lu_factor(stack)
    assert started == [("getrf_each", 1)]
    want_lu, want_piv, _ = kernels.getrf(stack, fortran=True, lapack=True, loop_threads=2)
    assert np.array_equal(lu, want_lu) and np.array_equal(piv, want_piv)


def test_the_lapack_loops_are_timed_on_one_thread_and_every_core_for_every_case():
    from hetlapack.batched import crossover

    done = []
    ratios = crossover.measure_loop_threads(repeats=1, orders=(3, 5), progress=done.append)
    assert list(ratios) == list(crossover.LOOP_CASES) == done
    assert {case.split()[0] for case in ratios} == {"potrf", "getrf", "geqrf", "geqp3", "potrs", "getrs"}
    assert all([row[0] for row in rows] == [3, 5] and all(row[1] > 0 for row in rows) for rows in ratios.values())


def test_matrices_per_buffer_are_timed_for_every_case():
    import numpy as np

    from hetlapack.batched import crossover
    from hetlapack.batched.threads import kernel_lanes

    done = []
    fastest = crossover.measure_lanes(repeats=1, orders=(5, 9), choices=(8, 24), progress=done.append)
    assert list(fastest) == list(crossover.LANE_CASES) == done
    rules = {kernel_lanes(case.split()[0], np.dtype(case.split()[1]), 10**6, n, n) for case in crossover.LANE_CASES
             for n in (5, 9)}
    assert all([row[0] for row in rows] == [5, 9] and all(row[1] in {8, 24, *rules} for row in rows)
               for rows in fastest.values())


def test_the_buffer_size_rule_stands_unless_another_choice_is_clearly_faster(monkeypatch):
    import numpy as np

    from hetlapack.batched import crossover
    from hetlapack.batched.threads import kernel_lanes
    from hetlapack.perf import calibration

    rule = kernel_lanes("getrf", np.dtype(np.float64), 10**6, 16, 16)
    speed = {rule: 1.0, 8: 1.0 / (crossover.LANE_MARGIN * 1.01), 64: 1.0 / (crossover.LANE_MARGIN * 0.99)}
    monkeypatch.setattr(crossover, "LANE_CASES", ("getrf float64",))
    monkeypatch.setattr(calibration, "best_seconds", lambda run, repeats, setup=None: run())
    for faster in (8, 64):
        monkeypatch.setattr(crossover, "_LANE_CALLS", {"getrf": lambda a, lanes: speed[lanes] if lanes in (rule, faster)
                                                      else np.inf})
        picked = crossover.measure_lanes(repeats=1, orders=(16,), choices=(faster,))
        assert picked == {"getrf float64": [[16, 8 if faster == 8 else rule]]}


def test_calls_timed_in_turn_keep_each_ones_best_and_stop_once_every_one_is_long_enough(monkeypatch):
    """Each round calls every call once, in order; the rounds stop after ``least`` once every best is over
    ``enough_s``, and run to ``rounds`` while any is not."""
    from hetlapack.perf import calibration

    order, clock = [], iter(range(1000))
    monkeypatch.setattr(calibration.time, "perf_counter", lambda: next(clock) * 1.0)
    calls = {"host": lambda: order.append("host"), "tile": lambda: order.append("tile")}
    assert calibration.fastest_in_turn(calls, rounds=5, enough_s=0.5, least=3) == {"host": 1.0, "tile": 1.0}
    assert order == ["host", "tile"] * 3
    order.clear()
    assert calibration.fastest_in_turn(calls, rounds=4, enough_s=1.0, least=2) == {"host": 1.0, "tile": 1.0}
    assert order == ["host", "tile"] * 4
    order.clear()
    assert calibration.fastest_in_turn(calls, rounds=2, setup=lambda: order.append("setup")) == {"host": 1.0,
                                                                                                "tile": 1.0}
    assert order == ["setup", "host", "setup", "tile"] * 2  # untimed: the clock read only around each call


def test_each_rate_is_the_fastest_of_the_passes():
    from hetlapack.perf.calibration import _fastest

    first = {"blas3": 2.0, "kernels": {"gemm": [[128, 3.0], [256, 5.0]]}, "whole": {"potrf": [[64, 1.0]]}}
    second = {"blas3": 1.0, "kernels": {"gemm": [[128, 4.0], [256, 4.0]]}, "whole": {"potrf": [[64, 2.0]]}}
    assert _fastest([first, second]) == {"blas3": 2.0, "kernels": {"gemm": [[128, 4.0], [256, 5.0]]},
                                         "whole": {"potrf": [[64, 2.0]]}}
    assert _fastest([first]) == first
