"""The batched benchmark's table: every case against each peer, the fastest peer and the copy bound.

``python benchmarks/batched_table.py batched.json`` reads the JSON of ``pytest benchmarks/test_batched.py
--benchmark-only --benchmark-json=batched.json`` and prints, under the run's machine head (CPU, OpenBLAS kernels,
DGEMM), one Markdown row per (operation, dtype, batch, n): hetlapack's ns per matrix, the GB/s it moved, the copy
bound (the bytes read and written over the copy rate read with the case) and how far above it hetlapack is, each
peer's time over hetlapack's, and the fastest peer's (a case dispatch sent elsewhere than the batched path names its
path). A last column marks the cells that miss #38's targets: below 1.0x the fastest peer, below 1.5x it for
n <= 16, or (float64, n <= 32) more than 2.5x the copy bound.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

#: Peers in the order of the table's columns.
PEERS = ("numpy", "torch", "jax", "scipy")


def _case(info: dict) -> tuple[str, str, int, int]:
    """(operation, dtype, batch, n) of a row of :func:`test_batched`."""
    op, dtype, batch = info["op"].split()
    return op, dtype, int(batch.removeprefix("B=")), info["n"]


def misses(case: tuple[str, str, int, int], fastest: float | None, over_bound: float) -> list[str]:
    """The targets a cell misses, given the fastest peer's time over ours and ours over the copy bound."""
    _, dtype, _, n = case
    missed = []
    if fastest is not None and fastest < (1.5 if n <= 16 else 1.0):
        missed.append(f"< {1.5 if n <= 16 else 1.0}x peer")
    if dtype == "float64" and n <= 32 and over_bound > 2.5:
        missed.append("> 2.5x bound")
    return missed


def rows(benchmarks: list[dict]) -> list[str]:
    """The table's Markdown rows, one per case hetlapack ran."""
    cases: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for bench in benchmarks:
        info = bench.get("extra_info", {})
        if bench["name"].startswith("test_batched[") and "peer" in info:
            cases[_case(info)][info["peer"]] = info
    lines = []
    for case in sorted(cases):
        peers = cases[case]
        ours = peers.get("hetlapack")
        if ours is None:
            continue
        ratios = {peer: peers[peer]["ns_per_matrix"] / ours["ns_per_matrix"] for peer in PEERS if peer in peers}
        fastest = min(ratios.values()) if ratios else None
        over_bound = ours["ns_per_matrix"] / ours["bound_ns"]
        cells = [f"{ratios[peer]:.2f}x" if peer in ratios else "–" for peer in PEERS]
        op, dtype, batch, n = case
        path = "" if ours.get("path", "batched") == "batched" else f" ({ours['path']} path)"
        lines.append(f"| {op} {dtype} B={batch}{path} | {n} | {ours['ns_per_matrix']:,.0f} | "
                     f"{ours['achieved_GBps']:.1f} | {ours['bound_ns']:,.0f} | {over_bound:.1f}x | "
                     f"{' | '.join(cells)} | "
                     f"{'–' if fastest is None else f'{fastest:.2f}x'} | "
                     f"{', '.join(misses(case, fastest, over_bound)) or 'met'} |")
    return lines


def head(run: dict) -> list[str]:
    """The machine head: CPU, BLAS kernels, DGEMM, the range of copy rates the cases read, and SciPy's version."""
    machine = run.get("hetlapack_machine", {})
    infos = [b.get("extra_info", {}) for b in run["benchmarks"]]
    copies = [i["copy_GBps"] for i in infos if "copy_GBps" in i] or [float("nan")]
    scipy = next((i["scipy"] for i in infos if "scipy" in i), "?")
    return [f"CPU: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores; BLAS: "
            f"{machine.get('blas') or '?'}; pinned by: {machine.get('pinned') or 'nothing'}",
            f"DGEMM {machine.get('dgemm_gflops', float('nan')):.1f} GFLOP/s and copy {min(copies):.1f}-"
            f"{max(copies):.1f} GB/s in this run (read with each case: its bound is of the same minute); "
            f"SciPy {scipy}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="pytest-benchmark JSON of benchmarks/test_batched.py")
    run = json.load(open(parser.parse_args().json))
    print("\n".join(head(run)), end="\n\n")
    print("| op, dtype, batch | n | hetlapack ns/matrix | GB/s | bound ns | over bound | "
          + " | ".join(PEERS) + " | fastest peer | targets |")
    print("| --- " * (8 + len(PEERS)) + "|")
    print("\n".join(rows(run["benchmarks"])))


if __name__ == "__main__":
    main()
