"""The hybrid path's tile algorithms read the caller's array as it lies: copy-in tasks copy it a tile at a time into
the factorization's own array (no whole-matrix copy first), zero the other triangle of a Cholesky factor where
SciPy's has it zero, and read SciPy's ``check_finite`` as they copy (its ValueError first, whatever else fails).

Results are compared with SciPy's in the LAPACK way (scaled residuals, layouts, dtypes, the other triangle to the
bit) for every dtype, both triangles, C and Fortran order, reversed and strided views, orders that no tile divides,
on the CPU alone and beside emulated accelerators."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hl
from hetlapack.contract.finite import FiniteCheck
from hetlapack.algorithms.potrf import potrf
from hetlapack.devices import EmulatedDevice
from hetlapack.runtime import Trace
from hetlapack.testing import cholesky_residual, general, lu_residual, qr_residual, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS_FACTOR = 50


def _views(a: np.ndarray) -> dict[str, np.ndarray]:
    """``a``'s values in several layouts: C order, Fortran order, both axes reversed, and a strided view."""
    wide = np.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
    wide[:, ::2] = a
    return {"C": np.ascontiguousarray(a), "F": np.asfortranarray(a), "reversed": a[::-1, ::-1].copy()[::-1, ::-1],
            "strided": wide[:, ::2]}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 13, 37])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("devices", [["cpu"], ["cpu", EmulatedDevice(0)]], ids=["cpu", "cpu+emulated"])
def test_cholesky_and_cho_factor_read_every_layout_as_it_lies(dtype, n, lower, devices):
    a = spd(n, dtype=dtype, seed=n)
    for layout, x in _views(a).items():
        kept = x.copy()
        with hetlapack.using(path="hybrid", devices=devices, tile=8):
            c = hl.cholesky(x, lower=lower)
            factor, flag = hl.cho_factor(x, lower=lower)
        theirs, (their_factor, their_flag) = sl.cholesky(x, lower=lower), sl.cho_factor(x, lower=lower)
        assert np.array_equal(x, kept), layout
        for ours, reference in ((c, theirs), (factor, their_factor)):
            assert ours.dtype == reference.dtype and ours.flags.f_contiguous == reference.flags.f_contiguous
            assert ours.flags.c_contiguous == reference.flags.c_contiguous, layout
        assert cholesky_residual(a, c, lower) < EPS_FACTOR, layout
        other = np.triu if lower else np.tril
        assert np.array_equal(other(c, 1 if lower else -1), np.zeros_like(c)), layout
        assert np.array_equal(other(factor, 1 if lower else -1), other(their_factor, 1 if lower else -1)), layout
        assert cholesky_residual(a, (np.tril if lower else np.triu)(factor), lower) < EPS_FACTOR
        assert np.array_equal(flag, their_flag)


def test_each_tile_is_copied_in_by_a_task_of_its_own_before_any_task_that_reads_it():
    a = spd(40, dtype=np.float64, seed=3)
    work = np.empty_like(a, order="F")
    trace = Trace()
    potrf(work, lower=True, tile=8, source=a, clean=True, trace=trace, check=FiniteCheck())
    copied = {e.tiles: e.end for e in trace.events if e.kernel == "copy-in"}
    assert len(copied) == 25  # 5 x 5 tiles: the lower ones copied, the upper ones zeroed
    first_panel = min(e.start for e in trace.events if e.kernel == "potrf")
    assert first_panel >= copied["A[0,0]"]
    assert np.allclose(np.tril(work) @ np.tril(work).T, a) and not np.triu(work, 1).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 37), (45, 29), (29, 45)])
@pytest.mark.parametrize("devices", [["cpu"], ["cpu", EmulatedDevice(0)]], ids=["cpu", "cpu+emulated"])
def test_lu_and_qr_read_every_layout_as_it_lies(dtype, shape, devices):
    a = general(*shape, dtype=dtype, seed=sum(shape))
    for layout, x in _views(a).items():
        kept = x.copy()
        with hetlapack.using(path="hybrid", devices=devices, tile=8):
            lu, piv = hl.lu_factor(x)
            p, lower, upper = hl.lu(x)
            q, r = hl.qr(x, mode="economic")
            (raw, tau), _ = hl.qr(x, mode="raw")
        assert np.array_equal(x, kept), layout
        assert np.array_equal(piv, sl.lu_factor(x)[1]) and lu_residual(a, lu, piv) < EPS_FACTOR, layout
        their_p, their_lower, their_upper = sl.lu(x)
        assert np.array_equal(p, their_p), layout
        assert (lower.dtype, upper.dtype, lower.shape, upper.shape) == (their_lower.dtype, their_upper.dtype,
                                                                        their_lower.shape, their_upper.shape)
        scaled = np.linalg.norm(p @ lower @ upper - a) / (max(shape) * np.finfo(a.dtype).eps * np.linalg.norm(a))
        assert scaled < EPS_FACTOR, layout
        their_r = sl.qr(x, mode="r")[0]
        assert np.array_equal(np.sign(np.diag(r).real), np.sign(np.diag(their_r).real)), layout
        assert qr_residual(a, q, r) < EPS_FACTOR, layout
        assert np.allclose(np.triu(raw[:min(shape)]), r, atol=1e-3 if a.dtype.char in "fF" else 1e-10)
        assert tau.shape == (min(shape),)


