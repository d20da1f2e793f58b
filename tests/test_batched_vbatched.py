"""The variable-size list API of ``hetlapack.batched`` against SciPy, matrix by matrix."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning

import hetlapack
from hetlapack import batched
from hetlapack.batched import kernels
from hetlapack.blas_threads import one_thread_per_call
from hetlapack.testing.matrices import LAPACK_DTYPES, random_matrix, spd


def _mixed_spd() -> list[np.ndarray]:
    """SPD matrices of several sizes and all four dtypes, interleaved so groups are not contiguous."""
    return [spd(n, dtype, seed=index) for index, (n, dtype) in
            enumerate((n, dtype) for n in (1, 5, 3, 8, 5) for dtype in LAPACK_DTYPES)]


def _mixed_general() -> list[np.ndarray]:
    shapes = [(4, 4), (1, 1), (6, 3), (3, 6), (4, 4), (7, 7)]
    return [random_matrix(shape, dtype, seed=index)
            for index, (shape, dtype) in enumerate((s, d) for s in shapes for d in LAPACK_DTYPES)]


def _close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, atol=200 * np.finfo(expected.dtype).eps)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_variable_sizes_match_scipy(lower):
    mats = _mixed_spd()
    for a, c in zip(mats, batched.cholesky(mats, lower=lower)):
        _close(c, sla.cholesky(a, lower=lower))


def test_cholesky_names_first_failing_matrix_or_returns_info():
    mats = _mixed_spd()
    mats[17] = mats[17].copy()
    mats[17][2, 2] = -5.0
    mats[9] = -mats[9]
    originals = [a.copy() for a in mats]
    with pytest.raises(LinAlgError) as theirs:
        sla.cholesky(mats[9])
    with pytest.raises(LinAlgError, match=f"^matrix 9: {re.escape(str(theirs.value))}$"):  # SciPy's text, named
        batched.cholesky(mats)
    factors, info = batched.cholesky(mats, return_info=True)
    assert info.dtype == np.int32 and info.shape == (len(mats),)
    assert np.flatnonzero(info).tolist() == [9, 17] and info[17] == 3
    _close(factors[0], sla.cholesky(mats[0]))
    for a, before in zip(mats, originals):
        np.testing.assert_array_equal(a, before)


def test_lu_factor_variable_shapes_match_scipy():
    mats = _mixed_general()
    for a, (lu, piv) in zip(mats, batched.lu_factor(mats)):
        lu_ref, piv_ref = sla.lu_factor(a)
        _close(lu, lu_ref)
        np.testing.assert_array_equal(piv, piv_ref)


def test_lu_factor_warns_per_singular_matrix_unless_info_requested():
    mats = [np.eye(3), np.zeros((2, 2)), np.array([[1.0, 2.0], [2.0, 4.0]])]
    with pytest.warns(LinAlgWarning) as record:
        batched.lu_factor(mats)
    assert [str(w.message) for w in record] == [
        "matrix 1: Diagonal number 1 is exactly zero. Singular matrix.",
        "matrix 2: Diagonal number 2 is exactly zero. Singular matrix.",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, info = batched.lu_factor(mats, return_info=True)
    assert info.tolist() == [0, 1, 2]


@pytest.mark.parametrize("mode", ["full", "r", "economic", "raw"])
def test_qr_every_mode_matches_scipy(mode):
    mats = _mixed_general()
    for a, got in zip(mats, batched.qr(mats, mode=mode)):
        expected = sla.qr(a, mode=mode)
        if mode == "raw":
            (qr_ref, tau_ref), r_ref = expected
            (qr, tau), r = got
            _close(qr, qr_ref)
            _close(tau, tau_ref)
            _close(r, r_ref)
        else:
            assert len(got) == len(expected)
            for actual, reference in zip(got, expected):
                _close(actual, reference)


@pytest.mark.parametrize("mode", ["full", "r", "economic", "raw"])
def test_pivoted_qr_every_mode_is_scipys_bit_for_bit(mode):
    """Rank-one matrices among others: the pivots past the first are decided by rounding, and are still SciPy's."""
    mats = _mixed_general()
    mats += [np.outer(np.arange(1.0, n + 1), np.arange(n, 0.0, -1)).astype(a.dtype) for n, a in zip((3, 5), mats)]

    for index, (a, got) in enumerate(zip(mats, batched.qr(mats, mode=mode, pivoting=True))):
        expected = sla.qr(a, mode=mode, pivoting=True)
        assert len(got) == len(expected)
        for actual, reference in zip(_flat(got), _flat(expected)):
            assert actual.shape == reference.shape and actual.dtype == reference.dtype
            np.testing.assert_array_equal(actual, reference, err_msg=f"matrix {index}")


