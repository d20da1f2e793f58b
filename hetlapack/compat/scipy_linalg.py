"""SciPy-exact ``cholesky``, ``cho_factor``, ``cho_solve``, ``qr``, ``lu_factor``, ``lu_solve`` and ``lu``.

Each public function has SciPy's signature. It asks :func:`hetlapack.dispatch.choose` for a plan; the host path is
SciPy's own function (captured at import), the batched and hybrid paths convert the input exactly as SciPy does and
shape the result as SciPy returns it. CuPy arguments go to :mod:`._cupy` and stay on their GPU.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import NamedTuple

import numpy as np

from ..dispatch import Plan, choose
from ..dispatch.paths import BATCHED, HOST
from ..dispatch.paths.batched import compiled_kernels_unusable
from ..dtypes import lapack_dtype
from ..pivots import pivot_outside, refuse_pivot, rows_named
from ._request import on_host_at_once, request
from ..contract.arrays import (broadcast, check_flags, check_scipy_qr_mode, is_cupy, native_byte_order, peek,
                               plain_trans, potrs_lower, read_overwrite_flag, scipy_qr_forms_q, scipy_qr_sizes,
                               solve_batch, unshared_overwrite_b, upper_trapezoid, validated)
from ._host import host_cholesky, host_lu, host_lu_factor, host_qr, scipy_lu
from ..contract.finite import all_finite
from ..contract.originals import scipy_functions as _scipy
from ..contract.scipy_rules import (QR_LWORK_DEFAULT, cho_factor_cleans, cho_factor_flags, cholesky_as_scipy,
                                    cholesky_lower, dtype_warned_at_caller, dtype_warns, fortran_in_place,
                                    fortran_result, in_place_shape, qr_lwork_deprecation, raise_first_failure,
                                    refuse_flags, refuses_dtype, scipy_container, scipy_returns, stack_loop,
                                    warn_dtypes_as_scipy, warn_singular)

def _on_gpu():
    """The CuPy boundary (imported on the first CuPy argument)."""
    from . import _cupy  # noqa: PLC0415 - only for CuPy arrays

    return _cupy


def plan_call(op: str, a, check_finite: bool = True, features: tuple[str, ...] = (),
              loop: str | None = None, forms_q: bool = False) -> tuple[Plan, object, np.dtype]:
    """Dispatch's plan for a call on ``a`` (with ``check_finite=False``, SciPy's own call for a NumPy matrix that
    holds infinities or NaNs where the plan would tile it: only LAPACK's own kernels place them as SciPy does), the
    array to pass on and the dtype LAPACK computes in; ``loop`` and ``forms_q`` as for :func:`._request.request`."""
    req, arr = request(op, a, features=features, loop=loop, forms_q=forms_q)
    plan = choose(req)
    if (plan.runner.reorders_arithmetic and not check_finite and isinstance(arr, np.ndarray)
            and not all_finite(arr)):
        plan = dataclasses.replace(plan, path=HOST.name, reason="infinities or NaNs with check_finite=False: SciPy's "
                                   "own LAPACK call places them in the factors as SciPy does")
    return plan, arr, req.dtype


def qr_route(a, mode: str, pivoting: bool, lwork) -> tuple[str, tuple[str, ...], bool]:
    """The operation a ``qr`` call on ``a`` asks dispatch for (``geqp3`` with column pivoting, else ``geqrf``), the
    options of the call that only SciPy's own function (the host path) implements (``lwork``, and ``mode='raw'`` on
    a stack: SciPy's own batch loop raises there), and whether it forms Q (:func:`scipy_qr_forms_q`).
    SciPy's ``ValueError`` for an invalid mode comes before anything else, as in SciPy, whatever path is forced."""
    check_scipy_qr_mode(mode)
    op = "geqp3" if pivoting else "geqrf"
    host_only = (("lwork", lwork is not QR_LWORK_DEFAULT), ("mode='raw' on a stack", mode == "raw" and np.ndim(a) > 2))
    return op, tuple(name for name, used in host_only if used), scipy_qr_forms_q(mode)


def lu_features(a) -> tuple[str, ...]:
    """``lu`` (P, L, U) of a CuPy array has no GPU route."""
    return ("lu (P, L, U)",) if is_cupy(a) else ()


