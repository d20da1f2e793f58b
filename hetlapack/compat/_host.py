"""The host path: SciPy's own call, handed a Fortran-ordered copy where SciPy would make that copy the slow way, and
a small Cholesky, QR or LU factorization by the call SciPy's function makes after its Python checks.

SciPy's LAPACK wrappers (f2py) copy a C-ordered matrix into Fortran order before LAPACK sees it, element by
element: on a matrix larger than the cache every element of one of the two arrays is a cache miss, and the copy
costs a third of a Cholesky of order 4000 (issue 36). A copy made a cache tile at a time gives LAPACK the same
matrix, so SciPy's call on it, with ``overwrite_a=True``, returns SciPy's result to the bit, in the same layout.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from scipy.linalg.lapack import get_lapack_funcs

from ..blas_threads import one_thread_per_call
from ..contract.arrays import (copies_by_tiles, fortran_copy, identical, numpy_linalg_dtype, plain_matrix,
                               scipy_lapack_dtype, scipy_qr_forms_q, tile_order, working_copy, zero_other_triangle)
from ..contract.finite import FiniteCheck, all_finite
from ..contract.originals import scipy_functions as _scipy
from ..contract.originals import scipy_matrix_functions as _scipy_matrix
from ..contract.scipy_rules import (COMPILED_BATCH_LOOPS, QR_LWORK_DEFAULT, TRUTH_FLAG_TYPES, cho_factor_flags,
                                    fortran_copy_unseen, fortran_in_place, lu_in_place_wrong, scipy_container,
                                    scipy_returns)
from ..devices import lapack_pointers
from ..perf import model
from ..perf.rates import HOST_THREADS_ORDERS


def _read_as_it_lies(a: np.ndarray) -> bool:
    """Whether SciPy hands the plain matrix ``a`` to LAPACK without a converting copy of its own: native byte order
    and aligned."""
    return a.dtype.isnative and a.flags.aligned


#: The one flag type the direct calls take (``np.True_`` and ``1`` go to SciPy's function, which reads them its way).
_BOOL = frozenset({bool})


def _takes_direct_call(a, overwrite_a, check_finite, *flags) -> bool:
    """Whether SciPy's function may be bypassed for ``a``: a non-empty :func:`plain_matrix` it reads as it lies
    (:func:`_read_as_it_lies`), the default ``overwrite_a=False``, plain ``bool`` flags, and with ``check_finite``
    only finite entries (else SciPy's call, for its error; a caller whose copy reads them passes False). Each
    ``host_*`` call adds what its routine needs."""
    return (plain_matrix(a) and a.size > 0 and _read_as_it_lies(a) and overwrite_a is False
            and _BOOL.issuperset(map(type, flags)) and not (check_finite and not all_finite(a)))


def copy_reading(a: np.ndarray, check_finite, triangle: bool | None = None,
                  dtype: np.dtype | None = None) -> np.ndarray | None:
    """:func:`fortran_copy` of ``a`` (``dtype`` and ``triangle`` as it takes them), ``check_finite`` read in the same
    pass; None where ``a`` holds a value that is not finite (SciPy's own call then raises its error)."""
    check = FiniteCheck() if check_finite else None
    copy = fortran_copy(a, dtype, triangle=triangle, read=None if check is None else check.read)
    return copy if check is None or check.finite else None


def _copies_slowly(a: np.ndarray, overwrite_a) -> bool:
    """Whether SciPy would copy the plain matrix ``a`` into Fortran order itself, element by element, where tiles
    are worth it (:func:`copies_by_tiles`, asked first: it rules out every matrix the cache holds): a matrix
    :func:`_read_as_it_lies`, with a plain ``overwrite_a``."""
    return (copies_by_tiles(a) and _read_as_it_lies(a) and type(overwrite_a) in (bool, int)
            and overwrite_a in (0, 1))


def scipy_call(name: str, a, overwrite_a, check_finite, **options):
    """SciPy's own ``name`` on ``a`` with these flags; on a Fortran-ordered copy made by :func:`fortran_copy` where
    SciPy would copy ``a`` slowly and that copy is all it would change (``fortran_copy_unseen``): the same
    result, layout, errors and warnings. Non-finite entries (``check_finite``) go to SciPy's call, for its error;
    anything but a plain matrix (:func:`plain_matrix`) to SciPy's public function, batch decorator included."""
    if not plain_matrix(a):
        return _scipy[name](a, overwrite_a=overwrite_a, check_finite=check_finite, **options)
    if _copies_slowly(a, overwrite_a) and fortran_copy_unseen(name, **options) and (
            (copy := copy_reading(a, check_finite)) is not None):
        return _scipy_matrix[name](copy, overwrite_a=True, check_finite=False, **options)
    return _scipy_matrix[name](a, overwrite_a=overwrite_a, check_finite=check_finite, **options)


@functools.cache
def _potrf(char: str):
    """SciPy's wrapper of LAPACK's ``potrf`` for a dtype."""
    return get_lapack_funcs("potrf", dtype=np.dtype(char))


def _compiled_loop(name: str, agrees: Callable[[Callable], bool],
                   module: str = "scipy.linalg._batched_linalg") -> Callable | None:
    """SciPy's compiled ``module.name`` (by default 1.18's loops), what its public function calls after its Python
    checks, where the installed SciPy has it and it ``agrees`` with SciPy's public function on a probe; else None.
    It is private to SciPy, so it is looked up and tried, never assumed: any other answer than SciPy's, an error
    included, leaves SciPy's own call."""
    spec = importlib.util.find_spec(module)
    compiled = getattr(importlib.import_module(spec.name), name, None) if spec is not None else None
    try:
        return compiled if compiled is not None and agrees(compiled) else None
    except Exception:  # noqa: BLE001 - another signature or behaviour: SciPy's own call
        return None


#: A probe for the compiled loops: wide, so that each mode's shapes show, and positive definite in its first two
#: columns.
_PROBE = np.array([[4.0, 2.0, 1.0], [2.0, 5.0, 3.0]])


@functools.cache
def _compiled_cholesky() -> Callable | None:
    """``_cholesky(a, lower, overwrite_a, clean) -> (factors, failures)`` (:func:`_compiled_loop`)."""
    def agrees(compiled):
        factor, failures = compiled(_PROBE[:, :2].copy(), False, False, True)
        return not failures and identical((factor,), (_scipy["cholesky"](_PROBE[:, :2]),))
    return _compiled_loop("_cholesky", agrees)


#: SciPy 1.18's mode numbers for its compiled QR (``scipy/linalg/_decomp_qr.py``, "keep in sync with the C side").
_QR_MODES = {"full": 1, "r": 11, "economic": 31}


@functools.cache
def _compiled_qr() -> Callable | None:
    """``_qr(a, overwrite_a, mode, pivoting) -> (q, r, tau, pivots, failures)``, tried in every mode
    (:func:`_compiled_loop`)."""
    def agrees(compiled):
        for mode, number in _QR_MODES.items():
            q, r, _, pivots, failures = compiled(_PROBE.copy(), False, number, True)
            if failures or not identical((q, r, pivots)[mode == "r":], _scipy["qr"](_PROBE, mode=mode, pivoting=True)):
                return False
        return True
    return _compiled_loop("_qr", agrees)


def _lu_by_dispatcher(dispatcher: Callable) -> Callable:
    """SciPy 1.17's ``lu`` of one matrix below its Python checks, with 1.18's signature: its Cython
    ``lu_dispatcher`` on a C-ordered copy, which becomes the factor of the larger shape."""
    def lu(a, permute_l, overwrite_a):
        work = a.copy(order="C")
        m, n = a.shape
        rows, square = np.empty(m, dtype=np.int32), np.zeros((min(m, n),) * 2, dtype=a.dtype)
        dispatcher(work, square, rows, permute_l)
        return (rows, work, square) if m > n else (rows, square, work)
    return lu


@functools.cache
def _compiled_lu() -> Callable | None:
    """``lu(a, permute_l, overwrite_a) -> (row indices, l, u)``, ``(pl, u)`` in its last two with ``permute_l``:
    SciPy 1.18's ``_lu``, or before it SciPy's ``lu_dispatcher`` (:func:`_lu_by_dispatcher`); tried on a probe as
    :func:`_compiled_loop` says, with and without ``permute_l``."""
    def agrees(compiled):
        return all(identical(compiled(_PROBE.T.copy(), permute, False)[permute:],
                         _scipy["lu"](_PROBE.T, permute_l=permute, p_indices=True)) for permute in (False, True))
    compiled = _compiled_loop("_lu", agrees)
    if compiled is None:
        dispatcher = _compiled_loop("lu_dispatcher", lambda found: agrees(_lu_by_dispatcher(found)),
                                    "scipy.linalg._decomp_lu_cython")
        compiled = None if dispatcher is None else _lu_by_dispatcher(dispatcher)
    return compiled


def _cholesky_on_host(name: str, a, lower, overwrite_a, check_finite):
    """SciPy's ``cholesky`` or ``cho_factor`` (``name``) of ``a`` on the host path. A contiguous square matrix that
    :func:`_takes_direct_call`, the call users make, is factored by the call SciPy's function makes after its Python
    checks, which are 5-10 us, a sixth of the call at order 100. Before 1.18 that is LAPACK's ``potrf`` through
    SciPy's f2py wrapper on a Fortran-ordered copy, or where ``hetlapack calibrate`` timed it faster LAPACK's
    right-looking variant (``model.host_potrf_block``) on the same copy. From a C-ordered matrix of more than two
    tiles each way the copy is made by tiles, ``check_finite`` read and (``cholesky``) the other triangle zeroed in
    the same pass (:func:`copy_reading`; LAPACK reads one triangle, so zeros there change no bit); else it is made
    as f2py makes it, its other triangle zeroed by f2py or, past one tile (where f2py's loop misses the cache) and
    after the right-looking variant, by :func:`zero_other_triangle`. Since 1.18, SciPy's compiled loop
    (:func:`_compiled_cholesky`), whose whole call the variant's did not beat (``model.host_potrf_block``). The
    layout and flags are SciPy's, and so are the bits but for the right-looking variant's (its rounding differs, as
    the tile path's does). Anything else is SciPy's own call, for its result, errors and warnings, and so is a
    matrix LAPACK cannot factor."""
    compiled = _compiled_cholesky()
    by_tiles = compiled is None and plain_matrix(a) and copies_by_tiles(a)
    if ((compiled is None and COMPILED_BATCH_LOOPS)
            or not _takes_direct_call(a, overwrite_a, check_finite and not by_tiles, lower)
            or a.shape[0] != a.shape[1] or not (a.flags.c_contiguous or a.flags.f_contiguous)):
        return scipy_call(name, a, overwrite_a, check_finite, lower=lower)
    clean = name == "cholesky"  # cho_factor leaves the other triangle to LAPACK (1.18 zeroes it in its own copy)
    if compiled is not None:
        c, failures = compiled(a, lower, False, clean)
    else:
        uplo = "L" if lower is True else "U"  # the triangle LAPACK factors
        block = model.host_potrf_block(a.dtype, a.shape[0], uplo) if plain_matrix(a) else None
        by_columns = clean and not by_tiles and (block is not None or a.shape[0] > tile_order())
        if block is None and not (by_tiles or by_columns):  # f2py's copy, as SciPy's call has it make
            c, failures = _potrf(a.dtype.char)(a, lower=lower, clean=clean, overwrite_a=False)
        else:
            work = copy_reading(a, check_finite, lower if clean else None) if by_tiles else \
                working_copy(a, a, a.dtype, False)
            if work is None:
                return scipy_call(name, a, overwrite_a, check_finite, lower=lower)
            if block is not None:
                c, failures = work, lapack_pointers.potrf_right_looking(uplo, work, block)
            else:
                c, failures = _potrf(a.dtype.char)(work, lower=lower, clean=clean and not (by_tiles or by_columns),
                                                   overwrite_a=True)
            if by_columns and not failures:
                zero_other_triangle(c, lower)
    if failures:
        return scipy_call(name, a, overwrite_a, check_finite, lower=lower)
    if name == "cholesky":
        return c
    return scipy_container(name, False)((c, cho_factor_flags(lower, a, ())))


def _qr_on_host(a, overwrite_a, lwork, mode, pivoting, check_finite):
    """SciPy's ``qr`` on the host path. Under SciPy 1.18, with SciPy's default ``lwork`` and mode ``full``, ``r`` or
    ``economic``, a matrix that :func:`_takes_direct_call` is factored by the call SciPy's function makes after its
    Python checks (:func:`_compiled_qr`, on the array as SciPy hands it over: any strides); those checks are about
    10 us at order 100, 3 us of it made here again. Its results are SciPy's objects. Anything else, SciPy's own call
    (:func:`scipy_call`; with an explicit ``lwork``, its public function as called), and so is a call the compiled
    loop reports a failure of (for SciPy's error)."""
    if lwork is not QR_LWORK_DEFAULT:
        return _scipy["qr"](a, overwrite_a=overwrite_a, lwork=lwork, mode=mode, pivoting=pivoting,
                            check_finite=check_finite)
    compiled = _compiled_qr()
    if compiled is None or mode not in _QR_MODES or not _takes_direct_call(a, overwrite_a, check_finite, pivoting):
        return scipy_call("qr", a, overwrite_a, check_finite, mode=mode, pivoting=pivoting)
    q, r, _, pivots, failures = compiled(a, False, _QR_MODES[mode], pivoting)
    if failures:
        return scipy_call("qr", a, overwrite_a, check_finite, mode=mode, pivoting=pivoting)
    factors = (r, pivots) if pivoting else (r,)
    if mode == "r":
        return factors
    m, n = a.shape
    return (q[:, :m] if mode == "economic" and m < n else q, *factors)


def _scipy_lu_wrong(a, permute_l, overwrite_a) -> bool:
    """Whether the installed SciPy's own ``lu`` gets the factors of ``a`` wrong (:func:`lu_in_place_wrong`: a 2-D
    matrix it factors in place in Fortran order, without ``permute_l``), for flags of :data:`TRUTH_FLAG_TYPES`; the
    cheap tests first, and no flag read where SciPy is right."""
    if not (lu_in_place_wrong() and isinstance(a, np.ndarray) and a.ndim == 2 and type(permute_l) in TRUTH_FLAG_TYPES
            and not permute_l and type(overwrite_a) in TRUTH_FLAG_TYPES):
        return False
    dtype = scipy_lapack_dtype(a.dtype)
    return dtype is not None and fortran_in_place(a, dtype, overwrite_a)


def scipy_lu(a, permute_l, overwrite_a, check_finite, p_indices):
    """SciPy's own ``lu`` of ``a``. Where the installed SciPy gets the factors wrong (:func:`_scipy_lu_wrong`,
    SciPy 1.18.1), the same call on a C-ordered copy of ``a``, its results laid out as SciPy's own call lays out its
    wrong ones; the caller's array is then left as it was (``overwrite_a`` permits writing it)."""
    if not _scipy_lu_wrong(a, permute_l, overwrite_a):
        return _scipy["lu"](a, permute_l=permute_l, overwrite_a=overwrite_a, check_finite=check_finite,
                            p_indices=p_indices)
    results = _scipy["lu"](np.ascontiguousarray(a), permute_l=False, overwrite_a=overwrite_a,
                           check_finite=check_finite, p_indices=p_indices)
    return scipy_returns("lu", results, False, in_place_shape=a.shape, permute_l=False, p_indices=p_indices)


def _lu_on_host(a, permute_l, overwrite_a, check_finite, p_indices):
    """SciPy's ``lu`` of a small ``a``, one the shim sends to the host path at once. A matrix that
    :func:`_takes_direct_call`, larger than 1 x 1 (which SciPy does not factor), is factored by the call SciPy's
    function makes after its Python checks (:func:`_compiled_lu`: SciPy 1.18's compiled loop, or before it SciPy's
    ``lu_dispatcher`` on the C-ordered copy SciPy's function makes), its permutation matrix built as SciPy builds
    it; SciPy 1.18's checks are 5-7 us, a third of the call at order 20. Anything else is SciPy's own call."""
    compiled = _compiled_lu()
    if (compiled is None or not _takes_direct_call(a, overwrite_a, check_finite, permute_l, p_indices)
            or a.shape == (1, 1)):
        return scipy_lu(a, permute_l, overwrite_a, check_finite, p_indices)
    rows, lower, upper = compiled(a, permute_l, False)
    if permute_l:
        return lower, upper
    if p_indices:
        return rows, lower, upper
    m = a.shape[0]
    permutation = np.zeros((m, m), dtype="f" if a.dtype.char in "fF" else "d")
    permutation[np.arange(m), rows] = 1
    return permutation, lower, upper


#: The fewest elements of a matrix whose host call may run on one BLAS thread: those of the smallest order
#: calibration times that at. A smaller matrix, whose call takes microseconds, is told by its size alone.
ONE_THREAD_MIN_SIZE = HOST_THREADS_ORDERS[0] ** 2

T = TypeVar("T")


def _computed_in(dtype: np.dtype, library: str) -> np.dtype | None:
    """The dtype ``library``'s function computes a matrix of ``dtype`` in: LAPACK's own for SciPy, NumPy's
    (:func:`numpy_linalg_dtype`) for NumPy; None for one neither takes as it is."""
    if library == "numpy":
        return numpy_linalg_dtype(dtype)
    return dtype if dtype.char in "fdFD" else None


def on_timed_threads(op: str, a, forms_q: bool, library: str, call: Callable[..., T], *args) -> T:
    """``call(*args)``, the host path's call of ``library``'s function (``"scipy"`` or ``"numpy"``) for ``op`` on
    ``a`` (a QR that ``forms_q`` or not), on one BLAS thread (:func:`one_thread_per_call`) where ``hetlapack
    calibrate`` timed that call faster so on a matrix of ``a``'s order, in the dtype the library computes ``a`` in
    (``model.host_blas_threads``); else on as many as BLAS takes. On one thread the library's results are its own
    as it gives them there, which differ in the last bits from order 100-200 on (by routine and dtype). A matrix of
    fewer than :data:`ONE_THREAD_MIN_SIZE` elements is told by its size, the first test (0.1 us of a 6 us call at
    order 4)."""
    if (type(a) is np.ndarray and a.size >= ONE_THREAD_MIN_SIZE and a.ndim == 2
            and (dtype := _computed_in(a.dtype, library)) is not None
            and model.host_blas_threads(op, dtype, max(a.shape), forms_q, library) == 1):
        with one_thread_per_call():
            return call(*args)
    return call(*args)


def host_cholesky(name: str, a, lower, overwrite_a, check_finite):
    """:func:`_cholesky_on_host` :func:`on_timed_threads`."""
    return on_timed_threads("potrf", a, False, "scipy", _cholesky_on_host, name, a, lower, overwrite_a, check_finite)


def host_lu_factor(a, overwrite_a, check_finite):
    """SciPy's ``lu_factor`` of ``a`` on the host path (:func:`scipy_call`) :func:`on_timed_threads`."""
    return on_timed_threads("getrf", a, False, "scipy", scipy_call, "lu_factor", a, overwrite_a, check_finite)


def host_lu(a, permute_l, overwrite_a, check_finite, p_indices):
    """:func:`_lu_on_host` :func:`on_timed_threads` (``getrf``'s)."""
    return on_timed_threads("getrf", a, False, "scipy", _lu_on_host, a, permute_l, overwrite_a, check_finite,
                            p_indices)


def host_qr(a, overwrite_a, lwork, mode, pivoting, check_finite):
    """:func:`_qr_on_host` :func:`on_timed_threads` (``geqrf``'s, forming Q as ``mode`` asks); column pivoting is
    not timed, and runs on every core."""
    if pivoting is not False:
        return _qr_on_host(a, overwrite_a, lwork, mode, pivoting, check_finite)
    return on_timed_threads("geqrf", a, scipy_qr_forms_q(mode), "scipy", _qr_on_host, a, overwrite_a, lwork, mode,
                            pivoting, check_finite)