"""CuPy arrays through ``hetlapack.linalg``: detected at the boundary, routed by dispatch, kept on the GPU.

Every test body takes an array module ``xp`` and runs twice:

- ``cupy``: CuPy on a real GPU, skipped with the reason where CuPy or a GPU is missing;
- ``simulated``: a stand-in module registered as ``cupy`` whose arrays are NumPy arrays of a type defined in a module
  named ``cupy``, while numba-cuda runs in its simulator. It takes the whole route a CuPy stack takes (detection by
  the type's module, dispatch's plan, the GPU batched module, the numba-cuda kernels, info codes turned into SciPy's
  errors, results in the input's array type); what it cannot take is the vendor libraries (cuSOLVER, cuBLAS), so the
  sizes past the kernels' range and single matrices (the gpu path) run in the ``cupy`` cases only.

Accuracy by scaled residuals per matrix; pivots compared with SciPy's exactly.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import types

import numba
import numpy as np
import pytest
import scipy.linalg as sl

import hetlapack
import hetlapack.linalg as hl
from hetlapack.testing import general, spd
from hetlapack.testing.residuals import cholesky_residual, lu_residual

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]

#: Sizes the simulated cases skip: past the LU kernel's sizes only cuSOLVER runs them.
LIBRARY_ONLY = "past the LU kernel's sizes cuSOLVER runs the stack, which needs CuPy and a GPU"


class SimulatedArray(np.ndarray):
    """A NumPy array that presents itself as CuPy's: its type lives in a module named ``cupy``."""

    __module__ = "cupy"
    device = types.SimpleNamespace(id=0)

    def get(self) -> np.ndarray:
        return np.array(self.view(np.ndarray))


def _simulated(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        result = function(*args, **kwargs)
        return result.view(SimulatedArray) if isinstance(result, np.ndarray) else result

    return wrapper


def simulated_cupy() -> types.ModuleType:
    """The stand-in ``cupy`` module: the NumPy functions hetlapack's CuPy route calls, returning SimulatedArrays."""
    module = types.ModuleType("cupy")
    for name in ("array", "asarray", "ascontiguousarray", "atleast_2d", "broadcast_to", "conj", "copyto", "empty",
                 "empty_like", "isfinite", "moveaxis", "ones", "swapaxes", "tril", "triu", "zeros"):
        setattr(module, name, _simulated(getattr(np, name)))
    module.simulated = True
    return module


@pytest.fixture(params=["simulated", "cupy"])
def xp(request, monkeypatch):
    if request.param == "simulated":
        if not numba.config.ENABLE_CUDASIM:
            pytest.skip("a GPU is present (NUMBA_ENABLE_CUDASIM is off): the cupy cases run the route instead")
        module = simulated_cupy()
        monkeypatch.setitem(sys.modules, "cupy", module)
        return module
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (the simulated cases cover the route)")
    try:
        gpus = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy without a driver raises CUDARuntimeError
        pytest.skip(f"CuPy sees no GPU ({exc}); the simulated cases cover the route")
    if not gpus or numba.config.ENABLE_CUDASIM:
        pytest.skip("no GPU for CuPy, or numba-cuda is in its simulator; the simulated cases cover the route")
    return cupy


def simulated(xp) -> bool:
    return getattr(xp, "simulated", False)


def host(x) -> np.ndarray:
    return x.get()


def fortran_ordered(x) -> bool:
    """Whether every matrix of the stack ``x`` is Fortran-ordered, as SciPy's batch loop leaves LAPACK's results."""
    return x.strides[-2] == x.itemsize and x.strides[-1] == x.shape[-2] * x.itemsize


def laid_out_as(x, reference: np.ndarray) -> bool:
    """Whether the matrices of ``x`` are laid out as SciPy's result ``reference`` (Fortran- or C-ordered)."""
    return fortran_ordered(x) == fortran_ordered(reference) and tuple(x.strides) == reference.strides


def scipy_error(call) -> BaseException:
    """The error SciPy's own ``call()`` raises."""
    with pytest.raises(Exception) as raised:  # noqa: PT011 - whatever SciPy raises is the expectation
        call()
    return raised.value


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("n", "lower"), [(4, True), (5, False), (24, True)])
def test_cholesky_and_cho_factor_of_a_stack(xp, dtype, n, lower):
    a = spd(n, dtype, seed=1, batch=(2, 3))
    stack = xp.asarray(a)
    c = hl.cholesky(stack, lower=lower)
    factor, flags = hl.cho_factor(stack, lower=lower)
    assert type(c) is type(stack) and c.dtype == dtype and c.shape == a.shape
    ref_factor, ref_flags = sl.cho_factor(a, lower=lower)
    assert laid_out_as(c, sl.cholesky(a, lower=lower)) and laid_out_as(factor, ref_factor)
    np.testing.assert_array_equal(host(stack), a)
    c, factor = host(c), host(factor)
    triangle, other = (np.tril, np.triu) if lower else (np.triu, np.tril)
    k = 1 if lower else -1
    for index in np.ndindex(a.shape[:-2]):
        assert cholesky_residual(a[index], c[index], lower) < 50
        np.testing.assert_array_equal(other(c[index], k), 0)
        np.testing.assert_array_equal(triangle(factor[index]), c[index])
        np.testing.assert_array_equal(other(factor[index], k), other(ref_factor[index], k))
    assert type(flags) is type(ref_flags) and np.array_equal(flags, ref_flags)


