"""Distributed Householder QR (ScaLAPACK's ``pxgeqrf``/``pxungqr``) with compact-WY trailing updates.

Step ``k`` (panel columns ``k0 .. k0+w`` in process column ``pc_k``)::

    V, tau = geqrf(A[k:, k])            in process column pc_k, column by column inside 32-column sub-panels
                                        (the norm of each column and V^H A are sums over the process rows);
                                        each sub-panel then updates the panel as one block reflector
    T = larft(V, tau)                   from the Gram matrix V^H V (one allreduce)
    A[k:, j] -= V T^H (V^H A[k:, j])    j > k: V and T broadcast along process rows; V^H A is summed along
                                        process columns (the 2-D LARFB reduction of seed 002 §2.4)

Reflectors follow LAPACK's ``larfg`` (``beta = -sign(Re alpha) ||(alpha, x)||``), so the signs of ``R`` equal SciPy's.
"""

from __future__ import annotations

import math

import numpy as np

from . import _local
from ._comm import agreed, allgather_array, allreduce_sum, bcast_array
from .matrix import DistributedMatrix

#: Columns reduced one by one (BLAS-2) before the rest of the panel is updated as one block reflector.
PANEL_INNER_BLOCK = 32


def geqrf(a: DistributedMatrix) -> list[np.ndarray]:
    """Factor ``a`` in place: ``R`` in the upper triangle, reflectors below; returns each panel's ``T`` factor.

    The ``T`` factors (upper triangular, ``tau`` on their diagonals) are identical on every rank.
    """
    if a.block[0] != a.block[1]:
        raise ValueError(f"QR needs square blocks, got {a.block}")
    grid, nb = a.grid, a.block[0]
    t_factors = []
    for k0 in range(0, min(a.shape), nb):
        k1 = min(min(a.shape), k0 + nb)
        pcol = a.col_owner(k0)
        in_pcol = grid.mycol == pcol
        r0, c0, c1 = a.local_rows_from(k0), a.local_cols_from(k0), a.local_cols_from(k1)
        reflectors = t_factor = None
        with agreed(grid.comm):
            if in_pcol:
                taus = _panel(a, k0, k1, r0, c0, c1)
                reflectors = _reflectors(a, k0, k1, r0, c0, c1)
                gram = _local_products(reflectors, reflectors)
        if in_pcol:
            gram = allreduce_sum(grid.col_comm, gram)
        with agreed(grid.comm):
            if in_pcol:
                t_factor = _triangular_factor(gram, taus)
        t_factor = bcast_array(grid.row_comm, t_factor, pcol, (k1 - k0, k1 - k0), a.dtype)
        t_factors.append(t_factor)
        if k1 >= a.shape[1]:
            continue
        reflectors = bcast_array(grid.row_comm, reflectors, pcol, (a.rows.size - r0, k1 - k0), a.dtype)
        _apply_block_reflector(grid, reflectors, t_factor.conj().T, a.local[r0:, c1:])
    return t_factors


def form_q(a: DistributedMatrix, t_factors: list[np.ndarray], columns: int) -> DistributedMatrix:
    """The first ``columns`` columns of ``Q = H_1 H_2 ... H_k`` (LAPACK's ``ungqr``), distributed like ``a``."""
    grid, nb = a.grid, a.block[0]
    q = DistributedMatrix.zeros(a.shape[0], columns, block=a.block, grid=grid, dtype=a.dtype, src=a.src)
    q.local[q.rows[:, None] == q.cols[None, :]] = 1
    for index in reversed(range(len(t_factors))):
        k0 = index * nb
        k1 = k0 + t_factors[index].shape[0]
        pcol = a.col_owner(k0)
        r0, c0, c1 = a.local_rows_from(k0), a.local_cols_from(k0), a.local_cols_from(k1)
        reflectors = _reflectors(a, k0, k1, r0, c0, c1) if grid.mycol == pcol else None
        reflectors = bcast_array(grid.row_comm, reflectors, pcol, (a.rows.size - r0, k1 - k0), a.dtype)
        _apply_block_reflector(grid, reflectors, t_factors[index], q.local[r0:, q.local_cols_from(k0):])
    return q


def _local_products(reflectors: np.ndarray, target: np.ndarray) -> np.ndarray:
    """This rank's share ``V^H target`` of a product summed over the process column."""
    products = np.zeros((reflectors.shape[1], target.shape[1]), dtype=target.dtype, order="F")
    _local.gemm(1.0, reflectors, target, 0.0, products, trans_a=2)
    return products


def _apply_block_reflector(grid, reflectors: np.ndarray, t: np.ndarray, target: np.ndarray) -> None:
    """``target -= V t (V^H target)``, with ``V^H target`` summed over the process column; collective."""
    with agreed(grid.comm):
        products = _local_products(reflectors, target)
    products = np.asfortranarray(allreduce_sum(grid.col_comm, products))
    with agreed(grid.comm):
        _local.gemm(-1.0, reflectors, t @ products, 1.0, target)


