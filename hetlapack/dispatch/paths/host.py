"""The host path: SciPy's (or NumPy's) own call, which the shims make themselves; here only what dispatch asks."""

from __future__ import annotations

from ...options import Options
from ...perf import model
from .base import Path, Request


class HostPath(Path):
    """One LAPACK call per matrix, as SciPy makes it."""

    name = "host"
    own_call = True

    def unavailable(self, req: Request, options: Options, gpus: tuple[str, ...] | None) -> str | None:
        return None if req.array_module == "numpy" else f"{req.array_module} arrays are not moved to the host"

    def predict(self, req: Request) -> float:
        """Seconds of SciPy's call: one LAPACK call per matrix, from Python, with the conversion of the input's
        memory order; on a stack, from the function's own loop, whose kind sets its fixed cost and its cost per
        matrix."""
        if len(req.shape) > 2:
            return model.predict_host_stack(req.op, *req.core, req.batch, req.dtype, req.stack_loop)
        return model.predict_host(req.op, *req.core, req.dtype, req.scipy_input_order, req.forms_q)


HOST = HostPath()
