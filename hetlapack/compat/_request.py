"""The dispatch request for a user's array: what dispatch is asked to choose a path for."""

from __future__ import annotations

from ..contract.arrays import array_module, device_name, peek, scipy_lapack_dtype
from ..dispatch import Request


def request(op: str, a, dtype_rule=scipy_lapack_dtype, features: tuple[str, ...] = (),
            library: str = "scipy") -> tuple[Request, object]:
    """The dispatch request for ``a`` in a call to ``library``'s function, and the array to pass on (converted as
    :func:`peek` does)."""
    arr = peek(a)
    lapack = dtype_rule(arr.dtype)
    dtype = lapack if lapack is not None else arr.dtype
    return Request(op, tuple(arr.shape), dtype, array_module(arr), features, device_name(arr), library), arr
