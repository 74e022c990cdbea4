"""The shape-mix tuner on a CPU (Triton's interpreter, tiny shapes, injected timings where the
interpreter's own times would mean nothing)."""

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
from tilec.tune.measure import Measurer
from tilec.tune.plans import PlanOption
from tilec.tune.study import FewerConfigs, Tuned, default_jobs
from tilec.tune.trials import measured_itself

sys.path.insert(0, str(Path(__file__).parent))
import computes  # noqa: E402
import tune_case  # noqa: E402

HERE = Path(__file__).parent


def _timer_from(table):
    """A timer reading seconds from table[(warps, M)]."""
    def timer(kernel, inputs):
        return table[(kernel.config["warps"], inputs[0].shape[0])]
    return timer


@pytest.mark.parametrize("share_a,winner", [(0.6, 4), (0.7, 8)])
@pytest.mark.slow
def test_weights_change_the_winner(tmp_path, share_a, winner):
    """Old config (warps=4): 10 us on A and B. New (warps=8): 5 us on A, 20 us on B. The new one is
    better only when A's share of the calls exceeds 2/3."""
    s, args = tune_case.make()
    table = {(4, 16): 10e-6, (4, 40): 10e-6, (8, 16): 5e-6, (8, 40): 20e-6}
    mix = tc.ShapeMix([({"M": 16}, share_a), ({"M": 40}, 1 - share_a)], fixed={"K": 24, "N": 20})
    tuned = tc.tune(s, mix, trials=16, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'w.db'}", timer=_timer_from(table))
    generic = next(o for o in tuned.options if o.name == "generic")
    assert {c["warps"] for c in generic.configs.values()} == {winner}
    expected = (share_a * 10e-6 + (1 - share_a) * 10e-6) if winner == 4 else (share_a * 5e-6 + (1 - share_a) * 20e-6)
    assert generic.T == pytest.approx(expected)
    per_shape = next(o for o in tuned.options if o.name == "per-shape")
    assert per_shape.configs["K=24,M=16,N=20"]["warps"] == 8 and per_shape.configs["K=24,M=40,N=20"]["warps"] == 4
    assert "break-even" in tuned.plan and "chosen:" in tuned.plan


@pytest.mark.slow
def test_tuned_dispatches_checks_and_serves_other_shapes(tmp_path):
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'd.db'}", expected_calls=10)
    for m in (16, 40, 7, 100):  # in the mix, and outside it (nearest shape's config)
        a, w = torch.randn(m, 24), torch.randn(24, 20)
        assert torch.allclose(tuned(a, w), a @ w, atol=1e-4)
    assert "@triton.jit" in tuned.source(M=16)
    with pytest.raises(tc.ArgumentError, match="no kernel of the plan serves"):
        tuned.source(M=3)
    report = tuned.report(str(tmp_path / "r.json"))
    assert Path(report).read_text().count('"state"') == len(tuned.study.trials)


