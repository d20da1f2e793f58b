"""Scaled backward errors in the working precision, as LAPACK's and PLASMA's testers measure them.

Each returns ``||A - factors||_1 / (n ||A||_1 eps)`` (or ``||Q^H Q - I||_1 / (n eps)``); values below ~50 pass.
"""

from __future__ import annotations

import numpy as np


def _eps(a: np.ndarray) -> float:
    return float(np.finfo(a.dtype).eps)


def _norm1(a: np.ndarray) -> float:
    """``||a||_1``; 0 for an empty matrix, which NumPy 2.0's ``norm`` refuses."""
    return float(np.linalg.norm(a, 1)) if a.size else 0.0


def _scaled(diff: np.ndarray, ref: np.ndarray, n: int) -> float:
    ref_norm = _norm1(ref) or 1.0
    return _norm1(diff) / (max(n, 1) * ref_norm * _eps(ref))


def cholesky_residual(a: np.ndarray, c: np.ndarray, lower: bool) -> float:
    """Residual of a Cholesky factor ``c`` (only its ``lower``/upper triangle is used)."""
    a = np.asarray(a)
    c = np.tril(c) if lower else np.triu(c)
    recon = c @ c.conj().T if lower else c.conj().T @ c
    hermitian = np.tril(a) + np.tril(a, -1).conj().T if lower else np.triu(a) + np.triu(a, 1).conj().T
    return _scaled(hermitian.astype(np.result_type(a, c)) - recon, a.astype(c.dtype), a.shape[-1])


def lu_residual(a: np.ndarray, lu: np.ndarray, piv: np.ndarray) -> float:
    """Residual ``||P A - L U||`` of a packed LU factorization with 0-based LAPACK pivots."""
    a = np.asarray(a, dtype=lu.dtype)
    m, n = a.shape
    k = min(m, n)
    perm = np.arange(m)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    lower = np.tril(lu[:, :k], -1) + np.eye(m, k, dtype=lu.dtype)
    upper = np.triu(lu[:k, :])
    return _scaled(a[perm] - lower @ upper, a, max(m, n))


def qr_residual(a: np.ndarray, q: np.ndarray, r: np.ndarray) -> float:
    """Residual ``||A - Q R||``."""
    a = np.asarray(a, dtype=q.dtype)
    return _scaled(a - q @ r, a, max(a.shape))


def orthogonality_residual(q: np.ndarray) -> float:
    """``||Q^H Q - I||_1 / (n eps)`` for the columns of ``q``."""
    k = q.shape[-1]
    return _norm1(q.conj().T @ q - np.eye(k)) / (max(q.shape[0], 1) * _eps(q))
