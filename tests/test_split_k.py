"""split_k: a reduction's loop run in parts on parts programs, partial sums in a float32 workspace, then
combined in a second kernel in a fixed order (or with atomics, deterministic=False), where the stage is
rounded and its epilogue runs.

Each schedule is built and run (the interpreter on a CPU) against torch on sizes no tile divides,
size-1 dims, more parts than loop iterations and NaN/Inf inputs, into NaN-filled outputs; each that
cannot be built is refused with the error that says why.
"""

from __future__ import annotations

import pytest
import torch
from computes import gemm, gemm_silu, swiglu

import tilec as tc
from tilec.lower.program import Program

SIZES = [(37, 45, 100), (1, 1, 1), (16, 16, 16), (5, 70, 33), (20, 3, 200)]


def schedule(parts=3, deterministic=True, *, swizzle=False, epilogue=True):
    A, W, C, Y = gemm_silu("float16", in_dtype="float32")
    s = tc.create_schedule(Y if epilogue else C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    if swizzle:
        s[C].bind(s[C].swizzle(io, jo, 2), "program_id.0")
    else:
        s[C].bind(io, "program_id.0")
        s[C].bind(jo, "program_id.1")
    s[C].split_k(ko, parts, deterministic=deterministic)
    if epilogue:
        s[Y].compute_at(s[C], s[C].leaves[1] if not swizzle else s[C].leaves[0])
    return s, (A, W, C, Y), ko


def reference(a, w):
    # C is rounded to float16 before SiLU, as the compute says: the epilogue sees the whole sum, rounded
    return torch.nn.functional.silu((a @ w).half().float())


def _run(s, args, sizes, config=None, special=False):
    A, W, _, Y = args
    M, N, K = sizes
    a, w = torch.randn(M, K), torch.randn(K, N)
    if special:
        a[-1, 0], w[0, -1] = float("nan"), float("inf")
    out = torch.full((M, N), float("nan"), dtype=torch.float16)
    kernel = tc.build(s, [A, W, Y], config=config)
    kernel(a, w, out=out)
    torch.testing.assert_close(out.float(), reference(a, w).half().float(), rtol=2e-3, atol=2e-3, equal_nan=True)
    return kernel, (a, w), out


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.slow
def test_split_k_matches_torch(sizes, deterministic):
    s, args, _ = schedule(3, deterministic)
    _run(s, args, sizes)
    _run(s, args, sizes, special=True)


def test_parts_as_a_knob_and_more_parts_than_iterations():
    A, W, C, Y = gemm_silu("float16", in_dtype="float32")
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], tc.knob("BK", [16, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].swizzle(io, jo, 2), "program_id.0")
    s[C].pipeline(ko, 2)
    s[C].split_k(ko, tc.knob("SPLIT_K", [2, 8, 1]))
    s[Y].compute_at(s[C], s[C].leaves[0])
    for config in ({"SPLIT_K": 2}, {"SPLIT_K": 8, "BK": 32}, {"SPLIT_K": 1}):
        for sizes in ((37, 45, 40), (3, 2, 1)):  # K=40 with BK=32: 2 iterations over 8 parts, 6 empty
            _run(s, (A, W, C, Y), sizes, config)


def test_two_kernels_a_workspace_and_the_epilogue_after_the_combine():
    s, _, _ = schedule(4)
    p = Program(s)
    assert [k.name for k in p.kernels] == ["C_partial_kernel", "Y_kernel"]  # the combine stores Y
    (ws, zeroed), = p.workspaces.values()
    assert ws.name == "C_part" and ws.dtype == "float32" and not zeroed and len(ws.shape) == 3
    partial, combine = (p.source().split("@triton.jit")[n] for n in (1, 2))
    assert "part = tl.program_id(2)" in partial and "tl.store(C_part + part * stride_C_part_0" in partial
    assert "sigmoid" not in partial and "tl.store(Y" not in partial  # no epilogue on a partial sum
    assert "for part in tl.range(0, 4):" in combine and "sigmoid" in combine
    assert combine.index("acc_C = acc_C + c_part_tile") < combine.index("C_val = acc_C.to(tl.float16)") \
        < combine.index("sigmoid")
    atomic = Program(schedule(4, deterministic=False)[0])
    assert "tl.atomic_add(C_part + " in atomic.source() and list(atomic.workspaces.values())[0][1]  # zeroed


@pytest.mark.slow
def test_deterministic_split_k_gives_the_same_bits_every_run():
    s, args, _ = schedule(5)
    kernel, (a, w), out = _run(s, args, (37, 45, 300))
    for _ in range(3):
        assert torch.equal(kernel(a, w), out)