def test_tuned_source_takes_a_target_as_kernel_source_for_does():
    """`tuned.source(target=...)`: the form of Kernel.source_for (default: this machine's; tanh is
    libdevice's on the GPU, written with tl.exp for the interpreter), and its error for another target."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: tc.tanh(X[i, j]), name="Y")
    s = tc.create_schedule(Y)
    kernel = tc.build(s, [X, Y])
    mix = tc.ShapeMix([({"M": 8}, 1)], fixed={"N": 16})
    plan = PlanOption("generic", {"M=8,N=16": {}}, T=1e-6, P=0.0)
    tuned = Tuned(s, [X, Y], mix, None, plan, [plan], 1e6, {"M=8,N=16": kernel})  # as tc.tune makes it
    cuda, interpreter = tuned.source(M=8, target="cuda"), tuned.source(M=8, target="interpreter")
    assert "libdevice.tanh(" in cuda and "libdevice" not in interpreter and "tl.exp(" in interpreter
    assert cuda == kernel.source_for(target="cuda", M=8, N=16)
    assert tuned.source(M=8) == kernel.source_for(M=8, N=16) == {"cuda": cuda, "interpreter": interpreter}[kernel.target]
    with pytest.raises(tc.ArgumentError, match=r"^source: target must be one of cuda, interpreter, got 'rocm'$"):
        tuned.source(M=8, target="rocm")
    with pytest.raises(tc.ArgumentError, match=r"^source_for: target must be one of cuda, interpreter, got 'rocm'$"):
        kernel.source_for(M=8, N=16, target="rocm")
    with pytest.raises(tc.ArgumentError, match="no kernel of the plan serves"):
        tuned.source(M=3, target="cuda")


def test_tuned_dump_writes_the_file_a_call_of_the_shape_runs(tmp_path):
    """`tuned.dump(path, M=...)`: the kernel file of the plan's kernel for that shape (fixed sizes added), which
    runs alone; a shape outside the mix gets the file of the nearest shape's generic kernel; sizes the inputs
    lack, or missing ones, are refused with the sizes named."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: tc.tanh(X[i, j]) * 2.0, name="Y")
    s = tc.create_schedule(Y)
    small, large = tc.build(s, [X, Y]), tc.build(s, [X, Y], specialize={"M": 64, "N": 16})
    mix = tc.ShapeMix([({"M": 8}, 1), ({"M": 64}, 1)], fixed={"N": 16})
    plan = PlanOption("per-shape", {"M=8,N=16": {}, "M=64,N=16": {}}, T=1e-6, P=0.0)
    tuned = Tuned(s, [X, Y], mix, None, plan, [plan], 1e6, {"M=8,N=16": small, "M=64,N=16": large})
    path = tuned.dump(tmp_path / "y64.py", M=64)
    assert path == tmp_path / "y64.py" and "_EXAMPLE_SIZES = {'M': 64, 'N': 16}" in path.read_text()
    assert path.read_text().replace("{'M': 64, 'N': 16}", "") == large.path.read_text().replace(
        "{'M': 64, 'N': 16}", "")  # the specialized kernel's file, not the generic one's
    env = {k: v for k, v in os.environ.items() if k != "TILEC_CACHE_DIR"}
    env["TRITON_INTERPRET"] = "1"
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.startswith("Y: shape (64, 16) torch.float32"), run.stderr[-2000:]
    outside = tuned.dump(tmp_path / "y5.py", M=5)  # nearest shape: M=8, whose kernel is generic
    assert "_EXAMPLE_SIZES = {'M': 5, 'N': 16}" in outside.read_text()
    with pytest.raises(tc.ArgumentError, match=r"^dump: give every size of the inputs \(M, N; the mix fixes N\) "
                                               r"and only those; missing M$"):
        tuned.dump()
    with pytest.raises(tc.ArgumentError, match=r"; not a size of the inputs: K$"):
        tuned.dump(M=8, K=3)
    with pytest.raises(tc.ArgumentError, match=r"^dump: size M must be an int >= 0, got -1$"):
        tuned.dump(M=-1)


@pytest.mark.slow
def test_identical_configs_are_not_measured_twice(tmp_path, monkeypatch):
    s, args = tune_case.make()
    measured = []
    real = Measurer.measure

    def counting(self, config):
        measured.append(tuple(sorted(config.items())))
        return real(self, config)

    monkeypatch.setattr(Measurer, "measure", counting)
    # jobs=0: measured in this process, so the counter sees every measurement
    tuned = tc.tune(s, tune_case.MIX, trials=30, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'dup.db'}", seed=1, jobs=0)
    assert measured and len(measured) == len(set(measured))          # each config measured once
    configs = {tuple(sorted(t["config"].items())) for t in tuned.trials()}
    assert len(configs) == 16                                         # the whole 16-point grid was seen
    dups = [t for t in tuned.trials() if "duplicate_of" in t]
    assert len(tuned.trials()) == 16 + len(dups)                      # repeats (seeds the grid met again)
    assert all(t["value"] is not None for t in dups if t["state"] == "COMPLETE")


@pytest.mark.slow
def test_pruned_configs_never_compile(tmp_path, monkeypatch):
    s, args = tune_case.make()
    built = []
    real = Measurer.build

    def recording(self, config):
        built.append(dict(config))
        return real(self, config)

    monkeypatch.setattr(Measurer, "build", recording)
    # shared memory limit so small that only 16x16 tiles with BK=16 fit (no cache_read: nothing to count)
    s.cache_read(args[0], "shared", readers=[s[args[2]]]).compute_at(s[args[2]], s[args[2]].leaves[2])
    tuned = tc.tune(s, tune_case.MIX, trials=16, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'p.db'}", shared_limit=16 * 16 * 4, jobs=0)
    pruned = [t for t in tuned.trials() if t["state"] == "PRUNED"]
    assert pruned and all("shared memory" in t["pruned"] for t in pruned)
    assert built and all(c["BM"] == 16 and c["BK"] == 16 for c in built)
    assert all(c not in built for c in (t["config"] for t in pruned))


@pytest.mark.slow
def test_failed_candidates_are_recorded_and_never_win(tmp_path):
    s, args = tune_case.make()

    def timer(kernel, inputs):
        if kernel.config["BN"] == 16:
            raise RuntimeError("out of resources: shared memory")  # what Triton raises at launch
        return 1e-6 if kernel.config["BM"] == 16 else 2e-6

    tuned = tc.tune(s, tune_case.MIX, trials=16, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'f.db'}", timer=timer)
    failed = [t for t in tuned.trials() if t["state"] == "FAIL"]
    assert len({tuple(sorted(t["config"].items())) for t in failed}) == 8  # every BN=16 config, once or more
    assert all("out of resources" in t["failure"] for t in failed)
    for o in tuned.options:
        assert all(c["BN"] == 32 for c in o.configs.values())


