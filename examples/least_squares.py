"""Least squares by QR with hetlapack: fit a polynomial to noisy data, as with scipy.linalg.qr.

Run: python examples/least_squares.py [m]
"""

import sys

import numpy as np
from scipy.linalg import solve_triangular

import hetlapack
import hetlapack.linalg as la


def main(m: int = 4000, degree: int = 8) -> float:
    rng = np.random.default_rng(1)
    t = np.linspace(-1, 1, m)
    coefficients = rng.standard_normal(degree + 1)
    b = np.polynomial.chebyshev.chebval(t, coefficients) + 1e-3 * rng.standard_normal(m)
    a = np.polynomial.chebyshev.chebvander(t, degree)
    print(hetlapack.explain("qr", a).reason)
    q, r = la.qr(a, mode="economic")
    x = solve_triangular(r, q.T @ b)
    error = float(np.max(np.abs(x - coefficients)))
    print(f"recovered {degree + 1} coefficients from {m} samples, max error {error:.2e}")
    return error


if __name__ == "__main__":
    assert main(int(sys.argv[1]) if len(sys.argv) > 1 else 4000) < 1e-2
