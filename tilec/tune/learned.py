"""The learned cost model: the analytic estimate (cost.py) corrected by what this machine measured before.

Every measured trial stores its config's `features` (`user_attrs["features"]`, one dict per shape): the
analytic estimate's terms in a form a linear model can weigh (log estimate, compute-to-memory ratio,
programs, outputs per program, wave efficiency, stages, warps, registers, kernels, TMA, persistent loops,
grouped order). When a study opens, `from_storage` reads the completed trials of every other study of
the same device in the storage and fits a ridge regression of the residual log(measured / estimated)
on those features, within each (study, shape) group: only the order of configs inside a group matters
to the seeds, so each group's mean is taken out (a fixed effect per kernel and shape), and what the
model learns is which features make a config faster or slower than the analytic model says, across
kernels. This is MetaSchedule's idea (a model fitted on the stored measurements of this machine,
there XGBoost over loop features) at the scale of tilec's spaces: a few hundred trials, a dozen
features, numpy's least squares.

The model only ranks: it orders the seeds and the configs queued after a repeat (`study.seed_configs`);
measurements decide, and a config it ranks last is still proposed by the sampler. It is used only where
it ranks held-out studies better than the analytic model (leave-one-study-out pairwise accuracy), and
otherwise the analytic model seeds, as before. What is read back from a storage is data: features
are used only when they are the known names with finite values, times only when finite and positive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tilec.tune.cost import BANDWIDTH, LAUNCH, PEAK_FLOPS, combine

FEATURES = ("log_estimate", "log_compute_over_memory", "log_programs", "log_outputs_per_program", "wave_eff",
            "log_stages", "log_warps", "registers", "kernels", "launch_share", "tma", "persistent", "grouped")
MIN_STUDIES = 2     # fewer other studies: the analytic model seeds
MIN_TRIALS = 24     # fewer usable trials (in groups of two or more): the analytic model seeds
MAX_STUDIES = 200   # the most recent studies read (by id)
RIDGE = 1.0         # on standardized features
CLIP = 5.0          # the learned factor stays within exp(-5)..exp(5) of the analytic estimate


def features(x: dict) -> dict[str, float]:
    """The learned model's inputs from `cost.terms`' dict (every value a finite float)."""
    est = combine(x)
    compute, memory = x["flops"] / PEAK_FLOPS, x["bytes"] / BANDWIDTH
    return {
        "log_estimate": math.log(max(est, 1e-12)),
        "log_compute_over_memory": math.log(max(compute, 1e-15) / max(memory, 1e-15)),
        "log_programs": math.log2(max(x["programs"], 1)),
        "log_outputs_per_program": math.log2(max(x["outputs_per_program"], 1e-9)),
        "wave_eff": float(x["wave_eff"]),
        "log_stages": math.log2(max(x["stages"], 1)),
        "log_warps": math.log2(max(x["warps"], 1)),
        "registers": x["registers"] / 128,
        "kernels": float(x["kernels"]),
        "launch_share": x["kernels"] * LAUNCH / max(est, 1e-12),
        "tma": float(bool(x["tma"])),
        "persistent": float(bool(x["persistent"])),
        "grouped": float(bool(x["grouped"])),
    }


def _vector(f) -> np.ndarray | None:
    """A stored feature dict as a vector, or None if it is not one (names or values off)."""
    if not isinstance(f, dict) or set(f) != set(FEATURES):
        return None
    v = [f[k] for k in FEATURES]
    if not all(type(a) in (int, float) and math.isfinite(a) for a in v):
        return None
    return np.array(v, dtype=float)


def groups_of(trials) -> list[tuple[np.ndarray, np.ndarray]]:
    """One study's completed trials as (features, log seconds) groups, one per shape with two or more."""
    by: dict[str, tuple[list, list]] = {}
    for t in trials:
        fs, times = t.user_attrs.get("features"), t.user_attrs.get("times")
        if not isinstance(fs, dict) or not isinstance(times, dict):
            continue
        for key, f in fs.items():
            v, s = _vector(f), times.get(key)
            if v is None or type(s) not in (int, float) or not (math.isfinite(s) and s > 0):
                continue
            xs, ys = by.setdefault(key, ([], []))
            xs.append(v)
            ys.append(math.log(s))
    return [(np.array(xs), np.array(ys)) for xs, ys in by.values() if len(ys) >= 2]


