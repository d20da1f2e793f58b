"""``hetlapack info``: the detected hardware, each device's capability weights, the host's GEMM rate and how many
batched kernels numba's cache holds."""

from __future__ import annotations

import argparse

from ..devices import available, capability
from ..devices.base import KERNEL_CLASSES
from ..hardware import detect
from ..perf import model, rates


def register(subparsers) -> None:
    parser = subparsers.add_parser("info", help="print the detected hardware and devices")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(detect())
    calibrated = capability.load()
    for device in available():
        weights = ", ".join(f"{kind} {rate:.1f}" for kind, rate in device.capability.items() if kind in KERNEL_CLASSES)
        link = device.capability
        if "bandwidth_gbs" in link and "latency_s" in link:
            weights += f"; link {link['bandwidth_gbs']:.1f} GB/s, latency {link['latency_s'] * 1e6:.1f} us"
        source = "calibrated" if device.name in calibrated else "defaults; run `hetlapack calibrate`"
        if model.unmeasured_accelerators((device,)):
            source += ": until its link is measured, dispatch does not choose it"
        print(f"Device {device.name}: GFLOP/s per kernel class: {weights} ({source})")
    print(f"Host DGEMM: {rates.host_gemm_gflops('d'):.1f} GFLOP/s (measured now, 768x768)")
    print(_batched_kernels())
    return 0


def _batched_kernels() -> str:
    """How many of the batched kernels (one per kernel and dtype) numba's cache holds, and what becomes of the rest."""
    from ..batched import compiling, precompile  # noqa: PLC0415 - numba loads for this line only

    total = sum(len(compiling.kernel_dtypes(kernel)) for kernel in compiling.KERNELS)
    missing = sum(map(len, precompile.missing().values()))
    line = f"Batched kernels: {total - missing} of {total} compiled in numba's cache"
    if missing:
        line += (" (the others compile in a background process at their first use, SciPy's function answering "
                 "meanwhile; `hetlapack compile` compiles them now)")
    return line
