"""The stacked kernels of ``hetlapack.batched.kernels`` against SciPy/LAPACK, matrix by matrix."""

from __future__ import annotations

import functools
import itertools
import os

import numba
import numpy as np
import pytest
import scipy.linalg as sla
from scipy.linalg import lapack

from hetlapack.batched import _cholesky, _interleave, _lu, _qr, compiling, kernels
from hetlapack.batched._interleave import SMALL_ORDER_LANES, WIDE_LANES, lanes_for, permuted, smallest_normal
from hetlapack.batched._lu import divides_by_pivot
from hetlapack.batched._simd import WIDTH
from hetlapack.batched._transpose import transpose_block
from hetlapack.batched.threads import kernel_lanes
from hetlapack.contract.scipy_rules import cho_factor_cleans, cholesky_as_scipy
from hetlapack.blas_threads import one_thread_per_call
from hetlapack.testing import (
    cholesky_residual,
    ill_conditioned,
    lu_residual,
    orthogonality_residual,
    qr_residual,
)
from hetlapack.perf.model import INTERLEAVED_DTYPES, SOLVES
from hetlapack.testing.matrices import LAPACK_DTYPES, layouts, random_matrix, spd

DTYPES = [np.dtype(d) for d in LAPACK_DTYPES]
#: The dtypes the interleaved kernels compute in (single precision runs the LAPACK loop): their own tests take these.
INTERLEAVED = [dtype for dtype in DTYPES if dtype in INTERLEAVED_DTYPES]
#: Sizes 1, primes, and batches that leave a partial last chunk of lanes.
SIZES = [1, 2, 7, 13]
BATCH = 37
RESIDUAL_LIMIT = 50


def _tolerance(dtype: np.dtype, n: int) -> float:
    return 100 * max(n, 1) * np.finfo(dtype).eps


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_matches_scipy_per_matrix(dtype, n, lower):
    a = spd(n, dtype, seed=n, batch=(BATCH,))
    c, info = kernels.potrf(a, lower=lower, clean=True)
    assert c.shape == a.shape and c.dtype == dtype and not info.any()
    for a_i, c_i in zip(a, c):
        assert cholesky_residual(a_i, c_i, lower) < RESIDUAL_LIMIT
        np.testing.assert_allclose(c_i, sla.cholesky(a_i, lower=lower), atol=_tolerance(dtype, n))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["C", "F", "strided", "readonly"])
def test_potrf_layouts_and_input_untouched(dtype, layout):
    a = layouts(spd(6, dtype, seed=1, batch=(BATCH,)))[layout]
    before = a.copy()
    c, _ = kernels.potrf(a, lower=True, clean=False)
    np.testing.assert_array_equal(a, before)
    np.testing.assert_array_equal(np.triu(c, 1), np.triu(a, 1))
    np.testing.assert_allclose(np.tril(c), np.linalg.cholesky(a), atol=_tolerance(dtype, 6))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_potrf_info_names_failing_matrices_like_lapack(dtype):
    a = spd(5, dtype, seed=2, batch=(BATCH,))
    a[3, 2, 2] = -1.0
    a[20] = -np.eye(5)
    a[36, 4, 4] = 0.0
    a[36, 4, :4] = a[36, :4, 4] = 1.0
    _, info = kernels.potrf(a, lower=True, clean=True)
    potrf = lapack.get_lapack_funcs("potrf", dtype=dtype)
    expected = [potrf(a_i, lower=True)[1] for a_i in a]
    np.testing.assert_array_equal(info, expected)
    assert set(np.flatnonzero(info)) == {3, 20, 36}


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_versions_compiled_per_order_equal_the_general_kernel(dtype, n, lower):
    """As for LU: orders 2-4 in a stack of ``BATCH`` run the version compiled for the order, a stack of 8 the
    general kernel; factors (the other triangle kept, or zero) and info codes are bitwise the same."""
    a = spd(n, dtype, seed=30 + n, batch=(BATCH,))
    a[2, n - 1, n - 1] = -1.0
    a[5] = -np.eye(n)
    assert lanes_for(n, n, dtype.itemsize, BATCH, small_order=True) == SMALL_ORDER_LANES
    for clean in (False, True):
        whole, part = kernels.potrf(a, lower=lower, clean=clean), kernels.potrf(a[:8], lower=lower, clean=clean)
        for full, first in zip(whole, part):
            np.testing.assert_array_equal(full[:8], first)
        assert set(np.flatnonzero(whole[1])) == {2, 5}
    assert not (np.triu(whole[0], 1) if lower else np.tril(whole[0], -1)).any()


def test_potrf_ill_conditioned_residual():
    a = ill_conditioned(12, cond=1e10, hermitian=True)
    c, info = kernels.potrf(np.stack([a, a.T.copy()]), lower=True, clean=True)
    assert not info.any()
    assert max(cholesky_residual(a, c_i, True) for c_i in c) < RESIDUAL_LIMIT


@pytest.mark.parametrize("shape", [(0, 4, 4), (3, 0, 0), (2, 0, 5, 5)])
def test_empty_batches_and_zero_size_matrices(shape):
    a = np.zeros(shape)
    c, info = kernels.potrf(a, lower=True, clean=True)
    lu, piv, lu_info = kernels.getrf(a)
    qr, tau = kernels.geqrf(a)
    assert c.shape == lu.shape == qr.shape == shape
    assert info.shape == lu_info.shape == shape[:-2]
    assert piv.shape == tau.shape == (*shape[:-2], shape[-1])
    assert kernels.orgqr(qr, tau, shape[-1]).shape == shape
    _, r, p = kernels.geqp3(a, 0, shape[-2])
    assert r.shape == shape and p.shape == (*shape[:-2], shape[-1])


def test_pivoted_qr_of_matrices_without_rows_keeps_the_columns_in_place():
    q, r, p = kernels.geqp3(np.zeros((3, 0, 5)), 0, 0)
    np.testing.assert_array_equal(p, np.tile(sla.qr(np.zeros((0, 5)), pivoting=True)[2], (3, 1)))
    assert q is None and r.shape == (3, 0, 5) and p.dtype == np.int32


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (4, 4), (7, 7), (13, 13), (9, 4), (4, 9)])
def test_getrf_pivots_and_factors_equal_lapack(dtype, shape):
    a = random_matrix((BATCH, *shape), dtype, seed=sum(shape))
    lu, piv, info = kernels.getrf(a)
    getrf = lapack.get_lapack_funcs("getrf", dtype=dtype)
    for a_i, lu_i, piv_i in zip(a, lu, piv):
        lu_ref, piv_ref, _ = getrf(a_i)
        np.testing.assert_array_equal(piv_i, piv_ref)
        np.testing.assert_allclose(lu_i, lu_ref, atol=_tolerance(dtype, max(shape)))
        assert lu_residual(a_i, lu_i, piv_i) < RESIDUAL_LIMIT
    assert piv.dtype == np.int32 and not info.any()


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("n", [5, 16])
def test_any_matrices_per_buffer_give_the_same_bits(dtype, n):
    """The matrices per buffer (``lanes``: calibration picks them per machine) change how many matrices one pass
    factors, never a matrix's arithmetic: every choice gives the default's factors, pivots and info, a ragged last
    buffer included."""
    general_stack = random_matrix((77, n, n), dtype, seed=n)
    general_stack[5] = 0.0
    hermitian = spd(n, dtype, batch=(77,), seed=n)
    lu_default, cho_default = kernels.getrf(general_stack), kernels.potrf(hermitian, lower=False, clean=True)
    qr_default = kernels.qr(general_stack, n, n)
    for lanes in (8, 16, 24, 64):
        for ours, default in zip(kernels.getrf(general_stack, lanes=lanes), lu_default):
            np.testing.assert_array_equal(ours, default)
        for ours, default in zip(kernels.potrf(hermitian, lower=False, clean=True, lanes=lanes), cho_default):
            np.testing.assert_array_equal(ours, default)
        for ours, default in zip(kernels.qr(general_stack, n, n, lanes=lanes), qr_default):
            np.testing.assert_array_equal(ours, default)


#: Shapes whose full chunks are gathered and scattered in blocks (in registers where runs of eight lie along memory;
#: in strided layouts, buffers beyond an L1 cache of up to 48 KiB, ``BLOCKED_MIN_BYTES``):
#: whole blocks of eight and ragged ones, square and not; (8, 8) and (16, 16) at every buffer size.
BLOCKED_SHAPES = [(8, 8), (16, 16), (24, 24), (25, 25), (33, 33), (40, 17), (17, 40)]
#: Matrices too small for blocks of their rows, copied in blocks of whole records where they lie one after another.
RECORD_SHAPES = [(3, 3), (4, 4), (2, 4), (4, 2), (3, 5), (1, 9), (9, 1)]


