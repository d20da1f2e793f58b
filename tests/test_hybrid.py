"""The hybrid path over the CPU and 1–3 accelerators, end to end through ``hetlapack.linalg``.

Panels run on the CPU, updates on the accelerators by the HGDD layout, or every task on the owner of its tile by
seed 003's two-level layout (big tiles for the accelerators, a host slice for the CPU); results match SciPy
(pivots and R's signs too), inputs are unmodified, SciPy's errors come out of accelerator tasks, no worker
thread is left, and no version of a tile is copied to the same memory space twice. The accelerator is the
emulated device here and the CUDA device where CuPy sees a GPU (the same test bodies; CUDA cases skip with the
reason otherwise).
"""

import gc
import re
import threading
import weakref
from collections import Counter

import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hl
from hetlapack.algorithms.getrf import getrf
from hetlapack.algorithms.potrf import potrf
from hetlapack.devices import EmulatedDevice, available
from hetlapack.runtime import Runtime, Trace
from hetlapack.testing import cholesky_residual, general, lu_residual, qr_residual, spd

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS_FACTOR = 50


def _cuda_names() -> list[str]:
    return [d.name for d in available() if d.name.startswith("cuda:")]


def accelerators(kind: str, count: int) -> list:
    """``count`` accelerators of ``kind`` (``"emulated"`` objects, or ``"cuda:N"`` names), or skip."""
    if kind == "emulated":
        return [EmulatedDevice(i) for i in range(count)]
    names = _cuda_names()
    if not names:
        pytest.skip("no CUDA device: CuPy is not installed or sees no GPU (the emulated cases cover this path)")
    if len(names) < count:
        pytest.skip(f"needs {count} CUDA devices, CuPy sees {len(names)} (the emulated cases cover {count})")
    return names[:count]


KINDS = ["emulated", "cuda"]


def no_worker_threads_left() -> bool:
    return not any(t.name.startswith("hetlapack-") for t in threading.enumerate())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_lu_qr_through_linalg(kind, count, dtype):
    devices = ["cpu", *accelerators(kind, count)]
    a_spd = spd(97, dtype=dtype, seed=count)
    a_gen = general(101, 83, dtype=dtype, seed=count)
    kept_spd, kept_gen = a_spd.copy(), a_gen.copy()
    with hetlapack.using(path="hybrid", devices=devices, tile=16, layout="hgdd"):
        c = hl.cholesky(a_spd, lower=True)
        lu, piv = hl.lu_factor(a_gen)
        q, r = hl.qr(a_gen, mode="economic")
        plan = hetlapack.explain("cholesky", a_spd)
    assert plan.path == "hybrid" and len(plan.devices) == count + 1
    assert np.array_equal(a_spd, kept_spd) and np.array_equal(a_gen, kept_gen)
    assert cholesky_residual(a_spd, c, True) < EPS_FACTOR
    assert np.array_equal(piv, sl.lu_factor(a_gen)[1]) and lu_residual(a_gen, lu, piv) < EPS_FACTOR
    ref_r = sl.qr(a_gen, mode="r")[0]
    assert np.array_equal(np.sign(np.diag(r).real), np.sign(np.diag(ref_r).real))
    assert qr_residual(a_gen, q, r) < EPS_FACTOR
    assert no_worker_threads_left()


@pytest.mark.parametrize("kind", KINDS)
def test_not_positive_definite_is_raised_from_an_accelerator_task(kind):
    a = spd(120, dtype=np.float64)
    a[100, 100] = -1.0
    with pytest.raises(np.linalg.LinAlgError) as theirs:
        sl.cholesky(a, lower=True)
    with hetlapack.using(path="hybrid", devices=["cpu", *accelerators(kind, 2)], tile=16):
        with pytest.raises(np.linalg.LinAlgError, match=f"^{re.escape(str(theirs.value))}$"):
            hl.cholesky(a, lower=True)
    assert "101" in str(theirs.value)
    assert no_worker_threads_left()