@pytest.mark.parametrize("jobs", [0, 1])
def test_a_reference_of_the_wrong_shape_stops_tuning_with_the_shapes_named(tmp_path, jobs):
    """A reference that returns another shape is the reference's fault, said once before anything is
    measured (it was every candidate's 'RuntimeError: The size of tensor a (20) must match ...')."""
    s, args = tune_case.make()
    with pytest.raises(tc.ArgumentError, match=r"the reference returned shape \(16, 3\) for C at K=24,M=16,N=20, "
                                               r"whose shape is \(16, 20\) \(outputs: C \(16, 20\)\)"):
        tc.tune(s, tune_case.MIX, trials=2, args=args, reference=lambda a, w: (a @ w)[:, :3], jobs=jobs,
                storage=f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(tc.ArgumentError, match=r"the reference returned 2 value\(s\) \(\(16, 20\), \(16, 20\)\) at "
                                               r"K=24,M=16,N=20; it must return the outputs, one tensor each: C \(16, 20\)"):
        tc.tune(s, tune_case.MIX, trials=2, args=args, reference=lambda a, w: (a @ w, a @ w), jobs=jobs,
                storage=f"sqlite:///{tmp_path / 'y.db'}")


def test_wrong_answers_fail_the_candidate(tmp_path):
    s, args = tune_case.make()
    with pytest.raises(tc.ArgumentError, match="no config completed.*wrong answer") as err:
        tc.tune(s, tune_case.MIX, trials=4, args=args, reference=lambda a, w: a @ w + 1.0,
                storage=f"sqlite:///{tmp_path / 'x.db'}")
    # every config wrong: the reference is suspected, and after fixing it the study's trials are dropped
    assert "every config that ran gave a wrong answer (" in str(err.value) and "check it" in str(err.value)
    assert "after fixing the reference, drop its trials and tune again, with tilec tune FILE --fresh" in str(err.value)
    assert f"tilec forget --storage sqlite:///{tmp_path / 'x.db'} --study tilec-" in str(err.value)
    st = optuna.load_study(study_name=optuna.get_all_study_names(f"sqlite:///{tmp_path / 'x.db'}")[0],
                           storage=f"sqlite:///{tmp_path / 'x.db'}")
    assert st.trials and all("wrong answer" in t.user_attrs.get("failure", "") for t in st.trials), [(t.state, t.user_attrs) for t in st.trials]


def test_study_name_changes_with_the_kernel(tmp_path):
    from tilec.tune.study import study_key
    s1, args1 = tune_case.make()
    s2, args2 = tune_case.make()
    assert study_key(s1, tune_case.MIX, args1) == study_key(s2, tune_case.MIX, args2)
    s2[args2[2]].pipeline(s2[args2[2]].leaves[2], 2)
    assert study_key(s1, tune_case.MIX, args1) != study_key(s2, tune_case.MIX, args2)


def test_a_tuned_result_is_stored_as_trace_and_config_and_builds_without_the_schedule_code(tmp_path):
    """The study keeps the schedule's trace beside its trials: (trace, best config) read back from the
    storage alone rebuilds the tuned kernel on the computation, without running tune_case.make (the
    user's file); a trace that is not one, or a config of other knobs, is refused."""
    from tilec.tune.study import build_stored, stored_plan
    s, args = tune_case.make()
    storage = f"sqlite:///{tmp_path / 't.db'}"
    tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, storage=storage, study_name="t",
            timer=lambda kernel, inputs: 1e-6 * kernel.config["BM"], jobs=0, progress=False)
    study = optuna.load_study(study_name="t", storage=storage)
    trace, config = stored_plan(study)
    assert trace == s.trace.to_json() and set(config) == set(s.knobs)
    M, N, K = tc.size_vars("M N K")  # the computation alone, made again
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    kern = build_stored(trace, config, C, [A, W, C])
    assert kern.source == tc.build(s, args, config=config).source
    a, w = torch.randn(40, 24), torch.randn(24, 20)
    torch.testing.assert_close(kern(a, w), a @ w)
    with pytest.raises(tc.ArgumentError, match=r"is not a config of the stored schedule's knobs \(BM in \[16, 32\]"):
        build_stored(trace, {**config, "BM": 64}, C, [A, W, C])
    study.set_user_attr("trace", '{"steps": [{"primitive": "exec"}]}')
    with pytest.raises(tc.ArgumentError, match=r"^Trace.from_json: not a trace's JSON text"):
        build_stored(stored_plan(study)[0], config, C, [A, W, C])
    empty = optuna.create_study(study_name="empty", storage=storage)
    with pytest.raises(tc.ArgumentError, match=r"study empty stores no schedule trace"):
        stored_plan(empty)


