"""The `tilec` command: tune a schedule for a shape mix, look at stored studies, read generated code.

    tilec tune FILE --mix "M=256:8,1536:1,2048:1" --fixed "K=4096,N=12288" [--trials 64]
               [--storage URL] [--study NAME] [--expected-calls N] [--worker] [--report out.json]
               [--no-progress] [--jobs N] [--timeout SECONDS] [--gpus all|N|0,1] [--fresh] [--save PLAN]
    tilec tune FILE --mix-from REC.json [--kernel NAME] ...     (the mix tc.record saved)
    tilec show [--storage URL] [--study NAME] [--file FILE --mix ... --fixed ...]
    tilec show --tuned FILE --mix ... [--fixed ...] [--storage URL]
    tilec forget FILE --mix ... [--fixed ...] [--storage URL]      (or: tilec forget --study NAME)
    tilec draw FILE --png PATH [--config BM=128,BN=128]
    tilec lower FILE [--config BM=128,BN=128] [--target cuda|interpreter] [--sizes M=100,...] [--out PATH]
    tilec --version            (also: python -m tilec ...)

FILE is a Python file like the examples: it defines `make()` -> (schedule, args) and, for `tune`,
`reference(*inputs)` (torch; without it the unscheduled compute built by tilec is the reference).
Its directory is put on `sys.path`, so it can `import common`. `tune` shows a progress bar (configs
measured of --trials, the best time so far) on stderr while it runs (where stderr is a terminal; `--no-progress` never), then every trial of the study, the plan, and how to find the study again.
`--trials N` counts configs measured: repeats of a config and pruned configs are recorded, not counted.
Kernel times are printed in microseconds. `draw` draws a schedule's stage graph and loop nest into a PNG.
Without a GPU, kernels run in Triton's interpreter: `tune`, `show` and `draw` set TRITON_INTERPRET=1
themselves before the file is imported, so a file that imports triton itself works too.
User errors (a bad mix, a missing file, a bad storage, a TilecError) print one `error: ...` line and
exit with status 2; `--traceback` shows the Python traceback instead. `tune` measures candidates in
worker processes that rebuild the schedule from FILE where they cannot be forked (on a GPU); SIGINT
or SIGTERM stops it cleanly (status 130 or 143), and the same command resumes the study. A reader
that closes stdout early (`tilec lower FILE | head -3`) ends the command quietly, with status 141 as if
killed by SIGPIPE (no traceback). What `show` reads from a study is printed as data; `show` only looks:
it opens a SQLite file read-only and creates nothing, not even in an empty file.
A study's name does not depend on the reference: after fixing a wrong reference, `tune --fresh` drops
the study's trials and tunes it again under the same name (which `show --tuned` finds), and `forget`
drops a study (named by FILE and --mix as `tune` names it, or by --study); both say what they removed.
A damaged study file, another program's database or a study edited by hand is one `error:` line
that says what to do, and the file is left as it was.
"""

from __future__ import annotations

import argparse
import os
import sys

# Only what --help, --version and argument errors need is imported here: each command imports the
# rest (torch, Triton, optuna, isl) itself, so that `tilec --help` answers at once
# (benchmarks/cli_time.py; tests/test_cli.py checks that nothing heavy is imported).
from tilec.errors import TilecError, UserError
from tilec.version import __version__

MIX_HELP = ('the shapes and their call weights: "M=256:8,1536:1,2048:1" (one size varies; value:weight) '
            'or "M=256;N=64:8|M=512;N=64:1" (several sizes per shape)')
FIXED_HELP = 'sizes shared by every shape of the mix, e.g. "K=4096,N=12288"'


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage mistakes: one line, status 2, like every other user error
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def _reference(module, path: str):
    ref = getattr(module, "reference", None)
    if ref is None:
        return None
    if not callable(ref):
        raise UserError(f"{path}: reference is not a function")

    def checked(*xs):
        try:
            return ref(*xs)
        except Exception as e:
            raise UserError(f"{path}: reference() raised {type(e).__name__}: {e}") from e
    return checked


