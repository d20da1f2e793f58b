"""A distributed Cholesky factorization and solve under MPI (2-D block-cyclic over a process grid).

Run: mpiexec -n 4 python examples/mpi_cholesky.py [n]
"""

import sys

import numpy as np
from mpi4py import MPI

import hetlapack.mpi as hm


def main(n: int = 2000, block: int = 128) -> float:
    grid = hm.ProcessGrid.create(MPI.COMM_WORLD)

    def spd_tile(rows: slice, cols: slice) -> np.ndarray:
        """Each rank builds only its own tiles of A = exp(-|i - j| / 50) + n I (symmetric positive definite)."""
        i = np.arange(rows.start, rows.stop)[:, None]
        j = np.arange(cols.start, cols.stop)[None, :]
        return np.exp(-np.abs(i - j) / 50.0) + n * (i == j)

    a = hm.DistributedMatrix.from_function(n, n, spd_tile, block=block, grid=grid)
    factor = hm.cholesky(a, lower=True)
    b = np.ones(n)
    x = hm.cho_solve((factor, True), b)
    full = spd_tile(slice(0, n), slice(0, n))
    residual = float(np.linalg.norm(full @ x - b) / np.linalg.norm(b))
    if MPI.COMM_WORLD.rank == 0:
        print(f"{grid.shape[0]}x{grid.shape[1]} grid, n={n}: relative residual of the solve {residual:.1e}")
    return residual


if __name__ == "__main__":
    assert main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000) < 1e-12
