"""Batched factorizations of lists of small matrices of any sizes (MAGMA's *vbatched*): the user API.

Every function takes a sequence of 2-D arrays, which may differ in shape and dtype, and returns a list with one
result per matrix, each what the matching ``scipy.linalg`` function returns for that matrix alone. Internally the
matrices are grouped by shape and dtype, and each group runs through one call of :mod:`hetlapack.batched.kernels`
on the kernels dispatch picks for a stack of that order and dtype (``hetlapack.using(kernels=...)`` forces either):
- the interleaved kernels (seed 004) for small double-precision matrices, equal to SciPy's results to rounding
  (pivots exactly), at ~0.1-0.5 µs per 8x8 matrix;
- the LAPACK loop (SciPy's LAPACK on each matrix from compiled code) for single precision and larger orders, equal
  to SciPy's results (on one BLAS thread) to the bit. ``qr``'s ``mode='raw'`` has no loop and runs interleaved.

The list's Python bookkeeping (validation, grouping, stacking, splitting) adds 2-3 µs per matrix, still a fraction
of a SciPy loop's per-call cost. Same-size matrices already in one ``(..., n, n)`` array should go to the stacked
path (``hetlapack.linalg`` or :mod:`~hetlapack.batched.kernels`), which skips that bookkeeping.

Failures name the matrix: ``LinAlgError("matrix 17: 3-th leading minor of the array is not positive definite")``.
A caller who expects some failures (a million small solves of which a few are not positive definite) passes
``return_info=True`` and receives LAPACK's per-matrix ``info`` codes as one integer array instead of an exception or
warning, so that one bad matrix neither aborts nor slows the batch: ``factors, info = cholesky(mats,
return_info=True)``; ``bad = np.flatnonzero(info)``.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import scipy.linalg as sla
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning

from ..contract.arrays import check_scipy_qr_mode, fortran_matrices, getrs_square_error, scipy_qr_sizes
from ..contract.scipy_rules import cholesky_as_scipy, fortran_result, not_positive_definite, warn_dtypes_as_scipy
from ..dtypes import lapack_dtype
from ..options import current
from ..perf import model
from ..pivots import pivot_outside
from . import kernels
from .compiling import INDEX_DTYPE


def _as_matrix(index: int, a) -> np.ndarray:
    """One matrix as a 2-D array of its LAPACK dtype (no copy when it already is one); an empty one keeps its dtype,
    as SciPy's results for it do."""
    array = a if type(a) is np.ndarray else np.asarray(a)
    if array.ndim != 2:
        raise ValueError(f"matrix {index}: Input array needs to be 2D but received a {array.ndim}d-array.")
    dtype = lapack_dtype(array.dtype)
    return array if array.dtype == dtype or not array.size else array.astype(dtype)


def _prepare(matrices: Sequence) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The matrices as given (as arrays), and as :func:`_as_matrix` converts them."""
    given = [a if type(a) is np.ndarray else np.asarray(a) for a in matrices]
    return given, [_as_matrix(index, a) for index, a in enumerate(given)]


def _said_by_scipy(call: Callable[[], object]) -> tuple[object, list[tuple[str, type[Warning]]]]:
    """``call()``'s result and the warnings it gave, as (text, category)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [(str(warning.message), warning.category) for warning in caught]


def _say(said: list[list[tuple[str, type[Warning]]]], stacklevel: int) -> None:
    """The warnings ``said`` of each matrix of a list, in the list's order (as SciPy's loop over them gives them),
    each naming its matrix; ``stacklevel`` as ``warnings.warn`` takes it here."""
    for index, words in enumerate(said):
        for text, category in words:
            warnings.warn(f"matrix {index}: {text}", category, stacklevel=stacklevel + 1)


def _scipy_per_matrix(given: list[np.ndarray], arrays: list[np.ndarray], scipy_name: str,
                   scipy_call: Callable) -> tuple[list, list[list[tuple[str, type[Warning]]]]]:
    """Results holding SciPy's own for each empty matrix (shapes and dtypes that no kernel computes), None for the
    others; and what SciPy's ``scipy_name`` says of each matrix, for :func:`_say`: its own call's warnings for an
    empty one, the DeprecationWarning of its dtype (SciPy 1.18's) for another."""
    results: list = [None] * len(arrays)
    said: list[list[tuple[str, type[Warning]]]] = []
    for index, (a, matrix) in enumerate(zip(given, arrays)):
        if matrix.size:
            said.append(_said_by_scipy(lambda a=a: warn_dtypes_as_scipy(scipy_name, a.dtype, stacklevel=1))[1])
        else:
            results[index], words = _said_by_scipy(lambda matrix=matrix: scipy_call(matrix))
            said.append(words)
    return results, said


