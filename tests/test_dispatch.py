"""Dispatch: explainable plans, forced paths, HETLAPACK_PATH, and the cost model's shape."""

import logging

import numpy as np
import pytest

import hetlapack
import hetlapack.linalg as la
from hetlapack import testing
from hetlapack.dispatch import PATHS, Request, choose, host_for_certain
from hetlapack.perf import model, rates


def test_explain_is_printable_and_complete():
    plan = hetlapack.explain("cholesky", np.eye(300))
    text = str(plan)
    assert plan.path in PATHS and plan.reason
    assert "predicted seconds" in text and "host" in plan.predicted_s
    assert "gpu" in plan.unavailable


def test_explain_lists_unavailable_paths_with_the_paths_and_unavailable_layouts_with_the_layouts():
    with hetlapack.using(path="hybrid", devices=["cpu"]):
        lines = str(hetlapack.explain("qr", np.eye(300))).splitlines()
    layouts_at = next(i for i, line in enumerate(lines) if "hybrid path by layout" in line)
    assert all("unavailable" not in line for line in lines[layouts_at + 1:] if "two-level" not in line)
    assert any("batched  unavailable" in line for line in lines[:layouts_at])
    assert any("two-level unavailable" in line for line in lines[layouts_at + 1:])


def test_explain_accepts_scipy_and_lapack_names():
    a = np.eye(10)
    assert hetlapack.explain("lu_factor", a).op == hetlapack.explain("getrf", a).op == "getrf"
    with pytest.raises(ValueError, match="unknown operation"):
        hetlapack.explain("svd", a)


def test_small_matrices_go_to_host_large_to_hybrid():
    assert choose(Request("potrf", (100, 100), np.dtype("d"))).path == "host"
    assert choose(Request("geqrf", (16000, 16000), np.dtype("d"))).path == "hybrid"


@pytest.mark.parametrize(("over_margin", "path"), [(0.96, "host"), (1.04, "hybrid")])
def test_tiles_need_a_predicted_win_beyond_the_models_error(monkeypatch, over_margin, path):
    monkeypatch.setattr(model, "predict_host", lambda *args: 1.0)
    tiled = 1.0 / (model.tile_margin("getrf") * over_margin)
    monkeypatch.setattr(model, "predict_tiled", lambda *args, **kwargs: tiled)
    plan = choose(Request("getrf", (3000, 3000), np.dtype("d")))
    assert plan.path == path
    assert ("within the model's error" in plan.reason) == (path == "host")


