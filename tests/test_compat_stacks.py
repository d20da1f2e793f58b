"""Stacks (..., m, n): SciPy's batch results, return types, errors and warnings on the batched and host paths."""

import functools
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
from hetlapack.compat import numpy_linalg
from hetlapack.contract.originals import numpy_functions, scipy_functions
from hetlapack.dispatch import Request, choose
from hetlapack.blas_threads import one_thread_per_call

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
#: How a test forces dispatch: the host path, the batched path with the kernels dispatch picks for the dtype (the
#: LAPACK loop for single precision's factorizations), and the batched path with the interleaved kernels (in double
#: precision, and single precision's solves: its factorizations have none and run the loop).
FORCINGS = {"host": {"path": "host"}, "batched": {"path": "batched"},
            "interleaved": {"path": "batched", "kernels": "interleaved"}, "hybrid": {"path": "hybrid"}}
PATHS = ["host", "batched", "interleaved"]


def tol(dtype):
    return 200 * np.finfo(dtype).eps


def _strides(x: np.ndarray) -> tuple[int, ...]:
    """Strides of the axes longer than 1 (NumPy's layout flags ignore the others, and so does any indexing)."""
    return tuple(stride for stride, extent in zip(x.strides, x.shape) if extent > 1)


def assert_same(ours, theirs, dtype=None):
    """The same return types, shapes, dtypes and layouts, and values within :func:`tol` of ``dtype`` (to the last
    bit without one)."""
    assert type(ours) is type(theirs)
    ours, theirs = (ours, theirs) if isinstance(ours, (list, tuple)) else ((ours,), (theirs,))
    assert len(ours) == len(theirs)
    for x, y in zip(ours, theirs):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype and _strides(x) == _strides(y)
        if x.dtype.kind in "biuOU" or dtype is None:
            np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_allclose(x, y, atol=tol(dtype), rtol=tol(dtype))


def test_stacks_take_the_batched_kernels_that_win_at_their_order():
    """Double-precision stacks of small matrices take the interleaved kernels; single precision, and orders past the
    interleaved kernels' crossover, the LAPACK loop (SciPy's results to the bit); a lone matrix and orders past the
    loop's crossover stay on SciPy's call."""
    cases = [((1000,), 8, np.float64, "batched", "interleaved"), ((1000,), 8, np.float32, "batched", "lapack"),
             ((16,), 100, np.float64, "batched", "lapack"), ((1,), 100, np.float64, "host", None),
             ((2,), 400, np.float32, "host", None)]
    for batch, n, dtype, path, kernels in cases:
        plan = hetlapack.explain("cholesky", np.ones((*batch, n, n), dtype=dtype))
        assert (plan.path, plan.kernels) == (path, kernels)
        assert ("bit for bit" in plan.reason) == (kernels == "lapack")
    assert "order 400 > 384" in hetlapack.explain("cholesky", np.ones((2, 400, 400), np.float32)).reason
    with hetlapack.using(kernels="interleaved"):
        plan = hetlapack.explain("cholesky", np.ones((1000, 8, 8), np.float32))
    assert plan.kernels == "lapack"
    assert "interleaved kernels were asked for, but potrf has none in float32" in plan.reason
    for op in ("potrf", "geqrf"):
        assert choose(Request(op, (1000, 100, 100), np.dtype(np.float64), library="numpy")).kernels == "lapack"


#: Orders at which each dtype's stacks are factored on the LAPACK loop unforced: any order in single precision, past
#: the interleaved kernels' crossover in double (a prime, not a multiple of any block size).
LOOP_ORDERS = {np.float32: 7, np.complex64: 7, np.float64: 67, np.complex128: 67}

#: Matrices per stack that the batched path wins unforced at those orders under every SciPy: SciPy 1.18 loops over
#: a stack in C, whose fixed cost is below the batched path's: small matrices take a few hundred, order 67 a dozen.
LOOP_BATCHES = {np.float32: 512, np.complex64: 512, np.float64: 16, np.complex128: 16}


