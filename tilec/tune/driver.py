"""The tuner driver behind `tc.tune` (study.py): one tuning run as a class, one method per phase, so
that each phase can be read and tested alone. What the phases share (the study, the pool of
measuring workers, the space, the progress bar, whether the space is exhausted) is attributes.

The phases, in the order `tc.tune` runs them:

1. `Tuning(...)` checks and normalizes the arguments (`_check`), and names the study and its storage;
   nothing starts before this has refused what is out of range.
2. `start()` builds the sampler (a grid where the whole space fits the trials) and the worker pool
   (after the per-GPU worker processes of `gpus=`, which `tc.tune` runs).
3. `open_study()` opens the study (creates it, or loads it and refuses a foreign one) and seeds a new
   one with the cost model's configs.
4. `rounds()` runs `study.optimize` in rounds of as many trials as configs are still wanted; each trial
   is `objective(trial)`, which `settle`s first (copies the result of a trial that measured, or is
   measuring, the same config), else measures the config; a repeat `refill`s the queue with the cost
   model's best untried config; an interrupted trial is `requeue`d.
5. `measure()` wraps 3-4: signals, closing the pool and the bar, the tuning seconds; it raises
   `TuningInterrupted`, or returns why fewer configs than `trials` were measured (`tc.tune` warns it,
   so that the warning points at its caller).
6. `choose()` builds the plan from the completed trials (`study._choose`).
"""

from __future__ import annotations

import datetime
import math
import sys
import threading
import time
import warnings
from pathlib import Path

import optuna

from tilec.errors import ArgumentError
from tilec.runtime import triton_compat
from tilec.runtime.kernel import Kernel
from tilec.schedule.schedule import Schedule
from tilec.tune import learned
from tilec.tune import study as _study
from tilec.tune.cost import analysis_for, terms
from tilec.tune.measure import CandidateFailure
from tilec.tune.mix import ShapeMix
from tilec.tune.progress import interpreter_note
from tilec.tune.space import SearchSpace
from tilec.tune.storage import check_storage, default_storage, make_storage, unreadable_study
from tilec.tune.trials import REFUSED
from tilec.tune.workers import Interrupted, Job, make_pool

_RUNNING = optuna.trial.TrialState.RUNNING


