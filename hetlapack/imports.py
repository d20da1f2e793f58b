"""Lazy imports of the package's heavy modules (numba's kernels, the tile algorithms) that threads may race and
Ctrl-C may interrupt.

Python's own import lock is per module: a thread that looks a module up in ``sys.modules`` while another imports
it finds it half initialized, and an import interrupted half-way leaves its modules behind half initialized for
the process's life (``module 'numba' has no attribute 'core'`` ever after). :func:`load` imports under one lock
for the whole package, holds back the main thread's signal handlers (Ctrl-C's KeyboardInterrupt) until the import
is done (an interrupted import cannot be taken back cleanly once its modules have registered themselves: numba's
types), and takes back every module a failed import added, so the next call imports afresh.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

from .forking import fork_safe_lock
from .signals import signals_held

_import_lock = fork_safe_lock(reentrant=True)


def load(name: str) -> ModuleType:
    """Module ``name``, imported (once, whichever thread asks first) under the package's import lock; an import
    that fails or is interrupted leaves ``sys.modules`` as it found it."""
    module = sys.modules.get(name)
    if module is not None and not _initializing(module):
        return module
    with importing():
        return importlib.import_module(name)


def present(name: str) -> bool:
    """Whether module ``name`` can be imported. Asking imports its parent packages (``hetlapack.batched``
    imports numba), so the question is asked as :func:`load` imports."""
    with importing():
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            return False


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """Hold the package's import lock over code that imports (directly, or as numba does when it first compiles);
    if that code fails or is interrupted, take back every module it added to ``sys.modules``."""
    with _import_lock, signals_held():
        before = set(sys.modules)
        try:
            yield
        except BaseException:
            for added in set(sys.modules) - before:
                sys.modules.pop(added, None)
            raise


def loaded(name: str) -> ModuleType | None:
    """Module ``name`` if it has been imported completely, else ``None`` (waits for an import under way)."""
    with _import_lock:
        module = sys.modules.get(name)
    return None if module is None or _initializing(module) else module


def _initializing(module: ModuleType) -> bool:
    """Whether ``module`` is still running its body (in this thread or, outside :func:`load`, another)."""
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))
