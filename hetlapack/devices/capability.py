"""Measured capability of each device, cached per machine as JSON (seed 000 §6.2–6.3).

The cache file ``calibration.json`` lives in the user cache directory (``HETLAPACK_CACHE_DIR`` overrides it);
:mod:`hetlapack.perf.calibration` writes it, and every device loads its entry, by name, when it is created. Devices
not in the cache keep the defaults. A running runtime moves a device's weights towards the rates it observes
(:func:`refine`).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Device

#: Environment variable naming the cache directory (tests point it at a temporary directory).
ENV_CACHE_DIR = "HETLAPACK_CACHE_DIR"
CACHE_FILE = "calibration.json"


@functools.cache
def _user_cache_dir() -> str:
    import platformdirs  # noqa: PLC0415 - only needed when the cache is used

    return platformdirs.user_cache_dir("hetlapack")


def cache_path() -> Path:
    """Where this machine's calibration lives."""
    return Path(os.environ.get(ENV_CACHE_DIR) or _user_cache_dir()) / CACHE_FILE


@functools.lru_cache(maxsize=4)
def _read(path: Path, modified_ns: int, size: int) -> str:
    """The text of the calibration file as of that modification (every device created reads it: one stat then)."""
    return path.read_text()


def load() -> dict[str, dict]:
    """The cached calibration, device name -> its measurements (:func:`_measurements`); empty when none was made or
    it is unreadable. Damaged parts (``"devices"`` not an object, an entry not an object, values that are no
    measurement) are left out, and so is an entry left with nothing, so that they cannot make every later call fail
    and a new calibration overwrites them."""
    path = cache_path()
    try:
        stat = path.stat()
        data = json.loads(_read(path, stat.st_mtime_ns, stat.st_size))
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, or nested past the parser's depth
        return {}
    devices = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        return {}
    entries = {name: _measurements(entry) for name, entry in devices.items()}
    return {name: entry for name, entry in entries.items() if entry}


#: The range a cached value must lie in to count as a measurement (GFLOP/s, GB/s, seconds, tile or matrix orders):
#: timings are floored at a nanosecond and no device nears 1e9 GFLOP/s, while a value like 1e308 (a hand edit)
#: overflows the device weights and the cost model into NaN.
PLAUSIBLE_RANGE = (1e-9, 1e9)

#: Keys of a device's entry that hold tables (``{name: [[x, rate], ...]}``) rather than scalars.
TABLE_KEYS = ("kernels", "whole", "batched", "lanes", "loop_threads")


def _measured(value) -> bool:
    """Whether a cached value is a measurement: a number in ``PLAUSIBLE_RANGE`` (a hand-edited or damaged file's
    other values are ignored, so they cannot make every later call fail)."""
    low, high = PLAUSIBLE_RANGE
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def _measured_rows(table) -> list[list[float]]:
    """The measured ``[x, rate]`` pairs of a cached table, sorted by ``x`` (empty unless it is a list of pairs)."""
    if not isinstance(table, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in table):
        return []
    return sorted([x, rate] for x, rate in table if _measured(x) and _measured(rate))


def _measured_tables(tables) -> dict[str, list[list[float]]]:
    """``{name: [[x, rate], ...]}`` of a cached one, keeping only measured pairs and tables left with some."""
    if not isinstance(tables, dict):
        return {}
    rows = {name: _measured_rows(table) for name, table in tables.items()}
    return {name: table for name, table in rows.items() if table}


def _measurements(entry) -> dict:
    """What a device's entry (fresh or cached) measured: its scalars that are measurements, and its tables
    (``TABLE_KEYS``) with their measured rows; empty when it is not an object."""
    if not isinstance(entry, dict):
        return {}
    scalars = {key: value for key, value in entry.items() if key not in TABLE_KEYS and _measured(value)}
    tables = {key: _measured_tables(entry[key]) for key in TABLE_KEYS if key in entry}
    return scalars | {key: table for key, table in tables.items() if table}


def _as_tuples(tables: dict[str, list[list[float]]]) -> dict[str, tuple[tuple[float, float], ...]]:
    """``{name: ((x, rate), ...)}``: the immutable form devices hold their tables in."""
    return {name: tuple((x, rate) for x, rate in rows) for name, rows in tables.items()}


def apply_measurements(device: Device, measured: dict) -> None:
    """Give ``device`` a measurement (fresh, or read from the cache): its measured scalars go into ``capability``,
    its tables, where any row was measured, into ``kernel_rates`` (``"kernels"``), ``whole_rates`` (``"whole"``),
    ``batched_rates`` (``"batched"``), ``batched_lanes`` (``"lanes"``) and ``loop_threads``."""
    measurements = _measurements(measured)
    device.capability.update({k: v for k, v in measurements.items() if k not in TABLE_KEYS})
    if "kernels" in measurements:
        device.kernel_rates = _as_tuples(measurements["kernels"])
    if "whole" in measurements:
        device.whole_rates = _as_tuples(measurements["whole"])
    if "batched" in measurements:
        device.batched_rates = _as_tuples(measurements["batched"])
    if "lanes" in measurements:
        device.batched_lanes = _as_tuples(measurements["lanes"])
    if "loop_threads" in measurements:
        device.loop_threads = _as_tuples(measurements["loop_threads"])


def load_capability(device: Device) -> None:
    """Overwrite ``device.capability`` (and its ``kernel_rates``, ``whole_rates``, ``batched_rates``,
    ``batched_lanes``, ``loop_threads``) with its cached measurements, if any."""
    apply_measurements(device, load().get(device.name, {}))


def check_writable() -> Path:
    """The cache file's path, once its folder exists and the file can be written: raises ``OSError`` otherwise, so
    that a caller can refuse before a long measurement instead of losing it at the end."""
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.open("r+b").close()
    else:
        tempfile.TemporaryFile(dir=path.parent).close()
    return path


def save_results(results: dict[str, dict[str, float]], tile: int) -> Path:
    """Merge ``results`` into the cache file (other devices' entries are kept, damaged ones dropped: :func:`load`);
    returns its path."""
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
