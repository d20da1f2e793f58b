"""``import hetlapack`` stays light: no CuPy, no mpi4py, no matplotlib, no numba until a path needs them."""

import subprocess
import sys


def test_import_does_not_load_optional_dependencies():
    code = (
        "import sys, hetlapack, hetlapack.linalg; "
        "print(sorted(m for m in ('cupy', 'mpi4py', 'matplotlib', 'numba') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_star_import_gives_scipy_linalgs_names_and_hetlapacks_own():
    import scipy.linalg

    import hetlapack.compat.scipy_linalg as ours

    names: dict = {}
    exec("from hetlapack.linalg import *", names)
    assert set(scipy.linalg.__all__) <= set(names)
    assert names["solve"] is scipy.linalg.solve and names["cholesky"] is ours.cholesky and "using" in names


def test_scipys_submodules_are_attributes_not_second_copies():
    """``hetlapack.linalg`` is a module, not a package: SciPy's submodules are reached as its attributes, and an
    import of one by the drop-in's name fails instead of loading a duplicate (with duplicate warning classes)."""
    import importlib

    import pytest
    import scipy.linalg

    import hetlapack.linalg as la

    assert la.lapack is scipy.linalg.lapack and la.LinAlgWarning is scipy.linalg.LinAlgWarning
    with pytest.raises(ModuleNotFoundError, match="not a package"):
        importlib.import_module("hetlapack.linalg.lapack")
    assert "hetlapack.linalg.lapack" not in sys.modules