def _flat(result) -> list[np.ndarray]:
    return [x for item in (result if isinstance(result, (tuple, list)) else (result,))
            for x in (item if isinstance(item, tuple) else (item,))]


def test_loop_groups_are_scipys_bit_for_bit():
    """Single precision at any order, and double precision past the interleaved kernels' orders (64), run the LAPACK
    loop or SciPy's own call per matrix: every factor, pivot and solution is SciPy's own (on one BLAS thread, as the
    loop runs), but single precision's solutions, which our own solves compute, to its rounding."""
    sizes_dtypes = [(n, dtype) for n in (1, 5, 13) for dtype in (np.float32, np.complex64)]
    sizes_dtypes += [(67, np.float64), (67, np.complex128)]
    mats = [spd(n, dtype, seed=index) for index, (n, dtype) in enumerate(sizes_dtypes)]
    bs = [random_matrix((a.shape[0], 2), a.dtype, seed=index) for index, a in enumerate(mats)]
    factors = batched.cholesky(mats, lower=True)
    lus = batched.lu_factor(mats)
    results = [("cholesky", factors, lambda a: sla.cholesky(a, lower=True)),
               ("lu_factor", lus, sla.lu_factor),
               ("qr", batched.qr(mats, mode="economic"), lambda a: sla.qr(a, mode="economic")),
               ("cho_solve", batched.cho_solve(factors, bs, lower=True),
                lambda index: sla.cho_solve((factors[index], True), bs[index])),
               ("lu_solve", batched.lu_solve(lus, bs, trans=1),
                lambda index: sla.lu_solve(lus[index], bs[index], trans=1))]
    with one_thread_per_call():
        for name, got, scipy_call in results:
            for index, (a, result) in enumerate(zip(mats, got)):
                expected = scipy_call(index) if name.endswith("solve") else scipy_call(a)
                for actual, reference in zip(_flat(result), _flat(expected), strict=True):
                    assert actual.dtype == reference.dtype
                    if name.endswith("solve") and actual.dtype in (np.float32, np.complex64):
                        eps = np.finfo(actual.dtype).eps
                        np.testing.assert_allclose(actual, reference, rtol=200 * eps, atol=200 * eps)
                    else:
                        np.testing.assert_array_equal(actual, reference, err_msg=f"{name}, matrix {index}")


def test_forced_kernels_run_for_every_group(monkeypatch):
    """``using(kernels="lapack")`` runs every group on the LAPACK loop, as the stacked path, where dispatch takes the
    interleaved kernels: SciPy's bits."""
    asked = []
    for name in ("potrf", "getrf"):
        kernel = getattr(kernels, name)
        monkeypatch.setattr(kernels, name, lambda *args, _kernel=kernel, _name=name, **options: asked.append(
            (_name, options.get("lapack"))) or _kernel(*args, **options))
    mats = [spd(6, np.float64, seed=index) for index in range(4)]
    with hetlapack.using(kernels="lapack"):
        factors = batched.cholesky(mats)
        (lu, piv), *_ = batched.lu_factor(mats)
    assert asked == [("potrf", True), ("getrf", True)]
    for factor, a in zip(factors, mats, strict=True):
        np.testing.assert_array_equal(factor, sla.cholesky(a))
    expected_lu, expected_piv = sla.lu_factor(mats[0])
    np.testing.assert_array_equal(lu, expected_lu)
    np.testing.assert_array_equal(piv, expected_piv)


def test_solves_match_scipy_with_vectors_and_matrices():
    mats = _mixed_spd()
    bs = [random_matrix((a.shape[0],) if index % 2 else (a.shape[0], 2), a.dtype, seed=index)
          for index, a in enumerate(mats)]
    for lower in (True, False):
        xs = batched.cho_solve(batched.cholesky(mats, lower=lower), bs, lower=lower)
        for a, b, x in zip(mats, bs, xs):
            _close(x, sla.cho_solve((sla.cholesky(a, lower=lower), lower), b))
    factors = batched.lu_factor(mats)
    for trans in (0, 1, 2):
        for (lu, piv), b, x in zip(factors, bs, batched.lu_solve(factors, bs, trans=trans)):
            _close(x, sla.lu_solve((lu, piv), b, trans=trans))


