"""Accelerator devices against the CPU device, kernel by kernel, on tile views of a device-side mirror.

The same bodies run for the emulated device and for the CUDA device; the CUDA cases skip, with the reason,
where CuPy or a GPU is missing. Also: naming, ``available``, ``resolve`` and that ``import hetlapack`` never
imports CuPy.
"""

import subprocess
import sys

import numpy as np
import pytest

from hetlapack.devices import CpuDevice, Device, EmulatedDevice, available, resolve
from hetlapack.testing import general, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-4, np.float64: 1e-11, np.complex64: 2e-4, np.complex128: 1e-11}


def make_accelerator(kind: str) -> Device:
    if kind == "emulated":
        return EmulatedDevice(0)
    names = [d.name for d in available() if d.name.startswith("cuda:")]
    if not names:
        pytest.skip("no CUDA device: CuPy is not installed or sees no GPU (the emulated cases cover the bodies)")
    return resolve([names[0]])[0]


@pytest.fixture(params=["emulated", "cuda"])
def accelerator(request):
    return make_accelerator(request.param)


@pytest.fixture(scope="module")
def cpu():
    return CpuDevice(workers=1)


class Mirror:
    """A host matrix and its device copy; ``view`` cuts the same window out of both (leading dim > rows)."""

    def __init__(self, device, host):
        self.device, self.host = device, np.asfortranarray(host)
        self.data = device.empty(self.host.shape, self.host.dtype)
        device.upload(self.host, self.data)

    def view(self, r0, r1, c0, c1):
        return self.host[r0:r1, c0:c1], self.data[r0:r1, c0:c1]

    def fetch(self):
        out = np.empty_like(self.host, order="F")
        self.device.to_host(self.data, out)
        return out


