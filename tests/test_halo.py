"""Halo recompute (issue 25): a producer placed in a stencil's loops computes, in each iteration of its place,
the window of its axes that the iteration reads (`Placed.halo`, tilec/plan/placement.py), the overlap with the
neighbouring iterations computed again; the window goes through memory and is read back at the shifts.
Each schedule is compared with PyTorch at sizes that divide no tile and at the smallest sizes."""

from __future__ import annotations

import pytest
import torch
from computes import blur, blur_reference

import tilec as tc

SIZES = [(37, 45), (3, 3), (34, 34), (5, 70), (19, 5)]


def _blur():
    return blur(("bx", "by"))


_blur_ref = blur_reference


def _tile(s, bx, by, place="xo", f=(32, 32), order="yx"):
    y, x = by.axis
    yo, yi = s[by].split(y, f[0])
    xo, xi = s[by].split(x, f[1])
    s[by].reorder(*((yo, xo, yi, xi) if order == "yx" else (xo, yo, xi, yi)))
    s[by].bind(yo, f"program_id.{0 if order == 'yx' else 1}")
    s[by].bind(xo, f"program_id.{1 if order == 'yx' else 0}")
    s[bx].compute_at(s[by], dict(yo=yo, xo=xo)[place])


def _per_row(s, bx, by):
    y, x = by.axis
    xo, xi = s[by].split(x, 64)
    s[by].reorder(xo, y, xi)
    s[by].bind(xo, "program_id.0")
    s[bx].compute_at(s[by], y)  # a serial loop over rows: three rows of bx per row of by


def _strip(s, bx, by):
    y, x = by.axis
    yo, yi = s[by].split(y, 8)
    xo, xi = s[by].split(x, 16)
    s[by].reorder(yo, xo, yi, xi)
    s[by].bind(yo, "program_id.0")
    s[bx].compute_at(s[by], xo)  # a serial loop over column tiles: 10 rows x 16 columns each


