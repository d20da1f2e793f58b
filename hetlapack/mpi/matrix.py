"""DistributedMatrix: a dense matrix dealt 2-D block-cyclic over a process grid, ScaLAPACK's layout.

Block row ``I`` (rows ``I*mb .. I*mb+mb``) lives on process row ``(I + rsrc) % P`` and block column ``J`` on process
column ``(J + csrc) % Q``; each rank keeps its blocks in one Fortran-ordered local array of ``numroc(m) x
numroc(n)`` entries, exactly the local array of a ScaLAPACK descriptor, so :meth:`DistributedMatrix.descriptor`
hands it to ScaLAPACK or other MPI libraries without copies.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import DTypeLike

from ..dtypes import native
from ._comm import agree_arguments, agreed, allgather_objects
from .grid import ProcessGrid

#: Default square block: large enough that the trailing GEMMs run at BLAS-3 speed, small enough that the LU/QR
#: panel, gathered onto one rank and factored there, stays off the critical path. ScaLAPACK users pick 64-256.
DEFAULT_BLOCK = 256

_DESCRIPTOR_DENSE = 1


def numroc(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """Number of rows (or columns) of an ``n``-long, ``nb``-blocked dimension that process ``iproc`` owns."""
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks, extra_rows = divmod(n, nb)
    count = (nblocks // nprocs) * nb
    extra_blocks = nblocks % nprocs
    if mydist < extra_blocks:
        count += nb
    elif mydist == extra_blocks:
        count += extra_rows
    return count


def owned_indices(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> np.ndarray:
    """Global indices, in local storage order, of the rows (or columns) that process ``iproc`` owns."""
    first_block = (nprocs + iproc - isrcproc) % nprocs
    blocks = np.arange(first_block, -(-n // nb), nprocs, dtype=np.int64)
    indices = (blocks[:, None] * nb + np.arange(nb, dtype=np.int64)).ravel()
    return indices[indices < n]


def _integer(value) -> bool:
    """Whether ``value`` is an integer (Python's or NumPy's; not a bool, not 2.5): sizes and ranks must be."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _as_block(block: int | tuple[int, int]) -> tuple[int, int]:
    """``(mb, nb)`` from one block order or a pair of them: positive integers (2.5 is refused, not truncated)."""
    pair = (block, block) if np.isscalar(block) else tuple(block) if isinstance(block, Sequence) else ()
    if len(pair) != 2 or not all(_integer(size) and size >= 1 for size in pair):
        raise ValueError(f"block sizes must be positive integers (one, or a pair), got {block!r}")
    return int(pair[0]), int(pair[1])


def _checked_src(src: tuple[int, int], grid: ProcessGrid) -> tuple[int, int]:
    """``src`` as integers, refused unless it names a process of ``grid`` (ScaLAPACK's RSRC < P, CSRC < Q); a
    coordinate that is not a whole number names none."""
    rsrc, csrc = (int(x) if float(x).is_integer() else -1 for x in src)
    if not (0 <= rsrc < grid.nprow and 0 <= csrc < grid.npcol):
        raise ValueError(f"source process {tuple(src)} is outside the {grid.nprow}x{grid.npcol} process grid")
    return rsrc, csrc


def _agree_on_root(comm, root: int, **arguments) -> None:
    """Collective: every rank names the same ``root`` (and ``arguments``), and ``root`` is a rank of ``comm``."""
    agree_arguments(comm, root=root, **arguments)
    if not _integer(root) or not 0 <= root < comm.size:
        raise ValueError(f"root must be a rank of the grid's {comm.size} ranks (0 to {comm.size - 1}), got {root}")


