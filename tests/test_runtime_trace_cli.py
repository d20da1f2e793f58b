"""``hetlapack trace``: the subcommand writes a chrome JSON trace and a Gantt PNG."""

import argparse
import json

from hetlapack.commands import trace


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
