"""hetlapack.dtypes: the one rule for the dtype SciPy's LAPACK computes in, equal to SciPy's own."""

import itertools

import numpy as np
import pytest
from scipy.linalg.blas import find_best_blas_type

from hetlapack.dtypes import lapack_dtype

CODES = "?bBhHiIlLqQefdgFDG"


@pytest.mark.parametrize("code", CODES)
def test_one_dtype_as_scipy_converts_a_matrix(code):
    assert lapack_dtype(np.dtype(code)) == find_best_blas_type(dtype=np.dtype(code))[1]


def test_two_operands_as_scipys_solves_choose():
    """cho_solve and lu_solve ask get_lapack_funcs with (factor, b): the most generic of the two, float64 with
    complex64 giving complex128."""
    for first, second in itertools.product(CODES, repeat=2):
        expected = find_best_blas_type((np.empty(0, first), np.empty(0, second)))[1]
        assert lapack_dtype(np.dtype(first), np.dtype(second)) == expected, (first, second)
    assert lapack_dtype(np.dtype("d"), np.dtype("F")) == np.complex128
