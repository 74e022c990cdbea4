"""Tuning with one worker process per GPU on one shared study (tilec/tune/multi.py). Without a GPU the
same code runs N workers on the CPU (Triton's interpreter): the shared study's guarantees are what is
tested here (no config measured twice, none lost, a dead worker stalls nobody, the plan is a normal
plan); the several-GPU timings are a benchmark, on a machine with several GPUs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import torch

import tilec as tc
from tilec.tune import multi

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tune_case  # noqa: E402

RECIPE = str(HERE / "tune_case.py")


def _measured(study) -> list[tuple]:
    """The configs measured by a trial of their own (not copies of another trial's, not pruned)."""
    return [tuple(sorted(t.params.items())) for t in study.trials
            if t.state == optuna.trial.TrialState.COMPLETE and "duplicate_of" not in t.user_attrs
            and "pruned" not in t.user_attrs]


def test_devices_for_each_way_of_saying_gpus():
    assert multi.devices("all", True, 2) == ["0", "1"]
    assert multi.devices(2, True, 4) == ["0", "1"]
    assert multi.devices("2", True, 4) == ["0", "1"]
    assert multi.devices("0,0", True, 1) == ["0", "0"]
    assert multi.devices([1, 0], True, 2) == ["1", "0"]
    assert multi.devices(2, False, 0) == ["cpu", "cpu"]
    with pytest.raises(tc.ArgumentError, match="only 1 GPU"):
        multi.devices(2, True, 1)
    with pytest.raises(tc.ArgumentError, match="GPU 3 is not visible here"):
        multi.devices("0,3", True, 2)
    with pytest.raises(tc.ArgumentError, match="there is no GPU here"):
        multi.devices("all", False, 0)
    with pytest.raises(tc.ArgumentError, match="is not a GPU index"):
        multi.devices("0,x", True, 2)
    with pytest.raises(tc.ArgumentError, match="at least 1 worker"):
        multi.devices(0, True, 2)


def test_a_worker_is_pinned_to_its_gpu_among_the_visible_ones():
    assert multi._physical("1", {"CUDA_VISIBLE_DEVICES": "4,6"}) == "6"
    assert multi._physical("1", {}) == "1"


def test_the_mix_crosses_to_the_workers_as_it_is():
    from tilec.cli import parse_mix

    mix = tc.ShapeMix([({"M": 16}, 3), ({"M": 40}, 1)], fixed={"K": 24, "N": 20})
    again = parse_mix(multi.mix_text(mix), None)
    assert again.shapes == mix.shapes and again.weights == mix.weights


@pytest.mark.slow
def test_two_workers_then_the_plan(tmp_path):
    """gpus=2 on the CPU: two worker processes share the study, nothing is measured twice, the study has
    the trials asked for, and this process's plan is the same kind of result as a one-worker study."""
    s, args = tune_case.make()
    storage = f"sqlite:///{tmp_path / 'two.db'}"
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, storage=storage,
                    study_name="two", recipe=RECIPE, gpus=2 if not torch.cuda.is_available() else "0,0", jobs=1,
                    progress=False)
    study = optuna.load_study(study_name="two", storage=storage)
    measured = _measured(study)
    assert len(measured) == len(set(measured)) >= 6
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert set(tuned.chosen.configs) == {tc.ShapeMix.key(sh) for sh, _ in tune_case.MIX}  # a plan, as one worker gives
    assert all(cfg in [dict(m) for m in measured] for cfg in tuned.chosen.configs.values())
    logs = sorted(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"tilec-workers-{os.getpid()}/worker*.log"))
    assert len(logs) >= 2 and all("(worker)" in p.read_text() for p in logs[-2:])


@pytest.mark.slow
def test_a_worker_that_dies_stalls_nobody(tmp_path):
    """Kill one of two workers as soon as the study has a finished trial: the other worker and this process
    finish the study (the killed worker's running trial goes stale on its heartbeat), nothing is lost."""
    storage = f"sqlite:///{tmp_path / 'dead.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "tilec", "tune", RECIPE, "--mix", multi.mix_text(tune_case.MIX), "--trials", "6",
           "--storage", storage, "--study", "dead", "--worker", "--no-progress", "--jobs", "1"]
    victim = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 180
    while time.time() < deadline:
        time.sleep(0.5)
        try:
            st = optuna.load_study(study_name="dead", storage=storage)
        except Exception:  # noqa: BLE001 - not created yet
            continue
        if [t for t in st.trials if t.state.is_finished()]:
            break
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    before = {t.number for t in optuna.load_study(study_name="dead", storage=storage).trials
              if t.state == optuna.trial.TrialState.COMPLETE}
    runs = multi.run_workers(RECIPE, tune_case.MIX, ["cpu"], 6, storage, "dead", jobs=1, log_dir=tmp_path)
    assert [r.returncode for r in runs] == [0], runs[0].tail()
    time.sleep(3)  # the killed worker's heartbeat is stale by now
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, storage=storage,
                    study_name="dead", jobs=1, progress=False, heartbeat=1)
    study = optuna.load_study(study_name="dead", storage=storage)
    assert before <= {t.number for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    measured = _measured(study)
    assert len(measured) == len(set(measured)) >= 6
    assert set(tuned.chosen.configs) == {tc.ShapeMix.key(sh) for sh, _ in tune_case.MIX}


def test_gpus_needs_a_recipe_and_no_worker_flag(tmp_path):
    s, args = tune_case.make()
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(tc.ArgumentError, match="gpus= runs worker processes, which rebuild the schedule from a recipe"):
        tc.tune(s, tune_case.MIX, trials=2, args=args, storage=storage, gpus=2)
    with pytest.raises(tc.ArgumentError, match="worker=True is for a process that is one of them"):
        tc.tune(s, tune_case.MIX, trials=2, args=args, storage=storage, gpus=2, recipe=RECIPE, worker=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the GPU host runs it)")
def test_two_workers_on_one_gpu(tmp_path):
    """gpus='0,0': two workers pinned to GPU 0 (their timings share the GPU: a test, not a benchmark)."""
    s, args = tune_case.make()
    storage = f"sqlite:///{tmp_path / 'g.db'}"
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, storage=storage,
                    study_name="g", recipe=RECIPE, gpus="0,0", jobs=1, progress=False)
    measured = _measured(optuna.load_study(study_name="g", storage=storage))
    assert len(measured) == len(set(measured)) >= 6
    assert set(tuned.chosen.configs) == {tc.ShapeMix.key(sh) for sh, _ in tune_case.MIX}
