"""The dtype SciPy's LAPACK wrappers compute in, for every entry point that converts its inputs as SciPy does, and
the byte order results are given in."""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg.blas import find_best_blas_type


@functools.cache
def lapack_dtype(*dtypes: np.dtype) -> np.dtype:
    """``find_best_blas_type``'s choice for operands of these dtypes (SciPy's ``get_lapack_funcs``): the most
    generic of them, integers and long doubles as double, float16 as single, float64 with complex64 as complex128."""
    return np.dtype(find_best_blas_type(tuple(np.empty(0, dtype) for dtype in dtypes))[1])


def native(dtype: np.dtype) -> np.dtype:
    """``dtype`` in this machine's byte order: what LAPACK computes on, MPI sends, and NumPy and SciPy return for a
    big-endian ``>f8`` input."""
    return np.dtype(dtype).newbyteorder("=")


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The real precision of a floating-point or complex ``dtype`` (float64 for complex128)."""
    return np.finfo(dtype).dtype