def test_the_first_non_positive_definite_member_raises_scipys_error(xp):
    a = spd(5, np.float64, seed=2, batch=(2, 3))
    a[1, 1, 1, 1] = -1.0
    a[0, 2, 2, 2] = -1.0
    for call, x in ((hl.cholesky, a), (hl.cho_factor, a[1]), (hl.cholesky, np.ones((2, 3, 4)))):
        error = scipy_error(lambda call=call, x=x: getattr(sl, call.__name__)(x))
        with pytest.raises(type(error), match=f"^{re.escape(str(error))}$"):
            call(xp.asarray(x))
    a[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="array must not contain infs or NaNs"):
        hl.cholesky(xp.asarray(a))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (3, 5), (40, 40), (100, 90)], ids=str)
def test_lu_factor_of_a_stack_has_lapacks_pivots(xp, dtype, shape):
    from hetlapack.batched.cuda_kernels import lu_kernel_fits

    if not lu_kernel_fits(*shape, dtype) and simulated(xp):
        pytest.skip(LIBRARY_ONLY)
    # the simulator runs each CUDA thread as a Python thread: one matrix at the orders that fill a block alone
    a = general(*shape, dtype=dtype, seed=3, batch=(3,) if max(shape) < 40 or not simulated(xp) else (1,))
    stack = xp.asarray(a)
    lu, piv = hl.lu_factor(stack)
    assert type(lu) is type(piv) is type(stack) and piv.dtype == np.int32 and lu.dtype == dtype
    assert fortran_ordered(lu)
    np.testing.assert_array_equal(host(stack), a)
    lu, piv = host(lu), host(piv)
    for index in range(len(a)):
        lu_ref, piv_ref = sl.lu_factor(a[index])
        np.testing.assert_array_equal(piv[index], piv_ref)
        assert lu_residual(a[index], lu[index], piv[index]) < 50


def test_each_exactly_singular_member_warns_as_scipy(xp):
    a = general(4, dtype=np.float64, seed=4, batch=(4,))
    a[1, :, 2] = 0.0
    a[3, :, 0] = 0.0
    with pytest.warns(sl.LinAlgWarning) as caught:
        lu, piv = hl.lu_factor(xp.asarray(a))
    assert [str(w.message) for w in caught] == ["Diagonal number 3 is exactly zero. Singular matrix.",
                                                "Diagonal number 1 is exactly zero. Singular matrix."]
    with pytest.warns(sl.LinAlgWarning):
        expected = [sl.lu_factor(matrix) for matrix in a]
    np.testing.assert_array_equal(host(piv), np.stack([p for _, p in expected]))


