"""BLAS/LAPACK routines called through the function pointers SciPy exports, with the GIL released.

``scipy.linalg.cython_blas`` and ``cython_lapack`` publish every routine as a ``PyCapsule`` in ``__pyx_capi__``.
Calling the pointer through a ``ctypes.CFUNCTYPE`` prototype drops the GIL for the duration of the call, so
several runtime worker threads run BLAS in parallel (SciPy's f2py wrappers hold the GIL and serialize them).
All arguments are pointers (the Fortran convention of the Cython wrappers, without hidden string lengths).

The wrappers below call SciPy's library (:data:`SCIPY`) unless handed another :class:`Library`: NumPy's own
OpenBLAS (:func:`numpy_library`), for NumPy's shims, whose calls then leave no second BLAS's threads spinning on the
cores the caller's next NumPy call needs.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from ctypes import byref
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cython_blas, cython_lapack

#: dtype character -> BLAS/LAPACK prefix (the ``get_lapack_funcs`` convention).
PREFIX = {"f": "s", "d": "d", "F": "c", "D": "z"}

#: Generic kernel name -> routine name per prefix, where real and complex routines are named differently.
ROUTINE_NAME = {
    "herk": {"s": "ssyrk", "d": "dsyrk", "c": "cherk", "z": "zherk"},
    "orgqr": {"s": "sorgqr", "d": "dorgqr", "c": "cungqr", "z": "zungqr"},
}

#: Number of (pointer) arguments of each routine, to build its ctypes prototype.
ARITY = {
    "gemm": 13, "trsm": 11, "trmm": 11, "herk": 10, "potrf": 5, "getrf": 6, "laswp": 7,
    "geqrf": 8, "larft": 9, "larfb": 15, "orgqr": 9, "geqrt3": 7, "geqp3": 9, "potrs": 8, "getrs": 9,
}

#: Routines whose complex versions take one argument more (a real workspace, ``rwork``, before ``info``).
COMPLEX_RWORK = frozenset({"geqp3"})

_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _capsule_address(name: str) -> int:
    for module in (cython_blas, cython_lapack):
        capsule = module.__pyx_capi__.get(name)
        if capsule is not None:
            return _capsule_pointer(capsule, _capsule_name(capsule))
    raise LookupError(f"SciPy exports no BLAS/LAPACK routine named {name!r}")


@dataclass(frozen=True, eq=False)
class Library:
    """A BLAS/LAPACK library the wrappers call: ``address`` finds a routine by its LAPACK name (``"dpotrf"``),
    ``integer`` is its ``INTEGER`` (``c_int``, LP64, or ``c_int64``, ILP64). Each library is one object
    (:data:`SCIPY`, :func:`numpy_library`), compared and hashed by identity: :func:`routine` looks it up on every
    call."""

    name: str
    address: Callable[[str], int]
    integer: type[ctypes.c_int] | type[ctypes.c_int64]


#: SciPy's BLAS and LAPACK, through its Cython capsules (LP64).
SCIPY = Library("scipy", _capsule_address, ctypes.c_int)

#: The routine names the OpenBLAS that NumPy's wheels ship gives its ILP64 routines (scipy-openblas64).
_NUMPY_OPENBLAS_NAME = "scipy_{}_64_"


@functools.cache
def numpy_library() -> Library | None:
    """NumPy's own BLAS and LAPACK, where they are the OpenBLAS NumPy's wheels ship inside NumPy's directory
    (ILP64, its routines named ``scipy_<name>_64_``, as threadpoolctl finds it loaded); else None (another BLAS,
    whose names and integers are not known here)."""
    from threadpoolctl import threadpool_info  # noqa: PLC0415 - only NumPy's shims ask, once

    inside = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))), "numpy")
    for info in threadpool_info():
        path = info.get("filepath") or ""
        if info.get("internal_api") == "openblas" and os.path.abspath(path).startswith(inside):
            found = ctypes.CDLL(path)
            if hasattr(found, _NUMPY_OPENBLAS_NAME.format("dpotrf")):
                def address(name: str, found: ctypes.CDLL = found) -> int:
                    return ctypes.cast(getattr(found, _NUMPY_OPENBLAS_NAME.format(name)), ctypes.c_void_p).value

                return Library("numpy", address, ctypes.c_int64)
    return None


@functools.cache
def routine(kernel: str, dtype_char: str, library: Library = SCIPY) -> Callable[..., None]:
    """The ctypes function for ``kernel`` (e.g. ``"gemm"``) in the precision of ``dtype_char``, in ``library``."""
    prefix = PREFIX[dtype_char]
    name = ROUTINE_NAME.get(kernel, {}).get(prefix, prefix + kernel)
    arity = ARITY[kernel] + (kernel in COMPLEX_RWORK and prefix in "cz")
    prototype = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * arity))
    return prototype(library.address(name))


_REAL_CTYPE = {"f": ctypes.c_float, "d": ctypes.c_double, "F": ctypes.c_float, "D": ctypes.c_double}


def scalar(value: complex, dtype_char: str) -> ctypes._SimpleCData | ctypes.Array:
    """A ctypes scalar of the dtype (complex numbers as two reals), to pass by reference."""
    real = _REAL_CTYPE[dtype_char]
    if dtype_char in "FD":
        value = complex(value)
        return (real * 2)(value.real, value.imag)
    return real(value.real if isinstance(value, complex) else value)


def real_scalar(value: float, dtype_char: str) -> ctypes._SimpleCData:
    """A ctypes real scalar of the dtype's real precision (``herk``'s alpha and beta)."""
    return _REAL_CTYPE[dtype_char](value)


def char(flag: str) -> ctypes.c_char:
    """A one-character option (``'L'``, ``'N'``, ``'C'`` …)."""
    return ctypes.c_char(flag.encode())


def integer(value: int) -> ctypes.c_int:
    """A LAPACK (LP64) integer."""
    return ctypes.c_int(value)


def address(a: np.ndarray) -> ctypes.c_void_p:
    """The data pointer of an array or view."""
    return ctypes.c_void_p(a.__array_interface__["data"][0])


def leading_dimension(a: np.ndarray) -> int:
    """The BLAS leading dimension of a 2-D view whose rows are contiguous (a tile of a Fortran matrix)."""
    rows = a.shape[0]
    if a.ndim != 2 or (rows > 1 and a.strides[0] != a.itemsize):
        raise ValueError("tile kernels need 2-D views with contiguous columns (Fortran order)")
    if a.shape[1] <= 1:
        return max(rows, 1)
    return max(a.strides[1] // a.itemsize, rows, 1)


def gemm(trans_a: str, trans_b: str, alpha: complex, a: np.ndarray, b: np.ndarray, beta: complex,
         c: np.ndarray, *, library: Library = SCIPY) -> None:
    """``C = alpha op(A) op(B) + beta C`` in place on Fortran views (BLAS ``?gemm``); ``trans`` is ``"N"``,
    ``"T"`` or ``"C"``."""
    kind = c.dtype.char
    m, n = c.shape
    op_a = a.shape if trans_a == "N" else a.shape[::-1]
    op_b = b.shape if trans_b == "N" else b.shape[::-1]
    if op_a[0] != m or op_b[1] != n or op_a[1] != op_b[0]:
        # BLAS reads its operands by these sizes and would read past views of the wrong shape
        raise ValueError(f"gemm: op(A) of shape {op_a} times op(B) of shape {op_b} does not make C {c.shape}")
    k = op_a[1]
    if m == 0 or n == 0:
        return
    integer_ = library.integer
    routine("gemm", kind, library)(
        byref(char(trans_a)), byref(char(trans_b)), byref(integer_(m)), byref(integer_(n)), byref(integer_(k)),
        byref(scalar(alpha, kind)), address(a), byref(integer_(leading_dimension(a))),
        address(b), byref(integer_(leading_dimension(b))), byref(scalar(beta, kind)),
        address(c), byref(integer_(leading_dimension(c))))


def herk(uplo: str, trans: str, alpha: float, a: np.ndarray, beta: float, c: np.ndarray, *,
         library: Library = SCIPY) -> None:
    """The ``uplo`` triangle of ``C = alpha op(A) op(A)^H + beta C`` in place (BLAS ``?herk``, ``?syrk`` for real
    dtypes); ``trans`` ``"N"``: ``op(A) = A``, else ``A^H``."""
    kind = c.dtype.char
    n = c.shape[0]
    k = a.shape[1] if trans == "N" else a.shape[0]
    if n == 0:
        return
    integer_ = library.integer
    routine("herk", kind, library)(
        byref(char(uplo)), byref(char(trans)), byref(integer_(n)), byref(integer_(k)),
        byref(real_scalar(alpha, kind)), address(a), byref(integer_(leading_dimension(a))),
        byref(real_scalar(beta, kind)), address(c), byref(integer_(leading_dimension(c))))


def potrf(uplo: str, a: np.ndarray, *, library: Library = SCIPY) -> int:
    """LAPACK's ``?potrf`` of the square Fortran view ``a`` in place on its ``uplo`` triangle; its ``info``."""
    info = library.integer(0)
    routine("potrf", a.dtype.char, library)(byref(char(uplo)), byref(library.integer(a.shape[0])), address(a),
                                            byref(library.integer(leading_dimension(a))), byref(info))
    return info.value


