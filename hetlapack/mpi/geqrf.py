"""Distributed Householder QR (ScaLAPACK's ``pxgeqrf``/``pxungqr``) with compact-WY trailing updates.

Step ``k`` (panel columns ``k0 .. k0+w`` in process column ``pc_k``)::

    V, T = geqrt(A[k:, k])              LAPACK on one rank of pc_k after one gather of the panel (panel.py):
                                        R, V and tau are geqrf's, so the signs of R equal SciPy's; T is larft's
    W = V^H A[k:, j]                    j > k: V broadcast along process rows, T from the panel's root; the
                                        products are summed along process columns (2-D LARFB, seed 002 §2.4)
    A[k:, k+1] -= V T^H W[:, k+1]       lookahead: the next panel's columns first, then that panel is factored
    A[k:, j] -= V T^H W[:, j]           j > k+1, while process column pc_{k+1} factors panel k+1

Local failures are held by a :class:`~hetlapack.mpi._comm.FailureLatch` and agreed on once per step.
"""

from __future__ import annotations

import numpy as np

from . import _local
from ._comm import FailureLatch, agreed, allreduce_sum, bcast_array
from .matrix import DistributedMatrix
from .panel import factor_panel, panel_root


def geqrf(a: DistributedMatrix) -> list[np.ndarray]:
    """Factor ``a`` in place: ``R`` in the upper triangle, reflectors below; returns each panel's ``T`` factor.

    The ``T`` factors (upper triangular, ``tau`` on their diagonals) are identical on every rank.
    """
    if a.block[0] != a.block[1]:
        raise ValueError(f"QR needs square blocks, got {a.block}")
    grid, nb = a.grid, a.block[0]
    n, kmax = a.shape[1], min(a.shape)
    latch = FailureLatch(grid.comm)
    t_factors = []
    t_factor = _factor_panel(a, 0, min(kmax, nb), latch) if kmax else None
    for k0 in range(0, kmax, nb):
        k1 = min(kmax, k0 + nb)
        k2 = min(kmax, k1 + nb)
        pcol = a.col_owner(k0)
        r0, c0, c1, c2 = a.local_rows_from(k0), a.local_cols_from(k0), a.local_cols_from(k1), a.local_cols_from(k2)
        latch.agree()
        t_factor = bcast_array(grid.comm, t_factor, panel_root(a, k0), (k1 - k0, k1 - k0), a.dtype)
        t_factors.append(t_factor)
        if k1 >= n:
            continue
        reflectors = _reflectors(a, k0, k1, r0, c0, c1) if grid.mycol == pcol else None
        reflectors = bcast_array(grid.row_comm, reflectors, pcol, (a.rows.size - r0, k1 - k0), a.dtype)
        trailing = a.local[r0:, c1:]
        products = np.zeros((k1 - k0, trailing.shape[1]), dtype=a.dtype, order="F")
        with latch.guard():
            # W[k, j] = V^H A[k:, j]   (this rank's rows; summed over the process column next)
            products = _local_products(reflectors, trailing)
        products = allreduce_sum(grid.col_comm, products)
        update = np.zeros_like(products, order="F")
        with latch.guard():
            update = np.asfortranarray(t_factor.conj().T @ products)
            # A[k:, k+1] -= V T^H W[:, k+1]
            _local.gemm(-1.0, reflectors, update[:, :c2 - c1], 1.0, trailing[:, :c2 - c1])
        if k1 < kmax:
            t_factor = _factor_panel(a, k1, k2, latch)
        with latch.guard():
            # A[k:, j] -= V T^H W[:, j]
            _local.gemm(-1.0, reflectors, update[:, c2 - c1:], 1.0, trailing[:, c2 - c1:])
    latch.agree()
    return t_factors


def _factor_panel(a: DistributedMatrix, k0: int, k1: int, latch: FailureLatch) -> np.ndarray | None:
    """LAPACK ``geqrt`` of the panel ``A[k0:, k0:k1]``; on its root returns the panel's ``T``."""
    # A[k0:, k0:k1] = (I - V T V^H) R
    return factor_panel(a, k0, k1, _local.geqrt, np.zeros((k1 - k0, k1 - k0), dtype=a.dtype, order="F"), latch)


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
