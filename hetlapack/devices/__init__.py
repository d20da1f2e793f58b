"""Devices: the :class:`Device` protocol, the devices detected on this machine, and resolving user specs.

``available()`` lists what this process can compute on (the host CPU, plus ``cuda:N`` for every GPU CuPy
sees); ``resolve`` turns what a user wrote in ``hetlapack.using(devices=[...])`` into Device objects.
CuPy is imported only when a CUDA device is detected or asked for, never by ``import hetlapack``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..hardware import detect
from ..machine import usable_cores
from .base import KERNEL_CLASS, Device
from .cpu import HOST_MEMORY, CpuDevice
from .emulated import EmulatedDevice


def _gpu_count() -> int:
    return len(detect().gpus)


def _cuda(index: int) -> Device:
    from .cuda import CudaDevice  # noqa: PLC0415 - imports CuPy

    return CudaDevice(index)


def available_names() -> list[str]:
    """The names of the devices this process can compute on, without creating them: the host CPU, then
    ``cuda:0 … cuda:N-1`` when CuPy sees GPUs."""
    return ["cpu", *(f"cuda:{i}" for i in range(_gpu_count()))]


def available() -> list[Device]:
    """The devices :func:`available_names` names, each as it computes alone (the CPU with one worker per core)."""
    return [_by_name(name, accelerators=0) for name in available_names()]


def _canonical(name: str) -> str | None:
    """The name of the device ``name`` denotes here (``"emulated:01"`` is ``"emulated:1"``): ``cpu``,
    ``emulated:N``, or ``cuda:N`` for a GPU CuPy sees; ``None`` for no device."""
    if name == "cpu":
        return name
    kind, _, number = name.partition(":")
    if not (number.isascii() and number.isdigit()):
        return None
    if kind == "emulated" or (kind == "cuda" and int(number) < _gpu_count()):
        return f"{kind}:{int(number)}"
    return None


def _by_name(name: str, accelerators: int) -> Device:
    """The device a name :func:`check` accepted denotes. Among accelerators the CPU is one worker whose kernels use
    all its cores: it factors the panels, and a panel on one core would throttle LU and QR (seed 001: MAGMA's hybrid
    panel is one multithreaded LAPACK call; ``hetlapack simulate`` shows the one-core panel's cost). Alone, it has one
    worker per core."""
    if name == "cpu":
        return CpuDevice(workers=1 if accelerators else usable_cores())
    kind, _, number = name.partition(":")
    return EmulatedDevice(int(number)) if kind == "emulated" else _cuda(int(number))


def check(spec: Iterable[str | Device]) -> None:
    """Raise :func:`resolve`'s error for ``spec`` without creating its devices: ``ValueError`` for an item that is
    neither a Device nor a name, for an unknown name (the message lists what is available), or for a device named
    twice."""
    names = []
    for item in spec:
        if isinstance(item, Device):
            names.append(item.name)
            continue
        if not isinstance(item, str):
            raise ValueError(f"a device is a name such as 'cpu' or 'cuda:0' or a Device object, got {item!r}")
        canonical = _canonical(item)
        if canonical is None:
            known = ", ".join(repr(name) for name in available_names())
            raise ValueError(f"unknown device {item!r}; available devices: {known} (and 'emulated:N' for emulation)")
        names.append(canonical)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"devices named more than once: {', '.join(repeated)}")


def resolve(spec: Iterable[str | Device] | None) -> list[Device]:
    """Device objects for a sequence of names (``"cpu"``, ``"cuda:0"``, ``"emulated:1"``) and Device objects.

    ``None`` or an empty sequence means the host CPU alone. Raises :func:`check`'s ``ValueError`` for an unknown name
    or a device named twice.
    """
    items = list(spec or ())
    if not items:
        return [CpuDevice()]
    check(items)
    accelerators = sum(1 for item in items if (item.kind if isinstance(item, Device) else item) != "cpu")
    return [item if isinstance(item, Device) else _by_name(item, accelerators) for item in items]


__all__ = ["HOST_MEMORY", "KERNEL_CLASS", "CpuDevice", "Device", "EmulatedDevice", "available", "available_names",
           "check", "resolve"]
