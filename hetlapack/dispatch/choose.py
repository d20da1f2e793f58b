"""``choose``: the one place that decides a path. It returns a :class:`Plan` that explains itself."""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..imports import loaded, present
from ..layout.two_level import TWO_LEVEL_OPS, two_level_unavailable
from . import model
from .hardware import detect
from .options import Options, current
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

#: Operations each non-host path implements.
TILED_OPS = frozenset({"potrf", "getrf", "geqrf"})
BATCHED_OPS = frozenset({"potrf", "getrf", "geqrf", "geqp3", "potrs", "getrs"})

#: Solves are O(n^2) companions of the factorizations: they have only the host and batched paths, and a forced
#: path applies to them only when it is one of those (``using(path="hybrid")`` factorizes on the runtime and then
#: solves with one LAPACK call).
SOLVE_OPS = frozenset({"potrs", "getrs"})
SOLVE_PATHS = ("host", "batched")

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


@dataclass(frozen=True)
class Request:
    """What dispatch needs to know of a call: the operation, the input's shape and dtype, features used, and the
    library whose function was called (``"scipy"`` or ``"numpy"``: whose LAPACK its results are)."""

    op: str
    shape: tuple[int, ...]
    dtype: np.dtype
    array_module: str = "numpy"
    features: tuple[str, ...] = ()
    device: str = "cpu"
    library: str = "scipy"

    @property
    def batch(self) -> int:
        """How many matrices: the product of the batch axes (1 for a single matrix)."""
        return math.prod(self.shape[:-2])

    @property
    def core(self) -> tuple[int, int]:
        """Rows and columns of each matrix."""
        return self.shape[-2], self.shape[-1]


@functools.cache
def _module_present(name: str) -> bool:
    """Whether module ``name`` can be imported (asked once per process: the search touches the file system)."""
    return present(name)


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


def _hybrid_unavailable(req: Request) -> str | None:
    if req.array_module != "numpy":
        return f"{req.array_module} arrays stay on their device (use the gpu path)"
    if req.op not in TILED_OPS:
        return f"{req.op} has no tiled algorithm (one LAPACK call on the host does it)"
    if len(req.shape) > 2:
        return "it factorizes one matrix; stacks go to the batched or host path"
    if req.features:
        return f"{', '.join(req.features)} is implemented on the host path only"
    if not _module_present(f"hetlapack.algorithms.{req.op}"):
        return "the tiled algorithm is not installed"
    return None


def _batched_unavailable(req: Request) -> str | None:
    if req.array_module != "numpy":
        return f"{req.array_module} arrays are not supported (NumPy and CuPy arrays are)"
    if req.op not in BATCHED_OPS:
        return f"{req.op} has no batched kernel"
    if len(req.shape) <= 2:
        return "it takes stacks (..., m, n); this is a single matrix"
    if req.features:
        return f"{', '.join(req.features)} is implemented on the host path only"
    if not _module_present("hetlapack.batched.kernels"):
        return "the batched kernels are not installed"
    return compiled_kernels_unusable()


def compiled_kernels_unusable() -> str | None:
    """Why the compiled kernels (the batched path's, and the pass that gives ``lu``'s P, L, U) cannot run in this
    process (``hetlapack.batched.kernels.unusable_after_fork``), or None; never imports them."""
    kernels = loaded("hetlapack.batched.kernels")  # not loaded: they have not run, nothing to check
    return kernels.unusable_after_fork() if kernels is not None else None


def _kind(device) -> str:
    """``"cpu"`` for the CPU (by name or object); an accelerator's kind or name otherwise."""
    return device.kind if hasattr(device, "kind") else device


def _gpu_probe():
    """The hardware probe's findings where CuPy is installed, else ``None`` (the probe imports CuPy and starts
    CUDA, once per process)."""
    return detect() if _module_present("cupy") else None


def _detected_gpus() -> tuple[str, ...]:
    """``cuda:0 … cuda:N-1`` for the GPUs CuPy sees."""
    hardware = _gpu_probe()
    return tuple(f"cuda:{i}" for i in range(len(hardware.gpus))) if hardware else ()


def _accelerators(options: Options, gpus: tuple[str, ...] | None) -> tuple:
    """The accelerators a gpu plan may use: those among the user's devices, else ``gpus`` (the detected GPUs, or
    ``None`` where dispatch did not look)."""
    if options.devices is not None:
        return tuple(d for d in options.devices if _kind(d) != "cpu")
    return gpus or ()


