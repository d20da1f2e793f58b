"""Run a LAPACK-style operation along a Plan's accelerated path.

Inputs and outputs here are LAPACK's (in-place Fortran arrays, tau, 0-based pivots, info codes); turning them
into SciPy's or NumPy's return values is the shims' job. The host path never comes here: it is SciPy's own call.
"""

from __future__ import annotations

import numpy as np

from ..devices.base import zero_other_triangle
from ..dispatch import Plan
from ..imports import load


def _algorithm(op: str):
    return load(f"hetlapack.algorithms.{op}")


def _batched():
    return load("hetlapack.batched.kernels")


def _tiled_kwargs(plan: Plan) -> dict:
    """The tile algorithms' tiles, devices and placement for a hybrid plan: on the two-level layout, the tile
    boundaries it cuts along the matrix's longer side (each axis, Q's too, takes those below its length) and its
    owner-computes placement over the CPU (one worker per core) and accelerators."""
    if plan.layout != "two-level":
        return {"tile": plan.tile, "devices": list(plan.devices), "placement": plan.placement}
    from ..runtime.placement import two_level, two_level_devices  # noqa: PLC0415 - the runtime loads when a plan runs

    placement, bounds = two_level(max(plan.shape[-2:]), plan.tile, plan.host_cols, len(plan.devices) - 1)
    return {"tile": bounds, "devices": two_level_devices(plan.devices), "placement": placement}


def _lapack_loop(plan: Plan) -> bool:
    """Whether a batched plan runs the LAPACK loop (SciPy's LAPACK on each matrix) rather than the interleaved
    kernels."""
    return plan.kernels == "lapack"


def _whole():
    return load("hetlapack.algorithms.whole")


def _device(plan: Plan):
    """The one accelerator of a gpu plan, as a Device."""
    from ..devices import resolve  # noqa: PLC0415 - devices are made only when a plan runs

    return resolve(list(plan.devices))[0]


def potrf(plan: Plan, a: np.ndarray, lower: bool, clean: bool, fortran: bool = False,
          check_finite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky of ``a`` (a Fortran working copy on the hybrid path, the matrix as it lies on the gpu path, any
    stack on the batched one) -> (c, info).

    On the hybrid and gpu paths a failure raises SciPy's LinAlgError instead of returning info; the gpu path writes
    its result into ``a`` only where ``a`` is writable and Fortran-ordered (see :mod:`hetlapack.algorithms.whole`).
    On the batched path, ``fortran`` writes Fortran-ordered matrices (SciPy's layout) instead of C-ordered ones
    (NumPy's). ``check_finite`` makes the gpu path's device, and the LAPACK loop as it copies each matrix, check
    ``a`` for infinities and NaNs (SciPy's ValueError); the other paths' callers check first.
    """
    if plan.path == "batched":
        return _batched().potrf(a, lower=lower, clean=clean, fortran=fortran, lapack=_lapack_loop(plan),
                                check_finite=check_finite)
    if plan.path == "gpu":
        a = _whole().potrf(a, lower=lower, clean=clean, device=_device(plan), check_finite=check_finite)
    else:
        _algorithm("potrf").potrf(a, lower=lower, **_tiled_kwargs(plan))
        if clean:
            zero_other_triangle(a, lower)
    return a, np.zeros((), dtype=np.int32)


def getrf(plan: Plan, a: np.ndarray, fortran: bool = False,
          check_finite: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting -> (lu, piv 0-based int32, info); ``fortran`` as for :func:`potrf`, and
    ``check_finite`` makes the batched kernel check ``a`` for infinities and NaNs as it reads it, and the gpu path's
    device after the upload (the hybrid path's callers check first)."""
    if plan.path == "batched":
        return _batched().getrf(a, fortran=fortran, check_finite=check_finite, lapack=_lapack_loop(plan))
    if plan.path == "gpu":
        a, piv, info = _whole().getrf(a, device=_device(plan), check_finite=check_finite)
    else:
        piv, info = _algorithm("getrf").getrf(a, **_tiled_kwargs(plan))
    return a, piv, np.asarray(info)


def plu(lu: np.ndarray, piv: np.ndarray, permute_l: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``scipy.linalg.lu``'s row indices, ``L`` (or ``P L``) and ``U`` from a packed LU of any path, in one
    compiled pass over a matrix or a stack."""
    return _batched().plu(lu, piv, permute_l=permute_l)


def geqrf(plan: Plan, a: np.ndarray, check_finite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR in LAPACK storage -> (qr, tau); ``check_finite`` on the gpu path as for :func:`getrf` (the
    other paths' callers check first)."""
    if plan.path == "batched":
        return _batched().geqrf(a)
    if plan.path == "gpu":
        return _whole().geqrf(a, device=_device(plan), check_finite=check_finite)
    return a, _algorithm("geqrf").geqrf(a, **_tiled_kwargs(plan))


def orgqr(plan: Plan, qr: np.ndarray, tau: np.ndarray, ncols: int) -> np.ndarray:
    """The first ``ncols`` columns of Q from ``geqrf``'s output."""
    if plan.path == "batched":
        return _batched().orgqr(qr, tau, ncols)
    if plan.path == "gpu":
        return _whole().orgqr(qr, tau, ncols=ncols, device=_device(plan))
    return _algorithm("geqrf").orgqr(qr, tau, ncols=ncols, **_tiled_kwargs(plan))


def qr(plan: Plan, a: np.ndarray, ncols: int, rows: int, fortran: bool = False,
       check_finite: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
    """Q's first ``ncols`` columns (``None`` for 0) and the first ``rows`` rows of R, from one factorization of
    ``a`` (the batched kernels produce both in one pass over memory); ``fortran`` (Q only) as for :func:`potrf`,
    ``check_finite`` as for :func:`getrf`."""
    if plan.path == "batched":
        return _batched().qr(a, ncols, rows, fortran=fortran, check_finite=check_finite, lapack=_lapack_loop(plan))
    packed, tau = geqrf(plan, a, check_finite)
    r = np.triu(packed[..., :rows, :])
    if plan.path == "hybrid" and ncols == packed.shape[-1] == len(tau):  # Q fits where the factorization lies
        return _algorithm("geqrf").orgqr_in_place(packed, tau, **_tiled_kwargs(plan)), r
    return (orgqr(plan, packed, tau, ncols) if ncols else None), r


def qr_pivoted(plan: Plan, a: np.ndarray, ncols: int, rows: int, fortran: bool = False,
               check_finite: bool = False) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """:func:`qr` with column pivoting, and the 0-based pivots (batched path only: one matrix is one LAPACK call)."""
    return _batched().geqp3(a, ncols, rows, fortran=fortran, check_finite=check_finite)


def potrs(plan: Plan, c: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Solve with Cholesky factors (batched path only: single solves are one LAPACK call), in SciPy's layout."""
    return _batched().potrs(c, b, lower=lower, fortran=True, lapack=_lapack_loop(plan))


def getrs(plan: Plan, lu: np.ndarray, piv: np.ndarray, b: np.ndarray, trans: int,
          check_finite: bool = False) -> np.ndarray:
    """Solve with LU factors (batched path only), in SciPy's layout; ``check_finite`` makes the kernel check ``b``
    as it reads it (SciPy's ``lu_solve`` checks ``b`` only)."""
    return _batched().getrs(lu, piv, b, trans=trans, fortran=True, check_finite=check_finite,
                            lapack=_lapack_loop(plan))

