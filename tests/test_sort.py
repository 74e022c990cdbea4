"""tc.sort / tc.argsort (issue 26): a row ordered in one tile (tl.sort of 32-bit keys; argsort packs the position
into 64-bit keys), checked against torch.sort(stable=True) on floats with NaN, infinities and signed zeros, on
ints, ascending and descending, at sizes that fill no tile and size 1; a top-k as a reader of a descending sort;
and every refusal with its reason."""

from __future__ import annotations

import pytest
import torch

import tilec as tc


def _build(what: str, dtype: str, descending: bool, tile_rows: int = 1, assume: bool = True):
    T, E = tc.size_vars("T E")
    if assume:
        tc.assume(E <= 64)
    X = tc.placeholder((T, E), dtype, name="X")
    Y = tc.compute((T, E), lambda t, e: getattr(tc, what)(X[t, e], axis=e, descending=descending), name="Y")
    s = tc.create_schedule(Y)
    to, ti = s[Y].split(Y.axis[0], tile_rows)
    eo, ei = s[Y].split(Y.axis[1], 64)
    s[Y].reorder(to, eo, ti, ei)
    s[Y].bind(to, "program_id.0")
    return s, X, Y


def _values(shape, dtype):
    if dtype.startswith("int"):
        return torch.randint(-4, 4, shape, dtype=getattr(torch, dtype))  # many equal values: stability shows
    x = torch.randn(shape).to(getattr(torch, dtype))
    if x.shape[1] >= 6:
        x[0, :6] = torch.tensor([0.0, float("nan"), float("inf"), -0.0, float("-inf"), float("nan")])
    return x


_FAST = {("float32", "sort", False), ("float16", "argsort", True), ("int32", "argsort", False)}
_CASES = [pytest.param(d, w, desc, marks=() if (d, w, desc) in _FAST else pytest.mark.slow)
          for d in ("float32", "float16", "int32") for w in ("sort", "argsort") for desc in (False, True)]


@pytest.mark.parametrize("dtype,what,descending", _CASES)
def test_sort_matches_torch(dtype, what, descending):
    s, X, Y = _build(what, dtype, descending, tile_rows=4)
    k = tc.build(s, [X, Y])
    for shape in ((5, 37), (1, 1), (3, 64), (6, 2)):
        x = _values(shape, dtype)
        ref = torch.sort(x, dim=1, descending=descending, stable=True)
        y = k(x)
        if what == "argsort":
            assert y.dtype == torch.int32 and torch.equal(y, ref.indices.int()), (shape, x[0], y[0], ref.indices[0])
        else:  # NaN where torch's NaN is; -0.0 and 0.0 are equal values
            assert torch.equal(torch.isnan(y), torch.isnan(ref.values)) and torch.equal(y.nan_to_num(), ref.values.nan_to_num())


@pytest.mark.slow  # the default tile of 1024 lanes, sorted in the interpreter: half a minute
def test_non_contiguous_input_and_default_schedule():
    T, E = tc.size_vars("T E")
    tc.assume(E <= 1024)
    X = tc.placeholder((T, E), "float32", name="X")
    Y = tc.compute((T, E), lambda t, e: tc.argsort(X[t, e], axis=e), name="Y")
    k = tc.build(tc.create_schedule(Y), [X, Y])  # the default: the row in one tile, a row per program
    x = torch.randn(50, 9).t()  # (9, 50), strided
    assert torch.equal(k(x), torch.sort(x, dim=1, stable=True).indices.int())


def test_sort_along_the_first_axis():
    E, N = tc.size_vars("E N")
    tc.assume(E <= 32)
    X = tc.placeholder((E, N), "float32", name="X")
    Y = tc.compute((E, N), lambda e, n: tc.sort(X[e, n], axis=e, descending=True), name="Y")
    s = tc.create_schedule(Y)
    eo, ei = s[Y].split(Y.axis[0], 32)
    no, ni = s[Y].split(Y.axis[1], 16)
    s[Y].reorder(no, eo, ei, ni)
    s[Y].bind(no, "program_id.0")
    k = tc.build(s, [X, Y])
    x = torch.randn(19, 40)
    assert torch.equal(k(x), torch.sort(x, dim=0, descending=True).values)


