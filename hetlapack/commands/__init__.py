"""One module per ``hetlapack`` subcommand, and the argument types they share."""

from __future__ import annotations

import argparse

from ..devices import available_names, resolve
from ..mpi.grid import launched_first


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


def refuse_changed(args: argparse.Namespace, defaults: dict, why: str) -> None:
    """A usage error (``ValueError``: one line, exit 2) naming the options of ``defaults`` that ``args`` gives
    other values, which this run would otherwise ignore without a word; ``why`` says why they do not apply."""
    changed = [f"--{name}" for name, default in defaults.items() if getattr(args, name) != default]
    if changed:
        raise ValueError(f"{', '.join(changed)}: {why}")


def device_list(text: str) -> list:
    """An argparse type: the devices that comma-separated names denote (:func:`~hetlapack.devices.resolve`); an
    unknown name, or none at all, is a usage error that lists the available ones."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no device named (e.g. cpu,emulated:0); detected: "
                                         f"{', '.join(available_names())}")
    try:
        return resolve(names)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
