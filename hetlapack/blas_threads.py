"""BLAS threads while the runtime runs: ``cores // workers`` per kernel, so workers x threads <= cores.

Runtimes may overlap (threads of one process each factoring a matrix), and BLAS's thread count is one setting
for the whole process, so the caps are shared: while any runtime runs, BLAS gets the smallest cap a running one
asked for, and the limits from before the first come back when the last one stops.

threadpoolctl (from 3.8) lets one thread at a time set OpenBLAS's process-wide limit: the first to set it, until it
gives control back. Caps here are set and lifted from whichever thread starts or stops a runtime, so each change
gives control back after it. While a user's ``threadpool_limits`` block holds control in another thread, the
user's limit stands and the caps are not applied; each restores the limit it found, so where the two overlap, BLAS
can be left at the other's limit.
A process forked while a runtime ran (in another thread) starts with no cap and the earlier limits.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator

from .machine import usable_cores
from .forking import fork_safe_lock, reset_after_fork
from .signals import signals_held

_lock = fork_safe_lock()

# A fork waits while a thread changes BLAS's limits or measures with every core (:func:`all_cores`): OpenBLAS's own
# fork handler shuts its thread pool down, and a pool computing a product for another thread at that moment never
# finishes it (the fork, or its child, hung: tests/test_faults.py). The child gets the lock back unlocked.
os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release)
#: Caps asked for by the contexts running now, and each BLAS's limit from before the first of them.
_caps: dict[object, int] = {}
_earlier: list[int] = []


@functools.cache
def _controller():
    import scipy.linalg  # noqa: F401, PLC0415 - loads SciPy's OpenBLAS so the controller sees it
    from threadpoolctl import ThreadpoolController  # noqa: PLC0415

    return ThreadpoolController()


@functools.cache
def _give_control_back() -> Callable[[], None]:
    """threadpoolctl's way to give its control of OpenBLAS back (threadpoolctl < 3.8 has no such control)."""
    from threadpoolctl import OpenBLASController  # noqa: PLC0415

    return getattr(OpenBLASController, "clear_controlling_thread", lambda: None)


@contextlib.contextmanager
def _in_control() -> Iterator[None]:
    """Set or restore BLAS limits inside, then give threadpoolctl's control of OpenBLAS back. A
    ``threadpool_limits`` block of this thread around the call takes it again as it ends."""
    try:
        yield
    finally:
        _give_control_back()()


@functools.cache
def _blas() -> tuple:
    """threadpoolctl's controller of each loaded BLAS (the libraries SciPy and NumPy load, which stay loaded)."""
    return tuple(_controller().select(user_api="blas").lib_controllers)


def _limits_now() -> list[int]:
    """Each loaded BLAS's thread limit now, in :func:`_blas`'s order."""
    return [library.num_threads for library in _blas()]


def _limit(threads: int | list[int]) -> None:
    """Set every loaded BLAS to ``threads``, or each to its own (a list from :func:`_limits_now`)."""
    libraries = _blas()
    limits = threads if isinstance(threads, list) else [threads] * len(libraries)
    with _in_control():
        for library, limit in zip(libraries, limits, strict=True):
            library.set_num_threads(limit)


@reset_after_fork
def _forget_runtimes_in_child() -> None:
    """After fork: the child runs none of the parent's runtimes, so it drops their caps and gets the limits from
    before them back."""
    if _caps:
        _caps.clear()
        _limit(_earlier)


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """BLAS threads each of ``workers`` concurrent kernels may use without oversubscribing the cores."""
    cores = cores or usable_cores()
    return max(1, cores // max(workers, 1))


@contextlib.contextmanager
def blas_threads(workers: int) -> Iterator[int]:
    """A context that caps every loaded BLAS at :func:`threads_per_worker` threads (or lower: while another
    runtime asks for less, or where a lower limit was set before, as ``OPENBLAS_NUM_THREADS=1``), restoring the
    earlier limits when the last such context exits.

    Each change of the limits is made with asynchronous signals held back, inside the ``try`` whose ``finally``
    undoes it: a Ctrl-C that lands while a cap is set, half set (threadpoolctl sets one library after another),
    or lifted, leaves no cap behind."""
    global _earlier
    token = object()
    try:
        with signals_held(), _lock:
            if not _caps:
                _earlier = _limits_now()
            _caps[token] = min(threads_per_worker(workers), *_earlier)
            _limit(min(_caps.values()))
        yield _caps[token]
    finally:
        with signals_held(), _lock:
            if _caps.pop(token, None) is not None:
                _limit(min(_caps.values()) if _caps else _earlier)


def one_thread_per_call() -> contextlib.AbstractContextManager[int]:
    """:func:`blas_threads` at one thread per BLAS call, for callers that spread their own threads over the cores
    (the batched LAPACK loops): a BLAS call that threads inside one of theirs waits on spinning threads for
    milliseconds on a busy machine."""
    return blas_threads(usable_cores())


@contextlib.contextmanager
def all_cores() -> Iterator[int]:
    """BLAS on every usable core for a short measurement, whatever runtimes run now (none starts or stops
    meanwhile); the limits found (a running runtime's cap, or the earlier limits) come back after, an interrupt or
    not (as in :func:`blas_threads`)."""
    cores = usable_cores()
    with _lock:
        earlier = _limits_now()
        try:
            with signals_held():
                _limit(cores)
            yield cores
        finally:
            with signals_held():
                _limit(earlier)


def share_cores(processes: int) -> int:
    """Cap this process's BLAS, for the rest of its life, at its share of the cores when ``processes`` processes
    share them (MPI ranks on one node); a lower limit already set (``OPENBLAS_NUM_THREADS=1``) stays. Returns the
    threads it keeps."""
    threads = min([threads_per_worker(processes), *_limits_now()])
    _limit(threads)
    return threads
