"""Checks of hetlapack.mpi run under ``mpiexec -n N python -m mpi4py check_factorizations.py PxQ [PxQ ...]``.

Every rank runs every check on each named grid; the global matrices are rebuilt on every rank from a seed so each
rank can compare with SciPy and check that errors carry SciPy's text everywhere. Rank 0 prints ``PASS name`` per
check and a final ``SUMMARY passed=.. failed=..``; the exit status is 1 when any check failed on any rank.
"""

from __future__ import annotations

import sys
import traceback
import warnings

import numpy as np
import scipy.linalg as sla
from mpi4py import MPI

import hetlapack.mpi as hm
from hetlapack.mpi import _local
from hetlapack.testing import (
    cholesky_residual,
    general,
    ill_conditioned,
    lu_residual,
    orthogonality_residual,
    qr_residual,
    singular,
    spd,
)

COMM = MPI.COMM_WORLD
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
RESIDUAL_LIMIT = 50.0
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def scatter(a: np.ndarray, grid: hm.ProcessGrid, block, src=(0, 0)) -> hm.DistributedMatrix:
    return hm.DistributedMatrix.from_global(a if COMM.rank == 0 else None, grid=grid, block=block, src=src)


def gathered(matrix: hm.DistributedMatrix) -> np.ndarray:
    """The global matrix on every rank (tests only)."""
    return COMM.bcast(matrix.gather(root=0), root=0)


def offsets(grid: hm.ProcessGrid) -> tuple[int, int]:
    """A source process other than (0, 0) where the grid has one, to exercise ScaLAPACK's rsrc/csrc."""
    return 1 % grid.nprow, 1 % grid.npcol


def assert_raises_everywhere(exception, text: str, fn) -> None:
    try:
        fn()
    except exception as exc:
        assert str(exc) == text, f"{type(exc).__name__} text {str(exc)!r} != {text!r}"
    else:
        raise AssertionError(f"{exception.__name__} not raised on rank {COMM.rank}")


# sizes: (n, block): one tile, exact tiles, prime n with a ragged last tile, n smaller than the block
SQUARE_CASES = ((1, 4), (13, 4), (32, 8), (23, 16), (5, 8))


@check
def cholesky_matches_scipy(grid):
    for dtype in DTYPES:
        for n, nb in SQUARE_CASES:
            a = spd(n, dtype=dtype, seed=n)
            for lower in (True, False):
                factor = gathered(hm.cholesky(scatter(a, grid, nb, offsets(grid)), lower=lower))
                assert cholesky_residual(a, factor, lower) < RESIDUAL_LIMIT
                reference = sla.cholesky(a, lower=lower)
                tol = 100 * np.finfo(dtype).eps * np.abs(reference).max()
                np.testing.assert_allclose(factor, reference, rtol=0, atol=tol)


@check
def cholesky_orders_and_views(grid):
    base = spd(30, dtype=np.float64, seed=3)
    for a in (np.asfortranarray(base), base[::-1, ::-1], np.kron(base, np.ones((2, 2)))[::2, ::2]):
        factor = gathered(hm.cholesky(scatter(a, grid, 7), lower=True))
        assert cholesky_residual(a, factor, True) < RESIDUAL_LIMIT


@check
def cholesky_leaves_input_unchanged(grid):
    matrix = scatter(spd(20, dtype=np.complex128, seed=4), grid, 6)
    before = matrix.local.copy()
    hm.cholesky(matrix)
    assert np.array_equal(matrix.local, before)
    assert matrix.local.flags.f_contiguous


@check
def cholesky_not_positive_definite_raises_on_every_rank(grid):
    for n, bad in ((17, 11), (9, 0), (12, 4)):
        a = spd(n, dtype=np.float64, seed=5)
        a[bad, bad] = -1.0
        try:
            sla.cholesky(a, lower=True)
        except np.linalg.LinAlgError as exc:
            text = str(exc)
        assert_raises_everywhere(np.linalg.LinAlgError, text,
                                 lambda: hm.cholesky(scatter(a, grid, 4), lower=True))


