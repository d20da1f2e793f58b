"""Matrix generators, LAPACK-style residual checks and result comparisons, shared by tests, benchmarks and users,
and the environment of the child processes they start."""

from .compare import assert_same_results, result_arrays
from .environment import ONE_BLAS_THREAD, RANKS_YIELD
from .matrices import general, ill_conditioned, layouts, random_matrix, singular, spd
from .residuals import cholesky_residual, lu_residual, orthogonality_residual, qr_residual

__all__ = [
    "ONE_BLAS_THREAD",
    "assert_same_results",
    "result_arrays",
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