def _warned_at_caller(name: str, a) -> bool:
    """Whether SciPy's own ``name`` gives its dtype warning for the non-empty ndarray ``a`` at the line that called it
    (:func:`dtype_warned_at_caller`): on the host path, a line of hetlapack's, which the default filters hide. (An
    empty matrix is SciPy's own call's, warning included: SciPy returns it in the dtype it was given.)"""
    return (type(a) is np.ndarray and a.dtype.char not in "fdFD" and a.dtype.kind in "bfc" and a.size > 0
            and dtype_warned_at_caller(name, a.dtype))


class _ScipyCast(NamedTuple):
    """How SciPy's function casts a matrix of a dtype LAPACK does not compute in."""

    warns_first: bool  #: its dtype warning comes before its finiteness check (``lu_factor``'s batch decorator)
    overwrites_cast: bool  #: it may overwrite its cast (``overwrite_a or needs_copy``), else f2py reads the flag


_SCIPY_CASTS = {"lu_factor": _ScipyCast(True, False), "lu": _ScipyCast(False, True), "qr": _ScipyCast(False, True)}


def _scipy_operand(name: str, a, overwrite_a, check_finite, stacklevel: int):
    """``(a, overwrite_a, check_finite)`` for SciPy's own ``name`` on the host path: as given, unless SciPy would
    give its dtype warning at hetlapack's line (:func:`_warned_at_caller`). That warning is then given here,
    ``stacklevel`` frames above the caller, before or after SciPy's finiteness check as SciPy gives it, and SciPy is
    handed ``a`` cast as it casts it, checked, in a dtype it does not warn of, with the flag it would then read
    (:data:`_SCIPY_CASTS`)."""
    if not _warned_at_caller(name, a):
        return a, overwrite_a, check_finite
    cast = _SCIPY_CASTS[name]
    if not cast.warns_first:
        validated(a, check_finite)
    warn_dtypes_as_scipy(name, a.dtype, stacklevel=stacklevel + 1)
    if cast.warns_first:
        validated(a, check_finite)
    return a.astype(lapack_dtype(a.dtype)), (overwrite_a or True) if cast.overwrites_cast else overwrite_a, False


def _host_qr(a, overwrite_a, lwork, mode, pivoting, check_finite):
    """SciPy's ``qr`` on the host path (:func:`host_qr`), its deprecations given at the line that called
    hetlapack's: the dtype's (:func:`_scipy_operand`) and, where SciPy no longer uses ``lwork``
    (:func:`qr_lwork_deprecation`), ``lwork``'s, in SciPy's order: the mode, finiteness, the dtype, the shape, then
    ``lwork``; SciPy's call is then made without it. Where SciPy gives the dtype's itself (an empty matrix, objects),
    it gives both."""
    lwork_deprecation = None if lwork is QR_LWORK_DEFAULT else qr_lwork_deprecation()
    if lwork_deprecation is None and not _warned_at_caller("qr", a):
        return host_qr(a, overwrite_a, lwork, mode, pivoting, check_finite)
    check_scipy_qr_mode(mode)
    a, overwrite_a, check_finite = _scipy_operand("qr", a, overwrite_a, check_finite, stacklevel=3)
    a1 = validated(a, check_finite)
    if (lwork_deprecation is not None and a1.ndim >= 2 and not dtype_warns("qr", a1.dtype)
            and not (lwork is not None and lwork != -1 and lwork <= a1.shape[-2])):
        warnings.warn(lwork_deprecation, DeprecationWarning, stacklevel=3)
        lwork = QR_LWORK_DEFAULT
    return host_qr(a, overwrite_a, lwork, mode, pivoting, check_finite)


def _checked_where_read(plan: Plan, arr, warned_as: str | None) -> bool:
    """Whether the plan's path reads ``check_finite`` where it reads the matrix: where it can, unless SciPy's
    ``warned_as`` gives a dtype warning for ``arr``, which comes after SciPy's own check."""
    return plan.runner.checks_where_read and not (warned_as and dtype_warns(warned_as, arr.dtype))


def _kernel_checked(plan: Plan, arr, check_finite: bool, warned_as: str | None) -> np.ndarray:
    """SciPy's entry conversion: ``asarray_chkfinite``, unless the path checks where it reads the matrix
    (:func:`_checked_where_read`)."""
    return validated(arr, check_finite and not _checked_where_read(plan, arr, warned_as))


