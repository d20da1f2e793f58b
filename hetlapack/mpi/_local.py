"""Local tile kernels of the distributed factorizations: one BLAS/LAPACK call per tile, chosen by dtype.

GEMM and TRSM, which touch the large trailing matrix, go through SciPy's BLAS function pointers
(:mod:`hetlapack.devices.lapack_pointers`, the CPU device's kernels) and work in place on views of a rank's
local storage with its leading dimension: no copy of the trailing matrix per call. The panel kernels (``potrf``,
``getrf``, ``geqrt``) come from a lookup table (``scipy.linalg.get_lapack_funcs``), never from an if/elif ladder;
when SciPy's wrapper had to copy a non-contiguous view, the result is written back so callers always see
in-place semantics.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.linalg import get_lapack_funcs

from ..devices import lapack_pointers as lp

_LAPACK = ("potrf", "getrf", "geqrt")
#: BLAS ``trans`` argument: 0 (N), 1 (T), 2 (C, which is T for real dtypes).
_TRANS = ("N", "T", "C")


@lru_cache(maxsize=None)
def kernels(dtype: np.dtype) -> dict:
    """The LAPACK panel routines for ``dtype``, keyed by their generic name (``"potrf"``, ``"getrf"`` ...)."""
    return dict(zip(_LAPACK, get_lapack_funcs(_LAPACK, (np.empty((1, 1), dtype=dtype),))))


def _write_back(target: np.ndarray, result: np.ndarray) -> None:
    if not np.shares_memory(target, result):
        target[...] = result


def _addressable(a: np.ndarray) -> bool:
    """Whether BLAS can address the view ``a`` itself: contiguous columns and a positive column stride."""
    return (a.shape[0] <= 1 or a.strides[0] == a.itemsize) and a.strides[1] > 0


def _operand(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a`` as a BLAS operand of ``dtype``: itself when BLAS can address it, else a Fortran copy."""
    return a if a.dtype == dtype and _addressable(a) else np.asfortranarray(a, dtype)


def _in_place(kernel, c: np.ndarray) -> None:
    """Run ``kernel(c)`` on ``c`` itself when BLAS can address it, else on a Fortran copy written back."""
    if _addressable(c):
        kernel(c)
    else:
        work = np.asfortranarray(c)
        kernel(work)
        c[...] = work


def gemm(alpha, a: np.ndarray, b: np.ndarray, beta, c: np.ndarray, trans_a: int = 0, trans_b: int = 0) -> None:
    """``c = alpha op(a) op(b) + beta c`` in place; ``trans`` is 0 (N), 1 (T) or 2 (C)."""
    k = a.shape[0] if trans_a else a.shape[1]
    if c.size == 0:
        return
    if k == 0:
        c *= beta
        return
    a, b = _operand(a, c.dtype), _operand(b, c.dtype)

    def kernel(target: np.ndarray) -> None:
        lp.gemm(_TRANS[trans_a], _TRANS[trans_b], alpha, a, b, beta, target)

    _in_place(kernel, c)


def trsm(alpha, a: np.ndarray, b: np.ndarray, side: int = 0, lower: bool = True, trans_a: int = 0,
         unit_diagonal: bool = False) -> None:
    """``b = alpha op(a)^{-1} b`` (side 0) or ``b = alpha b op(a)^{-1}`` (side 1) in place, ``a`` triangular."""
    if b.size == 0:
        return
    a = _operand(a, b.dtype)

    def kernel(target: np.ndarray) -> None:
        lp.trsm("LR"[side], "L" if lower else "U", _TRANS[trans_a], "U" if unit_diagonal else "N", alpha, a, target)

    _in_place(kernel, b)


def potrf(a: np.ndarray, lower: bool) -> int:
    """Cholesky factor of the square tile ``a`` in place (the other triangle untouched); LAPACK's ``info``."""
    out, info = kernels(a.dtype)["potrf"](a, lower=lower, overwrite_a=True, clean=False)
    _write_back(a, out)
    return int(info)


def getrf(a: np.ndarray) -> tuple[np.ndarray, int]:
    """LU with partial pivoting of the tile ``a`` in place; LAPACK's 0-based pivots (int32) and ``info``."""
    out, pivots, info = kernels(a.dtype)["getrf"](a, overwrite_a=True)
    _write_back(a, out)
    return pivots, int(info)


def geqrt(a: np.ndarray) -> np.ndarray:
    """Householder QR of the tall tile ``a`` in place (``R`` and ``V`` as ``geqrf``); returns the ``T`` of ``V``.

    One block of ``a.shape[1]`` reflectors, so ``T`` is ``larft``'s upper triangular factor with
    ``H_1 ... H_w = I - V T V^H``.
    """
    out, t, info = kernels(a.dtype)["geqrt"](a.shape[1], a, overwrite_a=True)
    _write_back(a, out)
    if info < 0:
        raise ValueError(f"illegal value in argument {-info} of geqrt")
    return t
