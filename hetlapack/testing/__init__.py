"""Matrix generators and LAPACK-style residual checks, shared by tests, benchmarks and users, and the environment
of the child processes they start."""

from .environment import ONE_BLAS_THREAD, RANKS_YIELD
from .matrices import general, ill_conditioned, layouts, random_matrix, singular, spd
from .residuals import cholesky_residual, lu_residual, orthogonality_residual, qr_residual

__all__ = [
    "ONE_BLAS_THREAD",
    "RANKS_YIELD",
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
