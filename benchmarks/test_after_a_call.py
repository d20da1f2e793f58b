"""What a hetlapack call leaves behind for the rest of the program: the next BLAS call, and the next fresh array,
timed right after a call to SciPy, to hetlapack's host path, to its hybrid path (float64, order ``n``) and to its
batched path (1,000 matrices of order 8); and a batched call and SciPy's Cholesky made in turn (``test_in_turn``).

A GEMM into an array that already exists measures BLAS alone (its threads and their limits); filling a fresh array
measures the memory it is given (pages the kernel zeroes on first touch). Rows of one group should agree; a row
after a hetlapack call that is slower than the row after SciPy's call names what the call left. Two such rows are
gone. The fresh array after the hybrid call filled in 279 ms against 8-9 ms after SciPy's (median of 7, order 4000,
2-core AMD EPYC VM with AVX-512), because reference cycles (tile handles and their matrix) kept the call's working
copy alive until the cyclic collector ran and the array got memory the system had not handed out before;
``tests/test_hybrid.py`` checks a hybrid call leaves no cycle. The GEMM of order 500 after the batched call took
9.67 ms against 4.03 now (median of 7, 2-core AMD EPYC with AVX2): numba's OpenMP thread went on spinning on a core
BLAS wanted (``batched.threads.OPENMP_SPIN_COUNT``). Run on a quiet machine, OpenBLAS on its own kernels:
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE pytest benchmarks/test_after_a_call.py --benchmark-only
--benchmark-group-by=group``. Order: ``HETLAPACK_BENCH_AFTER_N`` (default 3000).
"""

import functools
import os

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hla
from hetlapack.testing import general, spd

N = int(os.environ.get("HETLAPACK_BENCH_AFTER_N", "3000"))


def _hybrid_cholesky(a: np.ndarray) -> None:
    with hetlapack.using(path="hybrid"):
        hla.cholesky(a, lower=True)


@functools.cache
def _small_stack() -> np.ndarray:
    """1,000 positive definite matrices of order 8: a stack the batched path takes on numba's threads."""
    return spd(8, batch=(1000,))


def _batched_cholesky() -> None:
    hla.cholesky(_small_stack(), lower=True)


#: the call made just before the timed one
BEFORE = {
    "after scipy.linalg.cholesky": lambda a: sl.cholesky(a, lower=True),
    "after hetlapack host cholesky": lambda a: hla.cholesky(a, lower=True),
    "after hetlapack hybrid cholesky": _hybrid_cholesky,
    "after hetlapack batched cholesky": lambda a: _batched_cholesky(),
}


@pytest.fixture(scope="module")
def operands():
    return {"spd": spd(N), "general": general(N, N, seed=N), "out": np.empty((N, N))}


def _gemm(x: dict) -> None:
    np.matmul(x["general"], x["general"], out=x["out"])


def _fresh_array(x: dict) -> None:
    np.empty((N, N)).fill(1.0)


#: the timed call: BLAS alone, or memory alone
TIMED = {"gemm into an existing array": _gemm, "a fresh array filled": _fresh_array}


@pytest.mark.parametrize("before", list(BEFORE))
@pytest.mark.parametrize("timed", list(TIMED))
def test_after_a_call(benchmark, operands, before, timed):
    benchmark.group = f"{timed}, n={N}"
    benchmark.extra_info["before"] = before
    run = TIMED[timed]

    def setup():
        run(operands)  # the memory and threads the timed call uses are warm before the call that precedes it
        BEFORE[before](operands["spd"])
        return (operands,), {}

    benchmark.pedantic(run, setup=setup, rounds=7, iterations=1)


#: Order of SciPy's Cholesky in the calls made in turn with a batched one.
IN_TURN_ORDER = 300


@functools.cache
def _in_turn_matrix() -> np.ndarray:
    return np.asfortranarray(spd(IN_TURN_ORDER))


def _scipy_cholesky() -> None:
    sl.cholesky(_in_turn_matrix(), lower=True, check_finite=False)


#: what is timed in turn: a batched call and SciPy's Cholesky one after the other, and each alone
IN_TURN = {
    "batched cholesky, then scipy.linalg.cholesky": (_batched_cholesky, _scipy_cholesky),
    "batched cholesky alone": (_batched_cholesky,),
    "scipy.linalg.cholesky alone": (_scipy_cholesky,),
}


@pytest.mark.parametrize("calls", list(IN_TURN))
def test_in_turn(benchmark, calls):
    """The pair's time should be the two alone added up: more is what each call's threads took from the other's.
    Median of 20 rounds, 2-core AMD EPYC (AVX2): 8.06 ms a pair against 0.77 for the two alone while numba's
    OpenMP threads spun libgomp's default time after a kernel; 1.80 against 0.64 with ``OPENMP_SPIN_COUNT`` (the
    rest: OpenBLAS's threads spin after its call, and the kernel's wake from sleep after it)."""
    benchmark.group = f"1,000 matrices of order 8 and SciPy's Cholesky of order {IN_TURN_ORDER}, in turn"
    def run() -> None:
        for call in IN_TURN[calls]:
            call()

    run()
    benchmark.pedantic(run, rounds=20, iterations=5)
