"""The host path of the NumPy shims for a small matrix: the calls ``numpy.linalg.cholesky`` and ``qr`` make after
their Python checks.

NumPy's functions wrap gufuncs of ``numpy.linalg._umath_linalg`` in Python that costs more than the factorization of
a small matrix (order 4: 10 us of which the gufunc is 3; each of its ``errstate`` blocks is 3 us), and the shim's
own check that dispatch keeps the call on the host adds 2-3 us more. For a plain matrix in a LAPACK dtype the shim
calls the gufuncs itself, as NumPy does, under an error state that turns the gufunc's failure (an invalid
operation, which NumPy turns into its ``LinAlgError``) into a call of NumPy's own function, for NumPy's error. The
gufuncs are private to NumPy, so each is tried on a probe against NumPy's public function before it is trusted.

NumPy's Cholesky of a matrix of order 1000 or more runs LAPACK's right-looking variant on NumPy's own BLAS, where
``hetlapack calibrate`` timed it faster there than that BLAS's ``potrf`` (:func:`_right_looking`): the gufunc's copies
into and out of Fortran order and its ``potrf`` took 447-465 ms at order 4000 on a 2-core Xeon, the variant on a
tiled copy 180-186 ms. On SciPy's BLAS it was as fast, but SciPy's idle threads then spun on the cores the caller's
next NumPy call needed.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

import numpy as np

from ..contract.arrays import identical, numpy_linalg_dtype, plain_matrix
from ..contract.originals import numpy_functions as _numpy
from ..devices import lapack_pointers
from ..perf import model
from ..perf.rates import POTRF_BLOCKS_MIN_ORDER
from ._host import copy_reading, on_timed_threads

_PROBE = np.array([[4.0, 2.0, 1.0], [2.0, 5.0, 3.0], [1.0, 3.0, 6.0]])


def _plain(a) -> bool:
    """A native :func:`plain_matrix`: the matrices the gufuncs are called on here, whose results NumPy returns in
    their own dtype (computed in double precision: :func:`numpy_linalg_dtype`)."""
    return plain_matrix(a) and a.dtype.isnative


def _qr_r_raw(private) -> Callable:
    """NumPy's gufunc for the Householder QR of a matrix in place: ``qr_r_raw`` from NumPy 2.1 on; NumPy 2.0 has
    one for matrices with no more rows than columns (``qr_r_raw_m``) and one for the others (``qr_r_raw_n``), and
    its ``qr`` picks by the shape, as this does."""
    if hasattr(private, "qr_r_raw"):
        return private.qr_r_raw
    wide, tall = private.qr_r_raw_m, private.qr_r_raw_n
    return lambda a, signature: (wide if a.shape[-2] <= a.shape[-1] else tall)(a, signature=signature)


@functools.cache
def _gufuncs() -> dict[str, Callable] | None:
    """NumPy's ``cholesky_lo``, ``cholesky_up``, ``qr_r_raw``, ``qr_reduced`` and ``qr_complete`` gufuncs, where the
    installed NumPy has them and the calls below answer a probe as NumPy's public functions do; else None."""
    try:
        private = importlib.import_module("numpy.linalg._umath_linalg")
        found = {name: getattr(private, name) for name in ("cholesky_lo", "cholesky_up", "qr_reduced", "qr_complete")}
        found["qr_r_raw"] = _qr_r_raw(private)
        for upper in (False, True):
            if not identical((_cholesky(found, _PROBE, upper),), (_numpy["cholesky"](_PROBE, upper=upper),)):
                return None
        for probe in (_PROBE, _PROBE[:, :2], _PROBE[:2]):
            for mode in ("reduced", "complete", "r"):
                ours, theirs = _qr(found, probe, mode), _numpy["qr"](probe, mode=mode)
                if not identical(ours if mode != "r" else (ours,), theirs if mode != "r" else (theirs,)):
                    return None
    except Exception:  # noqa: BLE001 - another NumPy: its own functions
        return None
    return found


#: The error state NumPy's functions set around their gufuncs, with a failure (an invalid operation) raised instead
#: of turned into NumPy's error, made once: ``np.errstate`` builds it afresh on every entry (1.1 us, a quarter of a
#: Cholesky of order 4 on a 2-core Xeon VM). NumPy's context variable for it is private, so another NumPy (1.x)
#: gets ``np.errstate``.
_RAISE_INVALID = dict(invalid="raise", over="ignore", divide="ignore", under="ignore")
try:
    from numpy._core.umath import _extobj_contextvar as _ERROR_STATE, _make_extobj
    _RAISING_STATE = _make_extobj(**_RAISE_INVALID)
except (ImportError, TypeError):
    _ERROR_STATE = None


def _raising(gufunc: Callable, *args: np.ndarray, signature: str) -> np.ndarray:
    """``gufunc(*args, signature=signature)`` under NumPy's error state with an invalid operation raised
    (:data:`_RAISE_INVALID`), the caller's restored after it."""
    if _ERROR_STATE is None:
        with np.errstate(**_RAISE_INVALID):
            return gufunc(*args, signature=signature)
    token = _ERROR_STATE.set(_RAISING_STATE)
    try:
        return gufunc(*args, signature=signature)
    finally:
        _ERROR_STATE.reset(token)


