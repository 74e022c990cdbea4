"""Scans (tc.cumsum, tc.cumprod, tc.cummax, tc.cummin, tc.linear_scan) against PyTorch.

Every scan, in float32, on sizes that divide no tile (and size-1 dimensions), under schedules that tile
the scan axis, split it several times, unroll a part of it, leave it a plain serial loop, pad its tile
(24) or sub-tile it (48), scan along the first, middle or last axis of a 2-D or 3-D compute; inputs that
are fresh random values, strided views, and rows with NaN and infinities (a NaN propagates from the first
one on, as torch's does; the running max/min is exact); int32 and a float16 scan accumulated in float32.
Then the placements (a consumer in the scan loop, the scan at a consumer's row loop) and every refusal
(grid-bound, fused or misordered scan axis, two tiles of it, inlining, a place inside the scan, a reader of
the total inside the scan loop, compute_with).

The fast tier is a handful of small kernels; the slow tier (`--full`) is the sweep.
"""

from __future__ import annotations

import math

import pytest
import torch

import tilec as tc

B, T, C = tc.size_vars("B T C")
OPS = ["cumsum", "cumprod", "cummax", "cummin", "linear_scan"]
NAN, INF = math.nan, math.inf


# ---------------------------------------------------------------------------------------------
# computes, inputs and references


def _scan_body(op, loads, axis, acc_dtype=None):
    if op == "linear_scan":
        return tc.linear_scan(loads[0], loads[1], axis=axis, acc_dtype=acc_dtype)
    if op == "ema":  # a number for a: an exponential moving average
        return tc.linear_scan(0.9, loads[0], axis=axis, acc_dtype=acc_dtype)
    return getattr(tc, op)(loads[0], axis=axis, acc_dtype=acc_dtype)


def _n_inputs(op):
    return 2 if op == "linear_scan" else 1


AXES = {  # (dims, scan dim) -> the compute's function, its axes named b, t (the scan axis), c
    (2, 1): lambda f: lambda b, t: f(b, t),
    (2, 0): lambda f: lambda t, b: f(t, b),
    (3, 1): lambda f: lambda b, t, c: f(b, t, c),
    (3, 2): lambda f: lambda b, c, t: f(b, c, t),
}


def _compute(op, shape, dim, in_dtype="float32", dtype=None, acc_dtype=None):
    """Y = op(X..., axis=Y.axis[dim]) over `shape` (sizes), inputs of `in_dtype`: (inputs, Y)."""
    xs = [tc.placeholder(shape, in_dtype, name=f"X{k}") for k in range(_n_inputs(op))]

    def body(*ax):
        return _scan_body(op, [x[ax] for x in xs], ax[dim], acc_dtype)

    fn = AXES[(len(shape), dim)](body)  # the axes named b, t (the scan), c
    Y = tc.compute(shape, fn, name="Y", dtype=dtype)
    return xs, Y


def _reference(op, xs, dim):
    """torch's scan in float64 (cummax/cummin: torch's values, exact); linear_scan: the loop itself."""
    if op in ("cumsum", "cumprod"):
        return getattr(torch, op)(xs[0].double(), dim)
    if op == "cummax":
        return torch.cummax(xs[0], dim).values.double()
    if op == "cummin":
        return torch.cummin(xs[0], dim).values.double()
    a, b = (xs[0].double(), xs[1].double()) if op == "linear_scan" else (torch.full_like(xs[0].double(), 0.9),
                                                                          xs[0].double())
    a, b = a.movedim(dim, 0), b.movedim(dim, 0)
    h, out = torch.zeros_like(b[0]), []
    for t in range(b.shape[0]):
        h = a[t] * h + b[t]
        out.append(h)
    return torch.stack(out).movedim(0, dim) if out else torch.empty_like(b).movedim(0, dim)


