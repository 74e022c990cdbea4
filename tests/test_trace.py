"""Schedules as replayable traces: every primitive appends a frozen Step to `s.trace`, `str(s.trace)` is
Python that rebuilds the schedule, and `tc.replay(trace, outputs)` rebuilds it with the same fingerprint
(so the same tuning study names) and the same Triton source."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import pytest

import tilec as tc
from tilec.ir.expr import IterVar
from tilec.schedule import AxisRef, KnobRef, StageRef, Step, TensorRef, Trace
from tilec.schedule import trace as trace_mod

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import computes  # noqa: E402

# every example that defines make() -> (schedule, args)
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py") if "def make(" in p.read_text())


def design_schedule():
    """The schedule of DESIGN.md and the README's tour (GEMM + SiLU epilogue), with DESIGN's knob choices."""
    s, tensors, ax = computes.design_schedule(
        "bfloat16", tiles=(tc.knob("BM", [64, 128, 256]), tc.knob("BN", [64, 128, 256]), tc.knob("BK", [32, 64])),
        stages=tc.knob("stages", [2, 3, 4]))
    return s, tensors, ax["ko"]


def run_text(trace, outputs) -> tc.Schedule:
    """Execute `str(trace)` with `tc` and `outputs` in scope; the schedule it builds."""
    ns = {"tc": tc, "outputs": outputs}
    exec(compile(str(trace), "<trace>", "exec"), ns)
    return ns["s"]


def assert_same(a: tc.Schedule, b: tc.Schedule, config=None) -> None:
    assert b.fingerprint() == a.fingerprint()
    assert b.log == a.log
    assert {n: k.choices for n, k in b.knobs.items()} == {n: k.choices for n, k in a.knobs.items()}
    assert tc.lower(b, config).source() == tc.lower(a, config).source()


def rebuilt(s: tc.Schedule, **kw):
    """The schedule rebuilt three ways: replay (checked), replay unchecked, the Python text."""
    return [tc.replay(s.trace, s.outputs, **kw) for kw in ({}, {"check": False})] + [run_text(s.trace, s.outputs)]


# ---------------------------------------------------------------------------------------------
# (a) the schedules of DESIGN and of the examples round-trip


def test_design_schedule_replays():
    s, _, _ = design_schedule()
    for r in rebuilt(s):
        assert_same(s, r)
        assert r.trace == s.trace


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_example_replays(name):
    s, args = importlib.import_module(name).make()
    assert len(s.trace) > 0
    last = {n: k.choices[-1] for n, k in s.knobs.items()}
    for r in rebuilt(s):
        assert_same(s, r)
        assert_same(s, r, last)
        assert r.trace == s.trace


def test_examples_are_found():
    assert {"matmul", "matmul_silu", "softmax", "rowscale_fp8"} <= set(NAMES) and "common" not in NAMES


def test_text_of_the_design_trace():
    s, (A, W, C, Y), _ = design_schedule()
    assert str(s.trace) == '''\
s = tc.create_schedule(outputs)
BM = tc.knob("BM", [64, 128, 256])
BN = tc.knob("BN", [64, 128, 256])
BK = tc.knob("BK", [32, 64])
stages = tc.knob("stages", [2, 3, 4])
C = s["C"]
C_i, C_j = C.tensor.axis
(C_k,) = C.tensor.reduce_axis
C_io, C_ii = C.split(C_i, BM)
C_jo, C_ji = C.split(C_j, BN)
C_ko, C_ki = C.split(C_k, BK)
C.reorder(C_io, C_jo, C_ko, C_ii, C_ji, C_ki)
C.bind(C_io, "program_id.0")
C.bind(C_jo, "program_id.1")
A_shared = s.cache_read(s.tensors["A"], "shared", readers=[C])
A_shared.compute_at(C, C_ko)
W_shared = s.cache_read(s.tensors["W"], "shared", readers=[C])
W_shared.compute_at(C, C_ko)
C_local = s.cache_write(s.tensors["C"], "local")
C_local.compute_at(C, C_jo)
C.pipeline(C_ko, stages=stages)
Y = s["Y"]
Y.compute_at(C, C_jo)
'''
    assert_same(s, run_text(s.trace, Y))  # `outputs` may be the tensor itself


def test_step_text_is_the_log_line():
    s, _, _ = design_schedule()
    assert s.log == [st.text for st in s.trace] == s.trace.lines
    assert s.log[0] == "C: split(i, BM) -> io, ii"
    assert s.log[6] == "cache_read(A, 'shared', readers=[C]) -> A_shared"
    assert s.log[-1] == "Y: compute_at(C, jo)"
    assert str(s.trace[0]) == s.log[0]
    first = s.trace[0]
    assert first == Step("split", "C", (AxisRef("C", "i"), KnobRef("BM", (64, 128, 256))), ("io", "ii"))
    assert s.trace[6] == Step("cache_read", None, (TensorRef("A"), "shared", (StageRef("C"),)), ("A_shared",))
    assert s.trace[-1].args == (StageRef("C"), AxisRef("C", "jo"))
    # the stages a step concerns: a kernel's header lists the steps of its stages
    assert first.stages == {"C"}
    assert s.trace[6].stages == {"A_shared"}
    assert s.trace[7].stages == {"A_shared"}
    assert s.trace[-1].stages == {"Y"}


def test_fingerprint_is_the_computation_and_the_log():
    # the fingerprint (the key of kernel caches; tuning study names hash it) is unchanged by traces
    s, (A, W, C, Y), _ = design_schedule()
    tensors = [f"{t!r}={t.body!r}" for t in s.tensors.values()]
    assert s.fingerprint() == "\n".join(tensors + s.log)


# ---------------------------------------------------------------------------------------------
# (b) a refused primitive leaves the trace as it was


def test_illegal_primitive_leaves_the_trace():
    s, (A, W, C, Y), ko = design_schedule()
    before, fp = s.trace, s.fingerprint()
    with pytest.raises(tc.IllegalScheduleError, match=r"compute_at\(Y, C.ko\)"):
        s[Y].compute_at(s[C], ko)
    assert s.trace == before and list(s.trace) == list(before)
    assert s.fingerprint() == fp
    with pytest.raises(tc.IllegalScheduleError, match="reduction"):
        s[C].bind(ko, "program_id.2")
    assert s.trace == before
    assert_same(s, tc.replay(s.trace, s.outputs))


def test_refused_tile_rolls_back_its_first_split():
    # tile's first split is recorded before its second one is refused: the whole tile is undone
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    with pytest.raises(tc.ArgumentError, match="factor"):
        s[Z].tile(*Z.axis, tc.knob("B", [16, 32]), 0)
    assert len(s.trace) == 0 and s.log == [] and s.knobs == {}


def test_refused_unchecked_primitives_leave_the_trace():
    s, (A, W, C, Y), _ = design_schedule()
    before = s.trace
    with pytest.raises(tc.ArgumentError):
        s.cache_write(C, "local")  # C already has one
    with pytest.raises(tc.ArgumentError):
        s[C].num_warps(6)
    with pytest.raises(tc.ArgumentError):
        s.cache_read(A, "global", readers=[C])
    assert s.trace == before


# ---------------------------------------------------------------------------------------------
# (c) frozen steps, hashable and comparable traces


def test_steps_are_frozen_and_traces_immutable():
    s, _, _ = design_schedule()
    t = s.trace
    with pytest.raises(dataclasses.FrozenInstanceError):
        t[0].stage = "Y"
    with pytest.raises(AttributeError):
        t._steps = ()
    with pytest.raises(TypeError):
        t[0] = t[1]
    s[s.outputs[0]].num_warps(8)
    assert len(t) == len(s.trace) - 1  # a trace taken earlier does not grow with the schedule


def test_traces_are_hashable_and_equal_for_equal_schedules():
    s1, _, _ = design_schedule()
    s2, _, _ = design_schedule()
    assert s1.trace == s2.trace and hash(s1.trace) == hash(s2.trace)
    assert len({s1.trace, s2.trace}) == 1
    assert {s1.trace[0]: 1}[s2.trace[0]] == 1
    assert s1.trace != s1.trace[:-1]
    assert isinstance(s1.trace[2:5], Trace) and s1.trace[2:5].lines == s1.log[2:5]
    assert list(reversed(s1.trace))[0] == s1.trace[-1] and s1.trace.index(s1.trace[3]) == 3
    assert Trace(list(s1.trace)) == s1.trace  # the axis names are not part of the value


def test_tile_is_one_call_in_the_text_and_three_steps_in_the_log():
    A, W, C = computes.gemm("float16")
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 64, tc.knob("BN", [64, 128]))
    ko, ki = s[C].split(C.reduce_axis[0], 32)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].fuse(io, jo), "program_id.0")
    assert s.log[:3] == ["C: split(i, 64) -> io, ii", "C: split(j, BN) -> jo, ji", "C: reorder(io, jo, ii, ji)"]
    assert [st.within for st in s.trace] == ["tile"] * 3 + [None] * 4
    assert "C_io, C_jo, C_ii, C_ji = C.tile(C_i, C_j, 64, BN)" in str(s.trace).splitlines()
    for r in rebuilt(s):
        assert_same(s, r)
        assert r.trace == s.trace
    # steps of a tile that is not whole are replayed (and written) one by one
    steps = [dataclasses.replace(s.trace[0], within=None), *s.trace[1:]]
    assert "C.tile(" not in str(Trace(steps, s.trace.axes))
    for r in (tc.replay(steps, s.outputs), run_text(Trace(steps, s.trace.axes), s.outputs)):
        assert_same(s, r)
        assert [st.within for st in r.trace] == [None] * 7


def test_variable_names_do_not_collide():
    # stage names that are the text's own variables, and an axis variable that is another stage's name
    X = tc.placeholder((37, 50), "float32", name="X")
    S = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="s")
    T = tc.compute((37, 50), lambda i, j: S[i, j] + 1.0, name="tc")
    U = tc.compute((37, 50), lambda i, j: T[i, j] * S[i, j], name="outputs")
    V = tc.compute((37, 50), lambda i, j: U[i, j] - 1.0, name="outputs_i")
    s = tc.create_schedule(V)
    s[U].split(U.axis[0], 8)
    s[V].split(V.axis[0], 16)
    s[S].compute_inline()
    s[T].compute_inline()
    text = str(s.trace)
    assert 's_ = s["s"]' in text and 'tc_ = s["tc"]' in text and 'outputs_ = s["outputs"]' in text
    assert_same(s, run_text(s.trace, s.outputs))


def test_a_trace_without_axis_names_still_writes_python():
    s, (A, W, C, Y), _ = design_schedule()
    bare = Trace(list(s.trace))
    assert bare.axes == {} and "C.tensor.axis + C.tensor.reduce_axis" in str(bare)
    assert_same(s, run_text(bare, [Y]))


# ---------------------------------------------------------------------------------------------
# (d) replay of a step that does not fit the outputs


def test_replay_of_a_missing_axis_names_the_step():
    s, (A, W, C, Y), _ = design_schedule()
    steps = list(s.trace)
    steps[0] = dataclasses.replace(steps[0], args=(AxisRef("C", "x"), steps[0].args[1]))
    with pytest.raises(tc.ArgumentError, match=r"^replay: trace\[0\] \(C: split\(x, BM\) -> io, ii\): C has no axis "
                                               r"x \(its axes: i, j, k\)$"):
        tc.replay(steps, s.outputs)
    steps = list(s.trace)
    steps[-1] = dataclasses.replace(steps[-1], args=(StageRef("C"), AxisRef("C", "jj")))
    with pytest.raises(tc.ArgumentError, match=r"trace\[13\] \(Y: compute_at\(C, jj\)\): C has no axis jj \(its "
                                               r"axes: io, jo, ko, ii, ji, ki\)"):
        tc.replay(steps, s.outputs)


def test_replay_of_a_missing_stage_or_tensor():
    s, (A, W, C, Y), _ = design_schedule()
    X = tc.placeholder((37,), "float32", name="X")
    Z = tc.compute((37,), lambda i: X[i] * 2.0, name="Z")
    with pytest.raises(tc.ArgumentError, match=r"^replay: trace\[0\] \(C: split\(i, BM\) -> io, ii\): the schedule "
                                               r"has no stage C \(its stages: Z\)$"):
        tc.replay(s.trace, [Z])
    bad = Step("cache_read", None, (TensorRef("B"), "shared", (StageRef("C"),)), ("B_shared",))
    with pytest.raises(tc.ArgumentError, match=r"trace\[0\] .*the schedule has no tensor B \(its tensors: A, W, C, Y\)"):
        tc.replay([bad], s.outputs)


def test_replay_on_another_computation_that_names_the_results_otherwise():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    s[Z].split(Z.axis[0], 4)
    Z2 = tc.compute((37, 50), lambda i, ii: X[i, ii] * 2.0, name="Z")  # the inner axis is named ii1 here
    with pytest.raises(tc.ArgumentError, match=r"trace\[0\] \(Z: split\(i, 4\) -> io, ii\): on these outputs the "
                                               r"primitive made Z: split\(i, 4\) -> io, ii1"):
        tc.replay(s.trace, [Z2])


def test_replay_arguments():
    s, (A, W, C, Y), _ = design_schedule()
    with pytest.raises(tc.ArgumentError, match="argument 1, 'trace' to replay: expected a Trace"):
        tc.replay("C: split(i, 64)", [Y])
    with pytest.raises(tc.ArgumentError, match="item 0 is not a Step"):
        tc.replay(["C: split(i, 64)"], [Y])
    with pytest.raises(tc.ArgumentError, match="create_schedule"):
        tc.replay(s.trace, [A])
    with pytest.raises(tc.ArgumentError, match="unknown primitive 'rfactor'"):
        Step("rfactor", "C")
    with pytest.raises(tc.ArgumentError, match="cache_read is applied to the schedule"):
        Step("cache_read", "C")


def test_check_false_skips_the_legality_check_only():
    s, (A, W, C, Y), _ = design_schedule()
    steps = list(s.trace)
    steps[-1] = dataclasses.replace(steps[-1], args=(StageRef("C"), AxisRef("C", "ko")))
    with pytest.raises(tc.IllegalScheduleError, match=r"compute_at\(Y, C.ko\)") as err:
        tc.replay(steps, s.outputs)
    assert "raised by replay: trace[13] (Y: compute_at(C, ko))" in err.value.__notes__
    r = tc.replay(steps, s.outputs, check=False)  # built; tc.lower checks the whole schedule
    assert r.log[-1] == "Y: compute_at(C, ko)"
    with pytest.raises(tc.IllegalScheduleError):
        tc.lower(r)
    steps[0] = dataclasses.replace(steps[0], args=(AxisRef("C", "x"), steps[0].args[1]))
    with pytest.raises(tc.ArgumentError, match="C has no axis x"):  # arguments are still validated
        tc.replay(steps, s.outputs, check=False)


# ---------------------------------------------------------------------------------------------
# (e) knobs


def test_knobs_survive_replay():
    s, _ = importlib.import_module("matmul_silu").make()
    config = {"BM": 128, "BN": 64, "BK": 64, "stages": 4, "warps": 8}
    for r in rebuilt(s):
        assert list(r.knobs) == list(s.knobs) == ["BM", "BN", "BK", "stages", "warps"]
        assert all(r.knobs[n].choices == k.choices for n, k in s.knobs.items())
        assert_same(s, r, config)
        assert str(tc.lower(r, config)) == str(tc.lower(s, config))
    # one knob used by several stages is declared once in the text
    s, _ = importlib.import_module("softmax").make()
    text = str(s.trace)
    assert text.count('tc.knob("BLOCK"') == 1 and text.count("BLOCK)") == 3


# ---------------------------------------------------------------------------------------------
# (f) every primitive round-trips


@pytest.mark.slow
def test_every_primitive_round_trips():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    b = tc.placeholder((M,), "float32", name="b")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 3.0, name="P", dtype="float16")
    c = tc.reduce_axis(N, name="c")
    R = tc.compute((M,), lambda r: tc.sum(P[r, c] * b[r], axis=c), name="R")
    Q = tc.compute((M, N), lambda i, j: tc.exp(P[i, j]) + R[i], name="Q")
    s = tc.create_schedule(Q)
    io, ii = s[Q].split(Q.axis[0], tc.knob("BR", [16, 32]))
    jo, ji = s[Q].split(Q.axis[1], 64)
    s[Q].reorder(io, jo, ii, ji)
    g = s[Q].swizzle(io, jo, group=tc.knob("G", [1, 4]))
    s[Q].bind(g, "program_id.0")
    s[Q].persistent(g, flatten=tc.flag("FL"))
    s[Q].num_warps(tc.knob("warps", [4, 8]))
    ro, ri = s[R].split(R.axis[0], 16)
    co, ci = s[R].split(c, 64)
    s[R].reorder(ro, co, ri, ci)
    s[R].bind(ro, "program_id.0")
    s[R].pipeline(co, stages=tc.knob("stages", [2, 3]))
    cio, cii = s[R].split(ci, 4)
    s[R].unroll(cio)
    s[R].num_warps(2)
    s[R].split_k(co, 2)
    s.cache_read(b, "shared", readers=[R]).compute_at(s[R], ro)
    s.cache_write(R, "local").compute_at(s[R], ro)
    s[P].compute_at(s[Q], g)
    s[P].compute_root()
    s[P].bind(s[P].fuse(*P.axis), "program_id.0")
    s[P].compute_inline()
    assert {st.primitive for st in s.trace} == {"split", "reorder", "fuse", "bind", "num_warps", "pipeline", "unroll",
                                              "cache_read", "cache_write", "compute_at", "compute_root",
                                              "compute_inline", "swizzle", "persistent", "split_k"}
    # every primitive there is, with compute_with's schedule below (it needs two independent stages)
    assert set(trace_mod.PRIMITIVES) == {st.primitive for st in s.trace} | {st.primitive for st in _twins().trace} \
        | {st.primitive for st in _online().trace} | {st.primitive for st in _stored().trace}
    assert s.log[-5:] == ["P: compute_at(Q, io_jo)", "P: compute_root()", "P: fuse(i, j) -> i_j",
                          "P: bind(i_j, 'program_id.0')", "P: compute_inline()"]
    assert s.trace[-9].stages == s.trace[-8].stages == {"b_shared"}
    assert s.trace[-7].stages == s.trace[-6].stages == {"R_local"}
    assert [k.default for k in s.knobs.values()] == [16, 1, 0, 4, 2]
    last = {n: k.choices[-1] for n, k in s.knobs.items()}
    for r in rebuilt(s):
        assert_same(s, r)
        assert_same(s, r, last)
        assert r.trace == s.trace
        assert [(c.name, c.kind, c.scope) for c in r.caches] == [(c.name, c.kind, c.scope) for c in s.caches]


def _twins() -> tc.Schedule:
    """SwiGLU's two GEMMs at one output tile, U's loop over K fused into G's (compute_with)."""
    X, Wg, Wu, G, U, Y = computes.swiglu("float16")
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 32, 32)
    s[Y].bind(s[Y].fuse(io, jo), "program_id.0")
    ko, _ = s[G].split(G.reduce_axis[0], tc.knob("BK", [16, 32]))
    s[U].split(U.reduce_axis[0], tc.knob("BK", [16, 32]))
    for T in (G, U):
        s[T].compute_at(s[Y], s[Y].leaves[0])
    s[U].compute_with(s[G], ko)
    return s


