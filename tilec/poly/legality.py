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

from tilec.ir.expr import size_text
from tilec.poly.model import NotAffine, aff


@functools.lru_cache(maxsize=64)
def _orders(ctx_id: int, ctx, D: int, G: int):
    """(lex_lt, happens_before) on a D-dimensional time space whose dims 1..G are grid coordinates,
    and their complements."""
    space = isl.Space.set_alloc(ctx, 0, D)
    lt = isl.Map.lex_lt(space)
    t = ", ".join(f"t{n}" for n in range(D))
    u = ", ".join(f"u{n}" for n in range(D))
    same = " and ".join(f"t{n} = u{n}" for n in range(G + 1))
    hb = isl.Map.read_from_str(ctx, f"{{ [{t}] -> [{u}] : t0 < u0 or ({same}) }}").intersect(lt)
    universe = isl.Map.universe(isl.Space.map_from_set(space))
    return lt, hb, universe.subtract(lt), universe.subtract(hb)


@functools.lru_cache(maxsize=256)
def _equal_on(ctx, D: int, dims: frozenset) -> isl.Map:
    t = ", ".join(f"t{n}" for n in range(D))
    u = ", ".join(f"u{n}" for n in range(D))
    eq = " and ".join([f"t{n} = u{n}" for n in sorted(dims)] + ["1 = 1"])
    return isl.Map.read_from_str(ctx, f"{{ [{t}] -> [{u}] : {eq} }}")


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

    def counterexample(self) -> dict:
        return {"source": f"{self.src.name}[{', '.join(map(str, self.x))}]",
                "sink": f"{self.dst.name}[{', '.join(map(str, self.y))}]",
                "sizes": self.params, "sink_time": self.t, "source_time": self.ts}


def find_violations(model, maps, first_only: bool = True) -> list[Violation]:
    """Dependences of `model` that the time maps `maps` (a placement plan read as isl maps) break;
    empty when the schedule is legal."""
    lt, hb, not_lt, not_hb = _orders(id(model.ctx), model.ctx, maps.D, maps.G)
    out = []
    rewritten = maps.plan.rewritten  # online(): a member reads the running statistic (tilec.ir.online)

    def kept(dep) -> bool:
        src = model.stmts[dep.get_tuple_name(isl.dim_type.in_)].stage
        return (src, model.stmts[dep.get_tuple_name(isl.dim_type.out)].stage) not in rewritten

    for dep in filter(kept, model.dep_maps):
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
    # An anti or output dependence (a stage's init and updates of its accumulator) must hold for
    # *every* pair of executions within one recomputation of the stage: an init that re-runs in every
    # column tile while the updates are spread over the tiles wipes the sum so far.
    for dep in filter(kept, model.false_maps) if not (out and first_only) else []:
        src, dst = dep.get_tuple_name(isl.dim_type.in_), dep.get_tuple_name(isl.dim_type.out)
        s_src, s_dst = maps.maps[src], maps.maps[dst]
        same = _equal_on(model.ctx, maps.D, frozenset(maps.free[src] & maps.free[dst]))
        for order, reason in ((not_lt, "dependence"), (not_hb, "parallel")):
            pairs = dep.intersect(s_src.apply_range(order.intersect(same)).apply_range(s_dst.reverse()))
            if not pairs.is_empty():
                bad = pairs.range_map().apply_range(s_dst)
                out.append(Violation(model, maps, dep, bad, reason))
                break
        if out and first_only:
            break
    return out


