"""The host path's call on one BLAS thread where ``hetlapack calibrate`` timed SciPy's call faster so."""

import json
import re

import numpy as np
import pytest
import scipy.linalg as sla
from threadpoolctl import threadpool_limits

import hetlapack
import hetlapack.linalg as hla
from hetlapack import blas_threads
from hetlapack.compat import _host, _numpy_host, numpy_linalg
from hetlapack.devices.capability import ENV_CACHE_DIR, load
from hetlapack.dispatch.choose import forget_decisions
from hetlapack.perf import calibration, model, rates

pytestmark = pytest.mark.own_machinery

#: every core's time over one thread's, per order: one thread won at 96 and 128 (and again at 256, after a loss)
TIMED = [[64, 0.6], [96, 1.2], [128, 1.3], [192, 0.9], [256, 1.5]]


@pytest.fixture
def calibrated(tmp_path, monkeypatch):
    """A cache whose host-thread table for each call of SciPy's and NumPy's in float64 is :data:`TIMED`, read
    afresh."""
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    tables = {rates.host_threads_table(call, np.float64, library): TIMED
              for call in ("potrf", "getrf", "geqrf", "geqrf+Q") for library in ("scipy", "numpy")}
    (tmp_path / "calibration.json").write_text(json.dumps({"tile": 256, "devices": {"cpu": {"host_threads": tables}}}))
    forget_decisions()
    yield
    forget_decisions()


def test_one_thread_runs_from_the_first_order_it_won_at_to_the_last_of_that_run():
    margin = model.HOST_ONE_THREAD_MARGIN
    assert model.one_thread_orders(TIMED) == (96, 128)
    assert model.one_thread_orders([[64, margin], [96, margin]]) == (64, 96)
    assert model.one_thread_orders([[64, 0.99 * margin], [96, 0.5]]) is None
    assert model.one_thread_orders([]) is None


def test_without_a_calibration_every_call_runs_on_every_core(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    forget_decisions()
    assert model.host_blas_threads("geqrf", np.dtype(np.float64), 128) is None
    assert hetlapack.explain("qr", np.ones((128, 128)), mode="r").host_threads is None


def test_the_orders_and_calls_timed_are_the_ones_capped(calibrated):
    f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
    assert [model.host_blas_threads("geqrf", f64, n) for n in (64, 95, 96, 128, 129, 256)] == [
        None, None, 1, 1, None, None]
    assert model.host_blas_threads("geqrf", f64, 100, forms_q=True) == 1
    assert model.host_blas_threads("geqrf", f32, 100) is None  # not timed in float32
    assert model.host_blas_threads("geqp3", f64, 100) is None
    plan = hetlapack.explain("qr", np.ones((100, 100)), mode="r")
    assert plan.path == "host" and "1 BLAS thread" in plan.host_threads and "orders 96-128" in plan.host_threads
    assert "threads: SciPy's call on 1 BLAS thread" in str(plan)
    assert hetlapack.explain("qr", np.ones((64, 64)), mode="r").host_threads is None
    assert hetlapack.explain("lu_factor", np.ones((3, 100, 100))).host_threads is None  # a stack


CALLS = {  # the shim's call, the host module and function that make the library's call, and the library's own
    "cholesky": (lambda a: hla.cholesky(a), _host, "_cholesky_on_host", lambda a: sla.cholesky(a)),
    "cho_factor": (lambda a: hla.cho_factor(a), _host, "_cholesky_on_host", lambda a: sla.cho_factor(a)),
    "lu_factor": (lambda a: hla.lu_factor(a), _host, "scipy_call", lambda a: sla.lu_factor(a)),
    "lu": (lambda a: hla.lu(a), _host, "_lu_on_host", lambda a: sla.lu(a)),
    "qr r": (lambda a: hla.qr(a, mode="r"), _host, "_qr_on_host", lambda a: sla.qr(a, mode="r")),
    "qr economic": (lambda a: hla.qr(a, mode="economic"), _host, "_qr_on_host", lambda a: sla.qr(a, mode="economic")),
    "numpy cholesky": (lambda a: numpy_linalg.cholesky(a), _numpy_host, "_cholesky_on_host", np.linalg.cholesky),
    "numpy qr": (lambda a: numpy_linalg.qr(a), _numpy_host, "_qr_on_host", np.linalg.qr),
    "numpy qr r": (lambda a: numpy_linalg.qr(a, mode="r"), _numpy_host, "_qr_on_host",
                   lambda a: np.linalg.qr(a, mode="r")),
}


@pytest.mark.parametrize("name", CALLS)
def test_scipys_call_runs_on_one_blas_thread_where_timed_faster_and_gives_scipys_one_thread_results(
        name, calibrated, monkeypatch):
    """Within the orders timed, SciPy's call runs with every BLAS capped at one thread, and its results are SciPy's
    on one thread, bit for bit; outside them, and for column pivoting, BLAS keeps its threads. The limits come back
    after the call."""
    call, module, host_function, scipy_call = CALLS[name]
    limits = []
    inner = getattr(module, host_function)
    monkeypatch.setattr(module, host_function,
                        lambda *args, **kwargs: limits.append(blas_threads._limits_now()) or inner(*args, **kwargs))
    before = blas_threads._limits_now()
    rng = np.random.default_rng(3)
    for n in (100, 64, 150):
        general = rng.standard_normal((n, n))
        a = general @ general.T + n * np.eye(n) if "cho" in name else general
        got = call(a)
        with threadpool_limits(1 if n == 100 else None):
            want = scipy_call(a)
        for mine, scipys in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                                strict=True):
            assert mine is scipys or np.array_equal(mine, scipys)
    assert limits == [[1] * len(before), before, before]
    assert blas_threads._limits_now() == before
    if name.startswith("qr"):
        limits.clear()
        hla.qr(np.ones((100, 100)), pivoting=True)
        assert limits == [before]


