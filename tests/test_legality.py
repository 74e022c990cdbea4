"""The legality corpus (Halide's test/error style, plus the legal side).

Part A: illegal schedules, one per case. Each is rejected at the primitive that makes it illegal
(or at `tc.build`/`tc.lower` for a schedule changed behind the primitives, or a knob value other
than the default) with `IllegalScheduleError` naming the primitive, the stage, the reason
("dependence", "rounding", "parallel", "bounds") and a concrete counterexample; the failed
primitive leaves the schedule as it was. Placements tilec cannot express are `LoweringError`s that
say "not supported" and what to do instead.

Part B: legal, non-trivial schedules, each built with `tc.build` and compared with PyTorch on fresh
random inputs, at sizes that do not divide the tiles and with size-1 dimensions.

Strict xfails mark illegal schedules that tilec wrongly accepts (or crashes on); each names the bug.
The computations shared with other test files (GEMM, DESIGN.md's schedule, softmax, ...) are in
tests/computes.py.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from computes import (
    design_schedule,
    gemm,
    gemm_relu_gemm,
    gemm_silu,
    prologue_gemm,
    rmsnorm,
    row_reduce,
    rowscale_fp8,
    softmax,
    swiglu,
    tile_gemm,
    two_reduce_axes,
)

import tilec as tc
from tilec.ir.expr import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import common  # noqa: E402

DEV = common.device()


def randn(*shape, dtype=torch.float32, scale=1.0):
    return common.randn(shape, dtype, DEV, scale=scale)


# ---------------------------------------------------------------------------------------------
# assertions shared by the illegal cases


def state(s) -> list:
    """Everything the primitives record, as comparable plain data."""
    out = []
    for st in list(s.stages.values()) + list(s.caches):
        at = st.attach if not isinstance(st.attach, tuple) else (st.attach[0].name, st.attach[1].name)
        out.append((st.name, at, [a.name for a in st.leaves], {a.name: d for a, d in st.binds.items()},
                    {a.name: repr(v) for a, v in st.pipelines.items()}, sorted(a.name for a in st.unrolled),
                    len(st.relations), st.touched))
    return out + [list(s.log), sorted(s.knobs)]


_INSTANCE = re.compile(r"(\w+)\[(-?\d+(?:, -?\d+)*)\]")


def _in_domain(s, instance: str, sizes: dict) -> str:
    """The stage named by an instance 'T[0, 3]' (or '_init_T[..]', or an update 'T[i, j, k]'), after
    checking its spatial coordinates lie inside T's shape at the counterexample's sizes."""
    m = _INSTANCE.fullmatch(instance)
    assert m, f"not a concrete instance: {instance!r}"
    name = m.group(1).removeprefix("_init_")
    t = s.tensors[name]
    idx = [int(v) for v in m.group(2).split(", ")]
    assert len(idx) in (t.ndim, t.ndim + len(t.reduce_axis)), instance
    for v, e in zip(idx, t.shape):
        assert 0 <= v < evaluate(e, sizes), f"{instance} lies outside {name}'s shape at {sizes}"
    return name


def assert_illegal(s, fn, match, *, primitive, stage, reason, sink=None, source=None, lowers_after=True):
    """`fn()` raises IllegalScheduleError with these facts and a concrete counterexample, and leaves
    the schedule `s` exactly as it was (it still lowers, if it did before)."""
    before = state(s)
    with pytest.raises(tc.IllegalScheduleError, match=match) as info:
        fn()
    e = info.value
    # `.primitive` is "compute_at", "bind", "build", or "C.reorder" / "H.compute_inline" for primitives of a
    # stage (docs/legality.md lists bare names): compare the name after the stage
    assert (e.primitive.split(".")[-1], e.stage, e.reason) == (primitive, stage, reason), \
        (e.primitive, e.stage, e.reason)
    ce = e.counterexample
    assert isinstance(ce, dict) and {"sink", "source", "sizes"} <= set(ce), ce
    sizes = ce["sizes"]
    assert all(isinstance(v, int) for v in sizes.values()), ce
    sink_stage = _in_domain(s, ce["sink"], sizes)
    source_stage = _in_domain(s, ce["source"], sizes)
    if sink is not None:
        assert sink_stage == sink, ce
    if source is not None:
        assert source_stage == source, ce
    assert ce["sink"].split("[")[0] in str(e) or sink_stage in str(e)
    assert state(s) == before, "the failed primitive changed the schedule"
    if lowers_after:
        tc.lower(s)
    return e


def legal_locations(e) -> list[str]:
    m = re.search(r"Legal locations for \w+ are: (.*)$", str(e))
    return m.group(1).split(", ") if m else []


# =============================================================================================
# A. illegal schedules
# =============================================================================================

# --- consumers of a reduction placed inside its reduction loop (rounding) --------------------


def test_silu_inside_gemm_reduction_loop():
    """DESIGN.md's own example: SiLU of partial sums is not SiLU of the sum."""
    s, (A, W, C, Y), ax = design_schedule(place_y=False)
    e = assert_illegal(s, lambda: s[Y].compute_at(s[C], ax["ko"]),
                       r"^compute_at\(Y, C.ko\) makes Y read C before C's reduction over k is complete: "
                       r"Y\[\d+, \d+\] would run .*but C\[\d+, \d+\] is still updated at k=\d+ "
                       r"\(flow dependence C -> Y",
                       primitive="compute_at", stage="Y", reason="rounding", sink="Y", source="C")
    assert legal_locations(e) == ["C.io", "C.jo"]
    assert re.fullmatch(r"Y\[\d+, \d+\]", e.counterexample["sink"])
    assert re.fullmatch(r"C\[\d+, \d+, \d+\]", e.counterexample["source"])  # an update of the sum
    assert s[Y].attach is None
    s[Y].compute_at(s[C], ax["jo"])  # one of the places the message offers is accepted


def test_silu_moved_into_the_reduction_loop_keeps_its_old_place():
    s, (A, W, C, Y), ax = design_schedule(place_y=True)
    assert_illegal(s, lambda: s[Y].compute_at(s[C], ax["ko"]), r"before C's reduction over k is complete",
                   primitive="compute_at", stage="Y", reason="rounding")
    assert s[Y].attach == (s[C], ax["jo"])


# Each setup returns (s, consumer, producer, loop): the schedule before `s[consumer].compute_at(s[producer],
# loop)`, a place inside the producer's reduction loop, where the consumer would read a partial result.