@check
def lu_matches_scipy_with_identical_pivots(grid):
    shapes = ((1, 1), (13, 13), (32, 32), (29, 17), (17, 29), (5, 5))
    for dtype, block in zip(DTYPES, (4, 8, 8, 4)):
        for m, n in shapes:
            a = general(m, n, dtype=dtype, seed=m + n)
            lu, piv = hm.lu_factor(scatter(a, grid, block, offsets(grid)))
            ref_lu, ref_piv = sla.lu_factor(a)
            assert piv.dtype == np.int32 and np.array_equal(piv, ref_piv), (piv, ref_piv)
            lu = gathered(lu)
            assert lu_residual(a, lu, piv) < RESIDUAL_LIMIT
            tol = 1e3 * np.finfo(dtype).eps * max(1.0, np.abs(ref_lu).max())
            np.testing.assert_allclose(lu, ref_lu, rtol=0, atol=tol)


@check
def lu_and_qr_panels_wider_than_their_inner_block(grid):
    for dtype in (np.float64, np.complex64):
        a = general(75, 70, dtype=dtype, seed=14)
        lu, piv = hm.lu_factor(scatter(a, grid, 40))
        assert np.array_equal(piv, sla.lu_factor(a)[1])
        assert lu_residual(a, gathered(lu), piv) < RESIDUAL_LIMIT
        q, r = (gathered(x) for x in hm.qr(scatter(a, grid, 40), mode="economic"))
        assert qr_residual(a, q, r) < RESIDUAL_LIMIT and orthogonality_residual(q) < RESIDUAL_LIMIT
        assert np.array_equal(np.sign(np.diag(r).real), np.sign(np.diag(sla.qr(a, mode="r")[0]).real))


@check
def lu_ill_conditioned(grid):
    a = ill_conditioned(24, cond=1e8, dtype=np.float64, seed=6)
    lu, piv = hm.lu_factor(scatter(a, grid, 5))
    assert np.array_equal(piv, sla.lu_factor(a)[1])
    assert lu_residual(a, gathered(lu), piv) < RESIDUAL_LIMIT


@check
def lu_singular_warns_on_every_rank(grid):
    a = singular(14, rank=9, dtype=np.float64, seed=7)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        lu, piv = hm.lu_factor(scatter(a, grid, 4))
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        ref_lu, ref_piv = sla.lu_factor(a)
    ours = [str(w.message) for w in ours if issubclass(w.category, sla.LinAlgWarning)]
    theirs = [str(w.message) for w in theirs if issubclass(w.category, sla.LinAlgWarning)]
    assert ours == theirs and len(ours) == 1, (ours, theirs)
    assert np.array_equal(piv, ref_piv)


@check
def qr_matches_scipy_including_signs(grid):
    shapes = ((1, 1), (13, 13), (29, 17), (17, 29))
    for dtype in DTYPES:
        for m, n in shapes:
            a = general(m, n, dtype=dtype, seed=m * n)
            for mode in ("economic", "full", "r") if dtype in (np.float64, np.complex64) else ("economic",):
                ours = [gathered(x) for x in hm.qr(scatter(a, grid, 8, offsets(grid)), mode=mode)]
                theirs = sla.qr(a, mode=mode)
                assert [x.shape for x in ours] == [x.shape for x in theirs], mode
                tol = 1e3 * np.finfo(dtype).eps * max(1.0, np.abs(a).max())
                np.testing.assert_allclose(ours[-1], theirs[-1], rtol=0, atol=tol * max(m, n))
                if mode != "r":
                    q, r = ours
                    assert qr_residual(a, q, r) < RESIDUAL_LIMIT
                    assert orthogonality_residual(q) < RESIDUAL_LIMIT


@check
def solves_match_scipy(grid):
    for dtype in DTYPES:
        n = 11
        tol = 1e3 * np.finfo(dtype).eps
        a_spd, a_gen = spd(n, dtype=dtype, seed=8), general(n, dtype=dtype, seed=9)
        b = general(n, 3, dtype=dtype, seed=10)
        for lower in (True, False):
            factor = hm.cholesky(scatter(a_spd, grid, 4), lower=lower)
            x = hm.cho_solve((factor, lower), b)
            np.testing.assert_allclose(x, sla.cho_solve(sla.cho_factor(a_spd, lower=lower), b), rtol=tol, atol=tol)
        distributed_b = scatter(b, grid, 4)
        x = gathered(hm.cho_solve((hm.cholesky(scatter(a_spd, grid, 4), lower=True), True), distributed_b))
        np.testing.assert_allclose(a_spd @ x, b, rtol=0, atol=tol * 10)
        lu_piv = hm.lu_factor(scatter(a_gen, grid, 4))
        reference = sla.lu_factor(a_gen)
        for trans in (0, 1, 2):
            x = hm.lu_solve(lu_piv, b[:, 0], trans=trans)
            assert x.shape == (n,)
            np.testing.assert_allclose(x, sla.lu_solve(reference, b[:, 0], trans=trans), rtol=tol * 10, atol=tol * 10)


