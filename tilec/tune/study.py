"""`tc.tune`: search a schedule's knobs with optuna for a shape mix, persist every trial, pick a plan.

- The objective of a config is the call-weighted time sum_s w_s * t_s over the mix; every shape's
  time is stored on the trial (`user_attrs["times"]`).
- Before anything compiles, infeasible configs are pruned (`space.py`); the cost model's best
  feasible configs seed the study (`enqueue_trial`). Small spaces are searched exhaustively (grid),
  larger ones with multivariate TPE.
- A config already measured is not measured again (its stored value is returned); a config that
  fails (does not lower or compile, runs out of resources, wrong answer) is a failed trial with the
  reason in `user_attrs["failure"]`, never a winner.
- The study lives in an optuna storage (SQLite by default, any SQLAlchemy URL): several workers can
  share it, and a study interrupted at any point resumes. Heartbeats mark the trials of a killed
  worker failed, and they are retried. Its name is derived from the schedule's fingerprint, the
  mix, the device and the tilec/Triton versions, so a changed kernel never reuses stale results.
  Configs are stored as optuna params (JSON), never pickles.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

import optuna
import torch

import tilec
from tilec.errors import ArgumentError
from tilec.runtime import triton_compat
from tilec.runtime.kernel import Kernel
from tilec.tune.cost import weighted_estimate
from tilec.tune.measure import CandidateFailure, Measurer
from tilec.tune.mix import ShapeMix
from tilec.tune.plans import describe, options
from tilec.tune.space import SearchSpace

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)


def default_storage() -> str:
    import os
    d = Path(os.environ.get("TILEC_CACHE_DIR", Path.home() / ".cache" / "tilec"))
    d.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{d / 'tuning.db'}"


def _device_name() -> str:
    return torch.cuda.get_device_name() if triton_compat.target() == "cuda" else "triton-interpreter"


def study_key(sched, mix: ShapeMix, args) -> str:
    import triton  # noqa: F401 - its version is part of the key
    shapes = sorted((ShapeMix.key(s), repr(w)) for s, w in mix)  # order-free, exact weights
    parts = [sched.fingerprint(), json.dumps(shapes), ",".join(a.name for a in args), _device_name(),
             tilec.__version__, triton_compat.triton().__version__]
    return "tilec-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def make_storage(url: str, heartbeat: int = 2):
    """An optuna RDB storage with heartbeats: the trial of a worker that died is marked failed after
    3 missed beats and retried once by whoever runs next."""
    if url.startswith(("sqlite", "postgresql", "mysql")):
        import warnings

        import sqlalchemy.exc
        for attempt in range(5):  # workers starting together race to create the tables: the loser retries
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # heartbeats are "experimental" in optuna 5 (since 2.8)
                    return optuna.storages.RDBStorage(
                        url, heartbeat_interval=heartbeat, grace_period=3 * heartbeat,
                        heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1),
                        engine_kwargs={"pool_pre_ping": True})
            except sqlalchemy.exc.SQLAlchemyError:
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
    return url


def _config_key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


class Tuned:
    """The result of tc.tune: a plan, and a callable that dispatches each call to its kernel."""

    def __init__(self, sched, args, mix, study, chosen, opts, calls, kernels):
        self.sched, self.args, self.mix, self.study = sched, args, mix, study
        self.chosen, self.options, self.calls = chosen, opts, calls
        self.kernels: dict[str, Kernel] = kernels
        self.plan = describe(opts, chosen, calls)
        first = next(iter(kernels.values()))
        self._sizes = first._sizes
        self._inputs = first.inputs
        self._by_sizes = {}
        for shape, _ in mix:
            self._by_sizes[tuple(shape[n] for n in sorted(self._sizes))] = kernels[ShapeMix.key(shape)]
        self._generic: dict[str, Kernel] = {}

    def _key(self, tensors) -> tuple:
        return tuple(tensors[self._inputs.index(t)].shape[d] for _, (t, d) in sorted(self._sizes.items()))

    def kernel_for(self, tensors) -> Kernel:
        """The kernel serving these tensors: the plan's, or for a shape outside the mix the generic
        build of the nearest shape's config."""
        key = self._key(tensors)
        k = self._by_sizes.get(key)
        if k is not None:
            return k
        names = sorted(self._sizes)
        sizes = dict(zip(names, key))

        def dist(shape):
            return sum(abs(math.log2(shape[n]) - math.log2(max(sizes[n], 1))) for n in names)

        nearest = min((s for s, _ in self.mix), key=dist)
        cfg = self.chosen.configs[ShapeMix.key(nearest)]
        ck = _config_key(cfg)
        if ck not in self._generic:
            self._generic[ck] = Kernel(self.sched, self.args, cfg)
        return self._generic[ck]

    def __call__(self, *tensors, out=None):
        return self.kernel_for(tensors[: len(self._inputs)])(*tensors, out=out)

    def source(self, **sizes) -> str:
        """The Triton code that runs for these sizes, e.g. `tuned.source(M=256)`."""
        full = {**self.mix.fixed, **sizes}
        k = self.kernels.get(ShapeMix.key(full))
        if k is None:
            raise ArgumentError(f"no kernel of the plan serves {full}; the mix has "
                                f"{', '.join(ShapeMix.key(s) for s, _ in self.mix)}")
        return k.source

    def trials(self) -> list[dict]:
        """Every trial: its config, state, weighted time, per-shape times, failure or pruning reason."""
        out = []
        for t in self.study.get_trials(deepcopy=False):
            out.append({"number": t.number, "state": t.state.name, "config": t.params, "value": t.value,
                        **{k: t.user_attrs[k] for k in ("times", "failure", "pruned", "duplicate_of", "seed")
                           if k in t.user_attrs}})
        return out

    def report(self, path: str) -> str:
        """Write the trials and the plan: JSON always, a plot too when `path` ends in .png (needs
        matplotlib). Returns the path written."""
        data = {"plan": self.plan, "trials": self.trials()}
        p = Path(path)
        if p.suffix != ".png":
            p.write_text(json.dumps(data, indent=2, default=str))
            return str(p)
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ArgumentError("report to .png needs matplotlib (pip install matplotlib); or give a "
                                ".json path") from e
        done = [t for t in data["trials"] if t["state"] == "COMPLETE" and "times" in t]
        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
        a.plot([t["number"] for t in done], [t["value"] * 1e6 for t in done], "o")
        a.set_xlabel("trial")
        a.set_ylabel("weighted time per call (us)")
        a.set_title("objective per trial")
        for shape, _ in self.mix:
            k = ShapeMix.key(shape)
            b.plot(range(len(done)), [t["times"][k] * 1e6 for t in done], ".", label=k)
        b.set_xlabel("completed config")
        b.set_ylabel("time (us)")
        b.set_title("per-shape time per config")
        b.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(p)
        p.with_suffix(".json").write_text(json.dumps(data, indent=2, default=str))
        return str(p)


