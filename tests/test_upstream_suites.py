"""SciPy's and NumPy's own tests for the replaced functions, run against the installed shim.

Each suite runs twice, in two subprocesses side by side, from directories outside the source tree: plain, and with
the shim plugin (``-p hetlapack.testing.pytest_shim``, which patches before any test module is imported, counts the
calls and fails the run if a global or parametrize value still points at an original). Both must pass with the
same counts.
"""

import os
import re
import subprocess
import sys

import pytest

from hetlapack.testing import ONE_BLAS_THREAD

SUITES = [
    "scipy.linalg.tests.test_decomp_cholesky",
    "scipy.linalg.tests.test_decomp_lu",
    "scipy.linalg.tests.test_decomp",
    "scipy.linalg.tests.test_batch",
    "numpy.linalg.tests.test_linalg",
]
FLAGS = ["-q", "-p", "no:cacheprovider", "-W", "error", "-W", "ignore::pytest.PytestUnknownMarkWarning",
         "-o", "addopts=", "--pyargs"]


#: The two runs go side by side, one BLAS thread each, so that together they hold no more threads than 2 cores.
def _start(tmp_path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", *extra, *FLAGS, *SUITES], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **ONE_BLAS_THREAD})


def _finish(proc: subprocess.Popen) -> tuple[dict[str, int], str]:
    stdout, stderr = proc.communicate(timeout=900)
    summary = stdout.strip().splitlines()[-1] if stdout.strip() else stderr[-2000:]
    counts = {kind: int(num) for num, kind in re.findall(r"(\d+) (passed|failed|skipped|xfailed|errors?)", summary)}
    assert proc.returncode == 0, stdout[-6000:] + stderr[-2000:]
    return counts, stdout


@pytest.mark.slow
def test_scipy_and_numpy_suites_pass_through_the_shim(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "shimmed").mkdir()
    runs = _start(tmp_path / "plain"), _start(tmp_path / "shimmed", "-p", "hetlapack.testing.pytest_shim")
    try:
        (plain, _), (shimmed, output) = (_finish(proc) for proc in runs)
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
    assert shimmed == plain and plain.get("passed", 0) > 1000
    assert "every global and parameter points at hetlapack; the suite called the shim" in output
    calls = dict(re.findall(r"^((?:scipy|numpy)\.linalg\.\w+): (\d+) calls$", output, re.M))
    assert len(calls) == 9 and all(int(n) > 0 for n in calls.values()), calls
    print("\n".join(f"{k}: {v}" for k, v in calls.items()), f"\nplain {plain}\nshimmed {shimmed}")


def test_one_functions_suite_passes_through_the_shim(tmp_path):
    """A suite that tests one function calls only that one: the others' zero counts are reported, not failures."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "hetlapack.testing.pytest_shim", *FLAGS,
                           "scipy.linalg.tests.test_decomp_cholesky"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "scipy.linalg.lu: 0 calls" in proc.stdout and "PROBLEM" not in proc.stdout
    assert int(re.search(r"^scipy\.linalg\.cholesky: (\d+) calls$", proc.stdout, re.M).group(1)) > 0
