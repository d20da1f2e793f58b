"""Named hardware profiles for the simulator: the seeds' machines, this machine's calibration, user files.

``profiles.toml`` next to this module holds the built-in ones, each with its source. A user adds or overrides
profiles with TOML or JSON files of the same shape (``load_file``). ``parse("sandybridge:16,k20c:2,phi")``
turns a device list into :class:`ModeledDevice` objects: for a CPU profile ``:N`` is its core count (and
``:N/W`` feeds them with ``W`` runtime workers; by default, as the real runtime does, one worker per core, or
one worker using every core when there are accelerators, so that panels are multithreaded), for an accelerator
``:N`` is how many of them. ``"cpu"`` is this machine's CPU as calibrated here (:func:`host_profile`).
"""

from __future__ import annotations

import json
import math
import reprlib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..devices.base import KERNEL_CLASS, KERNEL_CLASSES
from .modeled import ModeledDevice, Power
from .rates import RUNTIME_TASK_OVERHEAD_S

_BUILTIN = "profiles.toml"


@dataclass(frozen=True)
class Interconnect:
    """A network between nodes: per-node bandwidth (GB/s, each direction) and latency (s)."""

    name: str
    bandwidth_gbs: float
    latency_s: float
    source: str = ""


class Registry:
    """Device profiles, node compositions and interconnects by name."""

    def __init__(self) -> None:
        self.profiles: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.interconnects: dict[str, dict[str, Any]] = {}

    def add(self, data: Any, origin: str = _BUILTIN) -> None:
        """Merge a parsed profile file (tables ``profiles``, ``nodes``, ``interconnects``), checked whole first so
        that a damaged file is refused with a ``ValueError`` naming ``origin`` and the bad entry, not half merged."""
        _check_file(data, origin)
        self.profiles.update(data.get("profiles", {}))
        self.nodes.update(data.get("nodes", {}))
        self.interconnects.update(data.get("interconnects", {}))

    def device(self, name: str, count: int | None = None, accelerators: int = 0, index: int = 0,
               workers: int | None = None) -> ModeledDevice:
        """One modeled device from profile ``name``; ``count`` is a CPU's core count."""
        profile = self.profiles.get(name)
        if profile is None:
            raise ValueError(f"unknown device profile {name!r}; known: {', '.join(sorted(self.profiles))}")
        cpu = profile["kind"] == "cpu"
        cores = int(count if count is not None and cpu else profile.get("cores", 1))
        if workers is None:
            workers = (1 if accelerators else cores) if cpu else 1
        power = dict(profile.get("power", {}))
        return ModeledDevice(
            name=name if cpu or index < 0 else f"{name}:{index}", kind=profile["kind"],
            rates=dict(profile["rates"]), single_rates=dict(profile.get("single_rates", {})),
            kernels=dict(profile.get("kernels", {})), cores=cores, workers=workers,
            half_tile=float(profile.get("half_tile", 0.0)),
            task_overhead_s=float(profile.get("task_overhead_s", 0.0)),
            bandwidth_gbs=float(profile.get("bandwidth_gbs", float("inf"))),
            latency_s=float(profile.get("latency_s", 0.0)),
            power=Power(idle=float(power.pop("idle", 0.0)), busy={k: float(v) for k, v in power.items()}),
            spin_s=float(profile.get("spin_s", 0.0)),
            memory_bytes=int(profile["memory_gb"] * 1e9) if "memory_gb" in profile else None,
            source=profile.get("source", ""))

    def parse(self, spec: str) -> list[ModeledDevice]:
        """Modeled devices from ``"name[:N[/W]],..."`` (``"cpu"`` is this machine's calibrated CPU)."""
        items = []
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            name, _, count = item.partition(":")
            count, _, workers = count.partition("/")
            if (count and not count.isdigit()) or (workers and not workers.isdigit()) or count == "0":
                raise ValueError(f"bad device {item!r}: write name, name:N or, for a CPU, name:N/W "
                                 "with positive integers")
            if name == "cpu" and "cpu" not in self.profiles:
                self.profiles["cpu"] = host_profile()
            if name not in self.profiles:
                raise ValueError(f"unknown device profile {name!r}; known: {', '.join(sorted(self.profiles))}")
            items.append((name, int(count) if count else None, int(workers) if workers else None))
        if not items:
            raise ValueError("no devices given")
        accelerators = sum((c or 1) for n, c, _ in items if self.profiles[n]["kind"] != "cpu")
        devices: list[ModeledDevice] = []
        for name, count, workers in items:
            if self.profiles[name]["kind"] == "cpu":
                devices.append(self.device(name, count, accelerators, workers=workers))
                continue
            copies = count or 1
            taken = sum(1 for d in devices if d.name.startswith(f"{name}:"))
            devices.extend(self.device(name, index=taken + i) for i in range(copies))
        return devices

    def interconnect(self, name: str) -> Interconnect:
        data = self.interconnects.get(name)
        if data is None:
            raise ValueError(f"unknown interconnect {name!r}; known: {', '.join(sorted(self.interconnects))}")
        return Interconnect(name, float(data["bandwidth_gbs"]), float(data["latency_s"]), data.get("source", ""))

    def node(self, name: str) -> list[ModeledDevice]:
        """The devices of a named node composition."""
        data = self.nodes.get(name)
        if data is None:
            raise ValueError(f"unknown node {name!r}; known: {', '.join(sorted(self.nodes))}")
        return self.parse(data["devices"])


