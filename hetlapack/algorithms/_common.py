"""Argument checks shared by the tile algorithms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LAPACK_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def check_matrix(a: np.ndarray, routine: str, square: bool = False) -> None:
    """Raise ``ValueError`` unless ``a`` is a 2-D array of a LAPACK dtype (square if ``square``)."""
    if not isinstance(a, np.ndarray) or a.ndim != 2:
        raise ValueError(f"{routine}: expected a 2-D array")
    if square and a.shape[0] != a.shape[1]:
        raise ValueError(f"{routine}: expected a square matrix, got shape {a.shape}")
    if a.dtype not in LAPACK_DTYPES:
        raise ValueError(f"{routine}: unsupported dtype {a.dtype}; expected float32, float64, complex64 or complex128")


def check_fortran_matrix(a: np.ndarray, routine: str, square: bool = False) -> None:
    """Raise ``ValueError`` unless ``a`` is a writable 2-D Fortran-ordered array of a LAPACK dtype (what the tile
    algorithms factor in place)."""
    check_matrix(a, routine, square)
    if a.size and not a.flags.f_contiguous:
        raise ValueError(f"{routine}: the tile algorithms work in place on a Fortran-ordered (F-contiguous) array")
    if not a.flags.writeable:
        raise ValueError(f"{routine}: the array is read-only")


def check_tile(tile: int | Sequence[int]) -> int | tuple[int, ...]:
    """The tile order as a positive ``int``, or tile boundaries ``(0, b1, ...)`` as a tuple (tiles of varying
    size, as the two-level layout cuts the longer side of a matrix; the tiled matrix checks them against its
    shape, each axis taking the boundaries below its length)."""
    if isinstance(tile, (list, tuple, np.ndarray)):
        return tuple(int(b) for b in tile)
    if int(tile) != tile or tile < 1:
        raise ValueError(f"tile must be a positive integer, got {tile!r}")
    return int(tile)


def widest_tile(tile: int | tuple[int, ...]) -> int:
    """The largest tile order of :func:`check_tile`'s result (what per-panel workspaces are sized by)."""
    return tile if isinstance(tile, int) else int(max(np.diff(tile), default=1))


def flop_scale(dtype: np.dtype) -> float:
    """Real flops per flop of the real-arithmetic count: 4 for complex dtypes (LAWN 41), else 1."""
    return 4.0 if np.dtype(dtype).kind == "c" else 1.0


def panel_bounds(bounds: tuple[int, ...], kmin: int) -> tuple[int, ...]:
    """The column tile boundaries up to ``kmin``: where the panels of an LU or QR of ``min(m, n) = kmin`` end."""
    return (*(b for b in bounds if b < kmin), kmin) if kmin else (0,)


def trailing_blocks(rt: Any, first: int, stop: int) -> list[tuple[int, int]]:
    """Tile columns ``first .. stop-1`` of a step's trailing update, as ``(j0, j1)`` blocks that one task each
    updates. On a runtime of the CPU alone they are cut into one block more than it has workers, of near-equal
    widths: one LARFB call on a wider block runs faster (one core, 3600 x 384 reflectors: 75-79 GFLOP/s on 384
    columns, 80-81 on 768-1536), and the extra block leaves work for a worker that finishes its part early. The
    tile QR of order 4000 on a 2-core Xeon VM, alternating, best of 5: 0.658-0.714 s against 0.718-0.792 with a
    task per column at tile 256, 0.677-0.733 against 0.709-0.753 at 384; forming Q alike. LU's updates were level
    at tile 256 and 2-5% slower at 384-512 (fewer tasks, more idle), so LU keeps a task per column. On other
    runtimes every column is a block of its own: among several devices each is its owner's, as the layout deals
    them, and no accelerator was timed with blocks."""
    columns = stop - first
    if columns <= 0:
        return []
    devices = rt.devices
    cpu_alone = len(devices) == 1 and devices[0].kind == "cpu"
    parts = min(devices[0].workers + 1, columns) if cpu_alone else columns
    bounds = [first + columns * part // parts for part in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))