def test_mixed_dtype_solve_promotes_like_scipy():
    c = batched.cholesky([spd(3, np.float32)])
    x = batched.cho_solve(c, [np.ones(3, dtype=np.complex128)])[0]
    assert x.dtype == sla.cho_solve((c[0], False), np.ones(3, dtype=np.complex128)).dtype


def test_inputs_are_converted_like_scipy():
    ints = [np.array([[4, 2], [2, 3]]), np.array([[9]], dtype=np.float16)]
    factors = batched.cholesky(ints)
    assert [f.dtype for f in factors] == [sla.cholesky(a).dtype for a in ints]
    _close(factors[0], sla.cholesky(ints[0]))


def test_empty_lists_and_zero_size_matrices():
    assert batched.cholesky([]) == []
    factors, info = batched.lu_factor([], return_info=True)
    assert factors == [] and info.shape == (0,)
    (c,) = batched.cholesky([np.zeros((0, 0))])
    assert c.shape == (0, 0)
    (lu, piv), = batched.lu_factor([np.zeros((3, 0))])
    assert lu.shape == (3, 0) and piv.shape == (0,) and piv.dtype == np.int32
    q, r = batched.qr([np.zeros((3, 0))])[0]
    np.testing.assert_array_equal(q, np.eye(3))


def _layout(result) -> tuple:
    """Shapes and dtypes of a (possibly nested) result."""
    return tuple(map(_layout, result)) if isinstance(result, tuple) else (result.shape, result.dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64, np.int64, np.float16, np.bool_], ids=str)
@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0)])
def test_empty_matrices_give_scipys_results(dtype, shape):
    """Among other matrices, an empty one gets what SciPy returns for it: its dtype kept, Q the identity."""
    empty, other = np.zeros(shape, dtype=dtype), np.eye(2)
    for mode in ("full", "economic", "r", "raw"):
        ours, theirs = batched.qr([empty, other], mode=mode)[0], sla.qr(empty, mode=mode)
        assert _layout(ours) == _layout(theirs), mode
        if mode in ("full", "economic"):
            np.testing.assert_array_equal(ours[0], theirs[0])
    (lu, piv), _ = batched.lu_factor([empty, other])
    assert _layout((lu, piv)) == _layout(sla.lu_factor(empty))
    if shape == (0, 0):
        assert _layout(batched.cholesky([empty, other])[0]) == _layout(sla.cholesky(empty))


@pytest.mark.parametrize("dtype", [np.float64, np.longdouble, np.clongdouble, np.float16], ids=str)
@pytest.mark.parametrize(("n", "b_shape"), [(0, (0,)), (0, (0, 2)), (2, (2, 0))])
def test_empty_systems_give_scipys_solutions(dtype, n, b_shape):
    """An empty system among others gets SciPy's solution, even for a factor of a dtype no kernel takes (SciPy's
    factors of an empty matrix keep its dtype)."""
    factor, b = np.eye(n, dtype=dtype), np.zeros(b_shape, dtype=np.float32)
    pivots = np.arange(n, dtype=np.int32)
    ours = [batched.cho_solve([factor, np.eye(2)], [b, np.ones(2)])[0],
            batched.lu_solve([(factor, pivots), (np.eye(2), np.arange(2))], [b, np.ones(2)])[0]]
    theirs = [sla.cho_solve((factor, False), b), sla.lu_solve((factor, pivots), b)]
    for x, y in zip(ours, theirs):
        assert _layout(x) == _layout(y)


@pytest.mark.parametrize("name", ["cholesky", "lu_factor", "qr"])
def test_warnings_come_matrix_by_matrix_as_scipys_loop_gives_them(name):
    """An empty matrix is SciPy's own call, a bool one warns of its dtype (SciPy 1.18), a singular one of its LU
    factor: in the order of the list."""
    first = np.zeros((1, 1)) if name == "lu_factor" else np.ones((1, 1), bool)
    matrices = [first, np.zeros((0, 0), bool), np.ones((1, 1), bool)]
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        for index, a in enumerate(matrices):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                getattr(sla, name)(a)
            for warning in caught:
                warnings.warn(f"matrix {index}: {warning.message}", warning.category, stacklevel=1)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        getattr(batched, name)(matrices)
    assert [(w.category, str(w.message)) for w in ours] == [(w.category, str(w.message)) for w in theirs]


