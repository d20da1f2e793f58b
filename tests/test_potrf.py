"""Tile Cholesky: backward error, untouched other triangle, upper as the lower's conjugate transpose, SciPy's errors,
placements, memory spaces."""

import threading

import numpy as np
import pytest

from hetlapack.algorithms.potrf import insert_potrf, potrf
from hetlapack.devices import CpuDevice, EmulatedDevice
from hetlapack.runtime import TiledMatrix
from hetlapack.testing import cholesky_residual, ill_conditioned, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SIZES_AND_TILES = [(1, 4), (2, 1), (13, 4), (64, 32), (97, 32), (211, 48), (600, 96)]


def factor(a, **kwargs):
    c = np.array(a, order="F")
    potrf(c, **kwargs)
    return c


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, tile", SIZES_AND_TILES)
@pytest.mark.parametrize("lower", [True, False])
def test_backward_error_and_other_triangle_untouched(dtype, n, tile, lower):
    a = np.asfortranarray(spd(n, dtype=dtype, seed=n))
    c = factor(a, lower=lower, tile=tile)
    assert cholesky_residual(a, c, lower) < 50
    untouched = (np.triu, 1) if lower else (np.tril, -1)
    assert np.array_equal(untouched[0](c, untouched[1]), untouched[0](a, untouched[1]))


def test_upper_factor_is_the_conjugate_transpose_of_the_lower_one():
    """``A = L L^H = U^H U``: the two tile paths factor one Hermitian matrix to ``U = L^H``, ragged last tile too."""
    a = np.asfortranarray(spd(101, dtype=np.complex128, seed=7))
    lower, upper = factor(a, lower=True, tile=24), factor(a, lower=False, tile=24)
    np.testing.assert_allclose(np.triu(upper), np.tril(lower).conj().T, rtol=0, atol=1e-14)


class InsertRecorder:
    """Stands in for a runtime: records each inserted task's name, priority, flops and written blocks."""

    def __init__(self):
        self.tasks = []

    def insert(self, kernel, *args, reads, writes, priority, flops, name=None, **flags):
        self.tasks.append((name or kernel, priority, flops, [(b.i0, b.i1, b.j0, b.j1) for b in writes]))


@pytest.mark.parametrize("per_tile", [False, True])
def test_upper_inserts_the_lower_tasks_on_the_transposed_tiles(per_tile):
    """One algorithm body: the same tasks, priorities and flops (traces, simulator predictions), tiles transposed."""
    recorded = {}
    for lower in (True, False):
        recorder = InsertRecorder()
        insert_potrf(recorder, TiledMatrix(None, 16, shape=(70, 70), dtype=np.complex64), lower, per_tile)
        recorded[lower] = recorder.tasks
    transposed = [(name, priority, flops, [(j0, j1, i0, i1) for i0, i1, j0, j1 in writes])
                  for name, priority, flops, writes in recorded[True]]
    assert recorded[False] == transposed
    assert {name for name, *_ in transposed} == {"potrf", "trsm", "herk", "gemm"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_ill_conditioned(dtype):
    cond = 1e3 if np.dtype(dtype).char in "fF" else 1e10
    a = np.asfortranarray(ill_conditioned(150, cond=cond, dtype=dtype, hermitian=True))
    assert cholesky_residual(a, factor(a, lower=True, tile=32), True) < 50


@pytest.mark.parametrize("placement", ["owner", "capability"])
def test_two_devices_and_both_placements(placement):
    a = np.asfortranarray(spd(200, dtype=np.float64))
    devices = [CpuDevice(workers=1, name="cpu0"), CpuDevice(workers=1, name="cpu1")]
    assert cholesky_residual(a, factor(a, lower=True, tile=32, devices=devices, placement=placement), True) < 50


@pytest.mark.parametrize("lower", [True, False])
def test_with_an_emulated_accelerator_holding_half_the_columns(lower):
    a = np.asfortranarray(spd(150, dtype=np.complex128))
    accelerator = EmulatedDevice(0)
    c = factor(a, lower=lower, tile=32, devices=[CpuDevice(workers=1), accelerator])
    assert cholesky_residual(a, c, lower) < 50
    assert accelerator.uploaded_bytes > 0 and accelerator.downloaded_bytes > 0


@pytest.mark.parametrize("lower", [True, False])
def test_not_positive_definite_names_the_global_minor(lower):
    a = np.asfortranarray(spd(100, dtype=np.float64))
    a[70, 70] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match="^leading minor 71 is not positive definite$"):
        potrf(a, lower=lower, tile=32)
    assert not any(t.name.startswith("hetlapack-") for t in threading.enumerate())


class FailingDevice(CpuDevice):
    """Raises from its fifth GEMM."""

    def __init__(self):
        super().__init__(workers=2)
        self.calls = 0
        self.lock = threading.Lock()

    def gemm(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
            failing = self.calls == 5
        if failing:
            raise MemoryError("injected into gemm")
        super().gemm(*args, **kwargs)


def test_an_exception_in_a_kernel_reaches_the_caller_and_the_next_call_works():
    a = np.asfortranarray(spd(160, dtype=np.float64))
    with pytest.raises(MemoryError, match="injected into gemm"):
        potrf(np.array(a, order="F"), lower=True, tile=16, devices=[FailingDevice()])
    assert not any(t.name.startswith("hetlapack-") for t in threading.enumerate())
    assert cholesky_residual(a, factor(a, lower=True, tile=16), True) < 50


@pytest.mark.parametrize("bad", [np.ones((3, 4), order="F"), np.ones((4, 4)),
                                 np.ones((4, 4), dtype=np.int64, order="F"),
                                 np.asfortranarray(np.ones((8, 8)))[::2, ::2]])
def test_rejects_what_it_cannot_factor_in_place(bad):
    with pytest.raises(ValueError):
        potrf(bad, lower=True, tile=2)


def test_zero_tile_is_rejected():
    with pytest.raises(ValueError, match="tile"):
        potrf(np.eye(3, order="F"), lower=True, tile=0)


def test_empty_matrix():
    a = np.zeros((0, 0), order="F")
    potrf(a, lower=True, tile=4)
    assert a.shape == (0, 0)