def _every_layout(a: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`layouts`, and a stack of Fortran-ordered matrices (each matrix's columns along memory)."""
    return {**layouts(a), "Fortran matrices": np.swapaxes(np.swapaxes(a, 1, 2).copy(), 1, 2)}


def _results(a: np.ndarray, b: np.ndarray) -> dict[str, tuple[np.ndarray, ...]]:
    """Every kernel's outputs for the stack ``a`` (right-hand sides ``b`` for the solves), each copy in or out of a
    buffer included: both output orders, both triangles, reflectors gathered back for Q."""
    m, n = a.shape[1:]
    k = min(m, n)
    lu, piv, info = kernels.getrf(a)
    qr, tau = kernels.geqrf(a)
    results = {"getrf": (lu, piv, info), "getrf F": kernels.getrf(a, fortran=True), "geqrf": (qr, tau),
               "orgqr": (kernels.orgqr(qr, tau, m),), "qr F": kernels.qr(a, k, k, fortran=True)}
    if m == n:
        hermitian = a @ np.conj(np.swapaxes(a, 1, 2)) + n * np.eye(n, dtype=a.dtype)
        for lower in (True, False):
            for clean in (True, False):
                results[f"potrf {lower} {clean}"] = kernels.potrf(hermitian, lower=lower, clean=clean)
            c, _ = results[f"potrf {lower} True"]
            results[f"potrs {lower}"] = (kernels.potrs(c, b, lower=lower),)
        results["potrf F"] = kernels.potrf(np.asfortranarray(hermitian), lower=False, clean=True, fortran=True)
        results["getrs"] = (kernels.getrs(lu, piv, b, trans=0),)
    return results


@numba.njit
def _transpose_blocks(source, source_offset, source_stride, target, target_offset, target_stride, conjugate):
    transpose_block(source, source_offset, source_stride, target, target_offset, target_stride, conjugate)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_block_transposed_in_registers_moves_every_bit(dtype):
    """``transpose_block`` writes ``target[c][r] = source[r][c]`` for rows anywhere in memory (strides of either
    sign, rows of another array's layout), conjugated when asked, bit for bit: NaN payloads, signed zeros and
    infinities arrive as they left, and nothing beside the block is written."""
    rng = np.random.default_rng(7)
    real = np.dtype(dtype.char.lower())
    words = rng.integers(0, 256, size=(12, 10 * dtype.itemsize), dtype=np.uint8)
    source = words.view(dtype)  # every bit pattern, NaNs with payloads among them
    source.view(real)[0, :4] = [np.nan, -0.0, np.inf, -np.inf]
    for flipped in (False, True):
        rows = source[::-1] if flipped else source
        for conjugate in (False, True):
            target = np.zeros((10, 11), dtype=dtype)
            # rows 2..9 of ``rows`` from column 1; target rows 1..8 from column 2
            _transpose_blocks(rows, 2 * rows.strides[0] + dtype.itemsize, rows.strides[0],
                              target, target.strides[0] + 2 * dtype.itemsize, target.strides[0], conjugate)
            block = rows[2:10, 1:9].T
            expected = np.conj(block) if conjugate else block
            assert target[1:9, 2:10].tobytes() == np.ascontiguousarray(expected).tobytes()
            target[1:9, 2:10] = 0
            assert not target.view(np.uint8).any()


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("shape", BLOCKED_SHAPES + RECORD_SHAPES)
def test_blocked_copies_give_each_matrix_the_bits_it_gets_alone(dtype, shape):
    """Full chunks of large matrices are copied in and out of the buffers in blocks, along rows or columns as the
    matrices lie, and of small ones lying one after another (C- or Fortran-ordered) in blocks of whole records; a
    lone matrix is copied element by element. In every layout, each matrix of a stack of two full
    wide chunks and a ragged one gets the bits it gets alone, from every kernel, and the input is untouched."""
    m, n = shape
    batch = 2 * WIDE_LANES + 3
    b = random_matrix((batch, m, 24), dtype, seed=m + 1)
    for layout, a in _every_layout(random_matrix((batch, m, n), dtype, seed=m)).items():
        before = a.copy()
        stacked = _results(a, b)
        np.testing.assert_array_equal(a, before)
        for index in (0, 9, WIDE_LANES + 37, batch - 1):
            alone = _results(a[index:index + 1], b[index:index + 1])
            for kernel, outputs in stacked.items():
                for ours, expected in zip(outputs, alone[kernel]):
                    if ours is not None:
                        np.testing.assert_array_equal(ours[index], expected[0], err_msg=f"{layout} {kernel} {index}")


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_getrf_versions_compiled_per_order_equal_the_general_kernel(dtype, n):
    """A stack of matrices of order 2-4 runs the version compiled for its order (in ``SMALL_ORDER_LANES`` lanes for
    real matrices below order 4, one vector of real ones at order 4 and of split complex ones); asked for 16 lanes,
    it runs the general kernel. Both give bitwise the same factors, pivots and info codes, zero pivots included, and
    both see an infinity."""
    a = random_matrix((BATCH, n, n), dtype, seed=20 + n)
    a[3, :, 1] = 0.0
    a[6] = 0.0
    one_vector = dtype.kind == "c" or n == 4
    assert kernel_lanes("getrf", dtype, BATCH, n, n) == (WIDTH if one_vector else SMALL_ORDER_LANES)
    whole, general = kernels.getrf(a), kernels.getrf(a, lanes=16)
    for compiled_for_order, general_kernel in zip(whole, general):
        np.testing.assert_array_equal(compiled_for_order, general_kernel)
    assert set(np.flatnonzero(whole[2])) == {3, 6}
    a[BATCH - 1, n - 1, 0] = np.inf
    for stack in (a, a[BATCH - 8:]):
        with pytest.raises(ValueError, match="infs or NaNs"):
            kernels.getrf(stack, check_finite=True)


def _buffers_for_lu(m, n, lanes, dtype, seed):
    """Interleaved ``m x n x lanes`` buffers that reach every branch of the LU kernels: random matrices, a zero
    column, a zero matrix, subnormal pivots (divided by, not multiplied by their reciprocal), an infinity and a NaN,
    and matrices of -1, 0 and 1 (pivot candidates tying; complex ones with real and imaginary parts tying too)."""
    rng = np.random.default_rng(seed)
    imaginary = 1j if np.dtype(dtype).kind == "c" else 0
    plain = (rng.standard_normal((m, n, lanes)) + imaginary * rng.standard_normal((m, n, lanes))).astype(dtype)
    special = plain.copy()
    tiny = np.finfo(dtype).tiny
    special[:, 0, 1] = 0
    special[:, :, 3] = 0
    special[:, 0, 2] *= tiny / 4
    special[0, 0, 5] = tiny / 8
    special[0, 0, 6] = np.nan
    special[m - 1, n - 1, 7] = np.inf
    ties = (rng.integers(-1, 2, size=(m, n, lanes)) + imaginary * rng.integers(-1, 2, size=(m, n, lanes))).astype(dtype)
    return plain, special, ties


@pytest.mark.parametrize("dtype, padding", [(dtype, padding) for dtype in INTERLEAVED for padding in (0, 1)
                                             if not (padding and np.dtype(dtype).kind == "c")], ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (8, 8), (13, 13), (16, 16), (32, 32), (7, 3), (3, 7), (9, 1)])
def test_lu_on_simd_vectors_gives_the_bits_of_the_scalar_kernel(dtype, padding, shape):
    """``_factor_vector`` (a buffer of one vector of real matrices, written on ``_simd`` vectors, its rows padded
    with ``padding`` zeros as ``_interleave.padded_width`` pads them), ``_factor_split`` (the same for complex
    matrices, split into real and imaginary parts) and ``_factor_chunk`` (loops over the lanes) round the same
    operations in the same order: same factors, pivots and info codes, every bit (NaNs' included), on every kind of
    buffer (complex buffers are not padded)."""
    m, n = shape
    lanes = WIDTH
    for buf in _buffers_for_lu(m, n, lanes, dtype, seed=m * n):
        results = []
        for vector in (False, True):
            work = buf.copy()
            if vector and padding:
                work = np.zeros((m, n + padding, lanes), dtype)
                work[:, :n] = buf
            piv, info, recip = np.empty((min(m, n), lanes), np.int64), np.empty(lanes, np.int64), np.empty(lanes, dtype)
            if vector and work.dtype.kind == "c":
                _lu._factor_split(work, piv, info, recip, m, n)
            elif vector:
                nothing = np.empty((0, m, n), dtype)  # no stack to ask the caches for
                _lu._factor_vector(work, piv, info, recip, m, n, (nothing, nothing, 0, False, False))
            else:
                _lu._factor_chunk(work, piv, info, np.empty(lanes, work.real.dtype), recip, m, n, lanes)
            results.append((work[:, :n].copy().view(np.uint8), piv, info))
        for scalar, vector in zip(*results):
            np.testing.assert_array_equal(vector, scalar)


@pytest.mark.parametrize("dtype", LAPACK_DTYPES, ids=str)
@pytest.mark.parametrize("below", [1, 2, 3])
def test_row_swaps_across_the_lanes_move_every_bit(dtype, below):
    """``_lu.swap_pivot_rows`` (exchanges of bits across the lanes where few rows are left below the pivot, a swap
    lane by lane otherwise) moves every bit as a swap does: NaN payloads, infinities, signed zeros and subnormal
    numbers among random bit patterns, in lanes that pivot on each row below and in lanes that keep their own."""
    m = n = 5
    k, lanes = m - 1 - below, 2 * WIDTH
    rng = np.random.default_rng(below)
    buf = rng.integers(0, 256, size=(m, n, lanes * np.dtype(dtype).itemsize), dtype=np.uint8).view(dtype)
    piv = np.zeros((m, lanes), np.int64)
    piv[k] = rng.integers(k, m, size=lanes)
    expected = buf.copy()
    for lane in range(lanes):
        expected[[k, piv[k, lane]], :, lane] = expected[[piv[k, lane], k], :, lane]
    _lu.swap_pivot_rows(buf, k, piv, m, n, lanes)
    np.testing.assert_array_equal(buf.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("op", ["getrf", "potrf"])
def test_lu_and_cholesky_take_one_vector_of_matrices_per_buffer(op):
    """Past the orders compiled one by one, an LU or Cholesky buffer holds one SIMD vector of matrices unless
    calibrated otherwise."""
    assert kernel_lanes(op, np.dtype(np.float64), BATCH, 16, 16) == WIDTH
    assert kernel_lanes(op, np.dtype(np.float32), BATCH, 9, 9) == WIDTH
    assert kernel_lanes(op, np.dtype(np.float64), BATCH, 16, 16, lanes=32) == 32
    assert kernel_lanes(op, np.dtype(np.float64), BATCH, 3, 3) == SMALL_ORDER_LANES
    assert kernel_lanes(op, np.dtype(np.complex128), BATCH, 16, 16) == WIDTH
    assert kernel_lanes(op, np.dtype(np.complex64), BATCH, 9, 9) == WIDTH


def test_complex_lu_of_the_small_orders_takes_one_vector_of_matrices():
    """Complex LU of orders 2-4 runs on one vector of split matrices (``_interleave.small_order_lanes``), real LU of
    order 4 on one vector; order 1, complex Cholesky and real LU below order 4 keep their loops over
    ``SMALL_ORDER_LANES``."""
    complex128 = np.dtype(np.complex128)
    assert kernel_lanes("getrf", complex128, BATCH, 2, 2) == kernel_lanes("getrf", complex128, BATCH, 4, 4) == WIDTH
    assert kernel_lanes("getrf", complex128, BATCH, 1, 1) == SMALL_ORDER_LANES
    assert kernel_lanes("potrf", complex128, BATCH, 3, 3) == SMALL_ORDER_LANES
    assert kernel_lanes("getrf", np.dtype(np.float64), BATCH, 3, 3) == SMALL_ORDER_LANES
    assert kernel_lanes("getrf", np.dtype(np.float64), BATCH, 4, 4) == WIDTH


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_qr_versions_compiled_per_order_equal_the_general_kernel(dtype, n):
    """A stack of square matrices of order 2-4 in buffers of ``WIDE_LANES`` runs the fused QR compiled for its order
    (with the whole ``Q``; without it, the general kernel); asked for 64 lanes, the general kernel. Both give bitwise
    the same ``Q`` and ``R``, with a zero column, a column zero below the diagonal (a negative zero above), tiny and
    huge matrices (larfg's rescaling and its scaled norm), a NaN and a zero matrix; asked to check, it sees a NaN or
    an infinity anywhere in the stack."""
    batch = 2 * WIDE_LANES + 3
    a = random_matrix((batch, n, n), dtype, seed=40 + n)
    a[3, :, 0] = 0.0
    a[4, 1:, 0] = 0.0
    a[4, 0, 0] = -0.0
    a[5] *= np.finfo(dtype).tiny
    a[6] *= np.finfo(dtype).max / 4
    a[7, n - 1, 0] = np.nan
    a[batch - 1] = 0.0
    assert kernel_lanes("qr", dtype, batch, n, n) == WIDE_LANES
    for ncols in (n, 0):
        compiled_for_order, general_kernel = kernels.qr(a, ncols, n), kernels.qr(a, ncols, n, lanes=64)
        for ours, general in zip(compiled_for_order, general_kernel):
            if ours is not None:
                np.testing.assert_array_equal(ours, general)
    q, r = kernels.qr(a, n, n)
    assert np.isnan(r[7]).any() and not np.isnan(r[8]).any()
    np.testing.assert_allclose(q[8] @ r[8], a[8], atol=_tolerance(dtype, n))
    with pytest.raises(ValueError, match="infs or NaNs"):
        kernels.qr(a, n, n, check_finite=True)
    a[7, n - 1, 0] = 1.0
    a[batch - 2, 0, n - 1] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        kernels.qr(a, n, n, check_finite=True)


@pytest.mark.parametrize("dtype", [np.dtype(np.float64), np.dtype(np.float32)], ids=str)
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 2, 2), (3, 3, 3), (5, 5, 5), (8, 8, 8), (13, 13, 13),
                                   (16, 16, 16), (32, 32, 32), (7, 3, 3), (7, 3, 7), (3, 7, 3), (9, 1, 9), (9, 2, 2),
                                   (12, 5, 11), (4, 6, 4)])
