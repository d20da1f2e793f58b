"""The compiled kernels' Python boundary: every argument checked against what the kernel was written for.

numba's dispatch refuses an array of the wrong dtype, or a read-only one where the kernel writes, with a
``TypeError`` of its own before the kernel runs, but not one of the wrong shape: a kernel handed a non-square stack
to factor, or an output smaller than its input, reads and writes outside the arrays and corrupts the process's heap.
:func:`check_shapes` refuses such calls with a ``ValueError`` before any kernel runs, and :func:`check_types` names
the argument numba refused; every call of a compiled kernel goes through both (:func:`.compiling.run`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from ..dtypes import real_dtype

#: Per kernel, the shape of each argument that is an array, by dimension letters (``None`` for the others): one
#: letter is one length across the kernel's arrays, ``k`` is ``min(m, n)`` wherever both are named, a ``?`` allows
#: an empty array (a Cholesky solve's pivots), and ``t`` is a flag per thread (any length).
SHAPES: dict[str, tuple[str | None, ...]] = {
    "potrf": ("bnn", None, None, "bnn", "b", None, "t", None),
    "potrf_replay": ("bnn", None, None, "bnn", "b", None, "t", None),
    "potrs": ("bnn", None, "bnr", "bnr", None),
    "getrf": ("bmn", "bmn?", "bk", "b", None, "bm?", "bmk?", "bkn?", "bmm?", None, None, "t", None),
    "getrf_replay": ("bmn", "bmn?", "bk", "b", None, None, "bm?", "bmk?", "bkn?", "bmm?", "t", None),
    "getrs": ("bnn", "bn", "bnr", None, "bnr", "t", None),
    "solve_each": ("bnn", "bn?", "bnr", None, "bnr", "t"),
    "plu": ("bmn", "bk", None, "bm", "bmk", "bkn", "bmm?"),
    "geqrf": ("bmn", "bmn", "bk", None),
    "orgqr": ("bmj", "bj", "bmc", None),
    "qr": ("bmn", "bmc", "bwn", None, None, "t", None),
    "potrf_each": ("bnn", None, None, "bnn", "b", "t", None),
    "getrf_each": ("bmn", "bmn", "bk", "b", "t", None),
    "potrs_each": ("bnn", None, "bnr", "bnr", "t", None),
    "getrs_each": ("bnn", "bn", "bnr", None, "bnr", "t", None),
    "qr_each": ("bmn", "bmc", "bwn", "t", None, None),
    "qr_replay": ("bmn", "bmc", "bwn", "t", None, None, None, None),
    "geqp3_each": ("bmn", "bmc", "bwn", "bn", "t", None, None),
}

#: Relations between lengths that one letter each cannot say, by kernel: (what must hold, test of the lengths).
_RELATIONS: dict[str, tuple[tuple[str, Callable[[dict[str, int]], bool]], ...]] = {
    "orgqr": (("j <= c <= m", lambda d: d["j"] <= d["c"] <= d["m"]),),
    **{op: (("min(m, n) <= w <= m", lambda d: min(d["m"], d["n"]) <= d["w"] <= d["m"]),
            ("c = 0 or min(m, n) <= c <= m", lambda d: d["c"] == 0 or min(d["m"], d["n"]) <= d["c"] <= d["m"]))
       for op in ("qr", "qr_each", "qr_replay", "geqp3_each")},
}
_RELATIONS["qr_replay"] += (("n <= m", lambda d: d["n"] <= d["m"]),)


def _packed_or_pieces(rows_at: int) -> tuple[tuple[str, Callable[[tuple], bool]], ...]:
    """An LU kernel's outputs: a packed LU to write (argument 1), or ``lu``'s rows, L and U (arguments ``rows_at``
    on)."""
    return (("a packed LU to write, or lu's rows, L and U",
             lambda args: args[1].size > 0 or min(piece.size for piece in args[rows_at:rows_at + 3]) > 0),)


#: What must hold of the arguments themselves, by kernel: (what must hold, test of the arguments).
_WHOLE: dict[str, tuple[tuple[str, Callable[[tuple], bool]], ...]] = {"getrf": _packed_or_pieces(5),
                                                                       "getrf_replay": _packed_or_pieces(6)}


#: The dtype an array kind holds (``None``: the kernel's own, ``"real"``: its real precision) and whether the kernel
#: writes it.
_ARRAY_KINDS: dict[str, tuple[np.dtype | str | None, bool]] = {
    "in3": (None, False), "out3": (None, True), "real_out3": ("real", True), "tau_out": (None, True),
    "tau_in": (None, False),
    "piv_out": (np.dtype(np.int32), True), "piv_in": (np.dtype(np.int32), False), "info": (np.dtype(np.int32), True),
    "flags": (np.dtype(np.uint8), True),
}


#: One array argument's check: its position, the dtype it holds and whether it is written.
_ArrayCheck = tuple[int, np.dtype, bool]


@functools.cache
def _array_checks(op: str, kinds: tuple[str, ...], dtype: np.dtype) -> tuple[_ArrayCheck, ...]:
    """The checks of kernel ``op``'s array arguments in ``dtype``, worked out once per kernel and dtype so that a
    call pays only for the checks themselves (on a small stack, the call's time is mostly such Python work)."""
    checks = []
    for position, kind in enumerate(kinds):
        if kind in _ARRAY_KINDS:
            held, written = _ARRAY_KINDS[kind]
            checks.append((position, real_dtype(dtype) if held == "real" else held or dtype, written))
    return tuple(checks)


def check_shapes(op: str, kinds: tuple[str, ...], dtype: np.dtype, arguments: tuple) -> None:
    """Raise ``ValueError`` unless ``arguments`` are as many as ``kinds`` and their shapes those :data:`SHAPES` gives
    kernel ``op``'s: what numba's dispatch cannot check. The shapes' rules are worked out once per set of shapes
    (:func:`_check_shapes`), and the dtypes and writable outputs left to numba's dispatch (:func:`check_types` names
    what it refused): on a small stack this Python work is most of the call (checking every argument's dtype and
    writability besides took 6 of the 38 µs of a batched ``lu_factor`` of 16 matrices of order 2)."""
    if len(arguments) != len(kinds):
        raise ValueError(f"kernel {op} takes {len(kinds)} arguments, got {len(arguments)}")
    try:
        shapes = tuple(arguments[position].shape for position, _, _ in _array_checks(op, kinds, dtype))
    except AttributeError:  # not an array: say which
        check_types(op, kinds, dtype, arguments)
        raise
    _check_shapes(op, kinds, shapes)
    for text, holds in _WHOLE.get(op, ()):
        if not holds(arguments):
            raise ValueError(f"kernel {op}: needs {text}")


def check_types(op: str, kinds: tuple[str, ...], dtype: np.dtype, arguments: tuple) -> None:
    """Raise ``ValueError`` naming the first of ``arguments`` (as many as ``kinds``) that is not what kernel ``op``
    (computing in ``dtype``) reads or writes: an array of its kind's dtype, writable where written."""
    for position, held, written in _array_checks(op, kinds, dtype):
        value = arguments[position]
        if not isinstance(value, np.ndarray) or value.dtype != held:
            raise ValueError(f"kernel {op}: argument {position} must be a {held} array, got "
                             f"{getattr(value, 'dtype', type(value).__name__)}")
        if written and not value.flags.writeable:
            raise ValueError(f"kernel {op}: argument {position} is written but read-only")


@functools.lru_cache(maxsize=1024)
def _check_shapes(op: str, kinds: tuple[str, ...], shapes: tuple[tuple[int, ...], ...]) -> None:
    """Raise ``ValueError`` unless the ``shapes`` of kernel ``op``'s array arguments (those of ``kinds``, in order)
    agree with their dimension letters and the kernel's relations between lengths; remembered where they do."""
    lengths: dict[str, int] = {}
    positions = [position for position, kind in enumerate(kinds) if kind in _ARRAY_KINDS]
    for position, shape in zip(positions, shapes, strict=True):
        spec = SHAPES[op][position]
        if spec is not None and not (spec.endswith("?") and math.prod(shape) == 0):
            _bind(op, position, shape, spec.rstrip("?"), lengths)
    if "k" in lengths and {"m", "n"} <= lengths.keys() and lengths["k"] != min(lengths["m"], lengths["n"]):
        raise ValueError(f"kernel {op}: {lengths['k']} pivots or reflectors for matrices of shape "
                         f"({lengths['m']}, {lengths['n']})")
    for text, holds in _RELATIONS.get(op, ()):
        if not holds(lengths):
            raise ValueError(f"kernel {op}: needs {text}, got {lengths}")


def _bind(op: str, position: int, shape: tuple[int, ...], spec: str, lengths: dict[str, int]) -> None:
    """Check ``shape`` against ``spec``'s letters, binding each letter met first to its length."""
    if len(shape) != len(spec):
        raise ValueError(f"kernel {op}: argument {position} must have {len(spec)} dimensions, got shape {shape}")
    for letter, length in zip(spec, shape):
        if letter == "t":
            continue
        if lengths.setdefault(letter, length) != length:
            what = "is not a stack of square matrices" if spec.count(letter) > 1 else "does not match the others"
            raise ValueError(f"kernel {op}: argument {position} of shape {shape} {what} ({letter} = {lengths[letter]} "
                             f"in dimensions {spec!r})")
