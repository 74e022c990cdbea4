"""The one analysis of (schedule, config): built once and handed to legality, lowering, footprints
and the cost model.

`Analysis(sched, config)` holds the placement plan (kernels, each stage's loops and place, buffers),
the polyhedral model, and, computed on first use from that same plan, the time maps (legality), the
partial-tile masks (isl: which splits may overrun) and the resource estimates (footprints). Nothing
here writes code text; `tilec.lower` reads an Analysis and emits the kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tilec.errors import IllegalScheduleError, LoweringError
from tilec.ir.knob import resolve_config
from tilec.plan.placement import Plan
from tilec.poly import footprint, legality
from tilec.poly.masks import facts_of, needs_mask
from tilec.poly.model import NotAffine, model_of
from tilec.poly.timemap import TimeMaps

if TYPE_CHECKING:
    from tilec.schedule.schedule import Schedule


class Analysis:
    """Plan, model, time maps, masks and resources of `sched` under `config` (knob defaults for the
    rest). `outputs` are the tensors the caller wants stored (default: the schedule's outputs);
    `specialize` (size name -> int, checked by the caller) the sizes baked in as constants; masks rely
    on those and on every `tc.assume` on the schedule's sizes (`facts`), and so do the loops that run once
    (`assume`: facts of a call's sizes, `Plan.call_facts`, under which a kernel lowers its checked plan again:
    tilec.plan.check.at_sizes). `checked`: whether legality holds for it (`check` passed, or at_sizes)."""

    def __init__(self, sched, config=None, outputs=None, specialize=None, assume=()):
        self.sched = sched
        self.config = resolve_config(sched.knobs, config)
        self.outputs, self.specialize = outputs, dict(specialize or {})
        self.assume = tuple(assume)  # facts of one call's sizes (Plan.call_facts): its loops that run once
        self.facts = facts_of(sched, self.specialize) + list(self.assume)
        self.plan = Plan(sched, self.config, outputs, self.facts)
        self.model = model_of(sched)
        self._maps = self._masks = self._resources = None
        self.checked = False

    @property
    def maps(self) -> TimeMaps:
        """Every statement's time map under the plan (isl), for legality and footprints."""
        if self._maps is None:
            self._maps = TimeMaps(self.model, self.plan, self.facts)
        return self._maps

    # -- legality ---------------------------------------------------------------------------------
    def violation(self):
        """The first rule the schedule breaks under this config, or None: ("bounds", (stage, message,
        counterexample)) or ("dependence", Violation). Raises NotAffine where isl cannot decide."""
        bounds = legality.bounds_violation(self.model, self.plan)
        if bounds is not None:
            return "bounds", bounds
        found = legality.find_violations(self.model, self.maps)
        return ("dependence", found[0]) if found else None

    def check(self, *, primitive: str = "build", stage=None, places=None) -> None:
        """Raise IllegalScheduleError if the schedule breaks a dependence, a rounding point or a bound.
        `places(stage)`: the legal places of a misplaced stage, named in the error (tilec.plan.check)."""
        name = primitive.split("(")[0].split(".")[-1]
        try:
            found = self.violation()
        except NotAffine as e:
            raise LoweringError(f"{primitive}: cannot prove this schedule legal: {e} is not affine (isl needs "
                                f"constant tile factors and integer index arithmetic)") from e
        if found is None:
            self.checked = True
            return
        kind, v = found
        if kind == "bounds":
            who, msg, example = v
            raise IllegalScheduleError(f"{primitive}: {msg}", primitive=name, stage=who, reason="bounds",
                                       counterexample=example)
        msg = legality.message(v, self.sched, primitive)
        culprit = stage if stage is not None else self.sched.stages.get(v.dst.stage)
        if places is not None and culprit is not None and culprit.kind == "compute" \
                and isinstance(culprit.attach, tuple):
            legal = places(culprit)
            msg += (f". Legal locations for {culprit.name} are: {', '.join(legal)}" if legal else
                    f". No loop of {culprit.attach[0].name} is a legal place for {culprit.name}: use compute_root")
        raise IllegalScheduleError(msg, primitive=name, stage=culprit.name if culprit else v.dst.stage,
                                   reason=v.reason, counterexample=v.counterexample())

    # -- what the lowering and the tuner read -----------------------------------------------------
    @property
    def masks(self) -> dict[str, dict]:
        """stage name -> {original axis: whether its tiles may overrun its extent}, for the axes each
        stage defines itself (an axis that follows another stage's loop takes that loop's mask)."""
        if self._masks is None:
            self._masks = {
                name: {axis: needs_mask(p.layout, axis, self.config, self.facts)
                       for axis in list(p.stage.tensor.axis) + list(p.stage.tensor.reduce_axis)
                       if axis not in p.bound and axis not in p.halo}
                for name, p in self.plan.placed.items()}
        return self._masks

    @property
    def resources(self) -> list[footprint.Resources]:
        """Footprints and shared-memory / register estimates per kernel (isl)."""
        if self._resources is None:
            self._resources = footprint.resources(self.model, self.plan, self.maps)
        return self._resources


def analyze(sched: Schedule, config: Mapping[str, int] | None = None) -> list[footprint.Resources]:
    """Footprints and resource estimates of every kernel of `sched` under `config` (`tc.analyze`), from
    isl, before anything is lowered or compiled: what the tuner prunes with, and `kernel.resources`.

    Per kernel: the shared memory its program uses (the box of each `cache_read`/`cache_write` tile times
    its copies in flight), a registers-per-thread estimate, and whether both fit the limits
    (`tilec/poly/footprint.py`: Hopper's 232448 bytes, 255 registers). Legality is not checked here
    (`tc.lower` and `tc.build` check it).

    Args:
        sched: the schedule.
        config: knob name -> value; knobs it leaves out take their first choice.

    Returns:
        One `Resources` per kernel, in launch order (`.kernel`, `.shared_bytes`, `.registers_per_thread`,
        `.footprints`, `.fits`; `print()` one for a summary).

    Raises:
        ArgumentError: `sched` is not a Schedule, or the config names a knob the schedule lacks or gives a
            value that is not one of its choices.
        LoweringError: the schedule's kernels cannot be laid out under this config (a stage placed where
            the lowering cannot put it, a tile of an extent Triton cannot have, ...).

    Example:
        >>> io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [32, 64]), 32)
        >>> ko, ki = s[C].split(k, 32)
        >>> s[C].reorder(io, jo, ko, ii, ji, ki)
        >>> cache = s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
        >>> [(r.kernel, r.shared_bytes, r.fits) for r in tc.analyze(s, {"BM": 64})]
        [('C_kernel', 8192, True), ('Y_kernel', 0, True)]
        >>> tc.analyze(s, {"BM": 64})[0].footprints[0].box  # A's tile: BM rows, 32 columns of k
        [64, 32]
    """
    from tilec.errors import ArgumentError
    from tilec.schedule.schedule import Schedule

    if not isinstance(sched, Schedule):
        raise ArgumentError(f"argument 1, 'sched' to analyze: expected a Schedule, got {type(sched).__name__}")
    return Analysis(sched, config).resources
