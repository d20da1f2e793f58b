"""The first batched call of an install: what a user waits for while numba's cache lacks the kernels.

``python benchmarks/first_call.py [--op lu_factor] [--batch 10000] [--n 8]`` runs itself again in a process with an
empty numba cache (a temporary ``NUMBA_CACHE_DIR``), which calls ``hetlapack.linalg.<op>`` on a float64 stack: the
first call, the calls every half second while the kernels compile in the background (beside SciPy's own call), and
the time until dispatch takes the batched path, then that call and the next. ``--inline`` compiles in the call
instead (``HETLAPACK_BATCHED_COMPILE=inline``): the wait before hetlapack compiled in the background.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.linalg as sla

import hetlapack
import hetlapack.linalg as hl
from hetlapack.testing import general, spd

#: Set in the process that measures: the empty numba cache is its own.
_MEASURING = "HETLAPACK_FIRST_CALL_MEASURING"


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(op: str, batch: int, n: int) -> None:
    """Time the calls of ``op`` on ``batch`` float64 matrices of order ``n`` from the first, as the module says."""
    a = spd(n, batch=(batch,)) if op == "cholesky" else general(n, batch=(batch,))
    options = {"lower": True} if op == "cholesky" else {}
    ours, scipys = (lambda: getattr(hl, op)(a, **options)), (lambda: getattr(sla, op)(a, **options))
    begin = time.perf_counter()
    print(f"first call {_timed(ours):.3f} s on the {hetlapack.explain(op, a).path} path")
    meanwhile, theirs = [], []
    while hetlapack.explain(op, a).path != "batched":
        meanwhile.append(_timed(ours))
        theirs.append(_timed(scipys))
        time.sleep(0.5)
    if meanwhile:
        print(f"while compiling: {len(meanwhile)} calls, {min(meanwhile):.4f}-{max(meanwhile):.4f} s (median "
              f"{np.median(meanwhile):.4f}); SciPy's own {min(theirs):.4f}-{max(theirs):.4f} s (median "
              f"{np.median(theirs):.4f})")
    print(f"batched path from {time.perf_counter() - begin:.0f} s: that call {_timed(ours):.3f} s, the next "
          f"{_timed(ours):.4f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("lu_factor", "cholesky", "qr"), default="lu_factor")
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--inline", action="store_true", help="compile in the call (the behaviour before stop 97)")
    args = parser.parse_args()
    if os.environ.get(_MEASURING):
        measure(args.op, args.batch, args.n)
        return
    with tempfile.TemporaryDirectory(prefix="hetlapack-first-call-") as cache:
        env = {**os.environ, _MEASURING: "1", "NUMBA_CACHE_DIR": cache,
               "HETLAPACK_BATCHED_COMPILE": "inline" if args.inline else "background"}
        subprocess.run([sys.executable, *sys.argv], env=env, check=True)


if __name__ == "__main__":
    main()
