"""A P x Q process grid over an MPI communicator, ranked row-major as BLACS's default grid."""

from __future__ import annotations

import math
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..forking import fork_safe_lock


#: Environment variables through which MPI launchers (MPICH's Hydra, Open MPI) announce the number of ranks.
LAUNCHER_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
#: ... and this process's rank among them.
LAUNCHER_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")


def find_mpiexec() -> str | None:
    """The ``mpiexec`` that belongs to this Python: beside ``sys.executable`` (a virtual environment's ``bin``, where
    the ``mpi`` extra installs MPICH's, found even when the environment is not activated), else the first on
    ``PATH``; ``None`` where there is none."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("mpiexec")


def launched_ranks() -> int:
    """How many ranks ``mpiexec`` started this process among (1 outside ``mpiexec``), read from the launcher's
    environment, so callers can tell without importing mpi4py."""
    sizes = [1]
    for name in LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name) or "1"
        try:
            sizes.append(int(value))
        except ValueError:
            raise ValueError(f"{name}={value!r}: the MPI launcher's number of ranks must be an integer") from None
    return max(sizes)


def launched_first() -> bool:
    """Whether this process is rank 0 of its ``mpiexec`` (or was not launched by one), read from the launcher's
    environment without starting MPI; a launcher that announces no rank counts every process as first."""
    ranks = [os.environ.get(name, "").strip() for name in LAUNCHER_RANK_VARIABLES]
    return all(rank in ("", "0") for rank in ranks)


def cap_blas_threads(comm: Any) -> int:
    """Give each rank's BLAS its share of its node's cores (at least 1 thread), so ranks sharing a node never run
    more BLAS threads than its cores: 4 ranks of 2 threads on 2 cores made a Cholesky of order 1000 60x slower.
    Returns the threads per rank."""
    from ..blas_threads import share_cores
    from ._comm import mpi

    node = comm.Split_type(mpi().COMM_TYPE_SHARED, key=comm.rank)
    ranks_on_node = node.size
    node.Free()
    return share_cores(ranks_on_node)


def _near_square(size: int) -> tuple[int, int]:
    """The factorisation ``P * Q == size`` with ``P <= Q`` and ``P`` as large as possible."""
    rows = max(p for p in range(1, math.isqrt(size) + 1) if size % p == 0)
    return rows, size // rows


#: The default grid (:meth:`ProcessGrid.default`), made by its first caller under the lock.
_default: "ProcessGrid | None" = None
_default_lock = fork_safe_lock()


@dataclass(frozen=True)
class ProcessGrid:
    """Rank ``r`` sits at process row ``r // Q`` and process column ``r % Q``.

    ``row_comm`` links the ranks of one process row (it spans the process columns, for broadcasts along a row);
    ``col_comm`` links the ranks of one process column. In ``row_comm`` a rank's rank is its process column, in
    ``col_comm`` its process row.
    """

    comm: Any
    nprow: int
    npcol: int
    myrow: int
    mycol: int
    row_comm: Any
    col_comm: Any
    column_major: bool = False

    @classmethod
    def create(cls, comm: Any = None, shape: tuple[int, int] | None = None) -> "ProcessGrid":
        """A grid over ``comm`` (default ``MPI.COMM_WORLD``), ``shape=(P, Q)`` or as square as possible; caps each
        rank's BLAS threads to its share of the node's cores (:func:`cap_blas_threads`)."""
        from ._comm import agree_arguments, mpi

        if comm is None:
            comm = mpi().COMM_WORLD
        agree_arguments(comm, shape=shape)  # a shape refused on some ranks only would leave the others in Split
        nprow, npcol = _near_square(comm.size) if shape is None else (int(shape[0]), int(shape[1]))
        if nprow < 1 or npcol < 1 or nprow * npcol != comm.size:
            raise ValueError(f"grid shape {shape} does not match the communicator's {comm.size} ranks")
        myrow, mycol = divmod(comm.rank, npcol)
        cap_blas_threads(comm)
        return cls(comm, nprow, npcol, myrow, mycol, comm.Split(myrow, mycol), comm.Split(mycol, myrow))

    @classmethod
    def default(cls) -> "ProcessGrid":
        """The grid over ``MPI.COMM_WORLD`` as square as possible, made once per process (collectively, by the first
        call): what ``grid=None`` means. Each grid holds two communicators of MPI's few thousand; one per call ran
        out after a thousand calls."""
        global _default
        with _default_lock:  # two threads creating it at once would run the same collectives concurrently
            if _default is None:
                _default = cls.create()
            return _default

    def free(self) -> None:
        """Collective: release the grid's row and column communicators (as ``MPI.Comm.Free``), for programs that
        create many grids; the grid and its matrices cannot be used afterwards. The default grid is not freed."""
        if _default is not None and {id(self.row_comm), id(self.col_comm)} & {id(_default.row_comm),
                                                                               id(_default.col_comm)}:
            raise ValueError("the default grid (grid=None) lives as long as the process; free only grids you created")
        self.row_comm.Free()
        self.col_comm.Free()

    @property
    def shape(self) -> tuple[int, int]:
        """``(P, Q)``."""
        return self.nprow, self.npcol

    @property
    def size(self) -> int:
        """Number of ranks, ``P * Q``."""
        return self.nprow * self.npcol

    def transposed(self) -> "ProcessGrid":
        """The same ranks seen as a Q x P grid (rows and columns exchanged), for transposed views."""
        return ProcessGrid(self.comm, self.npcol, self.nprow, self.mycol, self.myrow, self.col_comm, self.row_comm,
                           not self.column_major)

    def coords(self, rank: int) -> tuple[int, int]:
        """``(process row, process column)`` of ``rank`` in this grid."""
        if self.column_major:
            return rank % self.nprow, rank // self.nprow
        return divmod(rank, self.npcol)

    def rank_of(self, prow: int, pcol: int) -> int:
        """Rank in ``comm`` of the process at ``(prow, pcol)``."""
        return pcol * self.nprow + prow if self.column_major else prow * self.npcol + pcol

    def __repr__(self) -> str:
        return f"ProcessGrid({self.nprow}x{self.npcol}, row={self.myrow}, col={self.mycol})"
