"""A drop-in for ``scipy.linalg``: hetlapack's factorizations, and every other name from SciPy.

``import hetlapack.linalg as la`` replaces ``import scipy.linalg as la``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

import scipy.linalg as _scipy_linalg

from .compat.scipy_linalg import cho_factor, cho_solve, cholesky, lu, lu_factor, lu_solve, qr
from .options import using
from .explain import explain

_OWN = ["cho_factor", "cho_solve", "cholesky", "explain", "lu", "lu_factor", "lu_solve", "qr", "using"]

#: ``from hetlapack.linalg import *`` gives what ``from scipy.linalg import *`` gives, hetlapack's own included.
__all__ = sorted({*_scipy_linalg.__all__, *_OWN})


#: No folder of modules of its own (so nothing is ever loaded twice): its submodules are SciPy's, found by
#: :class:`_SciPySubmodules`.
__path__: list[str] = []


class _SciPySubmodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import hetlapack.linalg.lapack``, ``from hetlapack.linalg.blas import dgemm``, ``from hetlapack.linalg import
    interpolative``: every submodule of ``scipy.linalg`` by the drop-in's name, as SciPy's own module object."""

    def find_spec(self, fullname: str, path, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent != __name__ or importlib.util.find_spec(f"scipy.linalg.{name}") is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        return importlib.import_module(f"scipy.linalg.{spec.name.rpartition('.')[2]}")

    def exec_module(self, module: ModuleType) -> None:
        """SciPy's module is already executed."""


if not any(isinstance(finder, _SciPySubmodules) for finder in sys.meta_path):
    sys.meta_path.append(_SciPySubmodules())


def __getattr__(name: str):
    """Every name hetlapack does not define falls through to ``scipy.linalg``."""
    try:
        return getattr(_scipy_linalg, name)
    except AttributeError:
        raise AttributeError(f"module 'hetlapack.linalg' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(dir(_scipy_linalg)) | set(_OWN))