#: A check of one value read from a profile file: raises ValueError naming ``where`` (file and dotted key).
Check = Callable[[Any, str], None]


def _table(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a table (a JSON object), else a ValueError."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a table (a JSON object), got {reprlib.repr(value)}")
    return value


def _is_number(value: Any) -> bool:
    """A finite int or float (a bool is not a number here, though Python counts it as one)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_positive(value: Any) -> bool:
    return _is_number(value) and value > 0


def _positive(value: Any, where: str) -> None:
    if not _is_positive(value):
        raise ValueError(f"{where} must be a positive number, got {reprlib.repr(value)}")


def _non_negative(value: Any, where: str) -> None:
    if not (_is_number(value) and value >= 0):
        raise ValueError(f"{where} must be a non-negative number, got {reprlib.repr(value)}")


def _count(value: Any, where: str) -> None:
    if not (_is_positive(value) and isinstance(value, int)):
        raise ValueError(f"{where} must be a positive integer, got {reprlib.repr(value)}")


def _text(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{where} must be a string, got {reprlib.repr(value)}")


def _kind(value: Any, where: str) -> None:
    if value not in ("cpu", "accelerator"):
        raise ValueError(f"{where} must be 'cpu' or 'accelerator', got {reprlib.repr(value)}")


def _is_rate_table(value: list | tuple) -> bool:
    """``[[tile, GFLOP/s], ...]``, positive, at increasing tile orders: the simulator interpolates it in log tile
    order."""
    pairs = all(isinstance(pair, list | tuple) and len(pair) == 2 and all(map(_is_positive, pair)) for pair in value)
    return bool(value) and pairs and all(a[0] < b[0] for a, b in zip(value, value[1:]))


def _kernel_rate(value: Any, where: str) -> None:
    """A kernel's rate: flat GFLOP/s, or a table over tile orders (:func:`_is_rate_table`)."""
    if not isinstance(value, list | tuple):
        _positive(value, where)
    elif not _is_rate_table(value):
        raise ValueError(f"{where} must be a positive GFLOP/s or [[tile, GFLOP/s], ...] at increasing tile orders, "
                         f"got {reprlib.repr(value)}")


