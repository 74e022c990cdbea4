"""Legality of placements, checked from the loop structure of the schedule.

This is the interim rule set of the core slice: a consumer of a reduction may only run where the
reduction is complete. The isl-based dependence check (every dependence lexicographically positive,
with counterexamples from isl) replaces it in `tilec.poly`'s next step; the rule and its error stay.
"""

from __future__ import annotations

from tilec.errors import IllegalScheduleError


def legal_epilogue_axes(producer) -> list:
    """The loops of a reduction stage where its result is complete: spatial loops outside all of
    its reduce loops (after a reduce loop in the order, the reduction is still running)."""
    out = []
    for axis in producer.leaves:
        if axis.kind == "reduce":
            break
        out.append(axis)
    return out


def check_attach(stage, primitive: str) -> None:
    """Raise IllegalScheduleError if `stage`'s placement lets it read a partial reduction."""
    if stage.kind != "compute" or not isinstance(stage.attach, tuple):
        return
    target, axis = stage.attach
    if stage.sched.related(stage, target) != "consumer" or not target.tensor.is_reduction:
        return
    legal = legal_epilogue_axes(target)
    if axis in legal:
        return
    red = ", ".join(a.name for a in target.tensor.reduce_axis)
    inside = [a.name for a in target.leaves[: target.leaves.index(axis) + 1] if a.kind == "reduce"]
    where = ", ".join(f"{target.name}.{a.name}" for a in legal) or "none inside it (use compute_root)"
    raise IllegalScheduleError(
        f"{primitive}({stage.name}, {target.name}.{axis.name}) makes {stage.name} read {target.name} before "
        f"{target.name}'s reduction over {red} is complete: {stage.name} would run inside loop "
        f"{', '.join(inside)}, at its first iteration, while {target.name} is still updated at later "
        f"iterations (flow dependence {target.name} -> {stage.name}). Legal locations for {stage.name} "
        f"are: {where}",
        primitive=primitive, stage=stage.name, reason="rounding",
        counterexample={"consumer": {inside[0]: 0}, "producer_update": {inside[0]: 1}})


def check_schedule(sched) -> None:
    """Check every placement of `sched` again (orders may have changed since compute_at)."""
    for stage in sched.stages.values():
        check_attach(stage, "build")
