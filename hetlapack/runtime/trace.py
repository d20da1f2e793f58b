"""Execution traces: one record per task (kernel, tiles, device, worker, start, end, bytes moved, CPU time) and one
per job of a device's copy thread (bringing a task's tiles in, or writing a finished tile home).

``Trace.to_chrome_json`` writes the Trace Event Format (chrome://tracing, Perfetto); ``Trace.plot`` draws a
Gantt chart like the seeds' trace figures (matplotlib is imported only there); ``Trace.summary`` says where the time
went: kernels and copies per device, and how long how many tasks ran at once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class TraceEvent:
    """One executed task; times in seconds since the trace started."""

    kernel: str
    tiles: str
    device: str
    worker: int
    start: float
    end: float
    bytes_moved: int
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class CopyEvent:
    """One job of a device's copy thread: ``"fetch"`` (the tiles of a task, named by what it writes) or ``"home"``
    (a finished block written back to the host); times in seconds since the trace started."""

    device: str
    purpose: str
    tiles: str
    start: float
    end: float
    nbytes: int
    cpu_seconds: float


@dataclass
class Trace:
    """Records the tasks a runtime executes, its copy threads' jobs (``copies``) and, in ``transfers``, every tile
    it copied between memory spaces."""

    events: list[TraceEvent] = field(default_factory=list)
    copies: list[CopyEvent] = field(default_factory=list)
    transfers: list = field(default_factory=list)
    origin: float = field(default_factory=time.perf_counter)

    def record(self, kernel: str, tiles: str, device: str, worker: int, start: float, end: float,
               bytes_moved: int, cpu_seconds: float = 0.0) -> None:
        """Append one task's record (times from ``time.perf_counter``; ``cpu_seconds`` is its thread's CPU time)."""
        self.events.append(TraceEvent(kernel, tiles, device, worker, start - self.origin, end - self.origin,
                                      bytes_moved, cpu_seconds))

    def record_copy(self, device: str, purpose: str, tiles: str, start: float, end: float, nbytes: int,
                    cpu_seconds: float) -> None:
        """Append one copy-thread job's record (times from ``time.perf_counter``)."""
        self.copies.append(CopyEvent(device, purpose, tiles, start - self.origin, end - self.origin, nbytes,
                                     cpu_seconds))

    @property
    def makespan(self) -> float:
        """Seconds from the first start to the last end."""
        if not self.events:
            return 0.0
        return max(e.end for e in self.events) - min(e.start for e in self.events)

    def concurrency(self) -> dict[int, float]:
        """Seconds of the makespan during which ``k`` tasks ran at once, for each ``k`` (0 included)."""
        edges = sorted([(e.start, 1) for e in self.events] + [(e.end, -1) for e in self.events])
        seconds: dict[int, float] = {}
        running = 0
        for (at, step), (following, _) in zip(edges, edges[1:]):
            running += step
            seconds[running] = seconds.get(running, 0.0) + following - at
        return seconds

    def summary(self) -> str:
        """Where the time went, as a table: per device, its tasks' wall and CPU seconds and its copy thread's wall
        and CPU seconds and megabytes; then how long how many tasks ran at once."""
        devices = list(dict.fromkeys([e.device for e in self.events] + [c.device for c in self.copies]))
        lines = [f"{'device':<16} {'tasks':>6} {'kernel s':>9} {'(CPU s)':>8} {'copies':>7} {'copy s':>8} "
                 f"{'(CPU s)':>8} {'MB':>8}"]
        for device in devices:
            tasks = [e for e in self.events if e.device == device]
            copies = [c for c in self.copies if c.device == device]
            lines.append(f"{device:<16} {len(tasks):>6} {sum(e.end - e.start for e in tasks):>9.4f} "
                         f"{sum(e.cpu_seconds for e in tasks):>8.4f} {len(copies):>7} "
                         f"{sum(c.end - c.start for c in copies):>8.4f} {sum(c.cpu_seconds for c in copies):>8.4f} "
                         f"{sum(c.nbytes for c in copies) / 1e6:>8.1f}")
        at_once = ", ".join(f"{k}: {s:.4f} s" for k, s in sorted(self.concurrency().items()))
        lines.append(f"makespan {self.makespan:.4f} s; tasks running at once (count: seconds) {at_once}")
        return "\n".join(lines)

    def to_chrome_json(self, path: str | Path) -> Path:
        """Write the trace in the Trace Event Format (copy-thread jobs on a thread named ``copy``); returns the
        path."""
        events = [{"name": e.kernel, "cat": e.device, "ph": "X", "ts": e.start * 1e6, "dur": (e.end - e.start) * 1e6,
                   "pid": e.device, "tid": e.worker, "args": {"tiles": e.tiles, "bytes_moved": e.bytes_moved}}
                  for e in self.events]
        events += [{"name": f"copy ({c.purpose})", "cat": "copy", "ph": "X", "ts": c.start * 1e6,
                    "dur": (c.end - c.start) * 1e6, "pid": c.device, "tid": "copy",
                    "args": {"tiles": c.tiles, "bytes": c.nbytes}} for c in self.copies]
        path = Path(path)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        return path

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """Draw a Gantt chart (one row per device worker and per copy thread, one colour per kernel, copies grey)
        into a PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        bars = [((e.device, str(e.worker)), e.kernel, e.start, e.end - e.start) for e in self.events]
        bars += [((c.device, "copy"), "copy", c.start, c.end - c.start) for c in self.copies]
        rows = sorted({row for row, *_ in bars})
        kernels = sorted({e.kernel for e in self.events})
        colours = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(kernels)}
        if self.copies:
            kernels.append("copy")
            colours["copy"] = "0.6"
        fig, ax = plt.subplots(figsize=(12, min(1.6 + 0.5 * max(len(rows), 1), 24)))
        for index, row in enumerate(rows):
            for kernel in kernels:
                spans = [(start, length) for where, name, start, length in bars if where == row and name == kernel]
                if spans:
                    ax.broken_barh(spans, (index - 0.4, 0.8), facecolors=colours[kernel])
        ax.set_yticks(range(len(rows)), [f"{d}/{w}" for d, w in rows])
        ax.set_xlabel("seconds")
        ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[k]) for k in kernels], labels=kernels,
                  loc="lower center", bbox_to_anchor=(0.5, 1.12), ncol=min(len(kernels), 8), frameon=False)
        ax.set_title(title or f"{len(self.events)} tasks, makespan {self.makespan:.3f} s")
        fig.tight_layout()
        path = Path(path)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path
