"""Legality with isl: a schedule is legal when every dependence of the original program still goes
forward in time, and no value crosses between programs that run in parallel.

For each dependence x -> y and each time t at which y runs, some time at which x ran must come before
t (`happens_before`). Within a kernel, "before" also requires the same program (grid coordinates):
programs run in parallel. Between kernels, launch order is before. A consumer of a reduction placed
inside the reduction loop fails this check on the reduction's ordered updates: that is the rounding
rule (SiLU must not see a partial sum), obtained from the same test. Violations come back as a
concrete instance pair from isl, the error's counterexample.
"""

from __future__ import annotations

import functools

import islpy as isl

from tilec.errors import IllegalScheduleError, LoweringError
from tilec.poly.model import NotAffine, model_of
from tilec.poly.timemap import TimeMaps
from tilec.schedule.placement import Plan


@functools.lru_cache(maxsize=64)
def _orders(ctx_id: int, ctx, D: int, G: int):
    """(lex_lt, happens_before) on a D-dimensional time space whose dims 1..G are grid coordinates."""
    space = isl.Space.set_alloc(ctx, 0, D)
    lt = isl.Map.lex_lt(space)
    t = ", ".join(f"t{n}" for n in range(D))
    u = ", ".join(f"u{n}" for n in range(D))
    same = " and ".join(f"t{n} = u{n}" for n in range(G + 1))
    hb = isl.Map.read_from_str(ctx, f"{{ [{t}] -> [{u}] : t0 < u0 or ({same}) }}").intersect(lt)
    return lt, hb


class Violation:
    """A dependence broken by a schedule, with a concrete instance pair."""

    def __init__(self, model, maps, dep, bad, reason):
        self.reason = reason
        self.src = model.stmts[dep.get_tuple_name(isl.dim_type.in_)]
        self.dst = model.stmts[dep.get_tuple_name(isl.dim_type.out)]
        pt = bad.wrap().sample_point()
        vals = [pt.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(bad.wrap().dim(isl.dim_type.set))]
        ns, nd = len(self.src.axes), len(self.dst.axes)
        self.x, self.y, self.t = vals[:ns], vals[ns:ns + nd], vals[ns + nd:]
        self.params = {model.params[i]: pt.get_coordinate_val(isl.dim_type.param, i).to_python()
                       for i in range(len(model.params))}
        self.labels = maps.labels[self.dst.name]
        src_t = maps.maps[self.src.name].intersect_domain(isl.Set.read_from_str(
            model.ctx, f"{model.pre}{{ {self.src.name}[{', '.join(map(str, self.x))}] }}"))
        src_t = src_t.intersect_params(bad.params())
        try:
            sp = src_t.range().sample_point()
            self.ts = [sp.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(maps.D)]
        except Exception:  # noqa: BLE001 - the source time is only used to word the message
            self.ts = None

    def instance(self, stmt, vals) -> str:
        t = stmt.stage
        return f"{t}[{', '.join(map(str, vals[:len(self.model_axes(stmt))]))}]"

    @staticmethod
    def model_axes(stmt):
        return [a for a in stmt.axes if a.kind == "spatial"]

    def counterexample(self) -> dict:
        return {"source": f"{self.src.name}[{', '.join(map(str, self.x))}]",
                "sink": f"{self.dst.name}[{', '.join(map(str, self.y))}]",
                "sizes": self.params, "sink_time": self.t, "source_time": self.ts}


def find_violations(sched, config=None, outputs=None, first_only: bool = True) -> list[Violation]:
    """Dependences that `sched` (under `config`) breaks; empty when it is legal."""
    model = model_of(sched)
    plan = Plan(sched, config, outputs)
    maps = TimeMaps(model, plan)
    lt, hb = _orders(id(model.ctx), model.ctx, maps.D, maps.G)
    out = []
    for dep in model.dep_maps:
        src_stage = model.stmts[dep.get_tuple_name(isl.dim_type.in_)].stage
        if src_stage in maps.approx:  # a free time on the source side would hide violations: refuse
            raise NotAffine(f"the loops of {src_stage} (a split of a fused axis of symbolic extent)")
        s_src = maps.maps[dep.get_tuple_name(isl.dim_type.in_)]
        s_dst = maps.maps[dep.get_tuple_name(isl.dim_type.out)]
        when = dep.range_map().apply_range(s_dst)                      # [x -> y] -> t(y)
        for order, reason in ((lt, None), (hb, "parallel")):
            ok = dep.domain_map().apply_range(s_src.apply_range(order))  # [x -> y] -> t after some t(x)
            bad = when.subtract(ok)
            if not bad.is_empty():
                if reason is None:
                    src = model.stmts[dep.get_tuple_name(isl.dim_type.in_)]
                    dst = model.stmts[dep.get_tuple_name(isl.dim_type.out)]
                    rounding = src.kind == "update" and dst.stage != src.stage and model.is_flow(dep)
                    reason = "rounding" if rounding else "dependence"
                out.append(Violation(model, maps, dep, bad, reason))
                break
        if out and first_only:
            break
    return out


