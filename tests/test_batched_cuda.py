"""The numba-cuda kernels (batched Cholesky and LU, LASWP), run in Numba's CUDA simulator.

Tiny sizes: the simulator runs every GPU thread as a Python thread. Run with ``NUMBA_ENABLE_CUDASIM=1`` (the test
session sets it where there is no ``nvidia-smi``); without it, the tests need a real GPU and skip when there is none.
The same kernels on CuPy arrays, through ``hetlapack.linalg``, are in ``tests/test_cupy_stacks.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.linalg as sl
from numpy.linalg import LinAlgError

pytest.importorskip("numba.cuda")
from numba import cuda  # noqa: E402

from hetlapack.testing.matrices import LAPACK_DTYPES, general, spd  # noqa: E402
from hetlapack.testing.residuals import lu_residual  # noqa: E402

if not cuda.is_available() and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    pytest.skip("needs a CUDA GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

from hetlapack.batched import cuda_kernels  # noqa: E402
from hetlapack.devices import cuda_panel  # noqa: E402

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


LU_SHAPES = [(4, 4), (5, 3), (3, 5), (1, 1)]


def lapack_lu(a):
    """SciPy's (LAPACK's) lu_factor of every matrix of a stack, stacked."""
    factors = [sl.lu_factor(matrix) for matrix in a]
    return np.stack([f[0] for f in factors]), np.stack([f[1] for f in factors])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", LU_SHAPES, ids=str)
def test_cuda_getrf_pivots_and_factors_are_lapacks(dtype, shape):
    a = general(*shape, dtype=dtype, seed=4, batch=(5,))
    before = a.copy()
    lu, piv, info = cuda_kernels.getrf(a)
    np.testing.assert_array_equal(a, before)
    lu_ref, piv_ref = lapack_lu(a)
    np.testing.assert_array_equal(piv, piv_ref)
    assert piv.dtype == np.int32 and not info.any()
    for index in range(len(a)):
        assert lu_residual(a[index], lu[index], piv[index]) < 50
    np.testing.assert_allclose(lu, lu_ref, atol=50 * np.finfo(dtype).eps)


def test_cuda_getrf_blocks_hold_several_matrices():
    assert cuda_kernels.lu_matrices_per_block(4, 4, 8) == cuda_kernels.THREADS_PER_BLOCK // 4
    assert cuda_kernels.lu_matrices_per_block(32, 32, 16) == 2
    assert not cuda_kernels.lu_kernel_fits(64, 64, np.complex128)
    # 10 matrices per block: a full block and a partial one
    assert cuda_kernels.lu_matrices_per_block(12, 12, 8) == 10
    a = general(12, dtype=np.float64, seed=8, batch=(11,))
    lu, piv, info = cuda_kernels.getrf(a)
    np.testing.assert_array_equal(piv, lapack_lu(a)[1])
    assert max(lu_residual(a[i], lu[i], piv[i]) for i in range(len(a))) < 50


def test_cuda_getrf_ties_follow_lapacks_row_order_after_delayed_swaps():
    # step 0 swaps rows 0 and 2; at step 1 the rows now at positions 1 and 2 tie (|-1| = |1|): LAPACK takes the
    # first in the current order (position 1), which is not the first in storage order (row 0 was displaced)
    a = np.array([[[0.0, 1.0, 0.0], [0.0, -1.0, 1.0], [1.0, 0.0, 0.0]], [[1.0, 2.0, 0.0], [-1.0, 3.0, 0.0],
                                                                         [0.5, 1.0, 1.0]]])
    lu, piv, info = cuda_kernels.getrf(a)
    lu_ref, piv_ref = lapack_lu(a)
    np.testing.assert_array_equal(piv, piv_ref)
    np.testing.assert_array_equal(lu, lu_ref)


def test_cuda_getrf_zero_pivot_sets_info_and_leaves_the_column_unscaled():
    a = general(4, dtype=np.float64, seed=5, batch=(3,))
    a[1, :, 1] = 0.0
    a[2, :, 3] = 0.0
    lu, piv, info = cuda_kernels.getrf(a)
    assert info.tolist() == [0, 2, 4]
    with pytest.warns(sl.LinAlgWarning):
        lu_ref, piv_ref = lapack_lu(a)
    np.testing.assert_array_equal(piv, piv_ref)
    np.testing.assert_allclose(lu, lu_ref, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
def test_cuda_getrf_divides_by_a_subnormal_pivot_as_lapacks_getf2(dtype):
    """Its reciprocal would overflow: getf2 divides instead, so ``P A = L U`` holds (OpenBLAS's LU, SciPy's, does not
    scale such a column at all, so it is not the reference here)."""
    a = general(4, dtype=dtype, seed=5, batch=(2,)) * 1e-310
    lu, piv, info = cuda_kernels.getrf(a)
    assert np.isfinite(lu).all() and info.tolist() == [0, 0]
    for matrix, pivots, packed in zip(a, piv, lu):
        rows = np.arange(4)
        for k, p in enumerate(pivots):
            rows[[k, p]] = rows[[p, k]]
        lower, upper = np.tril(packed, -1) + np.eye(4), np.triu(packed)
        assert np.abs(matrix[rows] - lower @ upper).max() <= 1e-12 * np.abs(matrix).max()


def test_cuda_getrf_empty_stack_and_empty_matrices():
    lu, piv, info = cuda_kernels.getrf(np.zeros((0, 3, 3)))
    assert lu.shape == (0, 3, 3) and piv.shape == (0, 3) and info.shape == (0,)
    lu, piv, info = cuda_kernels.getrf(np.zeros((2, 0, 3)))
    assert lu.shape == (2, 0, 3) and piv.shape == (2, 0) and info.tolist() == [0, 0]


def device_matrix(host):
    """A device copy of ``host`` (simulated under ``NUMBA_ENABLE_CUDASIM``), whose slices are strided device views."""
    return cuda.to_device(np.asfortranarray(host))


def reference_laswp(a, piv, k1, k2, backward=False):
    a = a.copy()
    for k in (range(k2 - 1, k1 - 1, -1) if backward else range(k1, k2)):
        a[[k, piv[k]]] = a[[piv[k], k]]
    return a


@pytest.mark.parametrize("order", ["C", "F"])
def test_laswp_rows_on_transposed_and_column_major_storage(order):
    host = np.asarray(general(6, 5, dtype=np.complex128, seed=7), order=order)
    piv = np.array([3, 1, 5, 4, 5, 5], dtype=np.int32)
    stored = cuda.to_device(host)
    cuda_panel.laswp_rows(stored[:, 1:4], cuda.to_device(piv), 1, 4)
    expected = host.copy()
    expected[:, 1:4] = reference_laswp(host[:, 1:4], piv, 1, 4)
    np.testing.assert_array_equal(stored.copy_to_host(), expected)
    rows = host.copy(order=order)
    cuda_panel.laswp_rows(rows, piv)
    cuda_panel.laswp_rows(rows, piv, backward=True)
    np.testing.assert_array_equal(rows, host)