def _cholesky(a, lower: bool, overwrite_a: bool, check_finite: bool, clean: bool | None):
    """Common worker of ``cholesky`` and ``cho_factor`` on the accelerated paths: returns (c in SciPy's layout, plan,
    the array read), or ``(None, plan, _)`` for the host path, SciPy's own call. ``clean`` zeroes the other
    triangle; ``None`` does where the installed SciPy's ``cho_factor`` does."""
    plan, arr, dtype = plan_call("potrf", a, check_finite)
    if plan.runner.own_call:
        return None, plan, arr
    a1 = _kernel_checked(plan, arr, check_finite, "cholesky")
    try:
        factor_lower = cholesky_lower(lower, overwrite_a, dtype)
    except Exception:
        validated(arr, check_finite)  # SciPy checks finiteness before it reads the flags
        raise
    if clean is None:
        clean = cho_factor_cleans(arr, dtype, overwrite_a)
    warn_dtypes_as_scipy("cholesky", arr.dtype, stacklevel=3)

    def potrf(operand: np.ndarray, lower_triangle: bool) -> tuple[np.ndarray, np.ndarray]:
        work = plan.runner.operand(operand, a, dtype, bool(overwrite_a))
        return plan.runner.potrf(plan, work, lower_triangle, clean, fortran=True,
                                 check_finite=check_finite and _checked_where_read(plan, arr, "cholesky"))

    in_place = fortran_in_place(arr, dtype, overwrite_a)
    c, info = cholesky_as_scipy(potrf, a1, factor_lower, arr.ndim > 2, in_place)
    raise_first_failure(info)
    return c, plan, arr


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """
    Compute the Cholesky decomposition of a matrix (SciPy-compatible).

    Returns ``L`` with ``A = L L^*`` or ``U`` with ``A = U^* U`` for a Hermitian positive-definite ``A``, exactly
    as :func:`scipy.linalg.cholesky`; large matrices run on hetlapack's tiled runtime and stacks on its batched
    kernels.

    Parameters
    ----------
    a : (..., M, M) array_like
        Matrix (or stack of matrices) to be decomposed.
    lower : bool, optional
        Whether to compute the lower- or upper-triangular factor. Default is upper-triangular.
    overwrite_a : bool, optional
        Whether to overwrite data in `a` (may improve performance).
    check_finite : bool, optional
        Whether to check that the input contains only finite numbers.

    Returns
    -------
    c : (..., M, M) ndarray
        Upper- or lower-triangular Cholesky factor of `a`; the other triangle is zero.

    Raises
    ------
    LinAlgError
        If the matrix is not positive definite (naming the leading minor, as SciPy).
    ValueError
        If `a` is not square or contains infs or NaNs.

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> a = np.array([[4.0, 2.0], [2.0, 5.0]])
    >>> la.cholesky(a, lower=True)
    array([[2., 0.],
           [1., 2.]])
    """
    a, overwrite_a = native_byte_order(a, overwrite_a)
    if on_host_at_once("potrf", a):
        return host_cholesky("cholesky", a, lower, overwrite_a, check_finite)
    if is_cupy(a):
        return _on_gpu().cholesky(a, lower, overwrite_a, check_finite)
    c, _, _ = _cholesky(a, lower, overwrite_a, check_finite, clean=True)
    if c is None:
        return host_cholesky("cholesky", a, lower, overwrite_a, check_finite)
    return c


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """
    Compute the Cholesky decomposition of a matrix, to use in cho_solve (SciPy-compatible).

    As :func:`scipy.linalg.cho_factor`: the triangle not used by the factor holds what the input held there.

    Parameters
    ----------
    a : (..., M, M) array_like
        Matrix (or stack of matrices) to be decomposed.
    lower : bool, optional
        Whether to compute the upper or lower triangular factor (default: upper).
    overwrite_a : bool, optional
        Whether to overwrite data in `a` (may improve performance).
    check_finite : bool, optional
        Whether to check that the input contains only finite numbers.

    Returns
    -------
    c : (..., M, M) ndarray
        Matrix whose upper or lower triangle contains the Cholesky factor of `a`.
    lower : bool or ndarray of bool
        Whether the factor is in the lower triangle (an array of flags for stacks, as SciPy's batch support).

    Raises
    ------
    LinAlgError
        If the matrix is not positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> c, low = la.cho_factor(np.array([[9.0, 3.0], [3.0, 5.0]]))
    >>> la.cho_solve((c, low), np.array([12.0, 8.0]))
    array([1., 1.])
    """
    a, overwrite_a = native_byte_order(a, overwrite_a)
    if on_host_at_once("potrf", a):
        return host_cholesky("cho_factor", a, lower, overwrite_a, check_finite)
    if is_cupy(a):
        return _on_gpu().cho_factor(a, lower, overwrite_a, check_finite)
    c, _, arr = _cholesky(a, lower, overwrite_a, check_finite, clean=None)
    if c is None:
        return host_cholesky("cho_factor", a, lower, overwrite_a, check_finite)
    return scipy_container("cho_factor", arr.ndim > 2)((c, cho_factor_flags(lower, a, arr.shape[:-2])))


