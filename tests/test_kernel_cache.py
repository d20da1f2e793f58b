"""numba's disk cache of the batched kernels is stamped with every source file their machine code comes from."""

from __future__ import annotations

import numba
import pytest

from hetlapack.batched import _cache, compiling


def test_a_kernels_cache_is_stamped_with_the_helpers_it_inlines():
    """A kernel's cache locator is numba's own, wrapped: the same place, its stamp widened by the digest of the
    package's sources, so that a kernel whose module is unchanged is compiled again when a helper changed."""
    kernel = compiling.KERNELS["getrf"][0]
    locator = kernel._cache._impl._locator
    assert isinstance(locator, _cache.KernelSourcesLocator)
    inner_stamp, digest = locator.get_source_stamp()
    assert digest == _cache.sources_digest() and inner_stamp == locator._inner.get_source_stamp()
    assert locator.get_cache_path() == locator._inner.get_cache_path()


def test_the_digest_follows_every_source_the_kernels_compile_from(tmp_path, monkeypatch):
    """Changing a compiled module of the package, a module of the package a compiled one imports from (compiled or
    not), or a module a compiled module imports from outside it, changes the digest; the package's plain Python, and
    a module only it imports, do not (editing them keeps the compiled kernels); a function outside the package keeps
    numba's own locator."""
    package = tmp_path / "hetlapack"
    batched = package / "batched"
    (package / "perf").mkdir(parents=True)
    batched.mkdir()
    for name in ("machine.py", "perf/model.py", "contract.py"):
        (package / name).write_text(f"# {name}\n")
    (batched / "_lu.py").write_text("from ..machine import vector_bytes\nfrom ._widths import LANES\n\n\n"
                                    "@numba.njit\ndef getrf(): pass\n")
    (batched / "_widths.py").write_text("LANES = 8\n")
    (batched / "_order_four.py").write_text("from ..perf.model import GETF2_MAX_N\n\n\n@overload(len)\n"
                                            "def lu_chunk(): pass\n")
    (batched / "kernels.py").write_text("from ..contract import scipy_rules\nfrom ._lu import getrf\n")
    monkeypatch.setattr(_cache, "_BATCHED", batched)
    sources = {path: path.read_bytes() for path in sorted(batched.glob("*.py"))}
    assert _cache.read_while_compiling(sources) == [batched / "_lu.py", batched / "_order_four.py",
                                                    batched / "_widths.py", package / "machine.py",
                                                    package / "perf" / "model.py"]

    def digest() -> bytes:
        _cache.sources_digest.cache_clear()
        return _cache.sources_digest()

    try:
        first = digest()
        (batched / "_order_four.py").write_text("from ..perf.model import GETF2_MAX_N\n\n\n@overload(len)\n"
                                                "def lu_chunk(): return 1\n")
        second = digest()
        (package / "perf" / "model.py").write_text("GETF2_MAX_N = 17\n")
        third = digest()
        (package / "contract.py").write_text("NOT_READ_BY_KERNELS = 1\n")
        (batched / "kernels.py").write_text("from ._lu import getrf\n\nCHUNK = 2\n")
        fourth = digest()
        (batched / "_widths.py").write_text("LANES = 16\n")
        fifth = digest()
    finally:
        _cache.sources_digest.cache_clear()
    assert len({first, second, third, fifth}) == 4 and fourth == third

    def outside():
        return 1

    assert _cache.KernelSourcesLocator.from_function(outside, __file__) is None


def test_the_locator_comes_first_among_numbas():
    """Installed once, ahead of numba's own locators (importing the package installs it)."""
    if not _cache._NUMBA_LOCATORS:
        pytest.skip(f"numba {numba.__version__} keeps its cache locators elsewhere")
    _cache.install()
    assert _cache._CACHE_IMPL._locator_classes.count(_cache.KernelSourcesLocator) == 1
    assert _cache._CACHE_IMPL._locator_classes[0] is _cache.KernelSourcesLocator