def _gemm_two_outputs():
    """C and Y both outputs: C is stored, but Y still must not read partial sums."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule([C, Y])
    ax = tile_gemm(s, C)
    return s, Y, C, ax["ko"]


def _batched_gemm():
    B, M, N, K = tc.size_vars("B M N K")
    A = tc.placeholder((B, M, K), "float32", name="A")
    W = tc.placeholder((B, K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((B, M, N), lambda b, i, j: tc.sum(A[b, i, k] * W[b, k, j], axis=k), name="C")
    Y = tc.compute(C.shape, lambda b, i, j: tc.silu(C[b, i, j]), name="Y")
    s = tc.create_schedule(Y)
    b, i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ko, ki = s[C].split(k, 16)
    s[C].reorder(b, io, jo, ko, ii, ji, ki)
    s[C].bind(b, "program_id.2")
    s[C].bind(io, "program_id.0")
    return s, Y, C, ko  # jo is a serial loop: Y needs its j fixed, so C.jo is its only legal place


def _gemm_unrolled_ki():
    A, W, C, Y = gemm_silu(K=48)
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bk=4)
    s[C].unroll(ax["ki"])  # ki is a loop now, not a tile: Y at ko is still inside the reduction
    return s, Y, C, ax["ko"]


def _two_reduce_axes_at(loop):
    A, W, C, Y = two_reduce_axes()
    s = tc.create_schedule(Y)
    i, j = C.axis
    k1, k2 = C.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    k2o, k2i = s[C].split(k2, 16)
    s[C].reorder(io, jo, k1, k2o, ii, ji, k2i)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    return s, Y, C, {"k1": k1, "k2o": k2o}[loop]


def _row_max():
    M, N, X, c, mx = row_reduce(tc.max, "mx")
    Z = tc.compute((M, N), lambda r, col: X[r, col] - mx[r], name="Z")
    s = tc.create_schedule(Z)
    co, ci = s[mx].split(c, 64)
    s[mx].bind(mx.axis[0], "program_id.0")
    return s, Z, mx, co


def _softmax_sum_in_the_row_max():
    X, (c, c2), mx, den, Y = softmax()
    s = tc.create_schedule(Y)
    co, ci = s[mx].split(c, 64)
    s[mx].bind(mx.axis[0], "program_id.0")
    s[den].split(c2, 64)
    return s, den, mx, co


def _softmax_division_in_the_row_sum():
    X, (c, c2), mx, den, Y = softmax()
    s = tc.create_schedule(Y)
    c2o, c2i = s[den].split(c2, 64)
    s[den].bind(den.axis[0], "program_id.0")
    return s, Y, den, c2o


def _rmsnorm_in_the_sum_of_squares():
    X, w, c, ss, Y = rmsnorm()
    s = tc.create_schedule(Y)
    co, ci = s[ss].split(c, 64)
    s[ss].bind(ss.axis[0], "program_id.0")
    return s, Y, ss, co


def _fp8_quantization_in_the_row_max():
    """Quantizing with the running max of the first column tiles gives the wrong scale."""
    X, c, amax, Q, S = rowscale_fp8()
    s = tc.create_schedule(Q)
    co, ci = s[amax].split(c, 64)
    s[amax].bind(amax.axis[0], "program_id.0")
    return s, Q, amax, co


def _fp8_scale_output_in_the_row_max():
    """The second output S (the scale) has no loop of its own: at amax.co it is written too early."""
    X, c, amax, Q, S = rowscale_fp8()
    s = tc.create_schedule([Q, S])
    co, ci = s[amax].split(c, 64)
    s[amax].bind(amax.axis[0], "program_id.0")
    s[Q].compute_at(s[amax], amax.axis[0])  # legal: after the loop over column tiles
    return s, S, amax, co


def _swiglu_gate_in_one_gemm():
    """The consumer placed in a producer's reduction loop (the wrong direction for SwiGLU)."""
    X, Wg, Wu, G, U, Y = swiglu()
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, G)
    return s, Y, G, ax["ko"]


def _middle_of_a_three_stage_chain():
    """C = A @ W; H = relu(C); O = H @ V. H placed in C's reduction loop."""
    A, W, V, C, H, O = gemm_relu_gemm()
    s = tc.create_schedule(O)
    ax = tile_gemm(s, C)
    return s, H, C, ax["ko"]


def _epilogue_through_an_inlined_stage():
    """The inlined stage's reads count: Y reads C through H (inlined), so C.ko is still too early."""
    A, W, C = gemm()
    H = tc.compute(C.shape, lambda i, j: tc.silu(C[i, j]), name="H", dtype="float16")
    Y = tc.compute(C.shape, lambda i, j: H[i, j] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C)
    s[H].compute_inline()
    return s, Y, C, ax["ko"]


@dataclasses.dataclass
class PartialRead:
    """A consumer placed inside its producer's reduction loop, and what the refusal must say."""

    setup: Callable            # () -> (s, consumer, producer, loop)
    match: str                 # the message, from its start where it begins with ^
    sink: str | None = None    # the stages of the counterexample's two ends, where checked
    source: str | None = None
    legal: list[str] | None = None  # the message's legal locations, where checked
    forms: dict[str, str] = dataclasses.field(default_factory=dict)  # end -> the counterexample's full form


PARTIAL_READS = [
    pytest.param(PartialRead(_gemm_two_outputs, r"makes Y read C before C's reduction", sink="Y", source="C",
                             legal=["C.io", "C.jo"]), id="gemm-with-both-outputs"),
    pytest.param(PartialRead(_batched_gemm, r"compute_at\(Y, C.ko\) makes Y read C before", sink="Y",
                             legal=["C.jo"], forms={"sink": r"Y\[\d+, \d+, \d+\]"}), id="batched-gemm"),
    pytest.param(PartialRead(_gemm_unrolled_ki, r"before C's reduction over k is complete",
                             legal=["C.io", "C.jo"]), id="gemm-unrolled-reduction"),
    *(pytest.param(PartialRead(functools.partial(_two_reduce_axes_at, loop),
                               rf"compute_at\(Y, C.{loop}\) makes Y read C before C's reduction over k1, k2 is "
                               rf"complete", sink="Y", source="C", legal=["C.io", "C.jo"],
                               forms={"source": r"C\[\d+, \d+, \d+, \d+\]"}), id=f"two-reduce-axes-at-{loop}")
      for loop in ("k1", "k2o")),
    pytest.param(PartialRead(_row_max, r"compute_at\(Z, mx.co\) makes Z read mx before mx's reduction over c is "
                             r"complete", sink="Z", source="mx", legal=["mx.r"]), id="row-max"),
    pytest.param(PartialRead(_softmax_sum_in_the_row_max, r"compute_at\(den, mx.co\) makes den read mx before mx's "
                             r"reduction over c is complete", sink="den", source="mx", legal=["mx.r"]),
                 id="softmax-sum-in-the-row-max"),
    pytest.param(PartialRead(_softmax_division_in_the_row_sum, r"compute_at\(Y, den.c2o\) makes Y read den before "
                             r"den's reduction over c2 is complete", sink="Y", source="den", legal=["den.r"]),
                 id="softmax-division-in-the-row-sum"),
    pytest.param(PartialRead(_rmsnorm_in_the_sum_of_squares, r"compute_at\(Y, ss.co\) makes Y read ss before ss's "
                             r"reduction over c is complete", sink="Y", source="ss", legal=["ss.r"]),
                 id="rmsnorm-in-the-sum-of-squares"),
    pytest.param(PartialRead(_fp8_quantization_in_the_row_max, r"compute_at\(Q, amax.co\) makes Q read amax before "
                             r"amax's reduction over c is complete: Q\[\d+, \d+\] would run", sink="Q",
                             source="amax", legal=["amax.r"]), id="fp8-quantization-in-the-row-max"),
    pytest.param(PartialRead(_fp8_scale_output_in_the_row_max, r"makes S read amax before amax's reduction",
                             sink="S", source="amax"), id="fp8-scale-output-in-the-row-max"),
    pytest.param(PartialRead(_swiglu_gate_in_one_gemm, r"makes Y read G before G's reduction over k", sink="Y",
                             source="G", legal=["G.io", "G.jo"]), id="swiglu-gate-in-one-gemm"),
    pytest.param(PartialRead(_middle_of_a_three_stage_chain, r"makes H read C before C's reduction over k",
                             sink="H", source="C"), id="middle-of-a-three-stage-chain"),
    pytest.param(PartialRead(_epilogue_through_an_inlined_stage, r"makes Y read C before C's reduction over k",
                             sink="Y", source="C", legal=["C.io", "C.jo"]), id="epilogue-through-an-inlined-stage"),
]


@pytest.mark.parametrize("case", PARTIAL_READS)
@pytest.mark.slow
def test_consumer_inside_the_reduction_loop_would_read_a_partial_result(case):
    """A sum (max) is a rounding point: its consumer must not run before the reduction is complete."""
    s, consumer, producer, loop = case.setup()
    e = assert_illegal(s, lambda: s[consumer].compute_at(s[producer], loop), case.match, primitive="compute_at",
                       stage=consumer.name, reason="rounding", sink=case.sink, source=case.source)
    for end, form in case.forms.items():
        assert re.fullmatch(form, e.counterexample[end]), (end, e.counterexample)
    if case.legal is not None:
        assert legal_locations(e) == case.legal


