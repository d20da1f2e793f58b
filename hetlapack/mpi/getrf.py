"""Distributed right-looking LU with partial pivoting (ScaLAPACK's ``pxgetrf``) on a 2-D block-cyclic matrix.

Step ``k`` (panel columns ``k0 .. k0+w`` in process column ``pc_k``, its top rows in process row ``pr_k``)::

    P_k, A[k:, k] = getrf(A[k:, k])     LAPACK on one rank of pc_k after one gather of the panel (panel.py);
                                        pivots and factors are LAPACK's, so they equal SciPy's on the same matrix
    A[:, other] = P_k A[:, other]       row interchanges in every process column (one all-to-all per step)
    A[k, j] = L[k,k]^{-1} A[k, j]       j > k, on process row pr_k after a row broadcast of the panel
    A[i, k+1] -= A[i, k] @ A[k, k+1]    lookahead: the next panel's columns first, then that panel is factored
    A[i, j] -= A[i, k] @ A[k, j]        i > k, j > k+1, while process column pc_{k+1} factors panel k+1

Local failures are held by a :class:`~hetlapack.mpi._comm.FailureLatch` and agreed on once per step, so the
other process columns never wait for panel ``k+1`` before their own trailing update.
"""

from __future__ import annotations

import numpy as np

from . import _local
from ._comm import FailureLatch, alltoall_rows, bcast_array
from .matrix import DistributedMatrix
from .panel import factor_panel, panel_root


def getrf(a: DistributedMatrix) -> tuple[np.ndarray, int]:
    """Factor ``a`` in place as ``P A = L U``; returns the global 0-based pivots (int32) and LAPACK's ``info``.

    Both are identical on every rank; ``info > 0`` names the first exactly zero diagonal entry of ``U`` (1-based).
    """
    if a.block[0] != a.block[1]:
        raise ValueError(f"LU needs square blocks, got {a.block}")
    grid, nb = a.grid, a.block[0]
    m, n = a.shape
    kmax = min(m, n)
    pivots = np.arange(kmax, dtype=np.int32)
    info = 0
    latch = FailureLatch(grid.comm)
    step = _factor_panel(a, 0, min(kmax, nb), latch) if kmax else None
    for k0 in range(0, kmax, nb):
        k1 = min(kmax, k0 + nb)
        k2 = min(kmax, k1 + nb)
        prow, pcol = a.row_owner(k0), a.col_owner(k0)
        r0, r1 = a.local_rows_from(k0), a.local_rows_from(k1)
        c0, c1, c2 = a.local_cols_from(k0), a.local_cols_from(k1), a.local_cols_from(k2)
        latch.agree()
        step = bcast_array(grid.comm, step, panel_root(a, k0), (k1 - k0 + 1,), np.int64)
        pivots[k0:k1] = step[:-1]
        info = info or int(step[-1])
        panel = bcast_array(grid.row_comm, a.local[r0:, c0:c1] if grid.mycol == pcol else None, pcol,
                            (a.rows.size - r0, k1 - k0), a.dtype)
        _interchange_rows(a, k0, pivots[k0:k1], (c0, c1) if grid.mycol == pcol else (0, 0))
        with latch.guard():
            if grid.myrow == prow:
                # A[k, j] = L[k, k]^{-1} A[k, j]
                _local.trsm(1.0, panel[:r1 - r0], a.local[r0:r1, c1:], lower=True, unit_diagonal=True)
        if k1 >= n or k1 >= m:
            continue
        top = bcast_array(grid.col_comm, a.local[r0:r1, c1:] if grid.myrow == prow else None, prow,
                          (k1 - k0, a.cols.size - c1), a.dtype)
        with latch.guard():
            # A[i, k+1] -= A[i, k] @ A[k, k+1]
            _local.gemm(-1.0, panel[r1 - r0:], top[:, :c2 - c1], 1.0, a.local[r1:, c1:c2])
        step = _factor_panel(a, k1, k2, latch)
        with latch.guard():
            # A[i, j] -= A[i, k] @ A[k, j]
            _local.gemm(-1.0, panel[r1 - r0:], top[:, c2 - c1:], 1.0, a.local[r1:, c2:])
    latch.agree()
    return pivots, info


def _factor_panel(a: DistributedMatrix, k0: int, k1: int, latch: FailureLatch) -> np.ndarray | None:
    """LAPACK ``getrf`` of the panel ``A[k0:, k0:k1]``; on its root returns the global pivots followed by ``info``."""
    def kernel(panel: np.ndarray) -> np.ndarray:
        # P A[k0:, k0:k1] = L U
        local_pivots, local_info = _local.getrf(panel)
        return np.append(k0 + local_pivots.astype(np.int64), k0 + local_info if local_info > 0 else 0)

    return factor_panel(a, k0, k1, kernel, np.zeros(k1 - k0 + 1, dtype=np.int64), latch)


def _interchange_rows(a: DistributedMatrix, k0: int, step_pivots: np.ndarray, skip: tuple[int, int]) -> None:
    """Apply the step's interchanges ``row k0+j <-> step_pivots[j]`` to the local columns outside ``skip``.

    The swaps compose into one permutation of the touched rows; every rank derives the same list of moves from
    the pivots, so rows that move between process rows travel in one ``Alltoallv`` within each process column.
    """
    source = {}
    for j, pivot in enumerate(step_pivots):
        g, pivot = k0 + j, int(pivot)
        source[g], source[pivot] = source.get(pivot, pivot), source.get(g, g)
    moves = np.array([(dest, src) for dest, src in source.items() if dest != src], dtype=np.int64).reshape(-1, 2)
    if moves.size == 0:
        return
    grid = a.grid
    spans = [span for span in ((0, skip[0]), (skip[1], a.cols.size)) if span[1] > span[0]]
    width = sum(stop - start for start, stop in spans)
    dest_owner = (moves[:, 0] // a.block[0] + a.src[0]) % grid.nprow
    src_owner = (moves[:, 1] // a.block[0] + a.src[0]) % grid.nprow
    outgoing = []
    for prow in range(grid.nprow):
        sources = moves[(src_owner == grid.myrow) & (dest_owner == prow), 1]
        outgoing.append(_read_rows(a.local, np.searchsorted(a.rows, sources), spans))
    incoming_counts = [int(np.count_nonzero((src_owner == prow) & (dest_owner == grid.myrow)))
                       for prow in range(grid.nprow)]
    incoming = alltoall_rows(grid.col_comm, outgoing, incoming_counts, width, a.dtype)
    for prow, values in enumerate(incoming):
        destinations = moves[(src_owner == prow) & (dest_owner == grid.myrow), 0]
        _write_rows(a.local, np.searchsorted(a.rows, destinations), spans, values)


def _read_rows(local: np.ndarray, rows: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Copy of ``local[rows]`` restricted to the column ``spans``, side by side (one slice per span: fast)."""
    out = np.empty((rows.size, sum(stop - start for start, stop in spans)), dtype=local.dtype)
    offset = 0
    for start, stop in spans:
        out[:, offset:offset + stop - start] = local[rows, start:stop]
        offset += stop - start
    return out


def _write_rows(local: np.ndarray, rows: np.ndarray, spans: list[tuple[int, int]], values: np.ndarray) -> None:
    """``local[rows]`` on the column ``spans`` = ``values`` (the layout :func:`_read_rows` returns)."""
    offset = 0
    for start, stop in spans:
        local[rows, start:stop] = values[:, offset:offset + stop - start]
        offset += stop - start
