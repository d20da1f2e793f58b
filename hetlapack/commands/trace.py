"""``hetlapack trace cholesky|lu|qr --n N --tile T --devices D --output DIR``: run a tile factorization and write its
trace (after ``--warmup`` untraced runs, one by default).

Writes ``DIR/trace-<op>-<n>.json`` (chrome://tracing, Perfetto) and ``DIR/trace-<op>-<n>.png`` (a Gantt chart), and
prints where the time went (:meth:`~hetlapack.runtime.Trace.summary`). ``--devices cpu,emulated:0,emulated:1``
traces the hybrid path, its copy threads included (the files' names then end in ``-cpu-emulated0-emulated1``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ..algorithms.geqrf import geqrf
from ..algorithms.getrf import getrf
from ..algorithms.potrf import potrf
from ..runtime import Trace
from ..testing import general, spd
from . import device_list
from ..mpi.arguments import non_negative_int, positive_int

#: Operation name on the command line -> (matrix generator, tile factorization run on it).
OPERATIONS = {
    "cholesky": (spd, lambda a, tile, devices, trace: potrf(a, lower=True, tile=tile, devices=devices, trace=trace)),
    "lu": (general, lambda a, tile, devices, trace: getrf(a, tile=tile, devices=devices, trace=trace)),
    "qr": (general, lambda a, tile, devices, trace: geqrf(a, tile=tile, devices=devices, trace=trace)),
}

#: Real flop counts (LAWN 41) used to print the achieved rate.
FLOPS = {"cholesky": lambda n: n**3 / 3, "lu": lambda n: 2 * n**3 / 3, "qr": lambda n: 4 * n**3 / 3}


def register(subparsers) -> None:
    """Add the ``trace`` subcommand."""
    parser = subparsers.add_parser("trace", help="run a tile factorization and write its trace (JSON + PNG)")
    parser.add_argument("op", choices=sorted(OPERATIONS))
    parser.add_argument("--n", type=positive_int, default=4000, help="matrix order (default 4000)")
    parser.add_argument("--tile", type=positive_int, default=384, help="tile order (default 384)")
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"])
    parser.add_argument("--devices", type=device_list, default="cpu",
                        help="comma-separated devices, e.g. cpu,emulated:0,emulated:1 (default cpu)")
    parser.add_argument("--output", type=Path, default=Path("."), help="directory for the files (default .)")
    parser.add_argument("--warmup", type=non_negative_int, default=1,
                        help="untraced runs first, so that the trace shows the steady state rather than a process's "
                             "first run (threads, buffers, page faults); 0 traces the first run (default 1)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Factor a random matrix with tracing on; write and report the two files and where the time went."""
    make, factor = OPERATIONS[args.op]
    matrix = np.asfortranarray(make(args.n, dtype=np.dtype(args.dtype)))
    for _ in range(args.warmup):
        factor(np.array(matrix, order="F"), args.tile, args.devices, None)
    trace = Trace()
    start = time.perf_counter()
    factor(matrix, args.tile, args.devices, trace)
    seconds = time.perf_counter() - start
    args.output.mkdir(parents=True, exist_ok=True)
    names = [device.name for device in args.devices]
    on = "" if names == ["cpu"] else "-" + "-".join(name.replace(":", "") for name in names)
    stem = args.output / f"trace-{args.op}-{args.n}{on}"
    json_path = trace.to_chrome_json(stem.with_suffix(".json"))
    title = f"{args.op} n={args.n} tile={args.tile} {args.dtype}: {seconds:.3f} s, " \
            f"{FLOPS[args.op](args.n) / seconds / 1e9:.1f} GFLOP/s (real-flop count), {len(trace.events)} tasks"
    png_path = trace.plot(stem.with_suffix(".png"), title=title)
    print(title)
    print(trace.summary())
    print(f"wrote {json_path} and {png_path}")
    return 0