def test_potrf_on_accelerators_only_names_the_minor_from_the_failing_device():
    a = np.asfortranarray(spd(64, dtype=np.complex128))
    a[40, 40] = -5.0
    with pytest.raises(np.linalg.LinAlgError, match="^leading minor 41 is"):
        potrf(a, lower=False, tile=8, devices=[EmulatedDevice(0), EmulatedDevice(1)])
    assert no_worker_threads_left()


def test_singular_lu_through_the_hybrid_path_warns_like_scipy():
    a = general(60, dtype=np.float64)
    a[:, 37] = 0.0
    with hetlapack.using(path="hybrid", devices=["cpu", EmulatedDevice(0), EmulatedDevice(1)], tile=8):
        with pytest.warns(sl.LinAlgWarning):
            ours = hl.lu_factor(a)
    with pytest.warns(sl.LinAlgWarning):
        theirs = sl.lu_factor(a)
    assert np.array_equal(ours[1], theirs[1])


def _versions_copied_once(transfers) -> bool:
    """No version of a tile is copied to the same memory space twice."""
    copies = Counter((t.tile, t.destination, t.version) for t in transfers)
    return all(n == 1 for n in copies.values())


@pytest.mark.parametrize("op", ["potrf", "getrf"])
def test_panels_on_the_cpu_updates_on_the_accelerators_and_read_only_tiles_cross_once(op):
    a = np.asfortranarray(spd(160, dtype=np.float64) if op == "potrf" else general(160, dtype=np.float64))
    reference = a.copy()
    devices = ["cpu", EmulatedDevice(0), EmulatedDevice(1)]
    trace = Trace()
    if op == "potrf":
        potrf(a, lower=True, tile=16, devices=devices, trace=trace)
    else:
        piv, _ = getrf(a, tile=16, devices=devices, trace=trace)
    panel_kernel = "potrf" if op == "potrf" else "getrf"
    assert {e.device for e in trace.events if e.kernel == panel_kernel} == {"cpu"}
    assert {e.device for e in trace.events if e.kernel == "gemm"} == {"emulated:0", "emulated:1"}
    uploads = [t for t in trace.transfers if t.destination != "host"]
    assert uploads and _versions_copied_once(uploads)
    if op == "potrf":
        assert cholesky_residual(reference, np.tril(a), True) < EPS_FACTOR
    else:
        assert lu_residual(reference, a, piv) < EPS_FACTOR


def test_transfers_follow_the_layout_each_tile_version_moves_once():
    a = np.asfortranarray(general(64, dtype=np.float64))
    accelerator = EmulatedDevice(0)
    with Runtime(["cpu", accelerator]) as rt:
        A = rt.matrix(a, 16)
        for _ in range(3):
            rt.insert(lambda device, tile: None, A.block(0, 4, 1, 2), reads=[A.block(0, 4, 1, 2)], device=1)
        rt.insert("gemm", A(0, 0), A(0, 1), A(0, 3), reads=[A(0, 0), A(0, 1)], writes=[A(0, 3)], device=1)
        rt.insert("gemm", A(0, 0), A(0, 1), A(0, 3), reads=[A(0, 0), A(0, 1)], writes=[A(0, 3)], device=1)
        log = rt.transfers
    tile_bytes = 16 * 16 * 8
    assert accelerator.uploaded_bytes == (4 + 2) * tile_bytes  # column 1 once; A(0,0) and A(0,3) once
    assert accelerator.downloaded_bytes == tile_bytes  # A(0,3) home at the end
    assert _versions_copied_once(log)


