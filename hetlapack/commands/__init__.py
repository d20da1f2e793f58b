"""One module per ``hetlapack`` subcommand, and the argument types they share."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: a positive integer, or a usage error naming the value (exit status 2, no traceback)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value
