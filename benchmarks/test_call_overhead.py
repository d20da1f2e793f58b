"""What the drop-in costs on small single matrices: ``hetlapack.linalg`` beside ``scipy.linalg`` (and hetlapack's
NumPy shim beside ``numpy.linalg``) where dispatch keeps the call on SciPy's own host path, float64.

Each call asks dispatch for a plan before SciPy runs; the ratio within a group is that overhead. A decision is
priced once per request and options, so a repeated call costs a lookup.

``test_small_stack`` times what a small stack costs (10 matrices of order 4, a Kalman filter's step): there the
batched path's fixed cost per call, its Python checks and the kernel's launch, is most of the time, against SciPy's
batch loop and NumPy's gufuncs.

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_call_overhead.py --benchmark-only``.
"""

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack.linalg as hla
from hetlapack.compat import numpy_linalg as hnp
from hetlapack.testing import general, random_matrix, spd

SIZES = [4, 32, 128]
CALLS = {
    "cholesky": (spd, sl.cholesky, hla.cholesky),
    "lu_factor": (general, sl.lu_factor, hla.lu_factor),
    "qr": (general, sl.qr, hla.qr),
    "numpy cholesky": (spd, np.linalg.cholesky, hnp.cholesky),
}


@pytest.fixture(scope="module", params=[(name, n) for name in CALLS for n in SIZES],
                ids=lambda p: f"{p[0]}-n={p[1]}")
def case(request):
    name, n = request.param
    return name, n, CALLS[name][0](n)


@pytest.mark.parametrize("library", ["peer", "hetlapack"])
def test_small_call(benchmark, case, library):
    name, n, a = case
    function = CALLS[name][1 if library == "peer" else 2]
    benchmark.group = f"{name} call n={n}"
    who = ("numpy" if name.startswith("numpy") else "scipy") if library == "peer" else "hetlapack"
    benchmark.extra_info.update(n=n, library=library, peer=who)  # peer: whom hetlapack bench prints ratios against
    benchmark(function, a)


#: The stack of :func:`test_small_stack`: matrices, order.
STACK, ORDER = 10, 4


def _stack_operands(name: str) -> tuple:
    """The arguments of ``name`` on a stack: the matrices, or for a solve its factors and right-hand sides."""
    a = spd(ORDER, batch=(STACK,)) if name.startswith("cho") else general(ORDER, batch=(STACK,))
    b = random_matrix((STACK, ORDER, 1), seed=1)
    if name == "cho_solve":
        return sl.cho_factor(a), b
    if name == "lu_solve":
        return sl.lu_factor(a), b
    return (a,)


#: Per call on a small stack: SciPy's function, hetlapack's, and NumPy's where it has one.
STACK_CALLS = {
    "cholesky": (sl.cholesky, hla.cholesky, np.linalg.cholesky),
    "lu_factor": (sl.lu_factor, hla.lu_factor, None),
    "qr": (sl.qr, hla.qr, np.linalg.qr),
    "cho_solve": (sl.cho_solve, hla.cho_solve, None),
    "lu_solve": (sl.lu_solve, hla.lu_solve, None),
}


@pytest.mark.parametrize("library", ["scipy", "numpy", "hetlapack"])
@pytest.mark.parametrize("name", list(STACK_CALLS))
def test_small_stack(benchmark, name, library):
    function = STACK_CALLS[name][("scipy", "hetlapack", "numpy").index(library)]
    if function is None:
        pytest.skip(f"NumPy has no {name}")
    benchmark.group = f"{name} of {STACK} matrices of order {ORDER}"
    benchmark.extra_info.update(n=ORDER, batch=STACK, library=library, peer=library)
    benchmark(function, *_stack_operands(name))
