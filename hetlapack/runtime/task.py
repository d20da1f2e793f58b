"""Tasks and the dependency tracker that turns read/write annotations into a DAG (QUARK's hazards)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .data import Block


class Task:
    """One kernel call with its data accesses; ``remaining`` counts unfinished predecessors."""

    __slots__ = ("seq", "kernel", "args", "kwargs", "reads", "writes", "priority", "name", "flops",
                 "device_index", "remaining", "dependents", "expected_seconds", "done", "prefetched")

    def __init__(self, seq: int, kernel: str | Callable[..., Any], args: tuple, kwargs: dict,
                 reads: Sequence[Block], writes: Sequence[Block], priority: int, name: str, flops: float) -> None:
        self.seq = seq
        self.kernel = kernel
        self.args = args
        self.kwargs = kwargs
        self.reads = tuple(reads)
        self.writes = tuple(writes)
        self.priority = priority
        self.name = name
        self.flops = flops
        self.device_index: int | None = None
        self.remaining = 0
        self.dependents: list[Task] = []
        self.expected_seconds = 0.0
        self.done = False
        self.prefetched = 0

    @property
    def blocks(self) -> list[Block]:
        """The block handles among the task's arguments (the data it touches)."""
        return [arg for arg in self.args if isinstance(arg, Block)]

    @property
    def written(self) -> str:
        """The blocks the task writes, as traces name them (``"A[1,0],A[2:4,1]"``)."""
        return ",".join(map(repr, self.writes))

    def __lt__(self, other: Task) -> bool:
        return (-self.priority, self.seq) < (-other.priority, other.seq)

    def __repr__(self) -> str:
        return f"Task({self.name} #{self.seq}, writes={list(self.writes)})"


class DependencyTracker:
    """Per tile: the last writer (``last_writer``, read by the runtime) and the readers since; adds RaW, WaR and WaW
    edges at insertion."""

    def __init__(self) -> None:
        self.last_writer: dict[Block, Task] = {}
        self._readers: dict[Block, list[Task]] = {}

    def predecessors(self, task: Task) -> set[Task]:
        """Record the task's accesses and return the earlier tasks it must wait for."""
        before: set[Task] = set()
        written = {part for block in task.writes for part in block.parts}
        for block in task.reads:
            for part in block.parts:
                if part in written:
                    continue
                writer = self.last_writer.get(part)
                if writer is not None:
                    before.add(writer)  # read after write
                self._readers.setdefault(part, []).append(task)
        for part in written:
            writer = self.last_writer.get(part)
            if writer is not None:
                before.add(writer)  # write after write
            before.update(self._readers.pop(part, ()))  # write after read
            self.last_writer[part] = task
        before.discard(task)
        return before
