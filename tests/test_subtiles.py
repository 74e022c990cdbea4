"""Tiles of any multiple of 16 (the Hopper GEMM issue): a 192-wide tile lowers as power-of-two sub-tiles
(128 + 64), one accumulator and one dot each, sharing the loads that do not depend on the tile
(tilec/lower/subtiles.py).

Each schedule is built and run (the interpreter on a CPU) against torch on sizes no tile divides,
size-1 dims and NaN/Inf inputs, with NaN-filled outputs so that an unwritten piece is seen.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.lower import subtiles
from tilec.lower.code import BinOp, Name, Num, Tuple, call
from tilec.lower.nest import AccInit, Assign, KernelIR, Update
from tilec.lower.program import Program

sys.path.insert(0, str(Path(__file__).parent))
import computes  # noqa: E402

SIZES = [(50, 70, 33), (1, 1, 1), (16, 300, 16), (200, 5, 40)]


def test_pieces_are_the_binary_digits_of_the_extent():
    assert subtiles.pieces(192) == [(0, 128), (128, 64)]
    assert subtiles.pieces(112) == [(0, 64), (64, 32), (96, 16)]
    assert subtiles.pieces(48) == [(0, 32), (32, 16)]
    assert subtiles.pieces(64) == [(0, 64)]


def gemm_silu(bm, bn, bk=16, *, assume=None):
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, ii = s[C].split(i, bm)
    jo, ji = s[C].split(j, bn)
    ko, ki = s[C].split(C.reduce_axis[0], bk)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].swizzle(io, jo, 2), "program_id.0")
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C]).compute_at(s[C], ko)
    s[Y].compute_at(s[C], s[C].leaves[0])
    return s, (A, W, C, Y)


def _check(s, args, sizes, config=None, special=False):
    A, W, _, Y = args
    M, N, K = sizes
    a, w = torch.randn(M, K), torch.randn(K, N)
    if special:
        a[-1, 0], w[0, -1] = float("nan"), float("-inf")
    out = torch.full((M, N), float("nan"))
    tc.build(s, [A, W, Y], config=config)(a, w, out=out)
    torch.testing.assert_close(out, torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("bm, bn", [(16, 48), (16, 192), (48, 16), (16, 112), (32, 80)])
@pytest.mark.slow
def test_subtiled_gemm_matches_torch(bm, bn, sizes):
    s, args = gemm_silu(bm, bn)
    _check(s, args, sizes)
    _check(s, args, sizes, special=True)


def test_one_a_tile_feeds_a_dot_per_piece():
    s, _ = gemm_silu(16, 192)
    src = Program(s).source()
    body = src.split("for ko in", 1)[1]
    assert body.count("a_tile = tl.load(") == 1 and body.count("w_tile") and body.count("tl.dot(") == 2
    assert "acc_C = tl.full([16, 128], 0, tl.float32)" in src and "acc_C_1 = tl.full([16, 64], 0, tl.float32)" in src
    assert "offs_j_1 = jo * 192 + (128 + tl.arange(0, 64))" in src
    assert src.count("tl.store(") == 2 and "# sub-tiles: ji (192 wide) as 128 + 64" in src
    nest = str(tc.lower(s))
    assert "[ji 0:128]" in nest and "[ji 128:192]" in nest


def test_a_knob_choice_may_be_a_multiple_of_16():
    A, W, C, Y = computes.gemm_silu()
    s, args = gemm_silu(16, tc.knob("BN", [64, 192, 48]))
    for bn in (64, 192, 48):
        _check(s, args, (37, 200, 29), config={"BN": bn})
    assert "sub-tiles" not in Program(s, {"BN": 64}).source()


def test_the_int64_and_interpreter_forms_of_sub_tiles():
    s, args = gemm_silu(16, 48)
    prog = Program(s, int64=True)
    assert "offs_j_1 = jo * 48 + (32 + tl.arange(0, 16))" in prog.source()
    assert prog.with_form("interpreter").source().count("tl.dot(") == 2


def test_an_elementwise_root_with_a_sub_tiled_axis():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: tc.exp(X[i, j]) * 2.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 80, 16)
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    x = torch.randn(170, 33)
    out = torch.full((170, 33), float("nan"))
    tc.build(s, [X, Z])(x, out=out)
    torch.testing.assert_close(out, torch.exp(x) * 2.0)


def test_a_reduction_that_is_not_a_dot_is_sub_tiled_too():
    """Review find: an int GEMM (no tl.dot) had its accumulator's name in its update's template text, so
    the merge refused a valid schedule as an internal error; the accumulator is an operand now."""
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "int32", name="A")
    W = tc.placeholder((K, N), "int32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    R = tc.compute((M, N), lambda i, j: tc.max(A[i, k] + W[k, j], axis=k), name="R", dtype="int32")
    for T in (C, R):
        s = tc.create_schedule(T)
        io, jo, ii, ji = s[T].tile(*T.axis, 16, 48)
        ko, ki = s[T].split(k, 16)
        s[T].reorder(io, jo, ko, ii, ji, ki)
        s[T].bind(s[T].fuse(io, jo), "program_id.0")
        a, w = torch.randint(-5, 6, (37, 29), dtype=torch.int32), torch.randint(-5, 6, (29, 70), dtype=torch.int32)
        ac, wc = a.cpu(), w.cpu()  # the reference on the CPU: CUDA has no int32 matmul
        want = (ac @ wc) if T is C else (ac[:, :, None] + wc[None, :, :]).amax(1)
        torch.testing.assert_close(tc.build(s, [A, W, T])(a, w).cpu(), want)


def test_a_cast_of_a_specialized_size_in_every_piece():
    """Review find: the merge dropped Tensor0d's dtype, so the second piece wrote `(32 + 0.25).to(...)`."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    E = tc.compute((M, N), lambda i, j: (N + 0.25).astype("float16") * X[i, j], name="E", dtype="float16")
    s = tc.create_schedule(E)
    io, jo, ii, ji = s[E].tile(*E.axis, 16, 48)
    s[E].bind(s[E].fuse(io, jo), "program_id.0")
    x = torch.randn(6, 32)
    got = tc.build(s, [X, E], specialize={"N": 32})(x)
    torch.testing.assert_close(got, (torch.tensor(32.25).half().float() * x).half())