@pytest.mark.slow
def test_compute_with_round_trips():
    s = _twins()
    assert s.log[-1] == "U: compute_with(G, ko)" and "U.compute_with(G, G_ko)" in str(s.trace)
    for r in rebuilt(s):
        assert_same(s, r)
        assert_same(s, r, {"BK": 32})
        assert r.trace == s.trace and "runs in it too (compute_with)" in str(tc.lower(r))


def _online() -> tc.Schedule:
    """Softmax's max and sum in one loop (online): den's loop carries mx as a running max."""
    X, (c, c2), mx, den, Y = computes.softmax()
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], tc.knob("B", [16, 64]))
    s[Y].bind(Y.axis[0], "program_id.0")
    s[den].split(c2, tc.knob("B", [16, 64]))
    s[den].compute_at(s[Y], Y.axis[0])
    s[den].online(s[mx])
    return s


def test_online_round_trips():
    s = _online()
    assert s.log[-1] == "den: online(mx)" and "den.online(mx)" in str(s.trace)
    for r in rebuilt(s):
        assert_same(s, r)
        assert_same(s, r, {"B": 64})
        assert r.trace == s.trace


def _stored() -> tc.Schedule:
    """The blur per row of a column strip, blur_x stored at the strip (store_at: a sliding window)."""
    X, bx, by = computes.blur()
    s = tc.create_schedule(by)
    xo, xi = s[by].split(by.axis[1], tc.knob("BX", [16, 32]))
    s[by].reorder(xo, by.axis[0], xi)
    s[by].bind(xo, "program_id.0")
    s[bx].compute_at(s[by], by.axis[0])
    s[bx].store_at(s[by], xo)
    return s


