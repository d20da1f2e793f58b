"""Multi-node factorizations over MPI: a 2-D block-cyclic :class:`DistributedMatrix` and SciPy-named routines.

``mpi4py`` is imported on first use of a communicator, never by ``import hetlapack``. Every function here is
collective: all ranks of the matrix's grid call it with the same arguments.

>>> from mpi4py import MPI                                                   # doctest: +SKIP
>>> import hetlapack.mpi as hm                                               # doctest: +SKIP
>>> grid = hm.ProcessGrid.create(MPI.COMM_WORLD)                             # doctest: +SKIP
>>> A = hm.DistributedMatrix.from_function(n, n, fn, block=256, grid=grid)   # doctest: +SKIP
>>> L = hm.cholesky(A, lower=True); a = L.gather(root=0)                     # doctest: +SKIP
"""

from ._comm import RemoteRankError, Traffic, reset_traffic, traffic
from .grid import ProcessGrid
from .linalg import LinAlgError, LinAlgWarning, cho_solve, cholesky, lu_factor, lu_solve, qr
from .matrix import DEFAULT_BLOCK, DistributedMatrix, numroc

__all__ = [
    "DEFAULT_BLOCK",
    "DistributedMatrix",
    "LinAlgError",
    "LinAlgWarning",
    "ProcessGrid",
    "RemoteRankError",
    "Traffic",
    "cho_solve",
    "cholesky",
    "lu_factor",
    "lu_solve",
    "numroc",
    "qr",
    "reset_traffic",
    "traffic",
]