def _gpu_unavailable(req: Request, options: Options, gpus: tuple[str, ...] | None) -> str | None:
    if req.array_module != "numpy":
        return f"{req.array_module} arrays are not supported (NumPy and CuPy arrays are)"
    if req.op not in TILED_OPS:
        return f"{req.op} has no whole-matrix device routine here (one LAPACK call on the host does it)"
    if len(req.shape) > 2:
        return "it factorizes one matrix; stacks go to the batched or host path"
    if req.features:
        return f"{', '.join(req.features)} is implemented on the host path only"
    if accelerators := _accelerators(options, gpus):
        return _does_not_fit(req, accelerators[0])
    if options.devices is not None:
        return "the devices given include no accelerator"
    if gpus is None:
        return (f"no GPU was looked for: one LAPACK call on the host is predicted to finish within the "
                f"{model.RUNTIME_CALL_OVERHEAD_S * 1e3:g} ms that any device path costs")
    hardware = _gpu_probe()
    return hardware.gpu_reason if hardware else "CuPy is not installed (pip install 'hetlapack[gpu]')"


def _does_not_fit(req: Request, accelerator) -> str | None:
    """Why the gpu path cannot hold ``req``'s matrix whole in ``accelerator``'s memory (the capacity the runtime
    would give it: 90% of its free memory, or its ``memory_bytes``); ``None`` when it fits or has no known limit."""
    capacity = model.modeled((accelerator,))[0].memory_bytes
    need = math.prod(req.shape) * req.dtype.itemsize
    if capacity is None or need <= capacity:
        return None
    name = getattr(accelerator, "name", accelerator)
    return (f"the matrix ({need / 1e9:.3g} GB) does not fit {name}'s memory ({capacity / 1e9:.3g} GB usable): the "
            f"gpu path holds it whole, the hybrid path streams its tiles")


_PREDICTORS: dict[str, Callable[[Request], float]] = {
    "host": lambda r: model.predict_host(r.op, *r.core, max(r.batch, 1), r.dtype),
}

_UNAVAILABLE: dict[str, Callable[[Request], str | None]] = {
    "host": lambda r: None if r.array_module == "numpy" else f"{r.array_module} arrays are not moved to the host",
    "batched": _batched_unavailable,
    "hybrid": _hybrid_unavailable,
}


def _devices(path: str, options: Options, gpus: tuple[str, ...] | None) -> tuple:
    """The devices a plan on ``path`` runs on: the user's, else the CPU with the detected GPUs (hybrid), the first
    GPU (gpu) or the CPU alone."""
    if path == "gpu":
        return _accelerators(options, gpus)[:1]
    if options.devices is not None:
        return options.devices
    return ("cpu", *(gpus or ())) if path == "hybrid" else ("cpu",)


def _leave_unpriced(options: Options, gpus: tuple[str, ...] | None, unavailable: dict[str, str]) -> None:
    """Mark the device paths over an accelerator that calibration has not measured as not to be chosen: their
    price would be a guess (``model.unmeasured_accelerators``). A forced path still runs."""
    for path in ("gpu", "hybrid"):
        if path not in unavailable and (names := model.unmeasured_accelerators(_devices(path, options, gpus))):
            unavailable[path] = (f"{', '.join(names)} not calibrated, so its price would be a guess: run `hetlapack "
                                 f"calibrate` (hetlapack.using(path={path!r}) runs it as it is)")


def _two_level_unavailable(req: Request, options: Options, devices: tuple) -> str | None:
    if req.op not in TWO_LEVEL_OPS:
        return f"the two-level layout is implemented for Cholesky, LU and QR, not {req.op}"
    if options.placement == "capability":
        return "placement='capability' places tasks greedily, not by a layout"
    return two_level_unavailable([_kind(d) for d in devices])


def _hybrid_layouts(req: Request, options: Options, unavailable: dict[str, str],
                    gpus: tuple[str, ...] | None) -> dict[str, float]:
    """Predicted seconds of the hybrid path per layout that can run ``req`` (only the forced one, if any). A
    layout that cannot run is added to ``unavailable``, and so is the hybrid path when the forced layout cannot."""
    devices = _devices("hybrid", options, gpus)
    why = {"hgdd": None, "two-level": _two_level_unavailable(req, options, devices)}
    if why["two-level"] is not None:
        unavailable["two-level"] = why["two-level"]
    layouts = [options.layout] if options.layout is not None else list(why)
    if options.layout is not None and why[options.layout] is not None:
        unavailable["hybrid"] = f"the forced layout {options.layout!r} cannot run: {why[options.layout]}"
    return {layout: model.predict_tiled(req.op, *req.core, req.dtype, options.tile, devices, layout=layout)
            for layout in layouts if why[layout] is None}