@pytest.mark.parametrize("padding", [0, 1])
def test_real_qr_on_simd_vectors_gives_the_bits_of_the_scalar_kernel(dtype, shape, padding):
    """``_qr._factor_vector`` and ``_build_q_vector`` (one vector of real matrices, on ``_simd`` vectors, pairs of
    reflectors applied four columns at a time, then two, then one) and the loops over the lanes round the same
    operations in the same order: the same reflectors, ``tau`` and ``Q``, every bit, with zero columns, a column zero
    below the diagonal, tiny matrices (the rescaled ``larfg``), huge ones (an overflowing sum of squares), a negative
    zero on the diagonal and a NaN, which stays a NaN in the same places; also in buffers whose rows are ``padding``
    elements wider than the matrices (``_interleave.padded_width``), whose padding stays zero."""
    m, n, ncols = shape
    rng = np.random.default_rng(m * n)
    buf = rng.standard_normal((m, n, WIDTH)).astype(dtype)
    buf[:, 0, 2] = 0
    buf[1:, 0, 3] = 0
    buf[:, :, 4] *= np.finfo(dtype).tiny * 16
    buf[0, 0, 5] = np.nan
    buf[0, 0, 6] = -0.0
    buf[:, :, 7] *= np.finfo(dtype).max / 4
    results = []
    for vector in (False, True):
        work, tau = np.zeros((m, n + padding, WIDTH), dtype), np.empty((min(m, n), WIDTH), dtype)
        work[:, :n] = buf
        norm, dots = np.empty(WIDTH, dtype), np.empty(WIDTH, dtype)
        q = np.zeros((m, ncols + padding, WIDTH), dtype)
        if vector:
            nothing = np.empty((0, m, n), dtype)  # no stack to ask the caches for
            ahead = (nothing, nothing, nothing, 0, False, False)
            _qr._factor_vector(work, n, tau, norm, dots, ahead)
            _qr._build_q_vector(work, tau, q, ncols, dots, ahead)
        else:
            _qr._factor_chunk(work, n, tau, norm, dots, np.empty((_qr.WORK_ROWS, WIDTH), dtype))
            _qr._build_q_chunk(work, tau, q, ncols, dots, np.empty((_qr.WORK_ROWS, WIDTH), dtype))
        assert not work[:, n:].any() and not q[:, ncols:].any()
        results.append((work, tau, q))
    for scalar, vector in zip(*results):
        nan = np.isnan(scalar)
        np.testing.assert_array_equal(np.isnan(vector), nan)
        np.testing.assert_array_equal(np.where(nan, 0, vector).view(np.uint8), np.where(nan, 0, scalar).view(np.uint8))


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 16, 17, 32])
def test_cholesky_on_simd_vectors_gives_the_bits_of_the_scalar_kernel(dtype, n):
    """``_cholesky._factor_vector`` (one vector of real matrices, on ``_simd`` vectors, each element updated in a
    register through the earlier columns), ``_factor_split`` (the same for complex matrices, split into real and
    imaginary parts) and ``_factor_chunk`` (column passes over the lanes) round the same operations in the same
    order: same factors and info codes, every bit, with matrices that are not positive definite (a negative one, a
    zero and a tiny pivot, a NaN that runs through)."""
    rng = np.random.default_rng(n)
    imaginary = 1j if dtype.kind == "c" else 0
    general = (rng.standard_normal((WIDTH, n, n)) + imaginary * rng.standard_normal((WIDTH, n, n))).astype(dtype)
    stack = general @ general.transpose(0, 2, 1).conj() + n * np.eye(n, dtype=dtype)
    stack[1] *= -1
    stack[2, n // 2, n // 2] = 0
    stack[3, n - 1, n - 1] = np.finfo(dtype).tiny
    stack[4, n - 1, 0] = np.nan
    buf = np.ascontiguousarray(stack.transpose(1, 2, 0))
    results = []
    for vector in (False, True):
        work, info, recip = buf.copy(), np.empty(WIDTH, np.int64), np.empty(WIDTH, buf.real.dtype)
        if vector and dtype.kind == "c":
            _cholesky._factor_split(work, info, recip, n)
        elif vector:
            _cholesky._factor_vector(work, info, recip, n)
        else:
            _cholesky._factor_chunk(work, info, recip, n, WIDTH)
        results.append((work.view(np.uint8), info))
    for scalar, vector in zip(*results):
        np.testing.assert_array_equal(vector, scalar)
    assert results[0][1][1] == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_getrf_singular_members_and_pivot_ties(dtype):
    a = random_matrix((BATCH, 6, 6), dtype, seed=3)
    a[5, :, 2] = 0.0
    a[17] = 0.0
    ties = np.array([[1, 2, 0], [-1, 1, 1], [1, 0, 3]], dtype=dtype)
    if dtype.kind == "c":
        ties[2, 0] = 0.6 + 0.6j  # |re| + |im| = 1.2 beats |x| = 1, as LAPACK's i?amax ranks
    a[30] = np.eye(6, dtype=dtype)
    a[30, :3, :3] = ties
    lu, piv, info = kernels.getrf(a)
    getrf = lapack.get_lapack_funcs("getrf", dtype=dtype)
    for index, a_i in enumerate(a):
        lu_ref, piv_ref, info_ref = getrf(a_i)
        assert info[index] == info_ref
        np.testing.assert_array_equal(piv[index], piv_ref)
        np.testing.assert_allclose(lu[index], lu_ref, atol=_tolerance(dtype, 6))
    assert set(np.flatnonzero(info)) == {5, 17}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_getrf_ties_left_by_the_elimination_give_a_partial_pivoting(dtype):
    """In 0/1 matrices candidates tie in exact arithmetic after elimination steps too, and the elimination's rounding,
    in another order than LAPACK's, breaks those ties: the pivots may differ from LAPACK's (docs/drop-in.md), but
    each factorization is a partial pivoting, P A = L U with |L| <= 1."""
    a = np.random.default_rng(0).integers(0, 2, size=(300, 13, 13)).astype(dtype)
    lu, piv, _ = kernels.getrf(a)
    assert max(lu_residual(a_i, lu_i, piv_i) for a_i, lu_i, piv_i in zip(a, lu, piv)) < RESIDUAL_LIMIT
    assert np.abs(np.tril(lu, -1)).max() <= 1


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("layout", ["F", "strided", "readonly"])
def test_getrf_geqrf_layouts_and_input_untouched(dtype, layout):
    a = layouts(random_matrix((BATCH, 5, 5), dtype, seed=4))[layout]
    before = a.copy()
    lu, piv, _ = kernels.getrf(a)
    qr, tau = kernels.geqrf(a)
    np.testing.assert_array_equal(a, before)
    lu_ref, piv_ref = sla.lu_factor(before[7])
    np.testing.assert_array_equal(piv[7], piv_ref)
    np.testing.assert_allclose(lu[7], lu_ref, atol=_tolerance(dtype, 5))
    np.testing.assert_allclose(qr[7], sla.qr(before[7], mode="raw")[0][0], atol=_tolerance(dtype, 5))


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (13, 5), (5, 13)])
def test_geqrf_orgqr_match_scipy(dtype, shape):
    a = random_matrix((BATCH, *shape), dtype, seed=5)
    qr, tau = kernels.geqrf(a)
    m, n = shape
    q_full = kernels.orgqr(qr, tau, m)
    q_economic = kernels.orgqr(qr, tau, min(m, n))
    atol = _tolerance(dtype, max(shape))
    for index in (0, 11, BATCH - 1):
        (qr_ref, tau_ref), _ = sla.qr(a[index], mode="raw")
        np.testing.assert_allclose(qr[index], qr_ref, atol=atol)
        np.testing.assert_allclose(tau[index], tau_ref, atol=atol)
        q_ref, r_ref = sla.qr(a[index])
        np.testing.assert_allclose(q_full[index], q_ref, atol=atol)
        np.testing.assert_allclose(q_economic[index], sla.qr(a[index], mode="economic")[0], atol=atol)
        assert qr_residual(a[index], q_full[index], np.triu(qr[index])) < RESIDUAL_LIMIT
        assert orthogonality_residual(q_full[index]) < RESIDUAL_LIMIT


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (13, 5), (5, 13)])
def test_fused_qr_is_orgqr_of_geqrf_and_its_upper_triangle(dtype, shape):
    """One pass gives bitwise what geqrf, orgqr and triu give in three, for every Q width and R height."""
    a = random_matrix((BATCH, *shape), dtype, seed=7)
    a.flags.writeable = False
    qr, tau = kernels.geqrf(a)
    m, k = shape[0], min(shape)
    for ncols, rows in ((k, k), (m, m), (0, k), (0, m)):
        q, r = kernels.qr(a, ncols, rows)
        np.testing.assert_array_equal(r, np.triu(qr[:, :rows, :]))
        if ncols:
            np.testing.assert_array_equal(q, kernels.orgqr(qr, tau, ncols))
        else:
            assert q is None


