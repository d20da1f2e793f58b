"""The host path hands SciPy a Fortran-ordered copy made a tile at a time where SciPy would make it element by
element (``compat/_host.py``): SciPy's result to the bit, in its layout, with its errors and warnings."""

import re
import types
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as la
from hetlapack import machine, testing
from hetlapack.compat import _host
from hetlapack.contract import arrays, shared_work
from hetlapack.contract.finite import FiniteCheck, all_finite
from hetlapack.contract.scipy_rules import COMPILED_BATCH_LOOPS, fortran_copy_unseen, qr_lwork_deprecation
from hetlapack.dispatch.paths import base

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TILE = 8

#: Calls of the host path: the function, its options (as ``compat._host.scipy_call`` passes them on) and the
#: results to compare (``cho_factor``'s factor).
CALLS = {
    "cholesky": ("cholesky", {"lower": False}),
    "cholesky lower": ("cholesky", {"lower": True}),
    "cho_factor": ("cho_factor", {"lower": False}),
    "cho_factor lower": ("cho_factor", {"lower": True}),
    "lu_factor": ("lu_factor", {}),
    "qr": ("qr", {"mode": "full", "pivoting": False}),
    "qr economic": ("qr", {"mode": "economic", "pivoting": False}),
    "qr r": ("qr", {"mode": "r", "pivoting": False}),
    "qr pivoting": ("qr", {"mode": "full", "pivoting": True}),
}


@pytest.fixture
def copies(monkeypatch):
    """Tiles of ``TILE`` rows, so that small matrices take the tiled copy; the copies made (of SciPy's operand, or of
    the direct Cholesky's), counted."""
    made = []

    def counted(a, dtype=None, **options):
        made.append(a.shape)
        return fortran_copy(a, dtype, **options)

    fortran_copy = arrays.fortran_copy
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(_host, "tile_order", lambda: TILE)  # the direct Cholesky's zeros, by columns
    monkeypatch.setattr(_host, "fortran_copy", counted)
    monkeypatch.setattr(arrays, "fortran_copy", counted)  # the direct Cholesky's working copy
    return made


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_results_are_scipys_to_the_bit_in_its_layout(call, dtype, copies):
    name, options = CALLS[call]
    a = testing.spd(3 * TILE + 5, dtype=dtype)
    before = a.copy()
    with hetlapack.using(path="host"):
        ours = getattr(la, name)(a, **options)
    theirs = getattr(sl, name)(a, **options)
    np.testing.assert_array_equal(a, before)
    testing.assert_same_results(ours, theirs)
    assert bool(copies) == fortran_copy_unseen(name, **options), copies


@pytest.mark.parametrize("shape", [(TILE + 1, TILE + 1), (3 * TILE + 5, 2 * TILE + 3), (2 * TILE + 3, 41)])
@pytest.mark.parametrize("dtype", [None, np.complex128])
@pytest.mark.parametrize("cores", [1, 2, 3])
def test_fortran_copy_equals_numpys(shape, dtype, cores, monkeypatch):
    """A tile at a time, shared among the usable cores, the copy is NumPy's, in Fortran order."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(arrays, "usable_cores", lambda: cores)
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    copy = arrays.fortran_copy(a, dtype)
    assert copy.flags.f_contiguous and not np.shares_memory(copy, a)
    assert copy.dtype == (a.dtype if dtype is None else dtype)
    np.testing.assert_array_equal(copy, a)


@pytest.mark.parametrize("shape", [(TILE + 1, TILE + 1), (3 * TILE + 5, 3 * TILE + 5), (4 * TILE, 4 * TILE)])
@pytest.mark.parametrize("triangle", [True, False])
@pytest.mark.parametrize("cores", [1, 2, 3])
def test_fortran_copy_of_one_triangle_zeroes_the_other(shape, triangle, cores, monkeypatch):
    """With a triangle, the copy is ``np.tril`` or ``np.triu`` of the matrix, to the bit (NaNs in the other one
    included), whatever the tiles and the cores sharing them."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(arrays, "usable_cores", lambda: cores)
    a = testing.general(*shape, dtype=np.complex128)
    a[np.triu_indices(shape[0], 1) if triangle else np.tril_indices(shape[0], -1)] = np.nan
    copy = arrays.fortran_copy(a, triangle=triangle)
    assert copy.flags.f_contiguous
    np.testing.assert_array_equal(copy, np.tril(np.nan_to_num(a)) if triangle else np.triu(np.nan_to_num(a)))


