"""CuPy arrays at the SciPy boundary: factorizations and solves that stay on the array's GPU.

``hetlapack.linalg``'s functions hand a CuPy argument here (told by its type's module, so NumPy callers never import
CuPy). The plan comes from :func:`hetlapack.dispatch.choose` like any other, so ``explain`` names it: a stack takes
the GPU batched path (:mod:`hetlapack.batched.cuda_batched`), one matrix the gpu path (the CUDA device: cuSOLVER,
cuBLAS TRSM). Results are CuPy arrays on the input's device in SciPy's return structure; inputs are never modified
(``overwrite_*`` is accepted and not needed); LAPACK's ``info`` codes, which CuPy ignores, are read back and raised
or warned exactly as SciPy does.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

from ..dispatch import Plan, choose
from ..dispatch.paths import BATCHED
from ..imports import load
from ..pivots import check_pivots
from ._request import request
from ..contract.arrays import (check_flags, fortran_matrices, getrs_trans, is_cupy, potrs_lower, scipy_lapack_dtype,
                               solve_batch)
from ..contract.originals import scipy_functions as _scipy
from ..contract.scipy_rules import (cho_factor_cleans, cho_factor_flags, cholesky_lower, fortran_result,
                                    not_positive_definite, not_square, raise_first_failure, scipy_container,
                                    warn_singular)

#: Warnings point at the caller of ``hetlapack.linalg``'s function, two frames up.
_STACKLEVEL = 3


def _batched():
    return load("hetlapack.batched.cuda_batched")


def _module(a):
    """The array module of ``a`` (CuPy), taken from ``sys.modules`` through the import system."""
    return importlib.import_module(type(a).__module__.split(".")[0])


@functools.cache
def _device(name: str):
    """The CUDA device (one per GPU, reused) that runs gpu plans for arrays on ``name``."""
    from ..devices import resolve  # noqa: PLC0415 - devices are made only when a plan runs

    return resolve([name])[0]


def _lapack_dtype(*dtypes) -> np.dtype:
    """SciPy's LAPACK dtype for operands of these dtypes, where the GPU kernels take it."""
    lapack = scipy_lapack_dtype(*dtypes)
    if lapack is None or lapack.char not in "fdFD":
        raise TypeError(f"CuPy arrays of dtype {np.result_type(*dtypes)} are not supported (float32, float64, "
                        "complex64, complex128 and what converts to them are)")
    return lapack


def _check_finite(xp, *arrays) -> None:
    """SciPy's ``check_finite`` (its ValueError text), as one reduction on the device."""
    for a in arrays:
        if not bool(xp.isfinite(a).all()):
            raise ValueError("array must not contain infs or NaNs")


def _on_device(xp, a):
    """A private Fortran-ordered copy of one matrix for the CUDA device, made on CuPy's current stream and
    completed before the device's own stream reads it."""
    copy = xp.array(a, order="F")
    xp.cuda.get_current_stream().synchronize()
    return copy


def _check_batch(name: str, batch: tuple[int, ...]) -> None:
    """SciPy's batch support refuses stacks with no matrices, with this text."""
    if 0 in batch:
        raise ValueError(f"`{name}` does not support zero-size batches.")


def _factor_input(name: str, op: str, a, check_finite: bool) -> tuple[object, object]:
    """(array module, ``a`` as an (..., m, n) array) for SciPy's function ``name``, after its checks in its order: the
    batch, the values, the shape."""
    xp = _module(a)
    a1 = xp.atleast_2d(a)
    _check_batch(name, tuple(a1.shape[:-2]))
    if check_finite:
        _check_finite(xp, a1)
    if op == "potrf" and a1.shape[-1] != a1.shape[-2]:
        not_square(name, tuple(a1.shape))
    return xp, a1


def _planned(op: str, a1) -> tuple[Plan, object]:
    """Dispatch's plan for ``a1``, and ``a1`` in its LAPACK dtype."""
    return choose(request(op, a1)[0]), a1.astype(_lapack_dtype(a1.dtype), copy=False)


def _in_scipy_layout(xp, x, name: str):
    """``x`` in the layout of SciPy's ``name`` results: Fortran-ordered matrices, or C-ordered (SciPy 1.18's)."""
    return fortran_matrices(x, xp) if fortran_result(name, x.ndim > 2) else xp.ascontiguousarray(x)


def _cholesky(name: str, a, lower, overwrite_a, check_finite, clean: bool | None):
    """(plan, factor) of SciPy's function ``name`` on a CuPy matrix or stack, ``lower`` read as SciPy reads it;
    ``clean`` as for the NumPy shim's (``None``: where SciPy's ``cho_factor`` zeroes the other triangle)."""
    xp, a1 = _factor_input(name, "potrf", a, check_finite)
    dtype = _lapack_dtype(a1.dtype)
    clean = cho_factor_cleans(a1, dtype, overwrite_a) if clean is None else clean
    plan, a1 = _planned("potrf", a1)
    lower = cholesky_lower(lower, overwrite_a, np.dtype(a1.dtype))
    if plan.runner is BATCHED:
        c, info = _batched().potrf(a1, lower=lower, clean=clean)
        raise_first_failure(info.get())
        return plan, _in_scipy_layout(xp, c, name)
    c, device = _on_device(xp, a1), _device(plan.devices[0])
    info = device.potrf(c, lower)
    if info > 0:
        raise not_positive_definite(info)
    if clean:
        device.zero_other_triangle(c, lower)
    return plan, _in_scipy_layout(xp, c, name)


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """:func:`scipy.linalg.cholesky` of a CuPy matrix or stack, on its GPU."""
    return _cholesky("cholesky", a, lower, overwrite_a, check_finite, clean=True)[1]


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """:func:`scipy.linalg.cho_factor` of a CuPy matrix or stack: ``lower`` as given, once per matrix of a stack (a
    NumPy array, as SciPy's); :func:`cho_solve` reads it as f2py does."""
    _, c = _cholesky("cho_factor", a, lower, overwrite_a, check_finite, clean=None)
    return scipy_container("cho_factor", c.ndim > 2)((c, cho_factor_flags(lower, a, tuple(c.shape[:-2]))))


