"""tilec: write what to compute once, schedule how to run it, get a readable Triton kernel.

The pipeline, one package per step:
  ir (compute DAG) -> schedule (primitives) -> poly (isl facts) -> lower (loop nest, Triton source)
  -> runtime (compile, launch)      plus tune (knobs, search).

The API, in the order a program uses it (each name's docstring has its parameters, errors and an
example; `help(tc.Stage)` lists the primitives):
  compute    size_vars, placeholder, compute, reduce_axis, sum / max / min, exp, log, sqrt, rsqrt,
             sigmoid, silu, tanh, abs, maximum, minimum, where, assume
  schedule   create_schedule -> Schedule (s[C] is a Stage: split, tile, reorder, fuse, swizzle, bind,
             compute_at, compute_with, compute_inline, compute_root, pipeline, unroll, num_warps,
             persistent, split_k, online; s.cache_read, s.cache_write), knob, flag, replay, default_trace
  build      lower (the loop nests and Triton source), build -> Kernel (call it on torch tensors),
             analyze (isl's resource estimates)
  tune       tune -> Tuned, over a ShapeMix
  errors     TilecError: ArgumentError, IllegalScheduleError, LoweringError; TuningInterrupted (a
             KeyboardInterrupt) when tc.tune is stopped
"""

# `tc.lower` and `tc.tune` are the subpackages, and calling one calls its function: tc.lower(s) is
# tilec.lower.lower(s), and `import tilec.tune.study` reaches the module (tilec/_callable.py).
from tilec import lower, tune
from tilec.errors import ArgumentError, IllegalScheduleError, LoweringError, TilecError, TileExtentError
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
from tilec.plan import analyze
from tilec.runtime import Kernel, build
from tilec.schedule import Flag, Knob, Schedule, Stage, create_schedule, default_trace, flag, knob, replay
from tilec.tune import FewerConfigs, ShapeMix, Tuned, TuningInterrupted
from tilec.version import __version__

__all__ = [
    "__version__", "ArgumentError", "Flag", "IllegalScheduleError", "Kernel", "Knob", "LoweringError", "Schedule", "ShapeMix", "Stage",
    "Tuned", "TuningInterrupted", "FewerConfigs", "tune", "TileExtentError",
    "Tensor", "TilecError", "abs", "analyze", "assume", "build", "compute", "create_schedule", "default_trace", "exp", "flag", "knob", "log", "lower",
    "max", "maximum", "min", "minimum", "placeholder", "reduce_axis", "replay", "rsqrt", "sigmoid", "silu",
    "size_vars", "sqrt", "sum", "tanh", "where",
]
