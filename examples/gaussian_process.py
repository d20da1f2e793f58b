"""Gaussian-process regression with hetlapack as a drop-in for scipy.linalg (cho_factor / cho_solve).

Run: python examples/gaussian_process.py [n_train]
"""

import sys

import numpy as np

import hetlapack
import hetlapack.linalg as la


def rbf_kernel(x: np.ndarray, y: np.ndarray, length: float = 0.3) -> np.ndarray:
    return np.exp(-0.5 * (x[:, None] - y[None, :]) ** 2 / length**2)


def main(n_train: int = 2000) -> float:
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 2 * np.pi, n_train))
    y = np.sin(x) + 0.05 * rng.standard_normal(n_train)
    k = rbf_kernel(x, x) + 0.05**2 * np.eye(n_train)
    print(hetlapack.explain("cho_factor", k))
    factor = la.cho_factor(k, lower=True)
    alpha = la.cho_solve(factor, y)
    x_test = np.linspace(0.5, 5.5, 50)
    mean = rbf_kernel(x_test, x) @ alpha
    error = float(np.max(np.abs(mean - np.sin(x_test))))
    print(f"GP posterior mean vs sin(x): max error {error:.3f} with {n_train} points")
    return error


if __name__ == "__main__":
    assert main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000) < 0.1