@check
def cholesky_traffic_within_the_two_d_volume(grid):
    n, block = 96, 8
    matrix = scatter(spd(n, seed=15), grid, block)
    hm.reset_traffic()
    hm.cholesky(matrix, lower=True)
    volume = n * n / 2 * (1 / grid.nprow + 1 / grid.npcol) * matrix.dtype.itemsize
    received = hm.traffic().received
    assert received <= volume, (received, volume)
    assert COMM.size == 1 or COMM.allreduce(received) > 0


@check
def from_function_builds_only_local_tiles(grid):
    a = general(23, 17, dtype=np.complex64, seed=11)
    calls = []

    def tile(rows, cols):
        calls.append((rows.start, cols.start))
        return a[rows, cols]

    built = hm.DistributedMatrix.from_function(23, 17, tile, block=(5, 4), grid=grid, src=offsets(grid))
    assert built.dtype == np.complex64
    assert np.array_equal(gathered(built), a)
    assert all(built.row_owner(i) == grid.myrow and built.col_owner(j) == grid.mycol for i, j in calls)
    total = COMM.allreduce(len(calls))
    assert total == 5 * 5


@check
def descriptor_is_scalapack(grid):
    matrix = hm.DistributedMatrix.zeros(23, 17, block=(5, 4), grid=grid, src=offsets(grid))
    rsrc, csrc = offsets(grid)
    mloc = hm.numroc(23, 5, grid.myrow, rsrc, grid.nprow)
    assert list(matrix.descriptor(context=7)) == [1, 7, 23, 17, 5, 4, rsrc, csrc, max(1, mloc)]
    assert matrix.local.shape == (mloc, hm.numroc(17, 4, grid.mycol, csrc, grid.npcol))
    assert matrix.local.flags.f_contiguous


@check
def non_lapack_dtypes_compute_in_scipys_dtype(grid):
    """Long doubles and float16 are converted as SciPy converts them (to double, single), on every rank alike."""
    for dtype in (np.longdouble, np.clongdouble, np.float16, np.int64):
        a = (np.eye(12) * 3 + 1).astype(dtype)
        for block in (5, 12):
            c = gathered(hm.cholesky(scatter(a, grid, block)))
            assert c.dtype == sla.cholesky(a).dtype, (dtype, c.dtype)
            np.testing.assert_allclose(c, sla.cholesky(a), rtol=1e-3, atol=1e-3)
            lu, piv = hm.lu_factor(scatter(a, grid, block))
            np.testing.assert_array_equal(piv, sla.lu_factor(a)[1])
            q, r = (gathered(x) for x in hm.qr(scatter(a, grid, block)))
            assert q.dtype == r.dtype == sla.qr(a)[0].dtype


def deprecations(fn) -> list[str]:
    """The texts of the DeprecationWarnings ``fn()`` gives (SciPy 1.18's for dtypes LAPACK does not compute in)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


@check
def dtype_deprecations_are_scipys(grid):
    """Every rank gives the installed SciPy's dtype warnings (none before 1.18), as SciPy does on the whole matrix."""
    for dtype in (np.float16, np.longdouble, np.bool_, np.int64):
        a = np.eye(6, dtype=dtype)
        for name, ours, theirs in (
                ("cholesky", lambda: hm.cholesky(scatter(a, grid, 4)), lambda: sla.cholesky(a)),
                ("lu_factor", lambda: hm.lu_factor(scatter(a, grid, 4)), lambda: sla.lu_factor(a)),
                ("qr", lambda: hm.qr(scatter(a, grid, 4)), lambda: sla.qr(a))):
            assert deprecations(ours) == deprecations(theirs), (name, dtype)
        c, factor = hm.cholesky(scatter(np.eye(6), grid, 4)), sla.cholesky(np.eye(6))
        b = np.ones(6, dtype=dtype)
        assert deprecations(lambda: hm.cho_solve((c, False), b)) == deprecations(
            lambda: sla.cho_solve((factor, False), b)), dtype
        lu_piv, ref = hm.lu_factor(scatter(np.eye(6), grid, 4)), sla.lu_factor(np.eye(6))
        assert deprecations(lambda: hm.lu_solve(lu_piv, b)) == deprecations(lambda: sla.lu_solve(ref, b)), dtype


