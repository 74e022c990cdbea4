"""Knobs live in `tilec.ir.knob`: a knob stands wherever a factor or count goes, so extents and
split factors of the IR may be knobs. This module keeps the old import path working."""

from tilec.ir.knob import Knob, factor_value, knob, resolve_config

__all__ = ["Knob", "factor_value", "knob", "resolve_config"]