class Tuning:
    """One `tc.tune` call's run (the module docstring lists its phases). The constructor takes
    `tc.tune`'s arguments and checks them; attributes hold the normalized ones."""

    def __init__(self, sched, mix, trials, *, args, reference, storage, expected_calls, timer, seed, seeds,
                 study_name, worker, shared_limit, heartbeat, progress, jobs, timeout, recipe, cost_model="learned",
                 inputs=None):
        self.cost_model, self.model, self.inputs = cost_model, None, inputs
        self.sched, self.mix, self.trials, self.reference, self.timer = sched, mix, trials, reference, timer
        self.expected_calls, self.seed, self.seeds, self.worker = expected_calls, seed, seeds, worker
        self.heartbeat, self.progress, self.jobs, self.timeout, self.recipe = heartbeat, progress, jobs, timeout, recipe
        self._check()
        self.args = list(args) if args is not None else sched.placeholders + list(sched.outputs)
        mix.check_sizes(sched, "the schedule", "put the common ones in fixed=")
        if self.reference is None:
            from tilec.schedule.schedule import create_schedule
            self.reference = Kernel(create_schedule(list(sched.outputs)), self.args)
        self.space = SearchSpace(sched, mix) if shared_limit is None else SearchSpace(sched, mix, shared_limit)
        self.name = study_name or _study.study_key(sched, mix, self.args, self.space.shared_limit, inputs)
        self.url = storage or default_storage()
        check_storage(self.url)  # refuse what is not a storage before starting anything
        self.keys = [ShapeMix.key(s) for s, _ in mix]
        self.study = None
        self.pool = None
        self.bar = None
        self.exhausted = False     # set when no untried config is left that can be measured
        self.untried_order: list = []  # the cost model's order of the feasible configs, computed at the first repeat
        self.refill_lock = threading.Lock()
        self.total_s = 0.0

    def _check(self) -> None:
        """Refuse arguments out of range, in `tc.tune`'s documented order; fill in `progress` and `jobs`."""
        if not isinstance(self.sched, Schedule):
            raise ArgumentError(f"argument 1, 'sched' to tune: expected a Schedule, got {type(self.sched).__name__}")
        if not isinstance(self.mix, ShapeMix):
            raise ArgumentError(f"tune: expected a tc.ShapeMix, got {type(self.mix).__name__}")
        trials, progress, timeout, recipe = self.trials, self.progress, self.timeout, self.recipe
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ArgumentError(f"tune: trials must be a positive int, got {trials!r}")
        if progress is not None and not isinstance(progress, bool):
            raise ArgumentError(f"tune: progress must be True, False or None (shown on a terminal), got {progress!r}")
        self.quiet = progress is False  # asked for no bar: no interpreter note either
        # looked up in study.py at call time: tests stand in for a terminal there
        self.progress = _study._stderr_is_terminal() if progress is None else progress
        self.jobs = jobs = _study.default_jobs() if self.jobs is None else self.jobs
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
            raise ArgumentError(f"tune: jobs must be an int >= 0 (0: measure in this process), got {jobs!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ArgumentError(f"tune: timeout must be a positive number of seconds, got {timeout!r}")
        if self.cost_model not in ("learned", "analytic"):
            raise ArgumentError(f"tune: cost_model must be 'learned' (the analytic model corrected by this device's "
                                f"stored trials, where they order configs better) or 'analytic', got {self.cost_model!r}")
        if self.inputs is not None and not callable(self.inputs):
            raise ArgumentError(f"tune: inputs must be a function inputs(sizes, device) returning the input tensors, "
                                f"got {type(self.inputs).__name__}")
        if recipe is not None and not Path(recipe).is_file():
            raise ArgumentError(f"tune: recipe {recipe!r} is not a file; give a Python file defining make()")

    # -- 2. the sampler and the workers ------------------------------------------------------------

    def start(self) -> None:
        """The sampler and the (not yet started) worker pool."""
        trials = self.trials
        self.grid = self.space.size <= trials
        self.sampler = (_study._Grid(self.space.knobs, seed=self.seed) if self.grid else
                        optuna.samplers.TPESampler(multivariate=True, seed=self.seed,
                                                   n_startup_trials=max(4, min(10, trials // 4)), constant_liar=True))
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # failures are recorded on the trials
        job = Job(self.sched, self.args, self.mix, self.reference, self.timer,
                  exclusive=triton_compat.target() == "cuda", inputs=self.inputs)
        # (forked before this process opens the storage); tc.tune calls this method itself, so that the
        # warning of an unisolated GPU points at its caller: make_pool, start, tune, the caller
        self.pool = make_pool(job, self.jobs, self.timeout, self.recipe, stacklevel=4)

    # -- 3. open and seed --------------------------------------------------------------------------

    def open_study(self):
        """Create the study, or load it (and refuse one of another space); seed a new one."""
        name, url, worker = self.name, self.url, self.worker
        store = make_storage(url, self.heartbeat)
        with unreadable_study(url, name):  # a trial edited by hand: an error now, not in the middle of tuning
            try:  # exactly one process creates a study (its name is unique in the storage)
                study = optuna.create_study(study_name=name, storage=store, sampler=self.sampler, direction="minimize")
                created = True
            except optuna.exceptions.DuplicatedStudyError:
                study = optuna.load_study(study_name=name, storage=store, sampler=self.sampler)
                created = False
            study.get_trials(deepcopy=False)
        _study._check_study(study, name, self.space.knobs)
        trace = self.sched.trace.to_json()  # the schedule it tunes, replayable without its code (stored_plan)
        if study.user_attrs.get("trace") != trace:
            study.set_user_attr("trace", trace)
        device = _study._device_name()
        if study.user_attrs.get("device") != device:  # the learned model fits on the trials of one device
            study.set_user_attr("device", device)
        if self.cost_model == "learned":
            self.model = learned.from_storage(store, device, exclude=name)
        model_text = self.model.describe() if self.model is not None else "the analytic cost model"
        if study.user_attrs.get("cost_model") != model_text:
            study.set_user_attr("cost_model", model_text)
        # The process that creates the study seeds it (and a coordinating process seeds an empty one).
        # Not a worker on SQLite: leave seeding to the coordinating process there.
        # A grid (the whole space fits the trials) visits every config: seeds would only measure some twice.
        if (created or not worker) and not study.trials and not (worker and url.startswith("sqlite")) and not self.grid:
            count = _study._seed_count(self.seeds, self.trials)
            for cfg in _study.seed_configs(self.sched, self.space, self.mix, count, self.model):
                study.enqueue_trial(cfg, user_attrs={"seed": self.seed_label}, skip_if_exists=True)
        self.study = study
        return study

    # -- 4. one trial: settle, requeue, refill, objective ------------------------------------------

    def intended(self, t) -> dict | None:
        """The config a running trial measures: its params once written, else its enqueued ones."""
        knobs = self.space.knobs
        if all(n in t.params for n in knobs):
            return {n: t.params[n] for n in knobs}
        fixed = t.system_attrs.get("fixed_params")
        if isinstance(fixed, dict) and all(n in fixed for n in knobs):
            return {n: fixed[n] for n in knobs}
        return None

    @staticmethod
    def ticket(t) -> tuple:
        """The order in which running trials claim configs: when each started running (a trial popped
        from the queue starts when it is popped, not when it was enqueued), then its number."""
        return (t.datetime_start or datetime.datetime.max, t.number)

    def _finished_of(self, t, cfg, mine) -> tuple:
        """(a finished trial to copy or None, whether to wait) for one trial `t` of the study, as seen by
        the trial whose ticket is `mine`, which wants `cfg`."""
        state = t.state
        if state == optuna.trial.TrialState.COMPLETE:
            ok = (_study._valid_times(t.user_attrs.get("times"), self.keys)
                  and t.value is not None and math.isfinite(t.value))
            return (t if ok else None), False
        if state == optuna.trial.TrialState.FAIL and isinstance(t.user_attrs.get("failure"), str):
            return t, False
        if state == optuna.trial.TrialState.PRUNED and isinstance(t.user_attrs.get("pruned"), str):
            return t, False
        if state == _RUNNING and self.ticket(t) < mine:
            want = self.intended(t)
            started_at = t.datetime_start or datetime.datetime.now()
            return None, want == cfg or (want is None and (datetime.datetime.now() - started_at).total_seconds()
                                         < _study.CHOOSING_LIMIT)
        return None, False

    def settle(self, trial, cfg):
        """A finished trial of `cfg` to copy; None when this trial is the one to measure it. Waits while
        a running trial that started before this one measures `cfg`, or has not written yet what it
        measures."""
        study, pool = self.study, self.pool
        mine = self.ticket(study._storage.get_trial(trial._trial_id))
        beat = time.monotonic()
        while True:
            if pool.stopping:
                raise Interrupted(pool.stopping)
            wait = False
            for t in study.get_trials(deepcopy=False):
                if t.number == trial.number or (t.state != _RUNNING and t.params != cfg):
                    continue
                done, waits = self._finished_of(t, cfg, mine)
                if done is not None:
                    return done
                wait = wait or waits
            if not wait:
                return None
            time.sleep(0.2)
            if time.monotonic() - beat > self.heartbeat:  # an owner that died: its heartbeat goes stale
                beat = time.monotonic()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    optuna.storages.fail_stale_trials(study)

    def requeue(self, trial, cfg, why: str) -> None:
        """Mark an interrupted trial and queue its config again (`retry_of`), keeping its seed label."""
        trial.set_user_attr("interrupted", why)
        knobs = self.space.knobs
        params = cfg if _study._valid_config(cfg, knobs) else None
        if params is None:
            fixed = self.study._storage.get_trial_system_attrs(trial._trial_id).get("fixed_params")
            params = fixed if _study._valid_config(fixed, knobs) else None
        if params is not None:
            attrs = {"retry_of": trial.number}
            if isinstance(trial.user_attrs.get("seed"), str):
                attrs["seed"] = trial.user_attrs["seed"]
            self.study.enqueue_trial(params, user_attrs=attrs)

    def refill(self, after) -> None:
        """After a repeat (the sampler proposed a config the study has tried), queue the cost model's best
        untried feasible config, unless one is queued already, so that every trial counted is a new
        config; with none left, the space is exhausted and tuning stops. Not on a grid, which visits
        every config by itself."""
        if self.grid:
            return
        with self.refill_lock:
            tried, waiting = set(), False
            for t in self.study.get_trials(deepcopy=False):
                if t.state == optuna.trial.TrialState.WAITING:
                    waiting = True
                fixed = t.system_attrs.get("fixed_params")
                for cfg in (t.params, fixed):
                    if _study._valid_config(cfg, self.space.knobs):
                        tried.add(_study._config_key(cfg))
            if waiting:
                return
            if not self.untried_order:
                self.untried_order.extend(_study.seed_configs(self.sched, self.space, self.mix, self.space.size,
                                                              self.model))
            for cfg in self.untried_order:
                if _study._config_key(cfg) not in tried:
                    self.study.enqueue_trial(cfg, user_attrs={"seed": self.seed_label, "after_repeat": after.number})
                    return
            self.exhausted = True

    def _config(self, trial) -> dict:
        """The config the sampler (or the queue) gives this trial; a refused one is a CandidateFailure."""
        knobs = self.space.knobs
        try:
            cfg = {n: trial.suggest_categorical(n, choices) for n, choices in knobs.items()}
        except ValueError as e:  # an enqueued config (from the study) that is none of the choices
            raise CandidateFailure(f"{REFUSED}: {str(e)[:300]}") from None
        if not _study._valid_config(cfg, knobs):
            raise CandidateFailure(f"{REFUSED}: {cfg!r}"[:400])
        return cfg

    def _copy(self, trial, done) -> float:
        """This trial repeats `done`'s config: copy its result (time, pruning or failure)."""
        first = done.user_attrs.get("duplicate_of")  # point at the trial that measured it
        trial.set_user_attr("duplicate_of", first if type(first) is int else done.number)
        self.refill(trial)
        if done.state == optuna.trial.TrialState.COMPLETE:
            trial.set_user_attr("times", {k: done.user_attrs["times"][k] for k in self.keys})
            return done.value
        if done.state == optuna.trial.TrialState.PRUNED:
            trial.set_user_attr("pruned", done.user_attrs["pruned"][:2000])
            raise optuna.TrialPruned(done.user_attrs["pruned"][:2000])
        raise CandidateFailure(done.user_attrs["failure"][:2000])

    def _measure(self, trial, cfg) -> float:
        """Prune `cfg` if infeasible, else measure it on every shape: the call-weighted time."""
        feas = self.space.feasible(cfg)
        if not feas.ok:
            trial.set_user_attr("pruned", feas.reason)
            raise optuna.TrialPruned(feas.reason)
        t0 = time.perf_counter()
        times = self.pool.measure(cfg)
        if not _study._valid_times(times, self.keys):
            raise CandidateFailure(f"its worker returned no time for every shape: {times!r}"[:400])
        times = {k: float(times[k]) for k in self.keys}
        trial.set_user_attr("times", times)
        trial.set_user_attr("measure_s", time.perf_counter() - t0)
        trial.set_user_attr("features", self.features(cfg))
        return sum(w * times[ShapeMix.key(s)] for s, w in self.mix)

    @property
    def seed_label(self) -> str:
        """How a seeded trial says who ranked it (`trial_rows`' note)."""
        return "learned model" if self.model is not None else "cost model"

    def features(self, cfg) -> dict:
        """The learned model's inputs for `cfg` at every shape of the mix (stored on its trial)."""
        analysis = analysis_for(self.sched, cfg)
        return {ShapeMix.key(s): learned.features(terms(self.sched, cfg, s, analysis)) for s, _ in self.mix}

    def objective(self, trial) -> float:
        """One trial: its config's weighted time, copied from a trial of the same config or measured."""
        pool = self.pool
        cfg = None
        try:
            if pool.stopping:
                raise Interrupted(pool.stopping)
            cfg = self._config(trial)
            done = self.settle(trial, cfg)
            return self._copy(trial, done) if done is not None else self._measure(trial, cfg)
        except CandidateFailure as e:
            trial.set_user_attr("failure", str(e))
            raise
        except optuna.TrialPruned:
            raise
        except (Interrupted, KeyboardInterrupt):
            self.requeue(trial, cfg, pool.stopping or "SIGINT")
            raise _study._Stopped(pool.stopping or "SIGINT") from None
        except Exception as e:  # not the candidate's doing (a worker that cannot start, ...): queued again
            self.requeue(trial, cfg, f"{type(e).__name__}: {str(e)[:200]}")
            raise

    # -- 5. the rounds -----------------------------------------------------------------------------

    def stop_when_told(self, study, frozen) -> None:
        """optuna's callback after each trial: update the bar; stop on a signal, enough configs or none left."""
        measured = _study._measured(study)
        if self.bar is not None:
            self.bar.show(study, measured)
        if self.pool.stopping or measured >= self.trials or self.exhausted:
            study.stop()

    def rounds(self, done: int) -> None:
        """Trials until `trials` configs are measured (`done` are already), the space is exhausted or a
        signal came; shows the bar (or the interpreter note) while it runs."""
        study, pool, trials = self.study, self.pool, self.trials
        n_jobs = max(1, self.jobs if pool.isolated else 1)
        # a bound that only a sampler proposing tried configs over and over reaches: each trial
        # measures (at most `trials - done`, plus one per job in flight), prunes a new config, or
        # repeats one, and each repeat queues an untried config
        cap = (trials - done) + 2 * self.space.size + 4 * n_jobs
        if self.progress:
            self.bar = _study._Progress(trials, done)  # says the interpreter note first, above the bar
        elif not self.quiet and interpreter_note(triton_compat.target()):
            print(interpreter_note(triton_compat.target()), file=sys.stderr)  # once, with no bar either
        # In rounds of as many trials as configs are still wanted, so that parallel jobs never
        # start more measurements than `trials` asks for (each job taking a trial while the last
        # configs were being measured made 27 of 24 on the H200); a round whose trials repeated
        # or pruned configs is followed by one for the configs still wanted.
        # A round that tried no new config and left none queued (a grid visited whole, a sampler
        # that only repeats) ends tuning.
        started_trials = 0
        while not pool.stopping and not self.exhausted and started_trials < cap:
            wanted = trials - _study._measured(study)
            if wanted <= 0:
                break
            n = min(wanted, cap - started_trials)
            started_trials += n
            before = _study._tried(study)
            study.optimize(self.objective, n_trials=n, n_jobs=min(n_jobs, n),
                           catch=(CandidateFailure, _study._Stopped), show_progress_bar=False,
                           callbacks=[self.stop_when_told])
            if _study._tried(study) == before and not study.get_trials(
                    deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
                break

    def measure(self) -> str | None:
        """Phases 3-4 under the signal handlers (after `start`); then close the pool and the bar and add
        this run's seconds to the study's. Raises `TuningInterrupted` after a signal; returns the
        `FewerConfigs` message when fewer configs than `trials` were measured, else None."""
        pool = self.pool
        interrupted = None
        started = time.perf_counter()
        try:
            with _study._signals(pool):
                pool.start()
                study = self.open_study()
                done = _study._measured(study)
                if done < self.trials and not pool.stopping:
                    self.rounds(done)
        except (Interrupted, KeyboardInterrupt):
            interrupted = pool.stopping or "SIGINT"
        finally:
            pool.close()
            if self.bar is not None:
                self.bar.close()
            if self.study is not None:
                total_s = _study._seconds(self.study.user_attrs.get("tuning_seconds", 0.0)) + time.perf_counter() - started
                self.study.set_user_attr("tuning_seconds", total_s)
                self.total_s = total_s
        interrupted = interrupted or pool.stopping
        if interrupted:
            raise _study.TuningInterrupted(interrupted)
        measured = _study._measured(self.study)
        if measured < self.trials:
            return _study._shortfall(self.study, self.space, self.trials, measured, self.grid or self.exhausted)
        return None

    # -- 6. choose ---------------------------------------------------------------------------------

    def choose(self):
        """The plan: `study._choose` over the completed trials (a `Tuned`)."""
        return _study._choose(self.sched, self.args, self.mix, self.study, self.expected_calls, self.total_s,
                              self.space.knobs, self.url, self.recipe)