def _rows(op, kind, rows, length):
    """The inputs as (rows, length) tensors, the scan running along `length`."""
    def randn():
        return torch.randn(rows, length)

    if op == "linear_scan":
        a, b = torch.rand(rows, length), randn()
        if kind == "shifted":  # a near 1 (a long memory), b > 0: a carry lost between tiles shows
            a, b = 1 - 0.01 * torch.rand(rows, length), 1 + torch.rand(rows, length)
        if kind == "edges":
            for r in range(rows):
                p = length // 2
                if r % 5 == 0:
                    b[r, p] = NAN                    # NaN from p on
                elif r % 5 == 1:
                    a[r, ::5] = 0.0                  # the state restarts
                elif r % 5 == 2:
                    a[r] = 1.0                       # a plain cumsum
                elif r % 5 == 3 and p > 0:
                    a[r, p] = NAN                    # NaN from p on (p > 0: a[0] multiplies h[-1] = 0)
        return [a, b]
    x = randn()
    if op == "cumprod":
        x = 1 + 0.1 * x
    if kind == "shifted":  # one sign all along: a tile padded with 0 (not the identity) shows
        x = {"cumsum": x.abs() + 1, "cumprod": 1.01 + 0.01 * x.abs(), "cummax": -x.abs() - 3,
             "cummin": x.abs() + 3, "ema": x.abs() + 1}[op]
    if kind == "edges":
        for r in range(rows):
            case = r % 6
            if case == 0:
                x[r, length // 2] = NAN
            elif case == 1:
                x[r, 0] = INF
                x[r, (2 * length) // 3] = -INF
            elif case == 2:
                x[r, length // 3] = -INF
            elif case == 3:
                x[r, 0] = NAN
            elif case == 4:
                x[r, length // 2] = 0.0 if op == "cumprod" else INF
                x[r, -1] = INF if op == "cumprod" else NAN
            else:                                    # all -inf (the running max's identity), or +inf
                x[r] = INF if op == "cummin" else -INF
    return [x]


def _mixed_rows(op, rows, length):
    """Rows that cycle through randn, shifted and edges (the edge cases in the order of their own rows)."""
    n = -(-rows // 3)
    kinds = [_rows(op, kind, n, length) for kind in ("randn", "shifted", "edges")]
    return [torch.stack([kinds[r % 3][i][r // 3] for r in range(rows)]) for i in range(_n_inputs(op))]


def _inputs(op, kind, shape, dim):
    """Inputs of `shape` (ints) for `op`, scanned along `dim`: kind is randn, strided (a non-contiguous view
    of the same values), shifted (one sign all along), edges (NaN, +-inf, 0 in some rows) or mixed (rows of
    randn, shifted and edges in turn)."""
    length = shape[dim]
    others = [n for d, n in enumerate(shape) if d != dim]
    rows = math.prod(others)
    out = []
    made = _mixed_rows(op, rows, length) if kind == "mixed" else \
        _rows(op, "randn" if kind == "strided" else kind, rows, length)
    for x in made:
        x = x.reshape(*others, length).movedim(-1, dim)
        if kind == "strided":
            y = torch.empty(tuple(reversed(x.shape))).permute(*reversed(range(x.dim())))
            y.copy_(x)
            x = y
        else:
            x = x.contiguous()
        out.append(x)
    return out


TOL = {"cumsum": (1e-4, 1e-4), "cumprod": (1e-4, 1e-5), "cummax": (0.0, 0.0), "cummin": (0.0, 0.0),
       "linear_scan": (1e-4, 1e-4), "ema": (1e-4, 1e-4)}


def _mismatch(out, ref, rtol, atol):
    """None where `out` is `ref` (NaN where it has NaN, infinities equal, the rest close), else what differs."""
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    o, r = out.double(), ref.double()
    nan = o.isnan() != r.isnan()
    if nan.any():
        at = nan.nonzero()[0].tolist()
        return f"NaN differs at {at}: got {o[tuple(at)].item()}, expected {r[tuple(at)].item()}"
    ok = torch.isclose(o, r, rtol=rtol, atol=atol) | (o.isnan() & r.isnan())
    if not ok.all():
        bad = (~ok).nonzero()
        at = bad[0].tolist()
        return (f"{bad.shape[0]} of {o.numel()} values differ, first at {at}: got {o[tuple(at)].item()}, "
                f"expected {r[tuple(at)].item()}")
    return None


def _check(kernel, op, cases, dim):
    """Run `kernel` on inputs of each (shape, kind) of `cases`; the list of what differs from torch."""
    fails = []
    for shape, kind in cases:
        xs = _inputs(op, kind, shape, dim)
        out = kernel(*xs)
        assert out.dtype == torch.float32
        why = _mismatch(out, _reference(op, xs, dim), *TOL[op])
        if why:
            fails.append(f"{op} shape={shape} dim={dim} inputs={kind}: {why}")
    return fails


# ---------------------------------------------------------------------------------------------
# schedules: each takes (s, Y) and schedules Y, whose axes are (other, scan) for the 2-D computes


def _default(s, Y):
    pass


def _tile_4x16(s, Y):          # a 2-D tile (4 rows x 16 of the scan), the row tiles on the grid
    b, t = Y.axis
    bo, bi = s[Y].split(b, 4)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(bo, to, bi, ti)
    s[Y].bind(bo, "program_id.0")


def _row_tile16(s, Y):         # one row per program, a scan tile of 16 in a serial loop
    b, t = Y.axis
    s[Y].split(t, 16)
    s[Y].bind(b, "program_id.0")


def _whole_128(s, Y):          # one tile covers the axis (T <= 128: the scan loop runs once)
    b, t = Y.axis
    s[Y].split(t, 128)
    s[Y].bind(b, "program_id.0")


def _serial_rows_tile(s, Y):   # no tile on the scan axis: a serial loop over t, a tile of 2 rows
    b, t = Y.axis
    bo, bi = s[Y].split(b, 2)
    s[Y].reorder(bo, t, bi)
    s[Y].bind(bo, "program_id.0")


def _serial_plain(s, Y):       # the scan axis a plain serial leaf, one row per program
    b, _ = Y.axis
    s[Y].bind(b, "program_id.0")


def _tile_of_1(s, Y):
    b, t = Y.axis
    s[Y].split(t, 1)
    s[Y].bind(b, "program_id.0")


def _padded_24(s, Y):          # a tile of 24: tl.arange(0, 32), 8 lanes masked
    b, t = Y.axis
    bo, bi = s[Y].split(b, 2)
    to, ti = s[Y].split(t, 24)
    s[Y].reorder(bo, to, bi, ti)
    s[Y].bind(bo, "program_id.0")


def _subtiled_48(s, Y):        # a tile of 48 on the root stage: sub-tiles of 32 and 16
    b, t = Y.axis
    s[Y].split(t, 48)
    s[Y].bind(b, "program_id.0")


def _split_twice(s, Y):        # t = to * 32 + tio * 8 + tii: two serial loops, then a tile of 8
    b, t = Y.axis
    _, ti = s[Y].split(t, 32)
    s[Y].split(ti, 8)
    s[Y].bind(b, "program_id.0")


def _unrolled(s, Y):           # t = too * 32 + toi * 16 + ti: toi unrolled, ti a tile
    b, t = Y.axis
    to, _ = s[Y].split(t, 16)
    _, toi = s[Y].split(to, 2)
    s[Y].unroll(toi)
    s[Y].bind(b, "program_id.0")


def _t_major(s, Y):            # a 16 x 4 tile, the scan its first dimension (tile order is the layout)
    b, t = Y.axis
    bo, bi = s[Y].split(b, 4)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(bo, to, ti, bi)
    s[Y].bind(bo, "program_id.0")


def _rows_subtiled_48(s, Y):   # the row axis sub-tiled (48 = 32 + 16), the scan a tile of 16 in a loop
    b, t = Y.axis
    bo, bi = s[Y].split(b, 48)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(bo, to, bi, ti)
    s[Y].bind(bo, "program_id.0")


def _unrolled_tile(s, Y):      # the inner part unrolled: no tile of t at all, a tile of 4 rows
    b, t = Y.axis
    bo, bi = s[Y].split(b, 4)
    to, ti = s[Y].split(t, 4)
    s[Y].unroll(ti)
    s[Y].reorder(bo, to, ti, bi)
    s[Y].bind(bo, "program_id.0")


def _one_program(s, Y):        # nothing on the grid: the row loop serial, outside the scan loop
    b, t = Y.axis
    bo, bi = s[Y].split(b, 2)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(bo, to, bi, ti)


SCHEDULES = {f.__name__.lstrip("_"): f for f in (
    _default, _tile_4x16, _row_tile16, _whole_128, _serial_rows_tile, _serial_plain, _tile_of_1, _padded_24,
    _subtiled_48, _split_twice, _unrolled, _t_major, _rows_subtiled_48, _unrolled_tile, _one_program)}
# (shape, inputs) of the sweep: rows of 37 and 129 (no tile divides them), 128, 1; contiguous rows of every
# kind in turn, and a strided view. Schedules that run the interpreter once per element get shorter rows.
CASES = [((18, 37), "mixed"), ((3, 37), "strided"), ((1, 1), "mixed"), ((3, 128), "mixed"), ((6, 129), "mixed")]
SHORT_CASES = [((18, 20), "mixed"), ((3, 20), "strided"), ((1, 1), "mixed")]
PER_ELEMENT = ("serial_rows_tile", "serial_plain", "tile_of_1", "unrolled_tile")


def _kernel(op, schedule, shape=(B, T), dim=1, **kw):
    xs, Y = _compute(op, shape, dim, **kw)
    s = tc.create_schedule(Y)
    schedule(s, Y)
    return tc.build(s, [*xs, Y])


# ---------------------------------------------------------------------------------------------
# fast tier


@pytest.mark.parametrize("op", OPS)
def test_scan_matches_torch(op):
    """Each scan, a 4 x 16 tile, the scan loop serial: three rows of 37 (the row tile and the last scan tile
    masked) and a 1 x 1; and a padded tile of 24 (8 idle lanes in every tile, which must hold the identity:
    the carry is the last lane) on rows of one sign."""
    k = _kernel(op, _tile_4x16)
    fails = _check(k, op, [((3, 37), "randn"), ((1, 1), "randn")], 1)
    fails += _check(_kernel(op, _padded_24), op, [((2, 37), "shifted")], 1)
    assert not fails, "\n".join(fails)


def test_default_schedule_scans():
    """No primitive: the default schedule builds a scan and it is right (along the last and the first axis)."""
    fails = []
    for dim in (1, 0):
        shape = (B, T) if dim == 1 else (T, B)
        k = _kernel("cumsum", _default, shape, dim)
        fails += _check(k, "cumsum", [(size if dim == 1 else size[::-1], "randn")
                                      for size in ((3, 37), (1, 1), (2, 1100))], dim)
    assert not fails, "\n".join(fails)


def test_first_axis_and_3d_scans():
    """A scan along the first axis (Y[t, b], b the tile's last dimension) and along the middle axis of a 3-D
    compute (c tiled, its loop outside t's), tiled as the sweep does; cumprod, whose padded lanes must be 1."""
    fails = _check(_kernel("cumprod", _first_tiled, (T, B), 0), "cumprod",
                   [((37, 18), "mixed"), ((1, 1), "randn")], 0)
    fails += _check(_kernel("cumprod", _three_d_tiled, (B, T, C), 1), "cumprod",
                    [((2, 37, 9), "randn"), ((1, 1, 1), "randn")], 1)
    assert not fails, "\n".join(fails)


def test_nan_and_infinities_propagate():
    """cummax/cummin/cumsum on rows with NaN and +-inf: NaN from the first NaN on (torch's cummax); across the
    scan tiles (a tile of 16 on rows of 37) too."""
    fails = []
    for op in ("cummax", "cummin", "cumsum"):
        fails += _check(_kernel(op, _row_tile16), op, [((6, 37), "edges"), ((2, 37), "shifted")], 1)
    assert not fails, "\n".join(fails)


def test_int32_cumsum_is_exact():
    """int32 in, int32 accumulator and result (wrapping as torch's int32 sum cast back does)."""
    xs, Y = _compute("cumsum", (B, T), 1, in_dtype="int32")
    assert Y.dtype == "int32"
    s = tc.create_schedule(Y)
    _tile_4x16(s, Y)
    k = tc.build(s, [*xs, Y])
    for x in (torch.randint(-1000, 1000, (3, 37), dtype=torch.int32),
              torch.randint(-2**30, 2**30, (2, 50), dtype=torch.int32)):
        y = k(x)
        assert y.dtype == torch.int32 and torch.equal(y, torch.cumsum(x, 1).to(torch.int32))


def test_float16_cumsum_accumulates_in_float32():
    """float16 in, acc_dtype float32, stored float16: torch's float32 cumsum rounded to half."""
    xs, Y = _compute("cumsum", (B, T), 1, in_dtype="float16", dtype="float16", acc_dtype="float32")
    s = tc.create_schedule(Y)
    _row_tile16(s, Y)
    k = tc.build(s, [*xs, Y])
    x = torch.randn(3, 300).half()
    y = k(x)
    ref = torch.cumsum(x.float(), 1).half()
    assert y.dtype == torch.float16
    assert torch.allclose(y.float(), ref.float(), rtol=2e-3, atol=2e-3), (y.float() - ref.float()).abs().max()


@pytest.mark.parametrize("keep_y", [True, False])
def test_consumer_in_the_scan_loop(keep_y):
    """Z = Y * 2 computed at Y's scan loop: each iteration doubles the tile it finished; Y kept as an
    output or only in registers."""
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t), name="Y")
    Z = tc.compute((B, T), lambda b, t: Y[b, t] * 2.0, name="Z")
    s = tc.create_schedule([Y, Z] if keep_y else Z)
    b, t = Y.axis
    bo, bi = s[Y].split(b, 4)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(bo, to, bi, ti)
    s[Y].bind(bo, "program_id.0")
    s[Z].compute_at(s[Y], to)
    k = tc.build(s, [X, Y, Z] if keep_y else [X, Z])
    x = torch.randn(3, 37)
    ref = torch.cumsum(x.double(), 1)
    out = k(x)
    y, z = out if keep_y else (None, out)
    assert not _mismatch(z, 2 * ref, 1e-4, 1e-4), _mismatch(z, 2 * ref, 1e-4, 1e-4)
    if keep_y:
        assert not _mismatch(y, ref, 1e-4, 1e-4), _mismatch(y, ref, 1e-4, 1e-4)


def _normalized():
    """Y = cumsum(X) along t, Z = Y / Y[b, T - 1]: Z reads the scan's total."""
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t), name="Y")
    Z = tc.compute((B, T), lambda b, t: Y[b, t] / Y[b, T - 1], name="Z")
    return X, Y, Z


def test_reader_of_the_total_refused_in_the_scan_loop():
    """Z reads Y[b, T - 1]: placed at Y's scan loop it would read a partial scan, an IllegalScheduleError;
    computed at root it is right."""
    X, Y, Z = _normalized()
    s = tc.create_schedule(Z)
    b, t = Y.axis
    s[Y].bind(b, "program_id.0")
    to, ti = s[Y].split(t, 16)
    with pytest.raises(tc.IllegalScheduleError, match="breaks the order of Y -> Z"):
        s[Z].compute_at(s[Y], to)
        tc.lower(s)
    s = tc.create_schedule(Z)
    k = tc.build(s, [X, Z])
    x = torch.rand(3, 37) + 0.5
    ref = torch.cumsum(x.double(), 1)
    why = _mismatch(k(x), ref / ref[:, -1:], 1e-4, 1e-5)
    assert not why, why


@pytest.mark.parametrize("own_split", [False, True])
def test_scan_at_the_consumers_row_loop(own_split):
    """Y (a scan along t) computed at Z's row loop: Y's scan axis loops inside the place, whole, and Z reads
    it tile by tile; with Y's default schedule there and with Y's own split."""
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t), name="Y")
    Z = tc.compute((B, T), lambda b, t: tc.exp(Y[b, t] * 0.1), name="Z")
    s = tc.create_schedule(Z)
    zb, zt = Z.axis
    s[Z].split(zt, 16)
    s[Z].bind(zb, "program_id.0")
    if own_split:
        s[Y].split(Y.axis[1], 8)
    s[Y].compute_at(s[Z], zb)
    k = tc.build(s, [X, Z])
    fails = []
    for size in ((3, 37), (1, 1)):
        x = torch.randn(*size)
        why = _mismatch(k(x), torch.exp(torch.cumsum(x.double(), 1) * 0.1), 1e-4, 1e-5)
        if why:
            fails.append(f"size={size}: {why}")
    assert not fails, "\n".join(fails)


# the refusals --------------------------------------------------------------------------------


def test_scan_must_be_the_whole_body_along_an_own_axis():
    X = tc.placeholder((B, T), "float32", name="X")
    with pytest.raises(tc.ArgumentError, match="whole body"):
        tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t) * 2, name="Y")
    with pytest.raises(tc.ArgumentError, match="whole body"):
        tc.compute((B, T), lambda b, t: tc.where(X[b, t] > 0, tc.cummax(X[b, t], axis=t), 0.0), name="Y")
    with pytest.raises(tc.ArgumentError, match="whole body"):
        tc.compute((B, T), lambda b, t: tc.linear_scan(0.5, X[b, t], axis=t) + X[b, t], name="Y")
    k = tc.reduce_axis(T, name="k")
    with pytest.raises(tc.ArgumentError, match="own axes"):
        tc.compute((B, T), lambda b, t: tc.cumsum(X[b, k], axis=k), name="Y")
    other = tc.compute((B, T), lambda b, t: X[b, t], name="W")
    with pytest.raises(tc.ArgumentError, match="not one of this compute's axes"):
        tc.compute((B, T), lambda b, u: tc.cumsum(X[b, u], axis=other.axis[1]), name="Y")


def _scan2d(op="cumsum"):
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: _scan_body(op, [X[b, t]] * _n_inputs(op), t), name="Y")
    return X, Y


