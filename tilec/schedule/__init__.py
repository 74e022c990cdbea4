"""Schedules: stages, their split/fuse/reorder relations, placements and knobs; traces and replay."""

from tilec.ir.knob import Flag, Knob, factor_value, flag, knob, resolve_config
from tilec.schedule.defaults import default_trace
from tilec.schedule.schedule import GRID, Fuse, Schedule, Split, Stage, create_schedule
from tilec.schedule.trace import AxisRef, KnobRef, StageRef, Step, TensorRef, Trace, replay

__all__ = ["GRID", "AxisRef", "Flag", "Fuse", "Knob", "KnobRef", "Schedule", "Split", "Stage", "StageRef", "Step",
           "TensorRef", "Trace", "create_schedule", "default_trace", "factor_value", "flag", "knob", "replay", "resolve_config"]
