"""``hetlapack compile`` (``hetlapack.batched.precompile``): the kernels numba's cache lacks, compiled ahead of use
in processes of their own."""

import subprocess
import sys
import time

import numpy as np
import pytest

from hetlapack.batched import compiling, precompile
from hetlapack.cli import main
from hetlapack.perf.model import SOLVES


def test_a_compiled_kernel_is_seen_in_the_cache():
    compiling.compiled("plu", np.dtype(np.float64))
    assert precompile.cached("plu", np.dtype(np.float64))
    assert "plu" not in precompile.missing() or "d" not in precompile.missing()["plu"]


@pytest.mark.parametrize("workers", [2, 1])
def test_missing_kernels_are_compiled_in_worker_processes_or_in_this_one(monkeypatch, workers):
    """Two workers are processes of their own; one is this process (the background compilation's way)."""
    monkeypatch.setattr(precompile, "missing", lambda only=None: {"plu": ["d", "f"]})
    if workers == 1:
        monkeypatch.setattr(precompile.concurrent.futures, "ProcessPoolExecutor", None)
    seconds = precompile.precompile(workers=workers, progress=False)
    assert list(seconds) == ["plu"] and seconds["plu"] > 0
    assert precompile.cached("plu", np.dtype(np.float32))


def test_nothing_to_compile_says_so(monkeypatch, capsys):
    monkeypatch.setattr(precompile, "missing", lambda only=None: {})
    assert main(["compile"]) == 0
    assert "already in numba's cache" in capsys.readouterr().out


def test_every_kernel_is_handed_out(monkeypatch):
    monkeypatch.setattr(precompile, "cached", lambda op, dtype: False)
    todo = precompile.missing()
    assert set(todo) == set(compiling.KERNELS) and list(todo)[:3] == ["getrf", "getrf_replay", "potrf"]
    solves = [kernel for kernel, op in compiling.OWN_ARITHMETIC.items() if op in SOLVES]  # in every precision
    assert sorted(solves) == ["getrs", "potrs", "solve_each"]
    assert all(todo[op] == (["f", "d", "F", "D"] if op in solves else ["d", "D"]) for op in compiling.OWN_ARITHMETIC)
    assert all(chars == ["f", "d", "F", "D"] for op, chars in todo.items()
               if op not in compiling.OWN_ARITHMETIC and not op.endswith("_replay"))
    assert todo["getrf_replay"] == todo["potrf_replay"] == todo["qr_replay"] == ["f"]  # replays of float32 LAPACK


def test_one_process_compiles_at_a_time():
    """A second process waits for the lock the first holds while it compiles (the lock file lies in numba's cache of
    the kernels, one per Python)."""
    compiling.compiled("plu", np.dtype(np.float64))
    assert any(precompile._lock_path().parent.glob("*plu_stack-*.nbi"))  # numba's index of a kernel
    waiter = "from hetlapack.batched.precompile import machine_lock\nwith machine_lock(): print('got it')"
    with precompile.machine_lock():
        second = subprocess.Popen([sys.executable, "-c", waiter], stdout=subprocess.PIPE, text=True)
        with pytest.raises(subprocess.TimeoutExpired):
            second.wait(timeout=2)
    assert second.communicate(timeout=120)[0].strip() == "got it"


def test_a_lock_file_that_cannot_be_opened_leaves_compilation_unserialized(tmp_path, monkeypatch):
    (tmp_path / "a file").write_text("")
    monkeypatch.setattr(precompile, "_lock_path", lambda: tmp_path / "a file" / "compiling.lock")
    with precompile.machine_lock():
        pass


_ORPHANED = """
import os, time
from hetlapack.batched.precompile import worker_pool
if __name__ == "__main__":
    with worker_pool(1) as pool:  # the pool hetlapack compile compiles in
        print(pool.submit(os.getpid).result(), flush=True)
        pool.submit(time.sleep, 300)
        time.sleep(300)
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie waits only to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_compiling_workers_end_when_their_parent_is_killed(tmp_path):
    """``hetlapack compile`` killed by its process id (not Ctrl-C, which reaches the whole group) leaves no worker
    compiling on."""
    script = tmp_path / "orphaned.py"
    script.write_text(_ORPHANED)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL)  # its resource tracker's warning of the semaphores left
    try:
        worker = int(parent.stdout.readline())
        assert _running(worker)
    finally:
        parent.kill()
        parent.wait(timeout=60)
    for _ in range(200):
        if not _running(worker):
            break
        time.sleep(0.05)
    assert not _running(worker)
