"""An emulated accelerator: the host's BLAS, but a memory space of its own, so every transfer really happens.

It exercises the runtime's coherence (copies, invalidation, write-back) on machines without a GPU, and is the
device the simulator and the heterogeneous tests build on.
"""

from __future__ import annotations

import numpy as np

from .cpu import CpuDevice


class EmulatedAccelerator(CpuDevice):
    """A device whose data lives in private host copies; counts the bytes it uploads and downloads."""

    kind = "accelerator"

    def __init__(self, name: str = "emulated", workers: int = 1) -> None:
        super().__init__(workers=workers, name=name)
        self.uploaded_bytes = 0
        self.downloaded_bytes = 0

    @property
    def memory_space(self) -> str:
        return f"emulated:{self.name}"

    def to_device(self, host: np.ndarray) -> np.ndarray:
        self.uploaded_bytes += host.nbytes
        return np.array(host, order="F", copy=True)

    def to_host(self, data: np.ndarray, out: np.ndarray) -> None:
        self.downloaded_bytes += data.nbytes
        out[...] = data
