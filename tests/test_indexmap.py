"""The index map of a stage (tilec/plan/indexmap.py): the one place that derives how each axis is rebuilt
from the loop variables through the stage's splits and fuses, and where a split that does not divide
makes a tile overrun. Each algebra is checked by enumeration: every combination of leaf values, rebuilt
and guarded, must give each value of the original axes exactly once, and each leaf must be the forward
value of the original axes it comes from."""

from __future__ import annotations

import itertools

import torch

import tilec as tc
from tilec.ir.expr import Binary, Const, evaluate, size_text
from tilec.plan import Plan
from tilec.plan.indexmap import IndexMap


def elementwise(M, N):
    """C[i, j] = 2 X[i, j] over (M, N) (ints or size variables); returns (C, its schedule)."""
    X = tc.placeholder((M, N), "float32", name="X")
    C = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="C")
    return C, tc.create_schedule(C)


def ranges(index: IndexMap, config=None):
    """Each leaf's values (its extent at the config's knob values; all extents are constants here)."""
    return {a: range(evaluate(a.extent, config or {})) for a in index.leaves}


def covered(index: IndexMap, config=None, zero=frozenset()) -> list[tuple]:
    """The original axes' values at every combination of leaf values whose guards hold (a value past an
    original axis's extent is the partial tile its mask drops), sorted: a value made twice appears twice."""
    rebuilt = index.rebuilt(zero)
    leaves = [a for a in index.leaves if a not in zero]
    out = []
    for values in itertools.product(*(ranges(index, config)[a] for a in leaves)):
        env = {a.name: v for a, v in zip(leaves, values)} | (config or {})
        if not all(evaluate(g, env) for a in index.originals for g in rebuilt.guards[a]):
            continue
        point = tuple(evaluate(rebuilt.value[a], env) for a in index.originals)
        if all(v < evaluate(a.extent, {}) for v, a in zip(point, index.originals)):
            out.append(point)
    return sorted(out)


def every_point(index: IndexMap) -> list[tuple]:
    return sorted(itertools.product(*(range(evaluate(a.extent, {})) for a in index.originals)))


def check_forward(index: IndexMap, config=None) -> None:
    """At every point of the original axes, each axis's forward value is the value its rebuilt value
    came from: rebuilding the leaves' forward values gives the point back."""
    rebuilt = index.rebuilt()
    for point in every_point(index):
        env = {a.name: v for a, v in zip(index.originals, point)} | (config or {})
        leaves = {a.name: evaluate(index.forward[a], env) for a in index.leaves}
        assert tuple(evaluate(rebuilt.value[a], leaves | (config or {})) for a in index.originals) == point


def test_a_split_is_outer_times_factor_plus_inner():
    C, s = elementwise(8, 4)
    i, j = C.axis
    io, ii = s[C].split(i, 4)
    index = IndexMap(s[C], {})
    assert index.leaves == (io, ii, j) and index.origin[io] == index.origin[ii] == {i}
    assert index.split_of(i).outer is io and index.tile_split(ii).parent is i and index.tile_split(io) is None
    assert index.made_by(io) is index.made_by(ii) and index.made_by(i) is None
    rebuilt = index.rebuilt()
    assert str(rebuilt.value[i]) == "((io * 4) + ii)" and str(rebuilt.block[i]) == "(io * 4)"
    assert rebuilt.value[j] is j and rebuilt.guards[i] == () and not index.overruns(i)
    assert str(index.forward[io]) == "(i // 4)" and str(index.forward[ii]) == "(i % 4)"
    assert index.parts[io] == (io,) and index.splits_over(i) == index.splits and index.splits_over(j) == ()
    assert covered(index) == every_point(index)
    check_forward(index)


def test_a_split_that_does_not_divide_overruns_its_axis_and_the_mask_drops_the_rest():
    C, s = elementwise(10, 3)
    i, _ = C.axis
    io, ii = s[C].split(i, 4)
    index = IndexMap(s[C], {})
    assert index.top(i) == 11 and index.overruns(i)  # 3 tiles of 4 over 10 values
    assert index.rebuilt().guards[i] == ()  # the axis's own mask (i < 10) covers it: no guard
    assert covered(index) == every_point(index)


def test_a_symbolic_extent_may_always_overrun():
    M, N = tc.size_vars("M N")
    C, s = elementwise(M, N)
    i, _ = C.axis
    io, ii = s[C].split(i, 64)
    index = IndexMap(s[C], {})
    assert index.top(ii) == 63 and not index.overruns(ii)
    assert index.top(io) is None and index.top(i) is None and index.overruns(i)
    assert size_text(index.extent[io]) == "cdiv(M, 64)" and isinstance(index.extent[ii], Const)


