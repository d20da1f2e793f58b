"""SciPy's contract as the installed release defines it (1.16 up to the current one).

Each rule asks the installed SciPy itself where a 2 x 2 probe can tell: how it reads a flag and which flags it
refuses (its own function is called on the probe with the caller's flags), and the layout and container of its
results. Only what no probe gives cheaply keys on the version: the texts of errors that name a matrix of a stack,
and the dtype deprecation of SciPy 1.18. The accelerated paths never call SciPy on the user's matrix, so these rules
are what keeps their results, errors and warnings the installed SciPy's.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy
from numpy.lib import NumpyVersion
from numpy.linalg import LinAlgError
from scipy.linalg import LinAlgWarning

from .arrays import c_ordered_in_place, fortran_matrices
from .originals import scipy_functions as _scipy

#: SciPy's warning text for an exactly singular LU factor (``k``: the 1-based diagonal number).
_SINGULAR = "Diagonal number {} is exactly zero. Singular matrix."

#: SciPy 1.18 runs the batch loops of ``cholesky``, ``lu`` and ``qr`` in compiled code: its errors name the
#: failing slice, its results are C-ordered, and it deprecates dtypes LAPACK does not compute in.
COMPILED_BATCH_LOOPS = NumpyVersion(scipy.__version__) >= "1.18.0"

#: The calls whose loop over a stack SciPy does not run in Python, by the LAPACK routine its function calls, and
#: ``lu`` (which shares ``getrf`` with ``lu_factor``) by name: since 1.18 ``cholesky`` and ``cho_factor``
#: (``potrf``), ``qr`` (``geqrf``, ``geqp3``) and ``lu`` in C; before, ``lu`` in Cython (its ``lu_dispatcher``).
#: ``lu_factor`` and the solves loop in Python.
_STACK_LOOPS = ({name: "compiled" for name in ("potrf", "geqrf", "geqp3", "lu")} if COMPILED_BATCH_LOOPS
                else {"lu": "cython"})


def stack_loop(routine: str) -> str:
    """How SciPy's function for LAPACK's ``routine`` (or ``"lu"``) loops over a stack: ``"python"``, ``"cython"``
    or ``"compiled"`` (:data:`_STACK_LOOPS`; ``hetlapack.perf.model.STACK_LOOP_S`` prices each)."""
    return _STACK_LOOPS.get(routine, "python")


#: ``scipy.linalg.qr``'s default ``lwork`` (``None`` before SciPy 1.18, a sentinel after): any other value, ``None``
#: included where it is not the default, is SciPy's to handle (1.18 warns that it is deprecated).
QR_LWORK_DEFAULT = inspect.signature(_scipy["qr"]).parameters["lwork"].default

#: A 2 x 2 symmetric positive definite matrix (``L = [[1, 0], [2, 1]]``): small enough that a call costs
#: microseconds, with a lower and an upper triangle that tell which one a factor came from.
_PROBE = np.array([[1.0, 2.0], [2.0, 5.0]])


def _probe(stacked: bool) -> np.ndarray:
    """A fresh probe of Fortran-ordered matrices (a stack of two with ``stacked``): SciPy may write into it."""
    return fortran_matrices(np.stack([_PROBE, _PROBE]) if stacked else _PROBE)


#: The types of the flags whose truth value is read at no cost and never raises: Python's and NumPy's bools and
#: Python's ints.
TRUTH_FLAG_TYPES = (bool, np.bool_, int)


def _plain(flag) -> bool:
    """Whether every SciPy release reads ``flag`` as itself: ``False``, ``True``, ``0``, ``1`` (no probe needed). A
    NumPy bool is not one of them: f2py, before SciPy 1.18, refuses it where it wants an integer."""
    return type(flag) in (bool, int) and flag in (0, 1)


def call_with_flags(name: str, dtype: np.dtype, **flags):
    """SciPy's own ``name`` on the probe in ``dtype`` (the LAPACK dtype it computes in: f2py's errors name the
    routine) with the caller's flags: its result, or its error for a flag it refuses."""
    return _scipy[name](_probe(stacked=False).astype(dtype), **flags)


def refuse_flags(name: str, dtype: np.dtype, values: np.ndarray | None = None, **flags) -> None:
    """Raise what SciPy's ``name`` raises for these flags, if anything. SciPy checks its array for infinities and
    NaNs before it reads a flag: given those ``values`` (when ``check_finite``), a bad flag on a bad array raises
    SciPy's ValueError instead."""
    if all(_plain(flag) or flag is None for flag in flags.values()):
        return
    try:
        call_with_flags(name, dtype, **flags)
    except Exception:
        if values is not None:
            np.asarray_chkfinite(values)
        raise


