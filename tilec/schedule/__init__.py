"""Schedules: stages, their split/fuse/reorder relations, placements and knobs."""

from tilec.schedule.knob import Knob, factor_value, knob, resolve_config
from tilec.schedule.schedule import GRID, Fuse, Schedule, Split, Stage, create_schedule

__all__ = ["GRID", "Fuse", "Knob", "Schedule", "Split", "Stage", "create_schedule", "factor_value", "knob",
           "resolve_config"]
