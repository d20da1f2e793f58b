"""One module per ``hetlapack`` subcommand, and the argument types they share."""

from __future__ import annotations

import argparse

from ..devices import available_names, resolve


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
