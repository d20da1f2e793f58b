"""numba's inliner without its copies (``hetlapack.batched._inlining``): the same machine code, and numba's own
inliner back once the compile is done."""

import copy
import subprocess
import sys

import pytest
from numba.core import inline_closurecall

from hetlapack.batched import _inlining

#: Compiles a function that inlines helpers at several call sites, two levels deep, through loops, branches, a global
#: and a helper's closure over a constant, then prints how many call sites the inliner took, the result and the
#: assembly; with ``uncopied`` as its argument, inside :func:`_inlining.uncopied`. Each compile runs in a process of
#: its own: numba names functions by a counter.
_COMPILE = """
import contextlib, sys
import numba
import numpy as np
from numba.core.inline_closurecall import InlineWorker
from hetlapack.batched import _inlining

uncopied = sys.argv[1] == "uncopied"
inlined = []

def counting(inline_function):
    def inline_counted(*args, **kwargs):
        inlined.append(args[-1])
        return inline_function(*args, **kwargs)
    return inline_counted

if uncopied:
    _inlining._inline_uncopied = counting(_inlining._inline_uncopied)
else:
    InlineWorker.inline_function = counting(InlineWorker.inline_function)

SCALE = 3.0

def make_axpy():
    shift = 2.0

    @numba.njit(inline="always")
    def axpy(alpha, x, y):
        for k in range(x.shape[0]):
            y[k] += alpha * x[k] + shift
    return axpy

axpy = make_axpy()

@numba.njit(inline="always")
def sweep(a, column):
    for j in range(column + 1, a.shape[1]):
        if a[column, column] != 0.0:
            axpy(-a[column, j] / a[column, column], a[:, column], a[:, j])
        else:
            axpy(SCALE, a[:, j], a[:, column])

@numba.njit(inline="always")
def two_sweeps(a, column):
    sweep(a, column)
    sweep(a, a.shape[1] - 1 - column)

def factor(a):
    for column in range(a.shape[1]):
        two_sweeps(a, column)
    sweep(a, 0)

signature = numba.types.void(numba.types.float64[:, ::1])
with _inlining.uncopied() if uncopied else contextlib.nullcontext():
    compiled = numba.njit(signature)(factor)
a = np.arange(20.0).reshape(4, 5)
compiled(a)
print("inlined", len(inlined), "call sites")
print(a.sum())
print(compiled.inspect_asm(signature.args))
"""


def _compiled(how: str) -> str:
    return subprocess.run([sys.executable, "-c", _COMPILE, how], check=True, capture_output=True, text=True).stdout


def test_uncopied_inlining_gives_numbas_machine_code_instruction_for_instruction():
    ours, numbas = _compiled("uncopied"), _compiled("numba")
    assert numbas.startswith("inlined 10 call sites")  # a helper inlined builds its own helpers afresh
    assert "factor" in numbas and "axpy" not in numbas and "sweep" not in numbas  # the helpers were inlined
    assert ours == numbas


def test_numbas_inliner_is_back_after_the_compile_even_when_it_fails():
    inline_function = inline_closurecall.InlineWorker.inline_function
    with pytest.raises(RuntimeError, match="compile failed"), _inlining.uncopied():
        assert inline_closurecall.InlineWorker.inline_function is _inlining._inline_uncopied
        raise RuntimeError("compile failed")
    assert inline_closurecall.InlineWorker.inline_function is inline_function


def test_the_inliner_copies_nothing_while_it_inlines_and_copies_again_after_a_failure():
    class FailingWorker:
        def run_untyped_passes(self, function):
            return ["fresh IR"]

        def inline_ir(self, caller_ir, block, i, callee_ir, freevars, arg_typs=None):
            assert inline_closurecall.copy.deepcopy(callee_ir) is callee_ir
            raise RuntimeError("inlining failed")

    with pytest.raises(RuntimeError, match="inlining failed"):
        _inlining._inline_uncopied(FailingWorker(), None, None, 0, lambda: None)
    assert inline_closurecall.copy is copy
