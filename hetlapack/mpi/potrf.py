"""Distributed right-looking Cholesky (ScaLAPACK's ``pxpotrf``) on a 2-D block-cyclic matrix.

Step ``k`` (block column ``k`` owned by process column ``pc_k``, diagonal block by ``(pr_k, pc_k)``)::

    A[k,k] = chol(A[k,k])                       on (pr_k, pc_k)
    A[i,k] = A[i,k] @ A[k,k]^{-H}   i > k       on process column pc_k, after a column broadcast of A[k,k]
    L_r = A[rows, k]                            row broadcast from pc_k: the panel rows each process row owns
    L_c = A[cols, k]                            allgatherv in each process column: the panel rows whose index
                                                is one of that process column's columns (the transposed panel)
    A[i,j] -= L_r[i] @ L_c[j]^H    i >= j > k   local GEMMs on the lower trapezoid

Each rank receives ``(n - k1) nb (1/P + 1/Q)`` words per step, the 2-D volume ScaLAPACK attains.
"""

from __future__ import annotations

import numpy as np
from ..contract.scipy_rules import not_positive_definite
from . import _local
from ._comm import agreed, allgather_rows, bcast_array
from .matrix import DistributedMatrix, owned_indices


def potrf(a: DistributedMatrix, lower: bool = True) -> None:
    """Factor the Hermitian positive definite ``a`` in place; the other triangle is set to zero.

    Raises SciPy's ``LinAlgError`` on every rank, naming the global leading minor that is not positive definite.
    """
    m, n = a.shape
    if m != n:
        raise ValueError(f"Input array is expected to be square but has the shape: {a.shape}.")
    if a.block[0] != a.block[1]:
        raise ValueError(f"Cholesky needs square blocks, got {a.block}")
    _potrf_lower(a if lower else a.transposed_view())
    _zero_strict_triangle(a, upper=lower)


def _potrf_lower(a: DistributedMatrix) -> None:
    grid, n, nb = a.grid, a.shape[0], a.block[0]
    for k in range(-(-n // nb)):
        k0, k1 = k * nb, min(n, (k + 1) * nb)
        prow, pcol = a.row_owner(k0), a.col_owner(k0)
        in_pcol = grid.mycol == pcol
        r0, r1 = a.local_rows_from(k0), a.local_rows_from(k1)
        c0, c1 = a.local_cols_from(k0), a.local_cols_from(k1)
        with agreed(grid.comm):
            if in_pcol and grid.myrow == prow:
                info = _local.potrf(a.local[r0:r1, c0:c1], lower=True)
                if info > 0:
                    raise not_positive_definite(k0 + info)
        if in_pcol:
            diag = a.local[r0:r1, c0:c1] if grid.myrow == prow else None
            diag = bcast_array(grid.col_comm, diag, prow, (k1 - k0, k1 - k0), a.dtype)
        with agreed(grid.comm):
            if in_pcol:
                _local.trsm(1.0, diag, a.local[r1:, c0:c1], side=1, lower=True, trans_a=2)
        if k1 == n:
            break
        panel_rows = bcast_array(grid.row_comm, a.local[r1:, c0:c1] if in_pcol else None, pcol,
                                 (a.rows.size - r1, k1 - k0), a.dtype)
        panel_cols = _transposed_panel(a, panel_rows, k1, r1, c1)
        with agreed(grid.comm):
            _update_lower_trapezoid(a, panel_rows, panel_cols, r1, c1)


def _transposed_panel(a: DistributedMatrix, panel_rows: np.ndarray, k1: int, r1: int, c1: int) -> np.ndarray:
    """Panel rows ``L[j, k]`` for this rank's local columns ``j >= k1``, gathered within the process column.

    Process row ``p`` contributes the rows it owns whose index is also a column of this process column, so each
    rank receives only the ``(n - k1) / Q`` rows it needs.
    """
    grid, nb, width = a.grid, a.block[0], panel_rows.shape[1]

    def mine(indices: np.ndarray) -> np.ndarray:
        return ((indices // nb + a.src[1]) % grid.npcol) == grid.mycol

    pieces = allgather_rows(grid.col_comm, panel_rows[mine(a.rows[r1:])], width, a.dtype)
    targets = a.cols[c1:]
    out = np.empty((targets.size, width), dtype=a.dtype, order="F")
    for prow, piece in enumerate(pieces):
        owned = owned_indices(a.shape[0], nb, prow, a.src[0], grid.nprow)
        owned = owned[owned >= k1]
        out[np.searchsorted(targets, owned[mine(owned)])] = piece
    return out


def _update_lower_trapezoid(a: DistributedMatrix, panel_rows: np.ndarray, panel_cols: np.ndarray, r1: int,
                            c1: int) -> None:
    """``A[i, j] -= L_r[i] L_c[j]^H`` for local rows ``i >= j``, one GEMM per local block column."""
    nb = a.block[1]
    for start in range(c1, a.cols.size, nb):
        stop = min(start + nb, a.cols.size)
        first_row = max(a.local_rows_from(a.cols[start]), r1)
        _local.gemm(-1.0, panel_rows[first_row - r1:], panel_cols[start - c1:stop - c1], 1.0,
                    a.local[first_row:, start:stop], trans_b=2)


def _zero_strict_triangle(a: DistributedMatrix, upper: bool) -> None:
    """Zero the strictly upper (``upper``) or strictly lower triangle of ``a``'s local storage."""
    for j, col in enumerate(a.cols):
        split = a.local_rows_from(col + (0 if upper else 1))
        if upper:
            a.local[:split, j] = 0
        else:
            a.local[split:, j] = 0