def _spawn(storage, trials, mode, study):
    # keep the caller's PYTHONPATH (the GPU host puts islpy/optuna wheels there) and TRITON_INTERPRET
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, str(HERE / "tune_case.py"), storage, str(trials), mode, study],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _finished(storage, study):
    st = optuna.load_study(study_name=study, storage=storage)
    return st, [t for t in st.trials if t.state.is_finished()]


@pytest.mark.slow
def test_resume_after_a_killed_worker(tmp_path):
    storage = f"sqlite:///{tmp_path / 'k.db'}"
    p = _spawn(storage, 10, "worker", "killed")
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.5)
        try:
            if len(_finished(storage, "killed")[1]) >= 3:
                break
        except Exception:  # noqa: BLE001 - the study may not exist yet
            continue
    p.send_signal(signal.SIGKILL)
    p.wait()
    study, before = _finished(storage, "killed")
    done_before = {t.number for t in before if t.state == optuna.trial.TrialState.COMPLETE}
    assert len(done_before) >= 3
    time.sleep(3.5)  # three missed heartbeats: the killed worker's trial is stale
    s, args = tune_case.make()
    tc.tune(s, tune_case.MIX, trials=10, args=args, reference=tune_case.reference, storage=storage,
            study_name="killed", timer=tune_case.slow_timer, heartbeat=1)
    study, after = _finished(storage, "killed")
    assert done_before <= {t.number for t in after}                  # nothing completed was lost
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    complete = [t for t in after if t.state == optuna.trial.TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    params = [tuple(sorted(t.params.items())) for t in complete]
    assert len(params) == len(set(params))                            # nothing measured twice
    assert len(after) >= 10


def _two_workers(storage, study):
    ps = [_spawn(storage, 8, "worker", study) for _ in range(2)]
    for p in ps:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out.decode()[-2000:]
    st, fin = _finished(storage, study)
    assert not [t for t in st.trials if t.state == optuna.trial.TrialState.RUNNING]
    measured = [t for t in fin if measured_itself(t)]  # what trials= counts: not repeats, not pruned
    assert len(measured) == len({tuple(sorted(t.params.items())) for t in measured})
    # both stop at 8 measured configs; the trials still running in the other worker (one per job) may add more
    assert 8 <= len(measured) <= 7 + 2 * default_jobs(), [(t.number, t.state, t.user_attrs) for t in fin]
    numbers = [t.number for t in st.trials]
    assert len(numbers) == len(set(numbers))
    measured = [tuple(sorted(t.params.items())) for t in fin
                if t.state == optuna.trial.TrialState.COMPLETE and "duplicate_of" not in t.user_attrs]
    assert len(measured) >= 1


@pytest.mark.slow
def test_two_workers_share_a_sqlite_study(tmp_path):
    _two_workers(f"sqlite:///{tmp_path / 'two.db'}", "two")


@pytest.mark.skipif(not os.environ.get("TILEC_TEST_POSTGRES"),
                    reason="set TILEC_TEST_POSTGRES=postgresql://... (.ci/run starts a server)")
def test_two_workers_share_a_postgres_study():
    url = os.environ["TILEC_TEST_POSTGRES"]
    name = f"two-pg-{os.getpid()}-{int(time.time())}"
    _two_workers(url, name)


@pytest.mark.slow
def test_report_plot(tmp_path):
    pytest.importorskip("matplotlib")
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=4, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'plot.db'}", progress=True)
    path = Path(tuned.report(str(tmp_path / "report.png")))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.with_suffix(".json").exists()


def test_mix_must_give_every_size(tmp_path):
    s, args = tune_case.make()
    with pytest.raises(tc.ArgumentError, match=r"does not give size N of the schedule; every shape needs K, M, N"):
        tc.tune(s, tc.ShapeMix([({"M": 16}, 1)], fixed={"K": 24}), trials=2, args=args,
                reference=tune_case.reference, storage=f"sqlite:///{tmp_path / 'm.db'}")


def test_mix_must_not_give_a_size_the_schedule_does_not_use(tmp_path):
    """A size the schedule does not use is a typo or the wrong recipe: refused as the CLI refuses it."""
    s, args = tune_case.make()
    with pytest.raises(tc.ArgumentError, match=r"the mix gives size Q, which the schedule does not use "
                                               r"\(its sizes: K, M, N\)"):
        tc.tune(s, tc.ShapeMix([({"M": 16}, 1)], fixed={"K": 24, "N": 20, "Q": 3}), trials=2, args=args,
                reference=tune_case.reference, storage=f"sqlite:///{tmp_path / 'q.db'}")