def test_fused_qr_rejects_impossible_widths():
    with pytest.raises(ValueError, match="qr needs"):
        kernels.qr(np.ones((2, 4, 3)), 2, 4)
    with pytest.raises(ValueError, match="qr needs"):
        kernels.qr(np.ones((2, 4, 3)), 3, 2)


def test_geqrf_zero_column_gives_zero_tau():
    a = random_matrix((3, 4, 3), np.float64, seed=6)
    a[1, 1:, 0] = 0.0
    _, tau = kernels.geqrf(a)
    assert tau[1, 0] == 0.0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lower", [True, False])
def test_potrs_broadcasts_batch_dimensions(dtype, lower):
    a = spd(6, dtype, seed=7, batch=(3, 1))
    b = random_matrix((1, 4, 6, 2), dtype, seed=8)
    c, _ = kernels.potrf(a, lower=lower, clean=False)
    x = kernels.potrs(c, b, lower=lower)
    assert x.shape == (3, 4, 6, 2)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=0, atol=1e3 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_getrs_matches_lu_solve(dtype, trans):
    a = random_matrix((BATCH, 7, 7), dtype, seed=9) + 3 * np.eye(7, dtype=dtype)
    b = random_matrix((BATCH, 7, 3), dtype, seed=10)
    lu, piv, _ = kernels.getrf(a)
    before = b.copy()
    x = kernels.getrs(lu, piv, b, trans=trans)
    np.testing.assert_array_equal(b, before)
    for index in range(BATCH):
        expected = sla.lu_solve((lu[index], piv[index]), b[index], trans=trans)
        np.testing.assert_allclose(x[index], expected, atol=1e3 * np.finfo(dtype).eps)


def test_getrs_broadcasts_one_factorization_over_many_right_hand_sides():
    a = random_matrix((7, 7), np.float64, seed=11) + 3 * np.eye(7)
    lu, piv, _ = kernels.getrf(a[None])
    b = random_matrix((5, 7, 1), np.float64, seed=12)
    x = kernels.getrs(lu, piv, b, trans=0)
    np.testing.assert_allclose(a @ x, b, atol=1e-13)


def _rows_of_interchanges(pivots: np.ndarray, m: int) -> np.ndarray:
    """The column of each row's one in ``P`` (``A = P L U``) for LAPACK's 0-based row interchanges ``pivots``."""
    order = list(range(m))
    for i, row in enumerate(pivots):
        order[i], order[row] = order[row], order[i]
    return np.argsort(order)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (7, 3), (3, 7), (16, 16), (17, 17), (20, 4)])
def test_plu_writes_the_permutation_matrix_of_its_row_indices(dtype, shape):
    """Asked for ``P``, the pass that writes ``L`` and ``U`` writes SciPy's permutation matrix too (``P[i, p[i]] =
    1``, zeros elsewhere, in the real precision), with the same ``L`` and ``U``; by default the row indices, those of
    LAPACK's row interchanges applied in turn, on both sides of the order up to which they are packed in one
    integer."""
    a = random_matrix((BATCH, *shape), dtype, seed=shape[0])
    lu, piv, _ = kernels.getrf(a)
    rows, lower, upper = kernels.plu(lu, piv, permute_l=False)
    np.testing.assert_array_equal(rows, [_rows_of_interchanges(pivots, shape[0]) for pivots in piv])
    permutation, lower_too, upper_too = kernels.plu(lu, piv, permute_l=False, p_matrix=True)
    expected = np.zeros((BATCH, shape[0], shape[0]), dtype=np.finfo(dtype).dtype)
    np.put_along_axis(expected, rows[..., None].astype(np.intp), 1, axis=-1)
    assert rows.dtype == np.int32 and permutation.dtype == expected.dtype
    np.testing.assert_array_equal(permutation, expected)
    np.testing.assert_array_equal(lower_too, lower)
    np.testing.assert_array_equal(upper_too, upper)
    np.testing.assert_allclose(permutation @ lower @ upper, a, atol=_tolerance(dtype, shape[0]) * 10)


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 4), (8, 8), (9, 9), (17, 17), (32, 32), (7, 3), (3, 7)], ids=str)
@pytest.mark.parametrize("lanes", [None, WIDTH, 16])
def test_lu_writes_from_its_buffers_what_plu_writes_from_the_packed_factors(dtype, shape, lanes):
    """``kernels.lu`` (P, L and U written straight from the factorization's buffers) gives bitwise what ``plu`` gives
    from ``getrf``'s packed LU, every option, for C-ordered, Fortran-ordered and strided stacks; a matrix whose
    factors hold a NaN is factored again by LAPACK, and a singular one keeps its zero column."""
    a = random_matrix((BATCH, *shape), dtype, seed=sum(shape))
    a[3] = 0
    a[5, -1, 0] = np.nan
    for stack in (a, np.asfortranarray(a), random_matrix((BATCH, 2 * shape[0], shape[1]), dtype, seed=3)[:, ::2]):
        packed, piv, _ = kernels.getrf(stack, lanes=lanes)
        for permute_l in (False, True):
            for p_matrix in (False, True):
                expected = kernels.plu(packed, piv, permute_l=permute_l, p_matrix=p_matrix)
                got = kernels.lu(stack, permute_l=permute_l, p_matrix=p_matrix, lanes=lanes)
                for ours, theirs in zip(got, expected, strict=True):
                    assert ours.dtype == theirs.dtype and ours.flags.c_contiguous
                    np.testing.assert_array_equal(ours, theirs)
    lower = kernels.lu(a[5:6], permute_l=False)[1]
    _, lower_lapack, _ = sla.lu(a[5], check_finite=False)
    np.testing.assert_array_equal(lower[0], lower_lapack)


@pytest.mark.parametrize("n", [8, 24, 32])
def test_asking_for_the_next_chunk_a_slice_a_step_changes_no_bit(n):
    """The LU and QR kernels on one vector of float64 matrices give the same bits whether they ask for the next
    chunk a slice a step or all at once (``spread_bytes``, which calibration picks): packed LU, pivots, ``lu``'s
    pieces, Q and R, on full chunks and a last partial one, C- and Fortran-ordered."""
    a = random_matrix((3 * WIDTH + 5, n, n), np.float64, seed=n)

    def factors(stack, limit):
        return (*kernels.getrf(stack, lanes=WIDTH, spread_bytes=limit),
                *kernels.lu(stack, permute_l=False, lanes=WIDTH, spread_bytes=limit),
                *kernels.qr(stack, n, n, lanes=WIDTH, spread_bytes=limit))

    for stack in (a, np.asfortranarray(a)):
        for in_slices, all_at_once in zip(factors(stack, 1 << 30), factors(stack, 0), strict=True):
            np.testing.assert_array_equal(in_slices.view(np.uint8), all_at_once.view(np.uint8))


