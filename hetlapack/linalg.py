"""A drop-in for ``scipy.linalg``: hetlapack's factorizations, and every other name from SciPy.

``import hetlapack.linalg as la`` replaces ``import scipy.linalg as la``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

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


def _alias_submodule(name: str, module: ModuleType) -> ModuleType:
    """Register SciPy's submodule ``name`` under this module's name too, so that ``import hetlapack.linalg.lapack``
    and ``from hetlapack.linalg.blas import dgemm`` find SciPy's own module (no second copy, no package needed)."""
    return sys.modules.setdefault(f"{__name__}.{name}", module)


def _alias_loaded_submodules() -> None:
    """Alias the public submodules ``import scipy.linalg`` has loaded (all but those it imports only when asked)."""
    for name, module in list(sys.modules.items()):
        parent, _, child = name.rpartition(".")
        if parent == "scipy.linalg" and not child.startswith("_"):
            _alias_submodule(child, module)


_alias_loaded_submodules()


def __getattr__(name: str):
    """Every name hetlapack does not define falls through to ``scipy.linalg``, except its ``__path__`` (this module
    is no package); a submodule SciPy imports only when asked (``interpolative``) is imported then, as ``from
    scipy.linalg import interpolative`` does."""
    if name == "__path__":
        raise AttributeError(f"module 'hetlapack.linalg' has no attribute {name!r}")
    try:
        return getattr(_scipy_linalg, name)
    except AttributeError:
        pass
    if not name.startswith("_") and importlib.util.find_spec(f"scipy.linalg.{name}") is not None:
        return _alias_submodule(name, importlib.import_module(f"scipy.linalg.{name}"))
    raise AttributeError(f"module 'hetlapack.linalg' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted((set(dir(_scipy_linalg)) - {"__path__"}) | set(_OWN))