def _refuse(schedule, match, error=tc.TilecError, op="cumsum"):
    """`schedule(s, Y)` (and then lowering) raises `error` matching `match`, whichever step refuses."""
    X, Y = _scan2d(op)
    s = tc.create_schedule(Y)
    with pytest.raises(error, match=match):
        schedule(s, Y)
        tc.lower(s)


def _bind_scan_outer(s, Y):
    b, t = Y.axis
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(to, b, ti)
    s[Y].bind(to, "program_id.0")


def _bind_scan_axis(s, Y):
    b, t = Y.axis
    s[Y].bind(b, "program_id.0")
    s[Y].bind(t, "program_id.1")


def _bind_scan_serial_part(s, Y):   # t = to * 16 + tio * 4 + tii, tio on the grid
    b, t = Y.axis
    _, ti = s[Y].split(t, 16)
    tio, _ = s[Y].split(ti, 4)
    s[Y].bind(b, "program_id.0")
    s[Y].bind(tio, "program_id.1")


def _fuse_scan_axis(s, Y):
    b, t = Y.axis
    bt = s[Y].fuse(b, t)
    s[Y].split(bt, 16)


def _fuse_scan_outer(s, Y):
    b, t = Y.axis
    bo, to, _, _ = s[Y].tile(b, t, 4, 16)
    g = s[Y].fuse(bo, to)
    s[Y].bind(g, "program_id.0")


