"""The batched kernels' compilation: each kernel's typed signature, its machine code, and the one way to run it.

The compiled loops live in ``_cholesky``, ``_lu``, ``_lu_pieces``, ``_lu_solve``, ``_qr`` and ``_solve`` (our own
arithmetic, interleaved), their replays of OpenBLAS's roundings and ``_lapack_each`` (SciPy's LAPACK on each matrix).
Each kernel is compiled once per dtype under one explicit signature (inputs typed as read-only arrays of any layout,
so C, Fortran, strided and read-only stacks share one machine-code version) and cached on disk, with numba's
inliner copying no callee's IR meanwhile (:mod:`._inlining`, the same machine code in less time). Each kernel
factors one thread's share of a stack (its last two arguments: the share's index and the number of shares);
:func:`run` checks every call's arguments before the machine code sees them and runs the shares on numba's threads
(:mod:`._launch`). Kept apart from the per-operation drivers (:mod:`.kernels`) and from how many threads a call
takes (:mod:`.threads`): ``hetlapack compile`` (:mod:`.precompile`) needs only this.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numba
import numpy as np
from numba import types

from ..devices import lapack_pointers
from ..dtypes import real_dtype
from ..imports import importing
from ..perf.model import interleaved_dtypes
from . import (_cholesky, _cholesky_replay, _inlining, _lapack_each, _launch, _lu, _lu_pieces, _lu_replay, _lu_solve,
               _qr, _qr_replay, _solve, recycled)
from ._boundary import check_shapes, check_types

#: The dtypes the kernels compute in (LAPACK's s, d, c, z).
LAPACK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))

#: Integer type of pivots and info codes (LAPACK's ``INTEGER``).
INDEX_DTYPE = np.dtype(np.int32)

_INDEX = types.int32
_COUNT = types.intp

#: Each compiled kernel's Python function and argument kinds: ``in`` arrays are read-only of any layout, ``out3``
#: stacks hold C- or Fortran-ordered matrices, the other outputs are C-ordered (``real_out3``: a C-ordered stack of
#: the kernel's real precision); ``lapack:NAME`` is SciPy's LAPACK
#: routine NAME in the kernel's precision (:func:`lapack_routines`).
KERNELS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "potrf": (_cholesky.potrf_stack, ("in3", "bool", "bool", "out3", "info", "bool", "flags", "count")),
    "potrf_replay": (_cholesky_replay.potrf_replay_stack,
                     ("in3", "bool", "bool", "out3", "info", "count", "flags", "count")),
    "potrs": (_cholesky.potrs_stack, ("in3", "bool", "in3", "out3", "count")),
    "getrf": (_lu.getrf_stack, ("in3", "out3", "piv_out", "info", "bool", "piv_out", "out3", "out3", "real_out3",
                                "count", "bool", "flags", "count")),
    "getrf_replay": (_lu_replay.getrf_replay_stack,
                     ("in3", "out3", "piv_out", "info", "count", "bool", "piv_out", "out3", "out3", "real_out3",
                      "flags", "count")),
    "getrs": (_lu_solve.getrs_stack, ("in3", "piv_in", "in3", "count", "out3", "flags", "count")),
    "solve_each": (_solve.solve_each, ("in3", "piv_in", "in3", "count", "out3", "flags")),
    "plu": (_lu_pieces.plu_stack, ("in3", "piv_in", "bool", "piv_out", "out3", "out3", "real_out3")),
    "geqrf": (_qr.geqrf_stack, ("in3", "out3", "tau_out", "count")),
    "orgqr": (_qr.orgqr_stack, ("in3", "tau_in", "out3", "count")),
    "qr": (_qr.qr_stack, ("in3", "out3", "out3", "count", "bool", "flags", "count")),
    "potrf_each": (_lapack_each.potrf_each, ("in3", "bool", "bool", "out3", "info", "flags", "lapack:potrf")),
    "getrf_each": (_lapack_each.getrf_each, ("in3", "out3", "piv_out", "info", "flags", "lapack:getrf")),
    "potrs_each": (_lapack_each.potrs_each, ("in3", "bool", "in3", "out3", "flags", "lapack:potrs")),
    "getrs_each": (_lapack_each.getrs_each,
                   ("in3", "piv_in", "in3", "count", "out3", "flags", "lapack:getrs")),
    "qr_each": (_lapack_each.qr_each, ("in3", "out3", "out3", "flags", "lapack:geqrf", "lapack:orgqr")),
    "qr_replay": (_qr_replay.qr_replay_each,
                  ("in3", "out3", "out3", "flags", "lapack:geqrf", "lapack:orgqr", "count", "count")),
    "geqp3_each": (_lapack_each.geqp3_each,
                   ("in3", "out3", "out3", "piv_out", "flags", "lapack:geqp3", "lapack:orgqr")),
}


def lu_pieces(batch: int, m: int, n: int, dtype: np.dtype, *, permute_l: bool = False,
              p_matrix: bool = False) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arguments the ``getrf``, ``getrf_replay`` and ``plu`` kernels write ``lu``'s pieces into for ``batch``
    matrices of ``m x n`` (none where ``batch`` is 0: the packed LU only): ``permute_l``, the row indices, ``L``,
    ``U`` and ``P`` (empty unless ``p_matrix``), each C-ordered."""
    k = min(m, n)
    return (bool(permute_l), recycled.empty((batch, m), INDEX_DTYPE), recycled.empty((batch, m, k), dtype),
            recycled.empty((batch, k, n), dtype), recycled.empty((batch if p_matrix else 0, m, m), real_dtype(dtype)))


