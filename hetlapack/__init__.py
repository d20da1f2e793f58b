"""hetlapack: a drop-in, SciPy-compatible accelerated LAPACK.

``import hetlapack.linalg as la`` replaces ``import scipy.linalg as la``; the factorizations are routed by
:mod:`hetlapack.dispatch` to the host, batched, hybrid (tiled runtime) or GPU paths. ``explain`` says why,
``using`` forces a choice, ``hetlapack.compat.install()`` patches SciPy and NumPy in place.
"""

from .dispatch import Plan
from .hardware import detect
from .explain import explain
from .options import using
from .linalg import cho_factor, cho_solve, cholesky, lu, lu_factor, lu_solve, qr  # the drop-in's own functions

__version__ = "0.1.0"

__all__ = ["Plan", "cho_factor", "cho_solve", "cholesky", "detect", "explain", "lu", "lu_factor", "lu_solve",
           "qr", "using"]
