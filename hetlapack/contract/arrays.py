"""Operands at the boundary: look at a user's array once, convert it once, the SciPy way (its dtype rules, flags,
qr modes and ``trans`` codes, and the working copy a factorization may overwrite)."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable

import numpy as np
from scipy.linalg.lapack import get_lapack_funcs

from ..dtypes import lapack_dtype, native
from ..machine import l1_data_cache, l2_cache, usable_cores
from .originals import scipy_functions
from .shared_work import share_out


def is_cupy(a) -> bool:
    """Whether ``a`` is a CuPy array, told by its type's module: CuPy is never imported to find out."""
    return type(a).__module__.split(".")[0] == "cupy"


def array_module(a) -> str:
    """'cupy' for CuPy arrays; 'numpy' for ndarrays (and subclasses) and array_likes; the top-level package name
    for other arrays."""
    if is_cupy(a):
        return "cupy"
    if isinstance(a, np.ndarray) or not hasattr(a, "__array_namespace__"):
        return "numpy"
    return type(a).__module__.split(".")[0]


def device_name(a) -> str:
    """The device holding ``a``: ``"cuda:N"`` for a CuPy array on GPU N, ``"cpu"`` otherwise."""
    return f"cuda:{a.device.id}" if is_cupy(a) else "cpu"


def c_ordered_in_place(x: np.ndarray, upper: bool = False) -> np.ndarray:
    """A square Fortran-ordered matrix that owns its memory, as a C-ordered array in that same memory, where a copy
    would hold a second matrix: its values are transposed in place a tile at a time (tiles of :func:`swap_tile`,
    shared among the usable cores as :func:`fortran_copy`'s are) and the transposed view returned. With ``upper``
    only the upper triangle is kept, zeros below, to the bit: R from a square geqrf output, whose reflectors are never
    read (each tile above the diagonal is copied, transposed, onto the tile that mirrors it, then zeroed). ``x`` is no
    longer to be read. A fresh matrix costs its first touch: R of order 4000 copied into one took 27-35 ms right after
    SciPy 1.17's QR and 130-178 ms right after 1.18's on a 2-core Xeon VM, 28-41 ms alone."""
    n = x.shape[0]
    tile = swap_tile(x.itemsize)
    corners = [(i, j) for j in range(0, n, tile) for i in range(0, j + 1, tile)]

    def transpose_tile(k: int) -> None:
        i, j = corners[k]
        above = x[i:i + tile, j:j + tile]
        if i == j:
            above[...] = np.tril(above.T) if upper else above.T.copy()
            return
        below = x[j:j + tile, i:i + tile]
        mirrored = None if upper else below.T.copy()
        below[...] = above.T
        above[...] = 0 if upper else mirrored

    share_out(len(corners), transpose_tile, usable_cores() if n > tile else 1)
    return x.T


