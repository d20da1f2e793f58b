"""numba's inliner without its two deep copies of each callee, while the batched kernels compile.

numba inlines a function marked ``inline="always"`` by building the callee's IR afresh at each call site
(``InlineWorker.run_untyped_passes``), then deep-copying it twice in ``inline_ir``: once to mutate, once to return
unmutated, which numba's one caller of ``inline_function`` (the ``InlineInlinables`` pass) throws away (numba issue
#8989, open). Each copy deep-copies the callee's whole scope once per block, so it grows with blocks x variables:
in a 2-core Zen 4 VM, 40% of the float64 ``getrf`` kernel's compile (201 s against 120 s) copied IR that nothing else
held. Under :func:`uncopied`, ``inline_function`` hands ``inline_ir`` the fresh IR with ``copy.deepcopy`` answering
with its argument. The machine code is the same, instruction for instruction (``tests/test_inlining.py``).
"""

from __future__ import annotations

import contextlib
import copy
import types
from collections.abc import Iterator

from numba.core import inline_closurecall
from numba.core.compiler_lock import global_compiler_lock

#: Stands in for the ``copy`` module in numba's inliner while a fresh IR is inlined: its copies are the IR itself.
_NO_COPY = types.SimpleNamespace(deepcopy=lambda value, memo=None: value)


def _inline_uncopied(worker, caller_ir, block, i, function, arg_typs=None):
    """``InlineWorker.inline_function``, with the callee's fresh IR inlined as it is built, not copied."""
    callee_ir = worker.run_untyped_passes(function)
    inline_closurecall.copy = _NO_COPY
    try:
        return worker.inline_ir(caller_ir, block, i, callee_ir, function.__code__.co_freevars, arg_typs=arg_typs)
    finally:
        inline_closurecall.copy = copy


@contextlib.contextmanager
def uncopied() -> Iterator[None]:
    """numba's inliner copies no callee's IR within; it holds numba's compiler lock meanwhile, so no other thread's
    compilation meets the replacement. Where numba's inliner no longer copies through its module's ``copy``, it is
    left as it is."""
    worker = inline_closurecall.InlineWorker
    if getattr(inline_closurecall, "copy", None) is not copy or not hasattr(worker, "run_untyped_passes"):
        yield
        return
    with global_compiler_lock:
        inline_function = worker.inline_function
        worker.inline_function = _inline_uncopied
        try:
            yield
        finally:
            worker.inline_function = inline_function
