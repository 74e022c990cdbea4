"""Autotuning: knobs -> feasibility pruning -> cost-model seeds -> optuna study, measured in worker
processes -> plan."""

from tilec._callable import make_callable
from tilec.tune.mix import ShapeMix
from tilec.tune.study import FewerConfigs, Forgotten, Tuned, TuningInterrupted, forget, tune

__all__ = ["FewerConfigs", "Forgotten", "ShapeMix", "Tuned", "TuningInterrupted", "forget", "tune"]

make_callable(__name__, tune)  # tc.tune(...) is tune(...); tilec.tune stays this package