@functools.lru_cache(maxsize=256)
def packed_lu_only(m: int, n: int, dtype: np.dtype) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`lu_pieces` of no matrices, the arguments of a kernel that writes the packed LU only: the same empty
    arrays for every call of a shape and dtype (nothing is ever written to them; made afresh for each call, they
    took 4 µs of a batched ``lu_factor`` of 16 matrices)."""
    return lu_pieces(0, m, n, dtype)


#: The kernels of our own arithmetic (not LAPACK's on each matrix), each with the operation whose dtypes it computes
#: in: the factorizations in double precision only (single-precision stacks run LAPACK or its replay), the solves
#: (``solve_each`` solves the orders past the interleaved ones) in every precision
#: (:func:`~hetlapack.perf.model.interleaved_dtypes`).
OWN_ARITHMETIC = {"potrf": "potrf", "potrs": "potrs", "getrf": "getrf", "getrs": "getrs", "solve_each": "getrs",
                  "geqrf": "geqrf", "orgqr": "geqrf", "qr": "geqrf"}

#: Kernels written for some of ``LAPACK_DTYPES`` only, and those dtypes: the replays of single precision's LAPACK,
#: and our own arithmetic in the dtypes of its operation.
_ONLY_DTYPES = {"getrf_replay": (np.dtype(np.float32),), "potrf_replay": (np.dtype(np.float32),),
                "qr_replay": (np.dtype(np.float32),),
                **{kernel: tuple(dtype for dtype in LAPACK_DTYPES if dtype in interleaved_dtypes(op))
                   for kernel, op in OWN_ARITHMETIC.items()}}


def kernel_dtypes(op: str) -> tuple[np.dtype, ...]:
    """The dtypes kernel ``op`` is compiled for."""
    return _ONLY_DTYPES.get(op, LAPACK_DTYPES)


def _lapack_routine(kind: str, dtype: np.dtype) -> Callable:
    """The ctypes function of a ``lapack:NAME`` argument kind in ``dtype``'s precision."""
    return lapack_pointers.routine(kind.removeprefix("lapack:"), dtype.char)


def lapack_routines(op: str, dtype: np.dtype) -> tuple[Callable, ...]:
    """The LAPACK routines ``op``'s kernel takes (its ``lapack:NAME`` arguments, in order), in ``dtype``'s
    precision."""
    return tuple(_lapack_routine(kind, dtype) for kind in KERNELS[op][1] if kind.startswith("lapack:"))