def _batched_solve_operands(c, b, check_finite: bool, shapes: tuple[tuple[int, ...], bool] | None):
    """The solve's operands broadcast by SciPy's batch rule (``shapes``, :func:`._arrays.solve_batch`'s of them), or
    None where the batched kernels do not take them."""
    c1, b1 = validated(c, False), validated(b, False)
    if shapes is None or shapes[0] == () or 0 in shapes[0] or b1.size == 0:
        return None
    c1, b1 = validated(c1, check_finite), validated(b1, check_finite)
    batch, vector = shapes
    dtype = lapack_dtype(c1.dtype, b1.dtype)
    n = c1.shape[-1]
    # cast, then broadcast: nothing is copied to the broadcast shape (the kernels gather broadcast factors in pieces)
    c2 = broadcast(c1.astype(dtype, copy=False), batch + c1.shape[-2:])
    b2 = b1[..., None] if vector else b1
    b2 = broadcast(b2.astype(dtype, copy=False), batch + b2.shape[-2:])
    return c2, b2, vector, n


def _batched_solve(op: str, factor, b, check_finite: bool, supported: bool = True, piv=None):
    """(plan, operands) when the solve runs on the batched kernels, else (None, None): SciPy's own call. The plan is
    made for the batch the operands broadcast to: one factor over a stack of right-hand sides is a stack of solves
    (SciPy's batch loop makes one LAPACK call per right-hand side)."""
    if not supported or np.ndim(b) == 0:
        return None, None
    factor = peek(factor)
    shapes = solve_batch(factor.shape, np.shape(b), piv)  # SciPy's batch loop broadcasts before it checks values
    req, factor = request(op, factor, shape=None if shapes is None else shapes[0] + factor.shape[-2:])
    plan = choose(req)
    if plan.runner is not BATCHED:
        return None, None
    return plan, _batched_solve_operands(factor, b, check_finite, shapes)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """
    Solve ``A x = b`` given the Cholesky factorization of ``A`` (SciPy-compatible).

    Parameters
    ----------
    (c, lower) : tuple, (array, bool)
        Cholesky factorization of a, as given by cho_factor.
    b : array
        Right-hand side.
    overwrite_b : bool, optional
        Whether to overwrite data in b (may improve performance).
    check_finite : bool, optional
        Whether to check that the input matrices contain only finite numbers.

    Returns
    -------
    x : array
        The solution to the system ``A x = b``.

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> a = np.array([[9.0, 3.0], [3.0, 5.0]])
    >>> x = la.cho_solve(la.cho_factor(a), np.array([1.0, 2.0]))
    >>> np.allclose(a @ x, [1.0, 2.0])
    True
    """
    c, lower = c_and_lower
    if is_cupy(c) or is_cupy(b):
        return _on_gpu().cho_solve(c_and_lower, b, overwrite_b, check_finite)
    plan, operands = _batched_solve("potrs", c, b, check_finite)
    if operands is None:
        return _scipy["cho_solve"](c_and_lower, b, overwrite_b=unshared_overwrite_b(overwrite_b, c, b),
                                   check_finite=check_finite)
    c2, b2, vector, _ = operands
    warn_dtypes_as_scipy("cho_solve", np.asarray(c).dtype, np.asarray(b).dtype, stacklevel=2)
    x = plan.runner.potrs(plan, c2, b2, potrs_lower(c2.dtype, lower, overwrite_b))
    return np.ascontiguousarray(x[..., 0]) if vector else x