@pytest.mark.parametrize(("calibrated", "margin"), [(False, model.UNCALIBRATED_TILE_MARGIN), (True, model.TILE_MARGIN)])
def test_the_margin_is_wider_where_the_hosts_rate_is_the_reference_machines(monkeypatch, tmp_path, calibrated,
                                                                            margin):
    """Until ``hetlapack calibrate`` has timed this machine's LAPACK calls, the host is priced from another
    machine's table, whose error is larger: the tile path must then be priced further ahead before it is taken,
    and ``explain`` says which rate it priced the host at and where that rate came from."""
    import json

    from hetlapack.devices.capability import ENV_CACHE_DIR

    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    if calibrated:
        whole = {op: [[64, 1.0], [4096, rates.host_gemm_gflops("d") * 0.8]] for op in ("potrf", "getrf", "geqrf")}
        (tmp_path / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": {"whole": whole}}}))
    assert model.tile_margin("getrf") == margin
    plan = choose(Request("getrf", (4000, 4000), np.dtype("d")))
    source = "timed by `hetlapack calibrate`" if calibrated else "the reference machine's table"
    assert source in plan.host_rate and source in str(plan)
    assert "GFLOP/s GEMM measured in this process" in str(plan)


@pytest.mark.parametrize("ratio", [1.05, 1.15])
def test_the_margin_is_narrowest_where_both_paths_calls_were_timed_in_turn(monkeypatch, tmp_path, ratio):
    """Where ``hetlapack calibrate`` timed the host path's and the tile path's calls in turn on this machine, the
    tile path's price is their measured ratio: it is taken once it is ``TIMED_TILE_MARGIN`` ahead, not
    ``TILE_MARGIN``, on the memory order timed (elsewhere the wider margin stands); explain names the margin it
    applied."""
    import json

    from hetlapack.devices.capability import ENV_CACHE_DIR

    assert 1.0 < model.TIMED_TILE_MARGIN < 1.15 < model.TILE_MARGIN
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    n, gemm = 3000, rates.host_gemm_gflops("d")
    host_rate = 0.3 * gemm
    entry = {"host_call": {rates.call_table("getrf", "C"): [[1000, host_rate], [4000, host_rate]]},
             "tile_call": {rates.call_table("getrf", "C"): [[n, host_rate * ratio]]}}
    (tmp_path / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    assert model.tile_margin("getrf", "C", tile_timed=True) == model.TIMED_TILE_MARGIN
    assert model.tile_margin("getrf", "C") == model.TILE_MARGIN
    c_ordered = Request("getrf", (n, n), np.dtype("d"), memory_order="C")
    plan = choose(c_ordered)
    assert plan.predicted_s["host"] / plan.predicted_s["hybrid"] == pytest.approx(ratio, rel=0.01)  # call overhead
    assert plan.path == ("hybrid" if ratio > model.TIMED_TILE_MARGIN else "host")
    if plan.path == "host":
        assert f"dispatch takes them from {model.TIMED_TILE_MARGIN:.2f}x" in plan.reason


@pytest.mark.parametrize("tile_ratio", [1.0, 1.5])
def test_beyond_the_orders_timed_the_paths_keep_the_ratio_timed_at_the_largest(monkeypatch, tmp_path, tile_ratio):
    """Beyond the largest order ``hetlapack calibrate`` timed, the tile path is priced in the ratio to the host path
    it was timed at there, whatever the reference curve and the simulator say of larger orders: two paths that tied
    at every order timed keep the host path, and tiles timed 1.5x faster stay 1.5x faster."""
    import json

    from hetlapack.devices.capability import ENV_CACHE_DIR
    from hetlapack.dispatch.choose import forget_decisions

    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    rate = 0.5 * rates.host_gemm_gflops("d")
    entry = {"host_call": {rates.call_table("potrf", "F"): [[1000, rate], [4000, rate]]},
             "tile_call": {rates.call_table("potrf", "F"): [[1000, rate * tile_ratio], [4000, rate * tile_ratio]]}}
    (tmp_path / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    forget_decisions()
    for n in (4000, 8000, 16000):
        plan = choose(Request("potrf", (n, n), np.dtype("d"), memory_order="F"))
        assert plan.predicted_s["host"] / plan.predicted_s["hybrid"] == pytest.approx(tile_ratio, rel=0.01)
        assert plan.path == ("hybrid" if tile_ratio > model.TIMED_TILE_MARGIN else "host")


@pytest.mark.parametrize("timed_with_q", [True, False])
def test_a_qr_forming_q_is_priced_by_its_own_timed_call(monkeypatch, tmp_path, timed_with_q):
    """Where ``hetlapack calibrate`` timed the QR that forms Q apart from ``mode='r'``, ``qr``'s modes that form Q
    are priced by it: here the two paths' ``mode='r'`` calls tie and the tile path's economic call runs 1.5x faster,
    so economic and full QR take the tiles, ``mode='r'`` and ``'raw'`` stay on the host, and explain says what it
    priced them from. A cache calibrated before prices every mode by ``mode='r'``."""
    import json

    from hetlapack.devices.capability import ENV_CACHE_DIR
    from hetlapack.dispatch.choose import forget_decisions

    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    n, gemm = 2000, rates.host_gemm_gflops("d")
    r_rate, q_rate = 0.6 * gemm, 0.3 * gemm
    with_q = rates.call_name("geqrf", forms_q=True)
    host = {rates.call_table("geqrf", "C"): [[1000, r_rate], [4000, r_rate]]}
    tile = {rates.call_table("geqrf", "C"): [[n, r_rate]]}
    if timed_with_q:
        host[rates.call_table(with_q, "C")] = [[1000, q_rate], [4000, q_rate]]
        tile[rates.call_table(with_q, "C")] = [[n, 1.5 * q_rate]]
    entry = {"host_call": host, "tile_call": tile}
    (tmp_path / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": entry}}))
    forget_decisions()
    a = np.ones((n, n))
    plans = {mode: hetlapack.explain("qr", a, mode=mode) for mode in ("full", "economic", "r", "raw")}
    forming_q = "forming Q (its rate at geqrf's flops)"
    for mode, plan in plans.items():
        priced_with_q = timed_with_q and mode in ("full", "economic")
        assert plan.path == ("hybrid" if priced_with_q else "host"), mode
        assert (forming_q in plan.host_rate) == priced_with_q and (forming_q in plan.tile_rate) == priced_with_q
    if timed_with_q:
        economic = plans["economic"].predicted_s
        assert economic["host"] / economic["hybrid"] == pytest.approx(1.5, rel=0.01)
        assert plans["r"].predicted_s == pytest.approx(plans["raw"].predicted_s)


@pytest.mark.parametrize("op", ["potrf", "getrf", "geqrf", "geqp3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_the_quick_host_decision_is_the_one_choose_makes(op, dtype):
    """``host_for_certain`` sends a matrix to SciPy's call without a plan only where ``choose``, pricing every
    path, takes the host path too; it decides for the small orders and leaves the large ones to ``choose``."""
    shapes = [(n, n) for n in (1, 2, 7, 64, 100, 101, 257, 500, 1000, 2000, 4000, 8000)] + [(3000, 40), (40, 3000)]
    quick = {shape: host_for_certain(op, shape, np.dtype(dtype)) for shape in shapes}
    assert quick[(100, 100)] and not quick[(8000, 8000)]
    for shape, certain in quick.items():
        if certain:
            assert choose(Request(op, shape, np.dtype(dtype))).path == "host", shape


def test_the_quick_host_decision_leaves_forced_paths_devices_and_other_inputs_to_choose(monkeypatch, caplog):
    small = (50, 50)
    assert host_for_certain("potrf", small, np.dtype("d"))
    with hetlapack.using(path="host"):
        assert host_for_certain("potrf", small, np.dtype("d"))
    for forced in ("hybrid", "batched", "gpu"):
        with hetlapack.using(path=forced):
            assert not host_for_certain("potrf", small, np.dtype("d"))
    with hetlapack.using(devices=["cpu", "emulated:0"]):
        assert not host_for_certain("potrf", small, np.dtype("d"))
    assert not host_for_certain("potrf", (4, 50, 50), np.dtype("d"))  # a stack: the batched path may take it
    assert not host_for_certain("potrf", small, np.dtype("int64")) and not host_for_certain("potrf", small, None)
    monkeypatch.setenv("HETLAPACK_PATH", "hybrid")
    assert not host_for_certain("potrf", small, np.dtype("d"))
    assert la.cholesky(testing.spd(50)) is not None and hetlapack.explain("cholesky", testing.spd(50)).forced
    monkeypatch.delenv("HETLAPACK_PATH")
    # a logging configuration loaded by an earlier test may have switched the logger off
    monkeypatch.setattr(logging.getLogger("hetlapack.dispatch.choose"), "disabled", False)
    with caplog.at_level("DEBUG", logger="hetlapack.dispatch.choose"):
        assert not host_for_certain("potrf", small, np.dtype("d"))
        la.cholesky(testing.spd(50))
    assert "potrf on float64 (50, 50) -> host" in caplog.text


def test_a_forced_path_runs_matrices_the_quick_decision_would_send_to_the_host(monkeypatch):
    """The shims ask the quick decision first; a forced hybrid path still runs a small matrix on the runtime."""
    ran = []
    from hetlapack.dispatch.paths import HYBRID

    potrf = type(HYBRID).potrf
    monkeypatch.setattr(type(HYBRID), "potrf", lambda self, *args, **kwargs: ran.append(1) or potrf(self, *args,
                                                                                                      **kwargs))
    a = testing.spd(40)
    la.cholesky(a)
    assert not ran
    with hetlapack.using(path="hybrid", tile=16):
        np.testing.assert_allclose(la.cholesky(a), np.linalg.cholesky(a).T, rtol=1e-12, atol=1e-12)
    assert ran


def test_using_forces_and_restores():
    a = testing.spd(30)
    with hetlapack.using(path="hybrid", tile=8) as options:
        plan = hetlapack.explain("cholesky", a)
        assert plan.path == "hybrid" and plan.forced and plan.tile == 8 and options.tile == 8
        with hetlapack.using(path="host"):
            assert hetlapack.explain("cholesky", a).path == "host"
        assert hetlapack.explain("cholesky", a).path == "hybrid"
    assert not hetlapack.explain("cholesky", a).forced


def test_path_that_cannot_be_honoured_raises():
    with hetlapack.using(path="gpu"), pytest.raises(ValueError, match="'gpu' cannot be honoured"):
        la.cholesky(np.eye(4))
    with hetlapack.using(path="batched"), pytest.raises(ValueError, match="single matrix"):
        la.lu_factor(np.eye(4))


def test_unknown_path_and_bad_options_raise():
    with pytest.raises(ValueError, match="unknown path"):
        with hetlapack.using(path="fast"):
            pass
    for tile in (0, True, 2.0):
        with pytest.raises(ValueError, match="tile must be a positive integer"):
            with hetlapack.using(tile=tile):
                pass
    with pytest.raises(ValueError, match="devices must name at least one device"):
        with hetlapack.using(path="hybrid", devices=[]):
            pass
    for devices in ("cpu", "cpu,emulated:0", 5):
        with pytest.raises(TypeError, match="devices must be a sequence of device names or devices"):
            with hetlapack.using(path="hybrid", devices=devices):
                pass
    for devices, message in ((["bogus"], "unknown device 'bogus'"), ([3], "a device is a name"),
                             (["cpu", "cpu"], "devices named more than once: cpu")):
        with pytest.raises(ValueError, match=f"^using: {message}"):  # on entry, whatever the block then calls
            with hetlapack.using(devices=devices):
                pass


def test_numpy_integers_are_tile_orders():
    with hetlapack.using(tile=np.int64(128)) as options:
        assert options.tile == 128 and type(options.tile) is int


def test_env_var_forces_path(monkeypatch):
    a = testing.spd(20)
    monkeypatch.setenv("HETLAPACK_PATH", "hybrid")
    assert hetlapack.explain("cholesky", a).path == "hybrid"
    monkeypatch.setenv("HETLAPACK_PATH", "nonsense")
    with pytest.raises(ValueError, match="HETLAPACK_PATH: unknown path"):
        hetlapack.explain("cholesky", a)


def test_a_decision_is_priced_once_per_request_and_options(monkeypatch):
    """Dispatch remembers its plans, so a call on a small matrix costs a lookup instead of a pricing; other options
    (a forced path, the environment variable, other devices) are other decisions, and options naming device
    objects are priced on every call."""
    from hetlapack.devices import EmulatedDevice

    priced = []
    predict_host = model.predict_host
    monkeypatch.setattr(model, "predict_host", lambda *args: priced.append(args) or predict_host(*args))
    req = Request("potrf", (5, 5), np.dtype(np.float64))
    plan = choose(req)
    assert choose(req) is plan and len(priced) == 1
    with hetlapack.using(path="hybrid"):
        assert choose(req).forced and len(priced) == 2
    monkeypatch.setenv("HETLAPACK_PATH", "hybrid")
    assert choose(req).path == "hybrid"
    monkeypatch.delenv("HETLAPACK_PATH")
    assert choose(req) is plan
    with hetlapack.using(devices=["cpu", "emulated:0"]):
        named = choose(req)
        assert named is choose(req) is not plan and named.predicted_s != plan.predicted_s
    with hetlapack.using(devices=["cpu", EmulatedDevice(0)]):
        assert choose(req) is not choose(req)  # device objects: not remembered, never kept alive


def test_solves_follow_only_their_own_paths_and_say_so():
    for forced in ("hybrid", "gpu"):
        with hetlapack.using(path=forced):
            plan = hetlapack.explain("cho_solve", np.eye(5))
        assert plan.path == "host" and not plan.forced
        assert plan.reason.endswith(f"the forced path {forced!r} does not apply to solves (they have host and batched "
                                    "only)"), plan.reason
    assert "forced path" not in hetlapack.explain("cho_solve", np.eye(5)).reason


def test_edge_cases_stay_on_host_with_reason():
    assert "empty" in choose(Request("potrf", (0, 0), np.dtype("d"))).reason
    assert "square" in choose(Request("potrf", (3, 4), np.dtype("d"))).reason


def test_model_counts_and_interpolates():
    assert rates.flops("potrf", 300, 300) == pytest.approx(300**3 / 3)
    assert rates.flops("getrf", 300, 300, complex_=True) == pytest.approx(4 * (300**3 - 300**3 / 3))
    assert rates.tile_size("potrf", 100) <= rates.tile_size("potrf", 8000)
    host = [model.predict_host("potrf", n, n, np.dtype("d")) for n in (500, 1000, 2000)]
    assert host == sorted(host)


def test_lu_of_a_stack_takes_the_batched_path_as_lu_factor_does():
    stack = testing.general(6, batch=(100,))
    assert hetlapack.explain("lu", stack).path == hetlapack.explain("lu_factor", stack).path == "batched"
    p, lower, upper = la.lu(stack)
    np.testing.assert_allclose(p @ lower @ upper, stack, atol=1e-13)


@pytest.mark.parametrize(("two_level_s", "layout"), [(0.5, "two-level"), (0.9, "hgdd"), (2.0, "hgdd")])
def test_hybrid_takes_the_layout_the_model_prices_cheaper(monkeypatch, two_level_s, layout):
    from hetlapack.devices import EmulatedDevice

    monkeypatch.setattr(model, "predict_host", lambda *args: 100.0)
    prices = {("hybrid", "hgdd"): 1.0, ("hybrid", "two-level"): two_level_s, ("gpu", "hgdd"): 10.0}
    monkeypatch.setattr(model, "predict_tiled", lambda *args, path="hybrid", layout="hgdd": prices[path, layout])
    with hetlapack.using(devices=["cpu", EmulatedDevice(0), EmulatedDevice(1)]):
        plan = choose(Request("geqrf", (3000, 3000), np.dtype("d")))
    assert plan.path == "hybrid" and plan.layout == layout
    assert plan.layout_s == {"hgdd": 1.0, "two-level": two_level_s}
    assert plan.predicted_s["hybrid"] == plan.layout_s[layout]
    assert f"{layout} layout" in plan.reason and f"layout:  {layout}" in str(plan)
    assert ("within the model's error" in plan.reason) == (layout == "hgdd" and two_level_s < 1.0)
    assert (plan.host_cols is not None) == (layout == "two-level")


def test_the_two_level_price_is_the_simulators():
    from hetlapack.devices import EmulatedDevice
    from hetlapack.perf.simulator import simulate

    devices = ("cpu", EmulatedDevice(0))
    with hetlapack.using(devices=devices, path="hybrid"):
        plan = choose(Request("potrf", (2000, 2000), np.dtype("d")))
    simulated = simulate("potrf", 2000, model.modeled(devices), tile=plan.tile, layout="two-level")
    assert plan.layout_s["two-level"] == pytest.approx(simulated.seconds)
    assert set(plan.layout_s) == {"hgdd", "two-level"}


def test_explain_names_the_layout_and_a_user_can_force_it():
    from hetlapack.devices import EmulatedDevice

    a = testing.spd(200)
    with hetlapack.using(path="hybrid", devices=["cpu", EmulatedDevice(0)], layout="two-level", tile=64):
        plan = hetlapack.explain("cholesky", a)
        with hetlapack.using(layout="hgdd"):
            assert hetlapack.explain("cholesky", a).layout == "hgdd"
    assert plan.layout == "two-level" and set(plan.layout_s) == {"two-level"}
    assert "two-level layout, forced" in plan.reason and "host slice" in str(plan)
    with pytest.raises(ValueError, match="layout must be one of"):
        with hetlapack.using(layout="spiral"):
            pass


def test_two_level_does_not_apply_without_an_accelerator_and_says_why():
    with hetlapack.using(path="hybrid"):
        plan = choose(Request("potrf", (16000, 16000), np.dtype("d")))
    assert plan.layout == "hgdd" and set(plan.layout_s) == {"hgdd"}
    assert "at least one accelerator" in plan.unavailable["two-level"]
    assert "at least one accelerator" in plan.reason
    with hetlapack.using(layout="two-level"):
        plan = choose(Request("potrf", (16000, 16000), np.dtype("d")))
    assert plan.path == "host" and "forced layout 'two-level' cannot run" in plan.unavailable["hybrid"]
    with hetlapack.using(path="hybrid", layout="two-level"), pytest.raises(ValueError, match="cannot be honoured"):
        choose(Request("potrf", (16000, 16000), np.dtype("d")))
    assert "at least one accelerator" in choose(Request("getrf", (16000, 9000), np.dtype("d"))).unavailable["two-level"]


@pytest.mark.parametrize(("op", "shape"), [("getrf", (3000, 3000)), ("getrf", (4000, 2500)), ("getrf", (2500, 4000)),
                                           ("geqrf", (4000, 2500)), ("geqrf", (2500, 4000))])
def test_two_level_prices_lu_and_rectangular_matrices_and_can_be_forced(monkeypatch, op, shape):
    from hetlapack.devices import EmulatedDevice

    monkeypatch.setattr(model, "predict_host", lambda *args: 100.0)
    prices = {("hybrid", "hgdd"): 1.0, ("hybrid", "two-level"): 0.5, ("gpu", "hgdd"): 10.0}
    monkeypatch.setattr(model, "predict_tiled", lambda *args, path="hybrid", layout="hgdd": prices[path, layout])
    with hetlapack.using(devices=["cpu", EmulatedDevice(0), EmulatedDevice(1)]):
        plan = choose(Request(op, shape, np.dtype("d")))
        with hetlapack.using(path="hybrid", layout="two-level"):
            forced = choose(Request(op, shape, np.dtype("d")))
    assert "two-level" not in plan.unavailable and plan.layout_s == {"hgdd": 1.0, "two-level": 0.5}
    assert plan.path == "hybrid" and plan.layout == "two-level" and plan.host_cols is not None
    assert forced.layout == "two-level" and "hybrid" not in forced.unavailable


def test_the_two_level_price_of_a_rectangular_lu_is_the_simulators():
    from hetlapack.devices import EmulatedDevice
    from hetlapack.perf.simulator import simulate

    devices = ("cpu", EmulatedDevice(0))
    with hetlapack.using(devices=devices, path="hybrid"):
        plan = choose(Request("getrf", (1500, 1000), np.dtype("d")))
    simulated = simulate("getrf", 1000, model.modeled(devices), m=1500, tile=plan.tile, layout="two-level")
    assert set(plan.layout_s) == {"hgdd", "two-level"}
    assert plan.layout_s["two-level"] == pytest.approx(simulated.seconds)


def test_emulated_accelerators_share_the_hosts_cores_so_two_level_is_not_the_cheaper_layout(monkeypatch):
    """Emulated accelerators compute on the host's cores: on 2 cores, the two-level layout's CPU worker per core
    competes with them (measured: 2.9x slower than the CPU-only tile path for Cholesky n = 4000, hgdd 1.28x)."""
    from hetlapack.devices import EmulatedDevice
    from hetlapack.devices import cpu as cpu_module

    monkeypatch.setattr(cpu_module, "usable_cores", lambda: 2)
    monkeypatch.setattr(rates, "host_gemm_gflops", lambda dtype_char="d": 60.0)  # the measured rate is noisy
    with hetlapack.using(path="hybrid", devices=["cpu", EmulatedDevice(0), EmulatedDevice(1)]):
        plan = choose(Request("potrf", (4000, 4000), np.dtype("d")))
    assert plan.layout_s["two-level"] >= plan.layout_s["hgdd"] and plan.layout == "hgdd"


def test_explain_names_a_bad_operation_of_any_type():
    for op in (["cholesky"], None, "chol"):
        with pytest.raises(ValueError, match="explain: unknown operation"):
            hetlapack.explain(op, np.eye(3))


def test_an_accelerator_whose_link_was_never_measured_is_not_priced_but_can_be_forced():
    """Off the host's cores and uncalibrated, an accelerator's model is a free link and default rates: dispatch does
    not choose a path over it (on an H100 it sent QR to a hybrid path 3.5x slower than SciPy), and says so."""
    from hetlapack.devices import EmulatedDevice
    from hetlapack.devices.base import DEFAULT_CAPABILITY

    class OffHost(EmulatedDevice):
        host_compute = False  # as a GPU, which computes off the host's cores

    device = OffHost(0)
    device.capability = dict(DEFAULT_CAPABILITY)
    a = testing.spd(1500)
    with hetlapack.using(devices=["cpu", device]):
        plan = hetlapack.explain("cholesky", a)
    assert plan.path == "host" and not {"gpu", "hybrid"} & set(plan.predicted_s)
    for path in ("gpu", "hybrid"):
        assert plan.unavailable[path].startswith("emulated:0 not calibrated, so its price would be a guess")
    for path in ("gpu", "hybrid"):
        with hetlapack.using(path=path, devices=["cpu", device]):
            assert hetlapack.explain("cholesky", a).path == path
    device.capability.update(bandwidth_gbs=10.0, latency_s=1e-5)
    with hetlapack.using(devices=["cpu", device]):
        assert {"gpu", "hybrid"} <= set(hetlapack.explain("cholesky", a).predicted_s)


def test_threads_asking_at_once_share_one_measurement_of_the_host(monkeypatch):
    """Dispatch prices every request with one host GEMM rate per process: threads whose first calls came at once
    each measured it (six rates for one request in an audit)."""
    import threading

    from hetlapack import blas_threads

    measured = []
    real_all_cores = blas_threads.all_cores

    def counting_all_cores():
        measured.append(1)
        return real_all_cores()

    monkeypatch.setattr(blas_threads, "all_cores", counting_all_cores)
    rates._measured_gemm_gflops.cache_clear()
    start, seen = threading.Barrier(6), []

    def ask():
        start.wait()
        seen.append(rates.host_gemm_gflops("d"))

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(measured) == 1 and len(set(seen)) == 1


def test_pricing_leaves_no_thread_behind():
    """Pricing the hybrid path simulates it; a disabled progress bar there started tqdm's monitor thread, which
    outlived the call in every process that asked dispatch about a large matrix."""
    import subprocess
    import sys

    code = ("import threading, numpy, hetlapack; hetlapack.explain('cholesky', numpy.eye(3000)); "
            "print(sorted(t.name for t in threading.enumerate()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['MainThread']"


def test_a_stack_of_a_few_matrices_takes_the_librarys_own_call():
    """The batched path pays a fixed cost per call (its Python: dispatch, SciPy's rules, the kernels' checks and
    launch) that a stack of a few matrices does not win back from SciPy's own loop, less still from a loop SciPy runs
    in compiled code (``lu`` in every version, ``cholesky`` and ``qr`` since 1.18); a large stack wins it back."""
    f64 = np.dtype(np.float64)
    assert hetlapack.explain("cholesky", testing.spd(4, batch=(1,))).path == "host"
    assert hetlapack.explain("cholesky", testing.spd(4, batch=(4096,))).path == "batched"
    plan = hetlapack.explain("lu", testing.general(4, batch=(4,)))
    assert plan.path == "host" and ("compiled code" in plan.reason or "Cython" in plan.reason)
    python, cython, compiled = (model.predict_host_stack("potrf", 4, 4, 100, f64, loop)
                                for loop in ("python", "cython", "compiled"))
    assert compiled < cython < python
    assert model.predict_batched("potrf", 4, 4, 1, f64, "interleaved") > model.BATCHED_CALL_S
    assert host_for_certain("potrf", (8, 4, 4), f64, "compiled")  # at once: no plan, no request
    assert not host_for_certain("potrf", (4096, 4, 4), f64, "compiled")