@pytest.mark.parametrize("dtype", DTYPES)
def test_lapack_loop_stacks_are_scipys_bit_for_bit(dtype):
    """Unforced, the stacks that take the LAPACK loop get SciPy's results to the bit from every function, in SciPy's
    types and layouts, for C, Fortran, strided and read-only stacks, and their inputs are not written. SciPy runs
    under the loop's own cap of one BLAS thread a call (from order 53 to 100 on, SciPy's results change with its
    thread count). The solves take our own kernels in every precision (the test after this one)."""
    n, batch = LOOP_ORDERS[dtype], LOOP_BATCHES[dtype]
    a = testing.spd(n, dtype, seed=1, batch=(batch,))
    g = testing.general(n + 2, n, dtype=dtype, seed=2, batch=(batch,))
    for op, x in (("cholesky", a), ("lu_factor", g), ("qr", g)):
        assert hetlapack.explain(op, x).kernels == "lapack"
    factorizations = [
        lambda m, x, y: m.cholesky(x), lambda m, x, y: m.cholesky(x, lower=True),
        lambda m, x, y: m.cho_factor(x, lower=True), lambda m, x, y: m.lu_factor(y),
        lambda m, x, y: m.lu_factor(np.swapaxes(y, -1, -2)), lambda m, x, y: m.lu(y),
        lambda m, x, y: m.lu(y, permute_l=True), lambda m, x, y: m.lu(np.swapaxes(y, -1, -2), p_indices=True),
        lambda m, x, y: m.qr(y), lambda m, x, y: m.qr(y, mode="economic"), lambda m, x, y: m.qr(y, mode="r"),
        lambda m, x, y: m.qr(np.swapaxes(y, -1, -2), mode="economic"),
    ]
    for x, y in zip(testing.layouts(a).values(), testing.layouts(g).values()):
        before = x.copy(), y.copy()
        for call in factorizations:
            ours = call(la, x, y)
            with one_thread_per_call():
                theirs = call(sl, x, y)
            assert_same(ours, theirs)
        np.testing.assert_array_equal(x, before[0])
        np.testing.assert_array_equal(y, before[1])


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("n", [5, 7, 13, 33])
def test_single_precision_solves_take_their_own_kernels(dtype, n):
    """Single-precision stacks' solves run our own kernels unforced (interleaved to their small orders, a matrix at a
    time past them), as double precision's do: SciPy's solutions to single-precision rounding, in SciPy's types and
    layouts, from C, Fortran, strided and read-only factors and right-hand sides, none of them written."""
    batch = LOOP_BATCHES[dtype]
    a = testing.spd(n, dtype, seed=1, batch=(batch,))
    b = testing.general(n, 2, dtype=dtype, seed=3, batch=(batch,))
    for op in ("cho_solve", "lu_solve"):
        assert hetlapack.explain(op, a).kernels == "interleaved"
    solves = [lambda m, x, y: m.cho_solve((sl.cholesky(x), False), y),
              lambda m, x, y: m.cho_solve((sl.cholesky(x, lower=True), True), y[0, :, 0])]
    solves += [lambda m, x, y, t=t: m.lu_solve(sl.lu_factor(x), y, trans=t) for t in (0, 1, 2)]
    for x, y in zip(testing.layouts(a).values(), testing.layouts(b).values()):
        before = x.copy(), y.copy()
        for call in solves:
            assert_same(call(la, x, y), call(sl, x, y), dtype=dtype)
        np.testing.assert_array_equal(x, before[0])
        np.testing.assert_array_equal(y, before[1])


def test_lapack_loop_raises_and_warns_as_scipy():
    """On the LAPACK loop, a matrix that is not positive definite raises SciPy's LinAlgError, an exactly singular
    one SciPy's warning (the factors still returned, SciPy's to the bit), and an infinity or NaN SciPy's
    ValueError, unless ``check_finite=False``."""
    a = testing.spd(5, np.float32, seed=4, batch=(3, 200))
    a[1, 2, 3, 3] = -1
    with pytest.raises(LinAlgError) as ours:
        la.cholesky(a)
    with pytest.raises(LinAlgError) as theirs:
        sl.cholesky(a)
    assert str(ours.value) == str(theirs.value)
    g = testing.general(5, dtype=np.float32, seed=5, batch=(LOOP_BATCHES[np.float32],))
    g[3, :, 1] = 0
    with pytest.warns(LinAlgWarning, match="Diagonal number 2 is exactly zero"):
        ours = la.lu_factor(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LinAlgWarning)
        assert_same(ours, sl.lu_factor(g))
    g[5, 0, 0] = np.inf
    for call in (la.lu_factor, la.qr, la.lu, la.cholesky):
        with pytest.raises(ValueError, match="infs or NaNs"):
            call(g)
    h = testing.spd(5, np.float32, seed=6, batch=(LOOP_BATCHES[np.float32],))
    h[2, 0, 4] = np.nan  # in the triangle a lower factorization does not read: SciPy checks it all the same
    assert hetlapack.explain("cholesky", h).kernels == "lapack"
    with pytest.raises(ValueError, match="infs or NaNs"):
        la.cholesky(h, lower=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LinAlgWarning)
        assert la.lu_factor(g, check_finite=False)[0].shape == g.shape


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", [(5,), (2, 3)])
def test_factorizations_equal_scipy_batch(path, dtype, batch):
    a = testing.spd(6, dtype, seed=1, batch=batch)
    g = testing.general(7, 5, dtype=dtype, seed=2, batch=batch)
    with hetlapack.using(**FORCINGS[path]):
        ours = [la.cholesky(a), la.cholesky(a, lower=True), la.cho_factor(a), la.lu_factor(g),
                la.lu_factor(np.swapaxes(g, -1, -2)), la.qr(g), la.qr(g, mode="economic"), la.qr(g, mode="r"),
                la.qr(np.swapaxes(g, -1, -2))]
    theirs = [sl.cholesky(a), sl.cholesky(a, lower=True), sl.cho_factor(a), sl.lu_factor(g),
              sl.lu_factor(np.swapaxes(g, -1, -2)), sl.qr(g), sl.qr(g, mode="economic"), sl.qr(g, mode="r"),
              sl.qr(np.swapaxes(g, -1, -2))]
    for x, y in zip(ours, theirs):
        assert_same(x, y, dtype)


