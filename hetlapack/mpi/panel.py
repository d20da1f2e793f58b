"""Panel factorization on one rank: gather a block column's panel, run one LAPACK call, scatter it back.

LU and QR panels are tall and narrow (``(m - k0) x nb``). Factoring them column by column across the process
column costs one small collective per column; gathering the panel onto the rank that owns its top rows costs one
``Gatherv`` and one ``Scatterv`` of ``(m - k0) nb`` entries per step instead, and the LAPACK call on the whole panel
makes the same choices as LAPACK on the whole matrix (``getrf``'s pivots, ``larfg``'s signs). The panel buffer is
the only non-local storage, within the O(n²/p) + panel memory rule.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ._comm import FailureLatch, gather_rows, scatter_rows
from .matrix import DistributedMatrix, owned_indices


def panel_root(a: DistributedMatrix, k0: int) -> int:
    """Rank in ``a.grid.comm`` that factors the panel starting at global row and column ``k0``."""
    return a.grid.rank_of(a.row_owner(k0), a.col_owner(k0))


def factor_panel(a: DistributedMatrix, k0: int, k1: int, kernel: Callable[[np.ndarray], np.ndarray],
                 fallback: np.ndarray, latch: FailureLatch) -> np.ndarray | None:
    """Run ``kernel`` in place on the panel ``A[k0:, k0:k1]`` on :func:`panel_root`; collective on its column.

    Ranks outside the panel's process column return ``None`` at once. The root returns ``kernel``'s result (the
    others in the column ``None``); a failure of ``kernel`` is kept by ``latch``, the root returns ``fallback`` (of
    the result's shape) and the panel goes back unchanged, so the column stays in step until the latch agrees.
    """
    grid = a.grid
    if grid.mycol != a.col_owner(k0):
        return None
    m, mb = a.shape[0], a.block[0]
    prow = a.row_owner(k0)
    r0, c0, c1 = a.local_rows_from(k0), a.local_cols_from(k0), a.local_cols_from(k1)
    positions = []
    for p in range(grid.nprow):
        owned = owned_indices(m, mb, p, a.src[0], grid.nprow)
        positions.append(owned[owned >= k0] - k0)
    counts = [rows.size for rows in positions]
    blocks = gather_rows(grid.col_comm, a.local[r0:, c0:c1], counts, prow)
    result = fallback if grid.myrow == prow else None
    if grid.myrow == prow:
        with latch.guard():
            panel = np.empty((m - k0, k1 - k0), dtype=a.dtype, order="F")
            for rows, block in zip(positions, blocks):
                panel[rows] = block
            result = kernel(panel)
            blocks = [panel[rows] for rows in positions]
    a.local[r0:, c0:c1] = scatter_rows(grid.col_comm, blocks, counts, k1 - k0, a.dtype, prow)
    return result
