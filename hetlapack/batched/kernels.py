"""Batched LAPACK kernels for stacks ``(..., m, n)`` of small matrices: the entry points dispatch calls.

Every kernel computes per matrix what LAPACK computes (same pivots, reflector signs, info codes), never modifies its
inputs, and returns C-ordered outputs, or Fortran-ordered matrices where asked (``fortran=True``: the layout
SciPy's batch loop gives, written directly instead of copied afterwards). This module shapes the stacks, allocates
the outputs and picks the kernel for the operation, dtype and order; the kernels are compiled in :mod:`.compiling`
(our own interleaved arithmetic, or SciPy's LAPACK on each matrix) and run on numba's threads by :mod:`.threads`.
Each entry point runs the LAPACK loop where asked (``lapack=True``), and always in single precision, in which no
interleaved kernel is compiled: SciPy's results to the bit; ``getrf``, ``potrf`` and ``qr`` run a replay of
LAPACK's own roundings instead where :mod:`.replay` found it gives them in this process. Beside them, dispatch asks
:func:`~.threads.unusable_after_fork` here whether this process can run the kernels at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ..contract.arrays import batch_shape, broadcast
from ..perf.model import interleaved_dtypes, interleaved_solve_max_n
from ..pivots import check_pivots
from . import _lu, _solve, recycled
from ._interleave import as_stack
from .compiling import INDEX_DTYPE, LAPACK_DTYPES, lu_pieces, packed_lu_only, run
from .replay import getrf_kernels, potrf_kernels, qr_kernels
from .streaming import streams
from .threads import (MIN_BATCH_PER_THREAD, call_checked, lapack_loop, launch, launch_checked, replay_loop,
                      spread_limit, threads_for, unusable_after_fork)

__all__ = ["geqp3", "geqrf", "getrf", "getrs", "lu", "orgqr", "plu", "potrf", "potrs", "qr", "unusable_after_fork"]


def _check_dtype(a: np.ndarray) -> None:
    if a.dtype not in LAPACK_DTYPES:
        raise TypeError(f"batched kernels take float32, float64, complex64 or complex128 arrays, not {a.dtype}")


def _lapack_loop(op: str, dtype: np.dtype, lapack: bool) -> bool:
    """Whether a call of ``op`` runs the LAPACK loop (or its replay): where asked, and in a dtype no interleaved
    kernel of ``op`` computes in (single precision but for the solves: :func:`~hetlapack.perf.model.
    interleaved_dtypes`)."""
    return lapack or dtype not in interleaved_dtypes(op)


def _output(batch: int, m: int, n: int, dtype: np.dtype, fortran: bool) -> np.ndarray:
    """An uninitialized ``(batch, m, n)`` output stack: C-ordered, or of Fortran-ordered matrices; large ones on
    memory of results the caller dropped (:mod:`.recycled`)."""
    if fortran:
        return recycled.empty((batch, n, m), dtype).swapaxes(1, 2)
    return recycled.empty((batch, m, n), dtype)


def potrf(a: np.ndarray, *, lower: bool, clean: bool, fortran: bool = False, lapack: bool = False,
          check_finite: bool = False, lanes: int | None = None, loop_threads: int | None = None,
          stream: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors of a stack of Hermitian positive definite matrices, and LAPACK's ``info`` per matrix.

    The factor is in the ``lower`` (else upper) triangle; the other triangle is zero if ``clean``, else the input's.
    ``info[i] = k > 0`` means the k-th leading minor of matrix ``i`` is not positive definite; the rest of that
    matrix's result is then unspecified. ``lapack`` (implied in single precision) runs SciPy's LAPACK on each
    matrix (its results to the bit), or the replay of its roundings (:mod:`._cholesky_replay`) where this process's
    LAPACK is one it replays.
    ``check_finite`` raises SciPy's ValueError for infinities or NaNs anywhere in ``a`` (both triangles, as SciPy
    checks), read as each kernel reads its input: no pass of its own over memory. ``lanes`` sets the interleaved
    kernel's matrices per buffer (default: the buffer-size rule; dispatch passes the one calibration timed fastest),
    ``loop_threads`` caps the LAPACK loop's threads (default: the cost model's cap for the routine, dtype and order,
    1 where concurrent calls of OpenBLAS's routine ran slower than one thread's; else as many as the batch is worth).
    ``stream`` writes the interleaved kernel's results with streaming stores (default: :func:`.streaming.streams`).
    """
    _check_dtype(a)
    lapack = _lapack_loop("potrf", a.dtype, lapack)
    n = a.shape[-1]
    stack = as_stack(a)
    out = _output(*stack.shape, a.dtype, fortran)
    info = np.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    replayed = potrf_kernels(a.dtype, n) if lapack else None
    if out.size and replayed is not None:
        launch_checked("potrf_replay", check_finite, a.dtype, stack.shape[0], n, n, stack, bool(lower), bool(clean),
                       out, info, replayed)
        _refactor_marked("potrf_each", stack, (bool(lower), bool(clean)), (out, info), fortran)
    elif out.size and lapack:
        lapack_loop("potrf_each", a.dtype, stack.shape[0], n, check_finite,
                    (stack, bool(lower), bool(clean), out, info), loop_threads)
    elif out.size:
        launch_checked("potrf", check_finite, a.dtype, stack.shape[0], n, n, stack, bool(lower), bool(clean), out,
                       info, streams("potrf", stack, out, chosen=stream), lanes=lanes)
    return out.reshape(a.shape), info.reshape(a.shape[:-2])