@pytest.mark.parametrize("lapack", [False, True])
@pytest.mark.parametrize("n", [4, 40])
def test_solves_and_plu_refuse_operands_they_would_read_outside_of(n, lapack):
    """Pivots that name no row or are not one per row, and right-hand sides whose rows are not the factors' order,
    raise instead of reaching the compiled loops (which check no bounds: a crash or garbage)."""
    a = random_matrix((16, n, n), np.float64, seed=13) + n * np.eye(n)
    lu, piv, _ = kernels.getrf(a)
    b = random_matrix((16, n, 1), np.float64, seed=14)
    for bad in (n, -1, 10**6):
        wrong = piv.copy()
        wrong[5, 1] = bad
        with pytest.raises(ValueError, match=f"^lu_solve: pivot {bad} names no row of the LU factor of order {n} "):
            kernels.getrs(lu, wrong, b, trans=0, lapack=lapack)
        with pytest.raises(ValueError, match=f"^lu_solve: pivot {bad} names no row of the LU factor of order {n} "):
            kernels.plu(lu, wrong, permute_l=False)
    with pytest.raises(ValueError, match=rf"^the pivots must be of shape \(\.\.\., {n}\)"):
        kernels.getrs(lu, piv[:, :2], b, trans=0, lapack=lapack)
    with pytest.raises(ValueError, match=r"^the pivots must be of shape \(16, "):
        kernels.plu(lu, piv[:, :2], permute_l=True)
    for solve in (lambda rhs: kernels.getrs(lu, piv, rhs, trans=1, lapack=lapack),
                  lambda rhs: kernels.potrs(np.linalg.cholesky(a), rhs, lower=True, lapack=lapack)):
        with pytest.raises(ValueError, match=rf"^b must be of shape \(\.\.\., {n}, k\)"):
            solve(b[:, :-1])
    with pytest.raises(ValueError, match=r"^the factors must be square matrices"):
        kernels.potrs(a[:, :, :-1], b, lower=True)


def _fortran_matrices(x: np.ndarray) -> bool:
    return all(np.asarray(m).flags.f_contiguous for m in x.reshape(-1, *x.shape[-2:]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7, 7), (30, 30), (30, 26), (26, 30)])
def test_fortran_outputs_are_the_c_outputs_reordered(dtype, shape):
    """``fortran=True`` writes SciPy's layout directly (the blocked wide copies included, from 24 columns and a
    full chunk); the values are bitwise those of the C-ordered outputs (pivoted QR's too, whose pivots are
    compared with the rest of the outputs)."""
    a = random_matrix((40, *shape), dtype, seed=11)
    pairs = [(kernels.getrf(a), kernels.getrf(a, fortran=True)),
             (kernels.qr(a, min(shape), min(shape)), kernels.qr(a, min(shape), min(shape), fortran=True)),
             (kernels.geqp3(a, shape[0], shape[0]), kernels.geqp3(a, shape[0], shape[0], fortran=True))]
    if shape[0] == shape[1]:
        h = spd(shape[0], dtype, batch=(40,), seed=12)
        b = random_matrix((40, shape[0], 3), dtype, seed=13)
        for lower, clean in [(True, True), (False, False)]:
            c = kernels.potrf(h, lower=lower, clean=clean)
            cf = kernels.potrf(h, lower=lower, clean=clean, fortran=True)
            x, xf = kernels.potrs(c[0], b, lower=lower), kernels.potrs(c[0], b, lower=lower, fortran=True)
            pairs += [(c, cf), (x, xf)]
        lu, piv, _ = kernels.getrf(a)
        pairs.append((kernels.getrs(lu, piv, b, trans=1), kernels.getrs(lu, piv, b, trans=1, fortran=True)))
    for c_out, f_out in pairs:
        c_out, f_out = (c_out, f_out) if isinstance(c_out, tuple) else ((c_out,), (f_out,))
        np.testing.assert_array_equal(c_out[0], f_out[0])
        assert _fortran_matrices(f_out[0]) and c_out[0].flags.c_contiguous
        for x, y in zip(c_out[1:], f_out[1:]):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 2, 7, 17, 33])
def test_solves_give_one_solution_whatever_the_factors_layout(dtype, n):
    """The solves walk a factor by columns or by rows, whichever is contiguous, and update each unknown in the order
    the others were solved either way: C-ordered, Fortran-ordered and strided factors give one solution, bitwise
    for real dtypes and to rounding for complex ones (the compiler rounds the two walks' complex products apart),
    and it is SciPy's to rounding."""
    a = random_matrix((12, n, n), dtype, seed=14) + 3 * np.eye(n, dtype=dtype)
    h = spd(n, dtype, batch=(12,), seed=15)
    b = random_matrix((12, n, 3), dtype, seed=16)
    lu, piv, _ = kernels.getrf(a, fortran=True)
    factors = {"lu": lu, "upper": kernels.potrf(h, lower=False, clean=True, fortran=True)[0],
               "lower": kernels.potrf(h, lower=True, clean=True, fortran=True)[0]}
    layouts = {"C": np.ascontiguousarray, "F": lambda f: f,
               "strided": lambda f: np.repeat(np.repeat(f, 2, axis=-1), 2, axis=-2)[..., ::2, ::2]}
    cases = [(f"getrs trans={trans}", lambda f, trans=trans: kernels.getrs(f["lu"], piv, b, trans=trans),
              lambda m, trans=trans: sla.lu_solve((lu[m], piv[m]), b[m], trans=trans)) for trans in (0, 1, 2)]
    cases += [(f"potrs lower={lower}", lambda f, side=side, lower=lower: kernels.potrs(f[side], b, lower=lower),
               lambda m, side=side, lower=lower: sla.cho_solve((factors[side][m], lower), b[m]))
              for side, lower in (("lower", True), ("upper", False))]
    eps = np.finfo(dtype).eps
    for name, ours, scipys in cases:
        solutions = {layout: ours({k: relaid(f) for k, f in factors.items()}) for layout, relaid in layouts.items()}
        for layout in ("C", "strided"):
            if np.iscomplexobj(b):
                np.testing.assert_allclose(solutions[layout], solutions["F"], rtol=100 * n * eps, err_msg=name)
            else:
                np.testing.assert_array_equal(solutions[layout], solutions["F"], err_msg=name)
        expected = np.array([scipys(m) for m in range(12)])
        np.testing.assert_allclose(solutions["F"], expected, rtol=100 * n * eps, atol=100 * n * eps, err_msg=name)


def test_kernels_reject_non_lapack_dtypes_and_bad_arguments():
    with pytest.raises(TypeError, match="float32, float64"):
        kernels.potrf(np.eye(3, dtype=np.int64)[None], lower=True, clean=True)
    lu, piv, _ = kernels.getrf(np.eye(3)[None])
    with pytest.raises(ValueError, match="trans"):
        kernels.getrs(lu, piv, np.ones((1, 3, 1)), trans=3)
    qr, tau = kernels.geqrf(np.ones((1, 4, 2)))
    with pytest.raises(ValueError, match="ncols"):
        kernels.orgqr(qr, tau, 5)


def _loop_stacks(dtype: np.dtype, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """A general and a Hermitian positive definite stack of ``shape`` (the latter square, of the larger side), in
    every layout of :func:`_layouts`, large enough to share among threads."""
    m, n = shape
    general = random_matrix((BATCH, m, n), dtype, seed=m * n)
    return {"general": layouts(general), "spd": layouts(spd(max(m, n), dtype, seed=m + n, batch=(BATCH,)))}


def _potrf(a, lower, clean):
    return kernels.potrf(a, lower=lower, clean=clean, fortran=True, lapack=True)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.complex64)], ids=str)
def test_single_precision_factors_on_the_lapack_loop_and_solves_on_its_own_kernels(dtype):
    """No interleaved factorization computes in single precision (none is compiled): each runs the LAPACK loop, or
    its replay, without being asked, and gives its bits; ``geqrf`` and ``orgqr``, which have no loop, refuse. The
    solves, held to their residuals as a double-precision stack's are, run our own kernels (interleaved to their
    small orders, a matrix at a time past them) and give the loop's solutions to single-precision rounding."""
    solves = {kernel for kernel, op in compiling.OWN_ARITHMETIC.items() if op in SOLVES}
    assert solves == {"potrs", "getrs", "solve_each"}
    assert all((dtype in compiling.kernel_dtypes(kernel)) == (kernel in solves) for kernel in compiling.OWN_ARITHMETIC)
    a, b = random_matrix((BATCH, 5, 5), dtype, seed=3), random_matrix((BATCH, 5, 2), dtype, seed=5)
    h = spd(5, dtype, batch=(BATCH,), seed=4)
    lu, piv, _ = kernels.getrf(a, lapack=True)
    pairs = [(kernels.getrf(a), (lu, piv, _)),
             (kernels.lu(a, permute_l=False), kernels.lu(a, permute_l=False, lapack=True)),
             (kernels.potrf(h, lower=True, clean=True), kernels.potrf(h, lower=True, clean=True, lapack=True)),
             (kernels.qr(a, 5, 5), kernels.qr(a, 5, 5, lapack=True))]
    for unasked, loop in pairs:
        for got, expected in zip(unasked, loop, strict=True):
            np.testing.assert_array_equal(got, expected)
    for call in (lambda: kernels.geqrf(a), lambda: kernels.orgqr(a, a[:, 0], 5)):
        with pytest.raises(TypeError, match="computes in float64, complex128, not"):
            call()
    eps = np.finfo(dtype).eps
    for n, limit in ((5, None), (5, 0), (33, 64), (33, 0)):  # interleaved or a matrix at a time, as dispatch says
        a = random_matrix((BATCH, n, n), dtype, seed=n) + 3 * np.eye(n, dtype=dtype)
        b, h = random_matrix((BATCH, n, 2), dtype, seed=n + 1), spd(n, dtype, batch=(BATCH,), seed=n + 2)
        lu, piv, _ = kernels.getrf(a, lapack=True)
        c = kernels.potrf(h, lower=False, clean=True, lapack=True)[0]
        for ours, loop in ((kernels.potrs(c, b, lower=False, interleaved_max_n=limit),
                            kernels.potrs(c, b, lower=False, lapack=True)),
                           (kernels.getrs(lu, piv, b, trans=2, interleaved_max_n=limit),
                            kernels.getrs(lu, piv, b, trans=2, lapack=True))):
            np.testing.assert_allclose(ours, loop, rtol=100 * n * eps, atol=100 * n * eps)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (7, 7), (13, 5), (5, 13), (53, 53)])
