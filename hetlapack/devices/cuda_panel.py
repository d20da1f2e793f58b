"""The numba-cuda device kernel of the CUDA device's tile work: LASWP on transposed storage.

- ``laswp_rows``: LAPACK's row interchanges ``A[k] <-> A[piv[k]]``, ``k = k1 .. k2-1`` in order, one thread per column.
  On **transposed storage** (seed 000 §6.6: the matrix kept row-major, so each row of ``A`` is contiguous) the
  threads of a warp touch neighbouring addresses of the two rows, a coalesced swap; on column-major storage the same
  kernel is correct, only strided. Pivots stay on the device (no host round trip).

CuPy arrays pass without copies (``__cuda_array_interface__``); under Numba's CUDA simulator the same kernel runs on
NumPy arrays, which is how CI checks them. It ran on an H100 in the GPU tests (the hybrid path's LU and the
gpu path's ``getrs``). Packing a tile view before it crosses the link (seed 002 §2.3) was a kernel here too; on an
H100 its launch took about 0.22 ms against 0.02 ms for CuPy's own strided copy, which the CUDA device now uses.
"""

from __future__ import annotations

import math

from numba import cuda

from .cuda_launch import THREADS_PER_BLOCK, array_module, launch


@cuda.jit
def _swap_rows(a, piv, k1, k2, backward):
    """Apply the interchanges ``a[k] <-> a[piv[k]]`` for ``k = k1 .. k2-1`` (in reverse when ``backward``) to column
    ``cuda.grid(1)``."""
    j = cuda.grid(1)
    if j < a.shape[1]:
        for step in range(k2 - k1):
            k = k2 - 1 - step if backward else k1 + step
            p = piv[k]
            if p != k:
                held = a[k, j]
                a[k, j] = a[p, j]
                a[p, j] = held


def laswp_rows(a, piv, k1: int = 0, k2: int | None = None, *, backward: bool = False) -> None:
    """LAPACK's LASWP in place on the 2-D device array ``a``: rows ``k`` and ``piv[k]`` (0-based) interchanged for
    ``k = k1 .. k2-1`` in order (``k2`` defaults to ``len(piv)``), or in reverse order when ``backward`` (LASWP with a
    negative increment: it undoes the forward swaps)."""
    k2 = len(piv) if k2 is None else k2
    if a.shape[1] and k2 > k1:
        xp = array_module(a)
        blocks = math.ceil(a.shape[1] / THREADS_PER_BLOCK)
        launch(_swap_rows, blocks, THREADS_PER_BLOCK, xp, a, piv, int(k1), int(k2), bool(backward))