def check(mirror, dtype):
    np.testing.assert_allclose(mirror.fetch(), mirror.host, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_blas3_kernels_match_the_cpu(accelerator, cpu, dtype):
    mirror = Mirror(accelerator, general(40, 30, dtype=dtype, seed=1))
    tri = Mirror(accelerator, np.tril(spd(12, dtype=dtype)) + np.triu(general(12, dtype=dtype), 1))
    # C (12 x 12) = 0.5 A (12 x 9) B^H (B: 12 x 9) + 2 C, three windows that do not overlap
    (ha, da), (hb, db), (hc, dc) = mirror.view(0, 12, 0, 9), mirror.view(0, 12, 10, 19), mirror.view(21, 33, 2, 14)
    for device, (a, b, c) in ((cpu, (ha, hb, hc)), (accelerator, (da, db, dc))):
        device.gemm(a, b, c, conj_b=True, alpha=0.5, beta=2.0)
    check(mirror, dtype)
    (hl, dl) = tri.view(0, 12, 0, 12)
    for side, conj in (("L", False), ("L", True), ("R", False), ("R", True)):
        hx, dx = mirror.view(21, 33, 0, 12) if side == "L" else mirror.view(25, 37, 0, 12)
        for device, (a, x) in ((cpu, (hl, hx)), (accelerator, (dl, dx))):
            device.trsm(a, x, side=side, lower=True, conj=conj, unit=side == "R", alpha=2.0)
        check(mirror, dtype)
    hs, ds = mirror.view(0, 9, 20, 29)
    (hk, dk) = mirror.view(10, 19, 0, 5)
    for device, (a, c) in ((cpu, (hk, hs)), (accelerator, (dk, ds))):
        device.herk(a, c, lower=False, conj_first=False)
    check(mirror, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lapack_kernels_and_info_codes_match_the_cpu(accelerator, cpu, dtype):
    panel = Mirror(accelerator, general(50, 20, dtype=dtype, seed=2))
    hp, dp = panel.view(5, 50, 3, 15)
    host_piv = np.zeros((12, 1), np.int32, order="F")
    device_piv = accelerator.empty((12, 1), np.int32)
    assert cpu.getrf(hp, host_piv) == accelerator.getrf(dp, device_piv) == 0
    check(panel, dtype)
    fetched = np.empty_like(host_piv)
    accelerator.to_host(device_piv, fetched)
    assert np.array_equal(fetched, host_piv)
    hr, dr = panel.view(5, 50, 15, 20)
    cpu.laswp(hr, host_piv)
    accelerator.laswp(dr, device_piv)
    check(panel, dtype)

    bad = spd(16, dtype=dtype)
    bad[9, 9] = -1.0
    chol = Mirror(accelerator, np.pad(bad, ((1, 2), (0, 0))))
    hc, dc = chol.view(1, 17, 0, 16)
    assert cpu.potrf(hc, True) == accelerator.potrf(dc, True) == 10


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_kernels_match_the_cpu(accelerator, cpu, dtype):
    qr = Mirror(accelerator, general(60, 24, dtype=dtype, seed=3))
    factors = Mirror(accelerator, np.zeros((8, 8), dtype=dtype))
    host_tau = np.zeros((8, 1), dtype=dtype, order="F")
    device_tau = accelerator.empty((8, 1), np.dtype(dtype))
    (hp, dp), (hc, dc) = qr.view(4, 60, 0, 8), qr.view(4, 60, 8, 24)
    cpu.geqrf(hp, host_tau)
    accelerator.geqrf(dp, device_tau)
    check(qr, dtype)
    (ht, dt) = factors.view(0, 8, 0, 8)
    cpu.larft(hp, host_tau, ht)
    accelerator.larft(dp, device_tau, dt)
    check(factors, dtype)
    for conj in (True, False):
        cpu.larfb(hp, ht, hc, conj=conj)
        accelerator.larfb(dp, dt, dc, conj=conj)
        check(qr, dtype)
    cpu.orgqr(hp, host_tau)
    accelerator.orgqr(dp, device_tau)
    check(qr, dtype)


def test_emulated_devices_are_named_by_index_and_never_alias_host_memory():
    first, second = EmulatedDevice(0), EmulatedDevice(0)
    assert first.name == "emulated:0" and repr(first) == "EmulatedDevice(0)"
    assert first.memory_space != second.memory_space and first.kind == "accelerator"
    host = np.ones((3, 3), order="F")
    copy = first.empty((3, 3), np.float64)
    first.upload(host, copy)
    copy *= 2
    assert host.sum() == 9 and first.uploaded_bytes == host.nbytes
    with pytest.raises(ValueError, match="index"):
        EmulatedDevice(-1)


def test_transfers_copy_into_tile_views(accelerator):
    """A tile view of a device matrix (leading dimension larger than its rows) is written and read in place."""
    mirror = Mirror(accelerator, np.zeros((7, 6)))
    host = general(3, 2, seed=2)
    _, tile = mirror.view(1, 4, 2, 4)
    accelerator.upload(host, tile)
    out = np.empty((3, 2), order="F")
    accelerator.to_host(tile, out)
    assert np.array_equal(out, host)
    expected = np.zeros((7, 6))
    expected[1:4, 2:4] = host
    assert np.array_equal(mirror.fetch(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_c_ordered_matrix_uploads_as_it_lies_and_is_checked_for_nans_where_it_is(accelerator, dtype):
    """The gpu path uploads the caller's matrix without a host copy (the device lays it out) and checks it for
    infinities and NaNs on the device."""
    host = np.ascontiguousarray(general(9, 7, dtype=dtype))
    data = accelerator.empty(host.shape, host.dtype)
    accelerator.upload(host, data)
    out = np.empty(host.shape, dtype, order="F")
    accelerator.to_host(data, out)
    assert np.array_equal(out, host) and accelerator.all_finite(data)
    for bad in (np.inf, np.nan):
        host[4, 3] = bad
        accelerator.upload(host, data)
        assert not accelerator.all_finite(data)


@pytest.mark.parametrize("lower", [True, False])
def test_the_other_triangle_of_a_factor_is_zeroed_where_it_is(accelerator, cpu, lower):
    """Blocks of 512 columns: an order of 1100 has a partial last block."""
    host = general(1100, 1100, seed=3)
    for device in (cpu, accelerator):
        mirror = Mirror(device, host)
        device.zero_other_triangle(mirror.data, lower)
        assert np.array_equal(mirror.fetch(), np.tril(host) if lower else np.triu(host))


def test_available_lists_the_cpu_first_and_resolve_accepts_names_and_objects():
    names = [d.name for d in available()]
    assert names[0] == "cpu" and all(n.startswith("cuda:") for n in names[1:])
    accelerator = EmulatedDevice(2)
    cpu, emulated, given = resolve(["cpu", "emulated:1", accelerator])
    # among accelerators the CPU is one worker (the panels), whose kernels use all its cores
    assert isinstance(cpu, CpuDevice) and cpu.workers == 1
    assert resolve(["cpu"])[0].workers == max(1, cpu.cores)
    assert emulated.name == "emulated:1" and given is accelerator
    assert [d.name for d in resolve(None)] == ["cpu"]


@pytest.mark.parametrize("spec, message", [(["tpu:0"], "unknown device 'tpu:0'; available devices: 'cpu'"),
                                           (["cuda:99"], "unknown device 'cuda:99'"),
                                           (["cpu", "cpu"], "named more than once: cpu"),
                                           (["emulated:1", "emulated:01"], "named more than once: emulated:1"),
                                           (["emulated:\u00b2"], "unknown device 'emulated:\u00b2'"),
                                           ([3], "a device is a name")])
def test_resolve_rejects_unknown_and_repeated_devices(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        resolve(spec)


def test_import_hetlapack_imports_no_cupy():
    code = "import sys, hetlapack, hetlapack.devices, hetlapack.runtime; print('cupy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
