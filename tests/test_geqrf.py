"""Tile Householder QR and Q: LAPACK's R (signs included), backward error, orthogonality, memory spaces."""

import numpy as np
import pytest
import scipy.linalg as sl

from hetlapack.algorithms.geqrf import compact_wy_factors, geqrf, orgqr, qr_in_place
from hetlapack.contract.finite import FiniteCheck
from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.runtime import Trace
from hetlapack.testing import (
    general,
    ill_conditioned,
    orthogonality_residual,
    qr_residual,
)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPES_AND_TILES = [((1, 1), 4), ((2, 2), 1), ((13, 13), 4), ((97, 97), 32), ((211, 150), 48), ((67, 131), 16),
                    ((5, 40), 4), ((40, 5), 4), ((500, 500), 96)]
TOL = {np.float32: 1e-3, np.float64: 1e-10, np.complex64: 1e-3, np.complex128: 1e-10}


def factor(a, **kwargs):
    qr = np.array(a, order="F")
    tau = geqrf(qr, **kwargs)
    return qr, tau


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, tile", SHAPES_AND_TILES)
def test_r_equals_scipy_and_q_is_orthogonal(dtype, shape, tile):
    a = np.asfortranarray(general(*shape, dtype=dtype, seed=sum(shape)))
    qr, tau = factor(a, tile=tile)
    m, n = shape
    k = min(m, n)
    r = np.triu(qr)
    ref_r = sl.qr(a, mode="r")[0]
    scale = np.abs(ref_r).max()
    np.testing.assert_allclose(r[:k], ref_r[:k], atol=TOL[dtype] * scale * max(shape))
    assert tau.shape == (k,) and tau.dtype == dtype
    for ncols in sorted({k, m}):
        q = orgqr(qr, tau, ncols=ncols, tile=tile)
        assert q.shape == (m, ncols) and q.flags.f_contiguous
        assert qr_residual(a, q[:, :k], r[:k]) < 50 and orthogonality_residual(q) < 50


@pytest.mark.parametrize("dtype", DTYPES)
def test_ill_conditioned(dtype):
    cond = 1e3 if np.dtype(dtype).char in "fF" else 1e12
    a = np.asfortranarray(ill_conditioned(150, cond=cond, dtype=dtype))
    qr, tau = factor(a, tile=32)
    q = orgqr(qr, tau, ncols=150, tile=32)
    assert qr_residual(a, q, np.triu(qr)) < 50 and orthogonality_residual(q) < 50


@pytest.mark.parametrize("placement", ["owner", "capability"])
def test_two_devices_and_both_placements(placement):
    a = np.asfortranarray(general(170, 140))
    devices = [CpuDevice(workers=1), CpuDevice(workers=1, name="cpu1")]
    qr, tau = factor(a, tile=32, devices=devices, placement=placement)
    q = orgqr(qr, tau, ncols=140, tile=32, devices=devices, placement=placement)
    assert qr_residual(a, q, np.triu(qr)[:140]) < 50 and orthogonality_residual(q) < 50


def test_with_an_emulated_accelerator():
    a = np.asfortranarray(general(150, 130, dtype=np.complex128))
    devices = [CpuDevice(workers=1), EmulatedDevice(0)]
    qr, tau = factor(a, tile=32, devices=devices)
    q = orgqr(qr, tau, ncols=150, tile=32, devices=devices)
    assert qr_residual(a, q[:, :130], np.triu(qr)[:130]) < 50 and orthogonality_residual(q) < 50
    assert devices[1].uploaded_bytes > 0


def test_orgqr_leaves_its_input_alone_and_checks_ncols():
    qr, tau = factor(general(30, 20), tile=8)
    before = qr.copy()
    orgqr(qr, tau, ncols=25, tile=8)
    assert np.array_equal(qr, before)
    with pytest.raises(ValueError, match="ncols"):
        orgqr(qr, tau, ncols=10, tile=8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "tile"), [((1, 1), 4), ((13, 13), 4), ((97, 60), 32), ((211, 150), 48),
                                             ((40, 5), 4), ((64, 64), [0, 10, 40, 64]), ((3, 0), 4)])
@pytest.mark.parametrize("accelerators", [0, 2])
@pytest.mark.parametrize("order", ["F", "C"])
def test_qr_in_place_is_geqrf_then_r_and_orgqr_in_the_factorizations_storage(dtype, shape, tile, accelerators,
                                                                              order):
    """One run that factors (from the caller's array as it lies, read by copy-in tasks, or in place), copies R out
    and builds Q over the reflectors it reads (no second matrix): geqrf's ``tau`` and R to the bit (R C-ordered,
    as ``np.triu`` lays it out) and orgqr's Q, on the CPU and over emulated accelerators, for ragged and uneven
    tiles, with no LARFT task (it reads geqrf's own ``T_k``)."""
    devices = [CpuDevice(workers=1), *(EmulatedDevice(i) for i in range(accelerators))] if accelerators else None
    m, n = shape
    a = np.asarray(general(*shape, dtype=dtype, seed=sum(shape) + 1), order=order)
    qr, tau = factor(a, tile=tile, devices=devices)
    expected_q = orgqr(qr, tau, ncols=n, tile=tile)
    r, trace, check = np.full((n, n), np.nan, dtype=dtype), Trace(), FiniteCheck()
    if order == "F":
        q = np.array(a, order="F")
        ours = qr_in_place(q, r, tile=tile, devices=devices, trace=trace)
    else:
        q = np.empty(shape, dtype=dtype, order="F")
        ours = qr_in_place(q, r, tile=tile, devices=devices, trace=trace, source=a, check=check)
    np.testing.assert_array_equal(ours, tau)
    np.testing.assert_array_equal(r, np.triu(qr[:n]))
    assert r.flags.c_contiguous and check.finite
    np.testing.assert_allclose(q, expected_q, atol=TOL[dtype])
    assert not any(e.kernel == "larft" for e in trace.events)
    assert orthogonality_residual(q) < 50 and qr_residual(a, q, r) < 50


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "tile"), [((1, 1), 4), ((13, 13), 4), ((97, 60), 32), ((40, 5), 4),
                                             ((64, 64), [0, 10, 40, 64])])
