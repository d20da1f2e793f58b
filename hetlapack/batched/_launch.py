"""The batched kernels' one parallel loop: numba's threads each run their share of a stack in a kernel compiled
without ``parallel=True``, called through its address.

Each kernel factors one thread's share of a stack (its last two arguments are the share's index and the number of
shares) and is compiled as a plain function. A ``prange`` loop in the kernel itself made numba's parallel
compilation type, inline and optimize the whole kernel a second time for the loop's body: 35-50% of each kernel's
compile time (``getrf`` in float64: 128 s against 82 s; the Cholesky replay in float32: 189 s against 99 s). The
loop here is compiled once per kernel signature in under a second, and calls the kernel by its machine-code address,
so neither numba nor LLVM copies the kernel into it; the threads are numba's pool, as before (a helper thread of
Python's own started 15 µs late and ran 20-70% slower at orders 2-8 on a 2-core AMD EPYC VM).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

#: How :func:`shares` is compiled (``hetlapack compile`` looks for it in the cache with these).
JIT_OPTIONS = {"parallel": True, "nogil": True}


@intrinsic
def _run_share(typingctx, address, arguments, thread, threads):
    """Call the kernel at machine-code ``address`` (numba's own calling convention) on ``arguments`` and the share
    ``thread`` of ``threads``; true where it raised (an allocation failed)."""
    kernel_types = (*arguments.types, types.intp, types.intp)

    def codegen(context, builder, signature, values):
        address, packed, thread, threads = values
        unpacked = [builder.extract_value(packed, i) for i in range(len(arguments.types))]
        function_type = context.call_conv.get_function_type(types.none, kernel_types)
        kernel = builder.inttoptr(address, function_type.as_pointer())
        status, _ = context.call_conv.call_function(builder, kernel, types.none, kernel_types,
                                                    [*unpacked, thread, threads])
        return status.is_error

    return types.boolean(types.intp, arguments, types.intp, types.intp), codegen


def shares(address, arguments, threads):
    """Run each of ``threads`` shares of the kernel at ``address`` on the tuple ``arguments``, each on a thread of
    numba's pool; the number of shares that raised."""
    failures = 0
    for share in numba.prange(threads):
        failures += _run_share(address, arguments, np.intp(share), threads)
    return failures


def signature(argument_types: tuple[types.Type, ...]) -> types.Type:
    """The signature :func:`shares` is compiled under for a kernel of ``argument_types`` (less the two counts)."""
    return types.intp(types.intp, types.Tuple(argument_types), types.intp)


def compiled(argument_types: tuple[types.Type, ...]) -> Callable:
    """:func:`shares` compiled (or loaded from the disk cache) for a kernel of ``argument_types``."""
    return numba.njit(signature(argument_types), cache=True, **JIT_OPTIONS)(shares)


def address(kernel: Callable, kernel_signature: types.Type) -> int:
    """The machine-code address of ``kernel``'s version for ``kernel_signature`` (numba's calling convention, not
    the Python wrapper's)."""
    result = kernel.overloads[kernel_signature.args]
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
