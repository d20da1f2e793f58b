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


def test_scipys_submodules_import_by_the_drop_ins_name_as_scipys_own():
    """Every import form that works on ``scipy.linalg``'s submodules works on ``hetlapack.linalg``'s and gives SciPy's
    own module (no second copy, with duplicate warning classes), ``interpolative`` (which SciPy imports only when
    asked) included, whichever is imported first; nothing is loaded twice."""
    code = ("import sys, scipy.linalg, hetlapack.linalg as la\n"
            "from hetlapack.linalg.lapack import dpotrf\n"
            "import hetlapack.linalg.blas\n"
            "from hetlapack.linalg import interpolative\n"
            "assert dpotrf is scipy.linalg.lapack.dpotrf and hetlapack.linalg.blas is scipy.linalg.blas\n"
            "assert interpolative is sys.modules['scipy.linalg.interpolative'] is la.interpolative\n"
            "import hetlapack.linalg.interpolative\n"
            "assert la.lapack is scipy.linalg.lapack and la.LinAlgWarning is scipy.linalg.LinAlgWarning\n"
            "assert la.__path__ == [] and not hasattr(la, 'no_such_name')\n"
            "assert not [m for m in sys.modules if m.startswith('hetlapack.linalg.') and sys.modules[m].__name__ "
            "!= 'scipy.linalg.' + m.rpartition('.')[2]]\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    first = "import hetlapack.linalg.interpolative as i, scipy.linalg.interpolative as j; assert i is j"
    subprocess.run([sys.executable, "-c", first], check=True, timeout=120)
    result = subprocess.run([sys.executable, "-c", "import hetlapack.linalg.no_such_module"], capture_output=True,
                            text=True, timeout=120)
    assert "ModuleNotFoundError: No module named 'hetlapack.linalg.no_such_module'" in result.stderr, result.stderr