def tune(sched, mix: ShapeMix, trials: int = 64, *, args=None, reference=None, storage: str | None = None,
         expected_calls: float = 1_000_000, timer=None, seed: int = 0, seeds: int = 8,
         study_name: str | None = None, worker: bool = False, shared_limit: int | None = None,
         heartbeat: int = 2, progress: bool = False) -> Tuned:
    """Tune `sched`'s knobs for `mix` (see the module docstring); returns a `Tuned`.

    `args` defaults to the schedule's inputs then outputs; `reference` (inputs -> outputs, torch)
    checks every candidate on every shape, by default the unscheduled compute built by tilec.
    `worker=True` only adds trials to the shared study (for several processes or hosts);
    `progress=True` shows a progress bar (optuna's, tqdm).
    """
    if not isinstance(mix, ShapeMix):
        raise ArgumentError(f"tune: expected a tc.ShapeMix, got {type(mix).__name__}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ArgumentError(f"tune: trials must be a positive int, got {trials!r}")
    args = list(args) if args is not None else sched.placeholders + list(sched.outputs)
    from tilec.ir.expr import SizeVar, walk
    needed = sorted({n.name for t in args for e in t.shape for n in walk(e) if isinstance(n, SizeVar)})
    for shape, _ in mix:
        missing = [n for n in needed if n not in shape]
        if missing:
            raise ArgumentError(f"tune: the mix's shape {ShapeMix.key(shape)} does not give {', '.join(missing)}; "
                                f"every shape needs {', '.join(needed)} (put common ones in fixed=)")
    if reference is None:
        from tilec.schedule.schedule import create_schedule
        ref_kernel = Kernel(create_schedule(list(sched.outputs)), args)
        reference = ref_kernel
    space = SearchSpace(sched, mix) if shared_limit is None else SearchSpace(sched, mix, shared_limit)
    measurer = Measurer(sched, args, mix, reference, timer=timer)
    name = study_name or study_key(sched, mix, args)
    store = make_storage(storage or default_storage(), heartbeat)
    grid = space.size <= trials
    sampler = (optuna.samplers.GridSampler(space.knobs, seed=seed) if grid else
               optuna.samplers.TPESampler(multivariate=True, seed=seed, n_startup_trials=max(4, min(10, trials // 4)),
                                          constant_liar=True))
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # failures are recorded on the trials
    study = optuna.create_study(study_name=name, storage=store, sampler=sampler, direction="minimize",
                                load_if_exists=True)
    started = time.perf_counter()
    # The first process to arrive seeds the study. Not a worker on SQLite: SQLite has no row locks, so
    # two workers could both claim one enqueued trial (optuna then fails with "Cannot tell a
    # COMPLETE trial"); a PostgreSQL fleet of workers seeds itself.
    sqlite = (storage or default_storage()).startswith("sqlite")
    if not study.trials and not (worker and sqlite):
        ranked = sorted((c for c in space.configs() if space.feasible(c).ok),
                        key=lambda c: weighted_estimate(sched, c, mix))
        for cfg in ranked[: min(seeds, trials)]:
            study.enqueue_trial(cfg, user_attrs={"seed": "cost model"}, skip_if_exists=True)

    def objective(trial):
        cfg = {n: trial.suggest_categorical(n, choices) for n, choices in space.knobs.items()}
        for t in study.get_trials(deepcopy=False, states=FINISHED):
            if t.number != trial.number and t.params == cfg:
                if t.state == optuna.trial.TrialState.COMPLETE:
                    trial.set_user_attr("duplicate_of", t.number)
                    trial.set_user_attr("times", t.user_attrs.get("times", {}))
                    return t.value
                if "failure" in t.user_attrs:
                    trial.set_user_attr("failure", t.user_attrs["failure"])
                    trial.set_user_attr("duplicate_of", t.number)
                    raise CandidateFailure(t.user_attrs["failure"])
        feas = space.feasible(cfg)
        if not feas.ok:
            trial.set_user_attr("pruned", feas.reason)
            raise optuna.TrialPruned(feas.reason)
        t0 = time.perf_counter()
        try:
            times = measurer.measure(cfg)
        except CandidateFailure as e:
            trial.set_user_attr("failure", str(e))
            raise
        trial.set_user_attr("times", times)
        trial.set_user_attr("measure_s", time.perf_counter() - t0)
        return sum(w * times[ShapeMix.key(s)] for s, w in mix)

    done = len([t for t in study.get_trials(deepcopy=False, states=FINISHED)])
    if done < trials:
        study.optimize(objective, n_trials=trials - done, catch=(CandidateFailure,), show_progress_bar=progress,
                       callbacks=[optuna.study.MaxTrialsCallback(trials, states=FINISHED)])
    elapsed = time.perf_counter() - started
    total_s = float(study.user_attrs.get("tuning_seconds", 0.0)) + elapsed
    study.set_user_attr("tuning_seconds", total_s)
    if worker:
        return None
    return _choose(sched, args, mix, study, expected_calls, total_s, measurer)


def _choose(sched, args, mix, study, calls, tuning_s, measurer) -> Tuned:
    table = {}
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if "times" in t.user_attrs:
            table[_config_key(t.params)] = (dict(t.params), t.user_attrs["times"])
    if not table:
        reasons = {t.user_attrs.get("failure") or t.user_attrs.get("pruned") for t in study.trials}
        raise ArgumentError(f"tune: no config completed; reasons: {sorted(r for r in reasons if r)[:5]}")
    # the price of one more kernel in a plan: lowering plus Triton's compile (at the first call),
    # measured on a specialization, which is what the per-shape and bucket plans build
    shape, xs, _ = measurer.cases[0]
    t0 = time.perf_counter()
    Kernel(sched, args, next(iter(table.values()))[0], specialize=dict(shape))(*xs)
    compile_s = time.perf_counter() - t0
    opts = options(table, mix, tuning_s, compile_s)
    chosen = min(opts, key=lambda o: o.total(calls))
    kernels = {}
    for shape, _ in mix:
        key = ShapeMix.key(shape)
        cfg = chosen.configs[key]
        spec = {k: v for k, v in shape.items()} if chosen.name == "per-shape" else None
        kernels[key] = Kernel(sched, args, cfg, specialize=spec)
    if chosen.name == "per-shape":
        chosen.notes.append("T was measured with each config's generic kernel; the specialized kernels "
                            "(sizes baked in, masks dropped where isl proves it) are not timed separately")
    return Tuned(sched, args, mix, study, chosen, opts, calls, kernels)
