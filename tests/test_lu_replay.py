"""The replay of OpenBLAS's single-precision LU over interleaved matrices: LAPACK's results to the bit, or not used."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import threadpoolctl

from hetlapack.batched import kernels, replay
from hetlapack.batched._lu_replay import HASWELL, KERNEL_NAMES, REPLAY_MAX_ORDER, SKYLAKEX
from hetlapack.blas_threads import one_thread_per_call

#: Shapes on either side of every block boundary of OpenBLAS's kernels: orders 1-16 (and past them, where the loop
#: runs), four-column products, tall matrices with blocks of 16 rows and odd rows, wide ones.
SHAPES = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (8, 8), (9, 9), (13, 13), (16, 16), (17, 17), (17, 16), (16, 17),
          (40, 4), (37, 16), (24, 5), (3, 1), (1, 3), (6, 9)]

#: OpenBLAS's kernel families (threadpoolctl's ``architecture``) and the kernels whose roundings they share.
REPLAYED_ARCHITECTURES = {"SkylakeX": SKYLAKEX, "Cooperlake": SKYLAKEX, "SapphireRapids": SKYLAKEX,
                          "Haswell": HASWELL, "Zen": HASWELL}


def _hard_stacks(m: int, n: int, seed: int) -> dict[str, np.ndarray]:
    """float32 stacks of ``m x n`` matrices that test every rule the replay follows: ties and exact zeros, graded
    columns, a zero column, subnormal and negative zero entries, infinities and NaNs, huge entries."""
    rng = np.random.default_rng(seed)
    normal = rng.standard_normal((24, m, n))
    stacks = {"normal": normal, "ties": rng.integers(-1, 2, (24, m, n)),
              "graded": normal * np.logspace(-30, 30, n), "huge": normal * 1e37}
    zero_column = normal.copy()
    zero_column[:, :, n // 2] = 0
    zero_column[::2, :, n // 2] = -0.0
    stacks["zero column"] = zero_column
    subnormal = normal.copy()
    subnormal[::3] *= 1e-40
    subnormal[1::3, :, 0] = 1e-42
    stacks["subnormal"] = subnormal
    nonfinite = normal.copy()
    nonfinite[3, m // 2, n // 2] = np.nan
    nonfinite[5, m - 1, 0] = np.inf
    nonfinite[7, 0, n - 1] = -np.inf
    stacks["nonfinite"] = nonfinite
    return {name: stack.astype(np.float32) for name, stack in stacks.items()}


def _lapack(a: np.ndarray) -> tuple[np.ndarray, ...]:
    """SciPy's ``sgetrf`` on each matrix, one BLAS thread a call."""
    getrf = sla.lapack.get_lapack_funcs("getrf", dtype=np.float32)
    with one_thread_per_call(), np.errstate(all="ignore"):
        results = [getrf(matrix) for matrix in a]
    return tuple(np.stack(part) for part in zip(*results))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_single_precision_lu_is_lapacks_bit_for_bit(shape):
    """Where the replay runs (this process's LAPACK is one it replays) and where the loop does, ``getrf``'s
    factors, pivots and ``info`` are SciPy's ``sgetrf``'s bit for bit: matrices the replay leaves to LAPACK (a NaN,
    an infinity, a subnormal pivot) included, and the input untouched."""
    for name, a in _hard_stacks(*shape, seed=sum(shape)).items():
        before = a.copy()
        lu, piv, info = kernels.getrf(a, fortran=True, lapack=True)
        want_lu, want_piv, want_info = _lapack(a)
        np.testing.assert_array_equal(lu.view(np.uint32), want_lu.view(np.uint32), err_msg=name)
        np.testing.assert_array_equal(piv, want_piv, err_msg=name)
        np.testing.assert_array_equal(info, want_info, err_msg=name)
        np.testing.assert_array_equal(a.view(np.uint32), before.view(np.uint32), err_msg=name)


def test_the_openblas_kernels_of_avx2_and_avx512_machines_are_replayed():
    """On OpenBLAS's SkylakeX kernels (AVX-512) and its Haswell and Zen ones (AVX2), the check finds the replay of
    those kernels, and ``getrf`` on single precision runs it."""
    scipy_openblas = [pool for pool in threadpoolctl.threadpool_info()
                      if pool["internal_api"] == "openblas" and "scipy" in pool["filepath"].split("site-packages")[-1]
                      and "numpy" not in pool["filepath"].split("site-packages")[-1]]
    if not scipy_openblas or scipy_openblas[0]["architecture"] not in REPLAYED_ARCHITECTURES:
        pytest.skip("SciPy's LAPACK is not OpenBLAS on kernels the replay follows")
    kernels_found = replay.replayed_getrf_kernels()
    assert kernels_found == REPLAYED_ARCHITECTURES[scipy_openblas[0]["architecture"]], KERNEL_NAMES.get(kernels_found)
    assert replay.getrf_kernels(np.dtype(np.float32), REPLAY_MAX_ORDER, 3) == kernels_found
    assert replay.getrf_kernels(np.dtype(np.float32), REPLAY_MAX_ORDER + 1, REPLAY_MAX_ORDER + 1) is None
    assert replay.getrf_kernels(np.dtype(np.float64), 8, 8) is None


def test_a_replay_that_differs_from_lapack_in_one_bit_is_not_used(monkeypatch):
    """The two kernel families' replays differ on the checked shapes (the check tells them apart), and where
    neither gives LAPACK's bits the check finds none and ``getrf`` runs the LAPACK loop."""
    a = np.random.default_rng(1).standard_normal((64, 9, 9)).astype(np.float32)
    results = {kernels_: replay._factored(a, kernels_)[0] for kernels_ in KERNEL_NAMES}
    assert not np.array_equal(results[SKYLAKEX], results[HASWELL])
    factored = replay._factored

    def off_by_one_bit(stack, kernels_):
        bits, piv, info = factored(stack, kernels_)
        return (bits ^ np.uint32(1), piv, info) if kernels_ is None else (bits, piv, info)

    monkeypatch.setattr(replay, "_factored", off_by_one_bit)
    assert replay.replayed_getrf_kernels.__wrapped__() is None
    monkeypatch.setattr(replay, "replayed_getrf_kernels", lambda: None)
    ran = []
    lapack_loop = kernels.lapack_loop
    monkeypatch.setattr(kernels, "lapack_loop", lambda op, *rest: ran.append(op) or lapack_loop(op, *rest))
    kernels.getrf(a, lapack=True)
    assert ran == ["getrf_each"]


def test_the_replay_checks_its_input_as_it_reads_it():
    """``check_finite`` raises SciPy's ValueError for an infinity or NaN in any matrix the replay reads."""
    a = np.random.default_rng(2).standard_normal((100, 6, 6)).astype(np.float32)
    a[99, 5, 0] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        kernels.getrf(a, check_finite=True, lapack=True)