def test_store_at_round_trips():
    s = _stored()
    assert s.log[-1] == "blur_x: store_at(blur_y, xo)" and "blur_x.store_at(blur_y, blur_y_xo)" in str(s.trace)
    for r in rebuilt(s):
        assert_same(s, r)
        assert_same(s, r, {"BX": 32})
        assert r.trace == s.trace and "(a sliding window)" in tc.lower(r).source()


def test_quiet_stages_record_nothing():
    # the default schedules lowering makes are not in the trace
    s, (A, W, C, Y), _ = design_schedule()
    n = len(s.trace)
    s0 = tc.create_schedule(Y)
    tc.lower(s0)
    tc.lower(s)
    assert len(s.trace) == n and len(s0.trace) == 0 and str(s0.trace) == "s = tc.create_schedule(outputs)\n"
    assert_same(s0, tc.replay(s0.trace, [Y]))


def _body(source: str) -> str:  # a kernel source without its header's list of schedule steps
    return "\n".join(line for line in source.splitlines() if not line.startswith("#   "))


OUTPUTS = {"gemm_silu": lambda: [computes.gemm_silu()[-1]], "softmax": lambda: [computes.softmax()[-1]],
           "rmsnorm": lambda: [computes.rmsnorm()[-1]], "rowscale_fp8": lambda: list(computes.rowscale_fp8()[3:])}