def _fuse_scan_outer_serial(s, Y):  # the fused loop serial: still the scan axis mixed with another
    b, t = Y.axis
    bo, to, _, _ = s[Y].tile(b, t, 4, 16)
    s[Y].fuse(bo, to)


def _row_loop_inside_scan_loop(s, Y):
    b, t = Y.axis
    bo, to, _, _ = s[Y].tile(b, t, 4, 16)
    s[Y].reorder(to, bo)


def _row_loop_inside_plain_scan(s, Y):
    b, t = Y.axis
    s[Y].reorder(t, b)


def _two_scan_tiles(s, Y):
    b, t = Y.axis
    to, _ = s[Y].split(t, 16)
    s[Y].split(to, 2)              # toi: a second tile of t
    s[Y].bind(b, "program_id.0")


def _inner_part_outside(s, Y):     # tio (the inner serial part) runs outside to
    b, t = Y.axis
    to, ti = s[Y].split(t, 16)
    tio, _ = s[Y].split(ti, 4)
    s[Y].reorder(tio, to)
    s[Y].bind(b, "program_id.0")


def _unrolled_inner_outside(s, Y):  # toi (unrolled) outside too
    b, t = Y.axis
    to, _ = s[Y].split(t, 8)
    too, toi = s[Y].split(to, 2)
    s[Y].unroll(toi)
    s[Y].reorder(toi, too)
    s[Y].bind(b, "program_id.0")


