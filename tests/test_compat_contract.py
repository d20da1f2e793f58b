"""The SciPy contract of the shims, on every path that can run the input (host, hybrid, batched)."""

import inspect
import re
import warnings

import numpy as np
import pytest
import scipy.linalg as sl
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning

import hetlapack
import hetlapack.linalg as la
from hetlapack import testing
from hetlapack.contract.originals import SCIPY_NAMES
from hetlapack.devices import EmulatedDevice

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SINGLE_PATHS = ["host", "hybrid"]
TILE = 16


def on(path):
    return hetlapack.using(path=path, tile=TILE)


@pytest.mark.parametrize("name", SCIPY_NAMES)
def test_signature_and_docstring_match_scipy(name):
    ours, theirs = getattr(la, name), getattr(sl, name)
    assert inspect.signature(ours) == inspect.signature(theirs)
    assert "Examples" in ours.__doc__ and "Parameters" in ours.__doc__


@pytest.mark.parametrize(
    "dtype",
    [bool, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64, np.longdouble,
     np.complex64, np.complex128, np.clongdouble],
)
@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_dtype_rules_equal_scipy(dtype, path):
    a = np.eye(37, dtype=bool) if dtype is bool else (np.eye(37) * 4 + 1).astype(dtype)
    with on(path):
        assert la.cholesky(a).dtype == sl.cholesky(a).dtype
        assert la.lu_factor(a)[0].dtype == sl.lu_factor(a)[0].dtype
        assert la.qr(a)[0].dtype == sl.qr(a)[0].dtype


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("func", ["cholesky", "cho_factor", "lu_factor", "lu", "qr"])
def test_check_finite(func, path):
    a = testing.spd(33)
    a[3, 5] = np.nan
    with on(path), pytest.raises(ValueError, match="array must not contain infs or NaNs"):
        getattr(la, func)(a)


@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_cholesky_errors_equal_scipy(path):
    a = testing.spd(61)
    a[40, 40] = -100.0
    for bad, error in ((np.ones((3, 4)), ValueError), (a, LinAlgError)):
        with pytest.raises(error) as theirs:
            sl.cholesky(bad, lower=True)
        with on(path), pytest.raises(error) as ours:
            la.cholesky(bad, lower=True)
        assert str(ours.value) == str(theirs.value)
    assert "41" in str(theirs.value)


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("n", [1, 2, 17, 50])
def test_cholesky_and_cho_factor_equal_scipy(path, dtype, lower, n):
    a = testing.spd(n, dtype, seed=n)
    a_other = a.copy()
    with on(path):
        c = la.cholesky(a, lower=lower)
        cf, low = la.cho_factor(a, lower=lower)
    ref = sl.cholesky(a, lower=lower)
    ref_f, _ = sl.cho_factor(a, lower=lower)
    assert testing.cholesky_residual(a, c, lower) < 50
    tol = 50 * np.finfo(dtype).eps * n
    np.testing.assert_allclose(c, ref, atol=tol, rtol=tol)
    np.testing.assert_allclose(cf, ref_f, atol=tol, rtol=tol)
    assert np.array_equal(low, sl.cho_factor(a, lower=lower)[1]) and type(low) is type(sl.cho_factor(a, lower=lower)[1])
    assert c.flags.f_contiguous == ref.flags.f_contiguous and cf.flags.f_contiguous == ref_f.flags.f_contiguous
    np.testing.assert_array_equal(a, a_other)


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (31, 31), (50, 23), (23, 50)])
def test_lu_factor_pivots_equal_scipy(path, dtype, shape):
    a = testing.general(*shape, dtype=dtype, seed=sum(shape))
    with on(path):
        lu, piv = la.lu_factor(a)
    ref_lu, ref_piv = sl.lu_factor(a)
    assert piv.dtype == np.int32
    np.testing.assert_array_equal(piv, ref_piv)
    assert testing.lu_residual(a, lu, piv) < 50
    assert lu.flags.f_contiguous == ref_lu.flags.f_contiguous