def _grouped_stacks(checked: Sequence[bool], *arrays_per_matrix: list[np.ndarray]) -> list[tuple[list[int], list]]:
    """Stacks of the matrices grouped by the shapes and dtypes of all their arrays (one kernel call a group),
    leaving out the matrices with an empty array (:func:`_scipy_per_matrix`, :func:`_solve_grouped`).

    The arrays of each list whose ``checked`` flag is set are checked for infs and NaNs, on whole stacks (per-matrix
    checks would cost more than the factorizations); a failure names the first matrix holding one, as SciPy's
    ``asarray_chkfinite`` message.
    """
    groups: dict[tuple, list[int]] = defaultdict(list)
    for index, arrays in enumerate(zip(*arrays_per_matrix)):
        if all(a.size for a in arrays):
            groups[tuple((a.shape, a.dtype.char) for a in arrays)].append(index)
    stacked = [(indices, [np.array([arrays[i] for i in indices]) for arrays in arrays_per_matrix])
               for indices in groups.values()]
    bad = [indices[position] for indices, stacks in stacked for stack, check in zip(stacks, checked) if check
           for position in np.flatnonzero(~np.isfinite(stack).reshape(len(indices), -1).all(axis=1))]
    if bad:
        raise ValueError(f"matrix {min(bad)}: array must not contain infs or NaNs")
    return stacked


def _lapack_loop(op: str, stack: np.ndarray) -> bool:
    """Whether a group runs the LAPACK loop: the kernels dispatch picks for a stack of its order and dtype, or those
    ``hetlapack.using(kernels=...)`` forces."""
    chosen, _ = model.batched_kernels(op, max(stack.shape[-2:]), stack.dtype, "scipy", forced_path=True,
                                      forced=current().kernels)
    return chosen == "lapack"


def _first_failure(info: np.ndarray) -> int | None:
    failed = np.flatnonzero(info)
    return int(failed[0]) if failed.size else None


def cholesky(matrices: Sequence, lower: bool = False, *, check_finite: bool = True,
             return_info: bool = False) -> list[np.ndarray] | tuple[list[np.ndarray], np.ndarray]:
    """Cholesky factors of a batch of Hermitian positive definite matrices of any sizes.

    Parameters
    ----------
    matrices : sequence of (n_i, n_i) array_like
        The matrices; sizes and dtypes may differ. Only the ``lower`` (else upper) triangle of each is read.
    lower : bool, optional
        Return lower factors ``L`` with ``A = L L^H`` instead of upper ``U`` with ``A = U^H U`` (default).
    check_finite : bool, optional
        Check that the inputs contain only finite numbers (as SciPy; disabling saves a pass over the data).
    return_info : bool, optional
        Return ``(factors, info)`` and raise nothing for matrices that are not positive definite: ``info[i] = k >
        0`` means the k-th leading minor of matrix ``i`` is not positive definite and ``factors[i]`` is unspecified.

    Returns
    -------
    factors : list of ndarray
        ``scipy.linalg.cholesky(matrices[i], lower)`` for each ``i`` (the other triangle zero).
    info : ndarray of int32, shape (len(matrices),)
        LAPACK's ``potrf`` info per matrix; only with ``return_info=True``.

    Raises
    ------
    LinAlgError
        If a matrix is not positive definite (the first one is named) and ``return_info`` is False.
    ValueError
        If a matrix is not square and 2-D, or contains infs or NaNs while ``check_finite`` is True.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack import batched
    >>> factors = batched.cholesky([np.diag([4.0, 9.0]), np.array([[25.0]])], lower=True)
    >>> [f.diagonal().tolist() for f in factors]
    [[2.0, 3.0], [5.0]]
    >>> _, info = batched.cholesky([np.eye(2), -np.eye(3)], return_info=True)
    >>> info.tolist()
    [0, 1]
    """
    given, arrays = _prepare(matrices)
    for index, a in enumerate(arrays):
        if a.shape[0] != a.shape[1]:
            raise ValueError(f"matrix {index}: Input array is expected to be square but has the shape: {a.shape}.")
    factors, said = _scipy_per_matrix(given, arrays, "cholesky", lambda a: sla.cholesky(a, lower=lower))
    _say(said, stacklevel=2)
    info = np.zeros(len(arrays), dtype=INDEX_DTYPE)
    for indices, (stack,) in _grouped_stacks((check_finite,), arrays):
        def potrf(operand: np.ndarray, lower_triangle: bool, stack=stack) -> tuple[np.ndarray, np.ndarray]:
            return kernels.potrf(operand, lower=lower_triangle, clean=True, fortran=True,
                                 lapack=_lapack_loop("potrf", stack))

        c, group_info = cholesky_as_scipy(potrf, stack, lower, stacked=True)
        info[indices] = group_info
        for index, factor in zip(indices, c):
            factors[index] = factor
    if return_info:
        return factors, info
    failed = _first_failure(info)
    if failed is not None:
        raise LinAlgError(f"matrix {failed}: {not_positive_definite(int(info[failed]))}")
    return factors


