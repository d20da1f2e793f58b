"""SciPy-named distributed factorizations and solves: every rank calls them collectively.

Arguments, defaults, results, warnings and error texts follow ``scipy.linalg``; matrices are
:class:`~hetlapack.mpi.DistributedMatrix`. Errors are raised on every rank, never on one alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning

from ..dtypes import lapack_dtype
from . import solve as _solve
from ._comm import agreed
from .geqrf import form_q, geqrf
from .getrf import getrf
from .matrix import DistributedMatrix
from .potrf import potrf

__all__ = ["cholesky", "lu_factor", "qr", "cho_solve", "lu_solve", "LinAlgError", "LinAlgWarning"]

_QR_MODES = ("full", "r", "economic")


def _prepared(a: DistributedMatrix, overwrite_a: bool, check_finite: bool) -> DistributedMatrix:
    """Validate ``a`` on every rank (non-finite entries raise everywhere) and copy it unless overwriting is allowed."""
    if not isinstance(a, DistributedMatrix):
        raise TypeError(f"expected a DistributedMatrix, got {type(a).__name__}")
    with agreed(a.grid.comm):
        if check_finite and not np.isfinite(a.local).all():
            raise ValueError("array must not contain infs or NaNs")
    if a.dtype.char in "fdFD":
        return a if overwrite_a else a.copy()
    return a.like(a.local.astype(lapack_dtype(a.dtype), order="F"))


def cholesky(a: DistributedMatrix, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> DistributedMatrix:
    """Distributed Cholesky factor of a Hermitian positive definite matrix (``scipy.linalg.cholesky``).

    Parameters
    ----------
    a : DistributedMatrix
        Square, square blocks; only the ``lower`` (or upper) triangle is read.
    lower : bool
        Return ``L`` with ``A = L L^H`` instead of ``U`` with ``A = U^H U``.
    overwrite_a, check_finite : bool
        As SciPy's.

    Returns
    -------
    DistributedMatrix
        The factor, the other triangle zero, laid out as ``a``.

    Raises
    ------
    LinAlgError
        On every rank: ``"k-th leading minor of the array is not positive definite"`` (global ``k``).

    Examples
    --------
    >>> L = cholesky(A, lower=True)              # doctest: +SKIP
    >>> l = L.gather(root=0)                     # doctest: +SKIP
    """
    work = _prepared(a, overwrite_a, check_finite)
    potrf(work, lower=lower)
    return work


def lu_factor(a: DistributedMatrix, overwrite_a: bool = False,
              check_finite: bool = True) -> tuple[DistributedMatrix, np.ndarray]:
    """Distributed LU with partial pivoting (``scipy.linalg.lu_factor``).

    Returns
    -------
    lu : DistributedMatrix
        ``L`` (unit diagonal implied) below the diagonal and ``U`` on and above it, laid out as ``a``.
    piv : numpy.ndarray of int32
        Global 0-based LAPACK pivots, identical on every rank and equal to SciPy's.

    Warns
    -----
    LinAlgWarning
        On every rank when ``U`` has an exactly zero diagonal entry, with SciPy's text.

    Examples
    --------
    >>> lu, piv = lu_factor(A)                   # doctest: +SKIP
    """
    work = _prepared(a, overwrite_a, check_finite)
    pivots, info = getrf(work)
    if info > 0:
        warnings.warn(f"Diagonal number {info} is exactly zero. Singular matrix.", LinAlgWarning, stacklevel=2)
    return work, pivots


def qr(a: DistributedMatrix, overwrite_a: bool = False, mode: str = "full", check_finite: bool = True):
    """Distributed Householder QR (``scipy.linalg.qr`` without pivoting).

    Parameters
    ----------
    mode : {'full', 'r', 'economic'}
        As SciPy's: ``(Q, R)`` with ``Q`` ``m x m`` or ``m x k`` (economic), or ``(R,)`` for ``'r'``.

    Returns
    -------
    tuple of DistributedMatrix
        Laid out with ``a``'s grid, blocking and source process. Signs equal SciPy's (LAPACK's ``larfg``).

    Examples
    --------
    >>> Q, R = qr(A, mode="economic")            # doctest: +SKIP
    """
    if mode not in _QR_MODES:
        raise ValueError(f"Mode argument should be one of {list(_QR_MODES)}; the distributed QR has no 'raw' mode")
    work = _prepared(a, overwrite_a, check_finite)
    t_factors = geqrf(work)
    m, n = work.shape
    r_rows = min(m, n) if mode == "economic" else m
    r_local = np.array(work.local[:work.local_rows_from(r_rows)], order="F")
    r_factor = DistributedMatrix(work.grid, (r_rows, n), work.block, r_local, work.src)
    r_local[r_factor.rows[:, None] > r_factor.cols[None, :]] = 0
    if mode == "r":
        return (r_factor,)
    return form_q(work, t_factors, min(m, n) if mode == "economic" else m), r_factor


def _rhs(b, factor: DistributedMatrix, mismatch: Callable[[tuple], str]) -> np.ndarray:
    """The right-hand side replicated on every rank, as a Fortran-ordered 2-D array of the common dtype.

    A ``b`` of the wrong shape on any rank (``None`` where only the root holds it) raises ``ValueError(mismatch(its
    shape))``, SciPy's text, on every rank.
    """
    comm, n = factor.grid.comm, factor.shape[0]
    distributed = comm.allgather(isinstance(b, DistributedMatrix))
    if any(distributed) and not all(distributed):
        raise ValueError("b must be a DistributedMatrix on every rank or on none")
    full = _solve.replicate(b) if distributed[0] else None
    with agreed(comm):
        full = np.asarray(b) if full is None else full
        if full.ndim == 0 or full.shape[0] != n:
            raise ValueError(mismatch(full.shape))
    columns = int(np.prod(full.shape[1:]))
    return np.array(full.reshape(n, columns), dtype=lapack_dtype(factor.dtype, full.dtype), order="F")


def _result(b, x: np.ndarray):
    """Return ``x`` distributed like ``b`` when ``b`` was distributed, else as ``b``'s shape on every rank."""
    if isinstance(b, DistributedMatrix):
        return DistributedMatrix.from_replicated(x, grid=b.grid, block=b.block, src=b.src)
    return x.reshape(np.shape(b))


def cho_solve(c_and_lower: tuple[DistributedMatrix, bool], b) -> DistributedMatrix | np.ndarray:
    """Solve ``A x = b`` from :func:`cholesky`'s factor (``scipy.linalg.cho_solve``).

    ``b`` is a ``DistributedMatrix`` (result distributed the same way) or an array that every rank holds (result
    on every rank). The right-hand side is replicated during the solve; the factor never moves.
    """
    c, lower = c_and_lower
    x = _rhs(b, c, lambda shape: f"incompatible dimensions ({c.shape} and {shape})")
    first, second = ((True, 0), (True, 2)) if lower else ((False, 2), (False, 0))
    _solve.trsm(c, x, lower=first[0], trans=first[1])
    _solve.trsm(c, x, lower=second[0], trans=second[1])
    return _result(b, x)


def lu_solve(lu_and_piv: tuple[DistributedMatrix, np.ndarray], b, trans: int = 0) -> DistributedMatrix | np.ndarray:
    """Solve ``op(A) x = b`` from :func:`lu_factor`'s result (``scipy.linalg.lu_solve``; ``trans`` 0, 1 or 2)."""
    lu, pivots = lu_and_piv
    if trans not in (0, 1, 2):
        raise ValueError("trans must be 0, 1 or 2")
    x = _rhs(b, lu, lambda shape: f"Shapes of lu {lu.shape} and b {shape} are incompatible")
    if trans == 0:
        _solve.permute_rows(x, pivots)
        _solve.trsm(lu, x, lower=True, unit_diagonal=True)
        _solve.trsm(lu, x, lower=False)
    else:
        _solve.trsm(lu, x, lower=False, trans=trans)
        _solve.trsm(lu, x, lower=True, trans=trans, unit_diagonal=True)
        _solve.permute_rows(x, pivots, inverse=True)
    return _result(b, x)
