"""Errors the algorithms raise, which carry what the shims need to give SciPy's text for the installed release."""

from __future__ import annotations

from numpy.linalg import LinAlgError


class NotPositiveDefinite(LinAlgError):
    """A Cholesky factorization met a leading minor that is not positive definite (``minor``, 1-based, global)."""

    def __init__(self, minor: int) -> None:
        super().__init__(f"leading minor {minor} is not positive definite")
        self.minor = minor
