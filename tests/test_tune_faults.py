"""Tuning that survives faults and hostile input: candidates that crash, hang or run out of memory
in their worker processes, signals to the tuning process, parallel jobs and workers that must
measure each config once, storages that are not tuning studies, and study contents that must stay
data (Triton's interpreter on a CPU, the tiny GEMM of tune_case.py, injected faults and timers)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tokenize
import uuid
from pathlib import Path

import optuna
import pytest
from computes import gemm

import tilec as tc
from tilec.poly.footprint import SHARED_LIMIT
from tilec.runtime import triton_compat
from tilec.tune import storage as tstorage
from tilec.tune import workers
from tilec.tune.measure import CandidateFailure
from tilec.tune.study import study_key
from tilec.tune.trials import measured_itself
from tilec.tune.workers import FAULT_ENV, START_ENV

HERE = Path(__file__).parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import tune_case  # noqa: E402

CASE = str(HERE / "tune_case.py")
# closures (timers, references defined in a test) reach workers only through fork, which a process
# that has touched CUDA cannot do: on a GPU host workers start fresh from a recipe file instead
needs_fork = pytest.mark.skipif(triton_compat.target() == "cuda",
                                reason="closures reach worker processes by fork only (not on a GPU host)")
TIMEOUT = 20 if triton_compat.target() == "cuda" else 4   # a GPU compiles each candidate first
COMPLETE, FAIL, RUNNING, WAITING = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL,
                                    optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)
CLI_MIX = ["--mix", "M=16:3,40:1", "--fixed", "K=24,N=20"]


def _make(bm=(16, 32)):
    """tune_case.make() with other choices for BM."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", list(bm)), tc.knob("BN", [16, 32]))
    ko, ki = s[C].split(C.reduce_axis[0], tc.knob("BK", [16, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].num_warps(tc.knob("warps", [4, 8]))
    return s, [A, W, C]


def _cfg(t) -> tuple:
    return tuple(sorted(t.params.items()))


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, START_ENV)}
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": path, **extra}  # TRITON_INTERPRET as conftest.py set it (CPU) or not (GPU)


def _cli_tune(url, study, *extra, env=None):
    cmd = [sys.executable, "-m", "tilec.cli", "tune", str(HERE / "tune_case.py"), *CLI_MIX, "--storage", url,
           "--study", study, "--no-progress", "--expected-calls", "10", *extra]
    return subprocess.Popen(cmd, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _study_exists(url, study) -> bool:
    """Read-only: has the tuning process created the study (and so every table) yet?"""
    path = url.removeprefix("sqlite:///")
    if not Path(path).exists():
        return False
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return bool(con.execute("SELECT 1 FROM studies WHERE study_name = ?", (study,)).fetchall())
        finally:
            con.close()
    except sqlite3.Error:
        return False


def _wait_for(url, study, pred, proc, limit=90.0):
    """Poll the study until pred(trials) holds (while `proc` runs)."""
    end = time.time() + limit
    trials = []
    while time.time() < end:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
        if not _study_exists(url, study):
            continue
        trials = optuna.load_study(study_name=study, storage=url).get_trials(deepcopy=False)
        if pred(trials):
            return trials
    raise AssertionError(f"the study never got there: {[(t.number, t.state.name) for t in trials]}")


def _measured_once(trials) -> list[tuple]:
    """The configs measured (not copied); asserts none was measured twice."""
    measured = [_cfg(t) for t in trials
                if t.state in (COMPLETE, FAIL) and "duplicate_of" not in t.user_attrs
                and ("times" in t.user_attrs or "failure" in t.user_attrs)]
    assert len(measured) == len(set(measured)), measured
    return measured


# -- faults in candidates -------------------------------------------------------------------------

@pytest.mark.slow
def test_faults_become_failed_trials_and_the_study_goes_on(tmp_path, monkeypatch):
    """Every config of the 16-point grid once (no seeds); six of them crash, hang or fail like a GPU."""
    faults = {(16, 16, 16, 4): ("segv", "died of SIGSEGV (a segmentation fault"),
              (16, 16, 16, 8): ("abort", "died of SIGABRT"),
              (16, 16, 32, 4): ("exit", "exited with status 3"),
              (16, 16, 32, 8): ("hang", f"timed out after {TIMEOUT} s (compile, check and time of every shape); "
                                        f"its worker process was killed"),
              (32, 16, 16, 4): ("ima", "illegal memory access"),
              (32, 16, 16, 8): ("oom", "OutOfMemoryError: CUDA out of memory"),
              (32, 16, 32, 4): ("kill", "died of SIGKILL (killed from outside: out of host memory (the OOM "
                                        "killer)?), twice")}
    monkeypatch.setenv(FAULT_ENV, ";".join(f"{a}@BM={bm},BN={bn},BK={bk},warps={w}"
                                           for (bm, bn, bk, w), (a, _) in faults.items()))
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=16, seeds=0, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'f.db'}", timeout=TIMEOUT, jobs=2, recipe=CASE)
    trials = tuned.study.trials
    measured = [t for t in trials if measured_itself(t)]  # with two jobs, the grid may propose its last point twice
    assert len(measured) == 16 and len({_cfg(t) for t in measured}) == 16
    assert all("duplicate_of" in t.user_attrs for t in trials if t.number not in {m.number for m in measured})
    for t in trials:
        key = (t.params["BM"], t.params["BN"], t.params["BK"], t.params["warps"])
        if key in faults:
            assert t.state == FAIL and faults[key][1] in t.user_attrs["failure"], (key, t.user_attrs)
        else:
            assert t.state == COMPLETE and set(t.user_attrs["times"]) == {"K=24,M=16,N=20", "K=24,M=40,N=20"}
    for o in tuned.options:
        assert all((c["BM"], c["BN"], c["BK"], c["warps"]) not in faults for c in o.configs.values())


