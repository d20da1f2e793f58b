"""Argument checks shared by the tile algorithms."""

from __future__ import annotations

from collections.abc import Sequence

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
