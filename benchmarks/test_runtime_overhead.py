"""Runtime overhead: insert and run 10,000 empty tasks; reports microseconds per task in ``extra_info``.

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_runtime_overhead.py --benchmark-only``.
"""

import numpy as np

from hetlapack.devices import CpuDevice
from hetlapack.runtime import Runtime, TiledMatrix

TASKS = 10_000


def empty(device):
    """A task that does nothing: what is measured is the runtime's own work."""


def insert_empty_tasks(workers):
    matrix = TiledMatrix(np.zeros((64, 64), order="F"), 1)
    with Runtime([CpuDevice(workers=workers)]) as rt:
        for t in range(TASKS):
            # a chain per tile column with cross-column reads: every task has dependencies to track
            rt.insert(empty, reads=[matrix(t % 64, (t + 1) % 64)], writes=[matrix(t % 64, t // 64 % 64)])


def test_runtime_overhead_one_worker(benchmark):
    benchmark.group = "runtime overhead (10,000 empty tasks)"
    benchmark.pedantic(insert_empty_tasks, args=(1,), rounds=5, warmup_rounds=1)
    benchmark.extra_info["us_per_task"] = benchmark.stats.stats.min / TASKS * 1e6


def test_runtime_overhead_two_workers(benchmark):
    benchmark.group = "runtime overhead (10,000 empty tasks)"
    benchmark.pedantic(insert_empty_tasks, args=(2,), rounds=5, warmup_rounds=1)
    benchmark.extra_info["us_per_task"] = benchmark.stats.stats.min / TASKS * 1e6
