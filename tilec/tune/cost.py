"""An analytic cost model that ranks configs before any is measured: the larger of FLOPs at peak
and tile-level traffic at bandwidth, with a wave-quantization factor, plus launch cost.

Tile-level traffic counts each cached tile (isl footprint) once per program per iteration of the
loops around its place, so a smaller tile that re-reads its operands more often costs more. It only
ranks and seeds the search (optuna's `enqueue_trial`); measurements decide.
"""

from __future__ import annotations

import weakref

from tilec.ir.dtypes import itemsize
from tilec.ir.expr import evaluate
from tilec.ir.knob import factor_value
from tilec.plan.analysis import Analysis

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


def estimate(sched, config: dict, shape: dict, analysis: Analysis | None = None) -> float:
    """Estimated seconds for one call of `sched` under `config` at sizes `shape`."""
    env = {**shape, **config}
    analysis = analysis if analysis is not None else analysis_for(sched, config)
    flops, nbytes = 0.0, 0.0
    for st in sched.stages.values():
        t = st.tensor
        points = _prod(evaluate(e, env) for e in t.shape)
        if t.is_reduction:
            points *= _prod(evaluate(a.extent, env) for a in t.reduce_axis)
            flops += 2 * points
        else:
            flops += points
    for t in sched.outputs:
        nbytes += _prod(evaluate(e, env) for e in t.shape) * itemsize(t.dtype)
    plan, resources = analysis.plan, analysis.resources
    cached = set()
    time = 0.0
    for res, root in zip(resources, plan.kernels):
        programs = _prod(evaluate(a.extent, env) for a in root.layout.grid)
        for f in res.footprints:
            p = next(q for q in plan.placed.values() if any(c.name == f.cache for cs in q.caches.values() for c in cs))
            level = next(lv for lv, cs in p.caches.items() if any(c.name == f.cache for c in cs))
            trips = _prod(evaluate(a.extent, env) for a in p.layout.loops[: level + 1])
            nbytes += f.bytes * programs * trips
            cached.add(f.tensor)
        time += LAUNCH
    for t in sched.placeholders:
        if t.name not in cached:
            nbytes += _prod(evaluate(e, env) for e in t.shape) * itemsize(t.dtype)
    programs = max((_prod(evaluate(a.extent, env) for a in r.layout.grid) for r in plan.kernels), default=1)
    waves = -(-programs // SMS)
    wave_eff = programs / (waves * SMS)
    # second-order terms, so that configs equal in traffic still rank: deeper pipelines hide more
    # memory latency; too few warps for a tile's accumulator spill registers
    stages = min((factor_value(v, config) for st in sched.stages.values() for v in st.pipelines.values()), default=1)
    warps = [r.layout.warps for r in plan.kernels] or [4]
    acc = max((res.registers_per_thread for res in resources), default=0)
    latency = 1 + 0.15 / max(stages, 1)
    pressure = 1 + 0.002 * max(0, acc - 128) + 0.02 * (max(warps) == 8 and acc < 64)
    return max(flops / PEAK_FLOPS, nbytes / BANDWIDTH) / max(wave_eff, 1e-3) * latency * pressure + time


def weighted_estimate(sched, config: dict, mix) -> float:
    """The mix's weighted estimate: one analysis of (sched, config) for every shape."""
    analysis = analysis_for(sched, config)
    return sum(w * estimate(sched, config, shape, analysis) for shape, w in mix)
