"""Batched kernels missing from numba's cache compile in a background process while SciPy's own function answers
(``hetlapack.batched.background``): no call waits minutes for numba."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.linalg as sla

import hetlapack
import hetlapack.linalg as hl
from hetlapack.batched import background, compiling, precompile
from hetlapack.dispatch.paths.batched import BATCHED_OPS
from hetlapack.testing import spd

pytestmark = pytest.mark.own_machinery


class FakeProcess:
    """A background compilation that ends when told to."""

    def __init__(self, pairs):
        self.pairs = list(pairs)
        self.returncode = None

    def poll(self):
        return self.returncode


@pytest.fixture
def cold_cache(monkeypatch):
    """Background mode, a cache that holds no kernel until ``state["cached"]``, and the processes started."""
    state = {"cached": False, "started": []}

    def spawn(pairs):
        state["started"].append(FakeProcess(pairs))
        return state["started"][-1]

    monkeypatch.setenv(background.MODE_VARIABLE, "background")
    monkeypatch.setattr(precompile, "cached", lambda kernel, dtype: state["cached"])
    monkeypatch.setattr(background, "_spawn", spawn)
    monkeypatch.setattr(background, "_ready", set())
    monkeypatch.setattr(background, "_running", {})
    monkeypatch.setattr(background, "_tried", set())
    yield state


def test_every_kernel_belongs_to_the_operations_that_run_it():
    assert {kernel for kernels in background.KERNELS_OF.values() for kernel in kernels} == set(compiling.KERNELS)
    assert set(background.KERNELS_OF) == {(op, kind) for op in BATCHED_OPS for kind in ("interleaved", "lapack")}
    assert background.kernels_of("getrf", "lapack", np.dtype(np.float32)) == ("getrf_each", "getrf_replay", "plu")
    assert background.kernels_of("getrf", "lapack", np.dtype(np.float64)) == ("getrf_each", "plu")


def test_a_missing_kernel_compiles_in_the_background_while_scipy_answers(cold_cache):
    stack = spd(4, batch=(64,))
    plan = hetlapack.explain("cholesky", stack)
    assert plan.path == "host" and "compiling in a background process" in plan.unavailable["batched"]
    assert [process.pairs for process in cold_cache["started"]] == [[("potrf", "d"), ("potrf_each", "d")]]
    np.testing.assert_array_equal(hl.cholesky(stack), sla.cholesky(stack))
    assert len(cold_cache["started"]) == 1  # the same kernels are not compiled twice

    cold_cache["cached"] = True
    assert hetlapack.explain("cholesky", stack).path == "host"  # the plan stands while the compilation runs
    cold_cache["started"][0].returncode = 0
    assert hetlapack.explain("cholesky", stack).path == "batched"  # and is made again once it ends
    assert not background._running


def test_a_compilation_that_left_no_kernels_is_not_tried_again(cold_cache):
    stack = spd(4, batch=(64,))
    assert hetlapack.explain("cholesky", stack).path == "host"
    cold_cache["started"][0].returncode = 1
    assert hetlapack.explain("cholesky", stack).path == "batched"  # the call compiles them itself
    assert len(cold_cache["started"]) == 1


@pytest.mark.parametrize("how", ["forced path", "inline mode"])
def test_a_forced_batched_path_and_inline_mode_compile_in_the_call(cold_cache, monkeypatch, how):
    stack = spd(4, batch=(64,))
    if how == "inline mode":
        monkeypatch.setenv(background.MODE_VARIABLE, "inline")
        assert hetlapack.explain("cholesky", stack).path == "batched"
    else:
        with hetlapack.using(path="batched"):
            assert hetlapack.explain("cholesky", stack).path == "batched"
    assert not cold_cache["started"]


def test_an_unknown_mode_is_refused(cold_cache, monkeypatch):
    monkeypatch.setenv(background.MODE_VARIABLE, "later")
    with pytest.raises(ValueError, match="HETLAPACK_BATCHED_COMPILE must be one of background, inline"):
        hetlapack.explain("cholesky", spd(4, batch=(64,)))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_owns_no_compiling_process(cold_cache):
    hetlapack.explain("cholesky", spd(4, batch=(64,)))
    assert background._running
    pid = os.fork()
    if pid == 0:  # what the parent's process compiles, the child would start again rather than compile in a call
        os._exit(0 if not background._running and not background._tried else 1)
    assert os.waitpid(pid, 0)[1] == 0 and background._running and background._tried


def test_a_cold_cache_answers_at_once_and_compiles_for_later_calls(tmp_path):
    """The whole way, in a process with an empty numba cache: the first call runs SciPy's function while another
    process compiles LAPACK's pivoted QR loop (the kernel quickest to compile), and a later call runs it."""
    script = textwrap.dedent("""
        import time
        import numpy as np, scipy.linalg as sla
        import hetlapack, hetlapack.linalg as hl
        from hetlapack.batched import background
        a = np.random.default_rng(0).standard_normal((50, 5, 5))
        first = hetlapack.explain("qr", a, pivoting=True)
        assert first.path == "host" and "background" in first.unavailable["batched"], first
        for ours, theirs in zip(hl.qr(a, pivoting=True), sla.qr(a, pivoting=True)):
            np.testing.assert_array_equal(ours, theirs)
        deadline = time.monotonic() + 900
        while hetlapack.explain("qr", a, pivoting=True).path != "batched":
            assert time.monotonic() < deadline, "the background compilation did not end"
            time.sleep(0.2)
        q, r, p = hl.qr(a, pivoting=True)
        np.testing.assert_allclose(q @ r, np.take_along_axis(a, p[:, None, :], axis=2), atol=1e-12)
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), background.MODE_VARIABLE: "background",
           "HETLAPACK_CACHE_DIR": str(tmp_path / "hetlapack")}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=1200)
