"""The dispatch request for a user's array: what dispatch is asked to choose a path for."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..contract.arrays import array_module, device_name, memory_order, peek, scipy_lapack_dtype
from ..contract.scipy_rules import stack_loop
from ..dispatch import Request, host_for_certain


def request(op: str, a, dtype_rule=scipy_lapack_dtype, features: tuple[str, ...] = (),
            library: str = "scipy", shape: tuple[int, ...] | None = None,
            loop: str | None = None, forms_q: bool = False) -> tuple[Request, object]:
    """The dispatch request for ``a`` in a call to ``library``'s function (for the work of ``shape``, where given:
    a solve's broadcast batch; else ``a``'s; ``loop``: how that function loops over a stack, by default as SciPy's
    for ``op`` does; ``forms_q``: a QR that also forms Q), and the array to pass on (converted as :func:`peek`
    does). A masked array asks for the host path: the library's own call reads or refuses the mask (SciPy 1.18's
    ``cholesky`` refuses it, its ``lu_factor`` factors the data under it)."""
    arr = peek(a)
    if isinstance(arr, np.ma.MaskedArray):
        features += ("a masked array",)
    shape = tuple(arr.shape) if shape is None else shape
    where = ("numpy", "cpu") if type(arr) is np.ndarray else (array_module(arr), device_name(arr))
    return _request(op, shape, arr.dtype, dtype_rule, features, library, loop, *where, memory_order(arr),
                    forms_q), arr


@functools.lru_cache(maxsize=1024)
def _request(op: str, shape: tuple[int, ...], dtype: np.dtype, dtype_rule: Callable, features: tuple[str, ...],
             library: str, loop: str | None, module: str, device: str, order: str, forms_q: bool) -> Request:
    """The request for an array of ``shape``, ``dtype`` and memory ``order`` in ``module`` on ``device``, made once
    per call signature (a request made afresh took 3 of the 50 µs of a batched ``lu_factor`` of 16 matrices)."""
    lapack = dtype_rule(dtype)
    return Request(op, shape, lapack if lapack is not None else dtype, module, features, device, library,
                   stack_loop(op) if loop is None else loop, order, forms_q)


def on_host_at_once(op: str, a, dtype_rule=scipy_lapack_dtype, loop: str | None = None) -> bool:
    """Whether ``a`` is a plain NumPy matrix or stack that dispatch sends to the host path without pricing it
    (:func:`hetlapack.dispatch.host_for_certain`; ``loop``: how the library's function loops over a stack, by
    default as SciPy's for ``op`` does), or a masked array (:func:`request`): the call is the library's own, with
    nothing added to it."""
    if type(a) is not np.ndarray:
        return isinstance(a, np.ma.MaskedArray)
    if a.ndim < 2:
        return False
    return host_for_certain(op, a.shape, dtype_rule(a.dtype), stack_loop(op) if loop is None else loop,
                            memory_order(a))
