"""Energy counters read around a piece of work: Linux powercap (RAPL) for CPU packages, NVML for NVIDIA GPUs.

``with EnergyMeter() as meter: work()`` leaves ``meter.joules`` (joules per counter), ``meter.seconds`` and
``meter.watts``. Where no counter can be read (a virtual machine, RAPL restricted to root, no ``nvidia-ml-py``)
``meter.readable`` is false and ``meter.reason`` says why in one sentence; a missing or unreadable counter never
raises. NVML's counter changes only every 100 ms (H100): the meter waits for its next change on entry and on exit,
so a GPU adds up to two of those steps to the time metered.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

POWERCAP_ROOT = Path("/sys/class/powercap")


#: How long a reading waits for a coarse counter (NVML's) to change before leaving it out.
TICK_WAIT_S = 2.0


@dataclass(frozen=True)
class _Counter:
    """One cumulative energy counter: ``read()`` gives joules; it wraps to zero after ``wrap_joules`` (None: never).
    A ``coarse`` one changes only now and then (NVML's: on an H100, windows of tens of milliseconds read 0 J or
    1,869 W from it), so it is read at the moment it changes, and its power taken over the time between the two
    changes."""

    name: str
    read: Callable[[], float]
    wrap_joules: float | None
    coarse: bool = False


def _read_microjoules(path: Path) -> float:
    return int(path.read_text().strip()) / 1e6


def _rapl_counters(root: Path) -> tuple[list[_Counter], list[str]]:
    """Top-level RAPL zones under ``root`` (``intel-rapl:N``; sub-zones ``intel-rapl:N:M`` are inside them)."""
    if not root.is_dir():
        return [], [f"{root} does not exist (virtual machine or not Linux?)"]
    # psys (platform) zones already include the packages: skipped so that totals do not count them twice
    zones = sorted(z for z in root.glob("intel-rapl:*") if z.name.count(":") == 1
                   and _zone_name(z) != "psys")
    if not zones:
        return [], [f"{root} has no intel-rapl zones (virtual machine?)"]
    counters, problems = [], []
    for zone in zones:
        energy_file = zone / "energy_uj"
        try:
            _read_microjoules(energy_file)
        except PermissionError:
            problems.append(f"{energy_file} is not readable (permission denied: RAPL is root-only on many kernels "
                            "since 2020)")
            continue
        except (OSError, ValueError) as exc:
            problems.append(f"{energy_file} cannot be read ({exc})")
            continue
        try:
            wrap_joules = _read_microjoules(zone / "max_energy_range_uj")
        except (OSError, ValueError):
            wrap_joules = None
        counters.append(_Counter(_zone_name(zone), lambda f=energy_file: _read_microjoules(f), wrap_joules))
    return counters, problems


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip() or zone.name
    except OSError:
        return zone.name


def _nvml_counters() -> tuple[list[_Counter], list[str], object | None]:
    """Every GPU's total-energy counter through ``pynvml`` (millijoules), and the module to shut down after."""
    try:
        import pynvml  # noqa: PLC0415 - optional: nvidia-ml-py, in the gpu extra
    except ImportError:
        return [], ["nvidia-ml-py is not installed"], None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - pynvml raises NVMLError subclasses and OSError for a missing library
        return [], [f"NVML did not start ({exc})"], None
    counters, problems = [], []
    try:
        count = pynvml.nvmlDeviceGetCount()
        for index in range(count):
            read = _gpu_energy_reader(pynvml, pynvml.nvmlDeviceGetHandleByIndex(index))
            try:
                read()
            except pynvml.NVMLError as exc:
                problems.append(f"GPU {index} has no readable energy counter ({exc})")
                continue
            counters.append(_Counter(f"gpu:{index}", read, None, coarse=True))
    except pynvml.NVMLError as exc:
        problems.append(f"NVML could not list the GPUs ({exc})")
    if not counters and not problems:
        problems.append("NVML sees no GPU")
    return counters, problems, pynvml


def _gpu_energy_reader(pynvml, handle) -> Callable[[], float]:
    return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3