def test_scipys_warnings_for_an_empty_system_name_its_matrix():
    """An empty system is SciPy's own solve, whose warnings (SciPy 1.18's for a deprecated dtype) name the matrix."""
    factor, pivots, b = np.zeros((0, 0), bool), np.zeros(0, np.int32), np.zeros(0, np.float32)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        sla.lu_solve((factor, pivots), b)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        batched.lu_solve([(np.eye(2), np.arange(2)), (factor, pivots)], [np.ones(2), b])
    assert [(w.category, str(w.message)) for w in ours] == [(w.category, f"matrix 1: {w.message}") for w in theirs]


@pytest.mark.parametrize("bad", [2, -1, 2.0])
def test_pivots_that_name_no_row_are_refused(bad):
    """A pivot outside its factor's rows raises, naming the matrix (SciPy's getrs would write outside ``b``), unless
    that system's ``b`` is empty."""
    factors = batched.lu_factor([np.random.default_rng(0).random((3, 3)), np.eye(2)])
    factors[1] = (factors[1][0], np.array([0, bad]))
    with pytest.raises(ValueError, match=f"^matrix 1: pivot {bad!r} names no row of lu of shape \\(2, 2\\)$"):
        batched.lu_solve(factors, [np.ones(3), np.ones(2)])
    assert batched.lu_solve(factors, [np.ones(3), np.ones((2, 0))])[1].shape == (2, 0)


def _memory_order(array: np.ndarray) -> str:
    """'F' for a Fortran-ordered array that is not also C-ordered, else 'C' or '-' (neither)."""
    if array.flags.f_contiguous and not array.flags.c_contiguous:
        return "F"
    return "C" if array.flags.c_contiguous else "-"


@pytest.mark.parametrize("chosen", ["interleaved", "lapack"])
def test_results_are_laid_out_as_scipys(chosen):
    """Each result has the memory order SciPy's own call gives it: Fortran-ordered factors, Q and solutions with
    several columns, C-ordered R."""
    a, b = spd(5, dtype=np.float64, seed=3), random_matrix((5, 2), np.float64, seed=4)
    c, (lu, piv) = sla.cholesky(a), sla.lu_factor(a)
    with hetlapack.using(kernels=chosen):
        pairs = [(batched.cholesky([a])[0], c), (batched.lu_factor([a])[0][0], lu), *zip(batched.qr([a])[0], sla.qr(a)),
                 (batched.qr([a], mode="raw")[0][0][0], sla.qr(a, mode="raw")[0][0]),
                 (batched.cho_solve([c], [b])[0], sla.cho_solve((c, False), b)),
                 (batched.lu_solve([(lu, piv)], [b])[0], sla.lu_solve((lu, piv), b))]
    assert [_memory_order(ours) for ours, _ in pairs] == [_memory_order(theirs) for _, theirs in pairs]


def test_solves_check_what_scipy_checks():
    """SciPy's ``lu_solve`` checks only ``b`` for infs and NaNs (NaN factors give NaN solutions); its ``cho_solve``
    checks the factor too."""
    lu = np.full((3, 3), np.nan)
    np.testing.assert_array_equal(batched.lu_solve([(lu, np.arange(3))], [np.ones(3)])[0],
                                  sla.lu_solve((lu, np.arange(3)), np.ones(3)))
    with pytest.raises(ValueError, match=r"^matrix 1: array must not contain infs or NaNs$"):
        batched.lu_solve([(np.eye(2), np.arange(2))] * 2, [np.ones(2), np.array([1.0, np.inf])])
    with pytest.raises(ValueError, match=r"^matrix 0: array must not contain infs or NaNs$"):
        batched.cho_solve([np.full((2, 2), np.nan)], [np.ones(2)])


def test_argument_errors_name_the_matrix():
    with pytest.raises(ValueError, match=r"^matrix 1: array must not contain infs or NaNs$"):
        batched.cholesky([np.eye(2), np.full((2, 2), np.nan)])
    with pytest.raises(ValueError, match=r"^matrix 0: Input array is expected to be square"):
        batched.cholesky([np.ones((2, 3))])
    with pytest.raises(ValueError, match=r"^matrix 0: Input array needs to be 2D but received a 3d-array\.$"):
        batched.lu_factor([np.ones((2, 2, 2))])
    with pytest.raises(ValueError, match="Mode argument"):
        batched.qr([np.eye(2)], mode="complete")
    with pytest.raises(ValueError, match="matrix 0: incompatible dimensions"):
        batched.cho_solve([np.eye(2)], [np.ones(3)])
    with pytest.raises(ValueError, match="2 factorizations but 1 right-hand sides"):
        batched.lu_solve(batched.lu_factor([np.eye(2), np.eye(2)]), [np.ones(2)])