def test_epilogue_inside_the_reduction_of_an_unscheduled_gemm():
    """The default schedule's reduction loop, named by the original axis k."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    e = assert_illegal(s, lambda: s[Y].compute_at(s[C], C.reduce_axis[0]), r"compute_at\(Y, C.k\) makes Y read C "
                       r"before C's reduction over k is complete", primitive="compute_at", stage="Y",
                       reason="rounding")
    assert "C.k" not in legal_locations(e) and legal_locations(e)


def test_middle_of_a_three_stage_chain_inside_the_first_reduction():
    """C = A @ W; H = relu(C); O = H @ V. H placed in C's reduction loop."""
    A, W, V, C, H, O = gemm_relu_gemm()
    s = tc.create_schedule(O)
    ax = tile_gemm(s, C)
    before = state(s)
    with pytest.raises(tc.IllegalScheduleError, match=r"^compute_at\(H, C.ko\) ") as info:
        s[H].compute_at(s[C], ax["ko"])
    e = info.value
    assert (e.primitive, e.stage) == ("compute_at", "H")
    assert e.reason in ("rounding", "dependence")
    assert legal_locations(e) == ["C.io", "C.jo"]
    assert state(s) == before
    s[H].compute_at(s[C], ax["jo"])
    tc.lower(s)


def test_inlining_a_stage_puts_its_reader_inside_the_reduction():
    """Y (reads H = silu(C)) at C.ko is not lowerable while H has its own kernel; inlining H makes it
    lowerable, and illegal: the check fires at compute_inline."""
    A, W, C = gemm()
    H = tc.compute(C.shape, lambda i, j: tc.silu(C[i, j]), name="H")
    Y = tc.compute(C.shape, lambda i, j: H[i, j] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C)
    s[Y].compute_at(s[C], ax["ko"])  # C -> H -> Y: kernels would need each other, left to build
    with pytest.raises(tc.LoweringError, match=r"the placements make two kernels need each other's results"):
        tc.lower(s)
    assert_illegal(s, lambda: s[H].compute_inline(),
                   r"^H.compute_inline\(\) makes Y read C before C's reduction over k is complete",
                   primitive="compute_inline", stage="H", reason="rounding", sink="Y", source="C", lowers_after=False)
    assert s[H].attach is None


# --- parallel programs ------------------------------------------------------------------------


def test_bind_the_reduction_loop_to_the_grid():
    s, (A, W, C, Y), ax = design_schedule()
    before = state(s)
    with pytest.raises(tc.IllegalScheduleError, match=r"^bind\(C.ko, 'program_id.2'\): ko runs the reduction over "
                                                      r"k; programs run in parallel, so each would update the same C "
                                                      r"elements at once. Bind a spatial axis instead") as info:
        s[C].bind(ax["ko"], "program_id.2")
    e = info.value
    assert (e.primitive, e.stage, e.reason) == ("bind", "C", "parallel")
    assert e.counterexample  # names the reduce loop's iterations that would run at once
    assert state(s) == before and ax["ko"] not in s[C].binds


def test_bind_a_fused_pair_of_reduction_loops():
    A, W, C, Y = two_reduce_axes()
    s = tc.create_schedule(Y)
    i, j = C.axis
    k1, k2 = C.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    k2o, k2i = s[C].split(k2, 16)
    s[C].reorder(io, jo, k1, k2o, ii, ji, k2i)
    s[C].bind(io, "program_id.0")
    kk = s[C].fuse(k1, k2o)
    before = state(s)
    with pytest.raises(tc.IllegalScheduleError, match=r"bind\(C.k1_k2o, 'program_id.1'\): k1_k2o runs the reduction "
                                                      r"over k1, k2") as info:
        s[C].bind(kk, "program_id.1")
    assert (info.value.primitive, info.value.reason) == ("bind", "parallel")
    assert state(s) == before


def test_reduction_bound_behind_bind_is_caught_by_isl_at_build():
    """Setting `binds` directly skips bind's own test; isl still sees programs sharing C's updates."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)
    s[C].binds[ax["ko"]] = 2
    match = (r"^build makes programs that run in parallel depend on each other: the update C\[\d+, \d+, \d+\] runs "
             r"in one program .*C.ko=\d+.* needs the update C\[\d+, \d+, \d+\], which another program computes "
             r"\(dependence C -> C.*Bind only axes whose iterations are independent")
    for build in (lambda: tc.lower(s), lambda: tc.build(s, [A, W, C])):
        e = assert_illegal(s, build, match, primitive="build", stage="C", reason="parallel", sink="C", source="C",
                           lowers_after=False)
        assert re.fullmatch(r"C\[\d+, \d+, \d+\]", e.counterexample["sink"])
        src_k, sink_k = int(e.counterexample["source"][:-1].split(", ")[-1]), int(e.counterexample["sink"][:-1].split(", ")[-1])
        assert src_k < sink_k  # an earlier update of the same element


def test_consumer_reading_a_value_of_another_program():
    """Ys[i, j] = C[i, j] + C[i, 0] fused at C.jo: C[i, 0] is computed by the program of column tile 0."""
    A, W, C = gemm()
    Ys = tc.compute(C.shape, lambda i, j: C[i, j] + C[i, 0], name="Ys")
    s = tc.create_schedule(Ys)
    ax = tile_gemm(s, C)
    e = assert_illegal(s, lambda: s[Ys].compute_at(s[C], ax["jo"]),
                       r"compute_at\(Ys, C.jo\) makes programs that run in parallel depend on each other: "
                       r"Ys\[\d+, \d+\] runs in one program .*needs C\[\d+, 0\], which another program computes",
                       primitive="compute_at", stage="Ys", reason="parallel", sink="Ys", source="C")
    assert "No loop of C is a legal place for Ys: use compute_root" in str(e)


def test_transposed_read_of_a_fused_producer():
    """Y[i, j] = C[i, j] + C[j, i] at C.jo: C[j, i] belongs to the mirrored tile."""
    (N, K) = tc.size_vars("N K")
    A = tc.placeholder((N, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((N, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    Y = tc.compute((N, N), lambda i, j: C[i, j] + C[j, i], name="Y")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C)
    e = assert_illegal(s, lambda: s[Y].compute_at(s[C], ax["jo"]), r"^compute_at\(Y, C.jo\) ",
                       primitive="compute_at", stage="Y", reason="rounding", sink="Y", source="C")
    i, j = map(int, e.counterexample["sink"][2:-1].split(", "))
    src = [int(v) for v in e.counterexample["source"][2:-1].split(", ")]
    assert src[:2] == [j, i]  # the mirrored element
    assert "No loop of C is a legal place for Y" in str(e)


def test_row_sum_fused_at_a_grid_column_axis_of_its_producer():
    """R[i] = sum_j P[i, j] at P.jo with jo on the grid: each program would update R's sum at once."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="P")
    jr = tc.reduce_axis(N, name="jr")
    R = tc.compute((M,), lambda i: tc.sum(P[i, jr], axis=jr), name="R")
    s = tc.create_schedule([P, R])
    io, jo, ii, ji = s[P].tile(*P.axis, 16, 16)
    s[P].bind(io, "program_id.0")
    s[P].bind(jo, "program_id.1")
    s[R].reorder(R.axis[0], jr)
    e = assert_illegal(s, lambda: s[R].compute_at(s[P], jo),
                       r"^compute_at\(R, P.jo\) makes programs that run in parallel depend on each other: the update "
                       r"R\[\d+, \d+\] runs in one program .*needs the update R\[\d+, \d+\], which another program computes",
                       primitive="compute_at", stage="R", reason="parallel", sink="R", source="R")
    assert "No loop of P is a legal place for R: use compute_root" in str(e)


