"""store_at (issue 25, item 2): a stencil's producer stored outside the loop it is computed in slides its
window along that loop (Halide's sliding window): the first iteration computes the whole window, each later
one only the values the last window lacked. The values are those of compute_at alone; isl checks the
producer's time map (each element computed once, at the first iteration that reads it)."""

import pytest
import torch
from computes import blur, blur_reference

import tilec as tc
from tilec.plan import placement

SIZES = [(13, 21), (3, 3), (7, 5), (4, 18), (1, 20)]


def reference(x):
    return blur_reference(x)[1]


def per_row():
    """blur_y in column strips of 16, a program each, its rows in a serial loop; blur_x computed per row and
    stored at the strip: 3 rows in the first iteration, then 1."""
    X, bx, by = blur()
    s = tc.create_schedule(by)
    y, x = by.axis
    xo, xi = s[by].split(x, 16)
    s[by].reorder(xo, y, xi)
    s[by].bind(xo, "program_id.0")
    s[bx].compute_at(s[by], y)
    s[bx].store_at(s[by], xo)
    return s, [X, by]


def check(s, args, sizes=SIZES):
    kernel = tc.build(s, args)
    for h, w in sizes:
        if h < 3 or w < 3:
            continue
        x = torch.randn(h, w)
        torch.testing.assert_close(kernel(x), reference(x))
    x = torch.randn(11, 2 * 19)[:, ::2]  # non-contiguous
    torch.testing.assert_close(kernel(x), reference(x))
    x = torch.randn(7, 12)
    x[4, 7], x[0, 0] = float("nan"), float("inf")
    torch.testing.assert_close(kernel(x), reference(x), equal_nan=True)


def test_per_row_sliding_window_matches_and_says_so():
    s, args = per_row()
    src = tc.lower(s).source()
    assert "# blur_x stored at blur_y.xo (store_at): after the first y, only the 1 new value of y (a sliding window)" \
        in src, src
    assert "halo recomputed: y: 3 in the first y, then 1 per 1 in a tile of 4, sliding" in src
    assert "tl.minimum(y, 1)" in src
    check(s, args)


def test_sliding_blocks_of_a_tile():
    """blur_y tiled 4 x 16, the row tiles in a serial loop inside the column strip's program: blur_x computed
    per row tile (6 rows in the first, then 4), stored at the strip."""
    X, bx, by = blur()
    s = tc.create_schedule(by)
    yo, xo, yi, xi = s[by].tile(*by.axis, 4, 16)
    s[by].reorder(xo, yo, yi, xi)
    s[by].bind(xo, "program_id.0")
    s[bx].compute_at(s[by], yo)
    s[bx].store_at(s[by], xo)
    src = tc.lower(s).source()
    assert "only the 4 new values of y (a sliding window)" in src
    assert "y: 6 in the first yo, then 4 per 4 in a tile of 8, sliding" in src
    check(s, args=[X, by])


def test_store_at_the_compute_loop_is_compute_at_alone():
    s, args = per_row()
    X, by = args
    bx = next(t for t in s.stages.values() if t.name == "blur_x")
    bx.store_at(s[by], by.axis[0])  # the compute_at loop itself
    src = tc.lower(s).source()
    assert "sliding" not in src and "store_at):" not in src
    check(s, args)


def test_nothing_slides_where_the_loop_advances_no_shifted_axis():
    """blur_x at blur_y's column-tile loop xo, stored at the row tile yo: xo advances x, but blur_y reads blur_x
    shifted along y only, so each xo computes its window as without store_at, and the source says why."""
    X, bx, by = blur()
    s = tc.create_schedule(by)
    io, jo, ii, ji = s[by].tile(*by.axis, 8, 16)
    s[by].bind(io, "program_id.0")
    s[bx].compute_at(s[by], jo)
    s[bx].store_at(s[by], io)
    src = tc.lower(s).source()
    assert ("# blur_x stored at blur_y.yo (store_at): loop xo advances no axis blur_x is read shifted along (y) by "
            "one block per iteration, so nothing slides") in src, src
    check(s, [X, by])


