"""Pivot indices as LAPACK's getrs reads them: every solve refuses one that names no row of its factor."""

from __future__ import annotations

import numpy as np


def _as_numbers(piv, xp=np):
    """The pivots as the numbers f2py (and the kernels) convert them to: complex ones without their imaginary part,
    objects, strings and timedeltas as integers. Where no conversion takes them (``None``, words) this raises the
    conversion's error, f2py's: SciPy's own call raises it too, but corrupts a dtype's reference count as it does,
    and the process dies after about a hundred such calls."""
    piv = xp.asarray(piv)
    if piv.dtype.kind == "c":
        return piv.real
    if piv.dtype.kind in "biuf":
        return piv
    return piv.astype(np.int64)


def _names_a_row(numbers, n: int):
    """Per pivot, whether it names a row of an order-``n`` factor (f2py truncates a float, so ``(-1, n)`` do)."""
    return (numbers > -1) & (numbers < n)


def pivot_outside(piv, n: int, xp=np):
    """The first of the 0-based pivots ``piv`` (any shape) that names no row of an order-``n`` factor, else None.
    LAPACK's getrs swaps rows without checking them, so for such a pivot SciPy's own solve writes outside ``b`` and
    corrupts the process's memory: every solve checks first (:func:`refuse_pivot`)."""
    numbers = _as_numbers(piv, xp)
    if numbers.size == 0 or n == 0:
        return None
    if numbers.dtype.kind in "iu":  # read as unsigned, a negative pivot is a huge one: one pass
        if numbers.view(numbers.dtype.str.replace("i", "u")).max() < n:
            return None
    elif numbers.min() > -1 and numbers.max() < n:
        return None
    return numbers[~_names_a_row(numbers, n)].ravel()[0].item()


def rows_named(piv, n: int) -> np.ndarray:
    """The pivots with each one that names no row of an order-``n`` factor replaced by row 0 (same shape): what a
    solve may be given to raise the errors it raises before it reads a pivot."""
    numbers = _as_numbers(piv)
    return np.where(_names_a_row(numbers, n), numbers, 0)


def check_pivots(piv, n: int, xp=np) -> None:
    """Raise :func:`refuse_pivot`'s error if a pivot names no row of an order-``n`` factor."""
    outside = pivot_outside(piv, n, xp)
    if outside is not None:
        refuse_pivot(outside, n)


def refuse_pivot(value, n: int) -> None:
    """Raise the error for a pivot that :func:`pivot_outside` found."""
    raise ValueError(f"lu_solve: pivot {value!r} names no row of the LU factor of order {n} (piv holds 0-based row "
                     "interchanges, as lu_factor returns them)")