@needs_fork
def test_a_worker_killed_from_outside_is_retried_once(tmp_path):
    marker = tmp_path / "killed"

    def timer(kernel, inputs):  # the first measurement's worker is killed, as the OOM killer would
        if not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return 1e-6
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, timer=timer,
                    storage=f"sqlite:///{tmp_path / 'k.db'}", jobs=1)
    assert marker.exists()
    assert [t.state for t in tuned.study.trials] == [COMPLETE, COMPLETE]


@pytest.mark.parametrize("fault,match", [
    ("raise", r"the reference failed while a measuring worker prepared the mix's inputs and reference "
              r"outputs: ValueError: no reference here"),
    ("segv", r"a measuring worker died of SIGSEGV .* while it prepared the mix's inputs and reference outputs: "
             r"the reference crashed it"),
    ("hang", r"a measuring worker took over 2 s to prepare the mix's inputs and reference outputs: the "
             r"reference hangs, or give a larger timeout="),
])
@needs_fork
@pytest.mark.slow
def test_a_reference_that_fails_stops_tuning_with_the_reason(tmp_path, fault, match):
    def reference(a, w):
        if fault == "raise":
            raise ValueError("no reference here")
        if fault == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(3600)
    s, args = tune_case.make()
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(tc.ArgumentError, match=match):
        tc.tune(s, tune_case.MIX, trials=2, args=args, reference=reference, storage=url, timeout=2, jobs=1)
    assert not (tmp_path / "r.db").exists()                           # stopped before any trial started


@needs_fork
@pytest.mark.slow
def test_parallel_jobs_measure_each_config_once(tmp_path):
    """Three trials of one config run side by side with two jobs: one measures, the others wait and copy."""
    log = tmp_path / "measured.log"

    def timer(kernel, inputs):
        with open(log, "a") as f:
            f.write(json.dumps([sorted(kernel.config.items()), inputs[0].shape[0]]) + "\n")
        time.sleep(0.3)
        return 1e-6 * kernel.config["BM"]
    url = f"sqlite:///{tmp_path / 'p.db'}"
    same = {"BM": 32, "BN": 16, "BK": 16, "warps": 4}
    st = optuna.create_study(study_name="p", storage=url)
    for _ in range(3):
        st.enqueue_trial(same)
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, storage=url,
                    study_name="p", timer=timer, jobs=2)
    lines = log.read_text().splitlines()
    assert len(lines) == len(set(lines))                              # no (config, shape) timed twice
    first, *copies = tuned.study.trials[:3]
    assert first.state == COMPLETE and "duplicate_of" not in first.user_attrs
    assert [(t.state, t.user_attrs["duplicate_of"], t.value) for t in copies] == [(COMPLETE, 0, first.value)] * 2
    _measured_once(tuned.study.trials)


@pytest.mark.slow
def test_parallel_jobs_measure_no_more_configs_than_trials(tmp_path):
    """On the H200, `--trials 24` with 4 jobs measured 27 configs: the last jobs each started a trial
    while 23 were measured. Jobs now start no more trials than configs are still wanted."""
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=5, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'j.db'}", timer=tune_case.slow_timer, jobs=3)
    assert sum(t["measured"] for t in tuned.trials()) == 5


