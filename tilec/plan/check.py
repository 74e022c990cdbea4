"""The legality check of a whole schedule, as every primitive and `tc.build` run it: one Analysis
(one plan) of the schedule under the config, checked by isl. When a stage is misplaced, the error
lists the loops where it could go, each tried on a copy of the schedule (the schedule is not touched).
"""

from __future__ import annotations

import copy

from tilec.errors import LoweringError
from tilec.plan.analysis import Analysis
from tilec.poly.model import NotAffine, share_model
from tilec.schedule.schedule import set_primitive_check


def check_schedule(sched, config=None, *, primitive: str = "build", stage=None, outputs=None,
                   specialize=None, assume=()) -> Analysis:
    """Raise IllegalScheduleError if `sched` breaks a dependence, a rounding point or a bound under
    `config`; return the analysis it checked (lowering goes on from it)."""
    analysis = Analysis(sched, config, outputs, specialize, assume)
    analysis.check(primitive=primitive, stage=stage, places=lambda st: legal_places(st, analysis.config))
    return analysis


def legal_places(stage, config=None) -> list[str]:
    """The loops of its current target where `stage` could be placed legally under `config`, each
    tried on a copy of the schedule with only that placement changed."""
    if not isinstance(stage.attach, tuple):
        return []
    target, axis = stage.attach
    try:
        lay = Analysis(stage.sched, config).plan.placed[target.name].layout
    except (LoweringError, KeyError):
        return []
    out = []
    for a in target.leaves:
        if lay.resolve(a) not in set(lay.grid) | set(lay.loops):
            continue
        try:
            if Analysis(_placed_at(stage, target, a), config).violation() is None:
                out.append(f"{target.name}.{a.name}")
        except (LoweringError, NotAffine):
            continue
    return out


def _placed_at(stage, target, axis):
    """A copy of `stage`'s schedule in which `stage` is computed at `target`'s loop `axis`: new Schedule
    and Stage objects (their decisions shared, never mutated by the analysis), the same computation, so
    the same polyhedral model."""
    sched = stage.sched
    new = copy.copy(sched)
    mine = {st: copy.copy(st) for st in [*sched.stages.values(), *sched.caches]}
    new.stages = {name: mine[st] for name, st in sched.stages.items()}
    new.caches = [mine[st] for st in sched.caches]
    for st in mine.values():
        st.sched = new
        st.readers = tuple(mine[r] for r in st.readers)
        if isinstance(st.attach, tuple):
            st.attach = (mine[st.attach[0]], st.attach[1])
    mine[stage].attach = (mine[target], axis)
    share_model(new, sched)
    return new


set_primitive_check(check_schedule)  # every schedule primitive runs this check (schedule/schedule.py)
