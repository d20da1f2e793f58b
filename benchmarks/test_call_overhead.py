"""What the drop-in costs on small single matrices: ``hetlapack.linalg`` beside ``scipy.linalg`` (and hetlapack's
NumPy shim beside ``numpy.linalg``) where dispatch keeps the call on SciPy's own host path, float64.

Each call asks dispatch for a plan before SciPy runs; the ratio within a group is that overhead. A decision is
priced once per request and options, so a repeated call costs a lookup.

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_call_overhead.py --benchmark-only``.
"""

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack.linalg as hla
from hetlapack.compat import numpy_linalg as hnp
from hetlapack.testing import general, spd

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
