"""The replays of OpenBLAS's single-precision LU, Cholesky and QR: LAPACK's results to the bit, or not used."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg as sla
import threadpoolctl

from hetlapack.batched import _qr_replay, kernels, replay
from hetlapack.batched._interleave import SMALL_ORDER_LANES
from hetlapack.batched._lu import REDO_INFO
from hetlapack.batched._lu_replay import HASWELL, KERNEL_NAMES, SKYLAKEX
from hetlapack.batched._simd import WIDTH
from hetlapack.batched.compiling import INDEX_DTYPE, packed_lu_only
from hetlapack.batched.threads import kernel_lanes, launch_checked, replay_loop
from hetlapack.blas_threads import one_thread_per_call
from hetlapack.perf.model import REPLAY_MAX_N
from hetlapack.testing.matrices import layouts

#: Shapes on either side of every block boundary of OpenBLAS's kernels: orders 1-16 (and past them, where the loop
#: runs), four-column products, tall matrices with blocks of 16 rows and odd rows, wide ones.
SHAPES = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (8, 8), (9, 9), (13, 13), (16, 16), (17, 16), (16, 17),
          (40, 4), (37, 16), (24, 5), (3, 1), (1, 3), (6, 9)]

#: Shapes past ``getf2``'s orders (the blocked replay on OpenBLAS's SkylakeX kernels, the loop on others): one panel
#: (17), the first split (20), panels within panels (32, 33, 47, 64), triangular solves of 16, 8 and 4 rows, rows
#: below the last panel and columns right of it.
BLOCKED_SHAPES = [(17, 17), (20, 20), (32, 32), (33, 33), (47, 47), (64, 64), (64, 17), (17, 64), (40, 33), (33, 40)]

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


@pytest.mark.parametrize("shape", SHAPES + BLOCKED_SHAPES, ids=str)
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


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_lu_replays_compiled_per_order_are_lapacks_bit_for_bit(n):
    """Stacks of 64 matrices of order 2-4 run the replay's versions compiled for their order (order 2 in loops over
    ``SMALL_ORDER_LANES`` lanes, 3 and 4 on one vector): SciPy's ``sgetrf`` bit for bit, hard cases included, and
    ``lu``'s pieces the bits ``plu`` gives from those factors."""
    assert kernel_lanes("getrf_replay", np.dtype(np.float32), 64, n, n) == (SMALL_ORDER_LANES if n == 2 else WIDTH)
    for name, stack in _hard_stacks(n, n, seed=40 + n).items():
        a = np.concatenate([stack, stack[::-1], stack[:16]])
        lu, piv, info = kernels.getrf(a, lapack=True)
        want_lu, want_piv, want_info = _lapack(a)
        np.testing.assert_array_equal(lu.view(np.uint32), want_lu.view(np.uint32), err_msg=name)
        np.testing.assert_array_equal(piv, want_piv, err_msg=name)
        np.testing.assert_array_equal(info, want_info, err_msg=name)
        for permute_l, p_matrix in itertools.product((False, True), (False, True)):
            with np.errstate(all="ignore"):
                got = kernels.lu(a, permute_l=permute_l, p_matrix=p_matrix, lapack=True)
            expected = kernels.plu(want_lu, want_piv, permute_l=permute_l, p_matrix=p_matrix)
            for ours, theirs in zip(got, expected, strict=True):
                np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32),
                                              err_msg=f"{name} {permute_l} {p_matrix}")


def _replayed_lu(a: np.ndarray, kernels_: int, lanes: int, fortran: bool = False) -> tuple[np.ndarray, ...]:
    """The replay of ``kernels_``'s LU on the float32 stack ``a`` with ``lanes`` matrices per buffer: the packed
    LU's bits (matrices in Fortran order where ``fortran``), the pivots and ``info``."""
    out = np.empty(a.shape, dtype=a.dtype)
    out = out.transpose(0, 2, 1).copy().transpose(0, 2, 1) if fortran else out
    piv = np.empty((a.shape[0], min(a.shape[1:])), dtype=INDEX_DTYPE)
    info = np.zeros(a.shape[0], dtype=INDEX_DTYPE)
    launch_checked("getrf_replay", False, a.dtype, *a.shape, a, out, piv, info, kernels_,
                   *packed_lu_only(*a.shape[1:], a.dtype), lanes=lanes)
    return out.view(np.uint32), piv, info


