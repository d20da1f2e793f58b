"""Facts about the host machine that several layers ask: the cores this process may use, its L1 data cache.

A leaf module (it imports nothing of the package), so that the runtime, dispatch and the host path can ask it
without loading the devices.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

#: An L1 data cache of 32 KiB in lines of 64 bytes, assumed where the system does not say (Linux's sysfs does).
_DEFAULT_L1 = (32768, 64)

_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@functools.cache
def l1_data_cache() -> tuple[int, int]:
    """This machine's L1 data cache: (bytes, bytes per line)."""
    for index in sorted(_CACHES.glob("index*")):
        try:
            if (index / "level").read_text().strip() == "1" and (index / "type").read_text().strip() != "Instruction":
                size = (index / "size").read_text().strip().upper()
                scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
                line = int((index / "coherency_line_size").read_text())
                return int(size.rstrip("KM")) * scale, line
        except (OSError, ValueError):
            break
    return _DEFAULT_L1
