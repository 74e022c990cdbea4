"""`tc.tune`: search a schedule's knobs with optuna for a shape mix, persist every trial, pick a plan.

- The objective of a config is the call-weighted time sum_s w_s * t_s over the mix; every shape's
  time is stored on the trial (`user_attrs["times"]`).
- `trials` is the number of configs to measure: a trial counts when it measured its own config
  (completed, or failed while being built, checked or timed: `trials.measured_itself`). Repeats of a
  config, pruned and refused configs and interrupted trials are recorded in the study but do not
  count. When the sampler proposes a config the study has already tried, the cost model's best untried
  config is queued next; when the space has fewer configs that can be measured than `trials`, tuning
  stops once it has measured them all and warns (`FewerConfigs`).
- Before anything compiles, infeasible configs are pruned (`space.py`); the cost model's best
  feasible configs seed the study (`enqueue_trial`; at most half the trials, so that the sampler
  proposes the rest). Small spaces are searched exhaustively (grid), larger ones with multivariate TPE.
- Candidates are measured in worker processes (`workers.py`), `jobs` at a time: a config that fails
  (does not lower or compile, runs out of resources, gives a wrong answer, hangs past `timeout`,
  crashes its worker) is a failed trial with the reason in `user_attrs["failure"]`, never a winner,
  and the study goes on.
- A config is measured once: a trial whose config another trial completed (or failed with a
  reason) copies that result (`duplicate_of`); one whose config a trial that started running
  before it is measuring right now, or may be about to (a running trial that has not written its
  params yet), waits for it and copies. Whatever process, thread or host runs them, only the first
  to start of the trials that want one config measures it (across hosts, this takes clocks kept in
  step, e.g. by NTP: trials are ordered by their start times, then their numbers).
- SIGINT and SIGTERM stop tuning cleanly: the workers are killed, each running trial is marked
  failed (`user_attrs["interrupted"]`) and its config queued again (`retry_of`), and `tc.tune`
  raises `TuningInterrupted` (a KeyboardInterrupt). The same call resumes the study.
- The study lives in an optuna storage (SQLite by default, any SQLAlchemy URL; `storage.py` refuses
  what is not one before anything writes to it): several workers can share it, and a study
  interrupted at any point resumes. Heartbeats mark the trials of a killed process failed, and they
  are retried. Its name is derived from everything that changes a measurement: the schedule's
  fingerprint, its knobs and their choices, the args, the mix, the shared-memory limit, the device
  and the tilec/Triton/torch versions, and the name of the `inputs=` function where one is given
  (random inputs and a function's make two studies), so a changed kernel never reuses stale results.
- Configs are stored as optuna params (JSON), never pickles. Whatever is read back from a study
  (params, times, values, reasons) is data: a config is used only if it is one of the knobs'
  choices, times only if they are finite numbers for the mix's shapes; nothing is evaluated.
- A study also stores the trace of the schedule it tunes (`user_attrs["trace"]`, `Trace.to_json`), so
  a tuned result is (trace, config): `stored_plan` reads it back and `build_stored` replays the trace on
  the computation and builds the config, without the code that made the schedule.

`tune` builds a `driver.Tuning`, which checks the arguments, and runs its phases (open and seed,
settle, refill, objective, rounds, choose; driver.py lists them); this module keeps what they share.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import optuna
import torch

from tilec.errors import ArgumentError
from tilec.ir.tensor import Tensor
from tilec.poly.footprint import SHARED_LIMIT
from tilec.runtime import calls as recording
from tilec.runtime import triton_compat
from tilec.runtime.kernel import Kernel
from tilec.schedule.schedule import Schedule
from tilec.schedule.trace import Trace, replay
from tilec.tune import learned
from tilec.tune.cost import analysis_for, combine, terms
from tilec.tune.measure import random_inputs
from tilec.tune.mix import ShapeMix
from tilec.tune.plans import describe, options
from tilec.tune.progress import interpreter_note
from tilec.tune.storage import (
    Forgotten,
    default_storage,
    drop_study,
    forget_hint,
    make_storage,
)
from tilec.tune.trials import fmt_time, measured_itself
from tilec.version import __version__

__all__ = ["FINISHED", "FewerConfigs", "Forgotten", "TuningInterrupted", "Tuned", "build_stored", "default_storage",
           "forget", "make_storage", "stored_plan", "study_key", "tune"]

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
KEY_SCHEMA = 2            # bump when what goes into study names changes
CHOOSING_LIMIT = 30.0     # seconds a running trial may take to write its params before others stop waiting
DEFAULT_TIMEOUT = 300.0   # seconds to compile, check and time one config on every shape


class TuningInterrupted(KeyboardInterrupt):
    """`tc.tune` was stopped by SIGINT or SIGTERM (`.signal` says which). Finished trials are stored,
    the interrupted ones are failed and queued again: the same call resumes the study.

    A KeyboardInterrupt, so that code which does not catch it stops as on Ctrl-C; tilec raises it, a
    program catches it.

    Args:
        why: the signal's name, "SIGINT" or "SIGTERM"; the message and `.signal`.

    Example:
        >>> try:
        ...     tuned = tc.tune(s, mix, trials=64)  # doctest: +SKIP
        ... except tc.TuningInterrupted as stop:
        ...     print(f"stopped by {stop.signal}; the same call resumes the study")
        >>> issubclass(tc.TuningInterrupted, KeyboardInterrupt), tc.TuningInterrupted("SIGTERM").signal
        (True, 'SIGTERM')
    """

    def __init__(self, why: str):
        super().__init__(why)
        self.signal = why


class FewerConfigs(UserWarning):
    """The warning `tc.tune` gives when it measured fewer configs than `trials`: the space has no more
    that can be measured (the message says how many it has and how many were pruned), or the sampler
    kept proposing configs already tried. The plan is built from what was measured; `tilec tune` prints
    the message as a `note:` line.

    Args:
        message: what was measured, of how many configs in all, and why no more.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:  # doctest: +SKIP
        ...     warnings.simplefilter("always", tc.FewerConfigs)
        ...     tuned = tc.tune(s, mix, trials=64)
        >>> issubclass(tc.FewerConfigs, UserWarning)
        True
        >>> warnings.filterwarnings("ignore", category=tc.FewerConfigs)  # a small space is no surprise
    """


class _Grid(optuna.samplers.GridSampler):
    """optuna's grid sampler, minus a crash: in optuna 5.0 its after_trial raises KeyError('grid_id')
    when an enqueued trial (a seed, a retry, a requeued config: none has a grid id) ends while one
    grid point is left unvisited."""

    def after_trial(self, study, trial, state, values) -> None:
        try:
            super().after_trial(study, trial, state, values)
        except KeyError:
            pass


class _Stopped(Exception):
    """Inside the objective: this trial was interrupted (it is failed, and its config queued again)."""


def _device_name() -> str:
    return torch.cuda.get_device_name() if triton_compat.target() == "cuda" else "triton-interpreter"


def default_jobs() -> int:
    """Measuring processes by default: half the host's cores, at most 4 (compiles run in parallel)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return min(4, max(1, cores // 2))


