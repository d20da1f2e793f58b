"""Energy counters on fake powercap trees and a fake NVML, and ``hetlapack bench --energy`` on this machine."""

import functools
import json
import os
import sys
import time
import types
from pathlib import Path

import pytest

from hetlapack import energy
from hetlapack.cli import main
from hetlapack.commands import bench
from hetlapack.energy import EnergyMeter

pytestmark = pytest.mark.own_machinery


def make_zone(root: Path, zone: str, name: str, energy_uj: int, max_range_uj: int = 262_143_328_850) -> Path:
    path = root / zone
    path.mkdir(parents=True)
    (path / "name").write_text(f"{name}\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{max_range_uj}\n")
    return path


def set_energy(zone: Path, energy_uj: int) -> None:
    (zone / "energy_uj").write_text(f"{energy_uj}\n")


def ticking_mj(watts: float, every_s: float, start_mj: int = 10_000):
    """An NVML-like counter in millijoules: it changes only every ``every_s`` seconds, by ``watts`` times that."""
    return lambda: start_mj + round(watts * every_s * 1e3) * int(time.perf_counter() / every_s)


def fake_nvml(energies_mj: list, init_error: Exception | None = None) -> types.ModuleType:
    """A stand-in for ``pynvml``: GPU i reads ``energies_mj[i]()``; ``None``: it has no energy counter."""
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    module.NVMLError = NVMLError
    module.shutdowns = 0
    def init():
        if init_error is not None:
            raise init_error

    def energy(handle):
        if energies_mj[handle] is None:
            raise NVMLError("Not Supported")
        return energies_mj[handle]()

    def shutdown():
        module.shutdowns += 1

    module.nvmlInit = init
    module.nvmlShutdown = shutdown
    module.nvmlDeviceGetCount = lambda: len(energies_mj)
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetTotalEnergyConsumption = energy
    return module


def test_package_zones_are_read_and_sub_zones_are_not_counted(tmp_path):
    package0 = make_zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    core0 = make_zone(tmp_path, "intel-rapl:0:0", "core", 500_000)
    package1 = make_zone(tmp_path, "intel-rapl:1", "package-1", 7_000_000)
    make_zone(tmp_path, "intel-rapl:2", "psys", 0)
    with EnergyMeter(powercap_root=tmp_path, gpus=False) as meter:
        set_energy(package0, 3_500_000)
        set_energy(core0, 2_000_000)
        set_energy(package1, 7_250_000)
    assert meter.readable and meter.reason == ""
    assert meter.joules == pytest.approx({"package-0": 2.5, "package-1": 0.25})
    assert meter.seconds > 0
    assert meter.watts == pytest.approx(2.75 / meter.seconds)


def test_wrap_around_adds_the_counter_range(tmp_path):
    zone = make_zone(tmp_path, "intel-rapl:0", "package-0", 9_000_000, max_range_uj=10_000_000)
    with EnergyMeter(powercap_root=tmp_path, gpus=False) as meter:
        set_energy(zone, 500_000)  # 9.0 J -> wrapped at 10.0 J -> 0.5 J
    assert meter.joules == pytest.approx({"package-0": 1.5})


def test_counter_that_vanishes_mid_run_is_left_out_without_raising(tmp_path):
    make_zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    vanishing = make_zone(tmp_path, "intel-rapl:1", "package-1", 1_000_000)
    with EnergyMeter(powercap_root=tmp_path, gpus=False) as meter:
        (vanishing / "energy_uj").unlink()
    assert meter.joules == pytest.approx({"package-0": 0.0})


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_energy_file_is_reported_as_permission_denied(tmp_path):
    zone = make_zone(tmp_path, "intel-rapl:0", "package-0", 1_000_000)
    (zone / "energy_uj").chmod(0)
    try:
        with EnergyMeter(powercap_root=tmp_path, gpus=False) as meter:
            pass
    finally:
        (zone / "energy_uj").chmod(0o644)
    assert not meter.readable and meter.joules == {}
    assert "intel-rapl:0/energy_uj is not readable (permission denied" in meter.reason


def test_missing_powercap_and_no_gpus_asked_says_both(tmp_path):
    with EnergyMeter(powercap_root=tmp_path / "absent", gpus=False) as meter:
        pass
    assert not meter.readable and meter.joules == {} and meter.watts == 0.0
    assert meter.reason == (f"no readable energy counter: {tmp_path / 'absent'} does not exist (virtual machine or "
                            "not Linux?) and GPU counters were not asked for")


def test_no_zones_and_nvml_absent_names_both_reasons(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with EnergyMeter(powercap_root=tmp_path) as meter:
        pass
    assert not meter.readable
    assert meter.reason == (f"no readable energy counter: {tmp_path} has no intel-rapl zones (virtual machine?) "
                            "and nvidia-ml-py is not installed")


def test_gpu_counters_in_millijoules_and_unsupported_gpu_skipped(tmp_path, monkeypatch):
    """NVML's counter changes only now and then: read as it changes, a 1 ms piece of work gets the counter's power
    (read plainly, 0 W, or one step's joules over 1 ms)."""
    nvml = fake_nvml([ticking_mj(watts=125.0, every_s=0.02), None])  # GPU 1: no energy counter
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with EnergyMeter(powercap_root=tmp_path) as meter:
        time.sleep(1e-3)
    assert meter.readable and meter.counter_names == ["gpu:0"]
    assert meter.joules["gpu:0"] in (pytest.approx(2.5), pytest.approx(5.0))
    assert meter.watts == pytest.approx(125.0, rel=0.2)
    assert nvml.shutdowns == 1


def test_a_gpu_counter_that_never_changes_is_left_out_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([lambda: 10_000]))
    monkeypatch.setattr(energy, "TICK_WAIT_S", 0.05)
    with EnergyMeter(powercap_root=tmp_path / "absent") as meter:
        pass
    assert not meter.readable
    assert meter.reason.endswith("and gpu:0 could not be read or did not change within 0.05 s")