@pytest.mark.parametrize("workload", sorted(OUTPUTS))
def test_the_default_schedule_is_a_trace(workload):
    # what lowering gives an unscheduled stage is the steps of default_trace: applied by hand (replayed)
    # they lower to the same kernels; its Python text names the same primitives
    outputs = OUTPUTS[workload]()
    s = tc.create_schedule(outputs)
    stages = [name for name, st in s.stages.items() if st.kind == "compute"]
    traces = [tc.default_trace(s[name]) for name in stages]
    assert all(len(t) >= 2 for t in traces) and len(s.trace) == 0  # made quietly: s's own trace is empty
    steps = Trace([st for t in traces for st in t])
    by_hand = tc.replay(steps, outputs)
    assert all(by_hand[name].touched for name in stages)
    assert _body(tc.lower(by_hand).source()) == _body(tc.lower(s).source())
    text = str(traces[0])
    assert '.split(' in text and '.bind(' in text and text == str(tc.default_trace(s[stages[0]]))


def test_default_trace_leaves_fixed_axes_alone():
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    i, j = Y.axis
    steps = tc.default_trace(s[Y], fixed=frozenset([i]))
    assert [st.args[0] for st in steps if st.primitive == "split"] == [AxisRef("Y", "j")]  # i is not split
    assert [st.primitive for st in steps] == ["split", "reorder", "bind"]
    with pytest.raises(tc.ArgumentError, match="expected a stage"):
        tc.default_trace(Y)


