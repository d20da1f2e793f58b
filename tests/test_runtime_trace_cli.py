"""``hetlapack trace``: the subcommand writes a chrome JSON trace and a Gantt PNG."""

import argparse
import json

import pytest

from hetlapack.commands import trace

pytestmark = pytest.mark.own_machinery


def parse(argv):
    parser = argparse.ArgumentParser()
    trace.register(parser.add_subparsers())
    return parser.parse_args(argv)


def test_trace_cholesky_writes_json_and_png(tmp_path, capsys):
    args = parse(["trace", "cholesky", "--n", "120", "--tile", "32", "--output", str(tmp_path)])
    assert args.func(args) == 0
    events = json.loads((tmp_path / "trace-cholesky-120.json").read_text())["traceEvents"]
    assert {"potrf", "trsm", "herk", "gemm"} <= {e["name"] for e in events}
    assert (tmp_path / "trace-cholesky-120.png").read_bytes()[:4] == b"\x89PNG"
    assert "GFLOP/s" in capsys.readouterr().out


def test_trace_lu_and_qr(tmp_path):
    for op, kernels in (("lu", {"getrf", "laswp", "gemm"}), ("qr", {"geqrt", "larfb"})):
        args = parse(["trace", op, "--n", "100", "--tile", "32", "--output", str(tmp_path)])
        assert args.func(args) == 0
        names = {e["name"] for e in json.loads((tmp_path / f"trace-{op}-100.json").read_text())["traceEvents"]}
        assert kernels <= names


def test_trace_of_the_hybrid_path_shows_its_copy_threads(tmp_path, capsys):
    args = parse(["trace", "cholesky", "--n", "160", "--tile", "32", "--devices", "cpu,emulated:0,emulated:1",
                  "--output", str(tmp_path)])
    assert args.func(args) == 0
    stem = tmp_path / "trace-cholesky-160-cpu-emulated0-emulated1"
    events = json.loads(stem.with_suffix(".json").read_text())["traceEvents"]
    assert {e["pid"] for e in events if e["name"] == "gemm"} == {"emulated:0", "emulated:1"}
    assert {e["pid"] for e in events if e["name"] == "copy (fetch)"} >= {"emulated:0", "emulated:1"}
    assert stem.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert "emulated:1" in out and "tasks running at once" in out


def test_trace_warms_up_untraced_first(tmp_path, monkeypatch, capsys):
    """``--warmup k`` runs k untraced factorizations of copies of the matrix before the traced one (default 1)."""
    calls = []
    make, factor = trace.OPERATIONS["lu"]
    monkeypatch.setitem(trace.OPERATIONS, "lu", (make, lambda a, *rest: calls.append(rest[-1]) or factor(a, *rest)))
    for argv, expected in (([], 1), (["--warmup", "3"], 3), (["--warmup", "0"], 0)):
        calls.clear()
        args = parse(["trace", "lu", "--n", "64", "--tile", "32", "--output", str(tmp_path), *argv])
        assert args.func(args) == 0
        assert calls[:-1] == [None] * expected and calls[-1] is not None
    with pytest.raises(SystemExit):
        parse(["trace", "lu", "--warmup", "-1"])
    assert "--warmup: must be a non-negative integer, got '-1'" in capsys.readouterr().err


def test_trace_rejects_an_unknown_device(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(["trace", "lu", "--devices", "cpu,tpu:0"])
    assert exit_info.value.code == 2 and "unknown device 'tpu:0'" in capsys.readouterr().err
