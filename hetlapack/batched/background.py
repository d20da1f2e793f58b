"""No call waits for numba: the batched kernels a call would run, where numba's disk cache lacks them, are compiled
in a process of their own while dispatch sends the call to SciPy's (or NumPy's) own function.

A kernel compiles on its first use in a dtype, once per install and Python: a float64 ``lu_factor`` of a stack took
118 s (``cholesky`` 31 s, ``qr`` 46 s) on a 2-core AMD EPYC with a cold cache, where SciPy's own loop answers at
once. So an unforced call whose kernels are not compiled yet starts their compilation in another process, at the
lowest priority, and runs on the host path; the first call after that process ends finds the kernels in the cache
(loading them takes about 0.4 s) and runs on the batched path. The process finishes its work even when the program
ends first, so the next run finds the kernels. One process compiles at a time per numba cache and Python
(:func:`.precompile.machine_lock`), so many processes meeting the same kernels compile them once.

``HETLAPACK_BATCHED_COMPILE=inline`` compiles in the call instead (the tests and benchmarks do), as does a forced
batched path (``hetlapack.using(path="batched")``). A compilation that left the cache without the kernels (a cache
numba cannot write) is not tried again: the next call compiles them itself. ``hetlapack compile`` compiles every
kernel ahead, on every core.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterable

import numpy as np

from ..forking import fork_safe_lock, reset_after_fork
from . import compiling, precompile

#: The environment variable choosing where a missing kernel compiles: ``background`` (the default) or ``inline``.
MODE_VARIABLE = "HETLAPACK_BATCHED_COMPILE"
MODES = ("background", "inline")

#: The kernels each batched operation may run, by the kernels its plan names (``perf.model.batched_kernels``): the
#: interleaved ones fall back to LAPACK's on each matrix for the matrices they flag, LU's ``lu`` writes its pieces by
#: ``plu``, the solves past the interleaved orders run ``solve_each``, and single precision's loops their replays.
#: Each is compiled for the dtypes it is written for (``compiling.kernel_dtypes``).
KERNELS_OF = {
    ("potrf", "interleaved"): ("potrf", "potrf_each"),
    ("potrf", "lapack"): ("potrf_each", "potrf_replay"),
    ("getrf", "interleaved"): ("getrf", "getrf_each", "plu"),
    ("getrf", "lapack"): ("getrf_each", "getrf_replay", "plu"),
    ("geqrf", "interleaved"): ("qr", "geqrf", "orgqr", "qr_each"),
    ("geqrf", "lapack"): ("qr_each", "qr_replay"),
    ("geqp3", "interleaved"): ("geqp3_each",),
    ("geqp3", "lapack"): ("geqp3_each",),
    ("potrs", "interleaved"): ("potrs", "solve_each", "potrs_each"),
    ("potrs", "lapack"): ("potrs_each",),
    ("getrs", "interleaved"): ("getrs", "solve_each", "getrs_each"),
    ("getrs", "lapack"): ("getrs_each",),
}

#: The background process's niceness: it takes what the program leaves idle.
_LOWEST_PRIORITY = 19

_lock = fork_safe_lock()
#: (kernel, dtype character) pairs found in numba's cache: ready for the life of the process.
_ready: set[tuple[str, str]] = set()
#: The pairs a background process is compiling now, and that process.
_running: dict[tuple[str, str], subprocess.Popen] = {}
#: The pairs a background process was started for: not started again.
_tried: set[tuple[str, str]] = set()


@reset_after_fork
def _forget_processes() -> None:
    """A forked child does not own its parent's compiling processes: what they compile, it starts again (its process
    then waits for the parent's on the lock, and finds the kernels compiled), rather than compiling it in a call."""
    _tried.difference_update(_running)
    _running.clear()


def mode() -> str:
    """Where a missing kernel compiles now (``MODE_VARIABLE``); an unknown value raises ``ValueError``."""
    value = os.environ.get(MODE_VARIABLE, "background")
    if value not in MODES:
        raise ValueError(f"{MODE_VARIABLE} must be one of {', '.join(MODES)}, got {value!r}")
    return value