def test_the_epilogue_inside_the_partial_loop_is_still_refused():
    # the rounding constraint: SiLU placed in the reduction loop would see a partial sum (isl's usual error)
    s, (A, W, C, Y), ko = schedule(3, epilogue=False)
    s2 = tc.create_schedule(Y)
    io, jo, ii, ji = s2[C].tile(*C.axis, 16, 16)
    ko, ki = s2[C].split(C.reduce_axis[0], 16)
    s2[C].reorder(io, jo, ko, ii, ji, ki)
    s2[C].bind(io, "program_id.0")
    s2[C].split_k(ko, 3)
    with pytest.raises(tc.IllegalScheduleError, match=r"compute_at\(Y, C\.ko\) makes Y read C before C's reduction"):
        s2[Y].compute_at(s2[C], ko)


@pytest.mark.parametrize("place", ["ii", "ko", "io"])
def test_an_output_computed_inside_the_split_loop_is_refused_not_dropped(place):
    """Fuzz seed 42001095: D (another output, not reading C) computed at C.ii, inside the loop split_k runs in
    parts, was in neither kernel (skipped in the partial, no such loop in the combine): D came back unwritten.
    Inside the split loop it is refused; at C.io, outside it, it is computed (in the combine kernel)."""
    M = tc.size_vars("M")
    X = tc.placeholder((3, M), "float32", name="X")
    k = tc.reduce_axis(M, name="k")
    C = tc.compute((3,), lambda i: tc.sum(X[i, k], axis=k), name="C")
    D = tc.compute((3, M), lambda i, j: X[i, j] * 2, name="D")
    s = tc.create_schedule([C, D])
    io, ii = s[C].split(C.axis[0], 32)
    ko, ki = s[C].split(k, 4)
    s[C].reorder(io, ko, ii, ki)
    s[C].split_k(ko, 4)
    s[D].compute_at(s[C], {"ii": ii, "ko": ko, "io": io}[place])
    if place != "io":
        with pytest.raises(tc.LoweringError, match=r"^C\.split_k\(ko\): D is computed inside C's loop ko, which "
                                                   r"split_k runs in parts"):
            tc.build(s, [X, C, D])
        return
    x = torch.randn(3, 13)
    c, d = tc.build(s, [X, C, D])(x)
    torch.testing.assert_close(c, x.sum(1))
    torch.testing.assert_close(d, 2 * x)


def test_what_split_k_refuses():
    A, W, C, Y = gemm_silu("float16", in_dtype="float32")
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    with pytest.raises(tc.ArgumentError, match="a reduction loop of C"):
        s[C].split_k(io, 2)
    with pytest.raises(tc.ArgumentError, match="expected a positive int or a tc.knob"):
        s[C].split_k(ko, 0)
    with pytest.raises(tc.ArgumentError, match="deterministic.*True, False or a tc.flag"):
        s[C].split_k(ko, 2, deterministic="no")
    with pytest.raises(tc.ArgumentError, match="split_k: Y is not a sum"):
        s[Y].split_k(Y.axis[0], 2)
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    R = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="R")
    sr = tc.create_schedule(R)
    co, _ = sr[R].split(c, 16)
    with pytest.raises(tc.ArgumentError, match="R is not a sum"):
        sr[R].split_k(co, 2)


@pytest.mark.parametrize("how, match", [
    ("persistent", r"C's grid is persistent"),
    ("both_dims", r"program_id\.1 and \.2 are both bound"),
    ("inner_loop", r"kio is not C's outermost reduction loop \(that is ko\)"),
    ("not_root", r"C is computed inside another stage's kernel"),
])
def test_what_lowering_refuses(how, match):
    A, W, C, Y = gemm_silu("float16", in_dtype="float32")
    s = tc.create_schedule(Y)
    root = Y if how == "not_root" else C
    io, jo, ii, ji = s[root].tile(*root.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 32)
    kio, kii = s[C].split(ki, 16)
    if how != "not_root":
        s[C].reorder(io, jo, ko, kio, ii, ji, kii)
    if how == "persistent":
        f = s[C].fuse(io, jo)
        s[C].bind(f, "program_id.0")
        s[C].persistent(f)
    elif how == "both_dims":
        s[C].bind(io, "program_id.0")
        s[C].bind(jo, "program_id.1")
        cio, _ = s[C].split(ii, 8)
        s[C].reorder(io, jo, cio, ko, kio, *[a for a in s[C].leaves if a not in (io, jo, cio, ko, kio)])
        s[C].bind(cio, "program_id.2")
    else:
        s[root].bind(io, "program_id.0")
    s[C].split_k(kio if how == "inner_loop" else ko, 2)
    if how == "not_root":
        s[C].compute_at(s[Y], jo)
    with pytest.raises(tc.LoweringError, match=match):
        Program(s)