def inputs_name(inputs) -> str | None:
    """What names an `inputs=` function in a study's name: its module and qualified name (a wrapper's
    `__wrapped__`, as the CLI's of a file's inputs), or None for the tuner's random inputs."""
    if inputs is None:
        return None
    fn = getattr(inputs, "__wrapped__", inputs)
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def study_key(sched, mix: ShapeMix, args, shared_limit: int = SHARED_LIMIT, inputs=None) -> str:
    """The default study name: a hash of everything that changes what a measurement gives (the
    module docstring lists it; the reference is the one input it cannot see, and of `inputs=` only
    its function's name)."""
    desc = {
        "schema": KEY_SCHEMA,
        "schedule": sched.fingerprint(),
        "knobs": {n: list(k.choices) for n, k in sched.knobs.items()},
        "mix": sorted([ShapeMix.key(s), repr(w)] for s, w in mix),  # order-free, exact weights
        "args": [[a.name, str(a.dtype), [str(e) for e in a.shape], bool(a.is_placeholder)] for a in args],
        "shared_limit": shared_limit,
        "device": _device_name(),
        "versions": [__version__, triton_compat.triton().__version__, torch.__version__],
    }
    if inputs is not None:  # only then: the names of the studies tuned on random inputs stay as they were
        desc["inputs"] = inputs_name(inputs)
    return "tilec-" + hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]


# -- what is read back from a study is data, checked before use ----------------------------------

def _valid_config(params, knobs: dict) -> bool:
    """A config of this schedule: exactly its knobs, each value one of the knob's choices."""
    return (isinstance(params, dict) and set(params) == set(knobs)
            and all(type(params[n]) is int and params[n] in knobs[n] for n in knobs))


def _valid_times(times, keys) -> bool:
    """Per-shape seconds for every shape of the mix: finite, non-negative numbers."""
    return (isinstance(times, dict) and all(k in times for k in keys)
            and all(type(times[k]) in (int, float) and math.isfinite(times[k]) and times[k] >= 0 for k in keys))


def _seconds(value) -> float:
    return float(value) if type(value) in (int, float) and math.isfinite(value) and value >= 0 else 0.0


def _measured(study) -> int:
    """The configs the study's trials measured, which is what `trials` counts (`measured_itself`):
    repeats, pruned and refused configs and interrupted trials are not counted."""
    return sum(1 for t in study.get_trials(deepcopy=False, states=FINISHED) if measured_itself(t))


def _tried(study) -> set[str]:
    """The configs the study's finished trials hold (measured, pruned, failed or repeated)."""
    return {_config_key(t.params) for t in study.get_trials(deepcopy=False, states=FINISHED) if t.params}