def _pivoted_qr_input(kind: str, dtype, shape: tuple) -> np.ndarray:
    """Stacks whose pivots a rounding can decide: small integers (exact ties), rank one and repeated columns
    (remaining norms at rounding level), and scales near overflow and underflow."""
    rng = np.random.default_rng(17)
    *batch, m, n = shape
    if kind == "integers":
        return rng.integers(-2, 3, shape).astype(dtype)
    if kind == "rank one":
        return testing.general(m, 1, dtype=dtype, seed=4, batch=batch) @ testing.general(1, n, dtype=dtype, seed=5,
                                                                                          batch=batch)
    if kind == "repeated columns":
        return np.repeat(testing.general(m, -(-n // 3), dtype=dtype, seed=6, batch=batch), 3, axis=-1)[..., :n]
    huge = np.finfo(dtype).max / 16
    return testing.general(m, n, dtype=dtype, seed=7, batch=batch) * (huge if kind == "huge" else 1 / huge)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["integers", "rank one", "repeated columns", "huge", "tiny"])
@pytest.mark.parametrize("shape", [(40, 7, 7), (2, 3, 9, 5), (6, 4, 11)])
def test_pivoted_qr_of_stacks_is_scipys_bit_for_bit(dtype, kind, shape):
    """Column pivoting decides by downdated norms, so ties and rank deficiency leave the pivots to rounding: the
    batched path calls LAPACK's geqp3 and orgqr on each matrix, and every output, pivots included, is SciPy's to the
    bit, in SciPy's types and layouts (a list of arrays for a stack), for C, Fortran and strided stacks. (The host
    path is SciPy's own function.)"""
    a = _pivoted_qr_input(kind, dtype, shape)
    for stack in (a, np.asfortranarray(a), np.swapaxes(a, -1, -2)[..., ::2, :]):
        for mode in ("full", "r", "economic"):
            with hetlapack.using(path="batched"):
                ours = la.qr(stack, mode=mode, pivoting=True)
            theirs = sl.qr(stack, mode=mode, pivoting=True)
            assert type(ours) is type(theirs) and len(ours) == len(theirs)
            for x, y in zip(ours, theirs):
                assert x.dtype == y.dtype and x.shape == y.shape and _strides(x) == _strides(y)
                np.testing.assert_array_equal(x, y)


def test_pivoted_qr_of_stacks_goes_batched_in_every_dtype():
    """The LAPACK loop gives LAPACK's results in single precision too, so float32 stacks take it unforced; one
    matrix stays one LAPACK call."""
    for dtype in DTYPES:
        plan = hetlapack.explain("qr", testing.general(8, dtype=dtype, batch=(1000,)), pivoting=True)
        assert plan.path == "batched" and "bit for bit" in plan.reason
    assert hetlapack.explain("qr", testing.general(400, 8, batch=(4,)), pivoting=True).path == "host"
    single = hetlapack.explain("qr", testing.general(8), pivoting=True)
    assert single.path == "host" and "single matrix" in single.unavailable["batched"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bshape", [(6,), (6, 2), (4, 6, 1), (3, 4, 6, 2)])
def test_solves_broadcast_like_scipy(path, bshape):
    a = testing.spd(6, seed=3, batch=(3, 4))
    b = testing.random_matrix(bshape, seed=4)
    upper, lower = sl.cholesky(a), sl.cholesky(a, lower=True)
    with hetlapack.using(**FORCINGS[path]):
        ours = [la.cho_solve((upper, False), b), la.cho_solve((lower, True), b), la.lu_solve(sl.lu_factor(a), b),
                la.lu_solve(sl.lu_factor(a), b, trans=1)]
    theirs = [sl.cho_solve((upper, False), b), sl.cho_solve((lower, True), b), sl.lu_solve(sl.lu_factor(a), b),
              sl.lu_solve(sl.lu_factor(a), b, trans=1)]
    for x, y in zip(ours, theirs):
        assert_same(x, y, np.float64)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bshape", [(6,), (6, 2), (1, 6, 1), (4, 6, 2)])
def test_overwrite_b_with_b_broadcast_over_the_stack_solves_every_member(path, dtype, bshape):
    """SciPy's batch loop, given overwrite_b, solves every member in place in the same rows of a broadcast ``b``, so
    each solve overwrites the last and all but one solution are wrong; hetlapack does not overwrite there."""
    a = testing.spd(6, dtype, seed=3, batch=(3, 4))
    b = testing.random_matrix(bshape, dtype=dtype, seed=4)
    with hetlapack.using(**FORCINGS[path]):
        ours = [la.cho_solve(sl.cho_factor(a), b.copy(), overwrite_b=True),
                la.lu_solve(sl.lu_factor(a), b.copy(), overwrite_b=True)]
    theirs = [sl.cho_solve(sl.cho_factor(a), b), sl.lu_solve(sl.lu_factor(a), b)]
    for x, y in zip(ours, theirs):
        assert_same(x, y, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [False, True])
def test_cho_solve_of_cho_factors_output_runs_batched(monkeypatch, dtype, lower):
    """SciPy's cho_factor of a stack returns ``lower`` as an array, which f2py reads by its first element: the
    batched path reads it so too, instead of handing the solve to SciPy's per-matrix loop."""
    a = testing.spd(5, dtype, seed=5, batch=(6,))
    b = testing.random_matrix((6, 5, 2), dtype=dtype, seed=6)
    factors = sl.cho_factor(a, lower=lower)
    assert np.shape(factors[1]) == (6,)
    monkeypatch.setitem(scipy_functions, "cho_solve", None)  # SciPy's loop is not called
    with hetlapack.using(path="batched"):
        ours = la.cho_solve(factors, b)
    monkeypatch.undo()
    assert_same(ours, sl.cho_solve(factors, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("n", "b_shape"), [(4, (300, 4, 1)), (8, (20, 15, 8, 2)), (40, (30, 40, 3))])
def test_one_factor_over_a_stack_of_right_hand_sides_runs_batched(monkeypatch, dtype, n, b_shape):
    """One factor and a stack of right-hand sides make a stack of solves: dispatch plans for the broadcast batch
    (where SciPy's batch loop makes a LAPACK call per right-hand side, 60-120x slower at n = 4-8), and the results are
    SciPy's to rounding (to the bit on the LAPACK loop)."""
    a = testing.general(n, dtype=dtype, seed=16) + n * np.eye(n, dtype=dtype)
    lu_piv, c_lower = sl.lu_factor(a), sl.cho_factor(a @ a.conj().T, lower=True)
    b = testing.random_matrix(b_shape, dtype=dtype, seed=17)
    monkeypatch.setitem(scipy_functions, "lu_solve", None)  # SciPy's loop is not called
    monkeypatch.setitem(scipy_functions, "cho_solve", None)
    ours = [la.lu_solve(lu_piv, b, trans=trans) for trans in (0, 1, 2)] + [la.cho_solve(c_lower, b)]
    monkeypatch.undo()
    theirs = [sl.lu_solve(lu_piv, b, trans=trans) for trans in (0, 1, 2)] + [sl.cho_solve(c_lower, b)]
    for x, y in zip(ours, theirs):
        assert_same(x, y, dtype)


@pytest.mark.parametrize("factor_batch", [(), (5,)])
def test_lu_solve_reads_a_trans_that_is_no_plain_integer_as_scipy_does(factor_batch):
    """``trans`` as a 1-element array (or a float) is f2py's to read: SciPy's own call takes it, on a stack too."""
    lu_piv = sl.lu_factor(testing.general(4, seed=18, batch=factor_batch))
    b = testing.general(4, 3, seed=19, batch=(5,))
    for trans in (np.array([1]), 2.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert_same(la.lu_solve(lu_piv, b, trans=trans), sl.lu_solve(lu_piv, b, trans=trans))


@pytest.mark.parametrize("path", PATHS)
def test_solve_batch_mismatches_raise_scipys_error(path):
    """SciPy broadcasts the batch dimensions of (lu, piv, b) and names a mismatch by argument position, before it
    checks values for infinities and NaNs; pivots fewer than the order get f2py's text from SciPy's own call."""
    a = testing.spd(3, seed=3, batch=(4,))
    (lu, piv), c = sl.lu_factor(a), sl.cholesky(a)
    calls = [lambda m: m.lu_solve((lu, piv), np.ones((5, 3, 1))),
             lambda m: m.lu_solve((lu, piv[:2]), np.ones((4, 3, 1))),
             lambda m: m.lu_solve((lu, piv[:, :2]), np.ones((4, 3, 1))),
             lambda m: m.lu_solve((lu, piv[0, :2]), np.ones((4, 3, 1))),
             lambda m: m.cho_solve((c, False), np.ones((5, 3, 1))),
             lambda m: m.lu_solve((lu, piv), np.full((5, 3, 1), np.nan)),
             lambda m: m.cho_solve((c, False), np.full((5, 3, 1), np.nan))]
    for call in calls:
        with pytest.raises(ValueError) as theirs:
            call(sl)
        with hetlapack.using(**FORCINGS[path]), pytest.raises(ValueError) as ours:
            call(la)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 6, 6), (2, 3, 7, 4), (4, 4, 9), (3, 1, 1), (3, 5, 1)])
@pytest.mark.parametrize("kwargs", [{}, {"permute_l": True}, {"p_indices": True}])
def test_lu_of_stacks_equals_scipy(path, dtype, shape, kwargs):
    """``lu`` (P, L, U) of a stack: SciPy's shapes, dtypes, strides and values, a singular member and pivot ties
    included (a zero first column, integer entries), the input untouched."""
    a = testing.general(*shape[-2:], dtype=dtype, seed=4, batch=shape[:-2])
    a[(0,) * (len(shape) - 2)][:, 0] = 0
    a[(-1,) * (len(shape) - 2)] = np.round(4 * a[(-1,) * (len(shape) - 2)].real)
    kept = a.copy()
    with hetlapack.using(**FORCINGS[path]):
        ours = la.lu(a, **kwargs)
    assert_same(ours, sl.lu(a, **kwargs), dtype)
    np.testing.assert_array_equal(a, kept)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("operand", ["lu", "b"])
def test_lu_solve_checks_b_for_non_finite_numbers_as_scipy_does(path, bad, operand):
    """SciPy's ``lu_solve`` checks ``b`` and not the factors; a non-finite number in either reaches the result."""
    lu, piv = sl.lu_factor(testing.general(6, seed=8, batch=(30,)))
    b = testing.general(6, seed=9, batch=(30,))[..., :2]
    (lu if operand == "lu" else b)[17, 3, 1] = bad
    with hetlapack.using(**FORCINGS[path]):
        if operand == "b":
            with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                la.lu_solve((lu, piv), b)
        else:
            assert not np.isfinite(la.lu_solve((lu, piv), b)[17]).all()
        assert not np.isfinite(la.lu_solve((lu, piv), b, check_finite=False)[17]).all()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("n", [6, 80])
@pytest.mark.parametrize(("bad", "pivot_dtype"), [(6, np.int32), (-1, np.int32), (2**40, np.int64), (-1, np.int8),
                                                  (6.0, np.float64), (np.nan, np.float64), (6, object), (-1, object),
                                                  (6, complex), (6, str), (6, "m8[s]")], ids=repr)
def test_pivots_that_name_no_row_raise_after_scipys_checks(path, n, bad, pivot_dtype):
    """SciPy's getrs swaps with whatever row a pivot names, writing outside ``b`` (SciPy's own call then corrupts the
    process's memory); hetlapack refuses such a pivot once SciPy's checks of ``b`` and the shapes have passed, on
    single matrices and stacks. An empty ``b`` reads no pivot, and nothing is modified."""
    lu, piv = sl.lu_factor(testing.general(n, seed=10, batch=(5,)))
    wrong = piv.astype(pivot_dtype)
    expected = n if bad == 6 else bad
    wrong[3, n // 2] = expected
    shown = repr(float(expected) if np.dtype(pivot_dtype).kind in "fc" else expected)
    b = testing.general(n, seed=11, batch=(5,))[..., :2]
    kept = b.copy()
    with hetlapack.using(**FORCINGS[path]):
        for factor, pivots, rhs in ((lu, wrong, b), (lu[3], wrong[3], b[3]), (lu[3], wrong[3], b[3, :, 0])):
            with pytest.raises(ValueError, match=f"^lu_solve: pivot {re.escape(shown)} names no row of the LU factor "
                                                 f"of order {n} "):
                la.lu_solve((factor, pivots), rhs, trans=1, overwrite_b=True)
            with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
                la.lu_solve((factor, pivots), rhs * np.nan)
            with pytest.raises(ValueError, match="^Shapes of lu"):
                la.lu_solve((factor, pivots), rhs[..., :-1, :] if rhs.ndim > 1 else rhs[:-1])
        assert la.lu_solve((lu, wrong), b[..., :0]).shape == (5, n, 0)
    np.testing.assert_array_equal(b, kept)


@pytest.mark.parametrize("path", [*PATHS, "hybrid"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lower", [0.5, 1.5, None, "1", [1], 2, -1, "x"], ids=repr)
def test_lower_means_and_fails_as_f2py_reads_it(path, dtype, lower):
    """SciPy hands ``lower`` to f2py, which converts it its own way (0.5 and None mean upper, "1" lower) and rejects
    some values with its own errors; the accelerated paths give the same factors, flags, solutions and errors."""
    a = testing.spd(5, dtype, batch=() if path == "hybrid" else (6,))
    factor = np.broadcast_to(sl.cho_factor(testing.spd(5, dtype), lower=True)[0], a.shape)
    b = np.ones((*a.shape[:-1], 1), dtype=dtype)
    calls = [(name, lambda m, name=name: getattr(m, name)(a, lower=lower)) for name in ("cholesky", "cho_factor")]
    calls.append(("cho_solve", lambda m: m.cho_solve((factor, lower), b)))
    for name, call in calls:
        try:
            expected = call(sl)
        except Exception as error:  # noqa: BLE001 - whatever f2py raises, hetlapack must raise alike
            with hetlapack.using(**FORCINGS[path]), pytest.raises(type(error)) as raised:
                call(la)
            assert str(raised.value) == str(error), name
            continue
        with hetlapack.using(**FORCINGS[path]):
            assert_same(call(la), expected, dtype)


@pytest.mark.parametrize("path", PATHS)
def test_first_non_spd_member_raises_scipy_error(path):
    a = testing.spd(8, seed=5, batch=(3, 4))
    a[1, 2, 5, 5] = -50.0
    a[2, 0, 3, 3] = -50.0
    with pytest.raises(LinAlgError) as theirs:
        sl.cholesky(a)
    with hetlapack.using(**FORCINGS[path]), pytest.raises(LinAlgError) as ours:
        la.cholesky(a)
    assert str(ours.value) == str(theirs.value)
    assert "6" in str(ours.value)


NON_FINITE = [(dtype, bad) for dtype in DTYPES for bad in (np.nan, np.inf, -np.inf, complex(0, np.inf))
              if np.dtype(dtype).kind == "c" or not isinstance(bad, complex)]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("dtype", "bad"), NON_FINITE)
@pytest.mark.parametrize("where", [(0, 5, 1), (38, 1, 5)], ids=["lower", "upper"])
def test_check_finite_on_stacks(path, dtype, bad, where):
    """SciPy's ValueError for an infinity or NaN anywhere in a stack, in either triangle whichever Cholesky reads
    (the batched QR kernels check as they gather, the LU kernels where the factors hold one), and
    ``check_finite=False`` lifts the check."""
    a = testing.spd(7, dtype, batch=(40,))
    a[where] = bad
    kept = a.copy()
    with hetlapack.using(**FORCINGS[path]):
        for func in (la.cholesky, la.cho_factor, la.lu_factor, la.qr, functools.partial(la.qr, pivoting=True)):
            for stack in (a, np.asfortranarray(a)):
                with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                    func(stack)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            la.lu_factor(a, check_finite=False)
            la.qr(a, check_finite=False)
            la.qr(a, pivoting=True, check_finite=False)
    np.testing.assert_array_equal(a, kept)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_unchecked_non_finite_diagonal_runs_through_the_factor_as_in_scipy(path, bad):
    """With ``check_finite=False`` SciPy's potrf (OpenBLAS's) stops only at a diagonal entry <= 0: a NaN or an
    infinity on the diagonal runs through the factor, and nothing is raised."""
    a = testing.spd(6, seed=9, batch=(5,))
    a[3, 2, 2] = bad
    with hetlapack.using(**FORCINGS[path]):
        ours = la.cholesky(a, lower=True, check_finite=False)
    theirs = sl.cholesky(a, lower=True, check_finite=False)
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_singular_members_warn_and_return_factors(path):
    g = testing.general(6, seed=6, batch=(4,))
    g[2, :, 4:] = 0
    with hetlapack.using(**FORCINGS[path]), pytest.warns(LinAlgWarning, match="Diagonal number 5 is exactly zero"):
        lu, piv = la.lu_factor(g)
    np.testing.assert_array_equal(piv, sl.lu_factor(g)[1])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("order", ["C", "F"])
def test_stacks_not_modified_and_views_accepted(path, order):
    a = np.array(testing.spd(5, seed=7, batch=(6,)), order=order)
    before = a.copy()
    view = testing.spd(10, seed=8, batch=(6,))[:, ::2, ::2]
    with hetlapack.using(**FORCINGS[path]):
        la.cholesky(a)
        la.lu_factor(a)
        la.qr(a)
        la.qr(a, pivoting=True)
        c = la.cholesky(view, lower=True)
    np.testing.assert_array_equal(a, before)
    for x, ci in zip(view, c):
        assert testing.cholesky_residual(x, ci, True) < 50


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_numpy_stacks(path, mode):
    a = testing.spd(6, seed=9, batch=(2, 3))
    g = testing.general(7, 4, seed=9, batch=(5,))
    with hetlapack.using(**FORCINGS[path]):
        c, u, q = numpy_linalg.cholesky(a), numpy_linalg.cholesky(a, upper=True), numpy_linalg.qr(g, mode=mode)
    np.testing.assert_allclose(c, numpy_functions["cholesky"](a), atol=1e-13)
    np.testing.assert_allclose(u, numpy_functions["cholesky"](a, upper=True), atol=1e-13)
    ref = numpy_functions["qr"](g, mode=mode)
    assert type(q) is type(ref)
    for x, y in zip(*(o if isinstance(o, tuple) else (o,) for o in (q, ref))):
        np.testing.assert_allclose(x, y, atol=1e-13)


def test_empty_batches_like_scipy():
    """A stack of no matrices: SciPy 1.17 refuses it, 1.16 returns empty results; hetlapack does as the SciPy it
    runs with."""
    for func in ("cholesky", "lu_factor"):
        try:
            expected = getattr(sl, func)(np.empty((0, 3, 3)))
        except ValueError as error:
            with pytest.raises(ValueError, match=f"^{re.escape(str(error))}$"):
                getattr(la, func)(np.empty((0, 3, 3)))
        else:
            assert_same(getattr(la, func)(np.empty((0, 3, 3))), expected)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_solves_with_a_zero_on_the_diagonal_give_scipys_infinities_and_nans(path, dtype):
    """LAPACK's getrs and potrs divide by the factor's diagonal unchecked: a zero there gives the infinities and
    NaNs SciPy returns, not an exception."""
    lu = np.array([np.zeros((2, 2)), np.eye(2)], dtype=dtype)
    piv = np.array([[0, 1], [0, 1]], dtype=np.int32)
    b = np.ones(2, dtype=dtype)
    calls = [lambda m: m.lu_solve((lu, piv), b), lambda m: m.lu_solve((lu, piv), b, trans=1),
             lambda m: m.lu_solve((lu, piv), b, trans=2), lambda m: m.cho_solve((lu, False), b),
             lambda m: m.cho_solve((lu, True), b)]
    for call in calls:
        theirs = call(sl)
        with hetlapack.using(**FORCINGS[path]):
            ours = call(la)
        assert not np.isfinite(theirs[0]).any()
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("scale", [1e300, 1e154, 1e-160, 1e-200, 1e-300, 1e-310])
def test_qr_of_stacks_near_overflow_or_underflow_equals_scipy(path, dtype, scale):
    """Each reflector takes LAPACK's scaled norm, and larfg's rescaling of a tiny column, where a plain sum of
    squares would overflow (infinities) or underflow (a column left as it was, R's sign flipped)."""
    g = testing.general(5, 4, dtype=dtype, seed=3, batch=(3,))
    g[1, 1:, 0] = g[1, 0, 0] * 1e-170  # a column whose entries below the diagonal underflow when squared
    g *= scale
    with hetlapack.using(**FORCINGS[path]):
        q, r = la.qr(g)
    q0, r0 = sl.qr(g)
    np.testing.assert_allclose(r, r0, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(q, q0, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_lu_of_stacks_with_subnormal_pivots_divides_as_lapacks_getf2(dtype):
    """Reference LAPACK's getf2 divides by a pivot below the smallest normal number, whose reciprocal would
    overflow. (SciPy's OpenBLAS leaves such a column unscaled, so its ``P L U`` misses ``A`` by ``|A|``; the batched
    path is held to ``P A = L U`` itself.)"""
    a = testing.general(4, dtype=dtype, seed=5, batch=(3,)) * 1e-310
    with hetlapack.using(path="batched"):
        p, l, u = la.lu(a)
    assert np.isfinite(l).all() and np.isfinite(u).all()
    assert np.abs(p @ l @ u - a).max() <= 1e-12 * np.abs(a).max()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("call", [lambda m, a: m.lu_factor(a, overwrite_a=1.5),
                                  lambda m, a: m.qr(a, overwrite_a="1"),
                                  lambda m, a: m.qr(a, pivoting=True, overwrite_a="1")])
def test_a_bad_flag_with_non_finite_values_raises_scipys_value_error(path, call):
    """SciPy checks values before f2py reads a flag."""
    a = testing.general(3, seed=1, batch=(2,))
    a[0, 0, 0] = np.nan
    with pytest.raises(ValueError) as theirs:
        call(sl, a)
    with hetlapack.using(**FORCINGS[path]), pytest.raises(ValueError) as ours:
        call(la, a)
    assert str(ours.value) == str(theirs.value)
    finite = np.nan_to_num(a)
    try:
        call(sl, finite)
    except TypeError as error:  # f2py's refusal of the flag (SciPy 1.18's qr reads it as a truth value)
        with hetlapack.using(**FORCINGS[path]), pytest.raises(TypeError, match=re.escape(str(error))):
            call(la, finite)
    else:
        with hetlapack.using(**FORCINGS[path]):
            call(la, finite)


def test_a_process_forked_after_the_batched_kernels_ran_still_factors_stacks_and_lu():
    """numba terminates a child (multiprocessing's default start on Linux) that starts kernels its parent ran on
    GNU OpenMP: there, dispatch takes SciPy's own call for stacks and ``lu`` instead, and says why."""
    import os

    stack, a = testing.spd(8, batch=(1000,), seed=3), testing.general(40, seed=4)
    expected_stack, expected_lu = sl.cholesky(stack), sl.lu(a)
    assert hetlapack.explain("cholesky", stack).path == "batched"
    np.testing.assert_allclose(la.cholesky(stack), expected_stack, atol=1e-12)
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            got_stack = la.cholesky(stack)
            with hetlapack.using(path="hybrid", tile=16):
                got_lu = la.lu(a)
            ok = np.allclose(got_stack, expected_stack, atol=1e-12) and all(
                np.allclose(x, y, atol=1e-12) for x, y in zip(got_lu, expected_lu))
        finally:
            os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0


@pytest.mark.parametrize("factor_dtype", [np.float64, np.float32])
@pytest.mark.parametrize("func", ["cho_solve", "lu_solve"])
def test_solves_never_copy_a_broadcast_factor_stack_whole(func, factor_dtype):
    """Factors broadcast over the right-hand sides' leading axes were copied to the full broadcast shape (here
    61 MB for a 0.6 MB factor stack and a 3.8 MB result), also where the factors' dtype is cast to b's: the solves
    gather them a piece at a time."""
    import tracemalloc

    a = testing.spd(16, batch=(1, 300), seed=8).astype(factor_dtype)
    b = testing.general(16, 1, batch=(100, 300), seed=9)
    factors = sl.cho_factor(a[0]) if func == "cho_solve" else sl.lu_factor(a[0])
    factors = (factors[0][None], factors[1] if func == "cho_solve" else factors[1][None])
    solve = getattr(la, func)
    solve(factors, b[:2])
    tracemalloc.start()
    try:
        x = solve(factors, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * x.nbytes
    expected = getattr(sl, func)((factors[0][0], factors[1] if func == "cho_solve" else factors[1][0]), b)
    np.testing.assert_allclose(x, expected, atol=1e-10 if factor_dtype == np.float64 else 1e-3)