def lu_factor(a, overwrite_a=False, check_finite=True):
    """
    Compute pivoted LU decomposition of a matrix (SciPy-compatible).

    ``A = P L U`` with ``L`` unit lower triangular and ``U`` upper triangular, packed into one array, and LAPACK's
    0-based pivot indices, identical to :func:`scipy.linalg.lu_factor`.

    Parameters
    ----------
    a : (..., M, N) array_like
        Matrix (or stack of matrices) to decompose.
    overwrite_a : bool, optional
        Whether to overwrite data in A (may increase performance).
    check_finite : bool, optional
        Whether to check that the input matrix contains only finite numbers.

    Returns
    -------
    lu : (..., M, N) ndarray
        U in the upper triangle and L (unit diagonal not stored) in the lower triangle.
    piv : (..., K) ndarray of int32
        Pivot indices: row i of the matrix was interchanged with row piv[i]; ``K = min(M, N)``.

    Warns
    -----
    LinAlgWarning
        If a diagonal element of U is exactly zero (the factors are still returned).

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> lu, piv = la.lu_factor(np.array([[2, 5, 8, 7], [5, 2, 2, 8], [7, 5, 6, 6], [5, 4, 4, 8]]))
    >>> piv
    array([2, 2, 3, 3], dtype=int32)
    """
    if on_host_at_once("getrf", a):
        if a.dtype.char not in "fdFD":  # the call users make skips the call (0.2 us of 5 at order 4)
            a, overwrite_a, check_finite = _scipy_operand("lu_factor", a, overwrite_a, check_finite, stacklevel=2)
        return host_lu_factor(a, overwrite_a, check_finite)
    if is_cupy(a):
        return _on_gpu().lu_factor(a, overwrite_a, check_finite)
    plan, arr, dtype = plan_call("getrf", a, check_finite)
    if plan.runner.own_call:
        return host_lu_factor(*_scipy_operand("lu_factor", a, overwrite_a, check_finite, stacklevel=2))
    warn_dtypes_as_scipy("lu_factor", arr.dtype, stacklevel=2)
    refuse_flags("lu_factor", dtype, values=arr if check_finite else None, overwrite_a=overwrite_a)
    a1 = _kernel_checked(plan, arr, check_finite, None)  # its dtype warning came first, as SciPy's does
    stacked = arr.ndim > 2
    lu, piv, info = plan.runner.getrf(plan, plan.runner.operand(a1, a, dtype, overwrite_a),
                                     fortran=fortran_result("lu_factor", stacked), check_finite=check_finite)
    warn_singular(info, stacklevel=2)
    return scipy_returns("lu_factor", (lu, piv.astype(np.int32, copy=False)), stacked,
                         in_place_shape=in_place_shape(arr, dtype, overwrite_a))


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """
    Solve an equation system, ``a x = b``, given the LU factorization of ``a`` (SciPy-compatible).

    Parameters
    ----------
    (lu, piv)
        Factorization of the coefficient matrix a, as given by lu_factor.
    b : array
        Right-hand side.
    trans : {0, 1, 2}, optional
        Type of system to solve: 0 ``a x = b``, 1 ``a^T x = b``, 2 ``a^H x = b``.
    overwrite_b : bool, optional
        Whether to overwrite data in b (may increase performance).
    check_finite : bool, optional
        Whether to check that the input arrays contain only finite numbers.

    Returns
    -------
    x : array
        Solution to the system.

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> a = np.array([[2.0, 5.0], [5.0, 2.0]])
    >>> x = la.lu_solve(la.lu_factor(a), np.array([1.0, 1.0]))
    >>> np.allclose(a @ x, [1.0, 1.0])
    True
    """
    lu, piv = lu_and_piv
    if is_cupy(lu) or is_cupy(b):
        return _on_gpu().lu_solve(lu_and_piv, b, trans, overwrite_b, check_finite)
    n = np.shape(lu)[-1] if np.ndim(lu) else 0
    outside = pivot_outside(piv, n)
    if outside is not None:
        return _refuse_pivots(lu, piv, b, n, outside, trans, overwrite_b, check_finite)
    # SciPy checks b only: the batched kernel does so as it reads it, SciPy's own call checks itself
    plan, operands = _batched_solve("getrs", lu, b, False, supported=plain_trans(trans), piv=piv)
    if operands is None:
        return _scipy["lu_solve"](lu_and_piv, b, trans=trans, overwrite_b=unshared_overwrite_b(overwrite_b, lu, b, piv),
                                  check_finite=check_finite)
    lu2, b2, vector, n = operands
    warn_dtypes_as_scipy("lu_solve", np.asarray(lu).dtype, np.asarray(b).dtype, stacklevel=2)
    piv2 = broadcast(np.asarray(piv), lu2.shape[:-2] + (n,))
    x = plan.runner.getrs(plan, lu2, piv2, b2, trans=trans, check_finite=check_finite)
    check_flags(overwrite_b)  # where SciPy's getrs call reads it: after b's finiteness check
    return np.ascontiguousarray(x[..., 0]) if vector else x


