"""Whether a batched call writes its results with streaming stores.

An ordinary store to a line that is not in the cache first reads the line from memory, to own it, so a result
written that way crosses the memory bus twice, once each way. A streaming (non-temporal) store sends whole lines to
memory and leaves the caches alone: each result crosses once. That pays where the results could not stay in the
last-level cache anyway, and would cost where the caller reads them from it next. Whether it pays for a kernel's
matrices of a size, and from which stacks on, is the machine's: ``hetlapack calibrate`` times both
(:func:`~.crossover.measure_stream`, :func:`~.crossover.measure_stream_stacks`; a virtual machine's share of a
cache is less than the size the system gives). A
streaming store of a vector needs its address on a cache line, so a call streams only into results whose records
start on lines, as :mod:`.recycled` lays them; the kernels check it again before each store
(:func:`~._interleave.streams_into`), as a guard.
"""

from __future__ import annotations

import numpy as np

from ..machine import last_level_cache
from ..perf import model
from ._transpose import LINE_BYTES

#: Bytes of a matrix up to which a call streams its results where ``hetlapack calibrate`` has not timed this
#: machine's kernels both ways: to 1 KiB, streaming won on both machines it was measured on. ns a matrix, ordinary /
#: streaming stores: on a 2-core AMD EPYC with AVX2 (seventeenth session), scattering 10^4-10^5 matrices of order 8
#: on one thread, float64 79-99 / 26-27, complex128 192-218 / 53, but order 16 271-274 / 287-298 and order 32 657 /
#: 1,027; on a 2-core Zen 5 EPYC (stop 98), the kernels on 2 threads, 10^5 float64 matrices, order 8 ``lu`` 121 /
#: 81, ``cholesky`` 48 / 40, ``qr`` 77 / 62, ``lu_factor`` 61 / 59, and order 32 ``lu`` 1,468 / 1,186, ``cholesky``
#: 617 / 497, but ``lu_factor`` 941 / 961 and ``qr`` 1,306 / 1,383.
STREAM_MAX_MATRIX_BYTES = 1024


def on_lines(result: np.ndarray) -> bool:
    """Whether every record (matrix) of the stack ``result`` starts on a cache line: its data does, and a record's
    bytes are whole lines. Where one does not, a kernel writes that result with ordinary stores."""
    record_bytes = result.shape[-2] * result.shape[-1] * result.itemsize
    return result.ctypes.data % LINE_BYTES == 0 and record_bytes % LINE_BYTES == 0


def streams(op: str, a: np.ndarray, *results: np.ndarray, chosen: bool | None = None) -> bool:
    """Whether a call of ``op``'s interleaved kernel (``potrf``, ``getrf``, ``lu``, ``geqrf``: the names calibration
    times them under) on the stack ``a`` writes its ``results`` (the stacks it copies matrix by matrix) with streaming
    stores: ``chosen`` where given; else where the stack and its results together reach the bytes streaming won from
    in this machine's calibration (:func:`~hetlapack.perf.model.batched_stream_stack_bytes`), or else exceed the
    last-level cache (never where the system does not say its size), every result with matrices starts them on
    cache lines (:func:`on_lines`), and ``a``'s matrices are no larger than those streaming won on in this machine's
    calibration (:func:`~hetlapack.perf.model.batched_stream_bytes`), or than :data:`STREAM_MAX_MATRIX_BYTES`. So
    where a call streams, its kernels skip asking for the results' lines ahead, and lose nothing by it."""
    if chosen is not None:
        return bool(chosen)
    cache = last_level_cache()
    if cache is None:
        return False
    least = model.batched_stream_stack_bytes() or cache + 1
    if a.nbytes + sum(result.nbytes for result in results) < least:
        return False
    if not all(on_lines(result) for result in results if result.size):
        return False
    timed = model.batched_stream_bytes(op)
    return a.shape[-2] * a.shape[-1] * a.itemsize <= (STREAM_MAX_MATRIX_BYTES if timed is None else timed)