# ---------------------------------------------------------------------------------------------
# refused, with what would be right


def test_a_tile_that_is_no_multiple_of_16_is_padded():
    """Issue 25: where pieces do not serve, the tile is padded to the next power of two (it was refused)."""
    s, args = gemm_silu(16, 24)
    assert "(tl.arange(0, 32) < 24)" in tc.lower(s).source()
    _check(s, args, (37, 50, 20), special=True)


def test_sub_tiles_on_one_axis_the_other_padded():
    """Sub-tiles serve one axis of a stage, the spatial axes of a kernel's root stage: a second axis of 48,
    or a reduce axis of 48, is padded to 64 instead (they were refused)."""
    s, args = gemm_silu(48, 48)
    assert "(tl.arange(0, 64) < 48)" in tc.lower(s).source()
    _check(s, args, (100, 70, 33))
    s, args = gemm_silu(16, 16, bk=48)
    assert "(tl.arange(0, 64) < 48)" in tc.lower(s).source()
    _check(s, args, (20, 30, 100))


def test_a_tile_of_48_outside_the_root_stage_is_padded():
    """A row max computed inside its consumer's kernel, its reduce axis tiled by 48: padded to 64, the 16 lanes
    past 48 masked with the max's identity (it was refused)."""
    X, (c, c2), mx, den, Y = computes.softmax()
    s = tc.create_schedule(Y)
    ro, co, ri, ci = s[Y].tile(*Y.axis, 16, 64)
    s[Y].reorder(ro, ri, co, ci)
    s[Y].bind(ro, "program_id.0")
    s[mx].compute_at(s[Y], ro)
    s[den].compute_at(s[Y], ro)
    s[mx].split(c, 48)
    x = torch.randn(19, 130)
    x[3, 100] = float("nan")
    torch.testing.assert_close(tc.build(s, [X, Y])(x), torch.softmax(x, 1), equal_nan=True)


def test_a_value_that_combines_the_pieces_is_refused_by_the_merge():
    """A statement of the second piece that updates a name both pieces share (a reduction over the
    sub-tiled axis) cannot be split into pieces: the merge refuses it instead of keeping one piece."""
    def kernel(piece):
        body = [AccInit("acc", Tuple((Num(16),)), Num(0), "float32"),
                Assign("x", call("arange", 0, piece)),
                Update("acc", Name("x"))]
        return KernelIR("K_kernel", "K", ["K"], [], [], [], body, ["h", "config: none (no knobs)", "schedule:"],
                        4, [], [])
    with pytest.raises(tc.LoweringError, match=r"acc combines the pieces \(a reduction over the sub-tiled axis"):
        subtiles.merge([kernel(32), kernel(16)], "ji", 48)


def test_a_name_read_deep_in_an_expression_is_renamed_with_its_piece():
    """The merge renames a piece's values in its statements' expression nodes, wherever they are read (here
    under a call under an operator): the second piece's y reads its own x, never the first piece's."""
    def kernel(piece):
        body = [Assign("x", call("arange", 0, piece)),
                Assign("y", call("exp", BinOp("*", Name("x"), Num(piece))))]
        return KernelIR("K_kernel", "K", ["K"], [], [], [], body, ["h", "config: none (no knobs)", "schedule:"],
                        4, [], [])
    merged = subtiles.merge([kernel(32), kernel(32)], "ji", 64)  # identical pieces: nothing renamed
    assert [n.name for n in merged.body] == ["x", "y"]

    merged = subtiles.merge([kernel(32), kernel(16)], "ji", 48)
    assert [n.name for n in merged.body] == ["x", "x_1", "y", "y_1"]
    assert merged.body[3].value == call("exp", BinOp("*", Name("x_1"), Num(16)))
    assert merged.body[2].value == call("exp", BinOp("*", Name("x"), Num(32)))
