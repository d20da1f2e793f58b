"""Batched LAPACK kernels for stacks ``(..., m, n)`` of small matrices: the entry points dispatch calls.

Every kernel computes per matrix what LAPACK computes (same pivots, reflector signs, info codes), never modifies its
inputs, and returns C-ordered outputs, or Fortran-ordered matrices where asked (``fortran=True``: the layout
SciPy's batch loop gives, written directly instead of copied afterwards). The compiled loops live in
``_cholesky``, ``_lu``, ``_qr`` and ``_solve`` (our own arithmetic, interleaved) and ``_lapack_each`` (SciPy's LAPACK
on each matrix); this module shapes the stacks, allocates the outputs and picks the kernel compiled for the dtype.
Each entry point runs the LAPACK loop where asked (``lapack=True``): SciPy's results to the bit.
Each kernel is compiled once per dtype (inputs typed as read-only arrays of any layout, so C, Fortran, strided and
read-only stacks share one machine-code version) and cached on disk.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator

import numba
import numpy as np
from numba import types

from ..devices import lapack_pointers
from ..imports import importing
from ..pivots import check_pivots
from ..blas_threads import one_thread_per_call
from . import _cholesky, _lapack_each, _lu, _qr, _solve
from ._boundary import check_arguments
from ._interleave import as_stack, lanes_for

#: The dtypes the kernels compute in (LAPACK's s, d, c, z).
LAPACK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))

#: Integer type of pivots and info codes (LAPACK's ``INTEGER``).
INDEX_DTYPE = np.dtype(np.int32)

_INDEX = types.int32
_COUNT = types.intp

#: Argument kinds of each compiled kernel: ``in`` arrays are read-only of any layout, ``out3`` stacks hold C- or
#: Fortran-ordered matrices, the other outputs are C-ordered; ``lapack:NAME`` is SciPy's LAPACK routine NAME in the
#: kernel's precision (:func:`_lapack_routines`).
_ARGUMENTS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "potrf": (_cholesky.potrf_stack, ("in3", "bool", "bool", "out3", "info", "count", "count")),
    "potrs": (_cholesky.potrs_stack, ("in3", "bool", "in3", "out3", "count", "count")),
    "getrf": (_lu.getrf_stack, ("in3", "out3", "piv_out", "info", "flags", "count", "count")),
    "getrs": (_lu.getrs_stack, ("in3", "piv_in", "in3", "count", "out3", "flags", "count", "count")),
    "solve_each": (_solve.solve_each, ("in3", "piv_in", "in3", "count", "out3", "flags", "count")),
    "plu": (_lu.plu_stack, ("in3", "piv_in", "bool", "piv_out", "out3", "out3", "count")),
    "geqrf": (_qr.geqrf_stack, ("in3", "out3", "tau_out", "count", "count")),
    "orgqr": (_qr.orgqr_stack, ("in3", "tau_in", "out3", "count", "count")),
    "qr": (_qr.qr_stack, ("in3", "out3", "out3", "flags", "count", "count")),
    "potrf_each": (_lapack_each.potrf_each, ("in3", "bool", "bool", "out3", "info", "flags", "lapack:potrf", "count")),
    "getrf_each": (_lapack_each.getrf_each, ("in3", "out3", "piv_out", "info", "flags", "lapack:getrf", "count")),
    "potrs_each": (_lapack_each.potrs_each, ("in3", "bool", "in3", "out3", "flags", "lapack:potrs", "count")),
    "getrs_each": (_lapack_each.getrs_each,
                   ("in3", "piv_in", "in3", "count", "out3", "flags", "lapack:getrs", "count")),
    "qr_each": (_lapack_each.qr_each, ("in3", "out3", "out3", "flags", "lapack:geqrf", "lapack:orgqr", "count")),
    "geqp3_each": (_lapack_each.geqp3_each,
                   ("in3", "out3", "out3", "piv_out", "flags", "lapack:geqp3", "lapack:orgqr", "count")),
}


def _lapack_routine(kind: str, dtype: np.dtype) -> Callable:
    """The ctypes function of a ``lapack:NAME`` argument kind in ``dtype``'s precision."""
    return lapack_pointers.routine(kind.removeprefix("lapack:"), dtype.char)