@check
def empty_systems_solve_as_in_scipy(grid):
    empty = scatter(np.zeros((0, 0)), grid, 4)
    factor, (lu, piv) = hm.cholesky(empty, lower=True), hm.lu_factor(empty)
    for b in (np.zeros(0), np.zeros((0, 3))):
        assert hm.cho_solve((factor, True), b).shape == sla.cho_solve((np.zeros((0, 0)), True), b).shape
        assert hm.lu_solve((lu, piv), b).shape == b.shape


def scipy_error(fn) -> str:
    """The text of the ValueError that SciPy's ``fn()`` raises."""
    try:
        fn()
    except ValueError as exc:
        return str(exc)
    raise AssertionError("SciPy raised nothing")


def factors_of_order_8(grid) -> tuple[tuple[hm.DistributedMatrix, bool], tuple, tuple]:
    """``(c, lower)`` and ``(lu, piv)`` of order 8 on ``grid``, and SciPy's own pair of each, for the solve checks."""
    a_spd, a_gen = spd(8, dtype=np.float64, seed=13), general(8, dtype=np.float64, seed=14)
    ours = ((hm.cholesky(scatter(a_spd, grid, 4), lower=True), True), hm.lu_factor(scatter(a_gen, grid, 4)))
    return (*ours, (sla.cho_factor(a_spd, lower=True), sla.lu_factor(a_gen)))


@check
def wrong_right_hand_side_raises_scipys_text_everywhere(grid):
    """A ``b`` that does not fit, 3-D included (SciPy's batch loop names its last two axes), raises SciPy's text."""
    c_lower, lu_piv, (ref_c, ref_lu) = factors_of_order_8(grid)
    for b in (np.ones(9), np.ones((9, 2)), np.ones((8, 2, 2)), np.ones((3, 9, 2))):
        assert_raises_everywhere(ValueError, scipy_error(lambda: sla.cho_solve(ref_c, b)),
                                 lambda: hm.cho_solve(c_lower, b))
        assert_raises_everywhere(ValueError, scipy_error(lambda: sla.lu_solve(ref_lu, b)),
                                 lambda: hm.lu_solve(lu_piv, b))
    assert_raises_everywhere(ValueError, "b must be 1-D or 2-D for the distributed solve, got shape (3, 8, 2)",
                             lambda: hm.cho_solve(c_lower, np.ones((3, 8, 2))))


@check
def right_hand_side_that_differs_across_ranks_raises_everywhere(grid):
    """A ``b`` of another shape or dtype on one rank (or ``None`` off the root) raises one text on every rank."""
    if COMM.size == 1:
        return
    c_lower, lu_piv, _ = factors_of_order_8(grid)
    last = COMM.size - 1
    for b, described in ((np.ones(9), "array of shape (9,) and dtype float64"),
                         (np.ones(8, dtype=complex), "array of shape (8,) and dtype complex128"),
                         (None, "array of shape () and dtype object")):
        mine = b if COMM.rank == last else np.ones(8)
        text = (f"every rank must pass the same b: rank 0 passed 'array of shape (8,) and dtype float64', "
                f"rank {last} passed '{described}'")
        assert_raises_everywhere(ValueError, text, lambda: hm.cho_solve(c_lower, mine))
        assert_raises_everywhere(ValueError, text, lambda: hm.lu_solve(lu_piv, mine))
    factor = c_lower[0]
    mixed = factor if COMM.rank == 0 else np.ones(8)
    text = (f"every rank must pass the same b: rank 0 passed 'DistributedMatrix {factor.layout}', "
            f"rank 1 passed 'array of shape (8,) and dtype float64'")
    assert_raises_everywhere(ValueError, text, lambda: hm.cho_solve(c_lower, mixed))


