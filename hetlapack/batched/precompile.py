"""Compile the batched kernels into numba's disk cache ahead of their first use, on every core at once.

A kernel compiles on its first use in each dtype (in a background process of its own, :mod:`.background`, unless
the call is to compile it): 3-100 s each, 12 minutes for all of them on a 2-core AMD EPYC, one after another, since
numba compiles one function at a time in a process. ``hetlapack compile`` (and the
test session, ``tests/conftest.py``) compiles the ones the cache lacks in one process per core, each kernel in one
process (its cache index is then written by one process only), and the parallel loops that run them
(:mod:`._launch`, one function and so one index for all) in this process meanwhile; later calls load them from the
cache.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator

import numba
import numpy as np

from ..devices.capability import cache_path
from ..machine import usable_cores
from . import _launch, compiling

#: Kernels in the order they are handed out: the longest compilations first, so that no core is left with one at
#: the end (seconds for all their dtypes, measured cold on a 2-core AMD EPYC, two at a time: getrf 174, potrf 101,
#: the single-precision replays 94 (Cholesky) and 79 (LU), qr 76, the QR replay 60, the others 6-25; 727 s in all).
_LONGEST_FIRST = ("getrf", "potrf", "potrf_replay", "getrf_replay", "qr", "qr_replay", "solve_each", "qr_each",
                  "getrs", "potrs", "getrs_each", "potrs_each")


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


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Held while this process compiles kernels into numba's cache: one compiling process at a time per install and
    Python (a lock file beside hetlapack's calibration, where ``fcntl`` exists and the directory can be written), so
    that processes meeting the same missing kernels compile them once. Closing the file releases the lock."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only
    except ImportError:
        fcntl = None
    install = hashlib.sha256(os.path.dirname(os.path.abspath(compiling.__file__)).encode()).hexdigest()[:12]
    path = cache_path().parent / f"compiling-py{sys.version_info[0]}{sys.version_info[1]}-{install}.lock"
    with contextlib.ExitStack() as held:
        with contextlib.suppress(OSError):  # no lock where the cache directory cannot be written: compile anyway
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = held.enter_context(open(path, "a"))  # noqa: SIM115 - closed by the stack
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def compile_here(todo: dict[str, list[str]]) -> dict[str, float]:
    """Compile ``todo``'s kernels (dtype characters per kernel) and their parallel loops in this process, one after
    another; the seconds each kernel took."""
    seconds = {op: _compile(op, chars) for op, chars in todo.items() if chars}
    _compile_launchers({op: chars for op, chars in todo.items() if chars}, seconds)
    return seconds


def precompile(workers: int | None = None, progress: bool = True,
               only: dict[str, list[str]] | None = None) -> dict[str, float]:
    """Compile every kernel the cache lacks (of ``only``'s kernels and dtype characters, where given), in
    ``workers`` processes (default: one per usable core); the seconds each kernel took. Shows a progress bar with
    ``progress``."""
    with machine_lock():
        return _precompile(workers, progress, missing(only))


def _precompile(workers: int | None, progress: bool, todo: dict[str, list[str]]) -> dict[str, float]:
    if not todo:
        return {}
    from tqdm import tqdm  # noqa: PLC0415 - a CLI dependency, loaded only when there is work

    context = multiprocessing.get_context("spawn")  # a forked child would inherit this process's threads and locks
    seconds = {}
    with concurrent.futures.ProcessPoolExecutor(workers or usable_cores(), mp_context=context) as pool, \
            tqdm(total=sum(map(len, todo.values())), desc="compiling kernels", unit="kernel",
                 disable=not progress) as bar:
        running = {pool.submit(_compile, op, chars): op for op, chars in todo.items()}
        _compile_launchers(todo, seconds)
        for done in concurrent.futures.as_completed(running):
            op = running[done]
            seconds[op] += done.result()
            bar.update(len(todo[op]))
    return seconds
