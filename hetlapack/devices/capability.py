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
def _parsed(path: Path, modified_ns: int, size: int) -> dict[str, dict]:
    """The calibration file as of that modification, parsed and its measurements kept (:func:`load`). Every device
    created reads it, and dispatch creates one to look up a calibrated choice on every call: parsed once a version,
    a lookup costs one stat (parsing a 20 KB file each time added half a millisecond to each call)."""
    data = json.loads(path.read_text())
    devices = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(devices, dict):
        return {}
    entries = {name: _frozen(_measurements(entry)) for name, entry in devices.items()}
    return {name: entry for name, entry in entries.items() if entry}


def load() -> dict[str, dict]:
    """The cached calibration, device name -> its measurements (:func:`_measurements`, tables as ``{name: ((x,
    rate), ...)}``); empty when none was made or it is unreadable. Damaged parts (``"devices"`` not an object, an
    entry not an object, values that are no measurement) are left out, and so is an entry left with nothing, so that
    they cannot make every later call fail and a new calibration overwrites them. The entries are shared between
    calls: read them, do not change them."""
    path = cache_path()
    try:
        stat = path.stat()
        return dict(_parsed(path, stat.st_mtime_ns, stat.st_size))
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, or nested past the parser's depth
        return {}


#: The range a cached value must lie in to count as a measurement (GFLOP/s, GB/s, seconds, tile or matrix orders):
#: timings are floored at a nanosecond and no device nears 1e9 GFLOP/s, while a value like 1e308 (a hand edit)
#: overflows the device weights and the cost model into NaN.
PLAUSIBLE_RANGE = (1e-9, 1e9)

#: Keys of a device's entry that hold tables (``{name: [[x, rate], ...]}``) rather than scalars, and the device
#: attribute each goes into.
TABLE_ATTRIBUTES = {"kernels": "kernel_rates", "whole": "whole_rates", "host_call": "host_call_rates",
                    "tile_call": "tile_call_rates", "tiles": "tile_orders", "batched": "batched_rates",
                    "lanes": "batched_lanes", "spread": "batched_spread", "stream": "batched_stream",
                    "stream_stack": "batched_stream_stack",
                    "solves": "batched_solves", "loop_threads": "loop_threads", "potrf_blocks": "potrf_blocks",
                    "host_threads": "host_threads"}
TABLE_KEYS = tuple(TABLE_ATTRIBUTES)


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


def _frozen(measurements: dict) -> dict:
    """``measurements`` with each table as ``{name: ((x, rate), ...)}``: the immutable form devices hold them in."""
    return {key: {name: tuple((x, rate) for x, rate in rows) for name, rows in value.items()}
            if key in TABLE_KEYS else value for key, value in measurements.items()}


def apply_measurements(device: Device, measured: dict) -> None:
    """Give ``device`` a measurement (fresh, or read from the cache): its measured scalars go into ``capability``,
    its tables, where any row was measured, into ``kernel_rates`` (``"kernels"``), ``whole_rates`` (``"whole"``),
    ``host_call_rates`` (``"host_call"``), ``tile_call_rates`` (``"tile_call"``), ``tile_orders`` (``"tiles"``),
    ``batched_rates`` (``"batched"``), ``batched_lanes`` (``"lanes"``), ``batched_spread`` (``"spread"``),
    ``batched_stream`` (``"stream"``), ``batched_stream_stack`` (``"stream_stack"``), ``batched_solves``
    (``"solves"``), ``loop_threads``, ``potrf_blocks`` and ``host_threads``."""
    _apply(device, _frozen(_measurements(measured)))


def _apply(device: Device, measurements: dict) -> None:
    """:func:`apply_measurements` of what :func:`_measurements` kept, its tables :func:`_frozen`."""
    device.capability.update({k: v for k, v in measurements.items() if k not in TABLE_KEYS})
    for key, attribute in TABLE_ATTRIBUTES.items():
        if key in measurements:
            setattr(device, attribute, dict(measurements[key]))


def load_capability(device: Device) -> None:
    """Overwrite ``device.capability`` (and its ``kernel_rates``, ``whole_rates``, ``host_call_rates``,
    ``tile_call_rates``, ``tile_orders``, ``batched_rates``, ``batched_lanes``, ``loop_threads``, ``potrf_blocks``,
    ``host_threads``) with its cached measurements, if any."""
    _apply(device, load().get(device.name, {}))


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


#: Tables whose rows are named by the SciPy version they were timed under (``rates.call_table``): a calibration
#: replaces only its own version's, so that environments with different SciPy versions on one machine share the
#: cache.
VERSIONED_TABLE_KEYS = ("host_call", "tile_call", "potrf_blocks", "host_threads")


def save_results(results: dict[str, dict[str, float]], tile: int) -> Path:
    """Merge ``results`` into the cache file (other devices' entries are kept, damaged ones dropped: :func:`load`;
    a device's versioned tables keep the other versions' rows, :data:`VERSIONED_TABLE_KEYS`); returns its path."""
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = load()
    for name, entry in results.items():
        earlier = merged.get(name, {})
        merged[name] = entry | {key: earlier[key] | entry[key] for key in VERSIONED_TABLE_KEYS
                                if key in earlier and key in entry}
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