class DistributedMatrix:
    """An ``m x n`` matrix in 2-D block-cyclic layout; ``local`` is this rank's Fortran-ordered piece."""

    def __init__(self, grid: ProcessGrid, shape: tuple[int, int], block: int | tuple[int, int], local: np.ndarray,
                 src: tuple[int, int] = (0, 0)):
        self.grid = grid
        self.shape = (int(shape[0]), int(shape[1]))
        self.block = _as_block(block)
        self.src = _checked_src(src, grid)
        m, n = self.shape
        mb, nb = self.block
        self.rows = owned_indices(m, mb, grid.myrow, self.src[0], grid.nprow)
        self.cols = owned_indices(n, nb, grid.mycol, self.src[1], grid.npcol)
        if local.shape != (self.rows.size, self.cols.size):
            needed = (self.rows.size, self.cols.size)
            raise ValueError(f"local array has shape {local.shape}, the layout needs {needed}")
        self.local = local if local.dtype.isnative else local.astype(native(local.dtype), order="F")

    # ----------------------------------------------------------------- construction
    @classmethod
    def zeros(cls, m: int, n: int, *, block: int | tuple[int, int] = DEFAULT_BLOCK, grid: ProcessGrid | None = None,
              dtype: DTypeLike = np.float64, src: tuple[int, int] = (0, 0)) -> "DistributedMatrix":
        """A distributed zero matrix."""
        if int(m) != m or int(n) != n or m < 0 or n < 0:
            raise ValueError(f"matrix dimensions must be non-negative integers, got {(m, n)}")
        grid = ProcessGrid.default() if grid is None else grid
        mb, nb = _as_block(block)
        src = _checked_src(src, grid)
        mloc = numroc(m, mb, grid.myrow, src[0], grid.nprow)
        nloc = numroc(n, nb, grid.mycol, src[1], grid.npcol)
        return cls(grid, (m, n), (mb, nb), np.zeros((mloc, nloc), dtype=native(dtype), order="F"), src)

    @classmethod
    def from_function(cls, m: int, n: int, fn: Callable[[slice, slice], np.ndarray], *,
                      block: int | tuple[int, int] = DEFAULT_BLOCK, grid: ProcessGrid | None = None,
                      dtype: DTypeLike | None = None, src: tuple[int, int] = (0, 0)) -> "DistributedMatrix":
        """Build each rank's tiles locally: ``fn(rows, cols)`` returns the global block ``A[rows, cols]``.

        ``fn`` is called once per tile this rank owns, with global ``slice`` objects; no data moves between ranks.
        ``dtype`` defaults to the result type of the tiles over all ranks. An exception in ``fn`` on any rank is
        raised on every rank.
        """
        grid = ProcessGrid.default() if grid is None else grid
        out = cls.zeros(m, n, block=block, grid=grid, dtype=dtype or np.float64, src=src)
        mb, nb = out.block
        tiles = {}
        with agreed(grid.comm):
            for li in range(0, out.rows.size, mb):
                for lj in range(0, out.cols.size, nb):
                    g_row, g_col = int(out.rows[li]), int(out.cols[lj])
                    rows = slice(g_row, min(g_row + mb, m))
                    cols = slice(g_col, min(g_col + nb, n))
                    tile = np.asarray(fn(rows, cols))
                    if tile.shape != (rows.stop - rows.start, cols.stop - cols.start):
                        raise ValueError(f"fn{(rows, cols)} returned shape {tile.shape}")
                    if dtype is None:
                        tiles[li, lj] = tile
                    else:
                        out.local[li:li + tile.shape[0], lj:lj + tile.shape[1]] = tile
        if dtype is None:
            kinds = [t.dtype for t in tiles.values()]
            mine = np.result_type(*kinds) if kinds else None
            agreed_types = [t for t in allgather_objects(grid.comm, mine) if t is not None]
            out.local = out.local.astype(native(np.result_type(*agreed_types) if agreed_types else np.float64),
                                         order="F")
            for (li, lj), tile in tiles.items():
                out.local[li:li + tile.shape[0], lj:lj + tile.shape[1]] = tile
        return out

    @classmethod
    def from_global(cls, a: np.ndarray | None, *, grid: ProcessGrid | None = None, root: int = 0,
                    block: int | tuple[int, int] = DEFAULT_BLOCK, src: tuple[int, int] = (0, 0)
                    ) -> "DistributedMatrix":
        """Scatter the 2-D array ``a`` held by ``root`` (other ranks pass ``None``); ``a`` is not modified.

        Every rank must pass the same ``root``, ``block`` and ``src`` (``ValueError`` on every rank otherwise).
        """
        from ._comm import traffic

        grid = ProcessGrid.default() if grid is None else grid
        comm = grid.comm
        _agree_on_root(comm, root, block=block, src=src)
        meta = None
        with agreed(comm):
            if comm.rank == root:
                a = np.asarray(a)
                if a.ndim != 2:
                    raise ValueError("expected a 2-D array")
                if a.dtype.kind not in "biufc":  # MPI sends numbers: object and string arrays cannot travel
                    raise ValueError(f"a DistributedMatrix holds numbers (bool, integer, floating or complex), got "
                                     f"dtype {a.dtype}; convert with a.astype(float) first")
                meta = (a.shape, native(a.dtype))
        shape, dtype = comm.bcast(meta, root=root)
        out = cls.zeros(*shape, block=block, grid=grid, dtype=dtype, src=src)
        if comm.rank == root:
            mb, nb = out.block
            for rank in range(comm.size):
                prow, pcol = grid.coords(rank)
                rows = owned_indices(shape[0], mb, prow, out.src[0], grid.nprow)
                cols = owned_indices(shape[1], nb, pcol, out.src[1], grid.npcol)
                piece = np.ascontiguousarray(a[np.ix_(rows, cols)].T, dtype=dtype)
                if rank == root:
                    out.local[...] = piece.T
                elif piece.size:
                    comm.Send(piece, dest=rank, tag=77)
                    traffic().add("scatter", piece.nbytes, 0)
        elif out.local.size:
            comm.Recv(out.local.T, source=root, tag=77)
            traffic().add("scatter", 0, out.local.nbytes)
        return out

    def gather(self, root: int = 0) -> np.ndarray | None:
        """The global matrix on ``root`` (``None`` elsewhere); for results and tests, never used internally."""
        from ._comm import traffic

        comm = self.grid.comm
        _agree_on_root(comm, root)
        if comm.rank != root:
            if self.local.size:
                comm.Send(np.ascontiguousarray(self.local.T), dest=root, tag=78)
                traffic().add("gather", self.local.nbytes, 0)
            return None
        out = np.empty(self.shape, dtype=self.dtype)
        mb, nb = self.block
        for rank in range(comm.size):
            prow, pcol = self.grid.coords(rank)
            rows = owned_indices(self.shape[0], mb, prow, self.src[0], self.grid.nprow)
            cols = owned_indices(self.shape[1], nb, pcol, self.src[1], self.grid.npcol)
            if rank == root:
                piece = self.local
            else:
                if rows.size == 0 or cols.size == 0:
                    continue
                buf = np.empty((cols.size, rows.size), dtype=self.dtype)
                comm.Recv(buf, source=rank, tag=78)
                traffic().add("gather", 0, buf.nbytes)
                piece = buf.T
            out[np.ix_(rows, cols)] = piece
        return out

    @classmethod
    def from_replicated(cls, a: np.ndarray, *, grid: ProcessGrid, block: int | tuple[int, int],
                        src: tuple[int, int] = (0, 0)) -> "DistributedMatrix":
        """Distribute an array that every rank already holds in full (each keeps its own blocks, no messages)."""
        out = cls.zeros(*a.shape, block=block, grid=grid, dtype=a.dtype, src=src)
        out.local[...] = a[np.ix_(out.rows, out.cols)]
        return out

    # ----------------------------------------------------------------- views and metadata
    @property
    def layout(self) -> str:
        """The global shape, dtype, blocking, source process and grid: what every rank must agree on."""
        (m, n), (mb, nb), (nprow, npcol) = self.shape, self.block, self.grid.shape
        return f"{m}x{n} {self.dtype.name} in {mb}x{nb} blocks from process {self.src} on a {nprow}x{npcol} grid"

    @property
    def dtype(self) -> np.dtype:
        """Element type of the local storage (the same on every rank)."""
        return self.local.dtype

    def copy(self) -> "DistributedMatrix":
        """A deep copy (local storage copied, Fortran order kept)."""
        return DistributedMatrix(self.grid, self.shape, self.block, self.local.copy(order="F"), self.src)

    def like(self, local: np.ndarray, shape: tuple[int, int] | None = None) -> "DistributedMatrix":
        """A matrix with this one's grid, blocking and source process over the given local storage."""
        return DistributedMatrix(self.grid, shape or self.shape, self.block, local, self.src)

    def transposed_view(self) -> "DistributedMatrix":
        """``A^T`` sharing this matrix's storage, laid out over the transposed (Q x P) grid."""
        return DistributedMatrix(self.grid.transposed(), self.shape[::-1], self.block[::-1], self.local.T,
                                 self.src[::-1])

    def local_rows_from(self, start: int) -> int:
        """Local index of the first local row whose global index is ``>= start``."""
        return int(np.searchsorted(self.rows, start))

    def local_cols_from(self, start: int) -> int:
        """Local index of the first local column whose global index is ``>= start``."""
        return int(np.searchsorted(self.cols, start))

    def row_owner(self, global_row: int) -> int:
        """Process row that owns ``global_row``."""
        return (global_row // self.block[0] + self.src[0]) % self.grid.nprow

    def col_owner(self, global_col: int) -> int:
        """Process column that owns ``global_col``."""
        return (global_col // self.block[1] + self.src[1]) % self.grid.npcol

    def descriptor(self, context: int = 0) -> np.ndarray:
        """ScaLAPACK's array descriptor ``[DTYPE, CTXT, M, N, MB, NB, RSRC, CSRC, LLD]`` (int32).

        ``context`` is the BLACS context of a row-major ``P x Q`` grid over the same communicator; the local array
        is ``self.local`` (Fortran order, leading dimension ``LLD``).
        """
        return np.array([_DESCRIPTOR_DENSE, context, *self.shape, *self.block, *self.src,
                         max(1, self.rows.size)], dtype=np.int32)

    def __repr__(self) -> str:
        return (f"DistributedMatrix(shape={self.shape}, block={self.block}, src={self.src}, dtype={self.dtype}, "
                f"{self.grid!r}, local={self.local.shape})")
