"""The task runtime: tasks from read/write annotations, per-device queues, placement, coherence, tracing."""

from .data import Block, TiledMatrix
from .placement import GreedyByCapability, OwnerComputes, Placement, make_placement
from .scheduler import Runtime
from .task import Task
from .trace import CopyEvent, Trace, TraceEvent

__all__ = ["Block", "CopyEvent", "GreedyByCapability", "OwnerComputes", "Placement", "Runtime", "Task", "TiledMatrix",
           "Trace", "TraceEvent", "make_placement"]