REFUSED = {
    "bind_scan_outer": (_bind_scan_outer, "run in parallel depend on each other"),
    "bind_scan_axis": (_bind_scan_axis, "run in parallel depend on each other"),
    "bind_scan_serial_part": (_bind_scan_serial_part, "breaks the order|run in parallel depend"),
    "fuse_scan_axis": (_fuse_scan_axis, "fuses the scan axis t"),
    "fuse_scan_outer": (_fuse_scan_outer, "fuses the scan axis t"),
    "fuse_scan_outer_serial": (_fuse_scan_outer_serial, "fuses the scan axis t"),
    "row_loop_inside_scan_loop": (_row_loop_inside_scan_loop, "runs inside the scan loop"),
    "row_loop_inside_plain_scan": (_row_loop_inside_plain_scan, "runs inside the scan loop"),
    "two_scan_tiles": (_two_scan_tiles, "at most one tile"),
    "inner_part_outside": (_inner_part_outside, "breaks the order"),
    "unrolled_inner_outside": (_unrolled_inner_outside, "breaks the order"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_scan_schedule_refused(case):
    schedule, match = REFUSED[case]
    _refuse(schedule, match)


def test_scan_stage_not_inlined():
    X, Y = _scan2d()
    Z = tc.compute((B, T), lambda b, t: Y[b, t] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    with pytest.raises(tc.TilecError, match="is a scan along t"):
        s[Y].compute_inline()
        tc.lower(s)


@pytest.mark.parametrize("place", ["zto", "zti", "zt"])
def test_scan_stage_not_placed_inside_the_scan_axis(place):
    """Y placed at a consumer's loop that fixes Y's scan axis (the consumer's t loop, or a tile of it) would
    scan only that piece: refused."""
    X, Y = _scan2d()
    Z = tc.compute((B, T), lambda b, t: Y[b, t] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    zb, zt = Z.axis
    s[Z].bind(zb, "program_id.0")
    if place == "zt":
        target = zt
    else:
        zto, zti = s[Z].split(zt, 16)
        target = zto if place == "zto" else zti
    with pytest.raises(tc.TilecError, match="start the scan afresh"):
        s[Y].compute_at(s[Z], target)
        tc.lower(s)


@pytest.mark.parametrize("scan_first", [True, False])
def test_scan_stage_not_in_compute_with(scan_first):
    """Y (a scan) and U (elementwise) placed at Z's row loop: neither may share a loop with the other."""
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t), name="Y")
    U = tc.compute((B, T), lambda b, t: X[b, t] * 3.0, name="U")
    Z = tc.compute((B, T), lambda b, t: Y[b, t] + U[b, t], name="Z")
    s = tc.create_schedule(Z)
    zb, zt = Z.axis
    s[Z].bind(zb, "program_id.0")
    s[Z].split(zt, 16)
    yto, _ = s[Y].split(Y.axis[1], 16)
    uto, _ = s[U].split(U.axis[1], 16)
    s[Y].compute_at(s[Z], zb)
    s[U].compute_at(s[Z], zb)
    with pytest.raises(tc.TilecError, match="scans do not share a loop"):
        if scan_first:
            s[U].compute_with(s[Y], yto)
        else:
            s[Y].compute_with(s[U], uto)
        tc.lower(s)


# ---------------------------------------------------------------------------------------------
# slow tier: the sweep


@pytest.mark.slow
@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("op", [*OPS, "ema"])
def test_scan_sweep(op, schedule):
    """Every scan x every legal schedule x sizes that divide no tile (and 1s) x random, strided, one-signed and
    NaN/inf rows."""
    k = _kernel(op, SCHEDULES[schedule])
    fails = _check(k, op, SHORT_CASES if schedule in PER_ELEMENT else CASES, 1)
    assert not fails, "\n".join(fails)


def _first_tiled(s, Y):        # Y[t, b] scanning t: b tiled by 16 on the grid, t by 8 in a loop
    t, b = Y.axis
    bo, bi = s[Y].split(b, 16)
    to, ti = s[Y].split(t, 8)
    s[Y].reorder(bo, to, ti, bi)
    s[Y].bind(bo, "program_id.0")


def _first_serial(s, Y):       # Y[t, b]: t a serial loop, b a tile of 32 on the grid
    t, b = Y.axis
    bo, bi = s[Y].split(b, 32)
    s[Y].reorder(bo, t, bi)
    s[Y].bind(bo, "program_id.0")


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [_default, _first_tiled, _first_serial], ids=lambda f: f.__name__)
@pytest.mark.parametrize("op", OPS)
def test_scan_along_the_first_axis(op, schedule):
    """Y[t, b] scanning its first axis t, the other axis the tile's last dimension."""
    k = _kernel(op, schedule, (T, B), 0)
    fails = _check(k, op, [((37, 18), "mixed"), ((20, 3), "strided"), ((1, 1), "mixed"), ((1, 40), "mixed"),
                           ((9, 1), "mixed")], 0)
    assert not fails, "\n".join(fails)


def _three_d_tiled(s, Y):      # Y[b, t, c] scanning t: b on the grid, c tiled with its loop outside t's
    b, t, c = Y.axis
    co, ci = s[Y].split(c, 8)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(b, co, to, ti, ci)
    s[Y].bind(b, "program_id.0")


def _three_d_fused_grid(s, Y):  # b and c's tiles fused on the grid, t's parts serial then a tile
    b, t, c = Y.axis
    co, ci = s[Y].split(c, 4)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(b, co, to, ci, ti)
    g = s[Y].fuse(b, co)
    s[Y].bind(g, "program_id.0")


def _three_d_3d_tile(s, Y):    # a 2 x 16 x 8 tile: three tile dimensions, b and c tiles on two grid axes
    b, t, c = Y.axis
    bo, bi = s[Y].split(b, 2)
    to, ti = s[Y].split(t, 16)
    co, ci = s[Y].split(c, 8)
    s[Y].reorder(bo, co, to, bi, ti, ci)
    s[Y].bind(bo, "program_id.0")
    s[Y].bind(co, "program_id.1")


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [_default, _three_d_tiled, _three_d_fused_grid, _three_d_3d_tile],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("op", OPS)
def test_scan_on_a_3d_compute(op, schedule):
    """Y[b, t, c] scanning its middle axis."""
    k = _kernel(op, schedule, (B, T, C), 1)
    fails = _check(k, op, [((3, 37, 6), "mixed"), ((2, 20, 3), "strided"), ((1, 1, 1), "mixed")], 1)
    assert not fails, "\n".join(fails)


def _last_of_3d(s, Y):         # Y[b, c, t] scanning its last axis: b, c fused on the grid
    b, c, t = Y.axis
    g = s[Y].fuse(b, c)
    s[Y].bind(g, "program_id.0")
    s[Y].split(t, 16)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [_default, _last_of_3d], ids=lambda f: f.__name__)
