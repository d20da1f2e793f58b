"""The hybrid path: a tile algorithm on the task runtime over the CPU and the accelerators (seed 000), in the HGDD
layout or seed 003's two-level one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...contract.arrays import upper_trapezoid, validated, writable_in_place
from ...contract.finite import FiniteCheck
from ...devices.base import zero_other_triangle
from ...errors import NotPositiveDefinite
from ...imports import load
from ...layout.two_level import TWO_LEVEL_OPS, two_level_unavailable
from ...options import Options
from ...perf import model
from .base import TILED_OPS, Path, Request, Unread, kind, module_present, one_matrix_refusal

if TYPE_CHECKING:
    from ...algorithms import geqrf, getrf, potrf


def _algorithm(op: str) -> potrf | getrf | geqrf:
    """The tile algorithm of ``op``, imported when a plan first runs it (it loads the runtime)."""
    return load(f"hetlapack.algorithms.{op}")


class HybridPath(Path):
    """Tiles on the runtime: panels on the CPU, updates where the layout deals them. The shims leave the finiteness
    check to it: the tile algorithms read it as they copy their operand in (:meth:`operand`), or check the array
    before they start."""

    name = "hybrid"
    reorders_arithmetic = True
    checks_where_read = True

    def unavailable(self, req: Request, options: Options, gpus: tuple[str, ...] | None) -> str | None:
        if req.array_module != "numpy":
            return f"{req.array_module} arrays stay on their device (use the gpu path)"
        if req.op not in TILED_OPS:
            return f"{req.op} has no tiled algorithm (one LAPACK call on the host does it)"
        if (why := one_matrix_refusal(req)) is not None:
            return why
        if not module_present(f"hetlapack.algorithms.{req.op}"):
            return "the tiled algorithm is not installed"
        return None

    def devices(self, options: Options, gpus: tuple[str, ...] | None) -> tuple:
        """The user's devices, else the CPU and the detected GPUs."""
        return options.devices if options.devices is not None else ("cpu", *(gpus or ()))

    def layouts(self, req: Request, options: Options, unavailable: dict[str, str],
                gpus: tuple[str, ...] | None) -> dict[str, float]:
        """Predicted seconds per layout that can run ``req`` (only the forced one, if any). A layout that cannot run
        is added to ``unavailable``, and so is this path when the forced layout cannot."""
        devices = self.devices(options, gpus)
        why = {"hgdd": None, "two-level": self._two_level_unavailable(req, options, devices)}
        if why["two-level"] is not None:
            unavailable["two-level"] = why["two-level"]
        layouts = [options.layout] if options.layout is not None else list(why)
        if options.layout is not None and why[options.layout] is not None:
            unavailable[self.name] = f"the forced layout {options.layout!r} cannot run: {why[options.layout]}"
        prices = {layout: model.predict_tiled(req.op, *req.core, req.dtype, options.tile, devices, layout=layout)
                  for layout in layouts if why[layout] is None}
        if "hgdd" in prices and (factor := self.timed_factor(req, options, devices)) is not None:
            prices["hgdd"] *= factor
        return prices

    @staticmethod
    def timed_factor(req: Request, options: Options, devices: tuple) -> float | None:
        """The factor on the simulator's price that this machine's timing of the tile path's call gives, where
        ``hetlapack calibrate`` timed the call dispatch prices (:func:`model.tile_call_factor`: the CPU alone, the
        default tile and placement, a SciPy function's input of this memory order), else None."""
        if not model.cpu_alone(devices) or options.tile is not None or options.placement not in (None, "owner"):
            return None
        return model.tile_call_factor(req.op, min(req.core), req.scipy_input_order, req.forms_q)

    @staticmethod
    def _two_level_unavailable(req: Request, options: Options, devices: tuple) -> str | None:
        if req.op not in TWO_LEVEL_OPS:
            return f"the two-level layout is implemented for Cholesky, LU and QR, not {req.op}"
        if options.placement == "capability":
            return "placement='capability' places tasks greedily, not by a layout"
        return two_level_unavailable([kind(d) for d in devices])

    @staticmethod
    def tile_arguments(plan) -> dict:
        """The tile algorithms' tiles, devices and placement for ``plan``: on the two-level layout, the tile
        boundaries it cuts along the matrix's longer side (each axis, Q's too, takes those below its length) and
        its owner-computes placement over the CPU (one worker per core) and accelerators."""
        if plan.layout != "two-level":
            return {"tile": plan.tile, "devices": list(plan.devices), "placement": plan.placement}
        from ...runtime.placement import two_level, two_level_devices  # noqa: PLC0415 - the runtime loads when a plan runs

        placement, bounds = two_level(max(plan.shape[-2:]), plan.tile, plan.host_cols, len(plan.devices) - 1)
        return {"tile": bounds, "devices": two_level_devices(plan.devices), "placement": placement}

    def operand(self, a1, original, dtype, overwrite):
        """A matrix that would be copied is left :class:`Unread`: the tile algorithm copies it in a tile at a time
        (:mod:`~hetlapack.algorithms.copy_in`)."""
        if writable_in_place(a1, original, dtype, overwrite):
            return a1
        return Unread(a1, original, dtype)

    @staticmethod
    def _read(plan, a, check_finite: bool) -> tuple[np.ndarray, dict]:
        """The array the tile algorithm factors in place for the operand ``a``, and its copy-in arguments: from an
        :class:`Unread` operand a fresh array its copy-in tasks fill (on a plan with the host among its devices),
        ``check_finite`` read by them; otherwise the array itself (an Unread's working copy), checked first."""
        if isinstance(a, Unread) and "cpu" in map(kind, plan.devices):
            check = FiniteCheck() if check_finite else None
            return np.empty(a.source.shape, dtype=a.dtype, order="F"), {"source": a.source, "check": check}
        return validated(a.copy() if isinstance(a, Unread) else a, check_finite), {}

    @staticmethod
    def _raise_unless_read_finite(copy_in: dict, failed: bool = False) -> None:
        """SciPy's ``ValueError`` where the copy-in tasks read an infinity or NaN; after a failure, which stopped
        the tasks yet to read their tiles, where the input holds one anywhere (SciPy's check comes first)."""
        check = copy_in.get("check")
        if check is not None and (failed or not check.finite):
            validated(copy_in["source"], True)

    def potrf(self, plan, a, lower, clean, fortran=False, check_finite=False):
        a, copy_in = self._read(plan, a, check_finite)
        try:
            _algorithm("potrf").potrf(a, lower=lower, clean=clean, **copy_in, **self.tile_arguments(plan))
        except NotPositiveDefinite as failure:
            self._raise_unless_read_finite(copy_in, failed=True)
            return a, np.asarray(failure.minor, dtype=np.int32)
        self._raise_unless_read_finite(copy_in)
        if clean and not copy_in:
            zero_other_triangle(a, lower)
        return a, np.zeros((), dtype=np.int32)

    def getrf(self, plan, a, fortran=False, check_finite=False):
        a, copy_in = self._read(plan, a, check_finite)
        piv, info = _algorithm("getrf").getrf(a, **copy_in, **self.tile_arguments(plan))
        self._raise_unless_read_finite(copy_in)
        return a, piv, np.asarray(info)

    def geqrf(self, plan, a, check_finite=False, factors=None):
        """:meth:`Path.geqrf`; ``factors`` (``compact_wy_factors``) receives the panels' ``T_k`` for Q."""
        a, copy_in = self._read(plan, a, check_finite)
        tau = _algorithm("geqrf").geqrf(a, **copy_in, **self.tile_arguments(plan), factors=factors)
        self._raise_unless_read_finite(copy_in)
        return a, tau

    def qr(self, plan, a, ncols, rows, fortran=False, check_finite=False, own=False):
        """Q from the compact-WY factors ``T_k`` the factorization formed: in the factorization's memory, in the
        same run of the runtime, where Q is as wide (economic, or a square matrix's full Q: ``qr_in_place``), else
        beside it."""
        if not ncols:
            return super().qr(plan, a, ncols, rows, fortran, check_finite, own)
        qr, tiles = _algorithm("geqrf"), self.tile_arguments(plan)
        m, n = a.shape
        if ncols == n <= m:
            work, copy_in = self._read(plan, a, check_finite)
            r = np.empty((rows, n), dtype=work.dtype)  # rows == n here; C-ordered, as np.triu gives R
            qr.qr_in_place(work, r, **copy_in, **tiles)
            self._raise_unless_read_finite(copy_in)
            return work, r
        factors = qr.compact_wy_factors(a, tiles["tile"])
        packed, tau = self.geqrf(plan, a, check_finite, factors)
        return qr.orgqr(packed, tau, ncols=ncols, **tiles, factors=factors), upper_trapezoid(packed, rows)


HYBRID = HybridPath()
