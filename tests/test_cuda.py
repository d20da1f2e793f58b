"""The CUDA device's own array code (TRSM/HERK/GEMM/LASWP/LARFT/LARFB, transfers) checked without a GPU.

``CudaDevice`` writes these kernels with CuPy array operations; here CuPy is replaced by a NumPy stand-in with
the few names they use, so the index arithmetic and conjugations are checked against the CPU device on every
machine. The cuSOLVER calls (POTRF, GETRF, GEQRF, ORGQR and their info codes) need a GPU: they run in
``tests/test_devices_accelerators.py`` and ``tests/test_hybrid.py`` when CuPy sees one, and skip otherwise.
"""

import contextlib
import types

import numpy as np
import pytest
import scipy.linalg as sl

from hetlapack.devices import CpuDevice, cuda
from hetlapack.testing import general, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-4, np.float64: 1e-11, np.complex64: 2e-4, np.complex128: 1e-11}


class _Stream(contextlib.nullcontext):
    def __init__(self, non_blocking=False):
        super().__init__()

    def synchronize(self):
        pass


def _asnumpy(a, stream=None, out=None):
    if out is None:
        return np.asarray(a)
    out[...] = a
    return out


def numpy_as_cupy():
    """A module with the CuPy names CudaDevice's array code uses, backed by NumPy."""
    fake = types.SimpleNamespace(**{name: getattr(np, name) for name in
                                    ("empty", "zeros", "eye", "tril", "triu", "tri", "where", "asarray", "arange",
                                     "asfortranarray", "isfinite")})
    fake.asnumpy = _asnumpy
    fake.cuda = types.SimpleNamespace(Device=lambda index: contextlib.nullcontext(), Stream=_Stream)
    return fake


def solve_triangular(a, b, trans="N", lower=False, unit_diagonal=False):
    return sl.solve_triangular(a, b, trans={"N": 0, "T": 1, "C": 2}[trans], lower=lower, unit_diagonal=unit_diagonal)


@pytest.fixture
def device(monkeypatch):
    monkeypatch.setattr(cuda, "_import_cupy", lambda: (numpy_as_cupy(), None, solve_triangular))
    return cuda.CudaDevice(0)


def pair(host):
    host = np.asfortranarray(host)
    return host, host.copy(order="F")


@pytest.mark.parametrize("dtype", DTYPES)
def test_blas3_and_laswp_match_the_cpu(device, dtype):
    cpu, tol = CpuDevice(workers=1), TOL[dtype] * 10
    assert device.name == "cuda:0" and not device.host_compute and device.kind == "accelerator"
    for conj_a, conj_b in ((False, True), (True, False)):
        a = np.asfortranarray(general(*((7, 9) if conj_a else (9, 7)), dtype=dtype, seed=1))
        b = np.asfortranarray(general(*((5, 7) if conj_b else (7, 5)), dtype=dtype, seed=2))
        host_c, dev_c = pair(general(9, 5, dtype=dtype, seed=4))
        cpu.gemm(a, b, host_c, conj_a=conj_a, conj_b=conj_b, alpha=0.5, beta=2.0)
        device.gemm(a, b, dev_c, conj_a=conj_a, conj_b=conj_b, alpha=0.5, beta=2.0)
        np.testing.assert_allclose(dev_c, host_c, rtol=tol, atol=tol)
    tri = np.asfortranarray(np.tril(spd(6, dtype=dtype)))
    for side in ("L", "R"):
        for conj in (False, True):
            host_b, dev_b = pair(general(6, 4, dtype=dtype) if side == "L" else general(4, 6, dtype=dtype))
            for target, rhs in ((cpu, host_b), (device, dev_b)):
                target.trsm(tri, rhs, side=side, lower=True, conj=conj, unit=False, alpha=2.0)
            np.testing.assert_allclose(dev_b, host_b, rtol=tol, atol=tol)
    for lower, conj_first in ((True, False), (False, True)):
        host_c, dev_c = pair(general(6, dtype=dtype, seed=5))
        k = np.asfortranarray(general(6, 3, dtype=dtype, seed=6) if not conj_first else general(3, 6, dtype=dtype))
        cpu.herk(k, host_c, lower=lower, conj_first=conj_first)
        device.herk(k, dev_c, lower=lower, conj_first=conj_first)
        np.testing.assert_allclose(dev_c, host_c, rtol=tol, atol=tol)
    piv = np.array([[3], [3], [5], [4]], dtype=np.int32)
    host_a, dev_a = pair(general(6, 4, dtype=dtype))
    cpu.laswp(host_a, piv)
    device.laswp(dev_a, piv)
    assert np.array_equal(dev_a, host_a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_larft_and_larfb_match_the_cpu(device, dtype):
    cpu, tol = CpuDevice(workers=1), TOL[dtype] * 20
    panel = np.asfortranarray(general(20, 6, dtype=dtype, seed=7))
    tau = np.zeros((6, 1), dtype=dtype, order="F")
    cpu.geqrf(panel, tau)
    host_t, dev_t = pair(np.zeros((8, 8), dtype=dtype))
    cpu.larft(panel, tau, host_t[:6, :6])
    device.larft(panel, tau, dev_t[:6, :6])
    np.testing.assert_allclose(np.triu(dev_t), np.triu(host_t), rtol=tol, atol=tol)
    for conj in (True, False):
        host_c, dev_c = pair(general(20, 5, dtype=dtype, seed=8))
        cpu.larfb(panel, host_t[:6, :6], host_c, conj=conj)
        device.larfb(panel, host_t[:6, :6], dev_c, conj=conj)
        np.testing.assert_allclose(dev_c, host_c, rtol=tol, atol=tol)


def test_transfers_copy_into_views(device):
    mirror = device.empty((5, 5), np.float64)
    host = np.arange(6.0).reshape(3, 2)
    device.upload(host, mirror[1:4, 2:4])
    out = np.zeros((3, 2))
    device.to_host(mirror[1:4, 2:4], out)
    assert np.array_equal(out, host)


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_a_whole_matrix_uploads_as_it_lies(device, monkeypatch, layout):
    """A contiguous matrix crosses without a host copy (the device array takes its layout); only a strided view is
    packed into one Fortran-ordered buffer first."""
    base = general(14, 12)
    host = {"C": np.ascontiguousarray(base), "F": np.asfortranarray(base), "strided": base[::2, ::2]}[layout]
    sent = []
    module = device.cupy
    monkeypatch.setattr(module, "asarray", lambda a: sent.append(a) or np.asarray(a))
    data = device.empty(host.shape, host.dtype)
    device.upload(host, data)
    assert np.array_equal(data, host) and data.flags.f_contiguous and device.all_finite(data)
    assert (sent[0] is host) == (layout != "strided")
    device.zero_other_triangle(data, lower=False)
    assert np.array_equal(data, np.triu(host))
    data[2, 3] = np.nan
    assert not device.all_finite(data)