def _inputs(module, path: str):
    """FILE's `inputs(sizes, device)`, where it defines one: the inputs tuning checks and times candidates on
    (the examples' and suite's inputs are valid ones: log-probabilities, packed weights, indices in range)."""
    fn = getattr(module, "inputs", None)
    if fn is None:
        return None
    if not callable(fn):
        raise UserError(f"{path}: inputs is not a function")

    def checked(sizes, device):
        try:
            return fn(sizes, device)
        except Exception as e:
            raise UserError(f"{path}: inputs() raised {type(e).__name__}: {e}") from e
    checked.__wrapped__ = fn  # the study's name reads the file's function (tune.study.inputs_name)
    return checked


# -- parsing ---------------------------------------------------------------------------------------

def parse_mix(text: str, fixed: str | None):
    from tilec.tune.mix import ShapeMix
    try:
        return ShapeMix.parse(text, fixed or "")
    except ValueError as e:  # tilec's ArgumentError is a ValueError too
        detail = str(e) if isinstance(e, TilecError) else f"cannot read it ({e})"
        raise UserError(f"bad --mix {text!r} / --fixed {fixed or ''!r}: {detail}; expected e.g. "
                        f"--mix \"M=256:8,1536:1\" --fixed \"K=4096,N=12288\", or "
                        f"--mix \"M=256;N=64:8|M=512;N=64:1\"") from e