def cholesky_lower(lower, overwrite_a, dtype: np.dtype) -> bool:
    """``lower`` as SciPy's Cholesky in ``dtype`` reads it (f2py's conversion before 1.18: ``0.5`` and ``None`` mean
    upper; truthiness since), raising SciPy's error for the flags it refuses."""
    if _plain(lower) and (_plain(overwrite_a) or overwrite_a is None):
        return bool(lower)
    c = call_with_flags("cholesky", dtype, lower=lower, overwrite_a=overwrite_a)
    return bool(c[1, 0] != 0)


@functools.cache
def _result(name: str, stacked: bool, options: tuple) -> object:
    return _scipy[name](_probe(stacked), **dict(options))


def _arrays(result) -> list[np.ndarray]:
    """The arrays of a result, nested tuples (``qr``'s raw mode) flattened, in order (``cho_factor``'s ``lower`` flag
    is none where it is a bool)."""
    if isinstance(result, np.ndarray):
        return [result]
    if not isinstance(result, (tuple, list)):
        return []
    return [x for item in result for x in _arrays(item)]


def _signature(options: dict) -> tuple:
    """A call's keyword ``options`` as a key of the caches read per call signature (none, the common case, without
    sorting anything)."""
    return tuple(sorted(options.items())) if options else ()


@functools.cache
def _result_form(name: str, stacked: bool, options: tuple) -> tuple[type | None, tuple[bool, ...]]:
    """The container of SciPy's result (``None`` for a bare array) and whether each of its arrays is C-ordered, read
    once per call signature: each call then pays for none of it."""
    reference = _result(name, stacked, options)
    container = None if isinstance(reference, np.ndarray) else type(reference)
    return container, tuple(bool(x.flags.c_contiguous) for x in _arrays(reference))


def _in_layout(x: np.ndarray, c_ordered: bool) -> np.ndarray:
    """``x`` (a result of the shim's own, not the caller's array) laid out as SciPy's result: a C-ordered array if
    ``c_ordered``, else Fortran-ordered matrices (``x`` itself where it already is). A square Fortran-ordered matrix
    that owns its memory is made C-ordered in that memory, so that the conversion holds no second matrix."""
    if not c_ordered:
        return fortran_matrices(x)
    square = x.ndim == 2 and x.shape[0] == x.shape[1]
    if square and x.flags.f_contiguous and not x.flags.c_contiguous and x.flags.owndata and x.flags.writeable:
        return c_ordered_in_place(x)
    return np.ascontiguousarray(x)


#: A tall probe (``_PROBE`` and a row); its transpose is a wide one.
_TALL_PROBE = np.vstack([_PROBE, [[1.0, 3.0]]])


@functools.cache
def _fortran_in_place_form(name: str, shape: str, options: tuple) -> tuple[bool, ...]:
    """Whether each array of SciPy's result is C-ordered where it factors a Fortran-ordered matrix in place, of a
    ``shape`` (``"square"``, ``"tall"``, ``"wide"``: which result has the matrix's shape, and is written there,
    depends on it)."""
    probe = {"square": _PROBE, "tall": _TALL_PROBE, "wide": _TALL_PROBE.T}[shape]
    return tuple(bool(x.flags.c_contiguous)
                 for x in _arrays(_scipy[name](np.asfortranarray(probe), overwrite_a=True, **dict(options))))


def scipy_returns(name: str, outputs: tuple[np.ndarray, ...], stacked: bool,
                  in_place_shape: tuple[int, ...] | None = None, **options):
    """``outputs`` (SciPy's arrays for this call of ``name``, in order) returned as SciPy returns them: each in the
    layout and all in the container (tuple, list or a bare array) SciPy's own ``name`` gives for a matrix or a stack
    with these ``options`` (an output already so laid out is returned as it is, the caller's array included where
    the shim wrote into it). ``in_place_shape``: the shape of the matrix, where SciPy factors it in place in Fortran
    order (the function :func:`in_place_shape`); each result then takes the layout SciPy's has there (since 1.18
    the result of the matrix's shape is Fortran-ordered, written where the matrix was: ``qr``'s ``R`` in full mode
    and its raw output, ``lu_factor``'s factors, ``lu``'s ``U`` of a square or wide matrix and ``L`` of a tall
    one)."""
    container, c_ordered = _result_form(name, stacked, _signature(options))
    if in_place_shape is not None:
        m, n = in_place_shape
        shape = "square" if m == n else "tall" if m > n else "wide"
        c_ordered = _fortran_in_place_form(name, shape, _signature(options))
    laid = tuple(_in_layout(x, c) for x, c in zip(outputs, c_ordered, strict=True))
    return laid[0] if container is None else container(laid)