def kernels_of(op: str, kind: str, dtype: np.dtype) -> tuple[str, ...]:
    """The kernels a batched ``op`` on ``kind`` kernels may run in ``dtype``."""
    return tuple(kernel for kernel in KERNELS_OF[op, kind] if np.dtype(dtype) in compiling.kernel_dtypes(kernel))


def wanted(ops: Iterable[tuple[str, np.dtype]]) -> dict[str, list[str]]:
    """The kernels batched ``(op, dtype)`` pairs may run on either kind of kernels, with the dtype characters of
    each: what :func:`.precompile.precompile` takes as ``only``."""
    chars: dict[str, set[str]] = {}
    for op, dtype in ops:
        for kind in ("interleaved", "lapack"):
            for kernel in kernels_of(op, kind, dtype):
                chars.setdefault(kernel, set()).add(np.dtype(dtype).char)
    return {kernel: sorted(found) for kernel, found in chars.items()}


def not_ready(op: str, kind: str, dtype: np.dtype) -> str | None:
    """Why a batched ``op`` on ``kind`` kernels in ``dtype`` should not run now: its kernels are compiling in the
    background (started here if none is yet); ``None`` where they are in numba's cache, where they are to compile in
    the call (:func:`mode`), or where a background compilation of them was tried before."""
    pairs = [(kernel, np.dtype(dtype).char) for kernel in kernels_of(op, kind, dtype)]
    with _lock:
        missing = [pair for pair in pairs if pair not in _ready]
        if not missing:
            return None
        for pair in missing:
            if pair not in _running and precompile.cached(pair[0], np.dtype(pair[1])):
                _ready.add(pair)
        missing = [pair for pair in missing if pair not in _ready]
        if not missing or mode() == "inline" or all(pair in _tried and pair not in _running for pair in missing):
            return None
        start = [pair for pair in missing if pair not in _tried]
        if start:
            process = _spawn(start)
            if process is None:
                return None
            _running.update(dict.fromkeys(start, process))
            _tried.update(start)
    names = ", ".join(sorted({kernel for kernel, _ in missing}))
    return (f"its kernels ({names}) for {op} in {np.dtype(dtype)} are compiling in a background process (their first "
            f"use with this install: minutes, at the lowest priority); `hetlapack compile` compiles every kernel ahead")


def ended() -> bool:
    """Whether a background compilation ended since the last call (plans made without its kernels are then stale)."""
    if not _running:
        return False
    with _lock:
        done = {pair for pair, process in _running.items() if process.poll() is not None}
        for pair in done:
            del _running[pair]
    return bool(done)


def _spawn(pairs: Iterable[tuple[str, str]]) -> subprocess.Popen | None:
    """A process compiling ``pairs`` into numba's cache (:func:`main`), importing the modules this process would (its
    search path), or ``None`` where none can start (no Python interpreter to run: an embedded or frozen program)."""
    if not sys.executable or getattr(sys, "frozen", False):
        return None
    search_path = os.pathsep.join(path for path in sys.path if path)  # it imports what this process imports
    code = "import sys; from hetlapack.batched.background import main; main(sys.argv[1:])"
    try:
        process = subprocess.Popen([sys.executable, "-c", code, *(f"{kernel}:{char}" for kernel, char in pairs)],
                                   env={**os.environ, "PYTHONPATH": search_path}, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    with contextlib.suppress(OSError, AttributeError):  # from its start, not from its imports' end (where it can)
        os.setpriority(os.PRIO_PROCESS, process.pid, _LOWEST_PRIORITY)
    return process


def main(pairs: list[str]) -> None:
    """The background process: compile each ``kernel:dtype-character`` of ``pairs`` the cache still lacks, in this
    process, at the lowest priority, once no other process compiles (:func:`.precompile.precompile`)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, 0, _LOWEST_PRIORITY)
    todo: dict[str, list[str]] = {}
    for pair in pairs:
        kernel, char = pair.split(":")
        todo.setdefault(kernel, []).append(char)
    precompile.precompile(workers=1, progress=False, only=todo)
