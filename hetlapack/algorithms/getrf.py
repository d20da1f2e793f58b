"""Tile LU with partial pivoting over the whole column, so the pivots are LAPACK's (seed 000 §4, Table 1).

Step ``k``: LAPACK getrf on the tall panel (tile rows ``k:`` of tile column ``k``); then each tile column to the
right gets one task that applies the panel's row interchanges (LASWP), the TRSM with the panel's unit lower
triangle and the GEMM update of the rows below, so the swapped rows are still in cache when they are used. The
interchanges of later panels reach the columns to the left in one task per column, after the last panel that
swaps them. The next panel's column has the highest priority (lookahead). A task per column, where the tile QR
takes the blocks the runtime cuts (:meth:`~hetlapack.runtime.Runtime.column_blocks`): in blocks, LU of order 4000
ran level with it on a 2-core Xeon VM (one block a worker beside the lookahead column) or 2-5% slower (one block
more, at tile 384-512: fewer tasks, more idle workers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..contract.finite import FiniteCheck
from ..devices.base import Device
from ..runtime import Placement, Runtime, TiledMatrix, Trace
from ._common import check_fortran_matrix, check_tile, flop_scale, panel_bounds
from .copy_in import insert_copy_in


def _getrf_panel(device: Device, panel, piv, offset: int, infos: dict) -> None:
    """Factor the panel; remember LAPACK's info as a global 1-based index."""
    info = device.getrf(panel, piv)
    if info > 0:
        infos[offset] = offset + info


def _update_right(device: Device, column, piv, panel, rows: int) -> None:
    """Column ``j`` of step ``k``: swap its rows, ``A[k,j] = L_kk^{-1} A[k,j]``, ``A[k+1:,j] -= L[k+1:,k] A[k,j]``;
    ``panel`` is the factored block column ``A[k:,k]``, as the task reads it."""
    device.laswp(column, piv)
    top, below = column[:rows], column[rows:]
    device.trsm(panel[:rows], top, side="L", lower=True, conj=False, unit=True)
    if below.shape[0]:
        device.gemm(panel[rows:], top, below)


def _swap_left(device: Device, column, *pivots_and_offsets) -> None:
    """Apply the interchanges of later panels, in order, to a finished column (each from its panel's first row)."""
    for piv, offset in zip(pivots_and_offsets[::2], pivots_and_offsets[1::2]):
        device.laswp(column[offset:], piv)


def getrf(a: np.ndarray, *, tile: int | Sequence[int], devices: Sequence[Device] | None = None,
          placement: str | Placement = "owner", trace: Trace | None = None, source: np.ndarray | None = None,
          check: FiniteCheck | None = None) -> tuple[np.ndarray, int]:
    """LU factorization ``P A = L U`` in place on an ``(m, n)`` Fortran-ordered matrix.

    Returns ``(piv, info)``: 0-based LAPACK row interchanges (``int32``, length ``min(m, n)``) and LAPACK's
    ``info`` (1-based index of the first exactly-zero diagonal of ``U``, or 0). A singular matrix is factored
    completely. With ``source`` (a matrix of ``a``'s shape, in any layout) ``a`` is first filled from it by copy-in
    tasks (:func:`~.copy_in.insert_copy_in`; the devices must include the host), ``check`` told whether every value
    read was finite.
    """
    check_fortran_matrix(a, "getrf")
    nb = check_tile(tile)
    kmin = min(a.shape)
    piv = np.zeros((kmin, 1), dtype=np.int32, order="F")
    infos: dict[int, int] = {}

    def insert(rt: Runtime) -> TiledMatrix:
        A = rt.matrix(a, nb)
        P = pivot_tiles(A, piv)
        if source is not None:
            insert_copy_in(rt, A, source, check, steps=P.mt, scale=3)
        insert_getrf(rt, A, P, infos)
        return P

    P = Runtime(devices, placement, trace).run(insert)
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
        for j in range(k + 1, nt):
            column = A.block(k, mt, j, j + 1)
            # A[k:,j] = P_k A[k:,j];  A[k,j] = L_kk^{-1} A[k,j];  A[k+1:,j] -= A[k+1:,k] @ A[k,j]
            rt.insert(_update_right, column, P(k, 0), panel, A.rows(k),
                      reads=[P(k, 0), panel], writes=[column], priority=top + 1 if j == k + 1 else 3 * (kt - j),
                      name="gemm", flops=scale * A.cols(j) * (A.rows(k) ** 2 + 2 * A.rows(k + 1, mt) * width))
    for j in range(kt - 1):
        later = range(j + 1, kt)
        column = A.block(j + 1, mt, j, j + 1)
        swaps = [arg for k in later for arg in (P(k, 0), A.row_range(k)[0] - A.row_range(j + 1)[0])]
        # A[k:,j] = P_k A[k:,j] for every later panel k, in order (flops count the bytes swapped)
        rt.insert(_swap_left, column, *swaps, reads=[P(k, 0) for k in later], writes=[column], priority=0,
                  name="laswp", flops=4 * A.cols(j) * A.itemsize * sum(min(A.rows(k, mt), A.cols(k)) for k in later))
