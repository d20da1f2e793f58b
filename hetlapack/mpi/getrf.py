"""Distributed right-looking LU with partial pivoting (ScaLAPACK's ``pxgetrf``) on a 2-D block-cyclic matrix.

Step ``k`` (panel columns ``k0 .. k0+w`` in process column ``pc_k``, its top rows in process row ``pr_k``)::

    P_k, A[k:, k] = getrf(A[k:, k])     in process column pc_k, column by column inside 32-column sub-panels: the
                                        pivot is chosen among all process rows (one allgather per column,
                                        LAPACK's i?amax rule); each sub-panel then updates the panel by GEMM
    A[:, other] = P_k A[:, other]       row interchanges in every process column (one all-to-all per step)
    A[k, j] = L[k,k]^{-1} A[k, j]       j > k, on process row pr_k after a row broadcast of the panel
    A[i, j] -= A[i, k] @ A[k, j]        i, j > k, local GEMM after the panel (row) and U (column) broadcasts

Pivot choice, interchanges and scaling follow LAPACK's ``getf2``, so the pivots equal SciPy's on the same matrix.
"""

from __future__ import annotations

import numpy as np

from . import _local
from ._comm import agreed, allgather_array, alltoall_rows, bcast_array
from .matrix import DistributedMatrix

#: Columns factored one by one (BLAS-2) before the rest of the panel is updated with one GEMM.
PANEL_INNER_BLOCK = 32

_SAFE_MIN = {np.dtype(t): np.finfo(t).tiny for t in (np.float32, np.float64, np.complex64, np.complex128)}


def getrf(a: DistributedMatrix) -> tuple[np.ndarray, int]:
    """Factor ``a`` in place as ``P A = L U``; returns the global 0-based pivots (int32) and LAPACK's ``info``.

    Both are identical on every rank; ``info > 0`` names the first exactly zero diagonal entry of ``U`` (1-based).
    """
    if a.block[0] != a.block[1]:
        raise ValueError(f"LU needs square blocks, got {a.block}")
    grid, nb = a.grid, a.block[0]
    kmax = min(a.shape)
    pivots = np.arange(kmax, dtype=np.int32)
    info = 0
    for k0 in range(0, kmax, nb):
        k1 = min(kmax, k0 + nb)
        prow, pcol = a.row_owner(k0), a.col_owner(k0)
        r0, r1 = a.local_rows_from(k0), a.local_rows_from(k1)
        c0, c1 = a.local_cols_from(k0), a.local_cols_from(k1)
        step = np.zeros(k1 - k0 + 1, dtype=np.int64)
        with agreed(grid.comm):
            if grid.mycol == pcol:
                step[:-1], step[-1] = _panel(a, k0, k1, r0, c0, c1)
        step = bcast_array(grid.row_comm, step, pcol, step.shape, step.dtype)
        pivots[k0:k1] = step[:-1]
        info = info or int(step[-1])
        panel = bcast_array(grid.row_comm, a.local[r0:, c0:c1] if grid.mycol == pcol else None, pcol,
                            (a.rows.size - r0, k1 - k0), a.dtype)
        skip = (c0, c1) if grid.mycol == pcol else (0, 0)
        _interchange_rows(a, k0, pivots[k0:k1], skip)
        with agreed(grid.comm):
            if grid.myrow == prow:
                _local.trsm(1.0, panel[:r1 - r0], a.local[r0:r1, c1:], lower=True, unit_diagonal=True)
        if k1 >= a.shape[1] or k1 >= a.shape[0]:
            continue
        top = bcast_array(grid.col_comm, a.local[r0:r1, c1:] if grid.myrow == prow else None, prow,
                          (k1 - k0, a.cols.size - c1), a.dtype)
        with agreed(grid.comm):
            _local.gemm(-1.0, panel[r1 - r0:], top, 1.0, a.local[r1:, c1:])
    return pivots, info


def _magnitude(values: np.ndarray) -> np.ndarray:
    """LAPACK's ``i?amax`` measure: ``|re| + |im|`` for complex entries, ``|x|`` for real ones."""
    return np.abs(values.real) + np.abs(values.imag) if values.dtype.kind == "c" else np.abs(values)


