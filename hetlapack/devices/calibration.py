"""Capability weights measured on this machine (seed 000 §6.2–6.3), cached per machine as JSON.

``calibrate(devices)`` times each device's tile kernels with one worker: the BLAS-3 class (GEMM at the working
tile size), the panel class (GETRF on a tall panel) and the memory class (LASWP), in GFLOP/s (GB/s for LASWP),
and for accelerators the host-to-device link: bandwidth from a large copy, latency from a one-element copy.
The results are written to ``calibration.json`` in the user cache directory (``HETLAPACK_CACHE_DIR`` overrides
it) and every device loads its entry, by name, when it is created. Devices not in the cache keep the defaults.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .base import Device

#: Environment variable naming the cache directory (tests point it at a temporary directory).
ENV_CACHE_DIR = "HETLAPACK_CACHE_DIR"
CACHE_FILE = "calibration.json"

#: Tile order the kernels are timed at (the hybrid path's working tile size on this kind of machine).
DEFAULT_TILE = 256


def cache_path() -> Path:
    """Where this machine's calibration lives."""
    directory = os.environ.get(ENV_CACHE_DIR)
    if directory is None:
        import platformdirs  # noqa: PLC0415 - only needed when the cache is used

        directory = platformdirs.user_cache_dir("hetlapack")
    return Path(directory) / CACHE_FILE


def load() -> dict[str, dict[str, float]]:
    """The cached calibration, device name -> measured values (empty when none was made or it is unreadable)."""
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data.get("devices", {}) if isinstance(data, dict) else {}


def load_capability(device: Device) -> None:
    """Overwrite ``device.capability`` with its cached measurements, if any."""
    device.capability.update(load().get(device.name, {}))


def _best_seconds(run: Callable[[], None], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def _kernel_rates(device: Device, tile: int, repeats: int) -> dict[str, float]:
    """GFLOP/s of GEMM (blas3) and tall GETRF (panel), GB/s of LASWP (memory), on ``device``'s memory."""
    rng = np.random.default_rng(0)
    tall = 4 * tile
    a, b, c = (device.empty((tile, tile), np.float64) for _ in range(3))
    panel = device.empty((tall, tile), np.float64)
    host_square = np.asfortranarray(rng.standard_normal((tile, tile)))
    host_panel = np.asfortranarray(rng.standard_normal((tall, tile)))
    for target in (a, b, c):
        device.upload(host_square, target)
    piv = np.zeros(tile, dtype=np.int32)
    swaps = np.asarray(rng.integers(1, tile + 1, tile), dtype=np.int32)

    def factor_panel() -> None:
        device.upload(host_panel, panel)
        device.getrf(panel, piv)

    gemm = _best_seconds(lambda: device.gemm(a, b, c, alpha=1.0, beta=0.0), repeats)
    copy_only = _best_seconds(lambda: device.upload(host_panel, panel), repeats)
    getrf = max(_best_seconds(factor_panel, repeats) - copy_only, 1e-9)
    laswp = _best_seconds(lambda: device.laswp(c, swaps), repeats)
    getrf_flops = tall * tile ** 2 - tile ** 3 / 3
    return {"blas3": 2 * tile ** 3 / gemm / 1e9, "panel": getrf_flops / getrf / 1e9,
            "memory": 2 * tile * tile * 8 / laswp / 1e9}


def _link(device: Device, nbytes: int, repeats: int) -> dict[str, float]:
    """Host-to-device bandwidth (GB/s) from an ``nbytes`` copy and latency (s) from a one-element copy."""
    big = np.ones(nbytes // 8)
    small = np.ones(1)
    big_out, small_out = device.empty(big.shape, big.dtype), device.empty(small.shape, small.dtype)
    latency = _best_seconds(lambda: device.upload(small, small_out), repeats)
    seconds = _best_seconds(lambda: device.upload(big, big_out), repeats)
    return {"bandwidth_gbs": nbytes / max(seconds - latency, 1e-9) / 1e9, "latency_s": latency}


def calibrate(devices: Sequence[Device], *, tile: int = DEFAULT_TILE, repeats: int = 3,
              link_bytes: int = 64 << 20, save: bool = True, progress: bool = False) -> dict[str, dict[str, float]]:
    """Measure ``devices`` (one worker each, one BLAS thread) and return name -> capability; cache it if ``save``.

    The devices' ``capability`` is updated in place, so a runtime built on them right after uses the
    measurement.
    """
    from tqdm import tqdm  # noqa: PLC0415 - a CLI dependency, not needed to load cached weights

    from ..runtime.blas_threads import blas_threads  # noqa: PLC0415 - runtime imports devices
    from .cpu import usable_cores  # noqa: PLC0415 - cpu imports this module

    results: dict[str, dict[str, float]] = {}
    with blas_threads(usable_cores()), tqdm(devices, desc="calibrating", unit="device",
                                                        disable=not progress) as bar:
        for device in bar:
            bar.set_postfix_str(device.name)
            measured = _kernel_rates(device, tile, repeats)
            if device.kind != "cpu":
                measured.update(_link(device, link_bytes, repeats))
            device.capability.update(measured)
            results[device.name] = measured
    if save:
        save_results(results, tile)
    return results


def save_results(results: dict[str, dict[str, float]], tile: int) -> Path:
    """Merge ``results`` into the cache file (other devices' entries are kept); returns its path."""
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = load()
    merged.update(results)
    path.write_text(json.dumps({"tile": tile, "devices": merged}, indent=2, sort_keys=True))
    return path


def refine(capability: dict[str, float], kernel_class: str, flops: float, seconds: float,
           smoothing: float = 0.2) -> None:
    """Move ``capability[kernel_class]`` towards a rate observed in a run (seed 000 §6.2), exponentially smoothed.

    Tiny tasks (under a millisecond or without a flop count) say more about overheads than about the device
    and are ignored.
    """
    if flops <= 0 or seconds < 1e-3:
        return
    observed = flops / seconds / 1e9
    capability[kernel_class] = (1 - smoothing) * capability[kernel_class] + smoothing * observed