def test_study_name_ignores_the_order_of_the_mix():
    from tilec.tune.study import study_key
    s, args = tune_case.make()
    a = tc.ShapeMix([({"M": 16}, 3), ({"M": 40}, 1)], fixed={"K": 24, "N": 20})
    b = tc.ShapeMix([({"M": 40}, 1), ({"M": 16}, 3)], fixed={"K": 24, "N": 20})
    c = tc.ShapeMix([({"M": 40}, 1.0001), ({"M": 16}, 3)], fixed={"K": 24, "N": 20})
    assert study_key(s, a, args) == study_key(s, b, args) != study_key(s, c, args)


def test_seeding_by_workers(tmp_path):
    """A worker seeds an empty study where the storage locks rows (PostgreSQL); on SQLite it leaves
    seeding to the coordinating process, since two workers could claim one enqueued trial there."""
    s, args = tune_case.make()
    storage = f"sqlite:///{tmp_path / 'seed.db'}"
    tc.tune(s, tune_case.MIX, trials=3, args=args, reference=tune_case.reference, storage=storage,
            study_name="w", worker=True)
    st = optuna.load_study(study_name="w", storage=storage)
    assert [t.user_attrs.get("seed") for t in st.trials] == [None] * 3
    url = os.environ.get("TILEC_TEST_POSTGRES")
    if url:
        name = f"seed-{os.getpid()}-{int(time.time())}"
        tc.tune(s, tune_case.MIX, trials=3, args=args, reference=tune_case.reference, storage=url,
                study_name=name, worker=True)
        st = optuna.load_study(study_name=name, storage=url)
        from tilec.tune.study import _seed_count
        n = _seed_count(8, 3)  # seeds are at most half the trials: the sampler picks the rest
        assert n >= 1 and [t.user_attrs.get("seed") for t in st.trials] == ["cost model"] * n + [None] * (3 - n)


def _hopper_schedule():
    """A GEMM with knobs for tile, TMA, flatten and group: most of its choices tie in the traffic model."""
    A, W, C = computes.gemm(dtype="bfloat16")
    s = tc.create_schedule(C)
    io, ii = s[C].split(C.axis[0], tc.knob("BM", [64, 128]))
    jo, ji = s[C].split(C.axis[1], tc.knob("BN", [64, 128, 256]))
    ko, ki = s[C].split(C.reduce_axis[0], 64)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    tiles = s[C].swizzle(io, jo, group=tc.knob("GROUP_M", [1, 8]))
    s[C].bind(tiles, "program_id.0")
    s[C].persistent(tiles, flatten=tc.flag("FLATTEN"))
    for t in (A, W):
        s.cache_read(t, "shared", readers=[C], tma=tc.flag("TMA")).compute_at(s[C], ko)
    return s


def test_the_measured_priors_break_the_models_ties():
    from tilec.tune.cost import estimate
    s = _hopper_schedule()
    shape = {"M": 2048, "N": 8192, "K": 4096}
    base = {"BM": 128, "BN": 256, "GROUP_M": 1, "FLATTEN": 0, "TMA": 0}
    t = lambda **kw: estimate(s, {**base, **kw}, shape)  # noqa: E731
    assert t(TMA=1) < t()                      # descriptor loads measured 5-10% faster
    assert t(FLATTEN=1) > 2 * t()              # flatten over pointer loads: 2.5-4x slower
    assert t(FLATTEN=1, TMA=1) == t(TMA=1)     # with descriptors it is not penalized
    assert t(GROUP_M=8) < t()                  # grouped order on a grid of many waves


def test_seeds_give_each_shape_its_own_distinct_configs():
    from tilec.tune.cost import estimate
    from tilec.tune.space import SearchSpace
    from tilec.tune.study import seed_configs
    s = _hopper_schedule()
    mix = tc.ShapeMix([({"M": 256}, 8), ({"M": 4096}, 1)], fixed={"K": 4096, "N": 8192})
    space = SearchSpace(s, mix)
    seeds = seed_configs(s, space, mix, 6)
    assert len(seeds) == 6 and len({tuple(sorted(c.items())) for c in seeds}) == 6
    feasible = [c for c in space.configs() if space.feasible(c).ok]
    for shape, _ in mix:  # each shape's best-estimated config is among the seeds
        best = min(feasible, key=lambda c: estimate(s, c, {**mix.fixed, **shape}))
        assert best in seeds
    for k, (shape, _) in enumerate(mix):  # no two seeds the model cannot tell apart on the shape they were taken for
        est = sorted(estimate(s, c, {**mix.fixed, **shape}) for c in seeds[k::2])
        assert all(b > a * 1.01 for a, b in zip(est, est[1:])), est