@check
def solves_check_finite_and_take_overwrite_b_as_scipy(grid):
    c_lower, lu_piv, (ref_c, ref_lu) = factors_of_order_8(grid)
    b = general(8, 2, dtype=np.float64, seed=15)
    np.testing.assert_allclose(hm.cho_solve(c_lower, b.copy(), overwrite_b=True, check_finite=False),
                               sla.cho_solve(ref_c, b), rtol=1e-12)
    np.testing.assert_allclose(hm.lu_solve(lu_piv, b.copy(), overwrite_b=True, check_finite=False),
                               sla.lu_solve(ref_lu, b), rtol=1e-12)
    text = scipy_error(lambda: sla.cho_solve(ref_c, np.full(8, np.nan)))
    inf_on_last_rank = np.where(np.arange(8) == 7, np.inf if COMM.rank == COMM.size - 1 else 1.0, 1.0)
    for bad in (np.full(8, np.nan), inf_on_last_rank):
        assert_raises_everywhere(ValueError, text, lambda: hm.cho_solve(c_lower, bad))
        assert_raises_everywhere(ValueError, text, lambda: hm.lu_solve(lu_piv, bad))
        hm.lu_solve(lu_piv, bad, check_finite=False)
    c_nan = c_lower[0].copy()
    if COMM.rank == 0:
        c_nan.local[0, 0] = np.nan
    assert_raises_everywhere(ValueError, text, lambda: hm.cho_solve((c_nan, True), np.ones(8)))


@check
def pivots_that_name_no_row_raise_everywhere(grid):
    """Pivots outside the factor's rows, or not one per row, raise on every rank (SciPy's getrs would write
    outside b); SciPy's own errors for b come first, and an empty b reads no pivot."""
    _, (lu, piv), _ = factors_of_order_8(grid)
    for bad in (8, -1):
        text = (f"lu_solve: pivot {bad} names no row of the LU factor of order 8 (piv holds 0-based row interchanges, "
                "as lu_factor returns them)")
        wrong = piv.copy()
        wrong[3] = bad
        assert_raises_everywhere(ValueError, text, lambda: hm.lu_solve((lu, wrong), np.ones(8)))
        assert_raises_everywhere(ValueError, text, lambda: hm.lu_solve((lu, wrong.astype(object)), np.ones(8)))
        assert_raises_everywhere(ValueError, "array must not contain infs or NaNs",
                                 lambda: hm.lu_solve((lu, wrong), np.full(8, np.nan)))
        assert hm.lu_solve((lu, wrong), np.ones((8, 0))).shape == (8, 0)
    assert_raises_everywhere(ValueError, "lu_solve: pivots of shape (7,) do not match the LU factor of order 8",
                             lambda: hm.lu_solve((lu, piv[:7]), np.ones(8)))


@check
def arguments_that_differ_across_ranks_raise_everywhere(grid):
    """Per-rank ``lower``, ``mode``, ``trans``, ``block`` or layout raise one ValueError on every rank, never hang."""
    if COMM.size == 1:
        return
    a = spd(8, dtype=np.float64, seed=16)
    me = COMM.rank

    def differs(name, first, second):
        return f"every rank must pass the same {name}: rank 0 passed {first!r}, rank 1 passed {second!r}"

    matrix = scatter(a, grid, 4)
    assert_raises_everywhere(ValueError, differs("lower", True, False), lambda: hm.cholesky(matrix, lower=me == 0))
    assert_raises_everywhere(ValueError, differs("mode", "full", "r"),
                             lambda: hm.qr(matrix, mode="r" if me else "full"))
    assert_raises_everywhere(ValueError, differs("trans", 0, 1),
                             lambda: hm.lu_solve(hm.lu_factor(matrix), np.ones(8), trans=min(me, 2)))
    assert_raises_everywhere(ValueError, differs("block", 4, 5), lambda: scatter(a, grid, 4 + me))
    uneven = hm.DistributedMatrix.zeros(8, 8, block=4 + me, grid=grid)
    layouts = [hm.DistributedMatrix.zeros(8, 8, block=block, grid=grid).layout for block in (4, 5)]
    assert_raises_everywhere(ValueError, differs("a", *layouts), lambda: hm.lu_factor(uneven))