def _refuse_pivots(lu, piv, b, n: int, outside, trans, overwrite_b, check_finite):
    """Refuse pivots that name no row of the factor, once SciPy's own checks (of ``b``, the shapes and the flags)
    have had their turn on pivots that do, where its getrs would have written outside ``b``. An empty ``b`` reads no
    pivot: SciPy's result then."""
    overwrite_b = unshared_overwrite_b(overwrite_b, lu, b, piv)
    x = _scipy["lu_solve"]((lu, rows_named(piv, n)), b, trans=trans, overwrite_b=overwrite_b, check_finite=check_finite)
    if np.size(x):
        refuse_pivot(outside, n)
    return x


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """
    Compute LU decomposition of a matrix with partial pivoting (SciPy-compatible).

    ``A = P @ L @ U`` as :func:`scipy.linalg.lu`, including ``permute_l`` and ``p_indices``.

    Parameters
    ----------
    a : (..., M, N) array_like
        Array to decompose.
    permute_l : bool, optional
        Perform the multiplication P*L (Default: do not permute).
    overwrite_a : bool, optional
        Whether to overwrite data in a (may improve performance).
    check_finite : bool, optional
        Whether to check that the input matrix contains only finite numbers.
    p_indices : bool, optional
        If True the permutation information is returned as row indices.

    Returns
    -------
    (p, l, u) or (pl, u)
        As :func:`scipy.linalg.lu`: the permutation (matrix or indices), unit lower triangular ``l`` of shape
        (M, K) and upper triangular ``u`` of shape (K, N), ``K = min(M, N)``; with ``permute_l``, ``pl = p @ l``.

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> a = np.array([[2.0, 5.0], [5.0, 2.0]])
    >>> p, l, u = la.lu(a)
    >>> np.allclose(p @ l @ u, a)
    True
    """
    a, overwrite_a = native_byte_order(a, overwrite_a)
    loop = stack_loop("lu")  # SciPy loops over a stack in lu otherwise than in lu_factor (getrf's)
    if on_host_at_once("getrf", a, loop=loop):
        if a.dtype.char not in "fdFD":  # as lu_factor's
            a, overwrite_a, check_finite = _scipy_operand("lu", a, overwrite_a, check_finite, stacklevel=2)
        return host_lu(a, permute_l, overwrite_a, check_finite, p_indices)
    plan, arr, dtype = plan_call("getrf", a, check_finite, lu_features(a), loop)
    if (plan.runner.own_call or np.shape(arr)[-2:] == (1, 1) or compiled_kernels_unusable()
            or refuses_dtype("lu", arr.dtype)):
        a, overwrite_a, check_finite = _scipy_operand("lu", a, overwrite_a, check_finite, stacklevel=2)
        return scipy_lu(a, permute_l, overwrite_a, check_finite, p_indices)
    a1 = _kernel_checked(plan, arr, check_finite, "lu")
    warn_dtypes_as_scipy("lu", arr.dtype, stacklevel=2)
    read_overwrite_flag(overwrite_a, a1, a, dtype)
    # SciPy's lu may write into its input (a C-ordered one before 1.18, a Fortran-ordered one since), in a layout of
    # its own; these paths never write into the caller's (the flag permits, it does not require)
    p, lower, upper = plan.runner.lu(plan, plan.runner.operand(a1, a, dtype, overwrite=False), permute_l,
                                     p_matrix=not (permute_l or p_indices), check_finite=check_finite)
    options = {"permute_l": permute_l, "p_indices": p_indices}
    return scipy_returns("lu", (lower, upper) if permute_l else (p, lower, upper), arr.ndim > 2,
                         in_place_shape=in_place_shape(arr, dtype, overwrite_a), **options)