@pytest.mark.slow
def test_a_space_the_trials_cover_is_searched_whole_unseeded(tmp_path):
    # seeds in a grid search only measured some configs twice: each config once, none marked a seed
    s, args = tune_case.make()
    from tilec.tune.space import SearchSpace
    size = SearchSpace(s, tune_case.MIX).size
    tuned = tc.tune(s, tune_case.MIX, trials=size, args=args, reference=tune_case.reference,
                    storage=f"sqlite:///{tmp_path / 'g.db'}", timer=lambda kernel, inputs: 1e-6)
    trials = tuned.trials()
    assert not any(t.get("seed") for t in trials)
    assert len({tuple(sorted(t["config"].items())) for t in trials}) == len(trials) == size


@pytest.mark.parametrize("terminal, progress, shown", [(True, None, True), (False, None, False),
                                                      (True, False, False), (False, True, True)])
@pytest.mark.slow
def test_progress_is_shown_on_a_terminal_by_default(tmp_path, monkeypatch, capsys, terminal, progress, shown):
    """tc.tune's progress bar: on by default where stderr is a terminal, off elsewhere (logs, CI);
    progress=True/False overrides it. It is tilec's (configs measured, the best time in microseconds),
    never optuna's (trials, best value in seconds: "Best value: 9.67616e-05")."""
    import optuna

    from tilec.tune import study as study_mod

    seen = []
    real = optuna.Study.optimize
    monkeypatch.setattr(optuna.Study, "optimize",
                        lambda self, *a, **kw: seen.append(kw["show_progress_bar"]) or real(self, *a, **kw))
    monkeypatch.setattr(study_mod, "_stderr_is_terminal", lambda: terminal)
    s, args = tune_case.make()
    tc.tune(s, tune_case.MIX, trials=1, args=args, reference=tune_case.reference, jobs=0,
            storage=f"sqlite:///{tmp_path / 'p.db'}", progress=progress, timer=lambda kernel, inputs: 12.5e-6)
    assert seen == [False]
    err = capsys.readouterr().err
    assert ("measured: 100%" in err and "1/1" in err and "best 12.50 us (#0)" in err) == shown, err
    assert "Best value" not in err


def test_trials_counts_measured_configs_not_repeats_or_pruned(tmp_path):
    """--trials 12 measured 9 configs: repeats and pruned configs counted as trials. A study that holds
    three trials of one config and one pruned config gets 6 measured configs from trials=6."""
    s, args = tune_case.make()
    s.cache_read(args[0], "shared", readers=[s[args[2]]]).compute_at(s[args[2]], s[args[2]].leaves[2])
    storage = f"sqlite:///{tmp_path / 'n.db'}"
    st = optuna.create_study(study_name="n", storage=storage)
    same = {"BM": 16, "BN": 16, "BK": 16, "warps": 4}
    for cfg in (same, same, same, {"BM": 32, "BN": 16, "BK": 32, "warps": 4}):  # the last does not fit
        st.enqueue_trial(cfg)
    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, storage=storage,
                    study_name="n", shared_limit=2048, timer=lambda kernel, inputs: 1e-6 * kernel.config["BN"], jobs=0)
    trials = tuned.trials()
    assert [t.get("duplicate_of") for t in trials[:3]] == [None, 0, 0]
    assert trials[3]["state"] == "PRUNED" and "shared memory" in trials[3]["pruned"]
    measured = [t for t in trials if t["measured"]]
    assert len(measured) == 6 and len({tuple(sorted(t["config"].items())) for t in measured}) == 6
    assert not [t for t in trials if t["measured"] and "duplicate_of" in t]


@pytest.mark.slow
def test_seeds_leave_half_the_trials_to_the_sampler(tmp_path):
    """With --trials 8, every trial was a cost-model seed: seeds=8 took all 8 and the sampler none."""
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=8, args=args, reference=tune_case.reference, jobs=0,
                    storage=f"sqlite:///{tmp_path / 's.db'}", timer=lambda kernel, inputs: 1e-6 * kernel.config["BM"])
    trials = tuned.trials()
    assert sum(1 for t in trials if t["measured"]) == 8
    assert [t.get("seed") for t in trials[:4]] == ["cost model"] * 4
    assert not [t for t in trials[4:] if t.get("seed") and "after_repeat" not in tuned.study.trials[t["number"]].user_attrs]