def _lapack_routines(op: str, dtype: np.dtype) -> tuple[Callable, ...]:
    """The LAPACK routines ``op``'s kernel takes (its ``lapack:NAME`` arguments, in order), in ``dtype``'s
    precision."""
    return tuple(_lapack_routine(kind, dtype) for kind in _ARGUMENTS[op][1] if kind.startswith("lapack:"))


def _numba_type(kind: str, dtype: np.dtype) -> types.Type:
    if kind.startswith("lapack:"):
        return numba.typeof(_lapack_routine(kind, dtype))
    scalar = numba.from_dtype(dtype)
    table = {
        "in3": types.Array(scalar, 3, "A", readonly=True),
        "out3": types.Array(scalar, 3, "A"),
        "tau_out": types.Array(scalar, 2, "C"),
        "tau_in": types.Array(scalar, 2, "A", readonly=True),
        "piv_out": types.Array(_INDEX, 2, "C"),
        "piv_in": types.Array(_INDEX, 2, "A", readonly=True),
        "info": types.Array(_INDEX, 1, "C"),
        "flags": types.Array(types.uint8, 1, "C"),
        "bool": types.boolean,
        "count": _COUNT,
    }
    return table[kind]


def signature(op: str, dtype: np.dtype) -> types.Type:
    """The one signature kernel ``op`` is compiled under for ``dtype`` (:func:`compiled`)."""
    return types.none(*(_numba_type(kind, dtype) for kind in _ARGUMENTS[op][1]))


@functools.cache
def compiled(op: str, dtype: np.dtype) -> Callable:
    """The kernel of ``op`` compiled (or loaded from the disk cache) for ``dtype``.

    The kernel's Python function is compiled again, with the options its module gave it, under one explicit
    signature whose inputs are read-only arrays of any layout, so C, Fortran, strided and read-only stacks all run
    one machine-code version (numba converts the others to it) instead of compiling one each.
    """
    dispatcher = _ARGUMENTS[op][0]
    with importing():  # numba imports its lowering registries on its first compilation
        return numba.jit(signature(op, dtype), cache=True, **dispatcher.targetoptions)(dispatcher.py_func)


def run(op: str, dtype: np.dtype, *arguments) -> None:
    """Run kernel ``op`` compiled for ``dtype`` on ``arguments`` once they are checked to be what it was written for
    (:func:`~._boundary.check_arguments`): the one way into the compiled code."""
    check_arguments(op, _ARGUMENTS[op][1], dtype, arguments)
    compiled(op, dtype)(*arguments)


def _check_dtype(a: np.ndarray) -> None:
    if a.dtype not in LAPACK_DTYPES:
        raise TypeError(f"batched kernels take float32, float64, complex64 or complex128 arrays, not {a.dtype}")


_forked_after_gnu_openmp = False


def _gnu_openmp_started() -> bool:
    """Whether numba's parallel kernels have run in this process on GNU OpenMP (its threading layer without TBB)."""
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run
        return False
    from numba.np.ufunc import omppool  # noqa: PLC0415 - present whenever the omp layer runs

    return layer == "omp" and getattr(omppool, "openmp_vendor", "GNU") == "GNU"


def _note_fork() -> None:
    global _forked_after_gnu_openmp
    _forked_after_gnu_openmp = _forked_after_gnu_openmp or _gnu_openmp_started()


os.register_at_fork(after_in_child=_note_fork)


def unusable_after_fork() -> str | None:
    """Why this process cannot run the compiled kernels: it was forked (``multiprocessing``'s default on Linux)
    after they ran on GNU OpenMP, whose threads do not survive ``fork``; numba terminates a child that starts them.
    ``None`` where they can run."""
    if not _forked_after_gnu_openmp:
        return None
    return ("this process was forked after numba's kernels ran on GNU OpenMP, which numba refuses to restart in a "
            "child (multiprocessing's 'spawn' and 'forkserver' start methods keep them)")


def _threads(batch: int, lanes: int) -> int:
    """Threads worth starting: numba's pool size, but no more than there are chunks of ``lanes`` matrices."""
    return max(1, min(numba.get_num_threads(), math.ceil(batch / lanes)))


#: Matrices per thread below which :func:`plu` and the solves do not start another (a pass over memory with two
#: flops per element at most, not worth a thread).
MIN_BATCH_PER_THREAD = 256