@pytest.mark.parametrize("fn", ["lu_factor", "lu", "qr"])
def test_an_infinity_or_nan_in_lu_or_qr_input_raises_scipys_error(fn):
    a = general(37, 29, dtype=np.float64, seed=9)
    a[30, 20] = np.inf
    for x in _views(a).values():
        with hetlapack.using(path="hybrid", tile=8), pytest.raises(ValueError, match="^array must not contain"):
            getattr(hl, fn)(x)


@pytest.mark.parametrize("where", [(30, 2), (2, 30), (17, 17)], ids=["factored", "other", "diagonal"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("fn", ["cholesky", "cho_factor"])
def test_an_infinity_or_nan_in_either_triangle_raises_scipys_error(where, value, fn):
    a = spd(37, dtype=np.float64, seed=5)
    a[where] = value
    with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
        getattr(sl, fn)(a, lower=True)
    for x in _views(a).values():
        with hetlapack.using(path="hybrid", tile=8), pytest.raises(ValueError, match="^array must not contain"):
            getattr(hl, fn)(x, lower=True)


def test_scipys_finiteness_error_comes_before_a_minor_that_is_not_positive_definite():
    a = spd(37, dtype=np.float64, seed=6)
    a[20, 20] = -1.0
    a[2, 34] = np.inf  # in the triangle a lower factorization never reads, in a tile it copies last
    with hetlapack.using(path="hybrid", tile=8), pytest.raises(ValueError, match="^array must not contain"):
        hl.cholesky(a, lower=True)
    a[2, 34] = a[34, 2]
    with pytest.raises(np.linalg.LinAlgError) as theirs:
        sl.cholesky(a, lower=True)
    with hetlapack.using(path="hybrid", tile=8), pytest.raises(np.linalg.LinAlgError) as ours:
        hl.cholesky(a, lower=True)
    assert str(ours.value) == str(theirs.value)


def test_without_check_finite_a_nan_goes_to_scipys_own_call():
    a = spd(37, dtype=np.float64, seed=7)
    a[30, 2] = np.nan
    with hetlapack.using(path="hybrid", tile=8):
        ours = hl.cholesky(a, lower=True, check_finite=False)
    theirs = sl.cholesky(a, lower=True, check_finite=False)
    assert np.array_equal(ours, theirs, equal_nan=True)


def test_a_finite_check_reads_a_sum_that_overflows_as_finite_values_and_warns_nothing():
    check = FiniteCheck()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check.read(np.full((4, 4), np.finfo(np.float64).max))
        check.read(np.array([[np.inf, -np.inf]]))
    assert not check.finite
    check = FiniteCheck()
    check.read(np.full((4, 4), np.finfo(np.float64).max))
    assert check.finite
    check.read(np.array([[1.0, np.nan]]))
    assert not check.finite


@pytest.mark.parametrize("dtype", [np.float16, np.longdouble, np.int64])
@pytest.mark.parametrize("fn", ["cholesky", "cho_factor", "lu_factor", "lu", "qr"])
def test_a_nan_raises_after_the_warnings_scipy_gives_before_its_check_and_no_others(dtype, fn):
    a = spd(37, dtype=np.float64, seed=8).astype(dtype)
    if dtype != np.int64:
        a[3, 30] = np.nan

    def outcome(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                call()
                raised = None
            except ValueError as error:
                raised = str(error)
        return raised, [(w.category, str(w.message)) for w in caught]

    theirs = outcome(lambda: getattr(sl, fn)(a))
    with hetlapack.using(path="hybrid", tile=8):
        ours = outcome(lambda: getattr(hl, fn)(a))
    assert ours == theirs