@pytest.mark.parametrize("accelerators", [0, 2])
def test_q_from_the_factors_t_that_geqrf_formed(dtype, shape, tile, accelerators):
    """Q's full columns beside the factorization, from geqrf's own ``T_k``, equal Q from ``T_k`` formed again,
    with no LARFT task, and ``Q R = A``."""
    devices = [CpuDevice(workers=1), *(EmulatedDevice(i) for i in range(accelerators))] if accelerators else None
    m, n = shape
    a = np.asfortranarray(general(*shape, dtype=dtype, seed=m + n + 2))
    factors = compact_wy_factors(a, tile)
    qr, tau = factor(a, tile=tile, devices=devices, factors=factors)
    trace = Trace()
    full = orgqr(qr, tau, ncols=m, tile=tile, devices=devices, trace=trace, factors=factors)
    np.testing.assert_allclose(full, orgqr(qr, tau, ncols=m, tile=tile), atol=TOL[dtype])
    assert not any(e.kernel == "larft" for e in trace.events)
    assert orthogonality_residual(full) < 50 and qr_residual(a, full[:, :n], np.triu(qr[:n])) < 50


def test_qr_in_place_needs_a_q_as_wide_as_the_factorization_and_a_square_r():
    with pytest.raises(ValueError, match="n <= m and R of shape"):
        qr_in_place(np.asfortranarray(general(20, 30)), np.empty((30, 30)), tile=8)
    with pytest.raises(ValueError, match="n <= m and R of shape"):
        qr_in_place(np.asfortranarray(general(30, 20)), np.empty((30, 20)), tile=8)


def test_qr_in_place_reads_whether_the_callers_array_is_finite():
    a = general(40, 30)
    a[33, 7] = np.inf
    check = FiniteCheck()
    qr_in_place(np.empty(a.shape, order="F"), np.empty((30, 30)), tile=8, source=a, check=check)
    assert not check.finite


def test_economic_qr_on_the_hybrid_path_builds_q_where_the_factorization_lies():
    """``qr(mode='economic')`` on the hybrid path needs no third matrix beside the working copy and R (it was 1.5x
    SciPy's peak memory): Q is built in the working copy's storage, as SciPy's orgqr builds it in its own."""
    import tracemalloc

    import hetlapack
    import hetlapack.linalg as la

    a = general(600, 600, seed=3)
    with hetlapack.using(path="hybrid", tile=64):
        la.qr(a[:200, :200], mode="economic")
        tracemalloc.start()
        try:
            q, r = la.qr(a, mode="economic")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 2.6 * a.nbytes  # the working copy and R, and the panels' T factors and triu's mask (3.2x before)
    q0, r0 = sl.qr(a, mode="economic")
    np.testing.assert_allclose(q, q0, atol=1e-10)
    np.testing.assert_allclose(r, r0, atol=1e-10)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0)])
def test_empty_matrices(shape):
    qr, tau = factor(np.zeros(shape, order="F"), tile=4)
    assert tau.shape == (0,)
    q = orgqr(qr, tau, ncols=shape[0], tile=4)
    assert np.array_equal(q, np.eye(shape[0]))


@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (9, 5), (5, 9), (70, 41)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_r_is_numpys_triu_to_the_bit_and_in_its_layout(shape, order, dtype):
    from hetlapack.contract.arrays import upper_trapezoid

    packed = np.asarray(general(*shape, seed=7).astype(dtype) * (1 + 1j if dtype == np.complex128 else 1),
                        order=order)
    for rows in sorted({min(shape), shape[0]}):
        ours, numpys = upper_trapezoid(packed, rows), np.triu(packed[:rows, :])
        np.testing.assert_array_equal(ours, numpys)
        assert ours.dtype == numpys.dtype and not np.shares_memory(ours, packed)
        assert (ours.flags.c_contiguous, ours.flags.f_contiguous) == (numpys.flags.c_contiguous,
                                                                      numpys.flags.f_contiguous)


def test_blocks_of_columns_give_the_single_columns_result():
    """The tile QR on a CPU of three workers (blocks of columns) equals it on an emulated accelerator (one task per
    column): each column's update is the same arithmetic."""
    a = np.asfortranarray(general(300, 300, dtype=np.float64, seed=5))
    blocked, tau = factor(a, tile=32, devices=[CpuDevice(workers=3)])
    single, tau_single = factor(a, tile=32, devices=[EmulatedDevice(0)])
    np.testing.assert_allclose(blocked, single, rtol=0, atol=1e-12 * np.abs(single).max())
    np.testing.assert_allclose(tau, tau_single, rtol=0, atol=1e-14)
