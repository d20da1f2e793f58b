"""The call users make, beside SciPy's: a C-ordered NumPy array with SciPy's default flags (the first row of every
group), then a Fortran-ordered copy with ``overwrite_a=True, check_finite=False`` (the second); float64. NumPy's
``cholesky`` and ``qr`` likewise beside NumPy's, on a C-ordered array and then a Fortran-ordered one.

Run on a quiet machine, OpenBLAS on its own kernels (the header names the CPU and kernel; test_dgemm.py in the same
run gives the DGEMM rate):
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE pytest benchmarks/test_users_call.py benchmarks/test_dgemm.py
--benchmark-only --benchmark-group-by=group``. Sizes: ``HETLAPACK_BENCH_SIZES`` (default 1000,2000,4000).
"""

import contextlib
import os

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hla
from hetlapack.compat import numpy_linalg
from hetlapack.testing import general, spd

SIZES = [int(n) for n in os.environ.get("HETLAPACK_BENCH_SIZES", "1000,2000,4000").split(",")]
#: name: (matrix kind, the call on a module (scipy.linalg or hetlapack.linalg), explain's operation and keywords)
CALLS = {
    "cholesky": ("spd", lambda m, a, **kw: m.cholesky(a, lower=True, **kw), "cholesky", {}),
    "cho_factor": ("spd", lambda m, a, **kw: m.cho_factor(a, **kw), "cho_factor", {}),
    "lu_factor": ("general", lambda m, a, **kw: m.lu_factor(a, **kw), "lu_factor", {}),
    "qr economic": ("general", lambda m, a, **kw: m.qr(a, mode="economic", **kw), "qr", {"mode": "economic"}),
    "qr r": ("general", lambda m, a, **kw: m.qr(a, mode="r", **kw), "qr", {"mode": "r"}),
}
#: the two rows of each group: SciPy's defaults on a C-ordered array, then the call that lets LAPACK copy nothing
LAYOUTS = {"C default": ("C", {}), "F overwrite no-check": ("F", {"overwrite_a": True, "check_finite": False})}


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"n={n}")
def matrices(request):
    n = request.param
    return {"spd": spd(n), "general": general(n, n, seed=n)}


#: the rows of each group: the module called, and the path forced on hetlapack (None: dispatch's choice)
LIBRARIES = {"scipy": (sl, None), "hetlapack": (hla, None), "hetlapack hybrid": (hla, "hybrid")}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("name", list(CALLS))
def test_users_call(benchmark, matrices, name, library, layout):
    """Also the model's error, where dispatch decides by it: SciPy's time against the host path's prediction, the
    forced hybrid's against the hybrid's (``measured_over_predicted``)."""
    kind, call, op, options = CALLS[name]
    order, flags = LAYOUTS[layout]
    module, forced = LIBRARIES[library]
    a = matrices[kind]
    n = a.shape[0]
    benchmark.group = f"{name} n={n} {layout}"
    plan = hetlapack.explain(op, a, **options)
    if library == "hetlapack":
        benchmark.extra_info["path"] = plan.path
    with hetlapack.using(path=forced) if forced else contextlib.nullcontext():
        benchmark.pedantic(lambda x: call(module, x, **flags), setup=lambda: ((np.array(a, order=order),), {}),
                           rounds=max(3, 6000 // n), warmup_rounds=1)
    predicted = plan.predicted_s.get(forced or "host") if library != "hetlapack" else None
    if predicted:
        measured = benchmark.stats.stats.min
        benchmark.extra_info.update(predicted_s=predicted, measured_over_predicted=measured / predicted)


#: name: (matrix kind, the call on a module (numpy.linalg or hetlapack.compat.numpy_linalg))
NUMPY_CALLS = {
    "cholesky": ("spd", lambda m, a: m.cholesky(a)),
    "qr reduced": ("general", lambda m, a: m.qr(a)),
}


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("library", ["numpy", "hetlapack"])
@pytest.mark.parametrize("name", list(NUMPY_CALLS))
def test_numpys_call(benchmark, matrices, name, library, order):
    """``numpy.linalg``'s call beside the shim's, on a C-ordered array (the first row) and a Fortran-ordered one."""
    kind, call = NUMPY_CALLS[name]
    a = matrices[kind]
    benchmark.group = f"numpy {name} n={a.shape[0]} {order}"
    module = np.linalg if library == "numpy" else numpy_linalg
    benchmark.pedantic(lambda x: call(module, x), setup=lambda: ((np.array(a, order=order),), {}),
                       rounds=max(3, 6000 // a.shape[0]), warmup_rounds=1)
