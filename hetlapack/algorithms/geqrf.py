"""Blocked Householder QR in LAPACK's storage (seed 000 §4, §6.7), and the orthogonal factor built from it.

``geqrf`` step ``k``: the tall panel (tile rows ``k:`` of tile column ``k``) and its compact-WY factor ``T_k`` in
one recursive kernel (LAPACK geqrt3: twice geqrf's speed on a tall panel, and the panel is the critical path),
then ``A[k:,j] = H_k^H A[k:,j]`` (LARFB, GEMM-rich) for every tile column to the right: the next panel's column
first and alone (lookahead), the others in the blocks the runtime cuts for its workers
(:meth:`~hetlapack.runtime.Runtime.column_blocks`). The reflectors and ``tau`` are LAPACK's, so ``R`` and its signs
equal SciPy's, except where a column cancels to exactly zero in one rounding and not the other
(``docs/drop-in.md``). ``orgqr`` applies the panels backwards to the identity, as LAPACK's orgqr does, but reads the
reflectors from the (unchanged) factorization rather than from Q's own storage: every ``T_k`` can then be formed at
once, and each tile column of Q is an independent chain of LARFB updates, with no panel task between steps (the
columns of a step again in blocks).
``qr_in_place`` factors and builds Q in the factorization's own storage instead, as LAPACK does (no second matrix),
where Q is as wide as the factorization (SciPy's economic mode, and a square matrix's full one), in one run of the
runtime: R is copied out a tile at a time as soon as its panel step has finished the tile, and Q's first steps run
beside the factorization's last. ``orgqr`` can read the ``T_k`` that ``geqrf`` formed (:func:`compact_wy_factors`)
instead of forming them again; ``qr_in_place`` always does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..contract.arrays import copy_tile_of_triangle
from ..contract.finite import FiniteCheck
from ..devices.base import Device
from ..devices.cpu import HOST_MEMORY
from ..runtime import Placement, Runtime, TiledMatrix, Trace
from ._common import check_fortran_matrix, check_tile, flop_scale, panel_bounds, widest_tile
from .copy_in import insert_copy_in


def geqrf(a: np.ndarray, *, tile: int | Sequence[int], devices: Sequence[Device] | None = None,
          placement: str | Placement = "owner", trace: Trace | None = None, source: np.ndarray | None = None,
          check: FiniteCheck | None = None, factors: np.ndarray | None = None) -> np.ndarray:
    """QR factorization in place on an ``(m, n)`` Fortran-ordered matrix; returns ``tau`` (length ``min(m, n)``).

    On return ``a`` holds LAPACK geqrf's output: ``R`` on and above the diagonal, the Householder vectors below.
    ``source`` and ``check`` as for :func:`~.getrf.getrf`. ``factors`` (from :func:`compact_wy_factors`) receives
    each panel's ``T_k``, for :func:`orgqr_in_place`.
    """
    check_fortran_matrix(a, "geqrf")
    nb = check_tile(tile)
    kmin = min(a.shape)
    tau = np.zeros((kmin, 1), dtype=a.dtype, order="F")
    factors = compact_wy_factors(a, tile) if factors is None else factors

    def insert(rt: Runtime) -> None:
        A = rt.matrix(a, nb)
        tau_tiles, T = householder_tiles(A, tau, factors)
        if source is not None:
            insert_copy_in(rt, A, source, check, steps=tau_tiles.mt, scale=2)
        insert_geqrf(rt, A, tau_tiles, T)

    Runtime(devices, placement, trace).run(insert)
    return tau[:, 0].copy()


def compact_wy_factors(a: np.ndarray, tile: int | Sequence[int]) -> np.ndarray:
    """Room for the ``T_k`` of every panel of a QR of ``a`` in tiles ``tile``: one column block per panel."""
    return np.zeros((widest_tile(check_tile(tile)), min(a.shape)), dtype=a.dtype, order="F")


def householder_tiles(A: TiledMatrix, tau: np.ndarray | None = None,
                      factors: np.ndarray | None = None) -> tuple[TiledMatrix, TiledMatrix]:
    """``tau`` and the compact-WY factors ``T`` cut like ``A``'s panels (virtual when the arrays are None)."""
    kmin = min(A.shape)
    bounds = panel_bounds(A.col_bounds, kmin)
    rows = factors.shape[0] if factors is not None else max(np.diff(bounds), default=1)
    tau_tiles = TiledMatrix(tau, bounds, 1, name="tau", shape=(kmin, 1), dtype=A.dtype)
    T = TiledMatrix(factors, [0, rows], bounds, name="T", shape=(rows, kmin), dtype=A.dtype)
    return tau_tiles, T