def lu_factor(matrices: Sequence, *, check_finite: bool = True,
              return_info: bool = False) -> list[tuple[np.ndarray, np.ndarray]] | tuple[list, np.ndarray]:
    """LU factorizations with partial pivoting of a batch of matrices of any shapes.

    Parameters
    ----------
    matrices : sequence of (m_i, n_i) array_like
        The matrices; shapes and dtypes may differ.
    check_finite : bool, optional
        Check that the inputs contain only finite numbers.
    return_info : bool, optional
        Return ``(factors, info)`` and warn about nothing: ``info[i] = k > 0`` means ``U[k-1, k-1]`` of matrix ``i``
        is exactly zero (its factorization is complete but the matrix is singular).

    Returns
    -------
    factors : list of (lu, piv)
        ``scipy.linalg.lu_factor(matrices[i])`` for each ``i``: packed ``L`` and ``U``, 0-based int32 pivots
        identical to LAPACK's ``getrf``.
    info : ndarray of int32, shape (len(matrices),)
        LAPACK's ``getrf`` info per matrix; only with ``return_info=True``.

    Warns
    -----
    LinAlgWarning
        For each singular matrix (named), as SciPy warns, unless ``return_info`` is True.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack import batched
    >>> (lu, piv), = batched.lu_factor([np.array([[1.0, 2.0], [3.0, 4.0]])])
    >>> piv.tolist()
    [1, 1]
    >>> _, info = batched.lu_factor([np.eye(2), np.zeros((3, 3))], return_info=True)
    >>> info.tolist()
    [0, 1]
    """
    given, arrays = _prepare(matrices)
    factors, said = _scipy_per_matrix(given, arrays, "lu_factor", sla.lu_factor)
    info = np.zeros(len(arrays), dtype=INDEX_DTYPE)
    for indices, (stack,) in _grouped_stacks((check_finite,), arrays):
        lu, piv, group_info = kernels.getrf(stack, fortran=True, lapack=_lapack_loop("getrf", stack))
        info[indices] = group_info
        for index, lu_i, piv_i in zip(indices, lu, piv):
            factors[index] = (lu_i, piv_i)
    if not return_info:
        for index in np.flatnonzero(info):
            said[index].append((f"Diagonal number {info[index]} is exactly zero. Singular matrix.", LinAlgWarning))
    _say(said, stacklevel=2)
    return (factors, info) if return_info else factors


def _qr_results(stack: np.ndarray, mode: str, pivoting: bool) -> list[tuple]:
    """SciPy's per-matrix ``qr`` return value for each matrix of one same-shape group."""
    ncols, rows = scipy_qr_sizes(mode, *stack.shape[-2:])
    if mode == "raw" and (pivoting or stack.dtype not in model.interleaved_dtypes("geqrf")):
        # the LAPACK loops keep no reflectors, and only the interleaved geqrf does: SciPy's own call per matrix
        return [sla.qr(a, mode=mode, pivoting=pivoting, check_finite=False) for a in stack]
    fortran = fortran_result("qr", False, mode=mode, pivoting=pivoting)  # Q's layout (or raw's) in SciPy's result
    if pivoting:
        q, r, p = kernels.geqp3(stack, ncols, rows, fortran=fortran)
        return list(zip(r, p)) if mode == "r" else list(zip(q, r, p))
    if mode == "raw":
        qr_stack, tau = kernels.geqrf(stack)
        r = np.triu(qr_stack[:, :rows, :])
        qr_stack = fortran_matrices(qr_stack) if fortran else np.ascontiguousarray(qr_stack)
        return [((qr_i, tau_i), r_i) for qr_i, tau_i, r_i in zip(qr_stack, tau, r)]
    q, r = kernels.qr(stack, ncols, rows, fortran=fortran, lapack=_lapack_loop("geqrf", stack))
    if mode == "r":
        return [(r_i,) for r_i in r]
    return list(zip(q, r))


