"""Where the interleaved kernels stop beating the LAPACK loop on this machine, measured for ``hetlapack calibrate``.

The batched path runs a factorization of a stack of small matrices on one of two kernels (:mod:`.kernels`): the
interleaved one (our own arithmetic, SIMD across matrices) or the LAPACK loop (SciPy's LAPACK on each matrix). The
interleaved kernel wins at small orders, the loop at larger ones, and where they cross depends on the machine's
SIMD width, caches and LAPACK. :func:`measure` times both on the same stacks at each of ``ORDERS`` in float64 and
complex128, and returns for each factorization and dtype the loop's time over the interleaved kernel's per order
(above 1: interleaved wins), which the cost model turns into the order it switches at
(:func:`hetlapack.perf.model.interleaved_max_n`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..perf.calibration import best_seconds
from ..perf.model import batched_case
from . import kernels

#: Orders timed: from where the interleaved kernels are sure to win to past where the reference machine's loop won.
ORDERS = (4, 8, 16, 24, 32, 40, 48, 64)

#: Dtypes timed: the interleaved kernels run by default in double precision only (float64 and complex128).
DTYPES = (np.dtype(np.float64), np.dtype(np.complex128))

#: The (factorization, dtype) pairs timed, each a key of :func:`measure`'s result.
CASES = tuple(batched_case(op, dtype) for op in ("potrf", "getrf", "geqrf") for dtype in DTYPES)

#: Bytes of each timed stack (within the last-level cache of most machines' cores, so the two kernels' arithmetic,
#: not the memory both read at the same rate, decides), and the fewest matrices per stack (a few chunks per thread).
STACK_BYTES, MIN_BATCH = 8 << 20, 256


def _stack(op: str, n: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """A stack of general (Hermitian positive definite for ``potrf``) matrices of order ``n``."""
    batch = max(MIN_BATCH, STACK_BYTES // (n * n * dtype.itemsize))
    a = rng.standard_normal((batch, n, n))
    if dtype.kind == "c":
        a = a + 1j * rng.standard_normal((batch, n, n))
    a = a.astype(dtype)
    if op == "potrf":
        a = a @ np.swapaxes(a, -1, -2).conj() / n + np.eye(n, dtype=dtype)
    return a


#: Each factorization on a stack, on the LAPACK loop (``True``) or the interleaved kernel.
_CALLS: dict[str, Callable[[np.ndarray, bool], object]] = {
    "potrf": lambda a, lapack: kernels.potrf(a, lower=True, clean=True, fortran=True, lapack=lapack),
    "getrf": lambda a, lapack: kernels.getrf(a, fortran=True, lapack=lapack),
    "geqrf": lambda a, lapack: kernels.qr(a, a.shape[-1], a.shape[-1], fortran=True, lapack=lapack),
}


def measure(repeats: int = 3, orders: tuple[int, ...] = ORDERS,
            progress: Callable[[str], None] | None = None) -> dict[str, list[list[float]]]:
    """``{"potrf float64": [[order, loop seconds / interleaved seconds], ...], ...}`` for each of ``CASES``: both
    kernels timed on the same stack, best of ``repeats`` each after one untimed call; ``progress`` is told each case
    as it is done."""
    rng = np.random.default_rng(2)
    ratios: dict[str, list[list[float]]] = {}
    for case in CASES:
        op, dtype = case.split()
        for n in orders:
            a = _stack(op, n, np.dtype(dtype), rng)
            timings = []
            for lapack in (False, True):
                _CALLS[op](a, lapack)  # untimed: first-touch of the kernel's buffers and outputs
                timings.append(best_seconds(lambda lapack=lapack: _CALLS[op](a, lapack), repeats))
            interleaved, loop = timings
            ratios.setdefault(case, []).append([n, loop / interleaved])
        if progress:
            progress(case)
    return ratios