SCHEDULES = {
    "tile_xo": _tile,
    "tile_yo": lambda s, bx, by: _tile(s, bx, by, place="yo"),
    "tile_8x16": lambda s, bx, by: _tile(s, bx, by, f=(8, 16)),
    "tile_transposed_grid": lambda s, bx, by: _tile(s, bx, by, f=(16, 16), order="xy"),
    "per_row": _per_row,
    "strip": _strip,
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_blur_halo_schedules_match_torch(name):
    X, bx, by = _blur()
    s = tc.create_schedule(by)
    SCHEDULES[name](s, bx, by)
    kernel = tc.build(s, [X, by])
    assert len(tc.lower(s).kernels) == 1  # blur_x runs in blur_y's kernel
    for h, w in SIZES:
        x = torch.randn(h, w)
        x[h // 2, w // 2] = float("nan") if h > 4 else x[0, 0]
        torch.testing.assert_close(kernel(x), _blur_ref(x)[1], equal_nan=True)


def test_blur_halo_on_non_contiguous_input():
    X, bx, by = _blur()
    s = tc.create_schedule(by)
    _tile(s, bx, by, f=(16, 16))
    kernel = tc.build(s, [X, by])
    x = torch.randn(45, 37).t()  # a transposed view: strides (1, 37)
    torch.testing.assert_close(kernel(x), _blur_ref(x)[1])


def test_halo_cost_is_shown_in_the_nest():
    X, bx, by = _blur()
    s = tc.create_schedule(by)
    _tile(s, bx, by)
    text = str(tc.lower(s))
    assert "bx's region stored (halo recomputed: y: 34 per 32 in a tile of 64, 1.06x the work)" in text
    assert "its region, in memory (halo recomputed: y: 34 per 32 in a tile of 64, 1.06x the work)" in tc.lower(s).source()


def test_halo_producer_that_is_also_an_output():
    """The windows of a stencil (rows y to y + 2 of bx for rows y of by) cover all of bx here: bx can be an
    output too, each of its elements stored by some program."""
    X, bx, by = _blur()
    s = tc.create_schedule(by)
    _tile(s, bx, by, f=(16, 16))
    kernel = tc.build(s, [X, bx, by])
    x = torch.randn(37, 45)
    got_bx, got_by = kernel(x)
    want_bx, want_by = _blur_ref(x)
    torch.testing.assert_close(got_bx, want_bx)
    torch.testing.assert_close(got_by, want_by)


def _one_sided():
    """by reads bx one row further only: bx's row 0 is in no window."""
    H, W = tc.size_vars("H W")
    X = tc.placeholder((H, W), "float32", name="X")
    bx = tc.compute((H, W), lambda y, x: X[y, x] * 2.0, name="bx")
    by = tc.compute((H - 1, W), lambda y, x: bx[y + 1, x] + 1.0, name="by")
    s = tc.create_schedule(by)
    y, x = by.axis
    yo, yi = s[by].split(y, 16)
    s[by].bind(yo, "program_id.0")
    s[bx].compute_at(s[by], yo)
    return s, X, bx, by


def test_halo_window_that_misses_rows_of_an_output_is_refused():
    s, X, bx, by = _one_sided()
    with pytest.raises(tc.TilecError, match=r"bx is computed at by's loops, each iteration computing the window of "
                                            r"bx.y it reads \(by.y \+1 to \+1\), but bx is an output of the kernel, "
                                            r"so it must be computed whole.*\(sizes H="):
        tc.build(s, [X, bx, by])


def test_halo_window_that_misses_rows_nobody_reads_builds():
    s, X, bx, by = _one_sided()
    kernel = tc.build(s, [X, by])
    x = torch.randn(40, 7)
    torch.testing.assert_close(kernel(x), x[1:] * 2.0 + 1.0)


def test_consumer_in_producer_loops_reading_shifted_positions_is_refused():
    X, bx, by = _blur()
    s = tc.create_schedule(by)
    y, x = bx.axis
    yo, xo, yi, xi = s[bx].tile(y, x, 16, 16)
    s[bx].bind(yo, "program_id.0")
    s[bx].bind(xo, "program_id.1")
    with pytest.raises(tc.TilecError, match=r"breaks the order of bx -> by: by\[\d+, \d+\] would run .*before "
                                            r"bx\[\d+, \d+\]"):
        s[by].compute_at(s[bx], yo)


def test_stencil_after_a_reduction_placed_in_its_loops():
    """A channel sum placed at a 3x3 box filter's tile: the sum is complete over its window before the box
    reads it (isl: the rounding rule holds), the window's border computed again by the neighbours."""
    C, H, W = tc.size_vars("C H W")
    X = tc.placeholder((C, H, W), "float32", name="X")
    c = tc.reduce_axis(C, name="c")
    E = tc.compute((H, W), lambda y, x: tc.sum(X[c, y, x], axis=c), name="E")
    B = tc.compute((H - 2, W - 2), lambda y, x: E[y, x] + E[y + 2, x + 1] * 2.0 + E[y + 1, x + 2], name="B")
    s = tc.create_schedule(B)
    y, x = B.axis
    yo, xo, yi, xi = s[B].tile(y, x, 8, 16)
    s[B].bind(yo, "program_id.0")
    s[B].bind(xo, "program_id.1")
    s[E].split(c, 2)
    s[E].compute_at(s[B], xo)
    kernel = tc.build(s, [X, B])
    for shape in [(3, 19, 21), (1, 3, 3), (5, 9, 40)]:
        x = torch.randn(*shape)
        e = x.sum(0)
        h, w = e.shape
        want = e[:h - 2, :w - 2] + e[2:, 1:w - 1] * 2.0 + e[1:h - 1, 2:]
        torch.testing.assert_close(kernel(x), want, rtol=1e-5, atol=1e-5)


def test_producer_read_at_computed_positions_is_refused_with_an_access_of_its_rank():
    N = tc.size_vars("N")
    X = tc.placeholder((2 * N,), "float32", name="X")
    P = tc.compute((2 * N,), lambda i: X[i] * 2.0, name="P")
    Y = tc.compute((N,), lambda i: P[i * 2] + 1.0, name="Y")
    s = tc.create_schedule(Y)
    io, ii = s[Y].split(Y.axis[0], 16)
    s[Y].bind(io, "program_id.0")
    s[P].compute_at(s[Y], io)  # not lowerable: left to build
    with pytest.raises(tc.LoweringError, match=r"compute_at\(P, Y\): not supported: Y reads P at computed positions "
                                               r"\(an index that is not an axis plus a constant\).*like P\[i\] or "
                                               r"P\[i \+ 1\]\. Compute P at root instead"):
        tc.lower(s)


def test_halo_over_a_consumer_axis_that_is_not_one_block_is_refused():
    """by's rows and columns fused, then tiled: in one program by.y takes the values of a run of the fused
    axis, no block of its own, so there is no window of bx's rows to compute."""
    X, bx, by = _blur()
    s = tc.create_schedule(by)
    f = s[by].fuse(*by.axis)
    fo, fi = s[by].split(f, 64)
    s[by].bind(fo, "program_id.0")
    s[bx].compute_at(s[by], fo)
    with pytest.raises(tc.LoweringError, match=r"bx is computed at by's loops and read at shifted positions of by.y "
                                               r"\(a halo\), whose values in one iteration there are not one block of "
                                               r"a tile"):
        tc.lower(s)


def test_a_window_over_a_block_of_two_tile_dims():
    """blur_y's rows split by 4, the tiles' loop split again by 2 (y = yoo * 8 + yoi * 4 + yi, two tile dims):
    the window of blur_x at the tile runs from the block's first row over its 8 rows + 2 (it was refused: "not
    one block of a tile")."""
    H, W = tc.size_vars("H W")
    X = tc.placeholder((H, W), "float32", name="X")
    bx = tc.compute((H, W - 2), lambda y, x: (X[y, x] + X[y, x + 1] + X[y, x + 2]) / 3.0, name="blur_x")
    by = tc.compute((H - 2, W - 2), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3.0, name="blur_y")
    s = tc.create_schedule(by)
    yo, yi = s[by].split(by.axis[0], 4)
    xo, xi = s[by].split(by.axis[1], 16)
    yoo, yoi = s[by].split(yo, 2)
    s[by].reorder(yoo, xo, yoi, yi, xi)
    s[by].bind(yoo, "program_id.0")
    s[by].bind(xo, "program_id.1")
    s[bx].compute_at(s[by], xo)
    assert "halo recomputed: y: 10 per 8 in a tile of 16" in tc.lower(s).source()
    kernel = tc.build(s, [X, by])
    for h, w in ((21, 37), (3, 3), (9, 5)):
        x = torch.randn(h, w)
        b = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3.0
        torch.testing.assert_close(kernel(x), (b[:-2] + b[1:-1] + b[2:]) / 3.0)