# -- signals ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_sigterm_and_sigint_fail_the_running_trial_requeue_it_and_resume(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    results = 0
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        p = _cli_tune(url, "sig", "--trials", "8", "--jobs", "1", env=_env(**{FAULT_ENV: "sleep=0.8"}))
        before = results

        def ready(ts, before=before):
            done = sum(t.state == COMPLETE for t in ts)
            return done > before and any(t.state == RUNNING and len(t.params) == 4 for t in ts)
        _wait_for(url, "sig", ready, p)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
        assert p.returncode == code, (out, err)
        assert f"interrupted ({sig.name}); finished trials are stored, a trial that was running is failed" in err
        trials = optuna.load_study(study_name="sig", storage=url).trials
        assert not [t for t in trials if t.state == RUNNING]
        stopped = [t for t in trials if t.user_attrs.get("interrupted") == sig.name]
        assert stopped and all(t.state == FAIL for t in stopped)
        for t in stopped:  # queued again, with the same config
            (retry,) = [r for r in trials if r.user_attrs.get("retry_of") == t.number]
            assert retry.state == WAITING and retry.system_attrs["fixed_params"] == t.params
        results = sum(t.state == COMPLETE for t in trials)
    s, args = tune_case.make()  # resume (in this process: the same study, the same trials)
    tuned = tc.tune(s, tune_case.MIX, trials=8, args=args, reference=tune_case.reference, storage=url,
                    study_name="sig", expected_calls=10, recipe=CASE)
    trials = tuned.study.trials
    assert not [t for t in trials if t.state in (RUNNING, WAITING)]   # the retries ran
    assert sum(measured_itself(t) for t in trials) == 8                 # interrupted trials (and repeats) do not count
    for t in trials:
        if "retry_of" in t.user_attrs:
            assert t.state == COMPLETE
    _measured_once(trials)
    from tilec.tune.trials import trial_rows
    notes = " ".join(r["note"] for r in trial_rows(tuned.study))
    assert "interrupted (SIGTERM); queued again" in notes and "retry of #" in notes


