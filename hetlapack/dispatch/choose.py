"""``choose``: the one place that decides a path. It returns a :class:`Plan` that explains itself."""

from __future__ import annotations

import functools
import logging
import math
import os

import numpy as np

from ..options import Options, current
from .paths import BATCHED, BY_NAME, GPU, HOST, HYBRID, Path, Request
from .paths.batched import BATCHED_OPS, compiles_ended, kernels_compiling
from .paths.gpu import detected_gpus
from ..perf import model, rates, simulator
from .plan import Plan

_log = logging.getLogger(__name__)

#: Operations a factorization or solve maps to, by the public (SciPy/NumPy) name or the LAPACK name.
OPS = {
    "cholesky": "potrf", "cho_factor": "potrf", "potrf": "potrf",
    "lu_factor": "getrf", "lu": "getrf", "getrf": "getrf",
    "qr": "geqrf", "geqrf": "geqrf", "geqp3": "geqp3",
    "cho_solve": "potrs", "potrs": "potrs",
    "lu_solve": "getrs", "getrs": "getrs",
}

#: Solves are O(n^2) companions of the factorizations: they have only the host and batched paths, and a forced
#: path applies to them only when it is one of those (``using(path="hybrid")`` factorizes on the runtime and then
#: solves with one LAPACK call).
SOLVE_OPS = frozenset({"potrs", "getrs"})
SOLVE_PATHS = (HOST, BATCHED)

#: Operations CuPy arrays run where they live: stacks on the GPU batched path, single matrices on the gpu path.
DEVICE_ARRAY_OPS = frozenset({"potrf", "getrf", "potrs", "getrs"})

#: What runs a CuPy array, by (path, is a solve).
_DEVICE_ARRAY_KERNELS = {
    ("batched", False): "cuSOLVER's batched Cholesky; LU by the numba-cuda kernel (LAPACK's pivots), one cuSOLVER "
                        "call per matrix past its sizes",
    ("batched", True): "numba-cuda batched solve kernels",
    ("gpu", False): "cuSOLVER through the CUDA device",
    ("gpu", True): "cuBLAS TRSM through the CUDA device (LU's row swaps by the numba-cuda LASWP kernel)",
}

#: dtypes the accelerated paths compute in; anything else is left to SciPy's own conversion on the host path.
LAPACK_DTYPES = frozenset(np.dtype(c) for c in "fdFD")


def _edge_case(req: Request) -> str | None:
    """Why SciPy's own code must handle this input (errors and edge cases stay exactly SciPy's), or None."""
    if len(req.shape) < 2:
        return "not a matrix: SciPy's own checks apply"
    if req.dtype not in LAPACK_DTYPES:
        return f"dtype {req.dtype} is converted and checked by SciPy itself"
    if 0 in req.shape:
        return "empty input: nothing to factorize"
    if req.op == "potrf" and req.core[0] != req.core[1]:
        return "non-square input to a Cholesky factorization: SciPy's error applies"
    return None


def _device_array_plan(req: Request, options: Options, common: dict) -> Plan:
    """CuPy arrays stay on their GPU (no host round trip): a stack takes the GPU batched path, one matrix the gpu
    path. There is nothing to price; a forced path other than that one cannot be honoured."""
    if req.op not in DEVICE_ARRAY_OPS or len(req.shape) < 2 or req.features:
        what = ", ".join(req.features) or req.op
        raise ValueError(f"{what} on a {req.array_module} array of shape {tuple(req.shape)} is not supported: "
                         f"hetlapack runs {', '.join(sorted(DEVICE_ARRAY_OPS))} on (..., m, n) CuPy arrays")
    stack = len(req.shape) > 2
    path = BATCHED if stack else GPU
    stays = f"{req.array_module} arrays stay on their GPU"
    other, why = ((GPU, "it factorizes one matrix; stacks go to the batched path") if stack
                  else (BATCHED, "it takes stacks (..., m, n); this is a single matrix"))
    unavailable = {HOST.name: stays, HYBRID.name: stays, other.name: why}
    if options.path is not None and options.path != path.name:
        raise ValueError(f"path {options.path!r} cannot be honoured for {req.op} on {req.dtype} {tuple(req.shape)}: "
                         f"{unavailable.get(options.path, stays)}")
    where = f"a {req.array_module} {'stack' if stack else 'matrix'} stays on {req.device}"
    reason = f"{where}: {_DEVICE_ARRAY_KERNELS[path.name, req.op in SOLVE_OPS]}"
    return Plan(path=path.name, reason=reason, devices=(req.device,), forced=options.path is not None,
                unavailable=unavailable, **common)


