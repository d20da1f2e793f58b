"""``mpiexec -n 4 python -m hetlapack.mpi demo --n 8000``: distributed Cholesky, LU and QR with their cost.

For each routine it prints the time (slowest rank), the scaled backward error of a solve with the factors
``||b - A x||_1 / (||A||_1 ||x||_1 n eps)``, the bytes each rank sent and received, and the peak RSS per rank.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time

import numpy as np

from ._comm import agreed, mpi, reset_traffic, traffic
from .arguments import FirstRankParser, positive_int
from .grid import ProcessGrid
from .linalg import cho_solve, cholesky, lu_factor, lu_solve, qr
from .matrix import DEFAULT_BLOCK, DistributedMatrix
from .solve import multiply, norm1, trsm


def _tile(seed: int, rows: slice, cols: slice, dtype: np.dtype) -> np.ndarray:
    """Entries of the random matrix on ``rows x cols``, the same whichever rank builds them."""
    rng = np.random.default_rng([seed, rows.start, cols.start])
    shape = (rows.stop - rows.start, cols.stop - cols.start)
    out = rng.uniform(-1, 1, shape)
    if dtype.kind == "c":
        out = out + 1j * rng.uniform(-1, 1, shape)
    return out.astype(dtype)


def spd_tile(n: int, dtype: np.dtype, seed: int = 0):
    """``fn(rows, cols)`` of ``(B + B^H) / 2 + n I`` with ``B`` random: Hermitian, diagonally dominant, HPD."""
    def fn(rows: slice, cols: slice) -> np.ndarray:
        upper = _tile(seed, rows, cols, dtype) if rows.start <= cols.start else _tile(seed, cols, rows, dtype).conj().T
        out = upper.copy()
        if rows.start == cols.start:
            out = (np.triu(upper) + np.triu(upper, 1).conj().T).astype(dtype)
            out[np.diag_indices_from(out)] = out.diagonal().real + n
        return out
    return fn


def general_tile(dtype: np.dtype, seed: int = 0):
    """``fn(rows, cols)`` of a random matrix with entries uniform in [-1, 1)."""
    return lambda rows, cols: _tile(seed, rows, cols, dtype)


def run(routine: str, n: int, block: int, grid: ProcessGrid, dtype: np.dtype, repeat: int = 1) -> dict:
    """Build the input, factor it ``repeat`` times, check it by a solve; returns time, residual and traffic.

    ``seconds`` is the best of the rounds, each timed from a barrier to the slowest rank's finish.
    """
    fn = spd_tile(n, dtype) if routine == "cholesky" else general_tile(dtype)
    a = DistributedMatrix.from_function(n, n, fn, block=block, grid=grid, dtype=dtype)
    x_true = np.random.default_rng(1).uniform(-1, 1, (n, 1)).astype(dtype)
    b = multiply(a, x_true)
    rounds = []
    for _ in range(max(1, repeat)):
        grid.comm.Barrier()
        reset_traffic()
        start = time.perf_counter()
        if routine == "cholesky":
            factor = cholesky(a, lower=True)
        elif routine == "lu":
            factor = lu_factor(a)
        else:
            factor = qr(a, mode="economic")
        counters = traffic().as_dict()
        rounds.append(grid.comm.allreduce(time.perf_counter() - start, op=mpi().MAX))
    grid.comm.Barrier()
    if routine == "cholesky":
        x = cho_solve((factor, True), b)
    elif routine == "lu":
        x = lu_solve(factor, b)
    else:
        q, r = factor
        x = multiply(q, b, trans=2)
        trsm(r, x, lower=False)
    residual = np.abs(b - multiply(a, x)).sum() / (
        norm1(a) * np.abs(x).sum() * n * np.finfo(dtype).eps)
    return {"routine": routine, "n": n, "block": block, "grid": list(grid.shape), "dtype": np.dtype(dtype).name,
            "seconds": min(rounds), "rounds": rounds, "residual": float(residual), **counters,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def communication_bounds(n: int, grid: ProcessGrid, itemsize: int) -> dict:
    """Seed 003 §3.5's words bound ``n^2/2 log2 p`` and the 2-D volume ``n^2/2 (1/P + 1/Q)``, in bytes."""
    p = grid.size
    return {"seed_bound_bytes": n * n / 2 * max(1.0, math.log2(p)) * itemsize,
            "two_d_volume_bytes": n * n / 2 * (1 / grid.nprow + 1 / grid.npcol) * itemsize}