@pytest.mark.parametrize("trials", [10, 20])  # the sampler (TPE) and the grid (the space fits the trials)
@pytest.mark.slow
def test_a_space_with_fewer_configs_than_trials_is_measured_whole_and_warns(tmp_path, trials):
    s, args = tune_case.make()
    s.cache_read(args[0], "shared", readers=[s[args[2]]]).compute_at(s[args[2]], s[args[2]].leaves[2])
    with pytest.warns(FewerConfigs, match=rf"measured 4 configs, fewer than trials={trials}: the space has only 4 "
                                          r"that can be measured \(16 in all, 12 pruned before compiling\)") as w:
        tuned = tc.tune(s, tune_case.MIX, trials=trials, args=args, reference=tune_case.reference, jobs=0,
                        storage=f"sqlite:///{tmp_path / 'f.db'}", shared_limit=16 * 16 * 4,
                        timer=lambda kernel, inputs: 1e-6 * kernel.config["BN"])
    assert [x.filename for x in w if x.category is FewerConfigs] == [__file__]  # points at the caller of tc.tune
    measured = [t for t in tuned.trials() if t["measured"]]
    assert {(t["config"]["BM"], t["config"]["BK"]) for t in measured} == {(16, 16)} and len(measured) == 4
    assert len(tuned.trials()) <= trials + 16                          # it stopped, and soon


def test_failed_configs_count_as_measured_and_never_win(tmp_path):
    s, args = tune_case.make()

    def timer(kernel, inputs):
        if kernel.config["BM"] == 16:
            raise RuntimeError("out of resources: shared memory")
        return 1e-6

    tuned = tc.tune(s, tune_case.MIX, trials=6, args=args, reference=tune_case.reference, jobs=0,
                    storage=f"sqlite:///{tmp_path / 'f.db'}", timer=timer)
    failed = [t for t in tuned.trials() if t["state"] == "FAIL" and t["measured"]]
    assert failed and all("out of resources" in t["failure"] for t in failed)
    assert sum(t["measured"] for t in tuned.trials()) == 6
    assert all(c["BM"] == 32 for o in tuned.options for c in o.configs.values())


def test_the_json_report_gives_times_in_seconds_and_microseconds(tmp_path):
    import json
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, jobs=0,
                    storage=f"sqlite:///{tmp_path / 'j.db'}", timer=lambda kernel, inputs: 2.5e-6)
    data = json.loads(Path(tuned.report(str(tmp_path / "r.json"))).read_text())
    t = next(t for t in data["trials"] if t["state"] == "COMPLETE")
    assert t["value"] == pytest.approx(2.5e-6) and t["value_us"] == pytest.approx(2.5)
    assert t["times"]["K=24,M=16,N=20"] == pytest.approx(2.5e-6) and t["times_us"]["K=24,M=16,N=20"] == pytest.approx(2.5)
    assert data["summary"]["chosen"]["T_us"] == pytest.approx(2.5)
    assert "2.50 us/call" in data["plan"]


def test_progress_argument_is_checked(tmp_path):
    s, args = tune_case.make()
    with pytest.raises(tc.ArgumentError, match=r"progress must be True, False or None \(shown on a terminal\), "
                                               r"got 'yes'"):
        tc.tune(s, tune_case.MIX, trials=1, args=args, storage=f"sqlite:///{tmp_path / 'p.db'}", progress="yes")


def test_a_knob_whose_every_choice_exceeds_the_shapes_keeps_its_smallest():
    """Tiles larger than every shape are pruned, but for the knob's smallest choice: RMSNorm's BLOCK (1024,
    2048, 4096, 256) on rows of 64 (the tiny Qwen3) left tc.tune nothing to measure. Its smallest, 256, stays;
    a choice that fits is still preferred to it where one exists (a larger one is pruned beside it)."""
    from tilec.tune.space import SearchSpace
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda r, c: X[r, c] * 2, name="Y")
    s = tc.create_schedule(Y)
    r, c = Y.axis
    co, ci = s[Y].split(c, tc.knob("BLOCK", [1024, 2048, 4096, 256]))
    s[Y].bind(r, "program_id.0")
    small = SearchSpace(s, tc.ShapeMix([({"M": 3, "N": 64}, 1)]))
    ok = [cfg["BLOCK"] for cfg in small.configs() if small.feasible(cfg).ok]
    assert ok == [256]
    assert "its smallest choice 256 is tried" in small.feasible({"BLOCK": 1024}).reason
    wide = SearchSpace(s, tc.ShapeMix([({"M": 3, "N": 1500}, 1)]))
    assert [cfg["BLOCK"] for cfg in wide.configs() if wide.feasible(cfg).ok] == [1024, 2048, 256]
    x = torch.randn(3, 64)
    with pytest.warns(UserWarning, match="the space has only 1 that can be measured"):
        tuned = tc.tune(s, tc.ShapeMix([({"M": 3, "N": 64}, 1)]), trials=2, args=[X, Y], progress=False,
                        timer=lambda kernel, inputs: 1e-6)
    assert [cfg["BLOCK"] for cfg in tuned.chosen.configs.values()] == [256]
    torch.testing.assert_close(tuned(x), 2 * x)