@pytest.mark.parametrize("layout", ["F", "view"])
def test_fortran_and_strided_inputs_are_factored_and_left_alone(layout):
    base = general(150, 150, dtype=np.complex128, seed=4)
    a = np.asfortranarray(base[:75, :75]) if layout == "F" else base[::2, ::2]
    kept = a.copy()
    with hetlapack.using(path="hybrid", devices=["cpu", "emulated:0", "emulated:1"], tile=16):
        lu, piv = hl.lu_factor(a)
    assert np.array_equal(a, kept) and np.array_equal(piv, sl.lu_factor(kept)[1])
    assert lu_residual(kept, lu, piv) < EPS_FACTOR


def test_a_hybrid_plan_defaults_to_the_available_devices():
    with hetlapack.using(path="hybrid"):
        plan = hetlapack.explain("lu_factor", general(300, dtype=np.float64))
    assert plan.devices == tuple(d.name for d in available())


def _forced_two_level(name: str, a: np.ndarray, count: int, calls) -> list:
    """``calls(a)`` on the two-level layout forced over the CPU and ``count`` emulated accelerators (tile 32):
    checks that the plan of ``name`` takes it, that ``a`` is left alone and no worker is left; returns the results."""
    kept = a.copy()
    devices = ["cpu", *accelerators("emulated", count)]
    with hetlapack.using(path="hybrid", devices=devices, tile=32, layout="two-level"):
        plan = hetlapack.explain(name, a)
        results = calls(a)
    assert plan.path == "hybrid" and plan.layout == "two-level" and 0 <= plan.host_cols <= plan.tile == 32
    assert np.array_equal(a, kept) and no_worker_threads_left()
    return results


def _two_level_kwargs(op: str, shape: tuple[int, int]) -> dict:
    """The tile algorithms' arguments for a two-level plan over the CPU and 2 emulated accelerators (tile 48, a
    host slice of 12 columns)."""
    from hetlapack.dispatch import Plan
    from hetlapack.dispatch.paths import HYBRID

    return HYBRID.tile_arguments(Plan(op=op, path="hybrid", reason="", shape=shape, dtype="float64", tile=48,
                                      devices=("cpu", EmulatedDevice(0), EmulatedDevice(1)), layout="two-level",
                                      host_cols=12))


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_forced_two_level_layout_runs_cholesky_of_an_odd_size_like_scipy(count, dtype):
    a = spd(101, dtype=dtype, seed=count)
    lower, upper = _forced_two_level("cholesky", a, count,
                                     lambda a: (hl.cholesky(a, lower=True), hl.cholesky(a, lower=False)))
    assert cholesky_residual(a, lower, True) < EPS_FACTOR and cholesky_residual(a, upper, False) < EPS_FACTOR


def test_the_two_level_run_puts_the_host_slice_on_the_cpu_and_big_tiles_on_the_accelerators():
    kwargs = _two_level_kwargs("potrf", (150, 150))
    assert kwargs["tile"][:3] == [0, 12, 48] and kwargs["devices"][0].workers == kwargs["devices"][0].cores
    a = np.asfortranarray(spd(150))
    reference = a.copy()
    trace = Trace()
    potrf(a, lower=True, trace=trace, **kwargs)
    assert cholesky_residual(reference, np.tril(a), True) < EPS_FACTOR
    assert {e.device for e in trace.events if e.tiles.endswith(",0]")} == {"cpu"}
    assert {e.device for e in trace.events if e.tiles.endswith(",1]")} == {"emulated:0"}
    assert {e.device for e in trace.events if e.tiles.endswith(",3]")} == {"emulated:1"}


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(93, 93), (101, 101), (101, 67), (67, 101)])
def test_forced_two_level_layout_runs_lu_like_scipy(count, dtype, shape):
    a = general(*shape, dtype=dtype, seed=count)
    lu, piv = _forced_two_level("lu_factor", a, count, hl.lu_factor)
    assert np.array_equal(piv, sl.lu_factor(a)[1]) and lu_residual(a, lu, piv) < EPS_FACTOR


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
@pytest.mark.parametrize("shape", [(93, 93), (101, 67), (67, 101)])
def test_forced_two_level_layout_runs_qr_of_square_tall_and_wide_matrices_like_scipy(count, dtype, shape):
    a = general(*shape, dtype=dtype, seed=count)
    (q, r), (q_economic, r_economic), (r_only,) = _forced_two_level(
        "qr", a, count, lambda a: (hl.qr(a), hl.qr(a, mode="economic"), hl.qr(a, mode="r")))
    m, n = shape
    assert q.shape == (m, m) and r.shape == (m, n)
    assert q_economic.shape == (m, min(m, n)) and r_economic.shape == (min(m, n), n)
    assert qr_residual(a, q, r) < EPS_FACTOR and qr_residual(a, q_economic, r_economic) < EPS_FACTOR
    assert np.allclose(r, r_only)
    ref_r = sl.qr(a, mode="r")[0]
    assert np.array_equal(np.sign(np.diag(r).real), np.sign(np.diag(ref_r).real))