def potrf_right_looking(uplo: str, a: np.ndarray, block: int, *, library: Library = SCIPY) -> int:
    """The Cholesky factorization of ``a`` in place on its ``uplo`` triangle by LAPACK's right-looking variant
    (``SRC/VARIANTS/cholesky/RL``), each call on every core BLAS may use: a ``block``-wide diagonal block by
    ``?potrf``, the block column (row, for ``"U"``) below it by :func:`trsm_by_halves`, then the whole trailing
    matrix by one ``?herk``. Its ``info`` is ``?potrf``'s: the first leading minor that is not positive definite.

    The trailing ``?herk`` is where the flops are, in calls large enough for BLAS's threads; OpenBLAS's own
    ``dpotrf`` spends more of its time in smaller ones (2-core Xeon, SkylakeX kernels, float64: 0.153-0.163 s against
    0.174-0.191 s at order 4000, 24.6-26.7 ms against 28.9-32.6 at 2000, either triangle, block 256). Whether it is
    faster depends on the kernels and the dtype (complex and Haswell kernels ran level or slower there), so the host
    path runs it only where ``hetlapack calibrate`` timed it faster."""
    n = a.shape[0]
    lower = uplo == "L"
    trans = "C" if a.dtype.char in "FD" else "T"
    for start in range(0, n, block):
        stop = min(start + block, n)
        diagonal = a[start:stop, start:stop]
        info = potrf(uplo, diagonal, library=library)
        if info:
            return start + info
        if lower:  # A[s:, k] = A[s:, k] A[k, k]^{-H}; A[s:, s:] -= A[s:, k] A[s:, k]^H
            trsm_by_halves("R", "L", trans, "N", 1.0, diagonal, a[stop:, start:stop], library=library)
            herk("L", "N", -1.0, a[stop:, start:stop], 1.0, a[stop:, stop:], library=library)
        else:  # A[k, s:] = A[k, k]^{-H} A[k, s:]; A[s:, s:] -= A[k, s:]^H A[k, s:]
            trsm_by_halves("L", "U", trans, "N", 1.0, diagonal, a[start:stop, stop:], library=library)
            herk("U", trans, -1.0, a[start:stop, stop:], 1.0, a[stop:, stop:], library=library)
    return 0