def test_only_matrices_of_more_than_two_tiles_each_way_are_copied_by_tiles(monkeypatch):
    """Two tiles or fewer each way leave one tile most of the matrix: NumPy's own copy there."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    for shape, tiled in [((2 * TILE, 3 * TILE), False), ((2 * TILE + 1, 2 * TILE + 1), True),
                         ((3 * TILE, 2 * TILE), False)]:
        a = np.zeros(shape)
        assert arrays.copies_by_tiles(a) is tiled and not arrays.copies_by_tiles(np.asfortranarray(a))


@pytest.mark.parametrize("triangle", [True, False, None])
@pytest.mark.parametrize("cores", [1, 2])
def test_fortran_copy_reads_every_value_once_for_check_finite(triangle, cores, monkeypatch):
    """``read`` sees each value of the matrix once, those of the triangle the copy zeroes too: a NaN anywhere makes
    the check fail, and without one it passes."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(arrays, "usable_cores", lambda: cores)
    a = testing.general(3 * TILE + 5, 3 * TILE + 5)
    seen = []
    arrays.fortran_copy(a, triangle=triangle, read=lambda values: seen.append((values.size, values.sum())))
    assert sum(size for size, _ in seen) == a.size
    np.testing.assert_allclose(sum(total for _, total in seen), a.sum())
    for where in [(1, 2 * TILE), (2 * TILE, 1), (TILE + 3, TILE + 3)]:
        nan = a.copy()
        nan[where] = np.nan
        check = FiniteCheck()
        arrays.fortran_copy(nan, triangle=triangle, read=check.read)
        assert not check.finite and not all_finite(nan)
    check = FiniteCheck()
    arrays.fortran_copy(a, triangle=triangle, read=check.read)
    assert check.finite and all_finite(a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("order", [3, 600])  # 9 values and 360,000: either side of finite.BLOCK_VALUES
def test_the_finite_check_reads_small_and_large_matrices_alike(order, dtype):
    """A NaN or an infinity anywhere fails the check (in the first block read, the last, or a strided view's),
    finite values whose sum would overflow pass it, in a matrix read at once and in one read in blocks, and nothing
    warns."""
    from hetlapack.contract import finite

    assert 9 <= finite.BLOCK_VALUES < 360_000
    a = np.full((order, order), np.finfo(dtype).max / 2, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all_finite(a) and all_finite(a[::-1, ::2]) and all_finite(a.T)
        for bad in (np.nan, np.inf, -np.inf):
            for where in ((-1, 0), (0, 0), (order - 1, order - 1), (order // 2, order // 3)):
                b = a.copy()
                b[where] = bad
                check = FiniteCheck()
                check.read(b)
                assert not all_finite(b) and not check.finite and not all_finite(b.T)
                assert not all_finite(b[::-1, where[1] % 2::2])


@pytest.mark.parametrize("order", ["C", "F"])
def test_the_finite_check_reads_a_tile_of_a_larger_matrix_in_whole_lines(order):
    """A tile of a larger matrix, its rows (C) or columns (F) along memory and more values than
    ``finite.BLOCK_VALUES``, is read in blocks of whole lines, with no buffered copy: a NaN or an infinity in its first
    line, its last, or a block's edge fails the check; values outside the tile are not read."""
    from hetlapack.contract import finite

    big = np.zeros((1300, 1100), order=order)
    tile = big[100:1000, 50:950]
    assert tile.size > finite.BLOCK_VALUES and finite._lines_along_memory(tile) is not None
    big[0, 0] = big[-1, -1] = np.nan  # outside the tile
    assert all_finite(tile)
    lines = finite._lines_along_memory(tile)
    step = finite.BLOCK_VALUES // lines.shape[1]
    for bad in (np.nan, np.inf):
        for where in ((0, 0), (lines.shape[0] - 1, lines.shape[1] - 1), (step - 1, 7), (step, 0)):
            lines[where] = bad
            check = FiniteCheck()
            check.read(tile)
            assert not check.finite and not all_finite(tile)
            lines[where] = 0


def test_a_copy_that_may_warn_stays_on_the_calling_thread(monkeypatch):
    """A cast NumPy does not call safe (complex to real drops the imaginary part, with a ``ComplexWarning``) is
    made by the caller alone, whose warning filters apply."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(shared_work, "helpers", lambda: pytest.fail("a helper was asked to cast"))
    a = np.ones((3 * TILE, 3 * TILE), dtype=np.complex128)
    with pytest.warns(np.exceptions.ComplexWarning):
        copy = arrays.fortran_copy(a, np.float64)
    np.testing.assert_array_equal(copy, a.real)


@pytest.mark.parametrize("op", ["cholesky", "lu_factor", "qr"])
def test_tiled_paths_copy_a_c_ordered_matrix_a_tile_at_a_time(op, monkeypatch):
    """The hybrid path's working copy of a C-ordered matrix is made as the host path's is: the same factors as
    from the Fortran-ordered matrix, and the input untouched."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    a = testing.spd(5 * TILE + 3, dtype=np.float32)
    w = arrays.working_copy(a, a, np.dtype(np.float64), overwrite=False)
    assert w.flags.f_contiguous and w.dtype == np.float64 and not np.shares_memory(w, a)
    np.testing.assert_array_equal(w, a)
    before = a.copy()
    with hetlapack.using(path="hybrid", tile=TILE):
        from_c, from_f = getattr(la, op)(a), getattr(la, op)(np.asfortranarray(a))
    np.testing.assert_array_equal(a, before)
    for x, y in zip(testing.result_arrays(from_c), testing.result_arrays(from_f), strict=True):
        np.testing.assert_array_equal(x, y)


def test_errors_and_warnings_are_scipys(copies):
    n = 3 * TILE + 5
    bad = testing.spd(n)
    bad[4, 4] = -1.0
    nan = testing.spd(n)
    nan[7, 2] = np.nan
    singular = testing.spd(n)
    singular[:, 3] = 0.0
    with hetlapack.using(path="host"):
        for fn in (la.cholesky, la.cho_factor):
            with pytest.raises(np.linalg.LinAlgError) as ours:
                fn(bad)
            with pytest.raises(np.linalg.LinAlgError) as theirs:
                getattr(sl, fn.__name__)(bad)
            assert str(ours.value) == str(theirs.value)
        for name in ("cholesky", "cho_factor", "lu_factor", "qr"):
            with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                getattr(la, name)(nan)
        for lower in (False, True):  # in the triangle the copy zeroes, and in the one it keeps
            for x in (nan, nan.T.copy()):
                with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                    la.cholesky(x, lower=lower)
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            lu, piv = la.lu_factor(singular)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        ref_lu, ref_piv = sl.lu_factor(singular)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs] and len(theirs) == 1
    np.testing.assert_array_equal(piv, ref_piv)
    np.testing.assert_array_equal(lu, ref_lu)


@pytest.mark.parametrize("a", [
    testing.spd(3 * TILE + 5).astype(">f8"),                  # not native
    np.asfortranarray(testing.spd(3 * TILE + 5)),            # already Fortran-ordered
    testing.spd(6 * TILE + 10)[::2, ::2],                   # not contiguous
    testing.spd(3 * TILE + 5).astype(np.int32),              # not a LAPACK dtype
    testing.spd(TILE),                                       # one tile: NumPy's own copy is as fast
], ids=["big-endian", "fortran", "strided", "integer", "one-tile"])
def test_other_inputs_go_to_scipy_as_they_are(a, copies):
    with hetlapack.using(path="host"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        la.lu_factor(a)
    assert not copies


def test_caches_are_read_from_sysfs_or_assumed(tmp_path, monkeypatch):
    for level, kind, size in (("1", "Instruction", "64K"), ("1", "Data", "48K"), ("2", "Unified", "2048K")):
        index = tmp_path / f"index{level}{kind[0]}"
        index.mkdir()
        for field, value in (("level", level), ("type", kind), ("size", size), ("coherency_line_size", "64")):
            (index / field).write_text(value + "\n")
    caches = (machine.l1_data_cache, machine.l2_cache)
    monkeypatch.setattr(machine, "_CACHES", tmp_path)
    try:
        for cache in caches:
            cache.cache_clear()
        assert (machine.l1_data_cache(), machine.l2_cache()) == ((48 * 1024, 64), 2048 * 1024)
        monkeypatch.setattr(machine, "_CACHES", tmp_path / "absent")
        for cache in caches:
            cache.cache_clear()
        assert (machine.l1_data_cache(), machine.l2_cache()) == ((32768, 64), 1 << 20)
    finally:
        for cache in caches:
            cache.cache_clear()


@pytest.mark.parametrize(("features", "expected"), [("", 16), ("+sse2,+avx,-avx512f", 32), ("+avx,+avx2,+avx512f", 64)])
def test_the_vector_width_is_the_one_numba_compiles_for(features, expected, monkeypatch):
    """``NUMBA_CPU_FEATURES`` (or ``NUMBA_CPU_NAME=generic``) makes numba compile for other features than the host's:
    the width the kernels are sized for follows them."""
    from numba.core import config

    monkeypatch.setattr(config, "CPU_FEATURES", features)
    machine.vector_bytes.cache_clear()
    try:
        assert machine.vector_bytes() == expected
    finally:
        machine.vector_bytes.cache_clear()


@pytest.mark.parametrize("dtype", [bool, np.int64, np.float16, np.float64])
@pytest.mark.parametrize("name", ["cholesky", "cho_factor", "lu_factor", "qr", "lu"])
def test_small_matrices_warn_and_return_as_scipy_whatever_their_dtype(name, dtype):
    """The host path's call below SciPy's batch decorator is taken for LAPACK dtypes only: SciPy 1.18's decorator
    warns of the others, and its warnings are the caller's to see."""
    a = (testing.spd(4) if dtype is not bool else np.eye(4)).astype(dtype)
    results = []
    for module in (la, sl):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = getattr(module, name)(a)
        results.append((result, [(w.category, str(w.message)) for w in caught]))
    (ours, our_warnings), (theirs, their_warnings) = results
    assert our_warnings == their_warnings
    for x, y in zip(testing.result_arrays(ours), testing.result_arrays(theirs), strict=True):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype


@pytest.fixture
def direct_calls(monkeypatch):
    """The dtypes of the Cholesky factorizations the host path made itself (by f2py's ``potrf`` before SciPy 1.18,
    by SciPy's compiled loop since), counted."""
    made = []
    potrf, compiled = _host._potrf, _host._compiled_cholesky()

    def counted_potrf(char):
        made.append(char)
        return potrf(char)

    def counted_compiled(a, *flags):
        made.append(a.dtype.char)
        return compiled(a, *flags)

    monkeypatch.setattr(_host, "_potrf", counted_potrf)
    monkeypatch.setattr(_host, "_compiled_cholesky", lambda: None if compiled is None else counted_compiled)
    return made


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("name", ["cholesky", "cho_factor"])
def test_a_plain_cholesky_is_the_call_scipy_makes_to_the_bit(name, order, dtype, direct_calls):
    """The call users make (a contiguous matrix, default flags) is factored without SciPy's Python around it:
    SciPy's factor to the bit, in its layout, with the ``lower`` SciPy returns, and the input untouched."""
    for n in (1, 2, 7, 31, 100):
        a = np.asarray(testing.spd(n, dtype=dtype), order=order)
        before = a.copy()
        for lower in (False, True):
            ours, theirs = getattr(la, name)(a, lower=lower), getattr(sl, name)(a, lower=lower)
            np.testing.assert_array_equal(a, before)
            testing.assert_same_results(ours, theirs)
            if name == "cho_factor":
                assert repr(ours[1]) == repr(theirs[1])
    assert len(direct_calls) == 10


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("name", ["cholesky", "cho_factor"])
def test_a_cholesky_at_a_calibrated_block_is_lapacks_right_looking_variant_in_scipys_layout(name, order, dtype,
                                                                                            monkeypatch):
    """Where calibration gave the host path's Cholesky a block, the call users make runs LAPACK's right-looking
    variant at it, from the tiled copy too: SciPy's factor to within rounding (odd orders, one block and several),
    in SciPy's layout, dtype and flags, with SciPy's other triangle (the input's or zeros), the input untouched; a
    matrix that is not positive definite and a NaN with ``check_finite`` raise SciPy's errors. Under SciPy 1.18 the
    call stays SciPy's compiled one, whose whole call the variant's did not beat."""
    from hetlapack.devices import lapack_pointers
    from hetlapack.perf import model

    ran = []
    right_looking = lapack_pointers.potrf_right_looking
    monkeypatch.setattr(model, "host_potrf_block", lambda dtype, n, uplo: TILE)
    monkeypatch.setattr(lapack_pointers, "potrf_right_looking", lambda *args, **kwargs: ran.append(args[2]) or
                        right_looking(*args, **kwargs))
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(_host, "tile_order", lambda: TILE)
    rtol = 100 * np.finfo(dtype).eps
    for n in (1, 7, 37):
        a = np.asarray(testing.spd(n, dtype=dtype), order=order)
        before = a.copy()
        for lower in (False, True):
            ours, theirs = getattr(la, name)(a, lower=lower), getattr(sl, name)(a, lower=lower)
            ours, theirs = (ours, theirs) if name == "cholesky" else (ours[0], theirs[0])
            assert ours.dtype == theirs.dtype and ours.flags.f_contiguous == theirs.flags.f_contiguous
            other = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
            np.testing.assert_array_equal(ours[other], theirs[other])
            np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol * np.abs(theirs).max())
            np.testing.assert_array_equal(a, before)
            if name == "cho_factor":
                assert repr(getattr(la, name)(a, lower=lower)[1]) == repr(getattr(sl, name)(a, lower=lower)[1])
    compiled = _host._compiled_cholesky() is not None
    calls = 2 if name == "cho_factor" else 1  # cho_factor's flag is compared by a second call
    assert len(ran) == (0 if compiled else calls * 6)
    bad, nan = a.copy(), a.copy()
    bad[4, 4], nan[30, 2] = -1, np.nan
    for matrix, error in ((bad, np.linalg.LinAlgError), (nan, ValueError)):
        with pytest.raises(error) as theirs:
            getattr(sl, name)(matrix)
        with pytest.raises(error) as ours:
            getattr(la, name)(matrix)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.skipif(COMPILED_BATCH_LOOPS, reason="SciPy 1.18's compiled loop zeroes the other triangle itself")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("lower", [False, True])
def test_a_cholesky_past_one_tile_zeroes_the_other_triangle_itself(lower, order, dtype, monkeypatch):
    """Past one tile, where f2py's ``clean`` loop misses the cache, the direct Cholesky leaves the zeros to
    ``zero_other_triangle``: SciPy's factor to the bit, in its layout; a matrix that is not positive definite is
    SciPy's error, with nothing zeroed."""
    zeroed = []

    def counted(c, lower_factor):
        zeroed.append(c.shape)
        arrays.zero_other_triangle(c, lower_factor)

    monkeypatch.setattr(_host, "tile_order", lambda: TILE)
    monkeypatch.setattr(_host, "zero_other_triangle", counted)
    a = np.asarray(testing.spd(3 * TILE + 5, dtype=dtype), order=order)
    before = a.copy()
    with hetlapack.using(path="host"):
        testing.assert_same_results(la.cholesky(a, lower=lower), sl.cholesky(a, lower=lower))
        np.testing.assert_array_equal(a, before)
        assert zeroed == [a.shape]
        a[4, 4] = -1.0
        with pytest.raises(np.linalg.LinAlgError, match="5-th leading minor"):
            la.cholesky(a, lower=lower)
    assert zeroed == [a.shape]


def test_a_cholesky_lapack_cannot_make_or_may_not_check_is_scipys_own_call(direct_calls):
    """A matrix that is not positive definite is tried by the direct call and then given to SciPy for its error
    (whose text ``test_errors_and_warnings_are_scipys`` compares); infinities and NaNs with ``check_finite``, a
    non-square matrix, flags other than plain bools, ``overwrite_a`` and views go to SciPy's call at once: its
    results and errors (a byte-swapped one is first copied to the machine's byte order:
    ``test_byte_swapped_matrices_factor_as_in_the_machines_order``)."""
    bad = testing.spd(9)
    bad[4, 4] = -1.0
    nan = testing.spd(9)
    nan[7, 2] = np.nan
    for name in ("cholesky", "cho_factor"):
        with pytest.raises(np.linalg.LinAlgError):
            getattr(la, name)(bad)
    assert direct_calls == ["d", "d"]
    spd = testing.spd(18)
    calls = [(lambda: nan, {}), (lambda: np.ones((3, 4)), {}), (spd.copy, {"lower": 1}),
             (spd.copy, {"overwrite_a": True}), (lambda: spd[::2, ::2], {})]
    for make, options in calls:
        for name in ("cholesky", "cho_factor"):
            try:
                expected = getattr(sl, name)(make(), **options)
            except Exception as error:  # noqa: BLE001 - SciPy's error is ours
                with pytest.raises(type(error), match=re.escape(str(error))):
                    getattr(la, name)(make(), **options)
                continue
            testing.assert_same_results(getattr(la, name)(make(), **options), expected)
    assert direct_calls == ["d", "d"]


@pytest.fixture
def loop_calls(monkeypatch):
    """The QR and LU factorizations the host path made through SciPy's compiled loops, counted by name (none where
    the installed SciPy has no such loop: QR before 1.18)."""
    made = []

    def counted(name):
        compiled = getattr(_host, name)()

        def call(a, *flags):
            made.append(name)
            return compiled(a, *flags)

        monkeypatch.setattr(_host, name, lambda: None if compiled is None else call)

    counted("_compiled_qr")
    counted("_compiled_lu")
    return made


SHAPES = [(1, 1), (2, 2), (7, 3), (3, 7), (31, 31), (100, 100)]


def _matrix(shape, dtype, layout):
    a = testing.random_matrix(shape, dtype=dtype, seed=sum(shape))
    return a[::-1, ::-1] if layout == "reversed view" else np.asarray(a, order=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["C", "F", "reversed view"])
def test_a_plain_qr_or_lu_is_the_call_scipy_makes_to_the_bit(layout, dtype, loop_calls):
    """SciPy's ``qr`` (1.18) and ``lu`` on the call users make are compiled loops behind Python checks that cost
    as much as the factorization at small orders: the shim makes those checks and calls the loops on the array as
    SciPy would hand it over (any strides). Every mode and flag is SciPy's to the bit, in its layout, and the input
    stays untouched; a 1 x 1 ``lu`` is SciPy's own call (it does not factor one)."""
    expected = []
    for shape in SHAPES:
        a = _matrix(shape, dtype, layout)
        before = a.copy()
        for mode in ("full", "r", "economic"):
            for pivoting in (False, True):
                options = {"mode": mode, "pivoting": pivoting}
                testing.assert_same_results(la.qr(a, **options), sl.qr(a, **options))
                expected.append("_compiled_qr")
        for permute_l in (False, True):
            for p_indices in (False, True):
                options = {"permute_l": permute_l, "p_indices": p_indices}
                testing.assert_same_results(la.lu(a, **options), sl.lu(a, **options))
                expected += ["_compiled_lu"] * (shape != (1, 1))
        np.testing.assert_array_equal(a, before)
    available = {name for name in ("_compiled_qr", "_compiled_lu") if getattr(_host, name)() is not None}
    assert loop_calls == [name for name in expected if name in available]


def test_a_qr_or_lu_the_shim_may_not_check_is_scipys_own_call(loop_calls):
    """Infinities and NaNs with ``check_finite``, ``overwrite_a``, QR's raw mode and an explicit ``lwork``, an
    empty matrix and flags other than plain bools: SciPy's own call, its results and errors. SciPy 1.18 no longer
    uses ``lwork``: the call without it is then the compiled loop's, after SciPy's warning."""
    a = testing.random_matrix((9, 6), seed=3)
    nan = a.copy()
    nan[7, 2] = np.nan
    calls = [(sl.qr, lambda: nan, {}), (sl.qr, a.copy, {"overwrite_a": True}), (sl.qr, a.copy, {"mode": "raw"}),
             (sl.qr, a.copy, {"lwork": 64}), (sl.qr, lambda: np.ones((0, 3)), {}), (sl.qr, a.copy, {"pivoting": 1}),
             (sl.lu, lambda: nan, {}), (sl.lu, a.copy, {"overwrite_a": True}), (sl.lu, lambda: np.ones((0, 3)), {}),
             (sl.lu, a.copy, {"permute_l": 1}), (sl.lu, a.copy, {"p_indices": np.True_})]
    for function, make, options in calls:
        ours = getattr(la, function.__name__)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # SciPy 1.18 deprecates lwork
            try:
                expected = function(make(), **options)
            except Exception as error:  # noqa: BLE001 - SciPy's error is ours to raise
                with pytest.raises(type(error), match=re.escape(str(error))):
                    ours(make(), **options)
                continue
            testing.assert_same_results(ours(make(), **options), expected)
    unused_lwork = qr_lwork_deprecation() is not None and _host._compiled_qr() is not None
    assert loop_calls == (["_compiled_qr"] if unused_lwork else [])


@pytest.mark.parametrize("answer", ["its input", "raises"])
@pytest.mark.parametrize("name", ["_cholesky", "_qr", "_lu"])
def test_a_compiled_loop_that_answers_otherwise_than_scipy_is_never_called(name, answer, monkeypatch):
    """SciPy's compiled loops are private to it: one that answers a probe otherwise than SciPy's public function
    (here with its input, unfactored) or raises is never trusted, and the call stays SciPy's own."""
    def other(a, *flags):
        if answer == "raises":
            raise TypeError("another signature")
        return {"_cholesky": (a, []), "_qr": (a, a, None, None, []), "_lu": (np.arange(len(a)), a, a)}[name]

    monkeypatch.setattr(_host.importlib, "import_module", lambda module: types.SimpleNamespace(**{name: other}))
    trusted = getattr(_host, "_compiled" + name)
    trusted.cache_clear()
    try:
        assert trusted() is None
        a = testing.spd(5)
        testing.assert_same_results((la.cholesky(a), *la.qr(a), *la.lu(a)), (sl.cholesky(a), *sl.qr(a), *sl.lu(a)))
    finally:
        trusted.cache_clear()


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (64, 64), (65, 65), (200, 200), (200, 70), (70, 200), (129, 1)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("lower", [False, True])
def test_zero_other_triangle_leaves_the_factors_triangle_in_every_block(shape, order, lower):
    """Blocks of columns, their diagonal parts through a mask: ``np.tril`` / ``np.triu``'s result, in place, in the
    matrix's own layout, whatever the shape (``upper_trapezoid`` hands it wide and tall ones)."""
    a = np.array(testing.random_matrix(shape), order=order)
    expected = np.tril(a) if lower else np.triu(a)
    arrays.zero_other_triangle(a, lower)
    np.testing.assert_array_equal(a, expected)
    assert a.flags.c_contiguous == (order == "C" or min(shape) == 1)


@pytest.mark.parametrize("n", [1, TILE, TILE + 1, 3 * TILE + 5, 4 * TILE])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
@pytest.mark.parametrize("cores", [1, 2, 3])
@pytest.mark.parametrize("upper", [False, True])
def test_c_ordered_in_place_is_the_matrix_or_its_upper_triangle_to_the_bit(n, dtype, cores, upper, monkeypatch):
    """Transposed in place a tile at a time, shared among the cores, the matrix (or R, ``np.triu`` of it: the
    tile path's ``qr(mode='r')``) is C-ordered in its own memory."""
    monkeypatch.setattr(arrays, "swap_tile", lambda itemsize: TILE)
    monkeypatch.setattr(arrays, "usable_cores", lambda: cores)
    x = np.asfortranarray(testing.general(n, n, dtype=dtype))
    expected = np.triu(x) if upper else x.copy()
    c = arrays.c_ordered_in_place(x, upper=upper)
    np.testing.assert_array_equal(c, expected)
    assert c.flags.c_contiguous and c.dtype == dtype and np.shares_memory(c, x)


@pytest.fixture
def r_made_in_place(monkeypatch):
    """Tiles of ``TILE`` rows; the working matrices the tile path's R was made in, recorded."""
    monkeypatch.setattr(arrays, "tile_order", lambda: TILE)
    monkeypatch.setattr(arrays, "swap_tile", lambda itemsize: TILE)
    made = []

    def recorded(packed, upper=False):
        made.append(packed)
        return arrays.c_ordered_in_place(packed, upper=upper)

    monkeypatch.setattr(base, "c_ordered_in_place", recorded)
    return made


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("overwrite_a", [False, True])
def test_the_tile_paths_r_alone_leaves_the_callers_array_its_own(order, overwrite_a, r_made_in_place):
    """``qr(mode='r')`` on the tile path makes R in its working copy, never in the caller's array: R shares no
    memory with it, is laid out as SciPy's (Fortran-ordered where SciPy 1.18 makes it in place, in a Fortran-ordered
    array it may overwrite), and the array is unchanged unless it could be overwritten (Fortran order,
    ``overwrite_a``)."""
    a = np.asarray(testing.general(3 * TILE + 5, 3 * TILE + 5), order=order)
    before = a.copy()
    with hetlapack.using(path="hybrid", tile=TILE):
        (r,) = la.qr(a, mode="r", overwrite_a=overwrite_a)
    (theirs,) = sl.qr(np.array(before, order=order), mode="r", overwrite_a=overwrite_a)
    np.testing.assert_allclose(r, theirs, atol=1e-12 * np.abs(before).max() * len(a))
    assert (r.flags.c_contiguous, r.flags.f_contiguous) == (theirs.flags.c_contiguous, theirs.flags.f_contiguous)
    assert not np.shares_memory(r, a)
    overwritable = overwrite_a and order == "F"
    assert len(r_made_in_place) == (not overwritable)
    if not overwritable:
        np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("order", ["C", "F"])
def test_numpys_r_alone_on_the_tile_path_is_made_in_place_and_leaves_the_array(order, r_made_in_place):
    """``numpy.linalg.qr(mode='r')`` never overwrites its input: on the tile path R is made in the working copy."""
    a = np.asarray(testing.general(3 * TILE + 5, 3 * TILE + 5), order=order)
    before = a.copy()
    with hetlapack.using(path="hybrid", tile=TILE):
        r = hetlapack.compat.numpy_linalg.qr(a, mode="r")
    expected = np.linalg.qr(before, mode="r")
    np.testing.assert_allclose(r, expected, atol=1e-12 * np.abs(before).max() * len(a))
    assert len(r_made_in_place) == 1 and not np.shares_memory(r, a)
    assert (r.flags.c_contiguous, r.flags.f_contiguous) == (expected.flags.c_contiguous, expected.flags.f_contiguous)
    np.testing.assert_array_equal(a, before)