def test_an_int_subclass_factor_is_recorded_as_a_plain_int():
    import enum

    class Tile(enum.IntEnum):
        SMALL = 16

    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    s[Z].split(Z.axis[1], Tile.SMALL)
    assert s.log == ["Z: split(j, 16) -> jo, ji"] and type(s.trace[0].args[1]) is int
    assert "Z_jo, Z_ji = Z.split(Z_j, 16)" in str(s.trace)
    assert_same(s, run_text(s.trace, [Z]))


# ---------------------------------------------------------------------------------------------
# study names: a tuning study's name hashes the schedule's fingerprint (its trace's lines) and its knobs in
# order, with the mix, args, device and versions (tilec/tune/study.py, study_key); the schedule's part is
# pinned here, version-free, so that a change of how the trace is kept cannot rename stored studies


def _flags_schedule() -> tc.Schedule:
    """A GEMM whose every on/off argument is a flag and every count a knob (split_k, pipeline, num_warps,
    cache_read's and cache_write's tma); `_persistent_schedule` has swizzle, unroll and persistent."""
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [16, 32]), tc.knob("BN", [16, 32]))
    ko, ki = s[C].split(C.reduce_axis[0], tc.knob("BK", [16, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s.cache_read(A, "shared", readers=[C], tma=tc.flag("TMA")).compute_at(s[C], ko)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].split_k(ko, tc.knob("SPLIT_K", [2, 1]), deterministic=tc.flag("DET"))
    s[C].pipeline(ko, tc.knob("stages", [2, 3]))
    s[C].num_warps(tc.knob("warps", [4, 8]))
    s.cache_write(C, "local", tma=tc.flag("TMA_STORE")).compute_at(s[C], jo)
    s[Y].compute_at(s[C], jo)
    return s


def _persistent_schedule() -> tc.Schedule:
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    iio, iii = s[C].split(ii, 4)
    s[C].unroll(iio)
    tiles = s[C].swizzle(io, jo, tc.knob("GROUP_M", [8, 4]))
    s[C].bind(tiles, "program_id.0")
    s[C].persistent(tiles, flatten=tc.flag("FLATTEN"))
    return s


def _online_flag_schedule() -> tc.Schedule:
    X, (c, c2), mx, den, Y = computes.softmax()
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], tc.knob("B", [16, 64]))
    s[Y].bind(Y.axis[0], "program_id.0")
    s[den].split(c2, tc.knob("B", [16, 64]))
    s[den].compute_at(s[Y], Y.axis[0])
    s[den].online(s[mx], skip_masked=tc.flag("SKIP"))
    return s