def _device_array_plan(req: Request, options: Options, common: dict) -> Plan:
    """CuPy arrays stay on their GPU (no host round trip): a stack takes the GPU batched path, one matrix the gpu
    path. There is nothing to price; a forced path other than that one cannot be honoured."""
    if req.op not in DEVICE_ARRAY_OPS or len(req.shape) < 2 or req.features:
        what = ", ".join(req.features) or req.op
        raise ValueError(f"{what} on a {req.array_module} array of shape {tuple(req.shape)} is not supported: "
                         f"hetlapack runs {', '.join(sorted(DEVICE_ARRAY_OPS))} on (..., m, n) CuPy arrays")
    stack = len(req.shape) > 2
    path = "batched" if stack else "gpu"
    stays = f"{req.array_module} arrays stay on their GPU"
    other, why = (("gpu", "it factorizes one matrix; stacks go to the batched path") if stack
                  else ("batched", "it takes stacks (..., m, n); this is a single matrix"))
    unavailable = {"host": stays, "hybrid": stays, other: why}
    if options.path is not None and options.path != path:
        raise ValueError(f"path {options.path!r} cannot be honoured for {req.op} on {req.dtype} {tuple(req.shape)}: "
                         f"{unavailable.get(options.path, stays)}")
    where = f"a {req.array_module} {'stack' if stack else 'matrix'} stays on {req.device}"
    reason = f"{where}: {_DEVICE_ARRAY_KERNELS[path, req.op in SOLVE_OPS]}"
    return Plan(path=path, reason=reason, devices=(req.device,), forced=options.path is not None,
                unavailable=unavailable, **common)


def choose(req: Request, options: Options | None = None) -> Plan:
    """Pick the path for ``req``: the user's forced path if it can run, else the cheapest by the cost model.

    A plan depends only on the request and the options (the model's prices and the hardware probe are fixed for
    the life of the process), so each decision is made once and reused: pricing costs about 50 us, several times
    a LAPACK call on a small matrix. Plans are shared; treat them as read-only. Options naming device objects are
    priced afresh, so that remembered plans never keep a user's devices (and their streams and memory) alive.
    """
    options = current() if options is None else options
    by_name = options.devices is None or all(isinstance(device, str) for device in options.devices)
    plan = _remembered(req, options) if by_name else _choose(req, options)
    _log.debug("%s on %s %s -> %s: %s", req.op, req.dtype, tuple(req.shape), plan.path, plan.reason)
    return plan


@functools.lru_cache(maxsize=1024)
def _remembered(req: Request, options: Options) -> Plan:
    return _choose(req, options)


os.register_at_fork(after_in_child=_remembered.cache_clear)  # a child decides afresh (see _batched_unavailable)