def _panel(a: DistributedMatrix, k0: int, k1: int, r0: int, c0: int, c1: int) -> tuple[np.ndarray, int]:
    """``getrf`` on the panel columns ``k0 .. k1`` spread over the process column; returns (pivots, info).

    Columns are factored one at a time within sub-panels of ``PANEL_INNER_BLOCK`` columns (``getf2``); each finished
    sub-panel updates the rest of the panel with one GEMM after the owner of its top rows broadcasts ``U12``.
    """
    comm, prow = a.grid.col_comm, a.row_owner(k0)
    panel, rows = a.local[r0:, c0:c1], a.rows[r0:]
    width = k1 - k0
    pivots = np.empty(width, dtype=np.int64)
    info = 0
    for jb in range(0, width, PANEL_INNER_BLOCK):
        je = min(width, jb + PANEL_INNER_BLOCK)
        for j in range(jb, je):
            pivots[j], singular = _panel_column(comm, panel, rows, k0, j, je)
            info = info or (k0 + j + 1 if singular else 0)
        if je == width:
            break
        top = slice(int(np.searchsorted(rows, k0 + jb)), int(np.searchsorted(rows, k0 + je)))
        below = top.stop
        u12 = None
        if a.grid.myrow == prow:
            _local.trsm(1.0, panel[top, jb:je], panel[top, je:], lower=True, unit_diagonal=True)
            u12 = panel[top, je:]
        u12 = bcast_array(comm, u12, prow, (je - jb, width - je), a.dtype)
        _local.gemm(-1.0, panel[below:, jb:je], u12, 1.0, panel[below:, je:])
    return pivots, info


def _panel_column(comm, panel: np.ndarray, rows: np.ndarray, k0: int, j: int, stop: int) -> tuple[int, bool]:
    """Pivot, swap, scale and rank-1 update (columns ``j+1 .. stop``) for panel column ``j`` (``getf2``'s step).

    One allgather per column carries each rank's candidate ``[|a|, global row, owns row g, its row, row g]``.
    """
    g, width = k0 + j, panel.shape[1]
    start = int(np.searchsorted(rows, g))
    offer = np.zeros(3 + 2 * width, dtype=panel.dtype)
    offer[:3] = (-1, -1, 0)
    current = start < rows.size and rows[start] == g
    if start < rows.size:
        best = start + int(np.argmax(_magnitude(panel[start:, j])))
        offer[:2] = (_magnitude(panel[best, j]), rows[best])
        offer[3:3 + width] = panel[best]
        if current:
            offer[2] = 1
            offer[3 + width:] = panel[start]
    offers = allgather_array(comm, offer)
    magnitudes, candidates = offers[:, 0].real, offers[:, 1].real.astype(np.int64)
    best_rank = min(np.flatnonzero(magnitudes == magnitudes.max()), key=lambda r: candidates[r])
    pivot, pivot_row = int(candidates[best_rank]), offers[best_rank, 3:3 + width]
    if current:
        panel[start] = pivot_row
    owner = int(np.searchsorted(rows, pivot))
    if pivot != g and owner < rows.size and rows[owner] == pivot:
        panel[owner] = offers[int(np.flatnonzero(offers[:, 2].real == 1)[0]), 3 + width:]
    below = int(np.searchsorted(rows, g + 1))
    head = pivot_row[j]
    if head == 0:
        return pivot, True
    if abs(head) >= _SAFE_MIN[panel.dtype]:
        panel[below:, j] *= 1 / head
    else:
        panel[below:, j] /= head
    panel[below:, j + 1:stop] -= np.outer(panel[below:, j], pivot_row[j + 1:stop])
    return pivot, False


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
    keep = np.r_[0:skip[0], skip[1]:a.cols.size]
    dest_owner = (moves[:, 0] // a.block[0] + a.src[0]) % grid.nprow
    src_owner = (moves[:, 1] // a.block[0] + a.src[0]) % grid.nprow
    outgoing = []
    for prow in range(grid.nprow):
        sources = moves[(src_owner == grid.myrow) & (dest_owner == prow), 1]
        outgoing.append(a.local[np.ix_(np.searchsorted(a.rows, sources), keep)])
    incoming_counts = [int(np.count_nonzero((src_owner == prow) & (dest_owner == grid.myrow)))
                       for prow in range(grid.nprow)]
    incoming = alltoall_rows(grid.col_comm, outgoing, incoming_counts, keep.size, a.dtype)
    for prow, values in enumerate(incoming):
        destinations = moves[(src_owner == prow) & (dest_owner == grid.myrow), 0]
        a.local[np.ix_(np.searchsorted(a.rows, destinations), keep)] = values
