"""Output stacks made from the memory of earlier results the caller has dropped.

A large NumPy array is memory the C library takes from the operating system afresh whenever it gave the last one
back (glibc returns freed memory above its trim threshold at once), and the first write to each 4 KiB page of it
then traps into the kernel, which clears the page. On a virtual machine that trap costs about 2 us a page: a batched
``qr`` of 10^4 float64 matrices of order 8 wrote its two 5 MB results through 935 such faults a call, 2.1 ms of the
call's 3.9 (2-core AMD EPYC VM). A program that factors stack after stack (a filter's steps, an optimizer's
iterations) drops each result before the next call; :func:`empty` hands that memory out again instead.

A block is free when nothing but this pool refers to it: every array made from it (the result, any view of it) holds
a reference to the block, so a free block has no array left that could see its old contents change. The pool keeps
at most :data:`RETAINED_BYTES` of blocks, in use or free, and outputs below :data:`MIN_BYTES` are plain
``np.empty`` (the C library reuses such memory without the operating system).
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np

from ..machine import physical_memory
from ._transpose import LINE_BYTES

#: Outputs smaller than this come from ``np.empty``: the C library keeps memory of this size (glibc's default
#: threshold for returning memory to the system is 128 KiB), and searching the pool costs about a microsecond.
MIN_BYTES = 1 << 20

#: Bytes of blocks the pool holds, in use or free: what it can keep from the system after every result is dropped
#: (:func:`release` gives it back). An eighth of the machine's memory (2 GiB where it is not known): at 512 MiB, the
#: results of 10^5 float64 matrices of order 32 (``qr``'s Q and R 1.6 GB, ``lu_factor``'s 0.8 GB) came from the
#: system afresh at every call and took 1,933 and 711 page faults a call (2-core AMD EPYC VM, ns a matrix, 512 MiB /
#: 4 GiB: ``qr`` 3,275 / 2,713, ``lu_factor`` 1,768 / 1,495, ``cholesky`` 1,284 / 1,022, ``lu`` 3,298 / 2,369, the
#: same as at 10^4 matrices).
RETAINED_BYTES = (physical_memory() or 16 << 30) // 8

#: A block serves an output of at least this fraction of its size, so a small output does not hold a large block.
SMALLEST_SHARE = 0.5

_blocks: list[np.ndarray] = []
_lock = threading.Lock()


def _references(block: np.ndarray) -> int:
    """References to ``block``, counted through one call as :func:`_is_free` makes it (the interpreter's own
    references to an argument differ between Python versions)."""
    return sys.getrefcount(block)


def _free_references() -> int:
    """What :func:`_references` reads for a block that only the pool's list refers to."""
    probe = [np.empty(0, dtype=np.uint8)]
    return _references(probe[0])


_FREE = _free_references()


def _is_free(index: int) -> bool:
    """Whether block ``index`` of the pool has no array left but the pool's own reference."""
    return _references(_blocks[index]) == _FREE


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-ordered array of ``shape`` and ``dtype``, as ``np.empty`` gives, on a free block of the
    pool where one fits and else on a new block (``np.empty`` itself below :data:`MIN_BYTES`, or where the pool is
    full of blocks in use). From the pool, the array starts on a cache line, as streaming stores ask
    (:mod:`.streaming`)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize  # np.prod took 4 us a call, a tenth of a small stack's LU
    if nbytes < MIN_BYTES:
        return np.empty(shape, dtype)
    with _lock:
        block = _take(nbytes + LINE_BYTES)
    if block is None:
        return np.empty(shape, dtype)
    skip = -block.ctypes.data % LINE_BYTES
    return block[skip:skip + nbytes].view(dtype).reshape(shape)


def _take(nbytes: int) -> np.ndarray | None:
    """The smallest free block that serves ``nbytes``, or a new one once the longest unused free blocks are given up
    to make room for it; ``None`` where blocks in use leave no room. The pool's list runs from the longest unused
    block to the one last handed out."""
    free = [i for i in range(len(_blocks)) if _is_free(i)]
    fitting = [i for i in free if SMALLEST_SHARE * _blocks[i].nbytes <= nbytes <= _blocks[i].nbytes]
    if fitting:
        _blocks.append(_blocks.pop(min(fitting, key=lambda i: _blocks[i].nbytes)))
        return _blocks[-1]
    held = sum(block.nbytes for block in _blocks)
    given_up = []
    for i in free:
        if held + nbytes <= RETAINED_BYTES:
            break
        held -= _blocks[i].nbytes
        given_up.append(i)
    for i in reversed(given_up):
        del _blocks[i]
    if held + nbytes > RETAINED_BYTES:
        return None
    _blocks.append(np.empty(nbytes, dtype=np.uint8))
    return _blocks[-1]


def release() -> int:
    """Give every free block back to the C library (and so to the system); returns the bytes given back."""
    with _lock:
        free = [i for i in range(len(_blocks)) if _is_free(i)]
        given = sum(_blocks[i].nbytes for i in free)
        for i in reversed(free):
            del _blocks[i]
    return given


def retained() -> tuple[int, int]:
    """Bytes of the pool's blocks in use and free."""
    with _lock:
        free = [_is_free(i) for i in range(len(_blocks))]
        return (sum(b.nbytes for b, is_free in zip(_blocks, free) if not is_free),
                sum(b.nbytes for b, is_free in zip(_blocks, free) if is_free))
