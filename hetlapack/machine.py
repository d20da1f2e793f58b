"""Facts about the host machine that several layers ask: the cores this process may use, its caches, its memory.

A leaf module (it imports nothing of the package), so that the runtime, dispatch and the host path can ask it
without loading the devices.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

#: An L1 data cache of 32 KiB in lines of 64 bytes, assumed where the system does not say (Linux's sysfs does).
_DEFAULT_L1 = (32768, 64)

#: A core's L2 cache of 1 MiB, assumed where the system does not say.
_DEFAULT_L2 = 1 << 20

_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def physical_memory() -> int | None:
    """Bytes of this machine's memory, where the system says."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _caches() -> list[tuple[int, str, int, int]]:
    """The data and unified caches sysfs lists for CPU 0: (level, type, bytes, bytes per line); empty where it
    lists none."""
    caches = []
    for index in sorted(_CACHES.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
            line = int((index / "coherency_line_size").read_text())
            caches.append((int((index / "level").read_text()), kind, int(size.rstrip("KM")) * scale, line))
        except (OSError, ValueError):
            return []
    return [cache for cache in caches if cache[1] != "Instruction"]


@functools.cache
def l1_data_cache() -> tuple[int, int]:
    """This machine's L1 data cache: (bytes, bytes per line)."""
    level_one = [(size, line) for level, _, size, line in _caches() if level == 1]
    return level_one[0] if level_one else _DEFAULT_L1


@functools.cache
def l2_cache() -> int:
    """Bytes of this machine's L2 cache (a core's)."""
    level_two = [size for level, _, size, _ in _caches() if level == 2]
    return level_two[0] if level_two else _DEFAULT_L2


@functools.cache
def last_level_cache() -> int | None:
    """Bytes of this machine's last-level cache (shared by the cores where it is an L3), where the system says."""
    sizes = [(level, size) for level, _, size, _ in _caches()]
    return max(sizes)[1] if sizes else None


@functools.cache
def vector_bytes() -> int:
    """Bytes of the widest SIMD register the compiled kernels use: 64 with AVX-512, 32 with AVX, else 16.

    The features numba compiles for: the host's as LLVM sees them, unless ``NUMBA_CPU_FEATURES`` names others (or
    ``NUMBA_CPU_NAME=generic`` none), as for kernels cached to run on other machines.
    """
    from numba.core import config  # noqa: PLC0415 - numba's compiler, loaded only by the compiled kernels

    if config.CPU_FEATURES is not None:
        enabled = {flag[1:] for flag in config.CPU_FEATURES.split(",") if flag.startswith("+")}
    else:
        from llvmlite import binding  # noqa: PLC0415 - as above

        enabled = {name for name, on in binding.get_host_cpu_features().items() if on}
    return 64 if "avx512f" in enabled else 32 if "avx" in enabled else 16