def _larfg(alpha, xnorm: float, dtype: np.dtype) -> tuple:
    """LAPACK's ``larfg``: ``(tau, beta, scale)``; ``scale`` multiplies ``x`` into ``v`` (``None``: ``H = I``)."""
    real, imag = float(np.real(alpha)), float(np.imag(alpha))
    if xnorm == 0 and imag == 0:
        return dtype.type(0), alpha, None
    beta = -math.copysign(math.hypot(real, imag, xnorm), real)
    tau = complex((beta - real) / beta, -imag / beta) if dtype.kind == "c" else (beta - real) / beta
    return dtype.type(tau), dtype.type(beta), dtype.type(1 / (complex(alpha) - beta) if dtype.kind == "c"
                                                       else 1 / (real - beta))


def _panel(a: DistributedMatrix, k0: int, k1: int, r0: int, c0: int, c1: int) -> np.ndarray:
    """``geqrf`` on the panel columns spread over the process column; returns the ``tau`` of each column.

    Columns are reduced one at a time within sub-panels of ``PANEL_INNER_BLOCK`` columns (``geqr2``); each finished
    sub-panel updates the rest of the panel as one block reflector (two GEMMs and two sums over the column).
    """
    comm = a.grid.col_comm
    panel, rows = a.local[r0:, c0:c1], a.rows[r0:]
    width = k1 - k0
    taus = np.zeros(width, dtype=a.dtype)
    for jb in range(0, width, PANEL_INNER_BLOCK):
        je = min(width, jb + PANEL_INNER_BLOCK)
        for j in range(jb, je):
            taus[j] = _panel_column(comm, panel, rows, k0, j, je)
        if je == width:
            break
        reflectors = _unit_lower(panel[:, jb:je], rows, k0 + jb)
        gram = allreduce_sum(comm, _local_products(reflectors, reflectors))
        t_factor = _triangular_factor(gram, taus[jb:je])
        products = np.asfortranarray(allreduce_sum(comm, _local_products(reflectors, panel[:, je:])))
        _local.gemm(-1.0, reflectors, t_factor.conj().T @ products, 1.0, panel[:, je:])
    return taus


def _panel_column(comm, panel: np.ndarray, rows: np.ndarray, k0: int, j: int, stop: int):
    """Reflector of panel column ``j`` (``larfg``) applied to columns ``j+1 .. stop``; returns its ``tau``."""
    g = k0 + j
    start, below = int(np.searchsorted(rows, g)), int(np.searchsorted(rows, g + 1))
    owns = below > start
    offer = np.array([np.linalg.norm(panel[below:, j]), panel[start, j] if owns else 0, owns], dtype=panel.dtype)
    offers = allgather_array(comm, offer)
    xnorm = float(np.linalg.norm(offers[:, 0].real))
    alpha = offers[int(np.flatnonzero(offers[:, 2].real == 1)[0]), 1]
    tau, beta, scale = _larfg(alpha, xnorm, panel.dtype)
    if scale is None:
        return tau
    panel[below:, j] *= scale
    if j + 1 < stop:
        reflector = panel[start:, j].copy()
        if owns:
            reflector[0] = 1
        products = allreduce_sum(comm, reflector.conj() @ panel[start:, j + 1:stop])
        panel[start:, j + 1:stop] -= np.conj(tau) * np.outer(reflector, products)
    if owns:
        panel[start, j] = beta
    return tau


def _reflectors(a: DistributedMatrix, k0: int, k1: int, r0: int, c0: int, c1: int) -> np.ndarray:
    """The panel's ``V``: this rank's rows ``>= k0``, unit diagonal, zeros above it (Fortran order)."""
    return _unit_lower(a.local[r0:, c0:c1], a.rows[r0:], k0)


def _unit_lower(block: np.ndarray, rows: np.ndarray, first: int) -> np.ndarray:
    """Copy of ``block`` (global rows ``rows``, column ``i`` holding reflector ``first + i``) as reflectors ``V``."""
    reflectors = np.array(block, order="F")
    diagonal = np.arange(first, first + block.shape[1])[None, :]
    reflectors[rows[:, None] < diagonal] = 0
    reflectors[rows[:, None] == diagonal] = 1
    return reflectors


def _triangular_factor(gram: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """LAPACK's ``larft`` (forward, columnwise) from the Gram matrix ``V^H V`` of the panel's reflectors."""
    width = taus.size
    t = np.zeros((width, width), dtype=gram.dtype, order="F")
    for i in range(width):
        t[i, i] = taus[i]
        t[:i, i] = -taus[i] * (t[:i, :i] @ gram[:i, i])
    return t
