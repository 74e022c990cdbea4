"""An analytic cost model that ranks configs before any is measured: the larger of FLOPs at peak
and tile-level traffic at bandwidth, with a wave-quantization factor, plus launch cost.

Tile-level traffic counts each cached tile (isl footprint) once per program per iteration of the
loops around its place, so a smaller tile that re-reads its operands more often costs more. A stencil's
producer placed in its reader's loops counts its recomputed overlap and its window's round trip through
memory (`halo_work`). It only
ranks and seeds the search (optuna's `enqueue_trial`); measurements decide.
"""

from __future__ import annotations

import weakref

from tilec.ir.dtypes import itemsize
from tilec.ir.expr import Binary, Cast, Load, Reduce, evaluate, walk
from tilec.ir.knob import factor_value
from tilec.plan.analysis import Analysis
from tilec.plan.placement import halo_work
from tilec.schedule.schedule import Fuse

PEAK_FLOPS = 700e12   # bf16 tensor-core rate measured on the H200 (shared notes: 678-790 TFLOP/s)
BANDWIDTH = 4.25e12   # device memory copy bandwidth (4.28 TB/s measured)
LAUNCH = 4e-6         # seconds per kernel launch on the device side
SMS = 132


def _prod(xs):
    out = 1
    for x in xs:
        out *= x
    return out


_ANALYSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # schedule -> {(fingerprint, config): Analysis}


def analysis_for(sched, config: dict) -> Analysis:
    """The analysis of `sched` under `config`, kept while the schedule lives: the search prunes,
    ranks and estimates each config from one plan. Keyed by the schedule's fingerprint (every decision)."""
    key = (sched.fingerprint(), tuple(sorted(config.items())))
    mine = _ANALYSES.setdefault(sched, {})
    if key not in mine:
        if len(mine) >= 512:
            mine.clear()
        mine[key] = Analysis(sched, config)
    return mine[key]


