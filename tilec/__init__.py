"""tilec: write what to compute once, schedule how to run it, get a readable Triton kernel.

The pipeline, one package per step:
  ir (compute DAG) -> schedule (primitives) -> poly (isl facts) -> lower (loop nest, Triton source)
  -> runtime (compile, launch)      plus tune (knobs, search).
"""

from tilec.errors import ArgumentError, IllegalScheduleError, LoweringError, TilecError
from tilec.ir import (
    Tensor,
    abs,
    assume,
    compute,
    exp,
    log,
    max,
    maximum,
    min,
    minimum,
    placeholder,
    reduce_axis,
    rsqrt,
    sigmoid,
    silu,
    size_vars,
    sqrt,
    sum,
    tanh,
    where,
)
from tilec.lower import lower
from tilec.poly.footprint import analyze
from tilec.runtime import Kernel, build
from tilec.schedule import Knob, Schedule, Stage, create_schedule, knob
from tilec.tune import ShapeMix, Tuned, TuningInterrupted, tune

__version__ = "0.1.0"

__all__ = [
    "ArgumentError", "IllegalScheduleError", "Kernel", "Knob", "LoweringError", "Schedule", "ShapeMix", "Stage",
    "Tuned", "TuningInterrupted", "tune",
    "Tensor", "TilecError", "abs", "analyze", "assume", "build", "compute", "create_schedule", "exp", "knob", "log", "lower",
    "max", "maximum", "min", "minimum", "placeholder", "reduce_axis", "rsqrt", "sigmoid", "silu",
    "size_vars", "sqrt", "sum", "tanh", "where",
]
