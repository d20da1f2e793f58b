"""Work shared between the calling thread and helper threads, one for each other usable core: the host's copies that
wait on the caches' latency, not on their bandwidth (``arrays.fortran_copy``), run on every core.

The helpers are one pool that lives as long as the process, idle between calls, as numba's and OpenBLAS's pools do
(a pool made for each copy cost 0.3-0.5 ms, the whole copy's time at order 1000), made again in a forked child.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable

from ..forking import fork_safe_lock, reset_after_fork
from ..machine import usable_cores

#: The name of the helpers' threads (and its prefix): not a runtime's ``hetlapack-<device>-<n>``, whose threads
#: start and stop with each tile algorithm.
HELPER_THREADS = "fortran-copy"

_helpers: concurrent.futures.ThreadPoolExecutor | None = None
_helpers_lock = fork_safe_lock()


@reset_after_fork
def _forget_helpers() -> None:
    """A forked child has none of its parent's threads: it makes its own helpers when it needs them."""
    global _helpers
    _helpers = None


def helpers() -> concurrent.futures.ThreadPoolExecutor:
    """The helper threads, one for each other usable core, made on first use."""
    global _helpers
    with _helpers_lock:
        if _helpers is None:
            _helpers = concurrent.futures.ThreadPoolExecutor(max(usable_cores() - 1, 1), HELPER_THREADS)
        return _helpers


def share_out(count: int, work: Callable[[int], None], shares: int) -> None:
    """``work(k)`` for each ``k < count`` on ``shares`` threads (the caller and helpers), each taking the next ``k``
    not yet taken. The caller does whatever no helper took and never waits for a helper that has not started (a core
    the hypervisor idled can take tens of milliseconds to wake), only for the piece a helper is doing. Where a piece
    raises (an interrupt on the caller included), no piece starts after it, every helper is done when this returns,
    and the caller's error, else the first helper's, reaches the caller."""
    taken = itertools.count()  # each next() is one step of the interpreter: no two threads take the same piece
    stopped = []

    def take() -> None:
        for k in taken:
            if k >= count or stopped:
                return
            try:
                work(k)
            except BaseException:
                stopped.append(k)  # a helper's error: the others take no piece after it
                raise

    started = [helpers().submit(take) for _ in range(min(shares, count) - 1)]
    try:
        take()
    finally:
        stopped.append(count)  # whatever ended the caller's share, nothing is left for the helpers to start
        running = [helper for helper in started if not helper.cancel()]
        concurrent.futures.wait(running)
    for helper in running:
        helper.result()
