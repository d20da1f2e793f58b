"""Matrix generators and LAPACK-style residual checks, shared by tests, benchmarks and users."""

from .matrices import general, ill_conditioned, layouts, random_matrix, singular, spd
from .residuals import cholesky_residual, lu_residual, orthogonality_residual, qr_residual

__all__ = [
    "general",
    "ill_conditioned",
    "layouts",
    "random_matrix",
    "singular",
    "spd",
    "cholesky_residual",
    "lu_residual",
    "orthogonality_residual",
    "qr_residual",
]
