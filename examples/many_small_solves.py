"""A million 8x8 solves: a stack goes through hetlapack's batched kernels with SciPy's batch semantics.

Run: python examples/many_small_solves.py [count]
"""

import sys
import time

import numpy as np
import scipy.linalg

import hetlapack
import hetlapack.linalg as la


def main(count: int = 1_000_000, n: int = 8) -> float:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((count, n, n)) + n * np.eye(n)
    b = rng.standard_normal((count, n, 1))
    print(hetlapack.explain("lu_factor", a).reason)
    start = time.perf_counter()
    x = la.lu_solve(la.lu_factor(a), b)
    seconds = time.perf_counter() - start
    residual = float(np.max(np.abs(a @ x - b)))
    print(f"{count} solves of order {n} in {seconds:.2f} s ({1e9 * seconds / count:.0f} ns each), "
          f"max residual {residual:.1e}")
    if count <= 20_000:
        start = time.perf_counter()
        scipy.linalg.lu_solve(scipy.linalg.lu_factor(a), b)
        print(f"scipy.linalg on the same stack: {time.perf_counter() - start:.2f} s")
    return residual


if __name__ == "__main__":
    assert main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000) < 1e-8
