"""Every example in examples/ runs, with a small size, and passes its own check."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
SMALL_ARGS = {
    "gaussian_process.py": ["400"],
    "least_squares.py": ["1000"],
    "many_small_solves.py": ["2000"],
}


@pytest.mark.parametrize("name", sorted(SMALL_ARGS))
def test_example_runs(name):
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *SMALL_ARGS[name]], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_example_is_exercised():
    assert {p.name for p in EXAMPLES.glob("*.py")} <= set(SMALL_ARGS) | {"mpi_cholesky.py"}