def test_nested_splits_with_non_dividing_factors_guard_the_inner_axis():
    """i (10) split by 6, its inner (6) split by 4: the inner axis's rebuilt value reaches 7, past 6,
    without i's own value passing 10 (io = 0, iio = 1, iii = 3 is i = 7 but ii = 7): its guard is ii < 6."""
    C, s = elementwise(10, 2)
    i, _ = C.axis
    io, ii = s[C].split(i, 6)
    iio, iii = s[C].split(ii, 4)
    index = IndexMap(s[C], {})
    assert index.top(ii) == 7 and index.overruns(ii) and index.top(i) == 13
    rebuilt = index.rebuilt()
    assert str(rebuilt.value[ii]) == "((iio * 4) + iii)" and str(rebuilt.value[i]) == "((io * 6) + ((iio * 4) + iii))"
    (guard,) = rebuilt.guards[i]
    assert str(guard) == "(((iio * 4) + iii) < 6)"
    assert str(rebuilt.block[ii]) == "(iio * 4)" and i not in rebuilt.block  # i's inner axis is no leaf
    assert index.splits_over(i) == index.splits and index.origin[iii] == {i}
    assert covered(index) == every_point(index)
    check_forward(index)
    # without the guard, the combinations that overrun ii make values of i twice
    unguarded = [evaluate(rebuilt.value[i], {"io": o, "iio": a, "iii": b})
                 for o, a, b in itertools.product(range(2), range(2), range(4))]
    assert len([v for v in unguarded if v < 10]) > 10


def test_nested_splits_that_divide_need_no_guard():
    C, s = elementwise(12, 2)
    i, _ = C.axis
    io, ii = s[C].split(i, 6)
    s[C].split(ii, 3)
    index = IndexMap(s[C], {})
    assert not index.overruns(ii) and index.rebuilt().guards[i] == ()
    assert covered(index) == every_point(index)


def test_a_fuse_is_quotient_and_remainder_by_the_inner_extent():
    C, s = elementwise(3, 5)
    i, j = C.axis
    f = s[C].fuse(i, j)
    index = IndexMap(s[C], {})
    assert index.leaves == (f,) and index.origin[f] == {i, j} and index.parts[f] == (i, j)
    rebuilt = index.rebuilt()
    assert str(rebuilt.value[i]) == "(i_j // 5)" and str(rebuilt.value[j]) == "(i_j % 5)"
    assert str(index.forward[f]) == "((i * 5) + j)" and index.made_by(f) is index.fuses[0]
    assert index.top(i) == 2 and index.top(j) == 4 and not index.overruns(i) and not index.overruns(j)
    assert covered(index) == every_point(index)
    check_forward(index)


def test_a_fuse_of_splits_that_do_not_divide():
    """tile(i, j, 4, 4) over (6, 7) and fuse(io, jo): the fused grid axis's components, each a split's outer;
    both axes overrun (masks), neither needs a guard."""
    C, s = elementwise(6, 7)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    f = s[C].fuse(io, jo)
    index = IndexMap(s[C], {})
    assert index.leaves == (f, ii, ji) and index.parts[f] == (io, jo) and index.origin[f] == {i, j}
    assert index.splits_over(i) == index.splits[:1] and index.scheduled == [{i}, {j}, {i, j}]
    assert index.overruns(i) and index.overruns(j) and index.rebuilt().guards == {a: () for a in index.rebuilt().guards}
    rebuilt = index.rebuilt()
    assert str(rebuilt.value[i]) == "(((io_jo // 2) * 4) + ii)" and str(rebuilt.block[j]) == "((io_jo % 2) * 4)"
    assert covered(index) == every_point(index)
    check_forward(index)


def test_a_split_of_a_fused_axis_is_made_from_both():
    C, s = elementwise(3, 4)
    i, j = C.axis
    f = s[C].fuse(i, j)
    fo, fi = s[C].split(f, 5)  # 12 values in tiles of 5: the last overruns
    index = IndexMap(s[C], {})
    assert index.splits_over(i) == index.splits_over(j) == index.splits and index.origin[fi] == {i, j}
    assert str(index.forward[fo]) == "(((i * 4) + j) // 5)" and index.overruns(f)
    assert covered(index) == every_point(index)
    check_forward(index)


