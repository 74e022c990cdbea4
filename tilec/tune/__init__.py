"""Autotuning: knobs -> feasibility pruning -> cost-model seeds -> optuna study, measured in worker
processes -> plan."""

from tilec.tune.mix import ShapeMix
from tilec.tune.study import Tuned, TuningInterrupted, tune

__all__ = ["ShapeMix", "Tuned", "TuningInterrupted", "tune"]
