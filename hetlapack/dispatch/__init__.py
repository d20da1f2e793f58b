"""Path choice: ``choose`` a path (:mod:`.paths`) for a request by the cost model (:mod:`hetlapack.perf`) and the
user's overrides (:mod:`hetlapack.options`), and the plan that says why."""

from ..options import LAYOUTS, PATHS
from .choose import OPS, Request, choose, host_for_certain
from .plan import Plan

__all__ = ["LAYOUTS", "OPS", "PATHS", "Plan", "Request", "choose", "host_for_certain"]
