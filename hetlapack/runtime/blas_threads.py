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
from collections.abc import Iterator

from ..devices.cpu import usable_cores
from ..forking import fork_safe_lock, reset_after_fork

_lock = fork_safe_lock()
#: Caps asked for by the runtimes running now, and the limiter holding the limits from before the first of them.
_caps: dict[object, int] = {}
_earlier = None


@functools.cache
def _controller():
    import scipy.linalg  # noqa: F401, PLC0415 - loads SciPy's OpenBLAS so the controller sees it
    from threadpoolctl import ThreadpoolController  # noqa: PLC0415

    return ThreadpoolController()


@contextlib.contextmanager
def _in_control() -> Iterator[None]:
    """Set or restore BLAS limits inside, then give threadpoolctl's control of OpenBLAS back (threadpoolctl < 3.8
    has no such control). A ``threadpool_limits`` block of this thread around the call takes it again as it ends."""
    from threadpoolctl import OpenBLASController  # noqa: PLC0415

    try:
        yield
    finally:
        if hasattr(OpenBLASController, "clear_controlling_thread"):
            OpenBLASController.clear_controlling_thread()


def _limit(threads: int):
    """Cap every loaded BLAS at ``threads`` now; the returned limiter can restore what it replaced
    (:func:`_restore`)."""
    with _in_control():
        return _controller().limit(limits=threads, user_api="blas")


def _restore(limiter) -> None:
    with _in_control():
        limiter.restore_original_limits()


@reset_after_fork
def _forget_runtimes_in_child() -> None:
    """After fork: the child runs none of the parent's runtimes, so it drops their caps and gets the limits from
    before them back."""
    global _earlier
    _caps.clear()
    if _earlier is not None:
        _restore(_earlier)
        _earlier = None


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """BLAS threads each of ``workers`` concurrent kernels may use without oversubscribing the cores."""
    cores = cores or usable_cores()
    return max(1, cores // max(workers, 1))


@contextlib.contextmanager
def blas_threads(workers: int) -> Iterator[int]:
    """A context that caps every loaded BLAS at :func:`threads_per_worker` threads (or lower, while another
    runtime asks for less), restoring the earlier limits when the last such context exits. The cap is asked for
    and given back in one ``try/finally``, so an interrupt while it is set leaves no cap behind."""
    global _earlier
    cap, token = threads_per_worker(workers), object()
    try:
        with _lock:
            _caps[token] = cap
            if len(_caps) > 1:
                _limit(min(_caps.values()))
            else:
                _earlier = _limit(cap)
        yield cap
    finally:
        with _lock:
            if _caps.pop(token, None) is not None:
                if _caps:
                    _limit(min(_caps.values()))
                elif _earlier is not None:
                    _restore(_earlier)
                    _earlier = None


def one_thread_per_call() -> contextlib.AbstractContextManager[int]:
    """:func:`blas_threads` at one thread per BLAS call, for callers that spread their own threads over the cores
    (the batched LAPACK loops): a BLAS call that threads inside one of theirs waits on spinning threads for
    milliseconds on a busy machine."""
    return blas_threads(usable_cores())


@contextlib.contextmanager
def all_cores() -> Iterator[int]:
    """BLAS on every usable core for a short measurement, whatever runtimes run now (none starts or stops
    meanwhile); their shared cap, or the earlier limits, come back after."""
    cores = usable_cores()
    with _lock:
        limiter = _limit(cores)
        try:
            yield cores
        finally:
            if _caps:
                _limit(min(_caps.values()))
            else:
                _restore(limiter)


def share_cores(processes: int) -> int:
    """Cap this process's BLAS, for the rest of its life, at its share of the cores when ``processes`` processes
    share them (MPI ranks on one node); a lower limit already set (``OPENBLAS_NUM_THREADS=1``) stays. Returns the
    threads it keeps."""
    current = [library["num_threads"] for library in _controller().select(user_api="blas").info()]
    threads = min([threads_per_worker(processes), *current])
    _limit(threads)
    return threads
