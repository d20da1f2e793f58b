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