PINNED_SCHEDULES = {  # digest of [fingerprint, knobs] (the schedule's part of the study name), at 7858f78
    "attention": "7a69bfb591434285",
    "attention-split": "e979e201fd8e6d41",
    "attention-causal-noskip": "f0b5340e9af5edec",
    "batched_matmul": "3bb9882a2abf9167",
    "matmul": "6a46564750cd2add",
    "matmul_silu": "a58d548ac6e44eaa",
    "persistent_gemm": "ce1f7e2262261611",
    "persistent_gemm-plain": "3f301c1c5811c2c1",
    "rmsnorm": "9933a3aac2182de3",
    "rowscale_fp8": "ae8f5fd0225cbe7b",
    "silu_mul_fp8": "52dc180dfd233e0c",
    "softmax": "7b0ea1bb8e8bf545",
    "softmax-split": "a06f4670be231b9a",
    "splitk_gemm": "60eda4e87974fcd2",
    "swiglu": "56a7bc027b81cd67",
    "swiglu-two-loops": "d2445433df238238",
    "transpose_bias": "10183d988beabe3c",
    "flags": "7561f399140fb740", "persistent": "20342d7ef354a1ae", "online-flag": "d942f529484229eb",
}
_VARIANTS = {"attention-split": {"split": True}, "attention-causal-noskip": {"causal": True, "skip_masked": False},
             "persistent_gemm-plain": {"epilogue": False}, "softmax-split": {"split": True},
             "swiglu-two-loops": {"one_loop": False}}
