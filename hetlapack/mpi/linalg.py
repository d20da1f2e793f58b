"""SciPy-named distributed factorizations and solves: every rank calls them collectively.

Arguments, defaults, results, warnings and error texts follow ``scipy.linalg``; matrices are
:class:`~hetlapack.mpi.DistributedMatrix`. Errors are raised on every rank, never on one alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning

from ..contract.arrays import check_scipy_qr_mode, getrs_square_error, getrs_trans, potrs_lower, scipy_qr_sizes
from ..contract.scipy_rules import empty_result_dtypes, warn_dtypes_as_scipy
from ..dtypes import lapack_dtype
from ..pivots import check_pivots
from . import solve as _solve
from ._comm import agree_arguments, agreed
from .geqrf import form_q, geqrf
from .getrf import getrf
from .matrix import DistributedMatrix
from .potrf import potrf

__all__ = ["cholesky", "lu_factor", "qr", "cho_solve", "lu_solve", "LinAlgError", "LinAlgWarning"]


def _agree_call(a: DistributedMatrix, **arguments) -> None:
    """Collective: check that ``a`` is distributed and that every rank passes the same layout and ``arguments``.

    Done before any check that could raise on some ranks only, so a mismatch raises on every rank instead of
    leaving ranks in different collectives.
    """
    if not isinstance(a, DistributedMatrix):
        raise TypeError(f"expected a DistributedMatrix, got {type(a).__name__}")
    agree_arguments(a.grid.comm, a=a.layout, **arguments)


def _check_finite(comm, *arrays: np.ndarray) -> None:
    """Collective: SciPy's ``ValueError`` on every rank when any rank's ``arrays`` hold an inf or a NaN (only
    floating and complex arrays are looked at, as ``numpy.asarray_chkfinite`` does)."""
    with agreed(comm):
        if not all(array.dtype.kind not in "fc" or np.isfinite(array).all() for array in arrays):
            raise ValueError("array must not contain infs or NaNs")


def _prepared(a: DistributedMatrix, overwrite_a: bool, check_finite: bool) -> DistributedMatrix:
    """Check ``a``'s entries on every rank (``check_finite``) and copy it unless overwriting is allowed."""
    if check_finite:
        _check_finite(a.grid.comm, a.local)
    if a.dtype.char in "fdFD":
        return a if overwrite_a else a.copy()
    return a.like(a.local.astype(lapack_dtype(a.dtype), order="F"))


