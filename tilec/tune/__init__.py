"""Autotuning: knobs -> feasibility pruning -> cost-model seeds -> optuna study, measured in worker
processes -> plan. `tc.tune` is the function `tilec.tune.study.tune`; this package's modules are
reached through it too (tilec/_packages.py)."""

from tilec._packages import reach_through
from tilec.tune.mix import ShapeMix
from tilec.tune.study import FewerConfigs, Forgotten, Tuned, TuningInterrupted, forget, tune

__all__ = ["FewerConfigs", "Forgotten", "ShapeMix", "Tuned", "TuningInterrupted", "forget", "tune"]

reach_through(__name__, tune)