@check
def bad_root_or_source_process_raise_value_error_everywhere(grid):
    root = COMM.size + 3
    text = f"root must be a rank of the grid's {COMM.size} ranks (0 to {COMM.size - 1}), got {root}"
    a = np.eye(4)
    assert_raises_everywhere(ValueError, text, lambda: hm.DistributedMatrix.from_global(a, grid=grid, root=root))
    assert_raises_everywhere(ValueError, text, lambda: scatter(a, grid, 2).gather(root=root))
    outside = f"source process (5, 5) is outside the {grid.nprow}x{grid.npcol} process grid"
    assert_raises_everywhere(ValueError, outside, lambda: hm.DistributedMatrix(grid, (4, 4), 2, np.zeros((0, 0)),
                                                                               src=(5, 5)))
    assert_raises_everywhere(ValueError, outside, lambda: hm.DistributedMatrix.zeros(4, 4, grid=grid, src=(5, 5)))
    numbers = "a DistributedMatrix holds numbers (bool, integer, floating or complex), got dtype object; convert with "
    assert_raises_everywhere(ValueError, numbers + "a.astype(float) first",
                             lambda: hm.DistributedMatrix.from_global(a.astype(object), grid=grid))


def outcome(fn) -> tuple:
    """``("ok", shape, rounded values)`` of what ``fn()`` returns (gathered if distributed), or what it raises."""
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return type(exc), str(exc)
    result = gathered(result) if isinstance(result, hm.DistributedMatrix) else result
    return "ok", result.shape, tuple(np.round(result, 8).ravel())


