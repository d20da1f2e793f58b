"""A pytest plugin that runs any test suite against hetlapack's shims (``pytest -p hetlapack.testing.pytest_shim``).

It installs hetlapack into SciPy and NumPy before test modules are imported, counts calls to every shim (a suite of
one function's tests calls only that one), and fails the run when the shim was not really used: no function called
through it, a module global or a parametrize value still pointing at SciPy's or NumPy's original.
"""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from ..compat import install, leftover_originals, numpy_linalg, scipy_linalg, uninstall
from ..contract.originals import NUMPY_NAMES, SCIPY_NAMES, numpy_functions, scipy_functions

calls: Counter = Counter()
_problems: list[str] = []
_shims: list[tuple[object, str, object]] = []


def _counting(module, name: str, label: str) -> None:
    shim = getattr(module, name)

    @functools.wraps(shim)
    def counted(*args, **kwargs):
        calls[label] += 1
        return shim(*args, **kwargs)

    _shims.append((module, name, shim))
    setattr(module, name, counted)


def pytest_configure(config: pytest.Config) -> None:
    import numpy.linalg  # noqa: F401, PLC0415 - load every module that binds the names before patching
    import scipy.linalg  # noqa: F401, PLC0415

    for name in SCIPY_NAMES:
        _counting(scipy_linalg, name, f"scipy.linalg.{name}")
    for name in NUMPY_NAMES:
        _counting(numpy_linalg, name, f"numpy.linalg.{name}")
    install()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    originals = {id(f) for f in (*scipy_functions.values(), *numpy_functions.values())}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for key, value in params.items():
            if id(value) in originals:
                _problems.append(f"{item.nodeid}: parameter {key} is an original function")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _problems.extend(f"{where} still points at the original" for where in leftover_originals())
    if not calls:
        _problems.append("no function was called through the shim")
    uninstall()
    for module, name, shim in _shims:
        setattr(module, name, shim)
    if _problems and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.section("hetlapack shim")
    labels = (*(f"scipy.linalg.{name}" for name in SCIPY_NAMES), *(f"numpy.linalg.{name}" for name in NUMPY_NAMES))
    for label in labels:
        terminalreporter.write_line(f"{label}: {calls[label]} calls")
    for problem in _problems:
        terminalreporter.write_line(f"PROBLEM: {problem}")
    if not _problems:
        terminalreporter.write_line("every global and parameter points at hetlapack; the suite called the shim")
