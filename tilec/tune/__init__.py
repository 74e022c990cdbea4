"""Autotuning: knobs -> feasibility pruning -> cost-model seeds -> optuna study -> plan."""

from tilec.tune.mix import ShapeMix
from tilec.tune.study import Tuned, tune

__all__ = ["ShapeMix", "Tuned", "tune"]
