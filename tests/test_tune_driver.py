"""The tuner driver's phases one at a time (tilec/tune/driver.py): arguments, open and seed, settle,
refill, objective, rounds and choose, each on a study prepared by hand in a temporary SQLite file,
with a made-up pool (no worker process, no compile) where the phase measures."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

import tilec as tc
import tilec.tune.study as study_mod
from tilec.errors import ArgumentError
from tilec.runtime import triton_compat
from tilec.tune import workers
from tilec.tune.driver import Tuning
from tilec.tune.study import Tuned, _seed_count, _Stopped

sys.path.insert(0, str(Path(__file__).parent))
import tune_case  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
# study.ask() on a storage with heartbeats (as tc.tune opens it) warns that heartbeats are meant for optimize
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")


class FakePool:
    """Stands in for the worker pool: times made up from the config (BM / 16 ms a call on every
    shape), every config measured counted."""

    isolated = False

    def __init__(self, stopping=None):
        self.stopping = stopping
        self.measured = []

    def measure(self, cfg):
        self.measured.append(dict(cfg))
        return {k: 1e-3 * cfg["BM"] / 16 for k in ("K=24,M=16,N=20", "K=24,M=40,N=20")}


def _tuning(tmp_path, trials=4, seeds=0, **kw) -> Tuning:
    s, args = tune_case.make()
    given = dict(args=args, reference=tune_case.reference, storage=f"sqlite:///{tmp_path / 'tuning.db'}",
                 expected_calls=1e6, timer=None, seed=0, seeds=seeds, study_name=None, worker=False,
                 shared_limit=None, heartbeat=2, progress=False, jobs=0, timeout=300.0, recipe=None)
    return Tuning(s, tune_case.MIX, trials, **{**given, **kw})


def _opened(tmp_path, trials=4, seeds=0, pool=None) -> Tuning:
    """A run whose study is open (a random sampler, not a grid) and whose pool is made up."""
    run = _tuning(tmp_path, trials, seeds)
    run.grid, run.sampler = False, optuna.samplers.RandomSampler(seed=0)
    run.pool = pool or FakePool()
    run.open_study()
    return run


def _complete(run, cfg, seconds):
    """Add a completed trial of `cfg` taking `seconds` on every shape."""
    dists = {n: optuna.distributions.CategoricalDistribution(c) for n, c in run.space.knobs.items()}
    run.study.add_trial(optuna.trial.create_trial(params=cfg, distributions=dists, value=seconds,
                                                  user_attrs={"times": {k: seconds for k in run.keys}}))
    return run.study.trials[-1]


def _feasible(run) -> list[dict]:
    return [c for c in run.space.configs() if run.space.feasible(c).ok]


def test_arguments_are_checked_and_normalized(tmp_path, monkeypatch):
    """The constructor refuses what is out of range before anything opens, and fills in the defaults
    (progress from study.py's `_stderr_is_terminal`, where tests patch it)."""
    with pytest.raises(ArgumentError, match="trials must be a positive int"):
        _tuning(tmp_path, trials=0)
    with pytest.raises(ArgumentError, match="jobs must be an int >= 0"):
        _tuning(tmp_path, jobs=-1)
    assert not (tmp_path / "tuning.db").exists()
    monkeypatch.setattr(study_mod, "_stderr_is_terminal", lambda: True)
    run = _tuning(tmp_path, progress=None, jobs=None)
    assert run.progress is True and run.quiet is False and run.jobs == study_mod.default_jobs()
    assert run.name.startswith("tilec-") and run.keys == ["K=24,M=16,N=20", "K=24,M=40,N=20"]
    assert _tuning(tmp_path, progress=False).quiet is True


def test_open_seeds_a_new_study_once(tmp_path):
    run = _opened(tmp_path, trials=8, seeds=3)
    waiting = run.study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert len(waiting) == _seed_count(3, 8) == 3
    assert all(t.user_attrs["seed"] == "cost model" for t in waiting)
    again = _opened(tmp_path, trials=8, seeds=3)  # the same study, loaded: not seeded twice
    assert again.study.study_name == run.study.study_name and len(again.study.trials) == 3


def test_refill_queues_the_best_untried_config_once_then_runs_out(tmp_path):
    run = _opened(tmp_path)
    first = _feasible(run)[0]
    done = _complete(run, first, 1e-3)
    run.refill(done)
    waiting = run.study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs["after_repeat"] == done.number
    assert waiting[0].system_attrs["fixed_params"] != first
    run.refill(done)  # one queued already: nothing more
    assert len(run.study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 1
    assert not run.exhausted

    (tmp_path / "full").mkdir()
    full = _opened(tmp_path / "full")
    for cfg in _feasible(full):
        last = _complete(full, cfg, 1e-3)
    full.refill(last)
    assert full.exhausted and not full.study.get_trials(states=(optuna.trial.TrialState.WAITING,))


def test_refill_does_nothing_on_a_grid(tmp_path):
    run = _opened(tmp_path)
    run.grid = True
    run.refill(_complete(run, _feasible(run)[0], 1e-3))
    assert not run.study.get_trials(states=(optuna.trial.TrialState.WAITING,)) and not run.exhausted


def test_settle_copies_a_finished_trial_of_the_same_config(tmp_path):
    run = _opened(tmp_path)
    cfg, other = _feasible(run)[:2]
    done = _complete(run, cfg, 2e-3)
    trial = run.study.ask()
    assert run.settle(trial, cfg).number == done.number
    assert run.settle(trial, other) is None  # nobody measured it: this trial measures it


def test_objective_measures_a_config_once_and_copies_it_after(tmp_path):
    pool = FakePool()
    run = _opened(tmp_path, pool=pool)
    cfg = _feasible(run)[0]
    run.study.enqueue_trial(cfg)
    trial = run.study.ask()
    value = run.objective(trial)
    run.study.tell(trial, value)
    assert value == pytest.approx(1e-3 * cfg["BM"] / 16) and pool.measured == [cfg]  # the mix's weights sum to 1
    run.study.enqueue_trial(cfg)
    again = run.study.ask()
    assert run.objective(again) == value and pool.measured == [cfg]  # copied, not measured twice
    assert run.study._storage.get_trial(again._trial_id).user_attrs["duplicate_of"] == trial.number


def test_objective_requeues_an_interrupted_trial(tmp_path):
    run = _opened(tmp_path, pool=FakePool(stopping="SIGTERM"))
    cfg = _feasible(run)[0]
    run.study.enqueue_trial(cfg)
    trial = run.study.ask()
    with pytest.raises(_Stopped):
        run.objective(trial)
    assert run.study._storage.get_trial(trial._trial_id).user_attrs["interrupted"] == "SIGTERM"
    (queued,) = run.study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert queued.user_attrs["retry_of"] == trial.number and queued.system_attrs["fixed_params"] == cfg


def test_rounds_measure_as_many_configs_as_trials(tmp_path):
    pool = FakePool()
    run = _opened(tmp_path, trials=3, pool=pool)
    run.rounds(0)
    assert study_mod._measured(run.study) == 3 and len(pool.measured) == 3
    assert len({tuple(sorted(c.items())) for c in pool.measured}) == 3  # three different configs


def test_choose_takes_the_fastest_completed_config(tmp_path):
    run = _opened(tmp_path)
    slow, fast = _feasible(run)[:2]
    _complete(run, slow, 5e-3)
    _complete(run, fast, 1e-3)
    tuned = run.choose()
    assert isinstance(tuned, Tuned) and tuned.chosen.name == "generic"
    assert all(c == fast for c in tuned.chosen.configs.values()) and len(tuned.kernels) == 2


def test_a_generic_plan_builds_one_kernel_per_config(tmp_path, monkeypatch):
    """The shapes a generic plan serves with one config share one kernel, checked once (each call lowers its
    plan under the shape's facts), which also serves the shapes outside the mix nearest to them."""
    run = _opened(tmp_path)
    _complete(run, _feasible(run)[0], 1e-3)
    built = []
    monkeypatch.setattr(study_mod, "Kernel", lambda *a, **kw: built.append(kw) or tc.build(*a, **kw))
    tuned = run.choose()
    assert tuned.chosen.name == "generic" and len(tuned.kernels) == 2
    assert len(set(map(id, tuned.kernels.values()))) == 1
    assert built == [{"specialize": dict(tune_case.MIX.shapes[0])}, {}]  # the compile time's kernel, the plan's
    assert tuned._kernel_at((24, 1000, 20)) is tuned.kernels["K=24,M=40,N=20"] and len(built) == 2


def test_the_phases_warnings_point_at_the_caller_of_tune(tmp_path, monkeypatch):
    """tc.tune runs `start` itself, so that the warning of a GPU measured unisolated (no recipe) points
    at the line calling tc.tune, as the FewerConfigs warning does."""
    monkeypatch.setattr(triton_compat, "target", lambda: "cuda")  # a GPU host, without a recipe
    monkeypatch.setattr(study_mod, "_device_name", lambda: "a GPU")
    monkeypatch.setattr(workers, "InProcess", lambda job: "in-process")
    monkeypatch.setattr(Tuning, "measure", lambda self: None)
    monkeypatch.setattr(Tuning, "choose", lambda self: "the plan")
    s, args = tune_case.make()
    with pytest.warns(RuntimeWarning, match="unisolated") as caught:
        got = tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, jobs=1,
                      storage=f"sqlite:///{tmp_path / 'tuning.db'}", progress=False)
    assert got == "the plan" and [w.filename for w in caught] == [__file__]