@functools.cache
def _fortran_copy_unseen(name: str, options: tuple) -> bool:
    c_ordered = np.ascontiguousarray(_PROBE)
    reference = _arrays(_scipy[name](c_ordered, **dict(options)))
    copied = _arrays(_scipy[name](np.asfortranarray(_PROBE), overwrite_a=True, **dict(options)))
    return [x.flags.c_contiguous for x in reference] == [x.flags.c_contiguous for x in copied]


def fortran_copy_unseen(name: str, **options) -> bool:
    """Whether SciPy's ``name`` returns the same layouts for a C-ordered matrix as for a Fortran-ordered copy of it
    that it may overwrite: the copy f2py makes is then all that differs, and handing it one is invisible."""
    return _fortran_copy_unseen(name, _signature(options))


def scipy_container(name: str, stacked: bool, **options) -> type:
    """The sequence type (tuple or list) SciPy's ``name`` returns for a matrix or a stack."""
    return type(_result(name, stacked, _signature(options)))


def fortran_result(name: str, stacked: bool, **options) -> bool:
    """Whether the first result of SciPy's ``name`` holds Fortran-ordered matrices."""
    return not _result_form(name, stacked, _signature(options))[1][0]


def cholesky_as_scipy(potrf: Callable, a, lower: bool, stacked: bool, in_place: bool = False):
    """``potrf(operand, lower) -> (factors, info)``, a Cholesky factorization that writes Fortran-ordered factors, run
    on ``a`` as the installed SciPy runs its own. Where SciPy returns C-ordered factors (1.18 on), it factors
    ``A^T`` with the other triangle: the lower factor of ``A^T = conj(A)`` is ``conj(L)``, whose transpose is
    ``L^H = U``, so the factors come out C-ordered with no transposing copy, and LAPACK's bits are SciPy's. Where
    SciPy factors a Fortran-ordered matrix in place (``in_place``: :func:`fortran_in_place`), its factor is
    Fortran-ordered, and so is this one."""
    if fortran_result("cholesky", stacked) or in_place:
        return potrf(a, lower)
    c, info = potrf(np.swapaxes(a, -1, -2), not lower)
    return np.swapaxes(c, -1, -2), info


def cho_factor_flags(lower, a, batch: tuple[int, ...]):
    """The ``lower`` that SciPy's ``cho_factor`` returns beside the factor of ``a`` (the caller's argument):
    ``np.tile`` of it over ``a``'s batch since SciPy 1.18 (read from ``a.shape``, as SciPy does), before it
    ``lower`` itself for a matrix and an array of it per matrix for a stack."""
    if isinstance(_result("cho_factor", False, ())[1], np.ndarray):  # np.tile(lower, ()) is np.array(lower)
        if type(lower) is bool:  # np.tile's array, made without its few µs of Python
            return np.full(a.shape[:-2], lower)
        return np.tile(lower, reps=a.shape[:-2]) if len(a.shape) > 2 else np.array(lower)
    if not batch:
        return lower
    if type(lower) is bool:
        return np.full(batch, lower)
    return np.array(np.broadcast_to(lower, (*batch, *np.shape(lower))))


def cholesky_in_place(a: np.ndarray, dtype: np.dtype, overwrite_a) -> bool:
    """Whether SciPy's Cholesky (and ``lu`` and ``qr``) of ``a`` (the array it reads, computed in ``dtype``) factors
    a 2-D matrix in place, in the caller's contiguous array (``overwrite_a``) or in a converted copy of its own, so
    that its factor keeps that array's layout (SciPy 1.18 on; before, f2py's factors are Fortran-ordered whatever
    the input)."""
    if not COMPILED_BATCH_LOOPS or a.ndim != 2:
        return False
    copied = a.dtype.char != dtype.char or not (getattr(a.flags, "aligned", True) and a.dtype.isnative)
    return copied or (bool(overwrite_a) and (a.flags.f_contiguous or a.flags.c_contiguous))


def cho_factor_cleans(a: np.ndarray, dtype: np.dtype, overwrite_a) -> bool:
    """Whether SciPy's ``cho_factor`` zeroes the triangle its factor leaves unused: never before 1.18; since, unless
    it factors in place (:func:`cholesky_in_place`)."""
    return COMPILED_BATCH_LOOPS and not cholesky_in_place(a, dtype, overwrite_a)


