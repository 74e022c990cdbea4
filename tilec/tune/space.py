"""The search space of a schedule (its knobs), and what is pruned before anything compiles:
configs whose shared memory (isl footprints x pipeline stages) or register estimate cannot fit one
program on the device, and tiles larger than every shape of the mix needs (but for each knob's smallest
choice, so that a knob whose every choice is too large still has one)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tilec.errors import TilecError
from tilec.ir.expr import evaluate
from tilec.poly.footprint import REGISTER_LIMIT, SHARED_LIMIT
from tilec.schedule.schedule import Split
from tilec.tune.cost import analysis_for


@dataclass(frozen=True)
class Feasibility:
    ok: bool
    reason: str = ""


class SearchSpace:
    """The knobs of a schedule and their choices; `feasible(config)` decides pruning."""

    def __init__(self, sched, mix, shared_limit: int = SHARED_LIMIT):
        self.sched, self.mix, self.shared_limit = sched, mix, shared_limit
        self.knobs = {name: list(k.choices) for name, k in sched.knobs.items()}
        self._extents = self._knob_extents()

    @property
    def size(self) -> int:
        n = 1
        for c in self.knobs.values():
            n *= len(c)
        return n

    def configs(self):
        names = list(self.knobs)
        for values in itertools.product(*(self.knobs[n] for n in names)):
            yield dict(zip(names, values))

    def _knob_extents(self) -> dict[str, list]:
        """knob name -> extents of the axes it splits (to bound tiles by the largest shape)."""
        out: dict[str, list] = {}
        for st in self.sched.stages.values():
            for rel in st.relations:
                if isinstance(rel, Split) and hasattr(rel.factor, "knob_name"):
                    out.setdefault(rel.factor.knob_name, []).append(rel.parent.extent)
        return out

    def feasible(self, config: dict) -> Feasibility:
        for name, extents in self._extents.items():
            for ext in extents:
                try:
                    largest = max(evaluate(ext, {**shape, **config}) for shape, _ in self.mix)
                except Exception:  # noqa: BLE001 - an extent of unknown sizes bounds nothing
                    continue
                padded = 1 << max(largest - 1, 0).bit_length()
                # the knob's smallest choice is kept even so: a tile over the extent is wasteful, not wrong,
                # and pruning every choice would leave no config to tune (RMSNorm's BLOCK at hidden 64)
                if config[name] > max(padded, 16) and config[name] > min(self.knobs[name]):
                    return Feasibility(False, f"tile {name}={config[name]} exceeds every shape's extent "
                                              f"(largest {largest}; its smallest choice "
                                              f"{min(self.knobs[name])} is tried)")
        try:
            resources = analysis_for(self.sched, config).resources
        except TilecError as e:
            return Feasibility(False, f"does not lower: {e}")
        for r in resources:
            if r.shared_bytes > self.shared_limit:
                return Feasibility(False, f"{r.kernel}: shared memory {r.shared_bytes} B > {self.shared_limit} B")
            if r.registers_per_thread > REGISTER_LIMIT:
                return Feasibility(False, f"{r.kernel}: ~{r.registers_per_thread} registers per thread > "
                                          f"{REGISTER_LIMIT}")
        return Feasibility(True)