# --- the whole schedule is checked again at build ---------------------------------------------


def test_build_rechecks_a_placement_made_behind_compute_at():
    s, (A, W, C, Y), ax = design_schedule(place_y=False)
    s[Y].attach = (s[C], ax["ko"])
    for build in (lambda: tc.lower(s), lambda: tc.build(s, [A, W, Y])):
        e = assert_illegal(s, build, r"^build makes Y read C before C's reduction over k is complete",
                           primitive="build", stage="Y", reason="rounding", sink="Y", source="C", lowers_after=False)
        assert legal_locations(e) == ["C.io", "C.jo"]


def test_knob_value_that_breaks_a_placement_legal_at_the_default():
    """Y at R.co is legal while co has one iteration (B = 64 = N, the default) and illegal at B = 16:
    the primitive checks the default, build checks the config it is given. A loop of one iteration is no
    loop, so at B = 64 Y runs after R's sum, at the row's program."""
    M = tc.size_vars("M")
    X = tc.placeholder((M, 64), "float32", name="X")
    c = tc.reduce_axis(64, name="c")
    R = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="R")
    Y = tc.compute((M, 64), lambda r, col: X[r, col] / R[r], name="Y")
    s = tc.create_schedule(Y)
    co, ci = s[R].split(c, tc.knob("B", [64, 16]))
    s[R].bind(R.axis[0], "program_id.0")
    s[Y].compute_at(s[R], co)  # accepted: legal at B=64
    assert "for co in" not in tc.lower(s).source()
    x = randn(5, 64)
    build_check(s, [X, Y], [x], x / x.sum(1, keepdim=True))
    for build in (lambda: tc.lower(s, {"B": 16}), lambda: tc.build(s, [X, Y], config={"B": 16})):
        assert_illegal(s, build, r"^build makes Y read R before R's reduction over c is complete: Y\[\d+, \d+\] "
                                 r"would run .*but R\[\d+\] is still updated at c=\d+",
                       primitive="build", stage="Y", reason="rounding", sink="Y", source="R", lowers_after=False)


def test_legal_locations_at_a_knob_value_other_than_the_default():
    M = tc.size_vars("M")
    X = tc.placeholder((M, 64), "float32", name="X")
    c = tc.reduce_axis(64, name="c")
    R = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="R")
    Y = tc.compute((M, 64), lambda r, col: X[r, col] / R[r], name="Y")
    s = tc.create_schedule(Y)
    co, ci = s[R].split(c, tc.knob("B", [64, 16]))
    s[R].bind(R.axis[0], "program_id.0")
    s[Y].compute_at(s[R], co)
    with pytest.raises(tc.IllegalScheduleError) as info:
        tc.lower(s, {"B": 16})
    assert legal_locations(info.value) == ["R.r"]


# --- places that look legal but are not -------------------------------------------------------


def test_compute_at_an_unrelated_stage():
    A, W, C, Y = gemm_silu()
    M, N = C.shape
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z")
    V = tc.compute((M, N), lambda i, j: Y[i, j] + Z[i, j], name="V")
    s = tc.create_schedule(V)
    before = state(s)
    with pytest.raises(tc.ArgumentError, match=r"compute_at: Z neither reads nor is read by C"):
        s[Z].compute_at(s[C], C.axis[0])
    assert state(s) == before


def test_stencil_reading_the_next_element_of_a_fused_reduction():
    """Y[i] = C[i] + C[i + 1] at C.io: C[i + 1] of the last row of a tile is in the next tile."""
    N, K = tc.size_vars("N K")
    A = tc.placeholder((N + 1, K), "float32", name="A")
    w = tc.placeholder((K,), "float32", name="w")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((N + 1,), lambda i: tc.sum(A[i, k] * w[k], axis=k), name="C")
    Y = tc.compute((N,), lambda i: C[i] + C[i + 1], name="Y")
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    ko, ki = s[C].split(k, 16)
    s[C].reorder(io, ko, ii, ki)
    s[C].bind(io, "program_id.0")
    e = assert_illegal(s, lambda: s[Y].compute_at(s[C], io), r"^compute_at\(Y, C.io\) makes Y read C",
                       primitive="compute_at", stage="Y", reason="rounding", sink="Y", source="C")
    y = int(e.counterexample["sink"][2:-1])
    assert int(e.counterexample["source"][2:-1].split(", ")[0]) == y + 1
    assert "No loop of C is a legal place for Y: use compute_root" in str(e)