def test_empty_inputs_behave_as_scipys(xp):
    for shape in [(3, 0, 0), (2, 3, 0)]:
        a = np.zeros(shape)
        lu, piv = hl.lu_factor(xp.asarray(a))
        lu_ref, piv_ref = sl.lu_factor(a)
        assert (lu.shape, piv.shape, piv.dtype) == (lu_ref.shape, piv_ref.shape, piv_ref.dtype)
    empty = xp.asarray(np.zeros((3, 0, 0), dtype=np.float32))
    c = hl.cholesky(empty)
    assert type(c) is type(empty) and c.shape == (3, 0, 0) and c.dtype == np.float32
    for name, function in (("cholesky", hl.cholesky), ("lu_factor", hl.lu_factor)):
        with pytest.raises(ValueError, match=f"^`{name}` does not support zero-size batches.$"):
            function(xp.asarray(np.zeros((0, 4, 4))))
    with pytest.raises(ValueError, match="^`_lu_solve` does not support zero-size batches.$"):
        hl.lu_solve((xp.asarray(np.eye(4)), xp.asarray(np.arange(4, dtype=np.int32))), xp.asarray(np.zeros((0, 4, 2))))


def solve_residual(a, x, b, trans=0) -> float:
    """``||op(A) X - B||_1 / (||op(A)||_1 ||X||_1 n eps)`` per matrix, the largest."""
    op = {0: lambda m: m, 1: lambda m: m.T, 2: lambda m: m.conj().T}[trans]
    worst = 0.0
    for index in np.ndindex(a.shape[:-2]):
        m, xi, bi = op(a[index]), x[index], b[index]
        scale = np.linalg.norm(m, 1) * max(np.linalg.norm(xi.reshape(len(m), -1), 1), 1e-300)
        error = np.linalg.norm((m @ xi - bi).reshape(len(m), -1), 1)
        worst = max(worst, error / (scale * len(m) * np.finfo(a.dtype).eps))
    return worst


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=str)
def test_solves_broadcast_as_scipy_and_stay_on_the_device(xp, dtype):
    a_spd, a_gen = spd(4, dtype, seed=5, batch=(3,)), general(4, dtype=dtype, seed=6, batch=(3,))
    b_vector, b_stack = general(1, 4, dtype=dtype, seed=7)[0], general(4, 2, dtype=dtype, seed=8, batch=(3,))
    for lower in (True, False):
        factors = hl.cho_factor(xp.asarray(a_spd), lower=lower)
        x = hl.cho_solve(factors, xp.asarray(b_vector))
        assert type(x) is type(factors[0]) and x.shape == (3, 4)
        assert solve_residual(a_spd, host(x)[..., None], np.broadcast_to(b_vector[:, None], (3, 4, 1))) < 50
        assert solve_residual(a_spd, host(hl.cho_solve(factors, xp.asarray(b_stack))), b_stack) < 50
    lu_and_piv = hl.lu_factor(xp.asarray(a_gen))
    kept = [host(array) for array in lu_and_piv]
    rhs = xp.asarray(b_stack)
    for trans in (0, 1, 2):
        x = hl.lu_solve(lu_and_piv, rhs, trans=trans)
        assert type(x) is type(lu_and_piv[0]) and x.shape == b_stack.shape
        assert solve_residual(a_gen, host(x), b_stack, trans) < 50
    np.testing.assert_array_equal(host(rhs), b_stack)
    for array, before in zip(lu_and_piv, kept):
        np.testing.assert_array_equal(host(array), before)
    x = hl.lu_solve(lu_and_piv, b_vector)
    assert solve_residual(a_gen, host(x)[..., None], np.broadcast_to(b_vector[:, None], (3, 4, 1))) < 50
    with pytest.raises(ValueError, match=r"^Shapes of lu \(4, 4\) and b \(3, 2\) are incompatible$"):
        hl.lu_solve(lu_and_piv, xp.asarray(b_stack[:, :3]))