@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_lu_factor_singular_warns_like_scipy(path):
    a = testing.singular(40, rank=25)
    with on(path), pytest.warns(LinAlgWarning, match="Diagonal number 26 is exactly zero. Singular matrix."):
        lu, piv = la.lu_factor(a)
    np.testing.assert_array_equal(piv, sl.lu_factor(a)[1]) if path == "host" else None
    assert lu.shape == a.shape


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("kwargs", [{}, {"permute_l": True}, {"p_indices": True}])
@pytest.mark.parametrize("shape", [(29, 29), (40, 21), (21, 40)])
def test_lu_equal_scipy(path, kwargs, shape):
    a = testing.general(*shape, seed=3)
    with on(path):
        ours = la.lu(a, **kwargs)
    theirs = sl.lu(a, **kwargs)
    assert len(ours) == len(theirs)
    for x, y in zip(ours, theirs):
        assert x.dtype == y.dtype and x.shape == y.shape and x.flags.c_contiguous == y.flags.c_contiguous
        np.testing.assert_allclose(x, y, atol=1e-12)


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["full", "r", "economic", "raw"])
@pytest.mark.parametrize("shape", [(1, 1), (37, 37), (50, 23), (23, 50)])
def test_qr_modes_equal_scipy(path, dtype, mode, shape):
    a = testing.general(*shape, dtype=dtype, seed=7)
    with hetlapack.using(tile=TILE):
        ours = la.qr(a, mode=mode)
    theirs = sl.qr(a, mode=mode)
    if path == "hybrid":
        with on(path):
            ours = la.qr(a, mode=mode)
    assert type(ours) is type(theirs) and len(ours) == len(theirs)
    flat = lambda t: [x for item in t for x in (item if isinstance(item, tuple) else (item,))]  # noqa: E731
    tol = 100 * np.finfo(dtype).eps * max(shape)
    for x, y in zip(flat(ours), flat(theirs)):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert x.flags.f_contiguous == y.flags.f_contiguous
        np.testing.assert_allclose(x, y, atol=tol)


@pytest.mark.parametrize("path", [*SINGLE_PATHS, "gpu", "batched"])
@pytest.mark.parametrize("mode", ["bogus", None, 1])
def test_an_invalid_qr_mode_raises_scipys_error_whatever_path_is_forced(path, mode):
    with hetlapack.using(path=path), pytest.raises(ValueError, match=r"^Mode argument should be one of \["):
        la.qr(testing.general(20, seed=2), mode=mode)


def test_scipys_own_functions_that_call_raw_qr_run_on_a_forced_path():
    """After ``install()``, ``scipy.linalg.qr_multiply`` calls the shim's ``qr(mode='raw')``: a forced path runs it
    rather than refusing a call the user never made."""
    a, c = testing.general(40, seed=3), testing.general(7, 40, seed=4)
    expected = sl.qr_multiply(a, c)
    with hetlapack.compat.patched(), hetlapack.using(path="hybrid", tile=TILE):
        got = sl.qr_multiply(a, c)
    for x, y in zip(got, expected):
        np.testing.assert_allclose(x, y, atol=1e-12)


def test_qr_pivoting_and_lwork_stay_on_host_and_cannot_be_forced():
    a = testing.general(30, seed=1)
    q, r, p = la.qr(a, pivoting=True)
    assert p.dtype == np.int32
    np.testing.assert_array_equal(p, sl.qr(a, pivoting=True)[2])
    assert "geqp3 has no tiled algorithm" in hetlapack.explain("qr", a, pivoting=True).unavailable["hybrid"]
    with hetlapack.using(path="hybrid"), pytest.raises(ValueError, match="cannot be honoured"):
        la.qr(a, pivoting=True)


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("func", ["cholesky", "cho_factor", "lu_factor", "lu", "qr"])
def test_no_overwrite(path, dtype, order, func):
    a = np.array(testing.spd(45, dtype, seed=5), order=order)
    before = a.copy()
    with on(path):
        getattr(la, func)(a)
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_no_overwrite_through_array_interface(path):
    class Wrapped:
        def __init__(self, data):
            self.data = data

        def __array__(self, dtype=None, copy=None):
            return self.data

    data = testing.spd(40)
    before = data.copy()
    with on(path):
        la.cholesky(Wrapped(data))
        la.lu_factor(Wrapped(data))
    np.testing.assert_array_equal(data, before)


