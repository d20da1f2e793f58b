"""SciPy's ``check_finite``, read where the values pass anyway: by the copies that lay a matrix out for LAPACK or a
tile algorithm, a tile at a time, instead of a pass of its own over the whole matrix (``np.isfinite(a).all()``:
10 ms of a Cholesky of order 4000, with a boolean temporary of an eighth of the matrix)."""

from __future__ import annotations

import numpy as np


#: Values NumPy's ``isfinite`` reads at once, into a boolean block that stays in a core's L2 cache (256 KiB): a larger
#: array is read in blocks of this many (:func:`_finite`), with no temporary of an eighth of its size. On a 2-core
#: AMD EPYC (Zen 5), float64, right after a small BLAS call, median microseconds, the array's sum (the check before)
#: / ``isfinite(values).all()`` / in blocks of 2^17 / of 2^18: order 1000 167 / 130 / 140 / 134, 2000 1,556 / 1,067
#: / 1,021 / 999, 4000 6,403 / 4,614 / 4,368 / 4,262. On a 2-core Xeon VM the whole array's ``isfinite`` beat the sum
#: up to 131,044 values (21.0 against 24.6 us) and was level at 262,144.
BLOCK_VALUES = 1 << 18


def _finite(values: np.ndarray) -> bool:
    """Whether every value is finite: by NumPy's ``isfinite``, a block of at most :data:`BLOCK_VALUES` at a time,
    stopping at the first block that holds a value that is not. A matrix whose rows or columns lie along memory (a
    tile of a larger one, as the copies read) is cut into blocks of whole such lines (:func:`_lines_along_memory`);
    anything else into blocks in memory's order by NumPy's buffered iterator, which copies a strided array's values
    into its buffer first (tiles of order 768 of a matrix of order 4000, float64, as :func:`~.arrays.fortran_copy`
    reads them on a 2-core Xeon VM with a 48 KiB L1 cache; the whole copy, best of 9 after a pause: 41.3 ms read in
    lines, 49.3 read through the buffer, 35.0 not read)."""
    if values.size <= BLOCK_VALUES:
        return bool(np.isfinite(values).all())
    lines = _lines_along_memory(values)
    if lines is not None:
        step = max(BLOCK_VALUES // lines.shape[1], 1)
        return all(np.isfinite(lines[start:start + step]).all() for start in range(0, lines.shape[0], step))
    flags = np.empty(BLOCK_VALUES, dtype=bool)
    for block in np.nditer(values, flags=["external_loop", "buffered"], buffersize=BLOCK_VALUES, order="K"):
        read = flags[:block.size]
        np.isfinite(block, out=read)
        if not read.all():
            return False
    return True


def _lines_along_memory(values: np.ndarray) -> np.ndarray | None:
    """``values``, a matrix, as a view whose rows lie along memory (itself or its transpose), or None where neither
    its rows nor its columns do."""
    if values.ndim != 2:
        return None
    if values.strides[1] == values.itemsize:
        return values
    if values.strides[0] == values.itemsize:
        return values.T
    return None


class FiniteCheck:
    """Whether every value read so far was a finite number. Several threads may read into one check: each read only
    ever sets it to false."""

    def __init__(self) -> None:
        self.finite = True

    def read(self, values: np.ndarray) -> None:
        """Note whether ``values`` are all finite (:func:`_finite`)."""
        if not _finite(values):
            self.finite = False


def all_finite(a: np.ndarray) -> bool:
    """Whether every value of ``a`` is finite, read as :class:`FiniteCheck` reads: a matrix nothing copies."""
    return _finite(a)