def _outcome(call):
    """What a call gave: ``("ok", result)``, or the exception's type and text."""
    try:
        return "ok", call()
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return type(exc).__name__, str(exc)


def _same_outcome(ours, theirs) -> None:
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        np.testing.assert_allclose(host(ours[1]), theirs[1], rtol=1e-6, atol=1e-6)
    else:
        assert ours[1] == theirs[1]


def test_solve_arguments_are_read_and_refused_as_scipy_reads_them(xp):
    """The flags as f2py reads them (``lower=0.5`` is upper, a stack's flags by their first one, ``trans=None`` is 0),
    SciPy's errors for bad flags and shapes, and only ``b`` checked for finiteness by ``lu_solve``."""
    a = spd(3, np.float64, seed=12, batch=(2,))
    c_upper, c_lower = sl.cho_factor(a)[0], sl.cho_factor(a, lower=True)[0]
    lu, piv = sl.lu_factor(a)
    b = general(3, 1, dtype=np.float64, seed=13, batch=(2,))
    lu_nan = lu.copy()
    lu_nan[1, 0, 2] = np.nan
    cases = [("cho_solve", (c_upper, flag), b, {}) for flag in (0.5, 2, -1, None, "1")]
    cases += [("cho_solve", (np.stack([c_lower[0], c_upper[1]]), np.array(flags)), b, {})
              for flags in ([True, False], [False, True])]
    cases += [("cho_solve", (c_upper, False), np.ones((2, 4, 1)), {}), ("cho_solve", (np.ones((2, 3, 4)), True), b, {}),
              ("cho_solve", (c_upper, False), np.ones(()), {}),
              ("cho_solve", (c_upper, False), b, {"overwrite_b": 1.5})]
    cases += [("lu_solve", (lu, piv), b, {"trans": trans}) for trans in (None, True, 3, -1, "T", np.int64(2), 2.0)]
    cases += [("lu_solve", (lu, piv), np.ones((2, 4, 1)), {}), ("lu_solve", (np.ones((2, 3, 4)), piv), b, {}),
              ("lu_solve", (lu, piv[:, :2]), b, {}), ("lu_solve", (lu_nan, piv), b, {}),
              ("lu_solve", (lu, piv), b, {"overwrite_b": 1.5})]
    for name, (factor, second), rhs, options in cases:
        device_second = xp.asarray(second) if name == "lu_solve" else second
        ours = _outcome(lambda: getattr(hl, name)((xp.asarray(factor), device_second), xp.asarray(rhs), **options))
        theirs = _outcome(lambda: getattr(sl, name)((factor, second), rhs, **options))
        _same_outcome(ours, theirs)


def test_pivots_that_name_no_row_are_refused_after_scipys_checks(xp):
    """A pivot outside the factor's rows (where SciPy's getrs writes outside ``b``) raises ``ValueError``, on the
    batched kernels and on the gpu path; SciPy's errors for ``b`` come first, and an empty ``b`` reads no pivot."""
    a = general(4, 4, dtype=np.float64, seed=16, batch=(3,))
    lu, piv = sl.lu_factor(a)
    for bad in (4, -1):
        wrong = piv.copy()
        wrong[1, 2] = bad
        for factor, pivots, b in ((lu, wrong, np.ones((3, 4, 2))), (lu[1], wrong[1], np.ones(4))):
            with pytest.raises(ValueError, match=f"^lu_solve: pivot {bad} names no row of the LU factor of order 4"):
                hl.lu_solve((xp.asarray(factor), xp.asarray(pivots)), xp.asarray(b))
            with pytest.raises(ValueError, match="^array must not contain infs or NaNs$"):
                hl.lu_solve((xp.asarray(factor), xp.asarray(pivots)), xp.asarray(b * np.nan))
        assert hl.lu_solve((xp.asarray(lu), xp.asarray(wrong)), xp.asarray(np.ones((3, 4, 0)))).shape == (3, 4, 0)