def _as_scipy_empty(name: str, a: DistributedMatrix, factors: tuple[DistributedMatrix, ...],
                    **options) -> tuple[DistributedMatrix, ...]:
    """The factors of an empty ``a`` in the dtypes the installed SciPy's ``name`` gives them (``empty_like`` results
    in ``a``'s own dtype up to SciPy 1.17; 1.18's ``qr`` returns LAPACK's dtype), whatever dtype LAPACK computed in."""
    if a.shape[0] * a.shape[1] != 0:
        return factors
    dtypes = empty_result_dtypes(name, a.dtype, **options)
    return tuple(factor.like(factor.local.astype(dtype, order="F"), factor.shape)
                 for factor, dtype in zip(factors, dtypes))


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
        On every rank, with the installed SciPy's text for the global leading minor ``k`` that is not positive
        definite (``"k-th leading minor of the array is not positive definite"`` up to SciPy 1.17).

    Examples
    --------
    >>> L = cholesky(A, lower=True)              # doctest: +SKIP
    >>> l = L.gather(root=0)                     # doctest: +SKIP
    """
    _agree_call(a, lower=lower, overwrite_a=overwrite_a, check_finite=check_finite)
    warn_dtypes_as_scipy("cholesky", a.dtype, stacklevel=2)
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
    _agree_call(a, overwrite_a=overwrite_a, check_finite=check_finite)
    warn_dtypes_as_scipy("lu_factor", a.dtype, stacklevel=2)
    work = _prepared(a, overwrite_a, check_finite)
    pivots, info = getrf(work)
    if info > 0:
        warnings.warn(f"Diagonal number {info} is exactly zero. Singular matrix.", LinAlgWarning, stacklevel=2)
    (lu,) = _as_scipy_empty("lu_factor", a, (work,))
    return lu, pivots


def qr(a: DistributedMatrix, overwrite_a: bool = False, mode: str = "full",
       check_finite: bool = True) -> tuple[DistributedMatrix, ...]:
    """Distributed Householder QR (``scipy.linalg.qr`` without pivoting).

    Parameters
    ----------
    mode : {'full', 'r', 'economic'}
        As SciPy's: ``(Q, R)`` with ``Q`` ``m x m`` or ``m x k`` (economic), or ``(R,)`` for ``'r'``. SciPy's
        ``'raw'`` is refused.

    Returns
    -------
    tuple of DistributedMatrix
        Laid out with ``a``'s grid, blocking and source process. Signs equal SciPy's (LAPACK's ``larfg``).

    Examples
    --------
    >>> Q, R = qr(A, mode="economic")            # doctest: +SKIP
    """
    _agree_call(a, overwrite_a=overwrite_a, mode=mode, check_finite=check_finite)
    check_scipy_qr_mode(mode)
    if mode == "raw":
        raise ValueError("the distributed QR has no 'raw' mode; use 'full', 'r' or 'economic'")
    warn_dtypes_as_scipy("qr", a.dtype, stacklevel=2)
    work = _prepared(a, overwrite_a, check_finite)
    t_factors = geqrf(work)
    q_cols, r_rows = scipy_qr_sizes(mode, *work.shape)
    n = work.shape[1]
    r_local = np.array(work.local[:work.local_rows_from(r_rows)], order="F")
    r_factor = DistributedMatrix(work.grid, (r_rows, n), work.block, r_local, work.src)
    r_local[r_factor.rows[:, None] > r_factor.cols[None, :]] = 0
    if mode == "r":
        return _as_scipy_empty("qr", a, (r_factor,), mode=mode)
    return _as_scipy_empty("qr", a, (form_q(work, t_factors, q_cols), r_factor), mode=mode)


def _described(b) -> str:
    """What every rank must agree on about a right-hand side: distributed or not, its shape (layout) and dtype."""
    if isinstance(b, DistributedMatrix):
        return f"DistributedMatrix {b.layout}"
    return f"array of shape {b.shape} and dtype {b.dtype.name}"


def _check_rhs_shape(shape: tuple, n: int, mismatch: Callable[[tuple], str]) -> None:
    """SciPy's ``ValueError(mismatch(shape))`` for a ``b`` whose rows do not fit the factor (of a stack: its last two
    axes, as SciPy's batch loop sees them); a stack that fits is refused too, the distributed solve takes one system.
    """
    core = shape[-2:] if len(shape) > 2 else shape
    if not core or core[0] != n:
        raise ValueError(mismatch(core))
    if len(shape) > 2:
        raise ValueError(f"b must be 1-D or 2-D for the distributed solve, got shape {shape}")


def _rhs(name: str, b, factor: DistributedMatrix, mismatch: Callable[[tuple], str], check_finite: bool,
         check_factor: bool = False, **arguments) -> np.ndarray:
    """The right-hand side replicated on every rank, as a Fortran-ordered 2-D array of the common dtype.

    One agreement first: every rank passes the same kind, shape and dtype of ``b`` and the same ``arguments`` (so a
    ``b`` that only the root holds raises the agreement's error). Then SciPy's dtype warnings for ``name``, and its
    checks, on every rank, in its order: non-finite entries in ``b`` (with ``check_factor`` in the factor too) when
    ``check_finite``, a factor that is not square (with ``check_factor``, as ``cho_solve``), and a ``b`` that does
    not fit.
    """
    comm, n = factor.grid.comm, factor.shape[0]
    distributed = isinstance(b, DistributedMatrix)
    full = b if distributed else np.asarray(b)
    agree_arguments(comm, factor=factor.layout, b=_described(full), check_finite=check_finite, **arguments)
    warn_dtypes_as_scipy(name, factor.dtype, full.dtype, stacklevel=3)
    dtype = lapack_dtype(factor.dtype, full.dtype)
    if distributed:
        full = _solve.replicate(b, dtype)
    if check_finite:
        _check_finite(comm, full, *((factor.local,) if check_factor else ()))
    if check_factor and factor.shape[0] != factor.shape[1]:
        raise ValueError("The factored matrix c is not square.")
    _check_rhs_shape(full.shape, n, mismatch)
    columns = int(np.prod(full.shape[1:]))
    return np.array(full.reshape(n, columns), dtype=dtype, order="F")


def _result(b, x: np.ndarray):
    """Return ``x`` distributed like ``b`` when ``b`` was distributed, else as ``b``'s shape on every rank."""
    if isinstance(b, DistributedMatrix):
        return DistributedMatrix.from_replicated(x, grid=b.grid, block=b.block, src=b.src)
    return x.reshape(np.shape(b))


def cho_solve(c_and_lower: tuple[DistributedMatrix, bool], b: DistributedMatrix | ArrayLike,
              overwrite_b: bool = False, check_finite: bool = True) -> DistributedMatrix | np.ndarray:
    """Solve ``A x = b`` from :func:`cholesky`'s factor (``scipy.linalg.cho_solve``).

    ``b`` is a ``DistributedMatrix`` (result distributed the same way) or a 1-D or 2-D array that every rank holds
    (result on every rank). The right-hand side is replicated during the solve; the factor never moves.
    ``check_finite`` checks ``b`` and the factor, as SciPy's; ``b`` is never overwritten (``overwrite_b`` only
    permits it).
    """
    c, lower = c_and_lower
    x = _rhs("cho_solve", b, c, lambda shape: f"incompatible dimensions ({c.shape} and {shape})", check_finite,
             check_factor=True, lower=lower, overwrite_b=overwrite_b)
    lower = potrs_lower(x.dtype, lower, overwrite_b) if x.size else True  # as SciPy's potrs reads it
    first, second = ((True, 0), (True, 2)) if lower else ((False, 2), (False, 0))
    _solve.trsm(c, x, lower=first[0], trans=first[1])
    _solve.trsm(c, x, lower=second[0], trans=second[1])
    return _result(b, x)


def _check_pivots(pivots, n: int) -> None:
    """Refuse pivots that are not one per row of an order-``n`` factor or that name no row of it (SciPy's own call
    would write outside ``b``)."""
    if np.shape(pivots) != (n,):
        raise ValueError(f"lu_solve: pivots of shape {np.shape(pivots)} do not match the LU factor of order {n}")
    check_pivots(pivots, n)


def lu_solve(lu_and_piv: tuple[DistributedMatrix, np.ndarray], b: DistributedMatrix | ArrayLike, trans: int = 0,
             overwrite_b: bool = False, check_finite: bool = True) -> DistributedMatrix | np.ndarray:
    """Solve ``op(A) x = b`` from :func:`lu_factor`'s result (``scipy.linalg.lu_solve``; ``trans`` 0, 1 or 2).

    ``b`` as in :func:`cho_solve`; ``check_finite`` checks ``b`` only, as SciPy's.
    """
    lu, pivots = lu_and_piv
    x = _rhs("lu_solve", b, lu, lambda shape: f"Shapes of lu {lu.shape} and b {shape} are incompatible", check_finite,
             trans=trans, overwrite_b=overwrite_b)
    if not x.size:  # SciPy returns an empty solution before its getrs call reads the flags, factor or pivots
        return _result(b, x)
    trans = getrs_trans(x.dtype, trans, overwrite_b)
    if lu.shape[0] != lu.shape[1]:
        getrs_square_error(x.dtype)
    with agreed(lu.grid.comm):  # pivots are each rank's own: one rank's bad ones must stop every rank
        _check_pivots(pivots, lu.shape[0])
    if trans == 0:
        _solve.permute_rows(x, pivots)
        _solve.trsm(lu, x, lower=True, unit_diagonal=True)
        _solve.trsm(lu, x, lower=False)
    else:
        _solve.trsm(lu, x, lower=False, trans=trans)
        _solve.trsm(lu, x, lower=True, trans=trans, unit_diagonal=True)
        _solve.permute_rows(x, pivots, inverse=True)
    return _result(b, x)
