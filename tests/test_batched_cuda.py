"""The numba-cuda batched Cholesky, run in Numba's CUDA simulator (tiny sizes: the simulator is slow).

Run with ``NUMBA_ENABLE_CUDASIM=1``; without it, the test needs a real GPU and skips when there is none.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from numpy.linalg import LinAlgError

pytest.importorskip("numba.cuda")
from numba import cuda  # noqa: E402

from hetlapack.testing.matrices import LAPACK_DTYPES, spd  # noqa: E402

if not cuda.is_available() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    pytest.skip("needs a CUDA GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

from hetlapack.batched import cuda_kernels  # noqa: E402

DTYPES = [np.dtype(d) for d in LAPACK_DTYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lower", [True, False])
def test_cuda_potrf_matches_numpy_and_reports_info(dtype, lower):
    a = spd(4, dtype, seed=1, batch=(3,))
    a[1, 2, 2] = -1.0
    before = a.copy()
    c, info = cuda_kernels.potrf(a, lower=lower, clean=False)
    np.testing.assert_array_equal(a, before)
    assert info.tolist() == [0, 3, 0]
    for index in (0, 2):
        expected = np.linalg.cholesky(a[index])
        expected = expected if lower else expected.conj().T
        triangle = np.tril if lower else np.triu
        other = np.triu if lower else np.tril
        np.testing.assert_allclose(triangle(c[index]), expected, atol=100 * np.finfo(dtype).eps)
        np.testing.assert_array_equal(other(c[index], 1 if lower else -1), other(a[index], 1 if lower else -1))
    with pytest.raises(LinAlgError):
        np.linalg.cholesky(a[1])


def test_cuda_potrf_empty_and_partial_block():
    c, info = cuda_kernels.potrf(np.zeros((0, 3, 3)), lower=True, clean=True)
    assert c.shape == (0, 3, 3) and info.shape == (0,)
    a = spd(2, np.float64, seed=2, batch=(5,))
    c, info = cuda_kernels.potrf(a, lower=True, clean=True)
    np.testing.assert_allclose(c, np.linalg.cholesky(a), atol=1e-14)
    assert not info.any()
