"""`compute_with`: two independent stages' loops run as one (tilec/lower/fusion.py). SwiGLU's two GEMMs
share one loop over K, and the X tile is loaded once for both dots.

Each schedule that builds runs (the interpreter on a CPU) against torch on sizes no tile divides,
size-1 dims and NaN/Inf inputs, into NaN-filled outputs; each that cannot be built is refused with the
error that says why.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.lower.program import Program

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).parent))
import computes  # noqa: E402
import swiglu  # noqa: E402

SIZES = [(37, 45, 29), (1, 1, 1), (1, 70, 100), (50, 3, 16)]


def schedule(bm=16, bn=16, bk=16, bk2=None, *, order=("G", "U"), with_=True, stages=(2, 2)):
    X, Wg, Wu, G, U, Y = computes.swiglu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, bm, bn)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    loops = {}
    for T, f, st in ((G, bk, stages[0]), (U, bk2 or bk, stages[1])):
        ko, ki = s[T].split(T.reduce_axis[0], f)
        s[T].pipeline(ko, stages=st)
        loops[T.name] = ko
    for name in order:
        s[name].compute_at(s[Y], jo)
    if with_:
        s[U].compute_with(s[G], loops["G"])
    return s, (X, Wg, Wu, G, U, Y), loops


def _tiled(Y):
    """A schedule of Y with 16 x 16 output tiles on a 2-d grid, and its jo (where the GEMMs are placed)."""
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 16)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    return s, jo


def reference(x, wg, wu):
    return torch.nn.functional.silu(x @ wg) * (x @ wu)


def _run(s, args, sizes, special=False):
    X, Wg, Wu, _, _, Y = args
    M, N, K = sizes
    x, wg, wu = torch.randn(M, K), torch.randn(K, N), torch.randn(K, N)
    if special:
        x[-1, 0], wg[0, -1], wu[-1, 0] = float("nan"), float("inf"), float("-inf")
    out = torch.full((M, N), float("nan"))
    tc.build(s, [X, Wg, Wu, Y])(x, wg, wu, out=out)
    torch.testing.assert_close(out, reference(x, wg, wu), rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.slow
def test_swiglu_in_one_loop_matches_torch(sizes):
    s, args, _ = schedule()
    _run(s, args, sizes)
    _run(s, args, sizes, special=True)


def test_one_loop_over_k_and_one_x_load_feed_both_dots():
    s, args, _ = schedule()
    src = Program(s).source()
    assert len(re.findall(r"\bfor \w+ in tl\.range", src)) == 1, src
    assert src.count("tl.load(X ") == 1, src  # the X tile, loaded once
    assert src.count("tl.dot(") == 2
    loop = src[src.index("for ko in"):src.index("G_val =")]
    assert "acc_G = tl.dot(" in loop and "acc_U = tl.dot(" in loop  # both accumulate in the one loop
    before = Program(schedule(with_=False)[0]).source()
    assert len(re.findall(r"\bfor \w+ in tl\.range", before)) == 2 and before.count("tl.load(X ") == 2


def test_either_placement_order_fuses():
    # U placed first: its loop comes first in the kernel; the pass fuses the loops all the same
    s, args, _ = schedule(order=("U", "G"))
    src = Program(s).source()
    assert len(re.findall(r"\bfor \w+ in tl\.range", src)) == 1 and src.count("tl.load(X ") == 1
    _run(s, args, (37, 45, 29), special=True)


def test_sub_tiles_and_descriptors_fuse_too():
    # a 48-wide tile (32 + 16 pieces) and TMA loads of X: the pieces' descriptor loads are shared as well
    X, Wg, Wu, G, U, Y = computes.swiglu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 48)
    s[Y].bind(s[Y].swizzle(io, jo, 2), "program_id.0")
    loops = []
    for T, Wt in ((G, Wg), (U, Wu)):
        ko, ki = s[T].split(T.reduce_axis[0], 16)
        s[T].compute_at(s[Y], s[Y].leaves[0])
        s.cache_read(X, "shared", readers=[T], tma=True).compute_at(s[T], ko)
        s.cache_read(Wt, "shared", readers=[T], tma=True).compute_at(s[T], ko)
        loops.append(ko)
    s[U].compute_with(s[G], loops[0])
    src = Program(s).source()
    assert src.count("X_desc") >= 2 and len(re.findall(r"= X_desc_\w+\.load\(", src)) == 1, src
    assert src.count("tl.dot(") == 4  # two pieces x two GEMMs
    for sizes in ((37, 45, 29), (16, 48, 16), (1, 1, 1)):
        X_, Wg_, Wu_, Y_ = X, Wg, Wu, Y
        M, N, K = sizes
        x = torch.randn(M, K)
        wg, wu = torch.randn(K, N), torch.randn(K, N)
        out = torch.full((M, N), float("nan"))
        tc.build(s, [X_, Wg_, Wu_, Y_])(x, wg, wu, out=out)
        torch.testing.assert_close(out, reference(x, wg, wu), rtol=1e-4, atol=1e-4)


def test_a_stage_that_reads_the_other_is_refused():
    X, W, G = computes.gemm(names={"A": "X", "C": "G"})
    k2 = tc.reduce_axis(G.shape[1], name="k2")
    U = tc.compute(G.shape[:1], lambda i: tc.sum(G[i, k2], axis=k2), name="U")  # reads G
    s = tc.create_schedule(U)
    ko, ki = s[G].split(G.reduce_axis[0], 16)
    with pytest.raises(tc.IllegalScheduleError, match=r"compute_with\(U, G\.ko\): U reads G .*flow dependence G -> U"):
        s[U].compute_with(s[G], ko)
    assert s[U].fused_with is None and "compute_with" not in "\n".join(s.log)  # nothing recorded


def test_loops_that_differ_are_refused():
    s, _, _ = schedule(bk=16, bk2=32)
    with pytest.raises(tc.LoweringError, match=r"compute_with\(U, G\.ko\): the loops differ: G\.ko runs "
                                               r"\[0, cdiv\(K, 16\)\).*U\.k2o runs \[0, cdiv\(K, 32\)\)"):
        Program(s)
    s, _, _ = schedule(stages=(2, 3))
    with pytest.raises(tc.LoweringError, match="the loops differ.*stages=2.*stages=3"):
        Program(s)


def test_stages_not_placed_at_the_same_loop_are_refused():
    X, Wg, Wu, G, U, Y = computes.swiglu()
    s, jo = _tiled(Y)
    ko, _ = s[G].split(G.reduce_axis[0], 16)
    s[U].split(U.reduce_axis[0], 16)
    s[G].compute_at(s[Y], jo)  # U stays in a kernel of its own
    s[U].compute_with(s[G], ko)
    with pytest.raises(tc.LoweringError, match=r"compute_with\(U, G\.ko\): .*both stages must be placed in one kernel"):
        Program(s)


def test_an_inner_loop_of_the_target_is_refused():
    X, Wg, Wu, G, U, Y = computes.swiglu()
    s, jo = _tiled(Y)
    ko, ki = s[G].split(G.reduce_axis[0], 32)
    kio, kii = s[G].split(ki, 16)
    s[G].reorder(ko, kio, *[a for a in s[G].leaves if a not in (ko, kio)])
    s[U].split(U.reduce_axis[0], 16)
    for T in (G, U):
        s[T].compute_at(s[Y], jo)
    s[U].compute_with(s[G], kio)
    with pytest.raises(tc.LoweringError, match=r"kio is not G's outermost loop \(that is ko\)"):
        Program(s)


def test_a_stage_without_a_serial_loop_is_refused():
    # an elementwise stage placed at the tile: its axes are the tile's, it has no loop of its own
    X, Wg, Wu, G, U, Y = computes.swiglu()
    U2 = tc.compute(Y.shape, lambda i, j: Y[i, j] * 2.0, name="U2")
    s = tc.create_schedule(U2)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 16)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    ko, _ = s[G].split(G.reduce_axis[0], 16)
    s[U].split(U.reduce_axis[0], 16)
    for T in (G, U):
        s[T].compute_at(s[Y], jo)
    s[U2].compute_at(s[Y], jo)
    with pytest.raises(tc.IllegalScheduleError, match="U2 reads G"):
        s[U2].compute_with(s[G], ko)
    V = tc.compute(G.shape, lambda i, j: Wg[0, j] * 3.0, name="V")  # independent of G, no loop
    Z = tc.compute(G.shape, lambda i, j: Y[i, j] + V[i, j], name="Z")
    s, jo = _tiled(Z)
    ko, _ = s[G].split(G.reduce_axis[0], 16)
    s[U].split(U.reduce_axis[0], 16)
    for T in (G, U, Y, V):
        s[T].compute_at(s[Z], jo)
    s[V].compute_with(s[G], ko)
    with pytest.raises(tc.LoweringError, match=r"compute_with\(V, G\.ko\): V has no serial loop"):
        Program(s)


def test_bad_arguments_say_what_is_expected():
    s, (X, Wg, Wu, G, U, Y), loops = schedule(with_=False)
    with pytest.raises(tc.ArgumentError, match="expected a stage"):
        s[U].compute_with(G, loops["G"])
    with pytest.raises(tc.ArgumentError, match="cannot be fused with its own loop"):
        s[U].compute_with(s[U], loops["U"])
    with pytest.raises(tc.ArgumentError, match=r"U\.k2o is not an axis of G"):
        s[U].compute_with(s[G], loops["U"])
    s[U].compute_with(s[G], loops["G"])
    with pytest.raises(tc.ArgumentError, match="U is already fused with G's loop"):
        s[G].compute_with(s[U], loops["U"])
    with pytest.raises(tc.ArgumentError, match=r"already fused with G\.ko"):
        s[U].compute_with(s[G], loops["G"])


def test_the_trace_replays_compute_with():
    s, args, _ = schedule()
    text = str(s.trace)
    assert "U.compute_with(G, G_ko)" in text
    again = tc.replay(s.trace, [args[-1]])
    assert Program(again).source() == Program(s).source()


def test_default_warps_count_both_accumulators():
    # two 128 x 128 float32 accumulators live at once: 8 warps, as one 128 x 256 tile gets
    s, _ = swiglu.make()
    prog = Program(s, {"BM": 128, "BN": 128})
    assert prog.kernels[0].num_warps == 8
    assert Program(s, {"BM": 64, "BN": 64}).kernels[0].num_warps == 4


def test_the_example_loads_x_once():
    s, args = swiglu.make()
    for tma in (0, 1):
        src = Program(s, {"BM": 64, "BN": 64, "TMA": tma}).source()
        loads = re.findall(r"(\w+) = (?:tl\.load\(X |X_desc\w*\.load\()", src)
        assert len(loads) == 1, src


def test_a_tanh_between_the_loops_stays_after_the_loop_it_needs():
    """Review find: the interpreter form's `e = tl.exp(-2|x|)` of a tanh (a TanhExp, no line in the CUDA
    form) had no text for the pass, so it moved before the fused loop, ahead of the x it reads (an
    UnboundLocalError in the interpreter). The pass reads statements in both forms now."""
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, K), "float32", name="X")
    Wg = tc.placeholder((K, N), "float32", name="Wg")
    Wu = tc.placeholder((K, N), "float32", name="Wu")
    k, k2 = tc.reduce_axis(K, name="k"), tc.reduce_axis(K, name="k2")
    G = tc.compute((M, N), lambda i, j: tc.sum(X[i, k] * Wg[k, j], axis=k), name="G")
    Z = tc.compute((M, N), lambda i, j: tc.tanh(G[i, j] * 0.5), name="Z")  # made before U: emitted between
    U = tc.compute((M, N), lambda i, j: tc.sum(X[i, k2] * Wu[k2, j], axis=k2), name="U")
    Y = tc.compute((M, N), lambda i, j: Z[i, j] * U[i, j], name="Y")
    s, jo = _tiled(Y)
    ko, _ = s[G].split(G.reduce_axis[0], 16)
    s[U].split(U.reduce_axis[0], 16)
    for T in (G, Z, U):  # Z, which reads G, sits between the two loops
        s[T].compute_at(s[Y], jo)
    s[U].compute_with(s[G], ko)
    x, wg, wu = torch.randn(37, 29), torch.randn(29, 45), torch.randn(29, 45)
    got = tc.build(s, [X, Wg, Wu, Y])(x, wg, wu)
    torch.testing.assert_close(got, torch.tanh((x @ wg) * 0.5) * (x @ wu), rtol=1e-4, atol=1e-4)


def test_a_third_stage_joins_the_loop_whichever_came_first():
    # U placed first: its loop comes first in the kernel; the fused loop is still G's, so V can join it
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, K), "float32", name="X")
    Ws = [tc.placeholder((K, N), "float32", name=f"W{n}") for n in range(3)]
    ks = [tc.reduce_axis(K, name=f"k{n}") for n in range(3)]
    # U made first: its loop comes first in the kernel
    U, G, V = (tc.compute((M, N), lambda i, j, n=n: tc.sum(X[i, ks[n]] * Ws[n][ks[n], j], axis=ks[n]), name=nm)
               for n, nm in ((1, "U"), (0, "G"), (2, "V")))
    Y = tc.compute((M, N), lambda i, j: G[i, j] * U[i, j] + V[i, j], name="Y")
    s, jo = _tiled(Y)
    loops = {T.name: s[T].split(T.reduce_axis[0], 16)[0] for T in (G, U, V)}
    for T in (U, G, V):
        s[T].compute_at(s[Y], jo)
    s[U].compute_with(s[G], loops["G"])
    s[V].compute_with(s[G], loops["G"])
    src = Program(s).source()
    assert len(re.findall(r"\bfor \w+ in tl\.range", src)) == 1 and src.count("tl.load(X ") == 1, src
    x, w = torch.randn(37, 29), [torch.randn(29, 45) for _ in range(3)]
    got = tc.build(s, [X, *Ws, Y])(x, *w)
    torch.testing.assert_close(got, (x @ w[0]) * (x @ w[1]) + x @ w[2], rtol=1e-4, atol=1e-4)


def test_loops_split_by_two_knobs_are_refused_saying_so():
    # equal values, two knobs: the kernel's loops differ in their constexpr parameter; the message says why
    X, Wg, Wu, G, U, Y = computes.swiglu()
    s, jo = _tiled(Y)
    ko, _ = s[G].split(G.reduce_axis[0], tc.knob("BK1", [16]))
    s[U].split(U.reduce_axis[0], tc.knob("BK2", [16]))
    for T in (G, U):
        s[T].compute_at(s[Y], jo)
    s[U].compute_with(s[G], ko)
    with pytest.raises(tc.LoweringError, match=r"the loops differ.*as written: tl\.cdiv\(K, BK1\) and "
                                               r"tl\.cdiv\(K, BK2\); split both by the same knob"):
        Program(s)
