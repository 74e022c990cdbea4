"""Plans: the three ways a runtime can serve many shapes, priced by total cost P + r*T.

- generic: one config (one kernel) for every shape;
- buckets: shapes grouped by the power of two above each size that varies; one config per bucket;
- per-shape: one config per shape, built with the sizes baked in (`specialize`): constants in the
  source. (Every kernel, generic ones too, is lowered per call under the facts of its sizes, so masks
  that a call's sizes make unnecessary are dropped in either; isl proves which.)

P is the preparation time actually spent (tuning wall time, plus compiling the plan's kernels), r the
expected number of calls, T the weighted time per call. Break-even call counts say where the order
of two plans changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilec.tune.mix import ShapeMix


@dataclass
class PlanOption:
    name: str
    configs: dict[str, dict]       # shape key -> config
    T: float                       # weighted seconds per call
    P: float                       # seconds of preparation
    notes: list[str] = field(default_factory=list)

    def total(self, calls: float) -> float:
        return self.P + calls * self.T


def _bucket(shape: dict, varying: list[str]) -> tuple:
    return tuple(1 << max(shape[k] - 1, 0).bit_length() for k in varying)


def options(table: dict[str, tuple[dict, dict[str, float]]], mix: ShapeMix, tuning_s: float,
            compile_s: float) -> list[PlanOption]:
    """The plans possible from `table` (config key -> (config, per-shape seconds)), complete configs only."""
    keys = [ShapeMix.key(s) for s, _ in mix]
    weights = dict(zip(keys, (w for _, w in mix)))
    full = {ck: (cfg, t) for ck, (cfg, t) in table.items() if all(k in t for k in keys)}
    if not full:
        return []

    def weighted(ck, subset):
        return sum(weights[k] * full[ck][1][k] for k in subset)

    best_generic = min(full, key=lambda ck: weighted(ck, keys))
    out = [PlanOption("generic", {k: full[best_generic][0] for k in keys}, weighted(best_generic, keys),
                      tuning_s + compile_s)]
    varying = sorted({k for s, _ in mix for k in s if len({sh[k] for sh, _ in mix}) > 1})
    groups: dict[tuple, list[str]] = {}
    for s, _ in mix:
        groups.setdefault(_bucket(s, varying), []).append(ShapeMix.key(s))
    if 1 < len(groups) < len(keys):
        cfgs, T = {}, 0.0
        for members in groups.values():
            ck = min(full, key=lambda c, m=members: weighted(c, m))
            T += weighted(ck, members)
            cfgs.update({k: full[ck][0] for k in members})
        out.append(PlanOption("buckets", cfgs, T, tuning_s + len(groups) * compile_s))
    cfgs, T = {}, 0.0
    for k in keys:
        ck = min(full, key=lambda c, k=k: full[c][1][k])
        cfgs[k] = full[ck][0]
        T += weights[k] * full[ck][1][k]
    out.append(PlanOption("per-shape", cfgs, T, tuning_s + len(keys) * compile_s))
    return out


def break_even(a: PlanOption, b: PlanOption) -> float | None:
    """Calls beyond which b (more preparation, faster calls) costs less in total than a."""
    if b.T >= a.T:
        return None
    return max(0.0, (b.P - a.P) / (a.T - b.T))


def describe(opts: list[PlanOption], chosen: PlanOption, calls: float) -> str:
    lines = [f"plans for {calls:,.0f} expected calls (total = P + calls * T):"]
    for o in opts:
        mark = "->" if o is chosen else "  "
        lines.append(f" {mark} {o.name:9s} T = {o.T * 1e6:10,.2f} us/call  P = {o.P:8.2f} s  "
                     f"total = {o.total(calls):10.2f} s")
        for shape, cfg in o.configs.items():
            lines.append(f"        {shape:28s} {cfg}")
        lines += [f"        note: {n}" for n in o.notes]
    for i, a in enumerate(opts):
        for b in opts[i + 1:]:
            lo, hi = (a, b) if a.P <= b.P else (b, a)
            be = break_even(lo, hi)
            if be is not None:
                lines.append(f"    break-even {lo.name} -> {hi.name}: {be:,.0f} calls")
    lines.append(f"chosen: {chosen.name} (lowest total cost at {calls:,.0f} calls)")
    return "\n".join(lines)
