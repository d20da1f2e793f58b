"""Every example in examples/ runs, with a small size, and passes its own check."""

import pathlib
import subprocess
import sys

import pytest

from hetlapack.mpi.grid import find_mpiexec

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
SMALL_ARGS = {
    "gaussian_process.py": ["400"],
    "least_squares.py": ["1000"],
    "many_small_solves.py": ["2000"],
    "what_if_4gpu.py": ["8000"],
}


@pytest.mark.parametrize("name", sorted(SMALL_ARGS))
def test_example_runs(name, tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *SMALL_ARGS[name]], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.timeout(180)
def test_mpi_example_runs_on_four_ranks():
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec beside this Python or on PATH (pip install '.[mpi]')")
    proc = subprocess.run([mpiexec, "-n", "4", sys.executable, str(EXAMPLES / "mpi_cholesky.py"), "300"],
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0 and "2x2 grid" in proc.stdout, proc.stdout + proc.stderr


def test_every_example_is_exercised():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(SMALL_ARGS) | {"mpi_cholesky.py"}
