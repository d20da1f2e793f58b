"""``hetlapack bench``: run the pytest-benchmark suites in ``benchmarks/``, merge their JSON, print ratios, plot.

Each suite runs in its own pytest process (a progress bar counts them); the merged file keeps pytest-benchmark's
format, so ``pytest-benchmark compare`` reads it. Ratios are taken inside each benchmark group against the peers
(SciPy, NumPy, torch…) timed in the same run. Benchmarks that record ``extra_info["n"]`` and ``["gflops"]`` are
plotted as GFLOP/s against n, with the DGEMM rate of the same run as a dashed line when the dgemm suite ran; those
that record ``["ns_per_matrix"]`` and ``["bound_ns"]`` against their bound.

With ``--energy``, where energy counters are readable (:mod:`hetlapack.energy`), each suite's process loads this
module as a pytest plugin that meters every benchmark: its ``extra_info`` gets ``watts`` (mean power over the whole
case), ``energy_j`` (that power times the best time, the joules of one call), ``energy_counters`` (which were
read) and, where GFLOP/s is known, ``gflops_per_watt``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
from collections import defaultdict

from tqdm import tqdm

import hetlapack
from hetlapack.energy import EnergyMeter

PEER_PREFIXES = ("scipy", "numpy", "torch", "jax", "dask", "scalapack")


def benchmarks_dir() -> pathlib.Path:
    return pathlib.Path(hetlapack.__file__).resolve().parents[1] / "benchmarks"


def register(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="run the benchmark suites against SciPy, NumPy and other peers")
    parser.add_argument("--quick", action="store_true", help="CI-sized inputs (HETLAPACK_BENCH_QUICK=1)")
    parser.add_argument("--output", default="bench-results", help="folder for JSON and PNG files")
    parser.add_argument("--suite", action="append", default=[],
                        help="only suites whose file name contains this (repeatable), e.g. potrf, batched")
    parser.add_argument("--energy", action="store_true",
                        help="read CPU (RAPL) and GPU (NVML) energy counters around each benchmark where readable")
    parser.set_defaults(func=run)


def _label(bench: dict) -> str:
    """Who ran: the ``peer`` parameter or extra_info where a suite records it, else the test function's name."""
    peer = (bench.get("params") or {}).get("peer") or bench.get("extra_info", {}).get("peer")
    return peer or bench["name"].split("[", 1)[0].removeprefix("test_")


def _is_peer(bench: dict) -> bool:
    return _label(bench).startswith(PEER_PREFIXES)