def _processes_with(mark: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if mark.encode() in (d / "environ").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


@pytest.mark.slow
def test_sigkill_of_the_tuning_process_leaves_no_worker_and_loses_no_trial(tmp_path):
    url, mark = f"sqlite:///{tmp_path / 'k.db'}", f"TILEC_TEST_MARK={uuid.uuid4().hex}"
    key, value = mark.split("=")
    p = subprocess.Popen([sys.executable, str(HERE / "tune_case.py"), url, "4", "worker", "killed"],
                         env=_env(**{FAULT_ENV: "sleep=0.8", key: value}), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    trials = _wait_for(url, "killed", lambda ts: any(t.state == COMPLETE for t in ts)
                       and any(t.state == RUNNING and len(t.params) == 4 for t in ts), p)
    p.kill()
    p.communicate()
    end = time.time() + 10
    while _processes_with(mark) and time.time() < end:
        time.sleep(0.1)
    assert _processes_with(mark) == []                                 # zygote and workers died with it
    trials = optuna.load_study(study_name="killed", storage=url).trials
    killed = [t for t in trials if t.state == RUNNING]
    assert any(len(t.params) == 4 for t in killed)
    time.sleep(3.5)  # three missed heartbeats (heartbeat=1)
    s, args = tune_case.make()
    tc.tune(s, tune_case.MIX, trials=4, args=args, reference=tune_case.reference, storage=url,
            study_name="killed", heartbeat=1, recipe=CASE)
    trials = optuna.load_study(study_name="killed", storage=url).trials
    assert not [t for t in trials if t.state in (RUNNING, WAITING)]
    for k in killed:
        assert trials[k.number].state == FAIL
        (retry,) = [t for t in trials if t.system_attrs.get("failed_trial") == k.number]
        assert retry.state == COMPLETE and (retry.params == k.params or len(k.params) < 4)
    _measured_once(trials)


# -- worker processes that start fresh (spawn), and what a pool refuses ------------------------------

@pytest.mark.slow
def test_spawned_workers_rebuild_the_schedule_from_the_file_and_survive_faults(tmp_path, monkeypatch, capfd):
    """What a GPU host does (workers start in a fresh interpreter from the recipe file), on a CPU. The
    zygote starts without runpy's RuntimeWarning (seen on the H200 with `python -m tilec.tune.workers`)."""
    monkeypatch.setenv(START_ENV, "spawn")
    monkeypatch.setenv(FAULT_ENV, "segv@warps=8")
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=4, args=args, storage=f"sqlite:///{tmp_path / 'sp.db'}", jobs=1,
                    recipe=CASE)
    trials = tuned.study.trials
    assert len(trials) == 4 and any(t.state == COMPLETE for t in trials)
    for t in trials:
        if t.params["warps"] == 8:
            assert t.state == FAIL and "died of SIGSEGV" in t.user_attrs["failure"]
        else:
            assert t.state == COMPLETE
    assert "RuntimeWarning" not in capfd.readouterr().err


def test_a_zygote_that_does_not_start_in_time_is_an_error(monkeypatch):
    monkeypatch.setenv(START_ENV, "spawn")
    monkeypatch.setattr(workers, "START_TIMEOUT", 0.2)   # a fresh interpreter needs seconds to import torch
    s, args = tune_case.make()
    pool = workers.make_pool(workers.Job(s, args, tune_case.MIX, tune_case.reference), 1, 30, recipe=CASE)
    with pytest.raises(tc.TilecError, match=r"the process that starts measuring workers did not start within "
                                            r"0.2 s"):
        pool.start()
    pool.close()


@needs_fork
def test_malformed_times_from_a_worker_fail_the_trial(tmp_path, monkeypatch):
    from tilec.tune.measure import Measurer
    monkeypatch.setattr(Measurer, "measure", lambda self, config: {"K=24,M=16,N=20": "soon"})
    s, args = tune_case.make()
    with pytest.raises(tc.ArgumentError, match=r"no config completed in study tilec-[0-9a-f]{16}; reasons: \[\"its worker returned no time "
                                               r"for every shape: \{'K=24,M=16,N=20': 'soon'\}\"\]"):
        tc.tune(s, tune_case.MIX, trials=1, args=args, reference=tune_case.reference, jobs=1,
                storage=f"sqlite:///{tmp_path / 't.db'}")


@pytest.mark.slow
def test_a_recipe_that_builds_another_schedule_is_refused(tmp_path, monkeypatch):
    case = tmp_path / "drifting.py"
    case.write_text((HERE / "tune_case.py").read_text().replace(
        'tc.knob("BM", [16, 32])', 'tc.knob("BM", [16, 64] if sys.argv[0] == "-c" else [16, 32])'))  # the zygote
    monkeypatch.setenv(START_ENV, "spawn")
    s, args = tune_case.make()
    job = workers.Job(s, args, tune_case.MIX, tune_case.reference)
    pool = workers.make_pool(job, 1, 30, recipe=str(case))
    with pytest.raises(tc.ArgumentError, match=r"could not rebuild the schedule from .*drifting.py: ArgumentError: "
                                               r".*make\(\) built another schedule in a worker process"):
        pool.start()
    pool.close()


def test_pool_refusals(monkeypatch, tmp_path):
    s, args = tune_case.make()
    job = workers.Job(s, args, tune_case.MIX, tune_case.reference)
    monkeypatch.setenv(START_ENV, "thread")
    with pytest.raises(tc.ArgumentError, match="TILEC_TUNE_START='thread': expected fork or spawn"):
        workers.make_pool(job, 1, 5)
    monkeypatch.setenv(START_ENV, "spawn")
    with pytest.raises(tc.ArgumentError, match=r"TILEC_TUNE_START=spawn needs a recipe: tc.tune\(..., recipe=FILE\)"):
        workers.make_pool(job, 1, 5)
    pool = workers.make_pool(workers.Job(s, args, tune_case.MIX, tune_case.reference, timer=lambda k, x: 1.0),
                             1, 5, recipe=str(HERE / "tune_case.py"))
    with pytest.raises(tc.ArgumentError, match="a spawned worker process cannot take this timer"):
        pool.start()
    pool.close()
    monkeypatch.delenv(START_ENV)
    from tilec.runtime import triton_compat
    monkeypatch.setattr(triton_compat, "target", lambda: "cuda")   # a GPU host, without a recipe
    monkeypatch.setattr(workers, "InProcess", lambda job: "in-process")
    with pytest.warns(RuntimeWarning, match="measures candidates in this process, unisolated"):
        assert workers.make_pool(job, 1, 5) == "in-process"


@needs_fork
def test_a_dead_zygote_is_a_clear_error():
    s, args = tune_case.make()
    pool = workers.make_pool(workers.Job(s, args, tune_case.MIX, tune_case.reference), 1, 30)
    pool.start()
    try:
        os.kill(pool._zpid, signal.SIGKILL)    # the process that forks workers (and its worker) die
        with pytest.raises(CandidateFailure, match="the worker process measuring it died"):
            pool.measure({"BM": 16, "BN": 16, "BK": 16, "warps": 4})
        with pytest.raises(tc.TilecError, match="the process that starts measuring workers died; run the "
                                                "same command again to resume the study"):
            pool.measure({"BM": 16, "BN": 16, "BK": 16, "warps": 4})
    finally:
        pool.close()


def test_bad_tune_arguments(tmp_path):
    s, args = tune_case.make()
    url = f"sqlite:///{tmp_path / 'a.db'}"
    for kw, match in (({"jobs": -1}, r"jobs must be an int >= 0 \(0: measure in this process\), got -1"),
                      ({"timeout": float("nan")}, "timeout must be a positive number of seconds, got nan"),
                      ({"recipe": str(tmp_path / "nope.py")}, "is not a file; give a Python file defining make"),
                      ({"heartbeat": 0}, "heartbeat must be a positive int")):
        with pytest.raises(tc.ArgumentError, match=match):
            tc.tune(s, tune_case.MIX, trials=1, args=args, storage=url, **kw)


def test_in_process_mode_still_measures(tmp_path):
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, jobs=0,
                    storage=f"sqlite:///{tmp_path / 'i.db'}")
    assert [t.state for t in tuned.study.trials] == [COMPLETE, COMPLETE]


