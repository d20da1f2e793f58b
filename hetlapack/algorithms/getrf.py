"""Tile LU with partial pivoting over the whole column, so the pivots are LAPACK's (seed 000 §4, Table 1).

Step ``k``: LAPACK getrf on the tall panel (tile rows ``k:`` of tile column ``k``), then for every other tile
column the panel's row interchanges (LASWP, left and right), and on the right a TRSM with the panel's unit lower
triangle and a GEMM update of the rows below. The next panel's column has the highest priority (lookahead).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..devices.base import Device
from ..runtime import Placement, Runtime, TiledMatrix, Trace
from ._common import check_fortran_matrix, check_tile, flop_scale, panel_bounds


def _getrf_panel(device: Device, panel, piv, offset: int, infos: dict) -> None:
    """Factor the panel; remember LAPACK's info as a global 1-based index."""
    info = device.getrf(panel, piv)
    if info > 0:
        infos[offset] = offset + info


def getrf(a: np.ndarray, *, tile: int, devices: Sequence[Device] | None = None,
          placement: str | Placement = "owner", trace: Trace | None = None) -> tuple[np.ndarray, int]:
    """LU factorization ``P A = L U`` in place on an ``(m, n)`` Fortran-ordered matrix.

    Returns ``(piv, info)``: 0-based LAPACK row interchanges (``int32``, length ``min(m, n)``) and LAPACK's
    ``info`` (1-based index of the first exactly-zero diagonal of ``U``, or 0). A singular matrix is factored
    completely.
    """
    check_fortran_matrix(a, "getrf")
    nb = check_tile(tile)
    kmin = min(a.shape)
    piv = np.zeros((kmin, 1), dtype=np.int32, order="F")
    infos: dict[int, int] = {}
    with Runtime(devices, placement, trace) as rt:
        A = rt.matrix(a, nb)
        P = pivot_tiles(A, piv)
        insert_getrf(rt, A, P, infos)
    offsets = np.repeat(np.asarray(P.row_bounds[:-1], dtype=np.int32), np.diff(P.row_bounds))
    return (piv[:, 0] - 1 + offsets).astype(np.int32), min(infos.values(), default=0)


def pivot_tiles(A: TiledMatrix, piv: np.ndarray | None = None) -> TiledMatrix:
    """The pivot vector cut like ``A``'s panels (virtual when ``piv`` is None)."""
    kmin = min(A.shape)
    return TiledMatrix(piv, panel_bounds(A.col_bounds, kmin), 1, name="piv", shape=(kmin, 1), dtype=np.int32)


def insert_getrf(rt: Runtime, A: TiledMatrix, P: TiledMatrix, infos: dict[int, int]) -> None:
    """Insert the tasks of an LU factorization of ``A`` (row and column tiles equal up to ``min(m, n)``);
    panel ``k`` writes its 1-based local pivots into ``P``'s tile ``k`` and any singular column into ``infos``."""
    mt, nt, kt = A.mt, A.nt, P.mt
    scale = flop_scale(A.dtype)
    for k in range(kt):
        panel = A.block(k, mt, k, k + 1)
        rows, width = panel.shape
        steps = min(rows, width)
        top = 3 * (kt - k)
        # A[k:,k] = P_k L_k U_kk
        rt.insert(_getrf_panel, panel, P(k, 0), A.col_range(k)[0], infos, reads=[], writes=[panel, P(k, 0)],
                  priority=top + 2, name="getrf", flops=scale * (max(rows, width) * steps**2 - steps**3 / 3))
        for j in range(nt):
            if j == k:
                continue
            column = A.block(k, mt, j, j + 1)
            level = top + 1 if j == k + 1 else 3 * (kt - j) if j > k else 0
            # A[k:,j] = P_k A[k:,j]   (flops count the bytes of the swapped rows read and written)
            rt.insert("laswp", column, P(k, 0), reads=[P(k, 0)], writes=[column], priority=level,
                      flops=4 * steps * A.cols(j) * A.itemsize)
            if j < k:
                continue
            # A[k,j] = L_kk^{-1} A[k,j]
            rt.insert("trsm", A(k, k), A(k, j), side="L", lower=True, conj=False, unit=True,
                      reads=[A(k, k)], writes=[A(k, j)], priority=level, flops=scale * A.rows(k) ** 2 * A.cols(j))
            if k + 1 < mt:
                below = A.block(k + 1, mt, k, k + 1)
                target = A.block(k + 1, mt, j, j + 1)
                # A[k+1:,j] -= A[k+1:,k] @ A[k,j]
                rt.insert("gemm", below, A(k, j), target, reads=[below, A(k, j)], writes=[target],
                          priority=level, flops=2 * scale * A.rows(k + 1, mt) * A.cols(j) * width)
