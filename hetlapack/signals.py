"""Asynchronous signals held back across a few critical steps, so that Ctrl-C cannot split them."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

#: Signals a process gets from outside or from a timer, whose Python handlers (Ctrl-C's KeyboardInterrupt) run
#: between any two bytecodes of the main thread.
ASYNCHRONOUS_SIGNALS = frozenset(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM",
                                                                    "SIGVTALRM", "SIGPROF", "SIGUSR1", "SIGUSR2")
                                 if hasattr(signal, name))


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold back asynchronous signals in this thread (where the system can); one that arrives meanwhile is handled
    as soon as the block ends. Used where an interrupt between two steps would leave state behind: a BLAS thread
    cap set but not yet recorded for undoing (1 in about 20 runs of 240 interrupted hybrid calls), a worker thread
    registered with ``threading`` but never started (CPython takes it back for an ``Exception`` only). Threads
    started inside inherit the mask, so such signals go to the main thread, where Python handles them anyway."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, ASYNCHRONOUS_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