@pytest.mark.parametrize("op", OPS)
def test_scan_along_the_last_of_three_axes(op, schedule):
    k = _kernel(op, schedule, (B, C, T), 2)
    fails = _check(k, op, [((3, 2, 37), "mixed"), ((2, 3, 20), "strided"), ((1, 1, 1), "mixed")], 2)
    assert not fails, "\n".join(fails)


def _int_reference(op, xs):
    """torch's scan of int32 values wrapped to int32 (torch's integer cumsum/cumprod are int64); the linear
    recurrence in int64, wrapped at each step."""
    if op in ("cumsum", "cumprod"):
        return getattr(torch, op)(xs[0].long(), 1).to(torch.int32)
    if op in ("cummax", "cummin"):
        return getattr(torch, op)(xs[0], 1).values
    a, b = xs[0].long(), xs[1].long()
    h, out = torch.zeros_like(b[:, 0]), []
    for t in range(b.shape[1]):
        h = (a[:, t] * h + b[:, t]) & 0xFFFFFFFF
        out.append(torch.where(h >= 2**31, h - 2**32, h))
    return torch.stack(out, 1).to(torch.int32)


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_int32_scans_are_exact(op):
    """int32 in, int32 accumulator and result, over the whole int32 range: wrapping arithmetic is associative,
    so every op is exact under a padded tile (24) and its loop."""
    xs, Y = _compute(op, (B, T), 1, in_dtype="int32")
    s = tc.create_schedule(Y)
    _padded_24(s, Y)
    k = tc.build(s, [*xs, Y])
    for size in ((3, 37), (1, 1), (5, 100)):
        ins = [torch.randint(-2**31, 2**31 - 1, size, dtype=torch.int32) for _ in xs]
        y = k(*ins)
        assert y.dtype == torch.int32 and torch.equal(y, _int_reference(op, ins)), (op, size)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["default", "tile_4x16", "padded_24", "subtiled_48", "serial_plain"])
def test_float16_scans_sweep(schedule):
    """float16 in and out, float32 accumulators: torch's float32 scan rounded to half (cummax/cummin exact)."""
    fails = []
    for op in ("cumsum", "cummax", "cummin", "cumprod"):
        xs, Y = _compute(op, (B, T), 1, in_dtype="float16", dtype="float16", acc_dtype="float32")
        s = tc.create_schedule(Y)
        SCHEDULES[schedule](s, Y)
        k = tc.build(s, [*xs, Y])
        for size in ((18, 37), (1, 1), (4, 60 if schedule == "serial_plain" else 200)):  # serial: per element
            (x,) = _inputs(op, "mixed", size, 1)
            x = x.half()
            ref = _reference(op, [x.float()], 1).float().half()
            tol = (0.0, 0.0) if op in ("cummax", "cummin") else (2e-3, 2e-3)
            why = _mismatch(k(x), ref, *tol)
            if why:
                fails.append(f"{op} size={size}: {why}")
    assert not fails, "\n".join(fails)


@pytest.mark.slow
def test_other_dtypes():
    """float64 (accumulated in float64), bfloat16 (exact running min), int32 summed in int64 (torch's type), a
    bool cumsum (a count, int32)."""
    X = tc.placeholder((B, T), "float64", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumprod(X[b, t], axis=t), name="Y")
    s = tc.create_schedule(Y)
    _padded_24(s, Y)
    x = 1 + 0.1 * torch.randn(3, 100, dtype=torch.float64)
    y = tc.build(s, [X, Y])(x)
    assert y.dtype == torch.float64 and not _mismatch(y, torch.cumprod(x, 1), 1e-12, 1e-12)

    X = tc.placeholder((B, T), "bfloat16", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cummin(X[b, t], axis=t), name="Y", dtype="bfloat16")
    s = tc.create_schedule(Y)
    _tile_4x16(s, Y)
    x = torch.randn(3, 37).bfloat16()
    y = tc.build(s, [X, Y])(x)
    assert y.dtype == torch.bfloat16 and torch.equal(y, torch.cummin(x, 1).values)

    X = tc.placeholder((B, T), "int32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t, acc_dtype="int64"), name="Y")
    assert Y.dtype == "int64"
    s = tc.create_schedule(Y)
    _padded_24(s, Y)
    x = torch.randint(-2**31, 2**31 - 1, (3, 100), dtype=torch.int32)
    y = tc.build(s, [X, Y])(x)
    assert y.dtype == torch.int64 and torch.equal(y, torch.cumsum(x, 1))

    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t] > 0, axis=t), name="Y")
    s = tc.create_schedule(Y)
    _tile_4x16(s, Y)
    x = torch.randn(3, 37)
    y = tc.build(s, [X, Y])(x)
    assert y.dtype == torch.int32 and torch.equal(y, torch.cumsum(x > 0, 1).to(torch.int32))


OPERANDS = {  # name -> (the compute's function of X (B, T) and W (T,), the reference of x and w)
    "reversed": (lambda X, W: lambda b, t: tc.cumsum(X[b, T - 1 - t], axis=t),
                 lambda x, w: torch.cumsum(x.flip(1).double(), 1)),
    "shifted": (lambda X, W: lambda b, t: tc.cummax(X[b, t - 1] * X[b, t - 1], axis=t),
                lambda x, w: torch.cummax(torch.nn.functional.pad(x * x, (1, 0))[:, :-1], 1).values.double()),
    "broadcast": (lambda X, W: lambda b, t: tc.cummin(X[b, t] * W[t], axis=t),
                  lambda x, w: torch.cummin(x * w, 1).values.double()),
    "expression": (lambda X, W: lambda b, t: tc.linear_scan(tc.sigmoid(W[t]), tc.exp(X[b, t] * 0.5), axis=t),
                   lambda x, w: _reference("linear_scan", [torch.sigmoid(w).expand_as(x), torch.exp(x * 0.5)], 1)),
    "numbers_b": (lambda X, W: lambda b, t: tc.linear_scan(X[b, t] * 0.0 + 0.5, 1.0, axis=t),
                  lambda x, w: _reference("linear_scan", [torch.full_like(x, 0.5), torch.ones_like(x)], 1)),
}


