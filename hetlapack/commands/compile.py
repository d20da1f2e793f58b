"""``hetlapack compile``: compile the batched kernels into numba's disk cache now, on every core."""

from __future__ import annotations

import argparse

from ..mpi.arguments import positive_int


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "compile", help="compile the batched kernels now (minutes, once per install) instead of at their first use")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="processes compiling at once (default: one per usable core)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..batched.precompile import precompile  # noqa: PLC0415 - numba loads only for this command

    seconds = precompile(args.workers)
    if not seconds:
        print("every batched kernel is already in numba's cache")
        return 0
    print(f"compiled {len(seconds)} kernels ({sum(seconds.values()):.0f} s of compiling): "
          + ", ".join(f"{op} {s:.0f} s" for op, s in sorted(seconds.items(), key=lambda item: -item[1])))
    return 0
