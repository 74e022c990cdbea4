"""Rows read once and producers at outer loops (issue 10, scope 1 and 2).

- A loop that isl proves runs once (a split by a factor its extent does not exceed, under the facts or a
  call's own sizes) is no loop: every call lowers under the facts of its sizes (`Plan.call_facts`).
- Stages of one kernel that read the same tile of a tensor share one load (a row of X read by a max, a
  sum and a division: read once).
- A producer computed at an outer loop of its consumer (Halide's compute_at) computes the region that one
  iteration of that loop reads: in registers when it is one tile read by the same tiles, else in a buffer
  of its shape, stored and read back behind a barrier.

Every kernel is compared with PyTorch on sizes the tiles do not divide, size-1 dims and both forms.
"""

from __future__ import annotations

import math
import re

import computes
import pytest
import torch

import tilec as tc


def softmax_schedule(block, explicit_exp=False):
    """Row softmax with every stage at Y's row; `explicit_exp`: E = exp(X - mx) a stage of its own,
    placed at the row too (its region: the whole row)."""
    X, (c, c2), mx, den, Y = computes.softmax()
    if explicit_exp:
        E = tc.compute(Y.shape, lambda r, k: tc.exp(X[r, k] - mx[r]), name="E")
        den = tc.compute(mx.shape, lambda r: tc.sum(E[r, c2], axis=c2), name="den")
        Y = tc.compute(Y.shape, lambda r, col: E[r, col] / den[r], name="Y")
    s = tc.create_schedule(Y)
    r, col = Y.axis
    s[Y].split(col, block)
    s[Y].bind(r, "program_id.0")
    for T, axis in ((mx, c), (den, c2)):
        s[T].split(axis, block)
        s[T].compute_at(s[Y], r)
    if explicit_exp:
        s[E].split(E.axis[1], block)
        s[E].compute_at(s[Y], r)
    return s, X, Y


def loops(src: str) -> int:
    """How many loops the Triton source has."""
    return len(re.findall(r"^\s*for \w+ in ", src, re.M))


def ran_program(kern):
    """The program the kernel's (only) prepared call launched."""
    (call,) = kern._calls.values()
    mods = {launch.fn.__module__ if not hasattr(launch.fn, "fn") else launch.fn.fn.__module__ for launch in call[3]}
    from tilec.runtime import kernel as kernel_mod
    found = [p for p in kern._programs.values() if kernel_mod.load_module(p.source()).__name__ in mods]
    assert found
    return found[0]


@pytest.mark.parametrize("explicit_exp", [False, True])
@pytest.mark.parametrize("shape", [(5, 100), (3, 1024), (1, 1), (4, 1500)])
@pytest.mark.slow
def test_softmax_matches_torch_in_both_forms(shape, explicit_exp):
    s, X, Y = softmax_schedule(1024, explicit_exp)
    kern = tc.build(s, [X, Y])
    x = torch.randn(*shape) * 3
    torch.testing.assert_close(kern(x), torch.softmax(x, 1), rtol=1e-5, atol=1e-6)
    src = ran_program(kern).source()
    if shape[1] <= 1024:  # the row is one tile: no loop, X read once, the exponentials computed once
        assert not loops(src) and src.count("tl.load(") == 1
        assert src.count("tl.exp(") == (1 if explicit_exp else 2)
    else:  # loops over column tiles; E (if a stage) kept in memory between them, behind a barrier
        assert loops(src)
        assert ("tl.debug_barrier()" in src) == explicit_exp


