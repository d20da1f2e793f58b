"""A drop-in for ``scipy.linalg``: hetlapack's factorizations, and every other name from SciPy.

``import hetlapack.linalg as la`` replaces ``import scipy.linalg as la``.
"""

from __future__ import annotations

import scipy.linalg as _scipy_linalg

from .compat.scipy_linalg import (
    cho_factor,
    cho_solve,
    cholesky,
    lu,
    lu_factor,
    lu_solve,
    qr,
)
from .dispatch import using
from .explain import explain

_OWN = ["cho_factor", "cho_solve", "cholesky", "explain", "lu", "lu_factor", "lu_solve", "qr", "using"]

#: ``from hetlapack.linalg import *`` gives what ``from scipy.linalg import *`` gives, hetlapack's own included.
__all__ = sorted({*_scipy_linalg.__all__, *_OWN})


def __getattr__(name: str):
    """Every name hetlapack does not define falls through to ``scipy.linalg``, except its ``__path__``: this module
    is no package, so ``import hetlapack.linalg.lapack`` fails rather than load a second copy of SciPy's module
    (``hetlapack.linalg.lapack`` as an attribute is SciPy's own)."""
    if name == "__path__":
        raise AttributeError(f"module 'hetlapack.linalg' has no attribute {name!r}")
    try:
        return getattr(_scipy_linalg, name)
    except AttributeError:
        raise AttributeError(f"module 'hetlapack.linalg' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(dir(_scipy_linalg)) | set(_OWN))