def _written_tile_column(event) -> int:
    """The tile column of the first block a traced task wrote (``"A[0:5,2]"`` or ``"A[1:5,2:4]"`` -> 2)."""
    return int(event.tiles.split(",")[1].split(":")[0].rstrip("]"))


def test_a_tall_two_level_lu_cuts_rows_past_the_columns_and_runs_each_column_on_its_owner():
    kwargs = _two_level_kwargs("getrf", (150, 100))
    assert list(kwargs["tile"]) == [0, 12, 48, 60, 96, 108, 144, 150]
    a = np.asfortranarray(general(150, 100, seed=7))
    reference = a.copy()
    trace = Trace()
    piv, info = getrf(a, trace=trace, **kwargs)
    assert info == 0 and np.array_equal(piv, sl.lu_factor(reference)[1])
    assert lu_residual(reference, a, piv) < EPS_FACTOR
    owners = {0: "cpu", 1: "emulated:0", 2: "cpu", 3: "emulated:1", 4: "cpu"}
    assert {e.device for e in trace.events if e.kernel == "getrf" and _written_tile_column(e) == 1} == {"emulated:0"}
    for event in trace.events:
        assert event.device == owners[_written_tile_column(event)], event


@pytest.fixture
def collector_off():
    """The cyclic garbage collector off while the test runs (and back on after, with what it kept dropped)."""
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize(("devices", "layout"), [(["cpu"], "hgdd"), (["cpu", EmulatedDevice(0)], "hgdd"),
                                                 (["cpu", EmulatedDevice(0)], "two-level")],
                         ids=["cpu-hgdd", "cpu+emulated-hgdd", "cpu+emulated-two-level"])
def test_a_hybrid_call_leaves_nothing_for_the_cyclic_collector(collector_off, devices, layout):
    """Every object a hybrid call makes is freed when the last reference goes: a reference cycle (tile handles and
    their matrix, a device memory and its directory) kept the working copy, as large as the input, until the
    collector ran, and the next large array got memory the system had not handed out yet (on a 2-core AMD EPYC
    VM, 128 MB filled in 280 ms instead of 9 right after a hybrid Cholesky of order 4000)."""
    a_spd, a_gen = spd(101), general(101, 83)

    def calls():
        with hetlapack.using(path="hybrid", devices=devices, tile=16, layout=layout):
            hl.cholesky(a_spd)
            hl.lu_factor(a_gen)
            hl.lu(a_gen)
            hl.qr(a_gen)
            hl.qr(a_gen, mode="r")

    calls()  # first calls compile and cache what later calls reuse (the compiler leaves cycles)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds from here on is kept in gc.garbage, to be named
    calls()
    operand = np.asfortranarray(a_spd)
    alive = weakref.ref(operand)
    potrf(operand, lower=True, tile=16, devices=devices)
    del operand
    assert alive() is None
    assert gc.collect() == 0, sorted({type(x).__name__ for x in gc.garbage})