def test_a_loop_of_one_iteration_is_no_loop_under_a_fact():
    M, N = tc.size_vars("M N")
    tc.assume(N <= 4096)
    tc.assume(N >= 1)
    X = tc.placeholder((M, N), "bfloat16", name="X")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c].astype("float32") * X[r, c], axis=c), name="ss")
    Y = tc.compute((M, N), lambda r, col: X[r, col] * tc.rsqrt(ss[r] / N + 1e-6), name="Y", dtype="bfloat16")
    s = tc.create_schedule(Y)
    r, col = Y.axis
    s[Y].split(col, 4096)
    s[Y].bind(r, "program_id.0")
    s[ss].split(c, 4096)
    s[ss].compute_at(s[Y], r)
    src = tc.lower(s).source()  # the generic kernel: the fact proves both loops run once
    assert not loops(src) and src.count("tl.load(") == 1
    kern = tc.build(s, [X, Y])
    x = torch.randn(7, 3000).to(torch.bfloat16)
    xf = x.float()
    ref = (xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    torch.testing.assert_close(kern(x).float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_a_call_with_an_empty_axis_keeps_the_loop():
    """N = 0 makes the loop over column tiles run no times, not once: no fact, the generic form."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    R = tc.compute((M,), lambda r: tc.sum(X[r, c] * 2.0, axis=c), name="R")
    s = tc.create_schedule(R)
    s[R].split(c, 64)
    s[R].bind(R.axis[0], "program_id.0")
    kern = tc.build(s, [X, R])
    torch.testing.assert_close(kern(torch.randn(3, 0)), torch.zeros(3))
    assert kern.program.plan.call_facts({"M": 3, "N": 0}) == ()
    assert [tc.ir.expr.size_text(f) for f in kern.program.plan.call_facts({"M": 3, "N": 64})] == [
        "N % 64 == 0", "cdiv(N, 64) == 1"]  # no mask, and no loop
    assert [tc.ir.expr.size_text(f) for f in kern.program.plan.call_facts({"M": 3, "N": 65})] == []
    torch.testing.assert_close(kern(x := torch.randn(3, 64)), x.sum(1) * 2.0, rtol=1e-5, atol=1e-5)
    s2, X2, Y2 = softmax_schedule(64)
    facts = tc.build(s2, [X2, Y2]).program.plan.call_facts({"M": 3, "N": 64})
    assert len(facts) == 2  # N % 64 == 0 and cdiv(N, 64) == 1, for mx's, den's and Y's loops alike


def outer_producer(fg, fh, bind=True):
    """Halide's example: g computed at h.ro while h iterates column tiles inside ro."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    g = tc.compute((M, N), lambda r, c: tc.exp(X[r, c]) * 2.0, name="g")
    h = tc.compute((M, N), lambda r, c: g[r, c] + 1.0, name="h")
    s = tc.create_schedule(h)
    r, c = h.axis
    ro, co, ri, ci = s[h].tile(r, c, 4, fh)
    s[h].bind(ro, "program_id.0")
    if fg is not None:
        s[g].split(g.axis[1], fg)
    s[g].compute_at(s[h], ro)
    return s, X, h


@pytest.mark.parametrize("fg, fh", [(None, 32), (64, 64), (64, 16), (16, 64)])
@pytest.mark.parametrize("shape", [(7, 100), (4, 64), (1, 1), (9, 20)])
def test_producer_at_an_outer_loop(fg, fh, shape):
    s, X, h = outer_producer(fg, fh)
    kern = tc.build(s, [X, h])
    x = torch.randn(*shape)
    torch.testing.assert_close(kern(x), torch.exp(x) * 2.0 + 1.0)
    prog = ran_program(kern)
    same_tile = fg == fh and shape[1] <= fh  # g's region is one tile, read by h's same tiles
    assert prog.plan.scratch == (set() if same_tile else {"g"})
    assert ("tl.debug_barrier()" in prog.source()) == (not same_tile)


def test_producer_region_nan_and_inf_pass_through():
    s, X, h = outer_producer(64, 64)
    kern = tc.build(s, [X, h])
    x = torch.randn(5, 90)
    x[1, 3], x[2, 70], x[4, 0] = float("nan"), float("inf"), float("-inf")
    torch.testing.assert_close(kern(x), torch.exp(x) * 2.0 + 1.0, equal_nan=True)


def test_rows_read_once_for_rmsnorm_and_rowscale():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import rmsnorm
    import rowscale_fp8

    for mod, block in ((rmsnorm, 1024), (rowscale_fp8, 1024)):
        s, args = mod.make()
        src = tc.lower(s, {"BLOCK": block}, specialize={"N": 1000}).source()
        assert not loops(src) and src.count("tl.load(") == 1 + (mod is rmsnorm), mod.__name__  # + rmsnorm's w
        xs = mod.inputs({"M": 6, "N": 1000}, "cuda" if torch.cuda.is_available() else "cpu")
        outs = tc.build(s, args, config={"BLOCK": block})(*xs)
        refs = mod.reference(*xs)
        for o, ref in zip(outs if isinstance(outs, tuple) else [outs], refs if isinstance(refs, tuple) else [refs]):
            err = ((o.double() - ref.double()).norm() / ref.double().norm()).item()
            assert err < 0.15 and not math.isnan(err), (mod.__name__, err)  # fp8/bf16 through the interpreter


def test_source_for_shows_what_a_call_with_those_sizes_runs():
    s, X, Y = softmax_schedule(1024)
    kern = tc.build(s, [X, Y])
    assert loops(kern.source) == 3  # no size known: the loops over column tiles
    assert loops(kern.source_for(M=4, N=1000)) == 0  # a row of 1000 fits the tile of 1024
    assert "mask_c" not in kern.source_for(M=4, N=2048) and loops(kern.source_for(M=4, N=2048)) == 3
    x = torch.randn(4, 1000)
    kern(x)
    assert ran_program(kern).source() == kern.source_for(M=4, N=1000)
    with pytest.raises(tc.ArgumentError, match="size N must be an int"):
        kern.source_for(N=-1)