_BY_HAND = {"flags": _flags_schedule, "persistent": _persistent_schedule, "online-flag": _online_flag_schedule}


def _schedule_digest(s: tc.Schedule) -> str:
    import hashlib
    import json
    knobs = {n: list(k.choices) for n, k in s.knobs.items()}
    return hashlib.sha256(json.dumps([s.fingerprint(), knobs]).encode()).hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(PINNED_SCHEDULES))
def test_study_names_stay_the_same(case):
    """What a study name hashes of the schedule (fingerprint, knobs in order) is what it was: stored studies
    keep their names. tests/test_plan.py pins one whole study name (interpreter, these versions)."""
    if case in _BY_HAND:
        s = _BY_HAND[case]()
    else:
        s = importlib.import_module(case.split("-")[0]).make(**_VARIANTS.get(case, {}))[0]
    assert _schedule_digest(s) == PINNED_SCHEDULES[case], (case, s.log, list(s.knobs))


# ---------------------------------------------------------------------------------------------
# the trace is the schedule: each stage's state is the fold of its steps (tilec/schedule/state.py)


def _state(s: tc.Schedule) -> list:
    """Every stage's state, and the schedule's knobs and caches, as comparable plain data."""
    def name(v):
        return v.name if isinstance(v, (tc.Stage, IterVar)) else repr(v)

    out = []
    for st in [*s.stages.values(), *s.caches]:
        at = st.attach if not isinstance(st.attach, tuple) else tuple(map(name, st.attach))
        out.append((st.name, st.kind, at, [a.name for a in st.leaves], [repr(r) for r in st.relations],
                    {a.name: d for a, d in st.binds.items()}, {a.name: repr(v) for a, v in st.pipelines.items()},
                    sorted(a.name for a in st.unrolled), repr(st.warps), repr(st.tma),
                    {a.name: repr(v) for a, v in st.persistent_axes.items()},
                    st.fused_with and tuple(map(name, st.fused_with)),
                    st.k_split and tuple(map(name, st.k_split)), [x.name for x in st.online_stats],
                    repr(st.online_skip), st.touched, sorted(st.all_axes)))
    return out + [[(n, k.choices, type(k).__name__) for n, k in s.knobs.items()]]


def test_every_primitive_has_one_apply_function():
    from tilec.schedule import state
    assert set(state.APPLY) == set(trace_mod.PRIMITIVES)
    assert state.LOOPS | state.PLACES <= set(trace_mod.PRIMITIVES)


@pytest.mark.parametrize("case", sorted(PINNED_SCHEDULES))
def test_the_state_is_the_fold_of_the_trace(case):
    """A schedule folded from its trace alone (no primitive run again) has the state the primitives left,
    lowers to the same source; folding its own trace again gives back the same stage and axis objects."""
    s = _BY_HAND[case]() if case in _BY_HAND else \
        importlib.import_module(case.split("-")[0]).make(**_VARIANTS.get(case, {}))[0]
    r = s._refolded(s.trace)
    assert _state(r) == _state(s) and r.trace == s.trace and r.fingerprint() == s.fingerprint()
    assert all(a is not b for a, b in zip(r.caches, s.caches))  # a cache stage belongs to one schedule
    before = {st.name: (st, list(st.leaves), st.attach) for st in [*s.stages.values(), *s.caches]}
    s._fold()
    assert {st.name: (st, list(st.leaves), st.attach) for st in [*s.stages.values(), *s.caches]} == before
    if case in ("matmul_silu", "softmax", "flags"):  # lowering costs: a few cases
        assert tc.lower(r).source() == tc.lower(s).source()


def test_a_refused_primitive_is_dropped_and_the_rest_folded_again():
    """The state after a refused primitive is the fold of the steps before it: the same objects the user
    holds, the knob it declared gone (a knob of that name with other choices is then a new one)."""
    s, (A, W, C, Y), ko = design_schedule()
    before, leaves, trace = _state(s), list(s[C].leaves), s.trace
    with pytest.raises(tc.IllegalScheduleError, match=r"compute_at\(Y, C.ko\)"):
        s[Y].compute_at(s[C], ko)
    assert _state(s) == before and s[C].leaves == leaves and all(a is b for a, b in zip(s[C].leaves, leaves))
    k2 = s[C].tensor.reduce_axis[0]
    from tilec.schedule import schedule as schedule_mod
    check = schedule_mod._primitive_check

    def refuse_splits(sched, primitive, stage=None):  # a check that refuses the split (a knob declared in it)
        if primitive.startswith("C.split"):
            raise tc.IllegalScheduleError(f"{primitive}: refused", primitive=primitive, stage="C",
                                          reason="dependence", counterexample={})
        return check(sched, primitive=primitive, stage=stage)

    schedule_mod._primitive_check = refuse_splits
    try:
        with pytest.raises(tc.IllegalScheduleError, match=r"refused"):
            s[C].split(s[C].leaves[-1], tc.knob("BKI", [8, 24]))
    finally:
        schedule_mod._primitive_check = check
    assert _state(s) == before and "BKI" not in s.knobs and s.trace == trace
    kio, kii = s[C].split(s[C].leaves[-1], tc.knob("BKI", [8, 16]))
    assert s.knobs["BKI"].choices == (8, 16) and s[C].leaves[-2:] == [kio, kii] and k2 not in s[C].leaves
    assert _state(tc.replay(s.trace, s.outputs)) == _state(s)