@pytest.mark.parametrize("kernels_", list(KERNEL_NAMES), ids=KERNEL_NAMES.get)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_lu_replay_on_simd_vectors_gives_the_bits_of_its_loop_over_lanes(kernels_, shape):
    """A buffer of one vector of matrices runs the replay on SIMD vectors (``_lu_replay._replay_vector``), a wider
    one in loops over the lanes: the same roundings of either kernel family, bit for bit, on this machine whichever
    family its LAPACK runs (the check against LAPACK covers that one only). A matrix left to LAPACK (``REDO_INFO``)
    is compared by ``info`` alone."""
    for name, a in _hard_stacks(*shape, seed=sum(shape)).items():
        vector, loop = (_replayed_lu(a, kernels_, lanes) for lanes in (WIDTH, 2 * WIDTH))
        np.testing.assert_array_equal(vector[2], loop[2], err_msg=name)
        kept = vector[2] != REDO_INFO
        for ours, theirs in zip(vector[:2], loop[:2]):
            np.testing.assert_array_equal(ours[kept], theirs[kept], err_msg=name)


@pytest.mark.parametrize("kernels_", list(KERNEL_NAMES), ids=KERNEL_NAMES.get)
@pytest.mark.parametrize(("order", "lanes"), [(2, SMALL_ORDER_LANES), (4, WIDTH)])
def test_the_lu_replay_of_orders_two_and_four_straight_from_the_stack_gives_the_bits_of_the_buffered_replay(
        kernels_, order, lanes):
    """At orders 2 and 4 the replay factors groups of ``WIDTH`` matrices that lie one after another in registers
    straight from the stack, and sends a chunk that is not the common case (a subnormal or zero pivot, an infinity
    or NaN, at order 2 a singular ``U``) to its buffer: the packed LU (either layout), pivots and ``info`` are bitwise
    what the buffered replay gives on a strided view of the same matrices, either memory order, either kernel
    family."""
    for name, stack in _hard_stacks(order, order, seed=40 + order).items():
        stack = np.concatenate([stack] * (lanes // 8))
        for a, fortran in itertools.product((stack, np.asfortranarray(stack)), (False, True)):
            direct = _replayed_lu(a, kernels_, lanes, fortran)
            buffered = _replayed_lu(layouts(a)["strided"], kernels_, lanes, fortran)
            for ours, theirs in zip(direct, buffered, strict=True):
                np.testing.assert_array_equal(ours, theirs, err_msg=name)


@pytest.mark.parametrize("shape", BLOCKED_SHAPES, ids=str)
def test_the_blocked_lu_replay_runs_on_one_vector_of_matrices_and_leaves_wider_buffers_to_lapack(shape):
    """Past ``getf2``'s orders the replay runs on buffers of one vector of matrices (every stack of more than a few
    gets them); a wider buffer's matrices it marks for LAPACK (``REDO_INFO``), which ``getrf`` then factors."""
    a = _hard_stacks(*shape, seed=sum(shape))["normal"]
    assert kernel_lanes("getrf_replay", np.dtype(np.float32), a.shape[0], *shape) == WIDTH
    np.testing.assert_array_equal(_replayed_lu(a, SKYLAKEX, 2 * WIDTH)[2], REDO_INFO)
    assert not np.any(_replayed_lu(a, SKYLAKEX, WIDTH)[2] == REDO_INFO)


@pytest.mark.parametrize("shape", SHAPES + BLOCKED_SHAPES[:3], ids=str)
def test_the_lu_replay_writes_lus_pieces_from_its_buffers_as_plu_does_from_the_packed_factors(shape):
    """``lu`` of float32 stacks, P (or the row indices), L and U written straight from the replay's buffers, gives
    the bits ``plu`` gives from the replay's packed LU, every option, C- and Fortran-ordered stacks; matrices the
    replay leaves to LAPACK (subnormal pivots, infinities and NaNs) are factored again as ``getrf`` does."""
    for name, a in _hard_stacks(*shape, seed=sum(shape)).items():
        for stack, permute_l, p_matrix in itertools.product((a, np.asfortranarray(a)), (False, True), (False, True)):
            with np.errstate(all="ignore"):
                packed, piv, _ = kernels.getrf(stack, lapack=True)
                got = kernels.lu(stack, permute_l=permute_l, p_matrix=p_matrix, lapack=True)
            expected = kernels.plu(packed, piv, permute_l=permute_l, p_matrix=p_matrix)
            for ours, theirs in zip(got, expected, strict=True):
                assert ours.dtype == theirs.dtype and ours.flags.c_contiguous
                np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32),
                                              err_msg=f"{name} {permute_l} {p_matrix}")


