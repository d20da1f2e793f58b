"""Data handles: a matrix cut into tiles, and hashable handles for single tiles and blocks of tiles.

A handle names data for the runtime; ``parts`` are the single tiles it covers (the unit of dependency tracking
and of coherence) and ``host`` is its view into the user's Fortran-ordered array (no copy). A *virtual* matrix
has a shape and a dtype but no array: the simulator inserts tasks on it without any data existing.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np


def _bounds(extent: int, tiles: int | Sequence[int]) -> tuple[int, ...]:
    """Tile boundaries ``0 = b0 < b1 < ... = extent`` from a tile order (the last tile may be ragged) or a
    list of boundaries reaching at least ``extent`` (tiles of varying size, as the two-level layout cuts them).

    Either is a cut of the line that each axis takes up to its own length: the boundaries below ``extent``, then
    ``extent``. One cut of a rectangular matrix's longer side so serves both its axes and its factors' (Q,
    pivots), and their tiles agree up to the shorter side, as the LU and QR panels need."""
    if isinstance(tiles, (int, np.integer)):
        step = max(1, int(tiles))
        return (*range(0, extent, step), extent) if extent else (0,)
    bounds = tuple(int(b) for b in tiles)
    if not bounds or bounds[0] != 0 or bounds[-1] < extent or any(b <= a for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"tile boundaries must rise strictly from 0 to at least {extent}, got {list(bounds)}")
    return (*(b for b in bounds if b < extent), extent) if extent else (0,)


class TiledMatrix:
    """A Fortran-ordered host array cut into tiles: ``tile_rows`` / ``tile_cols`` are tile orders (the last
    tiles may be ragged) or explicit boundary lists, each axis taking the boundaries below its length. With
    ``array=None`` the matrix is virtual and ``shape`` and ``dtype`` describe it."""

    def __init__(self, array: np.ndarray | None, tile_rows: int | Sequence[int],
                 tile_cols: int | Sequence[int] | None = None, name: str = "A", *,
                 shape: tuple[int, int] | None = None, dtype: np.dtype | str | None = None) -> None:
        if array is not None:
            if array.ndim != 2 or (array.size and array.shape[0] > 1 and array.strides[0] != array.itemsize):
                raise ValueError("a tiled matrix needs a 2-D array with contiguous columns (Fortran order)")
            shape, dtype = array.shape, array.dtype
        elif shape is None or dtype is None:
            raise ValueError("a virtual tiled matrix needs a shape and a dtype")
        self.array = array
        self.name = name
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(dtype)
        self.row_bounds = _bounds(self.shape[0], tile_rows)
        self.col_bounds = _bounds(self.shape[1], tile_rows if tile_cols is None else tile_cols)
        self.mt = len(self.row_bounds) - 1
        self.nt = len(self.col_bounds) - 1
        # Handles are held weakly: a handle holds its matrix, so a strong cache would make a cycle that keeps the
        # array (the caller's factors, or a working copy) alive after the call until the cyclic collector runs.
        self._blocks: weakref.WeakValueDictionary[tuple[int, int, int, int], Block] = weakref.WeakValueDictionary()

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def row_range(self, i0: int, i1: int | None = None) -> tuple[int, int]:
        """Element rows covered by tile rows ``i0 .. i1-1``."""
        i1 = i0 + 1 if i1 is None else i1
        return self.row_bounds[i0], self.row_bounds[i1]

    def col_range(self, j0: int, j1: int | None = None) -> tuple[int, int]:
        """Element columns covered by tile columns ``j0 .. j1-1``."""
        j1 = j0 + 1 if j1 is None else j1
        return self.col_bounds[j0], self.col_bounds[j1]

    def rows(self, i0: int, i1: int | None = None) -> int:
        """How many element rows tile rows ``i0 .. i1-1`` cover."""
        r0, r1 = self.row_range(i0, i1)
        return r1 - r0

    def cols(self, j0: int, j1: int | None = None) -> int:
        """How many element columns tile columns ``j0 .. j1-1`` cover."""
        c0, c1 = self.col_range(j0, j1)
        return c1 - c0

    def __call__(self, i: int, j: int) -> Block:
        """The handle of tile ``(i, j)``."""
        return self.block(i, i + 1, j, j + 1)

    def block(self, i0: int, i1: int, j0: int, j1: int) -> Block:
        """The handle of tile rows ``i0:i1`` by tile columns ``j0:j1`` (one contiguous view); one object per
        rectangle while any task or dictionary holds it."""
        key = (i0, i1, j0, j1)
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = Block(self, i0, i1, j0, j1)
        return block

    def __repr__(self) -> str:
        kind = "virtual " if self.array is None else ""
        return f"TiledMatrix({kind}{self.name}, shape={self.shape}, tiles={self.mt}x{self.nt})"


class Block:
    """A hashable handle for a rectangle of tiles of a :class:`TiledMatrix`."""

    __slots__ = ("matrix", "i0", "i1", "j0", "j1", "_key", "_hash", "_parts", "__weakref__")

    def __init__(self, matrix: TiledMatrix, i0: int, i1: int, j0: int, j1: int) -> None:
        self.matrix, self.i0, self.i1, self.j0, self.j1 = matrix, i0, i1, j0, j1
        self._key = (id(matrix), i0, i1, j0, j1)
        self._hash = hash(self._key)
        self._parts: tuple[Block, ...] | None = None

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Block) and self._key == other._key

    @property
    def is_tile(self) -> bool:
        """Whether the block is one tile."""
        return self.i1 - self.i0 == 1 and self.j1 - self.j0 == 1

    @property
    def parts(self) -> tuple[Block, ...]:
        """The single tiles this block covers (a tile's is not kept: it would hold the tile itself, a cycle)."""
        if self.is_tile:
            return (self,)
        if self._parts is None:
            self._parts = tuple(self.matrix(i, j) for j in range(self.j0, self.j1) for i in range(self.i0, self.i1))
        return self._parts

    @property
    def shape(self) -> tuple[int, int]:
        """Element rows and columns of the block."""
        return self.matrix.rows(self.i0, self.i1), self.matrix.cols(self.j0, self.j1)

    @property
    def host(self) -> np.ndarray:
        """The view into the host array (shares memory)."""
        r0, r1 = self.matrix.row_range(self.i0, self.i1)
        c0, c1 = self.matrix.col_range(self.j0, self.j1)
        return self.matrix.array[r0:r1, c0:c1]

    @property
    def nbytes(self) -> int:
        """Bytes the block's elements take (what a copy of it moves)."""
        rows, cols = self.shape
        return rows * cols * self.matrix.itemsize

    def __repr__(self) -> str:
        rows = f"{self.i0}" if self.i1 - self.i0 == 1 else f"{self.i0}:{self.i1}"
        cols = f"{self.j0}" if self.j1 - self.j0 == 1 else f"{self.j0}:{self.j1}"
        return f"{self.matrix.name}[{rows},{cols}]"
