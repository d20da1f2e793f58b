"""Whether the replay kernels give this process's LAPACK results, bit for bit.

:mod:`._lu_replay`, :mod:`._cholesky_replay` and :mod:`._qr_replay` replay the roundings of OpenBLAS's own kernels
on some CPUs (which kernels OpenBLAS picks depends on the CPU, on ``OPENBLAS_CORETYPE``, on its version and build).
Rather than guess from those, the first call that could use a replay factors the same matrices both ways, every shape
class the replay distinguishes, and uses it only if every bit, pivot and ``info`` agrees; otherwise the LAPACK loop
runs as before. The answer is kept for the process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..perf.model import GETF2_MAX_N, REPLAY_MAX_N
from ._lu_replay import KERNEL_NAMES
from .compiling import INDEX_DTYPE, kernel_dtypes, packed_lu_only
from .threads import launch_checked, lapack_loop, replay_loop

#: Shapes LU factors both ways: every square order the replay takes, and tall and wide ones whose matrix-vector
#: products run OpenBLAS's blocks of 4, 8 and 16 rows and its odd rows.
CHECKED_SHAPES = (tuple((n, n) for n in range(1, GETF2_MAX_N + 1))
                  + ((17, 16), (16, 17), (24, 5), (40, 4), (37, 16), (5, 24), (3, 1), (1, 3)))

#: Shapes past ``getf2``'s, checked apart (:func:`replayed_blocked_getrf_kernels`): every square order to the
#: replay's largest (each splits into panels its own way, and its triangular solves into blocks of 16, 8 and 4
#: rows), and tall and wide ones (rows below the last panel, columns right of it).
CHECKED_BLOCKED_SHAPES = (tuple((n, n) for n in range(GETF2_MAX_N + 1, REPLAY_MAX_N["getrf"] + 1))
                          + ((64, 17), (17, 64), (40, 33), (33, 40), (64, 20), (20, 64), (50, 18), (63, 64)))

#: Rows up to which the QR replay is checked in one piece (:func:`replayed_qr_kernels`): where it first ran, on
#: machines of both kernel families.
CHECKED_QR_ROWS = 16

#: Shapes QR factors both ways: every square order to :data:`CHECKED_QR_ROWS`, and tall ones (columns whose norms
#: start at either parity of address, reflectors shorter than the whole matrix in SkylakeX's small kernels, blocks
#: of rows).
CHECKED_QR_SHAPES = (tuple((n, n) for n in range(1, CHECKED_QR_ROWS + 1))
                     + ((2, 1), (3, 1), (5, 2), (6, 5), (7, 3), (8, 3), (9, 8), (12, 5), (13, 4), (16, 9), (16, 1)))

#: Shapes of more rows, to the replay's largest, checked apart (:func:`replayed_larger_qr_kernels`): a LAPACK whose
#: QR of these the replay does not give leaves them to the loop, and the smaller ones to the replay.
CHECKED_LARGER_QR_SHAPES = (tuple((n, n) for n in range(CHECKED_QR_ROWS + 1, REPLAY_MAX_N["geqrf"] + 1))
                            + ((24, 5), (29, 13), (32, 17), (32, 1)))

#: Matrices of each shape and kind (LU: normally distributed, and entries in {-1, 0, 1} with ties and zero pivots;
#: Cholesky: Gram matrices, and diagonally dominant ones of small integers).
CHECKED_MATRICES = 32

#: Elements below which OpenBLAS's ``getrf`` factors on one thread (``interface/lapack/getrf.c``); above, its
#: threaded version orders the work its own way.
ONE_THREAD_ELEMENTS = 40_000


def getrf_kernels(dtype: np.dtype, m: int, n: int) -> int | None:
    """OpenBLAS's kernels (``_lu_replay.SKYLAKEX`` or ``HASWELL``) whose roundings ``getrf`` of ``m x n`` matrices in
    ``dtype`` replays, or ``None`` where it runs the LAPACK loop: a shape the replay takes, and a LAPACK whose
    results it gave in this process (:func:`replayed_getrf_kernels`; past ``getf2``'s orders,
    :func:`replayed_blocked_getrf_kernels`)."""
    if np.dtype(dtype) not in kernel_dtypes("getrf_replay"):
        return None
    if 0 < min(m, n) <= GETF2_MAX_N:
        return replayed_getrf_kernels() if m * n < ONE_THREAD_ELEMENTS else None
    if max(m, n) <= REPLAY_MAX_N["getrf"]:
        return replayed_blocked_getrf_kernels()
    return None


def potrf_kernels(dtype: np.dtype, n: int) -> int | None:
    """As :func:`getrf_kernels`, for the Cholesky factors of order-``n`` matrices (:func:`replayed_potrf_kernels`)."""
    if np.dtype(dtype) in kernel_dtypes("potrf_replay") and 0 < n <= REPLAY_MAX_N["potrf"]:
        return replayed_potrf_kernels()
    return None


def qr_kernels(dtype: np.dtype, m: int, n: int) -> int | None:
    """As :func:`getrf_kernels`, for the QR of ``m x n`` matrices (:func:`replayed_qr_kernels`, and
    :func:`replayed_larger_qr_kernels` past :data:`CHECKED_QR_ROWS` rows): ``n <= m``."""
    if np.dtype(dtype) not in kernel_dtypes("qr_replay") or not 0 < n <= m <= REPLAY_MAX_N["geqrf"]:
        return None
    if m <= CHECKED_QR_ROWS:
        return replayed_qr_kernels()
    larger = replayed_larger_qr_kernels()
    return larger if larger == replayed_qr_kernels() else None


@functools.cache
def replayed_getrf_kernels() -> int | None:
    """The kernels whose replay gave LAPACK's LU, bit for bit, on every :data:`CHECKED_SHAPES` in this process, or
    ``None``."""
    return _replaying_kernels(_general_stacks(CHECKED_SHAPES), _factored_lu)


@functools.cache
def replayed_blocked_getrf_kernels() -> int | None:
    """The kernels of :func:`replayed_getrf_kernels` where the replay of OpenBLAS's blocked ``getrf`` on them (its
    panels by ``getf2``, its triangular solves and matrix products) gave LAPACK's LU, bit for bit, on every
    :data:`CHECKED_BLOCKED_SHAPES` in this process, or ``None``."""
    kernels = replayed_getrf_kernels()
    if kernels is None:
        return None
    stacks = _general_stacks(CHECKED_BLOCKED_SHAPES)
    return kernels if all(_same(_factored_lu(a, kernels), _factored_lu(a, None)) for a in stacks) else None


@functools.cache
def replayed_potrf_kernels() -> int | None:
    """The kernels whose replay gave LAPACK's lower and upper Cholesky factors, bit for bit, at every order it takes
    in this process, or ``None``."""
    rng = np.random.default_rng(2026)
    stacks = []
    for n in range(1, REPLAY_MAX_N["potrf"] + 1):
        g = rng.standard_normal((CHECKED_MATRICES, n, n))
        dominant = rng.integers(-2, 3, (CHECKED_MATRICES, n, n))
        dominant = dominant + dominant.transpose(0, 2, 1) + 5 * n * np.eye(n)
        stacks.append(np.concatenate([g @ g.transpose(0, 2, 1) + n * np.eye(n), dominant]).astype(np.float32))
    return _replaying_kernels(stacks, _factored_cholesky)


@functools.cache
def replayed_qr_kernels() -> int | None:
    """The kernels whose replay gave LAPACK's Q (economic and full) and R, bit for bit, on every
    :data:`CHECKED_QR_SHAPES` in this process, or ``None``."""
    return _replaying_kernels(_general_stacks(CHECKED_QR_SHAPES), _factored_qr)


@functools.cache
def replayed_larger_qr_kernels() -> int | None:
    """As :func:`replayed_qr_kernels`, on :data:`CHECKED_LARGER_QR_SHAPES`."""
    return _replaying_kernels(_general_stacks(CHECKED_LARGER_QR_SHAPES), _factored_qr)


def qr_shapes_replayed_otherwise(kernels: int) -> list[tuple[int, int]]:
    """The :data:`CHECKED_QR_SHAPES` whose Q or R the replay of ``kernels`` does not give as this process's LAPACK
    does (why :func:`replayed_qr_kernels` is ``None``)."""
    stacks = _general_stacks(CHECKED_QR_SHAPES)
    return [shape for shape, a in zip(CHECKED_QR_SHAPES, stacks, strict=True)
            if not _same(_factored_qr(a, kernels), _factored_qr(a, None))]


def _general_stacks(shapes: tuple[tuple[int, int], ...]) -> list[np.ndarray]:
    """A float32 stack per shape: normally distributed matrices, and matrices of -1, 0 and 1 (ties, zeros)."""
    rng = np.random.default_rng(2026)
    stacks = []
    for m, n in shapes:
        size = (CHECKED_MATRICES, m, n)
        stacks.append(np.concatenate([rng.standard_normal(size), rng.integers(-1, 2, size)]).astype(np.float32))
    return stacks


def _replaying_kernels(stacks: list[np.ndarray], factored: Callable) -> int | None:
    """The first kernels whose replay (``factored(a, kernels)``) gives what LAPACK does (``factored(a, None)``) on
    every stack, or ``None``."""
    expected = [factored(a, None) for a in stacks]
    for kernels in KERNEL_NAMES:
        if all(_same(factored(a, kernels), lapack) for a, lapack in zip(stacks, expected)):
            return kernels
    return None


def _same(ours: tuple[np.ndarray, ...], theirs: tuple[np.ndarray, ...]) -> bool:
    return all(np.array_equal(mine, other) for mine, other in zip(ours, theirs))


def _factored_lu(a: np.ndarray, kernels: int | None) -> tuple[np.ndarray, ...]:
    """The packed LU's bits, the pivots and ``info`` of each matrix of ``a``: by the replay of ``kernels``, or by
    the LAPACK loop where ``None``."""
    out = np.empty_like(a)
    piv = np.empty((a.shape[0], min(a.shape[1:])), dtype=INDEX_DTYPE)
    info = np.zeros(a.shape[0], dtype=INDEX_DTYPE)
    if kernels is None:
        lapack_loop("getrf_each", a.dtype, a.shape[0], max(a.shape[1:]), False, (a, out, piv, info), 1)
    else:
        launch_checked("getrf_replay", False, a.dtype, *a.shape, a, out, piv, info, kernels,
                       *packed_lu_only(*a.shape[1:], a.dtype))
    return out.view(np.uint32), piv, info


def _factored_cholesky(a: np.ndarray, kernels: int | None) -> tuple[np.ndarray, ...]:
    """The lower and the upper Cholesky factors' bits (the other triangle zero) and ``info`` of each matrix of ``a``,
    as :func:`_factored_lu` computes the LU."""
    results = []
    for lower in (True, False):
        out = np.empty_like(a)
        info = np.zeros(a.shape[0], dtype=INDEX_DTYPE)
        if kernels is None:
            lapack_loop("potrf_each", a.dtype, a.shape[0], a.shape[1], False, (a, lower, True, out, info), 1)
        else:
            launch_checked("potrf_replay", False, a.dtype, *a.shape, a, lower, True, out, info, kernels)
        results += [out.view(np.uint32), info]
    return tuple(results)


def _factored_qr(a: np.ndarray, kernels: int | None) -> tuple[np.ndarray, ...]:
    """The bits of each matrix's R and of its economic and full Q, as :func:`_factored_lu` computes the LU."""
    batch, m, n = a.shape
    results = []
    for ncols in (n, m):
        q = np.empty((batch, ncols, m), dtype=a.dtype).transpose(0, 2, 1)
        r = np.empty((batch, n, n), dtype=a.dtype)
        if kernels is None:
            lapack_loop("qr_each", a.dtype, batch, m, False, (a, q, r), 1)
        else:
            replay_loop("qr_replay", a.dtype, batch, m, False, (a, q, r), kernels)
        results += [q.view(np.uint32), r.view(np.uint32)]
    return tuple(results)
