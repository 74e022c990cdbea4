"""Polyhedral facts about a schedule, from isl: the model (domains, accesses, dependences), each
statement's time map under the schedule, and legality (dependences, rounding points, parallelism)."""

from tilec.poly.legality import check_schedule, find_violations, legal_places
from tilec.poly.model import PolyModel, model_of

__all__ = ["PolyModel", "check_schedule", "find_violations", "legal_places", "model_of"]