def raised(fn) -> tuple[type, str]:
    """The type and text of what ``fn()`` raises."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return type(exc), str(exc)
    raise AssertionError("nothing raised")


@check
def odd_inputs_behave_as_in_scipy(grid):
    """A factor that is not square gives SciPy's solve errors and ``trans=3`` f2py's; a big-endian matrix (all of it
    on one rank too) and a distributed bool right-hand side compute as SciPy does; a root or block of 1.5 is refused."""
    a_rect = general(6, 4, dtype=np.float64, seed=17)
    lu_rect = hm.lu_factor(scatter(a_rect, grid, 2))
    assert raised(lambda: hm.lu_solve(lu_rect, np.ones(6))) == raised(
        lambda: sla.lu_solve(sla.lu_factor(a_rect), np.ones(6)))
    assert raised(lambda: hm.cho_solve((lu_rect[0], True), np.ones(6))) == raised(
        lambda: sla.cho_solve((a_rect, True), np.ones(6)))
    for b in (np.ones(4), np.ones((4, 0)), np.ones((6, 0))):  # SciPy's order of checks; an empty b skips getrs's
        assert raised(lambda: hm.cho_solve((lu_rect[0], True), b)) == raised(
            lambda: sla.cho_solve((a_rect, True), b))
    scipy_lu = sla.lu_factor(a_rect)
    for b in (np.ones((6, 0)), np.ones((4, 0))):
        ours = outcome(lambda: hm.lu_solve(lu_rect, b, trans=3))
        theirs = outcome(lambda: sla.lu_solve(scipy_lu, b, trans=3))
        assert ours == theirs, (ours, theirs)
    for options in ({"trans": 3}, {"overwrite_b": 1.5}):
        assert raised(lambda: hm.lu_solve(lu_rect, np.ones(6), **options)) == raised(
            lambda: sla.lu_solve(sla.lu_factor(a_rect), np.ones(6), **options))
    c_lower, lu_piv, (ref_c, ref_lu) = factors_of_order_8(grid)
    assert raised(lambda: hm.lu_solve(lu_piv, np.ones(8), trans=3)) == raised(
        lambda: sla.lu_solve(ref_lu, np.ones(8), trans=3))
    upper = hm.cholesky(scatter(spd(8, dtype=np.float64, seed=13), grid, 4))
    for flag in (0.5, 2):  # read as SciPy's potrs reads them: 0.5 is upper, 2 is refused
        assert outcome(lambda: hm.cho_solve((upper, flag), np.ones(8))) == outcome(
            lambda: sla.cho_solve((sla.cholesky(spd(8, dtype=np.float64, seed=13)), flag), np.ones(8)))
    a = spd(8, dtype=np.float64, seed=18).astype(">f8")
    for block in (4, 16):  # against the native matrix's factor: SciPy 1.18.1 misreads a big-endian one
        factor = gathered(hm.cholesky(scatter(a, grid, block), lower=True))
        np.testing.assert_allclose(factor, sla.cholesky(a.astype(np.float64), lower=True), rtol=1e-12, atol=1e-12)
        q, r = (gathered(m) for m in hm.qr(scatter(a, grid, block)))
        assert q.dtype == np.float64 and q.dtype.isnative and qr_residual(a, q, r) < RESIDUAL_LIMIT
    flags = np.arange(8)[:, None] % 3 == 0
    x = gathered(hm.lu_solve(lu_piv, scatter(flags, grid, 4)))
    np.testing.assert_allclose(x, sla.lu_solve(ref_lu, flags), rtol=1e-12)
    x = gathered(hm.cho_solve(c_lower, scatter(flags, grid, 4)))
    np.testing.assert_allclose(x, sla.cho_solve(ref_c, flags), rtol=1e-12)
    root = f"root must be a rank of the grid's {COMM.size} ranks (0 to {COMM.size - 1}), got 1.5"
    assert_raises_everywhere(ValueError, root, lambda: scatter(a, grid, 2).gather(root=1.5))
    assert_raises_everywhere(ValueError, root, lambda: hm.DistributedMatrix.from_global(a, grid=grid, root=1.5))
    assert_raises_everywhere(ValueError, "block sizes must be positive integers (one, or a pair), got 2.5",
                             lambda: hm.DistributedMatrix.zeros(4, 4, block=2.5, grid=grid))


@check
def grids_agree_on_their_shape_and_are_reused_or_freed(grid):
    """A shape given differently by one rank raises everywhere (not a hang in ``Split``); ``grid=None`` reuses one
    grid per process (two communicators per call ran out after a thousand); ``free`` releases a grid's."""
    if COMM.size > 1:
        mine = (1, COMM.size) if COMM.rank == 0 else (COMM.size, 1)
        text = (f"every rank must pass the same shape: rank 0 passed {(1, COMM.size)!r}, "
                f"rank 1 passed {(COMM.size, 1)!r}")
        assert_raises_everywhere(ValueError, text, lambda: hm.ProcessGrid.create(COMM, mine))
    scattered = hm.DistributedMatrix.from_global(np.eye(4) if COMM.rank == 0 else None, block=2)
    assert hm.DistributedMatrix.zeros(4, 4, block=2).grid is hm.ProcessGrid.default() is scattered.grid
    for _ in range(3):
        made = hm.ProcessGrid.create(COMM)
        made.free()
        assert made.row_comm == MPI.COMM_NULL and made.col_comm == MPI.COMM_NULL
    assert_raises_everywhere(ValueError, "the default grid (grid=None) lives as long as the process; free only grids "
                             "you created", hm.ProcessGrid.default().free)
    assert_raises_everywhere(ValueError, "block sizes must be positive integers (one, or a pair), got True",
                             lambda: hm.DistributedMatrix.zeros(4, 4, block=True, grid=grid))


@check
def qr_mode_errors_are_scipys(grid):
    a = general(6, 4, dtype=np.float64, seed=17)
    matrix = scatter(a, grid, 4)
    assert_raises_everywhere(ValueError, scipy_error(lambda: sla.qr(a, mode="bogus")),
                             lambda: hm.qr(matrix, mode="bogus"))
    assert_raises_everywhere(ValueError, "the distributed QR has no 'raw' mode; use 'full', 'r' or 'economic'",
                             lambda: hm.qr(matrix, mode="raw"))
    assert [x.shape for x in hm.qr(matrix, mode="qr")] == [x.shape for x in sla.qr(a, mode="qr")]


@check
def empty_factors_keep_scipys_dtype(grid):
    """SciPy returns an empty matrix's LU and QR factors in its own dtype (int64 stays int64)."""
    for dtype in (np.int64, np.bool_, np.float16):
        for shape in ((0, 0), (0, 3), (3, 0)):
            a = np.zeros(shape, dtype=dtype)
            lu, piv = hm.lu_factor(scatter(a, grid, 4))
            ref_lu, ref_piv = sla.lu_factor(a)
            assert gathered(lu).dtype == ref_lu.dtype and piv.dtype == ref_piv.dtype, (dtype, shape, lu.dtype)
            for mode in ("full", "r", "economic"):
                ours, theirs = [gathered(x) for x in hm.qr(scatter(a, grid, 4), mode=mode)], sla.qr(a, mode=mode)
                assert [(x.dtype, x.shape) for x in ours] == [(x.dtype, x.shape) for x in theirs], (dtype, shape)
                for x, y in zip(ours, theirs):
                    np.testing.assert_array_equal(x, y)
        assert gathered(hm.cholesky(scatter(np.zeros((0, 0), dtype=dtype), grid, 4))).dtype == \
            sla.cholesky(np.zeros((0, 0), dtype=dtype)).dtype