def ratio_rows(benchmarks: list[dict]) -> list[tuple[str, str, float, str, float]]:
    """(group, hetlapack benchmark, its min seconds, peer, peer min / ours) for every pair in a group."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for bench in benchmarks:
        groups[bench.get("group") or bench["name"]].append(bench)
    rows = []
    for group, members in sorted(groups.items()):
        peers = [b for b in members if _is_peer(b)]
        for ours in (b for b in members if not _is_peer(b)):
            for peer in peers:
                rows.append((group, _label(ours), ours["stats"]["min"], _label(peer),
                             peer["stats"]["min"] / ours["stats"]["min"]))
    return rows


def add_gflops_per_watt(benchmarks: list[dict]) -> None:
    """``extra_info["gflops_per_watt"]`` for every benchmark that has both ``gflops`` and metered ``watts``."""
    for bench in benchmarks:
        info = bench.get("extra_info", {})
        if "gflops" in info and info.get("watts", 0) > 0:
            info["gflops_per_watt"] = info["gflops"] / info["watts"]


def energy_rows(benchmarks: list[dict]) -> list[tuple[str, str, float, float, float, float | None]]:
    """(group, who ran, min seconds, joules per call, watts, GFLOP/s per watt or None) for each metered benchmark."""
    return [(bench.get("group") or bench["name"], _label(bench), bench["stats"]["min"], info["energy_j"],
             info["watts"], info.get("gflops_per_watt"))
            for bench in benchmarks if "energy_j" in (info := bench.get("extra_info", {}))]


def plot_series(benchmarks: list[dict], key: str, bound_key: str) -> tuple[dict, dict]:
    """Per operation: ``{who ran: [(n, value), ...]}`` for ``extra_info[key]``, and the reference line
    ``{n: value}`` (``extra_info[bound_key]``; for GFLOP/s, the DGEMM rate of the same run)."""
    series: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    bounds: dict[str, dict[int, float]] = defaultdict(dict)
    for bench in benchmarks:
        info = bench.get("extra_info", {})
        if key not in info or "n" not in info:
            continue
        op = info.get("op", (bench.get("group") or "").split()[0])
        series[op][_label(bench)].append((info["n"], info[key]))
        if bound_key in info:
            bounds[op][info["n"]] = info[bound_key]
    if key == "gflops" and "dgemm" in series:
        dgemm = {n: rate for points in series["dgemm"].values() for n, rate in points}
        for op in series:
            if op != "dgemm" and not bounds[op]:
                bounds[op] = dgemm
    return series, bounds


def _plot(benchmarks: list[dict], output: pathlib.Path) -> list[pathlib.Path]:
    try:
        import matplotlib  # noqa: PLC0415 - optional extra

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib is not installed (pip install 'hetlapack[plot]'): no plots written")
        return []
    written = []
    for key, ylabel, bound_key in (("gflops", "GFLOP/s", "dgemm_gflops"),
                                   ("ns_per_matrix", "ns per matrix", "bound_ns")):
        series, bounds = plot_series(benchmarks, key, bound_key)
        for op, lines in series.items():
            fig, ax = plt.subplots(figsize=(6, 4))
            for label, points in sorted(lines.items()):
                xs, ys = zip(*sorted(points))
                ax.plot(xs, ys, marker="o", label=label)
            if bounds[op]:
                xs, ys = zip(*sorted(bounds[op].items()))
                ax.plot(xs, ys, "k--", label=bound_key.replace("_", " ") + " (same run)")
            ax.set_xlabel("n")
            ax.set_ylabel(ylabel)
            ax.set_xscale("log", base=2)
            if key == "ns_per_matrix":
                ax.set_yscale("log")
            ax.set_title(f"{op}: {ylabel}")
            ax.legend(fontsize=7)
            path = output / f"{op}_{key}.png"
            fig.tight_layout()
            fig.savefig(path, dpi=120)
            plt.close(fig)
            written.append(path)
    return written


def _skip_reason(pytest_output: str) -> str:
    """The first reason pytest's summary gives for a skip (a suite whose machine lacks what it measures writes no
    JSON, or an empty one: some pytest-benchmark versions open the file before they know that nothing will run)."""
    for line in pytest_output.splitlines():
        if line.startswith("SKIPPED"):
            return line.split(": ", 1)[-1]
    return "every case was skipped or deselected"


def run(args: argparse.Namespace) -> int:
    suites_dir = benchmarks_dir()
    if not suites_dir.is_dir():
        print(f"no benchmarks/ folder beside the package ({suites_dir}): run from a source checkout "
              "installed with `pip install -e .`", file=sys.stderr)
        return 2
    suites = sorted(p for p in suites_dir.glob("test_*.py") if not args.suite or any(s in p.name for s in args.suite))
    if not suites:
        names = ", ".join(p.stem.removeprefix("test_") for p in sorted(suites_dir.glob("test_*.py")))
        raise ValueError(f"no suite matches --suite {' '.join(args.suite)}; the suites are {names}")
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HETLAPACK_BENCH_QUICK="1" if args.quick else os.environ.get("HETLAPACK_BENCH_QUICK", "0"))
    energy_plugin = []
    if args.energy:
        with EnergyMeter() as probe:
            pass
        if probe.readable:
            print(f"energy: reading {', '.join(probe.counter_names)} around each benchmark")
            energy_plugin = ["-p", __name__]
        else:
            print(f"energy: {probe.reason}; benchmarks run without energy figures")
    merged: dict | None = None
    failed = []
    for suite in tqdm(suites, desc="bench", unit="suite"):
        json_path = output / f"{suite.stem}.json"
        proc = subprocess.run([sys.executable, "-m", "pytest", str(suite), "--benchmark-only", "-q", "-rs",
                               "-p", "no:cacheprovider", *energy_plugin, f"--benchmark-json={json_path}"],
                              env=env, capture_output=True, text=True)
        if proc.returncode not in (0, 5):
            failed.append(suite.name)
            tqdm.write(f"{suite.name} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
            continue
        if not json_path.exists() or not json_path.read_text().strip():
            json_path.unlink(missing_ok=True)
            tqdm.write(f"{suite.name}: no benchmark ran ({_skip_reason(proc.stdout)})")
            continue
        data = json.loads(json_path.read_text())
        if merged is None:
            merged = data
        else:
            merged["benchmarks"].extend(data["benchmarks"])
    if merged is None:
        print("no benchmark ran", file=sys.stderr)
        return 1
    add_gflops_per_watt(merged["benchmarks"])
    (output / "benchmarks.json").write_text(json.dumps(merged, indent=2))
    print(f"\n{'group':<34} {'hetlapack':<28} {'seconds':>10}  {'peer':<24} {'speedup':>8}")
    for group, ours, seconds, peer, speedup in ratio_rows(merged["benchmarks"]):
        print(f"{group:<34} {ours:<28} {seconds:>10.4g}  {peer:<24} {speedup:>7.2f}x")
    if rows := energy_rows(merged["benchmarks"]):
        print(f"\n{'group':<34} {'who':<28} {'seconds':>10} {'joules':>10} {'watts':>8} {'GFLOP/s/W':>10}")
        for group, who, seconds, joules, watts, gflops_per_watt in rows:
            efficiency = "-" if gflops_per_watt is None else f"{gflops_per_watt:.3g}"
            print(f"{group:<34} {who:<28} {seconds:>10.4g} {joules:>10.4g} {watts:>8.1f} {efficiency:>10}")
    for path in _plot(merged["benchmarks"], output):
        print(f"wrote {path}")
    print(f"wrote {output / 'benchmarks.json'} (pytest-benchmark format)")
    return 1 if failed else 0


# pytest plugin side, loaded with ``-p`` in each suite's process by ``--energy``: every benchmark is metered in the
# process that runs it, and its figures go into the fixture's extra_info, which pytest-benchmark writes to the JSON.
_meters: dict[str, EnergyMeter] = {}


def pytest_runtest_setup(item) -> None:
    if "benchmark" in getattr(item, "fixturenames", ()):
        _meters[item.nodeid] = EnergyMeter().__enter__()


def pytest_runtest_teardown(item, nextitem) -> None:
    meter = _meters.pop(item.nodeid, None)
    if meter is None:
        return
    meter.__exit__(None, None, None)
    fixture = item.funcargs.get("benchmark")
    if fixture is None or fixture.stats is None or not meter.joules:
        return
    fixture.extra_info.update(watts=meter.watts, energy_j=meter.watts * fixture.stats.stats.min,
                              energy_counters=sorted(meter.joules))
