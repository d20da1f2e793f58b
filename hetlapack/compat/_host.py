"""The host path: SciPy's own call, handed a Fortran-ordered copy where SciPy would make that copy the slow way, and
a small Cholesky factorization by the call SciPy's function makes after its Python checks.

SciPy's LAPACK wrappers (f2py) copy a C-ordered matrix into Fortran order before LAPACK sees it, element by
element: on a matrix larger than the cache every element of one of the two arrays is a cache miss, and the copy
costs a third of a Cholesky of order 4000 (issue 36). A copy made a cache tile at a time gives LAPACK the same
matrix, so SciPy's call on it, with ``overwrite_a=True``, returns SciPy's result to the bit, in the same layout.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util

import numpy as np
from scipy.linalg.lapack import get_lapack_funcs

from ..contract.arrays import copies_by_tiles, fortran_copy, working_copy
from ..contract.originals import scipy_functions as _scipy
from ..contract.originals import scipy_matrix_functions as _scipy_matrix
from ..contract.scipy_rules import COMPILED_BATCH_LOOPS, cho_factor_flags, fortran_copy_unseen, scipy_container


def _plain_matrix(a) -> bool:
    """A 2-D ndarray (not a subclass) in a LAPACK dtype: what SciPy's call may be handed below its batch decorator,
    and in a Fortran copy of its own."""
    return type(a) is np.ndarray and a.ndim == 2 and a.dtype.char in "fdFD"


def _read_as_it_lies(a: np.ndarray) -> bool:
    """Whether SciPy hands the plain matrix ``a`` to LAPACK without a converting copy of its own: native byte order
    and aligned."""
    return a.dtype.isnative and a.flags.aligned


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
    anything but a plain matrix (:func:`_plain_matrix`) to SciPy's public function, batch decorator included."""
    if not _plain_matrix(a):
        return _scipy[name](a, overwrite_a=overwrite_a, check_finite=check_finite, **options)
    if _copies_slowly(a, overwrite_a) and fortran_copy_unseen(name, **options) and (
            not check_finite or np.isfinite(a).all()):
        return _scipy_matrix[name](fortran_copy(a), overwrite_a=True, check_finite=False, **options)
    return _scipy_matrix[name](a, overwrite_a=overwrite_a, check_finite=check_finite, **options)


@functools.cache
def _potrf(char: str):
    """SciPy's wrapper of LAPACK's ``potrf`` for a dtype."""
    return get_lapack_funcs("potrf", dtype=np.dtype(char))


@functools.cache
def _compiled_cholesky():
    """SciPy 1.18's compiled Cholesky, ``scipy.linalg._batched_linalg._cholesky(a, lower, overwrite_a, clean) ->
    (factors, failures)``, what its ``cholesky`` and ``cho_factor`` call after their Python checks: where the
    installed SciPy has it and it answers a probe as SciPy's ``cholesky`` does; else None. It is private to SciPy,
    so it is looked up and tried, never assumed."""
    spec = importlib.util.find_spec("scipy.linalg._batched_linalg")
    compiled = getattr(importlib.import_module(spec.name), "_cholesky", None) if spec is not None else None
    if compiled is None:
        return None
    probe = np.array([[4.0, 2.0], [2.0, 5.0]])
    try:
        factor, failures = compiled(probe.copy(), False, False, True)
    except Exception:  # noqa: BLE001 - any other answer than SciPy's leaves SciPy's own call
        return None
    return compiled if not failures and np.array_equal(factor, _scipy["cholesky"](probe)) else None


def host_cholesky(name: str, a, lower, overwrite_a, check_finite):
    """SciPy's ``cholesky`` or ``cho_factor`` (``name``) of a small ``a``, one the shims send to the host path at
    once. A plain contiguous square matrix with plain ``bool`` flags and ``overwrite_a=False``, the call users make,
    is factored by the call SciPy's function makes after its Python checks, which are 5-10 us, a sixth of the call
    at order 100: before 1.18 LAPACK's ``potrf`` through SciPy's f2py wrapper on a Fortran-ordered copy (made as
    f2py makes it, or by tiles where that is faster), since SciPy's compiled loop (:func:`_compiled_cholesky`). The
    bits, layout and flags are SciPy's. Anything else is SciPy's own call, for its result, errors and warnings:
    other flags and arrays, a matrix with infinities or NaNs (with ``check_finite``) and one LAPACK cannot factor.
    Large matrices are SciPy's own call too: there its Python costs nothing."""
    direct = (_plain_matrix(a) and type(lower) is bool and overwrite_a is False and a.shape[0] == a.shape[1] > 0
              and (a.flags.c_contiguous or a.flags.f_contiguous) and _read_as_it_lies(a))
    compiled = _compiled_cholesky()
    if not direct or (compiled is None and COMPILED_BATCH_LOOPS) or (check_finite and not np.isfinite(a).all()):
        return scipy_call(name, a, overwrite_a, check_finite, lower=lower)
    clean = name == "cholesky"  # cho_factor leaves the other triangle to LAPACK (1.18 zeroes it in its own copy)
    if compiled is not None:
        c, failures = compiled(a, lower, False, clean)
    else:
        c, failures = _potrf(a.dtype.char)(working_copy(a, a, a.dtype, False), lower=lower, clean=clean,
                                           overwrite_a=True)
    if failures:
        return scipy_call(name, a, overwrite_a, check_finite, lower=lower)
    if name == "cholesky":
        return c
    return scipy_container(name, False)((c, cho_factor_flags(lower, a, ())))
