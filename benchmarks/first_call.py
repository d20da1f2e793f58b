"""The first batched call of an install: what a user waits for while numba's cache lacks the kernels.

``python benchmarks/first_call.py [--op lu_factor] [--batch 10000] [--n 8]`` runs, in a process of its own with an
empty numba cache (a temporary ``NUMBA_CACHE_DIR``), the call ``hetlapack.linalg.<op>`` on a float64 stack: the first
call, the calls every half second while the kernels compile in the background (beside SciPy's own call), and the
time until dispatch takes the batched path, then that call and the next. ``--inline`` compiles in the call instead
(``HETLAPACK_BATCHED_COMPILE=inline``): the wait before hetlapack compiled in the background.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

_CALLER = """
import sys, time
import numpy as np, scipy.linalg as sla
import hetlapack, hetlapack.linalg as hl
from hetlapack.testing import general, spd

op, batch, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a = spd(n, batch=(batch,)) if op == "cholesky" else general(n, batch=(batch,))
call = {"cholesky": lambda f: f(a, lower=True), "lu_factor": lambda f: f(a), "qr": lambda f: f(a)}[op]

def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start

begin = time.perf_counter()
print(f"first call {timed(lambda: call(getattr(hl, op))):.3f} s on the {hetlapack.explain(op, a).path} path")
ours, theirs = [], []
while hetlapack.explain(op, a).path != "batched":
    ours.append(timed(lambda: call(getattr(hl, op))))
    theirs.append(timed(lambda: call(getattr(sla, op))))
    time.sleep(0.5)
if ours:
    print(f"while compiling: {len(ours)} calls, {min(ours):.4f}-{max(ours):.4f} s (median {np.median(ours):.4f}); "
          f"SciPy's own {min(theirs):.4f}-{max(theirs):.4f} s (median {np.median(theirs):.4f})")
print(f"batched path from {time.perf_counter() - begin:.0f} s: that call {timed(lambda: call(getattr(hl, op))):.3f} s, "
      f"the next {timed(lambda: call(getattr(hl, op))):.4f} s")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("lu_factor", "cholesky", "qr"), default="lu_factor")
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--inline", action="store_true", help="compile in the call (the behaviour before stop 97)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hetlapack-first-call-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache,
               "HETLAPACK_BATCHED_COMPILE": "inline" if args.inline else "background"}
        subprocess.run([sys.executable, "-c", _CALLER, args.op, str(args.batch), str(args.n)], env=env, check=True)


if __name__ == "__main__":
    main()