def test_a_swizzle_runs_every_pair_once_in_groups_of_outer_values():
    """swizzle(io, jo, group=2) over 5 x 3 tiles: Triton's GROUP_M order, the last group smaller."""
    C, s = elementwise(5, 3)
    i, j = C.axis
    g = s[C].swizzle(i, j, 2)
    s[C].bind(g, "program_id.0")
    index = IndexMap(s[C], {})
    rebuilt = index.rebuilt()
    order = [(evaluate(rebuilt.value[i], {"i_j": p}), evaluate(rebuilt.value[j], {"i_j": p})) for p in range(15)]
    assert sorted(order) == every_point(index)
    assert order[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)] and order[-3:] == [(4, 0), (4, 1), (4, 2)]
    assert str(index.forward[g]) == "((i * 3) + j)"  # the order of programs is free: the plain fuse's value
    group = rebuilt.groups[g]  # the values the pair is made from, each one node of both (the code names it once)
    assert [evaluate(e, {"i_j": 13}) for e in (group.per_group, group.first, group.size)] == [6, 4, 1]
    assert rebuilt.value[i].a is group.first and rebuilt.value[j].b is group.size


def test_knob_factors_are_read_at_the_config():
    M, N = tc.size_vars("M N")
    C, s = elementwise(M, N)
    i, _ = C.axis
    BM = tc.knob("BM", [64, 128])
    io, ii = s[C].split(i, BM)
    for value in (64, 128):
        index = IndexMap(s[C], {"BM": value})
        assert index.factor(index.splits[0]) == value and index.top(ii) == value - 1
        assert index.extent[ii].value == value and size_text(index.extent[io]) == f"cdiv(M, {value})"
    rebuilt = index.rebuilt()
    assert str(rebuilt.value[i]) == "((io * BM) + ii)"  # the knob itself: a constexpr parameter in the kernel
    assert evaluate(rebuilt.value[i], {"io": 2, "ii": 5, "BM": 128}) == 261


def test_knob_factors_that_do_not_divide_guard_per_config():
    C, s = elementwise(12, 2)
    i, _ = C.axis
    io, ii = s[C].split(i, 6)
    s[C].split(ii, tc.knob("B", [2, 4]))
    assert IndexMap(s[C], {"B": 2}).rebuilt().guards[i] == ()
    index = IndexMap(s[C], {"B": 4})
    assert [str(g) for g in index.rebuilt().guards[i]] == ["(((iio * B) + iii) < 6)"]
    assert covered(index, {"B": 4}) == every_point(index)


def test_a_loop_that_runs_once_stands_for_zero():
    C, s = elementwise(10, 2)
    i, _ = C.axis
    io, ii = s[C].split(i, 16)
    index = IndexMap(s[C], {})
    rebuilt = index.rebuilt(zero={io})
    assert rebuilt.value[i] is ii and isinstance(rebuilt.block[i], Const) and rebuilt.block[i].value == 0
    assert index.rebuilt(zero={io}) is rebuilt and isinstance(index.rebuilt().value[i], Binary)
    assert covered(index, zero={io}) == every_point(index)


def test_the_plan_builds_one_map_per_placed_stage_with_its_layout():
    M, N = tc.size_vars("M N")
    C, s = elementwise(M, N)
    io, ii = s[C].split(C.axis[0], 32)
    s[C].bind(io, "program_id.0")
    plan = Plan(s)
    index = plan.index_maps["C"]
    assert index is plan.placed["C"].layout.index and index.origin is plan.placed["C"].layout.origin
    assert index.stage is s[C] and index.leaves == (io, ii, C.axis[1])


def test_axes_fixed_by_compute_at_are_named_in_the_order_of_the_compute():
    """A fusion of axes the place fixes is absorbed into the place (issue 25; it was refused), and the source
    names its axes in the compute's order, not in the order of a set of axes, which followed their ids ("j, i"
    in some runs, "i, j" in others: fuzz seeds 24300097, 1156)."""
    for _ in range(20):  # fresh axes, fresh ids
        X = tc.placeholder((16, 8), "float32", name="X")
        C = tc.compute((16, 8), lambda i, j, X=X: X[i, j] * 2.0, name="C")
        Y = tc.compute((16, 8), lambda i, j, C=C: C[i, j] + 1.0, name="Y")
        s = tc.create_schedule(Y)
        io, jo, ii, ji = s[Y].tile(*Y.axis, 8, 8)
        s[C].compute_at(s[Y], jo)
        s[C].fuse(*C.axis)
        assert "# C: fuse(i, j) absorbed: i, j follow Y's loops, which give them their values" in tc.lower(s).source()
    x = torch.randn(16, 8)
    torch.testing.assert_close(tc.build(s, [X, Y])(x), x * 2.0 + 1.0)