def test_single_precision_lu_takes_one_vector_of_matrices_per_buffer():
    """The LU replay's buffer holds one SIMD vector of matrices, at orders 3 and 4 (compiled one by one) too; orders
    1 and 2 keep the loops over ``SMALL_ORDER_LANES`` lanes."""
    f32 = np.dtype(np.float32)
    assert kernel_lanes("getrf_replay", f32, 1000, 5, 5) == kernel_lanes("getrf_replay", f32, 1000, 16, 3) == WIDTH
    assert kernel_lanes("getrf_replay", f32, 1000, 3, 3) == kernel_lanes("getrf_replay", f32, 1000, 4, 4) == WIDTH
    assert kernel_lanes("getrf_replay", f32, 1000, 1, 1) == kernel_lanes("getrf_replay", f32, 1000, 2, 2) == 32


def _spd_stacks(n: int, seed: int) -> dict[str, np.ndarray]:
    """float32 stacks of order-``n`` symmetric matrices: positive definite, badly scaled, not positive definite, with
    a NaN or an infinity."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((24, n, n))
    spd = g @ g.transpose(0, 2, 1) + n * np.eye(n)
    scale = np.logspace(-15, 15, n)
    stacks = {"spd": spd, "graded": spd * scale[:, None] * scale, "integers": rng.integers(-3, 4, (24, n, n)) + 0.0}
    stacks["integers"] = stacks["integers"] + stacks["integers"].transpose(0, 2, 1) + 6 * n * np.eye(n)
    indefinite = spd.copy()
    indefinite[::3, n - 1, n - 1] = -1.0
    indefinite[1::3, n // 2, n // 2] = 0.0
    stacks["indefinite"] = indefinite
    nonfinite = spd.copy()
    nonfinite[2, 0, n - 1] = nonfinite[2, n - 1, 0] = np.nan
    nonfinite[4, n - 1, n - 1] = np.inf
    stacks["nonfinite"] = nonfinite
    return {name: stack.astype(np.float32) for name, stack in stacks.items()}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17])
@pytest.mark.parametrize("lower", [False, True], ids=["upper", "lower"])
def test_single_precision_cholesky_is_lapacks_bit_for_bit(n, lower):
    """``potrf``, where the replay runs and where the loop does: every bit and ``info`` SciPy's ``spotrf`` gives, with
    the other triangle zero or kept, in C and Fortran order, failing matrices and NaNs included, the input
    untouched."""
    potrf = sla.lapack.get_lapack_funcs("potrf", dtype=np.float32)
    for name, a in _spd_stacks(n, seed=n).items():
        before = a.copy()
        for clean in (True, False):
            with one_thread_per_call(), np.errstate(all="ignore"):
                want = [potrf(matrix, lower=lower, clean=clean) for matrix in a]
            for stack in (a, np.asfortranarray(a.transpose(1, 2, 0)).transpose(2, 0, 1)):
                c, info = kernels.potrf(stack, lower=lower, clean=clean, lapack=True)
                np.testing.assert_array_equal(c.view(np.uint32), np.stack([w[0] for w in want]).view(np.uint32),
                                              err_msg=f"{name} clean={clean}")
                np.testing.assert_array_equal(info, [w[1] for w in want], err_msg=name)
        np.testing.assert_array_equal(a.view(np.uint32), before.view(np.uint32), err_msg=name)


#: QR's shapes: square and tall ones the replay takes (SkylakeX's small kernels at up to 8 rows, the blocks of four
#: rows, norms of columns at either address parity), and past its orders and wide ones, where the loop runs.
QR_SHAPES = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7), (8, 8), (9, 9), (12, 12), (13, 13), (16, 16),
             (2, 1), (6, 5), (7, 3), (8, 2), (11, 4), (16, 9), (16, 1), (17, 17), (20, 3), (24, 24), (29, 13),
             (32, 32), (33, 33), (3, 5)]


@pytest.mark.parametrize("shape", QR_SHAPES, ids=str)
def test_single_precision_qr_is_lapacks_bit_for_bit(shape):
    """``qr``, where the replay runs and where the loop does: every bit of SciPy's economic and full Q and its R
    (``sgeqrf`` and ``sorgqr``), from C- and Fortran-ordered stacks, with zero columns (no reflector), columns small
    enough that LAPACK rescales them, overflow, NaNs and infinities (left to LAPACK), the input untouched."""
    stacks = _hard_stacks(*shape, seed=sum(shape))
    stacks["tiny"] = stacks["normal"] * np.float32(1e-33)
    for name, a in stacks.items():
        before = a.copy()
        for mode in ("economic", "full"):
            with one_thread_per_call(), np.errstate(all="ignore"):
                want = [sla.qr(matrix, mode=mode, check_finite=False) for matrix in a]
            ncols = min(shape) if mode == "economic" else shape[0]
            for stack in (a, np.asfortranarray(a.transpose(1, 2, 0)).transpose(2, 0, 1)):
                with np.errstate(all="ignore"):
                    q, r = kernels.qr(stack, ncols, ncols, fortran=True, lapack=True)
                np.testing.assert_array_equal(q.view(np.uint32), np.stack([w[0] for w in want]).view(np.uint32),
                                              err_msg=f"{name} {mode} Q")
                np.testing.assert_array_equal(r.view(np.uint32), np.stack([w[1] for w in want]).view(np.uint32),
                                              err_msg=f"{name} {mode} R")
        np.testing.assert_array_equal(a.view(np.uint32), before.view(np.uint32), err_msg=name)


def _replayed_qr(a: np.ndarray, kernels_: int, lanes: int) -> tuple[np.ndarray, ...]:
    """The bits of the replay of ``kernels_``'s QR (full Q and R) on the float32 stack ``a``, ``lanes`` matrices at
    a time."""
    batch, m, n = a.shape
    q, r = np.empty((batch, m, m), dtype=a.dtype), np.empty((batch, m, n), dtype=a.dtype)
    with np.errstate(all="ignore"):
        replay_loop("qr_replay", a.dtype, batch, m, False, (a, q, r), kernels_, lanes)
    return q.view(np.uint32), r.view(np.uint32)


@pytest.mark.parametrize("kernels_", list(KERNEL_NAMES), ids=KERNEL_NAMES.get)
@pytest.mark.parametrize("shape", [shape for shape in QR_SHAPES if shape[1] <= shape[0] <= REPLAY_MAX_N["geqrf"]],
                         ids=str)
def test_the_qr_replay_on_simd_vectors_gives_the_bits_of_its_replay_matrix_by_matrix(kernels_, shape):
    """``WIDTH`` matrices at a time on SIMD vectors, the QR replay (``_qr_replay``, written once for a matrix and
    for a vector of them) gives the bits of its replay of each matrix, for either kernel family, on this machine
    whichever family its LAPACK runs: on dense stacks (on vectors), on those with a zero column, subnormal, huge
    or non-finite entries (a chunk whose lanes would branch apart goes matrix by matrix), and on a last chunk
    shorter than a vector."""
    stacks = _hard_stacks(*shape, seed=sum(shape))
    stacks["short last chunk"] = stacks["normal"][:WIDTH + 3]
    for name, a in stacks.items():
        for ours, theirs, part in zip(_replayed_qr(a, kernels_, WIDTH), _replayed_qr(a, kernels_, 1), "QR"):
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{name} {part}")


def test_a_dense_chunk_is_replayed_on_vectors_and_one_with_a_triangular_matrix_is_not():
    """The QR replay takes a chunk of dense matrices on vectors, and leaves one holding a matrix already upper
    triangular (a zero column below the diagonal: no reflector in its lane) to the replay of each matrix, with
    nothing written."""
    m = n = 5
    a = np.random.default_rng(3).standard_normal((WIDTH, m, n)).astype(np.float32)
    scratch = [np.empty((m, n, WIDTH), np.float32), np.empty((m, m, WIDTH), np.float32),
               np.empty((n, WIDTH), np.float32), np.empty((m, WIDTH), np.float32), np.empty(WIDTH, np.float32)]
    for dense in (True, False):
        if not dense:
            a[2] = np.triu(a[2])
        q, r = np.full((WIDTH, m, m), 7, np.float32), np.full((WIDTH, m, n), 7, np.float32)
        kept = _qr_replay._replayed_on_vectors(a, 0, *scratch, q, r, HASWELL)
        assert kept == dense
        if dense:
            np.testing.assert_array_equal(q.view(np.uint32), _replayed_qr(a, HASWELL, 1)[0])
        else:
            assert (q == 7).all() and (r == 7).all()


def _replayed_architecture() -> int:
    """The kernels the replays follow for SciPy's OpenBLAS in this process; skips where it runs on others."""
    scipy_openblas = [pool for pool in threadpoolctl.threadpool_info()
                      if pool["internal_api"] == "openblas" and "scipy" in pool["filepath"].split("site-packages")[-1]
                      and "numpy" not in pool["filepath"].split("site-packages")[-1]]
    if not scipy_openblas or scipy_openblas[0]["architecture"] not in REPLAYED_ARCHITECTURES:
        pytest.skip("SciPy's LAPACK is not OpenBLAS on kernels the replay follows")
    return REPLAYED_ARCHITECTURES[scipy_openblas[0]["architecture"]]


