"""The learned cost model (tilec/tune/learned.py): fitted on other studies' stored trials, used only where it
orders held-out studies better than the analytic model, and what the tuner stores and reports for it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tilec as tc
from tilec.tune import learned
from tilec.tune.learned import FEATURES


def _study(rng, n, effect):
    """One synthetic study: `n` configs on one shape; the measured log time is the analytic estimate's
    plus `effect` times the persistent flag (a factor the analytic model does not see)."""
    x = rng.normal(size=(n, len(FEATURES)))
    x[:, FEATURES.index("persistent")] = rng.integers(0, 2, n)
    x[:, 0] = rng.normal(size=n) * 0.3 - 12  # log estimate
    y = x[:, 0] + effect * x[:, FEATURES.index("persistent")] + rng.normal(size=n) * 0.01
    return [(x, y)]


def test_learns_a_factor_the_analytic_model_misses_and_orders_held_out_studies_better():
    rng = np.random.default_rng(0)
    model = learned.fit([_study(rng, 16, 1.0) for _ in range(4)])
    assert model is not None and model.studies == 4 and model.trials == 64
    assert model.accuracy > model.analytic_accuracy + 0.1
    w = model.weights[FEATURES.index("persistent")] / model.scale[FEATURES.index("persistent")]
    assert w == pytest.approx(1.0, abs=0.15)  # ridge shrinks it a little
    f = dict(zip(FEATURES, model.mean))
    assert model.score({**f, "persistent": 1.0}) > model.score({**f, "persistent": 0.0})  # persistent configs now rank slower
    assert "learned model: 64 trials of 4 studies" in model.describe()


def test_no_model_without_enough_data_or_without_a_gain():
    rng = np.random.default_rng(1)
    assert learned.fit([_study(rng, 40, 1.0)]) is None                        # one study: nothing held out
    assert learned.fit([_study(rng, 5, 1.0) for _ in range(3)]) is None       # 15 trials < MIN_TRIALS
    assert learned.fit([_study(rng, 16, 0.0) for _ in range(4)]) is None      # the estimate alone already orders them


class _Trial:
    def __init__(self, features, times):
        self.user_attrs = {"features": features, "times": times}


def test_stored_features_are_data_checked_before_use():
    good = {k: 0.5 for k in FEATURES}
    trials = [
        _Trial({"M=8": good}, {"M=8": 1e-6}),
        _Trial({"M=8": {**good, "log_estimate": 1.0}}, {"M=8": 2e-6}),
        _Trial({"M=8": {**good, "extra": 1.0}}, {"M=8": 3e-6}),          # unknown name: skipped
        _Trial({"M=8": {**good, "tma": float("nan")}}, {"M=8": 3e-6}),   # not finite: skipped
        _Trial({"M=8": {**good, "tma": "1"}}, {"M=8": 3e-6}),            # not a number: skipped
        _Trial({"M=8": good}, {"M=8": -1.0}),                            # not a time: skipped
        _Trial({"M=8": good}, {"M=9": 1e-6}),                            # no time for the shape: skipped
        _Trial("features", {"M=8": 1e-6}),                               # not a dict: skipped
        _Trial({"M=16": good}, {"M=16": 1e-6}),                          # a group of one: not a group
    ]
    (x, y), = learned.groups_of(trials)
    assert x.shape == (2, len(FEATURES)) and np.allclose(y, [math.log(1e-6), math.log(2e-6)])


def _elementwise(fn, name):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: fn(X[i, j]), name=name)
    s = tc.create_schedule(Y)
    i, j = Y.axis
    f = s[Y].fuse(i, j)
    o, _ = s[Y].split(f, tc.knob("B", [16, 32, 64, 128]))
    s[Y].bind(o, "program_id.0")
    s[Y].num_warps(tc.knob("W", [1, 2, 4]))
    return s, [X, Y]


def _timer(kernel, inputs):
    """Made-up seconds: large blocks fast, where the analytic model (a tiny shape: one wave whatever the
    block) ranks the smallest first."""
    return 1e-6 * 128 / kernel.config["B"] * (1 + 0.01 * kernel.config["W"])


@pytest.mark.slow
def test_the_third_kernel_is_seeded_by_what_the_first_two_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(learned, "MIN_TRIALS", 12)
    url = f"sqlite:///{tmp_path / 't.db'}"
    mix = tc.ShapeMix([({"M": 3, "N": 50}, 1)])
    for k, fn in enumerate([tc.exp, tc.sigmoid]):
        s, args = _elementwise(fn, f"Y{k}")
        tuned = tc.tune(s, mix, trials=8, args=args, storage=url, timer=_timer, jobs=0, progress=False)
        trials = [t for t in tuned.study.trials if t.state.name == "COMPLETE" and "duplicate_of" not in t.user_attrs]
        assert all(set(t.user_attrs["features"]["M=3,N=50"]) == set(FEATURES) for t in trials)
        assert tuned.study.user_attrs["cost_model"] == "the analytic cost model"  # nothing learned yet
    s, args = _elementwise(tc.tanh, "Y2")
    tuned = tc.tune(s, mix, trials=4, args=args, storage=url, timer=_timer, jobs=0, progress=False, seeds=2)
    assert tuned.study.user_attrs["cost_model"].startswith("learned model: 16 trials of 2 studies")
    seeded = [t for t in tuned.study.trials if t.user_attrs.get("seed") == "learned model"]
    assert len(seeded) == 2 and all(t.params["B"] == 128 for t in seeded)  # the fastest blocks, first
    x = torch.randn(3, 50)
    assert torch.allclose(tuned(x), torch.tanh(x), atol=1e-5)
    # the analytic model alone, asked for: its seeds, labelled so
    s, args = _elementwise(tc.tanh, "Y3")
    tuned = tc.tune(s, mix, trials=4, args=args, storage=url, timer=_timer, jobs=0, progress=False, seeds=2,
                    cost_model="analytic")
    assert tuned.study.user_attrs["cost_model"] == "the analytic cost model"
    seeded = [t for t in tuned.study.trials if "seed" in t.user_attrs]
    assert {t.user_attrs["seed"] for t in seeded} == {"cost model"} and all(t.params["B"] == 16 for t in seeded)


def test_a_cost_model_that_is_not_one_is_refused(tmp_path):
    s, args = _elementwise(tc.exp, "Y")
    with pytest.raises(tc.ArgumentError, match=r"cost_model must be 'learned' .* or 'analytic', got 'xgboost'"):
        tc.tune(s, tc.ShapeMix([({"M": 3, "N": 50}, 1)]), trials=2, args=args, storage=f"sqlite:///{tmp_path / 'x.db'}",
                jobs=0, cost_model="xgboost")


def test_a_tie_in_the_analytic_estimate_counts_half():
    """The analytic model gives many configs one estimate (a block size that changes no traffic): such pairs order
    neither way, so they count half, and the learned model must beat 50% there, not 0%."""
    rng = np.random.default_rng(2)
    studies = []
    for _ in range(3):
        (x, y), = _study(rng, 12, 1.0)
        x[:, 0] = -12.0                      # every config estimated alike
        studies.append([(x, y - y.mean())])
    model = learned.fit(studies)
    assert model is not None and model.analytic_accuracy == pytest.approx(0.5) and model.accuracy > 0.65
