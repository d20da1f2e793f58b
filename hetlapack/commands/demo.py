"""``hetlapack demo``: factorize a default problem on every path this machine has, against SciPy.

For each operation and path it prints the dispatch plan's choice, the scaled residual and the time against
SciPy's own function on the same input, in one table; single matrices also run the accelerator paths on emulated
accelerators (devices with host memory of their own: the code paths a GPU takes, at the CPU's speed), and the
tiled Cholesky's task trace is written as a Gantt PNG. Launched by ``mpiexec`` on several ranks, it runs the
distributed demo instead (``python -m hetlapack.mpi demo``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from .. import testing
from ..compat import scipy_linalg
from ..contract.originals import scipy_functions
from ..dispatch.choose import OPS
from ..perf import model
from ..options import using
from ..explain import explain
from ..mpi.grid import launched_ranks
from ..runtime import Trace
from . import refuse_changed
from ..mpi.arguments import positive_int

#: Accelerator paths shown for single matrices, on emulated accelerators: (path, devices, row label).
EMULATED_ROWS = (("hybrid", ("cpu", "emulated:0", "emulated:1"), "hybrid:cpu+2emu"),
                 ("gpu", ("emulated:0",), "gpu:emu"))

#: Defaults of the options that only the single-process demo has; under ``mpiexec`` other values are refused.
SINGLE_PROCESS_DEFAULTS = {"batch": 20000, "small": 8, "output": "."}


@dataclass(frozen=True)
class Case:
    """One row of the demo: an operation on an input, run on a path, checked by a residual."""

    op: str
    make: Callable[[], np.ndarray]
    run: Callable[[Callable, np.ndarray], tuple]
    residual: Callable[[np.ndarray, tuple], float]
    pivoting: bool = False
    dtype: str = "float64"
    stacked: bool = False

    @property
    def label(self) -> str:
        """The operation, ``+piv`` with column pivoting, and ``/f32`` in single precision."""
        return self.op + ("+piv" if self.pivoting else "") + ("/f32" if self.dtype == "float32" else "")


def _cases(n: int, batch: int, small: int) -> list[Case]:
    def spd(shape_batch=()):
        return lambda: testing.spd(small if shape_batch else n, seed=1, batch=shape_batch)

    def general(shape_batch=(), dtype="float64"):
        return lambda: testing.general(small if shape_batch else n, dtype=dtype, seed=2, batch=shape_batch)

    def chol_res(a, out):
        factors = out[0].reshape(-1, *a.shape[-2:])
        return max(testing.cholesky_residual(x, c, True) for x, c in zip(a.reshape(-1, *a.shape[-2:]), factors))

    def lu_res(a, out):
        lus, pivs = out[0].reshape(-1, *a.shape[-2:]), np.asarray(out[1]).reshape(-1, a.shape[-1])
        return max(testing.lu_residual(x, lu, p) for x, lu, p in zip(a.reshape(-1, *a.shape[-2:]), lus, pivs))

    def qr_res(a, out):
        """``||A P - Q R||`` scaled, ``P`` the column pivoting where there is one."""
        qs, rs = out[0].reshape(-1, *a.shape[-2:]), out[1].reshape(-1, *a.shape[-2:])
        pivots = out[2].reshape(-1, a.shape[-1]) if len(out) > 2 else [slice(None)] * len(qs)
        return max(testing.qr_residual(x[:, p], q, r) for x, q, r, p in zip(a.reshape(-1, *a.shape[-2:]), qs, rs,
                                                                            pivots))

    chol = lambda f, a: (f(a, lower=True),)  # noqa: E731
    luf = lambda f, a: tuple(f(a))  # noqa: E731
    qr = lambda f, a: tuple(f(a, mode="economic"))  # noqa: E731
    qrp = lambda f, a: tuple(f(a, mode="economic", pivoting=True))  # noqa: E731
    return [
        Case("cholesky", spd(), chol, chol_res),
        Case("lu_factor", general(), luf, lu_res),
        Case("qr", general(), qr, qr_res),
        Case("cholesky", spd((batch,)), chol, chol_res, stacked=True),
        Case("lu_factor", general((batch,)), luf, lu_res, stacked=True),
        Case("lu_factor", general((batch,), "float32"), luf, lu_res, dtype="float32", stacked=True),
        Case("qr", general((batch,)), qr, qr_res, stacked=True),
        Case("qr", general((batch,)), qrp, qr_res, pivoting=True, stacked=True),
    ]


def _compile_stack_kernels(cases: list[Case]) -> None:
    """Compile the kernels the stacked cases may run, on every core with a progress bar (a first run's minutes;
    later runs find them in numba's cache), so that dispatch has them for the batched rows rather than compiling
    them in a background process meanwhile."""
    from ..batched import background, precompile  # noqa: PLC0415 - numba loads where stacks are shown

    precompile.precompile(only=background.wanted(("geqp3" if case.pivoting else OPS[case.op], np.dtype(case.dtype))
                                                 for case in cases if case.stacked))


def _best_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def register(subparsers) -> None:
    parser = subparsers.add_parser("demo", help="factorize a default problem on every available path")
    parser.add_argument("--n", type=positive_int, default=3000, help="order of the single matrices (default 3000)")
    parser.add_argument("--batch", type=positive_int, default=SINGLE_PROCESS_DEFAULTS["batch"],
                        help="stack size for the batched rows (default 20000)")
    parser.add_argument("--small", type=positive_int, default=SINGLE_PROCESS_DEFAULTS["small"],
                        help="order of the stacked matrices (default 8)")
    parser.add_argument("--repeat", type=positive_int, default=2, help="timing repetitions, best kept (default 2)")
    parser.add_argument("--output", default=SINGLE_PROCESS_DEFAULTS["output"],
                        help="folder for the trace PNG (default .)")
    parser.set_defaults(func=run)


def _trace_png(n: int, output: str) -> str:
    """Run the tiled Cholesky once at dispatch's tile with tracing on and draw its Gantt chart; returns the path."""
    from ..algorithms.potrf import potrf  # noqa: PLC0415 - only the trace calls the algorithm directly

    tile = model.default_tile("potrf", n)
    a = np.asfortranarray(testing.spd(n, seed=1))
    trace = Trace()
    potrf(a, lower=True, tile=tile, trace=trace)
    os.makedirs(output, exist_ok=True)
    path = os.path.join(output, f"demo-trace-cholesky-{n}.png")
    return str(trace.plot(path, title=f"tiled Cholesky n={n}, tile {tile}: {len(trace.events)} tasks"))


def _distributed_demo_arguments(args: argparse.Namespace) -> list[str]:
    """The distributed demo's command line for these options: ``--n`` and ``--repeat`` carry over; the
    single-process options it has no use for are a usage error rather than ignored."""
    refuse_changed(args, SINGLE_PROCESS_DEFAULTS, "not available under mpiexec (the distributed demo takes --n and "
                   "--repeat; python -m hetlapack.mpi demo --help lists its own options)")
    return ["demo", "--n", str(args.n), "--repeat", str(args.repeat)]


def run(args: argparse.Namespace) -> int:
    if launched_ranks() > 1:
        from ..mpi.__main__ import main as mpi_main  # noqa: PLC0415 - mpi4py only when launched by mpiexec

        mpi_main(_distributed_demo_arguments(args))
        return 0
    rows = []
    cases = _cases(args.n, args.batch, args.small)
    _compile_stack_kernels(cases)
    for case in tqdm(cases, desc="demo", unit="case"):
        a = case.make()
        plan = explain(case.op, a, pivoting=case.pivoting)
        paths = [(p, None, p) for p in ["host", *(p for p in plan.predicted_s if p != "host")]]
        if a.ndim == 2:
            paths += EMULATED_ROWS
        ref_time, _ = _best_time(lambda: case.run(scipy_functions[case.op], a), args.repeat)
        for path, devices, label in paths:
            with using(path=path, devices=devices):
                repeat = args.repeat if devices is None else 1
                seconds, out = _best_time(lambda: case.run(getattr(scipy_linalg, case.op), a), repeat)
            chosen = "*" if path == plan.path and devices is None else " "
            rows.append((case.label, "x".join(map(str, a.shape)), f"{chosen}{label}", case.residual(a, out), seconds,
                         ref_time / seconds))
    print()
    print(f"{'operation':<14} {'shape':<13} {'path':<16} {'residual':>9} {'seconds':>9} {'vs SciPy':>9}")
    for op, shape, path, residual, seconds, speedup in rows:
        print(f"{op:<14} {shape:<13} {path:<16} {residual:>9.3f} {seconds:>9.4f} {speedup:>8.2f}x")
    print("\n* = the path dispatch picks by itself; residual = ||A - factors||_1 / (n ||A||_1 eps) (A P for pivoted "
          "QR), pass < 50.")
    print("emu = emulated accelerators (own memory space, host BLAS): they run a GPU's code paths, not its speed.")
    print("Why, for the first case:\n" + str(explain("cholesky", cases[0].make())))
    print(f"wrote {_trace_png(args.n, args.output)} (the tiled Cholesky's tasks per worker)")
    print("Distributed: mpiexec -n 4 hetlapack demo  (2-D block-cyclic Cholesky, LU and QR over MPI)")
    return 0