def _seed_count(seeds: int, trials: int) -> int:
    """How many cost-model seeds a new study gets: `seeds`, but at most half the trials (at least one),
    so that the sampler proposes the rest."""
    return max(0, min(seeds, max(1, trials // 2)))


def _check_study(study, name: str, knobs: dict) -> None:
    """Refuse a study whose trials searched another space (a stale or foreign study under this name):
    optuna would fail on the first suggestion, after the workers started."""
    if len(study.directions) != 1 or study.direction != optuna.study.StudyDirection.MINIMIZE:
        raise ArgumentError(f"tune: study {name} is not a tilec study (it does not minimize one time); give "
                            f"another study name, or none")
    for t in study.get_trials(deepcopy=False):
        for p, dist in t.distributions.items():
            if (p in knobs and isinstance(dist, optuna.distributions.CategoricalDistribution)
                    and list(dist.choices) == knobs[p]):
                continue
            had = (f"knob {p!r}, which this schedule does not have" if p not in knobs else
                   f"{p} in {list(getattr(dist, 'choices', [])) or type(dist).__name__}"[:200])
            have = ", ".join(f"{k} in {v}" for k, v in knobs.items())
            raise ArgumentError(f"tune: study {name} holds trials of another search space (trial #{t.number} has "
                                f"{had}; this schedule has {have}); give another study name, or none (the "
                                f"default name is derived from the knobs and their choices)")


def _config_key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def stored_plan(study) -> tuple[str, dict]:
    """What a study keeps of a tuned result: the trace of the schedule it tuned, as JSON text (stored when
    tuning opens the study), and its best generic config (the completed trial of least weighted time, as
    `tilec show` prints it). Both are data read back from storage; `build_stored` checks them.

    Raises:
        ArgumentError: the study stores no trace (tuned before tilec stored them: tuning it again with the
            same schedule stores it and keeps its trials) or has no completed trial.
    """
    trace = study.user_attrs.get("trace")
    if not isinstance(trace, str):
        raise ArgumentError(f"study {study.study_name} stores no schedule trace (tuned before tilec stored them); "
                            f"tune it again (its trials are kept) to store it")
    done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if type(t.value) in (int, float) and math.isfinite(t.value)]
    if not done:
        raise ArgumentError(f"study {study.study_name}: no trial completed")
    best = min(done, key=lambda t: (t.value, t.number))
    return trace, dict(best.params)


def build_stored(trace: str, config: dict, outputs: Tensor | Sequence[Tensor], args: Sequence[Tensor]) -> Kernel:
    """The kernel of a tuned result stored as (trace, config) (`stored_plan`): the schedule replayed from
    `trace` on `outputs` (the computation alone: the code that scheduled it, such as the user's file, is not
    run), built with `config` for `args` (inputs, then outputs, as `tc.build`'s).

    The trace is checked as `Trace.from_json` and `tc.replay` check any (each step validated and checked
    again on these outputs), and `config` must give each of the replayed schedule's knobs one of its choices.

    Raises:
        ArgumentError: the trace is not a trace's JSON text or does not fit `outputs`, or `config` is not a
            config of its knobs.
    """
    sched = replay(Trace.from_json(trace), outputs)
    knobs = {n: list(k.choices) for n, k in sched.knobs.items()}
    if not _valid_config(config, knobs):
        raise ArgumentError(f"build_stored: {config!r} is not a config of the stored schedule's knobs "
                            f"({', '.join(f'{n} in {c}' for n, c in knobs.items()) or 'none'})"[:500])
    return Kernel(sched, args, dict(config))


class Tuned:
    """The result of tc.tune: a plan, and a callable that dispatches each call to its kernel.

    `.plan` is the plans' comparison as text (which config serves which shape, and why), `.chosen` the plan
    taken, `.kernels` its kernels by shape, `.source(M=...)` the Triton code that runs for a shape (in the
    form of `target=`, "cuda" or "interpreter"), `.dump(path, M=...)` writes that shape's kernel file (with
    its launch code: `python <path>` runs it) and `.trials()` every trial of the study. Calling it runs
    the kernel of the call's shape (for a shape outside the mix, the generic kernel of the nearest shape's
    config). It prints as a summary of the plan.

    Example:
        >>> mix = tc.ShapeMix([({"M": 64}, 8), ({"M": 256}, 1)], fixed={"K": 128, "N": 256})  # doctest: +SKIP
        >>> tuned = tc.tune(s, mix, trials=8, args=[A, W, Y])  # doctest: +SKIP
        >>> tuned  # doctest: +SKIP
        <Tuned: plan generic for 2 shape(s) (K=128,M=64,N=256: BM=64; K=128,M=256,N=256: BM=64), 41.20 us/call; other plans: per-shape>
        >>> y = tuned(a, w)  # doctest: +SKIP
    """

    def __repr__(self) -> str:
        configs = "; ".join(f"{shape}: {', '.join(f'{k}={v}' for k, v in sorted(cfg.items())) or 'no knobs'}"
                            for shape, cfg in self.chosen.configs.items())
        others = ", ".join(o.name for o in self.options if o is not self.chosen)
        return (f"<Tuned: plan {self.chosen.name} for {len(self.chosen.configs)} shape(s) ({configs}), "
                f"{self.chosen.T * 1e6:.2f} us/call; other plans: {others or 'none'}>")

    def __init__(self, sched, args, mix, study, chosen, opts, calls, kernels):
        self.sched, self.args, self.mix, self.study = sched, args, mix, study
        self.chosen, self.options, self.calls = chosen, opts, calls
        self.kernels: dict[str, Kernel] = kernels
        self.plan = describe(opts, chosen, calls)
        first = next(iter(kernels.values()))
        self._first = first
        self._sizes = first._sizes
        self._inputs = first.inputs
        self._by_sizes = {}
        for shape, _ in mix:
            self._by_sizes[tuple(shape[n] for n in sorted(self._sizes))] = kernels[ShapeMix.key(shape)]
        # config -> its generic kernel, for shapes outside the mix: the plan's own where it is generic
        self._generic: dict[str, Kernel] = {_config_key(chosen.configs[key]): k for key, k in kernels.items()
                                            if not k.specialize}

    def _key(self, tensors) -> tuple:
        env = self._first.read_sizes(tensors)
        return tuple(env[n] for n in sorted(self._sizes))

    def kernel_for(self, tensors) -> Kernel:
        """The kernel serving these tensors: the plan's, or for a shape outside the mix the generic
        build of the nearest shape's config."""
        return self._kernel_at(self._key(tensors))

    def _kernel_at(self, key: tuple) -> Kernel:
        """The kernel serving the sizes `key` (the values of the sorted size names), as `kernel_for`."""
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
        if not recording.SINKS or recording.inside():
            return self.kernel_for(tensors[: len(self._inputs)])(*tensors, out=out)
        key = self._key(tensors[: len(self._inputs)])  # tc.record: this call counted once, as the plan's
        with recording.counted_call():
            result = self._kernel_at(key)(*tensors, out=out)
        recording.count(self, "_".join(t.name for t in self._first.outputs), dict(zip(sorted(self._sizes), key)))
        return result

    def save(self, path) -> str:
        """Write the plan to `path` as JSON, to serve without tuning (`tc.load(path, outputs)`): its configs by
        shape, the schedule's trace, the mix, and the device, Triton, torch and tilec versions it was tuned
        with (tilec/tune/saved.py). Returns the path."""
        from tilec.tune.saved import save
        return save(self, path)

    def as_op(self, name: str):
        """Register this plan as the torch custom op `tilec::<name>`, dispatching on shapes as a call does
        (tilec/runtime/custom_op.py)."""
        from tilec.runtime.custom_op import as_op
        return as_op(self, name)

    def graphed(self, *example_inputs, warmup: int = 3, pool=None):
        """A call captured in a CUDA graph, replayed on copies of new inputs (CUDA only); custom_op.py."""
        from tilec.runtime.custom_op import graphed
        return graphed(self, *example_inputs, warmup=warmup, pool=pool)

    def source(self, *, target: str | None = None, **sizes: int) -> str:
        """The Triton module the plan runs for a shape of the mix, as `Kernel.source_for` gives it (lowered
        under the facts of those sizes): `tuned.source(M=256)`; the mix's fixed sizes are added.

        Args:
            target: "cuda" or "interpreter", the form of the source (default: this machine's, as
                `Kernel.source_for`): `tuned.source(target="cuda", M=256)` on a CPU is the GPU's.
            **sizes: the sizes of the shape that the mix's `fixed` sizes do not give.

        Returns:
            The Triton source, one module.

        Raises:
            ArgumentError: `target` is not "cuda" or "interpreter", or no kernel of the plan serves these
                sizes (they are no shape of the mix).
        """
        from tilec.lower.program import TARGETS

        if target is not None and target not in TARGETS:
            raise ArgumentError(f"source: target must be one of {', '.join(TARGETS)}, got {target!r}")
        full = {**self.mix.fixed, **sizes}
        k = self.kernels.get(ShapeMix.key(full))
        if k is None:
            raise ArgumentError(f"no kernel of the plan serves {full}; the mix has "
                                f"{', '.join(ShapeMix.key(s) for s, _ in self.mix)}")
        return k.source_for(target=target, **full)

    def schedule_code(self, **sizes: int) -> str:
        """The tuned schedule as the Python that makes it by hand (`tc.schedule_code`): the schedule's trace, each
        knob's tuned value first among its choices, for the shape given (the mix's fixed sizes added), or, with
        no sizes, for the shape of the mix that is called most. Pasted into a file after `outputs = [...]`, it
        builds that shape's kernel (the same source), and stays a space to tune.

        Raises:
            ArgumentError: the sizes are no shape of the mix.
        """
        from tilec.tune.auto import schedule_code

        if sizes:
            full = {**self.mix.fixed, **sizes}
            key = ShapeMix.key(full)
            if key not in self.chosen.configs:
                raise ArgumentError(f"schedule_code: {full} is no shape of the mix; the mix has "
                                    f"{', '.join(ShapeMix.key(s) for s, _ in self.mix)}")
        else:
            key = ShapeMix.key(max(self.mix, key=lambda sw: sw[1])[0])
        return schedule_code(self.sched, self.chosen.configs[key])

    def dump(self, path: str | os.PathLike | None = None, **sizes: int) -> Path:
        """Write the kernel file that a call of these sizes runs, with its launch code, and return its path:
        `python <path>` runs it on random inputs, needing only torch and Triton (`Kernel.dump`). The mix's
        fixed sizes are added; a shape outside the mix gets the file of the kernel a call of it runs (the
        nearest shape's config, built generic).

        Args:
            path: where to copy the file (default: it stays in tilec's cache, `TILEC_CACHE_DIR`).
            **sizes: the sizes of the shape that the mix's `fixed` sizes do not give.

        Returns:
            The path of the file.

        Raises:
            ArgumentError: a size of the inputs is missing or is not an int >= 0, a size is named that the
                inputs do not have, or the sizes break a fact of the kernel.

        Example:
            >>> path = tuned.dump("y_tuned.py", M=64)  # doctest: +SKIP
            >>> subprocess.run([sys.executable, str(path)], check=True)  # doctest: +SKIP
        """
        full = {**self.mix.fixed, **sizes}
        names = sorted(self._sizes)
        missing = [n for n in names if n not in full]
        extra = [n for n in full if n not in self._sizes]
        if missing or extra:
            raise ArgumentError(f"dump: give every size of the inputs ({', '.join(names)}; the mix fixes "
                                f"{', '.join(sorted(self.mix.fixed)) or 'none'}) and only those"
                                + (f"; missing {', '.join(missing)}" if missing else "")
                                + (f"; not a size of the inputs: {', '.join(extra)}" if extra else ""))
        for name, value in full.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ArgumentError(f"dump: size {name} must be an int >= 0, got {value!r}")
        return self._kernel_at(tuple(full[n] for n in names)).dump(path, **full)

    def trials(self) -> list[dict]:
        """Every trial: its config, state, weighted time and per-shape times in seconds (`value`, `times`)
        and in microseconds (`value_us`, `times_us`), failure or pruning reason, and whether it measured its
        config itself (`measured`: what `trials=` counts) or repeated another trial's (`duplicate_of`)."""
        if self.study is None:
            raise ArgumentError("trials: this plan holds no study (loaded from a file by tc.load, or built by hand); "
                                "the trials are in the storage it was tuned with (tilec show STUDY)")
        out = []
        for t in self.study.get_trials(deepcopy=False):
            row = {"number": t.number, "state": t.state.name, "config": t.params, "value": t.value,
                   **{k: t.user_attrs[k] for k in ("times", "failure", "pruned", "duplicate_of", "seed")
                      if k in t.user_attrs}, "measured": measured_itself(t)}
            if type(t.value) in (int, float) and math.isfinite(t.value):
                row["value_us"] = t.value * 1e6
            times = t.user_attrs.get("times")
            if isinstance(times, dict):
                row["times_us"] = {k: v * 1e6 for k, v in times.items() if type(v) in (int, float)}
            out.append(row)
        return out

    def report(self, path: str) -> str:
        """Write the trials and the plan: JSON always, a picture too when `path` ends in .png (needs
        matplotlib; `tilec/tune/report.py` draws it and says what it shows). Returns the path written."""
        from tilec.tune.report import write_report
        return write_report(self, path)


def seed_configs(sched, space, mix: ShapeMix, n: int, model=None) -> list[dict]:
    """The cost model's `n` seeds: in turn for each shape of the mix (heaviest first), its best-ranked
    feasible config not yet taken whose estimate differs from those taken for that shape by over 1%:
    each shape's plan gets its own candidates, and not eight variants of one tile the model cannot tell
    apart. The estimate is the analytic one (cost.py), corrected by `model` (a `learned.LearnedModel`)
    where one is given."""
    feasible = [c for c in space.configs() if space.feasible(c).ok]
    shapes = sorted(mix, key=lambda sw: -sw[1])
    ests = [{} for _ in shapes]
    for c in feasible:  # one analysis per config, for every shape
        analysis = analysis_for(sched, c)
        for k, (shape, _) in enumerate(shapes):
            x = terms(sched, c, shape, analysis)
            ests[k][id(c)] = combine(x) if model is None else math.exp(model.score(learned.features(x)))
    ranked = [(sorted(feasible, key=lambda c, est=est: est[id(c)]), est) for est in ests]
    out, taken = [], [[] for _ in shapes]
    pos = [0] * len(shapes)
    while len(out) < min(n, len(feasible)):
        progressed = False
        for k, (order, est) in enumerate(ranked):
            while pos[k] < len(order):
                c = order[pos[k]]
                pos[k] += 1
                if c in out or any(abs(est[id(c)] - t) <= 0.01 * t for t in taken[k]):
                    continue
                out.append(c)
                taken[k].append(est[id(c)])
                progressed = True
                break
            if len(out) >= n:
                break
        if not progressed:  # every shape's distinct configs taken: fill with the weighted ranking
            total = sum(w for _, w in shapes)
            weighted = {id(c): sum(w * ests[k][id(c)] for k, (_, w) in enumerate(shapes)) / total for c in feasible}
            rest = sorted((c for c in feasible if c not in out), key=lambda c: weighted[id(c)])
            out += rest[: n - len(out)]
            break
    return out


def _stderr_is_terminal() -> bool:
    """Whether a person is likely watching: stderr is a terminal (tc.tune's default for its progress bar)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


def _run_gpu_workers(gpus, recipe, worker, mix, trials, url, name, jobs, timeout, inputs=None) -> None:
    """`tune(gpus=...)`: run the per-GPU worker processes on the study and wait for them (multi.py)."""
    from tilec.tune import multi

    if recipe is None:
        raise ArgumentError("tune: gpus= runs worker processes, which rebuild the schedule from a recipe: pass "
                            "recipe=FILE (a Python file defining make() and reference()), or use "
                            "`tilec tune FILE --gpus ...`")
    if inputs is not None:  # the workers (`tilec tune RECIPE --worker`) make their inputs with the recipe's
        from tilec.tune.userfile import load_file
        own = getattr(load_file(recipe), "inputs", None)
        if not callable(own) or inputs_name(own).rpartition(".")[2] != inputs_name(inputs).rpartition(".")[2]:
            raise ArgumentError(f"tune: gpus= workers rebuild everything from the recipe {recipe}, and it defines "
                                f"no inputs(sizes, device) of the name given ({inputs_name(inputs)}): define it "
                                f"there and pass that one (inputs=module.inputs)")
    if worker:
        raise ArgumentError("tune: gpus= starts the workers itself; worker=True is for a process that is one of them")
    cuda = triton_compat.target() == "cuda"
    count = torch.cuda.device_count() if cuda else 0
    devs = multi.devices(gpus, cuda, count)
    runs = multi.run_workers(recipe, mix, devs, trials, url, name, jobs=jobs, timeout=timeout)
    failed = [r for r in runs if r.returncode != 0]
    if failed:
        warnings.warn("tune: " + "; ".join(f"the worker on {r.device} exited with status {r.returncode} "
                                           f"(log {r.log}): {r.tail(3)}" for r in failed)
                      + f"; {len(runs) - len(failed)} other worker(s) went on, and this process tops the study up",
                      RuntimeWarning, stacklevel=3)


def tune(sched: Schedule, mix: ShapeMix, trials: int = 64, *, args: Sequence[Tensor] | None = None,
         reference: Callable[..., torch.Tensor | Sequence[torch.Tensor]] | None = None, storage: str | None = None,
         expected_calls: float = 1_000_000, timer: Callable[[Kernel, list[torch.Tensor]], float] | None = None,
         seed: int = 0, seeds: int = 8, study_name: str | None = None, worker: bool = False,
         shared_limit: int | None = None, heartbeat: int = 2, progress: bool | None = None, jobs: int | None = None,
         timeout: float = DEFAULT_TIMEOUT, recipe: str | None = None,
         gpus: str | int | Sequence[int] | None = None, cost_model: str = "learned",
         inputs: Callable[[dict, str], Sequence[torch.Tensor]] | None = None) -> Tuned | None:
    """Tune `sched`'s knobs for `mix` (the module docstring says how) and pick a plan; returns a `Tuned`.

    Each config is built, checked against `reference` on every shape of the mix and timed there (objective:
    the call-weighted time); configs that cannot work are pruned before compiling, and one that fails or is
    wrong is a failed trial, never a winner. The study (optuna) is stored in `storage` under a name derived
    from all that changes a measurement: the same call resumes it. The plan (one config, one per shape, or
    buckets) minimises compile and tuning price + expected_calls * time per call (`Tuned.plan` says why).

    Args:
        sched: the schedule; its knobs (`tc.knob`, `tc.flag`) are the search space.
        mix: the shapes and their weights; each shape gives every size of the schedule.
        trials: the number of configs the study should have measured in all (not the number to add):
            repeats of a config, pruned and refused configs and interrupted trials are recorded, not counted.
        args: the inputs and outputs, as for `tc.build` (default: the schedule's inputs, then its outputs).
        reference: a function of the torch inputs returning the expected output(s), which checks every
            candidate on every shape (default: the unscheduled compute, built by tilec).
        storage: an optuna storage URL: sqlite:///file.db, postgresql://... (default: SQLite in
            $TILEC_CACHE_DIR, ~/.cache/tilec/tuning.db); processes sharing it share the study.
        expected_calls: the calls the kernel will serve (weighs time per call against compile price).
        timer: `timer(kernel, inputs)` -> seconds per call, for one shape's inputs (default: Triton's
            do_bench median on a GPU, a wall-clock median in the interpreter).
        seed: the sampler's seed (multivariate TPE; a grid where the space fits in `trials`).
        seeds: the cost model's configs measured first in a new study (at most half of `trials`).
        study_name: the study's name (default: from the schedule's fingerprint, knobs, args, mix, device...).
        worker: only add trials to the shared study and return None (one such process per GPU or host).
        shared_limit: bytes of shared memory a program may use, else pruned (default: Hopper's 232448).
        heartbeat: seconds between a running trial's heartbeats; three missed fail it (its config retried).
        progress: a progress bar on stderr (configs measured, best time, repeats, pruned, time left); None
            (the default) shows it where stderr is a terminal.
        jobs: worker processes measuring candidates (default: half the cores, at most 4); 0: this process.
        timeout: seconds a candidate may take to compile, check and time on every shape, else it fails.
        recipe: a Python file whose make() rebuilds this schedule (its reference(), if any, the reference);
            on a GPU, workers start from it in fresh processes (else tuning is not isolated).
        gpus: "all", a number N, or GPU indices ("0,1"): first one worker process per GPU on the study
            (CUDA_VISIBLE_DEVICES), then plan here (needs `recipe`; without a GPU, N workers on the CPU).
        cost_model: what ranks the seeds: "learned" (the default: the analytic model corrected by a model
            fitted on this device's other studies in `storage`, used only where it orders their configs better
            than the analytic one; `learned.py`) or "analytic" (cost.py alone).
        inputs: `inputs(sizes, device)` -> the input tensors for one shape of the mix (a list, in the order of
            the input placeholders in `args`), for kernels that are valid only on some inputs (log-probabilities,
            packed int4 weights, indices in range); checked for count, shapes and dtypes (default: fresh normal
            random floats and small random ints). With `recipe`, the recipe's own `inputs` serves the workers.

    Returns:
        The `Tuned` plan (call it like a Kernel), or None with `worker=True`.

    Raises:
        ArgumentError: a bad `sched`, `mix` or shape; an argument out of its range; `storage` not a
            database URL; the study under this name searched another space; or no config completed.
        TuningInterrupted: SIGINT or SIGTERM stopped tuning (the running trials are failed and queued
            again; the same call resumes).

    Warns:
        FewerConfigs: fewer configs than `trials` could be measured.

    Example:
        >>> io, ii = s[C].split(i, tc.knob("BM", [16, 32]))
        >>> mix = tc.ShapeMix([({"M": 16}, 3), ({"M": 40}, 1)], fixed={"K": 24, "N": 20})
        >>> def timer(kernel, inputs):  # seconds per call: made up here, so that the plan is certain
        ...     return 1e-6 * kernel.config["BM"]
        >>> tuned = tc.tune(s, mix, trials=2, args=[A, W, Y], timer=timer, jobs=0)
        >>> tuned
        <Tuned: plan generic for 2 shape(s) (K=24,M=16,N=20: BM=16; K=24,M=40,N=20: BM=16), 16.00 us/call; other plans: ...>
        >>> a, w = torch.randn(40, 24), torch.randn(24, 20)
        >>> torch.allclose(tuned(a, w), torch.nn.functional.silu(a @ w), atol=1e-4)
        True
    """
    from tilec.lower.launch import call_sizes
    from tilec.tune.driver import Tuning  # (imported here: driver.py builds on this module's helpers)

    if isinstance(sched, Schedule):
        ins = [t for t in (args if args is not None else sched.placeholders) if getattr(t, "is_placeholder", False)]
        in_place = [t.name for t in sched.tensors.values() if t.scatter is not None and t.scatter.init is None
                    and t.scatter.into is None]
        if in_place:
            raise ArgumentError(f"tc.tune: {', '.join(in_place)} updates the out= tensor in place (a scatter with "
                                f"init=None), and the tuner calls kernels without out=; tune the same scatter with an "
                                f"init (its speed is the same but for the fill)")
        given = call_sizes(sched.tensors.values(), ins)
        if given:
            raise ArgumentError(f"tc.tune: the size {', '.join(given)} is in no input's shape (a call gives it by "
                                f"name, kernel(x, {given[0]}=...)); the tuner reads every size from the tensors "
                                f"it makes, so it cannot tune this kernel yet. Give it an input whose shape holds "
                                f"{given[0]}")
    run = Tuning(sched, mix, trials, args=args, reference=reference, storage=storage, expected_calls=expected_calls,
                 timer=timer, seed=seed, seeds=seeds, study_name=study_name, worker=worker, shared_limit=shared_limit,
                 heartbeat=heartbeat, progress=progress, jobs=jobs, timeout=timeout, recipe=recipe,
                 cost_model=cost_model, inputs=inputs)
    if gpus is not None:  # one worker per GPU on the shared study first; this process then tops up and plans
        _run_gpu_workers(gpus, recipe, worker, mix, trials, run.url, run.name, run.jobs, timeout, inputs)
    run.start()  # called here, so that its warnings point at the caller of tc.tune
    shortfall = run.measure()
    if shortfall:
        warnings.warn(FewerConfigs(shortfall), stacklevel=2)  # the caller of tc.tune
    return None if worker else run.choose()


def forget(sched: Schedule | None = None, mix: ShapeMix | None = None, *, args: Sequence[Tensor] | None = None,
           storage: str | None = None, study_name: str | None = None, shared_limit: int | None = None,
           inputs: Callable[[dict, str], Sequence[torch.Tensor]] | None = None) -> Forgotten:
    """Drop a study and all its trials from its storage, so that the same `tc.tune` call starts it afresh,
    under the same name (which `tilec show --tuned` finds). For a study whose trials are wrong for good:
    measured against a wrong reference (its name does not depend on the reference), or damaged.

    Args:
        sched: the schedule of the study: with `mix`, `args` and `shared_limit` it names the study as
            `tc.tune` does (`study_key`).
        mix: the mix it was tuned for.
        args: the input placeholders and output tensors, as given to `tc.tune` (default as there).
        shared_limit: as given to `tc.tune` (default: Hopper's 232448).
        inputs: the `inputs=` function given to `tc.tune`, if one was (its name is in the study's name).
        storage: the optuna storage URL (default: SQLite in $TILEC_CACHE_DIR, as `tc.tune`).
        study_name: the study's name, instead of `sched` and `mix`.

    Returns:
        A `Forgotten`: the study, the storage, its trials by state, and the studies that remain;
        `str()` of it says all that in one line.

    Raises:
        ArgumentError: neither `study_name` nor `sched` and `mix` are given; the storage is not one
            (`check_storage`); there is no such study in it (nothing is removed then, nor created).

    Example:
        >>> gone = tc.forget(s, mix, args=[A, W, Y], storage="sqlite:///tuning.db")  # doctest: +SKIP
        >>> print(gone)  # doctest: +SKIP
        forgot study tilec-0a1b2c3d4e5f6789 in sqlite:///tuning.db: removed its 8 trials (8 fail); the storage holds no other study
    """
    if study_name is None:
        if not isinstance(sched, Schedule) or not isinstance(mix, ShapeMix):
            raise ArgumentError(f"forget: give the schedule and the tc.ShapeMix the study was tuned for "
                                f"(tc.forget(s, mix, args=...)), or its study_name=; got {type(sched).__name__} and "
                                f"{type(mix).__name__}")
        args = list(args) if args is not None else sched.placeholders + list(sched.outputs)
        study_name = study_key(sched, mix, args, SHARED_LIMIT if shared_limit is None else shared_limit, inputs)
    elif not isinstance(study_name, str) or not study_name:
        raise ArgumentError(f"forget: study_name must be a non-empty string, got {study_name!r}")
    return drop_study(storage or default_storage(), study_name)


def _shortfall(study, space, trials: int, measured: int, exhausted: bool) -> str:
    """Why tuning measured fewer configs than asked: the space holds no more that can be measured, or
    (rarely) the sampler kept proposing configs already tried."""
    if exhausted:
        feasible = sum(1 for c in space.configs() if space.feasible(c).ok)
        pruned = space.size - feasible
        return (f"tune: measured {measured} configs, fewer than trials={trials}: the space has only {feasible} "
                f"that can be measured ({space.size} in all, {pruned} pruned before compiling), and every one "
                f"has been tried")
    return (f"tune: measured {measured} configs, fewer than trials={trials}: the sampler kept proposing configs "
            f"already tried ({len(study.trials)} trials in the study); run again to add more")


class _Progress:
    """The progress bar of `tc.tune` (tqdm, on stderr): configs measured of `trials`, the best weighted
    time so far in microseconds, how many trials repeated a config or were pruned, and how long the rest
    will take at this run's rate (progress.py; in its words, not tqdm's `<remaining, rate`). In Triton's
    interpreter it says once, first, that the times say nothing about a GPU."""

    def __init__(self, total: int, done: int):
        from tqdm import tqdm

        from tilec.tune.progress import Estimate
        self._lock = threading.Lock()
        try:  # a terminal that reports no size (some ptys: 0 x 0) would get no bar at all
            size = os.get_terminal_size(sys.stderr.fileno())
        except (OSError, ValueError, AttributeError):
            size = os.terminal_size((0, 0))
        note = interpreter_note(triton_compat.target())
        if note:
            tqdm.write(note, file=sys.stderr)
        self._estimate = Estimate(total, done)
        self._bar = tqdm(total=total, initial=min(done, total), desc="measured", unit="config", file=sys.stderr,
                         bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
                         **({"dynamic_ncols": True} if size.columns > 0 and size.lines > 0 else
                            {"ncols": size.columns or 110, "nrows": size.lines or 24}))

    def show(self, study, measured: int) -> None:
        best, repeats, pruned = None, 0, 0
        for t in study.get_trials(deepcopy=False, states=FINISHED):
            if "duplicate_of" in t.user_attrs:
                repeats += 1
            elif t.state == optuna.trial.TrialState.PRUNED:
                pruned += 1
            if (t.state == optuna.trial.TrialState.COMPLETE and type(t.value) in (int, float)
                    and math.isfinite(t.value) and (best is None or t.value < best[0])):
                best = (t.value, t.number)
        text = f"best {fmt_time(best[0])} (#{best[1]})" if best else "best -"
        text += f", {repeats} repeat{'s' * (repeats != 1)}, {pruned} pruned"
        left = self._estimate.text(measured)
        text += f", {left}" if left else ""
        with self._lock:
            self._bar.n = min(measured, self._bar.total)
            self._bar.set_postfix_str(text, refresh=False)
            self._bar.refresh()

    def close(self) -> None:
        with self._lock:
            self._bar.close()


@contextlib.contextmanager
def _signals(pool):
    """SIGINT/SIGTERM: the first stops tuning cleanly (the pool kills its workers, the trials they
    measured fail and are queued again); a second one raises KeyboardInterrupt at once. Measuring in
    this process (no isolation), the first raises it at once too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        first = pool.stopping is None
        pool.interrupt(signal.Signals(signum).name)
        if not first or not pool.isolated:
            raise KeyboardInterrupt

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def plan_kernels(sched, args, mix: ShapeMix, chosen) -> dict[str, Kernel]:
    """The kernels of a plan, by shape key: one specialized to each shape for the per-shape plan, else one
    generic kernel per config, shared by the shapes it serves (a call lowers it under its shape's facts)."""
    kernels, generic = {}, {}
    for shape, _ in mix:
        key = ShapeMix.key(shape)
        cfg = chosen.configs[key]
        if chosen.name == "per-shape":
            kernels[key] = Kernel(sched, args, cfg, specialize=dict(shape))
        else:
            ck = _config_key(cfg)
            if ck not in generic:
                generic[ck] = Kernel(sched, args, cfg)
            kernels[key] = generic[ck]
    return kernels


def _choose(sched, args, mix, study, calls, tuning_s, knobs, url: str, recipe: str | None) -> Tuned:
    keys = [ShapeMix.key(s) for s, _ in mix]
    table = {}
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if _valid_config(t.params, knobs) and _valid_times(t.user_attrs.get("times"), keys):
            table[_config_key(t.params)] = (dict(t.params), {k: float(t.user_attrs["times"][k]) for k in keys})
    if not table:
        reasons = {r for t in study.trials for r in (t.user_attrs.get("failure"), t.user_attrs.get("pruned"))
                   if isinstance(r, str)}
        wrong = [t for t in study.trials if str(t.user_attrs.get("failure", "")).startswith("wrong answer")]
        hint = ""
        if wrong and len(wrong) == sum(1 for t in study.trials if "failure" in t.user_attrs):
            hint = (f"; every config that ran gave a wrong answer ({len(wrong)}), which points at the reference "
                    f"more than at the kernels: check it (it gets the inputs in args order and returns the "
                    f"outputs)")
        raise ArgumentError(f"tune: no config completed in study {study.study_name}; reasons: {sorted(reasons)[:5]}"
                            f"{hint}. The study keeps its trials and its name does not depend on the reference: "
                            f"after fixing the reference, drop its trials and tune again, with tilec tune "
                            f"{recipe or 'FILE'} --fresh (and the same --mix and options), or first "
                            f"{forget_hint(url, study.study_name)} (from Python: tc.forget(s, mix, storage=...))")
    # the price of one more kernel in a plan: lowering plus Triton's compile (at the first call),
    # measured on a specialization, which is what the per-shape and bucket plans build
    shape = mix.shapes[0]
    device = "cuda" if triton_compat.target() == "cuda" else "cpu"
    xs = random_inputs(sched, [t for t in args if t.is_placeholder], shape, device, seed=0)
    t0 = time.perf_counter()
    Kernel(sched, args, next(iter(table.values()))[0], specialize=dict(shape))(*xs)
    compile_s = time.perf_counter() - t0
    opts = options(table, mix, tuning_s, compile_s)
    chosen = min(opts, key=lambda o: o.total(calls))
    kernels = plan_kernels(sched, args, mix, chosen)
    if chosen.name == "per-shape":
        chosen.notes.append("T was measured with each config's generic kernel; the specialized kernels "
                            "(sizes baked in as constants) are not timed separately")
    return Tuned(sched, args, mix, study, chosen, opts, calls, kernels)
