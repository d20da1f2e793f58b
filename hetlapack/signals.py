"""Python signal handlers deferred across a few critical steps, so that Ctrl-C cannot split them."""

from __future__ import annotations

import _signal  # signal's own functions: its wrappers convert every handler to an enum, 14 us of a block's 18
import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

#: Signals a process gets from outside or from a timer, whose Python handlers (Ctrl-C's KeyboardInterrupt) run
#: between any two bytecodes of the main thread. (Asking every valid signal for its handler cost 0.2 ms a block.)
ASYNCHRONOUS_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM", "SIGVTALRM",
                                                                "SIGPROF", "SIGUSR1", "SIGUSR2", "SIGBREAK")
                             if hasattr(signal, name))

#: Blocks of :func:`signals_held` the main thread is inside now (only the outermost defers).
_depth = 0


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Run the Python handlers of :data:`ASYNCHRONOUS_SIGNALS` (Ctrl-C's KeyboardInterrupt, a timer's) whose
    signals arrive inside the block only after it, each once, as they were set. Used where an interrupt between
    two steps would leave state behind: a BLAS thread cap set but not recorded for undoing, or set for one library
    of two; a worker thread registered with ``threading`` but never started; an import half done.

    Python runs signal handlers in the main thread only, so elsewhere there is nothing to defer. Blocking the
    signals (``pthread_sigmask``) does not do: the kernel then hands a process-wide signal to another thread
    (OpenBLAS's, numba's) and Python still runs its handler in the main thread (1 in 3 runs of 240 interrupted
    hybrid calls left a BLAS half capped)."""
    global _depth
    if _depth or threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {number: handler for number in ASYNCHRONOUS_SIGNALS if callable(handler := _signal.getsignal(number))}
    arrived: dict[int, FrameType | None] = {}
    deferring = True

    def defer(number: int, frame: FrameType | None) -> None:
        if deferring:
            arrived.setdefault(number, frame)
        else:  # left in place by an interrupt while the handlers were put back: behaves as the handler it replaced
            handlers[number](number, frame)

    try:
        _depth += 1
        for number in handlers:
            _signal.signal(number, defer)
        yield
    finally:
        deferring = False
        _depth -= 1
        for number, handler in handlers.items():
            _signal.signal(number, handler)
        for number, frame in arrived.items():
            handlers[number](number, frame)
