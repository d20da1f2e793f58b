"""The examples in hetlapack's docstrings run as written (doctest), so that they cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pkgutil

import pytest

import hetlapack

PACKAGE = pathlib.Path(hetlapack.__file__).parent


def _modules_with_examples() -> list[str]:
    """Every hetlapack module whose source holds a doctest example that runs, found without importing the others
    (the CUDA modules need CuPy or Numba's simulator). The MPI examples are marked to skip: they need ``mpiexec``,
    and ``examples/mpi_cholesky.py`` runs them there (``test_examples.py``)."""
    names = []
    for module in pkgutil.walk_packages([str(PACKAGE)], prefix="hetlapack."):
        relative = module.name.removeprefix("hetlapack.").replace(".", "/")
        source = PACKAGE / (f"{relative}/__init__.py" if module.ispkg else f"{relative}.py")
        lines = source.read_text(encoding="utf-8").splitlines()
        if any(">>> " in line and "doctest: +SKIP" not in line for line in lines):
            names.append(module.name)
    return sorted(names)


MODULES = _modules_with_examples()


def test_the_public_modules_have_examples():
    assert {"hetlapack.batched.lists", "hetlapack.compat.scipy_linalg", "hetlapack.compat.numpy_linalg"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(importlib.import_module(name), optionflags=flags, verbose=False, report=False)
    assert result.attempted > 0
    assert result.failed == 0, (f"{result.failed} of {result.attempted} examples in {name} failed "
                                "(the captured output shows each)")