def _leave_unpriced(options: Options, gpus: tuple[str, ...] | None, unavailable: dict[str, str]) -> None:
    """Mark the device paths over an accelerator that calibration has not measured as not to be chosen: their
    price would be a guess (``model.unmeasured_accelerators``). A forced path still runs."""
    for path in (GPU, HYBRID):
        if path.name not in unavailable and (names := model.unmeasured_accelerators(path.devices(options, gpus))):
            unavailable[path.name] = (f"{', '.join(names)} not calibrated, so its price would be a guess: run "
                                      f"`hetlapack calibrate` (hetlapack.using(path={path.name!r}) runs it as it is)")


def choose(req: Request, options: Options | None = None) -> Plan:
    """Pick the path for ``req``: the user's forced path if it can run, else the cheapest by the cost model.

    A plan depends only on the request and the options (the model's prices and the hardware probe are fixed for
    the life of the process), so each decision is made once and reused: pricing costs about 50 us, several times
    a LAPACK call on a small matrix. Plans are shared; treat them as read-only. Options naming device objects are
    priced afresh, so that remembered plans never keep a user's devices (and their streams and memory) alive.
    """
    options = current() if options is None else options
    if compiles_ended():  # plans made while batched kernels compiled in the background did without them
        _remembered.cache_clear()
    by_name = options.devices is None or all(isinstance(device, str) for device in options.devices)
    plan = _remembered(req, options) if by_name else _choose(req, options)
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("%s on %s %s -> %s: %s", req.op, req.dtype, tuple(req.shape), plan.path, plan.reason)
    return plan


@functools.lru_cache(maxsize=1024)
def _remembered(req: Request, options: Options) -> Plan:
    return _choose(req, options)


def host_for_certain(op: str, shape: tuple[int, ...], dtype: np.dtype | None, stack_loop: str = "python",
                     memory_order: str = "F") -> bool:
    """Whether a matrix or stack of this shape and memory order, in a LAPACK dtype, goes to the host path whatever
    the paths are priced at, decided without a request or a plan: no path but the host's is forced, no devices are
    named, and one LAPACK call is predicted to finish within the fixed cost of a call to the runtime, which the tile
    paths pay and for which no GPU is looked for, or the library's own call on a stack (looping as ``stack_loop``
    says) within the fixed cost of the batched path, the only other that takes stacks (:func:`choose` decides the
    same, pricing every path, for ``explain``). It costs about 2 us where a request and a remembered plan cost 20,
    a third of a Cholesky of order 100. With this module's debug log on, every call goes through :func:`choose`,
    which logs its decision."""
    options = current()
    if options.path not in (None, HOST.name) or options.devices is not None or _log.isEnabledFor(logging.DEBUG):
        return False
    return _within_call_overhead(OPS[op], shape, dtype, stack_loop, memory_order)


@functools.lru_cache(maxsize=4096)
def _within_call_overhead(op: str, shape: tuple[int, ...], dtype: np.dtype | None, stack_loop: str,
                          memory_order: str) -> bool:
    if len(shape) < 2 or dtype not in LAPACK_DTYPES:
        return False
    host_seconds = HOST.predict(Request(op, shape, dtype, stack_loop=stack_loop, memory_order=memory_order))
    if len(shape) > 2:
        return host_seconds <= model.BATCHED_CALL_S
    return _within_runtime_overhead(host_seconds)


