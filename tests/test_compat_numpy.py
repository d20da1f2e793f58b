"""numpy.linalg.cholesky / qr shims: NumPy's signatures, errors, dtypes, result types and NEP-18 dispatch."""

import contextlib
import inspect

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
from hetlapack import testing
from hetlapack.compat import numpy_linalg
from hetlapack.contract.originals import numpy_functions

PATHS = ["host", "hybrid"]


@pytest.mark.parametrize("name", ["cholesky", "qr"])
def test_signature(name):
    assert inspect.signature(getattr(numpy_linalg, name)) == inspect.signature(numpy_functions[name])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_equal_numpy(path, dtype, upper):
    a = (testing.spd(41, np.complex128 if np.dtype(dtype).kind == "c" else np.float64, seed=4) * 10).astype(dtype)
    with hetlapack.using(path=path, tile=16):
        ours = numpy_linalg.cholesky(a, upper=upper)
    theirs = numpy_functions["cholesky"](a, upper=upper)
    assert ours.dtype == theirs.dtype and ours.flags.c_contiguous == theirs.flags.c_contiguous
    np.testing.assert_allclose(ours, theirs, rtol=1e-4 if ours.dtype.char in "fF" else 1e-10, atol=1e-4)


@pytest.mark.parametrize(("path", "batch"), [("host", ()), ("hybrid", ()), ("batched", (2,))])
def test_single_precision_is_computed_in_double_as_numpy_does(path, batch):
    """NumPy factors float32 and complex64 in double precision and rounds the results: a float32 matrix that is
    positive definite only to double precision factors, and every result is NumPy's to a tenth of a unit of single
    precision in norm (a factorization in single precision fails, or is 0.4-4 units off)."""
    v = np.random.default_rng(1).uniform(1, 2, 40)
    hpd = np.broadcast_to((np.outer(v, v) + 1e-6 * np.eye(40)).astype(np.float32), (*batch, 40, 40)).copy()
    general = testing.general(40, 40, dtype=np.complex128, seed=3).astype(np.complex64)
    general = np.broadcast_to(general @ np.diag(np.logspace(0, -5, 40)), (*batch, 40, 40)).copy()
    with pytest.raises(np.linalg.LinAlgError):
        sl.cholesky(hpd[(0,) * len(batch)], lower=True)
    with hetlapack.using(path=path, tile=16):
        pairs = [(numpy_linalg.cholesky(hpd), numpy_functions["cholesky"](hpd)),
                 *zip(numpy_linalg.qr(general), numpy_functions["qr"](general))]
    for ours, theirs in pairs:
        assert ours.dtype == theirs.dtype and ours.strides == theirs.strides
        assert np.linalg.norm(ours - theirs) <= 0.1 * np.finfo(np.float32).eps * np.linalg.norm(theirs)


@pytest.mark.parametrize(("path", "batch"), [("host", ()), ("hybrid", ()), ("batched", (3,))])
@pytest.mark.parametrize("dtype", [">f4", ">c8", ">f8"])
def test_results_are_in_native_byte_order_as_numpys(path, batch, dtype):
    a = np.broadcast_to(testing.spd(12, seed=2), (*batch, 12, 12)).astype(dtype)
    with hetlapack.using(path=path, tile=8):
        ours = [numpy_linalg.cholesky(a), *numpy_linalg.qr(a)]
    theirs = [numpy_functions["cholesky"](a), *numpy_functions["qr"](a)]
    assert [x.dtype.str for x in ours] == [x.dtype.str for x in theirs]


@pytest.mark.parametrize("path", PATHS)
def test_cholesky_error_equal_numpy(path):
    a = testing.spd(40)
    a[30, 30] = -1
    with (hetlapack.using(path=path, tile=16),
          pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite")):
        numpy_linalg.cholesky(a)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r", "raw"])
@pytest.mark.parametrize("shape", [(40, 40), (50, 21), (21, 50)])
def test_qr_equal_numpy(path, mode, shape):
    a = testing.general(*shape, seed=8)
    with hetlapack.using(path=path, tile=16):
        ours = numpy_linalg.qr(a, mode=mode)
    theirs = numpy_functions["qr"](a, mode=mode)
    assert type(ours) is type(theirs)
    for x, y in zip(*(o if isinstance(o, tuple) else (o,) for o in (ours, theirs))):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, atol=1e-12)