# -- study names and stale studies ----------------------------------------------------------------

def test_study_name_covers_knob_choices_and_the_shared_limit(tmp_path):
    s, args = _make()
    s2, args2 = _make(bm=(16, 64))
    assert s.fingerprint() == s2.fingerprint()                        # the choices are not in the fingerprint
    assert study_key(s, tune_case.MIX, args) != study_key(s2, tune_case.MIX, args2)
    assert study_key(s, tune_case.MIX, args) != study_key(s, tune_case.MIX, args, shared_limit=1024)
    assert study_key(s, tune_case.MIX, args) == study_key(*_make()[:1], tune_case.MIX, _make()[1],
                                                            shared_limit=SHARED_LIMIT)
    url = f"sqlite:///{tmp_path / 'n.db'}"
    st = optuna.create_study(study_name="mine", storage=url)
    dists = {n: optuna.distributions.CategoricalDistribution(list(k.choices)) for n, k in s.knobs.items()}
    st.add_trial(optuna.trial.create_trial(params={"BM": 32, "BN": 16, "BK": 16, "warps": 4}, distributions=dists,
                                           value=1.0, user_attrs={"times": {}}))
    with pytest.raises(tc.ArgumentError, match=r"study mine holds trials of another search space \(trial #0 has "
                                               r"BM in \[16, 32\]; this schedule has BM in \[16, 64\]"):
        tc.tune(s2, tune_case.MIX, trials=2, args=args2, storage=url, study_name="mine")
    optuna.create_study(study_name="up", storage=url, direction="maximize")
    with pytest.raises(tc.ArgumentError, match="study up is not a tilec study"):
        tc.tune(s, tune_case.MIX, trials=2, args=args, storage=url, study_name="up")


# -- hostile storages and mixes ------------------------------------------------------------------

def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _foreign_db(p: Path) -> Path:
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('ada')")
    con.commit()
    con.close()
    return p


def _incompatible_optuna_db(p: Path) -> Path:
    optuna.create_study(study_name="old", storage=f"sqlite:///{p}")
    con = sqlite3.connect(p)
    con.execute("UPDATE version_info SET schema_version = 999, library_version = '99.0.0'")
    con.execute("UPDATE alembic_version SET version_num = 'v99.0.0.a'")
    con.commit()
    con.close()
    return p


@pytest.mark.parametrize("make,match", [
    (lambda d: "notaurl", r"storage 'notaurl' is not a database URL .*; expected sqlite:///path/to/tuning.db"),
    (lambda d: "redis://localhost/0", r"tilec keeps studies in SQLite, PostgreSQL or MySQL, not 'redis'"),
    (lambda d: "sqlite://", r"is an in-memory database: its study would vanish"),
    (lambda d: f"sqlite:///{d}", r"names a directory \(.*\); give a file in it, e.g. sqlite:///.*tuning.db"),
    (lambda d: f"sqlite:///{d}/no/such/dir/t.db", r"the directory .*no/such/dir does not exist; create it"),
    (lambda d: f"sqlite:///{(d / 'noise.db').write_bytes(os.urandom(4096)) and d / 'noise.db'}",
     r"is not a SQLite database \(it does not start with SQLite's header\); tilec leaves it untouched"),
    (lambda d: f"sqlite:///{(d / 'torn.db').write_bytes(b'SQLite format 3' + bytes(1) + os.urandom(4000)) and d / 'torn.db'}",
     r"is damaged or not a SQLite database \(sqlite: .*\); tilec leaves it untouched"),
    (lambda d: f"sqlite:///{_foreign_db(d / 'app.db')}",
     r"is the database of something else \(its tables: users; no optuna study tables\); tilec leaves it untouched"),
    (lambda d: f"sqlite:///{_incompatible_optuna_db(d / 'old.db')}", r"storage sqlite:///.*old.db: .*optuna"),
    (lambda d: "postgresql://tilec:secret@127.0.0.1:1/none",
     r"cannot connect to storage postgresql://tilec:\*\*\*@127.0.0.1:1/none within 10 s: .*is the server running"),
    (lambda d: "postgresql://", r"cannot connect to storage postgresql:// within 10 s"),
    (lambda d: "mysql://u@127.0.0.1/none", r"needs a database driver that is not installed"),
])
@pytest.mark.slow
def test_hostile_storages_are_refused_and_left_untouched(tmp_path, make, match):
    url = make(tmp_path)
    if url.startswith("postgresql") and not _pg_driver():
        pytest.skip("no PostgreSQL driver installed (psycopg2 or psycopg)")
    files = {p: _digest(p) for p in tmp_path.rglob("*") if p.is_file()}
    s, args = tune_case.make()
    t0 = time.time()
    with pytest.raises(tc.ArgumentError, match=match):
        tc.tune(s, tune_case.MIX, trials=1, args=args, storage=url)
    assert time.time() - t0 < 15
    assert {p: _digest(p) for p in tmp_path.rglob("*") if p.is_file()} == files   # nothing written, nothing lost