def fortran_in_place(a: np.ndarray, dtype: np.dtype, overwrite_a) -> bool:
    """Whether SciPy's Cholesky, ``lu`` or ``qr`` factors ``a`` in place in Fortran order (a Fortran-ordered matrix,
    or one its converted copy lays out so: NumPy's ``astype`` keeps the order of the strides), the factor it writes
    there then Fortran-ordered where SciPy's are otherwise C-ordered."""
    return cholesky_in_place(a, dtype, overwrite_a) and abs(a.strides[0]) < abs(a.strides[1])


def in_place_shape(a: np.ndarray, dtype: np.dtype, overwrite_a) -> tuple[int, ...] | None:
    """The shape of ``a`` where SciPy's Cholesky, ``lu`` or ``qr`` factors it in place in Fortran order
    (:func:`fortran_in_place`), for :func:`scipy_returns`; else None."""
    return a.shape if fortran_in_place(a, dtype, overwrite_a) else None


#: A 2 x 2 matrix whose LU factors tell a wrong one: no symmetry, its pivot in the second row.
_LU_PROBE = np.array([[3.0, -7.0], [5.0, 2.0]])


@functools.cache
def lu_in_place_wrong() -> bool:
    """Whether the installed SciPy's ``lu`` returns wrong factors where it factors a matrix in place in Fortran
    order (:func:`fortran_in_place`): SciPy 1.18.1's ``L`` and ``U`` do not multiply back to the matrix (``U``'s
    lower triangle mirrors its upper one), with or without ``p_indices``; ``permute_l``'s are right."""
    p, lower, upper = _scipy["lu"](np.asfortranarray(_LU_PROBE), overwrite_a=True)
    return not np.allclose(p @ lower @ upper, _LU_PROBE)


def not_positive_definite(minor: int, index: tuple[int, ...] = (), batch: tuple[int, ...] = ()) -> LinAlgError:
    """SciPy's error for a Cholesky factorization whose ``minor``-th leading minor (1-based) is not positive
    definite, in matrix ``index`` of a stack of shape ``batch`` (the first failure in C order)."""
    if COMPILED_BATCH_LOOPS:
        flat = int(np.ravel_multi_index(index, batch)) if batch else 0
        return LinAlgError(f"Internal potrf return info = [{minor}] for slices [{flat}].")
    return LinAlgError(f"{minor}-th leading minor of the array is not positive definite")


def raise_first_failure(info: np.ndarray) -> None:
    """SciPy's LinAlgError for the first matrix (in C order, as SciPy's batch loop meets them) whose Cholesky
    ``info`` is positive, if any (``info`` of a single matrix: a 0-d array or a number)."""
    info = np.asarray(info)
    if not np.count_nonzero(info):  # the common case, told in a fraction of a µs
        return
    failed = np.flatnonzero(info > 0)
    if failed.size:
        index = tuple(int(i) for i in np.unravel_index(failed[0], info.shape))
        raise not_positive_definite(int(info[index]), index, info.shape)


def warn_singular(info, stacklevel: int) -> None:
    """SciPy's ``LinAlgWarning`` for each exactly singular matrix (positive ``info``, in C order), pointing
    ``stacklevel`` frames above the caller."""
    info = np.asarray(info)
    if not np.count_nonzero(info):
        return
    for k in np.extract(info > 0, info):
        warnings.warn(_SINGULAR.format(int(k)), LinAlgWarning, stacklevel=stacklevel + 1)