def test_factor_arguments_and_empty_stacks_as_scipy(xp):
    """``cho_factor`` gives ``lower`` back as given (once per matrix of a stack), an empty LU keeps its dtype, and a bad
    ``overwrite_a`` on an array with a NaN meets SciPy's finiteness check first."""
    a = spd(3, np.float64, seed=14, batch=(2,))
    for lower in (1, 0.5, True):
        ours, theirs = hl.cho_factor(xp.asarray(a), lower=lower)[1], sl.cho_factor(a, lower=lower)[1]
        assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    for shape in ((3, 0, 0), (2, 3, 0), (1, 2, 0, 0)):
        for dtype in (np.int64, np.float16):
            ours, theirs = hl.lu_factor(xp.asarray(np.zeros(shape, dtype))), sl.lu_factor(np.zeros(shape, dtype))
            assert [(r.dtype, r.shape) for r in ours] == [(r.dtype, r.shape) for r in theirs]
    with_nan = a.copy()
    with_nan[0, 0, 0] = np.nan
    ours = _outcome(lambda: hl.lu_factor(xp.asarray(with_nan), overwrite_a=1.5))
    assert ours == _outcome(lambda: sl.lu_factor(with_nan, overwrite_a=1.5))


def test_one_factor_solves_a_stack_without_a_copy_per_matrix(xp):
    """SciPy broadcasts one factor over a stack of right-hand sides; the kernels read it in place (stride 0), so the
    stack's solve holds one copy of the factor, not one per matrix."""
    from hetlapack.batched import cuda_solve  # noqa: PLC0415 - needs numba-cuda

    a = general(5, dtype=np.float64, seed=9)
    lu, piv = sl.lu_factor(a)
    c = sl.cho_factor(spd(5, np.float64, seed=10), lower=True)[0]
    b = general(5, 3, dtype=np.float64, seed=11, batch=(4, 2))
    factor, rhs = xp.asarray(np.asfortranarray(lu)), xp.asarray(b)
    _, _, stack, x, (pivots,) = cuda_solve._operands(factor, rhs, xp.asarray(piv))
    assert stack.shape == (8, 5, 5) and stack.strides[0] == 0 and pivots.strides[0] == 0
    assert np.shares_memory(stack, factor) if simulated(xp) else stack.data.ptr == factor.data.ptr
    for trans in (0, 1, 2):
        ours = host(hl.lu_solve((factor, xp.asarray(piv)), rhs, trans=trans))
        np.testing.assert_allclose(ours, sl.lu_solve((lu, piv), b, trans=trans), rtol=1e-12, atol=1e-12)
    ours = host(hl.cho_solve((xp.asarray(c), True), rhs))
    np.testing.assert_allclose(ours, sl.cho_solve((c, True), b), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(host(rhs), b)


def test_dispatch_names_the_path_and_honours_no_other(xp):
    stack, matrix = xp.asarray(spd(4, seed=9, batch=(2,))), xp.asarray(spd(4, seed=9))
    plan = hetlapack.explain("cholesky", stack)
    assert plan.path == "batched" and plan.devices == ("cuda:0",) and "stays on cuda:0" in plan.reason
    assert set(plan.unavailable) == {"host", "hybrid", "gpu"} and not plan.predicted_s
    assert hetlapack.explain("lu_factor", matrix).path == "gpu"
    assert hetlapack.explain("cho_solve", stack).path == "batched"
    with hetlapack.using(path="host"), pytest.raises(ValueError, match="cannot be honoured.*stay on their GPU"):
        hl.cholesky(stack)
    with pytest.raises(ValueError, match="geqrf on a cupy array"):
        hl.qr(stack)
    with pytest.raises(ValueError, match=r"lu \(P, L, U\) on a cupy array"):
        hl.lu(matrix)


def test_a_single_matrix_takes_the_gpu_path(xp):
    if simulated(xp):
        pytest.skip("one CuPy matrix runs cuSOLVER through the CUDA device: needs CuPy and a GPU")
    a_spd, a_gen = spd(50, np.float64, seed=10), general(50, dtype=np.complex128, seed=11)
    b = general(50, 3, dtype=np.complex128, seed=12)
    c = hl.cholesky(xp.asarray(a_spd), lower=True)
    assert type(c) is type(xp.asarray(a_spd)) and cholesky_residual(a_spd, host(c), True) < 50
    assert not np.triu(host(c), 1).any()
    assert solve_residual(a_spd, host(hl.cho_solve(hl.cho_factor(xp.asarray(a_spd)), xp.asarray(a_spd[:, :2]))),
                          a_spd[:, :2]) < 50
    lu, piv = hl.lu_factor(xp.asarray(a_gen))
    np.testing.assert_array_equal(host(piv), sl.lu_factor(a_gen)[1])
    for trans in (0, 1, 2):
        assert solve_residual(a_gen, host(hl.lu_solve((lu, piv), xp.asarray(b), trans=trans)), b, trans) < 50
    a_spd[30, 30] = -1.0
    with pytest.raises(np.linalg.LinAlgError) as theirs:
        sl.cholesky(a_spd)
    with pytest.raises(np.linalg.LinAlgError, match=f"^{re.escape(str(theirs.value))}$"):
        hl.cholesky(xp.asarray(a_spd))


def test_small_numpy_inputs_never_import_cupy(tmp_path):
    """Not even where CuPy sees a GPU (here a stand-in package that says it sees one): dispatch looks for GPUs only
    where LAPACK on the host is predicted slower than a device path's fixed cost."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text("class cuda:\n    class runtime:\n"
                                                   "        getDeviceCount = staticmethod(lambda: 1)\n")
    code = ("import sys, numpy as np, hetlapack, hetlapack.linalg as hl; "
            "a = np.eye(3) + np.zeros((2, 3, 3)); hl.cholesky(a); hl.lu_factor(a[0]); hl.qr(a[0] + 1); "
            "hetlapack.explain('qr', a); print('cupy' in sys.modules, hetlapack.explain('cholesky', a[0]).unavailable)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    imported, unavailable = out.stdout.split(" ", 1)
    assert imported == "False" and "no GPU was looked for" in unavailable


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=str)
def test_gpu_path_solves_apply_swaps_and_triangles_in_lapacks_order(monkeypatch, dtype):
    """The CUDA device's ``potrs``/``getrs`` (what single CuPy solves run), with CuPy replaced by the NumPy stand-in
    of ``tests/test_cuda.py`` and the LASWP kernel run by numba-cuda (in its simulator here)."""
    from test_cuda import numpy_as_cupy, solve_triangular

    from hetlapack.devices import cuda

    monkeypatch.setattr(cuda, "_import_cupy", lambda: (numpy_as_cupy(), None, solve_triangular))
    device = cuda.CudaDevice(0)
    a_spd, a_gen, b = spd(6, dtype, seed=13), general(6, dtype=dtype, seed=14), general(6, 2, dtype=dtype, seed=15)
    for lower in (True, False):
        x = np.asfortranarray(b)
        device.potrs(sl.cho_factor(a_spd, lower=lower)[0], x, lower)
        assert solve_residual(a_spd, x, b) < 50
    lu, piv = sl.lu_factor(a_gen)
    for trans in (0, 1, 2):
        x = np.asfortranarray(b)
        device.getrs(lu, piv, x, trans)
        assert solve_residual(a_gen, x, b, trans) < 50
