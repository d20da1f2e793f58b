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
