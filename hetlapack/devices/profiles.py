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
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .base import KERNEL_CLASSES
from .modeled import ModeledDevice, Power

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

    def add(self, data: dict[str, Any]) -> None:
        """Merge a parsed profile file (tables ``profiles``, ``nodes``, ``interconnects``)."""
        unknown = set(data) - {"profiles", "nodes", "interconnects"}
        if unknown:
            raise ValueError(f"unknown profile tables {sorted(unknown)}; expected profiles, nodes, interconnects")
        for name, profile in data.get("profiles", {}).items():
            _check_profile(name, profile)
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


def _check_profile(name: str, profile: dict[str, Any]) -> None:
    if profile.get("kind") not in ("cpu", "accelerator"):
        raise ValueError(f"profile {name!r}: kind must be 'cpu' or 'accelerator'")
    rates = profile.get("rates")
    if not isinstance(rates, dict) or "blas3" not in rates:
        raise ValueError(f"profile {name!r}: needs rates with at least blas3 (GFLOP/s)")
    unknown = set(rates) - set(KERNEL_CLASSES)
    if unknown:
        raise ValueError(f"profile {name!r}: unknown kernel classes {sorted(unknown)}; use {KERNEL_CLASSES}")


def load_file(path: str | Path) -> dict[str, Any]:
    """A profile file as a dictionary: TOML (``.toml``) or JSON (anything else)."""
    path = Path(path)
    text = path.read_text()
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def host_profile() -> dict[str, Any]:
    """This machine's CPU as a profile: the calibrated per-core rates (``hetlapack calibrate``), or the rates
    the dispatch model derives from one quick GEMM timing when no calibration is cached, and the runtime's
    measured per-task overhead: what dispatch prices the tile path with."""
    from ..dispatch.model import RUNTIME_TASK_OVERHEAD_S  # noqa: PLC0415 - dispatch imports devices
    from .cpu import CpuDevice  # noqa: PLC0415 - a real device, created only when asked for

    device = ModeledDevice.of(CpuDevice(), task_overhead_s=RUNTIME_TASK_OVERHEAD_S)
    return {"kind": "cpu", "cores": device.cores, "rates": dict(device.rates), "kernels": dict(device.kernels),
            "task_overhead_s": device.task_overhead_s, "source": device.source}


def registry(*files: str | Path) -> Registry:
    """The built-in profiles plus those in ``files`` (later ones override earlier ones by name)."""
    reg = Registry()
    reg.add(tomllib.loads(resources.files(__package__).joinpath(_BUILTIN).read_text()))
    for path in files:
        reg.add(load_file(path))
    return reg


def parse(spec: str, *files: str | Path) -> list[ModeledDevice]:
    """Modeled devices for a spec such as ``"sandybridge:16,k20c,phi,k20beta"`` (see :class:`Registry`)."""
    return registry(*files).parse(spec)
