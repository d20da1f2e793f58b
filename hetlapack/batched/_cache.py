"""numba's disk cache of the batched kernels, kept fresh by every source file their machine code comes from.

numba keys a cached function on its own module's source alone: a kernel in ``_lu`` inlines helpers from
``_order_four``, ``_simd`` and others, and reads constants of ``..machine`` and ``..perf.model`` as it compiles, so a
change there (an upgrade that leaves ``_lu.py`` as it was, or an edit while developing) left numba loading the kernel
compiled from the old helpers. :class:`KernelSourcesLocator` finds the cache where numba's own locator does but
stamps it with those files' contents too; :func:`install` puts it first among numba's locators before any kernel is
decorated.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from numba.core import caching

_BATCHED = Path(__file__).resolve().parent

#: The modules outside this package whose values the kernels read as they compile (paths from the package root).
_READ_WHILE_COMPILING = ("machine.py", "dtypes.py", "pivots.py", "perf/model.py")

#: numba's own locators, in its order (``CacheImpl`` since numba 0.61 or so, ``_CacheImpl`` before).
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
_NUMBA_LOCATORS = tuple(getattr(_CACHE_IMPL, "_locator_classes", ()))


@functools.cache
def sources_digest() -> bytes:
    """SHA-256 of the batched package's source files and of :data:`_READ_WHILE_COMPILING`, names and contents, read
    once a process."""
    digest = hashlib.sha256()
    paths = sorted(_BATCHED.glob("*.py")) + [_BATCHED.parent / name for name in _READ_WHILE_COMPILING]
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.digest()


class KernelSourcesLocator(caching._CacheLocator):
    """numba's locator of a function of this package (the first of numba's own that takes it), its stamp widened to
    :func:`sources_digest`."""

    def __init__(self, inner: caching._CacheLocator) -> None:
        self._inner = inner

    def ensure_cache_path(self) -> None:
        self._inner.ensure_cache_path()

    def get_cache_path(self) -> str:
        return self._inner.get_cache_path()

    def get_source_stamp(self) -> object:
        return self._inner.get_source_stamp(), sources_digest()

    def get_disambiguator(self) -> str:
        return self._inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file: str) -> KernelSourcesLocator | None:
        if Path(py_file).resolve().parent != _BATCHED:
            return None
        for locator in _NUMBA_LOCATORS:
            inner = locator.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner)
        return None


def install() -> None:
    """Put :class:`KernelSourcesLocator` first among numba's cache locators (once; nothing where this numba keeps
    them elsewhere, and its own stamp then stands)."""
    if _CACHE_IMPL is not None and _NUMBA_LOCATORS and KernelSourcesLocator not in _CACHE_IMPL._locator_classes:
        _CACHE_IMPL._locator_classes.insert(0, KernelSourcesLocator)
