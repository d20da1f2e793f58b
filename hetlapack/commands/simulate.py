"""``hetlapack simulate cholesky --n 30000 --devices sandybridge:16,k20c,phi,k20beta --layout hgdd``.

Runs the tile algorithm on the runtime's virtual clock over modeled devices and prints the prediction (time,
GFLOP/s, utilisation, imbalance, energy); writes the Gantt PNG and the chrome://tracing JSON. With ``--paths``
it compares the hybrid and GPU-only paths; with ``--nodes`` it simulates a distributed Cholesky instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..perf.profiles import registry
from ..perf.simulator import CAPABILITY, LAYOUTS, OPERATIONS, PATHS, Prediction, simulate, simulate_distributed
from . import refuse_changed
from ..mpi.arguments import positive_int

#: Options of a single-node simulation, with their defaults; ``--nodes`` (a distributed float64 Cholesky on the
#: ``--node`` composition) refuses any other value rather than ignore it.
SINGLE_NODE_DEFAULTS = {"m": None, "devices": "sandybridge:16,k20c", "layout": "hgdd", "placement": "owner",
                        "path": "hybrid", "paths": False, "dtype": "float64"}


#: Options of a distributed simulation, with their defaults; without ``--nodes`` any other value is refused.
DISTRIBUTED_DEFAULTS = {"node": "keeneland", "interconnect": "qdr-ib"}


def register(subparsers) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser("simulate", help="predict a factorization on modeled hardware (no GPU needed)",
                                   description="Predictions from the performance model, not measurements.")
    parser.add_argument("op", nargs="?", default="cholesky", choices=sorted(OPERATIONS),
                        help="factorization (default cholesky)")
    parser.add_argument("--n", type=positive_int, default=30000, help="matrix order (default 30000)")
    parser.add_argument("--m", type=positive_int, default=None, help="rows, for a rectangular LU or QR (default n)")
    parser.add_argument("--devices", default=SINGLE_NODE_DEFAULTS["devices"],
                        help="profiles: name[:N[/W]],... N = cores of a CPU (W workers) or count of an "
                             "accelerator; 'cpu' is this machine (default sandybridge:16,k20c)")
    parser.add_argument("--layout", choices=LAYOUTS, default=SINGLE_NODE_DEFAULTS["layout"])
    parser.add_argument("--placement", choices=["owner", CAPABILITY], default=SINGLE_NODE_DEFAULTS["placement"])
    parser.add_argument("--path", choices=PATHS, default=SINGLE_NODE_DEFAULTS["path"],
                        help="hybrid: panels on the CPU; gpu: all on the accelerators (the CPU idles)")
    parser.add_argument("--paths", action="store_true", help="compare the hybrid and gpu paths (time and energy)")
    parser.add_argument("--tile", type=positive_int, default=None,
                        help="tile order (default: dispatch's choice; 4096 with --nodes)")
    parser.add_argument("--dtype", default=SINGLE_NODE_DEFAULTS["dtype"],
                        choices=["float32", "float64", "complex64", "complex128"])
    parser.add_argument("--nodes", type=positive_int, default=None,
                        help="simulate a distributed Cholesky on this many nodes")
    parser.add_argument("--node", default=DISTRIBUTED_DEFAULTS["node"],
                        help=f"node composition for --nodes (default {DISTRIBUTED_DEFAULTS['node']})")
    parser.add_argument("--interconnect", default=DISTRIBUTED_DEFAULTS["interconnect"],
                        help=f"network for --nodes (default {DISTRIBUTED_DEFAULTS['interconnect']})")
    parser.add_argument("--profiles", type=Path, action="append", default=[],
                        help="extra profile file (TOML or JSON; repeatable)")
    parser.add_argument("--list", action="store_true", help="list the known profiles and exit")
    parser.add_argument("--output", type=Path, default=Path("."), help="directory for the trace files")
    parser.set_defaults(func=run)


def _list(files) -> int:
    reg = registry(*files)
    for name, profile in sorted(reg.profiles.items()):
        print(f"{name:<12} {profile['kind']:<12} {profile.get('source', '')}")
    for name, node in sorted(reg.nodes.items()):
        print(f"{name:<12} {'node':<12} {node['devices']}: {node.get('source', '')}")
    for name, net in sorted(reg.interconnects.items()):
        print(f"{name:<12} {'network':<12} {net.get('source', '')}")
    return 0


def _write(prediction: Prediction, output: Path, stem: str) -> None:
    output.mkdir(parents=True, exist_ok=True)
    json_path = prediction.trace.to_chrome_json(output / f"{stem}.json")
    title = (f"PREDICTED {prediction.op} n={prediction.n} on {len(prediction.devices)} devices "
             f"({prediction.layout}): {prediction.seconds:.3f} s, {prediction.gflops:,.0f} GFLOP/s")
    png_path = prediction.trace.plot(output / f"{stem}.png", title=title)
    print(f"wrote {png_path} and {json_path}")


def _check_distributed(args: argparse.Namespace) -> None:
    """Refuse the options ``--nodes`` does not simulate (a distributed float64 Cholesky of a ``--node``
    composition), which would otherwise be ignored without a word."""
    if args.op != "cholesky":
        raise ValueError(f"--nodes simulates a distributed Cholesky only, not {args.op}")
    refuse_changed(args, SINGLE_NODE_DEFAULTS, "--nodes simulates a float64 Cholesky on --node's devices, so these "
                   "would be ignored")


def run(args: argparse.Namespace) -> int:
    """Simulate and report; every number printed is a model prediction."""
    if args.list:
        return _list(args.profiles)
    if not args.nodes:
        refuse_changed(args, DISTRIBUTED_DEFAULTS, "these describe --nodes's cluster, and there is no --nodes")
    if args.placement == CAPABILITY:
        refuse_changed(args, {"layout": SINGLE_NODE_DEFAULTS["layout"]}, "--placement capability places each task "
                       "greedily, by no layout")
    if args.nodes:
        _check_distributed(args)
        prediction = simulate_distributed(args.n, args.nodes, node=args.node, interconnect=args.interconnect,
                                          tile=args.tile or 4096, profiles=args.profiles, progress=True)
        print("PREDICTED (model, not measured):", prediction.summary().splitlines()[0])
        print(f"  {prediction.gflops / args.nodes:,.0f} GFLOP/s per node, load imbalance {prediction.imbalance:.3f}")
        _write(prediction, args.output, f"simulate-cholesky-{args.n}-{args.nodes}nodes")
        return 0
    paths = PATHS if args.paths else (args.path,)
    predictions = [simulate(args.op, args.n, args.devices, m=args.m, dtype=args.dtype, tile=args.tile,
                            layout=args.layout, placement=args.placement, path=path, profiles=args.profiles,
                            progress=True) for path in paths]
    print("PREDICTED (model, not measured):")
    for prediction in predictions:
        print(prediction.summary())
    if len(predictions) == 2:
        hybrid, gpu = predictions
        print(f"hybrid is {gpu.seconds / hybrid.seconds:.2f}x the speed of gpu-only; "
              f"{hybrid.gflops_per_watt:.2f} vs {gpu.gflops_per_watt:.2f} GFLOP/s/W")
    _write(predictions[0], args.output, f"simulate-{args.op}-{args.n}")
    return 0
