"""Work shared between the caller and the helper threads (``hetlapack.contract.shared_work``): every piece done once,
no wait for a helper that has not started, one pool for the process and a fresh one in a forked child, and an
error that stops the rest."""

import concurrent.futures
import os
import threading
import time
import warnings

import pytest

from hetlapack.contract import shared_work


class _IdleHelpers:
    """Helpers that never start the work given them, as a core the hypervisor idled for a while."""

    def __init__(self) -> None:
        self.given = []

    def submit(self, work, *args):
        self.given.append(concurrent.futures.Future())
        return self.given[-1]


def _pieces_done(count: int, shares: int) -> list[int]:
    done = []
    shared_work.share_out(count, done.append, shares)  # list.append is one step of the interpreter
    return sorted(done)


@pytest.mark.parametrize("shares", [1, 2, 5])
@pytest.mark.parametrize("count", [0, 1, 3, 40])
def test_every_piece_is_done_once(count, shares):
    assert _pieces_done(count, shares) == list(range(count))


def test_the_caller_never_waits_for_a_helper_that_has_not_started(monkeypatch):
    """The caller does every piece no helper took and cancels the helpers that have not started."""
    idle = _IdleHelpers()
    monkeypatch.setattr(shared_work, "helpers", lambda: idle)
    assert _pieces_done(20, 4) == list(range(20))
    assert len(idle.given) == 3 and all(helper.cancelled() for helper in idle.given)


def test_the_helpers_are_one_pool_for_the_process():
    """However many calls, the helpers are the same threads, none of them named as a runtime's workers are."""
    _pieces_done(40, 2)
    pool = {t for t in threading.enumerate() if t.name.startswith(shared_work.HELPER_THREADS)}
    for _ in range(5):
        assert _pieces_done(40, 2) == list(range(40))
    assert {t for t in threading.enumerate() if t.name.startswith(shared_work.HELPER_THREADS)} == pool
    assert not any(t.name.startswith("hetlapack-") for t in pool)


@pytest.mark.parametrize("failing_on", ["caller", "helper"])
def test_an_error_in_one_piece_stops_the_rest_and_reaches_the_caller(failing_on):
    """No piece starts after the one that raised, no helper is still working when the call returns, and the error
    is the caller's."""
    caller = threading.get_ident()
    done, release = [], threading.Event()

    def work(k):
        if (threading.get_ident() == caller) == (failing_on == "caller"):
            release.set()
            raise ValueError(f"piece {k}")
        release.wait(5)  # the other thread's pieces start once the failure has happened
        release.set()
        done.append(k)
        time.sleep(0.001)

    with pytest.raises(ValueError, match="piece"):
        shared_work.share_out(200, work, 2)
    finished = len(done)
    time.sleep(0.05)
    assert len(done) == finished < 200


def test_a_forked_child_works_with_helpers_of_its_own():
    """A child forked after the helpers started has none of their threads: it makes its own, and its work finishes
    (the parent's pool, inherited, would take the work and never run it)."""
    assert _pieces_done(40, 2) == list(range(40))
    assert shared_work._helpers is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12 warns of forking a threaded process
        pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = shared_work._helpers is None and _pieces_done(40, 2) == list(range(40))
        finally:
            os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0
