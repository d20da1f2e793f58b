"""References to SciPy's and NumPy's own functions, captured when hetlapack is imported.

The shims call these for the host path, so patching SciPy or NumPy never makes hetlapack call itself.
"""

from __future__ import annotations

import numpy.linalg
import scipy.linalg

SCIPY_NAMES = ("cholesky", "cho_factor", "cho_solve", "qr", "lu_factor", "lu_solve", "lu")
NUMPY_NAMES = ("cholesky", "qr")


def _capture(module, names: tuple[str, ...]) -> dict:
    functions = {name: getattr(module, name) for name in names}
    for name, function in functions.items():
        original = getattr(function, "__hetlapack_original__", None)
        if original is not None:
            functions[name] = original
    return functions


scipy_functions: dict = _capture(scipy.linalg, SCIPY_NAMES)
numpy_functions: dict = _capture(numpy.linalg, NUMPY_NAMES)


def _one_matrix(function):
    """The function SciPy's batch decorator (``scipy._lib._util._apply_over_batch``) calls for one matrix, else
    ``function`` itself. For a 2-D ndarray in a LAPACK dtype (float32, float64, complex64, complex128) the decorator
    passes the call on unchanged: its array namespace's ``asarray`` returns the ndarray itself, no axis is batched,
    and SciPy 1.18's dtype deprecation warns of other dtypes only. Calling what it wraps then gives the same result,
    errors and warnings, without the 6-7 us the decorator adds to a call that takes 40 at order 100."""
    wrapped = getattr(function, "__wrapped__", None)
    if wrapped is not None and function.__globals__.get("__name__") == "scipy._lib._util":
        return wrapped
    return function


#: SciPy's functions as they run for one matrix: for 2-D ndarrays of LAPACK dtypes only (see :func:`_one_matrix`).
scipy_matrix_functions: dict = {name: _one_matrix(function) for name, function in scipy_functions.items()}