def swap_tile(itemsize: int) -> int:
    """Rows of the tiles :func:`c_ordered_in_place` transposes in place, a multiple of 32: two tiles and a tile of
    scratch in a core's L2 cache. Order 4000, float64, 2-core Xeon VM with 2 MiB of L2: 18 ms at tile 256, 22 at
    384 and 41 at 768 (:func:`tile_order`, the copies' tile, which walks one tile through the L1 cache), where the
    transposition on one core in blocks of 256 took 36 ms."""
    return max(32, math.isqrt(l2_cache() // (3 * itemsize)) // 32 * 32)


def fortran_matrices(x, xp=np):
    """A stack whose every matrix is Fortran-ordered, as SciPy's batch loop stacks LAPACK's outputs (``xp``: the
    array module, NumPy or CuPy): ``x`` itself where it already is."""
    swapped = x.swapaxes(-1, -2)
    return x if swapped.flags.c_contiguous else xp.ascontiguousarray(swapped).swapaxes(-1, -2)


def native_byte_order(a, overwrite_a) -> tuple:
    """``(a, overwrite_a)`` as given, or where ``a`` is a byte-swapped ndarray of a LAPACK dtype a copy in the
    machine's byte order, its layout kept, and ``False``: SciPy 1.17's ``lu`` and 1.18's ``cholesky``,
    ``cho_factor``, ``lu`` and ``qr`` fail on swapped bytes or factor them as they lie in memory, where its f2py
    wrappers (``lu_factor``'s, the solves') copy them to the machine's order first, into a copy they then lay the
    results out of as for a matrix they were not allowed to overwrite. SciPy casts other dtypes into a LAPACK dtype in
    the machine's order itself, and names the dtype it was given in its warnings; an empty matrix it returns in the
    dtype given, byte order included."""
    if isinstance(a, np.ndarray) and not a.dtype.isnative and a.dtype.char in "fdFD" and a.size:
        return a.astype(native(a.dtype)), False
    return a, overwrite_a


def peek(a):
    """``a`` itself when it already has a shape and a NumPy dtype (NumPy and CuPy arrays), else ``np.asarray(a)``,
    as SciPy converts it (lists, ``__array__`` objects, and tensors whose dtype is their library's own, as torch's)."""
    if hasattr(a, "shape") and isinstance(getattr(a, "dtype", None), np.dtype):
        return a
    return np.asarray(a)


def memory_order(a) -> str:
    """``"F"`` for an array whose matrices are Fortran-contiguous, ``"C"`` for any other (C-ordered or strided, which
    SciPy's own call converts; an object without ``flags`` is converted to C order)."""
    return "F" if getattr(getattr(a, "flags", None), "f_contiguous", False) else "C"


def plain_matrix(a) -> bool:
    """A 2-D ndarray (not a subclass) in a LAPACK dtype: what the shims may hand a library's routine below its
    Python checks (SciPy's below its batch decorator, or its compiled loops; NumPy's gufuncs)."""
    return type(a) is np.ndarray and a.ndim == 2 and a.dtype.char in "fdFD"


def identical(ours, theirs) -> bool:
    """Whether two sequences of arrays are equal element by element, in dtype, shape and layout: how a shim tries a
    library's private routine on a probe against its public function before it trusts it."""
    def key(x):
        return x.dtype, x.shape, x.flags.c_contiguous, x.flags.f_contiguous
    return len(ours) == len(theirs) and all(key(x) == key(y) and np.array_equal(x, y) for x, y in zip(ours, theirs))


@functools.cache
def scipy_lapack_dtype(*dtypes: np.dtype) -> np.dtype | None:
    """The dtype SciPy's LAPACK wrappers compute in for inputs of these dtypes (None when SciPy rejects one)."""
    if any(np.dtype(dtype).kind not in "biufc" for dtype in dtypes):
        return None
    return lapack_dtype(*dtypes)


@functools.cache
def numpy_linalg_dtype(dtype: np.dtype) -> np.dtype | None:
    """The dtype numpy.linalg computes in: double precision for every type it takes, single precision included
    (its ``_commonType``, which rounds the double result back to single); None for the types it rejects, such as
    float16 and longdouble."""
    if dtype.kind in "biu" or dtype.char in "fd":
        return np.dtype(np.float64)
    return np.dtype(np.complex128) if dtype.char in "FD" else None


#: ``scipy.linalg.qr``'s modes ('qr' is its old name for 'full').
SCIPY_QR_MODES = ("full", "qr", "r", "economic", "raw")


def check_scipy_qr_mode(mode) -> None:
    """SciPy's ``ValueError`` for a mode ``scipy.linalg.qr`` does not take (it checks the mode before the array)."""
    if mode not in SCIPY_QR_MODES:  # the installed SciPy's own error (1.18 lists 'qr' too)
        scipy_functions["qr"](np.eye(2), mode=mode)
        raise ValueError(f"Mode argument should be one of {list(SCIPY_QR_MODES)}")


def scipy_qr_forms_q(mode: str) -> bool:
    """Whether ``scipy.linalg.qr`` returns Q in ``mode`` (``'full'``, ``'economic'``; not ``'r'`` or ``'raw'``)."""
    return mode not in ("r", "raw")


def scipy_qr_sizes(mode: str, m: int, n: int) -> tuple[int, int]:
    """The columns of Q (0: no Q, :func:`scipy_qr_forms_q`) and the rows of R that ``scipy.linalg.qr`` returns in
    ``mode`` for an ``m x n`` matrix."""
    rows = min(m, n) if mode in ("economic", "raw") else m
    return (rows if scipy_qr_forms_q(mode) else 0), rows


def check_flags(*flags, values: np.ndarray | None = None) -> None:
    """SciPy hands f2py ``overwrite_a or copied`` (``overwrite_b`` alike), so f2py sees a flag's own value only when
    it is true, and rejects a non-integer one with this TypeError; the accelerated paths reject the same values the
    same way (``lower``, which f2py reads otherwise, goes through :func:`potrs_lower`).
    SciPy checks its array for infinities and NaNs before f2py sees a flag: given those ``values`` (when
    ``check_finite``), a bad flag on a bad array raises SciPy's ValueError instead."""
    for flag in flags:
        if flag:
            try:
                operator.index(flag)
            except TypeError:
                if values is not None:
                    validated(values, check_finite=True)
                raise


#: A lower Cholesky factor and a right-hand side: which triangle f2py's potrs read shows the ``lower`` it understood.
_PROBE_FACTOR, _PROBE_RHS = np.array([[1.0, 0.0], [2.0, 1.0]]), np.ones(2)


def potrs_lower(dtype: np.dtype, lower, overwrite_b) -> bool:
    """``lower`` as SciPy's potrs call (``cho_solve``) understands it: f2py converts the flag its own way and raises
    its own errors, so the paths that make no f2py call let it read the flag on a 2 x 2 solve. Read as lower, the
    probe factor solves to ``[3, -1]``; read as upper, its upper triangle is the identity. A plain ``0`` or ``1``
    f2py reads as itself, and a boolean array (``cho_factor``'s flags for a stack) as its first element: no probe
    there (with a plain ``overwrite_b``), which would cost a small stack's solve several µs."""
    plain_overwrite = type(overwrite_b) in (bool, int)
    if plain_overwrite and type(lower) in (bool, int) and lower in (0, 1):
        return bool(lower)
    if plain_overwrite and isinstance(lower, np.ndarray) and lower.dtype == bool and lower.size:
        return bool(lower.flat[0])
    x, _ = get_lapack_funcs("potrs", dtype=dtype)(_PROBE_FACTOR.astype(dtype), _PROBE_RHS.astype(dtype), lower=lower,
                                                  overwrite_b=overwrite_b or 0)
    return bool(x[1] != 1)


#: LU factors (``P = I``) whose solves with ``A``, ``A^T`` and ``A^H`` differ (real ones: ``A`` and ``A^T``), and a
#: right-hand side: which solve f2py's getrs made shows the ``trans`` it understood.
_LU_PROBE_REAL, _LU_PROBE_COMPLEX = np.array([[1.0, 1.0], [2.0, 1.0]]), np.array([[1.0, 1.0], [1j, 1.0]])
_LU_PROBE_RHS = np.array([1.0, 0.0])


def _plain_integer(value) -> bool:
    return isinstance(value, (int, np.integer))


def plain_trans(trans) -> bool:
    """Whether ``trans`` is a plain 0, 1 or 2, which f2py reads as itself (anything else is f2py's to read)."""
    return _plain_integer(trans) and 0 <= trans <= 2


def getrs_trans(dtype: np.dtype, trans, overwrite_b) -> int:
    """``trans`` as SciPy's getrs call understands it (0, 1 or 2; 1 for any transpose of a real matrix): f2py converts
    it (``None`` is its default, 0) and raises its own errors (``trans=3``, ``"T"``, ``overwrite_b=1.5``), so the
    GPU's solves, which make no f2py call, let it read the flags on a 2 x 2 solve, as :func:`potrs_lower` does."""
    if plain_trans(trans) and (not overwrite_b or _plain_integer(overwrite_b)):
        return int(trans)  # what f2py reads these as, without the probe's solves (tens of microseconds a call)
    dtype = np.dtype(dtype)
    packed = (_LU_PROBE_COMPLEX if dtype.kind == "c" else _LU_PROBE_REAL).astype(dtype)
    x, _ = get_lapack_funcs("getrs", dtype=dtype)(packed, np.arange(2, dtype=np.int32), _LU_PROBE_RHS.astype(dtype),
                                                  trans=trans, overwrite_b=overwrite_b or 0)
    a = np.tril(packed, -1) + np.eye(2, dtype=dtype)
    a = a @ np.triu(packed)
    for code, op in enumerate((a, a.T, a.conj().T)):
        if np.allclose(x, np.linalg.solve(op, _LU_PROBE_RHS)):
            return code
    raise AssertionError(f"getrs solved its probe with none of A, A^T, A^H for trans={trans!r}")


def getrs_square_error(dtype: np.dtype) -> None:
    """Raise the error SciPy's getrs call raises for a factor that is not square (f2py's, on a 2 x 1 stand-in: its
    text names no shape)."""
    dtype = np.dtype(dtype)
    get_lapack_funcs("getrs", dtype=dtype)(np.zeros((2, 1), dtype), np.zeros(1, np.int32), np.zeros(2, dtype))
    raise ValueError("the LU factor is not square")


def batch_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """``np.broadcast_shapes(*shapes)``, told at once where the shapes are equal, as a solve's mostly are (NumPy's
    costs a few µs of a small stack's call)."""
    return tuple(shapes[0]) if all(shape == shapes[0] for shape in shapes) else np.broadcast_shapes(*shapes)


def solve_batch(factor_shape: tuple[int, ...], b_shape: tuple[int, ...],
                piv=None) -> tuple[tuple[int, ...], bool] | None:
    """SciPy's batch rule for solves: ``b`` has two core dimensions when it has at least two, else one (a vector),
    and the batch dimensions of the factor, the pivots if any and ``b`` broadcast in that order of arguments (its
    error names them by position). Returns the batch shape and whether ``b`` is a vector, or None when the shapes
    make no solve (the factor is not square matrices, ``b`` is a scalar or its rows are not their order, or the
    pivots are not as many as the order): SciPy's own call then raises its error."""
    vector = len(b_shape) == 1
    if (len(factor_shape) < 2 or factor_shape[-1] != factor_shape[-2] or not b_shape
            or factor_shape[-1] != b_shape[-1 if vector else -2]
            or (piv is not None and np.shape(piv)[-1:] != factor_shape[-1:])):
        return None
    pivots = () if piv is None else (np.shape(piv)[:-1],)
    return batch_shape(factor_shape[:-2], *pivots, b_shape[:-1 if vector else -2]), vector


def broadcast(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(a, shape)``, or ``a`` itself where it has that shape already: a solve's operands mostly do,
    and the view costs a few µs of a small stack's call."""
    return a if a.shape == shape else np.broadcast_to(a, shape)


def unshared_overwrite_b(overwrite_b, factor, b, piv=None):
    """``overwrite_b`` for SciPy's own solve, dropped where ``b`` is broadcast over a stack of factors. There SciPy's
    batch loop solves in place in the same rows of ``b`` for every member, each solve overwriting the last, and
    returns wrong solutions; the flag permits overwriting, it does not promise it. A value f2py rejects is kept, so
    that SciPy still raises its error."""
    try:
        check_flags(overwrite_b)
        shapes = solve_batch(np.shape(factor), np.shape(b), piv) if overwrite_b else None
    except (TypeError, ValueError):  # a flag f2py rejects, or shapes SciPy rejects: SciPy raises its error
        return overwrite_b
    if shapes is None:
        return overwrite_b
    batch, vector = shapes
    b_batch = np.shape(b)[:-1 if vector else -2]
    return overwrite_b if np.prod(b_batch) == np.prod(batch) else False


def validated(a, check_finite: bool) -> np.ndarray:
    """SciPy's entry conversion: ``asarray_chkfinite`` when asked (its ValueError text), else ``asarray``."""
    return np.asarray_chkfinite(a) if check_finite else np.asarray(a)


def read_overwrite_flag(flag, a1: np.ndarray, original, dtype: np.dtype) -> None:
    """Read ``overwrite_a`` where SciPy's ``lu`` reads it: its truth value, unless converting ``original`` to ``a1``
    of ``dtype`` copied it; so a flag that has none (an array of several booleans) raises SciPy's ValueError."""
    if a1.dtype == dtype and not _datacopied(a1, original):
        bool(flag)  # SciPy's ``if not overwrite_a``: raises where the flag has no truth value


def _datacopied(arr: np.ndarray, original) -> bool:
    """Whether ``arr`` is a private copy made while converting ``original`` (SciPy's ``_datacopied`` rule)."""
    if arr is original:
        return False
    if not isinstance(original, np.ndarray) and hasattr(original, "__array__"):
        return False
    return arr.base is None


def writable_in_place(a1: np.ndarray, original, dtype: np.dtype, overwrite: bool) -> bool:
    """Whether the factors may be written into ``a1`` itself: the caller allowed it (or ``a1`` is already a private
    copy of ``original``), and ``a1`` is a writable Fortran-ordered ndarray of ``dtype``."""
    own = overwrite or _datacopied(a1, original)
    return own and a1.dtype == dtype and a1.flags.f_contiguous and a1.flags.writeable and type(a1) is np.ndarray


def tile_order() -> int:
    """Rows of the tiles of :func:`fortran_copy`: as many as the L1 cache holds lines. Its copy walks each tile's
    target a column at a time and reads one line of each source row, which the tile's next columns read again."""
    size, line = l1_data_cache()
    return max(size // line, 1)


def fortran_copy(a: np.ndarray, dtype: np.dtype | None = None, *, triangle: bool | None = None,
                 read: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
    """A Fortran-ordered copy of the 2-D ``a`` (in ``dtype``, default ``a``'s), made a tile at a time: NumPy's
    own transposing copy of a C-ordered matrix larger than the cache misses the cache on every element of one
    side (3x slower at order 4000). A matrix of more than two tiles each way is copied by every usable core, each
    taking the next tile not yet taken (:func:`~.shared_work.share_out`; NumPy lets go of the GIL while it copies):
    one core's copy moved 4-5 GB/s, waiting on the caches' and memory's latency, not their bandwidth. With two tiles
    or fewer one tile holds most of the matrix, and right after a BLAS call, whose idle thread spins on the second
    core, two threads copied slower than one (order 1000, 2-core Xeon VM, SciPy 1.18's layout: 3.2 against 2.7 ms,
    best of 30; 3.8 against 3.1 median), so the caller copies it alone. A cast that may
    lose information (to a ``dtype`` NumPy does not cast to safely, which can warn) stays on the calling thread,
    where its warnings belong.

    With ``triangle`` (``True``: lower, ``False``: upper) only that triangle is copied and the other zeroed, as a
    Cholesky factor's or R's is (:func:`copy_tile_of_triangle`). ``read`` is given every value of ``a`` once, a tile
    at a time while it is in the cache (``contract.finite.FiniteCheck.read``: SciPy's ``check_finite``)."""
    out = np.empty(a.shape, dtype=a.dtype if dtype is None else dtype, order="F")
    rows, cols = a.shape
    tile = tile_order()
    corners = [(i, j) for j in range(0, cols, tile) for i in range(0, rows, tile)]

    def copy_tile(k: int) -> None:
        i, j = corners[k]
        copy_tile_of_triangle(out[i:i + tile, j:j + tile], a[i:i + tile, j:j + tile], i, j, triangle, read)

    shares = usable_cores() if beyond_two_tiles(a.shape) and np.can_cast(a.dtype, out.dtype, "safe") else 1
    share_out(len(corners), copy_tile, shares)
    return out


def copy_tile_of_triangle(target: np.ndarray, source: np.ndarray, row: int, col: int, triangle: bool | None,
                          read: Callable[[np.ndarray], None] | None = None) -> None:
    """Fill ``target`` from ``source``, the tile of a matrix whose first element is at ``(row, col)``, keeping only
    ``triangle`` of the matrix (``True``: lower, ``False``: upper, ``None``: all) and zeros in the other; the matrix
    is cut at the same bounds each way, so a tile with ``row == col`` is one its diagonal crosses and any other lies
    wholly on one side. A tile wholly in the other triangle is zeroed without being copied; a diagonal tile is copied
    and its part in the other triangle zeroed while it is in the cache, where a pass of its own over the whole copy
    read every column again (2-core Xeon VM, the host path's Cholesky of a C-ordered matrix right after SciPy's,
    best of 15: 198-202 ms against 210-221 at order 4000, 33.8-34.2 against 35.3-36.7 at 2000). ``read`` is given
    every value of ``source`` once, before any is zeroed: the copy where it was made, ``source`` where it was not."""
    if triangle is not None and row != col and (row < col) == triangle:
        target[...] = 0
        if read is not None:
            read(source)
        return
    target[...] = source
    if read is not None:
        read(target)
    if triangle is not None and row == col:
        zero_other_triangle(target, triangle)


#: Columns per block of :func:`zero_other_triangle`: few enough blocks that its Python (a few µs a block) is small
#: beside the zeroing, and a diagonal block's mask of 4 KiB, which stays in the L1 cache.
_ZERO_BLOCK = 64

#: Within a diagonal block, the entries above the diagonal (its transpose: those below).
_ABOVE = np.triu(np.ones((_ZERO_BLOCK, _ZERO_BLOCK), dtype=bool), 1)
_ABOVE.flags.writeable = False


def zero_other_triangle(c: np.ndarray, lower: bool) -> None:
    """Zero, in place, the triangle of the matrix ``c`` that a ``lower`` (else upper) Cholesky factor does not use,
    in runs along memory: a block of columns at a time, or of rows (the columns of ``c.T``) where ``c`` is
    C-ordered; each block's part off the diagonal is one fill, its diagonal part zeroed through a mask. f2py's
    ``potrf`` with ``clean`` walks the rows across every column instead (order 4000, 2-core Xeon: 42 ms against
    10); a slice a column took 0.7 µs of Python each, more than f2py's whole clean up to order 1000 (AMD EPYC:
    0.75 ms against 0.36 at order 1000)."""
    if c.flags.c_contiguous and not c.flags.f_contiguous:
        c, lower = c.T, not lower
    for start in range(0, c.shape[1], _ZERO_BLOCK):
        stop = min(start + _ZERO_BLOCK, c.shape[1])
        diagonal = c[start:stop, start:stop]
        rows, cols = diagonal.shape
        if lower:
            c[:start, start:stop] = 0
            diagonal[_ABOVE[:rows, :cols]] = 0
        else:
            c[stop:, start:stop] = 0
            diagonal[_ABOVE.T[:rows, :cols]] = 0


def upper_trapezoid(packed: np.ndarray, rows: int) -> np.ndarray:
    """``np.triu(packed[..., :rows, :])``, R from geqrf's output, in the layout ``np.triu`` gives it (C order) and
    to the bit: a matrix is copied a tile at a time (its transpose's Fortran copy, keeping the lower triangle) and
    each row's part left of the diagonal zeroed as its tile is copied, where ``np.triu``'s masked copy of a
    Fortran-ordered matrix transposes it element by element (0.12-0.14 s against 0.05-0.06 s at order 4000 on a
    2-core AMD EPYC) and allocates a mask beside it."""
    if packed.ndim != 2:
        return np.triu(packed[..., :rows, :])
    return fortran_copy(packed[:rows, :].T, triangle=True).T


def copies_by_tiles(a: np.ndarray) -> bool:
    """Whether a Fortran-ordered copy of ``a`` is made by :func:`fortran_copy`: a C-ordered matrix of more than two
    tiles each way. Where the matrix and its copy fit in the cache NumPy's own copy ties the tiles (float64, 0.96-1.07x
    at orders 770-1500 on a 2-core Xeon, 0.96-1.04x up to 1200 on an AMD EPYC); past the share of the last-level
    cache this process really gets, which sysfs does not tell (the Xeon's lists 260 MiB, yet NumPy's copy fell behind
    from 34 MiB: 1.54x at order 1700, 2.0x at 2000, 2.5x at 4000), the tiles win. With two tiles or fewer each way
    one tile holds most of the matrix, so the cores share it unevenly, and right after another BLAS call, whose idle
    thread spins on the second core, the call lost by its copy (Xeon, 768-row tiles, right after SciPy's call, best
    of 40, ms: ``cho_factor`` 7.45 against 7.21 with NumPy's copy at order 1000, 5.53 against 5.24 at 800;
    ``lu_factor`` 14.18 against 13.55 at 1000; Cholesky, whose tiles copy one triangle, level)."""
    return a.ndim == 2 and beyond_two_tiles(a.shape) and a.flags.c_contiguous and not a.flags.f_contiguous


def beyond_two_tiles(shape: tuple[int, ...]) -> bool:
    """Whether a matrix of ``shape`` spans more than two of :func:`tile_order`'s tiles each way: where a copy by
    tiles beats NumPy's and the cores share it (:func:`copies_by_tiles`, :func:`fortran_copy`)."""
    return min(shape[-2:]) > 2 * tile_order()


def working_copy(a1: np.ndarray, original, dtype: np.dtype, overwrite: bool) -> np.ndarray:
    """A Fortran-ordered array of ``dtype`` the kernels may overwrite: ``a1`` itself only when SciPy's rules allow
    (:func:`writable_in_place`); a copy otherwise, made a tile at a time from a C-ordered matrix of more than a
    tile each way (:func:`fortran_copy`)."""
    if writable_in_place(a1, original, dtype, overwrite):
        return a1
    if copies_by_tiles(a1):
        return fortran_copy(a1, dtype)
    return np.array(a1, dtype=dtype, order="F", copy=True)


def upload_operand(a1: np.ndarray, original, dtype: np.dtype, overwrite: bool) -> np.ndarray:
    """What the gpu path uploads: ``a1`` in ``dtype`` as it lies, with no working copy on the host (the device
    lays it out), and read-only unless the factors may be written back into it (:func:`writable_in_place`)."""
    if writable_in_place(a1, original, dtype, overwrite):
        return a1
    source = a1.astype(dtype, copy=False)
    if source is a1:
        source = a1.view(np.ndarray)
        source.flags.writeable = False
    return source
