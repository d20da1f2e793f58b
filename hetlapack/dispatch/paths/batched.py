"""The batched path: a stack of small matrices in compiled loops, by hetlapack's interleaved kernels (SIMD across
matrices) or by LAPACK on each matrix (:mod:`hetlapack.batched.kernels`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...imports import load, loaded
from ...options import Options
from .base import Path, Request, module_present

if TYPE_CHECKING:
    from ...batched import kernels as compiled


def _compiled() -> compiled:
    """The compiled kernels, imported on first use (they load numba, which ``import hetlapack`` does not) under the
    package's import lock."""
    return load("hetlapack.batched.kernels")


#: Operations the batched kernels implement.
BATCHED_OPS = frozenset({"potrf", "getrf", "geqrf", "geqp3", "potrs", "getrs"})


def compiled_kernels_unusable() -> str | None:
    """Why the compiled kernels (the batched path's, and the pass that gives ``lu``'s P, L, U) cannot run in this
    process (``hetlapack.batched.kernels.unusable_after_fork``), or None; never compiles them."""
    compiled = loaded("hetlapack.batched.kernels")
    return compiled.unusable_after_fork() if compiled is not None else None


#: :mod:`hetlapack.batched.background` once a batched plan has looked for its kernels (loading it loads numba).
_background = None


def kernels_compiling(req: Request, kernels: str, forced: bool) -> str | None:
    """Why the batched path should not run ``req`` now: the ``kernels`` it would run are not in numba's cache yet,
    and compile in a background process meanwhile (:mod:`hetlapack.batched.background`); ``None`` where they are
    ready or are to compile in the call, as on a ``forced`` batched path."""
    global _background  # noqa: PLW0603 - the module, kept for compiles_ended's check on every call
    if forced:
        return None
    _background = load("hetlapack.batched.background")
    return _background.not_ready(req.op, kernels, req.dtype)


def compiles_ended() -> bool:
    """Whether a background compilation of batched kernels ended since the last look (about 50 ns where none runs;
    nothing is loaded)."""
    return _background is not None and _background.ended()


class BatchedPath(Path):
    """A stack in one compiled call; a plan names its kernels (``"interleaved"`` or ``"lapack"``)."""

    name = "batched"
    checks_where_read = True

    def unavailable(self, req: Request, options: Options, gpus: tuple[str, ...] | None) -> str | None:
        if req.array_module != "numpy":
            return f"{req.array_module} arrays are not supported (NumPy and CuPy arrays are)"
        if req.op not in BATCHED_OPS:
            return f"{req.op} has no batched kernel"
        if len(req.shape) <= 2:
            return "it takes stacks (..., m, n); this is a single matrix"
        if req.features:
            return f"{', '.join(req.features)} is implemented on the host path only"
        if not module_present("hetlapack.batched.kernels"):
            return "the batched kernels are not installed"
        return compiled_kernels_unusable()

    def operand(self, a1: np.ndarray, original, dtype: np.dtype, overwrite: bool) -> np.ndarray:
        """The stack in ``dtype``: the kernels read it as it lies and never write it."""
        return a1.astype(dtype, copy=False)

    @staticmethod
    def _lapack_loop(plan) -> bool:
        return plan.kernels == "lapack"

    def potrf(self, plan, a, lower, clean, fortran=False, check_finite=False):
        return _compiled().potrf(a, lower=lower, clean=clean, fortran=fortran, lapack=self._lapack_loop(plan),
                                 check_finite=check_finite, lanes=plan.lanes)

    def getrf(self, plan, a, fortran=False, check_finite=False):
        return _compiled().getrf(a, fortran=fortran, check_finite=check_finite, lapack=self._lapack_loop(plan),
                                 lanes=plan.lanes)

    def lu(self, plan, a, permute_l, p_matrix, check_finite=False):
        """P, L and U written by the factorization's own pass over memory."""
        return _compiled().lu(a, permute_l=permute_l, p_matrix=p_matrix, check_finite=check_finite,
                              lapack=self._lapack_loop(plan), lanes=plan.lanes)

    def geqrf(self, plan, a, check_finite=False):
        return _compiled().geqrf(a)

    def orgqr(self, plan, qr, tau, ncols):
        return _compiled().orgqr(qr, tau, ncols)

    def qr(self, plan, a, ncols, rows, fortran=False, check_finite=False, own=False):
        """Q and R in one pass over memory."""
        return _compiled().qr(a, ncols, rows, fortran=fortran, check_finite=check_finite,
                              lapack=self._lapack_loop(plan), lanes=plan.lanes)

    def qr_pivoted(self, plan, a, ncols, rows, fortran=False, check_finite=False):
        return _compiled().geqp3(a, ncols, rows, fortran=fortran, check_finite=check_finite)

    def potrs(self, plan, c, b, lower):
        return _compiled().potrs(c, b, lower=lower, fortran=True, lapack=self._lapack_loop(plan))

    def getrs(self, plan, lu, piv, b, trans, check_finite=False):
        return _compiled().getrs(lu, piv, b, trans=trans, fortran=True, check_finite=check_finite,
                                 lapack=self._lapack_loop(plan))


BATCHED = BatchedPath()