def test_the_openblas_kernels_of_avx2_and_avx512_machines_are_replayed():
    """On OpenBLAS's SkylakeX kernels (AVX-512) and its Haswell and Zen ones (AVX2), the checks find the replays of
    those kernels, and ``getrf`` and ``potrf`` on single precision run them."""
    expected = _replayed_architecture()
    assert replay.replayed_getrf_kernels() == expected, KERNEL_NAMES.get(replay.replayed_getrf_kernels())
    assert replay.replayed_potrf_kernels() == expected, KERNEL_NAMES.get(replay.replayed_potrf_kernels())
    f32 = np.dtype(np.float32)
    lu_max, cholesky_max = REPLAY_MAX_N["getrf"], REPLAY_MAX_N["potrf"]
    assert replay.getrf_kernels(f32, 400, 3) == replay.potrf_kernels(f32, cholesky_max) == expected
    assert replay.getrf_kernels(f32, lu_max, lu_max) == replay.getrf_kernels(f32, 17, lu_max) == expected
    assert replay.getrf_kernels(f32, lu_max + 1, 17) is replay.potrf_kernels(f32, cholesky_max + 1) is None
    assert replay.getrf_kernels(np.dtype(np.float64), 8, 8) is replay.potrf_kernels(np.float64, 8) is None