@pytest.mark.parametrize("mode", ["full", "f", "economic", "e"])
@pytest.mark.parametrize(("path", "shape"), [("host", (40, 40)), ("hybrid", (50, 21)), ("hybrid", (21, 50)),
                                             ("host", (3, 21, 50)), ("batched", (3, 21, 50))])
def test_deprecated_qr_modes_warn_at_the_caller_and_equal_numpy(path, shape, mode):
    """NumPy's DeprecationWarning points at the code that called ``qr`` (so the default filters show it there), and
    the results are NumPy's, strides included."""
    a = testing.general(*shape, seed=8) if len(shape) == 2 else testing.general(*shape[1:], seed=8, batch=shape[:1])
    with pytest.warns(DeprecationWarning) as ours_warned, hetlapack.using(path=path, tile=16):
        ours = numpy_linalg.qr(a, mode=mode)
    with pytest.warns(DeprecationWarning) as theirs_warned:
        theirs = numpy_functions["qr"](a, mode=mode)
    assert [w.filename for w in ours_warned] == [__file__]
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]
    assert type(ours) is type(theirs)
    for x, y in zip(*(o if isinstance(o, tuple) else (o,) for o in (ours, theirs))):
        assert x.shape == y.shape and x.dtype == y.dtype and x.strides == y.strides
        np.testing.assert_allclose(x, y, atol=1e-12)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("mode", ["full", "economic"])
@pytest.mark.parametrize("make", [lambda a: a.tolist(), np.asmatrix, np.ma.asarray], ids=["list", "matrix", "masked"])
def test_deprecated_qr_modes_warn_at_the_caller_for_any_array_like(make, mode):
    a = make(testing.general(5, 3, seed=8))
    with pytest.warns(DeprecationWarning) as ours_warned:
        ours = numpy_linalg.qr(a, mode=mode)
    with pytest.warns(DeprecationWarning):
        theirs = numpy_functions["qr"](a, mode=mode)
    assert [w.filename for w in ours_warned] == [__file__]
    for x, y in zip(*(o if isinstance(o, tuple) else (o,) for o in (ours, theirs))):
        assert type(x) is type(y) and x.strides == y.strides
        np.testing.assert_allclose(x, y, atol=1e-12)


def test_unsupported_dtypes_keep_numpy_errors():
    with pytest.raises(TypeError, match="float16 is unsupported"):
        numpy_linalg.cholesky(np.eye(3, dtype=np.float16))


def test_nep18_duck_arrays_go_to_numpy():
    seen = []

    class Duck:
        def __array_function__(self, func, types, args, kwargs):
            seen.append(func)
            return "duck"

    with hetlapack.compat.patched():
        assert np.linalg.cholesky(Duck()) == "duck"
        assert np.linalg.qr(Duck()) == "duck"
    assert [f.__name__ for f in seen] == ["cholesky", "qr"]


def test_subclasses_keep_numpy_wrapping():
    m = np.asmatrix(testing.spd(4))
    with hetlapack.compat.patched():
        assert isinstance(np.linalg.cholesky(m), np.matrix)


def _in_every_layout(stack):
    """``stack`` in the memory layouts NumPy's results follow: C, Fortran, the first batch axis innermost, the
    batch reversed, each matrix's rows and columns reversed (Hermitian positive definite ones stay so)."""
    moved = np.moveaxis(np.ascontiguousarray(np.moveaxis(stack, 0, -1)), -1, 0)
    return {"C": stack, "Fortran": np.asfortranarray(stack), "batch axis innermost": moved,
            "batch reversed": stack[::-1], "matrices reversed": stack[..., ::-1, ::-1]}


