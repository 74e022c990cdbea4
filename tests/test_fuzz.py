"""The differential schedule fuzzer in CI, and fast tests of the fuzzer itself.

`test_fuzz_campaign` runs random (compute, schedule, config) cases for a bounded wall time (60 s;
`TILEC_FUZZ_SECONDS` overrides it, 0 skips it), starting at a seed derived from the git commit so that
each commit tries new cases, and fails listing every failing case's seed and reduced reproduction
script. Replay one with `python scripts/fuzz.py --cases 1 --seed SEED`.

`test_fuzz_cuda_compile_campaign` compiles the CUDA form of other cases for sm_90 on the CPU (30 s).

The other tests check the fuzzer: the oracle agrees with PyTorch on a known compute and flags a wrong
result, the sentinels catch out-of-bounds and missing writes, cases are reproducible from their seed and
their script, and the runner classifies hung and crashed workers and reduces a failing case.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tilec as tc  # noqa: E402
from tests.fuzz import gen, oracle, run  # noqa: E402


def _start_seed() -> int:
    """A seed from the commit hash (so that seeds rotate by commit), else a fixed one."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        return int(head[:8], 16) % 10_000_000 * 100 if head else 424242
    except (OSError, ValueError, subprocess.SubprocessError):
        return 424242


@pytest.mark.slow
def test_fuzz_campaign():
    budget = float(os.environ.get("TILEC_FUZZ_SECONDS", "60"))
    if budget <= 0:
        pytest.skip("TILEC_FUZZ_SECONDS=0")
    seed0 = _start_seed()
    stats, reduced = run.campaign(itertools.count(seed0), jobs=1, timeout=60.0, budget=budget,
                                  reduce_budget=min(60.0, budget / 2), per_signature=1, log=lambda _: None)
    print(stats.summary(stats.elapsed))
    if stats.failed:
        parts = [f"{stats.failed} failing fuzz case(s) from seed {seed0}:"]
        for sig, outs in stats.failures.items():
            parts.append(f"\n{sig[0]}: {sig[1]}\n  seeds: {[o['seed'] for o in outs]}")
            for seed, script, note in reduced.get(sig, []):
                parts.append(f"  reproduction (seed {seed}, {note}):\n{script}")
        pytest.fail("\n".join(parts), pytrace=False)
    assert not stats.fuzzer_errors, f"the fuzzer itself failed: {dict(stats.fuzzer_errors)}"


@pytest.mark.slow
def test_fuzz_cuda_compile_campaign():
    """The CUDA form of fuzz cases, compiled for sm_90 on this CPU (scripts/fuzz_compile.py): what the
    interpreter cannot see (Triton frontend errors, compiler aborts, dots Triton made that tilec did
    not write, compiles of minutes) fails here. 30 s (`TILEC_FUZZ_COMPILE_SECONDS`; 0 skips it)."""
    budget = float(os.environ.get("TILEC_FUZZ_COMPILE_SECONDS", "30"))
    if budget <= 0:
        pytest.skip("TILEC_FUZZ_COMPILE_SECONDS=0")
    seed0 = _start_seed() + 50_000_000  # other seeds than the interpreter campaign's
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz_compile.py"), "--random", "100000",
                          "--seed", str(seed0), "--time-budget", str(budget), "--timeout", "60"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=budget + 300)
    print(run.stdout[-2000:])
    assert run.returncode == 0, f"from seed {seed0}:\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    assert "compiled: 0 " not in run.stdout, run.stdout  # it compiled something


# ---------------------------------------------------------------------------------------------
# the oracle


def _softmaxish():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    b = tc.placeholder((N,), "float16", name="b")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.max(X[i, k], axis=k), name="R")
    Y = tc.compute((M, N), lambda i, j: tc.exp(X[i, j] - R[i]) * b[j] + X[i, j - 1], name="Y", dtype="float16")
    return X, b, R, Y