def _within_runtime_overhead(host_seconds: float) -> bool:
    """Whether one LAPACK call predicted at ``host_seconds`` ends within the fixed cost of a call to the runtime,
    which no device path wins back: no GPU is looked for, and the tile paths are priced above it."""
    return host_seconds <= rates.RUNTIME_CALL_OVERHEAD_S


def forget_decisions() -> None:
    """Forget the plans, host decisions, host Cholesky blocks and batched kernels' slices
    (``model.batched_spread_bytes``) made so far, so that the next calls are priced afresh: in a forked child (whose
    compiled kernels may not run: ``paths.batched.compiled_kernels_unusable``), and in tests that replace the
    model's functions or the calibration."""
    _remembered.cache_clear()
    _within_call_overhead.cache_clear()
    model.forget_calibrated_lookups()


os.register_at_fork(after_in_child=forget_decisions)


def _forced_path(req: Request, options: Options) -> Path | None:
    """The path the user forced, where it applies to ``req`` (solves have the host and batched paths only)."""
    forced = BY_NAME[options.path] if options.path is not None else None
    return None if req.op in SOLVE_OPS and forced not in SOLVE_PATHS else forced


def _choose(req: Request, options: Options) -> Plan:
    common = {"op": req.op, "shape": tuple(req.shape), "dtype": str(req.dtype)}
    if req.array_module == "cupy":
        return _device_array_plan(req, options, common)
    edge = _edge_case(req)
    if edge is not None:
        return Plan(path=HOST.name, reason=edge, **common)

    forced_path = _forced_path(req, options)
    unavailable = {path.name: why for path in (HOST, BATCHED, HYBRID)
                   if (why := path.unavailable(req, options, None)) is not None}
    predicted = {HOST.name: HOST.predict(req)} if HOST.name not in unavailable else {}
    kernels = None
    if BATCHED.name not in unavailable:
        order = max(req.core)
        kernels, why_not = model.batched_kernels(req.op, order, req.dtype, req.library, forced_path is BATCHED,
                                                 options.kernels)
        if kernels is not None:
            why_not = kernels_compiling(req, kernels, forced_path is BATCHED)
            kernels = kernels if why_not is None else None
        if kernels is None:
            unavailable[BATCHED.name] = why_not
        else:
            predicted[BATCHED.name] = model.predict_batched(req.op, *req.core, req.batch, req.dtype, kernels)
    # GPUs are looked for (CuPy imported, CUDA started) only where one LAPACK call on the host is predicted to take
    # longer than the fixed cost every device path pays, which no device wins back
    worth_a_look = options.path is not None or not _within_runtime_overhead(predicted.get(HOST.name, np.inf))
    gpus = detected_gpus() if worth_a_look else None
    if (why := GPU.unavailable(req, options, gpus)) is not None:
        unavailable[GPU.name] = why
    if forced_path is None:
        _leave_unpriced(options, gpus, unavailable)
    layouts = HYBRID.layouts(req, options, unavailable, gpus) if HYBRID.name not in unavailable else {}
    if layouts:
        predicted[HYBRID.name] = layouts[_layout(layouts)]
    # the factor this machine's timing of the tile path's call put on the hgdd layout's price, if any
    factor = HYBRID.timed_factor(req, options, HYBRID.devices(options, gpus)) if "hgdd" in layouts else None
    if GPU.name not in unavailable:
        predicted[GPU.name] = GPU.predict(req, options, gpus)

    if forced_path is not None:
        if forced_path.name in unavailable:
            raise ValueError(f"path {forced_path.name!r} cannot be honoured for {req.op} on {req.dtype} "
                             f"{tuple(req.shape)}: {unavailable[forced_path.name]}")
        path, forced, reason = forced_path, True, "forced by hetlapack.using(path=...) or HETLAPACK_PATH"
    else:
        forced = False
        candidates = dict(predicted)
        margin = None
        if HYBRID.name in candidates and HOST.name in candidates:
            margin = model.tile_margin(req.op, req.scipy_input_order,
                                       tile_timed=factor is not None and _layout(layouts) == "hgdd")
            candidates[HYBRID.name] *= margin
        path = BY_NAME[min(candidates, key=candidates.get)]
        reason = _reason(path, req, predicted, kernels, unavailable, margin)
        if options.path is not None:
            reason += f"; the forced path {options.path!r} does not apply to solves (they have host and batched only)"
    if path is BATCHED and options.kernels not in (None, kernels):
        reason += f"; {options.kernels} kernels were asked for, but {req.op} has none in {req.dtype}"

    tile = layout = host_cols = tile_basis = None
    if path is HYBRID:
        devices = path.devices(options, gpus)
        tile = options.tile or model.default_tile(req.op, min(req.core), devices)
        tile_basis = ("forced by hetlapack.using(tile=...)" if options.tile else
                      model.tile_basis(req.op, min(req.core), devices))
        layout = _layout(layouts)
        reason = f"{reason}; {_layout_reason(layout, layouts, options, unavailable)}"
        if layout == "two-level":
            host_cols = simulator.two_level_host_cols(model.modeled(HYBRID.devices(options, gpus)), tile)
    host_rate = (model.host_rate_basis(req.op, max(min(req.core), 1), req.dtype, req.scipy_input_order,
                                       req.forms_q) if HOST.name in predicted else None)
    if host_rate is not None and req.op == "potrf" and len(req.shape) == 2 and req.array_module == "numpy":
        host_rate += model.host_potrf_basis(req.dtype, req.core[0], req.library)
    tile_rate = model.tile_call_basis(factor, req.op, req.memory_order, req.forms_q) if factor is not None else None
    lanes = loop_threads = None
    if path is BATCHED and kernels == "interleaved" and req.core[0] == req.core[1]:
        lanes = model.batched_lanes(req.op, req.dtype, req.core[0])
    if path is BATCHED and kernels == "lapack":
        loop_threads = model.lapack_loop_threads(req.op, req.dtype, max(req.core))
    return Plan(host_threads=_host_threads_reason(req) if path is HOST else None,
                path=path.name, reason=reason, devices=path.devices(options, gpus), tile=tile,
                placement=options.placement or "owner", forced=forced, kernels=kernels if path is BATCHED else None,
                predicted_s=predicted, unavailable=unavailable, layout=layout, host_cols=host_cols,
                layout_s=layouts if path is HYBRID else {}, host_rate=host_rate, tile_rate=tile_rate,
                tile_basis=tile_basis, lanes=lanes, loop_threads=loop_threads, **common)