def _cholesky(gufuncs: dict[str, Callable], a: np.ndarray, upper: bool) -> np.ndarray:
    computed = numpy_linalg_dtype(a.dtype).char
    factor = _raising(gufuncs["cholesky_up" if upper else "cholesky_lo"], a, signature=f"{computed}->{computed}")
    return factor.astype(a.dtype, copy=False)


def _qr(gufuncs: dict[str, Callable], a: np.ndarray, mode: str):
    computed, result = numpy_linalg_dtype(a.dtype).char, a.dtype
    m, n = a.shape
    work = a.astype(computed, copy=True)
    complete = mode == "complete" and m > n
    tau = _raising(gufuncs["qr_r_raw"], work, signature=f"{computed}->{computed}")
    if mode != "r":
        q = _raising(gufuncs["qr_complete" if complete else "qr_reduced"], work, tau,
                     signature=f"{computed}{computed}->{computed}")
    r = np.triu(work[: m if complete else min(m, n), :]).astype(result, copy=False)
    if mode == "r":
        return r
    return np.linalg._linalg.QRResult(q.astype(result, copy=False), r)


def _right_looking(a: np.ndarray, upper: bool) -> np.ndarray | None:
    """NumPy's Cholesky factor of the square :func:`_plain` ``a`` in a LAPACK dtype by LAPACK's right-looking
    variant on NumPy's own BLAS (``lapack_pointers.numpy_library``), where ``hetlapack calibrate`` timed it faster
    there than ``potrf`` (``model.host_potrf_block``), in double precision as NumPy computes (a single-precision
    factor rounded from it), C-ordered as NumPy returns it: the variant factors the transpose of a copy made in that
    layout, the other triangle zeroed and every value read for finiteness as it is copied (a transpose's upper
    factor is the lower one's transpose). None where the variant does not run, or the copy read a value that is not
    finite or the matrix is not positive definite (NumPy's own call then, for its result or error)."""
    if a.dtype.char not in "fdFD":
        return None
    computed, uplo = numpy_linalg_dtype(a.dtype), "L" if upper else "U"  # the triangle of the transpose
    block = model.host_potrf_block(computed, a.shape[0], uplo, "numpy")
    if block is None or (library := lapack_pointers.numpy_library()) is None:
        return None
    transposed = copy_reading(a.T, True, uplo == "L", computed)
    if transposed is None or lapack_pointers.potrf_right_looking(uplo, transposed, block, library=library):
        return None
    return transposed.T.astype(a.dtype, copy=False)


def _cholesky_on_host(a, upper):
    """``numpy.linalg.cholesky(a, upper=upper)`` for a matrix the shim keeps on the host: for a plain matrix
    (:func:`_plain`, square, not empty) with a plain ``bool`` flag, LAPACK's right-looking variant on NumPy's BLAS
    where it was timed faster (:func:`_right_looking`), else the gufunc call NumPy makes; NumPy's own call for
    anything else and for a matrix that is not positive definite (its error)."""
    gufuncs = _gufuncs()
    if gufuncs is None or not _plain(a) or type(upper) is not bool or not a.shape[0] == a.shape[1] > 0:
        return _numpy["cholesky"](a, upper=upper)
    if a.shape[0] >= POTRF_BLOCKS_MIN_ORDER and (factor := _right_looking(a, upper)) is not None:
        return factor
    try:
        return _cholesky(gufuncs, a, upper)
    except FloatingPointError:
        return _numpy["cholesky"](a, upper=upper)


def _qr_on_host(a, mode):
    """``numpy.linalg.qr(a, mode)`` for a matrix the shim keeps on the host, in modes ``reduced``, ``complete`` and
    ``r``: the gufunc calls NumPy makes, for a plain matrix (:func:`_plain`, not empty); NumPy's own call for
    anything else and for a failure (its error)."""
    gufuncs = _gufuncs()
    if gufuncs is None or not _plain(a) or mode not in ("reduced", "complete", "r") or a.size == 0:
        return _numpy["qr"](a, mode=mode)
    try:
        return _qr(gufuncs, a, mode)
    except FloatingPointError:
        return _numpy["qr"](a, mode=mode)


def host_cholesky(a, upper):
    """:func:`_cholesky_on_host` on NumPy's BLAS threads as ``hetlapack calibrate`` timed them
    (``_host.on_timed_threads``)."""
    return on_timed_threads("potrf", a, False, "numpy", _cholesky_on_host, a, upper)


def host_qr(a, mode):
    """:func:`_qr_on_host` on NumPy's BLAS threads as ``hetlapack calibrate`` timed them (``geqrf``'s, forming Q
    unless ``mode`` is ``'r'``: ``_host.on_timed_threads``)."""
    return on_timed_threads("geqrf", a, mode != "r", "numpy", _qr_on_host, a, mode)
    return _qr_on_host(a, mode)
