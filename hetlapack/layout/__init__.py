"""Tiles and their distribution over devices."""

from .cyclic import BlockColumnCyclic

__all__ = ["BlockColumnCyclic"]
