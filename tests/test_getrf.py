"""Tile LU: LAPACK's pivots and info, backward error, rectangular and singular matrices, memory spaces."""

import threading

import numpy as np
import pytest
import scipy.linalg as sl

from hetlapack.algorithms.getrf import getrf
from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.testing import general, ill_conditioned, lu_residual, singular

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPES_AND_TILES = [((1, 1), 4), ((2, 2), 1), ((13, 13), 4), ((97, 97), 32), ((211, 211), 48), ((131, 67), 16),
                    ((67, 131), 16), ((5, 40), 4), ((40, 5), 4), ((600, 600), 96)]


def lapack_getrf(a):
    return sl.lapack.get_lapack_funcs("getrf", (a,))(a)


def factor(a, **kwargs):
    lu = np.array(a, order="F")
    piv, info = getrf(lu, **kwargs)
    return lu, piv, info


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, tile", SHAPES_AND_TILES)
def test_pivots_equal_lapack_and_backward_error(dtype, shape, tile):
    a = np.asfortranarray(general(*shape, dtype=dtype, seed=sum(shape)))
    lu, piv, info = factor(a, tile=tile)
    _, ref_piv, ref_info = lapack_getrf(a)
    assert piv.dtype == np.int32 and np.array_equal(piv, ref_piv) and info == ref_info == 0
    assert lu_residual(a, lu, piv) < 50


@pytest.mark.parametrize("dtype", DTYPES)
def test_ill_conditioned(dtype):
    cond = 1e3 if np.dtype(dtype).char in "fF" else 1e12
    a = np.asfortranarray(ill_conditioned(150, cond=cond, dtype=dtype))
    lu, piv, _ = factor(a, tile=32)
    assert np.array_equal(piv, lapack_getrf(a)[1]) and lu_residual(a, lu, piv) < 50


@pytest.mark.parametrize("dtype", DTYPES)
def test_singular_matrix_is_factored_completely_with_lapack_info(dtype):
    a = np.asfortranarray(singular(100, rank=70, dtype=dtype))
    lu, piv, info = factor(a, tile=32)
    ref_lu, ref_piv, ref_info = lapack_getrf(a)
    assert info == ref_info == 71
    assert np.array_equal(piv, ref_piv) and lu_residual(a, lu, piv) < 50


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_left_by_the_elimination_give_a_partial_pivoting(dtype):
    """0/1 matrices tie candidates in exact arithmetic after elimination steps, and the tiles' rounding, in another
    order than LAPACK's, breaks those ties: the pivots may differ from LAPACK's (docs/drop-in.md), but each
    factorization is a partial pivoting, P A = L U with |L| <= 1."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = np.asfortranarray(rng.integers(0, 2, size=(13, 13)).astype(dtype))
        lu, piv, _ = factor(a, tile=4)
        assert lu_residual(a, lu, piv) < 50 and np.abs(np.tril(lu, -1)).max() <= 1


@pytest.mark.parametrize("placement", ["owner", "capability"])
def test_two_devices_and_both_placements(placement):
    a = np.asfortranarray(general(180, 150))
    lu, piv, _ = factor(a, tile=32, devices=[CpuDevice(workers=1), CpuDevice(workers=1, name="cpu1")],
                        placement=placement)
    assert np.array_equal(piv, lapack_getrf(a)[1]) and lu_residual(a, lu, piv) < 50


def test_with_an_emulated_accelerator():
    a = np.asfortranarray(general(150, 130, dtype=np.complex64))
    accelerator = EmulatedDevice(0)
    lu, piv, _ = factor(a, tile=32, devices=[CpuDevice(workers=1), accelerator])
    assert np.array_equal(piv, lapack_getrf(a)[1]) and lu_residual(a, lu, piv) < 50
    assert accelerator.uploaded_bytes > 0


def test_an_exception_in_a_kernel_cancels_cleanly():
    class FailingLaswp(CpuDevice):
        def laswp(self, a, piv):
            raise RuntimeError("injected into laswp")

    with pytest.raises(RuntimeError, match="injected into laswp"):
        factor(general(100, 100), tile=16, devices=[FailingLaswp()])
    assert not any(t.name.startswith("hetlapack-") for t in threading.enumerate())


def test_rejects_c_order():
    with pytest.raises(ValueError, match="Fortran"):
        getrf(np.ones((5, 5)), tile=2)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0)])
def test_empty_matrices(shape):
    _, piv, info = factor(np.zeros(shape, order="F"), tile=4)
    assert piv.shape == (0,) and piv.dtype == np.int32 and info == 0
