"""The order and count of a kernel's programs (the Hopper GEMM issue): `swizzle` (grouped program order),
`persistent` (min(#SMs, tiles) programs, each looping over tiles) and the default `num_warps`.

Every schedule here is built and run (the interpreter on a CPU, where a persistent kernel runs
`INTERPRETER_PROGRAMS` programs, so each loops over several tiles) and compared with torch, on sizes no
tile divides, size-1 dims, fewer tiles than programs, and NaN/Inf inputs; outputs are pre-filled with
NaN so that a tile no program writes is seen.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
import tilec.runtime.kernel as kernel_mod
from tilec.lower.program import Program
from tilec.plan.analysis import Analysis

sys.path.insert(0, str(Path(__file__).parent))
import computes  # noqa: E402

SIZES = [(37, 45, 29), (1, 1, 1), (16, 16, 16), (5, 80, 3), (70, 9, 40)]


def gemm_silu_grouped(*, group=2, flatten=None, bm=16, bn=16, bk=16, warps=None):
    """DESIGN's GEMM + SiLU with its tile axes swizzled onto one grid axis; persistent when `flatten` is
    given (True, False or a tc.flag)."""
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, bm, bn)
    ko, ki = s[C].split(C.reduce_axis[0], bk)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    f = s[C].swizzle(io, jo, group=group)
    s[C].bind(f, "program_id.0")
    if flatten is not None:
        s[C].persistent(f, flatten=flatten)
    if warps is not None:
        s[C].num_warps(warps)
    s[Y].compute_at(s[C], f)
    return s, (A, W, C, Y), f


def _run(s, args, sizes, config=None, special=False):
    M, N, K = sizes
    A, W, _, Y = args
    a, w = torch.randn(M, K), torch.randn(K, N)
    if special:
        a[0, 0], w[-1, -1] = float("nan"), float("inf")
    out = torch.full((M, N), float("nan"))
    tc.build(s, [A, W, Y], config=config)(a, w, out=out)
    ref = torch.nn.functional.silu(a @ w)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4, equal_nan=True)
    return out


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("group", [1, 2, 3, 8])
@pytest.mark.slow
def test_swizzled_programs_write_every_tile_once(sizes, group):
    s, args, _ = gemm_silu_grouped(group=group)
    _run(s, args, sizes)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("flatten", [False, True])
@pytest.mark.slow
def test_persistent_programs_loop_over_every_tile(sizes, flatten):
    s, args, _ = gemm_silu_grouped(group=3, flatten=flatten)
    _run(s, args, sizes)
    _run(s, args, sizes, special=True)


def test_persistent_runs_at_most_the_program_count(monkeypatch):
    device = torch.empty(0).device
    expected = (torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda"
                else kernel_mod.INTERPRETER_PROGRAMS)
    assert kernel_mod.sm_count(device) == expected
    asked = []
    monkeypatch.setattr(kernel_mod, "sm_count", lambda dev: asked.append(dev) or 3)  # 3 programs, on any device
    s, args, _ = gemm_silu_grouped(flatten=False)
    k = tc.build(s, [args[0], args[1], args[3]])
    a, w = torch.randn(70, 20), torch.randn(20, 50)  # 5 x 4 tiles, 3 programs
    torch.testing.assert_close(k(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)
    (launch,) = k._calls[next(iter(k._calls))][3]
    grid, static = launch.grid, launch.static
    assert len(asked) == 1 and grid == (3,) and static["NUM_PROGS"] == 3
    a, w = torch.randn(10, 20), torch.randn(20, 10)  # 1 tile: 1 program
    k(a, w)
    grids = [call[3][0].grid for call in k._calls.values()]
    assert grids == [(3,), (1,)]


def test_knobs_and_flags_are_tuned_like_any_other():
    s, args, _ = gemm_silu_grouped(group=tc.knob("GROUP_M", [1, 4, 8]), flatten=tc.flag("FLATTEN"))
    assert s.knobs["GROUP_M"].choices == (1, 4, 8) and s.knobs["FLATTEN"].choices == (0, 1)
    for config in ({"GROUP_M": 8, "FLATTEN": 1}, {"GROUP_M": 1, "FLATTEN": 0}):
        _run(s, args, (37, 45, 29), config)
    src = Program(s, {"GROUP_M": 4, "FLATTEN": 1}).source()
    assert "flatten=FLATTEN)" in src and "FLATTEN: tl.constexpr" in src and "GROUP_M: tl.constexpr" in src
    assert 'FLATTEN = tc.flag("FLATTEN")' in str(s.trace)
    assert Program(tc.replay(s.trace, [args[3]]), {"GROUP_M": 4, "FLATTEN": 1}).source() == src


def test_the_int64_form_widens_the_tile_index(monkeypatch):
    s, args, _ = gemm_silu_grouped(flatten=True)
    src = Program(s, int64=True).source()
    assert "io_jo = tl.cast(tile, tl.int64)" in src and "tl.program_id(0).to(tl.int64)" not in src
    assert "io_jo = tile\n" in Program(s).source()
    # and it runs (review find: `tile.to(tl.int64)` failed in the interpreter, whose loop counter is an int)
    monkeypatch.setattr(kernel_mod, "_INT32_LIMIT", 100)  # tensors past 100 elements take int64
    _run(s, args, (37, 45, 29))


def test_persistent_keeps_a_read_of_another_tile_illegal():
    """Ys[i, j] = C[i, j] + C[i, 0]: tile 0's program computes C[i, 0]; a persistent program may or may not
    have run it earlier, so the placement stays refused, as without persistent."""
    A, W, C = computes.gemm()
    Ys = tc.compute(C.shape, lambda i, j: C[i, j] + C[i, 0], name="Ys")
    s = tc.create_schedule(Ys)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    f = s[C].swizzle(io, jo, group=2)
    s[C].bind(f, "program_id.0")
    s[C].persistent(f)
    with pytest.raises(tc.IllegalScheduleError, match=r"programs that run in parallel depend on each other") as e:
        s[Ys].compute_at(s[C], f)
    assert e.value.reason == "parallel"


# ---------------------------------------------------------------------------------------------
# refused, with what would be right


def test_swizzle_and_persistent_refusals():
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    with pytest.raises(tc.ArgumentError, match=r"argument 3, 'group' to swizzle: expected a positive int"):
        s[C].swizzle(io, jo, 0)
    with pytest.raises(tc.ArgumentError, match=r"tc.flag\('F'\) is an on/off switch"):
        s[C].swizzle(io, jo, tc.flag("F"))
    with pytest.raises(tc.ArgumentError, match=r"swizzle: io and ii must be adjacent"):
        s[C].swizzle(io, ii, 2)
    f = s[C].swizzle(io, jo, 2)
    with pytest.raises(tc.ArgumentError, match=r"split: C.io_jo is swizzled .* split its axes before swizzle"):
        s[C].split(f, 2)
    with pytest.raises(tc.ArgumentError, match=r"persistent: C.io_jo is not bound to the grid; bind it to program_id.0"):
        s[C].persistent(f)
    with pytest.raises(tc.LoweringError, match=r"swizzle\(io, jo\) orders programs, but C.io_jo is a serial loop; "
                                               r"bind it to the grid"):
        tc.lower(s)
    s[C].bind(f, "program_id.0")
    for bad in ("yes", 1, tc.knob("FL", [1, 2])):
        with pytest.raises(tc.ArgumentError, match=r"argument 2, 'flatten' to persistent: expected True, False or a "
                                                   r"tc.flag"):
            s[C].persistent(f, flatten=bad)
    with pytest.raises(tc.ArgumentError, match=r"'stages' is already a knob"):
        s[C].pipeline(ko, stages=tc.knob("stages", [2, 3]))
        s[C].persistent(f, flatten=tc.flag("stages"))
    s[C].persistent(f)
    with pytest.raises(tc.ArgumentError, match=r"fuse: C.io_jo is bound"):
        s[C].fuse(f, ko)


def test_persistent_needs_the_only_grid_axis():
    A, W, C = computes.gemm()
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    s[C].bind(io, "program_id.0")
    s[C].persistent(io)
    with pytest.raises(tc.LoweringError, match=r"bind\(C.jo, 'program_id.1'\): C's tile loop \(persistent\) runs "
                                               r"its one grid axis on program_id.0, so C binds no other axis; fuse "
                                               r"\(or swizzle\)"):  # refused at the primitive (issue 11)
        s[C].bind(jo, "program_id.1")
    tc.lower(s)  # the refused bind left the schedule as it was: it lowers
    s2 = tc.create_schedule(C)
    io, jo, ii, ji = s2[C].tile(*C.axis, 16, 16)
    s2[C].bind(jo, "program_id.1")
    with pytest.raises(tc.ArgumentError, match=r"C.jo is bound to program_id.1; bind it to program_id.0 first"):
        s2[C].persistent(jo)


def test_swizzle_of_reduce_axes_is_refused():
    A, W, C, Y = computes.two_reduce_axes()
    s = tc.create_schedule(Y)
    k1, k2 = C.reduce_axis
    with pytest.raises(tc.ArgumentError, match=r"swizzle: k1 and k2 are reduce axes"):
        s[C].swizzle(k1, k2, 2)


# ---------------------------------------------------------------------------------------------
# num_warps when the schedule sets none


@pytest.mark.parametrize("bm, bn, warps", [(16, 16, 4), (64, 64, 4), (128, 128, 4), (128, 256, 8), (256, 128, 8),
                                           (256, 256, 16)])
def test_default_warps_follow_the_accumulator(bm, bn, warps):
    s, args, _ = gemm_silu_grouped(bm=bm, bn=bn, bk=16)
    prog = Program(s)
    assert [k.num_warps for k in prog.kernels] == [warps]
    assert f"num_warps={warps})" in str(prog).splitlines()[0]
    analysis = Analysis(s, {})
    assert [r.num_warps for r in analysis.resources] == [warps]  # the footprint model counts the same warps


def test_num_warps_set_by_the_schedule_wins():
    s, args, _ = gemm_silu_grouped(bm=128, bn=256, warps=4)
    assert [k.num_warps for k in Program(s).kernels] == [4]
    s, args, _ = gemm_silu_grouped(bm=16, bn=16, warps=tc.knob("w", [2, 8]))
    assert [k.num_warps for k in Program(s, {"w": 8}).kernels] == [8]


def test_default_warps_of_an_elementwise_and_a_default_schedule():
    X, w, c, ss, Y = computes.rmsnorm()
    s = tc.create_schedule(Y)
    assert {k.num_warps for k in Program(s).kernels} == {4}  # default tiles are small
    M, N = tc.size_vars("M N")
    Xe = tc.placeholder((M, N), "float32", name="Xe")
    Z = tc.compute((M, N), lambda i, j: Xe[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 64, 512)  # 32768 elements: 8 warps
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    assert re.search(r"num_warps=8\)", str(tc.lower(s)))