def test_stencil_reading_the_next_element_of_a_fused_elementwise_stage():
    N = tc.size_vars("N")
    X = tc.placeholder((N + 1,), "float32", name="X")
    P = tc.compute((N + 1,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((N,), lambda i: P[i] + P[i + 1], name="Y")
    s = tc.create_schedule(Y)
    io, ii = s[P].split(P.axis[0], 16)
    s[P].bind(io, "program_id.0")
    assert_illegal(s, lambda: s[Y].compute_at(s[P], io),
                   r"^compute_at\(Y, P.io\) breaks the order of P -> Y: Y\[\d+\] would run .*before P\[\d+\] "
                   r"that it depends on", primitive="compute_at", stage="Y", reason="dependence", sink="Y", source="P")


def test_stencil_with_only_shifted_reads_is_not_supported():
    """No plain access at all: there is no correspondence of loops, a halo (LoweringError)."""
    N = tc.size_vars("N")
    X = tc.placeholder((N + 1,), "float32", name="X")
    P = tc.compute((N + 1,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((N,), lambda i: P[i + 1] - P[i + 1] * 0.5, name="Y")
    s = tc.create_schedule(Y)
    io, ii = s[P].split(P.axis[0], 16)
    s[P].bind(io, "program_id.0")
    s[Y].compute_at(s[P], io)  # not lowerable: the primitive leaves it to build
    with pytest.raises(tc.LoweringError, match=r"compute_at\(Y, P\): not supported: Y reads P only at shifted or "
                                               r"computed positions \(a halo, as in a stencil\).*Compute Y at root"):
        tc.lower(s)


def test_reorder_of_two_reduction_loops_breaks_the_ordered_updates():
    A, W, C, Y = two_reduce_axes()
    s = tc.create_schedule(Y)
    i, j = C.axis
    k1, k2 = C.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    k2o, k2i = s[C].split(k2, 16)
    s[C].reorder(io, jo, k1, k2o, ii, ji, k2i)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[Y].compute_at(s[C], jo)
    e = assert_illegal(s, lambda: s[C].reorder(k2o, k1),
                       r"^C.reorder\(C.k2o, C.k1\) breaks the order of C -> C", primitive="reorder", stage="C",
                       reason="dependence", sink="C", source="C")
    for end in ("sink", "source"):  # two updates of one element, in the order k1 -> k2 defines
        assert re.fullmatch(r"C\[\d+, \d+, \d+, \d+\]", e.counterexample[end])
    assert "the update C[" in str(e)
    assert s[C].leaves == [io, jo, k1, k2o, ii, ji, k2i]


def test_reorder_moves_the_epilogue_loop_inside_the_reduction():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bind_jo=False)  # jo a serial loop, Y placed at it
    s[Y].compute_at(s[C], ax["jo"])
    s[C].reorder(ax["ko"], ax["jo"])  # not lowerable: left to build
    with pytest.raises(tc.LoweringError, match=r"C: spatial loop jo runs inside reduction loop ko, and a reader of C is "
                                               r"placed at it; the accumulator would have to hold every jo iteration"):
        tc.lower(s)


def test_reorder_puts_the_epilogue_outside_a_loop_its_axis_follows():
    """io and jo both serial (a single program): Y at C.jo is legal until jo is moved outside io."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[Y].compute_at(s[C], jo)
    tc.lower(s)
    s[C].reorder(jo, io)  # not lowerable: left to build
    with pytest.raises(tc.LoweringError, match=r"compute_at\(Y, C\): Y's axis i follows C's loop io, which runs "
                                               r"inside the place chosen; place Y at C.io or further in"):
        tc.lower(s)
    s[Y].compute_at(s[C], io)  # the place the message names
    a, w = randn(33, 20), randn(20, 17)
    build_check(s, [A, W, Y], [a, w], F.silu(a @ w))


def test_producer_with_an_axis_its_consumer_does_not_fix():
    """P[i, kk] at C.jo: C's reduction runs over kk inside jo, so P computes its whole row block there, in
    its own loops, kept in memory for C's loop over it (Halide's compute_at of a producer at an outer loop)."""
    A, W, P, C = prologue_gemm(lambda a: a * 2.0)
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)
    s[P].compute_at(s[C], ax["jo"])
    a, w = randn(20, 45), randn(45, 33)
    build_check(s, [A, W, C], [a, w], (a * 2.0) @ w)
    s[P].compute_at(s[C], ax["ko"])  # one tile per iteration of C's loop over K: in registers
    assert not tc.lower(s).plan.scratch
    build_check(s, [A, W, C], [a, w], (a * 2.0) @ w)


# --- tilec wrongly accepts (strict xfails: each is a bug) ---------------------------------------


def test_producer_output_larger_than_the_consumer_it_is_computed_at():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    P = tc.compute((M,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((M - 1,), lambda i: P[i] + 1.0, name="Y")
    s = tc.create_schedule([P, Y])
    io, ii = s[Y].split(Y.axis[0], 16)
    s[Y].bind(io, "program_id.0")
    try:
        s[P].compute_at(s[Y], io)
        kernel = tc.build(s, [X, P, Y])
    except tc.IllegalScheduleError as e:
        assert e.reason == "bounds"
        return
    x = randn(33)
    p = torch.full((33,), float("nan"), device=DEV)
    y = torch.empty(32, device=DEV)
    kernel(x, out=[p, y])
    common.check([p, y], [x * 2.0, x[:32] * 2.0 + 1.0])


def test_producer_buffer_larger_than_the_consumer_it_is_computed_at():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="P")
    Y = tc.compute((M, N - 1), lambda i, j: P[i, j] + 1.0, name="Y")
    Z = tc.compute((M, N), lambda i, j: P[i, j] * 3.0, name="Z")
    s = tc.create_schedule([Y, Z])
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 16)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    try:
        s[P].compute_at(s[Y], jo)
        kernel = tc.build(s, [X, Y, Z])
    except tc.IllegalScheduleError as e:
        assert e.reason == "bounds"
        return
    x = randn(20, 33)
    common.check(kernel(x), [x[:, :32] * 2.0 + 1.0, x * 6.0])


def test_consumer_smaller_than_the_producer_it_is_computed_at():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    P = tc.compute((M,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((M - 1,), lambda i: P[i] + 1.0, name="Y")
    s = tc.create_schedule([P, Y])
    io, ii = s[P].split(P.axis[0], 16)
    s[P].bind(io, "program_id.0")
    try:
        s[Y].compute_at(s[P], io)
        kernel = tc.build(s, [X, P, Y])
    except tc.IllegalScheduleError as e:
        assert e.reason == "bounds"
        return
    x = randn(32)
    storage = torch.full((33,), -7.0, device=DEV)
    p, y = torch.empty(32, device=DEV), storage[:31]
    kernel(x, out=[p, y])
    common.check([p, y], [x * 2.0, x[:31] * 2.0 + 1.0])
    assert storage[31:].eq(-7.0).all(), f"Y's kernel wrote past Y's end: {storage[31:].tolist()}"


def test_consumer_larger_than_the_producer_it_is_computed_at():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    P = tc.compute((M,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((M + 1,), lambda i: P[i] + 1.0, name="Y")
    s = tc.create_schedule([P, Y])
    io, ii = s[P].split(P.axis[0], 16)
    s[P].bind(io, "program_id.0")
    unfused = tc.build(s, [X, P, Y])
    try:
        s[Y].compute_at(s[P], io)
        kernel = tc.build(s, [X, P, Y])
    except tc.IllegalScheduleError as e:
        assert e.reason == "bounds"
        return
    x = randn(32)
    p_ref, y_ref = unfused(x)
    assert y_ref[32].item() == 1.0  # the definition: P[32] lies outside P and reads 0
    p, y = torch.empty(32, device=DEV), torch.full((33,), float("nan"), device=DEV)
    kernel(x, out=[p, y])
    common.check([p, y], [p_ref, y_ref])


def test_cache_read_of_a_producer_computed_in_the_same_kernel():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.placeholder((M, N), "float32", name="Z")
    P = tc.compute((M,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((M, N), lambda i, j: P[i] * Z[i, j], name="Y")
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 16)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    s[P].compute_at(s[Y], jo)
    try:
        s.cache_read(P, "shared", readers=[Y]).compute_at(s[Y], jo)
        kernel = tc.build(s, [X, Z, Y])
    except tc.TilecError:
        return
    x, z = randn(20), randn(20, 30)
    common.check(kernel(x, z), 2.0 * x[:, None] * z)


def test_consumer_at_a_reduction_loop_of_one_iteration():
    M = tc.size_vars("M")
    X = tc.placeholder((M, 64), "float32", name="X")
    c = tc.reduce_axis(64, name="c")
    R = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="R")
    Y = tc.compute((M, 64), lambda r, col: X[r, col] / R[r], name="Y")
    s = tc.create_schedule(Y)
    co, ci = s[R].split(c, 64)
    s[R].bind(R.axis[0], "program_id.0")
    s[Y].compute_at(s[R], co)  # legal: co has one iteration, so it is no loop and Y runs after the sum
    x = randn(3, 64)
    build_check(s, [X, Y], [x], x / x.sum(1, keepdim=True))


def test_row_sum_computed_at_the_column_loop_of_its_producer():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="P")
    jr = tc.reduce_axis(N, name="jr")
    R = tc.compute((M,), lambda i: tc.sum(P[i, jr], axis=jr), name="R")
    s = tc.create_schedule([P, R])
    io, jo, ii, ji = s[P].tile(*P.axis, 16, 16)
    s[P].bind(io, "program_id.0")
    s[R].reorder(R.axis[0], jr)  # R is scheduled (not the default), its reduce axis left whole
    try:
        s[R].compute_at(s[P], jo)
        kernel = tc.build(s, [X, P, R])
    except tc.IllegalScheduleError:
        return
    x = randn(20, 50)
    common.check(kernel(x), [x * 2.0, (x * 2.0).sum(1)])


# =============================================================================================
# B. legal schedules, built and compared with PyTorch
# =============================================================================================


def n_kernels(source: str) -> int:
    """How many kernels a Triton module defines (not counting helpers such as the NaN-keeping max)."""
    return len(re.findall(r"^def \w+_kernel\(", source, re.M))


def build_check(s, args, inputs, refs, config=None, **kw):
    """Build `s`, run it on `inputs`, compare every output with `refs` (bound per dtype)."""
    kernel = tc.build(s, args, config=config, **kw)
    outs = kernel(*inputs)
    errs = common.check(outs, refs)
    assert all(e == e for e in errs)
    return kernel


def mm(a, w, dtype):
    """The reference GEMM: float32 accumulation, rounded to the output dtype."""
    return (a.float() @ w.float()).to(dtype)


@pytest.mark.parametrize("config", [None, {"BM": 32, "BN": 16, "BK": 32, "stages": 3}])
@pytest.mark.parametrize("mnk", [(100, 130, 70), (1, 1, 1)])
@pytest.mark.slow
def test_design_gemm_silu(config, mnk):
    s, (A, W, C, Y), ax = design_schedule()
    M, N, K = mnk
    a, w = randn(M, K), randn(K, N)
    build_check(s, [A, W, Y], [a, w], F.silu(mm(a, w, torch.float32)), config)


def test_design_gemm_silu_float16_keeps_the_rounding_point():
    s, (A, W, C, Y), ax = design_schedule("float16")
    a, w = randn(37, 50, dtype=torch.float16), randn(50, 45, dtype=torch.float16)
    build_check(s, [A, W, Y], [a, w], F.silu(mm(a, w, torch.float16).float()).half())


def test_silu_at_a_serial_column_loop():
    A, W, C, Y = gemm_silu("float16")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bm=32, bn=16, bk=16, bind_jo=False)  # jo: a serial loop inside each program
    s[Y].compute_at(s[C], ax["jo"])
    s[C].pipeline(ax["ko"], stages=2)
    a, w = randn(40, 33, dtype=torch.float16), randn(33, 70, dtype=torch.float16)
    build_check(s, [A, W, Y], [a, w], F.silu(mm(a, w, torch.float16).float()).half())


def test_silu_at_the_row_grid_axis():
    """Y at C.io is legal when jo is on the grid too (both grid axes are fixed per program)."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C)
    s[Y].compute_at(s[C], ax["io"])
    a, w = randn(33, 20), randn(20, 17)
    build_check(s, [A, W, Y], [a, w], F.silu(a @ w))


@pytest.mark.parametrize("mnk", [(100, 130, 70), (1, 17, 1)])
def test_gemm_fused_1d_grid_pipelined(mnk):
    A, W, C = gemm("float16")
    s = tc.create_schedule(C)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [32, 16]), tc.knob("BN", [32, 64]))
    ko, ki = s[C].split(C.reduce_axis[0], tc.knob("BK", [16, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].fuse(io, jo), "program_id.0")
    s[C].pipeline(ko, stages=tc.knob("stages", [3, 2]))
    s[C].num_warps(tc.knob("warps", [4, 2]))
    M, N, K = mnk
    a, w = randn(M, K, dtype=torch.float16), randn(K, N, dtype=torch.float16)
    build_check(s, [A, W, C], [a, w], mm(a, w, torch.float16))
    build_check(s, [A, W, C], [a, w], mm(a, w, torch.float16), config={n: k.choices[-1] for n, k in s.knobs.items()})


@pytest.mark.parametrize("which", ["ko", "ki"])
def test_gemm_with_an_unrolled_reduction_loop(which):
    A, W, C, Y = gemm_silu(K=48)
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bk=16 if which == "ko" else 4)
    s[C].unroll(ax[which])
    s[Y].compute_at(s[C], ax["jo"])
    a, w = randn(21, 48), randn(48, 35)
    build_check(s, [A, W, Y], [a, w], F.silu(a @ w))