def test_store_at_inside_the_compute_loop_is_refused():
    X, bx, by = blur()
    s = tc.create_schedule(by)
    yo, xo, yi, xi = s[by].tile(*by.axis, 4, 16)
    s[by].reorder(xo, yo, yi, xi)
    s[by].bind(xo, "program_id.0")
    s[bx].compute_at(s[by], xo)
    s[bx].store_at(s[by], yo)
    with pytest.raises(tc.LoweringError, match=r"store_at\(blur_x, blur_y.yo\): yo runs inside the loop blur_x is "
                                               r"computed at \(xo\); a stage is stored at its compute_at loop or "
                                               r"outside it"):
        tc.build(s, [X, by])


def test_store_at_without_compute_at_is_refused():
    X, bx, by = blur()
    s = tc.create_schedule(by)
    s[bx].store_at(s[by], by.axis[0])
    with pytest.raises(tc.LoweringError, match=r"store_at\(blur_x, blur_y.y\): blur_x is computed at root; store_at "
                                               r"keeps the values of a stage computed in blur_y's loops"):
        tc.build(s, [X, by])


def test_store_at_argument_errors():
    X, bx, by = blur()
    s = tc.create_schedule(by)
    with pytest.raises(tc.ArgumentError, match="store_at: blur_x cannot be stored at its own loop"):
        s[bx].store_at(s[bx], bx.axis[0])
    with pytest.raises(tc.ArgumentError, match="argument 1, 'stage' to store_at"):
        s[bx].store_at(by, by.axis[0])


def test_isl_refuses_a_window_that_slides_along_the_wrong_loop(monkeypatch):
    """The plan's rule picks the loop a window slides along; isl checks the result. Were the rule to slide
    blur_x's window along a loop that advances x (xo), later iterations would skip rows nobody computed:
    isl finds the read of a row no iteration wrote before it, and the schedule is refused, not miscompiled."""
    X, bx, by = blur()
    s = tc.create_schedule(by)
    io, jo, ii, ji = s[by].tile(*by.axis, 8, 16)
    s[by].bind(io, "program_id.0")
    s[bx].compute_at(s[by], jo)
    s[bx].store_at(s[by], io)
    monkeypatch.setattr(placement, "_advances", lambda lay, axis, loop: True)
    with pytest.raises(tc.IllegalScheduleError, match=r"breaks the order of blur_x -> blur_y"):
        tc.build(s, [X, by])


def test_store_at_is_in_the_trace_and_replays():
    s, args = per_row()
    code = str(s.trace)
    assert "blur_x.store_at(blur_y, blur_y_xo)" in code, code
    again = tc.replay(s.trace, [args[1]])
    assert tc.lower(again).source() == tc.lower(s).source()


def test_strips_in_parallel_with_their_rows_sliding():
    """Tiles of 8 rows a program (and 16 columns), the rows a loop inside (`split(yi, 1)`): y = yo * 8 + row +
    a tile of 1, so the window's block is linear in the row loop and slides by one row per row."""
    X, bx, by = blur()
    s = tc.create_schedule(by)
    yo, xo, yi, xi = s[by].tile(*by.axis, 8, 16)
    row, _ = s[by].split(yi, 1)
    s[by].bind(yo, "program_id.0")
    s[by].bind(xo, "program_id.1")
    s[bx].compute_at(s[by], row)
    s[bx].store_at(s[by], xo)
    src = tc.lower(s).source()
    assert "# blur_x stored at blur_y.xo (store_at): after the first yio, only the 1 new value of y" in src, src
    check(s, [X, by])


def test_the_cost_model_counts_the_recomputed_halo():
    """The tuner's analytic model (tilec/tune/cost.py) counts a halo's recomputed overlap and its window's
    round trip (`halo_work`): per row, blur_x costs 3 rows a row; stored at the strip, 1."""
    from tilec.plan.analysis import Analysis
    from tilec.plan.placement import halo_work
    from tilec.tune.cost import estimate

    shape = dict(H=4096, W=4096)
    s, _ = per_row()
    slid = estimate(s, {}, shape)
    assert halo_work(Analysis(s, {}).plan.placed["blur_x"]) == 1.0
    X, bx, by = blur()
    plain = tc.create_schedule(by)
    xo, xi = plain[by].split(by.axis[1], 16)
    plain[by].reorder(xo, by.axis[0], xi)
    plain[by].bind(xo, "program_id.0")
    plain[bx].compute_at(plain[by], by.axis[0])
    assert halo_work(Analysis(plain, {}).plan.placed["blur_x"]) == 3.0
    assert estimate(plain, {}, shape) > 1.5 * slid