def qr(matrices: Sequence, mode: str = "full", pivoting: bool = False, *, check_finite: bool = True) -> list[tuple]:
    """Householder QR, with column pivoting if asked, of a batch of matrices of any shapes.

    Parameters
    ----------
    matrices : sequence of (m_i, n_i) array_like
        The matrices; shapes and dtypes may differ.
    mode : {'full', 'r', 'economic', 'raw'}, optional
        As ``scipy.linalg.qr``: ``(Q, R)`` with square ``Q``; ``(R,)``; ``(Q, R)`` with ``Q`` of ``min(m, n)``
        columns; ``((qr, tau), R)`` in LAPACK's ``geqrf`` storage.
    pivoting : bool, optional
        Pivot columns as LAPACK's ``geqp3`` does and return the 0-based pivots last, as ``scipy.linalg.qr`` (whose
        LAPACK calls run on each matrix, so the results are its own to the bit).
    check_finite : bool, optional
        Check that the inputs contain only finite numbers.

    Returns
    -------
    list of tuple
        ``scipy.linalg.qr(matrices[i], mode=mode, pivoting=pivoting)`` for each ``i``: the same signs (LAPACK's
        reflectors) and shapes.

    Raises
    ------
    ValueError
        For an unknown ``mode``, a matrix that is not 2-D, or infs or NaNs while ``check_finite`` is True.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack import batched
    >>> (q, r), (q2, r2) = batched.qr([np.eye(3), np.ones((4, 2))], mode="economic")
    >>> q2.shape, r2.shape
    ((4, 2), (2, 2))
    >>> bool(np.allclose(q2 @ r2, np.ones((4, 2))))
    True
    """
    check_scipy_qr_mode(mode)
    given, arrays = _prepare(matrices)
    results, said = _scipy_per_matrix(given, arrays, "qr", lambda a: sla.qr(a, mode=mode, pivoting=pivoting))
    _say(said, stacklevel=2)
    for indices, (stack,) in _grouped_stacks((check_finite,), arrays):
        for index, result in zip(indices, _qr_results(stack, mode, pivoting)):
            results[index] = result
    return results


def _right_hand_sides(bs: Sequence, sizes: list[int]) -> tuple[list[np.ndarray], list[bool]]:
    """Right-hand sides as 2-D arrays (a vector becomes one column, flagged to be squeezed back)."""
    if len(bs) != len(sizes):
        raise ValueError(f"got {len(sizes)} factorizations but {len(bs)} right-hand sides")
    columns, vectors = [], []
    for index, (b, n) in enumerate(zip(bs, sizes)):
        array = np.asarray(b)
        vector = array.ndim == 1
        array = array[:, None] if vector else array
        if array.ndim != 2 or array.shape[0] != n:
            raise ValueError(f"matrix {index}: incompatible dimensions ({(n, n)} and {np.shape(b)})")
        columns.append(array)
        vectors.append(vector)
    return columns, vectors


def _solve_grouped(factors: list[np.ndarray], extras: list[np.ndarray] | None, bs: Sequence, check_factors: bool,
                   check_b: bool, solve: Callable[..., np.ndarray],
                   scipy_solve: Callable[[int], np.ndarray]) -> list[np.ndarray]:
    """Solve per matrix, one kernel call per group of equal factor size, right-hand-side shape and dtypes; an empty
    system gets ``scipy_solve(index)``, SciPy's own result for it (shape and dtype, which no kernel computes).
    ``check_factors`` and ``check_b`` say what is checked for infs and NaNs (SciPy's ``cho_solve`` checks both, its
    ``lu_solve`` only ``b``; integer pivots are always finite)."""
    columns, vectors = _right_hand_sides(bs, [f.shape[0] for f in factors])
    columns = [b.astype(lapack_dtype(f.dtype, b.dtype), copy=False)
               for f, b in zip(factors, columns)]
    solutions: list = [None] * len(factors)
    said: list[list[tuple[str, type[Warning]]]] = [[] for _ in factors]
    for index, (f, b) in enumerate(zip(factors, columns)):
        if not (f.size and b.size):
            solutions[index], said[index] = _said_by_scipy(lambda index=index: scipy_solve(index))
    _say(said, stacklevel=3)
    per_matrix = (factors, columns) if extras is None else (factors, extras, columns)
    checked = (check_factors,) * (len(per_matrix) - 1) + (check_b,)
    for indices, stacks in _grouped_stacks(checked, *per_matrix):
        x = solve(*stacks)
        for position, index in enumerate(indices):
            solutions[index] = x[position, :, 0] if vectors[index] else x[position]
    return solutions