def parse_config(text: str | None, what: str = "--config", pairs: str = "knob=int pairs, e.g. BM=128,BN=64"
                 ) -> dict[str, int]:
    """"BM=128,BN=128" -> {"BM": 128, "BN": 128}."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, eq, value = part.partition("=")
        try:
            if not eq or not name.strip():
                raise ValueError
            out[name.strip()] = int(value)
        except ValueError:
            raise UserError(f"bad {what} {text!r}: expected {pairs}") from None
    return out


def recorded_mix(path: str, kernel: str | None, sched):
    """The mix of `--mix-from PATH`: the calls of `kernel`, or of the one kernel recorded, or of the one whose
    name is the schedule's outputs' (as a Kernel's calls are recorded)."""
    from tilec.tune.record import load_recording
    try:
        rec = load_recording(path)
    except TilecError as e:
        raise UserError(str(e)) from None
    names = rec.names()
    if kernel is None:
        own = "_".join(t.name for t in sched.outputs)
        ours = [n for n in names if n == own or n.startswith(own + "#")]  # "Y#2": another kernel of outputs Y
        if len(names) == 1:
            kernel = names[0]
        elif len(ours) == 1:
            kernel = ours[0]
        else:
            raise UserError(f"--mix-from {path}: it recorded {len(names)} kernels ({', '.join(names) or 'none'})"
                            f"{f', {len(ours)} of them named after the outputs {own}' if ours else ''}; name one "
                            f"with --kernel NAME")
    try:
        return rec.mix(kernel)
    except TilecError as e:
        raise UserError(f"--mix-from {path}: {e}") from None


def check_mix(sched, mix, path: str) -> None:
    """Every shape of the mix must give exactly the schedule's sizes (`ShapeMix.check_sizes`)."""
    try:
        mix.check_sizes(sched, path, "add it to --mix or --fixed")
    except TilecError as e:
        raise UserError(str(e)) from None


def _storage(url: str | None) -> str:
    from tilec.tune.study import default_storage
    return url or default_storage()


def open_storage(storage: str):
    """The storage to read, checked first and opened read-only (tilec.tune.storage.open_for_reading);
    None when there is nothing to read: no file, an empty one (reading creates nothing)."""
    from tilec.tune.storage import open_for_reading
    return open_for_reading(storage)


def load_study(name: str, storage: str, untuned: str | None = None):
    """The study `name` in `storage`, its trials read once (a damaged one is an error here); `untuned` is
    what to say where a study tilec named is missing (the file was not tuned for this mix there)."""
    import optuna

    from tilec.tune.storage import names_text, nothing_to_read, study_names, unreadable_study
    store = open_storage(storage)
    if store is None:
        if untuned:
            raise UserError(f"{untuned} (no study {name}: {nothing_to_read(storage)})")
        raise UserError(f"no study named {name} in {storage} ({nothing_to_read(storage)})")
    names = study_names(store)
    if name not in names:
        if untuned:
            raise UserError(f"{untuned} (no study {name} in {storage}; its studies: {names_text(names)})")
        raise UserError(f"no study named {name} in {storage} (its studies: {names_text(names)})")
    with unreadable_study(storage, name):
        study = optuna.load_study(study_name=name, storage=store)
        study.get_trials(deepcopy=False)
    return study


# -- commands --------------------------------------------------------------------------------------

def cmd_tune(a) -> int:
    import warnings

    import tilec as tc
    from tilec.tune.study import FewerConfigs, study_key
    from tilec.tune.trials import counts_text, format_table, trial_rows
    from tilec.tune.userfile import load_file, make_schedule, use_interpreter_without_gpu
    if a.fresh and a.worker:
        raise UserError("--fresh with --worker would drop the study that the other workers are filling; drop it "
                        "once before starting them: tilec forget FILE --mix ... (or --study NAME)")
    if a.kernel and not a.mix_from:
        raise UserError("--kernel needs --mix-from")
    if a.mix_from and a.fixed:
        raise UserError("--fixed goes with --mix; a recorded mix (--mix-from) holds every size")
    mix = parse_mix(a.mix, a.fixed) if a.mix else None
    use_interpreter_without_gpu()
    module = load_file(a.file)
    s, args = make_schedule(module, a.file)
    if a.auto:  # the file's computation, scheduled by tc.auto_schedule's rules instead of its make()'s schedule
        s = tc.auto_schedule(list(s.outputs))
    if mix is None:
        mix = recorded_mix(a.mix_from, a.kernel, s)
    check_mix(s, mix, a.file)
    reference = _reference(module, a.file)
    inputs = _inputs(module, a.file)
    storage = _storage(a.storage)
    from tilec.tune.storage import check_storage
    check_storage(storage)  # before anything is printed or started
    name = a.study or study_key(s, mix, args, inputs=inputs)
    if a.fresh:
        from tilec.tune.storage import drop_study
        gone = drop_study(storage, name, missing_ok=True)
        print(f"fresh: {gone}" if gone else f"fresh: no study {name} in {storage} yet; nothing to forget")
    print(f"tuning {a.file} for {mix}: {a.trials} configs to measure, study {name} in {storage}"
          f"{' (worker)' if a.worker else ''}")
    if reference is None:
        print(f"note: {a.file} defines no reference(); candidates are checked against the unscheduled "
              f"compute built by tilec")
    sys.stdout.flush()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FewerConfigs)
        tuned = tc.tune(s, mix, trials=a.trials, args=args, reference=reference, storage=storage,
                        expected_calls=a.expected_calls, worker=a.worker, study_name=name,
                        progress=False if a.no_progress else None, jobs=a.jobs, timeout=a.timeout, recipe=a.file,
                        gpus=a.gpus, cost_model=a.cost_model, inputs=inputs)
    for w in caught:
        if issubclass(w.category, FewerConfigs):
            print(f"note: {str(w.message).removeprefix('tune: ')}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if a.worker:
        rows = trial_rows(load_study(name, storage))
        print(f"study {name} in {storage} now has {counts_text(rows)}")
        print(f"see them: tilec show --storage {storage} --study {name}")
        return 0
    rows = trial_rows(tuned.study)
    from tilec.tune.mix import ShapeMix
    print(f"\n{counts_text(rows)}:")
    print(format_table(rows, [ShapeMix.key(sh) for sh, _ in mix]))
    print()
    print(tuned.plan)
    if a.report:
        print(f"report: {tuned.report(a.report)}")
    if a.save:
        print(f"plan: {tuned.save(a.save)} (serve it: tc.load({a.save!r}, outputs))")
    if a.emit_schedule:  # the tuned schedule as code (the most-called shape's config)
        from pathlib import Path
        code = (f"# the tuned schedule of {a.file}'s outputs (define outputs = [...] before this)\n"
                + tuned.schedule_code())
        if a.emit_schedule == "-":
            print(f"\n{code}", end="")
        else:
            Path(a.emit_schedule).write_text(code)
            print(f"schedule code: {a.emit_schedule}")
    print(f"\nstudy:   {name}\nstorage: {storage}")
    print(f"see it again: tilec show --storage {storage} --study {name}")
    return 0


def cmd_show(a) -> int:
    import tilec as tc
    from tilec.tune.mix import ShapeMix
    from tilec.tune.study import study_key
    from tilec.tune.trials import best_first, config_text, counts_text, fmt_time, format_table, trial_rows
    from tilec.tune.userfile import load_file, make_schedule, use_interpreter_without_gpu
    storage = _storage(a.storage)
    file = a.tuned or a.file
    if a.tuned and a.file:
        raise UserError("give --tuned FILE or --file FILE, not both")
    mix = parse_mix(a.mix, a.fixed) if a.mix else None
    if a.fixed and not a.mix:
        raise UserError("--fixed needs --mix")
    s = args = inputs = None
    if file:
        use_interpreter_without_gpu()
        module = load_file(file)
        s, args = make_schedule(module, file)
        inputs = _inputs(module, file)
        if mix is not None:
            check_mix(s, mix, file)
    name = a.study
    if name is None:
        if file is None:  # no study named: list the storage's studies
            return _list_studies(storage)
        if mix is None:
            raise UserError(f"to find the study of {file}, give the --mix (and --fixed) it was tuned with, "
                            f"or name it with --study")
        name = study_key(s, mix, args, inputs=inputs)
    elif file and mix is not None and study_key(s, mix, args, inputs=inputs) != name:
        print(f"note: {file} with this mix would be tuned in study {study_key(s, mix, args, inputs=inputs)}, "
              f"not {name}")
    untuned = None
    if a.study is None:  # the name is tilec's, from the file and the mix: say what to run instead
        fixed = f' --fixed "{a.fixed}"' if a.fixed else ""
        untuned = (f"{file} has not been tuned for this mix in this storage; tune it first: tilec tune {file} "
                   f'--mix "{a.mix}"{fixed} --storage {storage}')
    study = load_study(name, storage, untuned)
    rows = trial_rows(study)
    print(f"study:   {name}\nstorage: {storage}")
    secs = study.user_attrs.get("tuning_seconds")
    print(f"{counts_text(rows)}" + (f", {secs:.1f} s of tuning" if type(secs) in (int, float) else ""))
    print(format_table(best_first(rows)))
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    if not complete:
        print("no trial completed yet")
        return 0
    best = min(complete, key=lambda r: (r["value"], r["number"]))
    print(f"\nbest generic config: {config_text(best['config'])} (trial #{best['number']}, "
          f"{fmt_time(best['value'])} per call, weighted over the mix)")
    if file:
        first = ShapeMix.key(mix.shapes[0]) if mix is not None else next(iter(best["times"]), "")
        try:
            kernel = tc.build(s, args, config=best["config"])
        except TilecError as e:
            raise UserError(f"the study's best config does not fit {file}: {e}") from e
        print(f"\n# Triton source for {first or 'every shape'}: the generic kernel of {config_text(kernel.config)}")
        print(kernel.source)
    return 0


def cmd_forget(a) -> int:
    from tilec.tune.study import forget
    from tilec.tune.userfile import load_file, make_schedule, use_interpreter_without_gpu
    storage = _storage(a.storage)
    if a.study is not None:
        if a.file or a.mix or a.fixed:
            raise UserError("give FILE --mix ... (the study tilec tune names for them) or --study NAME, not both")
        print(forget(storage=storage, study_name=a.study))
        return 0
    if not a.file or not a.mix:
        raise UserError("name the study to forget: FILE --mix ... [--fixed ...] as it was tuned, or --study NAME")
    mix = parse_mix(a.mix, a.fixed)
    use_interpreter_without_gpu()
    s, args = make_schedule(load_file(a.file), a.file)
    check_mix(s, mix, a.file)
    print(forget(s, mix, args=args, storage=storage))
    return 0


def _list_studies(storage: str) -> int:
    import optuna

    from tilec.tune.storage import nothing_to_read, study_names, unreadable_study
    from tilec.tune.trials import fmt_time
    store = open_storage(storage)
    print(f"storage: {storage}")
    if store is None:
        print(f"no studies ({nothing_to_read(storage)})")
        return 0
    names = study_names(store)
    if not names:
        print("no studies")
    for name in names:
        with unreadable_study(storage, name):
            trials = optuna.load_study(study_name=name, storage=store).get_trials(deepcopy=False)
        done = [t.value for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None]
        print(f"  {name}  {len(trials)} trials  best {fmt_time(min(done)) if done else '-'}")
    print(f"show one: tilec show --storage {storage} --study NAME")
    return 0


def cmd_lower(a) -> int:
    import tilec as tc
    from tilec.tune.trials import config_text
    from tilec.tune.userfile import load_file, make_schedule
    config = parse_config(a.config)
    sizes = parse_config(a.sizes, "--sizes", "size=int pairs, e.g. M=100,N=4096")
    s, args = make_schedule(load_file(a.file), a.file)
    kernel = tc.build(s, args, config=config)
    target = a.target or kernel.target
    if a.out:
        if not a.sizes:
            raise UserError("--out writes a runnable kernel file for one call: give its sizes with --sizes, "
                            "e.g. --sizes M=4096,K=4096,N=4096")
        from pathlib import Path

        Path(a.out).write_text(kernel.file_text(target=target, **sizes))
        print(f"wrote {a.out} ({target} form, sizes {config_text(sizes)}): run it with `python {a.out}`"
              + (" on a GPU host" if target == "cuda" else ""))
        return 0
    print(f"# loop nest ({config_text(kernel.config) or 'no knobs'}{', sizes ' + config_text(sizes) if sizes else ''})")
    print(str(kernel._program(False, True, kernel.program.plan.call_facts(sizes)) if sizes else
              tc.lower(s, kernel.config)).rstrip())
    print(f"\n# Triton source ({target} form)")
    print(kernel.source_for(target=target, **sizes))
    return 0


def cmd_draw(a) -> int:
    import tilec as tc
    from tilec.draw import draw_schedule
    from tilec.tune.trials import config_text
    from tilec.tune.userfile import load_file, make_schedule, use_interpreter_without_gpu
    config = parse_config(a.config)
    use_interpreter_without_gpu()
    s, args = make_schedule(load_file(a.file), a.file)
    kernel = tc.build(s, args, config=config)  # checks the config (knobs not given: their first choice)
    path = draw_schedule(s, a.png, config=kernel.config, title=f"{a.file} ({config_text(kernel.config) or 'no knobs'})")
    print(f"drew the stage graph and loop nest of {a.file} ({config_text(kernel.config) or 'no knobs'}) into {path}")
    return 0


# -- entry point -----------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tilec", description="tilec: tune schedules for shape mixes, show studies, read "
                                         "generated code. Docs: docs/tuning.md")
    p.add_argument("--traceback", action="store_true", help="show the Python traceback of errors (allowed "
                                                            "anywhere on the line)")
    p.add_argument("--version", action="version", version=_version_text())
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("tune", help="search a schedule's knobs for a shape mix (an optuna study)")
    t.add_argument("file", metavar="FILE", help="Python file defining make() and reference() (and inputs(sizes, device), where its kernel needs "
                   "particular inputs: tuning checks and times on them)")
    given = t.add_mutually_exclusive_group(required=True)
    given.add_argument("--mix", metavar="MIX", help=MIX_HELP)
    given.add_argument("--mix-from", metavar="REC", help="the mix recorded by a run of the program (tc.record(), "
                       "rec.save(REC)): the calls of the kernel named by --kernel, or of the one recorded kernel, "
                       "or of the one whose outputs are FILE's")
    t.add_argument("--kernel", metavar="NAME", help="with --mix-from: the recorded kernel or op to tune for")
    t.add_argument("--save", metavar="PLAN", help="write the tuned plan to PLAN (JSON) to serve without tuning: "
                   "tc.load(PLAN, outputs)")
    t.add_argument("--fixed", metavar="SIZES", help=FIXED_HELP)
    t.add_argument("--trials", type=int, default=64, metavar="N",
                   help="configs the study should have measured in all (default 64); repeats of a config and pruned "
                        "configs are recorded but not counted")
    t.add_argument("--storage", metavar="URL", help="optuna storage URL: sqlite:///file.db, postgresql://... "
                                     "(default: sqlite under ~/.cache/tilec)")
    t.add_argument("--study", metavar="NAME", help="study name (default: derived from the schedule, mix, device and versions)")
    t.add_argument("--expected-calls", type=float, default=1_000_000, metavar="N",
                   help="calls the kernel will serve; picks the plan by P + calls*T (default 1e6)")
    t.add_argument("--worker", action="store_true",
                   help="only add trials to the shared study (run one per GPU/host); no plan")
    t.add_argument("--report", metavar="PATH", help="write the trials and plan to a .json (or .png, needs matplotlib)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar (by default the bar of configs measured is shown on stderr where it is a terminal)")
    t.add_argument("--jobs", type=int, metavar="N", help="worker processes measuring candidates (compiles run "
                   "in parallel; default: half the cores, at most 4; 0: in this process, unisolated)")
    t.add_argument("--gpus", metavar="all|N|0,1", help="first run one worker process per GPU on the study, each "
                   "pinned with CUDA_VISIBLE_DEVICES (compiles on the host's cores, each GPU times only its own); "
                   "without a GPU, N workers on the CPU")
    t.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="fail a candidate whose compile, check and timing of every shape takes longer (default 300)")
    t.add_argument("--cost-model", choices=("learned", "analytic"), default="learned",
                   help="what ranks the seeds: the analytic model corrected by one fitted on this device's other "
                        "studies in the storage, where it orders them better (learned, the default), or the "
                        "analytic model alone")
    t.add_argument("--auto", action="store_true", help="tune the schedule tc.auto_schedule makes of the file's "
                   "outputs instead of the schedule its make() writes")
    t.add_argument("--emit-schedule", metavar="PATH", help="write the tuned schedule as Python (tc.schedule_code, "
                   "the most-called shape's config) to PATH, or print it with -")
    t.add_argument("--fresh", action="store_true", help="first drop the study's trials (e.g. measured against a "
                   "reference since fixed: its name does not depend on the reference) and tune it again under the "
                   "same name; says what it removed")
    t.set_defaults(func=cmd_tune)

    s = sub.add_parser("show", help="list the trials of a stored study, best first")
    s.add_argument("--storage", metavar="URL", help="optuna storage URL (default: sqlite under ~/.cache/tilec)")
    s.add_argument("--study", metavar="NAME", help="study name (without it and a file: list the storage's studies)")
    s.add_argument("--file", metavar="FILE", help="also print the Triton source of the best config of FILE")
    s.add_argument("--tuned", metavar="FILE", help="show the study tc.tune uses for FILE and --mix")
    s.add_argument("--mix", metavar="MIX", help=MIX_HELP)
    s.add_argument("--fixed", metavar="SIZES", help=FIXED_HELP)
    s.set_defaults(func=cmd_show)

    f = sub.add_parser("forget", help="drop a stored study and all its trials (e.g. measured against a wrong "
                       "reference, or damaged); says what it removed and what remains")
    f.add_argument("file", nargs="?", metavar="FILE", help="the Python file the study was tuned for, with its --mix "
                   "(and --fixed)")
    f.add_argument("--mix", metavar="MIX", help=MIX_HELP)
    f.add_argument("--fixed", metavar="SIZES", help=FIXED_HELP)
    f.add_argument("--storage", metavar="URL", help="optuna storage URL (default: sqlite under ~/.cache/tilec)")
    f.add_argument("--study", metavar="NAME", help="the study's name, instead of FILE --mix")
    f.set_defaults(func=cmd_forget)

    d = sub.add_parser("draw", help="draw a schedule's stage graph and loop nest into a PNG (needs matplotlib)")
    d.add_argument("file", metavar="FILE", help="Python file defining make()")
    d.add_argument("--png", required=True, metavar="PATH", help="the picture to write, e.g. schedule.png")
    d.add_argument("--config", metavar="KNOBS", help="knob values, e.g. BM=128,BN=128 (default: each knob's first choice)")
    d.set_defaults(func=cmd_draw)

    lo = sub.add_parser("lower", help="print a schedule's loop nest and Triton source")
    lo.add_argument("file", metavar="FILE", help="Python file defining make()")
    lo.add_argument("--config", metavar="KNOBS", help="knob values, e.g. BM=128,BN=128 (default: each knob's first choice)")
    lo.add_argument("--target", choices=("cuda", "interpreter"),
                    help="the form of the source: the GPU's or Triton's CPU interpreter's (default: this machine's)")
    lo.add_argument("--sizes", metavar="SIZES", help="lower as a call with these sizes does, e.g. M=100,N=4096 (the "
                    "loops that run once at them are gone, and so are the masks the tiles make unneeded)")
    lo.add_argument("--out", metavar="PATH", help="write the runnable kernel file of a call with --sizes (kernels, "
                    "launch code and a main) to PATH instead of printing")
    lo.set_defaults(func=cmd_lower)
    return p