def message(v: Violation, sched, primitive: str) -> str:
    """The error text of violation `v`, for `primitive` (the call that made the schedule illegal)."""
    src_t, dst_t = sched.tensors[v.src.stage], sched.tensors[v.dst.stage]
    sink = f"{dst_t.name}[{', '.join(map(str, v.y[:dst_t.ndim]))}]"
    src_spatial = f"{src_t.name}[{', '.join(map(str, v.x[:src_t.ndim]))}]"
    if v.src.stage == v.dst.stage and src_t.scan_axis is not None:  # a scan's element t carries element t - 1
        sink = f"{dst_t.name}[{', '.join(map(str, v.y))}] (a {dst_t.body.name} along {dst_t.scan_axis.name})"
    elif v.src.stage == v.dst.stage:  # a reduction's own chain: show the reduce coordinates too
        sink = f"the update {dst_t.name}[{', '.join(map(str, v.y))}]"
        src_spatial = f"the update {src_t.name}[{', '.join(map(str, v.x))}]"
    sizes = ", ".join(f"{k}={val}" for k, val in v.params.items())
    sized = f"; sizes {sizes}" if sizes else ""
    loops = [f"{lab.split(' ')[0]}={val}" for lab, val in zip(v.labels, v.t)
             if lab and not lab.startswith(("position", "kernel")) and "." in lab][:4]
    at = f" (at {', '.join(loops)})" if loops else ""
    if v.reason == "rounding":
        red = ", ".join(a.name for a in src_t.reduce_axis)
        k = ", ".join(f"{a.name}={val}" for a, val in zip(src_t.reduce_axis, v.x[src_t.ndim:]))
        return (f"{primitive} makes {dst_t.name} read {src_t.name} before {src_t.name}'s reduction over {red} is "
                f"complete: {sink} would run{at} but {src_spatial} is still updated at {k} (flow dependence "
                f"{src_t.name} -> {dst_t.name}{sized})")
    if v.reason == "parallel":
        return (f"{primitive} makes programs that run in parallel depend on each other: {sink} runs in one "
                f"program{at} but needs {src_spatial}, which another program computes (dependence "
                f"{src_t.name} -> {dst_t.name}{sized}). Bind only axes whose iterations are independent")
    return (f"{primitive} breaks the order of {src_t.name} -> {dst_t.name}: {sink} would run{at} before "
            f"{v.src.name}[{', '.join(map(str, v.x))}] that it depends on{_sizes_text(v.params)}")


def bounds_violation(model, plan):
    """A stage placed in another's loop whose axis runs further than the loop covers: its elements
    past the end would never be computed. Returns (stage, message, counterexample) or None."""
    for p in plan.placed.values():
        if p.halo and (found := _halo_violation(model, plan, p)) is not None:
            return found
        for axis, taxis in p.bound.items():
            a, b = aff(axis.extent, {}, plan.config), aff(taxis.extent, {}, plan.config)
            if a == b:
                continue
            over = isl.Set.read_from_str(model.ctx, f"{model.pre}{{ : {a} > {b} }}").intersect(model.context)
            if over.is_empty():
                continue
            sizes = _sample_sizes(model, over)
            t = p.target
            return (p.name, f"{p.name} is computed at {t.name}'s loops, which cover {t.name}.{taxis.name} in "
                            f"[0, {size_text(taxis.extent)}), but {p.name}.{axis.name} runs over "
                            f"[0, {size_text(axis.extent)}): {p.name}'s elements past the end would never be "
                            f"computed{_sizes_text(sizes)}. Compute "
                            f"{p.name} at root, or give the two stages the same extent",
                    {"stage": p.name, "axis": axis.name, "sizes": sizes})
    return None


def _sample_sizes(model, over) -> dict:
    """The sizes of one point of the parameter set `over` (a counterexample's sizes)."""
    pt = over.sample_point()
    return {model.params[i]: pt.get_coordinate_val(isl.dim_type.param, i).to_python()
            for i in range(len(model.params))}


def _sizes_text(sizes: dict) -> str:
    return f" (sizes {', '.join(f'{k}={v}' for k, v in sizes.items())})" if sizes else ""


def _halo_violation(model, plan, p):
    """A stencil's producer placed in its reader's loops (`Placed.halo`) computes only the windows the reader's
    iterations read. Where the producer is also needed whole (an output, or read by another kernel), its
    elements outside every window would never be computed."""
    readers = plan.sched.graph.successors(p.name)
    if p.name not in plan.out_names and all(k == plan.kernel_of[p.name] for r in readers
                                            for k in plan._reader_kernels(r)):
        return None  # read only in this kernel: isl's dependences check each read against the windows
    for axis, h in p.halo.items():
        a, b = aff(axis.extent, {}, plan.config), aff(h.target.extent, {}, plan.config)
        over = isl.Set.read_from_str(model.ctx, f"{model.pre}{{ : {a} > {b} + {h.hi} or {h.lo} > 0 }}")
        over = over.intersect(model.context)
        if over.is_empty():
            continue
        sizes = _sample_sizes(model, over)
        t = p.target
        why = "an output of the kernel" if p.name in plan.out_names else "read by another kernel"
        return (p.name, f"{p.name} is computed at {t.name}'s loops, each iteration computing the window of "
                        f"{p.name}.{axis.name} it reads ({t.name}.{h.target.name} {h.lo:+d} to {h.hi:+d}), but "
                        f"{p.name} is {why}, so it must be computed whole, and {p.name}.{axis.name} runs over "
                        f"[0, {size_text(axis.extent)}), past what the windows cover{_sizes_text(sizes)}. "
                        f"Compute {p.name} at root, or store only the stencil's output",
                {"stage": p.name, "axis": axis.name, "sizes": sizes})
    return None
