"""Triangular solves with a distributed factor and a right-hand side replicated on every rank.

The factor stays distributed (O(n^2/p) per rank); the right-hand side ``X`` (``n x nrhs``, small next to the factor)
is replicated. Block ``k`` of the solution is found fan-in style::

    S = sum_{j solved} op(T)[k, j] X[j]    local GEMMs by the ranks owning block row (op = N) or column (op = T, C)
                                           k of T, summed over that process row or column
    X[k] = op(T[k, k])^{-1} (X[k] - S)     on the owner of T[k, k], then broadcast to every rank

so each block of ``T`` is read once, where it lives.
"""

from __future__ import annotations

import numpy as np

from . import _local
from ._comm import agreed, allreduce_sum, bcast_array
from .matrix import DistributedMatrix


def replicate(b: DistributedMatrix, dtype: np.dtype) -> np.ndarray:
    """The whole of a (thin) distributed matrix on every rank in ``dtype``, by one sum-allreduce of the owned entries
    (each entry has one owner, so the sum is exact in a dtype that holds it; MPI sums no bools)."""
    full = np.zeros(b.shape, dtype=dtype, order="F")
    full[np.ix_(b.rows, b.cols)] = b.local
    return np.asfortranarray(allreduce_sum(b.grid.comm, full))


def trsm(t: DistributedMatrix, x: np.ndarray, lower: bool, trans: int = 0, unit_diagonal: bool = False) -> None:
    """Overwrite the replicated ``x`` with ``op(T)^{-1} x``; ``trans`` 0 (N), 1 (T) or 2 (C), as LAPACK's."""
    grid, nb = t.grid, t.block[0]
    n = t.shape[0]
    forward = lower == (trans == 0)
    starts = range(0, n, nb) if forward else reversed(range(0, n, nb))
    for k0 in starts:
        k1 = min(n, k0 + nb)
        prow, pcol = t.row_owner(k0), t.col_owner(k0)
        r0, r1 = t.local_rows_from(k0), t.local_rows_from(k1)
        c0, c1 = t.local_cols_from(k0), t.local_cols_from(k1)
        partial = np.zeros((k1 - k0, x.shape[1]), dtype=x.dtype, order="F")
        by_row = trans == 0 and grid.myrow == prow
        by_col = trans != 0 and grid.mycol == pcol
        with agreed(grid.comm):
            if by_row:
                solved = slice(0, c0) if forward else slice(c1, t.cols.size)
                _local.gemm(1.0, t.local[r0:r1, solved].astype(x.dtype, copy=False), x[t.cols[solved]], 0.0, partial)
            elif by_col:
                solved = slice(0, r0) if forward else slice(r1, t.rows.size)
                _local.gemm(1.0, t.local[solved, c0:c1].astype(x.dtype, copy=False), x[t.rows[solved]], 0.0,
                            partial, trans_a=trans)
        if by_row or by_col:
            partial = allreduce_sum(grid.row_comm if by_row else grid.col_comm, partial)
        owner = grid.rank_of(prow, pcol)
        block = None
        with agreed(grid.comm):
            if grid.comm.rank == owner:
                block = np.asfortranarray(x[k0:k1] - partial)
                _local.trsm(1.0, t.local[r0:r1, c0:c1].astype(x.dtype, copy=False), block, lower=lower,
                            trans_a=trans, unit_diagonal=unit_diagonal)
        x[k0:k1] = bcast_array(grid.comm, block, owner, (k1 - k0, x.shape[1]), x.dtype)


def permute_rows(x: np.ndarray, pivots: np.ndarray, inverse: bool = False) -> None:
    """Apply LAPACK's interchanges ``row i <-> pivots[i]`` to ``x`` in order (``inverse``: in reverse order)."""
    order = reversed(range(pivots.size)) if inverse else range(pivots.size)
    for i in order:
        p = int(pivots[i])
        if p != i:
            x[[i, p]] = x[[p, i]]


def multiply(a: DistributedMatrix, x: np.ndarray, trans: int = 0) -> np.ndarray:
    """``op(A) @ x`` for a replicated thin ``x``, returned on every rank (for residual checks and demos)."""
    rows, cols = (a.rows, a.cols) if trans == 0 else (a.cols, a.rows)
    out_rows = a.shape[0] if trans == 0 else a.shape[1]
    full = np.zeros((out_rows, x.shape[1]), dtype=np.result_type(a.dtype, x.dtype), order="F")
    local = a.local if trans == 0 else (a.local.T if trans == 1 else a.local.conj().T)
    full[rows] = local @ x[cols]
    return np.asfortranarray(allreduce_sum(a.grid.comm, full))


def norm1(a: DistributedMatrix) -> float:
    """``||A||_1`` (largest column sum of magnitudes), on every rank."""
    sums = np.zeros(a.shape[1])
    sums[a.cols] = np.abs(a.local).sum(axis=0)
    return float(allreduce_sum(a.grid.comm, sums).max(initial=0.0))