def _keyed(checks: dict[str, Check], required: tuple[str, ...] = (), what: str = "keys") -> Check:
    """A check of a table whose keys are among ``checks`` (those in ``required`` present), each value checked by
    its key's check: a misspelt or misplaced key is refused rather than silently ignored."""

    def check(value: Any, where: str) -> None:
        table = _table(value, where)
        missing = [key for key in required if key not in table]
        if missing:
            raise ValueError(f"{where} needs {', '.join(missing)}")
        unknown = sorted(set(table) - set(checks))
        if unknown:
            raise ValueError(f"{where}: unknown {what} {unknown}; expected {', '.join(checks)}")
        for key, item in table.items():
            checks[key](item, f"{where}.{key}")

    return check


_CLASS_RATES = dict.fromkeys(KERNEL_CLASSES, _positive)

#: The entries of each table of a profile file (the built-in one included) and what each may hold.
_ENTRIES: dict[str, Check] = {
    "profiles": _keyed({
        "kind": _kind, "source": _text, "rates": _keyed(_CLASS_RATES, ("blas3",), "kernel classes"),
        "single_rates": _keyed(_CLASS_RATES, what="kernel classes"),
        "kernels": _keyed(dict.fromkeys(KERNEL_CLASS, _kernel_rate), what="kernels"),
        "power": _keyed(dict.fromkeys(("idle", *KERNEL_CLASSES), _non_negative)),
        "cores": _count, "half_tile": _non_negative, "task_overhead_s": _non_negative, "spin_s": _non_negative,
        "bandwidth_gbs": _positive, "latency_s": _non_negative, "memory_gb": _positive,
    }, ("kind", "rates")),
    "nodes": _keyed({"devices": _text, "source": _text}, ("devices",)),
    "interconnects": _keyed({"bandwidth_gbs": _positive, "latency_s": _non_negative, "source": _text},
                            ("bandwidth_gbs", "latency_s")),
}


def _check_file(data: Any, origin: str) -> None:
    """Refuse a parsed profile file the simulator could not use (wrong nesting, missing or unknown keys, values of
    the wrong type or sign), with a ValueError naming ``origin`` and the entry, as ``profiles.x.rates.blas3``."""
    if not isinstance(data, dict):
        raise ValueError(f"{origin}: a profile file must be a table (a JSON object), got {reprlib.repr(data)}")
    unknown = sorted(set(data) - set(_ENTRIES))
    if unknown:
        raise ValueError(f"{origin}: unknown profile tables {unknown}; expected {', '.join(_ENTRIES)}")
    for table, check in _ENTRIES.items():
        for name, entry in _table(data.get(table, {}), f"{origin}: {table}").items():
            check(entry, f"{origin}: {table}.{name}")


def load_file(path: str | Path) -> dict[str, Any]:
    """A profile file as a dictionary: TOML (``.toml``) or JSON (anything else)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError as error:  # UnicodeDecodeError, TOMLDecodeError, JSONDecodeError: say which file
        raise ValueError(f"{path}: {error}") from error


def host_profile() -> dict[str, Any]:
    """This machine's CPU as a profile: the calibrated per-core rates (``hetlapack calibrate``), or the rates
    the dispatch model derives from one quick GEMM timing when no calibration is cached, and the runtime's
    measured per-task overhead: what dispatch prices the tile path with."""
    from ..devices.cpu import CpuDevice  # noqa: PLC0415 - a real device, created only when asked for

    device = ModeledDevice.of(CpuDevice(), task_overhead_s=RUNTIME_TASK_OVERHEAD_S)
    return {"kind": "cpu", "cores": device.cores, "rates": dict(device.rates), "kernels": dict(device.kernels),
            "task_overhead_s": device.task_overhead_s, "source": device.source}


def registry(*files: str | Path) -> Registry:
    """The built-in profiles plus those in ``files`` (later ones override earlier ones by name)."""
    reg = Registry()
    reg.add(tomllib.loads(resources.files(__package__).joinpath(_BUILTIN).read_text()))
    for path in files:
        reg.add(load_file(path), origin=str(path))
    return reg


def parse(spec: str, *files: str | Path) -> list[ModeledDevice]:
    """Modeled devices for a spec such as ``"sandybridge:16,k20c,phi,k20beta"`` (see :class:`Registry`)."""
    return registry(*files).parse(spec)
