"""User overrides of dispatch: ``hetlapack.using(...)`` and the ``HETLAPACK_PATH`` environment variable, with the
names a user may force (paths, layouts, batched kernels)."""

from __future__ import annotations

import contextlib
import contextvars
import numbers
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from .devices import check

#: Paths dispatch chooses among.
PATHS = ("host", "batched", "gpu", "hybrid")

#: Layouts of the hybrid path: HGDD (tile columns dealt to the accelerators by capability, panels on the CPU) and
#: seed 003's two-level hybrid tiles (big tiles for the accelerators, a host slice for the CPU's cores).
LAYOUTS = ("hgdd", "two-level")

#: Kernels of the batched path, as a plan describes them.
KERNELS = {"interleaved": "interleaved (hetlapack's own, SIMD across matrices; solves past order 8-24 one matrix at "
                          "a time)",
           "lapack": "LAPACK loop (SciPy's LAPACK on each matrix, from compiled code)"}

ENV_PATH = "HETLAPACK_PATH"


@dataclass(frozen=True)
class Options:
    """Forced choices; ``None`` leaves the decision to the model. ``layout`` applies when the hybrid path runs,
    ``kernels`` when the batched path runs an operation that has them."""

    path: str | None = None
    tile: int | None = None
    devices: tuple | None = None
    placement: str | None = None
    layout: str | None = None
    kernels: str | None = None


_current: contextvars.ContextVar[Options] = contextvars.ContextVar("hetlapack_options", default=Options())


def _check_path(path: str | None, source: str) -> None:
    if path is not None and path not in PATHS:
        raise ValueError(f"{source}: unknown path {path!r}; expected one of {', '.join(PATHS)}")


def _checked_tile(tile) -> int:
    if isinstance(tile, bool) or not isinstance(tile, numbers.Integral) or tile < 1:
        raise ValueError(f"using: tile must be a positive integer, got {tile!r}")
    return int(tile)


def _checked_devices(devices) -> tuple:
    if isinstance(devices, str) or not isinstance(devices, Iterable):
        raise TypeError("using: devices must be a sequence of device names or devices, e.g. ['cpu', 'emulated:0'], "
                        f"got {devices!r}")
    devices = tuple(devices)
    if not devices:
        raise ValueError("using: devices must name at least one device (None keeps the detected ones)")
    try:
        check(devices)
    except ValueError as error:
        raise ValueError(f"using: {error}") from None
    return devices


#: ``os.environ``, its own dict and the variable's key in that dict, where this Python's ``os.environ`` has them.
_ENVIRON = os.environ
_ENVIRON_DATA = getattr(os.environ, "_data", None)
_ENV_KEY = os.environ.encodekey(ENV_PATH) if hasattr(os.environ, "encodekey") else ENV_PATH


def _environment_may_set_path() -> bool:
    """Whether ``HETLAPACK_PATH`` may be set, asked of ``os.environ``'s own dict: ``os.environ.get`` of an unset
    variable raises and catches a KeyError inside, 2.4 us right after a LAPACK call has left the interpreter's
    caches cold, 5% of a Cholesky of order 100 (issue 36)."""
    return _ENVIRON_DATA is None or os.environ is not _ENVIRON or _ENV_KEY in _ENVIRON_DATA


def current() -> Options:
    """The options in force: those of the innermost ``using`` block, else ``HETLAPACK_PATH`` (read on every call),
    else none."""
    options = _current.get()
    if options.path is None and _environment_may_set_path():
        env_path = os.environ.get(ENV_PATH) or None
        _check_path(env_path, ENV_PATH)
        if env_path is not None:
            options = replace(options, path=env_path)
    return options


@contextlib.contextmanager
def using(
    path: str | None = None,
    *,
    tile: int | None = None,
    devices: Sequence | None = None,
    placement: str | None = None,
    layout: str | None = None,
    kernels: str | None = None,
) -> Iterator[Options]:
    """Force dispatch choices inside a ``with`` block (nestable; thread- and task-local).

    ``layout`` (``"hgdd"`` or ``"two-level"``) is the hybrid path's layout; where the hybrid path cannot run it,
    that path is unavailable (forcing both raises). ``kernels`` (``"interleaved"`` or ``"lapack"``) are the batched
    path's, for the operations and dtypes that have them: the interleaved kernels are the fastest for tiny matrices
    but round differently from LAPACK, and factor in double precision only (float64 and complex128; the solves have
    them in every precision); the LAPACK loop gives SciPy's results to the bit. A forced batched path compiles
    kernels missing from numba's cache in the call, where dispatch would leave them to a background process.

    Examples
    --------
    >>> import numpy as np, hetlapack
    >>> with hetlapack.using(path="host"):
    ...     c = hetlapack.cholesky(np.eye(3) * 4)
    """
    _check_path(path, "using")
    tile = _checked_tile(tile) if tile is not None else None
    devices = _checked_devices(devices) if devices is not None else None
    if placement is not None and placement not in ("owner", "capability"):
        raise ValueError(f"using: placement must be 'owner' or 'capability', got {placement!r}")
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"using: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if kernels is not None and kernels not in KERNELS:
        raise ValueError(f"using: kernels must be one of {', '.join(KERNELS)}, got {kernels!r}")
    outer = _current.get()
    options = Options(
        path=path if path is not None else outer.path,
        tile=tile if tile is not None else outer.tile,
        devices=devices if devices is not None else outer.devices,
        placement=placement if placement is not None else outer.placement,
        layout=layout if layout is not None else outer.layout,
        kernels=kernels if kernels is not None else outer.kernels,
    )
    token = _current.set(options)
    try:
        yield options
    finally:
        _current.reset(token)