def test_overwrite_a_allowed_works_in_place_on_hybrid():
    a = np.asfortranarray(testing.spd(64))
    with on("hybrid"):
        c = la.cholesky(a, lower=True, overwrite_a=True)
    assert np.shares_memory(c, a)


@pytest.mark.parametrize("path", ["hybrid", "gpu"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_lu_overwrite_a_leaves_the_input_where_scipy_does(path, order):
    """Where SciPy's ``lu(overwrite_a=True)`` leaves its input as it was (before 1.18: a Fortran-ordered one), so
    does hetlapack's; the flag permits writing into the input, it does not require it."""
    a = np.asarray(testing.general(40, seed=6), order=order)
    before, theirs = a.copy(), a.copy(order="K")
    with hetlapack.using(path=path, tile=TILE, devices=["cpu", EmulatedDevice(0)]):
        p, lower, upper = la.lu(a, overwrite_a=True)
    np.testing.assert_allclose(p @ lower @ upper, before, atol=1e-12)
    sl.lu(theirs, overwrite_a=True)
    if np.array_equal(theirs, before):
        np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("path", SINGLE_PATHS)
@pytest.mark.parametrize("kind", ["overwritten", "converted"])
@pytest.mark.parametrize("shape", [(23, 23), (23, 17), (17, 23)])
def test_lu_and_qr_of_a_matrix_scipy_factors_in_place_in_fortran_order(path, kind, shape):
    """Where SciPy factors a Fortran-ordered matrix in place (the caller's, given ``overwrite_a``, or the copy it
    converts an integer one into; SciPy 1.18 on), each result is laid out as SciPy's (there ``qr``'s ``R`` and
    ``lu``'s ``U``, or ``L`` of a tall one, are Fortran-ordered, written where the matrix was), and the factors are
    right: there SciPy
    1.18.1's own ``lu`` returns wrong ones (``scipy_rules.lu_in_place_wrong``), and hetlapack those SciPy computes
    from a C-ordered copy."""
    base = np.round(10 * testing.general(*shape, seed=3))
    a = np.asfortranarray(base if kind == "overwritten" else base.astype(np.int64))
    calls = [("qr", {}), ("qr", {"mode": "economic"}), ("qr", {"mode": "r"}), ("lu", {}), ("lu", {"p_indices": True}),
             ("lu", {"permute_l": True})]
    for name, options in calls:
        theirs = getattr(sl, name)(a.copy(order="F"), overwrite_a=kind == "overwritten", **options)
        right = getattr(sl, name)(np.ascontiguousarray(a), **options)
        with on(path):
            ours = getattr(la, name)(a.copy(order="F"), overwrite_a=kind == "overwritten", **options)
        for x, y, z in zip(ours, theirs, right, strict=True):
            assert (x.flags.c_contiguous, x.flags.f_contiguous) == (y.flags.c_contiguous, y.flags.f_contiguous), name
            np.testing.assert_allclose(x, z, rtol=1e-10, atol=1e-10, err_msg=f"{name} {options}")


@pytest.mark.parametrize("path", [*SINGLE_PATHS, "batched"])
@pytest.mark.parametrize("flag", [None, 0, "", 1.5, "yes", np.float64(1.0), np.True_, [1], 2], ids=repr)
def test_overwrite_flags_are_accepted_and_refused_as_scipy_does(path, flag):
    """SciPy hands f2py ``overwrite_a or copied`` (``overwrite_b`` alike): a false flag of any type is accepted, a
    true one must be an integer; its ``lu`` only asks whether the flag is true."""
    a = testing.spd(6) if path != "batched" else testing.spd(6, batch=(3,))
    b = np.ones((*a.shape[:-1], 1))
    calls = {
        "cholesky": lambda m: m.cholesky(a.copy(), overwrite_a=flag),
        "cho_factor": lambda m: m.cho_factor(a.copy(), overwrite_a=flag),
        "lu_factor": lambda m: m.lu_factor(a.copy(), overwrite_a=flag),
        "lu": lambda m: m.lu(a.copy(), overwrite_a=flag),
        "qr": lambda m: m.qr(a.copy(), overwrite_a=flag),
        "cho_solve": lambda m: m.cho_solve((sl.cholesky(a), False), b.copy(), overwrite_b=flag),
        "lu_solve": lambda m: m.lu_solve(sl.lu_factor(a), b.copy(), overwrite_b=flag),
    }
    for name, call in calls.items():
        try:
            expected = call(sl)
        except TypeError as error:
            with on(path), pytest.raises(TypeError) as raised:
                call(la)
            assert str(raised.value) == str(error), name
            continue
        with on(path):
            ours = call(la)
        for x, y in zip(*((r,) if isinstance(r, np.ndarray) else r for r in (ours, expected))):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_non_contiguous_views(path):
    big = testing.spd(80, seed=2)
    a = big[::2, ::2]
    with on(path):
        c = la.cholesky(a, lower=True)
        lu, piv = la.lu_factor(a[:, 3:])
    assert testing.cholesky_residual(a, c, True) < 50
    np.testing.assert_array_equal(piv, sl.lu_factor(a[:, 3:])[1])


@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_ill_conditioned(path):
    a = testing.ill_conditioned(60, cond=1e12, hermitian=True)
    a = (a + a.T) / 2 + 1e-3 * np.eye(60)
    g = testing.ill_conditioned(60, cond=1e12)
    with on(path):
        c = la.cholesky(a, lower=True)
        lu, piv = la.lu_factor(g)
        q, r = la.qr(g)
    assert testing.cholesky_residual(a, c, True) < 50
    assert testing.lu_residual(g, lu, piv) < 50
    assert testing.qr_residual(g, q, r) < 50 and testing.orthogonality_residual(q) < 50


@pytest.mark.parametrize("func", ["cholesky", "cho_factor", "lu_factor", "qr"])
def test_inputs_like_scipy_lists_matrices_masked(func):
    """Lists, matrices and masked arrays give SciPy's results, or its error (SciPy 1.18 refuses masked arrays, and
    its ``cho_factor`` reads a list's ``shape``)."""
    a = testing.spd(5)
    for value in (a.tolist(), np.asmatrix(a), np.ma.masked_array(a)):
        try:
            expected = getattr(sl, func)(value)
        except Exception as error:  # noqa: BLE001 - whatever SciPy raises, hetlapack must raise alike
            with pytest.raises(type(error), match=re.escape(str(error))):
                getattr(la, func)(value)
            continue
        ours = getattr(la, func)(value)
        for x, y in zip(*((r,) if isinstance(r, np.ndarray) else r for r in (ours, expected)), strict=True):
            assert type(x) is type(y)
            np.testing.assert_allclose(x, y)


class ForeignTensor:
    """An array-like with a shape and a dtype of its own library (as a torch tensor has), converted by ``__array__``."""

    def __init__(self, data):
        self.data, self.shape, self.dtype = data, data.shape, "foreign.float64"

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)


@pytest.mark.parametrize("shape", [(5,), (30, 5)], ids=["matrix", "stack"])
def test_foreign_tensors_are_converted_as_scipy_converts_them(shape):
    a = testing.spd(shape[-1], seed=3, batch=shape[:-1])
    for func in ("cholesky", "lu_factor", "qr"):
        ours, theirs = getattr(la, func)(ForeignTensor(a)), getattr(sl, func)(ForeignTensor(a))
        for x, y in zip(ours if isinstance(ours, (tuple, list)) else (ours,),
                        theirs if isinstance(theirs, (tuple, list)) else (theirs,)):
            assert type(x) is type(y) is np.ndarray
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


def test_empty_like_scipy():
    for func in ("cholesky", "lu_factor", "qr"):
        ours, theirs = getattr(la, func)(np.empty((0, 0))), getattr(sl, func)(np.empty((0, 0)))
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        assert [x.shape for x in ours] == [x.shape for x in theirs]


@pytest.mark.parametrize("path", SINGLE_PATHS)
def test_solves_after_factorizations(path):
    a = testing.spd(50, seed=9)
    b = testing.general(50, 3, seed=10)
    with on(path):
        x = la.cho_solve(la.cho_factor(a), b)
        y = la.lu_solve(la.lu_factor(a), b)
    np.testing.assert_allclose(a @ x, b, atol=1e-10)
    np.testing.assert_allclose(a @ y, b, atol=1e-10)


def test_linalg_falls_through_to_scipy():
    assert la.solve is sl.solve and la.eigh is sl.eigh
    assert {"cholesky", "solve", "explain", "svd"} <= set(dir(la))
    with pytest.raises(AttributeError, match="no attribute 'not_a_function'"):
        la.not_a_function  # noqa: B018


def test_warnings_point_at_the_caller():
    with warnings.catch_warnings(record=True) as caught, hetlapack.using(path="hybrid", tile=TILE):
        warnings.simplefilter("always")
        la.lu_factor(testing.singular(20))
    assert caught and caught[0].filename == __file__


@pytest.mark.parametrize("lower", [False, True, 0, 1, np.array(True), np.array([False, True]), np.array([True, False]),
                                   np.array([[False, True], [True, True]]), np.array([[True, False]]).T,
                                   np.array([[True, False], [False, False]])[:, ::-1]],
                         ids=lambda flag: repr(flag).replace("\n", ""))
@pytest.mark.parametrize("overwrite_b", [False, True, 0, 1])
def test_cho_solve_reads_lower_as_scipys_potrs_call(lower, overwrite_b):
    """Plain flags and boolean arrays (``cho_factor``'s for a stack) are read without a probe solve: as f2py does."""
    from scipy.linalg import get_lapack_funcs

    from hetlapack.contract import arrays

    x, _ = get_lapack_funcs("potrs", dtype=np.float64)(arrays._PROBE_FACTOR.copy(), arrays._PROBE_RHS.copy(),
                                                       lower=lower, overwrite_b=overwrite_b)
    assert arrays.potrs_lower(np.dtype(np.float64), lower, overwrite_b) == bool(x[1] != 1)


def _deprecations(call) -> set[tuple[str, object]]:
    """The DeprecationWarnings of ``call``: each one's text and whether it points at this file (where the default
    filters show it) rather than at a line of SciPy's; and its error, if it raised one (SciPy 1.16's ``lu`` refuses
    long doubles)."""
    error = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except (TypeError, ValueError) as raised:
            error = {(str(raised), type(raised))}
    return error | {(str(w.message), w.filename == __file__) for w in caught
                    if issubclass(w.category, DeprecationWarning)}


_DEPRECATED_CALLS = {
    "cholesky": lambda lib, a: lib.cholesky(a),
    "cho_factor": lambda lib, a: lib.cho_factor(a),
    "lu_factor": lambda lib, a: lib.lu_factor(a),
    "lu": lambda lib, a: lib.lu(a),
    "qr": lambda lib, a: lib.qr(a),
    "qr lwork": lambda lib, a: lib.qr(a.astype(np.float64), lwork=1000),
    "cho_solve": lambda lib, a: lib.cho_solve(sl.cho_factor(a.astype(np.float64)), a[..., :1]),
    "lu_solve": lambda lib, a: lib.lu_solve(sl.lu_factor(a.astype(np.float64)), a[..., :1]),
}


@pytest.mark.parametrize("dtype", [np.float16, np.longdouble, np.float64])
@pytest.mark.parametrize("shape", [(12, 12), (3, 12, 12), (200, 4, 4)], ids=["matrix", "small-stack", "stack"])
@pytest.mark.parametrize("call", _DEPRECATED_CALLS)
@pytest.mark.parametrize("path", [None, "host"], ids=["dispatched", "host"])
def test_deprecations_point_where_scipys_do(call, shape, dtype, path):
    """SciPy 1.18's DeprecationWarnings (dtypes LAPACK does not compute in, ``qr``'s ``lwork``) point at the caller's
    line where SciPy's do (its ``lu_factor``, ``lu`` and ``qr``), and at SciPy's own line where SciPy's do: so the
    default filters show the same ones. Before 1.18 neither side gives any."""
    a = (np.eye(shape[-1]) * 4 + 1 + np.zeros(shape)).astype(dtype)
    with hetlapack.using(path=path):
        ours = _deprecations(lambda: _DEPRECATED_CALLS[call](la, a))
    assert ours == _deprecations(lambda: _DEPRECATED_CALLS[call](sl, a))


@pytest.mark.parametrize("shape", [(12, 12), (100, 2, 2), (0, 7, 7)], ids=["matrix", "stack", "empty-stack"])
@pytest.mark.parametrize("call", ["cholesky", "cho_factor", "lu_factor", "lu", "qr", "qr-mode-None"])
def test_masked_arrays_get_scipys_own_answer(call, shape):
    """A masked array is SciPy's own call's: SciPy 1.18's ``cholesky`` refuses it, its ``lu_factor`` factors the data
    under the mask, and SciPy 1.17 raises for a zero-size batch before it reads ``qr``'s mode."""
    a = np.ma.masked_array(np.eye(shape[-1]) * 4 + 1 + np.zeros(shape))
    name, options = ("qr", {"mode": None}) if call == "qr-mode-None" else (call, {})

    def outcome(lib):
        try:
            result = getattr(lib, name)(a, **options)
        except (ValueError, LinAlgError) as error:
            return type(error), str(error)
        return type(result), _arrays(result)

    ours, theirs = outcome(la), outcome(sl)
    assert ours[0] == theirs[0]
    if isinstance(theirs[1], str):
        assert ours[1] == theirs[1]
    else:
        for x, y in zip(ours[1], theirs[1], strict=True):
            assert type(x) is type(y)
            np.testing.assert_array_equal(x, y)


def _arrays(result) -> list[np.ndarray]:
    """The arrays a call returned (``cho_factor``'s flag of one matrix left out)."""
    return [x for x in (result if isinstance(result, (tuple, list)) else (result,)) if isinstance(x, np.ndarray)]


@pytest.mark.parametrize("overwrite_a", [False, True])
@pytest.mark.parametrize("dtype", [">f8", ">f4", ">c16"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape", [(5, 5), (61, 61), (3, 9, 9), (300, 4, 4), (1, 7), (7, 1)])
@pytest.mark.parametrize("call", ["cholesky", "cho_factor", "lu_factor", "lu", "lu-permute_l", "qr", "qr-economic",
                                  "qr-r"])
def test_byte_swapped_matrices_factor_as_in_the_machines_order(call, shape, order, dtype, overwrite_a):
    """A byte-swapped matrix is factored as the same matrix in the machine's byte order, by SciPy's rules of results
    and layouts: where SciPy's own call fails on one (1.17's ``lu``, 1.18's ``cholesky``, ``lu`` and ``qr``) or
    factors the swapped bytes, hetlapack's does not. SciPy never factors one in place: its results are laid out as
    for a matrix it may not overwrite. An empty one is SciPy's own call's, in the swapped dtype."""
    if call.startswith("cho") and shape[-1] != shape[-2]:
        pytest.skip("a Cholesky factorization takes square matrices")
    native = np.array(testing.random_matrix(shape[-2:], seed=5) if shape[-1] != shape[-2] else
                      testing.spd(shape[-1]) + np.zeros(shape), dtype=dtype[1:], order=order)
    name, _, option = call.partition("-")
    options = {"permute_l": True} if option == "permute_l" else {"mode": option} if option else {}
    with hetlapack.using(tile=TILE):
        ours = getattr(la, name)(np.array(native, dtype=dtype, order=order), overwrite_a=overwrite_a, **options)
    theirs = getattr(sl, name)(native, **options)
    for x, y in zip(*(_arrays(result) for result in (ours, theirs)), strict=True):
        assert (x.dtype, x.shape, x.flags.c_contiguous, x.flags.f_contiguous) == \
            (y.dtype, y.shape, y.flags.c_contiguous, y.flags.f_contiguous)
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 4)])
@pytest.mark.parametrize("call", ["cholesky", "cho_factor", "lu_factor", "lu", "qr"])
def test_an_empty_byte_swapped_matrix_is_scipys_own_call(call, shape):
    if call.startswith("cho") and shape[-1] != shape[-2]:
        pytest.skip("a Cholesky factorization takes square matrices")
    a = np.zeros(shape, dtype=">f8")
    for x, y in zip(*(_arrays(getattr(lib, call)(a)) for lib in (la, sl)), strict=True):
        assert (x.dtype, x.shape) == (y.dtype, y.shape)
