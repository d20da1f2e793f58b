"""The ``hetlapack`` command line."""

import json

import pytest

from hetlapack.batched.compiling import KERNELS, kernel_dtypes
from hetlapack.cli import main

pytestmark = pytest.mark.own_machinery


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CPU:" in out and "BLAS:" in out and "GPUs:" in out and "MPI:" in out


def test_info_counts_the_batched_kernels_in_the_cache(monkeypatch, capsys):
    from hetlapack.batched import precompile

    total = sum(len(kernel_dtypes(kernel)) for kernel in KERNELS)
    monkeypatch.setattr(precompile, "missing", lambda only=None: {"getrf": ["d", "D"], "plu": ["f"]})
    assert main(["info"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith(f"Batched kernels: {total - 3} of {total} compiled in numba's cache (the others compile")
    monkeypatch.setattr(precompile, "missing", lambda only=None: {})
    assert main(["info"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"Batched kernels: {total} of {total} compiled in numba's cache"


def test_info_says_an_uncalibrated_gpu_is_not_chosen(monkeypatch, capsys):
    from hetlapack.commands import info
    from hetlapack.devices import CpuDevice, EmulatedDevice
    from hetlapack.devices.base import DEFAULT_CAPABILITY

    class OffHost(EmulatedDevice):
        host_compute = False  # as a GPU

    gpu = OffHost(0)
    gpu.capability = dict(DEFAULT_CAPABILITY)
    monkeypatch.setattr(info, "available", lambda: [CpuDevice(), gpu])
    monkeypatch.setattr(info.capability, "load", dict)
    assert main(["info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if line.startswith("Device emulated:0")).endswith(
        "(defaults; run `hetlapack calibrate`: until its link is measured, dispatch does not choose it)")
    cpu_line = next(line for line in lines if line.startswith("Device cpu"))
    assert cpu_line.endswith("(defaults; run `hetlapack calibrate`)")


def test_demo_small(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes its trace's picture where it runs
    assert main(["demo", "--n", "200", "--batch", "50", "--small", "4", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "wrote demo-trace-cholesky-200.png" in out and (tmp_path / "demo-trace-cholesky-200.png").is_file()
    assert "cholesky" in out and "lu_factor" in out and "qr" in out and "qr+piv" in out and "vs SciPy" in out
    rows = [line.split() for line in out.splitlines()]
    names = (["cholesky"], ["lu_factor"], ["qr"], ["qr+piv"], ["lu_factor/f32"])
    residuals = [float(row[3]) for row in rows if row[:1] in names and len(row) == 6]
    assert residuals and max(residuals) < 50
    assert any(row[:3] == ["qr+piv", "50x4x4", "*batched"] for row in rows)
    assert any(row[:3] == ["lu_factor/f32", "50x4x4", "*batched"] for row in rows)  # the LAPACK loop


def test_bench_quick_writes_pytest_benchmark_json(tmp_path, capsys):
    import json

    assert main(["bench", "--quick", "--suite", "runtime_overhead", "--output", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "benchmarks.json").read_text())
    assert data["benchmarks"] and {"machine_info", "commit_info", "datetime"} <= set(data)


def test_bench_goes_on_past_a_suite_this_machine_skips(tmp_path, monkeypatch, capsys):
    """A suite that skips whole (the GPU suite without a GPU) leaves pytest-benchmark's JSON empty: bench says why
    and merges the other suites instead of failing on the empty file."""
    from hetlapack.commands import bench

    suites = tmp_path / "benchmarks"
    suites.mkdir()
    (suites / "test_needs_gear.py").write_text('import pytest\npytest.skip("no gear here", allow_module_level=True)\n')
    (suites / "test_runs.py").write_text("def test_sum(benchmark):\n    benchmark(sum, range(10))\n")
    monkeypatch.setattr(bench, "benchmarks_dir", lambda: suites)
    assert main(["bench", "--output", str(tmp_path / "out")]) == 0
    assert "test_needs_gear.py: no benchmark ran (no gear here)" in capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "benchmarks.json").read_text())
    assert [b["name"] for b in data["benchmarks"]] == ["test_sum"]
    assert not (tmp_path / "out" / "test_needs_gear.json").exists()


def test_bench_ratios_pair_hetlapack_with_each_peer():
    from hetlapack.commands.bench import ratio_rows

    rows = ratio_rows([
        {"name": "test_scipy_cholesky[n=4000]", "group": "potrf n=4000", "stats": {"min": 0.3}},
        {"name": "test_hetlapack_tile_potrf[n=4000]", "group": "potrf n=4000", "stats": {"min": 0.2}},
        {"name": "test_batched[x]", "group": "lu n=8", "params": {"peer": "torch"}, "stats": {"min": 2.0}},
        {"name": "test_batched[y]", "group": "lu n=8", "params": {"peer": "hetlapack"}, "stats": {"min": 1.0}},
    ])
    assert [(g, ours, peer, round(s, 2)) for g, ours, _, peer, s in rows] == [
        ("lu n=8", "hetlapack", "torch", 2.0), ("potrf n=4000", "hetlapack_tile_potrf", "scipy_cholesky", 1.5)]


def test_bench_gflops_plots_carry_the_same_runs_dgemm_line():
    from hetlapack.commands.bench import plot_series

    def bench(name, op, n, gflops):
        return {"name": f"test_{name}[n={n}]", "group": f"{op} n={n}", "stats": {"min": 1.0},
                "extra_info": {"n": n, "op": op, "gflops": gflops}}

    series, bounds = plot_series([bench("numpy_dgemm", "dgemm", 1000, 80.0), bench("numpy_dgemm", "dgemm", 2000, 82.0),
                                  bench("scipy_cholesky", "potrf", 1000, 40.0)], "gflops", "dgemm_gflops")
    assert series["potrf"] == {"scipy_cholesky": [(1000, 40.0)]}
    assert bounds["potrf"] == {1000: 80.0, 2000: 82.0}
    assert not bounds["dgemm"]


@pytest.mark.parametrize("argv", [
    ["calibrate", "--repeats", "0"], ["calibrate", "--tile", "-1"], ["calibrate", "--orders", "64,0"],
    ["demo", "--n", "0"], ["demo", "--batch", "x"],
    ["trace", "cholesky", "--tile", "0"], ["simulate", "--tile", "-3"], ["simulate", "--nodes", "0"],
])
def test_non_positive_sizes_are_usage_errors(argv, capsys):
    """A bad size is refused by the parser (exit status 2, one line naming the value), before anything runs."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["demo", "--n", "0"], ["demo", "--grid", "2by2"], ["demo", "--routines", "foo"],
                                  ["demo", "--block", "0"]])
def test_mpi_demo_refuses_bad_arguments(argv, capsys):
    from hetlapack.mpi.__main__ import main as mpi_main

    with pytest.raises(SystemExit) as exit_:
        mpi_main(argv)
    assert exit_.value.code == 2 and "error: argument" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "status", "text"), [
    (["calibrate", "--devices", "gpu:7", "--no-save"], 2, "unknown device 'gpu:7'"),
    (["simulate", "--devices", "nosuch:3", "--n", "1000"], 2, "unknown device profile 'nosuch'"),
    (["trace", "cholesky", "--n", "64", "--tile", "32", "--output", "/proc/hetlapack-cannot-write"], 1, "error:"),
    (["simulate", "--devices", "sandybridge:2/4", "--n", "1000"], 2, "4 workers on 2 cores"),
    (["trace", "cholesky", "--n", "64", "--devices", ","], 2, "no device named"),
    (["bench", "--quick", "--suite", "nosuchsuite"], 2, "no suite matches --suite nosuchsuite; the suites are"),
    (["simulate", "qr", "--nodes", "4", "--n", "1000"], 2, "distributed Cholesky only, not qr"),
    (["simulate", "--nodes", "4", "--dtype", "complex64", "--devices", "k20c"], 2, "--devices, --dtype: --nodes"),
    (["simulate", "--n", "1000", "--node", "bogus"], 2, "--node: these describe --nodes's cluster"),
    (["simulate", "--n", "1000", "--placement", "capability", "--layout", "cyclic"], 2,
     "--layout: --placement capability places each task greedily, by no layout"),
    (["calibrate", "--devices", ",", "--no-save"], 2, "no device named"),
])
def test_bad_values_end_in_one_line_not_a_traceback(argv, status, text, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == status and text in err and "Traceback" not in err


def accelerator(**entries) -> str:
    """A JSON profile file holding accelerator ``x`` with ``entries`` besides its kind and rates."""
    return json.dumps({"profiles": {"x": {"kind": "accelerator", "rates": {"blas3": 1.0}, **entries}}})


@pytest.mark.parametrize(("name", "content", "argv", "text"), [
    ("p.json", "[]", [], "a profile file must be a table"),
    ("p.json", '{"profiles": []}', [], "profiles must be a table"),
    ("p.json", '{"profiles": {"x": ["a"]}}', ["--devices", "x"], "profiles.x must be a table"),
    ("p.json", '{"profiles": {"x": {"kind": "cpu", "rates": {"blas3": "fast"}}}}', ["--devices", "x"],
     "profiles.x.rates.blas3 must be a positive number, got 'fast'"),
    ("p.json", '{"profiles": {"x": {"kind": "cpu", "rates": {"blas3": true}}}}', ["--devices", "x"],
     "profiles.x.rates.blas3 must be a positive number"),
    ("p.json", accelerator(single_rates=3), ["--devices", "x"], "profiles.x.single_rates must be a table"),
    ("p.json", accelerator(power={"idle": "a"}), ["--devices", "x"],
     "profiles.x.power.idle must be a non-negative number"),
    ("p.json", accelerator(memory_gb="a"), ["--devices", "x"], "profiles.x.memory_gb must be a positive number"),
    ("p.json", accelerator(half_tile=-5), ["--devices", "x"], "profiles.x.half_tile must be a non-negative number"),
    ("p.json", accelerator(bandwith_gbs=1), ["--devices", "x"], "profiles.x: unknown keys ['bandwith_gbs']"),
    ("p.json", accelerator(kernels={"gemm": [[128, 1.0], [64, 2.0]]}), ["--devices", "x"],
     "profiles.x.kernels.gemm must be a positive GFLOP/s or [[tile, GFLOP/s], ...]"),
    ("p.json", accelerator(kernels={"gemm": [[64]]}), ["--devices", "x"], "profiles.x.kernels.gemm must be"),
    ("p.toml", '[profiles.x]\nkind = "accelerator"\nrates = { blas3 = 1.0 }\nbandwidth_gbs = 0\n',
     ["--devices", "x"], "profiles.x.bandwidth_gbs must be a positive number, got 0"),
    ("p.json", '{"interconnects": {"x": 5}}', ["--nodes", "2", "--interconnect", "x"],
     "interconnects.x must be a table"),
    ("p.json", '{"interconnects": {"x": {"bandwidth_gbs": 1.0}}}', ["--nodes", "2", "--interconnect", "x"],
     "interconnects.x needs latency_s"),
    ("p.json", '{"interconnects": {"x": {"bandwidth_gbs": -1.0, "latency_s": 0}}}',
     ["--nodes", "2", "--interconnect", "x"], "interconnects.x.bandwidth_gbs must be a positive number"),
    ("p.json", '{"nodes": {"x": 5}}', ["--nodes", "2", "--node", "x"], "nodes.x must be a table"),
    ("p.json", '{"nodes": {"x": {"devices": 5}}}', ["--nodes", "2", "--node", "x"], "nodes.x.devices must be a string"),
])
def test_bad_profile_files_end_in_one_line_naming_the_entry(name, content, argv, text, tmp_path, capsys):
    """A damaged profile file is refused as it is read (exit 2, one line naming the file and the entry), neither
    a traceback where the simulator first uses the entry nor a prediction from values it could not mean."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--n", "100", "--output", str(tmp_path), "--profiles", str(path), *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"{path}: {text}" in err and "Traceback" not in err


def test_a_profile_file_that_is_not_utf8_is_named(tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_bytes(b"\xff\xfe[profiles]\n")
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--n", "100", "--output", str(tmp_path), "--profiles", str(path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and f"{path}: 'utf-8' codec can't decode" in err and "Traceback" not in err


@pytest.mark.parametrize(("error", "reason"), [
    (MemoryError("Unable to allocate 29.1 TiB for an array with shape (2000000, 2000000)"),
     "Unable to allocate 29.1 TiB for an array with shape (2000000, 2000000)"),
    (MemoryError(), "an allocation failed"),
])
def test_running_out_of_memory_ends_in_one_line(error, reason, monkeypatch, capsys):
    from hetlapack.commands import info

    def exhausted(args):
        raise error

    monkeypatch.setattr(info, "run", exhausted)
    with pytest.raises(SystemExit) as exit_:
        main(["info"])
    assert exit_.value.code == 1 and capsys.readouterr().err == f"hetlapack info: error: not enough memory: {reason}\n"


def test_info_shows_link_figures_apart_from_kernel_rates(monkeypatch, capsys):
    from hetlapack.commands import info
    from hetlapack.devices import EmulatedDevice

    device = EmulatedDevice(0)
    device.capability = {"blas3": 40.0, "panel": 8.0, "memory": 4.0, "bandwidth_gbs": 12.5, "latency_s": 1e-5,
                         "unknown": 3.0}
    monkeypatch.setattr(info, "available", lambda: [device])
    main(["info"])
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("Device emulated:0"))
    assert "blas3 40.0, panel 8.0, memory 4.0; link 12.5 GB/s, latency 10.0 us" in line
    assert "bandwidth_gbs" not in line and "unknown" not in line


def test_a_malformed_launcher_rank_count_is_named(monkeypatch, capsys):
    monkeypatch.setenv("PMI_SIZE", "abc")
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--n", "64"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "PMI_SIZE='abc': the MPI launcher's number of ranks must be an integer" in err
