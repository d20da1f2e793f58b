"""``hetlapack info``: the detected hardware, devices and the host's measured GEMM rate."""

from __future__ import annotations

import argparse
import importlib.util

from ..dispatch import detect, model


def register(subparsers) -> None:
    parser = subparsers.add_parser("info", help="print the detected hardware and devices")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(detect())
    if importlib.util.find_spec("hetlapack.devices") is not None:
        from .. import devices  # noqa: PLC0415 - devices may pull optional backends

        available = getattr(devices, "available", None)
        if available is not None:
            print("Devices: " + ", ".join(str(getattr(d, "name", d)) for d in available()))
    print(f"Host DGEMM: {model.host_gemm_gflops('d'):.1f} GFLOP/s (measured now, 512x512)")
    return 0
