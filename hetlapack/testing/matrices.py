"""Test matrices of every LAPACK dtype: SPD/HPD, general, ill-conditioned and singular.

Every generator takes ``shape`` as ``(..., m, n)`` (stacks allowed), a dtype and a seed, so tests and benchmarks
build the same inputs reproducibly.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

LAPACK_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def random_matrix(shape: tuple[int, ...], dtype: DTypeLike = np.float64, seed=0) -> np.ndarray:
    """Entries uniform in [-1, 1) (real and imaginary parts for complex dtypes)."""
    rng = _rng(seed)
    dtype = np.dtype(dtype)
    out = rng.uniform(-1, 1, shape)
    if dtype.kind == "c":
        out = out + 1j * rng.uniform(-1, 1, shape)
    return out.astype(dtype)


def general(n: int, m: int | None = None, dtype: DTypeLike = np.float64, seed=0,
            batch: tuple[int, ...] = ()) -> np.ndarray:
    """A random (n, m) matrix (square when ``m`` is None), well conditioned with high probability."""
    return random_matrix((*batch, n, n if m is None else m), dtype, seed)


def spd(n: int, dtype: DTypeLike = np.float64, seed=0, batch: tuple[int, ...] = ()) -> np.ndarray:
    """A symmetric (Hermitian) positive definite matrix ``X X^H / n + I``."""
    x = random_matrix((*batch, n, n), dtype, seed)
    a = x @ np.conj(np.swapaxes(x, -1, -2)) / max(n, 1) + np.eye(n, dtype=dtype)
    return np.asarray(a, dtype=dtype)


def ill_conditioned(n: int, cond: float = 1e10, dtype: DTypeLike = np.float64, seed=0,
                    hermitian: bool = False) -> np.ndarray:
    """``U diag(s) V^H`` with singular values spaced geometrically from 1 to 1/cond (HPD when ``hermitian``)."""
    rng = _rng(seed)
    u, _ = np.linalg.qr(random_matrix((n, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64, rng))
    v = u if hermitian else np.linalg.qr(random_matrix((n, n), u.dtype, rng))[0]
    s = np.geomspace(1.0, 1.0 / cond, n)
    return ((u * s) @ v.conj().T).astype(dtype)


def singular(n: int, rank: int | None = None, dtype: DTypeLike = np.float64, seed=0) -> np.ndarray:
    """A square matrix of exact rank ``rank`` (default ``n - 1``): its trailing columns are zero."""
    rank = n - 1 if rank is None else rank
    a = general(n, dtype=dtype, seed=seed)
    a[:, rank:] = 0
    return a


def on_cache_line(shape: tuple[int, ...], dtype: DTypeLike = np.float64, past_line: int = 0) -> np.ndarray:
    """Zeros of ``shape`` whose data starts ``past_line`` values after the start of a cache line: results the batched
    kernels may write with streaming stores (``past_line=0`` and records of whole lines), or must not."""
    from ..batched.streaming import LINE_BYTES  # noqa: PLC0415 - loads numba, which only the tests that ask need
    dtype = np.dtype(dtype)
    size = int(np.prod(shape))
    raw = np.zeros(size + past_line + LINE_BYTES // dtype.itemsize, dtype)
    skip = -raw.ctypes.data % LINE_BYTES // dtype.itemsize + past_line
    return raw[skip:skip + size].reshape(shape)


def layouts(a: np.ndarray) -> dict[str, np.ndarray]:
    """The same array (a stack of matrices) in C order, in Fortran order, as a view strided along its first axis and
    as a read-only copy: the layouts every routine must give one result for."""
    strided = np.empty((a.shape[0] * 2, *a.shape[1:]), dtype=a.dtype)[::2]
    strided[...] = a
    readonly = a.copy()
    readonly.flags.writeable = False
    return {"C": np.ascontiguousarray(a), "F": np.asfortranarray(a), "strided": strided, "readonly": readonly}