def _version_text() -> str:
    """`tilec --version`: tilec's version and the Triton and torch it runs with (Triton is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"tilec {__version__} (triton {of('triton')}, torch {of('torch')}, Python {sys.version.split()[0]})"


def main(argv=None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit status.

    Output to a reader that has gone (`tilec lower FILE | head -3`) ends the command quietly: Python's
    recipe for SIGPIPE (its docs, "Note on SIGPIPE"), stdout pointed at os.devnull so that the interpreter's
    last flush fails no more, and status 141 (128 + SIGPIPE), what a shell shows for a tool that SIGPIPE
    killed. A BrokenPipeError of another pipe (stdout still open) is not swallowed."""
    try:
        try:
            status = _main(argv)
        except SystemExit:  # argparse's --help and --version print, then exit
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a reader gone shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):  # no file descriptor: stdout was replaced in-process
            pass
        return 141


def _stdout_closed() -> bool:
    """Whether stdout's reader has gone: the write end of a pipe whose read end is closed polls POLLERR.
    Where that cannot be asked (no poll, no file descriptor), a BrokenPipeError is taken as stdout's."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True


def _main(argv) -> int:
    argv = [str(x) for x in (sys.argv[1:] if argv is None else argv)]
    show_tb = "--traceback" in argv
    argv = [x for x in argv if x != "--traceback"]
    try:
        a = parser().parse_args(argv)
        if a.command == "tune" and a.trials < 1:
            raise UserError(f"--trials must be at least 1, got {a.trials}")
        return a.func(a)
    except (UserError, TilecError) as e:
        if show_tb:
            raise
        print(f"error: {' '.join(str(e).split()) or type(e).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        why = getattr(e, "signal", "SIGINT")
        print(f"interrupted ({why}); finished trials are stored, a trial that was running is failed and "
              f"queued again, and the same command resumes the study", file=sys.stderr)
        return 143 if why == "SIGTERM" else 130


if __name__ == "__main__":
    sys.exit(main())
