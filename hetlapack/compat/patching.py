"""``install()`` / ``uninstall()`` / ``patched()``: put hetlapack's functions where SciPy and NumPy code finds them.

SciPy's own modules bind these names at import (``scipy.linalg._decomp_cholesky.cholesky``, ``from ._decomp_lu
import lu_solve`` in ``scipy.linalg._solvers`` and so on), so every loaded ``scipy``/``numpy`` module whose global
is one of the originals is rebound, and restored on ``uninstall``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from ..forking import fork_safe_lock
from . import numpy_linalg, scipy_linalg
from ..contract.originals import NUMPY_NAMES, SCIPY_NAMES, numpy_functions, scipy_functions

_PREFIXES = ("scipy.", "numpy.")
_ROOTS = ("scipy", "numpy")

# (module name, global name) -> the original object that was there; install and uninstall change it under the lock
_replaced: dict[tuple[str, str], object] = {}
_lock = fork_safe_lock(reentrant=True)


def _replacements() -> dict[int, tuple[object, object]]:
    """id(original) -> (original, replacement)."""
    pairs = {}
    for names, originals, module in ((SCIPY_NAMES, scipy_functions, scipy_linalg),
                                     (NUMPY_NAMES, numpy_functions, numpy_linalg)):
        for name in names:
            replacement = getattr(module, name)
            replacement.__hetlapack_original__ = originals[name]
            pairs[id(originals[name])] = (originals[name], replacement)
    return pairs


def _globals() -> Iterator[tuple[str, object, str, object]]:
    """``(module name, module, global name, value)`` of every global of the loaded scipy/numpy modules."""
    for name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if module is not None and (name in _ROOTS or name.startswith(_PREFIXES)) and isinstance(namespace, dict):
            for attr, value in list(namespace.items()):
                yield name, module, attr, value


def install() -> int:
    """Replace SciPy's and NumPy's factorizations with hetlapack's everywhere they are bound.

    Returns the number of module globals rebound. Idempotent; modules imported later are not touched, so call it
    after importing the code that binds these names (``scipy.linalg`` itself is always covered).

    Examples
    --------
    >>> import hetlapack.compat, scipy.linalg
    >>> _ = hetlapack.compat.install()
    >>> scipy.linalg.cholesky.__module__
    'hetlapack.compat.scipy_linalg'
    >>> hetlapack.compat.uninstall()
    """
    with _lock:
        pairs = _replacements()
        count = 0
        for module_name, module, attr, value in _globals():
            pair = pairs.get(id(value))
            if pair is not None and value is pair[0]:
                _replaced[(module_name, attr)] = value
                setattr(module, attr, pair[1])
                count += 1
        return count


def uninstall() -> None:
    """Restore every global that :func:`install` rebound, and every loaded scipy/numpy global that holds one of
    hetlapack's functions otherwise (modules imported while installed bound them from ``scipy.linalg``)."""
    with _lock:
        for (module_name, attr), original in list(_replaced.items()):
            module = sys.modules.get(module_name)
            if module is not None:
                setattr(module, attr, original)
            del _replaced[(module_name, attr)]
        originals = {id(replacement): (replacement, original) for original, replacement in _replacements().values()}
        for _, module, attr, value in _globals():
            pair = originals.get(id(value))
            if pair is not None and value is pair[0]:
                setattr(module, attr, pair[1])


def installed() -> bool:
    """Whether hetlapack's functions are installed in SciPy and NumPy now."""
    return bool(_replaced)


def leftover_originals() -> list[str]:
    """``module.name`` of every loaded scipy/numpy global that still points at an original (empty once installed)."""
    pairs = _replacements()
    return [f"{module_name}.{attr}" for module_name, _, attr, value in _globals()
            if id(value) in pairs and value is pairs[id(value)][0]]


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """``with hetlapack.compat.patched():`` installs for the block and restores afterwards."""
    already = installed()
    install()
    try:
        yield
    finally:
        if not already:
            uninstall()
