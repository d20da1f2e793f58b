"""Path choice: hardware discovery, the cost model, ``choose`` and the user's overrides."""

from .choose import OPS, Request, choose, compiled_kernels_unusable
from .hardware import Hardware, detect
from .options import Options, current, using
from .plan import LAYOUTS, PATHS, Plan

__all__ = ["LAYOUTS", "OPS", "PATHS", "Hardware", "Options", "Plan", "Request", "choose", "compiled_kernels_unusable",
           "current", "detect", "using"]
