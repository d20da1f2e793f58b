"""Launching numba-cuda kernels on CuPy's stream, without copies, on a GPU or under Numba's CUDA simulator.

The CUDA device's own kernel (:mod:`.cuda_panel`) and the batched GPU kernels (:mod:`hetlapack.batched`) launch
through :func:`launch`: CuPy arrays pass by ``__cuda_array_interface__``, NumPy arrays under the simulator
(``NUMBA_ENABLE_CUDASIM=1``) pass as simulated device arrays over their own memory.
"""

from __future__ import annotations

import math
from types import ModuleType

import numba
import numpy as np
from numba import cuda

#: Threads per block of the one-thread-per-matrix kernels, and the target of the LU kernel's 2-D blocks: enough
#: warps to hide memory latency, few enough to keep many blocks per multiprocessor.
THREADS_PER_BLOCK = 128

#: numba-cuda warns (``NumbaPerformanceWarning``) at every launch of fewer blocks than this. A small stack or one
#: tile needs fewer, and the warning would reach the caller's own warnings (among the LinAlgWarnings a SciPy user
#: records; seen on an H100), so grids are padded to it on a GPU.
MIN_GRID_BLOCKS = 128


def array_module(a) -> ModuleType:
    """CuPy for CuPy arrays (imported lazily: the caller already has it), NumPy otherwise (the simulator's)."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy  # noqa: PLC0415 - optional dependency, present whenever a CuPy array is

        return cupy
    return np


def _stream(xp: ModuleType):
    """CuPy's current stream, so that a kernel orders with the caller's CuPy work; the default one otherwise."""
    if xp is np or numba.config.ENABLE_CUDASIM:
        return 0
    return cuda.external_stream(xp.cuda.get_current_stream().ptr)


def _kernel_argument(a):
    """An array as a kernel takes it, without a copy. Under the simulator, a NumPy array is wrapped as a simulated
    device array over its own memory: the simulator would otherwise copy it in and out, which it refuses for
    strided views. On a GPU, a CuPy array is wrapped as numba's own device array: numba-cuda 0.30 reads other
    arrays through ``cuda.core``, which measures a strided view's memory as its element count and refuses a tile
    view of a larger matrix (seen on an H100)."""
    if isinstance(a, np.ndarray):
        if numba.config.ENABLE_CUDASIM:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # noqa: PLC0415 - simulator only

            return FakeCUDAArray(a)
        return a
    if hasattr(a, "__cuda_array_interface__"):
        return cuda.as_cuda_array(a, sync=False)
    return a


def _padded(grid):
    """``grid`` with at least ``MIN_GRID_BLOCKS`` blocks on a GPU (more along its first dimension); every kernel
    here returns from threads past its work, so the extra blocks only return."""
    dims = grid if isinstance(grid, tuple) else (grid,)
    blocks = math.prod(dims)
    if numba.config.ENABLE_CUDASIM or blocks >= MIN_GRID_BLOCKS:
        return grid
    return (dims[0] * math.ceil(MIN_GRID_BLOCKS / max(blocks, 1)), *dims[1:])


@cuda.require_context
def launch(kernel, grid, block, xp: ModuleType, *arguments) -> None:
    """Launch ``kernel[grid, block]`` on the stream of ``xp``'s current work, arrays passed without copies.

    Under one CUDA context lookup: numba-cuda otherwise asks the driver for the current context again in each of
    its calls (every array's wrapper and its stream, the stream, the launch)."""
    kernel[_padded(grid), block, _stream(xp)](*(_kernel_argument(a) for a in arguments))