def _host_threads_reason(req: Request) -> str | None:
    """Why the host path's call runs on one BLAS thread, where it does (``model.host_blas_threads``: SciPy's or
    NumPy's call on one NumPy matrix); None where it runs on as many as BLAS takes."""
    if not (len(req.shape) == 2 and req.array_module == "numpy"
            and model.host_blas_threads(req.op, req.dtype, max(req.core), req.forms_q, req.library) == 1):
        return None
    low, high = model.host_one_thread_orders(req.op, req.dtype, req.forms_q, req.library)
    library = "SciPy" if req.library == "scipy" else "NumPy"
    return (f"{library}'s call on 1 BLAS thread (`hetlapack calibrate` timed it at least "
            f"{model.HOST_ONE_THREAD_MARGIN}x faster on one thread than on every core at orders {low}-{high} on this "
            "machine)")


def _layout(layouts: dict[str, float]) -> str:
    """The hybrid layout to run among those priced: HGDD, unless two-level is priced cheaper by the model's error
    between them (``model.TWO_LEVEL_MARGIN``)."""
    if "hgdd" not in layouts:
        return next(iter(layouts))
    if layouts.get("two-level", np.inf) * model.TWO_LEVEL_MARGIN < layouts["hgdd"]:
        return "two-level"
    return "hgdd"


def _layout_reason(layout: str, layouts: dict[str, float], options: Options, unavailable: dict[str, str]) -> str:
    if options.layout is not None:
        return f"{layout} layout, forced by hetlapack.using(layout=...)"
    if layout == "hgdd" and layouts.get("two-level", np.inf) < layouts["hgdd"]:
        return (f"hgdd layout (two-level predicted {layouts['hgdd'] / layouts['two-level']:.2f}x faster, within the "
                f"model's error: dispatch takes it from {model.TWO_LEVEL_MARGIN:.2f}x)")
    if len(layouts) > 1:
        return f"{layout} layout ({_ratio(layout, layouts)})"
    return f"{layout} layout ({unavailable['two-level']})"


