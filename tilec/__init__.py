"""tilec: write what to compute once, schedule how to run it, get a readable Triton kernel.

The pipeline, one package per step:
  ir (compute DAG) -> schedule (primitives) -> poly (isl facts) -> lower (loop nest, Triton source)
  -> runtime (compile, launch)      plus tune (knobs, search).

The API, in the order a program uses it (each name's docstring has its parameters, errors and an
example; `help(tc.Stage)` lists the primitives):
  compute    size_vars, placeholder, compute, reduce_axis, sum / max / min; cumsum / cumprod / cummax / cummin /
             linear_scan (scans along an axis), sort / argsort; math (docs/language.md): exp,
             exp2, expm1, log, log2, log1p, sqrt, rsqrt, sigmoid, silu, tanh, erf, sin, cos, abs, sign, floor,
             ceil, trunc, round, pow (**), clamp, maximum, minimum, where; rand, randn, randint; assume
  schedule   create_schedule -> Schedule (s[C] is a Stage: split, tile, reorder, fuse, swizzle, bind,
             compute_at, compute_with, compute_inline, compute_root, pipeline, unroll, num_warps,
             persistent, split_k, online; s.cache_read, s.cache_write), knob, flag, replay, default_trace
  build      lower (the loop nests and Triton source), build -> Kernel (call it on torch tensors),
             analyze (isl's resource estimates)
  tune       tune -> Tuned, over a ShapeMix; forget (drop a stored study, e.g. after fixing a reference)
  errors     TilecError: ArgumentError, IllegalScheduleError, LoweringError (TileExtentError: no longer
             raised, tiles of any extent are padded; kept for code that catches it); TuningInterrupted
             (a KeyboardInterrupt) when tc.tune is stopped

Names are imported where they are first used: `import tilec` itself imports neither torch, Triton nor
optuna (so `tilec --help` answers at once), and `tc.compute` brings in what it needs. `tc.tune` and
`tc.lower` are the functions; the packages tilec/tune/ and tilec/lower/ are reached by importing them
(`import tilec.tune.study`, `from tilec.lower import builder`), and `tilec.tune.study` works too
(tilec/_packages.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING

from tilec.errors import ArgumentError, IllegalScheduleError, LoweringError, TilecError, TileExtentError
from tilec.version import __version__

# Where each lazily imported name of the API lives: the one table `tc.NAME` is resolved from.
_HOMES: dict[str, tuple[str, ...]] = {
    "tilec.ir": ("Tensor", "abs", "argsort", "assume", "ceil", "clamp", "compute", "cos", "cummax", "cummin", "cumprod",
                 "cumsum", "erf", "exp", "exp2", "expm1", "floor",
                 "linear_scan", "log", "log1p", "log2", "max", "maximum", "min", "minimum", "placeholder", "pow", "rand", "randint",
                 "randn", "reduce_axis",
                 "round", "rsqrt", "scatter", "sigmoid", "sign", "silu", "sin", "size_vars", "sort", "sqrt", "sum", "tanh", "trunc",
                 "where"),
    "tilec.schedule": ("Flag", "Knob", "Schedule", "Stage", "create_schedule", "default_trace", "flag", "knob",
                       "replay"),
    "tilec.plan": ("analyze",),  # and, imported, it installs the primitives' legality check
    "tilec.lower.program": ("lower",),
    "tilec.runtime": ("Kernel", "build"),
        "tilec.tune.mix": ("ShapeMix",),
    "tilec.tune.record": ("load_recording", "record"),
    "tilec.tune.saved": ("PlanMismatch", "load"),
    "tilec.tune.study": ("FewerConfigs", "Tuned", "TuningInterrupted", "forget", "tune"),
    "tilec.tune.auto": ("auto_schedule", "autotuned", "schedule_code"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
# API names that are also subpackages: the import system binds `tilec.tune = <package>` when the
# package is imported, and that binding is skipped so that the name stays the function.
_FUNCTIONS_OVER_PACKAGES = ("lower", "tune")

__all__ = sorted(["__version__", "ArgumentError", "IllegalScheduleError", "LoweringError", "TilecError",
                  "TileExtentError", *_HOME], key=str.lower)

if TYPE_CHECKING:  # what type checkers and IDEs read; the same names as _HOMES (tests/test_api.py checks)
    from tilec.ir import (
        Tensor,
        abs,
        argsort,
        assume,
        ceil,
        clamp,
        compute,
        cos,
        cummax,
        cummin,
        cumprod,
        cumsum,
        erf,
        exp,
        exp2,
        expm1,
        floor,
        linear_scan,
        log,
        log1p,
        log2,
        max,
        maximum,
        min,
        minimum,
        placeholder,
        pow,
        rand,
        randint,
        randn,
        reduce_axis,
        round,
        rsqrt,
        scatter,
        sigmoid,
        sign,
        silu,
        sin,
        size_vars,
        sort,
        sqrt,
        sum,
        tanh,
        trunc,
        where,
    )
    from tilec.lower.program import lower
    from tilec.plan import analyze
    from tilec.runtime import Kernel, build
    from tilec.schedule import Flag, Knob, Schedule, Stage, create_schedule, default_trace, flag, knob, replay
    from tilec.tune.auto import auto_schedule, autotuned, schedule_code
    from tilec.tune.mix import ShapeMix
    from tilec.tune.record import load_recording, record
    from tilec.tune.saved import PlanMismatch, load
    from tilec.tune.study import FewerConfigs, Tuned, TuningInterrupted, forget, tune


class _Tilec(types.ModuleType):
    """The `tilec` module: the first API name used imports the whole API, as `import tilec` did before it
    was lazy (so that, e.g., tilec.plan has installed the primitives' legality check into tilec.schedule
    before any schedule is made), and every name is kept."""

    def __getattr__(self, name: str):  # only for names not in the module yet
        if name not in _HOME:
            if not name.startswith("_") and importlib.util.find_spec(f"tilec.{name}") is not None:
                return importlib.import_module(f"tilec.{name}")  # a subpackage: `tilec.ir` after `import tilec`
            raise AttributeError(f"module 'tilec' has no attribute {name!r}")
        for module, names in _HOMES.items():
            home = importlib.import_module(module)
            for each in names:
                types.ModuleType.__setattr__(self, each, getattr(home, each))
        return types.ModuleType.__getattribute__(self, name)

    def __setattr__(self, name: str, value) -> None:
        if name in _FUNCTIONS_OVER_PACKAGES and isinstance(value, types.ModuleType):
            return  # the import system binding tilec/tune/ or tilec/lower/: tc.tune stays tune()
        super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(__all__))


sys.modules[__name__].__class__ = _Tilec
