"""Whether the replay kernels give this process's LAPACK results, bit for bit.

:mod:`._lu_replay` replays the roundings of OpenBLAS's own kernels on some CPUs (which kernels OpenBLAS picks depends
on the CPU, on ``OPENBLAS_CORETYPE``, on its version and build). Rather than guess from those, the first call that
could use it factors the same matrices both ways, every shape class the replay distinguishes, and uses it only if
every bit and pivot agrees; otherwise the LAPACK loop runs as before. The answer is kept for the process.
"""

from __future__ import annotations

import functools

import numpy as np

from ._lu_replay import KERNEL_NAMES, REPLAY_MAX_ORDER
from .compiling import INDEX_DTYPE, kernel_dtypes
from .threads import launch_checked, lapack_loop

#: Shapes factored both ways: every square order the replay takes, and tall and wide ones whose matrix-vector
#: products run OpenBLAS's blocks of 4, 8 and 16 rows and its odd rows.
CHECKED_SHAPES = (tuple((n, n) for n in range(1, REPLAY_MAX_ORDER + 1))
                  + ((17, 16), (16, 17), (24, 5), (40, 4), (37, 16), (5, 24), (3, 1), (1, 3)))

#: Matrices of each shape and kind (normally distributed; entries in {-1, 0, 1}, with ties and zero pivots).
CHECKED_MATRICES = 32

#: Elements below which OpenBLAS's ``getrf`` factors on one thread (``interface/lapack/getrf.c``); above, its
#: threaded version orders the work its own way.
ONE_THREAD_ELEMENTS = 40_000


def getrf_kernels(dtype: np.dtype, m: int, n: int) -> int | None:
    """OpenBLAS's kernels (``_lu_replay.SKYLAKEX`` or ``HASWELL``) whose roundings ``getrf`` of ``m x n`` matrices in
    ``dtype`` replays, or ``None`` where it runs the LAPACK loop: a shape the replay takes, and a LAPACK whose
    results it gave in this process (:func:`replayed_getrf_kernels`)."""
    if np.dtype(dtype) in kernel_dtypes("getrf_replay") and 0 < min(m, n) <= REPLAY_MAX_ORDER:
        return replayed_getrf_kernels() if m * n < ONE_THREAD_ELEMENTS else None
    return None


@functools.cache
def replayed_getrf_kernels() -> int | None:
    """The kernels whose replay gave LAPACK's LU, bit for bit, on every :data:`CHECKED_SHAPES` in this process, or
    ``None``."""
    rng = np.random.default_rng(2026)
    stacks = []
    for m, n in CHECKED_SHAPES:
        size = (CHECKED_MATRICES, m, n)
        stacks.append(np.concatenate([rng.standard_normal(size), rng.integers(-1, 2, size)]).astype(np.float32))
    expected = [_factored(a, None) for a in stacks]
    for kernels in KERNEL_NAMES:
        if all(_same(_factored(a, kernels), lapack) for a, lapack in zip(stacks, expected)):
            return kernels
    return None


def _same(ours: tuple[np.ndarray, ...], theirs: tuple[np.ndarray, ...]) -> bool:
    return all(np.array_equal(mine, other) for mine, other in zip(ours, theirs))


def _factored(a: np.ndarray, kernels: int | None) -> tuple[np.ndarray, ...]:
    """The packed LU's bits, the pivots and ``info`` of each matrix of ``a``: by the replay of ``kernels``, or by
    the LAPACK loop where ``None``."""
    out = np.empty_like(a)
    piv = np.empty((a.shape[0], min(a.shape[1:])), dtype=INDEX_DTYPE)
    info = np.zeros(a.shape[0], dtype=INDEX_DTYPE)
    if kernels is None:
        lapack_loop("getrf_each", a.dtype, a.shape[0], max(a.shape[1:]), False, (a, out, piv, info), 1)
    else:
        launch_checked("getrf_replay", False, a.dtype, *a.shape, a, out, piv, info, kernels)
    return out.view(np.uint32), piv, info
