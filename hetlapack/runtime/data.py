"""Data handles: a matrix cut into tiles, and hashable handles for single tiles and blocks of tiles.

A handle names data for the runtime; ``parts`` are the single tiles it covers (the unit of dependency tracking
and of coherence) and ``host`` is its view into the user's Fortran-ordered array (no copy).
"""

from __future__ import annotations

import numpy as np


class TiledMatrix:
    """A Fortran-ordered host array cut into ``tile_rows x tile_cols`` tiles (the last ones may be ragged)."""

    def __init__(self, array: np.ndarray, tile_rows: int, tile_cols: int | None = None, name: str = "A") -> None:
        if array.ndim != 2 or (array.size and array.shape[0] > 1 and array.strides[0] != array.itemsize):
            raise ValueError("a tiled matrix needs a 2-D array with contiguous columns (Fortran order)")
        self.array = array
        self.name = name
        self.tile_rows = max(1, tile_rows)
        self.tile_cols = max(1, tile_cols if tile_cols is not None else tile_rows)
        self.mt = -(-array.shape[0] // self.tile_rows)
        self.nt = -(-array.shape[1] // self.tile_cols)

    def row_range(self, i0: int, i1: int | None = None) -> tuple[int, int]:
        """Element rows covered by tile rows ``i0 .. i1-1``."""
        i1 = i0 + 1 if i1 is None else i1
        return i0 * self.tile_rows, min(i1 * self.tile_rows, self.array.shape[0])

    def col_range(self, j0: int, j1: int | None = None) -> tuple[int, int]:
        """Element columns covered by tile columns ``j0 .. j1-1``."""
        j1 = j0 + 1 if j1 is None else j1
        return j0 * self.tile_cols, min(j1 * self.tile_cols, self.array.shape[1])

    def __call__(self, i: int, j: int) -> Block:
        """The handle of tile ``(i, j)``."""
        return Block(self, i, i + 1, j, j + 1)

    def block(self, i0: int, i1: int, j0: int, j1: int) -> Block:
        """The handle of tile rows ``i0:i1`` by tile columns ``j0:j1`` (one contiguous view)."""
        return Block(self, i0, i1, j0, j1)

    def __repr__(self) -> str:
        return f"TiledMatrix({self.name}, shape={self.array.shape}, tile={self.tile_rows}x{self.tile_cols})"


class Block:
    """A hashable handle for a rectangle of tiles of a :class:`TiledMatrix`."""

    __slots__ = ("matrix", "i0", "i1", "j0", "j1", "_key")

    def __init__(self, matrix: TiledMatrix, i0: int, i1: int, j0: int, j1: int) -> None:
        self.matrix, self.i0, self.i1, self.j0, self.j1 = matrix, i0, i1, j0, j1
        self._key = (id(matrix), i0, i1, j0, j1)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Block) and self._key == other._key

    @property
    def is_tile(self) -> bool:
        return self.i1 - self.i0 == 1 and self.j1 - self.j0 == 1

    @property
    def parts(self) -> tuple[Block, ...]:
        """The single tiles this block covers."""
        if self.is_tile:
            return (self,)
        return tuple(Block(self.matrix, i, i + 1, j, j + 1)
                     for j in range(self.j0, self.j1) for i in range(self.i0, self.i1))

    @property
    def host(self) -> np.ndarray:
        """The view into the host array (shares memory)."""
        r0, r1 = self.matrix.row_range(self.i0, self.i1)
        c0, c1 = self.matrix.col_range(self.j0, self.j1)
        return self.matrix.array[r0:r1, c0:c1]

    @property
    def nbytes(self) -> int:
        r0, r1 = self.matrix.row_range(self.i0, self.i1)
        c0, c1 = self.matrix.col_range(self.j0, self.j1)
        return (r1 - r0) * (c1 - c0) * self.matrix.array.itemsize

    def __repr__(self) -> str:
        rows = f"{self.i0}" if self.i1 - self.i0 == 1 else f"{self.i0}:{self.i1}"
        cols = f"{self.j0}" if self.j1 - self.j0 == 1 else f"{self.j0}:{self.j1}"
        return f"{self.matrix.name}[{rows},{cols}]"
