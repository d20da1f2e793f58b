"""The dispatch request for a user's array: what dispatch is asked to choose a path for."""

from __future__ import annotations

import numpy as np

from ..contract.arrays import array_module, device_name, peek, scipy_lapack_dtype
from ..contract.scipy_rules import stack_loop
from ..dispatch import Request, host_for_certain


def request(op: str, a, dtype_rule=scipy_lapack_dtype, features: tuple[str, ...] = (),
            library: str = "scipy", shape: tuple[int, ...] | None = None,
            loop: str | None = None) -> tuple[Request, object]:
    """The dispatch request for ``a`` in a call to ``library``'s function (for the work of ``shape``, where given:
    a solve's broadcast batch; else ``a``'s; ``loop``: how that function loops over a stack, by default as SciPy's
    for ``op`` does), and the array to pass on (converted as :func:`peek` does)."""
    arr = peek(a)
    lapack = dtype_rule(arr.dtype)
    dtype = lapack if lapack is not None else arr.dtype
    shape = tuple(arr.shape) if shape is None else shape
    return Request(op, shape, dtype, array_module(arr), features, device_name(arr), library,
                   stack_loop(op) if loop is None else loop), arr


def on_host_at_once(op: str, a, dtype_rule=scipy_lapack_dtype, loop: str | None = None) -> bool:
    """Whether ``a`` is a plain NumPy matrix or stack that dispatch sends to the host path without pricing it
    (:func:`hetlapack.dispatch.host_for_certain`; ``loop``: how the library's function loops over a stack, by
    default as SciPy's for ``op`` does): the call is the library's own, with nothing added to it."""
    if type(a) is not np.ndarray or a.ndim < 2:
        return False
    return host_for_certain(op, a.shape, dtype_rule(a.dtype), stack_loop(op) if loop is None else loop)
