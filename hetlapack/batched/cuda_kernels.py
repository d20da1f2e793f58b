"""numba-cuda batched Cholesky for stacks of tiny matrices on a GPU (seed 004 §4.5: the interleaved layout).

The stack is stored batch-innermost, ``a[i, j, matrix]``, and each GPU thread factorizes one matrix, so the 32
threads of a warp read 32 consecutive matrices' same element in one coalesced transaction. Seed 004 finds this the
best design up to 16x16 in double precision. The kernel takes any array exposing ``__cuda_array_interface__``
(CuPy, zero copy), and NumPy arrays under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how CI
checks its logic on a machine without a GPU. CuPy and numba-cuda are imported only when this module is.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
from numba import cuda

#: Threads per block: enough warps to hide memory latency, few enough to keep many blocks per multiprocessor.
THREADS_PER_BLOCK = 128


@cuda.jit
def _potrf_interleaved(a, info):
    """Lower Cholesky, in place, of matrix ``cuda.grid(1)`` of the interleaved stack ``a[i, j, matrix]``."""
    matrix = cuda.grid(1)
    n, batch = a.shape[0], a.shape[2]
    if matrix >= batch:
        return
    info[matrix] = 0
    for j in range(n):
        for k in range(j):
            factor = a[j, k, matrix].conjugate()
            for i in range(j, n):
                a[i, j, matrix] -= a[i, k, matrix] * factor
        diagonal = a[j, j, matrix].real
        if not diagonal > 0.0:
            info[matrix] = j + 1
            return
        root = math.sqrt(diagonal)
        a[j, j, matrix] = root
        for i in range(j + 1, n):
            a[i, j, matrix] /= root


def _array_module(a) -> ModuleType:
    """CuPy for CuPy arrays (imported lazily), NumPy otherwise (the simulator's host arrays)."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def potrf(a, *, lower: bool, clean: bool):
    """Cholesky factors and LAPACK ``info`` of a stack ``(..., n, n)`` on the GPU; same contract as
    :func:`hetlapack.batched.kernels.potrf` (results in ``a``'s array type, ``a`` untouched)."""
    xp = _array_module(a)
    n = a.shape[-1]
    stack = a.reshape((-1, n, n))
    lower_form = stack if lower else xp.conj(xp.swapaxes(stack, -1, -2))
    interleaved = xp.ascontiguousarray(xp.moveaxis(xp.tril(lower_form), 0, -1))
    info = xp.zeros(stack.shape[0], dtype=np.int32)
    if interleaved.size:
        blocks = math.ceil(stack.shape[0] / THREADS_PER_BLOCK)
        _potrf_interleaved[blocks, THREADS_PER_BLOCK](interleaved, info)
    factor = xp.moveaxis(interleaved, -1, 0)
    factor = factor if lower else xp.conj(xp.swapaxes(factor, -1, -2))
    keep = xp.tril(factor) if lower else xp.triu(factor)
    if not clean:
        keep = keep + (xp.triu(stack, 1) if lower else xp.tril(stack, -1))
    return xp.ascontiguousarray(keep).reshape(a.shape), info.reshape(a.shape[:-2])
