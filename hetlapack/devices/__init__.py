"""Devices: the :class:`Device` protocol and the devices detected on this machine."""

from __future__ import annotations

from .base import KERNEL_CLASS, Device
from .cpu import HOST_MEMORY, CpuDevice
from .emulated import EmulatedAccelerator


def available() -> list[Device]:
    """The devices this process can compute on (the host CPU; accelerators once their device files exist)."""
    return [CpuDevice()]


__all__ = ["HOST_MEMORY", "KERNEL_CLASS", "CpuDevice", "Device", "EmulatedAccelerator", "available"]