def test_legal_places_fold_the_trace_with_the_placement_swapped(monkeypatch):
    """legal_places tries each loop on the schedule its trace gives with the stage's placement step swapped
    for compute_at at that loop (appended where the stage was placed by hand); the schedule is untouched."""
    from tilec.plan import legal_places
    from tilec.schedule.schedule import Schedule
    s, (A, W, C, Y), ko = design_schedule()
    tried = []
    fold = Schedule._refolded

    def refolded(self, steps):
        tried.append(list(steps))
        return fold(self, steps)

    monkeypatch.setattr(Schedule, "_refolded", refolded)
    before, trace = _state(s), s.trace
    assert legal_places(s[Y]) == ["C.io", "C.jo"]
    assert _state(s) == before and s.trace == trace
    rest = [st for st in trace if st.text != "Y: compute_at(C, jo)"]
    assert len(rest) == len(trace) - 1
    assert [t[:-1] for t in tried] == [rest] * len(s[C].leaves)
    assert [t[-1].text for t in tried] == [f"Y: compute_at(C, {a.name})" for a in s[C].leaves]
    tried.clear()
    s[Y].compute_root()
    s[Y].attach = (s[C], ko)  # by hand: no step to swap
    assert legal_places(s[Y]) == ["C.io", "C.jo"]
    assert [t[:-1] for t in tried] == [list(s.trace[:-1])] * len(s[C].leaves)  # compute_root swapped


def test_a_detached_stage_folds_its_own_steps():
    """The default schedule lowering gives an untouched stage is a detached stage: its steps are its own
    (not the schedule's trace) and its state is their fold."""
    from tilec.schedule.defaults import default_stage
    s = tc.create_schedule(computes.gemm_silu()[-1])
    st = default_stage(s["C"])
    assert len(s.trace) == 0 and st.detached and [x.text for x in st.steps] == tc.default_trace(s["C"]).lines
    assert st.touched and [a.name for a in st.leaves] == ["io_jo", "ko", "ii", "ji", "ki"]
    assert st.binds == {st.leaves[0]: 0} and st.relations[-1].fused is st.leaves[0]
    assert not s["C"].touched and s["C"].leaves == [*s["C"].tensor.axis, *s["C"].tensor.reduce_axis]


@pytest.mark.parametrize("case", ["attention-split", "flags", "online-flag", "persistent", "swiglu"])
def test_json_text_round_trips(case):
    """`to_json` is the trace as data (what a tuning study stores); `from_json` reads back the same steps,
    with their `within` and the axes' names, so the Python text and the replay are the same."""
    s = _BY_HAND[case]() if case in _BY_HAND else \
        importlib.import_module(case.split("-")[0]).make(**_VARIANTS.get(case, {}))[0]
    back = Trace.from_json(s.trace.to_json())
    assert back == s.trace and back.axes == s.trace.axes and [st.within for st in back] == [st.within for st in s.trace]
    assert str(back) == str(s.trace) and tc.replay(back, s.outputs).fingerprint() == s.fingerprint()


@pytest.mark.parametrize("text,why", [
    ("[]", "expected a dict, got list"), ('{"axes": {}}', "no 'steps'"), ("nonsense", "Expecting value"),
    ('{"steps": [{"primitive": "eval", "stage": "C", "args": [], "results": [], "within": null}], "axes": {}}',
     "unknown primitive 'eval'"),
    ('{"steps": [{"primitive": "split", "stage": "C", "args": [{"axis": ["C"]}, 4], "results": [], "within": null}], '
     '"axes": {}}', r"not an argument of a step: \{'axis': \['C'\]\}"),
    ('{"steps": [{"primitive": "split", "stage": "C", "args": [], "results": "io", "within": null}], "axes": {}}',
     "expected a list of names"),
    ('{"steps": [], "axes": {"C": [["i"]]}}', r"the axes of C are \[axis names, reduce axis names\]"),
])
def test_json_text_that_is_no_trace_is_refused(text, why):
    with pytest.raises(tc.ArgumentError, match=rf"^Trace.from_json: not a trace's JSON text \(Trace.to_json\): .*{why}"):
        Trace.from_json(text)