def lu_factor(a, overwrite_a=False, check_finite=True):
    """:func:`scipy.linalg.lu_factor` of a CuPy matrix or stack: ``(lu, piv)`` with 0-based LAPACK pivots, one
    ``LinAlgWarning`` per exactly singular matrix."""
    xp, a1 = _factor_input("lu_factor", "getrf", a, check_finite)
    if a1.size == 0:  # SciPy's lu_factor returns these before getrf reads overwrite_a
        piv = xp.zeros((*a1.shape[:-2], 0), dtype=np.int32)
        return [fortran_matrices(xp.empty_like(a1), xp), piv] if a1.ndim > 2 else (xp.empty_like(a1, order="F"), piv)
    check_flags(overwrite_a)
    plan, a1 = _planned("getrf", a1)
    if plan.runner is BATCHED:
        lu, piv, info = _batched().getrf(a1)
        warn_singular(info.get(), _STACKLEVEL)
        return [fortran_matrices(lu, xp), xp.ascontiguousarray(piv)]
    lu = _on_device(xp, a1)
    piv = xp.empty(min(lu.shape), dtype=np.int32)
    warn_singular(_device(plan.devices[0]).getrf(lu, piv), _STACKLEVEL)
    return lu, piv - 1


def _solve_input(name: str, op: str, factor, b, check_finite: bool, check_factor: bool, piv=None):
    """(plan, xp, factor, b as (..., n, k), whether b was a vector), or ``None`` where the shapes make no solve (the
    caller then lets SciPy's own solve raise its error). Checks in SciPy's order: the batch (SciPy's batch loop
    broadcasts first), the values of ``b`` (and with ``check_factor`` the factor's), the shapes. A NumPy operand is
    copied to the factor's GPU."""
    xp = _module(factor if is_cupy(factor) else b)
    factor, b = xp.asarray(factor), xp.asarray(b)
    shapes = solve_batch(tuple(factor.shape), tuple(b.shape), piv)
    if shapes is not None:
        _check_batch(name, shapes[0])
    if check_finite:
        _check_finite(xp, b, *((factor,) if check_factor else ()))
    if shapes is None:
        return None
    batch, vector = shapes
    dtype = _lapack_dtype(factor.dtype, b.dtype)
    b2 = (b[..., None] if vector else b).astype(dtype, copy=False)
    plan = choose(request(op, xp.broadcast_to(factor, (*batch, *factor.shape[-2:])))[0])
    return plan, xp, factor.astype(dtype, copy=False), b2, vector


def _host(a):
    return a.get() if is_cupy(a) else a


def _scipy_solve(name: str, xp, *arguments, **options):
    """SciPy's own ``name`` on host copies, for operands whose shapes make no solve: it raises SciPy's error for them
    (at the first matrix of a stack); a solution, should it find one, goes back to the GPU."""
    return xp.asarray(_scipy[name](*arguments, **options))


def _solution(xp, x, vector: bool):
    return xp.ascontiguousarray(x[..., 0]) if vector else fortran_matrices(x, xp)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """:func:`scipy.linalg.cho_solve` with CuPy factors or right-hand sides, on the GPU."""
    c, lower = c_and_lower
    solve = _solve_input("_cho_solve", "potrs", c, b, check_finite, check_factor=True)
    if solve is None:
        return _scipy_solve("cho_solve", _module(c if is_cupy(c) else b), (_host(c), _host(lower)), _host(b),
                            overwrite_b=overwrite_b, check_finite=False)
    plan, xp, c1, b2, vector = solve
    lower = potrs_lower(np.dtype(c1.dtype), _host(lower), overwrite_b) if b2.size else True
    if plan.runner is BATCHED:
        return _solution(xp, _batched().potrs(c1, b2, lower=lower), vector)
    x = _on_device(xp, b2)
    _device(plan.devices[0]).potrs(c1, x, lower)
    return _solution(xp, x, vector)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """:func:`scipy.linalg.lu_solve` with CuPy factors or right-hand sides, on the GPU."""
    lu, piv = lu_and_piv
    solve = _solve_input("_lu_solve", "getrs", lu, b, check_finite, check_factor=False, piv=piv)
    if solve is None:
        return _scipy_solve("lu_solve", _module(lu if is_cupy(lu) else b), (_host(lu), _host(piv)), _host(b),
                            trans=trans, overwrite_b=overwrite_b, check_finite=False)
    plan, xp, lu1, b2, vector = solve
    trans = getrs_trans(np.dtype(lu1.dtype), trans, overwrite_b) if b2.size else 0
    pivots = xp.asarray(piv)
    if b2.size:  # where SciPy's getrs reads them
        check_pivots(pivots, lu1.shape[-1], xp)
    pivots = pivots.astype(np.int32, copy=False)
    if plan.runner is BATCHED:
        return _solution(xp, _batched().getrs(lu1, pivots, b2, trans=trans), vector)
    x = _on_device(xp, b2)
    _device(plan.devices[0]).getrs(lu1, pivots, x, trans)
    return _solution(xp, x, vector)
