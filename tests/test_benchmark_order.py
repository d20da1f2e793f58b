"""``benchmarks/conftest.py`` runs each case's peers one after another, so that a ratio compares times of one minute."""

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.own_machinery

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_peers_of_a_batched_case_run_one_after_another():
    listed = subprocess.run([sys.executable, "-m", "pytest", "benchmarks/test_batched.py", "--collect-only", "-q",
                             "-p", "no:cacheprovider", "-k", "test_batched[ and cholesky"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    cases = [line.split("[", 1)[1].rstrip("]").split("-") for line in listed if "::test_batched[" in line]
    assert len(cases) > 10
    cells = [(op, *rest) for op, _peer, *rest in cases]
    runs = [cell for i, cell in enumerate(cells) if i == 0 or cell != cells[i - 1]]
    assert len(runs) == len(set(runs))  # every cell's peers are adjacent
    assert [peer for _, peer, *_ in cases[:5]] == ["hetlapack", "numpy", "torch", "jax", "scipy"]