@pytest.mark.slow
@pytest.mark.parametrize("operand", list(OPERANDS))
def test_scan_operands(operand):
    """What is scanned is any expression: a reversed or shifted read (0 outside), a broadcast factor, math,
    numbers."""
    make, ref = OPERANDS[operand]
    X = tc.placeholder((B, T), "float32", name="X")
    W = tc.placeholder((T,), "float32", name="W")
    Y = tc.compute((B, T), make(X, W), name="Y")
    s = tc.create_schedule(Y)
    _tile_4x16(s, Y)
    args = [X, W] if operand in ("broadcast", "expression") else [X]
    k = tc.build(s, [*args, Y])
    fails = []
    for size in ((3, 37), (1, 1), (5, 100)):
        x, w = torch.randn(*size), torch.randn(size[1])
        why = _mismatch(k(x, w) if len(args) == 2 else k(x), ref(x, w), 1e-4, 1e-4)
        if why:
            fails.append(f"size={size}: {why}")
    assert not fails, "\n".join(fails)


@pytest.mark.slow
def test_suffix_sum_in_two_computes():
    """A reverse (suffix) cumsum is two computes: the scan of the flipped row, read back flipped."""
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, T - 1 - t], axis=t), name="Y")
    Z = tc.compute((B, T), lambda b, t: Y[b, T - 1 - t], name="Z")
    k = tc.build(tc.create_schedule(Z), [X, Z])
    for size in ((3, 37), (1, 1), (2, 300)):
        x = torch.randn(*size)
        why = _mismatch(k(x), torch.cumsum(x.double().flip(1), 1).flip(1), 1e-4, 1e-4)
        assert not why, (size, why)


@pytest.mark.slow
@pytest.mark.parametrize("place", ["root", "inline", "scan_loop", "row_grid", "stencil_at_scan_loop"])
def test_scan_of_a_producer(place):
    """Y = cumsum(P), P elementwise of X: P in its own kernel, inlined, at Y's scan loop (a tile per
    iteration), at Y's grid axis (the row tile's whole rows), and a stencil P (X[t] + X[t - 1]) at the scan
    loop (its halo recomputed)."""
    X = tc.placeholder((B, T), "float32", name="X")
    if place == "stencil_at_scan_loop":
        P = tc.compute((B, T), lambda b, t: X[b, t] + X[b, t - 1], name="P")
    else:
        P = tc.compute((B, T), lambda b, t: tc.exp(X[b, t] * 0.5), name="P")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(P[b, t], axis=t), name="Y")
    s = tc.create_schedule(Y)
    b, t = Y.axis
    bo, bi = s[Y].split(b, 4)
    to, ti = s[Y].split(t, 16)
    s[Y].reorder(bo, to, bi, ti)
    s[Y].bind(bo, "program_id.0")
    if place == "inline":
        s[P].compute_inline()
    elif place in ("scan_loop", "stencil_at_scan_loop"):
        s[P].compute_at(s[Y], to)
    elif place == "row_grid":
        s[P].compute_at(s[Y], bo)
    k = tc.build(s, [X, Y])
    fails = []
    for size in ((3, 37), (1, 1), (6, 100)):
        x = torch.randn(*size)
        p = x + torch.nn.functional.pad(x, (1, 0))[:, :-1] if place == "stencil_at_scan_loop" else torch.exp(x * 0.5)
        why = _mismatch(k(x), torch.cumsum(p.double(), 1), 1e-4, 1e-4)
        if why:
            fails.append(f"size={size}: {why}")
    assert not fails, "\n".join(fails)


@pytest.mark.slow
@pytest.mark.parametrize("schedule,place", [(_tile_4x16, "to"), (_tile_4x16, "ti"), (_split_twice, "tio"),
                                            (_unrolled, "toi"), (_padded_24, "to"), (_subtiled_48, "to")],
                         ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("op", OPS)
def test_consumer_in_the_scan_loop_sweep(op, schedule, place):
    """Z = Y * W[t] (Y any scan) placed at Y's innermost scan loop (a consumer's axes must all be fixed by its
    place) or its tile: a tile of 16, the split-twice schedule's inner serial loop, the unrolled loop, a padded
    tile, sub-tiles."""
    xs, Y = _compute(op, (B, T), 1)
    W = tc.placeholder((T,), "float32", name="W")
    Z = tc.compute((B, T), lambda b, t: Y[b, t] * W[t], name="Z")
    s = tc.create_schedule(Z)
    schedule(s, Y)
    s[Z].compute_at(s[Y], next(a for a in s[Y].leaves if a.name == place))
    k = tc.build(s, [*xs, W, Z])
    fails = []
    for size, kind in (((18, 37), "mixed"), ((1, 1), "mixed"), ((5, 100), "strided")):
        ins, w = _inputs(op, kind, size, 1), torch.randn(size[1])
        why = _mismatch(k(*ins, w), _reference(op, ins, 1).float() * w, *TOL[op])  # Y rounded, then * w
        if why:
            fails.append(f"size={size} {kind}: {why}")
    assert not fails, "\n".join(fails)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["grid_rows", "serial_rows", "padded", "same_tiles", "scan_of_scan"])
