"""What would a 4-GPU node do? Predictions from hetlapack's simulator (no GPU needed, nothing measured).

The tile algorithms run on the runtime's virtual clock over modeled devices: a 16-core Sandy Bridge host with
one to four Kepler K40c GPUs. Prints the predicted Cholesky and QR rates, how they scale with GPUs, the
hybrid-vs-GPU-only choice and the energy per flop, and writes the 4-GPU Cholesky's Gantt chart.

Run: python examples/what_if_4gpu.py [n]
"""

import sys

from hetlapack.perf.simulator import simulate


def main(n: int = 30000) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {}
    for op in ("cholesky", "qr"):
        rates[op] = [simulate(op, n, f"sandybridge:16,k40c:{gpus}").gflops for gpus in (1, 2, 3, 4)]
        speedups = ", ".join(f"{gpus} GPU{'s' if gpus > 1 else ''} {rate / rates[op][0]:.2f}x"
                             for gpus, rate in zip((1, 2, 3, 4), rates[op]))
        print(f"PREDICTED {op} n={n}: {rates[op][0]:,.0f} GFLOP/s on one K40c; scaling {speedups}")
    hybrid = simulate("qr", n, "sandybridge:16,k40c:4")
    gpu_only = simulate("qr", n, "sandybridge:16,k40c:4", path="gpu")
    print(f"PREDICTED qr n={n} on 4 K40c: hybrid {hybrid.seconds:.2f} s, {hybrid.gflops_per_watt:.2f} GFLOP/s/W; "
          f"gpu-only {gpu_only.seconds:.2f} s, {gpu_only.gflops_per_watt:.2f} GFLOP/s/W")
    four = simulate("cholesky", n, "sandybridge:16,k40c:4")
    print(four.summary())
    print("wrote", four.trace.plot("what_if_4gpu.png", title=f"PREDICTED cholesky n={n}, 16 cores + 4 K40c"))
    return rates


if __name__ == "__main__":
    result = main(int(sys.argv[1]) if len(sys.argv) > 1 else 30000)
    assert all(later > earlier for rates in result.values() for earlier, later in zip(rates, rates[1:]))