def qr(a, overwrite_a=False, lwork=QR_LWORK_DEFAULT, mode="full", pivoting=False, check_finite=True):
    """
    Compute QR decomposition of a matrix (SciPy-compatible).

    ``A = Q R`` with Q unitary/orthogonal and R upper triangular, exactly as :func:`scipy.linalg.qr` (LAPACK's
    Householder sign convention, every mode). Column pivoting runs LAPACK's ``geqp3`` itself: on the host path for
    one matrix, from compiled code for each matrix of a stack. An explicit ``lwork`` runs on the host path.

    Parameters
    ----------
    a : (..., M, N) array_like
        Matrix to be decomposed.
    overwrite_a : bool, optional
        Whether data in `a` is overwritten (may improve performance).
    lwork : int, optional
        Work array size, lwork >= a.shape[1]. If None or -1, an optimal size is computed.
    mode : {'full', 'r', 'economic', 'raw'}, optional
        Which quantities to return (see :func:`scipy.linalg.qr`).
    pivoting : bool, optional
        Whether or not factorization should include pivoting for rank-revealing qr decomposition.
    check_finite : bool, optional
        Whether to check that the input matrix contains only finite numbers.

    Returns
    -------
    Q : float or complex ndarray
        Of shape (M, M), or (M, K) for ``mode='economic'``. Not returned if ``mode='r'``.
    R : float or complex ndarray
        Of shape (M, N), or (K, N) for ``mode in ['economic', 'raw']``.
    P : int ndarray
        Of shape (N,) for ``pivoting=True``.

    Examples
    --------
    >>> import numpy as np
    >>> import hetlapack.linalg as la
    >>> a = np.array([[3.0, 1.0], [4.0, 2.0]])
    >>> q, r = la.qr(a)
    >>> np.allclose(q @ r, a)
    True
    """
    a, overwrite_a = native_byte_order(a, overwrite_a)
    if on_host_at_once("geqp3" if pivoting else "geqrf", a):
        return _host_qr(a, overwrite_a, lwork, mode, pivoting, check_finite)
    op, features, forms_q = qr_route(a, mode, pivoting, lwork)
    plan, arr, dtype = plan_call(op, a, check_finite, features, forms_q=forms_q)
    if plan.runner.own_call:
        return _host_qr(a, overwrite_a, lwork, mode, pivoting, check_finite)
    refuse_flags("qr", dtype, values=arr if check_finite else None, overwrite_a=overwrite_a)
    a1 = _kernel_checked(plan, arr, check_finite, "qr")
    warn_dtypes_as_scipy("qr", arr.dtype, stacklevel=2)
    work = plan.runner.operand(a1, a, dtype, overwrite_a)
    ncols, rows = scipy_qr_sizes(mode, *work.shape[-2:])
    stacked, options = arr.ndim > 2, {"mode": mode, "pivoting": pivoting}
    if mode == "raw":  # one matrix without pivoting: geqrf's output and tau, R from its first rows, as SciPy's
        packed, tau = plan.runner.geqrf(plan, work, check_finite)
        qr_raw, tau, r = scipy_returns("qr", (packed, tau, upper_trapezoid(packed, rows)), stacked,
                                       in_place_shape=in_place_shape(arr, dtype, overwrite_a), **options)
        return (qr_raw, tau), r
    fortran = fortran_result("qr", stacked, **options)
    if pivoting:  # a stack (one matrix stays on the host path)
        q, r, p = plan.runner.qr_pivoted(plan, work, ncols, rows, fortran=fortran, check_finite=check_finite)
    else:
        (q, r), p = plan.runner.qr(plan, work, ncols, rows, fortran=fortran, check_finite=check_finite,
                                   own=work is not a1), None
    outputs = (r,) if mode == "r" else (q, r)
    return scipy_returns("qr", (*outputs, *(() if p is None else (p,))), stacked,
                         in_place_shape=in_place_shape(arr, dtype, overwrite_a), **options)
