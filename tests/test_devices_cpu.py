"""CpuDevice kernels: in place on tile views with the matrix's leading dimension, all dtypes, GIL released."""

import itertools
import threading

import numpy as np
import pytest
import scipy.linalg as sl

from hetlapack.devices import CpuDevice, Device, available
from hetlapack.devices import lapack_pointers as lp
from hetlapack.testing import general, ill_conditioned, spd
from hetlapack.testing.residuals import cholesky_residual

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 1e-4, np.float64: 1e-12, np.complex64: 1e-4, np.complex128: 1e-12}


@pytest.fixture(scope="module")
def cpu():
    return CpuDevice(workers=1)


def embedded(block: np.ndarray, rows: int = 3, cols: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """A Fortran matrix with ``block`` copied into its middle, and the view onto it (leading dim > rows)."""
    m, n = block.shape
    host = np.asfortranarray(general(m + rows + 4, n + cols + 3, dtype=block.dtype, seed=9))
    view = host[rows:rows + m, cols:cols + n]
    view[...] = block
    return host, view


def test_available_lists_the_cpu():
    devices = available()
    assert len(devices) == 1 and isinstance(devices[0], CpuDevice) and isinstance(devices[0], Device)
    assert devices[0].kind == "cpu" and devices[0].memory_space == "host"


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_on_views_leaves_the_rest_untouched(cpu, dtype):
    a, b, c = general(9, 5, dtype=dtype, seed=1), general(5, 7, dtype=dtype, seed=2), general(9, 7, dtype=dtype, seed=3)
    host, view = embedded(c)
    before = host.copy()
    cpu.gemm(a.T.conj().copy(order="F"), np.asfortranarray(b), view, conj_a=True, alpha=2.0, beta=0.5)
    np.testing.assert_allclose(view, 2.0 * a @ b + 0.5 * c, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    mask = np.ones(host.shape, bool)
    mask[3:12, 2:9] = False
    assert np.array_equal(host[mask], before[mask])


@pytest.mark.parametrize("dtype", DTYPES)
def test_potrf_trsm_herk_match_scipy(cpu, dtype):
    a = spd(6, dtype=dtype)
    host, view = embedded(a)
    assert cpu.potrf(view, lower=True) == 0
    np.testing.assert_allclose(np.tril(view), sl.cholesky(a, lower=True), rtol=TOL[dtype] * 100, atol=TOL[dtype] * 100)
    b = general(4, 6, dtype=dtype)
    _, bview = embedded(b)
    cpu.trsm(view, bview, side="R", lower=True, conj=True, unit=False)
    np.testing.assert_allclose(bview @ np.tril(view).conj().T, b, rtol=TOL[dtype] * 100, atol=TOL[dtype] * 100)
    c = spd(4, dtype=dtype)
    _, cview = embedded(c)
    solved = bview.copy()
    cpu.herk(bview, cview, lower=True, conj_first=False)
    np.testing.assert_allclose(np.tril(cview), np.tril(c - solved @ solved.conj().T), rtol=TOL[dtype] * 100,
                               atol=TOL[dtype] * 100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("order", [1, 17, 67, 130])
def test_trsm_by_halves_solves_as_blas_trsm(dtype, side, order):
    """Halved down to triangles of 16 (odd halves included), every triangle, transpose and diagonal solves to
    within a few rounding errors of BLAS's own ``?trsm`` on the same views, and writes nothing outside ``B``."""
    kind = np.dtype(dtype).char
    transposes = "NTC" if kind in "FD" else "NT"
    a = general(order, order, dtype=dtype, seed=4) / order + 2 * np.eye(order, dtype=dtype)  # well conditioned
    _, a_view = embedded(a)
    b = general(order, 5, dtype=dtype, seed=5) if side == "L" else general(5, order, dtype=dtype, seed=5)
    for uplo, trans, diag in itertools.product("LU", transposes, "NU"):
        expected_host, expected = embedded(b)
        lp.trsm(side, uplo, trans, diag, 0.5, a_view, expected)
        host, view = embedded(b)
        lp.trsm_by_halves(side, uplo, trans, diag, 0.5, a_view, view, leaf=16)
        np.testing.assert_allclose(view, expected, rtol=TOL[dtype], atol=TOL[dtype], err_msg=f"{uplo}{trans}{diag}")
        view[...] = expected
        assert np.array_equal(host, expected_host)


@pytest.mark.parametrize("library", ["scipy", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("order", [1, 16, 37, 70])
def test_right_looking_potrf_factors_as_lapacks_potrf(dtype, uplo, order, library):
    """LAPACK's right-looking Cholesky at blocks that divide the order, do not, or exceed it, on SciPy's BLAS and on
    NumPy's own (ILP64): a backward error within LAPACK's bounds (also on an ill-conditioned matrix), SciPy's
    LAPACK's factor to within rounding, the other triangle and everything outside the view untouched, and
    ``?potrf``'s ``info`` (the global leading minor) on a matrix that is not positive definite."""
    library = lp.SCIPY if library == "scipy" else lp.numpy_library()
    if library is None:
        pytest.skip("NumPy's BLAS is not the OpenBLAS NumPy's wheels ship")
    lower = uplo == "L"
    triangle = np.tril if lower else np.triu
    for a in (spd(order, dtype=dtype, seed=2), ill_conditioned(order, 1e5, dtype=dtype, hermitian=True)):
        expected = np.asfortranarray(a.copy())
        assert lp.potrf(uplo, expected) == 0
        for block in (8, 16, 100):
            host, view = embedded(a)
            before = host.copy()
            assert lp.potrf_right_looking(uplo, view, block, library=library) == 0
            assert cholesky_residual(a, view, lower) < 50
            np.testing.assert_allclose(triangle(view), triangle(expected), rtol=TOL[dtype] * 100,
                                       atol=TOL[dtype] * 100)
            view[...] = np.where(triangle(np.ones(a.shape, bool)), before[3:3 + order, 2:2 + order], view)
            assert np.array_equal(host, before)
    if order > 1:
        bad = spd(order, dtype=dtype)
        bad[order - 1, order - 1] = -1
        expected = np.asfortranarray(bad.copy())
        _, view = embedded(bad)
        assert lp.potrf_right_looking(uplo, view, 8, library=library) == lp.potrf(uplo, expected) == order


def test_numpys_library_is_numpys_own_ilp64_openblas():
    """NumPy's library is another BLAS than SciPy's, and reads 64-bit integers: an order whose low 32 bits are 3
    and whose value is negative is ``?potrf``'s illegal second argument there, where an LP64 library would factor a
    3 x 3 matrix."""
    import ctypes

    library = lp.numpy_library()
    if library is None:
        pytest.skip("NumPy's BLAS is not the OpenBLAS NumPy's wheels ship")
    assert library.integer is ctypes.c_int64 and library.address("dpotrf") != lp.SCIPY.address("dpotrf")
    a = np.asfortranarray(spd(3))
    before, info = a.copy(), library.integer(0)
    lp.routine("potrf", "d", library)(ctypes.byref(lp.char("L")), ctypes.byref(library.integer(3 - 2**32)),
                                      lp.address(a), ctypes.byref(library.integer(3)), ctypes.byref(info))
    assert info.value == -2 and np.array_equal(a, before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_potrf_reports_lapack_info(cpu, dtype):
    a = spd(5, dtype=dtype)
    a[2, 2] = -10
    assert cpu.potrf(np.asfortranarray(a), lower=False) == 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_getrf_laswp_match_lapack(cpu, dtype):
    a = general(8, 5, dtype=dtype)
    host, view = embedded(a)
    piv = np.zeros(5, dtype=np.int32)
    assert cpu.getrf(view, piv) == 0
    lu, ref_piv, _ = sl.lapack.get_lapack_funcs("getrf", (a,))(a)
    assert np.array_equal(piv - 1, ref_piv)
    np.testing.assert_allclose(view, lu, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    rows = general(8, 3, dtype=dtype, seed=4)
    _, rview = embedded(rows)
    cpu.laswp(rview, piv)
    expected = rows.copy()
    for i, p in enumerate(piv - 1):
        expected[[i, p]] = expected[[p, i]]
    assert np.array_equal(rview, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_geqrf_larft_larfb_orgqr(cpu, dtype):
    a = general(9, 4, dtype=dtype)
    host, view = embedded(a)
    tau = np.zeros(4, dtype=dtype)
    cpu.geqrf(view, tau)
    qr_ref, tau_ref, *_ = sl.lapack.get_lapack_funcs("geqrf", (a,))(a)
    np.testing.assert_allclose(view, qr_ref, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    t = np.zeros((4, 4), dtype=dtype, order="F")
    cpu.larft(view, tau, t)
    c = general(9, 3, dtype=dtype, seed=5)
    _, cview = embedded(c)
    cpu.larfb(view, t, cview, conj=True)
    q = np.asfortranarray(np.tril(view, -1))
    cpu.orgqr(q, tau)
    np.testing.assert_allclose(q.conj().T @ c, cview[:4], rtol=TOL[dtype] * 100, atol=TOL[dtype] * 100)


@pytest.mark.parametrize("shape", [(9, 4), (4, 4), (3, 5)], ids=["tall", "square", "wide"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_geqrt_equals_geqrf_then_larft(cpu, dtype, shape):
    """The recursive panel gives geqrf's reflectors, R and tau, and larft's T (wide panels take the fallback)."""
    a = general(*shape, dtype=dtype, seed=4)
    k = min(shape)
    host, view = embedded(a)
    tau, t = np.zeros((k, 1), dtype=dtype), np.zeros((6, k), dtype=dtype, order="F")
    cpu.geqrt(view, tau, t)
    ref, tau_ref = np.array(a, order="F"), np.zeros(k, dtype=dtype)
    t_ref = np.zeros((k, k), dtype=dtype, order="F")
    Device.geqrt(cpu, ref, tau_ref, t_ref)
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(view, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(tau[:, 0], tau_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.triu(t[:k]), np.triu(t_ref), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(9, 4), (4, 4), (1, 1), (3, 5)], ids=["tall", "square", "one", "wide"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_orgqr_from_t_equals_lapacks(cpu, dtype, shape):
    """Q of a panel from its compact-WY factor (two triangular multiplies) is LAPACK orgqr's, whatever the panel's
    upper triangle and T's lower one hold (a wide panel takes LAPACK's)."""
    k = min(shape)
    host, view = embedded(general(*shape, dtype=dtype, seed=6))
    tau, t = np.zeros((k, 1), dtype=dtype), np.full((6, k), np.nan, dtype=dtype, order="F")
    t[:k] = general(k, k, dtype=dtype, seed=7)
    cpu.geqrt(view, tau, t)
    expected = np.array(view, order="F")
    cpu.orgqr(expected, tau[:, 0])
    cpu.orgqr(view, tau[:, 0], t)
    tol = TOL[dtype] * 10
    np.testing.assert_allclose(view, expected, rtol=tol, atol=tol)


def test_kernels_reject_c_ordered_views(cpu):
    with pytest.raises(ValueError, match="Fortran"):
        cpu.gemm(np.ones((3, 3)), np.ones((3, 3)), np.ones((3, 3), order="F"))


def test_kernels_release_the_gil(cpu):
    """A Python counter keeps advancing while a long DGEMM runs in another thread."""
    n = 1500
    a, b = np.asfortranarray(general(n, n)), np.asfortranarray(general(n, n, seed=1))
    c = np.zeros((n, n), order="F")
    started = threading.Event()

    def multiply():
        started.set()
        for _ in range(3):
            cpu.gemm(a, b, c, alpha=1.0, beta=0.0)

    thread = threading.Thread(target=multiply)
    thread.start()
    started.wait()
    counter = 0
    while thread.is_alive():
        counter += 1
    thread.join()
    assert counter > 10_000
    np.testing.assert_allclose(c, a @ b, rtol=1e-10, atol=1e-10)