def test_lapack_loop_factorizations_are_scipys_bit_for_bit(dtype, shape):
    """``lapack=True`` calls SciPy's own LAPACK routines on each matrix, on a Fortran copy, with the workspace SciPy
    asks for, one BLAS thread per call: every factor, pivot and info is SciPy's to the bit (SciPy's at one BLAS
    thread, where its own results depend on the thread count), in every layout, and the input is not written."""
    m, n = shape
    k = min(m, n)
    for layout, a in _loop_stacks(dtype, shape)["general"].items():
        before = a.copy()
        lu, piv, info = kernels.getrf(a, fortran=True, lapack=True)
        with one_thread_per_call():
            want_lu, want_piv = sla.lu_factor(a)
        np.testing.assert_array_equal(lu, want_lu)
        np.testing.assert_array_equal(piv, want_piv)
        assert not info.any() and _fortran_matrices(lu)
        for mode, ncols, rows in (("full", m, m), ("economic", k, k), ("r", 0, m)):
            q, r = kernels.qr(a, ncols, rows, fortran=True, lapack=True)
            with one_thread_per_call():
                want = sla.qr(a, mode=mode)
            np.testing.assert_array_equal(r, want if isinstance(want, np.ndarray) else want[-1])  # 1.17: bare R
            if mode != "r":
                np.testing.assert_array_equal(q, want[0])
        np.testing.assert_array_equal(a, before, err_msg=layout)
    for layout, a in _loop_stacks(dtype, shape)["spd"].items():
        for lower in (True, False):  # on the transposed matrix with the other triangle where SciPy 1.18 does so
            c, info = cholesky_as_scipy(functools.partial(_potrf, clean=True), a, lower, stacked=True)
            c_kept, _ = cholesky_as_scipy(functools.partial(_potrf, clean=cho_factor_cleans(a, a.dtype, False)), a,
                                          lower, stacked=True)
            with one_thread_per_call():
                np.testing.assert_array_equal(c, sla.cholesky(a, lower=lower), err_msg=layout)
                np.testing.assert_array_equal(c_kept, sla.cho_factor(a, lower=lower)[0], err_msg=layout)
            assert not info.any()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 53])
def test_lapack_loop_solves_are_scipys_bit_for_bit(dtype, n):
    a = spd(n, dtype, seed=n, batch=(BATCH,))
    b = random_matrix((BATCH, n, 3), dtype, seed=n + 1)
    for lower in (True, False):
        c = sla.cholesky(a, lower=lower)
        x = kernels.potrs(c, b, lower=lower, fortran=True, lapack=True)
        with one_thread_per_call():
            np.testing.assert_array_equal(x, sla.cho_solve((c, lower), b))
    lu, piv = sla.lu_factor(a)
    for trans in (0, 1, 2):
        x = kernels.getrs(lu, piv, b[..., :2], trans=trans, fortran=True, lapack=True)
        with one_thread_per_call():
            np.testing.assert_array_equal(x, sla.lu_solve((lu, piv), b[..., :2], trans=trans))


def test_a_lapack_loop_capped_at_one_thread_runs_on_one_with_the_same_bits(monkeypatch):
    """``loop_threads=1`` (the model's cap where concurrent calls of OpenBLAS's routine ran slower than one thread's)
    runs each LAPACK loop on one thread, giving what the loop on every thread worth starting gives; without a cap
    given, each loop takes the model's (``model.lapack_loop_threads``), whoever calls it."""
    import numba

    from hetlapack.batched import threads
    from hetlapack.perf import model

    a = spd(5, np.float32, seed=5, batch=(BATCH,))
    b = random_matrix((BATCH, 5, 2), np.float32, seed=6)
    c, _ = kernels.potrf(a, lower=True, clean=True, lapack=True)
    lu, piv, _ = kernels.getrf(a, lapack=True)
    calls = {
        "potrf": lambda cap: kernels.potrf(a, lower=True, clean=True, lapack=True, loop_threads=cap),
        "getrf": lambda cap: kernels.getrf(a, lapack=True, loop_threads=cap),
        "qr": lambda cap: kernels.qr(a, 5, 5, lapack=True, loop_threads=cap),
        "geqp3": lambda cap: kernels.geqp3(a, 5, 5, loop_threads=cap),
        "potrs": lambda cap: (kernels.potrs(c, b, lower=True, lapack=True, loop_threads=cap),),
        "getrs": lambda cap: (kernels.getrs(lu, piv, b, trans=0, lapack=True, loop_threads=cap),),
    }
    started = []
    call_checked = threads.call_checked
    monkeypatch.setattr(threads, "call_checked",
                        lambda op, dtype, check, count, *rest: started.append(count) or call_checked(op, dtype, check,
                                                                                                  count, *rest))
    monkeypatch.setattr(kernels, "getrf_kernels", lambda *shape: None)  # the LAPACK loops, not their replays
    monkeypatch.setattr(kernels, "potrf_kernels", lambda *shape: None)
    monkeypatch.setattr(kernels, "qr_kernels", lambda *shape: None)
    for name, call in calls.items():
        every, one = call(numba.get_num_threads()), call(1)
        assert started[-2:] == [threads._lapack_threads(BATCH, 5), 1], name
        for got, want in zip(one, every, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=name)
    for one_thread_to, want in ((5, 1), (4, threads._lapack_threads(BATCH, 5))):
        monkeypatch.setitem(model.LOOP_ONE_THREAD_MAX_N, "getrf", one_thread_to)
        calls["getrf"](None)
        assert started[-1] == want


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lapack_loop_reports_lapack_info_and_nonfinite_inputs(dtype):
    """Failures are LAPACK's own ``info`` per matrix (a leading minor, an exactly zero pivot), and
    ``check_finite`` raises SciPy's ValueError for an infinity or NaN in the matrix the loop reads."""
    a = spd(6, dtype, seed=2, batch=(BATCH,))
    a[5, 3, 3] = -1
    _, info = kernels.potrf(a, lower=True, clean=True, lapack=True)
    assert np.flatnonzero(info).tolist() == [5] and info[5] == lapack.get_lapack_funcs("potrf", (a[5],))(a[5])[1]
    g = random_matrix((BATCH, 6, 6), dtype, seed=3)
    g[9, :, 2] = 0
    _, _, info = kernels.getrf(g, lapack=True)
    assert np.flatnonzero(info).tolist() == [9] and info[9] == lapack.get_lapack_funcs("getrf", (g[9],))(g[9])[2]
    g[30, 1, 1] = np.nan
    for call in (lambda: kernels.getrf(g, check_finite=True, lapack=True),
                 lambda: kernels.qr(g, 6, 6, check_finite=True, lapack=True),
                 lambda: kernels.getrs(np.eye(6, dtype=dtype), np.arange(6), g, trans=0, check_finite=True,
                                       lapack=True)):
        with pytest.raises(ValueError, match="infs or NaNs"):
            call()


@pytest.mark.parametrize("kernel", ["interleaved", "interleaved, 32 lanes", "lapack"])
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
@pytest.mark.parametrize("n", [3, 6, 20, 33])
@pytest.mark.parametrize("order", ["C", "F"])
def test_cholesky_checks_both_triangles_on_either_kernel(kernel, lower, n, order):
    """``check_finite`` raises SciPy's ValueError for a NaN in the triangle a Cholesky does not read, as SciPy
    checks the whole matrix, in any matrix of the stack (the last, in a chunk padded with identities, included),
    whether the chunk is copied element by element or in blocks; without it the factor is computed from the
    triangle read."""
    options = {"lapack": kernel == "lapack", "lanes": 32 if "32" in kernel else None}
    for matrix in (7, BATCH - 1):
        a = spd(n, np.float64, seed=4, batch=(BATCH,))
        a[(matrix, 0, n - 1) if lower else (matrix, n - 1, 0)] = np.nan
        a = np.asarray(a, order=order)
        with pytest.raises(ValueError, match="infs or NaNs"):
            kernels.potrf(a, lower=lower, clean=True, check_finite=True, **options)
        c, info = kernels.potrf(a, lower=lower, clean=True, **options)
        assert not info.any() and np.isfinite(c).all()


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
def test_qr_never_hides_a_nan_or_an_infinity_below_the_diagonal(dtype):
    """A column whose entries below the diagonal are NaN and zeros was taken as already reduced (tau 0, a finite
    R), since max() drops a NaN; LAPACK's nrm2 gives NaN, and infinity for an infinite entry."""
    a = np.array([[1.0, 2.0, 0.0], [np.nan, 4.0, 1.0], [0.0, 1.0, 1.0]], dtype)
    packed, tau = kernels.geqrf(a[None])
    (expected, expected_tau), _ = sla.qr(a, mode="raw", check_finite=False)
    assert np.isnan(packed[0, 0, 0]) and np.isnan(expected[0, 0])
    assert np.isnan(tau[0, 0]) and np.isnan(expected_tau[0])
    if np.dtype(dtype).kind == "f":
        b = np.array([[1.0, 2.0], [-np.inf, 4.0]], dtype)
        assert kernels.geqrf(b[None])[0][0, 0, 0] == sla.qr(b, mode="r", check_finite=False)[0][0, 0] == -np.inf


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32, np.complex64])
def test_the_division_rule_is_getf2s_modulus_test(dtype):
    """getf2 divides by a nonzero pivot of modulus below the smallest normal number; the kernel settles most pivots
    by their larger part and takes the modulus only near that bound, with the same answer."""
    tiny = np.finfo(dtype).tiny
    parts = [0.0, tiny / 3, 0.6 * tiny, 0.8 * tiny, tiny, 2.0, np.inf, np.nan]
    complex_dtype = np.dtype(dtype).kind == "c"
    for real in parts:
        for imag in parts if complex_dtype else [0.0]:
            pivot = dtype(complex(real, imag) if complex_dtype else real)
            expected = bool(pivot != 0 and abs(pivot) < tiny)
            assert divides_by_pivot(pivot, tiny) == expected, pivot


