"""Tile Cholesky, right-looking with lookahead (seed 000, Algorithm 5).

Step ``k``: factor the diagonal tile, solve the rest of its tile column with one TRSM per tile (so every worker
takes part in the solve: one TRSM on the whole column left the other workers idle at each step's start, and made
the tile path 1.5x slower at n = 2000), then update the trailing matrix tile column by tile column: HERK on the
diagonal tile and one GEMM on the whole block column below it (seed 000 §6.7: a few large GEMMs instead of many
tile GEMMs, and fewer tasks for the runtime). Tasks that feed the next panel get the highest priority, so the
runtime factors panel ``k + 1`` while the rest of step ``k``'s update is still running (lookahead).

The algorithm is written once, for the lower triangle. The upper triangle is factored as the lower triangle of the
conjugate transpose (``A = U^H U`` means ``A^H = U^H U``: ``L = U^H``), as :mod:`hetlapack.mpi.potrf` and SLATE do:
the body's tiles are A's tiles transposed and its kernel calls are conjugate-transposed (:class:`_LowerTriangle`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..contract.finite import FiniteCheck
from ..devices.base import Device
from ..errors import NotPositiveDefinite
from ..runtime import Block, Placement, Runtime, TiledMatrix, Trace
from ._common import check_fortran_matrix, check_tile, flop_scale
from .copy_in import insert_copy_in


def _potrf_tile(device: Device, a_kk, offset: int, lower: bool) -> None:
    """Factor a diagonal tile; a failure names the global 1-based leading minor, as SciPy does."""
    info = device.potrf(a_kk, lower)
    if info > 0:
        raise NotPositiveDefinite(offset + info)


def _conj_transposed_call(kernel: str | Callable[..., Any], operands: tuple, options: dict) -> tuple[tuple, dict]:
    """The call on ``operands`` that does what ``kernel(*operands, **options)`` does on their conjugate transposes,
    for the kernels and flags :func:`insert_potrf` uses: ``(X Y)^H = Y^H X^H``, so a triangle and a side flip,
    HERK's ``A A^H`` becomes ``A^H A``, and GEMM's two factors trade places and conj flags."""
    flipped = dict(options)
    if "lower" in options:
        flipped["lower"] = not options["lower"]
    if "side" in options:
        flipped["side"] = "L" if options["side"] == "R" else "R"
    if "conj_first" in options:
        flipped["conj_first"] = not options["conj_first"]
    if kernel == "gemm":
        a, b, c = operands
        operands = (b, a, c)
        flipped["conj_a"], flipped["conj_b"] = options.get("conj_b", False), options.get("conj_a", False)
    return operands, flipped


class _LowerTriangle:
    """The lower triangle of the Hermitian matrix stored in ``A``: what the algorithm body factors, in place.

    For a ``lower`` factorization it is A's own lower triangle. Otherwise it is A's upper triangle read through the
    conjugate transpose: tile ``(i, j)`` is A's tile ``(j, i)``, and :meth:`insert` turns each kernel call into the
    conjugate-transposed call on A's tiles. The tasks then touch the same data, in the same order, with the same
    priorities as an algorithm written for the upper triangle.
    """

    def __init__(self, rt: Runtime, A: TiledMatrix, lower: bool) -> None:
        self.rt = rt
        self.A = A
        self.transposed = not lower

    def __call__(self, i: int, j: int) -> Block:
        """The handle of tile ``(i, j)`` of the lower triangle."""
        return self.block(i, i + 1, j, j + 1)

    def block(self, i0: int, i1: int, j0: int, j1: int) -> Block:
        """The handle of tile rows ``i0:i1`` by tile columns ``j0:j1`` of the lower triangle."""
        return self.A.block(j0, j1, i0, i1) if self.transposed else self.A.block(i0, i1, j0, j1)

    def insert(self, kernel: str | Callable[..., Any], *operands: Any, reads: Sequence[Block],
               writes: Sequence[Block], **options: Any) -> None:
        """Insert ``kernel(*operands, **options)`` written for the lower triangle; on a transposed view, its
        conjugate transpose, reading its blocks in the order of the call's operands."""
        if self.transposed:
            operands, options = _conj_transposed_call(kernel, operands, options)
            reads = sorted(reads, key=operands.index)
        self.rt.insert(kernel, *operands, reads=reads, writes=writes, **options)