def _square_factors(factors: Sequence, scipy_error: Callable[[np.ndarray], Exception]) -> list[np.ndarray]:
    """The factors as matrices; for the first that is not square, ``scipy_error`` (SciPy's for it) naming it."""
    _, arrays = _prepare(factors)
    for index, a in enumerate(arrays):
        if a.shape[0] != a.shape[1]:
            error = scipy_error(a)
            raise type(error)(f"matrix {index}: {error}")
    return arrays


def _cho_not_square(c: np.ndarray) -> Exception:
    return ValueError("The factored matrix c is not square.")


def _lu_not_square(lu: np.ndarray) -> Exception:
    """f2py's error for SciPy's getrs call on a factor that is not square (its own type and text)."""
    try:
        getrs_square_error(lu.dtype)
    except Exception as error:  # noqa: BLE001 - f2py's error type is private to SciPy
        return error


def cho_solve(factors: Sequence, bs: Sequence, lower: bool = False, *, check_finite: bool = True) -> list[np.ndarray]:
    """Solve ``A_i x_i = b_i`` for a batch, given the Cholesky factors of the ``A_i`` (from :func:`cholesky`).

    Parameters
    ----------
    factors : sequence of (n_i, n_i) array_like
        Cholesky factors, lower or upper as ``lower`` says (the other triangle is not read).
    bs : sequence of (n_i,) or (n_i, k_i) array_like
        Right-hand sides, one per factor.
    lower : bool, optional
        Whether the factors are lower (``A = L L^H``) or upper (``A = U^H U``, default) triangular.
    check_finite : bool, optional
        Check that the inputs contain only finite numbers.

    Returns
    -------
    list of ndarray
        ``scipy.linalg.cho_solve((factors[i], lower), bs[i])`` for each ``i``.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack import batched
    >>> mats = [np.array([[4.0, 2.0], [2.0, 3.0]]), np.array([[9.0]])]
    >>> xs = batched.cho_solve(batched.cholesky(mats), [np.ones(2), np.array([18.0])])
    >>> [x.round(6).tolist() for x in xs]
    [[0.125, 0.25], [2.0]]
    """
    arrays = _square_factors(factors, _cho_not_square)
    return _solve_grouped(arrays, None, bs, check_finite, check_finite,
                          lambda c, b: kernels.potrs(c, b, lower=lower, fortran=True, lapack=_lapack_loop("potrs", c)),
                          lambda index: sla.cho_solve((arrays[index], lower), bs[index]))


def lu_solve(factors: Sequence[tuple], bs: Sequence, trans: int = 0, *, check_finite: bool = True) -> list[np.ndarray]:
    """Solve ``op(A_i) x_i = b_i`` for a batch, given the ``(lu, piv)`` of the ``A_i`` (from :func:`lu_factor`).

    Parameters
    ----------
    factors : sequence of (lu, piv)
        Packed LU factors (square) and their 0-based pivots.
    bs : sequence of (n_i,) or (n_i, k_i) array_like
        Right-hand sides, one per factorization.
    trans : {0, 1, 2}, optional
        Solve with ``A`` (0), ``A^T`` (1) or ``A^H`` (2), as ``scipy.linalg.lu_solve``.
    check_finite : bool, optional
        Check that the inputs contain only finite numbers.

    Returns
    -------
    list of ndarray
        ``scipy.linalg.lu_solve(factors[i], bs[i], trans)`` for each ``i``.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack import batched
    >>> factors = batched.lu_factor([np.array([[1.0, 2.0], [3.0, 4.0]])])
    >>> batched.lu_solve(factors, [np.array([5.0, 6.0])])[0].round(6).tolist()
    [-4.0, 4.5]
    """
    lus = _square_factors([lu for lu, _ in factors], _lu_not_square)
    pivots = []
    for index, (lu, (_, given)) in enumerate(zip(lus, factors)):
        piv = np.asarray(given, dtype=INDEX_DTYPE)
        if piv.shape != (lu.shape[0],):
            raise ValueError(f"matrix {index}: pivots of shape {piv.shape} do not match lu of shape {lu.shape}")
        reads_pivots = index >= len(bs) or np.size(bs[index])  # an empty b reads none (a missing one raises later)
        outside = pivot_outside(given, lu.shape[0]) if reads_pivots else None
        if outside is not None:  # LAPACK's getrs would swap with a row outside b
            raise ValueError(f"matrix {index}: pivot {outside!r} names no row of lu of shape {lu.shape}")
        pivots.append(piv)
    return _solve_grouped(lus, pivots, bs, False, check_finite,
                          lambda lu, piv, b: kernels.getrs(lu, piv, b, trans=trans, fortran=True,
                                                             lapack=_lapack_loop("getrs", lu)),
                          lambda index: sla.lu_solve((lus[index], pivots[index]), bs[index], trans=trans))