@pytest.mark.parametrize("chunk_matrices", [None, 2])
@pytest.mark.parametrize("kernels", ["interleaved", "lapack"])
@pytest.mark.parametrize("shape", [(7, 4, 4), (2, 3, 5, 5), (3, 1, 2, 4, 4)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_stacked_results_are_laid_out_as_numpy_lays_them_out(shape, dtype, kernels, chunk_matrices, monkeypatch):
    """Cholesky's factor and QR's Q follow NumPy's gufunc outputs (matrices C-ordered, batch axes in the input's
    order); R follows ``triu`` over a copy of the input in its own axis order. Values equal, strides identical, on
    the batched path with either kernels; a single-precision stack is converted to double a chunk at a time (here
    also of two matrices, so that chunks end inside every batch axis)."""
    if chunk_matrices:
        monkeypatch.setattr(numpy_linalg, "CHUNK_BYTES", chunk_matrices * shape[-1] ** 2 * 16)
    n = shape[-1]
    x = np.random.default_rng(n).standard_normal(shape).astype(dtype)
    spd = x @ np.swapaxes(x.conj(), -1, -2) + n * np.eye(n, dtype=dtype)
    for (layout, general), hpd in zip(_in_every_layout(x[..., :-1]).items(), _in_every_layout(spd).values()):
        with hetlapack.using(path="batched", kernels=kernels):
            pairs = [(numpy_linalg.cholesky(hpd, upper=upper), numpy_functions["cholesky"](hpd, upper=upper))
                     for upper in (False, True)]
            for mode in ("reduced", "complete", "r"):
                ours, theirs = numpy_linalg.qr(general, mode=mode), numpy_functions["qr"](general, mode=mode)
                pairs += [(ours, theirs)] if mode == "r" else list(zip(ours, theirs))
        for ours, theirs in pairs:  # single precision: NumPy's double results rounded, to a unit in the last place
            assert (ours.strides, ours.dtype) == (theirs.strides, theirs.dtype), layout
            tol = 2 * np.finfo(np.float32).eps if dtype == np.complex64 else 1e-10
            np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * np.abs(theirs).max())


@pytest.fixture
def gufunc_calls(monkeypatch):
    """The names of NumPy's gufuncs the shims called themselves (the host path's direct calls), in order."""
    from hetlapack.compat import _numpy_host

    made, found = [], _numpy_host._gufuncs()
    assert found is not None  # this NumPy's gufuncs answer the probe (else every call is NumPy's own)

    def counted(name):
        def call(*args, **kwargs):
            made.append(name)
            return found[name](*args, **kwargs)
        return call

    monkeypatch.setattr(_numpy_host, "_gufuncs", lambda: {name: counted(name) for name in found})
    return made


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("layout", ["C", "F", "reversed view"])
def test_a_small_matrix_is_the_gufunc_call_numpy_makes_to_the_bit(layout, dtype, gufunc_calls):
    """``numpy.linalg.cholesky`` and ``qr`` of a small plain matrix are NumPy's gufunc calls, made by the shim
    without NumPy's Python around them: NumPy's results to the bit, dtype and layout, the input untouched."""
    expected = []
    for shape in [(1, 1), (2, 2), (7, 3), (3, 7), (31, 31), (100, 100)]:
        a = testing.random_matrix(shape, dtype=dtype, seed=sum(shape))
        a = a @ a.conj().T + shape[0] * np.eye(shape[0], dtype=dtype) if shape[0] == shape[1] else a
        a = a[::-1, ::-1] if layout == "reversed view" else np.asarray(a, order=layout)
        before = a.copy()
        for mode in ("reduced", "complete", "r"):
            testing.assert_same_results(numpy_linalg.qr(a, mode=mode), numpy_functions["qr"](a, mode=mode))
            complete = mode == "complete" and shape[0] > shape[1]
            expected += ["qr_r_raw"] + ([] if mode == "r" else ["qr_complete" if complete else "qr_reduced"])
        if shape[0] == shape[1]:
            for upper in (False, True):
                testing.assert_same_results(numpy_linalg.cholesky(a, upper=upper),
                                            numpy_functions["cholesky"](a, upper=upper))
                expected.append("cholesky_up" if upper else "cholesky_lo")
        np.testing.assert_array_equal(a, before)
    assert gufunc_calls == expected


def test_a_small_matrix_the_gufuncs_may_not_take_is_numpys_own_call(gufunc_calls):
    """A matrix that is not positive definite is tried and then given to NumPy for its error; NaNs likewise; a
    non-native byte order, an integer dtype, an empty matrix, a non-bool ``upper`` and the raw mode go to NumPy
    at once: its results and errors."""
    bad = testing.spd(6)
    bad[2, 2] = -1.0
    nan = testing.spd(6)
    nan[4, 1] = np.nan
    for make, call in [(lambda: bad, "cholesky"), (lambda: nan, "cholesky"), (lambda: nan, "qr")]:
        try:
            expected = getattr(np.linalg, call)(make())
        except np.linalg.LinAlgError as error:
            with pytest.raises(np.linalg.LinAlgError, match=str(error)):
                getattr(numpy_linalg, call)(make())
            continue
        np.testing.assert_array_equal(getattr(numpy_linalg, call)(make())[0], expected[0])
    tried = list(gufunc_calls)
    assert tried[:2] == ["cholesky_lo", "cholesky_lo"]
    spd = testing.spd(5)
    for a, call, options in [(spd.astype(">f8"), "cholesky", {}), (spd.astype(np.int64), "cholesky", {}),
                             (np.ones((0, 0)), "cholesky", {}), (spd, "cholesky", {"upper": 1}),
                             (spd, "qr", {"mode": "raw"}), (spd.astype(">f8"), "qr", {}), (np.ones((0, 3)), "qr", {})]:
        testing.assert_same_results(getattr(numpy_linalg, call)(a, **options), numpy_functions[call](a, **options))
    assert gufunc_calls == tried


@pytest.mark.parametrize("made_once", [True, False], ids=["made once", "np.errstate"])
def test_the_gufuncs_run_in_the_shims_error_state_and_the_callers_is_kept(made_once, gufunc_calls, monkeypatch):
    """The shim calls NumPy's gufuncs with an invalid operation raised (NumPy's private error state, made once; or
    ``np.errstate``, where NumPy has no such state): whatever the caller's error state, a failure still ends in
    NumPy's error, the results are NumPy's, and the caller's state is as it was after every call."""
    from hetlapack.compat import _numpy_host

    if not made_once:
        monkeypatch.setattr(_numpy_host, "_ERROR_STATE", None)
    bad, good = testing.spd(6), testing.spd(6)
    bad[2, 2] = -1.0
    for callers in ({"all": "ignore"}, {"all": "raise"}, {"invalid": "warn", "over": "raise"}):
        with np.errstate(**callers):
            state = np.geterr()
            with pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite"):
                numpy_linalg.cholesky(bad)
            assert np.geterr() == state
            testing.assert_same_results(numpy_linalg.cholesky(good), numpy_functions["cholesky"](good))
            testing.assert_same_results(numpy_linalg.qr(good), numpy_functions["qr"](good))
            assert np.geterr() == state
    assert gufunc_calls == ["cholesky_lo", "cholesky_lo", "qr_r_raw", "qr_reduced"] * 3


@contextlib.contextmanager
def _another_numpy(monkeypatch, changed: dict):
    """A NumPy whose ``_umath_linalg`` is the installed one's with the gufuncs ``changed`` (None: absent), as the
    shim's probe sees it: yields what the probe found (:func:`_numpy_host._gufuncs`), and restores the installed
    NumPy's after."""
    import types

    from numpy.linalg import _umath_linalg

    from hetlapack.compat import _numpy_host

    members = {found: getattr(_umath_linalg, found) for found in dir(_umath_linalg)} | changed
    other = types.SimpleNamespace(**{name: member for name, member in members.items() if member is not None})
    monkeypatch.setattr(_numpy_host.importlib, "import_module", lambda module: other)
    _numpy_host._gufuncs.cache_clear()
    try:
        yield _numpy_host._gufuncs()
    finally:
        monkeypatch.undo()
        _numpy_host._gufuncs.cache_clear()


@pytest.mark.parametrize("name", ["cholesky_lo", "qr_r_raw"])
def test_a_gufunc_that_answers_otherwise_than_numpy_is_never_called(name, monkeypatch):
    """NumPy's gufuncs are private to it: one that answers the probe otherwise than NumPy's public function (here
    with its input, unfactored) is never trusted, and the calls stay NumPy's own."""
    with _another_numpy(monkeypatch, {name: lambda a, *args, **kwargs: a.copy()}) as found:
        assert found is None
        a = testing.spd(4)
        testing.assert_same_results(numpy_linalg.qr(a), numpy_functions["qr"](a))
        testing.assert_same_results(numpy_linalg.cholesky(a), numpy_functions["cholesky"](a))


def test_numpy_2_0s_two_householder_gufuncs_are_picked_by_shape_as_its_qr_picks(monkeypatch):
    """NumPy 2.0 has no ``qr_r_raw``: ``qr_r_raw_m`` factors a matrix with no more rows than columns and
    ``qr_r_raw_n`` the others, and the shim picks as 2.0's ``qr`` does, its results NumPy's (here a NumPy of that
    kind is made from the installed one's gufuncs)."""
    from numpy.linalg import _umath_linalg

    from hetlapack.compat import _numpy_host

    householder, made = _numpy_host._qr_r_raw(_umath_linalg), []

    def recorded(name):
        def call(a, signature):
            made.append(name)
            return householder(a, signature=signature)
        return call

    numpy_2_0 = {"qr_r_raw": None, "qr_r_raw_m": recorded("m"), "qr_r_raw_n": recorded("n")}
    with _another_numpy(monkeypatch, numpy_2_0) as found:
        assert found is not None
        made.clear()
        for shape in ((3, 5), (4, 4), (5, 3)):
            a = testing.general(*shape)
            testing.assert_same_results(numpy_linalg.qr(a), numpy_functions["qr"](a))
        assert made == ["m", "m", "n"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("layout", ["C", "F", "reversed view"])
def test_a_cholesky_at_a_calibrated_block_is_lapacks_right_looking_variant_on_numpys_blas(layout, dtype,
                                                                                           monkeypatch):
    """Where calibration gave NumPy's BLAS a block, ``numpy.linalg.cholesky`` runs LAPACK's right-looking variant
    there, from the tiled copy too: NumPy's factor to within rounding (odd orders, one block and several), computed
    in double precision as NumPy computes it, C-ordered in NumPy's dtype, the other triangle zero, the input
    untouched. A matrix that is not positive definite and one with a NaN are NumPy's own call (its error, its
    result); with no block for NumPy's BLAS the call stays NumPy's gufunc."""
    from hetlapack.compat import _numpy_host
    from hetlapack.contract import arrays
    from hetlapack.devices import lapack_pointers
    from hetlapack.perf import model

    library = lapack_pointers.numpy_library()
    if library is None:
        pytest.skip("NumPy's BLAS is not the OpenBLAS NumPy's wheels ship")
    ran = []
    right_looking = lapack_pointers.potrf_right_looking

    def recorded(uplo, a, block, *, library):
        ran.append((a.dtype, library.name))
        return right_looking(uplo, a, block, library=library)

    monkeypatch.setattr(model, "host_potrf_block", lambda dtype, n, uplo, library="scipy": 8 if library == "numpy"
                        else None)
    monkeypatch.setattr(lapack_pointers, "potrf_right_looking", recorded)
    monkeypatch.setattr(arrays, "tile_order", lambda: 8)
    monkeypatch.setattr(_numpy_host, "POTRF_BLOCKS_MIN_ORDER", 1)
    computed = np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    for n in (1, 7, 37):
        a = testing.spd(n, dtype=dtype)
        a = a[::-1, ::-1] if layout == "reversed view" else np.asarray(a, order=layout)
        before = a.copy()
        for upper in (False, True):
            for path in ("host", None):
                with hetlapack.using(path=path):
                    ours = numpy_linalg.cholesky(a, upper=upper)
                theirs = numpy_functions["cholesky"](a, upper=upper)
                assert ours.dtype == theirs.dtype and ours.flags.c_contiguous
                np.testing.assert_array_equal((np.tril if upper else np.triu)(ours, -1 if upper else 1), 0)
                tolerance = 100 * np.finfo(theirs.dtype).eps * np.abs(theirs).max()
                np.testing.assert_allclose(ours, theirs, rtol=0, atol=tolerance)
                np.testing.assert_array_equal(a, before)
    assert ran == [(computed, "numpy")] * 12
    bad, nan = a.copy(), a.copy()
    bad[4, 4], nan[30, 2] = -1, np.nan
    with pytest.raises(np.linalg.LinAlgError) as theirs:
        numpy_functions["cholesky"](bad)
    with pytest.raises(np.linalg.LinAlgError) as ours:
        numpy_linalg.cholesky(bad)
    assert str(ours.value) == str(theirs.value)
    try:
        expected = numpy_functions["cholesky"](nan)
    except np.linalg.LinAlgError as error:
        with pytest.raises(np.linalg.LinAlgError, match=str(error)):
            numpy_linalg.cholesky(nan)
    else:
        np.testing.assert_array_equal(numpy_linalg.cholesky(nan), expected)
    assert len(ran) == 13  # the matrix that is not positive definite was tried; the NaN was read in the copy
    monkeypatch.setattr(model, "host_potrf_block", lambda dtype, n, uplo, library="scipy": None)
    testing.assert_same_results(numpy_linalg.cholesky(a), numpy_functions["cholesky"](a))
    assert len(ran) == 13


def test_explain_gives_the_plan_numpys_functions_follow(monkeypatch):
    """``hetlapack.explain(name, a, library="numpy")`` is the plan NumPy's shims follow: the accelerated path they
    factor on (forced or chosen, single matrices and stacks), the host path where they make NumPy's call, and
    NumPy's own function, with why, for whatever they hand to it."""
    followed = []
    factored = numpy_linalg._factored
    monkeypatch.setattr(numpy_linalg, "_factored",
                        lambda plan, *args: followed.append(plan.path) or factored(plan, *args))
    a = testing.spd(40)
    stack = np.stack([testing.spd(8)] * 1000)
    for path, name, matrix, mode in (("hybrid", "cholesky", a, None), ("hybrid", "qr", a, "r"),
                                     (None, "cholesky", stack, None), (None, "qr", stack, "reduced"),
                                     (None, "cholesky", a, None), (None, "qr", a, "complete")):
        with hetlapack.using(path=path):
            plan = hetlapack.explain(name, matrix, library="numpy", **({"mode": mode} if mode else {}))
            getattr(numpy_linalg, name)(matrix, **({"mode": mode} if mode else {}))
        assert (followed.pop() if followed else "host") == plan.path
        assert plan.path == (path or ("batched" if matrix is stack else "host")) and plan.shape == matrix.shape
    nan = a.copy()
    nan[3, 5] = np.nan
    for name, matrix, reason in (("cholesky", [[4.0]], "not an exact numpy.ndarray"),
                                 ("qr", np.ones(3), "not a stack of matrices"),
                                 ("cholesky", np.ones((3, 3), dtype=np.float16), "not a stack of matrices"),
                                 ("cholesky", np.ones((3, 2)), "not square"), ("qr", a, "mode='raw'"),
                                 ("cholesky", nan, "infinities or NaNs"), ("qr", nan, "infinities or NaNs")):
        with hetlapack.using(path="hybrid"):
            plan = hetlapack.explain(name, matrix, library="numpy", mode="raw" if matrix is a else None)
        assert plan.path == "host" and plan.reason.startswith(reason) and "NumPy's own function" in plan.reason
    with pytest.raises(ValueError, match="unknown NumPy function 'lu_factor'"):
        hetlapack.explain("lu_factor", a, library="numpy")
    with pytest.raises(ValueError, match="unknown library 'torch'"):
        hetlapack.explain("cholesky", a, library="torch")