def potrf(a: np.ndarray, *, lower: bool, tile: int | Sequence[int], devices: Sequence[Device] | None = None,
          placement: str | Placement = "owner", trace: Trace | None = None, source: np.ndarray | None = None,
          clean: bool = False, check: FiniteCheck | None = None) -> None:
    """Cholesky factorization in place on the ``lower`` (or upper) triangle of a Fortran-ordered matrix.

    Only that triangle is read and written. With ``source`` (a matrix of ``a``'s shape, in any layout) ``a`` is
    first filled from it by copy-in tasks (:func:`~.copy_in.insert_copy_in`, the devices must include the host), its
    other triangle zeroed where ``clean``, and ``check`` told whether every value read was finite. Raises
    :class:`~hetlapack.errors.NotPositiveDefinite` naming the first leading minor that is not positive definite.
    """
    check_fortran_matrix(a, "potrf", square=True)
    nb = check_tile(tile)

    def insert(rt: Runtime) -> None:
        A = rt.matrix(a, nb)
        if source is not None:
            insert_copy_in(rt, A, source, check, steps=A.nt, scale=3, triangle=lower, clean=clean)
        insert_potrf(rt, A, lower)

    Runtime(devices, placement, trace).run(insert)


def insert_potrf(rt: Runtime, A: TiledMatrix, lower: bool, per_tile: bool = False) -> None:
    """Insert the tasks of a Cholesky factorization of ``A`` (square, with equal row and column tiles) on its
    ``lower`` (or upper) triangle, both by one body on the lower triangle ``L`` (:class:`_LowerTriangle`).

    ``per_tile`` cuts the trailing updates into one task per tile, as 2-D layouts need (a block column there
    spans several owners); otherwise one GEMM task covers a whole block column. Tile rows and columns have equal
    extents, so the flop counts read them from ``A`` whichever triangle is factored.
    """
    L = _LowerTriangle(rt, A, lower)
    nt = A.nt
    scale = flop_scale(A.dtype)
    for k in range(nt):
        first = 3 * (nt - k)
        width = A.cols(k)
        # L[k,k] = chol(L[k,k])
        L.insert(_potrf_tile, L(k, k), A.col_range(k)[0], lower=True, reads=[], writes=[L(k, k)],
                 priority=first + 2, name="potrf", flops=scale * width**3 / 3)
        if k + 1 == nt:
            break
        for i in range(k + 1, nt):
            panel = L(i, k)
            # L[i,k] = L[i,k] @ L[k,k]^{-H}
            L.insert("trsm", L(k, k), panel, side="R", lower=True, conj=True, unit=False, reads=[L(k, k)],
                     writes=[panel], priority=first + 1, flops=scale * A.rows(i) * width**2)
        for n in range(k + 1, nt):
            level = first if n == k + 1 else 3 * (nt - n)
            source = L(n, k)
            # L[n,n] -= L[n,k] @ L[n,k]^H
            L.insert("herk", source, L(n, n), lower=True, conj_first=False, reads=[source], writes=[L(n, n)],
                     priority=level, flops=scale * A.cols(n) ** 2 * width)
            if n + 1 == nt:
                continue
            updates = [(i, i + 1) for i in range(n + 1, nt)] if per_tile else [(n + 1, nt)]
            for i0, i1 in updates:
                below, target = L.block(i0, i1, k, k + 1), L.block(i0, i1, n, n + 1)
                # L[i,n] -= L[i,k] @ L[n,k]^H
                L.insert("gemm", below, source, target, conj_b=True, reads=[below, source], writes=[target],
                         priority=level, flops=2 * scale * A.rows(i0, i1) * A.cols(n) * width)
