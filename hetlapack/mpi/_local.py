"""Local tile kernels of the distributed factorizations: one BLAS/LAPACK call per tile, chosen by dtype.

The kernels come from a lookup table (``scipy.linalg.get_blas_funcs``/``get_lapack_funcs``), never from an
if/elif ladder. Each works in place on a view of a rank's local storage; when SciPy's wrapper had to copy a
non-contiguous view, the result is written back so callers always see in-place semantics.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.linalg import get_blas_funcs, get_lapack_funcs

_BLAS = ("gemm", "trsm")
_LAPACK = ("potrf", "getrf")


@lru_cache(maxsize=None)
def kernels(dtype: np.dtype) -> dict:
    """The BLAS and LAPACK routines for ``dtype``, keyed by their generic name (``"gemm"``, ``"potrf"`` ...)."""
    probe = np.empty((1, 1), dtype=dtype)
    table = dict(zip(_BLAS, get_blas_funcs(_BLAS, (probe,))))
    table.update(zip(_LAPACK, get_lapack_funcs(_LAPACK, (probe,))))
    return table


def _write_back(target: np.ndarray, result: np.ndarray) -> None:
    if not np.shares_memory(target, result):
        target[...] = result


def gemm(alpha, a: np.ndarray, b: np.ndarray, beta, c: np.ndarray, trans_a: int = 0, trans_b: int = 0) -> None:
    """``c = alpha op(a) op(b) + beta c`` in place; ``trans`` is 0 (N), 1 (T) or 2 (C)."""
    if c.size == 0:
        return
    if a.shape[1 - (trans_a > 0)] == 0:
        c *= beta
        return
    out = kernels(c.dtype)["gemm"](alpha, a, b, beta=beta, c=c, trans_a=trans_a, trans_b=trans_b, overwrite_c=True)
    _write_back(c, out)


def trsm(alpha, a: np.ndarray, b: np.ndarray, side: int = 0, lower: bool = True, trans_a: int = 0,
         unit_diagonal: bool = False) -> None:
    """``b = alpha op(a)^{-1} b`` (side 0) or ``b = alpha b op(a)^{-1}`` (side 1) in place, ``a`` triangular."""
    if b.size == 0:
        return
    out = kernels(b.dtype)["trsm"](alpha, a, b, side=side, lower=lower, trans_a=trans_a, diag=unit_diagonal,
                                   overwrite_b=True)
    _write_back(b, out)


def potrf(a: np.ndarray, lower: bool) -> int:
    """Cholesky factor of the square tile ``a`` in place (the other triangle untouched); LAPACK's ``info``."""
    out, info = kernels(a.dtype)["potrf"](a, lower=lower, overwrite_a=True, clean=False)
    _write_back(a, out)
    return int(info)