def _reason(path: Path, req: Request, predicted: dict[str, float], kernels: str | None,
            unavailable: dict[str, str], margin: float | None) -> str:
    others = {p: s for p, s in predicted.items() if p != path.name}
    if path is BATCHED and kernels == "lapack":
        return (f"a stack of {req.batch} matrices: LAPACK's {req.op} on each from compiled code, one BLAS thread a "
                f"call (SciPy's results, bit for bit, as SciPy gives them on one BLAS thread), beats {req.batch} "
                f"calls from Python ({_ratio(path.name, predicted)}; measured up to "
                f"n={model.LAPACK_LOOP_MAX_N[req.op]}); {_loop_threads_reason(req)}{_replay_reason(req)}")
    if path is BATCHED:
        return (f"a stack of {req.batch} small matrices: one interleaved batched kernel beats {req.batch} LAPACK "
                f"calls (it beats the LAPACK loop up to n={model.interleaved_max_n(req.op, req.dtype)}, "
                f"{model.interleaved_basis(req.op, req.dtype)})")
    if path is HYBRID:
        return f"large enough that tiles on the runtime beat one LAPACK call ({_ratio(path.name, predicted)})"
    if path is GPU:
        return f"one accelerator alone is cheapest, panels included ({_ratio(path.name, predicted)})"
    if len(req.shape) > 2 and BATCHED.name in unavailable and req.op in BATCHED_OPS:
        return unavailable[BATCHED.name]
    if not others:
        return "the only path priced for this input (why the others are not: below)"
    if predicted.get(HYBRID.name, math.inf) < predicted[path.name]:
        return (f"tiles are predicted only {predicted[path.name] / predicted[HYBRID.name]:.2f}x faster than one LAPACK "
                f"call, within the model's error (dispatch takes them from {margin:.2f}x)")
    if len(req.shape) > 2:
        loop = {"compiled": "in compiled code", "cython": "in Cython"}.get(req.stack_loop, "from Python")
        return (f"the library's own call is cheapest for this stack: a LAPACK call per matrix, looped {loop}, "
                f"beside a fixed cost per call below the batched path's ({_ratio(path.name, predicted)})")
    return f"one LAPACK call is cheapest at this size ({_ratio(path.name, predicted)})"


def _loop_threads_reason(req: Request) -> str:
    """How a LAPACK loop's calls share the cores, and why."""
    one_thread_max = model.loop_one_thread_max_n(req.op, req.dtype)
    if max(req.core) > one_thread_max:
        return "threads share the matrices"
    return (f"one thread makes every call: concurrent calls of OpenBLAS's {req.op} ran slower than one thread's up "
            f"to n={one_thread_max} ({model.loop_threads_basis(req.op, req.dtype)})")


def _replay_reason(req: Request) -> str:
    """Where the batched kernels may run a replay of the LAPACK loop's roundings instead of the loop."""
    if req.op not in model.REPLAY_MAX_N or req.dtype != np.float32:
        return ""
    limit = model.REPLAY_MAX_N[req.op]
    which = {"getrf": f"min(m, n) <= {model.GETF2_MAX_N} or max(m, n) <= {limit}",
             "geqrf": f"n <= m <= {limit}"}.get(req.op, f"orders <= {limit}")
    return (f"; for {which}, a replay of OpenBLAS's own roundings over interleaved matrices runs instead, where this "
            "process found on first use that it gives the loop's results bit for bit")


def _ratio(path: str, predicted: dict[str, float]) -> str:
    runner_up = min((p for p in predicted if p != path), key=predicted.get, default=None)
    if runner_up is None:
        return "no other candidate"
    return f"predicted {predicted[runner_up] / predicted[path]:.2f}x faster than {runner_up}"
