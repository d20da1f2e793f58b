"""hetlapack against SciPy and NumPy on drawn inputs: a standing differential test.

Hypothesis draws a function and its flags, a dtype, a shape (single matrices and stacks), a kind of input
(well-conditioned, singular or not positive definite, non-finite, near either end of the floating-point range), a
memory layout, a path, and whether to call hetlapack's function or, after ``hetlapack.compat.install()``, SciPy's
or NumPy's own name. Both libraries get the same arguments and must agree on the exception (type and text), the
warnings (category and text), the result's types, dtypes, shapes and memory order, its values (permutations
exactly, the rest to a scaled tolerance) and, unless an overwrite flag allows it, leave the inputs as they were.

CI runs a fixed (derandomized) set of examples per family. For a long random search, name how many:
``HETLAPACK_DIFFERENTIAL_EXAMPLES=5000 pytest tests/test_differential.py``.
"""

import contextlib
import dataclasses
import operator
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import HealthCheck, given, note, reject, settings
from hypothesis import strategies as st

import hetlapack
import hetlapack.linalg as hl
from hetlapack import batched, compat
from hetlapack.compat import numpy_linalg as hn
from hetlapack.contract import scipy_rules
from hetlapack.contract.arrays import scipy_lapack_dtype

_SEARCH = os.environ.get("HETLAPACK_DIFFERENTIAL_EXAMPLES")
DIFFERENTIAL = settings(max_examples=int(_SEARCH or 300), derandomize=_SEARCH is None, database=None, deadline=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

MAIN_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
ODD_DTYPES = [np.int64, np.int32, np.uint8, np.bool_, np.float16, np.longdouble, np.clongdouble]
# scale factors that put the entries near either end of each precision's range without over- or underflowing
EXTREME_SCALES = {"huge": {4: 1e30, 8: 1e300}, "tiny": {4: 1e-30, 8: 1e-300}}
FORCED_PATHS = {2: [None, "host", "hybrid", "hybrid-emulated"], 3: [None, "host", "batched"]}
PATH_OPTIONS = {None: {}, "host": {"path": "host"}, "batched": {"path": "batched"},
                "hybrid": {"path": "hybrid", "tile": 8},
                "hybrid-emulated": {"path": "hybrid", "tile": 8, "devices": ["cpu", "emulated:0", "emulated:1"]}}
FLAG = st.sampled_from([False, True, 0, 1, np.True_, np.False_])
CHECK_FINITE = st.sampled_from([True, True, False])


@dataclasses.dataclass
class Case:
    """One call: ``make_args`` builds fresh positional arguments for each library, ``kwargs`` are shared."""

    name: str
    ours: Callable
    theirs: Callable
    make_args: Callable[[], tuple]
    kwargs: dict[str, Any]
    may_overwrite: bool
    exact: tuple[int, ...]   # result positions compared exactly (permutations; all of a LAPACK loop's results)
    kappa: float             # condition number that scales the tolerance on values
    same_order: bool = True  # whether results are laid out in memory as SciPy's (lists of matrices promise values)


def _real_kind(dtype: np.dtype) -> np.dtype:
    return np.dtype(dtype).type(0).real.dtype


def _values(rng: np.random.Generator, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Random entries suited to ``dtype``, with no two equal in magnitude where it can be helped: LU's pivots
    between tied rows depend on the rounding of the elimination, which LAPACK's contract leaves open. Permutation
    matrices for bool, integers over a wide range for integer types, Gaussian otherwise."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        *batch, m, n = shape
        rows = rng.permuted(np.broadcast_to(np.arange(m), (*batch, m)), axis=-1)
        return np.eye(m, n)[rows]
    if kind in "iu":
        low, high = (0, 256) if kind == "u" else (-1000, 1001)
        return rng.integers(low, high, size=shape).astype(float)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if kind == "c" else x


def _matrix(rng: np.random.Generator, kind: str, shape: tuple, dtype: np.dtype, hermitian: bool) -> np.ndarray:
    """Input of the drawn kind, as float64/complex128 before the cast to ``dtype``."""
    *batch, m, n = shape
    if hermitian:
        if np.dtype(dtype).kind in "bu":
            a = np.broadcast_to(np.eye(n) * 3, shape).copy()
        else:
            b = _values(rng, shape, dtype)
            a = b @ np.conj(np.swapaxes(b, -1, -2)) + n * np.eye(n)
    else:
        a = _values(rng, shape, dtype)
    if kind == "deficient" and min(m, n):
        k = (min(m, n) - 1) // 2
        if hermitian:
            a[..., k, k] = -(10.0 * n + 1)
        else:
            a[..., :, k] = 0
    if kind in ("nan", "inf") and min(m, n):
        a = a.astype(complex)
        a[..., m // 2, n // 2] = np.nan if kind == "nan" else np.inf
    if kind in EXTREME_SCALES:
        a = a * EXTREME_SCALES[kind][_real_kind(dtype).itemsize]
    if np.dtype(dtype).kind != "c":
        a = a.real
    with np.errstate(invalid="ignore", over="ignore"):
        return a.astype(dtype)


def _laid_out(a: np.ndarray, layout: str):
    """``a`` in the drawn memory layout: C or Fortran order, a strided or reversed view, read-only, nested lists,
    or (stacks) matrices in Fortran order with the batch axis outermost. Always a new array: a call may overwrite it."""
    a = a.copy()
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided":
        big = np.zeros(a.shape[:-2] + (2 * a.shape[-2], 3 * a.shape[-1]), dtype=a.dtype)
        view = big[..., 1::2, ::3]
        view[...] = a
        return view
    if layout == "reversed":
        return np.ascontiguousarray(a[..., ::-1, ::-1])[..., ::-1, ::-1]
    if layout == "read-only":
        a.flags.writeable = False
        return a
    if layout == "list":
        return a.tolist()
    if layout == "matrices-in-F":
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2)
    return np.ascontiguousarray(a)


@st.composite
def matrices(draw, square: bool, hermitian: bool, kinds: list[str], batches=((), (), (), (1,), (3,), (2, 2), (0,)),
             lists: bool = True):
    """(builder of a fresh input in the drawn layout, the input as an array, its kind) for a drawn dtype, kind,
    shape and layout."""
    dtype = draw(st.sampled_from(MAIN_DTYPES * 3 + ODD_DTYPES))
    kind = draw(st.sampled_from(kinds)) if dtype in MAIN_DTYPES else "plain"
    batch = draw(st.sampled_from(batches))
    m = draw(st.sampled_from([0, 1, 2, 3, 5, 8, 9, 13, 17, 24, 31]))
    n = m if square else draw(st.sampled_from([0, 1, 2, 3, 5, 8, 9, 13, 17, 24, 31]))
    layouts = ["C", "F", "strided", "reversed", "read-only"] + (["list"] if lists else []) + (
        ["matrices-in-F"] if batch else [])
    layout = draw(st.sampled_from(layouts))
    seed = draw(st.integers(0, 2**32 - 1))
    a = _matrix(np.random.default_rng(seed), kind, (*batch, m, n), dtype, hermitian)
    return (lambda: _laid_out(a, layout)), a, kind


def _kappa(a: np.ndarray, kind: str) -> float:
    """The largest 2-norm condition number in the stack (1 for inputs whose values are not compared)."""
    if kind not in ("plain", "well", "huge", "tiny") or a.size == 0:
        return 1.0
    with np.errstate(all="ignore"):
        kappa = np.linalg.cond(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
    return float(np.max(kappa)) if np.all(np.isfinite(kappa)) else 1.0


def _check_finite(draw, kind: str) -> bool:
    """Non-finite input is drawn only with checking on: without it, SciPy's results are undefined."""
    return True if kind in ("nan", "inf") else draw(CHECK_FINITE)


@st.composite
def cholesky_cases(draw):
    name = draw(st.sampled_from(["cholesky", "cho_factor"]))
    make, a, kind = draw(matrices(square=True, hermitian=True, kinds=["well", "deficient", "nan", "huge", "tiny"]))
    kwargs = {"lower": draw(FLAG), "overwrite_a": draw(FLAG), "check_finite": _check_finite(draw, kind)}
    return Case(name, getattr(hl, name), getattr(sl, name), lambda: (make(),), kwargs,
                bool(kwargs["overwrite_a"]), (), _kappa(a, kind))


def _scipy_lu(a, **kwargs):
    """SciPy's ``lu``, or where the installed SciPy gets the factors wrong (a 2-D matrix it factors in place in Fortran
    order, SciPy 1.18.1: ``scipy_rules.lu_in_place_wrong``) what hetlapack returns instead: the factors SciPy computes
    from a C-ordered copy, in the layouts of SciPy's own call."""
    dtype = scipy_lapack_dtype(a.dtype) if isinstance(a, np.ndarray) and a.ndim == 2 else None
    overwrite = kwargs["overwrite_a"]
    if (dtype is None or kwargs["permute_l"] or type(overwrite) not in (bool, int, np.bool_)
            or not scipy_rules.fortran_in_place(a, dtype, overwrite) or not scipy_rules.lu_in_place_wrong()):
        return sl.lu(a, **kwargs)
    with warnings.catch_warnings():  # SciPy's warnings are its own call's, below
        warnings.simplefilter("ignore")
        right = sl.lu(np.array(a, order="C"), **kwargs)
    theirs = sl.lu(a, **kwargs)
    return tuple(np.asfortranarray(x) if t.flags.f_contiguous and not t.flags.c_contiguous else np.ascontiguousarray(x)
                 for x, t in zip(right, theirs, strict=True))


@st.composite
def lu_cases(draw):
    name = draw(st.sampled_from(["lu_factor", "lu"]))
    make, a, kind = draw(matrices(square=draw(st.booleans()), hermitian=False,
                                  kinds=["well", "deficient", "nan", "inf", "huge", "tiny"]))
    kwargs = {"overwrite_a": draw(FLAG), "check_finite": _check_finite(draw, kind)}
    exact = (1,)
    if name == "lu":
        kwargs.update(permute_l=draw(FLAG), p_indices=draw(FLAG))
        exact = () if kwargs["permute_l"] else (0,)
    return Case(name, getattr(hl, name), _scipy_lu if name == "lu" else sl.lu_factor, lambda: (make(),), kwargs,
                bool(kwargs["overwrite_a"]), exact, _kappa(a, kind))


@st.composite
def qr_cases(draw):
    make, a, kind = draw(matrices(square=False, hermitian=False, kinds=["well", "deficient", "nan", "huge", "tiny"]))
    kwargs = {"mode": draw(st.sampled_from(["full", "r", "economic", "raw"])), "pivoting": draw(st.booleans()),
              "overwrite_a": draw(FLAG), "check_finite": _check_finite(draw, kind)}
    if draw(st.integers(0, 5)) == 0:
        kwargs["lwork"] = draw(st.sampled_from([-1, 1, 64 * max(a.shape[-1], 1)]))
    exact = (0, 1, 2) if kwargs["pivoting"] else ()  # LAPACK's geqp3 and orgqr on every path: bit for bit
    return Case("qr", hl.qr, sl.qr, lambda: (make(),), kwargs, bool(kwargs["overwrite_a"]), exact, _kappa(a, kind))


def _broadcast_over(batch: tuple, rhs_shape: tuple) -> bool:
    """Whether SciPy's batch loop reuses one right-hand side for several members: ``b`` has one core dimension if
    it has one dimension, else two, and its batch broadcasts against the factors'."""
    rhs_batch = rhs_shape[:-1] if len(rhs_shape) == 1 else rhs_shape[:-2]
    try:
        return np.prod(rhs_batch) < np.prod(np.broadcast_shapes(batch, rhs_batch))
    except ValueError:
        return False


@st.composite
def solve_cases(draw):
    """cho_solve / lu_solve with SciPy's factors of a drawn matrix and a drawn right-hand side (broadcast too)."""
    name = draw(st.sampled_from(["cho_solve", "lu_solve"]))
    # SciPy factors no zero-size batch, so there is nothing to solve with
    _, a, kind = draw(matrices(square=True, hermitian=name == "cho_solve", kinds=["well"],
                               batches=((), (), (1,), (3,), (2, 2))))
    a = a.astype(np.result_type(a.dtype, np.float32))
    *batch, n, _ = a.shape
    rhs_batch = draw(st.sampled_from([(), tuple(batch), (1,) * len(batch), (2, *batch)]))
    rhs_shape = draw(st.sampled_from([(*rhs_batch, n), (*rhs_batch, n, 1), (*rhs_batch, n, 3), (n + 1,)]))
    rhs = _matrix(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), "plain", (*rhs_shape, 1),
                  draw(st.sampled_from(MAIN_DTYPES + [np.int64])), hermitian=False)[..., 0]
    if len(rhs_shape) >= 2:
        rhs = _laid_out(rhs, draw(st.sampled_from(["C", "F", "strided", "read-only"])))
    kwargs = {"overwrite_b": draw(FLAG), "check_finite": draw(CHECK_FINITE)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "cho_solve":  # for a stack, cho_factor's lower is an array of flags
            factors = sl.cho_factor(a, lower=draw(st.booleans()))
        else:
            factors = sl.lu_factor(a)
            kwargs["trans"] = draw(st.sampled_from([0, 1, 2]))

    def make():
        return tuple(np.copy(f) if isinstance(f, np.ndarray) else f for f in factors), np.copy(rhs)

    def theirs(*args, **kwargs):
        """SciPy's solve; where ``b`` is broadcast over the stack, without an overwrite_b that f2py takes, with which
        SciPy solves every member in the same rows of ``b`` and returns wrong solutions (hetlapack does not overwrite
        there)."""
        if _broadcast_over(tuple(batch), rhs_shape) and _f2py_takes(kwargs["overwrite_b"]):
            kwargs["overwrite_b"] = False
        return getattr(sl, name)(*args, **kwargs)

    return Case(name, getattr(hl, name), theirs, make, kwargs, bool(kwargs["overwrite_b"]), (), _kappa(a, kind))


@st.composite
def numpy_cases(draw):
    name = draw(st.sampled_from(["cholesky", "qr"]))
    hermitian = name == "cholesky"
    make, a, kind = draw(matrices(square=hermitian, hermitian=hermitian, kinds=["well", "deficient", "nan"]))
    if name == "cholesky":
        kwargs = draw(st.sampled_from([{}, {"upper": False}, {"upper": True}]))
    else:
        kwargs = draw(st.sampled_from([{}, {"mode": "reduced"}, {"mode": "complete"}, {"mode": "r"},
                                       {"mode": "raw"}]))
    return Case(f"numpy.linalg.{name}", getattr(hn, name), getattr(np.linalg, name), lambda: (make(),), kwargs,
                False, (), _kappa(a, kind))


def _one_by_one(scipy_function: Callable) -> Callable:
    """What :mod:`hetlapack.batched` promises for a list: SciPy's result for each matrix, and SciPy's error or
    warning for a matrix prefixed with its index."""
    def per_matrix(*per_matrix_args, **kwargs):
        results = []
        for index, args in enumerate(zip(*per_matrix_args)):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    results.append(scipy_function(*args, **kwargs))
                except Exception as exc:  # noqa: BLE001 - re-raised with its index, as hetlapack names it
                    raise type(exc)(f"matrix {index}: {exc}") from None
            for warning in caught:
                warnings.warn(f"matrix {index}: {warning.message}", warning.category, stacklevel=2)
        return results
    return per_matrix


@st.composite
def vbatched_cases(draw):
    """hetlapack.batched's functions on lists of matrices of different shapes and dtypes, at most one of them bad
    (which of several bad matrices a list names first is hetlapack's choice: it validates all before factoring).
    Each matrix is an array: nested lists of an empty matrix would be 1-D, which SciPy reads its own way and
    hetlapack.batched, taking 2-D matrices only, rejects."""
    name = draw(st.sampled_from(["cholesky", "lu_factor", "qr", "cho_solve", "lu_solve"]))
    solve = name.endswith("solve")
    hermitian = name.startswith("cho")
    count = draw(st.integers(1, 5))
    bad = draw(st.integers(0, count)) if not solve else count
    kinds = ["deficient", "nan"] if hermitian else ["deficient", "nan", "inf"]
    drawn = [draw(matrices(square=hermitian or solve or draw(st.booleans()), hermitian=hermitian,
                           kinds=kinds if index == bad else ["well", "huge", "tiny"], batches=((),), lists=False))
             for index in range(count)]
    kwargs = {"check_finite": True if bad < count else draw(CHECK_FINITE)}
    if name in ("cholesky", "cho_solve"):
        kwargs["lower"] = draw(st.booleans())
    if name == "qr":
        kwargs["mode"] = draw(st.sampled_from(["full", "r", "economic", "raw"]))
    if name == "lu_solve":
        kwargs["trans"] = draw(st.sampled_from([0, 1, 2]))
    kappa = max(_kappa(a, kind) for _, a, kind in drawn)
    if not solve:
        return Case(f"batched.{name}", getattr(batched, name), _one_by_one(getattr(sl, name)),
                    lambda: ([make() for make, _, _ in drawn],), kwargs, False, (1,) if name == "lu_factor" else (),
                    kappa, same_order=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        factors = [sl.cho_factor(a, lower=kwargs["lower"])[0] if hermitian else sl.lu_factor(a)
                   for _, a, _ in drawn]
    rhs = []
    for index, (_, a, _) in enumerate(drawn):
        columns = draw(st.sampled_from([None, 1, 3]))  # None: a vector
        b = _matrix(np.random.default_rng(index), "plain", (a.shape[0], columns or 1),
                    draw(st.sampled_from(MAIN_DTYPES)), hermitian=False)
        rhs.append(b[:, 0] if columns is None else b)

    def theirs(factors, bs, lower=False, trans=0, check_finite=True):
        if hermitian:
            return _one_by_one(lambda c, b: sl.cho_solve((c, lower), b, check_finite=check_finite))(factors, bs)
        return _one_by_one(lambda f, b: sl.lu_solve(f, b, trans=trans, check_finite=check_finite))(factors, bs)

    return Case(f"batched.{name}", getattr(batched, name), theirs,
                lambda: ([np.copy(f) if hermitian else (np.copy(f[0]), np.copy(f[1])) for f in factors],
                         [np.copy(b) for b in rhs]), kwargs, False, (), kappa, same_order=False)


def _f2py_takes(flag) -> bool:
    """Whether f2py reads ``flag`` as an integer (``np.True_`` too on NumPy releases that only warn about it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            operator.index(flag)
        except TypeError:
            return False
    return True


def _call(function: Callable, args: tuple, kwargs: dict):
    """(result, exception, warnings as (category, text)) of one call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Older NumPy releases warn where f2py reads np.True_ or a 1-element array as a flag (later ones raise or stay
        # silent): how often depends on the wrapper calls a route makes, not on what the call means
        for deprecated in ("In future, it will be an error for 'np.bool", "Conversion of an array with ndim > 0"):
            warnings.filterwarnings("ignore", deprecated, DeprecationWarning)
        try:
            result, error = function(*args, **kwargs), None
        except Exception as exc:  # noqa: BLE001 - the exception is what is compared
            result, error = None, exc
    return result, error, [(w.category, str(w.message)) for w in caught]


def _arrays(obj) -> list[np.ndarray]:
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [array for item in obj for array in _arrays(item)]
    return []


def _assert_values_close(ours: np.ndarray, theirs: np.ndarray, case: Case) -> None:
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_array_equal(np.isinf(ours), np.isinf(theirs))
    finite = np.isfinite(theirs)
    if not finite.any():
        return
    scale = float(np.max(np.abs(theirs[finite])))
    eps = np.finfo(theirs.dtype).eps
    tolerance = 100 * max(theirs.shape[-2:], default=1) * eps * case.kappa * scale
    error = float(np.max(np.abs(ours[finite].astype(complex) - theirs[finite].astype(complex))))
    assert error <= tolerance, f"values differ by {error:.3g} (tolerance {tolerance:.3g})"


def _assert_results_equal(ours, theirs, case: Case, where: tuple[int, ...] = ()) -> None:
    """Equal results; ``where`` indexes into nested tuples and lists, whose last index says what a result is."""
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for index, (mine, reference) in enumerate(zip(ours, theirs)):
            _assert_results_equal(mine, reference, case, (*where, index))
        return
    if not isinstance(theirs, np.ndarray):
        assert ours == theirs
        return
    assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
    if theirs.size > 1 and case.same_order:
        assert (ours.flags.c_contiguous, ours.flags.f_contiguous) == (
            theirs.flags.c_contiguous, theirs.flags.f_contiguous)
    if where[-1:] and where[-1] in case.exact or theirs.dtype.kind not in "fc":
        np.testing.assert_array_equal(ours, theirs)
    elif theirs.size:
        _assert_values_close(ours, theirs, case)


def _describe(args) -> str:
    if isinstance(args, np.ndarray):
        return f"array({args.shape}, {args.dtype}, strides={args.strides}, writeable={args.flags.writeable})"
    if isinstance(args, (tuple, list)) and not all(np.isscalar(x) for x in args):
        return f"{type(args).__name__}[{', '.join(_describe(x) for x in args)}]"
    return repr(args)


def _public_name(case: Case) -> str | None:
    """The SciPy or NumPy function that ``hetlapack.compat.install()`` replaces with ``case.ours``, if any."""
    if case.name.startswith("batched."):
        return None
    return case.name if case.name.startswith("numpy.") else f"scipy.linalg.{case.name}"


def _through_install(public_name: str) -> Callable:
    """A call of SciPy's or NumPy's public function as user code makes it, looked up when called (inside
    ``hetlapack.compat.patched()``: hetlapack's function)."""
    module, _, attr = public_name.rpartition(".")

    def call(*args, **kwargs):
        function = getattr(sys.modules[module], attr)
        assert function.__module__.startswith("hetlapack."), f"{public_name} is not patched"
        return function(*args, **kwargs)
    return call


def _assert_same_behaviour(case: Case, path: str | None, installed: bool) -> None:
    """``installed``: call SciPy's or NumPy's public function after ``hetlapack.compat.install()`` instead of
    hetlapack's own."""
    entry = f"{_public_name(case)} after install()" if installed else case.name
    note(f"{entry}({_describe(case.make_args())}, **{case.kwargs}) on path {path}")
    their_args, our_args = case.make_args(), case.make_args()
    before = [array.copy() for array in _arrays(our_args)]
    theirs, their_error, their_warnings = _call(case.theirs, their_args, case.kwargs)
    ours_function = _through_install(_public_name(case)) if installed else case.ours
    with hetlapack.using(**PATH_OPTIONS[path]), compat.patched() if installed else contextlib.nullcontext():
        ours, our_error, our_warnings = _call(ours_function, our_args, case.kwargs)
    if isinstance(our_error, ValueError) and "cannot be honoured" in str(our_error):
        reject()
    assert (type(our_error), str(our_error)) == (type(their_error), str(their_error))
    if their_error is None or not case.name.startswith("batched"):
        # a list that fails: hetlapack.batched reads every matrix before it factors any (which bad matrix it names
        # is its choice), and warns for every matrix's dtype, where a loop of SciPy's calls stops at the failure
        assert our_warnings == their_warnings
    if their_error is None:
        _assert_results_equal(ours, theirs, case)
    if not case.may_overwrite:
        for old, new in zip(before, _arrays(our_args)):
            np.testing.assert_array_equal(new, old)


def _paths(draw, case: Case) -> str | None:
    """A path to force (None: dispatch decides); NumPy's functions and lists of matrices are not forced."""
    if case.name.startswith(("numpy", "batched")):
        return None
    ndim = np.ndim(case.make_args()[0 if not case.name.endswith("solve") else 1])
    return draw(st.sampled_from(FORCED_PATHS[2 if ndim <= 2 else 3]))


@pytest.mark.parametrize("cases", [cholesky_cases, lu_cases, qr_cases, solve_cases, numpy_cases, vbatched_cases],
                         ids=["cholesky", "lu", "qr", "solve", "numpy", "vbatched"])
@DIFFERENTIAL
@given(data=st.data())
def test_same_behaviour_as_scipy_and_numpy(cases, data):
    case = data.draw(cases())
    installed = _public_name(case) is not None and data.draw(st.booleans(), label="through install()")
    _assert_same_behaviour(case, _paths(data.draw, case), installed)