def _choose(req: Request, options: Options) -> Plan:
    common = {"op": req.op, "shape": tuple(req.shape), "dtype": str(req.dtype)}
    if req.array_module == "cupy":
        return _device_array_plan(req, options, common)
    edge = _edge_case(req)
    if edge is not None:
        return Plan(path="host", reason=edge, **common)

    forced_path = options.path
    if req.op in SOLVE_OPS and forced_path not in SOLVE_PATHS:
        forced_path = None
    unavailable = {path: why for path, check in _UNAVAILABLE.items() if (why := check(req)) is not None}
    predicted = {path: predict(req) for path, predict in _PREDICTORS.items() if path not in unavailable}
    kernels = None
    if "batched" not in unavailable:
        order = max(req.core)
        kernels, why_not = model.batched_kernels(req.op, order, req.dtype, req.library, forced_path == "batched",
                                                 options.kernels)
        if kernels is None:
            unavailable["batched"] = why_not
        else:
            predicted["batched"] = model.predict_batched(req.op, *req.core, req.batch, req.dtype, kernels)
    # GPUs are looked for (CuPy imported, CUDA started) only where one LAPACK call on the host is predicted to take
    # longer than the fixed cost every device path pays, which no device wins back
    worth_a_look = options.path is not None or predicted.get("host", np.inf) > model.RUNTIME_CALL_OVERHEAD_S
    gpus = _detected_gpus() if worth_a_look else None
    if (why := _gpu_unavailable(req, options, gpus)) is not None:
        unavailable["gpu"] = why
    if forced_path is None:
        _leave_unpriced(options, gpus, unavailable)
    layouts = _hybrid_layouts(req, options, unavailable, gpus) if "hybrid" not in unavailable else {}
    if layouts:
        predicted["hybrid"] = layouts[_layout(layouts)]
    if "gpu" not in unavailable:
        predicted["gpu"] = model.predict_gpu(req.op, *req.core, req.dtype, _devices("gpu", options, gpus)[0],
                                             options.tile)

    if forced_path is not None:
        if forced_path in unavailable:
            raise ValueError(f"path {forced_path!r} cannot be honoured for {req.op} on {req.dtype} "
                             f"{tuple(req.shape)}: {unavailable[forced_path]}")
        path, forced, reason = forced_path, True, "forced by hetlapack.using(path=...) or HETLAPACK_PATH"
    else:
        forced = False
        candidates = dict(predicted)
        if "hybrid" in candidates and "host" in candidates:
            candidates["hybrid"] *= model.TILE_MARGIN
        path = min(candidates, key=candidates.get)
        reason = _reason(path, req, predicted, kernels, unavailable)
        if options.path is not None:
            reason += f"; the forced path {options.path!r} does not apply to solves (they have host and batched only)"

    tile = layout = host_cols = None
    if path == "hybrid":
        tile = options.tile or model.tile_size(req.op, min(req.core))
        layout = _layout(layouts)
        reason = f"{reason}; {_layout_reason(layout, layouts, options, unavailable)}"
        if layout == "two-level":
            host_cols = model.two_level_host_cols(model.modeled(_devices(path, options, gpus)), tile)
    return Plan(path=path, reason=reason, devices=_devices(path, options, gpus), tile=tile,
                placement=options.placement or "owner", forced=forced, kernels=kernels if path == "batched" else None,
                predicted_s=predicted, unavailable=unavailable, layout=layout, host_cols=host_cols,
                layout_s=layouts if path == "hybrid" else {}, **common)


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


def _reason(path: str, req: Request, predicted: dict[str, float], kernels: str | None,
            unavailable: dict[str, str]) -> str:
    others = {p: s for p, s in predicted.items() if p != path}
    if path == "batched" and kernels == "lapack":
        return (f"a stack of {req.batch} matrices: LAPACK's {req.op} on each from compiled code, one BLAS thread a "
                f"call while threads share the matrices (SciPy's results, bit for bit, as SciPy gives them on one "
                f"BLAS thread), beats {req.batch} calls from Python ({_ratio(path, predicted)}; measured up to "
                f"n={model.LAPACK_LOOP_MAX_N[req.op]})")
    if path == "batched":
        return (f"a stack of {req.batch} small matrices: one interleaved batched kernel beats {req.batch} LAPACK "
                f"calls (it beats the LAPACK loop up to n={model.interleaved_max_n(req.op, req.dtype)}, measured)")
    if path == "hybrid":
        return f"large enough that tiles on the runtime beat one LAPACK call ({_ratio(path, predicted)})"
    if path == "gpu":
        return f"one accelerator alone is cheapest, panels included ({_ratio(path, predicted)})"
    if len(req.shape) > 2 and "batched" in unavailable and req.op in BATCHED_OPS:
        return unavailable["batched"]
    if not others:
        return "the only path priced for this input (why the others are not: below)"
    if predicted.get("hybrid", math.inf) < predicted[path]:
        return (f"tiles are predicted only {predicted[path] / predicted['hybrid']:.2f}x faster than one LAPACK "
                f"call, within the model's error (dispatch takes them from {model.TILE_MARGIN:.2f}x)")
    if len(req.shape) > 2:
        return f"a LAPACK call per matrix is cheapest for this stack ({_ratio(path, predicted)})"
    return f"one LAPACK call is cheapest at this size ({_ratio(path, predicted)})"


def _ratio(path: str, predicted: dict[str, float]) -> str:
    runner_up = min((p for p in predicted if p != path), key=predicted.get, default=None)
    if runner_up is None:
        return "no other candidate"
    return f"predicted {predicted[runner_up] / predicted[path]:.2f}x faster than {runner_up}"