def test_the_openblas_qr_of_avx2_and_avx512_machines_is_replayed():
    """The same for ``qr``: the check finds the replay of those kernels. On one AMD EPYC (AVX-512) SciPy 1.18.1's
    OpenBLAS (0.3.31.dev, SkylakeX kernels) gave Q and R of matrices of 6 and 7 rows that the replay does not, which
    ones from process to process (6 x 5 and 7 x 3 in one, 6 x 6 and 7 x 7 too in another): there the check leaves
    QR to the LAPACK loop, and this test names the shapes and skips; any other shape that differs fails."""
    expected = _replayed_architecture()
    if replay.replayed_qr_kernels() is None:
        differing = replay.qr_shapes_replayed_otherwise(expected)
        assert differing and all(m in (6, 7) for m, _ in differing), differing
        pytest.skip(f"this OpenBLAS's QR of the shapes {differing} rounds otherwise than the replay of its "
                    f"{KERNEL_NAMES[expected]} kernels: the LAPACK loop runs")
    assert replay.replayed_qr_kernels() == expected, KERNEL_NAMES.get(replay.replayed_qr_kernels())
    f32, qr_max = np.dtype(np.float32), REPLAY_MAX_N["geqrf"]
    assert replay.qr_kernels(f32, qr_max, qr_max) == replay.qr_kernels(f32, qr_max, 1) == expected
    assert replay.qr_kernels(f32, qr_max + 1, 2) is replay.qr_kernels(f32, 3, 4) is None
    assert replay.qr_kernels(np.dtype(np.float64), 4, 4) is None


