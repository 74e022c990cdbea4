"""The legality check of a whole schedule, as every primitive and `tc.build` run it: one Analysis
(one plan) of the schedule under the config, checked by isl. When a stage is misplaced, the error
lists the loops where it could go, each tried on the schedule its trace gives with the stage's placement
step swapped for that loop (the schedule is not touched).

The check has two parts. `check_schedule` is the part that does not depend on a call's sizes: the plan
and its legality (isl's dependence, rounding and bounds proofs), once per kernel and config.
`at_sizes` is the part that does: the same schedule under the facts of a call's sizes (its loops that
run once, the masks its tiles need), a new plan and masks from a checked analysis, and no proof again.
"""

from __future__ import annotations

from tilec.errors import LoweringError
from tilec.ir.expr import IterVar, walk
from tilec.plan.analysis import Analysis
from tilec.plan.placement import MisplacedError, Plan
from tilec.poly.model import NotAffine, share_model
from tilec.schedule.schedule import set_primitive_check
from tilec.schedule.state import PLACES
from tilec.schedule.trace import AxisRef, StageRef, Step


def check_schedule(sched, config=None, *, primitive: str = "build", stage=None, outputs=None,
                   specialize=None, assume=()) -> Analysis:
    """Raise IllegalScheduleError if `sched` breaks a dependence, a rounding point or a bound under
    `config`; return the analysis it checked (lowering goes on from it). A stage placed where the
    lowering cannot put it is a LoweringError that, at build, names the places that would be accepted."""
    analysis = _planned(sched, config, outputs, specialize, assume, primitive=primitive)
    analysis.check(primitive=primitive, stage=stage, places=lambda st: legal_places(st, analysis.config))
    return analysis


def at_sizes(checked: Analysis, assume) -> Analysis:
    """`checked` (an analysis `check_schedule` passed) under `assume` as well, the facts of a call's sizes
    (`Plan.call_facts`): a new plan, whose loops that run once at those sizes are single leaves, and its
    masks, which those facts may drop. Legality is not proved again: it holds. The facts only narrow the
    sizes `checked` was proved for, and the new plan runs the same instances in the same order: a single
    leaf is a loop of one iteration with no time coordinate (tilec/poly/timemap.py), and what is placed at
    it runs at the enclosing loop, after what that loop already holds, in the schedule's stage order, which
    is the order the stages read each other in."""
    if not checked.checked:
        raise LoweringError("internal: at_sizes needs an analysis that check_schedule has checked")
    assume = tuple(checked.assume) + tuple(assume)
    analysis = _planned(checked.sched, checked.config, checked.outputs, checked.specialize, assume)
    analysis.checked = True  # by `checked`'s proof (above)
    return analysis


def _planned(sched, config, outputs, specialize, assume, *, primitive: str = "build") -> Analysis:
    """The analysis (the plan) of `sched`, unchecked; a stage placed where the lowering cannot put it is,
    at build, a LoweringError naming the places that would be accepted."""
    try:
        return Analysis(sched, config, outputs, specialize, assume)
    except MisplacedError as e:
        if primitive != "build":  # a primitive's check: not lowerable yet, and the message is not shown
            raise
        raise LoweringError(e.with_places(legal_places(e.stage, config, target=e.target))) from None


def legal_places(stage, config=None, *, target=None) -> list[str]:
    """The loops of `target` (default: the stage's current target) where `stage` (a compute stage or a
    cache) could be placed under `config`: each tried on the schedule of the trace with only that placement
    swapped in (`_placed_at`), kept where the plan accepts it, isl finds it legal and, for a cache_read,
    every index of the tiles it loads is known there (what the lowering requires of a cache's place)."""
    if target is None:
        if not isinstance(stage.attach, tuple):
            return []
        target = stage.attach[0]
    out = []
    for a in target.leaves:
        try:
            sched = _placed_at(stage, target, a)
            analysis = Analysis(sched, config)
            if stage.kind == "cache_read":
                cache = next(c for c in sched.caches if c.name == stage.name)
                if not cache_tiles_known(analysis.plan, cache):
                    continue
            if analysis.violation() is None:
                out.append(f"{target.name}.{a.name}")
        except (LoweringError, NotAffine):
            continue
    return out


def cache_tiles_known(plan: Plan, c) -> bool:
    """Whether every index of the tiles cache_read `c` loads is known at its place (x's loop `level`), as the
    lowering needs (tilec/lower/builder.py, emit_cache): an axis of its reader x defined at that loop or
    outside it; for a reader computed further in, an axis it takes from x's loops there, or one of its own
    that is one tile over its whole extent."""
    x = c.attach[0]
    xp = plan.placed.get(x.name)
    if xp is None:
        return False
    level = next((lvl for lvl, cs in xp.caches.items() if c in cs), None)
    if level is None:
        return False

    def axis_level(p, a) -> int:  # the loop level (in p's kernel) where axis a of p's stage is defined
        return axis_level(p.target, p.bound[a]) if a in p.bound else p.layout.axis_level(a)

    def known(p, a) -> bool:  # axis a of p (computed inside x's loops) at x's loop `level`
        if a in p.bound:
            if p.target.stage is x:
                return axis_level(p.target, p.bound[a]) <= level
            return known(p.target, p.bound[a])
        return plan._tile(p, a) is not None

    for reader in c.readers:
        axes = {v for n in reader.tensor.loads() if n.tensor is c.tensor
                for i in n.indices for v in walk(i) if isinstance(v, IterVar)}
        if reader is x:
            if any(axis_level(xp, a) > level for a in axes):
                return False
            continue
        rp = plan.placed.get(reader.name)
        t = rp.target if rp is not None else None
        while t is not None and t.stage is not x:
            t = t.target
        if t is None or not all(known(rp, a) for a in axes):
            return False
    return True


def _placed_at(stage, target, axis):
    """The schedule in which `stage` is computed at `target`'s loop `axis`: the fold of the trace with the
    stage's placement step (its last compute_at, compute_root or compute_inline; none where it was placed
    by hand) dropped and compute_at(target, axis) applied last. A new Schedule of the same computation, so
    the same polyhedral model; no primitive runs again (nothing is checked twice)."""
    sched = stage.sched
    steps = list(sched.trace)
    last = next((n for n in reversed(range(len(steps)))
                 if steps[n].stage == stage.name and steps[n].primitive in PLACES), None)
    if last is not None:
        del steps[last]
    steps.append(Step("compute_at", stage.name, (StageRef(target.name), AxisRef(target.name, axis.name))))
    new = sched._refolded(steps)
    share_model(new, sched)
    return new


# every schedule primitive runs these checks (schedule/schedule.py)
set_primitive_check(check_schedule, places=lambda stage, target: legal_places(stage, target=target))