def _sqrt_kernel():
    """Y = sqrt(X): NaN on negative inputs, so on the tuner's normal random inputs every candidate is wrong
    (its NaN against the reference's), as kl_div's on inputs that are not log-probabilities."""
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    Y = tc.compute((M,), lambda i: tc.sqrt(X[i]), name="Y")
    s = tc.create_schedule(Y)
    io, ii = s[Y].split(Y.axis[0], tc.knob("B", [16, 32]))
    s[Y].bind(io, "program_id.0")
    return s, [X, Y]


def _positive(sizes, device):
    return [torch.rand(sizes["M"], device=device) + 0.5]


@pytest.mark.parametrize("jobs", [0, 1])
def test_tune_on_the_inputs_a_kernel_is_valid_on(tmp_path, jobs):
    """tc.tune(..., inputs=fn): the candidates are checked and timed on fn(sizes, device) (in a forked worker
    too); without it this kernel has no config that passes the check."""
    s, args = _sqrt_kernel()
    mix = tc.ShapeMix([({"M": 37}, 1), ({"M": 5}, 1)])
    storage = f"sqlite:///{tmp_path / 't.db'}"
    seen = []

    def positive(sizes, device):
        seen.append(dict(sizes))
        return _positive(sizes, device)

    tuned = tc.tune(s, mix, trials=2, args=args, storage=storage, jobs=jobs, progress=False, inputs=positive,
                    timer=lambda kernel, inputs: 1e-6)
    x = torch.rand(37) + 0.1
    torch.testing.assert_close(tuned(x), x.sqrt())
    if jobs == 0:
        assert {tuple(sorted(d.items())) for d in seen} == {(("M", 37),), (("M", 5),)}
    with pytest.raises(tc.ArgumentError, match="no config"):
        tc.tune(s, mix, trials=2, args=args, storage=f"sqlite:///{tmp_path / 'u.db'}", jobs=0, progress=False,
                timer=lambda kernel, inputs: 1e-6)


def test_tune_refuses_inputs_of_the_wrong_shape_or_kind(tmp_path):
    s, args = _sqrt_kernel()
    mix = tc.ShapeMix([({"M": 7}, 1)])
    kw = dict(trials=1, args=args, storage=f"sqlite:///{tmp_path / 't.db'}", jobs=0, progress=False)
    with pytest.raises(tc.ArgumentError, match=r"inputs\(\) returned \(8,\) float32 for X at M=7, which is \(7,\) "
                                               r"float32"):
        tc.tune(s, mix, inputs=lambda sizes, device: [torch.rand(8)], **kw)
    with pytest.raises(tc.ArgumentError, match=r"inputs\(\) returned 2 value\(s\)"):
        tc.tune(s, mix, inputs=lambda sizes, device: [torch.rand(7), torch.rand(7)], **kw)
    with pytest.raises(tc.ArgumentError, match=r"tune: inputs must be a function"):
        tc.tune(s, mix, inputs=[torch.rand(7)], **kw)


def test_inputs_name_the_study_so_a_retune_with_them_measures_again(tmp_path):
    """Review finding: the study's name did not depend on inputs=, so tuning again with inputs= after a run on
    random inputs copied that run's failures (wrong answers on NaN) from the same study instead of measuring."""
    s, args = _sqrt_kernel()
    mix = tc.ShapeMix([({"M": 37}, 1)])
    kw = dict(trials=2, args=args, storage=f"sqlite:///{tmp_path / 't.db'}", jobs=0, progress=False,
              timer=lambda kernel, inputs: 1e-6)
    with pytest.raises(tc.ArgumentError, match="no config completed"):
        tc.tune(s, mix, **kw)
    tuned = tc.tune(s, mix, inputs=_positive, **kw)  # a study of its own: measured, all complete
    assert all(t["state"] == "COMPLETE" for t in tuned.trials())
    from tilec.tune.study import study_key
    assert tuned.study.study_name == study_key(s, mix, args, inputs=_positive) != study_key(s, mix, args)


def test_gpus_workers_with_inputs_need_the_recipes_own(tmp_path):
    """Review finding: gpus= workers (`tilec tune RECIPE --worker`) make their inputs with the recipe's inputs()
    or, without one, random ones, whatever the caller passed: refused unless the recipe defines that function."""
    recipe = tmp_path / "sqrt_recipe.py"
    here = str(Path(__file__).parent)
    recipe.write_text(f"import sys\nsys.path.insert(0, {here!r})\nfrom test_tune import _sqrt_kernel\n\n\n"
                      "def make():\n    return _sqrt_kernel()\n")
    s, args = _sqrt_kernel()
    with pytest.raises(tc.ArgumentError, match=r"gpus= workers rebuild everything from the recipe .* defines no "
                                               r"inputs\(sizes, device\)"):
        tc.tune(s, tc.ShapeMix([({"M": 7}, 1)]), trials=1, args=args, storage=f"sqlite:///{tmp_path / 't.db'}",
                progress=False, inputs=_positive, recipe=str(recipe), gpus=1)
