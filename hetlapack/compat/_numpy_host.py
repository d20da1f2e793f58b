"""The host path of the NumPy shims for a small matrix: the calls ``numpy.linalg.cholesky`` and ``qr`` make after
their Python checks.

NumPy's functions wrap gufuncs of ``numpy.linalg._umath_linalg`` in Python that costs more than the factorization of
a small matrix (order 4: 10 us of which the gufunc is 3; each of its ``errstate`` blocks is 3 us), and the shim's
own check that dispatch keeps the call on the host adds 2-3 us more. For a plain matrix in a LAPACK dtype the shim
calls the gufuncs itself, as NumPy does, under one ``errstate`` that turns the gufunc's failure (an invalid
operation, which NumPy turns into its ``LinAlgError``) into a call of NumPy's own function, for NumPy's error. The
gufuncs are private to NumPy, so each is tried on a probe against NumPy's public function before it is trusted.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

import numpy as np

from ..contract.arrays import identical, numpy_linalg_dtype, plain_matrix
from ..contract.originals import numpy_functions as _numpy

_PROBE = np.array([[4.0, 2.0, 1.0], [2.0, 5.0, 3.0], [1.0, 3.0, 6.0]])


def _plain(a) -> bool:
    """A native :func:`plain_matrix`: the matrices the gufuncs are called on here, whose results NumPy returns in
    their own dtype (computed in double precision: :func:`numpy_linalg_dtype`)."""
    return plain_matrix(a) and a.dtype.isnative


@functools.cache
def _gufuncs() -> dict[str, Callable] | None:
    """NumPy's ``cholesky_lo``, ``cholesky_up``, ``qr_r_raw``, ``qr_reduced`` and ``qr_complete`` gufuncs, where the
    installed NumPy has them and the calls below answer a probe as NumPy's public functions do; else None."""
    try:
        private = importlib.import_module("numpy.linalg._umath_linalg")
        found = {name: getattr(private, name) for name in
                 ("cholesky_lo", "cholesky_up", "qr_r_raw", "qr_reduced", "qr_complete")}
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


def _errstate():
    """NumPy's ``errstate`` around its gufuncs, with their failure raised instead of turned into NumPy's error."""
    return np.errstate(invalid="raise", over="ignore", divide="ignore", under="ignore")


def _cholesky(gufuncs: dict[str, Callable], a: np.ndarray, upper: bool) -> np.ndarray:
    computed = numpy_linalg_dtype(a.dtype).char
    with _errstate():
        factor = gufuncs["cholesky_up" if upper else "cholesky_lo"](a, signature=f"{computed}->{computed}")
    return factor.astype(a.dtype, copy=False)


def _qr(gufuncs: dict[str, Callable], a: np.ndarray, mode: str):
    computed, result = numpy_linalg_dtype(a.dtype).char, a.dtype
    m, n = a.shape
    work = a.astype(computed, copy=True)
    complete = mode == "complete" and m > n
    with _errstate():
        tau = gufuncs["qr_r_raw"](work, signature=f"{computed}->{computed}")
        if mode != "r":
            q = gufuncs["qr_complete" if complete else "qr_reduced"](work, tau,
                                                                      signature=f"{computed}{computed}->{computed}")
    r = np.triu(work[: m if complete else min(m, n), :]).astype(result, copy=False)
    if mode == "r":
        return r
    return np.linalg._linalg.QRResult(q.astype(result, copy=False), r)


def host_cholesky(a, upper):
    """``numpy.linalg.cholesky(a, upper=upper)`` for a matrix the shim keeps on the host: the gufunc call NumPy
    makes, for a plain matrix (:func:`_plain`, square, not empty) with a plain ``bool`` flag; NumPy's own call for
    anything else and for a matrix that is not positive definite (its error)."""
    gufuncs = _gufuncs()
    if gufuncs is None or not _plain(a) or type(upper) is not bool or not a.shape[0] == a.shape[1] > 0:
        return _numpy["cholesky"](a, upper=upper)
    try:
        return _cholesky(gufuncs, a, upper)
    except FloatingPointError:
        return _numpy["cholesky"](a, upper=upper)


def host_qr(a, mode):
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
