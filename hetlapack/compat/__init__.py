"""SciPy and NumPy shims: SciPy-exact public functions, and ``install()``/``uninstall()``/``patched()``."""

from .patching import install, installed, leftover_originals, patched, uninstall

__all__ = ["install", "installed", "leftover_originals", "patched", "uninstall"]