def _pg_driver() -> bool:
    import importlib.util
    return any(importlib.util.find_spec(m) for m in ("psycopg2", "psycopg"))


def test_more_storage_refusals(tmp_path, monkeypatch):
    with pytest.raises(tc.ArgumentError, match=r"storage must be a database URL string, e.g. sqlite:///"):
        tstorage.check_storage("")
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    with pytest.raises(tc.ArgumentError, match=r"pipe.db, which is not a regular file; give a SQLite file"):
        tstorage.check_storage(f"sqlite:///{fifo}")
    ro = tmp_path / "ro.db"
    ro.write_bytes(b"")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(tc.ArgumentError, match=r"ro.db is not writable; give a file you can write"):
        tstorage.check_storage(f"sqlite:///{ro}")
    monkeypatch.undo()
    import sqlalchemy.exc

    def refuse(*a, **k):
        raise sqlalchemy.exc.OperationalError("CREATE TABLE", {}, Exception("disk I/O error"))
    monkeypatch.setattr(tstorage, "HeartbeatStorage", refuse)
    monkeypatch.setattr(tstorage.time, "sleep", lambda s: None)
    with pytest.raises(tc.ArgumentError, match=r"storage sqlite:///.*fine.db cannot be opened as an optuna "
                                               r"storage: .*disk I/O error"):
        tstorage.make_storage(f"sqlite:///{tmp_path / 'fine.db'}")


def test_a_server_that_does_not_answer_is_an_error_within_the_connect_timeout(monkeypatch):
    if not _pg_driver():
        pytest.skip("no PostgreSQL driver installed (psycopg2 or psycopg)")
    monkeypatch.setattr(tstorage, "CONNECT_TIMEOUT", 1)
    t0 = time.time()
    with pytest.raises(tc.ArgumentError, match=r"cannot connect to storage postgresql://x@10.255.255.1:5432/db within 1 s"):
        tstorage.check_storage("postgresql://x@10.255.255.1:5432/db")   # unroutable: no answer at all
    assert time.time() - t0 < 8


def test_show_refuses_a_foreign_database_and_creates_nothing(tmp_path):
    from tilec.cli import main
    db = _foreign_db(tmp_path / "app.db")
    before = _digest(db)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["show", "--storage", f"sqlite:///{db}"]) == 2
    assert err.getvalue().startswith("error: storage sqlite:///") and "database of something else" in err.getvalue()
    assert _digest(db) == before
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["show", "--storage", f"sqlite:///{tmp_path / 'none.db'}"]) == 0
    assert "no studies (the file does not exist)" in out.getvalue() and not (tmp_path / "none.db").exists()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["show", "--storage", f"sqlite:///{tmp_path / 'none.db'}", "--study", "x"]) == 2
    assert "error: no study named x in sqlite:///" in err.getvalue() and "(the file does not exist)" in err.getvalue()
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("text,fixed,match", [
    ("M=abc", "", r"size M='abc' is not an int; sizes are positive ints, e.g. M=256"),
    ("M=1.5:2", "", r"size M='1.5' is not an int"),
    ("M=0", "", r"size M=0 must be a positive int"),
    ("M=16:nan", "", r"a weight must be a positive number \(finite, not zero\), got 'nan'"),
    ("M=16:inf", "", r"a weight must be a positive number \(finite, not zero\), got 'inf'"),
    ("M=16:-2", "", r"a weight must be a positive number \(finite, not zero\), got '-2'"),
    ("M=16:0", "", r"a weight must be a positive number \(finite, not zero\), got '0'"),
    ("M=16:x", "", r"weight 'x' is not a number; weights are positive numbers"),
    ("abc", "", r"cannot read 'abc': expected NAME=value:weight,..., e.g. M=256:8,1536:1"),
    ("M=16;N=3", "", r"shape 'M=16;N=3' has no weight; write sizes:weight, e.g. M=256;N=64:8"),
    ("M=16", "K", r"cannot read fixed size 'K': expected NAME=int, e.g. M=256"),
    ("M=16", "K=4.5", r"fixed size K='4.5' is not an int"),
    (None, "", r"ShapeMix.parse: expected strings"),
])
def test_shape_mix_parse_refuses_what_it_cannot_read(text, fixed, match):
    with pytest.raises(tc.ArgumentError, match=match):
        tc.ShapeMix.parse(text, fixed)