def getrf(a: np.ndarray, *, fortran: bool = False, check_finite: bool = False, lapack: bool = False,
          lanes: int | None = None, loop_threads: int | None = None, spread_bytes: int | None = None,
          stream: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting of a stack: packed ``lu``, 0-based LAPACK pivots (int32) and ``info`` per matrix.

    ``info[i] = k > 0`` means ``U[k-1, k-1]`` of matrix ``i`` is exactly zero (the factorization is still complete).
    ``check_finite`` raises SciPy's ValueError for infinities or NaNs in ``a``; ``lapack``, ``lanes`` and
    ``loop_threads`` as for :func:`potrf`, except that ``lapack`` runs the replay of LAPACK's roundings (its results
    to the bit, :mod:`._lu_replay`) where this process's LAPACK is one it replays. ``spread_bytes`` sets the largest
    buffer that asks for the next chunk a slice a step (default: :func:`~.threads.spread_limit`, calibration's);
    ``stream`` as for :func:`potrf`.
    """
    _check_dtype(a)
    lapack = _lapack_loop("getrf", a.dtype, lapack)
    m, n = a.shape[-2:]
    stack = as_stack(a)
    out = _output(*stack.shape, a.dtype, fortran)
    piv = recycled.empty((stack.shape[0], min(m, n)), INDEX_DTYPE)
    info = np.zeros(stack.shape[0], dtype=INDEX_DTYPE)
    replayed = getrf_kernels(a.dtype, m, n) if lapack else None
    if out.size and replayed is not None:
        launch_checked("getrf_replay", check_finite, a.dtype, stack.shape[0], m, n, stack, out, piv, info, replayed,
                       *packed_lu_only(m, n, a.dtype))
        _refactor_marked("getrf_each", stack, (), (out, piv, info), fortran)
    elif out.size and lapack:
        lapack_loop("getrf_each", a.dtype, stack.shape[0], max(m, n), check_finite, (stack, out, piv, info),
                    loop_threads)
    elif out.size:
        launch_checked("getrf", check_finite, a.dtype, stack.shape[0], m, n, stack, out, piv, info,
                       *packed_lu_only(m, n, a.dtype), spread_limit("getrf", spread_bytes),
                       streams("getrf", stack, out, chosen=stream), lanes=lanes)
        _refactor_marked("getrf_each", stack, (), (out, piv, info), fortran)
    return out.reshape(a.shape), piv.reshape((*a.shape[:-2], min(m, n))), info.reshape(a.shape[:-2])


def lu(a: np.ndarray, *, permute_l: bool, p_matrix: bool = False, check_finite: bool = False, lapack: bool = False,
       lanes: int | None = None, spread_bytes: int | None = None,
       stream: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`plu` of :func:`getrf`'s factors (flags as there), the interleaved kernel or the replay of LAPACK's
    roundings writing P (or the row indices), L and U from its buffers: no packed LU is written and read back. A
    matrix whose factors hold an infinity or NaN is factored again by LAPACK, as :func:`getrf` does."""
    _check_dtype(a)
    m, n = a.shape[-2:]
    lapack = _lapack_loop("getrf", a.dtype, lapack)
    replayed = getrf_kernels(a.dtype, m, n) if lapack else None
    if (lapack and replayed is None) or not a.size:
        packed, piv, _ = getrf(a, check_finite=check_finite, lapack=lapack)
        return plu(packed, piv, permute_l=permute_l, p_matrix=p_matrix)
    stack = as_stack(a)
    batch = stack.shape[0]
    piv = recycled.empty((batch, min(m, n)), INDEX_DTYPE)
    info = np.zeros(batch, dtype=INDEX_DTYPE)
    pieces = lu_pieces(batch, m, n, a.dtype, permute_l=permute_l, p_matrix=p_matrix)
    no_packed = np.empty((0, m, n), a.dtype)
    if replayed is None:  # pieces[2:], L, U and P, are the records the kernel copies
        launch_checked("getrf", check_finite, a.dtype, batch, m, n, stack, no_packed, piv, info, *pieces,
                       spread_limit("getrf", spread_bytes), streams("lu", stack, *pieces[2:], chosen=stream),
                       lanes=lanes)
    else:
        launch_checked("getrf_replay", check_finite, a.dtype, batch, m, n, stack, no_packed, piv, info, replayed,
                       *pieces)
    marked = _marked(info)
    results = _plu_results(pieces, p_matrix)
    if marked.size:
        packed, piv, _ = getrf(stack[marked], lapack=True)
        for result, redone in zip(results, plu(packed, piv, permute_l=permute_l, p_matrix=p_matrix), strict=True):
            result[marked] = redone
    return _shaped_plu(results, a.shape[:-2])


def _plu_results(pieces: tuple, p_matrix: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of the arrays :func:`~.compiling.lu_pieces` gave, the three ``lu`` returns: ``P`` or the row indices, ``L``,
    ``U``."""
    _, rows, lower, upper, permutation = pieces
    return permutation if p_matrix else rows, lower, upper


def _shaped_plu(results: tuple[np.ndarray, np.ndarray, np.ndarray],
                batch: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lu``'s pieces of a stack in the caller's batch shape."""
    return tuple(result.reshape((*batch, *result.shape[1:])) for result in results)


def _marked(info: np.ndarray) -> np.ndarray:
    """The matrices a kernel marked to be factored again by LAPACK (``_lu.REDO_INFO`` in ``info``); where no
    ``info`` is set, the common case, told without a pass that builds a mask."""
    return np.flatnonzero(info == _lu.REDO_INFO) if np.count_nonzero(info) else np.empty(0, dtype=np.intp)


def _refactor_marked(loop: str, stack: np.ndarray, options: tuple, results: tuple[np.ndarray, ...],
                     fortran: bool) -> None:
    """Factor again by the LAPACK loop ``loop`` the matrices a kernel marked (``_lu.REDO_INFO`` in ``info``, the
    last of ``results``: infinities or NaNs in their factors, or matrices a replay leaves to LAPACK), so that their
    results are SciPy's. ``results`` are the stack's outputs, the factors first, in the loop's order after its
    ``options``."""
    marked = _marked(results[-1])
    if not marked.size:
        return
    m, n = stack.shape[1:]
    again = (_output(marked.size, m, n, stack.dtype, fortran),
             *(np.zeros((marked.size, *result.shape[1:]), result.dtype) for result in results[1:]))
    lapack_loop(loop, stack.dtype, marked.size, max(m, n), False, (stack[marked], *options, *again))
    for result, redone in zip(results, again, strict=True):
        result[marked] = redone


def plu(lu: np.ndarray, piv: np.ndarray, *, permute_l: bool,
        p_matrix: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scipy.linalg.lu``'s pieces from :func:`getrf`'s results, in one pass: the row indices ``p`` (int32; ``A =
    P L U`` with ``P[i, p[i]] = 1``), or with ``p_matrix`` the permutation matrix ``P`` itself (of the real
    precision, as SciPy's), the unit lower ``L`` (``P L`` if ``permute_l``) and the upper ``U``, each C-ordered."""
    _check_dtype(lu)
    m, n = lu.shape[-2:]
    k, batch = min(m, n), lu.shape[:-2]
    if np.shape(piv) != (*batch, k):
        raise ValueError(f"the pivots must be of shape {(*batch, k)} for LU factors of shape {lu.shape}, got "
                         f"{np.shape(piv)}")
    check_pivots(piv, m)
    stack = as_stack(lu)
    pieces = lu_pieces(stack.shape[0], m, n, lu.dtype, permute_l=permute_l, p_matrix=p_matrix)
    if stack.shape[0]:
        pivots = np.asarray(piv, dtype=INDEX_DTYPE).reshape(-1, k)
        run("plu", lu.dtype, stack, pivots, *pieces, threads_for(stack.shape[0], MIN_BATCH_PER_THREAD))
    return _shaped_plu(_plu_results(pieces, p_matrix), batch)


def geqrf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR of a stack in LAPACK's geqrf storage: R and the reflectors in ``qr``, and ``tau`` (float64 and
    complex128: the kernel refuses the others)."""
    _check_dtype(a)
    m, n = a.shape[-2:]
    stack = as_stack(a)
    out = recycled.empty(stack.shape, a.dtype)
    tau = np.zeros((stack.shape[0], min(m, n)), dtype=a.dtype)
    if out.size:
        launch("geqrf", a.dtype, stack.shape[0], m, n, stack, out, tau)
    return out.reshape(a.shape), tau.reshape((*a.shape[:-2], min(m, n)))


def orgqr(qr: np.ndarray, tau: np.ndarray, ncols: int) -> np.ndarray:
    """The first ``ncols`` columns of ``Q = H_0 ... H_{k-1}`` from ``geqrf``'s output; shape ``(..., m, ncols)``."""
    _check_dtype(qr)
    m, k = qr.shape[-2], tau.shape[-1]
    if not k <= ncols <= m or k > qr.shape[-1]:
        raise ValueError(f"orgqr needs k <= ncols <= m and k <= n; got m={m}, n={qr.shape[-1]}, k={k}, ncols={ncols}")
    reflectors = as_stack(qr[..., :k])
    taus = np.asarray(tau, dtype=qr.dtype).reshape((reflectors.shape[0], k))
    out = recycled.empty((reflectors.shape[0], m, ncols), qr.dtype)
    if out.size:
        launch("orgqr", qr.dtype, out.shape[0], m, ncols, reflectors, taus, out)
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
    return stack, _output(stack.shape[0], m, ncols, a.dtype, fortran), _output(stack.shape[0], rows, n, a.dtype, False)


def _shaped_qr(a: np.ndarray, q: np.ndarray, r: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Q (``None`` when it has no columns) and R with ``a``'s batch dimensions."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    return (q.reshape((*batch, m, q.shape[2])) if q.shape[2] else None), r.reshape((*batch, r.shape[1], n))


def qr(a: np.ndarray, ncols: int, rows: int, *, fortran: bool = False, check_finite: bool = False,
       lapack: bool = False, lanes: int | None = None, loop_threads: int | None = None,
       spread_bytes: int | None = None, stream: bool | None = None) -> tuple[np.ndarray | None, np.ndarray]:
    """``Q`` (the first ``ncols`` columns; ``None`` when ``ncols`` is 0) and ``R`` (the first ``rows`` rows of the
    upper triangle) of a stack, in one pass: what ``orgqr(*geqrf(a), ncols)`` and ``triu(geqrf(a)[0][..., :rows, :])``
    give, without writing the reflectors out and reading them back. ``fortran`` orders Q's matrices (R is C-ordered,
    as SciPy returns it); ``check_finite`` raises SciPy's ValueError for infinities or NaNs in ``a``; ``lapack`` runs
    SciPy's ``geqrf`` and ``orgqr`` on each matrix (its results to the bit), or the replay of their roundings
    (:mod:`._qr_replay`) where this process's LAPACK is one it replays; ``lanes`` and ``loop_threads`` as for
    :func:`potrf`, ``spread_bytes`` as for :func:`getrf`, ``stream`` as for :func:`potrf`.
    """
    stack, q, r = _qr_outputs(a, ncols, rows, fortran)
    lapack = _lapack_loop("geqrf", a.dtype, lapack)
    replayed = qr_kernels(a.dtype, *a.shape[-2:]) if lapack else None
    if (q.size or r.size) and replayed is not None:
        replay_loop("qr_replay", a.dtype, stack.shape[0], a.shape[-1], check_finite, (stack, q, r), replayed)
    elif (q.size or r.size) and lapack:
        lapack_loop("qr_each", a.dtype, stack.shape[0], max(a.shape[-2:]), check_finite, (stack, q, r),
                    loop_threads)
    elif q.size or r.size:
        launch_checked("qr", check_finite, a.dtype, *stack.shape, stack, q, r, spread_limit("geqrf", spread_bytes),
                       streams("geqrf", stack, q, r, chosen=stream), lanes=lanes)
    return _shaped_qr(a, q, r)


def geqp3(a: np.ndarray, ncols: int, rows: int, *, fortran: bool = False, check_finite: bool = False,
          loop_threads: int | None = None) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """QR with column pivoting of a stack, as ``scipy.linalg.qr(pivoting=True)`` computes it for each matrix (by the
    same LAPACK calls, so bit for bit): ``Q``'s first ``ncols`` columns (``None`` when 0), ``R``'s first ``rows``
    rows and the 0-based pivots (int32), shaped and ordered as :func:`qr`'s; ``loop_threads`` as for :func:`potrf`.
    """
    stack, q, r = _qr_outputs(a, ncols, rows, fortran)
    p = np.empty(stack.shape[::2], dtype=INDEX_DTYPE)
    if r.size:
        lapack_loop("geqp3_each", a.dtype, stack.shape[0], max(a.shape[-2:]), check_finite, (stack, q, r, p),
                    loop_threads)
    else:  # matrices of no rows keep their columns in place, as SciPy returns them
        p[:] = np.arange(a.shape[-1])
    return (*_shaped_qr(a, q, r), p.reshape((*a.shape[:-2], a.shape[-1])))


def _interleaved_solve(op: str, dtype: np.dtype, n: int, interleaved_max_n: int | None) -> bool:
    """Whether ``op`` solves matrices of order ``n`` in the interleaved chunk layout rather than one at a time: up to
    ``interleaved_max_n``, by default :func:`~hetlapack.perf.model.interleaved_solve_max_n`."""
    return n <= (interleaved_solve_max_n(op, dtype) if interleaved_max_n is None else interleaved_max_n)


#: The pivots argument of a Cholesky solve in :func:`_solve_each`, which reads none.
_NO_PIVOTS = np.zeros((0, 0), dtype=INDEX_DTYPE)


def _solve_each(dtype: np.dtype, check_finite: bool, arrays: tuple) -> None:
    """Run ``_solve.solve_each`` on ``arrays`` (factor, pivots, right-hand sides, system code, output)."""
    threads = threads_for(arrays[-1].shape[0], MIN_BATCH_PER_THREAD)
    call_checked("solve_each", dtype, check_finite, threads, arrays)


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
    batch = batch_shape(factor.shape[:-2], b.shape[:-2], *(e.shape[:-1] for e in extra))
    factor = broadcast(factor.astype(dtype, copy=False), (*batch, *factor.shape[-2:]))
    b = broadcast(b.astype(dtype, copy=False), (*batch, *b.shape[-2:]))
    extra = tuple(broadcast(e, (*batch, e.shape[-1])) for e in extra)
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


def potrs(c: np.ndarray, b: np.ndarray, *, lower: bool, fortran: bool = False, lapack: bool = False,
          loop_threads: int | None = None, interleaved_max_n: int | None = None) -> np.ndarray:
    """Solve ``A X = B`` per matrix from the Cholesky factor ``c`` of ``A``; ``b`` is ``(..., n, k)``. ``lapack``
    runs SciPy's ``potrs`` on each system (its results to the bit); ``loop_threads`` as for :func:`potrf`. Our own
    solves run in the interleaved chunk layout up to order ``interleaved_max_n`` (default: the model's,
    :func:`~hetlapack.perf.model.interleaved_solve_max_n`), a matrix at a time where it lies above it."""
    _check_solve(c, b)
    batch, dtype, c, b, _ = _broadcast_solve(c, b)
    _check_dtype(c)
    lapack = _lapack_loop("potrs", dtype, lapack)
    n, nrhs = b.shape[-2:]
    out = _output(math.prod(batch), n, nrhs, dtype, fortran)
    if not out.size:
        return out.reshape((*batch, n, nrhs))
    for systems, (factors, rhs) in _solve_pieces(out.shape[0], (c, 2), (b, 2)):
        target = out[systems]
        if lapack:
            lapack_loop("potrs_each", dtype, target.shape[0], n, False, (factors, bool(lower), rhs, target),
                        loop_threads)
        elif _interleaved_solve("potrs", dtype, n, interleaved_max_n):
            launch("potrs", dtype, target.shape[0], n, n, factors, bool(lower), rhs, target)
        else:
            system = _solve.CHOLESKY_LOWER if lower else _solve.CHOLESKY_UPPER
            _solve_each(dtype, False, (factors, _NO_PIVOTS, rhs, system, target))
    return out.reshape((*batch, n, nrhs))


def getrs(lu: np.ndarray, piv: np.ndarray, b: np.ndarray, *, trans: int, fortran: bool = False,
          check_finite: bool = False, lapack: bool = False, loop_threads: int | None = None,
          interleaved_max_n: int | None = None) -> np.ndarray:
    """Solve ``op(A) X = B`` per matrix from ``getrf``'s ``lu`` and 0-based ``piv``; ``op`` is ``A``, ``A^T``,
    ``A^H`` for ``trans`` 0, 1, 2 (as ``scipy.linalg.lu_solve``). ``check_finite`` raises SciPy's ValueError for
    infinities or NaNs in ``b`` (SciPy's ``lu_solve`` checks ``b`` only); ``lapack``, ``loop_threads`` and
    ``interleaved_max_n`` as for :func:`potrs`."""
    if trans not in (0, 1, 2):
        raise ValueError("trans must be 0, 1 or 2")
    _check_solve(lu, b, np.asarray(piv))
    batch, dtype, lu, b, (piv,) = _broadcast_solve(lu, b, np.asarray(piv))
    _check_dtype(lu)
    lapack = _lapack_loop("getrs", dtype, lapack)
    n, nrhs = b.shape[-2:]
    out = _output(math.prod(batch), n, nrhs, dtype, fortran)
    if not out.size:
        return out.reshape((*batch, n, nrhs))
    for systems, (factors, pivots, rhs) in _solve_pieces(out.shape[0], (lu, 2), (piv, 1), (b, 2)):
        target = out[systems]
        arrays = (factors, np.asarray(pivots, dtype=INDEX_DTYPE), rhs, int(trans), target)
        if lapack:
            lapack_loop("getrs_each", dtype, target.shape[0], n, check_finite, arrays, loop_threads)
        elif _interleaved_solve("getrs", dtype, n, interleaved_max_n):
            launch_checked("getrs", check_finite, dtype, target.shape[0], n, n, *arrays)
        else:  # LAPACK's trans codes are _solve's LU system codes
            _solve_each(dtype, check_finite, arrays)
    return out.reshape((*batch, n, nrhs))