def test_the_parallel_loop_runs_every_share_by_address_and_counts_those_that_raised():
    """``_launch.shares`` runs share 0 to ``threads - 1`` of a kernel given by its machine-code address, and counts
    the shares whose kernel raised (what :func:`compiling.compiled` turns into an error)."""
    from numba import types

    from hetlapack.batched import _launch

    def kernel(out, failing, thread, threads):
        out[thread] = thread + threads
        if thread == failing:
            raise ValueError("a share failed")

    argument_types = (types.Array(types.int64, 1, "C"), types.intp)
    signature = types.none(*argument_types, types.intp, types.intp)
    compiled_kernel = numba.njit(signature, nogil=True)(kernel)
    shares, address = _launch.compiled(argument_types), _launch.address(compiled_kernel, signature)
    out = np.zeros(3, dtype=np.int64)
    assert shares(address, (out, -1), 3) == 0 and out.tolist() == [3, 4, 5]
    assert shares(address, (out, 1), 3) == 1


@pytest.mark.parametrize("environment", [{}, {"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "300000"}])
def test_numbas_pool_starts_with_short_spinning_unless_the_environment_says_otherwise(environment, monkeypatch):
    """libgomp reads ``GOMP_SPINCOUNT`` as numba's first ``get_num_threads`` loads it: hetlapack sets it for that
    moment only (child processes do not inherit it), and leaves OpenMP's waiting to the user where they set it."""
    from hetlapack.batched import threads

    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    seen = []
    pool_size = numba.get_num_threads()
    monkeypatch.setattr(numba, "get_num_threads", lambda: seen.append(os.environ.get("GOMP_SPINCOUNT")) or pool_size)
    monkeypatch.setattr(threads, "_pool_started", False)
    assert threads.pool_threads() == threads.pool_threads() == pool_size
    expected = environment.get("GOMP_SPINCOUNT") if environment else str(threads.OPENMP_SPIN_COUNT)
    assert seen == [expected]  # started once; the count is read since without numba's Python function
    assert os.environ.get("GOMP_SPINCOUNT") == environment.get("GOMP_SPINCOUNT")


def test_the_thread_count_is_the_one_the_calling_thread_set():
    """A thread that asked numba for fewer threads (``numba.set_num_threads``) gets no more from the kernels."""
    from hetlapack.batched import threads

    pool_size = threads.pool_threads()
    numba.set_num_threads(1)
    try:
        assert threads.pool_threads() == threads.threads_for(10**4, 8) == 1
    finally:
        numba.set_num_threads(pool_size)
    assert threads.pool_threads() == pool_size == numba.get_num_threads()


@pytest.mark.parametrize("dtype", LAPACK_DTYPES, ids=str)
def test_the_smallest_normal_number_is_read_in_compiled_code_as_numpy_gives_it(dtype):
    """``smallest_normal`` gives NumPy's ``finfo(dtype).tiny`` in compiled code, for real and complex arrays."""
    read = numba.njit(lambda array: smallest_normal(array))
    assert read(np.zeros(1, dtype)) == np.finfo(dtype).tiny == smallest_normal(np.zeros(1, dtype))


def test_permuted_views_are_numpys_transposes():
    """``permuted`` gives the view ``transpose`` does, shape and strides, for every order of the axes of a strided
    view."""
    a = np.arange(5 * 6 * 7.0).reshape(5, 6, 7)[1:, ::-2, 1::3]
    view = numba.njit(lambda a, first, second, third: permuted(a, first, second, third))
    for axes in itertools.permutations(range(3)):
        ours, numpys = view(a, *axes), a.transpose(axes)
        assert ours.strides == numpys.strides
        np.testing.assert_array_equal(ours, numpys)


def _bad_values(dtype) -> list:
    """Every kind of infinity or NaN an element of ``dtype`` can hold."""
    real = [np.nan, np.inf, -np.inf]
    complex_only = [complex(0, np.inf), complex(np.inf, np.nan), complex(1, np.nan)]
    return real + complex_only if np.dtype(dtype).kind == "c" else real


@pytest.mark.parametrize("dtype", LAPACK_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (8, 8), (9, 9), (3, 5), (5, 3)])
def test_lu_check_finite_sees_every_element_of_every_matrix(dtype, shape):
    """The LU kernel and its single-precision replay read the input again only for matrices whose factors hold an
    infinity or NaN: an infinity or NaN anywhere in the input must leave one there, in a random matrix, in a zero
    column (no division), as the pivot and beside an infinite pivot (whose reciprocal is zero), in any chunk of the
    stack."""
    rng = np.random.default_rng(sum(shape))
    m, n = shape
    batch = 2 * WIDTH + 2 * SMALL_ORDER_LANES + 3
    bases = {"random": random_matrix((batch, m, n), dtype, seed=m * n)}
    bases["zero column"] = bases["random"].copy()
    bases["zero column"][:, :, 0] = 0
    bases["infinite pivot"] = bases["random"].copy()
    bases["infinite pivot"][:, 0, 0] = np.inf
    for (name, base), (i, j), bad in itertools.product(bases.items(), itertools.product(range(m), range(n)),
                                                       _bad_values(dtype)):
        if name == "infinite pivot" and (i, j) == (0, 0):
            continue
        a = base.copy()
        a[rng.integers(batch), i, j] = bad
        for check in (functools.partial(kernels.getrf, a, check_finite=True),
                      functools.partial(kernels.lu, a, permute_l=False, check_finite=True)):
            with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                check()
    with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
        kernels.getrf(bases["infinite pivot"], check_finite=True)


@pytest.mark.parametrize("dtype", LAPACK_DTYPES, ids=str)
def test_lu_check_finite_refuses_no_finite_stack_whose_factors_overflow(dtype):
    """A finite matrix whose factors overflow (``-big - big``) is factored again by LAPACK, not refused."""
    big = np.finfo(dtype).max
    a = np.repeat(np.array([[[1.0, big], [1.0, -big]]], dtype=dtype), 2 * WIDTH + 1, axis=0)
    lu, piv, info = kernels.getrf(a, check_finite=True)
    theirs, their_piv = sla.lu_factor(a[0], check_finite=False)
    assert np.isinf(lu[:, 1, 1]).all() and (info == 0).all()
    np.testing.assert_array_equal(lu, np.broadcast_to(theirs, a.shape))
    np.testing.assert_array_equal(piv, np.broadcast_to(their_piv, piv.shape))


def _order_two_stacks(dtype) -> dict[str, np.ndarray]:
    """Stacks of 2 x 2 matrices for the kernels that factor a group of ``WIDTH`` such matrices straight from the
    stack (``_order_two``): each special matrix in a chunk of its own (of ``WIDE_LANES``, the most any of those
    kernels takes), among chunks of none, and a partial chunk last. Specials: zero, exactly singular and subnormal
    pivots, pivots tying, a zero column below the diagonal (larfg's ``tau = 0``), sums of squares beyond the largest
    and below the smallest normal number, Cholesky's non-positive diagonals, and infinities and NaNs in every
    place (in complex stacks also as imaginary parts, with pivots whose ``|re| + |im|`` tie or are subnormal)."""
    tiny, big = np.finfo(dtype).tiny, np.finfo(dtype).max
    specials = [[[0, 0], [0, 0]], [[1, 2], [2, 4]], [[tiny / 4, 1], [0, 1]], [[1, 1], [-1, 3]], [[2, 1], [0, 3]],
                [[big / 4, 1], [big / 4, 1]], [[1, 1], [1e-170, 1]], [[-1, 0], [0, 1]], [[1, 1], [1, 1]]]
    for place, bad in itertools.product(range(4), (np.inf, -np.inf, np.nan)):
        special = np.eye(2) + 1
        special.flat[place] = bad
        specials.append(special)
    if np.dtype(dtype).kind == "c":  # |re| + |im| tying and not, subnormal parts, infinities and NaNs as parts
        specials += [[[1 + 1j, 1], [2, 3j]], [[1j, 2], [3, 1 + 1j]], [[tiny / 4 * 1j, 1], [0, 1]],
                     [[tiny / 4 * (1 + 1j), 1], [tiny / 2, 1]], [[1, 1j], [1j, -1]], [[2, 1], [1j, 1j / 2]]]
        for place, bad in itertools.product(range(4), (np.inf, np.nan)):
            special = (np.eye(2) + 1).astype(dtype)
            special.flat[place] = complex(1, bad)
            specials.append(special)
    batch = WIDE_LANES * (2 * len(specials) + 1) + 5
    a = random_matrix((batch, 2, 2), dtype, seed=22)
    h = a @ a.transpose(0, 2, 1) + 0.1 * np.eye(2, dtype=dtype)
    for k, special in enumerate(specials):
        a[WIDE_LANES * (2 * k + 1) + 9 * k % WIDE_LANES] = special
        h[WIDE_LANES * (2 * k + 1) + 9 * k % WIDE_LANES] = special
    return {"general": a, "hermitian": h}


def _not_as_records(stack: np.ndarray) -> np.ndarray:
    """The same matrices in a strided view, which the kernels factor in their buffers, never straight from it."""
    batch, m, n = stack.shape
    wide = np.zeros((batch, m, n + 1), stack.dtype)
    wide[:, :, :n] = stack
    return wide[:, :, :n]


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
def test_order_two_straight_from_the_stack_gives_the_bits_of_the_buffered_kernels(dtype, order):
    """Groups of ``WIDTH`` matrices of order 2 that lie one after another are factored on vectors loaded straight
    from the stack, and a group that is not the common case sends its chunk to the interleaved kernel: every
    output (LU, pivots, info, ``lu``'s pieces, Cholesky's factors either way and cleaned or not, Q in either order
    and R) is bitwise what the kernels give from their buffers, NaNs included, and ``check_finite`` still sees an
    infinity or NaN in any group."""
    stacks = _order_two_stacks(dtype)
    a, h = stacks["general"], stacks["hermitian"]
    if order == "F":
        a, h = a.transpose(0, 2, 1).copy().transpose(0, 2, 1), h.transpose(0, 2, 1).copy().transpose(0, 2, 1)
    calls = [lambda x, fortran: kernels.getrf(x, fortran=fortran),
             lambda x, fortran: kernels.qr(x, 2, 2, fortran=fortran)]
    calls += [functools.partial(lambda x, fortran, p, m: kernels.lu(x, permute_l=p, p_matrix=m), p=p, m=m)
              for p, m in itertools.product((False, True), repeat=2)]
    hermitian_calls = [functools.partial(lambda x, fortran, lower, clean: kernels.potrf(
        x, lower=lower, clean=clean, fortran=fortran), lower=lower, clean=clean)
        for lower, clean in itertools.product((False, True), repeat=2)]
    for stack, factorizations in ((a, calls), (h, hermitian_calls)):
        for factor, fortran in itertools.product(factorizations, (False, True)):
            direct, buffered = factor(stack, fortran), factor(_not_as_records(stack), fortran)
            for ours, theirs in zip(direct, buffered, strict=True):
                np.testing.assert_array_equal(ours, theirs)
    for stack in (a, h):
        for k in range(0, stack.shape[0], 3 * WIDTH + 1):
            broken = stack.copy()
            broken[k, 1, 0] = np.nan
            for check in (lambda x: kernels.getrf(x, check_finite=True),
                          lambda x: kernels.qr(x, 2, 2, check_finite=True),
                          lambda x: kernels.potrf(x, lower=True, clean=True, check_finite=True),
                          lambda x: kernels.lu(x, permute_l=False, check_finite=True)):
                with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                    check(broken)


def _order_four_stack(dtype) -> np.ndarray:
    """A stack of 4 x 4 matrices for the LU that factors a group of ``WIDTH`` such matrices straight from the stack
    (``_order_four``): each special matrix in a chunk of its own among chunks of none, and a partial chunk last.
    Specials: zero, exactly singular and subnormal pivots at each step, pivots tying (in complex stacks by
    ``|re| + |im|`` too), and an infinity or NaN in every place (in complex stacks also as imaginary parts)."""
    tiny = np.finfo(dtype).tiny
    base = np.arange(16.0).reshape(4, 4) % 5 + np.eye(4) * 7
    specials = [np.zeros((4, 4)), np.ones((4, 4)), np.diag([1.0, 1.0, 1.0, 0.0]), np.diag([1.0, tiny / 4, 1.0, 1.0]),
                np.diag([1.0, 1.0, tiny, 1.0]), np.eye(4)[::-1], np.triu(np.ones((4, 4))), np.tril(np.ones((4, 4)))]
    singular = base.copy()
    singular[2] = singular[0] + singular[1]
    specials.append(singular)
    if np.dtype(dtype).kind == "c":
        tie = base.astype(complex)
        tie[1, 0], tie[3, 0] = 3 + 4j, 4 + 3j
        specials += [tie, np.diag([1j, tiny / 4 * (1 + 1j), 1, 1]), np.diag([1, 1, 1, tiny / 2 * 1j])]
    bads = [np.inf, -np.inf, np.nan] + ([complex(1, np.inf), complex(0, np.nan)] if np.dtype(dtype).kind == "c"
                                        else [])
    for place, bad in itertools.product(range(16), bads):
        special = base.astype(dtype)
        special.flat[place] = bad
        specials.append(special)
    lanes = WIDE_LANES
    a = random_matrix((lanes * (2 * len(specials) + 1) + 5, 4, 4), dtype, seed=23)
    for k, special in enumerate(specials):
        a[lanes * (2 * k + 1) + 5 * k % lanes] = special
    return a


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
def test_order_four_lu_straight_from_the_stack_gives_the_bits_of_the_buffered_kernel(dtype, order):
    """Groups of ``WIDTH`` LU factorizations of order 4 that lie one after another are factored on vectors loaded
    straight from the stack, and a group that is not the common case sends its chunk to the buffered kernel: the
    packed LU (either layout), pivots and info, and ``lu``'s pieces (row places, ``L`` or ``P L``, ``U`` and ``P``;
    written straight from the registers for real stacks) are bitwise what the kernel gives from its buffer, NaNs
    included; ``check_finite`` still sees an infinity or NaN in any group, ``lu``'s included."""
    a = _order_four_stack(dtype)
    if order == "F":
        a = a.transpose(0, 2, 1).copy().transpose(0, 2, 1)
    calls = [lambda x, fortran: kernels.getrf(x, fortran=fortran)]
    calls += [functools.partial(lambda x, fortran, p, m: kernels.lu(x, permute_l=p, p_matrix=m), p=p, m=m)
              for p, m in itertools.product((False, True), repeat=2)]
    for factor, fortran in itertools.product(calls, (False, True)):
        direct, buffered = factor(a, fortran), factor(_not_as_records(a), fortran)
        for ours, theirs in zip(direct, buffered, strict=True):
            np.testing.assert_array_equal(ours, theirs)
    lu, piv, _ = kernels.getrf(a[:64])
    for b in range(0, 64, 7):
        theirs, their_piv = sla.lu_factor(a[b], check_finite=False)
        np.testing.assert_allclose(lu[b], theirs, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(piv[b], their_piv)
    broken = a.copy()
    broken[3 * WIDTH + 1, 2, 3] = np.nan
    for check in (lambda x: kernels.getrf(x, check_finite=True),
                  lambda x: kernels.lu(x, permute_l=False, check_finite=True)):
        with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
            check(broken)


def test_records_are_dealt_into_vectors_and_gathered_back_in_order():
    """``load_records`` deals ``WIDTH`` records of ``k`` numbers into ``k`` vectors (lane ``w`` of vector ``j`` is
    record ``w``'s number ``j``) and ``store_records`` writes them back where they were, integers as floats."""
    from hetlapack.batched._simd import load_records, store_records

    @numba.njit
    def round_trip(source, target, offset):
        four = load_records(source, offset, 4)
        store_records(target, 0, (four[1], four[0], four[3], four[2]))
        two = load_records(source.view(np.int64), offset, 2)
        store_records(target.view(np.int64), 4 * WIDTH, two)

    source = np.arange(5 * WIDTH + 3, dtype=np.float64)
    target = np.zeros(6 * WIDTH)
    round_trip(source, target, 3)
    records = source[3:3 + 4 * WIDTH].reshape(WIDTH, 4)
    np.testing.assert_array_equal(target[:4 * WIDTH].reshape(WIDTH, 4), records[:, [1, 0, 3, 2]])
    np.testing.assert_array_equal(target.view(np.int64)[4 * WIDTH:], source.view(np.int64)[3:3 + 2 * WIDTH])


@pytest.mark.parametrize("parts", [1, 2, 3, 8, 16])
def test_the_slices_of_a_chunk_ask_for_each_of_its_lines_once(parts):
    """``prefetch_slice``'s slices of the next chunk, asked for one per step, cover its cache lines (chunks of
    whole and part lines, and none after the stack's last chunk) as ``prefetch_next`` does at once: each line once."""
    line = _interleave.LINE_BYTES
    for span in (100, 3 * line, 512, 4096):
        for matrices in range(9):
            begin = 1000 * line
            end = begin + matrices * span
            asked = [at for part in range(parts) for at in range(*_interleave.slice_bytes(begin, end, part, parts),
                                                                    line)]
            assert asked == list(range(begin, end, line))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1,), (5,), (3, 7), (2, 3, 5)], ids=str)