@pytest.mark.parametrize("shapes,match", [
    ([({"M": 16}, float("nan"))], r"entry 0's weight must be a positive number, got nan"),
    ([({"M": 16}, float("inf"))], r"entry 0's weight must be a positive number, got inf"),
    ([({"M": 16}, -1.0)], r"entry 0's weight must be a positive number, got -1.0"),
    ([({"M": 16.0}, 1)], r"size M of entry 0 must be a positive int, got 16.0"),
    ([({"M": "16"}, 1)], r"size M of entry 0 must be a positive int, got '16'"),
    ([({"M m": 16}, 1)], r"entry 0 names size 'M m'; size names are identifiers like M"),
    ([({"M": 16}, 1e308), ({"M": 32}, 1e308)], r"the weights add up to inf"),
])
def test_shape_mix_refuses_bad_sizes_and_weights(shapes, match):
    with pytest.raises(tc.ArgumentError, match=match):
        tc.ShapeMix(shapes)


# -- nothing read from a study is executed ---------------------------------------------------------

def test_hostile_study_contents_are_data_never_code(tmp_path):
    pwned = tmp_path / "PWNED"
    code = f"__import__('pathlib').Path({str(pwned)!r}).touch()"
    url = f"sqlite:///{tmp_path / 'h.db'}"
    s, args = tune_case.make()
    name = study_key(s, tune_case.MIX, args)
    st = optuna.create_study(study_name=name, storage=url)
    dists = {n: optuna.distributions.CategoricalDistribution(list(k.choices)) for n, k in s.knobs.items()}
    failed = {"BM": 16, "BN": 16, "BK": 16, "warps": 4}
    faked = {"BM": 32, "BN": 32, "BK": 32, "warps": 8}
    st.add_trial(optuna.trial.create_trial(state=FAIL, params=failed, distributions=dists,
                                           user_attrs={"failure": code}))
    st.add_trial(optuna.trial.create_trial(params=faked, distributions=dists, value=1e-12,
                                           user_attrs={"times": code, "duplicate_of": code, "seed": code}))
    st.enqueue_trial({"BM": code, "BN": 16, "BK": 16, "warps": 4}, user_attrs={"seed": code})
    st.set_user_attr("tuning_seconds", code)
    st.enqueue_trial(failed)
    st.enqueue_trial(faked)
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, storage=url,
                    timer=lambda kernel, inputs: 1e-6 * kernel.config["BM"], jobs=1)
    trials = tuned.study.trials
    assert trials[2].state == FAIL and "not a config of this schedule" in trials[2].user_attrs["failure"]
    assert trials[3].user_attrs["failure"] == code and trials[3].user_attrs["duplicate_of"] == 0  # copied as text
    assert trials[4].state == COMPLETE and trials[4].value > 1e-9 and "duplicate_of" not in trials[4].user_attrs
    assert all(o.T > 1e-9 for o in tuned.options)                     # the fake time never reached a plan
    from tilec.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["show", "--storage", url, "--study", name]) == 0
    assert code in out.getvalue()                                     # printed as data
    assert not pwned.exists()


def test_no_eval_exec_or_unpickling_in_the_tuner_and_cli():
    """Static: the tuner and the CLI never evaluate or unpickle anything (whatever a study holds)."""
    files = [*(REPO / "tilec" / "tune").glob("*.py"), REPO / "tilec" / "cli.py"]
    banned = {"eval", "exec", "pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "literal_eval",
              "__import__", "compile"}
    for f in files:
        names = {tok.string for tok in tokenize.generate_tokens(io.StringIO(f.read_text()).readline)
                 if tok.type == tokenize.NAME}
        assert not names & banned, (f, names & banned)