@functools.cache
def empty_result_dtypes(name: str, dtype: np.dtype, **options) -> tuple[np.dtype, ...]:
    """The dtypes of SciPy's ``name`` results for an empty matrix of ``dtype`` (SciPy 1.17 keeps ``dtype``, 1.18
    returns the LAPACK dtype from ``qr``), asked of SciPy on a 0 x 0 probe without its dtype warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return tuple(x.dtype for x in _arrays(_scipy[name](np.zeros((0, 0), dtype=dtype), **options)))


def not_square(name: str, shape: tuple[int, ...]) -> None:
    """Raise SciPy's own error for a matrix (or stack) of this shape that ``name`` needs square, from a stand-in of
    that shape that holds no memory."""
    _scipy[name](np.broadcast_to(np.float64(1.0), shape), check_finite=False)
    raise ValueError(f"expected square matrices, got the shape {shape}")


#: SciPy's functions on probe operands of the caller's dtypes (a matrix; a factor and a right-hand side for solves).
_DTYPE_PROBES: dict[str, Callable] = {
    "cho_solve": lambda c, b: _scipy["cho_solve"]((c, False), b[:, 0]),
    "lu_solve": lambda lu, b: _scipy["lu_solve"]((lu, np.arange(2)), b[:, 0]),
}


class _Deprecation(NamedTuple):
    """A DeprecationWarning SciPy gave a probe: its text and the line it pointed at."""

    text: str
    filename: str
    lineno: int

    @property
    def at_caller(self) -> bool:
        """Whether it pointed at the line that called SciPy (a line of this module, where the probes are called)."""
        return self.filename == __file__

    def warn(self, stacklevel: int) -> None:
        """Give it again: at the line ``stacklevel`` frames above the caller where SciPy gave it at its caller's,
        else at SciPy's own line, in SciPy's module (so the filters, the default ones included, treat it as
        SciPy's)."""
        if self.at_caller:
            warnings.warn(self.text, DeprecationWarning, stacklevel=stacklevel + 1)
        else:
            warnings.warn_explicit(self.text, DeprecationWarning, self.filename, self.lineno,
                                   module=_module_named(self.filename), registry=_SCIPY_LINES)


#: The registry of the warnings given again at SciPy's own lines (the "default" action's once per line).
_SCIPY_LINES: dict = {}


@functools.cache
def _module_named(filename: str) -> str | None:
    """The name of the imported module whose source is ``filename``."""
    return next((name for name, module in list(sys.modules.items())
                 if getattr(module, "__file__", None) == filename), None)


def _deprecations(call: Callable) -> tuple[_Deprecation, ...]:
    """The DeprecationWarnings ``call`` gives before it returns or raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call()
        except Exception:  # noqa: BLE001, S110 - only the warnings given before any error are asked for
            pass
    return tuple(_Deprecation(str(w.message), w.filename, w.lineno) for w in caught
                 if issubclass(w.category, DeprecationWarning))


@functools.cache
def _dtype_warnings(name: str, dtypes: tuple[np.dtype, ...]) -> tuple[_Deprecation, ...]:
    operands = [_PROBE.astype(dtype) for dtype in dtypes]
    return _deprecations(lambda: _DTYPE_PROBES.get(name, _scipy[name])(*operands))


@functools.cache
def refuses_dtype(name: str, dtype: np.dtype) -> bool:
    """Whether SciPy's ``name`` raises a TypeError for a matrix of ``dtype`` (SciPy 1.16's ``lu`` for long doubles,
    which its ``lu_factor`` computes in double precision), asked of SciPy on a probe."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _scipy[name](_PROBE.astype(dtype))
        except TypeError:
            return True
        except Exception:  # noqa: BLE001 - another error is not about the dtype
            return False
    return False


def dtype_warns(name: str, dtype: np.dtype) -> bool:
    """Whether SciPy's ``name`` gives a dtype warning (:func:`warn_dtypes_as_scipy`) for an operand of ``dtype``."""
    return bool(_dtype_warnings(name, (np.dtype(dtype),)))


def dtype_warned_at_caller(name: str, dtype: np.dtype) -> bool:
    """Whether SciPy's ``name`` gives its dtype warning for an operand of ``dtype`` at the line that called it (SciPy
    1.18's ``lu_factor``, ``lu`` and ``qr``; its ``cholesky`` gives it at a line of its own)."""
    return any(warning.at_caller for warning in _dtype_warnings(name, (np.dtype(dtype),)))


def warn_dtypes_as_scipy(name: str, *dtypes: np.dtype, stacklevel: int) -> None:
    """The DeprecationWarnings SciPy's ``name`` gives for operands of these dtypes (SciPy 1.18's for the dtypes LAPACK
    does not compute in: float16, long double, bool ...), asked of SciPy on probe operands, each at the line SciPy
    gives it at: its caller's (here ``stacklevel`` frames above the caller) or one of its own."""
    for warning in _dtype_warnings(name, dtypes):
        warning.warn(stacklevel + 1)


@functools.cache
def qr_lwork_deprecation() -> str | None:
    """The DeprecationWarning SciPy's ``qr`` gives, at the line that called it, for an ``lwork`` it takes (SciPy
    1.18's: the keyword no longer changes anything); None where the installed SciPy has none."""
    texts = [warning.text for warning in _deprecations(lambda: _scipy["qr"](_PROBE, lwork=None)) if warning.at_caller]
    return texts[0] if texts else None