#: What a process started with OpenBLAS's Haswell kernels (``OPENBLAS_CORETYPE``) reports: the kernels whose
#: ``getf2`` the check found (which tells what OpenBLAS runs), then each kernels the LU replay follows past ``getf2``'s
#: orders, at every square order to 64 and at the tall and wide extremes.
_HASWELL_PROCESS = """
import numpy as np
from hetlapack.batched import replay
shapes = [(n, n) for n in range(17, 65)] + [(64, 17), (17, 64)]
blocked = {str(replay.getrf_kernels(np.dtype(np.float32), m, n)) for m, n in shapes}
print(replay.replayed_getrf_kernels(), *sorted(blocked))
"""


def test_the_blocked_lu_replay_follows_openblas_haswell_kernels_too():
    """The blocked LU replay follows OpenBLAS's Haswell kernels (AVX2 machines', Zen's too), whose ``strsm`` solves
    8 rows at a time and whose ``sgemm`` keeps two sums in some tiles: checked here in a process that asks OpenBLAS
    for those kernels, which any x86-64 machine with AVX2 runs."""
    _replayed_architecture()
    environment = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    run = subprocess.run([sys.executable, "-c", _HASWELL_PROCESS], env=environment, capture_output=True, text=True,
                         check=True)
    unblocked, *blocked = run.stdout.split()
    if unblocked != str(HASWELL):
        pytest.skip(f"asked for its Haswell kernels, OpenBLAS's getf2 rounded as the replay of {unblocked} does")
    assert blocked == [str(HASWELL)], run.stdout


_CHECKS = {"lu": ("_factored_lu", "replayed_getrf_kernels", "getrf_each"),
           "cholesky": ("_factored_cholesky", "replayed_potrf_kernels", "potrf_each"),
           "qr": ("_factored_qr", "replayed_qr_kernels", "qr_each")}


@pytest.mark.parametrize("op", list(_CHECKS))
def test_a_replay_that_differs_from_lapack_in_one_bit_is_not_used(monkeypatch, op):
    """The two kernel families' replays differ (the check tells them apart), and where neither gives LAPACK's bits
    the check finds none and the LAPACK loop runs."""
    g = np.random.default_rng(1).standard_normal((64, 9, 9))
    a = (g @ g.transpose(0, 2, 1) + 9 * np.eye(9)).astype(np.float32)
    name, check_name, loop = _CHECKS[op]
    factored = getattr(replay, name)
    assert not np.array_equal(factored(a, SKYLAKEX)[0], factored(a, HASWELL)[0])

    def off_by_one_bit(stack, kernels_):
        bits, *rest = factored(stack, kernels_)
        return (bits ^ np.uint32(1) if kernels_ is None else bits, *rest)

    monkeypatch.setattr(replay, name, off_by_one_bit)
    assert getattr(replay, check_name).__wrapped__() is None
    monkeypatch.setattr(replay, check_name, lambda: None)
    ran = []
    lapack_loop = kernels.lapack_loop
    monkeypatch.setattr(kernels, "lapack_loop", lambda loop, *rest: ran.append(loop) or lapack_loop(loop, *rest))
    if op == "lu":
        kernels.getrf(a, lapack=True)
    elif op == "cholesky":
        kernels.potrf(a, lower=False, clean=True, lapack=True)
    else:
        kernels.qr(a, 9, 9, lapack=True)
    assert ran == [loop]


def test_the_replays_check_their_input_as_they_read_it():
    """``check_finite`` raises SciPy's ValueError for an infinity or NaN in any matrix a replay reads (for the
    Cholesky, in the triangle it does not read too)."""
    a = np.random.default_rng(2).standard_normal((100, 6, 6)).astype(np.float32)
    a[99, 5, 0] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        kernels.getrf(a, check_finite=True, lapack=True)
    with pytest.raises(ValueError, match="infs or NaNs"):
        kernels.qr(a, 6, 6, check_finite=True, lapack=True)
    spd = np.repeat(np.eye(6, dtype=np.float32)[None] * 2, 100, axis=0)
    spd[99, 5, 0] = np.nan  # below the diagonal: the upper factor does not read it
    with pytest.raises(ValueError, match="infs or NaNs"):
        kernels.potrf(spd, lower=False, clean=True, check_finite=True, lapack=True)
