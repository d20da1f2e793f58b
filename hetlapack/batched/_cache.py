"""numba's disk cache of the batched kernels, kept fresh by every source file their machine code comes from.

numba keys a cached function on its own module's source alone: a kernel in ``_lu`` inlines helpers from
``_order_four``, ``_simd`` and others, and reads constants of ``..machine`` and ``..perf.model`` as it compiles, so a
change there (an upgrade that leaves ``_lu.py`` as it was, or an edit while developing) left numba loading the kernel
compiled from the old helpers. :class:`KernelSourcesLocator` finds the cache where numba's own locator does but
stamps it with those files' contents too (the package's compiled modules, the modules they import from, in the
package and outside it: :func:`read_while_compiling`); :func:`install` puts it first among numba's locators before any
kernel is decorated. The package's plain Python (the wrappers, the output pool, the thread counts) is not in the
stamp: editing it keeps the compiled kernels, which take 7-12 minutes to compile again.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from numba.core import caching

_BATCHED = Path(__file__).resolve().parent

#: A module whose functions numba compiles for the CPU: one of these decorators at the start of a line.
_COMPILED = re.compile(r"^@(?:numba\.njit|intrinsic|overload)\b", re.MULTILINE)

#: An import from a module of hetlapack outside this package (``from ..perf.model import X``): its dotted name.
_OUTSIDE_IMPORT = re.compile(r"^\s*from \.\.([\w.]+) import", re.MULTILINE)

#: An import from a module of this package (``from ._simd import X``): its name.
_SIBLING_IMPORT = re.compile(r"^\s*from \.(\w+) import", re.MULTILINE)

#: numba's own locators, in its order (``CacheImpl`` since numba 0.61 or so, ``_CacheImpl`` before).
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
_NUMBA_LOCATORS = tuple(getattr(_CACHE_IMPL, "_locator_classes", ()))


def read_while_compiling(sources: dict[Path, bytes]) -> list[Path]:
    """The modules whose code or values reach the kernels' machine code: the package's compiled modules (of
    ``sources``, its modules, path: contents), the package's modules they import from, in turn, and the modules
    outside the package that any of these import from (``..machine``'s and ``..perf.model``'s values, read as the
    kernels compile). A module that only the package's plain Python imports is not among them."""
    root = _BATCHED.parent
    pending = [path for path, text in sources.items() if _COMPILED.search(text.decode())]
    found = set(pending)
    while pending:
        text = sources[pending.pop()].decode()
        for name in _SIBLING_IMPORT.findall(text):
            sibling = _BATCHED / f"{name}.py"
            if sibling in sources and sibling not in found:
                found.add(sibling)
                pending.append(sibling)
        for dotted in _OUTSIDE_IMPORT.findall(text):
            module = root.joinpath(*dotted.split("."))
            found.add(module.with_suffix(".py") if module.with_suffix(".py").is_file() else module / "__init__.py")
    return sorted(found)


@functools.cache
def sources_digest() -> bytes:
    """SHA-256 of the modules the kernels are compiled from (:func:`read_while_compiling`), names and contents, read
    once a process."""
    digest = hashlib.sha256()
    sources = {path: path.read_bytes() for path in sorted(_BATCHED.glob("*.py"))}
    for path in read_while_compiling(sources):
        digest.update(path.relative_to(_BATCHED.parent).as_posix().encode())
        digest.update(sources[path] if path in sources else path.read_bytes())
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