def test_oracle_agrees_with_torch():
    X, b, R, Y = _softmaxish()
    x = torch.randn(5, 7)
    x[2, 3] = math.nan
    bb = torch.randn(7).half()
    o = oracle.Oracle({"M": 5, "N": 7}, {"X": x, "b": bb})
    r = torch.amax(x.double(), 1)
    shifted = torch.cat([torch.zeros(5, 1, dtype=torch.float64), x.double()[:, :-1]], 1)
    want = (torch.exp(x.double() - r[:, None]) * bb.double() + shifted).half().double()
    got = o.tensor(Y)
    assert torch.equal(o.tensor(R).val.isnan(), r.isnan()) and torch.allclose(o.tensor(R).val[~r.isnan()], r[~r.isnan()])
    assert torch.equal(got.val.isnan(), want.isnan())
    fin = ~want.isnan()
    assert torch.allclose(got.val[fin], want[fin], rtol=2e-3)
    assert not oracle.compare("Y", want.half(), got)  # torch's own answer passes


def test_oracle_integer_and_bool_semantics():
    X = tc.placeholder((6,), "int32", name="X")
    B = tc.placeholder((6,), "bool", name="B")
    Y = tc.compute((6,), lambda i: (X[i] // -2) + (X[i] % 3) + (B[i] + 1), name="Y")
    x = torch.tensor([-5, -1, 0, 1, 4, 7], dtype=torch.int32)
    bb = torch.tensor([True, False, True, False, True, False])
    got = oracle.Oracle({}, {"X": x, "B": bb}).tensor(Y)
    want = torch.div(x, -2, rounding_mode="floor") + torch.remainder(x, 3) + (bb.long() + 1)
    assert got.val.tolist() == want.tolist()


def test_oracle_sums_overflow_at_the_accumulator_dtype():
    # fuzz seeds 108763, 109850, 611320551: a float16 accumulator overflows at 65504, the oracle's
    # float64 sum did not, and called tilec's correct -inf wrong
    X = tc.placeholder((3, 4), "float32", name="X")
    k = tc.reduce_axis(4, name="k")
    S = tc.compute((3,), lambda i: tc.sum(X[i, k], axis=k, acc_dtype="float16"), name="S")
    x = torch.tensor([[-4e4, -4e4, -1.0, -2.0],     # one sign, past 65504: -inf in every order
                      [4e4, 4e4, -4e4, -4e4],      # partial sums may overflow or not: undetermined
                      [1.0, 2.0, 3.0, 4.0]])       # far from it: an ordinary sum
    got = oracle.Oracle({}, {"X": x}).tensor(S)
    assert got.val[0].item() == -math.inf and not got.unc[0]
    assert got.unc[1]
    assert got.val[2].item() == 10.0 and not got.unc[2]
    assert oracle.compare("S", torch.tensor([-math.inf, 0.0, 10.0]), got) == []
    assert [p["kind"] for p in oracle.compare("S", torch.tensor([-65504.0, 0.0, 10.0]), got)] == ["inf"]


def test_oracle_bounds_the_gpus_exp(monkeypatch):
    # H200 fuzz seed 911253: Triton's exp on the GPU is ex2.approx(x * log2(e)) in float32, whose
    # error grows with |x|; the oracle allowed 2 ulp and called exp(11.25) off by 14 ulp wrong.
    # Here the GPU's sequence is replayed in float64 (the product rounded to float32, then an exact
    # 2**y) plus ex2.approx's documented 2^-22.5 relative error, and must stay inside the bound.
    monkeypatch.setattr(oracle, "interpreter", lambda: False)
    X = tc.placeholder((4096,), "float32", name="X")
    for fn in ("exp", "sigmoid"):
        Y = tc.compute((4096,), lambda i, f=getattr(tc, fn): f(X[i]), name="Y")
        x = torch.linspace(-87.0, 87.0, 4096, dtype=torch.float32)
        got = oracle.Oracle({}, {"X": x}).tensor(Y)
        arg = -x if fn == "sigmoid" else x
        y = (arg * torch.tensor(math.log2(math.e), dtype=torch.float32)).double()
        e = torch.exp2(y) * (1 + 2.0 ** -22.5)
        gpu = 1 / (1 + e) if fn == "sigmoid" else e
        assert ((gpu - got.val).abs() <= got.err).all(), fn
        assert ((gpu - got.val).abs() > 4 * oracle.U32 * got.val.abs() + 1e-30).any(), fn  # 4 ulp was too few


def test_oracle_error_bounds_are_never_nan():
    # fuzz seed 20011781: exp(-Y) with Y ~ 27000 known to +-1400 underflows to 0, and its bound was
    # inf * 0 = NaN; the rounding point then read NaN as "exact" (tol 0) and called a correct
    # float16-accumulated sum wrong
    X = tc.placeholder((1, 8), "float32", name="X")
    k = tc.reduce_axis(8, name="k")
    R = tc.compute((1,), lambda i: tc.sum(tc.abs(X[i, k]), axis=k, acc_dtype="float16"), name="R", dtype="float32")
    Y = tc.compute((1, 8), lambda i, j: tc.exp(R[i]), name="Y")
    Z = tc.compute((1, 8), lambda i, j: R[i] + tc.exp(-Y[i, j]), name="Z")
    x = torch.full((1, 8), 1.2763)
    o = oracle.Oracle({}, {"X": x})
    r, z = o.tensor(R), o.tensor(Z)
    assert r.err.item() > 0 and torch.isfinite(o.tensor(Y).err).all()
    assert torch.allclose(z.err, r.err.expand(1, 8), rtol=1e-3)  # exp(-Y) is 0 either way: R's error
    assert oracle.compare("Z", torch.full((1, 8), float(r.val) + float(r.err) / 2), z) == []


def test_oracle_flags_a_wrong_result():
    X, b, R, Y = _softmaxish()
    s = tc.create_schedule(Y)
    report = oracle.check_kernel(s, [X, b, Y], sizes={"M": 5, "N": 7}, inputs={}, seed=3)
    assert report.ok, report
    kernel = tc.build(s, [X, b, Y])
    ins = oracle.make_inputs(kernel.inputs, {"M": 5, "N": 7}, {}, 3)
    device = "cuda" if kernel.target == "cuda" else "cpu"  # compiled on the GPU host
    y = kernel(*[ins[t.name][0].to(device) for t in kernel.inputs]).cpu()
    ref = oracle.Oracle({"M": 5, "N": 7}, {n: v for n, (v, _) in ins.items()}).tensor(Y)
    assert not oracle.compare("Y", y, ref)
    bad = y.clone()
    bad[1, 2] = bad[1, 2] * 1.01 + 0.01
    problems = oracle.compare("Y", bad, ref)
    assert [p["kind"] for p in problems] == ["value"] and problems[0]["count"] == 1
    bad = y.clone()
    bad[0, 0] = math.nan
    assert [p["kind"] for p in oracle.compare("Y", bad, ref)] == ["nan"]


def test_sentinels_catch_writes_past_the_end_and_missing_writes():
    for dtype in ("float32", "float16", "bfloat16", "int32", "bool"):
        view, buf = oracle.make_output([3, 4], dtype)
        ref = oracle.exact(torch.zeros(3, 4, dtype=torch.float64 if dtype.startswith(("f", "b")) and dtype != "bool"
                                       else torch.int64 if dtype == "int32" else torch.bool),
                           oracle.cat_of(dtype))
        view.zero_()
        assert oracle.check_output("Y", view, buf, ref) == []
        buf[oracle.PAD + 12] = 1  # one element past the end
        kinds = [p["kind"] for p in oracle.check_output("Y", view, buf, ref)]
        assert kinds == ["out-of-bounds write"], (dtype, kinds)
        view2, buf2 = oracle.make_output([3, 4], dtype)
        view2.view(-1)[:11].zero_()  # the last element is never written
        kinds = [p["kind"] for p in oracle.check_output("Y", view2, buf2, ref)]
        assert kinds == ["unwritten"], (dtype, kinds)


def test_inputs_are_poisoned_views_with_the_strides_asked_for():
    gen_ = torch.Generator().manual_seed(0)
    for layout in ("c", "t", "s"):
        x, buf = oracle.make_input([3, 5], "float32", {"layout": layout}, gen_)
        assert x.shape == (3, 5) and not x.isnan().any()
        assert buf.isnan().sum() == buf.numel() - 15
    assert oracle.make_input([3, 5], "float32", {"layout": "t"}, gen_)[0].stride() == (1, 3)


def test_the_oracle_runs_on_the_cpu_whatever_the_default_device():
    # the compiled H200 run: under conftest's cuda default, the oracle's own tensors (aranges, masks) went to
    # the GPU beside its CPU inputs; a meta default device shows the same on a CPU (check_kernel, which also
    # runs the kernel, is tested under the GPU host's cuda default by test_oracle_flags_a_wrong_result)
    X, b, R, Y = _softmaxish()
    with torch.device("meta"):
        view, buf = oracle.make_output([3, 4], "float32")
        view.zero_()
        ref = oracle.exact(torch.zeros(3, 4, dtype=torch.float64, device="cpu"), "f")
        assert oracle.check_output("Y", view, buf, ref) == []
        assert [p["kind"] for p in oracle.compare("Y", view + 1, ref)] == ["value"]
        ins = oracle.make_inputs([X, b], {"M": 5, "N": 7}, {}, 3)
        got = oracle.Oracle({"M": 5, "N": 7}, {n: v for n, (v, _) in ins.items()}).tensor(Y)
        assert got.val.device.type == "cpu" and got.val.shape == (5, 7)  # computed where its inputs are
    # inputs on another device (the GPU host's tests pass cuda ones): the oracle's 0-d CPU constants never
    # index or get indexed across devices (the compiled run: "indices should be either on cpu or ...")
    got = oracle.Oracle({"M": 5, "N": 7}, {n: v.to("meta") for n, (v, _) in ins.items()}).tensor(Y)
    assert got.val.device.type == got.err.device.type == got.unc.device.type == "meta"
    assert got.val.shape == (5, 7)


@pytest.mark.slow
def test_the_oracle_imported_under_another_default_device_still_computes_on_the_cpu():
    # the compiled H200 run again: conftest sets the cuda default before the oracle is imported, so its
    # module-level constants (ZERO, FALSE) were made on the GPU and met CPU tensors in torch.where. A fresh
    # interpreter that imports the oracle under a meta default device shows the same on a CPU.
    code = (
        "import torch; torch.set_default_device('meta')\n"
        "from tests.test_fuzz import _softmaxish\n"
        "from tests.fuzz import oracle\n"
        "X, b, R, Y = _softmaxish()\n"
        "ins = oracle.make_inputs([X, b], {'M': 5, 'N': 7}, {}, 3)\n"
        "got = oracle.Oracle({'M': 5, 'N': 7}, {n: v for n, (v, _) in ins.items()}).tensor(Y)\n"
        "assert got.val.device.type == 'cpu' and got.val.shape == (5, 7), got.val\n"
        "assert torch.isfinite(got.err).all()\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_inputs_are_made_on_the_cpu_whatever_the_default_device():
    # On the GPU host conftest sets torch's default device to cuda; the oracle's inputs must still be made
    # on the CPU (from its CPU generator: the same values for a seed on every machine) and moved after.
    plain = oracle.make_inputs([tc.placeholder((3, 5), "float32", name="X")], {}, {}, seed=4)["X"][0]
    with torch.device("meta"):
        view, buf = oracle.make_inputs([tc.placeholder((3, 5), "float32", name="X")], {}, {}, seed=4)["X"]
        out, obuf = oracle.make_output([3, 5], "float32")
    assert view.device.type == buf.device.type == out.device.type == obuf.device.type == "cpu"
    assert torch.equal(view, plain)


# ---------------------------------------------------------------------------------------------
# the generator and the runner


def test_cases_are_reproducible_from_the_seed_and_the_script():
    for seed in range(8):
        a, _ = gen.generate(seed)
        b, _ = gen.generate(seed)
        assert a.script() == b.script()
        if a.error is None:
            ns = gen.exec_case(a)  # the text alone rebuilds the schedule
            assert [x.name for x in ns["CASE"]["args"]] == a.args
        compile(a.script(), f"seed{seed}", "exec")


def test_refusal_reasons_are_keyed_without_names():
    names = {"Y": "T", "jo": "a", "ko": "a", "N": "S"}
    a = run.normalize("Y: spatial loop jo runs inside reduction loop ko; the accumulator would", names)
    assert a == "T: spatial loop a runs inside reduction loop a; the accumulator would"


def _case(sched_lines, compute=None):
    c = gen.Case(seed=7, family="test", sizes={"M": 4}, symbolic={"M": True})
    c.compute = compute or [
        "X = tc.placeholder((M,), 'float32', name='X')",
        "Y = tc.compute((M,), lambda i: X[i] * 2.0, name='Y')",
        "s = tc.create_schedule([Y])",
        "(Y_i,) = Y.axis",
    ]
    c.sched = [gen.Line(x) for x in sched_lines]
    c.args = ["X", "Y"]
    c.inputs = {"X": {}}
    return c


@pytest.mark.slow
def test_runner_classifies_correct_hung_crash_and_reduces():
    with run.Pool(jobs=1, timeout=8.0) as pool:
        ok = pool.run_one(("case", _case(["Y_io, Y_ii = s[Y].split(Y_i, 2)"])))
        assert ok["status"] == "correct", ok
        hung = pool.run_one(("case", _case(["__import__('time').sleep(60)"])), timeout=3.0)
        assert hung["status"] == "hung", hung
        crash = pool.run_one(("case", _case(["__import__('os')._exit(3)"])))
        assert crash["status"] == "crash" and "3" in crash["key"], crash
        # as seed 30007679 'hung' once: serial loops of constant extent (here 512 x 1024 trips) that no
        # size shrinks, minutes in the interpreter; counted slow, not run
        big = ["X = tc.placeholder((512, 1024), 'float32', name='X')",
               "Y = tc.compute((512, 1024), lambda i, j: X[i, j] * 2.0, name='Y')",
               "s = tc.create_schedule([Y])", "Y_i, Y_j = Y.axis"]
        slow = pool.run_one(("case", _case(["s[Y].reorder(Y_i, Y_j)"], compute=big)), timeout=60.0)
        assert slow["status"] == "slow" and slow["work"] > run.SLOW_WORK, slow
        lines = ["Y_io, Y_ii = s[Y].split(Y_i, 2)", "s[Y].bind(Y_io, 'program_id.0')",
                 "attempt(lambda: s[Y].split(Y_i, 3))", "1 // 0", "s[Y].unroll(Y_ii)"]
        bad = pool.run_one(("case", _case(lines)))
        assert bad["status"] == "internal" and bad["stage"] == "schedule", bad
        small, note = run.reduce_case(pool, dict(bad, case=_case(lines)), budget_s=60)
        assert [x.code for x in small.sched] == ["1 // 0"], (note, small.sched)
        assert small.sizes["M"] == 1


def test_the_fuzzer_compiles_on_a_gpu_and_interprets_without_one(monkeypatch):
    """Its workers used to fall back to Triton's interpreter whenever TRITON_INTERPRET was unset, also on
    the GPU host, whose Triton 3.6 interpreter fails on numpy 2.4: 543 'internal' and 22 'wrong' cases
    from seed 424242 there were that, not tilec. An explicit TRITON_INTERPRET still wins."""
    import torch

    for cuda, want in ((True, "0"), (False, "1")):
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        run.default_target()
        assert os.environ["TRITON_INTERPRET"] == want
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    run.default_target()
    assert os.environ["TRITON_INTERPRET"] == "1"


def test_oracle_float16_sum_allows_the_rounding_of_subnormal_terms():
    # fuzz seed 197481996: sigmoid values of 1e-9..2e-7 summed with acc_dtype float16. Each term is rounded
    # to float16 (as torch.sum(x, dtype=float16) casts its input first), and there most of them are
    # subnormal: their rounding error is absolute (up to 2**-25), not relative to the sum. The bound
    # (n + 2) u |x| missed it and called the kernel's 2.98e-07 (= torch's) wrong against 7.36e-07.
    x = torch.tensor([[-2.0, -1, 0, 2, 2, 1, 0, -1, 0, 0, 1, 3, 1, 0, 0, 1, -1, 1, 1, -1, 0, -2, 0, 0, 0, 1, 0, 0,
                       -1, -1, 1, -2, 0, 0, 1, 1, 0]]) - 18.5  # the case's X - N * 0.5
    k = tc.reduce_axis(37, name="k")
    X = tc.placeholder((1, 37), "float32", name="X")
    R = tc.compute((1,), lambda i: tc.sum(tc.sigmoid(X[i, k]), axis=k, acc_dtype="float16"), name="R")
    ref = oracle.Oracle({}, {"X": x}).tensor(R)
    torch_sum = torch.sum(torch.sigmoid(x), dim=1, dtype=torch.float16)
    assert oracle.compare("R", torch_sum, ref) == []
    assert torch.sigmoid(x).double().sum() > 2 * torch_sum.double().sum()  # the case is not a trivial one
    assert oracle.compare("R", torch_sum * 0 + 1e-3, ref) != []  # a wrong value is still wrong


def test_oracle_float16_sum_of_terms_past_its_range_is_nan_where_their_signs_differ():
    # fuzz seed 43001094: exp(X) * V summed with acc_dtype float16; one term, -6e21, is finite in float32 but
    # -inf once converted to float16, another is +inf: the sum is NaN (torch.sum(x, dtype=float16) agrees),
    # where the oracle summed the float32 terms and wanted +inf.
    x = torch.tensor([[50.9783, 389.3924, -247.7304]])
    v = torch.tensor([[-0.4370], [0.1546], [0.6582]])
    k = tc.reduce_axis(3, name="k")
    X = tc.placeholder((1, 3), "float32", name="X")
    Vt = tc.placeholder((3, 1), "float32", name="V")
    O = tc.compute((1, 1), lambda i, j: tc.sum(tc.exp(X[i, k]) * Vt[k, j], axis=k, acc_dtype="float16"), name="O")
    ref = oracle.Oracle({}, {"X": x, "V": v}).tensor(O)
    terms = torch.exp(x)[:, :, None] * v[None]
    torch_sum = torch.sum(terms, dim=1, dtype=torch.float16)
    assert torch.isnan(torch_sum).all() and oracle.compare("O", torch_sum, ref) == []
    assert oracle.compare("O", torch.full_like(torch_sum, float("inf")), ref) != []  # inf is wrong
    x[0, 0] = 5.0  # the first term now fits float16: +inf alone
    ref = oracle.Oracle({}, {"X": x, "V": v}).tensor(O)
    assert oracle.compare("O", torch.full((1, 1), float("inf"), dtype=torch.float16), ref) == []


@pytest.mark.slow
def test_online_family_cases():
    """fam_online (gen.ONLINE_SHARE of the seeds, chosen by a stream of their own): its cases reproduce from
    their text, many of them build an online loop, and a coefficient (V, w) gets no NaN, infinity or -inf
    rows where an online call may skip masked tiles (skip_masked=True over a where()): there the kernel
    does not see what the naive compute does (Stage.online's docstring)."""
    import random

    seeds = [s for s in range(5000) if random.Random(gen.seed_mix(s)).random() < gen.ONLINE_SHARE][:16]
    assert 300 < len([s for s in range(5000) if random.Random(gen.seed_mix(s)).random() < gen.ONLINE_SHARE]) < 900
    built = 0
    for seed in seeds:
        case, _ = gen.generate(seed)
        assert case.family == "online" and case.error is None, (seed, case.error)
        ns = gen.exec_case(case)
        built += any(st.online_stats for st in ns["s"].stages.values())
        calls = [x.code for x in case.sched if ".online(" in x.code]
        if "float('-inf')" in "\n".join(case.compute) and any("False" not in c for c in calls):
            for name in ("V", "w"):
                spec = case.inputs.get(name, {})
                assert not {"special", "ninf_rows", "ninf_prefix"} & set(spec), (seed, name, spec)
    assert built >= len(seeds) // 3, built


def test_inputs_with_rows_of_minus_inf():
    gen_ = torch.Generator().manual_seed(3)
    x, _ = oracle.make_input([6, 9], "float32", {"ninf_rows": 1.0}, gen_)
    assert torch.isneginf(x).all()
    x, _ = oracle.make_input([64, 9], "float32", {"ninf_prefix": 1.0}, gen_)
    neg = torch.isneginf(x)
    assert neg.any() and not neg.all()
    assert torch.equal(neg, neg.cummin(dim=1).values)  # a prefix of each row, nothing after a finite value


def test_a_case_too_slow_to_interpret_keeps_its_sizes_when_smaller_ones_change_its_refusals():
    """Seed 155741845 (scan): bind(jo) of a split scan axis is refused at N=23 (jo runs 3 times) but legal
    at N=5 (once), so the same statements at the halved sizes bind program_id.0 twice. Shrinking sizes for
    the interpreter must not turn that into an internal error: the case stays at its own sizes."""
    out = run.run_seed(155741845)
    assert out["status"] in ("correct", "slow", "refused"), out.get("message")
    assert out["status"] != "refused" or out["stage"] != "schedule"


def test_scatter_family_cases():
    """fam_scatter (gen.SCATTER_SHARE of the seeds left after the online and scan streams, a stream of its own):
    its cases run and agree with the oracle's scatter rule, whose float adds are bounded in any order; and
    the oracle flags a kernel whose scatter lost its atomics (a store where two points meet)."""
    import random

    seeds = [s for s in range(3000) if random.Random(gen.seed_mix(s)).random() >= gen.ONLINE_SHARE
             and random.Random(gen.seed_mix_scan(s)).random() >= gen.SCAN_SHARE
             and random.Random(gen.seed_mix_scatter(s)).random() < gen.SCATTER_SHARE][:10]
    assert len(seeds) == 10
    outcomes = [run.run_seed(s) for s in seeds]
    assert all(o["family"] == "scatter" for o in outcomes)
    assert all(o["status"] in ("correct", "refused", "slow") for o in outcomes), \
        [(o["seed"], o["status"], o.get("message")) for o in outcomes if o["status"] not in ("correct", "refused", "slow")]
    assert sum(o["status"] == "correct" for o in outcomes) >= 5
    N = tc.size_vars("N")
    x = tc.placeholder((N,), "int32", name="x")
    count = tc.scatter((3,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="count")
    s = tc.create_schedule(count)
    report = oracle.check_kernel(s, [x, count], sizes={"N": 40}, inputs={"x": {"range": (0, 3)}}, seed=5)
    assert report.ok, str(report)
    # the same scatter with a false unique=True: stores, not adds, where 40 values meet in 3 bins
    stored = tc.scatter((3,), (N,), lambda i: x[i], lambda i: 1, unique=True, dtype="int32", name="count")
    wrong = tc.build(tc.create_schedule(stored), [x, stored])
    assert "tl.atomic_add(" not in wrong.program.source()
    xv = torch.randint(0, 3, (40,), dtype=torch.int32)
    ref = oracle.Oracle({"N": 40}, {"x": xv}).tensor(count)
    assert torch.equal(ref.val, torch.bincount(xv, minlength=3).to(torch.int64))
    assert oracle.compare("count", wrong(xv), ref)  # the stores' counts (0 or 1) are flagged


def test_the_auto_variant_schedules_a_case_with_auto_schedule_and_checks_it():
    """scripts/fuzz.py --auto: a generated compute scheduled by tc.auto_schedule at a random config of its knobs,
    run against the oracle like any case (issue 27; campaign figures in the closing notes)."""
    from tests.fuzz.run import execute

    seen = set()
    for seed in range(29200000, 29200006):
        case, _ = gen.generate(seed)
        auto, ns = gen.auto_variant(case)
        assert [x.code for x in auto.sched] == [f"s = tc.auto_schedule([t for t in [{', '.join(case.args)}] "
                                                f"if not t.is_placeholder])"]
        assert set(auto.config) == set(ns["s"].knobs) and auto.compute == case.compute
        out = execute(auto, ns)
        assert out["status"] in ("correct", "refused", "slow"), out
        seen.add(out["status"])
    assert "correct" in seen