def test_the_trace_replays_split_k():
    s, args, _ = schedule(4, deterministic=False)
    assert "C.split_k(C_ko, parts=4, deterministic=False)" in str(s.trace)
    again = tc.replay(s.trace, [args[-1]])
    assert Program(again).source() == Program(s).source()


@pytest.mark.parametrize("deterministic", [True, False])
def test_an_accumulator_in_another_order_than_memory(deterministic):
    """Fuzz seed 424260: j split twice, so the accumulator's dims are (joi, ii, ji) while the workspace is
    (i, j) in memory; the combine added the loaded (ii, joi, ji) tile to it unpermuted (an interpreter
    shape error, 16 against 32). The loaded tile is put in the accumulator's order now."""
    M, K = tc.size_vars("M K")
    A = tc.placeholder((K, M), "bfloat16", name="A")
    W = tc.placeholder((3, K), "bfloat16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, 3), lambda i, j: tc.sum(W[j, k] * A[k, i], axis=k), name="C")
    s = tc.create_schedule([C])
    io, ii = s[C].split(C.axis[0], 32)
    jo, ji = s[C].split(C.axis[1], 4)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].split(jo, 16)
    koo, koi = s[C].split(ko, 8)
    s[C].split_k(koo, 2, deterministic=deterministic)
    kernel = tc.build(s, [A, W, C])
    for m, kk in ((1, 1), (40, 150), (33, 700)):
        a, w = torch.randn(kk, m).bfloat16(), torch.randn(3, kk).bfloat16()
        torch.testing.assert_close(kernel(a, w), (w.float() @ a.float()).t(), rtol=1e-4, atol=1e-4)


def test_an_unrolled_loop_and_compute_with_are_refused():
    A, W, C = gemm(K=64)
    s2 = tc.create_schedule(C)
    io, jo, ii, ji = s2[C].tile(*C.axis, 16, 16)
    ko, ki = s2[C].split(C.reduce_axis[0], 16)  # 4 iterations: a constant, so unrolled
    s2[C].reorder(io, jo, ko, ii, ji, ki)
    s2[C].bind(io, "program_id.0")
    s2[C].split_k(ko, 2)
    s2[C].unroll(ko)
    with pytest.raises(tc.LoweringError, match=r"ko is an unrolled loop; split-K runs a serial loop in parts"):
        Program(s2)

    X, Wg, Wu, G, U, Y = swiglu()
    s3 = tc.create_schedule(Y)
    io, jo, ii, ji = s3[G].tile(*G.axis, 16, 16)
    ko, ki = s3[G].split(G.reduce_axis[0], 16)
    s3[G].reorder(io, jo, ko, ii, ji, ki)
    s3[G].bind(io, "program_id.0")
    s3[G].split_k(ko, 2)
    k2o, _ = s3[U].split(U.reduce_axis[0], 16)
    s3[U].compute_with(s3[G], ko)
    with pytest.raises(tc.LoweringError, match=r"G\.split_k\(ko\): not with compute_with in the same kernel yet"):
        Program(s3)


def test_deterministic_as_a_flag_is_a_knob_the_tuner_searches():
    """Issue 23: primitives.md says a tc.flag goes wherever a primitive takes a bool, but split_k refused
    `deterministic=tc.flag(...)` (and printed the flag's name as the value). It is a knob now: both choices
    build and match torch, the trace replays it, and the tuner's search space has it."""
    from tilec.lower.program import Program
    from tilec.tune.space import SearchSpace

    s, args, _ = schedule(3, deterministic=tc.flag("DET"))
    assert sorted(s.knobs) == ["DET"] and "C: split_k(ko, parts=3, deterministic=DET)" in s.log
    assert 'DET = tc.flag("DET")' in str(s.trace) and "C.split_k(C_ko, parts=3, deterministic=DET)" in str(s.trace)
    assert SearchSpace(s, tc.ShapeMix([({"M": 5, "N": 7, "K": 40}, 1)])).knobs == {"DET": [0, 1]}
    for det in (0, 1):
        _run(s, args, (5, 70, 33), config={"DET": det})
        program = Program(s, {"DET": det})
        assert [w[1] for w in program.workspaces.values()] == [not det]  # zeroed for the atomics, not in order
        again = tc.replay(s.trace, [args[-1]])
        assert Program(again, {"DET": det}).source() == program.source()
    with pytest.raises(tc.ArgumentError, match=r"^argument 3, 'deterministic' to split_k: expected True, False or a "
                                               r"tc.flag, got 'no'$"):
        schedule(3, deterministic="no")
