"""Polyhedral facts about a schedule, from isl: the model (domains, accesses, dependences), each
statement's time map under a placement plan, legality (dependences, rounding points, parallelism),
footprints and divisibility. It reads plans handed to it (`tilec.plan` builds them) and never
mutates the schedule."""

from tilec.poly.legality import bounds_violation, find_violations
from tilec.poly.model import PolyModel, model_of

__all__ = ["PolyModel", "bounds_violation", "find_violations", "model_of"]
