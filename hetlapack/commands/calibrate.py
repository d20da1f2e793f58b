"""``hetlapack calibrate``: measure each device's capability weights and cache them for this machine."""

from __future__ import annotations

import argparse

from ..devices import available, resolve
from ..devices.calibration import DEFAULT_TILE, cache_path, calibrate
from . import positive_int


def register(subparsers) -> None:
    parser = subparsers.add_parser("calibrate", help="measure device rates and link speeds; cache them")
    parser.add_argument("--devices", default=None,
                        help="comma-separated device names (default: every available device), e.g. cpu,emulated:0")
    parser.add_argument("--tile", type=positive_int, default=DEFAULT_TILE, help="tile order the kernels are timed at")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timings per kernel (the best is kept)")
    parser.add_argument("--no-save", action="store_true", help="print the measurement without caching it")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    devices = resolve(args.devices.split(",")) if args.devices else available()
    results = calibrate(devices, tile=args.tile, repeats=args.repeats, save=not args.no_save, progress=True)
    print(f"{'device':<14}{'blas3 GFLOP/s':>15}{'panel GFLOP/s':>15}{'laswp GB/s':>12}{'link GB/s':>11}"
          f"{'latency us':>12}")
    for name, measured in results.items():
        link = ""
        if "latency_s" in measured:
            link = f"{measured['bandwidth_gbs']:>11.1f}{measured['latency_s'] * 1e6:>12.1f}"
        print(f"{name:<14}{measured['blas3']:>15.1f}{measured['panel']:>15.1f}{measured['memory']:>12.1f}{link}")
    print("rates are per worker with one BLAS thread, at tile order", args.tile)
    if not args.no_save:
        print(f"saved to {cache_path()}")
    return 0
