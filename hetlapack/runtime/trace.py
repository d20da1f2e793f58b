"""Execution traces: one record per task (kernel, tiles, device, worker, start, end, bytes moved).

``Trace.to_chrome_json`` writes the Trace Event Format (chrome://tracing, Perfetto); ``Trace.plot`` draws a
Gantt chart like the seeds' trace figures (matplotlib is imported only there).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
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


@dataclass
class Trace:
    """Records the tasks a runtime executes and, in ``transfers``, every tile it copied between memory spaces."""

    events: list[TraceEvent] = field(default_factory=list)
    transfers: list = field(default_factory=list)
    origin: float = field(default_factory=time.perf_counter)

    def record(self, kernel: str, tiles: str, device: str, worker: int, start: float, end: float,
               bytes_moved: int) -> None:
        """Append one task's record (times from ``time.perf_counter``)."""
        self.events.append(TraceEvent(kernel, tiles, device, worker, start - self.origin, end - self.origin,
                                      bytes_moved))

    @property
    def makespan(self) -> float:
        """Seconds from the first start to the last end."""
        if not self.events:
            return 0.0
        return max(e.end for e in self.events) - min(e.start for e in self.events)

    def busy_seconds(self) -> dict[str, float]:
        """Seconds of kernel time per device."""
        busy: dict[str, float] = {}
        for event in self.events:
            busy[event.device] = busy.get(event.device, 0.0) + event.end - event.start
        return busy

    def to_chrome_json(self, path: str | Path) -> Path:
        """Write the trace in the Trace Event Format; returns the path."""
        events = [{"name": e.kernel, "cat": e.device, "ph": "X", "ts": e.start * 1e6, "dur": (e.end - e.start) * 1e6,
                   "pid": e.device, "tid": e.worker, "args": {"tiles": e.tiles, "bytes_moved": e.bytes_moved}}
                  for e in self.events]
        path = Path(path)
        path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
        return path

    def to_dicts(self) -> list[dict]:
        """The events as plain dictionaries."""
        return [asdict(e) for e in self.events]

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """Draw a Gantt chart (one row per device worker, one colour per kernel) into a PNG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = sorted({(e.device, e.worker) for e in self.events})
        kernels = sorted({e.kernel for e in self.events})
        colours = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(kernels)}
        fig, ax = plt.subplots(figsize=(12, min(1.6 + 0.5 * max(len(rows), 1), 24)))
        for row, (device, worker) in enumerate(rows):
            for kernel in kernels:
                bars = [(e.start, e.end - e.start) for e in self.events
                        if e.device == device and e.worker == worker and e.kernel == kernel]
                if bars:
                    ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours[kernel])
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