# -- eight workers on one PostgreSQL study ----------------------------------------------------------

# forks n children of one process that imported tilec already, each running the CLI (`tilec tune
# ... --worker`); the same as n `tilec tune` processes, without paying n imports of torch
LAUNCHER = """
import json, os, sys
import optuna, sqlalchemy.dialects.postgresql  # noqa: F401 - imported once, before the forks
import tilec.tune.study  # noqa: F401
from tilec.cli import main
from tilec.runtime import triton_compat
triton_compat.triton()
argv, n = json.loads(sys.argv[1]), int(sys.argv[2])
pids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = main(argv)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    pids.append(pid)
print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]))
"""


@pytest.mark.skipif(not os.environ.get("TILEC_TEST_POSTGRES"),
                    reason="set TILEC_TEST_POSTGRES=postgresql://... (.ci/run starts a server)")
def test_eight_workers_share_a_postgres_study(tmp_path):
    url = os.environ["TILEC_TEST_POSTGRES"]
    name = f"eight-{os.getpid()}-{int(time.time())}"
    case = tmp_path / "eight_case.py"  # tune_case.py, checked on one shape and timed by a stand-in timer
    case.write_text((HERE / "tune_case.py").read_text() + (
        "\n\nfrom tilec.tune import measure  # noqa: E402\n"
        "measure.default_timer = lambda kernel, inputs: 1e-6 * kernel.config['BM']\n"))
    argv = ["tune", str(case), "--mix", "M=40", "--fixed", "K=24,N=20", "--storage", url, "--study", name,
            "--no-progress", "--trials", "40", "--jobs", "1", "--worker"]
    p = subprocess.run([sys.executable, "-c", LAUNCHER, json.dumps(argv), "8"], env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout.splitlines()[-1]) == [0] * 8, p.stderr[-3000:]
    trials = optuna.load_study(study_name=name, storage=url).trials
    assert not [t for t in trials if t.state in (RUNNING, WAITING)]
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(trials)))               # no trial number lost or doubled
    measured = _measured_once(trials)                                 # no config measured twice
    assert len(set(measured)) == 16                                   # and none of the grid lost
    assert all(t.state == COMPLETE for t in trials)


# A worker killed after `study.ask()` made its trial but before optuna's heartbeat thread first ran
# (CI flake of test_tune.py::test_resume_after_a_killed_worker): optuna never fails a trial that has
# no heartbeat, so it stayed RUNNING for ever. tilec writes the first beat when the trial starts.
KILLED_BEFORE_THE_FIRST_BEAT = """
import os, signal, sys
import optuna.study._optimize
sys.path.insert(0, sys.argv[2])
import tune_case
optuna.study._optimize.get_heartbeat_thread = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
tune_case.run(sys.argv[1], 4, True, "beatless")
"""


def _killed_before_the_first_beat(storage):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-c", KILLED_BEFORE_THE_FIRST_BEAT, storage, str(HERE)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stdout + p.stderr
    st = optuna.load_study(study_name="beatless", storage=storage)
    assert [t.state for t in st.trials] == [RUNNING]
    return st.trials[0]


@pytest.mark.slow
def test_a_worker_killed_before_its_first_heartbeat_leaves_no_running_trial(tmp_path):
    storage = f"sqlite:///{tmp_path / 'b.db'}"
    dead = _killed_before_the_first_beat(storage)
    time.sleep(3.5)  # three heartbeats of 1 s missed
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=4, args=args, reference=tune_case.reference, storage=storage,
                    study_name="beatless", timer=tune_case.slow_timer, heartbeat=1)
    states = {t.number: t.state for t in tuned.study.trials}
    assert states[dead.number] == FAIL and RUNNING not in states.values(), states


@pytest.mark.slow
def test_a_running_trial_that_never_beat_is_failed_after_the_beatless_limit(tmp_path):
    db = tmp_path / "b.db"
    dead = _killed_before_the_first_beat(f"sqlite:///{db}")
    with contextlib.closing(sqlite3.connect(db)) as con, con:  # as a worker of optuna alone leaves it
        con.execute("DELETE FROM trial_heartbeats")
        con.execute("UPDATE trials SET datetime_start = datetime(datetime_start, ?) WHERE trial_id = ?",
                    (f"-{tstorage.BEATLESS_LIMIT + 10} seconds", dead._trial_id))
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=4, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{db}", study_name="beatless", timer=tune_case.slow_timer, heartbeat=1)
    states = {t.number: t.state for t in tuned.study.trials}
    assert states[dead.number] == FAIL and RUNNING not in states.values(), states
