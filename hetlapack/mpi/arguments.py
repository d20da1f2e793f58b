"""Argument parsing shared by ``hetlapack``'s commands and ``python -m hetlapack.mpi``: a parser that speaks once
per ``mpiexec`` (on rank 0), and the integer types their options take."""

from __future__ import annotations

import argparse

from .grid import launched_first


class FirstRankParser(argparse.ArgumentParser):
    """An argument parser whose help, usage and errors print on rank 0 only, once per ``mpiexec`` and not once per
    rank; every rank still exits with the same status."""

    def print_usage(self, file=None) -> None:
        if launched_first():
            super().print_usage(file)

    def print_help(self, file=None) -> None:
        if launched_first():
            super().print_help(file)

    def exit(self, status: int = 0, message: str | None = None):
        super().exit(status, message if launched_first() else None)


def _integer_at_least(text: str, least: int, what: str) -> int:
    """``text`` as an integer of at least ``least``, or a usage error saying it must be ``what``."""
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a positive integer, or a usage error naming the value (exit status 2, no traceback)."""
    return _integer_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer from 0, or a usage error naming the value."""
    return _integer_at_least(text, 0, "a non-negative integer")
