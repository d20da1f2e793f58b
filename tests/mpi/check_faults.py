"""Faults on one rank under ``mpiexec -n N python -m mpi4py check_faults.py``: every rank must raise, none hang.

The last rank alone is given bad input; each rank prints ``RAISED name <error>`` when it raised, and the launcher
(tests/test_faults.py) counts one line per rank and check within its timeout.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from mpi4py import MPI

import hetlapack.mpi as hm

COMM = MPI.COMM_WORLD
LAST = COMM.size - 1
N = 24


def raises(name: str, call) -> None:
    try:
        call()
    except ValueError as error:
        print(f"RAISED {name} rank {COMM.rank}: {error}", flush=True)
    else:
        print(f"RETURNED {name} rank {COMM.rank}", flush=True)


def main() -> None:
    a = np.random.default_rng(0).random((N, N)) + N * np.eye(N)
    grid = hm.ProcessGrid.default()
    lu, piv = hm.lu_factor(hm.DistributedMatrix.from_global(a if COMM.rank == 0 else None, grid=grid, block=4))
    b = np.ones(N)
    for name, bad in (("pivot-outside", lambda p: np.r_[N + 5, p[1:]]), ("pivots-short", lambda p: p[:-1])):
        mine = bad(piv) if COMM.rank == LAST else piv
        raises(name, lambda: hm.lu_solve((lu, mine), b))
    raises("src-not-whole", lambda: hm.DistributedMatrix.from_global(a if COMM.rank == 0 else None, grid=grid,
                                                                      block=4, src=(0.5, 0)))
    np.testing.assert_allclose(hm.lu_solve((lu, piv), b), sla.solve(a, b), rtol=1e-10)  # still usable after
    print(f"DONE rank {COMM.rank}", flush=True)


main()
