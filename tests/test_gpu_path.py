"""The gpu path: the whole factorization on one accelerator (seed 001), end to end through ``hetlapack.linalg``.

The accelerator is the emulated device here and the CUDA device where CuPy sees a GPU (the same bodies; CUDA cases
skip with the reason otherwise). Results equal SciPy's (pivots, R's signs), inputs are unmodified, the matrix
crosses the link once each way, and SciPy's errors come out of the device.
"""

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hl
from hetlapack.compat import numpy_linalg
from hetlapack.dispatch.paths import hybrid
from hetlapack.devices import EmulatedDevice, available
from hetlapack.perf import model
from hetlapack.testing import general, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def accelerator(kind: str):
    if kind == "emulated":
        return EmulatedDevice(0)
    names = [d.name for d in available() if d.name.startswith("cuda:")]
    if not names:
        pytest.skip("no CUDA device: CuPy is not installed or sees no GPU (the emulated case covers this path)")
    return names[0]


@pytest.mark.parametrize("kind", ["emulated", "cuda"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_results_equal_scipys_and_inputs_stay(kind, dtype):
    device = accelerator(kind)
    a_spd, a_gen = spd(61, dtype=dtype), general(70, 53, dtype=dtype)
    kept_spd, kept_gen = a_spd.copy(), a_gen.copy()
    with hetlapack.using(path="gpu", devices=[device]):
        assert hetlapack.explain("cholesky", a_spd).path == "gpu"
        c = hl.cholesky(a_spd, lower=True)
        lu, piv = hl.lu_factor(a_gen)
        q, r = hl.qr(a_gen)
        r_only, = hl.qr(a_gen, mode="r")
        qe, re = hl.qr(a_gen, mode="economic")
        (raw, tau), r_raw = hl.qr(a_gen, mode="raw")
    tol = 100 * np.finfo(dtype).eps * 70
    np.testing.assert_allclose(c, sl.cholesky(kept_spd, lower=True), atol=tol * np.abs(kept_spd).max())
    lu_ref, piv_ref = sl.lu_factor(kept_gen)
    np.testing.assert_array_equal(piv, piv_ref)
    np.testing.assert_allclose(lu, lu_ref, atol=tol * np.abs(lu_ref).max())
    q_ref, r_ref = sl.qr(kept_gen)
    np.testing.assert_allclose(r, r_ref, atol=tol * np.abs(r_ref).max())
    np.testing.assert_allclose(q, q_ref, atol=tol)
    np.testing.assert_allclose(r_only, r_ref, atol=tol * np.abs(r_ref).max())
    np.testing.assert_allclose(qe @ re, kept_gen, atol=tol * np.abs(kept_gen).max())
    (raw_ref, tau_ref), r_raw_ref = sl.qr(kept_gen, mode="raw")
    np.testing.assert_allclose(raw, raw_ref, atol=tol * np.abs(raw_ref).max())
    np.testing.assert_allclose(tau, tau_ref, atol=tol)
    np.testing.assert_allclose(r_raw, r_raw_ref, atol=tol * np.abs(r_raw_ref).max())
    assert raw.flags.f_contiguous and tau.dtype == np.dtype(dtype)
    assert c.dtype == lu.dtype == q.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(a_spd, kept_spd)
    np.testing.assert_array_equal(a_gen, kept_gen)


@pytest.mark.parametrize("kind", ["emulated", "cuda"])
def test_numpys_single_precision_is_computed_in_double_on_the_device(kind):
    """NumPy factors float32 and complex64 in double and rounds: so does the gpu path behind the NumPy shim (a
    float32 matrix positive definite only to double precision factors; a factorization in single would fail)."""
    device = accelerator(kind)
    v = np.random.default_rng(1).uniform(1, 2, 40)
    hpd = (np.outer(v, v) + 1e-6 * np.eye(40)).astype(np.float32)
    gen = general(40, 40, dtype=np.complex128, seed=3).astype(np.complex64)
    with hetlapack.using(path="gpu", devices=[device]):
        pairs = [(numpy_linalg.cholesky(hpd), np.linalg.cholesky(hpd)), *zip(numpy_linalg.qr(gen), np.linalg.qr(gen))]
    for ours, theirs in pairs:
        assert ours.dtype == theirs.dtype and ours.strides == theirs.strides
        assert np.linalg.norm(ours - theirs) <= 0.1 * np.finfo(np.float32).eps * np.linalg.norm(theirs)


def test_the_matrix_crosses_the_link_once_each_way():
    device = EmulatedDevice(0)
    a = spd(80)
    with hetlapack.using(path="gpu", devices=[device]):
        hl.cholesky(a)
    assert device.uploaded_bytes == a.nbytes and device.downloaded_bytes == a.nbytes


def _recording_uploads(device: EmulatedDevice) -> list[np.ndarray]:
    """The host arrays ``device`` is asked to upload, recorded as they arrive."""
    sent: list[np.ndarray] = []
    upload = device.upload

    def record(host, out):
        sent.append(host)
        upload(host, out)

    device.upload = record
    return sent


def _laid_out(m: np.ndarray, layout: str) -> np.ndarray:
    """``m`` C- or Fortran-ordered, or as a strided view (every other row and column of a larger array)."""
    if layout == "strided":
        wide = np.zeros((2 * m.shape[0], 2 * m.shape[1]), dtype=m.dtype)
        wide[::2, ::2] = m
        return wide[::2, ::2]
    return np.asarray(m, order=layout)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_the_callers_matrix_is_uploaded_as_it_lies_and_never_written(layout):
    """No working copy on the host: the device reads the caller's array itself, through a read-only view."""
    device = EmulatedDevice(0)
    sent = _recording_uploads(device)
    a_spd, a_gen = (_laid_out(m, layout) for m in (spd(41), general(37, 29)))
    kept_spd, kept_gen = a_spd.copy(), a_gen.copy()
    with hetlapack.using(path="gpu", devices=[device]):
        c = hl.cholesky(a_spd)
        lu, piv = hl.lu_factor(a_gen)
        r, = hl.qr(a_gen, mode="r")
        c_numpy = numpy_linalg.cholesky(a_spd)
    assert [np.shares_memory(host, source) for host, source in zip(sent, (a_spd, a_gen, a_gen, a_spd))] == [True] * 4
    assert not any(host.flags.writeable for host in sent)
    np.testing.assert_array_equal(a_spd, kept_spd)
    np.testing.assert_array_equal(a_gen, kept_gen)
    tol = 1e-12
    np.testing.assert_allclose(c, sl.cholesky(kept_spd), atol=tol)
    np.testing.assert_allclose(c_numpy, np.linalg.cholesky(kept_spd), atol=tol)
    lu_ref, piv_ref = sl.lu_factor(kept_gen)
    np.testing.assert_array_equal(piv, piv_ref)
    np.testing.assert_allclose(lu, lu_ref, atol=tol)
    np.testing.assert_allclose(r, sl.qr(kept_gen, mode="r")[0], atol=tol)
    assert c.flags.f_contiguous == sl.cholesky(kept_spd).flags.f_contiguous
    assert lu.flags.f_contiguous == lu_ref.flags.f_contiguous


def test_the_other_triangle_is_zeroed_on_the_device(monkeypatch):
    def no_host_pass(*args, **kwargs):
        raise AssertionError("the factor's other triangle was zeroed on the host")

    monkeypatch.setattr(hybrid, "zero_other_triangle", no_host_pass)
    a = spd(45)
    with hetlapack.using(path="gpu", devices=[EmulatedDevice(0)]):
        for lower in (False, True):
            np.testing.assert_allclose(hl.cholesky(a, lower=lower), sl.cholesky(a, lower=lower), atol=1e-12)
        c, _ = hl.cho_factor(a)
    np.testing.assert_array_equal(np.tril(c, -1), np.tril(sl.cho_factor(a)[0], -1))  # SciPy 1.18 zeroes it too


def test_overwrite_a_puts_the_factors_in_the_callers_fortran_matrix_as_scipy_does():
    a_spd, a_gen = np.asfortranarray(spd(33)), np.asfortranarray(general(33))
    c_ref, (lu_ref, piv_ref) = sl.cholesky(a_spd.copy(order="F")), sl.lu_factor(a_gen.copy(order="F"))
    with hetlapack.using(path="gpu", devices=[EmulatedDevice(0)]):
        c = hl.cholesky(a_spd, overwrite_a=True)
        lu, piv = hl.lu_factor(a_gen, overwrite_a=True)
    assert np.shares_memory(c, a_spd) and np.shares_memory(lu, a_gen)
    np.testing.assert_allclose(c, c_ref, atol=1e-12)
    np.testing.assert_allclose(lu, lu_ref, atol=1e-12)
    np.testing.assert_array_equal(piv, piv_ref)


def test_infinities_and_nans_are_found_on_the_device_with_scipys_error(monkeypatch):
    """``check_finite`` runs on the device after the upload, not as a pass over the host matrix; SciPy's ValueError
    comes first even where f2py would also reject a flag, as in SciPy."""
    a_spd, a_gen = spd(24), general(24, 20)
    a_spd[3, 5] = a_gen[7, 2] = np.nan

    def no_host_pass(*args, **kwargs):
        raise AssertionError("the host matrix was scanned for infinities and NaNs")

    with hetlapack.using(path="gpu", devices=[EmulatedDevice(0)]):
        with monkeypatch.context() as patched:
            patched.setattr(np, "asarray_chkfinite", no_host_pass)
            for call in (lambda: hl.cholesky(a_spd), lambda: hl.cho_factor(a_spd), lambda: hl.lu_factor(a_gen),
                         lambda: hl.lu(a_gen), lambda: hl.qr(a_gen), lambda: hl.qr(a_gen, mode="r")):
                with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
                    call()
            lu, _ = hl.lu_factor(a_gen, check_finite=False)
            assert np.isnan(lu).any()
        with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
            hl.cholesky(a_spd, lower=2)
    with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
        sl.cholesky(a_spd, lower=2)


def test_scipy_errors_come_out_of_the_device():
    a = spd(40)
    a[25, 25] = -1.0
    with pytest.raises(np.linalg.LinAlgError) as theirs:
        sl.cholesky(a)
    with hetlapack.using(path="gpu", devices=[EmulatedDevice(0)]):
        with pytest.raises(np.linalg.LinAlgError) as ours:
            hl.cholesky(a)
        assert str(ours.value) == str(theirs.value) and "26" in str(ours.value)
        singular = general(30)
        singular[:, 7] = 0.0
        with pytest.warns(sl.LinAlgWarning, match="Diagonal number 8 is exactly zero"):
            hl.lu_factor(singular)


def test_a_matrix_larger_than_the_accelerators_memory_does_not_take_the_gpu_path():
    """The gpu path holds the matrix whole; where the accelerator's memory cannot, dispatch says so and a forced gpu
    path raises, while the hybrid path streams the tiles through that memory."""
    a = spd(200)
    small = EmulatedDevice(0, memory_bytes=a.nbytes // 4)
    with hetlapack.using(devices=["cpu", small]):
        plan = hetlapack.explain("cholesky", a)
    assert "does not fit emulated:0's memory" in plan.unavailable["gpu"] and "gpu" not in plan.predicted_s
    with hetlapack.using(path="gpu", devices=[small]), pytest.raises(ValueError, match="cannot be honoured.*not fit"):
        hl.cholesky(a)
    with hetlapack.using(path="hybrid", devices=["cpu", small], tile=50):
        np.testing.assert_allclose(hl.cholesky(a), sl.cholesky(a), atol=1e-12)
    with hetlapack.using(devices=["cpu", EmulatedDevice(0, memory_bytes=a.nbytes)]):
        assert "gpu" not in hetlapack.explain("cholesky", a).unavailable


def test_dispatch_prices_the_gpu_path_and_says_why_it_is_unavailable():
    a = np.empty((2000, 2000))
    with hetlapack.using(devices=["cpu", EmulatedDevice(0)]):
        plan = hetlapack.explain("cholesky", a)
    assert plan.predicted_s["gpu"] > 0 and "gpu" not in plan.unavailable
    assert plan.predicted_s["gpu"] == pytest.approx(model.predict_tiled("potrf", 2000, 2000, a.dtype, None,
                                                                        (plan.devices[1],), path="gpu"))
    with hetlapack.using(devices=["cpu"]):
        assert "no accelerator" in hetlapack.explain("cholesky", a).unavailable["gpu"]
    assert "stacks" in hetlapack.explain("cholesky", np.empty((3, 4, 4))).unavailable["gpu"]
    with hetlapack.using(path="gpu", devices=["cpu"]), pytest.raises(ValueError, match="cannot be honoured"):
        hl.cholesky(spd(10))