def rounded_epilogue(fused: bool, through_inline: bool):
    """C (float16, a rounding point) -> [H = silu(C), float16, inlined] -> Y (float32), C tiled as usual;
    Y fused at C.jo or in its own kernel. Returns (s, args)."""
    A, W, C = gemm("float16", in_dtype="float32")
    if through_inline:
        H = tc.compute(C.shape, lambda i, j: tc.silu(C[i, j]), name="H", dtype="float16")
        Y = tc.compute(C.shape, lambda i, j: H[i, j] * 2.0, name="Y", dtype="float32")
    else:
        Y = tc.compute(C.shape, lambda i, j: C[i, j] * 1.0, name="Y", dtype="float32")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C)
    if through_inline:
        s[H].compute_inline()
    if fused:
        s[Y].compute_at(s[C], ax["jo"])
    return s, [A, W, Y]


def bfloat16_gemm_silu(fused: bool):
    """C = A @ W of float16 inputs, rounded to bfloat16 -> Y = silu(C) (bfloat16), C tiled 32 x 32 x 16;
    Y fused at C.jo or in its own kernel. Returns (s, args)."""
    A, W, C, Y = gemm_silu("bfloat16", in_dtype="float16")
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 32, 32)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    if fused:
        s[Y].compute_at(s[C], jo)
    return s, [A, W, Y]


# make(fused) -> (s, args); the inputs' (M, K, N) and dtype; the reference of the fused output and the
# result without the rounding point, where checked
FUSED_ROUNDING = [
    pytest.param(functools.partial(rounded_epilogue, through_inline=False), (20, 30, 17), torch.float32,
                 lambda a, w: (a @ w).half().float(), lambda a, w: a @ w, id="direct"),
    pytest.param(functools.partial(rounded_epilogue, through_inline=True), (20, 30, 17), torch.float32,
                 lambda a, w: F.silu((a @ w).half().float()).half().float() * 2.0,
                 lambda a, w: F.silu(a @ w) * 2.0, id="through-inlined-stage"),
    pytest.param(bfloat16_gemm_silu, (50, 40, 70), torch.float16, None, None, id="bfloat16-gemm-silu"),
]


@pytest.mark.parametrize("make,mkn,dtype,ref,unrounded", FUSED_ROUNDING)
def test_fused_epilogue_gives_the_bits_of_the_unfused_kernels(make, mkn, dtype, ref, unrounded):
    """Fusion keeps every rounding point (a stage's dtype): Y fused at C.jo equals Y computed by its own
    kernel from the rounded C in memory, bit for bit (same C schedule, so the same summation order)."""
    m, k, n = mkn
    a, w = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
    outs = []
    for fused in (False, True):
        s, args = make(fused)
        kernel = tc.build(s, args)
        assert n_kernels(kernel.source) == len(kernel.program.kernels) == (1 if fused else 2)
        outs.append(kernel(a, w))
    assert torch.equal(outs[0], outs[1])
    if ref is not None:
        assert common.rel_error(outs[1], ref(a, w)) < 2e-3
    if unrounded is not None:
        assert not torch.equal(outs[1], unrounded(a, w))  # the rounding is visible in float32


@pytest.mark.parametrize("layout", ["NT", "TN"])
def test_gemm_with_a_transposed_operand(layout):
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((K, M) if layout == "TN" else (M, K), "float16", name="A")
    W = tc.placeholder((N, K) if layout == "NT" else (K, N), "float16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum((A[k, i] if layout == "TN" else A[i, k])
                                               * (W[j, k] if layout == "NT" else W[k, j]), axis=k),
                   name="C", dtype="float16")
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y", dtype="float16")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bm=16, bn=32)
    s[Y].compute_at(s[C], ax["jo"])
    a, w = randn(30, 37, dtype=torch.float16), randn(37, 20, dtype=torch.float16)
    args = [a.t().contiguous() if layout == "TN" else a, w.t().contiguous() if layout == "NT" else w]
    build_check(s, [A, W, Y], args, F.silu(mm(a, w, torch.float16).float()).half())


def test_prologue_and_epilogue_around_one_gemm():
    """P = exp(A / 2) at C.ko, C's reduction, Y = silu(C) + bias at C.jo: one kernel."""
    A, W, P, C = prologue_gemm(lambda a: tc.exp(a * 0.5))
    M, N = C.shape
    bias = tc.placeholder((N,), "float32", name="bias")
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]) + bias[j], name="Y")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bind_jo=False)
    s[P].compute_at(s[C], ax["ko"])
    s[Y].compute_at(s[C], ax["jo"])
    s[C].pipeline(ax["ko"], stages=2)
    a, w, b = randn(19, 40), randn(40, 50), randn(50)
    kernel = build_check(s, [A, W, bias, Y], [a, w, b], F.silu(torch.exp(a * 0.5) @ w) + b)
    assert n_kernels(kernel.source) == 1


