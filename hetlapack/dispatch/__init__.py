"""Path choice: hardware discovery, the cost model, ``choose`` and the user's overrides."""

from .choose import OPS, Request, choose
from .hardware import Hardware, detect
from .options import Options, current, using
from .plan import LAYOUTS, PATHS, Plan

__all__ = ["LAYOUTS", "OPS", "PATHS", "Hardware", "Options", "Plan", "Request", "choose", "current", "detect", "using"]