@pytest.mark.parametrize("op", OPS)
def test_scan_at_a_consumers_outer_loop_sweep(op, variant):
    """Y (any scan) at Z's row loop: Z's rows on the grid (Y split by 32 there), in a single program at Z's
    serial row loop, Y padded (24), Y's tiles Z's (16), and Z itself a scan (cumsum of Y)."""
    xs, Y = _compute(op, (B, T), 1)
    if variant == "scan_of_scan":
        Z = tc.compute((B, T), lambda b, t: tc.cumsum(Y[b, t], axis=t), name="Z")
    else:
        Z = tc.compute((B, T), lambda b, t: Y[b, t] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    zb, zt = Z.axis
    zbo, zbi = s[Z].split(zb, 2)
    zto, zti = s[Z].split(zt, 16)
    if variant == "serial_rows":
        s[Z].reorder(zbo, zbi, zto, zti)
    else:
        s[Z].reorder(zbo, zto, zbi, zti)
        s[Z].bind(zbo, "program_id.0")
        s[Y].split(Y.axis[1], {"grid_rows": 32, "padded": 24, "same_tiles": 16, "scan_of_scan": 8}[variant])
    s[Y].compute_at(s[Z], zbo)
    k = tc.build(s, [*xs, Z])
    fails = []
    for size, kind in (((18, 37), "mixed"), ((1, 1), "randn"), ((4, 100), "randn")):
        ins = _inputs(op, kind, size, 1)
        y = _reference(op, ins, 1).float()
        ref = torch.cumsum(y.double(), 1) if variant == "scan_of_scan" else y + 1
        why = _mismatch(k(*ins), ref, *(TOL[op] if variant != "scan_of_scan" else (1e-4, 1e-4)))
        if why:
            fails.append(f"size={size} {kind}: {why}")
    assert not fails, "\n".join(fails)


@pytest.mark.slow
def test_more_primitives_on_a_scan():
    """A scan stage under the primitives the scan rules do not name: a split by a knob (each config), a
    pipelined scan loop, num_warps, a cache_read at the scan loop, a persistent row grid, an unrolled scan
    loop of a constant extent, a size assumed to fit one tile."""
    fails = []

    def check(name, sched, op="cummax", shape=(B, T), sizes=((3, 37), (1, 1)), config=None):
        xs, Y = _compute(op, shape, 1)
        s = tc.create_schedule(Y)
        sched(s, Y, xs)
        k = tc.build(s, [*xs, Y], config=config) if config else tc.build(s, [*xs, Y])
        fails.extend(f"{name}: {f}" for f in _check(k, op, [(size, "mixed") for size in sizes], 1))

    def knob(s, Y, xs):
        s[Y].split(Y.axis[1], tc.knob("BT", [16, 32, 48]))
        s[Y].bind(Y.axis[0], "program_id.0")

    for bt in (16, 32, 48):
        check(f"knob BT={bt}", knob, config={"BT": bt})
    check("pipelined", lambda s, Y, xs: (_tile_4x16(s, Y), s[Y].pipeline(s[Y].leaves[1], stages=2)), "cumsum")
    check("num_warps", lambda s, Y, xs: (_tile_4x16(s, Y), s[Y].num_warps(8)))
    check("cache_read", lambda s, Y, xs: (_tile_4x16(s, Y), s.cache_read(xs[0], "shared", readers=[Y]).compute_at(
        s[Y], s[Y].leaves[1])), "linear_scan")

    def persistent(s, Y, xs):
        bo, _ = s[Y].split(Y.axis[0], 2)
        s[Y].split(Y.axis[1], 16)
        s[Y].bind(bo, "program_id.0")
        s[Y].persistent(bo)

    check("persistent", persistent, "cumsum", sizes=((9, 37), (1, 1)))

    def unrolled_whole(s, Y, xs):
        to, _ = s[Y].split(Y.axis[1], 16)
        s[Y].unroll(to)
        s[Y].bind(Y.axis[0], "program_id.0")

    for n in (37, 64, 1):
        check(f"constant T={n}, scan loop unrolled", unrolled_whole, "cumprod", shape=(B, n), sizes=((3, n), (1, n)))
    T2 = tc.size_vars("T2")
    tc.assume(T2 <= 128)
    check("assume T2 <= 128", lambda s, Y, xs: _whole_128(s, Y), "cummin", shape=(B, T2),
          sizes=((3, 37), (1, 128), (2, 1)))
    assert not fails, "\n".join(fails)


def _refused_or_right(build, ref):
    """Either a TilecError (a limit the message names) or the right values; never a wrong answer or a crash."""
    try:
        k, x = build()
    except tc.TilecError:
        return None
    return _mismatch(k(x), ref(x), 1e-4, 1e-4)


@pytest.mark.slow
def test_places_refused_or_right():
    """Schedules tilec may refuse (where lowering cannot yet follow) but must not get wrong: a scan of Y placed
    at Y's scan loop (a carry across the producer's loop), a reader of Y[b, t - 1] at Y's scan loop (the
    previous tile's last value), a row loop unrolled inside the scan loop."""
    def chain(second, shift):
        def build():
            X = tc.placeholder((B, T), "float32", name="X")
            Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t), name="Y")
            if second:
                Z = tc.compute((B, T), lambda b, t: tc.cumsum(Y[b, t], axis=t), name="Z")
            else:
                Z = tc.compute((B, T), lambda b, t: Y[b, t] - Y[b, t + shift], name="Z")
            s = tc.create_schedule(Z)
            _tile_4x16(s, Y)
            s[Z].compute_at(s[Y], s[Y].leaves[1])
            return tc.build(s, [X, Z]), torch.randn(3, 37)
        return build

    def diff(x):
        y = torch.cumsum(x.double(), 1)
        return y - torch.nn.functional.pad(y, (1, 0))[:, :-1]

    fails = []
    for name, build, ref in (("cumsum of Y at Y.to", chain(True, 0), lambda x: torch.cumsum(torch.cumsum(
            x.double(), 1), 1)), ("Y[t] - Y[t - 1] at Y.to", chain(False, -1), diff)):
        why = _refused_or_right(build, ref)
        if why:
            fails.append(f"{name}: {why}")

    def unrolled_rows():
        xs, Y = _compute("cumsum", (B, T), 1)
        s = tc.create_schedule(Y)
        b, t = Y.axis
        bo, bi = s[Y].split(b, 2)
        s[Y].unroll(bi)
        to, ti = s[Y].split(t, 16)
        s[Y].reorder(bo, to, bi, ti)
        s[Y].bind(bo, "program_id.0")
        return tc.build(s, [*xs, Y]), torch.randn(3, 37)

    why = _refused_or_right(unrolled_rows, lambda x: torch.cumsum(x.double(), 1))
    if why:
        fails.append(f"rows unrolled inside the scan loop: {why}")
    assert not fails, "\n".join(fails)


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_scan_refusals_for_every_op(op):
    """The schedule refusals hold for every scan, not only cumsum."""
    for schedule, match in REFUSED.values():
        _refuse(schedule, match, op=op)