def trsm(side: str, uplo: str, trans: str, diag: str, alpha: complex, a: np.ndarray, b: np.ndarray, *,
         library: Library = SCIPY) -> None:
    """``B = alpha op(A)^{-1} B`` (side ``"L"``) or ``B = alpha B op(A)^{-1}`` (``"R"``) in place (BLAS ``?trsm``)."""
    _triangular("trsm", side, uplo, trans, diag, alpha, a, b, library)


def trmm(side: str, uplo: str, trans: str, diag: str, alpha: complex, a: np.ndarray, b: np.ndarray) -> None:
    """``B = alpha op(A) B`` (side ``"L"``) or ``B = alpha B op(A)`` (``"R"``) in place (BLAS ``?trmm``)."""
    _triangular("trmm", side, uplo, trans, diag, alpha, a, b)


def _triangular(kernel: str, side: str, uplo: str, trans: str, diag: str, alpha: complex, a: np.ndarray,
                b: np.ndarray, library: Library = SCIPY) -> None:
    """BLAS ``?trsm`` or ``?trmm`` (the same arguments) on Fortran views."""
    kind = b.dtype.char
    m, n = b.shape
    if m == 0 or n == 0:
        return
    integer_ = library.integer
    routine(kernel, kind, library)(
        byref(char(side)), byref(char(uplo)), byref(char(trans)), byref(char(diag)), byref(integer_(m)),
        byref(integer_(n)), byref(scalar(alpha, kind)), address(a), byref(integer_(leading_dimension(a))),
        address(b), byref(integer_(leading_dimension(b))))