def test_every_kernel_buffer_is_zeros_that_start_on_a_cache_line(dtype, shape):
    """``on_cache_lines``, which every kernel's buffers come from (pivots and ``info`` too: LU stores its pivots a
    vector at a time), gives zeros of the shape and dtype asked for at the start of a cache line."""
    for _ in range(8):  # allocations land at different offsets; each must start on a line
        buf = _interleave.on_cache_lines(shape, dtype)
        assert buf.dtype == dtype and buf.shape == shape and buf.flags.c_contiguous
        assert buf.ctypes.data % _interleave.LINE_BYTES == 0 and not buf.any()


@pytest.mark.parametrize("dtype", INTERLEAVED, ids=str)
@pytest.mark.parametrize("order", [1, 7, 8, 32])
def test_chunk_buffers_pad_the_rows_where_they_would_alias(dtype, order):
    """``chunk_buffer`` (``on_cache_lines`` with the chunk's shape) gives zeros with one more column where a real
    vector of matrices has rows a multiple of ``ALIASED_ROW_BYTES``, for one SIMD vector of matrices and for more
    lanes."""
    like = np.empty(0, dtype)
    for lanes in (WIDTH, 4 * WIDTH):
        row_bytes = order * lanes * dtype.itemsize
        padded = dtype.kind == "f" and lanes == WIDTH and row_bytes % _interleave.ALIASED_ROW_BYTES == 0
        buf = _interleave.chunk_buffer(like, order + 1, order, lanes)
        assert buf.dtype == dtype and buf.shape == (order + 1, order + padded, lanes) and not buf.any()
