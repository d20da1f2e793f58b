#!/usr/bin/env python3
"""The call users make, timed side by side: scipy.linalg.X(a) against hetlapack.linalg.X(a) on a C-ordered NumPy
array with default flags (and, as a second row, a Fortran-ordered copy), alternating in one process, best of reps.

Run on a quiet machine, with OpenBLAS on its own kernels:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/users_call.py \
        [--sizes 500,1000,2000,4000,8000] [--ops ...]
Prints one line per case: SciPy's and hetlapack's milliseconds, the ratio (SciPy / hetlapack: above 1, hetlapack is
faster), the path dispatch took, and the same-run DGEMM rate, CPU model and OpenBLAS kernel.
"""
import argparse
import platform
import time

import numpy as np
import scipy
import scipy.linalg as sla
from threadpoolctl import threadpool_info

import hetlapack
import hetlapack.linalg as hl

OPS = {  # name: (matrix kind, the call on a module (scipy.linalg or hetlapack.linalg), explain's op and keywords)
    "cholesky": ("spd", lambda m, x: m.cholesky(x, lower=True), "cholesky", {}),
    "cho_factor": ("spd", lambda m, x: m.cho_factor(x), "cho_factor", {}),
    "lu_factor": ("general", lambda m, x: m.lu_factor(x), "lu_factor", {}),
    "qr_economic": ("general", lambda m, x: m.qr(x, mode="economic"), "qr", {"mode": "economic"}),
    "qr_r": ("general", lambda m, x: m.qr(x, mode="r"), "qr", {"mode": "r"}),
    "lu": ("general", lambda m, x: m.lu(x), "lu", {}),
}


def best(f, reps):
    t = float("inf")
    for _ in range(reps):
        s = time.perf_counter(); f(); t = min(t, time.perf_counter() - s)
    return t


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="500,1000,2000,4000")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    kernels = sorted({str(i.get("architecture")) for i in threadpool_info() if i["internal_api"] == "openblas"})
    print(f"# {cpu_model()}; OpenBLAS kernels {kernels}; SciPy {scipy.__version__}; NumPy {np.__version__}; "
          f"hetlapack {getattr(hetlapack, '__version__', '?')}")
    rng = np.random.default_rng(0)
    for n in (int(s) for s in args.sizes.split(",")):
        g = rng.standard_normal((n, n))
        spd = g @ g.T + n * np.eye(n)
        dgemm = 2 * n**3 / best(lambda: g @ g, 3) / 1e9
        for op in args.ops.split(","):
            kind, call, name, options = OPS[op]
            a = spd if kind == "spd" else g
            for layout, x in (("C", a), ("F", np.asfortranarray(a))):
                call(sla, x); call(hl, x)  # warm-up: numba caches, thread pools, first-touch
                ts, th = float("inf"), float("inf")
                for _ in range(args.reps):  # alternate, so that drift hits both
                    ts = min(ts, best(lambda: call(sla, x), 1))
                    th = min(th, best(lambda: call(hl, x), 1))
                path = hetlapack.explain(name, x, **options).path
                print(f"n={n:5d} {op:12s} {layout}  scipy {ts * 1e3:10.3f} ms  hetlapack {th * 1e3:10.3f} ms  "
                      f"ratio {ts / th:5.2f}x  path {path:7s}  dgemm {dgemm:5.0f} GF/s", flush=True)


if __name__ == "__main__":
    main()