def insert_geqrf(rt: Runtime, A: TiledMatrix, tau_tiles: TiledMatrix, T: TiledMatrix) -> None:
    """Insert the tasks of a Householder QR of ``A`` (row and column tiles equal up to ``min(m, n)``)."""
    mt, nt, kt = A.mt, A.nt, tau_tiles.mt
    scale = flop_scale(A.dtype)
    for k in range(kt):
        panel = A.block(k, mt, k, k + 1)
        rows, width = panel.shape
        steps = min(rows, width)
        top = 2 * (kt - k)
        # A[k:,k] = Q_k R_kk, with T_k: H_k = I - V_k T_k V_k^H  (flops: geqrf's and larft's)
        rt.insert("geqrt", panel, tau_tiles(k, 0), T(0, k), reads=[], writes=[panel, tau_tiles(k, 0), T(0, k)],
                  priority=top + 1,
                  flops=scale * (2 * max(rows, width) * steps**2 - 2 * steps**3 / 3 + rows * steps**2))
        lookahead = [(k + 1, k + 2)] if k + 1 < nt else []
        for j0, j1 in lookahead + rt.column_blocks(k + 2, nt):
            columns = A.block(k, mt, j0, j1)
            # A[k:,j] = H_k^H A[k:,j]
            rt.insert("larfb", panel, T(0, k), columns, conj=True, reads=[panel, T(0, k)], writes=[columns],
                      priority=top if j0 == k + 1 else 2 * (kt - j0), flops=4 * scale * rows * A.cols(j0, j1) * steps)


def orgqr(qr: np.ndarray, tau: np.ndarray, *, ncols: int, tile: int | Sequence[int],
          devices: Sequence[Device] | None = None, placement: str | Placement = "owner",
          trace: Trace | None = None, factors: np.ndarray | None = None) -> np.ndarray:
    """The first ``ncols`` columns of ``Q`` (an ``(m, ncols)`` Fortran array) from geqrf's output and ``tau``.

    ``len(tau) <= ncols <= m``; ``qr`` is only read. ``factors`` as for :func:`orgqr_in_place`.
    """
    nb = check_tile(tile)
    m = qr.shape[0]
    kmin = len(tau)
    if not kmin <= ncols <= m or qr.ndim != 2 or qr.shape[1] < kmin:
        raise ValueError(f"orgqr: need len(tau) <= ncols <= m, got len(tau)={kmin}, ncols={ncols}, m={m}")
    reflectors = np.asfortranarray(qr[:, :kmin])
    q = np.zeros((m, ncols), dtype=qr.dtype, order="F")
    np.fill_diagonal(q, 1)
    taus = np.asfortranarray(np.asarray(tau, dtype=qr.dtype).reshape(-1, 1))
    formed = factors is not None
    factors = factors if formed else compact_wy_factors(reflectors, tile)

    def insert(rt: Runtime) -> None:
        Q = rt.matrix(q, nb)
        V = rt.matrix(reflectors, nb, name="V")
        tau_tiles, T = householder_tiles(V, taus, factors)
        mt, nt, kt = Q.mt, Q.nt, tau_tiles.mt
        scale = flop_scale(qr.dtype)
        for k in reversed(range(kt)):
            panel = V.block(k, mt, k, k + 1)
            rows, width = panel.shape
            if not formed:  # T_k: H_k = I - V_k T_k V_k^H
                rt.insert("larft", panel, tau_tiles(k, 0), T(0, k), reads=[panel, tau_tiles(k, 0)],
                          writes=[T(0, k)], priority=k + 1, flops=scale * rows * width**2)
            for j0, j1 in rt.column_blocks(k, nt):
                columns = Q.block(k, mt, j0, j1)
                # Q[k:,j] = H_k Q[k:,j]  (columns left of k are still the identity's, zero in rows k:)
                rt.insert("larfb", panel, T(0, k), columns, conj=False, reads=[panel, T(0, k)], writes=[columns],
                          priority=k, flops=4 * scale * rows * Q.cols(j0, j1) * width)

    Runtime(devices, placement, trace).run(insert)
    return q