def test_top_k_is_a_reader_of_a_descending_sort():
    """torch.topk's values and indices: the first K of a descending sort (stable: equal values, lower index
    first; torch.topk's own order among equal values is unspecified, so the values are distinct here)."""
    T, E = tc.size_vars("T E")
    tc.assume(E <= 128)
    K = 3
    X = tc.placeholder((T, E), "float32", name="X")
    order = tc.compute((T, E), lambda t, e: tc.argsort(X[t, e], axis=e, descending=True), name="order")
    ids = tc.compute((T, K), lambda t, r: order[t, r], name="ids")
    vals = tc.compute((T, K), lambda t, r: X[t, order[t, r]], name="vals")
    s = tc.create_schedule([vals, ids])
    s[order].split(order.axis[1], 128)
    k = tc.build(s, [X, vals, ids])
    x = torch.randn(7, 100)
    v, i = k(x)
    ref = torch.topk(x, K, dim=1)
    assert torch.equal(v, ref.values) and torch.equal(i, ref.indices.int())


def test_sort_of_an_expression_and_a_reader_in_the_same_program():
    T, E = tc.size_vars("T E")
    tc.assume(E <= 16)
    X = tc.placeholder((T, E), "float16", name="X")
    Y = tc.compute((T, E), lambda t, e: tc.sort(X[t, e] * -2.0, axis=e), name="Y", dtype="float32")
    Z = tc.compute((T, E), lambda t, e: Y[t, e] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    eo, ei = s[Y].split(Y.axis[1], 16)
    s[Y].bind(Y.axis[0], "program_id.0")
    s[Z].compute_at(s[Y], eo)  # the loop over e (it runs at most once: E <= 16) holds the sorted row
    k = tc.build(s, [X, Z])
    x = torch.randn(4, 11).half()
    assert torch.allclose(k(x), torch.sort(x.float() * -2.0, dim=1).values + 1.0)


def test_axis_not_in_one_tile_is_refused_with_the_reason():
    s, X, Y = _build("sort", "float32", False, assume=False)
    with pytest.raises(tc.LoweringError, match=r"Y: eo is a serial loop over the sorted axis e; a sort orders the "
                                               r"whole axis in one tile \(tl.sort\).*tc.assume\(E <= 64\)"):
        tc.build(s, [X, Y])


@pytest.mark.parametrize("case", ["bind", "fuse", "two_tiles", "inline", "compute_with", "place", "body", "axis",
                                  "dtype"])
def test_refusals(case):
    T, E = tc.size_vars("T E")
    tc.assume(E <= 64)
    X = tc.placeholder((T, E), "float32", name="X")
    if case == "body":
        with pytest.raises(tc.ArgumentError, match=r"tc.sort\(\.\.\.\) must be the whole body of a compute"):
            tc.compute((T, E), lambda t, e: tc.sort(X[t, e], axis=e) + 1.0, name="Y")
        return
    if case == "axis":
        r = tc.reduce_axis(E, name="r")
        with pytest.raises(tc.ArgumentError, match="axis must be one of the compute's own axes"):
            tc.compute((T,), lambda t: tc.sort(X[t, r], axis=r), name="Y")
        return
    if case == "dtype":
        I = tc.placeholder((T, E), "int64", name="I")
        with pytest.raises(tc.ArgumentError, match="tc.argsort of int64 values is not supported"):
            tc.compute((T, E), lambda t, e: tc.argsort(I[t, e], axis=e), name="Y")
        return
    Y = tc.compute((T, E), lambda t, e: tc.sort(X[t, e], axis=e), name="Y")
    Z = tc.compute((T, E), lambda t, e: Y[t, e] * 2.0, name="Z")
    W = tc.compute((T, E), lambda t, e: X[t, e] + 1.0, name="W")
    s = tc.create_schedule([Z, W])
    t, e = Y.axis
    if case == "bind":
        eo, ei = s[Y].split(e, 16)
        s[Y].bind(eo, "program_id.0")
        match = "eo is a grid loop over the sorted axis e"
    elif case == "fuse":
        s[Y].split(s[Y].fuse(t, e), 64)
        match = "fuses the sorted axis e with t"
    elif case == "two_tiles":
        eo, ei = s[Y].split(e, 64)
        s[Y].split(eo, 2)
        match = "has 2 tile axes"
    elif case == "inline":
        with pytest.raises(tc.ArgumentError, match="compute_inline: Y is a sort along e"):
            s[Y].compute_inline()
        return
    elif case == "compute_with":
        with pytest.raises(tc.LoweringError, match="Y is a sort \\(along e\\), which orders a whole tile at once"):
            s[W].compute_with(s[Y], t)
        return
    else:  # a place that gives e its values: each iteration would sort a part of the row
        zo, zi = s[Z].split(Z.axis[1], 16)
        s[Y].compute_at(s[Z], zo)
        match = "Y is a sort along e, and where it is computed \\(compute_at\\) gives e its values"
    with pytest.raises(tc.LoweringError, match=match):
        tc.build(s, [X, Z, W])