@check
def negative_dimensions_raise_on_every_rank(grid):
    assert_raises_everywhere(ValueError, "matrix dimensions must be non-negative integers, got (-5, -5)",
                             lambda: hm.DistributedMatrix.from_function(-5, -5, np.zeros, block=256, grid=grid))


@check
def exception_in_from_function_reaches_every_rank(grid):
    failing_rank = COMM.size - 1

    def tile(rows, cols):
        if COMM.rank == failing_rank:
            raise KeyError("tile generator failed")
        return np.ones((rows.stop - rows.start, cols.stop - cols.start))

    assert_raises_everywhere(KeyError, "'tile generator failed'",
                             lambda: hm.DistributedMatrix.from_function(16, 16, tile, block=4, grid=grid))


@check
def non_finite_entry_on_one_rank_raises_everywhere(grid):
    a = spd(16, dtype=np.float64, seed=12)
    a[15, 15] = np.nan
    assert_raises_everywhere(ValueError, "array must not contain infs or NaNs",
                             lambda: hm.cholesky(scatter(a, grid, 4)))


@check
def kernel_failure_mid_factorization_reaches_every_rank(grid):
    failing_rank = COMM.size - 1
    original = _local.gemm
    calls = [0]

    def faulty(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 2:
            raise MemoryError("injected")
        return original(*args, **kwargs)

    if COMM.rank == failing_rank:
        _local.gemm = faulty
    try:
        for factorization in (hm.cholesky, hm.lu_factor, hm.qr):
            calls[0] = 0
            assert_raises_everywhere(MemoryError, "injected",
                                     lambda: factorization(scatter(spd(40, seed=13), grid, 4)))
    finally:
        _local.gemm = original
    COMM.Barrier()


@check
def panel_kernel_failure_reaches_every_rank(grid):
    for name, factorization in (("getrf", hm.lu_factor), ("geqrt", hm.qr)):
        original = getattr(_local, name)
        calls = [0]

        def faulty(*args, **kwargs):
            calls[0] += 1
            if calls[0] == 2:
                raise FloatingPointError(f"injected into {name}")
            return original(*args, **kwargs)

        setattr(_local, name, faulty)
        try:
            assert_raises_everywhere(FloatingPointError, f"injected into {name}",
                                     lambda: factorization(scatter(general(30, seed=16), grid, 4)))
        finally:
            setattr(_local, name, original)
        COMM.Barrier()


@check
def lu_and_qr_collectives_per_step_not_per_column(grid):
    n, block = 64, 8
    steps = n // block
    for factorization in (hm.lu_factor, lambda a: hm.qr(a, mode="r")):
        matrix = scatter(general(n, seed=17), grid, block)
        hm.reset_traffic()
        factorization(matrix)
        assert hm.traffic().messages <= 8 * steps, hm.traffic().as_dict()


def main(shapes: list[str]) -> int:
    failed = passed = 0
    for shape in shapes:
        grid = hm.ProcessGrid.create(COMM, tuple(int(x) for x in shape.split("x")))
        for fn in CHECKS:
            name = f"{fn.__name__}[{shape}]"
            try:
                fn(grid)
                ok = True
            except Exception:  # noqa: BLE001 - report and go on so that ranks stay in step
                ok = False
                print(f"rank {COMM.rank} FAIL {name}\n{traceback.format_exc()}", flush=True)
            all_ok = COMM.allreduce(ok, op=MPI.LAND)
            passed += all_ok
            failed += not all_ok
            if COMM.rank == 0 and all_ok:
                print(f"PASS {name}", flush=True)
    if COMM.rank == 0:
        print(f"SUMMARY passed={passed} failed={failed}", flush=True)
    return int(failed > 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