def qr_in_place(a: np.ndarray, r: np.ndarray, *, tile: int | Sequence[int], devices: Sequence[Device] | None = None,
                placement: str | Placement = "owner", trace: Trace | None = None, source: np.ndarray | None = None,
                check: FiniteCheck | None = None) -> np.ndarray:
    """Householder QR of ``a`` (``m x n``, ``m >= n``, Fortran-ordered), R written into ``r`` (``n x n``: ``np.triu``
    of geqrf's first ``n`` rows, in any layout) and ``a`` overwritten with the first ``n`` columns of Q, as LAPACK's
    geqrf, a copy of R and orgqr do; returns ``tau``. ``source`` and ``check`` as for :func:`geqrf`.

    One run of the runtime: :func:`insert_geqrf`, then :func:`insert_r_copy` (each tile of R copied out, and the
    factorization's tile above the diagonal zeroed for Q, as soon as geqrf has finished it), then
    :func:`insert_orgqr_in_place` reading geqrf's own ``T_k``: Q's first steps, at the bottom right, run beside
    the factorization's last panels, and R's copy fills the moments a worker would wait.
    """
    check_fortran_matrix(a, "qr_in_place")
    nb = check_tile(tile)
    m, n = a.shape
    if n > m or r.shape != (n, n):
        raise ValueError(f"qr_in_place: need n <= m and R of shape (n, n), got {a.shape} and {r.shape}")
    tau = np.zeros((n, 1), dtype=a.dtype, order="F")
    factors = compact_wy_factors(a, tile)

    def insert(rt: Runtime) -> None:
        A = rt.matrix(a, nb)
        tau_tiles, T = householder_tiles(A, tau, factors)
        if source is not None:
            insert_copy_in(rt, A, source, check, steps=tau_tiles.mt, scale=2)
        insert_geqrf(rt, A, tau_tiles, T)
        insert_r_copy(rt, A, r)
        insert_orgqr_in_place(rt, A, tau_tiles, T)

    Runtime(devices, placement, trace).run(insert)
    return tau[:, 0].copy()


def _copy_r_tile(device, tile: np.ndarray, r_tile: np.ndarray, diagonal: bool) -> None:
    """Copy a finished tile of R (on or above the diagonal; a diagonal tile of a tall matrix may reach below R's
    rows) into ``r_tile``, zeros below the diagonal; a tile above it is then zeroed in the factorization, where Q's
    columns start as the identity's."""
    copy_tile_of_triangle(r_tile.T, tile[:r_tile.shape[0]].T, 0 if diagonal else 1, 0, True)  # R's transpose: lower
    if not diagonal:
        tile[...] = 0


def _zero(device, part: np.ndarray) -> None:
    """Zero R's part below its diagonal tiles."""
    part[...] = 0


def insert_r_copy(rt: Runtime, A: TiledMatrix, r: np.ndarray) -> None:
    """Insert the tasks that copy R (the upper triangle of ``A``'s first ``n`` rows, ``n x n``) into ``r`` on the
    host, a tile each, after the factorization's last write to the tile (step ``i`` for row ``i`` of tiles), and
    zero ``A``'s tiles above the diagonal for Q. Q's step ``i`` first writes that row of tiles again, so the copy
    runs just ahead of it; the zeros below R's diagonal tiles wait for idle moments."""
    host = next(i for i, d in enumerate(rt.devices) if d.memory_space == HOST_MEMORY)
    for i in range(A.nt):
        r0, r1 = A.col_range(i)
        if i:
            rt.insert(_zero, r[r0:r1, :r0], device=host, name="copy-out")
        for j in range(i, A.nt):
            c0, c1 = A.col_range(j)
            diagonal = i == j
            rt.insert(_copy_r_tile, A(i, j), r[r0:r1, c0:c1], diagonal, reads=[A(i, j)] if diagonal else [],
                      writes=[] if diagonal else [A(i, j)], priority=i + 1, device=host, name="copy-out")


def insert_orgqr_in_place(rt: Runtime, Q: TiledMatrix, tau_tiles: TiledMatrix, T: TiledMatrix) -> None:
    """Insert the tasks that overwrite geqrf's output ``Q`` (its tiles above the diagonal already zero) with the
    first ``n`` columns of Q, from the ``T_k`` geqrf formed, as LAPACK's orgqr does.

    Backwards over the panels: ``H_k`` updates the tile columns right of panel ``k`` (already partial columns of
    Q), then panel ``k`` is overwritten with ``H_k``'s own columns (orgqr of the panel, from ``T_k``), once those
    updates have read its reflectors."""
    mt, nt = Q.mt, Q.nt
    scale = flop_scale(Q.dtype)
    for k in reversed(range(tau_tiles.mt)):
        panel = Q.block(k, mt, k, k + 1)
        rows, width = panel.shape
        for j0, j1 in rt.column_blocks(k + 1, nt, per_worker=2):
            columns = Q.block(k, mt, j0, j1)
            rt.insert("larfb", panel, T(0, k), columns, conj=False, reads=[panel, T(0, k)], writes=[columns],
                      priority=k, flops=4 * scale * rows * Q.cols(j0, j1) * width)
        # panel k = H_k [I; 0] = [I; 0] - V_k T_k V_k1^H, once every update has read V_k
        rt.insert("orgqr", panel, tau_tiles(k, 0), T(0, k), reads=[tau_tiles(k, 0), T(0, k)], writes=[panel],
                  priority=k + 1, flops=scale * rows * width**2)