def test_nvml_that_does_not_start_is_reported(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_error=OSError("libnvidia-ml.so.1 not found")))
    with EnergyMeter(powercap_root=tmp_path / "absent") as meter:
        pass
    assert not meter.readable
    assert meter.reason.endswith("and NVML did not start (libnvidia-ml.so.1 not found)")


def test_bench_plugin_puts_power_and_joules_per_call_in_extra_info(tmp_path, monkeypatch):
    zone = make_zone(tmp_path, "intel-rapl:0", "package-0", 0)
    monkeypatch.setattr(bench, "EnergyMeter", functools.partial(EnergyMeter, powercap_root=tmp_path, gpus=False))
    fixture = types.SimpleNamespace(extra_info={"n": 100},
                                    stats=types.SimpleNamespace(stats=types.SimpleNamespace(min=0.01)))
    item = types.SimpleNamespace(nodeid="test_x", fixturenames=["benchmark"], funcargs={"benchmark": fixture})
    bench.pytest_runtest_setup(item)
    set_energy(zone, 4_000_000)
    bench.pytest_runtest_teardown(item, None)
    info = fixture.extra_info
    assert info["energy_counters"] == ["package-0"] and info["n"] == 100
    assert info["watts"] > 0
    assert info["energy_j"] == pytest.approx(info["watts"] * 0.01)


def test_bench_plugin_leaves_tests_without_benchmark_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "EnergyMeter", functools.partial(EnergyMeter, powercap_root=tmp_path, gpus=False))
    item = types.SimpleNamespace(nodeid="test_plain", fixturenames=["tmp_path"], funcargs={})
    bench.pytest_runtest_setup(item)
    bench.pytest_runtest_teardown(item, None)
    assert item.funcargs == {}


def test_gflops_per_watt_and_energy_rows():
    benchmarks = [
        {"name": "test_hetlapack_tile_potrf[n=1000]", "group": "potrf n=1000", "stats": {"min": 0.02},
         "extra_info": {"gflops": 16.0, "watts": 40.0, "energy_j": 0.8}},
        {"name": "test_runtime_overhead_one_worker", "group": "runtime overhead", "stats": {"min": 0.1},
         "extra_info": {"watts": 20.0, "energy_j": 2.0}},
        {"name": "test_scipy_cholesky[n=1000]", "group": "potrf n=1000", "stats": {"min": 0.03},
         "extra_info": {"gflops": 11.0}},
    ]
    bench.add_gflops_per_watt(benchmarks)
    assert benchmarks[0]["extra_info"]["gflops_per_watt"] == pytest.approx(0.4)
    assert "gflops_per_watt" not in benchmarks[1]["extra_info"] | benchmarks[2]["extra_info"]
    assert bench.energy_rows(benchmarks) == [
        ("potrf n=1000", "hetlapack_tile_potrf", 0.02, 0.8, 40.0, pytest.approx(0.4)),
        ("runtime overhead", "runtime_overhead_one_worker", 0.1, 2.0, 20.0, None)]


def test_bench_energy_says_why_nothing_is_readable_and_runs_on(tmp_path, capsys):
    with EnergyMeter() as probe:
        pass
    if probe.readable:
        pytest.skip(f"this machine has readable energy counters: {probe.counter_names}")
    assert main(["bench", "--energy", "--quick", "--suite", "runtime_overhead", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    energy_lines = [line for line in out.splitlines() if line.startswith("energy:")]
    assert energy_lines == [f"energy: {probe.reason}; benchmarks run without energy figures"]
    data = json.loads((tmp_path / "benchmarks.json").read_text())
    assert data["benchmarks"]
    assert not any("energy_j" in b.get("extra_info", {}) for b in data["benchmarks"])


def test_a_cpu_counter_read_beside_a_gpu_counter_keeps_its_own_power(tmp_path, monkeypatch):
    """The CPU's counter was read before the meter waited for the GPU's to change, and its joules divided by the
    time after that wait: a 50 W package read as 150-540 W over 10 ms of work."""
    make_zone(tmp_path, "intel-rapl:0", "package-0", 0)
    real_read = energy._read_microjoules
    monkeypatch.setattr(energy, "_read_microjoules",
                        lambda path: 50.0 * time.perf_counter() if path.name == "energy_uj" else real_read(path))
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([ticking_mj(watts=125.0, every_s=0.05)]))
    with EnergyMeter(powercap_root=tmp_path) as meter:
        time.sleep(0.01)
    assert sorted(meter.counter_names) == ["gpu:0", "package-0"]
    assert meter.joules["package-0"] == pytest.approx(50.0 * meter.seconds, rel=0.2)
    assert meter.watts == pytest.approx(175.0, rel=0.2)
