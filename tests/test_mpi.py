"""hetlapack.mpi under real MPI: launches ``mpiexec -n 1, 2, 3, 4`` on tests/mpi/check_factorizations.py.

Each launch runs every check on the grids named for that rank count (3 ranks: both 1x3 and 3x1, so pivoting and
reductions cross process rows on a non-square grid). A wall-clock timeout turns a deadlock into a failure; ranks
are oversubscribed on small machines (MPICH's hydra needs no flag for that, nor for running as root; waiting ranks
are told to yield the core). Each rank is pinned to one BLAS thread so that 4 ranks never run more threads than
the machine has cores to share.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hetlapack.mpi.grid import _near_square, find_mpiexec
from hetlapack.mpi.matrix import numroc, owned_indices
from hetlapack.testing import ONE_BLAS_THREAD, RANKS_YIELD

pytestmark = pytest.mark.own_machinery

SCRIPT = Path(__file__).parent / "mpi" / "check_factorizations.py"
LAUNCH_TIMEOUT_S = 150
GRIDS = {1: ["1x1"], 2: ["1x2", "2x1"], 3: ["1x3", "3x1"], 4: ["2x2"]}


def _mpiexec() -> str:
    pytest.importorskip("mpi4py")
    path = find_mpiexec()
    if path is None:
        pytest.skip("no mpiexec beside this Python or on PATH (pip install '.[mpi]')")
    return path


def _launch(ranks: int, args: list[str], timeout: float = LAUNCH_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n ranks python -m mpi4py args``; kill the whole process group on timeout."""
    command = [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", *args]
    env = {**os.environ, **ONE_BLAS_THREAD, **RANKS_YIELD, "PYTHONPATH": str(Path(__file__).parents[1])}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"mpiexec -n {ranks} timed out after {timeout} s (deadlock?)\n{output[-4000:]}")
    return subprocess.CompletedProcess(command, process.returncode, output, "")


@pytest.mark.mpi
@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 30)
@pytest.mark.parametrize("ranks", sorted(GRIDS))
def test_factorizations_under_mpiexec(ranks):
    result = _launch(ranks, [str(SCRIPT), *GRIDS[ranks]])
    summary = re.search(r"SUMMARY passed=(\d+) failed=(\d+)", result.stdout)
    assert result.returncode == 0 and summary, result.stdout[-6000:]
    assert int(summary.group(2)) == 0, result.stdout[-6000:]
    assert int(summary.group(1)) >= 10 * len(GRIDS[ranks])


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_demo_entry_point_runs_all_three_routines():
    result = _launch(2, ["-m", "hetlapack.mpi", "demo", "--n", "96", "--block", "16"], timeout=90)
    assert result.returncode == 0, result.stdout[-4000:]
    for routine in ("cholesky", "lu", "qr"):
        line = next(line for line in result.stdout.splitlines() if line.startswith(routine))
        residual = float(re.search(r"residual ([0-9.e+-]+)", line).group(1))
        assert residual < 50, line


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("command", "args", "status", "message"), [
    ("hetlapack.mpi", ["--grid", "3x3"], 2, "grid shape (3, 3) does not match the communicator's 2 ranks"),
    ("hetlapack.mpi", ["--json", "no-such-folder/results.json"], 1, "No such file or directory"),
    ("hetlapack.mpi", ["--n", "0"], 2, "argument --n: must be a positive integer, got '0'"),
    ("hetlapack.cli", ["--small", "4"], 2, "--small: not available under mpiexec"),
])
def test_demo_entry_point_reports_bad_arguments_in_one_line(command, args, status, message):
    result = _launch(2, ["-m", command, "demo", "--n", "16", *args], timeout=90)
    assert result.returncode == status, result.stdout[-4000:]
    assert "Traceback" not in result.stdout, result.stdout[-4000:]
    lines = [line for line in result.stdout.splitlines() if "error:" in line]
    assert len(lines) == 1 and message in lines[0], result.stdout[-4000:]
    assert result.stdout.count("usage:") <= 1, result.stdout[-4000:]


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_demo_help_prints_once_under_mpiexec():
    result = _launch(2, ["-m", "hetlapack.mpi", "demo", "--help"], timeout=90)
    assert result.returncode == 0 and result.stdout.count("usage:") == 1, result.stdout[-4000:]


@pytest.mark.parametrize(("environment", "first"), [
    ({}, True), ({"PMI_RANK": "0"}, True), ({"PMI_RANK": "1"}, False), ({"OMPI_COMM_WORLD_RANK": "2"}, False),
])
def test_launched_first_reads_the_launchers_rank(monkeypatch, environment, first):
    from hetlapack.mpi.grid import LAUNCHER_RANK_VARIABLES, launched_first

    for name in LAUNCHER_RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert launched_first() is first


def test_hetlapack_demo_under_mpiexec_forwards_n_and_repeat(monkeypatch):
    import hetlapack.mpi.__main__ as distributed_demo
    from hetlapack.cli import main

    forwarded = []
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setattr(distributed_demo, "main", forwarded.append)
    assert main(["demo", "--n", "60", "--repeat", "3"]) == 0
    assert forwarded == [["demo", "--n", "60", "--repeat", "3"]]


def test_hetlapack_demo_under_mpiexec_refuses_single_process_options(monkeypatch, capsys):
    import hetlapack.mpi.__main__ as distributed_demo
    from hetlapack.cli import main

    forwarded = []
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setattr(distributed_demo, "main", forwarded.append)
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--n", "60", "--repeat", "3", "--output", "somewhere", "--small", "4"])
    assert exit_info.value.code == 2 and not forwarded
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("hetlapack demo: error: --small, --output: not available under mpiexec"), lines


def test_import_hetlapack_mpi_does_not_import_mpi4py():
    code = "import sys, hetlapack, hetlapack.mpi; assert 'mpi4py' not in sys.modules, 'mpi4py imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60,
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


@pytest.mark.parametrize(("n", "nb", "nprocs", "src", "expected"), [
    (10, 3, 2, 0, [6, 4]),      # blocks 0, 2 on p0; 1 and the ragged 3 on p1
    (1, 4, 3, 0, [1, 0, 0]),
    (23, 5, 2, 1, [10, 13]),
    (16, 4, 4, 0, [4, 4, 4, 4]),
])
def test_numroc_matches_owned_indices_and_scalapack(n, nb, nprocs, src, expected):
    counts = [numroc(n, nb, p, src, nprocs) for p in range(nprocs)]
    assert counts == expected
    owned = [owned_indices(n, nb, p, src, nprocs) for p in range(nprocs)]
    assert [o.size for o in owned] == counts
    assert sorted(int(i) for o in owned for i in o) == list(range(n))


@pytest.mark.parametrize(("size", "shape"), [(1, (1, 1)), (2, (1, 2)), (3, (1, 3)), (4, (2, 2)), (6, (2, 3)),
                                             (12, (3, 4))])
def test_grid_is_as_square_as_possible(size, shape):
    assert _near_square(size) == shape
