"""An emulated accelerator: the host's BLAS, but a memory space of its own, so every transfer really happens.

It runs the whole accelerator path on machines without a GPU (CI): its data lives in private host arrays that
never alias the caller's, it has its own worker thread, and it executes kernels at the CPU's real speed (no
sleeps, no fake timings). It differs from :class:`~hetlapack.devices.cuda.CudaDevice` only in the array module
and the library calls.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np

from .cpu import CpuDevice

#: Buffers kept per emulated device index and allocation (shape, dtype), as a GPU memory pool keeps freed
#: blocks: fresh host pages cost a page fault each on first touch, which would dominate the emulation.
POOL_DEPTH = 2
_pools: dict[int, dict[tuple, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
_pool_lock = threading.Lock()


class EmulatedDevice(CpuDevice):
    """Accelerator number ``index`` (named ``"emulated:{index}"``); counts the bytes it uploads and downloads.

    Several can be instantiated; each has a memory space of its own even when two share an index.
    """

    kind = "accelerator"

    def __init__(self, index: int = 0, workers: int = 1) -> None:
        if int(index) != index or index < 0:
            raise ValueError(f"EmulatedDevice: index must be a non-negative integer, got {index!r}")
        super().__init__(workers=workers, name=f"emulated:{int(index)}")
        self.index = int(index)
        self.uploaded_bytes = 0
        self.downloaded_bytes = 0

    @property
    def memory_space(self) -> str:
        return f"{self.name}@{id(self):x}"

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        key = (tuple(shape), np.dtype(dtype).str)
        with _pool_lock:
            kept = _pools[self.index][key]
            if kept:
                return kept.pop()
        return np.empty(shape, dtype=dtype, order="F")

    def free(self, data: np.ndarray) -> None:
        key = (data.shape, data.dtype.str)
        with _pool_lock:
            kept = _pools[self.index][key]
            if len(kept) < POOL_DEPTH:
                kept.append(data)

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
