"""The ``hetlapack`` command: ``info``, ``demo``, ``trace`` and the other subcommands in :mod:`hetlapack.commands`."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .mpi.arguments import FirstRankParser

#: Subcommand modules; each exposes ``register(subparsers)`` and sets ``func`` on its parser.
COMMANDS = ("info", "demo", "bench", "trace", "calibrate", "simulate", "compile")


def build_parser() -> argparse.ArgumentParser:
    parser = FirstRankParser(prog="hetlapack", description="Accelerated, SciPy-compatible LAPACK.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what dispatch and the runtime do")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"hetlapack.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"hetlapack.commands.{name}":
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("hetlapack").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except ValueError as error:  # a value the parser could not judge (a device or profile name): a usage error
        if args.verbose:
            raise
        parser.exit(2, f"hetlapack {args.command}: error: {error}\n")
    except OSError as error:  # an output folder that cannot be written, a profile file that cannot be read
        if args.verbose:
            raise
        parser.exit(1, f"hetlapack {args.command}: error: {error}\n")
    except MemoryError as error:  # sizes past this machine's memory
        if args.verbose:
            raise
        parser.exit(1, f"hetlapack {args.command}: error: not enough memory: {str(error) or 'an allocation failed'}\n")


if __name__ == "__main__":
    sys.exit(main())
