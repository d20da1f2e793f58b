"""numba-cuda device kernels of the CUDA device's tile work: panel packing and LASWP on transposed storage.

- ``pack_panel`` / ``unpack_panel``: a panel is a 2-D view into a larger device matrix (leading dimension > rows);
  before a transfer it is packed into one contiguous buffer so that the link sees one large copy instead of one per
  column (seed 002 §2.3), and a received buffer is unpacked into its view. Thread ``(i, j)`` copies element
  ``(i, j)``; ``i`` varies fastest within a warp, so column-major panels are read and written coalesced.
- ``laswp_rows``: LAPACK's row interchanges ``A[k] <-> A[piv[k]]``, ``k = k1 .. k2-1`` in order, one thread per column.
  On **transposed storage** (seed 000 §6.6: the matrix kept row-major, so each row of ``A`` is contiguous) the
  threads of a warp touch neighbouring addresses of the two rows, a coalesced swap; on column-major storage the same
  kernel is correct, only strided. Pivots stay on the device (no host round trip).

CuPy arrays pass without copies (``__cuda_array_interface__``); under Numba's CUDA simulator the same kernels run on
NumPy arrays, which is how CI checks them. They ran on an H100 in the GPU tests (the hybrid path's transfers and
LASWP); their speed was not measured apart.
"""

from __future__ import annotations

import math

from numba import cuda

from .cuda_kernels import THREADS_PER_BLOCK, array_module, launch

#: 2-D thread block of the copy kernels: 32 rows (one warp along a column) by 8 columns.
COPY_BLOCK = (32, 8)


@cuda.jit
def _copy_matrix(source, target):
    """``target[i, j] = source[i, j]`` for thread ``(i, j)``."""
    i, j = cuda.grid(2)
    if i < target.shape[0] and j < target.shape[1]:
        target[i, j] = source[i, j]


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


def _copy(xp, source, target) -> None:
    if target.size:
        grid = tuple(math.ceil(extent / threads) for extent, threads in zip(target.shape, COPY_BLOCK))
        launch(_copy_matrix, grid, COPY_BLOCK, xp, source, target)


def pack_panel(panel):
    """A contiguous column-major copy of the 2-D device view ``panel``, made on the device."""
    xp = array_module(panel)
    packed = xp.empty(panel.shape, dtype=panel.dtype, order="F")
    _copy(xp, panel, packed)
    return packed


def unpack_panel(packed, panel) -> None:
    """Copy the contiguous ``packed`` buffer into the 2-D device view ``panel`` (same shape), on the device."""
    if packed.shape != panel.shape:
        raise ValueError(f"unpack_panel: buffer of shape {packed.shape} for a panel of shape {panel.shape}")
    _copy(array_module(panel), packed, panel)


def laswp_rows(a, piv, k1: int = 0, k2: int | None = None, *, backward: bool = False) -> None:
    """LAPACK's LASWP in place on the 2-D device array ``a``: rows ``k`` and ``piv[k]`` (0-based) interchanged for
    ``k = k1 .. k2-1`` in order (``k2`` defaults to ``len(piv)``), or in reverse order when ``backward`` (LASWP with a
    negative increment: it undoes the forward swaps)."""
    k2 = len(piv) if k2 is None else k2
    if a.shape[1] and k2 > k1:
        xp = array_module(a)
        blocks = math.ceil(a.shape[1] / THREADS_PER_BLOCK)
        launch(_swap_rows, blocks, THREADS_PER_BLOCK, xp, a, piv, int(k1), int(k2), bool(backward))