def test_calibration_times_each_call_and_dtype_on_one_thread_and_every_core():
    done = []
    ratios = calibration.host_threads(rounds=1, orders=(3, 5), progress=done.append)
    scipys, numpys = ["potrf", "getrf", "geqrf", "geqrf+Q"], ["potrf", "geqrf", "geqrf+Q"]
    assert done == [f"scipy {call}" for call in scipys] + [f"numpy {call}" for call in numpys]
    assert list(ratios) == [rates.host_threads_table(call, np.dtype(char)) for call in scipys for char in "fdFD"] + [
        rates.host_threads_table(call, np.dtype(char), "numpy") for call in numpys for char in "dD"]
    assert all([row[0] for row in rows] == [3, 5] and all(row[1] > 0 for row in rows) for rows in ratios.values())


def test_the_command_caches_and_prints_the_orders_each_call_runs_on_one_thread(tmp_path, monkeypatch, capsys):
    from hetlapack.cli import main
    from hetlapack.commands import calibrate as command

    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path))
    table = rates.host_threads_table("geqrf", np.float64)
    rounds = []
    later = [[64, 0.6], [96, 1.3], [128, 1.05], [192, 1.5], [256, 1.5]]  # minutes later: 128 no longer won
    timings = iter([{table: TIMED}, {table: later}])
    monkeypatch.setattr(command, "host_threads", lambda rounds_, progress: rounds.append(rounds_) or next(timings))
    monkeypatch.setattr(calibration, "kernel_tables", lambda device, repeats: {"gemm": [[128, 30.0]]})
    assert main(["calibrate", "--devices", "cpu", "--tile", "16", "--repeats", "1", "--orders", "16",
                 "--no-batched"]) == 0
    assert rounds == [calibration.PASSES] * 2  # before and after the other measurements
    least = [[64, 0.6], [96, 1.2], [128, 1.05], [192, 0.9], [256, 1.5]]
    assert load()["cpu"]["host_threads"] == {table: tuple(map(tuple, least))}
    assert re.search(r"geqrf float64 scipy .* 1\.20x .* 96-96", capsys.readouterr().out)
    forget_decisions()
    assert [model.host_blas_threads("geqrf", np.dtype(np.float64), n) for n in (96, 128)] == [1, None]