def _fit(groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ridge weights (standardized features -> residual log time), with the columns' mean and scale."""
    mean = np.concatenate([x for x, _ in groups]).mean(0)
    xs = np.concatenate([x - x.mean(0) for x, _ in groups])
    ys = np.concatenate([(y - x[:, 0]) - (y - x[:, 0]).mean() for x, y in groups])  # residual of the estimate
    scale = xs.std(0)
    scale[scale < 1e-9] = 1.0  # a constant column: weight 0 after the ridge
    z = xs / scale
    w = np.linalg.solve(z.T @ z + RIDGE * np.eye(z.shape[1]), z.T @ ys)
    return w, mean, scale


def _correction(x, w, mean, scale):
    """The learned log-factor on the analytic estimate, for rows of features (bounded: a kernel unlike any
    seen may put a feature far from the data, and the factor only ranks)."""
    return np.clip(((x - mean) / scale) @ w, -CLIP, CLIP)


def _pairs_right(groups, score) -> tuple[float, int]:
    """Pairs of configs within a group whose measured order `score` gets right (a tie in the score counts half:
    the analytic model ties many configs, and a tie orders neither way), and all pairs measured apart."""
    right, total = 0.0, 0
    for x, y in groups:
        s, i, j = score(x), *np.triu_indices(len(y), 1)
        differ = y[i] != y[j]
        agree = (s[i] - s[j]) * (y[i] - y[j])
        right += float((agree > 0)[differ].sum()) + 0.5 * float((s[i] == s[j])[differ].sum())
        total += int(differ.sum())
    return right, total


@dataclass
class LearnedModel:
    """Ridge weights over `FEATURES` and what they were fitted on. `score(f)` is a config's log seconds
    up to a constant per kernel and shape (only its order within a study's shape is meaningful)."""

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    studies: int
    trials: int
    accuracy: float            # held-out pairwise accuracy of this model (leave one study out)
    analytic_accuracy: float   # the analytic model's, on the same pairs

    def score(self, f: dict) -> float:
        v = np.array([f[k] for k in FEATURES], dtype=float)
        return float(v[0] + _correction(v, self.weights, self.mean, self.scale))

    def describe(self) -> str:
        return (f"learned model: {self.trials} trials of {self.studies} studies on this device; held-out pairwise "
                f"order {self.accuracy:.0%} right (the analytic model's {self.analytic_accuracy:.0%})")


def fit(studies: list[list[tuple[np.ndarray, np.ndarray]]]) -> LearnedModel | None:
    """The model fitted on `studies` (each a list of `groups_of`), or None where there is too little data or
    it does not order held-out studies better than the analytic estimate (pairwise, ties half)."""
    studies = [g for g in studies if g]
    groups = [g for gs in studies for g in gs]
    n = sum(len(y) for _, y in groups)
    if len(studies) < MIN_STUDIES or n < MIN_TRIALS:
        return None
    right = right_a = total = 0
    for k in range(len(studies)):  # leave one study out: does what was learned elsewhere carry over?
        rest = [g for i, gs in enumerate(studies) if i != k for g in gs]
        w, mean, scale = _fit(rest)
        r, t = _pairs_right(studies[k], lambda x, p=(w, mean, scale): x[:, 0] + _correction(x, *p))
        ra, _ = _pairs_right(studies[k], lambda x: x[:, 0])
        right, right_a, total = right + r, right_a + ra, total + t
    if total == 0 or right <= right_a:
        return None
    w, mean, scale = _fit(groups)
    return LearnedModel(w, mean, scale, len(studies), n, right / total, right_a / total)


def from_storage(storage, device: str, exclude: str | None = None) -> LearnedModel | None:
    """Fit on the completed trials of the other studies of `device` in an optuna storage (the most recent
    `MAX_STUDIES`); None where there are too few, or the fit does not beat the analytic model."""
    from optuna.trial import TrialState

    found = []
    studies = sorted(storage.get_all_studies(), key=lambda s: s._study_id)[-MAX_STUDIES:]
    for s in studies:
        if s.study_name == exclude or s.user_attrs.get("device") != device:
            continue
        trials = storage.get_all_trials(s._study_id, deepcopy=False, states=(TrialState.COMPLETE,))
        found.append(groups_of(trials))
    return fit(found)