def test_rmsnorm_with_the_sum_of_squares_as_a_second_output():
    X, w, c, ss, Y = rmsnorm()
    s = tc.create_schedule([Y, ss])
    co, ci = s[Y].split(Y.axis[1], 16)
    s[Y].bind(Y.axis[0], "program_id.0")
    s[ss].split(c, 32)
    s[ss].compute_at(s[Y], Y.axis[0])
    x, wt = randn(5, 50), randn(50)
    build_check(s, [X, w, Y, ss], [x, wt],
                [x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * wt, (x * x).sum(1)])


def test_transposed_epilogue_from_registers():
    """Y = silu(C)^T fused at C.jo: Y's axes follow C's swapped; the store is transposed."""
    A, W, C = gemm()
    Y = tc.compute((C.shape[1], C.shape[0]), lambda i, j: tc.silu(C[j, i]), name="Y")
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, bm=16, bn=32)
    s[Y].compute_at(s[C], ax["jo"])
    a, w = randn(20, 30), randn(30, 37)
    build_check(s, [A, W, Y], [a, w], F.silu(a @ w).t())


def test_three_level_nest_producer_in_a_producer_in_the_root():
    """sq = X^2 at ss.co, ss = sum(sq) at Y.r, Y = RMSNorm: three stages, one kernel."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    w = tc.placeholder((N,), "float32", name="w")
    sq = tc.compute((M, N), lambda r, col: X[r, col] * X[r, col], name="sq")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(sq[r, c], axis=c), name="ss")
    Y = tc.compute((M, N), lambda r, col: X[r, col] * tc.rsqrt(ss[r] / N + 1e-6) * w[col], name="Y")
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], 16)
    s[Y].bind(Y.axis[0], "program_id.0")
    co, ci = s[ss].split(c, 16)
    s[ss].compute_at(s[Y], Y.axis[0])
    s[sq].compute_at(s[ss], co)
    x, wt = randn(5, 50), randn(50)
    kernel = build_check(s, [X, w, Y], [x, wt], x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * wt)
    assert n_kernels(kernel.source) == 1


def test_swiglu_producers_at_the_consumer_tile():
    X, Wg, Wu, G, U, Y = swiglu("float16")
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 32, 16)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    for T in (G, U):
        ko, ki = s[T].split(T.reduce_axis[0], 16)
        s[T].pipeline(ko, stages=2)
        s[T].compute_at(s[Y], jo)
    x, wg, wu = (randn(50, 40, dtype=torch.float16), randn(40, 70, dtype=torch.float16),
                 randn(40, 70, dtype=torch.float16))
    g, u = mm(x, wg, torch.float16), mm(x, wu, torch.float16)
    build_check(s, [X, Wg, Wu, Y], [x, wg, wu], (F.silu(g.float()) * u.float()).half())


@pytest.mark.parametrize("mn", [(37, 100), (1, 1), (3, 129)])
def test_softmax_in_one_kernel(mn):
    X, (c, c2), mx, den, Y = softmax()
    s = tc.create_schedule(Y)
    r, col = Y.axis
    s[Y].split(col, 32)
    s[Y].bind(r, "program_id.0")
    for T, axis in ((mx, c), (den, c2)):
        s[T].split(axis, 32)
        s[T].compute_at(s[Y], r)
    x = randn(*mn, scale=3.0)
    kernel = build_check(s, [X, Y], [x], torch.softmax(x, dim=1))
    assert n_kernels(kernel.source) == 1


def test_softmax_row_max_recomputed_inside_the_row_sum():
    """mx at den's column loop: recomputed per column tile of den (wasteful, still exact)."""
    X, (c, c2), mx, den, Y = softmax()
    s = tc.create_schedule(Y)
    r, col = Y.axis
    s[Y].split(col, 16)
    s[Y].bind(r, "program_id.0")
    s[mx].split(c, 16)
    c2o, c2i = s[den].split(c2, 16)
    s[den].compute_at(s[Y], r)
    s[mx].compute_at(s[Y], r)
    x = randn(7, 40, scale=3.0)
    build_check(s, [X, Y], [x], torch.softmax(x, dim=1))


def test_rmsnorm_float16_in_one_kernel():
    X, w, c, ss, Y = rmsnorm("float16")
    s = tc.create_schedule(Y)
    r, col = Y.axis
    s[Y].split(col, 64)
    s[Y].bind(r, "program_id.0")
    s[ss].split(c, 64)
    s[ss].compute_at(s[Y], r)
    x, wt = randn(9, 200, dtype=torch.float16), randn(200, dtype=torch.float16)
    xf = x.float()
    ref = (xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + 1e-6) * wt.float()).half()
    build_check(s, [X, w, Y], [x, wt], ref)


def test_rmsnorm_consumer_at_the_row_of_the_sum():
    """The other direction: ss is the kernel's root, Y its epilogue after the loop over column tiles."""
    X, w, c, ss, Y = rmsnorm()
    s = tc.create_schedule(Y)
    s[ss].split(c, 32)
    s[ss].bind(ss.axis[0], "program_id.0")
    s[Y].split(Y.axis[1], 32)
    s[Y].compute_at(s[ss], ss.axis[0])
    x, wt = randn(5, 70), randn(70)
    ref = x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * wt
    build_check(s, [X, w, Y], [x, wt], ref)


def test_rmsnorm_sum_recomputed_per_column_tile():
    X, w, c, ss, Y = rmsnorm()
    s = tc.create_schedule(Y)
    r, col = Y.axis
    co, ci = s[Y].split(col, 16)
    s[Y].bind(r, "program_id.0")
    s[ss].split(c, 16)
    s[ss].compute_at(s[Y], co)
    x, wt = randn(4, 50), randn(50)
    build_check(s, [X, w, Y], [x, wt], x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-6) * wt)


def test_row_scale_fp8_quantization_in_one_kernel():
    X, c, amax, Q, S = rowscale_fp8()
    s = tc.create_schedule([Q, S])
    s[amax].split(c, 64)
    s[amax].bind(amax.axis[0], "program_id.0")
    s[Q].split(Q.axis[1], 64)
    s[Q].compute_at(s[amax], amax.axis[0])
    s[S].compute_at(s[amax], amax.axis[0])
    x = randn(6, 150, scale=4.0)
    am = x.abs().amax(dim=1)
    q = (x * (448.0 / am)[:, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    kernel = build_check(s, [X, Q, S], [x], [q, am / 448.0])
    assert n_kernels(kernel.source) == 1


def test_inline_chain_keeps_each_rounding_point():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    H1 = tc.compute((M, N), lambda i, j: X[i, j] * 3.0 + 0.5, name="H1", dtype="float16")
    H2 = tc.compute((M, N), lambda i, j: tc.tanh(H1[i, j]) * H1[i, j], name="H2", dtype="float16")
    Z = tc.compute((M, N), lambda i, j: tc.exp(H2[i, j] * -0.5) + X[i, j], name="Z")
    s = tc.create_schedule(Z)
    s[H1].compute_inline()
    s[H2].compute_inline()
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 32)
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    x = randn(33, 47)
    h1 = (x * 3.0 + 0.5).half()
    h2 = (torch.tanh(h1.float()) * h1.float()).half()
    kernel = build_check(s, [X, Z], [x], torch.exp(h2.float() * -0.5) + x)
    assert n_kernels(kernel.source) == 1


def test_gemm_and_its_epilogue_both_outputs():
    A, W, C, Y = gemm_silu()
    Y2 = tc.compute(C.shape, lambda i, j: C[i, j] * Y[i, j], name="Y2")
    s = tc.create_schedule([C, Y, Y2])
    ax = tile_gemm(s, C)
    s[Y].compute_at(s[C], ax["jo"])
    s[Y2].compute_at(s[C], ax["jo"])
    a, w = randn(30, 40), randn(40, 20)
    c = a @ w
    kernel = build_check(s, [A, W, C, Y, Y2], [a, w], [c, F.silu(c), c * F.silu(c)])
    assert n_kernels(kernel.source) == 1


def test_batched_gemm_with_bias_epilogue_on_a_3d_grid():
    B, M, N, K = tc.size_vars("B M N K")
    A = tc.placeholder((B, M, K), "float16", name="A")
    W = tc.placeholder((B, K, N), "float16", name="W")
    bias = tc.placeholder((N,), "float16", name="bias")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((B, M, N), lambda b, i, j: tc.sum(A[b, i, k] * W[b, k, j], axis=k), name="C", dtype="float16")
    Y = tc.compute(C.shape, lambda b, i, j: C[b, i, j] + bias[j], name="Y", dtype="float16")
    s = tc.create_schedule(Y)
    b, i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 32)
    ko, ki = s[C].split(k, 16)
    s[C].reorder(b, io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].bind(b, "program_id.2")
    s[C].pipeline(ko, stages=2)
    s[Y].compute_at(s[C], jo)
    a, w, bb = (randn(3, 20, 33, dtype=torch.float16), randn(3, 33, 40, dtype=torch.float16),
                randn(40, dtype=torch.float16))
    c = torch.bmm(a.float(), w.float()).half()
    build_check(s, [A, W, bias, Y], [a, w, bb], (c.float() + bb.float()).half())


