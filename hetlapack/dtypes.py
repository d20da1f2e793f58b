"""The dtype SciPy's LAPACK wrappers compute in, for every entry point that converts its inputs as SciPy does."""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg.blas import find_best_blas_type


@functools.cache
def lapack_dtype(dtype: np.dtype) -> np.dtype:
    """``find_best_blas_type``'s choice for ``dtype``: integers and long doubles to double, float16 to single."""
    return np.dtype(find_best_blas_type(dtype=np.dtype(dtype))[1])
