"""Tile Cholesky, right-looking with lookahead (seed 000, Algorithm 5).

Step ``k``: factor the diagonal tile, solve the rest of its tile column (row) with one TRSM, then update the
trailing matrix tile column by tile column: HERK on the diagonal tile and one GEMM on the whole block column
below it (seed 000 §6.7: a few large GEMMs instead of many tile GEMMs, and fewer tasks for the runtime). Tasks
that feed the next panel get the highest priority, so the runtime factors panel ``k + 1`` while the rest of step
``k``'s update is still running (lookahead).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..devices.base import Device
from ..runtime import Placement, Runtime, Trace
from ._common import check_fortran_matrix, check_tile


def _potrf_tile(device: Device, a_kk, lower: bool, offset: int) -> None:
    """Factor a diagonal tile; a failure names the global 1-based leading minor, as SciPy does."""
    info = device.potrf(a_kk, lower)
    if info > 0:
        raise np.linalg.LinAlgError(f"{offset + info}-th leading minor of the array is not positive definite")


def potrf(a: np.ndarray, *, lower: bool, tile: int, devices: Sequence[Device] | None = None,
          placement: str | Placement = "owner", trace: Trace | None = None) -> None:
    """Cholesky factorization in place on the ``lower`` (or upper) triangle of a Fortran-ordered matrix.

    Only that triangle is read and written. Raises ``numpy.linalg.LinAlgError`` naming the first leading minor
    that is not positive definite.
    """
    check_fortran_matrix(a, "potrf", square=True)
    nb = check_tile(tile)
    with Runtime(devices, placement, trace) as rt:
        A = rt.matrix(a, nb)
        nt = A.nt
        for k in range(nt):
            first = 3 * (nt - k)
            # A[k,k] = chol(A[k,k])
            rt.insert(_potrf_tile, A(k, k), lower, k * nb, reads=[], writes=[A(k, k)], priority=first + 2,
                      name="potrf", flops=(A.col_range(k)[1] - k * nb) ** 3 / 3)
            if k + 1 == nt:
                break
            panel = A.block(k + 1, nt, k, k + 1) if lower else A.block(k, k + 1, k + 1, nt)
            # lower: A[k+1:,k] = A[k+1:,k] @ A[k,k]^{-H}      upper: A[k,k+1:] = A[k,k]^{-H} @ A[k,k+1:]
            rt.insert("trsm", A(k, k), panel, side="R" if lower else "L", lower=lower, conj=True, unit=False,
                      reads=[A(k, k)], writes=[panel], priority=first + 1, flops=(nt - k - 1) * nb ** 3)
            for n in range(k + 1, nt):
                level = first if n == k + 1 else 3 * (nt - n)
                source = A(n, k) if lower else A(k, n)
                # lower: A[n,n] -= A[n,k] @ A[n,k]^H      upper: A[n,n] -= A[k,n]^H @ A[k,n]
                rt.insert("herk", source, A(n, n), lower=lower, conj_first=not lower, reads=[source],
                          writes=[A(n, n)], priority=level, flops=nb ** 3)
                if n + 1 == nt:
                    continue
                if lower:
                    below, target = A.block(n + 1, nt, k, k + 1), A.block(n + 1, nt, n, n + 1)
                    # A[n+1:,n] -= A[n+1:,k] @ A[n,k]^H
                    rt.insert("gemm", below, source, target, conj_b=True, reads=[below, source], writes=[target],
                              priority=level, flops=2 * (nt - n - 1) * nb ** 3)
                else:
                    right, target = A.block(k, k + 1, n + 1, nt), A.block(n, n + 1, n + 1, nt)
                    # A[n,n+1:] -= A[k,n]^H @ A[k,n+1:]
                    rt.insert("gemm", source, right, target, conj_a=True, reads=[source, right], writes=[target],
                              priority=level, flops=2 * (nt - n - 1) * nb ** 3)
