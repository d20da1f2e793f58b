"""Parallel efficiency of two worker threads calling DGEMM: SciPy's f2py wrapper vs the GIL-free CpuDevice kernel.

Efficiency = (time for 2·K GEMMs on one thread) / (time for K GEMMs on each of two threads); 2.0 is perfect.
BLAS runs one thread per call, as under the runtime with two workers. Reported in ``extra_info["efficiency"]``.
Run: ``flock /tmp/hetlapack-bench.lock pytest benchmarks/test_tile_parallel_efficiency.py --benchmark-only``.
"""

import threading
import time

import numpy as np
import pytest
import scipy.linalg.blas as fblas
from threadpoolctl import threadpool_limits

from hetlapack.devices import CpuDevice

N = 512
CALLS = 16


def f2py_gemm(a, b, c):
    fblas.dgemm(1.0, a, b, beta=1.0, c=c, overwrite_c=True)


def device_gemm(a, b, c, _device=CpuDevice(workers=2)):
    _device.gemm(a, b, c, alpha=1.0, beta=1.0)


def run_threads(kernel, threads):
    operands = [[np.asfortranarray(np.random.default_rng(i).random((N, N))) for _ in range(3)]
                for i in range(threads)]

    def work(ops):
        for _ in range(CALLS * 2 // threads):
            kernel(*ops)

    pool = [threading.Thread(target=work, args=(ops,)) for ops in operands]
    start = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - start


@pytest.mark.parametrize("kernel", [f2py_gemm, device_gemm], ids=["scipy-f2py-dgemm", "cpudevice-gemm"])
def test_two_worker_parallel_efficiency(benchmark, kernel):
    benchmark.group = "two workers calling DGEMM (512, one BLAS thread each)"
    with threadpool_limits(1, user_api="blas"):
        serial = min(run_threads(kernel, 1) for _ in range(3))
        benchmark.pedantic(run_threads, args=(kernel, 2), rounds=3)
    benchmark.extra_info["efficiency"] = serial / benchmark.stats.stats.min