def terms(sched, config: dict, shape: dict, analysis: Analysis | None = None) -> dict:
    """What the estimate is made of, for one call of `sched` under `config` at sizes `shape`: FLOPs,
    bytes moved, kernels, programs of the largest grid, wave efficiency, pipeline stages, warps,
    accumulator registers per thread, the measured priors' factor, and whether TMA, persistent loops
    and grouped order are on. `estimate` combines them; `features` (the learned model's input) reads them."""
    env = {**shape, **config}
    analysis = analysis if analysis is not None else analysis_for(sched, config)
    flops, nbytes = 0.0, 0.0
    plan = analysis.plan
    for st in sched.stages.values():
        t = st.tensor
        points = _prod(evaluate(e, env) for e in t.shape)
        placed = plan.placed.get(st.name)
        if placed is not None and placed.halo:
            # a stencil's producer placed in its reader's loops: the overlap of the windows computed again,
            # each window written to memory and read back (halo_work; 1 along a sliding window)
            points *= halo_work(placed)
            nbytes += 2 * points * itemsize(t.dtype)
        if t.is_reduction:
            points *= _prod(evaluate(a.extent, env) for a in t.reduce_axis)
            flops += 2 * points
        else:
            flops += points
    out_points = 0
    for t in sched.outputs:
        n = _prod(evaluate(e, env) for e in t.shape)
        out_points += n
        nbytes += n * itemsize(t.dtype)
    resources = analysis.resources
    cached = set()
    for res, root in zip(resources, plan.kernels):
        programs = _prod(evaluate(a.extent, env) for a in root.layout.grid)
        for f in res.footprints:
            p = next(q for q in plan.placed.values() if any(c.name == f.cache for cs in q.caches.values() for c in cs))
            level = next(lv for lv, cs in p.caches.items() if any(c.name == f.cache for c in cs))
            trips = _prod(evaluate(a.extent, env) for a in p.layout.loops[: level + 1])
            nbytes += f.bytes * programs * trips
            cached.add(f.tensor)
    operand_bytes, read = _operand_traffic(plan, env, cached)
    nbytes += operand_bytes
    for t in sched.placeholders:
        if t.name not in cached and t.name not in read:
            nbytes += _prod(evaluate(e, env) for e in t.shape) * itemsize(t.dtype)
    programs = max((_prod(evaluate(a.extent, env) for a in r.layout.grid) for r in plan.kernels), default=1)
    waves = -(-programs // SMS)
    tma = any(c.kind == "cache_read" and factor_value(c.tma, config) for c in sched.caches)
    return {
        "flops": flops, "bytes": nbytes, "kernels": len(plan.kernels), "programs": programs,
        "outputs_per_program": out_points / max(programs, 1), "wave_eff": programs / (waves * SMS),
        # deeper pipelines hide more memory latency; too few warps for a tile's accumulator spill registers
        "stages": min((factor_value(v, config) for st in sched.stages.values() for v in st.pipelines.values()),
                      default=1),
        "warps": max((r.layout.warps for r in plan.kernels), default=4),
        "registers": max((res.registers_per_thread for res in resources), default=0),
        "priors": measured_priors(sched, config, programs),
        "tma": tma,
        "persistent": any(factor_value(f, config) for st in sched.stages.values() for f in st.persistent_axes.values()),
        "grouped": any(isinstance(r, Fuse) and r.group is not None and factor_value(r.group, config) > 1
                       for st in sched.stages.values() for r in st.relations),
    }


def _coverage(root, env) -> dict:
    """Per original axis of a kernel's root stage, the extent one program covers: its tiles and serial loops
    (the grid's leaves cover one block each), at most the axis."""
    lay = root.layout
    cov = {a: 1 for a in root.stage.tensor.axis}
    for leaf in lay.leaves:
        kind = lay.kind[leaf]
        if kind == "grid":
            continue
        n = lay.tile_extent[leaf] if kind == "tile" else evaluate(leaf.extent, env)
        for a in lay.origin[leaf]:
            if a in cov:
                cov[a] *= n
    return {a: min(c, evaluate(a.extent, env)) for a, c in cov.items()}  # a tile past the axis covers the axis


def product_loads(t) -> list | None:
    """The loads of a sum over one reduce axis of a product (tl.dot's shape when there are two, each reading
    the reduce axis), in the product's order; None where `t` is no such sum. The auto rules' test of a
    contraction (auto.py) and the operand traffic below both read it."""
    red = t.body
    if not isinstance(red, Reduce) or red.op != "sum" or len(red.axes) != 1:
        return None
    e = red.body
    while isinstance(e, Cast):
        e = e.a
    if not (isinstance(e, Binary) and e.op == "*"):
        return None
    return [n for side in (e.a, e.b) for n in walk(side) if isinstance(n, Load)]


def _operand_traffic(plan, env, cached) -> tuple[float, set]:
    """Bytes read by the operands of tl.dot-shaped stages that no cache holds: each program reads its rows of A
    and columns of W once per tile loop, so A (which does not depend on j) is read again for every program
    along j, N / BN times in all. Without this a GEMM's tile sizes changed no traffic, and the smallest tiles
    (more programs, better waves) ranked first (an H100 run's seeds at 32 x 32 were 2-4x slower: issue 27).
    Returns the bytes and the placeholders counted here (not counted again as read once)."""
    total, read = 0.0, set()
    for p in plan.placed.values():
        t = p.stage.tensor
        loads = product_loads(t)
        if loads is None or len(loads) != 2 or any(n.tensor.name in cached or not n.tensor.is_placeholder for n in loads):
            continue
        root = p
        while root.target is not None:
            root = root.target
        cov = _coverage(root, env)
        points = _prod(evaluate(a.extent, env) for a in (*t.axis, *t.reduce_axis))
        for n in loads:
            uses = {id(x) for i in n.indices for x in walk(i)}
            reuse = _prod(cov.get(p.bound.get(a, a), 1) for a in t.axis if id(a) not in uses)
            total += points / max(reuse, 1) * itemsize(n.tensor.dtype)
            read.add(n.tensor.name)
    return total, read


def estimate(sched, config: dict, shape: dict, analysis: Analysis | None = None) -> float:
    """Estimated seconds for one call of `sched` under `config` at sizes `shape`: the larger of FLOPs at
    peak and bytes at bandwidth, over the wave efficiency, with the second-order terms (so that configs
    equal in traffic still rank) and the measured priors, plus a launch per kernel."""
    return combine(terms(sched, config, shape, analysis))


def combine(x: dict) -> float:
    """The analytic estimate of `terms`' dict, in seconds."""
    latency = 1 + 0.15 / max(x["stages"], 1)
    pressure = 1 + 0.002 * max(0, x["registers"] - 128) + 0.02 * (x["warps"] == 8 and x["registers"] < 64)
    return (max(x["flops"] / PEAK_FLOPS, x["bytes"] / BANDWIDTH) / max(x["wave_eff"], 1e-3) * latency * pressure
            * x["priors"] + x["kernels"] * LAUNCH)


# Factors for choices the traffic model does not see, from the H200 measurements of benchmarks/NOTES.md
# (issue 9): they only break its ties, so that the tuner's seeds are the choices that measured best.
TMA_GAIN = 0.95            # tensor-descriptor loads: 5-10% faster than pointer loads (M=1536/2048 GEMMs)
FLATTEN_POINTERS = 2.5     # tl.range(flatten=True) over pointer loads: 2.5-4x slower
GROUPED_GAIN = 0.99        # grouped tile order (swizzle, group > 1) on a grid of several waves: L2 reuse


def measured_priors(sched, config: dict, programs: int) -> float:
    """The product of the measured factors that apply to `sched` under `config`."""
    tma = any(c.kind == "cache_read" and factor_value(c.tma, config) for c in sched.caches)
    out = TMA_GAIN if tma else 1.0
    for st in sched.stages.values():
        if not tma and any(factor_value(f, config) for f in st.persistent_axes.values()):
            out *= FLATTEN_POINTERS
        if programs > 2 * SMS and any(isinstance(r, Fuse) and r.group is not None and factor_value(r.group, config) > 1
                                      for r in st.relations):
            out *= GROUPED_GAIN
    return out


def weighted_estimate(sched, config: dict, mix) -> float:
    """The mix's weighted estimate: one analysis of (sched, config) for every shape."""
    analysis = analysis_for(sched, config)
    return sum(w * estimate(sched, config, shape, analysis) for shape, w in mix)
