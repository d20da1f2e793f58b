"""What a factorization would do on hardware we do not have: the tile algorithms on the runtime's virtual clock.

``simulate("cholesky", 30000, "sandybridge:16,k20c,phi,k20beta", layout="hgdd")`` inserts the same tasks the
real tile path inserts, on a virtual matrix, into a :class:`~hetlapack.runtime.SimulatedRuntime` over modeled
devices (:mod:`hetlapack.perf.profiles`), and returns a :class:`Prediction`: seconds, GFLOP/s, per-device
utilisation, load imbalance, joules and the trace. ``simulate_distributed`` does the same over nodes on a 2-D
block-cyclic grid. Every number here is a model prediction, never a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..algorithms.geqrf import householder_tiles, insert_geqrf
from ..algorithms.getrf import insert_getrf, pivot_tiles
from ..algorithms.potrf import insert_potrf
from .modeled import ModeledDevice
from .profiles import registry
from .rates import RUNTIME_CALL_OVERHEAD_S, tile_size
from .rates import flops as flop_count
from ..layout.two_level import TWO_LEVEL_SMALL_TILE, host_slice, imbalance, tune_host_slice, two_level_unavailable
from ..runtime import OwnerComputes, TiledMatrix, Trace
from .simulated import SimulatedRuntime
from ..runtime.coherence import MemoryStats
from ..runtime.placement import two_level

#: Public operation names -> LAPACK names.
OPERATIONS = {"cholesky": "potrf", "lu": "getrf", "qr": "geqrf", "potrf": "potrf", "getrf": "getrf",
              "geqrf": "geqrf"}
LAYOUTS = ("hgdd", "cyclic", "two-level")
#: Paths the simulator runs, and whether the CPUs take tasks there (on the gpu path they idle, powered).
CPUS_COMPUTE = {"hybrid": True, "gpu": False}
PATHS = tuple(CPUS_COMPUTE)

#: The placement that puts each ready task greedily where it finishes first (seed 000 §6.3), by no layout.
CAPABILITY = "capability"


@dataclass
class Prediction:
    """A simulated run. ``utilisation`` is busy time over makespan per device (all its workers); ``imbalance``
    is ``max / avg`` of the per-worker busy time of the devices (seed 003 §5.3); ``memory`` has the statistics
    of each accelerator with a memory capacity (peak bytes held, evictions, bytes written back to make room)."""

    op: str
    n: int
    dtype: str
    devices: tuple[str, ...]
    path: str
    layout: str  # or CAPABILITY, where tasks were placed greedily by capability and no layout applied
    tile: int
    seconds: float
    flops: float
    utilisation: dict[str, float]
    imbalance: float
    joules: float
    tasks: int
    bytes_moved: int
    trace: Trace = field(repr=False)
    memory: dict[str, MemoryStats] = field(default_factory=dict, repr=False)

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9

    @property
    def gflops_per_watt(self) -> float:
        return self.flops / self.joules / 1e9 if self.joules > 0 else math.inf

    def summary(self) -> str:
        """A few lines for people: the prediction, then one line per device."""
        names = ", ".join(self.devices) if len(self.devices) <= 8 else \
            f"{len(self.devices)} devices ({self.devices[0]} ... {self.devices[-1]})"
        layout = "tasks placed greedily by capability" if self.layout == CAPABILITY else f"{self.layout} layout"
        lines = [(f"{self.op} n={self.n} {self.dtype} on {names} ({self.path} path, {layout}, "
                  f"tile {self.tile}): predicted {self.seconds:.3f} s, {self.gflops:,.0f} GFLOP/s, "
                  f"imbalance {self.imbalance:.3f}, {self.tasks} tasks, {self.bytes_moved / 1e9:.2f} GB moved")]
        if self.joules > 0:
            lines.append(f"energy {self.joules:,.0f} J, {self.gflops_per_watt:.2f} GFLOP/s/W")
        if len(self.devices) <= 8:
            lines += [f"  {name:<16} utilisation {share:6.1%}" for name, share in self.utilisation.items()]
        lines += [f"  {name:<16} memory {stats.capacity / 1e9:.2f} GB: {stats.evictions} tiles evicted, "
                  f"{stats.written_back / 1e9:.2f} GB written back to make room"
                  for name, stats in self.memory.items() if stats.evictions]
        return "\n".join(lines)


def _insert(op: str, rt: SimulatedRuntime, A: TiledMatrix, per_tile: bool = False) -> None:
    if op == "potrf":
        insert_potrf(rt, A, lower=True, per_tile=per_tile)
    elif op == "getrf":
        insert_getrf(rt, A, pivot_tiles(A), {})
    else:
        insert_geqrf(rt, A, *householder_tiles(A))


def _two_level_setup(devices: Sequence[ModeledDevice], extent: int, tile: int, host_cols: int | None):
    """The two-level placement and tile boundaries along ``extent`` (the matrix's longer side), the CPU's
    workers one per core."""
    why = two_level_unavailable([d.kind for d in devices])
    if why is not None:
        raise ValueError(why)
    devices[0].workers = devices[0].cores  # small tiles go to single cores
    if host_cols is None:
        host_cols = two_level_host_cols(list(devices), tile)
    return two_level(extent, tile, host_cols, len(devices) - 1)


def two_level_host_cols(devices: list[ModeledDevice], tile: int) -> int:
    """Seed 003's host slice of a ``tile``-wide top-level tile for one CPU (listed first) and its accelerators:
    one core's GEMM rate on the small tiles against an accelerator's on the big ones."""
    cpu, accelerators = devices[0], devices[1:]
    return host_slice(tile, cpu.rate("gemm", TWO_LEVEL_SMALL_TILE) / cpu.threads, cpu.cores,
                      accelerators[0].rate("gemm", tile), len(accelerators))


def simulate(op: str, n: int, devices: str | Sequence[ModeledDevice] = "cpu", *, m: int | None = None,
             dtype: str | np.dtype = "float64", tile: int | None = None, layout: str = "hgdd",
             placement: str = "owner", path: str = "hybrid", priorities: bool = True, host_cols: int | None = None,
             profiles: Sequence[str] = (), call_overhead_s: float = RUNTIME_CALL_OVERHEAD_S,
             progress: bool = False) -> Prediction:
    """Predict ``op`` (cholesky, lu, qr) on an ``m x n`` matrix (square by default) over ``devices`` (a spec
    such as ``"sandybridge:16,k20c"``, or ModeledDevice objects).

    ``path="gpu"`` computes on the accelerators only (panels too) while the CPUs idle, powered; ``"hybrid"``
    puts panels on the CPU. ``layout``: ``hgdd`` (columns by capability), ``cyclic`` (1-D block-column cyclic)
    or ``two-level`` (seed 003: big tiles of order ``tile`` for the accelerators, a host slice of ``host_cols``
    columns, from the formula when not given). ``placement="capability"`` places greedily by capability
    instead of by owner. ``profiles`` are extra profile files. ``call_overhead_s`` is added once (the real
    runtime's measured start and join); ``progress`` shows a bar while the graph runs.
    """
    lapack = OPERATIONS.get(op)
    if lapack is None:
        raise ValueError(f"op must be one of {sorted(OPERATIONS)}, got {op!r}")
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if (tile is not None and tile < 1) or n < 0 or (m is not None and m < 0):
        raise ValueError(f"simulate: tile must be positive and sizes non-negative, got tile={tile}, n={n}, m={m}")
    compute = registry(*profiles).parse(devices) if isinstance(devices, str) else list(devices)
    idle: list[ModeledDevice] = []
    if not CPUS_COMPUTE[path]:
        idle = [d for d in compute if d.kind == "cpu"]
        compute = [d for d in compute if d.kind != "cpu"]
        if not compute:
            raise ValueError("the gpu path needs at least one accelerator")
    m = n if m is None else m
    if lapack == "potrf" and m != n:
        raise ValueError(f"a Cholesky factorization needs a square matrix, got {m} x {n}")
    tile = tile or tile_size(lapack, min(m, n))
    dtype_ = np.dtype(dtype)
    if placement not in ("owner", CAPABILITY):
        raise ValueError(f"placement must be 'owner' or {CAPABILITY!r}, got {placement!r}")
    if layout == "two-level":
        if placement == CAPABILITY:
            raise ValueError("placement='capability' places tasks greedily, not by a layout: two-level needs 'owner'")
        policy, bounds = _two_level_setup(compute, max(m, n), tile, host_cols)
        A = TiledMatrix(None, bounds, shape=(m, n), dtype=dtype_)
    else:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        policy = OwnerComputes(layout) if placement == "owner" else placement
        layout = layout if placement == "owner" else CAPABILITY  # no layout places the tasks: say so
        A = TiledMatrix(None, tile, shape=(m, n), dtype=dtype_)
    with SimulatedRuntime(compute, policy, idle_devices=idle, priorities=priorities,
                          call_overhead_s=call_overhead_s, progress=progress) as rt:
        _insert(lapack, rt, A)
    return _prediction(rt, op, n, dtype_, [d.name for d in compute], path, layout, tile,
                       flop_count(lapack, m, n, dtype_.kind == "c"))


def _prediction(rt: SimulatedRuntime, op, n, dtype, names, path, layout, tile, flops) -> Prediction:
    loads = [rt.busy[d.name] / d.workers for d in rt.devices]
    utilisation = {d.name: rt.busy[d.name] / (d.workers * rt.makespan) for d in rt.devices}
    return Prediction(op=op, n=n, dtype=str(dtype), devices=tuple(names), path=path, layout=layout, tile=tile,
                      seconds=rt.makespan, flops=flops, utilisation=utilisation,
                      imbalance=imbalance(loads) if sum(loads) > 0 else 1.0, joules=rt.energy_joules(),
                      tasks=rt.tasks, bytes_moved=sum(t.nbytes for t in rt.trace.transfers), trace=rt.trace,
                      memory=rt.memory)


def tune_two_level(op: str, devices: str, tile: int, *, c0: int = 9, trials: int = 3,
                   granularity: int = 64) -> tuple[int, float]:
    """Seed 003 §3.6: start from the formula's host slice, then simulate a matrix of order
    ``c0 * tile * gpus`` with slices ``granularity`` apart and keep the one with the lowest imbalance.
    Returns ``(host columns, imbalance)``. (The seed tunes at ``c0 = 3`` to save machine time; simulated trials
    are cheap, and with only three top-level tiles per accelerator the best slice does not carry over to larger
    matrices, so the default is 9.)"""
    reg = registry()
    probe = reg.parse(devices)
    gpus = sum(1 for d in probe if d.kind != "cpu")
    start = _two_level_setup(probe, tile, tile, None)[0].layout_spec.layout.host_cols

    def measure(host_cols: int) -> float:
        return simulate(op, c0 * tile * gpus, reg.parse(devices), tile=tile, layout="two-level",
                        host_cols=host_cols).imbalance

    return tune_host_slice(start, tile, measure, trials=trials, step=granularity)


def node_device(name: str, devices: Sequence[ModeledDevice], tile: int, bandwidth_gbs: float,
                latency_s: float) -> ModeledDevice:
    """A whole node as one modeled device of the distributed simulation (seed 003 §5.4: large tiles dealt to
    nodes, each node working on its tiles with all its devices).

    Its BLAS-3 rate is the sum of its devices' GEMM rates at ``tile``; its panel rate (the Cholesky of one
    diagonal tile) comes from simulating that factorization on the node's devices; its link is the network.
    """
    blas3 = sum(d.rate("gemm", tile) * d.workers for d in devices)
    panel = simulate("potrf", tile, list(devices), tile=max(tile // 8, 64))
    return ModeledDevice(name=name, kind="node", rates={"blas3": blas3, "panel": panel.gflops, "memory": 10.0},
                         bandwidth_gbs=bandwidth_gbs, latency_s=latency_s,
                         source=f"node of {', '.join(d.name for d in devices)}")


class BlockCyclic2D:
    """Tile ``(i, j)`` belongs to process ``(i mod p) * q + (j mod q)`` of a ``p x q`` grid (ScaLAPACK's 2-D
    block-cyclic layout)."""

    def __init__(self, p: int, q: int) -> None:
        self.p, self.q, self.ndevices = p, q, p * q

    def owner(self, tile_row: int, tile_col: int) -> int:
        return (tile_row % self.p) * self.q + tile_col % self.q


def grid_shape(nodes: int) -> tuple[int, int]:
    """The most square ``p x q = nodes`` grid with ``p <= q``."""
    p = max(d for d in range(1, math.isqrt(nodes) + 1) if nodes % d == 0)
    return p, nodes // p


def simulate_distributed(n: int, nodes: int, *, node: str = "keeneland", interconnect: str = "qdr-ib",
                         tile: int = 4096, profiles: Sequence[str] = (), progress: bool = False) -> Prediction:
    """Predict a distributed Cholesky of order ``n`` on ``nodes`` nodes of the named composition, tiles of order
    ``tile`` dealt 2-D block-cyclically over the most square grid, tiles moving over the interconnect (one
    engine per direction per node). Tiles stay where they were computed (no gather)."""
    if tile < 1 or nodes < 1 or n < 0:
        raise ValueError(f"simulate: tile and nodes must be positive, n non-negative; got {tile}, {nodes}, {n}")
    reg = registry(*profiles)
    net = reg.interconnect(interconnect)
    template = node_device(node, reg.node(node), tile, net.bandwidth_gbs, net.latency_s)
    members = [ModeledDevice(**{**template.__dict__, "name": f"{node}:{i}", "memory_space": ""})
               for i in range(nodes)]
    grid = BlockCyclic2D(*grid_shape(nodes))
    A = TiledMatrix(None, tile, shape=(n, n), dtype=np.float64)
    with SimulatedRuntime(members, OwnerComputes(grid, panels_on_cpu=False), gather=False,
                          progress=progress) as rt:
        rt.distribute(A, grid.owner)
        insert_potrf(rt, A, lower=True, per_tile=True)
    return _prediction(rt, "cholesky", n, np.dtype(np.float64), [d.name for d in members], "distributed",
                       f"2-D block-cyclic {grid.p}x{grid.q}", tile, flop_count("potrf", n, n))
