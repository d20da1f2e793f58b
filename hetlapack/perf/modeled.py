"""Modeled devices: a device described by rates, a link and power figures instead of kernels that run.

The simulator (:class:`hetlapack.runtime.SimulatedRuntime`) prices each task on a ModeledDevice: the task's
flops over the device's rate for the task's kernel class (seed 000 §6.2: one rate per BLAS level), scaled by how
far the task's tile is from the size the device needs to reach that rate, plus a fixed per-task overhead.
Transfers cost ``latency + bytes / bandwidth`` over the device's link; an accelerator's ``memory_bytes`` bounds
the tiles it holds (the simulated runtime evicts and writes back as the real one does). Power is idle plus a busy
increment per kernel class. Profiles of named hardware live in :mod:`hetlapack.perf.profiles`;
:meth:`ModeledDevice.of` models a real device from its calibrated capability, which is how dispatch prices the
tile paths.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from ..devices.base import DEFAULT_CAPABILITY, KERNEL_CLASS, Device
from ..machine import usable_cores
from ..devices.cpu import HOST_MEMORY
from .calibration import scaled_reference_kernels
from . import rates

_spaces = itertools.count()


@dataclass
class Power:
    """Watts: ``idle`` while powered, ``busy[kernel class]`` with every core (or the whole accelerator) busy."""

    idle: float = 0.0
    busy: dict[str, float] = field(default_factory=dict)

    def busy_watts(self, kernel_class: str) -> float:
        return self.busy.get(kernel_class, self.busy.get("blas3", self.idle))


#: A kernel's rate: flat GFLOP/s, or ``((tile, GFLOP/s), ...)`` measured at increasing tile orders.
KernelRate = float | tuple[tuple[float, float], ...]


def interpolate(table: tuple[tuple[float, float], ...], x: float) -> float:
    """Piecewise-linear interpolation in log ``x`` over ``(x, y)`` pairs sorted by ``x``, flat beyond the ends."""
    if x <= table[0][0]:
        return table[0][1]
    for (x0, y0), (x1, y1) in zip(table, table[1:]):
        if x <= x1:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + t * (y1 - y0)
    return table[-1][1]


@dataclass
class ModeledDevice:
    """A device in the simulator. ``rates`` are GFLOP/s (GB/s for the memory class) of one core for a CPU and
    of the whole device for an accelerator in double precision, reached at tiles much larger than
    ``half_tile`` (the Hockney half-performance size: a tile of that order runs at half the rate);
    ``single_rates`` are the single-precision ones (default: twice ``rates``). ``kernels`` gives single kernels
    a rate of their own, flat or as a table over tile orders (as :mod:`~hetlapack.perf.calibration`
    measures them), which replaces the class rate and ``half_tile``. A CPU's ``workers`` share its ``cores``
    evenly, as the real runtime's BLAS threads do. ``host_compute``: its kernels run on the host's cores (this
    machine's CPU and emulated accelerators; not a profile's devices), which for an accelerator are its ``cores``
    too: the simulated runtime runs no more such kernels at once than those cores hold. ``spin_s``: how long a
    CPU's cores keep drawing busy power after a task while their threads spin-wait. ``memory_bytes``: an
    accelerator's memory for tiles (``None``: unlimited)."""

    name: str
    kind: str
    rates: dict[str, float]
    single_rates: dict[str, float] = field(default_factory=dict)
    cores: int = 1
    workers: int = 1
    kernels: dict[str, KernelRate] = field(default_factory=dict)
    half_tile: float = 0.0
    task_overhead_s: float = 0.0
    bandwidth_gbs: float = float("inf")
    latency_s: float = 0.0
    power: Power = field(default_factory=Power)
    spin_s: float = 0.0
    source: str = ""
    host_compute: bool = False
    memory_space: str = ""
    memory_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("cpu", "accelerator", "node"):
            raise ValueError(f"a modeled device's kind must be 'cpu', 'accelerator' or 'node', got {self.kind!r}")
        if self.workers < 1 or self.cores < 1:
            raise ValueError(f"{self.name}: workers and cores must be positive")
        if self.kind == "cpu" and self.workers > self.cores:
            raise ValueError(f"{self.name}: {self.workers} workers on {self.cores} cores; a CPU's workers share its "
                             "cores, at most one worker a core")
        self.kernels = {k: v if isinstance(v, (int, float)) else tuple((float(t), float(r)) for t, r in v)
                        for k, v in self.kernels.items()}
        flat = [v for v in self.kernels.values() if isinstance(v, float | int)]
        tabled = [r for v in self.kernels.values() if not isinstance(v, float | int) for _, r in v]
        if any(rate <= 0 for rate in (*self.rates.values(), *self.single_rates.values(), *flat, *tabled)):
            raise ValueError(f"{self.name}: rates must be positive")
        if self.memory_bytes is not None and self.memory_bytes <= 0:
            raise ValueError(f"{self.name}: memory_bytes must be positive (None: unlimited)")
        if not self.memory_space:
            self.memory_space = HOST_MEMORY if self.kind == "cpu" else f"{self.name}#{next(_spaces)}"

    @property
    def threads(self) -> int:
        """Cores each worker's kernels use (a CPU's cores shared by its workers; 1 for an accelerator)."""
        return max(1, self.cores // self.workers) if self.kind == "cpu" else 1

    def _class_rate(self, kernel_class: str, single: bool) -> float:
        double = self.rates.get(kernel_class, DEFAULT_CAPABILITY[kernel_class])
        return self.single_rates.get(kernel_class, 2 * double) if single else double

    @property
    def capability(self) -> dict[str, float]:
        """GFLOP/s of one worker per kernel class, as placement and layouts read it from real devices."""
        return {c: self._class_rate(c, False) * self.threads for c in DEFAULT_CAPABILITY}

    @property
    def weight(self) -> float:
        return self.capability["blas3"] * self.workers

    def rate(self, kernel: str, tile: int, single: bool = False) -> float:
        """GFLOP/s (GB/s for memory-class kernels) one worker reaches on ``kernel`` with tiles of order ``tile``."""
        kernel_class = KERNEL_CLASS.get(kernel, "blas3")
        own = self.kernels.get(kernel)
        if own is None:
            peak = self._class_rate(kernel_class, single) * tile / (tile + self.half_tile)
        else:
            peak = float(own) if isinstance(own, int | float) else interpolate(own, tile)
            if single:
                peak *= self._class_rate(kernel_class, True) / self._class_rate(kernel_class, False)
        return peak * self.threads

    def seconds(self, kernel: str, flops: float, tile: int, single: bool = False) -> float:
        """Modeled seconds of one task: its work at :meth:`rate`, plus the fixed per-task overhead."""
        return flops / (self.rate(kernel, max(tile, 1), single) * 1e9) + self.task_overhead_s

    def transfer_seconds(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` over this device's link in one direction."""
        return self.latency_s + nbytes / (self.bandwidth_gbs * 1e9)

    def watts(self, kernel: str | None, busy_threads: int) -> float:
        """Power drawn while ``busy_threads`` of its cores run ``kernel`` (``None``: idle)."""
        if kernel is None or busy_threads <= 0:
            return self.power.idle
        share = min(1.0, busy_threads / self.cores) if self.kind == "cpu" else 1.0
        busy = self.power.busy_watts(KERNEL_CLASS.get(kernel, "blas3"))
        return self.power.idle + share * (busy - self.power.idle)

    @classmethod
    def of(cls, device: Device, task_overhead_s: float = 0.0) -> ModeledDevice:
        """The model of a real device: its calibrated rates (per core: calibration times one BLAS thread), kernel
        tables, link, workers, memory capacity and whether it computes on the host's cores (then its ``cores`` are
        the host's, which it shares with the CPU). A host-computing device without calibrated kernel tables gets the
        reference machine's, scaled by this machine's GEMM rate."""
        kernels = dict(device.kernel_rates)
        if not kernels and device.host_compute:

            kernels = scaled_reference_kernels(rates.host_gemm_gflops("d") / usable_cores())
        cpu = device.kind == "cpu"
        return cls(name=device.name, kind="cpu" if cpu else "accelerator",
                   rates={c: device.capability.get(c, DEFAULT_CAPABILITY[c]) for c in DEFAULT_CAPABILITY},
                   kernels=kernels, cores=getattr(device, "cores", 1) if cpu or device.host_compute else 1,
                   workers=device.workers,
                   task_overhead_s=task_overhead_s, host_compute=device.host_compute,
                   bandwidth_gbs=device.capability.get("bandwidth_gbs", float("inf")),
                   latency_s=device.capability.get("latency_s", 0.0),
                   memory_space=device.memory_space, memory_bytes=device.memory_capacity(),
                   source=f"{device.name} on this machine")
