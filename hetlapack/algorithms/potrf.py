"""Tile Cholesky, right-looking with lookahead (seed 000, Algorithm 5).

Step ``k``: factor the diagonal tile, solve the rest of its tile column (row) with one TRSM per tile (so every
worker takes part in the solve: one TRSM on the whole column left the other workers idle at each step's start,
and made the tile path 1.5x slower at n = 2000), then update the trailing matrix tile column by tile column: HERK
on the diagonal tile and one GEMM on the whole block column below it (seed 000 §6.7: a few large GEMMs instead of
many tile GEMMs, and fewer tasks for the runtime). Tasks
that feed the next panel get the highest priority, so the runtime factors panel ``k + 1`` while the rest of step
``k``'s update is still running (lookahead).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..devices.base import Device
from ..errors import NotPositiveDefinite
from ..runtime import Placement, Runtime, TiledMatrix, Trace
from ._common import check_fortran_matrix, check_tile, flop_scale


def _potrf_tile(device: Device, a_kk, lower: bool, offset: int) -> None:
    """Factor a diagonal tile; a failure names the global 1-based leading minor, as SciPy does."""
    info = device.potrf(a_kk, lower)
    if info > 0:
        raise NotPositiveDefinite(offset + info)


def potrf(a: np.ndarray, *, lower: bool, tile: int | Sequence[int], devices: Sequence[Device] | None = None,
          placement: str | Placement = "owner", trace: Trace | None = None) -> None:
    """Cholesky factorization in place on the ``lower`` (or upper) triangle of a Fortran-ordered matrix.

    Only that triangle is read and written. Raises :class:`~hetlapack.errors.NotPositiveDefinite` naming the first
    leading minor that is not positive definite.
    """
    check_fortran_matrix(a, "potrf", square=True)
    nb = check_tile(tile)
    with Runtime(devices, placement, trace) as rt:
        insert_potrf(rt, rt.matrix(a, nb), lower)


def insert_potrf(rt: Runtime, A: TiledMatrix, lower: bool, per_tile: bool = False) -> None:
    """Insert the tasks of a Cholesky factorization of ``A`` (square, with equal row and column tiles).

    ``per_tile`` cuts the trailing updates into one task per tile, as 2-D layouts need (a block column there
    spans several owners); otherwise one GEMM task covers a whole block column.
    """
    nt = A.nt
    scale = flop_scale(A.dtype)
    for k in range(nt):
        first = 3 * (nt - k)
        width = A.cols(k)
        # A[k,k] = chol(A[k,k])
        rt.insert(_potrf_tile, A(k, k), lower, A.col_range(k)[0], reads=[], writes=[A(k, k)], priority=first + 2,
                  name="potrf", flops=scale * width**3 / 3)
        if k + 1 == nt:
            break
        for i in range(k + 1, nt):
            panel = A(i, k) if lower else A(k, i)
            # lower: A[i,k] = A[i,k] @ A[k,k]^{-H}      upper: A[k,i] = A[k,k]^{-H} @ A[k,i]
            rt.insert("trsm", A(k, k), panel, side="R" if lower else "L", lower=lower, conj=True, unit=False,
                      reads=[A(k, k)], writes=[panel], priority=first + 1, flops=scale * A.rows(i) * width**2)
        for n in range(k + 1, nt):
            level = first if n == k + 1 else 3 * (nt - n)
            source = A(n, k) if lower else A(k, n)
            # lower: A[n,n] -= A[n,k] @ A[n,k]^H      upper: A[n,n] -= A[k,n]^H @ A[k,n]
            rt.insert("herk", source, A(n, n), lower=lower, conj_first=not lower, reads=[source],
                      writes=[A(n, n)], priority=level, flops=scale * A.cols(n) ** 2 * width)
            if n + 1 == nt:
                continue
            updates = [(i, i + 1) for i in range(n + 1, nt)] if per_tile else [(n + 1, nt)]
            for i0, i1 in updates:
                flops = 2 * scale * A.rows(i0, i1) * A.cols(n) * width
                if lower:
                    below, target = A.block(i0, i1, k, k + 1), A.block(i0, i1, n, n + 1)
                    # A[i,n] -= A[i,k] @ A[n,k]^H
                    rt.insert("gemm", below, source, target, conj_b=True, reads=[below, source], writes=[target],
                              priority=level, flops=flops)
                else:
                    right, target = A.block(k, k + 1, i0, i1), A.block(n, n + 1, i0, i1)
                    # A[n,i] -= A[k,n]^H @ A[k,i]
                    rt.insert("gemm", source, right, target, conj_a=True, reads=[source, right], writes=[target],
                              priority=level, flops=flops)
