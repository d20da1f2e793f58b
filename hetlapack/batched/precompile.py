"""Compile the batched kernels into numba's disk cache ahead of their first use, on every core at once.

A kernel compiles on its first use in each dtype (in a background process of its own, :mod:`.background`, unless
the call is to compile it): 5-120 s each, one after another, since numba compiles one function at a time in a
process; about 12 minutes of one core for all of them on a 2-core AMD EPYC. ``hetlapack compile`` (and the test
session, ``tests/conftest.py``) compiles the ones the cache lacks in one process per core, each kernel in one process
(its cache index is then written by one process only), and the parallel loops that run them (:mod:`._launch`, one
function and so one index for all) in this process meanwhile; later calls load them from the cache.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numba
import numpy as np

from ..machine import usable_cores
from . import _cache, _launch, compiling

try:
    import fcntl
except ImportError:  # not POSIX: compilations are not serialized
    fcntl = None

#: Kernels in the order they are handed out: the longest compilations first, so that no core is left with one at
#: the end (seconds for all their dtypes, measured cold on a 2-core AMD EPYC Zen 4, two at a time beside the parallel
#: loops: getrf 236, the LU replay 150, potrf 113, qr 92, the Cholesky replay 59, the QR replay 34, getrs 33,
#: solve_each 27, potrs 26, qr_each 16, the others 7-9; 849 s in all).
_LONGEST_FIRST = ("getrf", "getrf_replay", "potrf", "qr", "potrf_replay", "qr_replay", "getrs", "solve_each",
                  "potrs", "qr_each", "getrs_each", "potrs_each")


def _in_cache(function, options: dict, signature) -> bool:
    """Whether numba's disk cache holds ``function`` compiled with ``options`` under ``signature`` (for this
    source, Python and CPU); ``False`` where numba's cache cannot be read this way."""
    try:
        index = numba.njit(cache=True, **options)(function)._cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - numba's cache layout is not public: compile where it cannot be read
        return False
    return any(key[0] == signature for key in index)


def _kernel_cached(op: str, dtype: np.dtype) -> bool:
    """Whether numba's disk cache holds ``op``'s kernel for ``dtype``."""
    dispatcher = compiling.KERNELS[op][0]
    options = {name: value for name, value in dispatcher.targetoptions.items() if name != "nopython"}
    return _in_cache(dispatcher.py_func, options, compiling.signature(op, dtype))


def _launcher_cached(op: str, dtype: np.dtype) -> bool:
    """Whether numba's disk cache holds the parallel loop that runs ``op``'s kernel for ``dtype``."""
    return _in_cache(_launch.shares, _launch.JIT_OPTIONS, _launch.signature(compiling.argument_types(op, dtype)))


def cached(op: str, dtype: np.dtype) -> bool:
    """Whether numba's disk cache holds ``op``'s kernel for ``dtype`` and the parallel loop that runs it."""
    return _kernel_cached(op, dtype) and _launcher_cached(op, dtype)


def missing(only: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """The dtypes (by character) whose kernel the cache lacks, per kernel (of ``only``'s kernels and dtypes, where
    given), longest compilations first."""
    ops = sorted(compiling.KERNELS if only is None else only, key=lambda op: (_LONGEST_FIRST + (op,)).index(op))
    wanted = {op: [dtype.char for dtype in compiling.kernel_dtypes(op)
                   if (only is None or dtype.char in only[op]) and not cached(op, dtype)] for op in ops}
    return {op: chars for op, chars in wanted.items() if chars}


def _compile(op: str, chars: list[str]) -> float:
    """Compile ``op``'s kernel for each dtype character into the cache; the seconds it took."""
    start = time.perf_counter()
    for char in chars:
        compiling.kernel(op, np.dtype(char))
    return time.perf_counter() - start


def _compile_launchers(todo: dict[str, list[str]], seconds: dict[str, float]) -> None:
    """Compile the parallel loops ``todo``'s kernels lack, in this process (all share one cache index, which two
    processes writing at once could corrupt), adding the seconds to each kernel's."""
    for op, chars in todo.items():
        start = time.perf_counter()
        for char in chars:
            if not _launcher_cached(op, np.dtype(char)):
                compiling.launcher(op, np.dtype(char))
        seconds[op] = seconds.get(op, 0.0) + time.perf_counter() - start


def _lock_path() -> Path | None:
    """The lock file beside numba's cache of the kernels (wherever numba keeps this install's), one per Python; None
    where numba would keep no cache of them."""
    locator = _cache.KernelSourcesLocator.from_function(_launch.shares, _launch.__file__)
    if locator is None:
        return None
    return Path(locator.get_cache_path()) / f"compiling-py{sys.version_info[0]}{sys.version_info[1]}.lock"


#: Linux's ``prctl`` option that sends the calling process a signal when the thread that started it ends.
_PR_SET_PDEATHSIG = 1


def end_with(parent: int) -> None:
    """A compiling worker's first step: on Linux, have the kernel end it when ``parent`` (the process that started
    it) ends, so that a ``hetlapack compile`` killed by its process id takes its workers with it (killed so, stop 98's
    two workers compiled on for 27 minutes); Ctrl-C reaches them as ever, through the process group."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # no C library to ask: the worker lives as before
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent ended before the request: nobody is left to take the results
        os._exit(1)


def worker_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """``workers`` processes to compile in: spawned (a forked child would inherit this process's threads and
    locks), each ending with this process (:func:`end_with`)."""
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=end_with, initargs=(os.getpid(),))


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Held while this process compiles kernels into numba's cache: one compiling process at a time per cache and
    Python (a lock file in the cache, where ``fcntl`` exists and the file can be opened), so that processes meeting
    the same missing kernels compile them once. Closing the file releases the lock."""
    path = _lock_path()
    with contextlib.ExitStack() as held:
        with contextlib.suppress(OSError):  # no lock where its file cannot be opened: compile anyway
            if path is not None and fcntl is not None:
                fcntl.flock(held.enter_context(open(path, "a")), fcntl.LOCK_EX)  # noqa: SIM115 - the stack closes it
        yield


def precompile(workers: int | None = None, progress: bool = True,
               only: dict[str, list[str]] | None = None) -> dict[str, float]:
    """Compile every kernel the cache lacks (of ``only``'s kernels and dtype characters, where given), in
    ``workers`` processes (default: one per usable core; one: this process, a kernel after another), under
    :func:`machine_lock`; the seconds each kernel took. Shows a progress bar with ``progress``."""
    from tqdm import tqdm  # noqa: PLC0415 - a CLI dependency, loaded only when there is work

    with machine_lock():
        todo = missing(only)
        if not todo:
            return {}
        seconds: dict[str, float] = {}
        with tqdm(total=sum(map(len, todo.values())), desc="compiling kernels", unit="kernel",
                  disable=not progress) as bar:
            if (workers or usable_cores()) == 1:
                for op, chars in todo.items():
                    seconds[op] = _compile(op, chars)
                    bar.update(len(chars))
                _compile_launchers(todo, seconds)
                return seconds
            with worker_pool(workers or usable_cores()) as pool:
                running = {pool.submit(_compile, op, chars): op for op, chars in todo.items()}
                _compile_launchers(todo, seconds)
                for done in concurrent.futures.as_completed(running):
                    op = running[done]
                    seconds[op] += done.result()
                    bar.update(len(todo[op]))
        return seconds