def _message(v: Violation, sched, primitive: str, stage: str | None) -> str:
    src_t, dst_t = sched.tensors[v.src.stage], sched.tensors[v.dst.stage]
    sink = f"{dst_t.name}[{', '.join(map(str, v.y[:dst_t.ndim]))}]"
    src_spatial = f"{src_t.name}[{', '.join(map(str, v.x[:src_t.ndim]))}]"
    if v.src.stage == v.dst.stage:  # a reduction's own chain: show the reduce coordinates too
        sink = f"the update {dst_t.name}[{', '.join(map(str, v.y))}]"
        src_spatial = f"the update {src_t.name}[{', '.join(map(str, v.x))}]"
    sizes = ", ".join(f"{k}={val}" for k, val in v.params.items())
    loops = [f"{lab.split(' ')[0]}={val}" for lab, val in zip(v.labels, v.t)
             if lab and not lab.startswith(("position", "kernel")) and "." in lab][:4]
    at = f" (at {', '.join(loops)})" if loops else ""
    if v.reason == "rounding":
        red = ", ".join(a.name for a in src_t.reduce_axis)
        k = ", ".join(f"{a.name}={val}" for a, val in zip(src_t.reduce_axis, v.x[src_t.ndim:]))
        return (f"{primitive} makes {dst_t.name} read {src_t.name} before {src_t.name}'s reduction over {red} is "
                f"complete: {sink} would run{at} but {src_spatial} is still updated at {k} (flow dependence "
                f"{src_t.name} -> {dst_t.name}; sizes {sizes})")
    if v.reason == "parallel":
        return (f"{primitive} makes programs that run in parallel depend on each other: {sink} runs in one "
                f"program{at} but needs {src_spatial}, which another program computes (dependence "
                f"{src_t.name} -> {dst_t.name}; sizes {sizes}). Bind only axes whose iterations are independent")
    return (f"{primitive} breaks the order of {src_t.name} -> {dst_t.name}: {sink} would run{at} before "
            f"{v.src.name}[{', '.join(map(str, v.x))}] that it depends on (sizes {sizes})")


def legal_places(stage) -> list[str]:
    """The loops of its current target where `stage` could be placed legally (tried one by one)."""
    if not isinstance(stage.attach, tuple):
        return []
    target, axis = stage.attach
    out = []
    try:
        lay = Plan(stage.sched, None).placed[target.name].layout
    except (LoweringError, KeyError):
        return []
    candidates = [a for a in target.leaves if lay.resolve(a) in set(lay.grid) | set(lay.loops)]
    old = stage.attach
    try:
        for a in candidates:
            stage.attach = (target, a)
            try:
                if not find_violations(stage.sched):
                    out.append(f"{target.name}.{a.name}")
            except (LoweringError, NotAffine):
                continue
    finally:
        stage.attach = old
    return out


def check_schedule(sched, config=None, *, primitive: str = "build", stage=None, outputs=None) -> None:
    """Raise IllegalScheduleError if `sched` breaks a dependence (or a rounding point) under `config`."""
    try:
        found = find_violations(sched, config, outputs)
    except NotAffine as e:
        raise LoweringError(f"{primitive}: cannot prove this schedule legal: {e} is not affine (isl needs "
                            f"constant tile factors and integer index arithmetic)") from e
    if not found:
        return
    v = found[0]
    msg = _message(v, sched, primitive, stage.name if stage is not None else None)
    culprit = stage if stage is not None else sched.stages.get(v.dst.stage)
    if culprit is not None and culprit.kind == "compute" and isinstance(culprit.attach, tuple):
        legal = legal_places(culprit)
        msg += (f". Legal locations for {culprit.name} are: {', '.join(legal)}" if legal else
                f". No loop of {culprit.attach[0].name} is a legal place for {culprit.name}: use compute_root")
    raise IllegalScheduleError(msg, primitive=primitive.split("(")[0], stage=culprit.name if culprit else v.dst.stage,
                               reason=v.reason, counterexample=v.counterexample())