#: Order of the triangles :func:`trsm_by_halves` hands to BLAS's ``?trsm`` whole: LAPACK's usual block size. Halving
#: down to it put more of a tile's solve in GEMM, twice as fast as ``?trsm`` on one core (OpenBLAS 0.3.30, tile
#: 512, 2-core Xeon: 30-39 GFLOP/s whole, 37-56 by halves down to 64; 32 was slower again).
TRSM_LEAF = 64


def trsm_by_halves(side: str, uplo: str, trans: str, diag: str, alpha: complex, a: np.ndarray, b: np.ndarray,
                   leaf: int = TRSM_LEAF, *, library: Library = SCIPY) -> None:
    """:func:`trsm` cut in two while the triangle is larger than ``leaf``: solve with one half of ``op(A)``, take
    that part of the solution out of the other half's right-hand side by one GEMM, solve with the other half. It is
    the blocked substitution BLAS's ``?trsm`` makes itself, with the same error bounds, and no inverse is formed."""
    order = b.shape[0] if side == "L" else b.shape[1]
    if order <= leaf or b.size == 0:
        trsm(side, uplo, trans, diag, alpha, a, b, library=library)
        return
    half = order // 2
    head, tail = a[:half, :half], a[half:order, half:order]
    off_diagonal = a[half:order, :half] if uplo == "L" else a[:half, half:order]
    b_head, b_tail = (b[:half], b[half:]) if side == "L" else (b[:, :half], b[:, half:])
    # the part of X that needs no other: the head where op(A) is lower triangular and on the left, or upper and on
    # the right; the tail otherwise
    lower = (uplo == "L") == (trans == "N")
    (first, x_first), (second, x_second) = ((head, b_head), (tail, b_tail)) if lower == (side == "L") else \
        ((tail, b_tail), (head, b_head))
    trsm_by_halves(side, uplo, trans, diag, alpha, first, x_first, leaf, library=library)
    if side == "L":
        gemm(trans, "N", -1.0, off_diagonal, x_first, alpha, x_second, library=library)
    else:
        gemm("N", trans, -1.0, x_first, off_diagonal, alpha, x_second, library=library)
    trsm_by_halves(side, uplo, trans, diag, 1.0, second, x_second, leaf, library=library)
