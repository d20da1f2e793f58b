"""The paths a factorization can take, one object each (:class:`Path`): whether it can run a request, on which
devices, what it factors, and the factorizations themselves, LAPACK's way. Dispatch chooses among them; the shims
run the one a plan names (``plan.runner``)."""

from .base import Path, Request
from .batched import BATCHED
from .gpu import GPU
from .host import HOST
from .hybrid import HYBRID

#: Every path, by the name plans, ``explain`` and ``hetlapack.using(path=...)`` give it.
BY_NAME: dict[str, Path] = {path.name: path for path in (HOST, BATCHED, GPU, HYBRID)}

__all__ = ["BATCHED", "BY_NAME", "GPU", "HOST", "HYBRID", "Path", "Request"]
