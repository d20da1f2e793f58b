"""An emulated accelerator: the host's BLAS, but a memory space of its own, so every transfer really happens.

It runs the whole accelerator path on machines without a GPU (CI): its data lives in private host arrays that
never alias the caller's, it has its own worker thread, and it executes kernels at the CPU's real speed (no
sleeps, no fake timings). It differs from :class:`~hetlapack.devices.cuda.CudaDevice` only in the array module
and the library calls.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ..forking import fork_safe_lock, reset_after_fork
from .cpu import CpuDevice

#: Bytes of freed buffers kept per emulated device index for reuse, as a GPU memory pool keeps freed blocks:
#: fresh host pages cost a page fault each on first touch, which would dominate the emulation.
POOL_BYTES = 512 << 20
_pools: dict[int, dict[int, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
_pooled_bytes: dict[int, int] = defaultdict(int)
_pool_lock = fork_safe_lock()


@reset_after_fork
def _empty_pools() -> None:
    """A forked child starts with empty pools: a thread of the parent may have been changing them at the fork."""
    _pools.clear()
    _pooled_bytes.clear()


class EmulatedDevice(CpuDevice):
    """Accelerator number ``index`` (named ``"emulated:{index}"``); counts the bytes it uploads and downloads.

    Several can be instantiated; each has a memory space of its own even when two share an index.
    ``memory_bytes`` gives it a memory capacity (default: none), so that a matrix larger than it streams through;
    the freed buffers it keeps for reuse count against that capacity, so that it bounds the host memory the device
    holds (uncapped, they are kept up to ``POOL_BYTES`` per index, across calls, as a GPU's memory pool keeps them).
    """

    kind = "accelerator"

    def __init__(self, index: int = 0, workers: int = 1, memory_bytes: int | None = None) -> None:
        if int(index) != index or index < 0:
            raise ValueError(f"EmulatedDevice: index must be a non-negative integer, got {index!r}")
        if memory_bytes is not None and (int(memory_bytes) != memory_bytes or memory_bytes <= 0):
            raise ValueError(f"EmulatedDevice: memory_bytes must be a positive integer, got {memory_bytes!r}")
        super().__init__(workers=workers, name=f"emulated:{int(index)}")
        self.index = int(index)
        self.memory_bytes = None if memory_bytes is None else int(memory_bytes)
        self.uploaded_bytes = 0
        self.downloaded_bytes = 0
        self._held_bytes = 0

    @property
    def memory_space(self) -> str:
        return f"{self.name}@{id(self):x}"

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        with _pool_lock:
            kept = _pools[self.index][nbytes]
            buffer = kept.pop() if kept else None
            if buffer is not None:
                _pooled_bytes[self.index] -= nbytes
            self._held_bytes += nbytes
        if buffer is None:
            buffer = np.empty(nbytes, dtype=np.uint8)
        return buffer.view(dtype).reshape(shape, order="F")

    def free(self, data: np.ndarray) -> None:
        buffer = data
        while buffer.base is not None:
            buffer = buffer.base
        if not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1:
            return  # not made by empty()
        with _pool_lock:
            self._held_bytes = max(0, self._held_bytes - buffer.nbytes)  # a buffer of another device object too
            limit = POOL_BYTES if self.memory_bytes is None else self.memory_bytes - self._held_bytes
            if _pooled_bytes[self.index] + buffer.nbytes <= limit:
                _pools[self.index][buffer.nbytes].append(buffer)
                _pooled_bytes[self.index] += buffer.nbytes

    def to_device(self, host: np.ndarray) -> np.ndarray:
        self.uploaded_bytes += host.nbytes
        return np.array(host, order="F", copy=True)

    def upload(self, host: np.ndarray, out: np.ndarray) -> None:
        self.uploaded_bytes += host.nbytes
        out[...] = host

    def to_host(self, data: np.ndarray, out: np.ndarray) -> None:
        self.downloaded_bytes += data.nbytes
        out[...] = data

    def __repr__(self) -> str:
        return f"EmulatedDevice({self.index})"
