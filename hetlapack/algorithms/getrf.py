"""Tile LU with partial pivoting over the whole column, so the pivots are LAPACK's (seed 000 §4, Table 1).

Step ``k``: LAPACK getrf on the tall panel (tile rows ``k:`` of tile column ``k``), then for every other tile
column the panel's row interchanges (LASWP, left and right), and on the right a TRSM with the panel's unit lower
triangle and a GEMM update of the rows below. The next panel's column has the highest priority (lookahead).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..devices.base import Device
from ..runtime import Placement, Runtime, Trace
from ._common import check_fortran_matrix, check_tile


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
    m, n = a.shape
    kmin = min(m, n)
    piv = np.zeros((kmin, 1), dtype=np.int32, order="F")
    infos: dict[int, int] = {}
    with Runtime(devices, placement, trace) as rt:
        A = rt.matrix(a, nb)
        P = rt.matrix(piv, nb, 1, name="piv")
        mt, nt, kt = A.mt, A.nt, P.mt
        for k in range(kt):
            panel = A.block(k, mt, k, k + 1)
            top = 3 * (kt - k)
            # A[k:,k] = P_k L_k U_kk
            rt.insert(_getrf_panel, panel, P(k, 0), k * nb, infos, reads=[], writes=[panel, P(k, 0)],
                      priority=top + 2, name="getrf")
            for j in range(nt):
                if j == k:
                    continue
                column = A.block(k, mt, j, j + 1)
                level = top + 1 if j == k + 1 else 3 * (kt - j) if j > k else 0
                # A[k:,j] = P_k A[k:,j]
                rt.insert("laswp", column, P(k, 0), reads=[P(k, 0)], writes=[column], priority=level)
                if j < k:
                    continue
                # A[k,j] = L_kk^{-1} A[k,j]
                rt.insert("trsm", A(k, k), A(k, j), side="L", lower=True, conj=False, unit=True,
                          reads=[A(k, k)], writes=[A(k, j)], priority=level)
                if k + 1 < mt:
                    below = A.block(k + 1, mt, k, k + 1)
                    target = A.block(k + 1, mt, j, j + 1)
                    # A[k+1:,j] -= A[k+1:,k] @ A[k,j]
                    rt.insert("gemm", below, A(k, j), target, reads=[below, A(k, j)], writes=[target],
                              priority=level)
    offsets = np.repeat(np.arange(kt, dtype=np.int32) * nb, nb)[:kmin]
    return (piv[:, 0] - 1 + offsets).astype(np.int32), min(infos.values(), default=0)
