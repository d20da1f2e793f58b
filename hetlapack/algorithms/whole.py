"""The GPU-only path: a whole factorization as one library call on one accelerator (seed 001).

On a CUDA device the call is cuSOLVER's (through :class:`~hetlapack.devices.cuda.CudaDevice`); on an emulated
accelerator it is LAPACK on the device's private memory, so CI runs every line of this path. The host matrix is
uploaded as it lies (C- or Fortran-ordered: the device lays it out, so the host makes no working copy), checked
for infinities and NaNs there when asked (SciPy's ``check_finite`` without a pass over host memory), factored
there, and the results are downloaded into a Fortran-ordered host array: the matrix itself where it is a writable
Fortran-ordered array (the caller lets its input be overwritten by passing it writable), a new one otherwise.
``info`` codes come back as LAPACK's, for the shims to raise as SciPy raises them (CuPy's own wrappers ignore them).
"""

from __future__ import annotations

import numpy as np

from ..devices.base import Device
from ._common import check_matrix


def _upload(device: Device, a: np.ndarray, check_finite: bool = False):
    """``a`` in ``device``'s memory; with ``check_finite``, SciPy's ValueError if it holds an infinity or NaN."""
    data = device.empty(a.shape, a.dtype)
    device.upload(a, data)
    if check_finite and not device.all_finite(data):
        device.free(data)
        raise ValueError("array must not contain infs or NaNs")
    return data


def _result(a: np.ndarray) -> np.ndarray:
    """The host array the factors of ``a`` are downloaded into: ``a`` itself when it is writable and
    Fortran-ordered, else a new Fortran-ordered array."""
    return a if a.flags.writeable and a.flags.f_contiguous else np.empty(a.shape, a.dtype, order="F")


def _download(device: Device, data, out: np.ndarray | None = None) -> np.ndarray:
    """Copy the device array ``data`` into ``out`` (a new Fortran-ordered host array by default) and free it."""
    out = np.empty(data.shape, data.dtype, order="F") if out is None else out
    device.to_host(data, out)
    device.free(data)
    return out


def potrf(a: np.ndarray, *, lower: bool, device: Device, clean: bool = False,
          check_finite: bool = False) -> tuple[np.ndarray, int]:
    """The Cholesky factor of a host matrix in its ``lower`` (or upper) triangle, computed on ``device``, and
    LAPACK's ``info`` (the first leading minor that is not positive definite; ``a`` itself comes back then). The
    other triangle is zeroed there if ``clean``, else the input's. ``check_finite`` as SciPy's."""
    check_matrix(a, "potrf", square=True)
    data = _upload(device, a, check_finite)
    info = int(device.potrf(data, lower))
    if info > 0:
        device.free(data)
        return a, info
    if clean:
        device.zero_other_triangle(data, lower)
    return _download(device, data, _result(a)), 0


def getrf(a: np.ndarray, *, device: Device, check_finite: bool = False) -> tuple[np.ndarray, np.ndarray, int]:
    """LU with partial pivoting of a host matrix on ``device``: the packed factors, 0-based LAPACK pivots (int32)
    and ``info``. ``check_finite`` as SciPy's."""
    check_matrix(a, "getrf")
    data = _upload(device, a, check_finite)
    kmin = min(a.shape)
    piv = device.empty((kmin,), np.dtype(np.int32))
    info = device.getrf(data, piv) if kmin else 0
    return _download(device, data, _result(a)), _download(device, piv) - 1, int(info)


def geqrf(a: np.ndarray, *, device: Device, check_finite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Householder QR of a host matrix on ``device``: the factors in LAPACK storage and ``tau``. ``check_finite``
    as SciPy's."""
    check_matrix(a, "geqrf")
    data = _upload(device, a, check_finite)
    tau = device.empty((min(a.shape),), a.dtype)
    device.geqrf(data, tau)
    return _download(device, data, _result(a)), _download(device, tau)


def orgqr(qr: np.ndarray, tau: np.ndarray, *, ncols: int, device: Device) -> np.ndarray:
    """The first ``ncols`` columns of Q from ``geqrf``'s output, formed on ``device``."""
    m, kmin = qr.shape[0], len(tau)
    if not kmin <= ncols <= m:
        raise ValueError(f"orgqr: need len(tau) <= ncols <= m, got len(tau)={kmin}, ncols={ncols}, m={m}")
    q = np.zeros((m, ncols), dtype=qr.dtype, order="F")
    q[:, :kmin] = np.tril(qr[:, :kmin], -1)
    q[kmin:, kmin:] = np.eye(m - kmin, ncols - kmin, dtype=qr.dtype)
    if ncols == 0 or m == 0:
        return q
    data, taus = _upload(device, q), _upload(device, np.asarray(tau, dtype=qr.dtype))
    device.orgqr(data, taus)
    device.free(taus)
    return _download(device, data, q)
