"""NumPy-exact ``cholesky`` and ``qr`` (``numpy.linalg`` signatures, errors, dtype rules and result types).

Only exact ``numpy.ndarray`` inputs of finite values are accelerated; everything else (duck arrays with their own
``__array_function__``, subclasses, lists, non-finite values, unsupported dtypes) goes to NumPy's own function, so
NEP-18 dispatch and NumPy's errors stay NumPy's.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import numpy as np
from numpy.linalg import LinAlgError

from ..dispatch import Plan, choose
from ..dispatch.paths import BATCHED, HOST
from ..dtypes import native
from ._numpy_host import host_cholesky, host_qr
from ._request import on_host_at_once, request
from ..contract.arrays import numpy_linalg_dtype
from ..contract.finite import all_finite
from ..contract.originals import numpy_functions as _numpy

_ACCELERATED_QR_MODES = ("reduced", "complete", "r")

#: NumPy's warnings for its deprecated ``qr`` modes, which the shim gives itself for an ndarray so that they point at
#: the caller (as NumPy's do) and reach the user under the default filters, instead of pointing into this module.
_FULL_DEPRECATED = ("The 'full' option is deprecated in favor of 'reduced'.\n"
                    "For backward compatibility let mode default.")
_ECONOMIC_DEPRECATED = "The 'economic' option is deprecated."
_NOT_PD = "Matrix is not positive definite"


#: NumPy's functions the shim accelerates, and the operation each asks dispatch for.
NUMPY_OPS = {"cholesky": "potrf", "qr": "geqrf"}


def _own_call_reason(op: str, a, mode: str) -> str | None:
    """Why the shim hands ``a`` to NumPy's own function for ``op`` in ``mode`` (qr's) before any plan, or None."""
    if type(a) is not np.ndarray:
        return "not an exact numpy.ndarray: NumPy's own function (and its __array_function__ dispatch)"
    if a.ndim < 2 or numpy_linalg_dtype(a.dtype) is None:
        return "not a stack of matrices of a dtype NumPy factors: NumPy's own function raises its error"
    if op == "potrf" and a.shape[-1] != a.shape[-2]:
        return "not square: NumPy's own function raises its error"
    if op == "geqrf" and mode not in _ACCELERATED_QR_MODES:
        return f"mode={mode!r}: NumPy's own function"
    return None


def _chosen(op: str, a: np.ndarray) -> tuple[Plan, np.dtype]:
    """Dispatch's plan for ``a`` in a call to NumPy's function, and the dtype it computes in (NumPy's: double)."""
    req, _ = request(op, a, dtype_rule=numpy_linalg_dtype, library="numpy", loop="compiled")
    return choose(req), req.dtype


def _plan(op: str, a, mode: str = "reduced") -> tuple[Plan, np.dtype] | None:
    """The accelerated plan for ``a`` and the dtype it computes in, or None when NumPy's own function must handle
    it (:func:`_own_call_reason`, the host path's plan, or a value that is not finite)."""
    if _own_call_reason(op, a, mode) is not None:
        return None
    plan, dtype = _chosen(op, a)
    return None if plan.runner.own_call or not all_finite(a) else (plan, dtype)


def plan_of(function: str, a, mode: str = "reduced") -> Plan:
    """The plan the shim's ``function`` (``"cholesky"`` or ``"qr"``, with NumPy's ``mode``) follows on ``a``, as
    ``hetlapack.explain(function, a, library="numpy")`` shows it: dispatch's choice, or NumPy's own function and
    why. On the host path, NumPy's call or LAPACK's right-looking Cholesky on NumPy's BLAS, as the plan's host rate
    says."""
    op = NUMPY_OPS[function]
    mode = "reduced" if mode in ("f", "full") else mode
    if (own := _own_call_reason(op, a, mode)) is not None:
        shape, dtype = np.shape(a), getattr(a, "dtype", np.asarray(a).dtype)
        return Plan(op=op, path=HOST.name, reason=own, shape=tuple(shape), dtype=np.dtype(dtype).name)
    plan = _chosen(op, a)[0]
    if not all_finite(a):
        return dataclasses.replace(plan, path=HOST.name, reason="infinities or NaNs: NumPy's own function")
    return plan


def _result_dtype(a: np.ndarray, computed: np.dtype) -> np.dtype:
    """The dtype of NumPy's results for ``a``: single precision stays single (rounded from the double result), in
    native byte order as NumPy gives it whatever the input's."""
    return native(a.dtype) if a.dtype.char in "fF" else computed


#: Bytes of a stack converted to double precision at a time (:func:`_factored`).
CHUNK_BYTES = 4 << 20


def _factored(plan: Plan, factor: Callable[[np.ndarray], tuple], a: np.ndarray, dtype: np.dtype) -> tuple:
    """``factor``'s results (a tuple of stacks, or of matrices) for ``a`` computed in ``dtype``, in NumPy's result
    dtype.

    A stack in another dtype than ``dtype`` (single precision, integers) is converted a chunk of ``CHUNK_BYTES`` at a
    time, each chunk's results rounded into the results as they come, as NumPy converts each matrix where it lies: a
    double copy of the whole stack costs more in fresh memory than the factorization itself at orders 16-64 (order
    64, float32: 26 against 14 µs a matrix on this project's machine)."""
    result_dtype = _result_dtype(a, dtype)
    if plan.runner is not BATCHED or a.dtype == dtype:
        work = plan.runner.operand(a, a, dtype, overwrite=False)
        return tuple(x.astype(result_dtype, copy=False) for x in factor(work))
    flat = a.reshape(-1, *a.shape[-2:])
    step = max(1, CHUNK_BYTES // (a.shape[-2] * a.shape[-1] * dtype.itemsize))
    results: list[np.ndarray] = []
    for start in range(0, len(flat), step):
        parts = factor(flat[start:start + step].astype(dtype))
        results = results or [np.empty((len(flat), *part.shape[1:]), dtype=result_dtype) for part in parts]
        for result, part in zip(results, parts):
            result[start:start + step] = part
    return tuple(result.reshape(*a.shape[:-2], *result.shape[1:]) for result in results)


def _laid_out_as_numpy_r(r: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``r`` in the memory layout ``numpy.linalg.qr`` gives R: that of ``triu`` over the first rows of a copy of
    ``a`` in ``a``'s own axis order (for a stack of Fortran-ordered matrices, the batch axis is the innermost)."""
    if a.flags.c_contiguous:
        return np.ascontiguousarray(r)
    return _laid_out_as(r, np.triu(_bytes_like(a)[..., : r.shape[-2], :]))


def _laid_out_as_gufunc_output(result: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``result`` (``(..., m, k)`` for the stack ``a``) in the memory layout of a NumPy gufunc's output for ``a``,
    as ``numpy.linalg.cholesky``'s factor and ``qr``'s Q are: each matrix C-ordered, the batch axes in ``a``'s own
    order (so C order with fewer than two batch axes)."""
    if a.ndim < 4 or a.flags.c_contiguous:
        return np.ascontiguousarray(result)
    return _laid_out_as(result, np.matmul(_bytes_like(a)[..., :1], np.ones((1, result.shape[-1]), dtype=np.int8)))


def _bytes_like(a: np.ndarray) -> np.ndarray:
    """An uninitialized byte array of ``a``'s shape and axis order: NumPy's own operations on it show the layout
    they give their results, at one byte per element."""
    return np.empty_like(a, dtype=np.int8)


def _laid_out_as(result: np.ndarray, layout: np.ndarray) -> np.ndarray:
    """A copy of ``result`` with the memory layout of ``layout``, an array of its shape."""
    laid_out = np.empty_like(layout, dtype=result.dtype)
    laid_out[...] = result
    return laid_out


def cholesky(a, /, *, upper=False):
    """
    Cholesky decomposition (NumPy-compatible).

    Returns the lower (or, with ``upper=True``, upper) triangular factor of each Hermitian positive-definite
    matrix in ``a``, exactly as :func:`numpy.linalg.cholesky`.

    Parameters
    ----------
    a : (..., M, M) array_like
        Hermitian (symmetric if all elements are real), positive-definite input matrix.
    upper : bool
        If True, the result is the upper-triangular factor ``U`` with ``A = U^H U``; else ``L`` with
        ``A = L L^H``.

    Returns
    -------
    L : (..., M, M) array_like
        Lower- (or upper-) triangular Cholesky factor of `a`.

    Raises
    ------
    LinAlgError
        If the decomposition fails, for example, if `a` is not positive-definite.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack.compat import numpy_linalg
    >>> numpy_linalg.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]))
    array([[2., 0.],
           [1., 2.]])
    """
    if on_host_at_once("potrf", a, numpy_linalg_dtype, loop="compiled"):
        return host_cholesky(a, upper)
    chosen = _plan("potrf", a)
    if chosen is None:
        return host_cholesky(a, upper)
    plan, dtype = chosen

    def factor(work: np.ndarray) -> tuple[np.ndarray]:
        c, info = plan.runner.potrf(plan, work, lower=not upper, clean=True)
        if np.any(np.asarray(info) > 0):
            raise LinAlgError(_NOT_PD)
        return (c,)

    (c,) = _factored(plan, factor, a, dtype)
    return _laid_out_as_gufunc_output(c, a)


def qr(a, mode="reduced"):
    """
    Compute the qr factorization of a matrix (NumPy-compatible).

    Factor ``a`` as ``q r`` with ``q`` orthonormal and ``r`` upper-triangular, exactly as
    :func:`numpy.linalg.qr` (modes ``'reduced'``, ``'complete'``, ``'r'``, ``'raw'``).

    Parameters
    ----------
    a : array_like, shape (..., M, N)
        An array-like object with the dimensionality of at least 2.
    mode : {'reduced', 'complete', 'r', 'raw'}, optional, default: 'reduced'
        Which quantities to return (see :func:`numpy.linalg.qr`).

    Returns
    -------
    When mode is 'reduced' or 'complete', a namedtuple ``(Q, R)``; when mode is 'r', the array R; when mode is
    'raw', the tuple ``(h, tau)``.

    Raises
    ------
    LinAlgError
        If factoring fails.

    Examples
    --------
    >>> import numpy as np
    >>> from hetlapack.compat import numpy_linalg
    >>> a = np.array([[3.0, 1.0], [4.0, 2.0]])
    >>> q, r = numpy_linalg.qr(a)
    >>> np.allclose(q @ r, a)
    True
    """
    if mode in ("f", "full", "e", "economic"):
        economic = mode in ("e", "economic")
        warnings.warn(_ECONOMIC_DEPRECATED if economic else _FULL_DEPRECATED, DeprecationWarning, stacklevel=2)
        if economic:
            return np.swapaxes(_numpy["qr"](a, mode="raw")[0], -1, -2)  # NumPy's 'economic': 'raw''s h, untransposed
        mode = "reduced"
    if mode in _ACCELERATED_QR_MODES and on_host_at_once("geqrf", a, numpy_linalg_dtype, loop="compiled"):
        return host_qr(a, mode)
    chosen = _plan("geqrf", a, mode)
    if chosen is None:
        return _numpy["qr"](a, mode=mode)
    plan, dtype = chosen
    m, n = a.shape[-2:]
    k = min(m, n)
    rows = m if mode == "complete" else k
    if mode == "r":
        (r,) = _factored(plan, lambda work: plan.runner.qr(plan, work, 0, rows, own=work is not a)[1:], a, dtype)
        return _laid_out_as_numpy_r(r, a)
    q, r = _factored(plan, lambda work: plan.runner.qr(plan, work, rows, rows), a, dtype)
    return np.linalg._linalg.QRResult(_laid_out_as_gufunc_output(q, a), _laid_out_as_numpy_r(r, a))