def test_two_reduce_axes_with_epilogue():
    A, W, C, Y = two_reduce_axes()
    s = tc.create_schedule(Y)
    i, j = C.axis
    k1, k2 = C.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    k2o, k2i = s[C].split(k2, 8)
    s[C].reorder(io, jo, k1, k2o, ii, ji, k2i)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[Y].compute_at(s[C], jo)
    a, w = randn(20, 3, 10), randn(3, 10, 17)
    build_check(s, [A, W, Y], [a, w], F.silu(torch.einsum("ikl,klj->ij", a, w)))


def test_two_reduce_axes_as_plain_serial_loops():
    A, W, C, Y = two_reduce_axes()
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[Y].compute_at(s[C], jo)
    a, w = randn(17, 2, 5), randn(2, 5, 9)
    build_check(s, [A, W, Y], [a, w], F.silu(torch.einsum("ikl,klj->ij", a, w)))


def test_cache_read_cache_write_with_a_1d_grid():
    A, W, C, Y = gemm_silu("float16")
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 32, 32)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    f = s[C].fuse(io, jo)
    s[C].bind(f, "program_id.0")
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_write(C, "local").compute_at(s[C], f)
    s[C].pipeline(ko, stages=3)
    s[Y].compute_at(s[C], f)
    a, w = randn(70, 45, dtype=torch.float16), randn(45, 33, dtype=torch.float16)
    build_check(s, [A, W, Y], [a, w], F.silu(mm(a, w, torch.float16).float()).half())


def test_prologue_producer_at_the_reduction_loop():
    """P = 2 * A computed per (io, jo, ko) tile, where C's reduction reads it."""
    A, W, P, C = prologue_gemm(lambda a: tc.exp(a * 0.5))
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)
    s[P].compute_at(s[C], ax["ko"])
    a, w = randn(30, 37), randn(37, 20)
    kernel = build_check(s, [A, W, C], [a, w], torch.exp(a * 0.5) @ w)
    assert n_kernels(kernel.source) == 1


def test_producer_at_a_reduction_loop_of_its_consumer_row_sum():
    """P[i, j] = X[i, j]^2 computed per column tile of R[i] = sum_j P[i, j] (P follows R's reduce loop)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * X[i, j], name="P")
    jr = tc.reduce_axis(N, name="jr")
    R = tc.compute((M,), lambda i: tc.sum(P[i, jr], axis=jr), name="R")
    s = tc.create_schedule(R)
    io, ii = s[R].split(R.axis[0], 4)
    jo, ji = s[R].split(jr, 32)
    s[R].reorder(io, jo, ii, ji)
    s[R].bind(io, "program_id.0")
    s[P].compute_at(s[R], jo)
    x = randn(10, 75)
    build_check(s, [X, R], [x], (x * x).sum(1))


def test_transposed_producer_at_the_consumer_tile():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: tc.sigmoid(X[i, j]), name="P")
    Y = tc.compute((N, M), lambda i, j: P[j, i] * 2.0 - X[j, i], name="Y")
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 32)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    s[P].compute_at(s[Y], jo)
    x = randn(37, 45)
    build_check(s, [X, Y], [x], (torch.sigmoid(x) * 2.0 - x).t())


def test_producer_at_the_consumer_through_an_inlined_transpose():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="P")
    H = tc.compute((N, M), lambda i, j: P[j, i] + 1.0, name="H")
    Y = tc.compute((N, M), lambda i, j: tc.exp(H[i, j] * 0.25) * X[j, i], name="Y")
    s = tc.create_schedule(Y)
    s[H].compute_inline()
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 32)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    s[P].compute_at(s[Y], jo)
    x = randn(37, 45)
    build_check(s, [X, Y], [x], (torch.exp((2.0 * x + 1.0) * 0.25) * x).t())


def test_unscheduled_three_stage_computation():
    """No primitive at all: every stage gets the default schedule and its own kernel."""
    A, W, C, Y = gemm_silu()
    bias = tc.placeholder((C.shape[1],), "float32", name="bias")
    Z = tc.compute(C.shape, lambda i, j: Y[i, j] + bias[j], name="Z")
    s = tc.create_schedule(Z)
    a, w, b = randn(45, 70), randn(70, 33), randn(33)
    kernel = build_check(s, [A, W, bias, Z], [a, w, b], F.silu(a @ w) + b)
    assert n_kernels(kernel.source) == 3


def test_three_stage_chain_middle_fused_as_epilogue():
    A, W, V, C, H, O = gemm_relu_gemm()
    s = tc.create_schedule(O)
    ax = tile_gemm(s, C)
    s[H].compute_at(s[C], ax["jo"])
    a, w, v = randn(20, 30), randn(30, 40), randn(40, 10)
    kernel = build_check(s, [A, W, V, O], [a, w, v], torch.relu(a @ w) @ v)
    assert n_kernels(kernel.source) == 2


def test_row_range_two_reductions_at_the_row():
    """rng[r] = max - min of the row, and Y = (X - min) / rng, one kernel."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    c2 = tc.reduce_axis(N, name="c2")
    hi = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="hi")
    lo = tc.compute((M,), lambda r: tc.min(X[r, c2], axis=c2), name="lo")
    Y = tc.compute((M, N), lambda r, col: (X[r, col] - lo[r]) / (hi[r] - lo[r]), name="Y")
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], 16)
    s[Y].bind(Y.axis[0], "program_id.0")
    for T, ax in ((hi, c), (lo, c2)):
        s[T].split(ax, 16)
        s[T].compute_at(s[Y], Y.axis[0])
    x = randn(6, 37)
    lo_, hi_ = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
    build_check(s, [X, Y], [x], (x - lo_) / (hi_ - lo_))


def test_epilogue_at_the_row_with_a_tile_knob_at_every_config():
    """Y at R.r (after R's loop over column tiles) is legal at every value of the tile knob."""
    M = tc.size_vars("M")
    X = tc.placeholder((M, 64), "float32", name="X")
    c = tc.reduce_axis(64, name="c")
    R = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="R")
    Y = tc.compute((M, 64), lambda r, col: X[r, col] / R[r], name="Y")
    s = tc.create_schedule(Y)
    s[R].split(c, tc.knob("B", [64, 16]))
    s[R].bind(R.axis[0], "program_id.0")
    s[Y].compute_at(s[R], R.axis[0])
    x = randn(5, 64) + 3.0
    for config in (None, {"B": 16}):
        build_check(s, [X, Y], [x], x / x.sum(1, keepdim=True), config)
