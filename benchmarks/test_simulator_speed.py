"""The simulator's own cost: a 60,000-order Cholesky on 6 K20c with 512 tiles, and the tasks it simulates per
second (``extra_info["tasks_per_s"]``).

Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_simulator_speed.py --benchmark-only``.
"""

import pytest

from hetlapack.perf.simulator import simulate, simulate_distributed


@pytest.mark.parametrize("tile", [512, 960])
def test_simulate_cholesky_60000_on_6_k20c(benchmark, tile):
    benchmark.group = "simulator cholesky n=60000"
    prediction = benchmark.pedantic(simulate, args=("cholesky", 60000, "sandybridge:16,k20c:6"),
                                    kwargs={"tile": tile}, rounds=2, warmup_rounds=0)
    benchmark.extra_info.update(tile=tile, tasks=prediction.tasks,
                                tasks_per_s=prediction.tasks / benchmark.stats.stats.min,
                                predicted_gflops=prediction.gflops)


def test_simulate_distributed_cholesky_on_100_nodes(benchmark):
    benchmark.group = "simulator distributed cholesky 100 nodes"
    prediction = benchmark.pedantic(simulate_distributed, args=(345600, 100), kwargs={"tile": 4320}, rounds=1,
                                    warmup_rounds=0)
    benchmark.extra_info.update(tasks=prediction.tasks, tasks_per_s=prediction.tasks / benchmark.stats.stats.min,
                                predicted_gflops=prediction.gflops)
