"""Copy-in tasks: a tile algorithm reads its operand from the caller's array as it lies (C or Fortran order, any
strides, any dtype it converts from) one tile at a time, on the host's workers, instead of taking a whole-matrix
copy made before it starts (issue 36). Each copy is a task that writes its tile (or tile column), so the first panel
starts once its own tiles are in while the others are still being copied, a C-ordered matrix is transposed a tile
at a time in cache, and SciPy's ``check_finite`` is read in the same pass."""

from __future__ import annotations

import numpy as np

from ..contract.arrays import copy_tile_of_triangle
from ..contract.finite import FiniteCheck
from ..devices.cpu import HOST_MEMORY
from ..runtime import Runtime, TiledMatrix


def _copy_tile(device, tile: np.ndarray, source: np.ndarray, row: int, col: int, triangle: bool | None,
               check: FiniteCheck | None) -> None:
    """Copy ``source``, the tile of the matrix at ``(row, col)``, into ``tile``, keeping only ``triangle`` of the
    matrix (:func:`~hetlapack.contract.arrays.copy_tile_of_triangle`), and read every value for ``check``."""
    copy_tile_of_triangle(tile, source, row, col, triangle, None if check is None else check.read)


def _copy_column(device, column: np.ndarray, source: np.ndarray, bounds: tuple[int, ...],
                 check: FiniteCheck | None) -> None:
    """Copy ``source`` into the tile column ``column`` a tile at a time (at rows ``bounds``): each tile's
    transposing copy of a C-ordered source stays in the cache where the whole column's would not."""
    for r0, r1 in zip(bounds, bounds[1:]):
        _copy_tile(device, column[r0:r1], source[r0:r1], r0, 0, None, check)


def insert_copy_in(rt: Runtime, A: TiledMatrix, source: np.ndarray, check: FiniteCheck | None = None, *,
                   steps: int, scale: int, triangle: bool | None = None, clean: bool = False) -> None:
    """Insert the tasks that copy ``source`` (a 2-D array of ``A``'s shape) into ``A``'s array, pinned to the host:
    one a tile column, whose panels and updates read whole tile columns (LU, QR), or with ``triangle`` (``True``:
    lower, ``False``: upper; Cholesky, whose tasks read single tiles) one a tile. A right-looking tile algorithm of
    ``steps`` steps whose step ``k`` gives its tasks priorities up to ``scale * (steps - k) + scale - 1`` (as the
    tile algorithms do) finds each tile column copied at a priority above its first use. With ``triangle`` and
    ``clean`` the tiles of the other triangle are zeroed instead, at the lowest priority (no task of the
    factorization reads them), and so are the diagonal tiles' parts in it."""
    host = next(i for i, d in enumerate(rt.devices) if d.memory_space == HOST_MEMORY)
    for j in range(A.nt):
        c0, c1 = A.col_range(j)
        if triangle is None:
            column = A.block(0, A.mt, j, j + 1)
            rt.insert(_copy_column, column, source[:, c0:c1], A.row_bounds, check, reads=[], writes=[column],
                      priority=scale * (steps - j + 1), device=host, name="copy-in")
            continue
        for i in range(A.mt):
            r0, r1 = A.row_range(i)
            other = clean and (i < j if triangle else i > j)
            rt.insert(_copy_tile, A(i, j), source[r0:r1, c0:c1], r0, c0, triangle if clean else None, check,
                      reads=[], writes=[A(i, j)], priority=0 if other else scale * (steps - j + 1), device=host,
                      name="copy-in")
