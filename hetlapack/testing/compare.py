"""Comparing a call's results with another library's, as the drop-in contract reads them: the same values to the
bit, dtypes, shapes and memory layouts, and the same container."""

from __future__ import annotations

import numpy as np


def result_arrays(result) -> list[np.ndarray]:
    """The arrays a call returned: the result itself, or those in its tuple or list (flags and scalars left out;
    nested tuples, as QR's raw mode returns, are flattened)."""
    if isinstance(result, np.ndarray):
        return [result]
    if isinstance(result, (tuple, list)):
        return [x for part in result for x in result_arrays(part)]
    return []


def assert_same_results(ours, theirs) -> None:
    """Assert that two calls returned the same: the same container type, and arrays equal element by element in
    dtype, shape and layout (C- and Fortran-contiguity)."""
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    for x, y in zip(result_arrays(ours), result_arrays(theirs), strict=True):
        np.testing.assert_array_equal(x, y)
        assert (x.dtype, x.shape, x.flags.c_contiguous, x.flags.f_contiguous) == (
            y.dtype, y.shape, y.flags.c_contiguous, y.flags.f_contiguous)