#: Matrices of order 4 per thread below which a LAPACK loop does not start another: a LAPACK call takes 0.1-0.7 µs
#: at orders 2-4, so 16 of them take about what starting a thread does. A call's work grows as the order cubed, so
#: from order 8 two matrices are worth a thread each, and from order 16 one is (:func:`_lapack_threads`).
MIN_BATCH_PER_LAPACK_THREAD = 16


def _lapack_threads(batch: int, order: int) -> int:
    """Threads worth starting for a LAPACK loop over ``batch`` matrices of ``order``."""
    return _threads(batch, max(1, MIN_BATCH_PER_LAPACK_THREAD * 4**3 // max(order, 1) ** 3))


#: Kernels whose buffers take ``WIDE_LANES`` matrices (the Householder ones, bound by loop overhead, not cache).
_WIDE = frozenset({"geqrf", "orgqr", "qr"})

#: Kernels with versions compiled for each square order up to ``SMALL_ORDER`` (in buffers of that many lanes).
_SMALL_ORDER = frozenset({"getrf", "potrf"})


def _lanes(op: str, dtype: np.dtype, batch: int, m: int, n: int) -> int:
    """Matrices per buffer for ``op``'s kernel (:func:`~._interleave.lanes_for` with the kernel's kind)."""
    return lanes_for(m, n, dtype.itemsize, batch, wide=op in _WIDE, small_order=op in _SMALL_ORDER)


def _launch(op: str, dtype: np.dtype, batch: int, m: int, n: int, *arrays) -> None:
    lanes = _lanes(op, dtype, batch, m, n)
    run(op, dtype, *arrays, lanes, _threads(batch, lanes))


def _launch_checked(op: str, check_finite: bool, dtype: np.dtype, batch: int, m: int, n: int, *arrays) -> None:
    """:func:`_launch` for a kernel that can check its input for infinities and NaNs as it gathers it."""
    lanes = _lanes(op, dtype, batch, m, n)
    _call_checked(op, dtype, check_finite, _threads(batch, lanes), arrays, lanes)


def _call_checked(op: str, dtype: np.dtype, check_finite: bool, threads: int, arrays: tuple, *rest) -> None:
    """Run kernel ``op`` on ``(*arrays, nonfinite, *rest, threads)`` with one ``nonfinite`` flag per thread (none when not
    asked), which a thread sets on meeting an infinity or NaN as it reads its input: SciPy's ``check_finite``
    without a pass of its own over memory. Raises SciPy's ValueError after the kernel."""
    nonfinite = np.zeros(threads if check_finite else 0, dtype=np.uint8)
    run(op, dtype, *arrays, nonfinite, *rest, threads)
    if nonfinite.any():
        raise ValueError("array must not contain infs or NaNs")


def _lapack_loop(op: str, dtype: np.dtype, batch: int, order: int, check_finite: bool, arrays: tuple) -> None:
    """Run the LAPACK loop ``op`` (``_lapack_each``) on ``batch`` matrices of ``order``: threads share the matrices,
    and each LAPACK call runs on one BLAS thread. Measured: a Cholesky of order 128 that threads inside the kernel's
    thread took 8 ms for 16 matrices instead of 1.5 (its threads and the kernel's spin for the same two cores)."""
    threads = _lapack_threads(batch, order)
    with one_thread_per_call():
        _call_checked(op, dtype, check_finite, threads, arrays, *_lapack_routines(op, dtype))


def _output(batch: int, m: int, n: int, dtype: np.dtype, fortran: bool) -> np.ndarray:
    """An uninitialized ``(batch, m, n)`` output stack: C-ordered, or of Fortran-ordered matrices."""
    if fortran:
        return np.empty((batch, n, m), dtype=dtype).swapaxes(1, 2)
    return np.empty((batch, m, n), dtype=dtype)


def potrf(a: np.ndarray, *, lower: bool, clean: bool, fortran: bool = False, lapack: bool = False,
          check_finite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors of a stack of Hermitian positive definite matrices, and LAPACK's ``info`` per matrix.

    The factor is in the ``lower`` (else upper) triangle; the other triangle is zero if ``clean``, else the input's.
    ``info[i] = k > 0`` means the k-th leading minor of matrix ``i`` is not positive definite; the rest of that
    matrix's result is then unspecified. ``lapack`` runs SciPy's LAPACK on each matrix (its results to the bit).
    ``check_finite`` raises SciPy's ValueError for infinities or NaNs anywhere in ``a`` (both triangles, as SciPy
    checks): the LAPACK loop checks each matrix as it copies it, the interleaved kernel, which reads one triangle,
    in a pass of its own first.
    """
    _check_dtype(a)
    n = a.shape[-1]
    stack = as_stack(a)
    if check_finite and not lapack and not np.isfinite(stack).all():
        raise ValueError("array must not contain infs or NaNs")
    out = _output(*stack.shape, a.dtype, fortran)
    info = np.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    if out.size and lapack:
        _lapack_loop("potrf_each", a.dtype, stack.shape[0], n, check_finite,
                     (stack, bool(lower), bool(clean), out, info))
    elif out.size:
        _launch("potrf", a.dtype, stack.shape[0], n, n, stack, bool(lower), bool(clean), out, info)
    return out.reshape(a.shape), info.reshape(a.shape[:-2])


def getrf(a: np.ndarray, *, fortran: bool = False, check_finite: bool = False,
          lapack: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting of a stack: packed ``lu``, 0-based LAPACK pivots (int32) and ``info`` per matrix.

    ``info[i] = k > 0`` means ``U[k-1, k-1]`` of matrix ``i`` is exactly zero (the factorization is still complete).
    ``check_finite`` raises SciPy's ValueError for infinities or NaNs in ``a``; ``lapack`` as for :func:`potrf`.
    """
    _check_dtype(a)
    m, n = a.shape[-2:]
    stack = as_stack(a)
    out = _output(*stack.shape, a.dtype, fortran)
    piv = np.empty((stack.shape[0], min(m, n)), dtype=INDEX_DTYPE)
    info = np.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    if out.size and lapack:
        _lapack_loop("getrf_each", a.dtype, stack.shape[0], max(m, n), check_finite, (stack, out, piv, info))
    elif out.size:
        _launch_checked("getrf", check_finite, a.dtype, stack.shape[0], m, n, stack, out, piv, info)
        _refactor_nonfinite(stack, out, piv, info, fortran)
    return out.reshape(a.shape), piv.reshape((*a.shape[:-2], min(m, n))), info.reshape(a.shape[:-2])


def _refactor_nonfinite(stack: np.ndarray, out: np.ndarray, piv: np.ndarray, info: np.ndarray, fortran: bool) -> None:
    """Factor again with LAPACK the matrices the interleaved kernel marked (``_lu.NONFINITE_INFO``: infinities or
    NaNs in their factors), so that their pivots and factors are SciPy's."""
    marked = np.flatnonzero(info == _lu.NONFINITE_INFO)
    if not marked.size:
        return
    m, n = stack.shape[1:]
    again = _output(marked.size, m, n, stack.dtype, fortran)
    again_piv, again_info = np.empty((marked.size, min(m, n)), dtype=INDEX_DTYPE), np.zeros(marked.size, INDEX_DTYPE)
    arrays = (stack[marked], again, again_piv, again_info)
    _lapack_loop("getrf_each", stack.dtype, marked.size, max(m, n), False, arrays)
    out[marked], piv[marked], info[marked] = again, again_piv, again_info


def plu(lu: np.ndarray, piv: np.ndarray, *, permute_l: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scipy.linalg.lu``'s pieces from :func:`getrf`'s results, in one pass: the row indices ``p`` (int32; ``A =
    P L U`` with ``P[i, p[i]] = 1``), the unit lower ``L`` (``P L`` if ``permute_l``) and the upper ``U``, each
    C-ordered."""
    _check_dtype(lu)
    m, n = lu.shape[-2:]
    k, batch = min(m, n), lu.shape[:-2]
    if np.shape(piv) != (*batch, k):
        raise ValueError(f"the pivots must be of shape {(*batch, k)} for LU factors of shape {lu.shape}, got "
                         f"{np.shape(piv)}")
    check_pivots(piv, m)
    stack = as_stack(lu)
    rows = np.empty((stack.shape[0], m), dtype=INDEX_DTYPE)
    lower = np.empty((stack.shape[0], m, k), dtype=lu.dtype)
    upper = np.empty((stack.shape[0], k, n), dtype=lu.dtype)
    if stack.shape[0]:
        pivots = np.asarray(piv, dtype=INDEX_DTYPE).reshape(-1, k)
        run("plu", lu.dtype, stack, pivots, bool(permute_l), rows, lower, upper,
            _threads(stack.shape[0], MIN_BATCH_PER_THREAD))
    return rows.reshape((*batch, m)), lower.reshape((*batch, m, k)), upper.reshape((*batch, k, n))


def geqrf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR of a stack in LAPACK's geqrf storage: R and the reflectors in ``qr``, and ``tau``."""
    _check_dtype(a)
    m, n = a.shape[-2:]
    stack = as_stack(a)
    out = np.empty(stack.shape, dtype=a.dtype)
    tau = np.zeros((stack.shape[0], min(m, n)), dtype=a.dtype)
    if out.size:
        _launch("geqrf", a.dtype, stack.shape[0], m, n, stack, out, tau)
    return out.reshape(a.shape), tau.reshape((*a.shape[:-2], min(m, n)))


def orgqr(qr: np.ndarray, tau: np.ndarray, ncols: int) -> np.ndarray:
    """The first ``ncols`` columns of ``Q = H_0 ... H_{k-1}`` from ``geqrf``'s output; shape ``(..., m, ncols)``."""
    _check_dtype(qr)
    m, k = qr.shape[-2], tau.shape[-1]
    if not k <= ncols <= m or k > qr.shape[-1]:
        raise ValueError(f"orgqr needs k <= ncols <= m and k <= n; got m={m}, n={qr.shape[-1]}, k={k}, ncols={ncols}")
    reflectors = as_stack(qr[..., :k])
    taus = np.asarray(tau, dtype=qr.dtype).reshape((reflectors.shape[0], k))
    out = np.empty((reflectors.shape[0], m, ncols), dtype=qr.dtype)
    if out.size:
        _launch("orgqr", qr.dtype, out.shape[0], m, ncols, reflectors, taus, out)
    return out.reshape((*qr.shape[:-2], m, ncols))


def _qr_outputs(a: np.ndarray, ncols: int, rows: int, fortran: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a`` as a 3-D stack, and uninitialized stacks for Q's first ``ncols`` columns (its matrices ordered as
    ``fortran`` says) and R's first ``rows`` rows (C-ordered, as SciPy returns it)."""
    _check_dtype(a)
    m, n = a.shape[-2:]
    if ncols and not min(m, n) <= ncols <= m or not min(m, n) <= rows <= m:
        raise ValueError(f"qr needs min(m, n) <= ncols <= m (or ncols = 0) and min(m, n) <= rows <= m; got m={m}, "
                         f"n={n}, ncols={ncols}, rows={rows}")
    stack = as_stack(a)
    return stack, _output(stack.shape[0], m, ncols, a.dtype, fortran), np.empty((stack.shape[0], rows, n), a.dtype)


def _shaped_qr(a: np.ndarray, q: np.ndarray, r: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Q (``None`` when it has no columns) and R with ``a``'s batch dimensions."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    return (q.reshape((*batch, m, q.shape[2])) if q.shape[2] else None), r.reshape((*batch, r.shape[1], n))


def qr(a: np.ndarray, ncols: int, rows: int, *, fortran: bool = False, check_finite: bool = False,
       lapack: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
    """``Q`` (the first ``ncols`` columns; ``None`` when ``ncols`` is 0) and ``R`` (the first ``rows`` rows of the
    upper triangle) of a stack, in one pass: what ``orgqr(*geqrf(a), ncols)`` and ``triu(geqrf(a)[0][..., :rows, :])``
    give, without writing the reflectors out and reading them back. ``fortran`` orders Q's matrices (R is C-ordered,
    as SciPy returns it); ``check_finite`` raises SciPy's ValueError for infinities or NaNs in ``a``; ``lapack`` runs
    SciPy's ``geqrf`` and ``orgqr`` on each matrix (its results to the bit)."""
    stack, q, r = _qr_outputs(a, ncols, rows, fortran)
    if (q.size or r.size) and lapack:
        _lapack_loop("qr_each", a.dtype, stack.shape[0], max(a.shape[-2:]), check_finite, (stack, q, r))
    elif q.size or r.size:
        _launch_checked("qr", check_finite, a.dtype, *stack.shape, stack, q, r)
    return _shaped_qr(a, q, r)


def geqp3(a: np.ndarray, ncols: int, rows: int, *, fortran: bool = False,
          check_finite: bool = False) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """QR with column pivoting of a stack, as ``scipy.linalg.qr(pivoting=True)`` computes it for each matrix (by the
    same LAPACK calls, so bit for bit): ``Q``'s first ``ncols`` columns (``None`` when 0), ``R``'s first ``rows``
    rows and the 0-based pivots (int32), shaped and ordered as :func:`qr`'s."""
    stack, q, r = _qr_outputs(a, ncols, rows, fortran)
    p = np.empty(stack.shape[::2], dtype=INDEX_DTYPE)
    if r.size:
        _lapack_loop("geqp3_each", a.dtype, stack.shape[0], max(a.shape[-2:]), check_finite, (stack, q, r, p))
    else:  # matrices of no rows keep their columns in place, as SciPy returns them
        p[:] = np.arange(a.shape[-1])
    return (*_shaped_qr(a, q, r), p.reshape((*a.shape[:-2], a.shape[-1])))


#: Largest order solved in the interleaved chunk layout, by kernel and element size in bytes; above it each matrix is
#: solved where it lies (``_solve``). Measured (2 threads, B = 20,000, one right-hand side, ns per matrix,
#: interleaved / one at a time): ``getrs`` float32 n = 16 191 / 185, 24 418 / 328; float64 n = 8 51 / 113, 12 170 /
#: 126; complex128 n = 8 125 / 109, 16 615 / 248. ``potrs`` float32 n = 24 280 / 429, 32 528 / 518; float64 n = 12
#: 80 / 139, 16 192 / 188; complex64 n = 12 160 / 166; complex128 n = 8 86 / 125, 12 246 / 220.
INTERLEAVED_SOLVE_ORDERS = {"getrs": {4: 16, 8: 8, 16: 8}, "potrs": {4: 24, 8: 12, 16: 8}}


def _interleaved_solve(op: str, dtype: np.dtype, n: int) -> bool:
    """Whether ``op`` solves matrices of order ``n`` in the interleaved chunk layout rather than one at a time."""
    return n <= INTERLEAVED_SOLVE_ORDERS[op][dtype.itemsize]


#: The pivots argument of a Cholesky solve in :func:`_solve_each`, which reads none.
_NO_PIVOTS = np.zeros((0, 0), dtype=INDEX_DTYPE)


def _solve_each(dtype: np.dtype, check_finite: bool, arrays: tuple) -> None:
    """Run ``_solve.solve_each`` on ``arrays`` (factor, pivots, right-hand sides, system code, output)."""
    threads = _threads(arrays[-1].shape[0], MIN_BATCH_PER_THREAD)
    _call_checked("solve_each", dtype, check_finite, threads, arrays)


def _check_solve(factor: np.ndarray, b: np.ndarray, piv: np.ndarray | None = None) -> None:
    """Refuse operands the compiled solves would read or write outside of: factors that are not square, ``b`` whose
    rows are not their order, pivots that are not one per row or name no row (``ValueError``)."""
    if factor.ndim < 2 or factor.shape[-1] != factor.shape[-2]:
        raise ValueError(f"the factors must be square matrices (..., n, n), got shape {factor.shape}")
    n = factor.shape[-1]
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(f"b must be of shape (..., {n}, k) for factors of order {n}, got {b.shape}")
    if piv is not None:
        if piv.ndim < 1 or piv.shape[-1] != n:
            raise ValueError(f"the pivots must be of shape (..., {n}) for factors of order {n}, got {piv.shape}")
        check_pivots(piv, n)


def _broadcast_solve(factor: np.ndarray, b: np.ndarray, *extra: np.ndarray):
    """Broadcast the batch dimensions of a factor stack, a right-hand-side stack and per-matrix extras."""
    dtype = np.result_type(factor.dtype, b.dtype)
    batch = np.broadcast_shapes(factor.shape[:-2], b.shape[:-2], *(e.shape[:-1] for e in extra))
    factor = np.broadcast_to(factor.astype(dtype, copy=False), (*batch, *factor.shape[-2:]))
    b = np.broadcast_to(b.astype(dtype, copy=False), (*batch, *b.shape[-2:]))
    extra = tuple(np.broadcast_to(e, (*batch, e.shape[-1])) for e in extra)
    return batch, dtype, factor, b, extra


#: Bytes of operands a solve gathers at a time where they are broadcast over one another (:func:`_solve_pieces`).
SOLVE_PIECE_BYTES = 4 << 20


def _solve_pieces(count: int, *operands: tuple[np.ndarray, int]) -> Iterator[tuple[slice, list[np.ndarray]]]:
    """The ``count`` systems of a solve in pieces: (which systems, each operand as a stack of theirs), an operand
    given with the number of its per-matrix axes. One piece of views where every operand flattens without a copy;
    else pieces of about ``SOLVE_PIECE_BYTES``, so that a factor broadcast over the right-hand sides is never
    copied whole (four times SciPy's memory for factors of shape (1, 300, 16, 16) and b of (100, 300, 16, 1))."""
    try:
        yield slice(0, count), [a.reshape((count, *a.shape[a.ndim - k:]), copy=False) for a, k in operands]
        return
    except (ValueError, TypeError):  # a copy is needed (TypeError: NumPy < 2.1 has no copy=False here)
        pass
    batch = operands[0][0].shape[:operands[0][0].ndim - operands[0][1]]
    per_system = sum(math.prod(a.shape[a.ndim - k:]) * a.itemsize for a, k in operands)
    step = max(1, SOLVE_PIECE_BYTES // per_system)
    for start in range(0, count, step):
        systems = slice(start, min(start + step, count))
        index = np.unravel_index(np.arange(systems.start, systems.stop), batch)
        yield systems, [a[index] for a, _ in operands]


def potrs(c: np.ndarray, b: np.ndarray, *, lower: bool, fortran: bool = False, lapack: bool = False) -> np.ndarray:
    """Solve ``A X = B`` per matrix from the Cholesky factor ``c`` of ``A``; ``b`` is ``(..., n, k)``. ``lapack``
    runs SciPy's ``potrs`` on each system (its results to the bit)."""
    _check_solve(c, b)
    batch, dtype, c, b, _ = _broadcast_solve(c, b)
    _check_dtype(c)
    n, nrhs = b.shape[-2:]
    out = _output(math.prod(batch), n, nrhs, dtype, fortran)
    if not out.size:
        return out.reshape((*batch, n, nrhs))
    for systems, (factors, rhs) in _solve_pieces(out.shape[0], (c, 2), (b, 2)):
        target = out[systems]
        if lapack:
            _lapack_loop("potrs_each", dtype, target.shape[0], n, False, (factors, bool(lower), rhs, target))
        elif _interleaved_solve("potrs", dtype, n):
            _launch("potrs", dtype, target.shape[0], n, n, factors, bool(lower), rhs, target)
        else:
            system = _solve.CHOLESKY_LOWER if lower else _solve.CHOLESKY_UPPER
            _solve_each(dtype, False, (factors, _NO_PIVOTS, rhs, system, target))
    return out.reshape((*batch, n, nrhs))


def getrs(lu: np.ndarray, piv: np.ndarray, b: np.ndarray, *, trans: int, fortran: bool = False,
          check_finite: bool = False, lapack: bool = False) -> np.ndarray:
    """Solve ``op(A) X = B`` per matrix from ``getrf``'s ``lu`` and 0-based ``piv``; ``op`` is ``A``, ``A^T``,
    ``A^H`` for ``trans`` 0, 1, 2 (as ``scipy.linalg.lu_solve``). ``check_finite`` raises SciPy's ValueError for
    infinities or NaNs in ``b`` (SciPy's ``lu_solve`` checks ``b`` only); ``lapack`` as for :func:`potrs`."""
    if trans not in (0, 1, 2):
        raise ValueError("trans must be 0, 1 or 2")
    _check_solve(lu, b, np.asarray(piv))
    batch, dtype, lu, b, (piv,) = _broadcast_solve(lu, b, np.asarray(piv))
    _check_dtype(lu)
    n, nrhs = b.shape[-2:]
    out = _output(math.prod(batch), n, nrhs, dtype, fortran)
    if not out.size:
        return out.reshape((*batch, n, nrhs))
    for systems, (factors, pivots, rhs) in _solve_pieces(out.shape[0], (lu, 2), (piv, 1), (b, 2)):
        target = out[systems]
        arrays = (factors, np.asarray(pivots, dtype=INDEX_DTYPE), rhs, int(trans), target)
        if lapack:
            _lapack_loop("getrs_each", dtype, target.shape[0], n, check_finite, arrays)
        elif _interleaved_solve("getrs", dtype, n):
            _launch_checked("getrs", check_finite, dtype, target.shape[0], n, n, *arrays)
        else:  # LAPACK's trans codes are _solve's LU system codes
            _solve_each(dtype, check_finite, arrays)
    return out.reshape((*batch, n, nrhs))