def _numba_type(kind: str, dtype: np.dtype) -> types.Type:
    if kind.startswith("lapack:"):
        return numba.typeof(_lapack_routine(kind, dtype))
    scalar = numba.from_dtype(dtype)
    table = {
        "in3": types.Array(scalar, 3, "A", readonly=True),
        "out3": types.Array(scalar, 3, "A"),
        "real_out3": types.Array(numba.from_dtype(real_dtype(dtype)), 3, "C"),
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


def argument_types(op: str, dtype: np.dtype) -> tuple[types.Type, ...]:
    """The numba types of kernel ``op``'s arguments in ``dtype``, less the two counts of its share."""
    return tuple(_numba_type(kind, dtype) for kind in KERNELS[op][1])


def signature(op: str, dtype: np.dtype) -> types.Type:
    """The one signature kernel ``op`` is compiled under for ``dtype`` (:func:`compiled`): its arguments, then its
    share's index and the number of shares."""
    return types.none(*argument_types(op, dtype), _COUNT, _COUNT)


@functools.cache
def kernel(op: str, dtype: np.dtype) -> Callable:
    """The kernel of ``op`` compiled (or loaded from the disk cache) for ``dtype``: one thread's share of a call.

    The kernel's Python function is compiled again, with the options its module gave it, under one explicit
    signature whose inputs are read-only arrays of any layout, so C, Fortran, strided and read-only stacks all run
    one machine-code version (numba converts the others to it) instead of compiling one each. A dtype the kernel is
    not written for (:func:`kernel_dtypes`) raises ``TypeError``.
    """
    if dtype not in kernel_dtypes(op):
        raise TypeError(f"the batched {op} computes in {', '.join(map(str, kernel_dtypes(op)))}, not {dtype}")
    dispatcher = KERNELS[op][0]
    with importing(), _inlining.uncopied():  # numba imports its lowering registries on its first compilation
        return numba.jit(signature(op, dtype), cache=True, **dispatcher.targetoptions)(dispatcher.py_func)


@functools.cache
def launcher(op: str, dtype: np.dtype) -> Callable:
    """The parallel loop that runs the shares of ``op``'s kernel in ``dtype`` (:func:`._launch.shares`), compiled or
    loaded from the disk cache."""
    with importing(), _inlining.uncopied():
        return _launch.compiled(argument_types(op, dtype))


@functools.cache
def compiled(op: str, dtype: np.dtype) -> Callable[..., None]:
    """``op``'s kernel in ``dtype`` and the parallel loop that runs it (:func:`kernel`, :func:`launcher`): a
    function of the kernel's arguments and the number of threads that share the stack. One share is the kernel's
    own call: the loop would enter a parallel region and wake numba's other threads for nothing (a few µs, most of
    the kernel's time on a small stack). The machine code at the kernel's address lives as long as :func:`kernel`'s
    cache holds its dispatcher: the life of the process."""
    shares, alone = launcher(op, dtype), kernel(op, dtype)
    address = _launch.address(alone, signature(op, dtype))

    def launch(*arguments) -> None:
        if arguments[-1] == 1:
            alone(*arguments[:-1], 0, 1)
        elif shares(address, arguments[:-1], arguments[-1]):
            raise MemoryError(f"the batched {op} failed in a thread: it could not allocate its buffers")

    return launch


def run(op: str, dtype: np.dtype, *arguments) -> None:
    """Run kernel ``op`` compiled for ``dtype`` on ``arguments``, the last of them the number of threads that share
    the stack, once their shapes are checked to be what it was written for (:func:`~._boundary.check_shapes`; numba's
    dispatch refuses the wrong dtypes and read-only outputs before the kernel runs, and
    :func:`~._boundary.check_types` then says which): the one way into the compiled code."""
    *given, threads = arguments
    kinds = KERNELS[op][1]
    check_shapes(op, kinds, dtype, given)
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"kernel {op}: needs a positive number of threads, got {threads!r}")
    try:
        compiled(op, dtype)(*arguments)
    except TypeError:
        check_types(op, kinds, dtype, given)
        raise