ROUTINES = ("cholesky", "lu", "qr")


def _grid_shape(text: str) -> tuple[int, int]:
    """An argparse type: ``PxQ`` with positive P and Q."""
    rows, _, cols = text.partition("x")
    try:
        return positive_int(rows), positive_int(cols)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be PxQ with positive integers, e.g. 2x2; got {text!r}") from None


def _routines(text: str) -> list[str]:
    """An argparse type: a comma-separated list of :data:`ROUTINES`."""
    names = text.split(",")
    unknown = [name for name in names if name not in ROUTINES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown routine {unknown[0]!r}; choose from {', '.join(ROUTINES)}")
    return names


def main(argv: list[str] | None = None) -> None:
    parser = FirstRankParser(prog="python -m hetlapack.mpi", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="distributed Cholesky, LU and QR with time, residual and traffic")
    demo.add_argument("--n", type=positive_int, default=4000)
    demo.add_argument("--block", type=positive_int, default=DEFAULT_BLOCK)
    demo.add_argument("--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"])
    demo.add_argument("--grid", type=_grid_shape, default=None, help="PxQ, default as square as possible")
    demo.add_argument("--routines", type=_routines, default=list(ROUTINES), help="comma-separated: cholesky,lu,qr")
    demo.add_argument("--repeat", type=positive_int, default=1, help="factor this many times, report the best time")
    demo.add_argument("--json", default=None, help="write every rank's results to this file (on rank 0)")
    args = parser.parse_args(argv)
    try:
        grid = _demo_grid(args)
    except (ValueError, OSError) as error:
        parser.exit(2 if isinstance(error, ValueError) else 1, f"{parser.prog} demo: error: {error}\n")
    demo_command(args, grid)


def _demo_grid(args: argparse.Namespace) -> ProcessGrid:
    """The demo's process grid, once every rank knows that ``--grid`` fits the ranks (``ValueError`` otherwise) and
    that ``--json`` can be written (``OSError``), before any work."""
    grid = ProcessGrid.create(shape=args.grid)
    if args.json:
        with agreed(grid.comm):
            if grid.comm.rank == 0:
                open(args.json, "w").close()
    return grid


def demo_command(args: argparse.Namespace, grid: ProcessGrid) -> None:
    """The ``demo`` subcommand: each routine in turn, a summary line per routine on rank 0 (and ``--json``)."""
    dtype = np.dtype(args.dtype)
    results = []
    for routine in args.routines:
        mine = run(routine, args.n, args.block, grid, dtype, args.repeat)
        everyone = grid.comm.gather(mine, root=0)
        if grid.comm.rank == 0:
            summary = {**mine, "seconds": max(r["seconds"] for r in everyone),
                       "received_bytes_per_rank": [r["received"] for r in everyone],
                       "sent_bytes_per_rank": [r["sent"] for r in everyone],
                       "peak_rss_mib_per_rank": [round(r["peak_rss_mib"], 1) for r in everyone],
                       **communication_bounds(args.n, grid, dtype.itemsize)}
            results.append(summary)
            print(f"{routine:8s} n={args.n} grid={grid.nprow}x{grid.npcol} block={args.block} {dtype.name}: "
                  f"{summary['seconds']:.2f} s, residual {summary['residual']:.3g}, "
                  f"received MB/rank {[round(b / 1e6, 1) for b in summary['received_bytes_per_rank']]}, "
                  f"sent MB/rank {[round(b / 1e6, 1) for b in summary['sent_bytes_per_rank']]}, "
                  f"seed §3.5 bound {summary['seed_bound_bytes'] / 1e6:.1f} MB, "
                  f"2-D volume {summary['two_d_volume_bytes'] / 1e6:.1f} MB, "
                  f"peak RSS MiB/rank {summary['peak_rss_mib_per_rank']}", flush=True)
    if args.json and grid.comm.rank == 0:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