def _try_read(counter: _Counter) -> float | None:
    try:
        return counter.read()
    except Exception:  # noqa: BLE001 - OSError/ValueError from sysfs, NVMLError from NVML: the counter is left out
        return None


def _reading(counter: _Counter) -> tuple[float, float] | None:
    """(joules, when): a fine counter's value now; a coarse one's as it next changes, at the midpoint of the reads
    before and after the change (``None`` if it cannot be read, or a coarse one does not change within
    ``TICK_WAIT_S``)."""
    value = _try_read(counter)
    if value is None or not counter.coarse:
        return None if value is None else (value, time.perf_counter())
    unchanged_at = time.perf_counter()
    deadline = unchanged_at + TICK_WAIT_S
    while unchanged_at < deadline:
        time.sleep(1e-3)
        now = _try_read(counter)
        read_at = time.perf_counter()
        if now is None:
            return None
        if now != value:  # it changed between the last two reads: a late wake-up (10 ms seen under load) halved
            return now, (unchanged_at + read_at) / 2
        unchanged_at = read_at
    return None


class EnergyMeter:
    """Context manager: reads every readable energy counter on entry and exit.

    ``powercap_root`` is where RAPL zones are looked for (tests point it at a fake tree); ``gpus=False`` leaves
    NVML alone. After exit: ``joules`` (counter name -> joules, e.g. ``"package-0"``, ``"gpu:0"``: a coarse
    counter's over the time between its changes around the work), ``seconds``, ``watts`` (all counters together, each
    counter's mean power over its own interval), ``readable`` and ``reason`` (why nothing was readable; empty
    otherwise).
    """

    def __init__(self, powercap_root: Path = POWERCAP_ROOT, gpus: bool = True) -> None:
        self.powercap_root = Path(powercap_root)
        self.gpus = gpus
        self.joules: dict[str, float] = {}
        self.seconds = 0.0
        self.reason = ""
        self._started: list[tuple[_Counter, tuple[float, float]]] = []
        self._counter_watts: dict[str, float] = {}
        self._start_time = 0.0
        self._nvml: Any = None

    @property
    def readable(self) -> bool:
        return bool(self._started)

    @property
    def counter_names(self) -> list[str]:
        return [counter.name for counter, _ in self._started]

    @property
    def watts(self) -> float:
        """Mean power of all counters together, each over its own interval (0 before exit)."""
        return sum(self._counter_watts.values())

    def __enter__(self) -> Self:
        counters, problems = _rapl_counters(self.powercap_root)
        if self.gpus:
            gpu_counters, gpu_problems, self._nvml = _nvml_counters()
            counters += gpu_counters
            problems += gpu_problems
        else:
            problems.append("GPU counters were not asked for")
        # the coarse counters first: waiting for them to change must not fall inside the fine ones' interval
        readings = [(counter, _reading(counter)) for counter in sorted(counters, key=lambda c: not c.coarse)]
        self._started = [(counter, start) for counter, start in readings if start is not None]
        problems += [f"{counter.name} could not be read" + (f" or did not change within {TICK_WAIT_S:g} s"
                                                              if counter.coarse else "")
                     for counter, start in readings if start is None]
        if not self._started:
            self._shutdown_nvml()
            self.reason = "no readable energy counter: " + (" and ".join(problems)
                                                            or "every counter failed on its first reading")
        self._start_time = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = time.perf_counter() - self._start_time
        for counter, (start, started_at) in sorted(self._started, key=lambda item: item[0].coarse):  # fine first
            reading = _reading(counter)
            if reading is None:
                continue
            end, ended_at = reading
            used = end - start
            if used < 0:  # the counter wrapped around (once, we assume: RAPL wraps after minutes to hours)
                if counter.wrap_joules is None:
                    continue
                used += counter.wrap_joules
            self.joules[counter.name] = used
            interval = ended_at - started_at if counter.coarse else self.seconds
            self._counter_watts[counter.name] = used / interval if interval > 0 else 0.0
        self._shutdown_nvml()

    def _shutdown_nvml(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):  # shutting down is best effort
                self._nvml.nvmlShutdown()
            self._nvml = None
