"""BLAS threads while the runtime runs: ``cores // workers`` per kernel, so workers x threads <= cores."""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager

from ..devices.cpu import usable_cores


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """BLAS threads each of ``workers`` concurrent kernels may use without oversubscribing the cores."""
    cores = cores or usable_cores()
    return max(1, cores // max(workers, 1))


def blas_threads(workers: int) -> AbstractContextManager:
    """A context that caps every loaded BLAS at :func:`threads_per_worker` threads (restored on exit)."""
    import scipy.linalg  # noqa: F401 - loads SciPy's OpenBLAS so the controller sees it

    return _controller().limit(limits=threads_per_worker(workers), user_api="blas")


def share_cores(processes: int) -> int:
    """Cap this process's BLAS, for the rest of its life, at its share of the cores when ``processes`` processes
    share them (MPI ranks on one node); returns the threads it keeps. threadpoolctl's limiter applies on creation."""
    blas_threads(processes)
    return threads_per_worker(processes)
