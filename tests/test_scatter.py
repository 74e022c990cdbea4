"""tc.scatter (tilec/ir/scatter.py): a stage that writes each point of its domain at a computed position of its
output, checked against PyTorch on fresh random inputs: histograms (combine="add" of int32 and int64) against
torch.bincount, with indices outside the bins dropped; a KV-cache write (unique data positions) against
index_put_, into a copy of the cache and in place (init=None, out=); an embedding backward (float adds,
deterministic=False) against index_add_; affine positions proved injective by isl (2*t+1, a transpose) and the
non-injective ones refused with two points that meet; a reader of a scatter, a producer placed in the scatter's
loops; the store or atomic add in the generated source; and every refusal with its reason. Sizes that fill no
tile, size-1 dims, strided inputs and NaN/Inf values throughout."""

from __future__ import annotations

import re

import pytest
import torch

import tilec as tc

# -- helpers -------------------------------------------------------------------------------------------------


def _bin_indices(n: int, bins: int, dtype=torch.int64, strided: bool = False) -> torch.Tensor:
    """n bin indices, most in [0, bins), some negative and some >= bins (dropped by the scatter)."""
    x = torch.randint(-3, bins + 4, (2 * n,), dtype=dtype)
    if n >= 2:
        x[0], x[2 * n - 2 if strided else n - 1] = -1 - torch.randint(0, 5, ()), bins + torch.randint(0, 5, ())
    return x[::2] if strided else x[:n]


def _bincount(x: torch.Tensor, bins: int, dtype: torch.dtype) -> torch.Tensor:
    x = x.long()
    return torch.bincount(x[(x >= 0) & (x < bins)], minlength=bins).to(dtype)


def _slots(T: int, S: int) -> torch.Tensor:
    """T distinct slots of a cache of S, some replaced by -1 and S + 2 (outside the cache: not written)."""
    sl = torch.randperm(max(S, T))[:T]
    if T >= 3:
        sl[1], sl[-1] = -1, S + 2
    return sl


def _special(x: torch.Tensor) -> torch.Tensor:
    """x with NaN, +Inf and -Inf in its first elements (in x's own layout; x may be a view)."""
    flat = [(0,) * x.ndim, (min(1, x.shape[0] - 1),) + (0,) * (x.ndim - 1), tuple(d - 1 for d in x.shape)]
    for idx, v in zip(flat, (float("nan"), float("inf"), float("-inf"))):
        x[idx] = v
    return x


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values (NaN where the other has NaN), dtypes and shapes."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.isnan(), b.isnan()) and \
        torch.equal(a.nan_to_num(), b.nan_to_num())


def _points(msg: str) -> list[dict[str, int]]:
    """The two points of an isl counterexample in a refusal ("(t=1) and (t=0) at T=2")."""
    m = re.search(r"write one element \(\((.*?)\) and \((.*?)\)", msg)
    assert m, msg
    return [{k: int(v) for k, v in (kv.split("=") for kv in part.split(", "))} for part in m.groups()]


# -- 1. histograms: combine="add" of ints, against torch.bincount -----------------------------------------------


def _histogram(dtype: str, xdtype: str = "int64", bins: int = 10):
    N = tc.size_vars("N")
    x = tc.placeholder((N,), xdtype, name="x")
    count = tc.scatter((bins,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype=dtype, name="count")
    return x, count


def _hist_split64(s, count):
    io, ii = s[count].split(count.axis[0], 64)
    s[count].bind(io, "program_id.0")


def _hist_knob(s, count):
    io, ii = s[count].split(count.axis[0], tc.knob("BN", [64, 128, 16]))
    s[count].bind(io, "program_id.0")


_HIST_SCHEDULES = {"default": (lambda s, c: None, [None]), "split64": (_hist_split64, [None]),
                   "knob": (_hist_knob, [{"BN": 64}, {"BN": 128}, {"BN": 16}])}


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("schedule", list(_HIST_SCHEDULES))
def test_histogram_matches_bincount(dtype, schedule):
    """count[x[i]] += 1 under each schedule and config, at N = 1 and N filling no tile of 16, 64 or 1024, x
    strided, of int64 and int32; indices below 0 or >= the bins are not counted."""
    sched, configs = _HIST_SCHEDULES[schedule]
    for xdtype in ("int64", "int32"):
        x, count = _histogram(dtype, xdtype)
        s = tc.create_schedule(count)
        sched(s, count)
        for config in configs if xdtype == "int64" else configs[:1]:
            k = tc.build(s, [x, count], config=config)
            for n, strided in ((1, False), (1030, True), (37, False)):
                xv = _bin_indices(n, 10, getattr(torch, xdtype), strided)
                got = k(xv)
                ref = _bincount(xv, 10, getattr(torch, dtype))
                assert _same(got, ref), (xdtype, config, n, strided, got, ref)


def test_histogram_of_a_2d_domain_with_a_transposed_input():
    """count[x[r, c]] += 1 over a 2-d domain, x a transposed view, one dim of size 1, tiles that do not divide."""
    R, C = tc.size_vars("R C")
    x = tc.placeholder((R, C), "int64", name="x")
    count = tc.scatter((7,), (R, C), lambda r, c: x[r, c], lambda r, c: 1, combine="add", dtype="int32", name="count")
    s = tc.create_schedule(count)
    r, c = count.axis
    ro, co, ri, ci = s[count].tile(r, c, 4, 8)
    s[count].bind(s[count].fuse(ro, co), "program_id.0")
    k = tc.build(s, [x, count])
    for shape in ((5, 9), (1, 13), (13, 1), (1, 1), (17, 33)):
        xv = torch.randint(-2, 10, shape[::-1]).t()
        assert _same(k(xv), _bincount(xv.reshape(-1), 7, torch.int32)), shape


def test_weighted_int64_adds_past_int32_and_an_init():
    """o[x[i]] += w[i] of int64 weights whose sums leave int32's range, the output starting at init=5; the
    kernel called twice into one out= tensor fills it again each time (no sum of the two calls)."""
    N = tc.size_vars("N")
    x = tc.placeholder((N,), "int64", name="x")
    w = tc.placeholder((N,), "int64", name="w")
    o = tc.scatter((6,), (N,), lambda i: x[i], lambda i: w[i], combine="add", init=5, name="o")
    assert o.dtype == "int64"
    k = tc.build(tc.create_schedule(o), [x, w, o])
    xv = _bin_indices(300, 6)
    wv = torch.randint(2**40, 2**41, (300,))
    keep = (xv >= 0) & (xv < 6)
    ref = torch.full((6,), 5, dtype=torch.int64).index_add_(0, xv[keep], wv[keep])
    out = torch.randint(-9, 9, (6,))
    for _ in range(2):
        assert torch.equal(k(xv, wv, out=out), ref) and torch.equal(out, ref)


def test_all_points_to_one_element():
    """Every point adds at position 0 (an affine position, the same for all): an int sum and a float one."""
    N = tc.size_vars("N")
    xi = tc.placeholder((N,), "int32", name="xi")
    xf = tc.placeholder((N,), "float32", name="xf")
    si = tc.scatter((1,), (N,), lambda i: 0, lambda i: xi[i], combine="add", name="si")
    sf = tc.scatter((1,), (N,), lambda i: 0, lambda i: xf[i], combine="add", deterministic=False, name="sf")
    k = tc.build(tc.create_schedule([si, sf]), [xi, xf, si, sf])
    for n in (1, 1500):
        iv, fv = torch.randint(-100, 100, (n,), dtype=torch.int32), torch.randn(n)
        gi, gf = k(iv, fv)
        assert gi.item() == iv.sum().item()
        torch.testing.assert_close(gf, fv.sum(0, keepdim=True), rtol=1e-5, atol=1e-4)


# -- 2. index_put at unique data positions (a KV-cache write) ---------------------------------------------------


def _kv_default(s, new):
    pass


def _kv_bind_t(s, new):
    s[new].bind(new.axis[0], "program_id.0")


def _kv_split_hd(s, new):
    t, h, d = new.axis
    ho, hi = s[new].split(h, 2)
    do, di = s[new].split(d, 4)
    s[new].reorder(t, ho, do, hi, di)
    s[new].bind(t, "program_id.0")


def _kv_tile(s, new):
    t, h, d = new.axis
    to, ho, ti, hi = s[new].tile(t, h, 4, 2)
    s[new].bind(to, "program_id.0")


def _kv_fuse_unroll(s, new):
    t, h, d = new.axis
    ho, hi = s[new].split(h, 2)
    s[new].unroll(hi)
    s[new].bind(s[new].fuse(t, ho), "program_id.0")


_KV_SCHEDULES = {"default": _kv_default, "bind_t": _kv_bind_t, "split_hd": _kv_split_hd, "tile": _kv_tile,
                 "fuse_unroll": _kv_fuse_unroll}
# (T, H, D, S) and the layout of k and the cache; the slow tier adds a larger size (bind_t's and fuse_unroll's
# loops over (h, d) are scalar: seconds in the interpreter)
_KV_SIZES = (((7, 3, 5, 20), "permuted"), ((1, 1, 1, 1), "contiguous"), ((4, 2, 9, 12), "contiguous"))
_KV_LARGE = (((29, 2, 33, 40), "permuted"),)


def _kv_write(mode: str, dtype: str, schedule: str):
    T, H, D, S = tc.size_vars("T H D S")
    cache = tc.placeholder((S, H, D), dtype, name="cache")
    slot = tc.placeholder((T,), "int64", name="slot")
    kk = tc.placeholder((T, H, D), dtype, name="k")
    at, value = (lambda t, h, d: (slot[t], h, d)), (lambda t, h, d: kk[t, h, d])
    if mode == "functional":
        new = tc.scatter(cache, (T, H, D), at, value, unique=True, name="new")
        args = [cache, slot, kk, new]
    else:
        new = tc.scatter((S, H, D), (T, H, D), at, value, unique=True, init=None, name="new")
        args = [slot, kk, new]
    s = tc.create_schedule(new)
    _KV_SCHEDULES[schedule](s, new)
    return tc.build(s, args)


def _kv_values(shape, dtype: torch.dtype, layout: str) -> torch.Tensor:
    """Random values of `shape` in a strided layout: "permuted" (dense, dims reversed) or "sliced" (gaps)."""
    if layout == "permuted":
        v = torch.randn(shape[::-1]).to(dtype).permute(*reversed(range(len(shape))))
    elif layout == "sliced":
        v = torch.randn(*shape[:-1], 2 * shape[-1]).to(dtype)[..., ::2]
    else:
        v = torch.randn(shape).to(dtype)
    return _special(v) if dtype.is_floating_point else v


def _check_kv(k, mode: str, dtype: torch.dtype, sizes):
    for (T, H, D, S), layout in sizes:
        for _ in range(2 if T * H * D < 1000 else 1):  # new tensors of the same shapes: the prepared call again
            kv = _kv_values((T, H, D), dtype, "permuted" if layout == "permuted" else "sliced")
            sl = _slots(T, S)
            keep = (sl >= 0) & (sl < S)
            if mode == "functional":
                c0 = _kv_values((S, H, D), dtype, "sliced" if layout == "permuted" else "contiguous")
                before = c0.clone()
                got = k(c0, sl, kv)
                assert _same(c0, before), "the cache the scatter starts from was changed"
                ref = before.clone().index_put_((sl[keep],), kv[keep])
            else:  # out= must be dense: permuted or contiguous, updated in place
                c0 = _kv_values((S, H, D), dtype, layout)
                ref = c0.clone().index_put_((sl[keep],), kv[keep])
                got = k(sl, kv, out=c0, S=S)
                assert got.data_ptr() == c0.data_ptr() and _same(c0, ref), (T, H, D, S, layout)
            assert _same(got, ref), (T, H, D, S, layout, mode)


_KV_FAST = {("functional", "bfloat16"), ("in_place", "bfloat16")}
_KV_CASES = [pytest.param(m, d, sch, marks=() if (m, d) in _KV_FAST else pytest.mark.slow)
             for m in ("functional", "in_place") for d in ("bfloat16", "float32", "int32") for sch in _KV_SCHEDULES]


@pytest.mark.parametrize("mode,dtype,schedule", _KV_CASES)
def test_kv_cache_write_matches_index_put(mode, dtype, schedule):
    """cache[slot[t], h, d] = k[t, h, d] (unique=True): a copy of the cache (functional, the cache unchanged) or
    the out= tensor in place (init=None, S at the call); k and the cache strided, NaN/Inf in the values, slots
    -1 and past the cache not written."""
    slow = (mode, dtype) not in _KV_FAST
    _check_kv(_kv_write(mode, dtype, schedule), mode, getattr(torch, dtype), _KV_SIZES + (_KV_LARGE if slow else ()))


def test_into_a_placeholder_of_another_dtype():
    """A scatter starting as a float16 cache but of dtype float32: the copy is cast, the values written exactly."""
    T, S = tc.size_vars("T S")
    c = tc.placeholder((S,), "float16", name="c")
    sl = tc.placeholder((T,), "int64", name="sl")
    v = tc.placeholder((T,), "float32", name="v")
    o = tc.scatter(c, (T,), lambda t: sl[t], lambda t: v[t], unique=True, dtype="float32", name="o")
    k = tc.build(tc.create_schedule(o), [c, sl, v, o])
    cv, slv, vv = torch.randn(9).half(), _slots(5, 9), _special(torch.randn(5))
    keep = (slv >= 0) & (slv < 9)
    assert _same(k(cv, slv, vv), cv.float().index_put_((slv[keep],), vv[keep]))


# -- 3. float adds (an embedding's backward): deterministic=False --------------------------------------------


def _embedding_backward(schedule: str, into: bool):
    T, D, V = tc.size_vars("T D V")
    idx = tc.placeholder((T,), "int64", name="idx")
    grad = tc.placeholder((T, D), "float32", name="grad")
    table = tc.placeholder((V, D), "float32", name="table")
    target = table if into else (V, D)
    gt = tc.scatter(target, (T, D), lambda t, d: (idx[t], d), lambda t, d: grad[t, d], combine="add",
                    deterministic=False, name="gt")
    s = tc.create_schedule(gt)
    if schedule == "split":
        t, d = gt.axis
        do, di = s[gt].split(d, 16)
        s[gt].reorder(t, do, di)
        s[gt].bind(t, "program_id.0")
    return tc.build(s, [idx, grad, table, gt] if into else [idx, grad, gt])


@pytest.mark.parametrize("schedule", ["default", "split"])
@pytest.mark.parametrize("into", [False, True])
def test_embedding_backward_float_adds(schedule, into):
    """grad_table[idx[t], d] += grad[t, d] (index_add_), many t per row, grad transposed, +-Inf and NaN in
    grad (in any order of the adds, a sum holding them is the same Inf or NaN); from zeros (V at the call) or
    from a copy of a table."""
    k = _embedding_backward(schedule, into)
    for T, D, V in ((40, 5, 7), (1, 1, 1), (90, 33, 4)):
        g = _special(torch.randn(D, T).t())
        idx = _bin_indices(T, V)
        keep = (idx >= 0) & (idx < V)
        if into:
            table = torch.randn(V, D)
            got = k(idx, g, table)
            ref = table.clone().index_add_(0, idx[keep], g[keep])
        else:
            got = k(idx, g, V=V)
            ref = torch.zeros(V, D).index_add_(0, idx[keep], g[keep])
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_float_adds_without_deterministic_false_are_refused():
    T, D, V = tc.size_vars("T D V")
    idx = tc.placeholder((T,), "int64", name="idx")
    grad = tc.placeholder((T, D), "float32", name="grad")
    with pytest.raises(tc.ArgumentError, match=r"float atomic adds that meet at one element land in a varying "
                                               r"order.*pass deterministic=False"):
        tc.scatter((V, D), (T, D), lambda t, d: (idx[t], d), lambda t, d: grad[t, d], combine="add", name="gt")


# -- 4. affine positions: proved injective by isl, or refused with two points ----------------------------------


@pytest.mark.parametrize("split", [False, True])
def test_affine_injective_positions(split):
    """o[2*t + 1] = a[t] (every other element, the rest at init=-1.0), o[j, i] = b[i, j] (a transpose) and
    o[N - 1 - i] = int(c[i]) (a reversal, the value cast to int32 as torch casts it)."""
    T, M, N = tc.size_vars("T M N")
    a = tc.placeholder((T,), "float32", name="a")
    b = tc.placeholder((M, N), "float32", name="b")
    c = tc.placeholder((N,), "float32", name="c")
    odd = tc.scatter((2 * T + 1,), (T,), lambda t: 2 * t + 1, lambda t: a[t], init=-1.0, name="odd")
    tr = tc.scatter((N, M), (M, N), lambda i, j: (j, i), lambda i, j: b[i, j], name="tr")
    rev = tc.scatter((N,), (N,), lambda i: N - 1 - i, lambda i: c[i], dtype="int32", name="rev")
    s = tc.create_schedule([odd, tr, rev])
    if split:
        to, ti = s[odd].split(odd.axis[0], 4)
        s[odd].bind(to, "program_id.0")
        io, jo, ii, ji = s[tr].tile(*tr.axis, 4, 8)
        s[tr].bind(io, "program_id.0")
    k = tc.build(s, [a, b, c, odd, tr, rev])
    for Tn, Mn, Nn in ((9, 5, 7), (1, 1, 1), (33, 13, 18)):
        av = _special(torch.randn(2 * Tn)[::2])
        bv = _special(torch.randn(Nn, Mn).t())
        cv = torch.randn(Nn) * 10
        go, gt, gr = k(av, bv, cv)
        ref = torch.full((2 * Tn + 1,), -1.0)
        ref[1::2] = av
        assert _same(go, ref) and _same(gt, bv.t().contiguous()), (Tn, Mn, Nn)
        assert _same(gr, cv.flip(0).to(torch.int32)), (cv, gr)


@pytest.mark.parametrize("unique", [False, True])
def test_non_injective_affine_positions_are_refused_with_two_points(unique):
    """o[t // 2] = a[t]: isl finds two points that write one element (unique=True is no proof for affine
    positions), and o[i + j] (2-d) likewise; the points named do meet."""
    T, N = tc.size_vars("T N")
    a = tc.placeholder((T,), "float32", name="a")
    o = tc.scatter((T,), (T,), lambda t: t // 2, lambda t: a[t], unique=unique, name="o")
    with pytest.raises(tc.ArgumentError, match=r"scatter 'o': two points of its domain write one element .*"
                                               r"combine=None") as e:
        tc.build(tc.create_schedule(o), [a, o])
    p, q = _points(str(e.value))
    assert p["t"] != q["t"] and p["t"] // 2 == q["t"] // 2, str(e.value)
    b = tc.placeholder((N, N), "float32", name="b")
    o2 = tc.scatter((2 * N,), (N, N), lambda i, j: i + j, lambda i, j: b[i, j], unique=unique, name="o2")
    with pytest.raises(tc.ArgumentError, match="two points of its domain write one element") as e:
        tc.build(tc.create_schedule(o2), [b, o2])
    p, q = _points(str(e.value))
    assert p != q and p["i"] + p["j"] == q["i"] + q["j"], str(e.value)


def test_float_adds_at_affine_positions_with_unique():
    """A float "add" with unique=True at affine positions is proved by isl: o[t] += a[t] is accepted (and a
    copy), o[t // 2] += a[t] refused with two points."""
    T = tc.size_vars("T")
    a = tc.placeholder((T,), "float32", name="a")
    o = tc.scatter((T,), (T,), lambda t: t, lambda t: a[t], combine="add", unique=True, name="o")
    k = tc.build(tc.create_schedule(o), [a, o])
    av = _special(torch.randn(11))
    assert _same(k(av), av)
    o2 = tc.scatter((T,), (T,), lambda t: t // 2, lambda t: a[t], combine="add", unique=True, name="o2")
    with pytest.raises(tc.ArgumentError, match="two points of its domain write one element.*float atomic adds"):
        tc.build(tc.create_schedule(o2), [a, o2])


def test_float_adds_at_injective_affine_positions_need_no_flag():
    """(A helper's finding: every float add was refused without deterministic=False, even at positions isl
    proves never meet.)"""
    T = tc.size_vars("T")
    a = tc.placeholder((T,), "float32", name="a")
    o = tc.scatter((2 * T,), (T,), lambda t: 2 * t, lambda t: a[t], combine="add", name="o")
    k = tc.build(tc.create_schedule(o), [a, o])
    av = torch.randn(11)
    ref = torch.zeros(22)
    ref[::2] = av
    assert _same(k(av), ref)


# -- 5. refusals -----------------------------------------------------------------------------------------------

_REFUSALS = ["data_positions_without_unique", "add_of_bfloat16", "float_add_without_deterministic",
             "compute_at_of_the_scatter", "compute_inline_of_the_scatter", "compute_with_of_the_scatter",
             "store_at_of_the_scatter", "compute_with_into_the_scatter", "reader_at_the_scatter", "cache_write",
             "in_place_without_out", "in_place_not_an_output", "in_place_without_its_size",
             "too_few_positions", "too_many_positions", "float_position", "combine_max", "init_with_a_tensor"]


@pytest.mark.parametrize("case", _REFUSALS)
def test_refusals(case):
    N = tc.size_vars("N")
    x = tc.placeholder((N,), "int64", name="x")
    f = tc.placeholder((N,), "float32", name="f")

    def hist(**kw):
        return tc.scatter((10,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="count", **kw)

    arg = tc.ArgumentError
    if case == "data_positions_without_unique":
        with pytest.raises(arg, match="its positions read a tensor.*pass unique=True"):
            tc.scatter((10,), (N,), lambda i: x[i], lambda i: f[i], name="o")
    elif case == "add_of_bfloat16":
        with pytest.raises(arg, match="combine='add' adds with atomics.*not bfloat16"):
            tc.scatter((10,), (N,), lambda i: x[i], lambda i: f[i], combine="add", dtype="bfloat16", name="o")
    elif case == "float_add_without_deterministic":
        with pytest.raises(arg, match="pass deterministic=False"):
            tc.scatter((10,), (N,), lambda i: x[i], lambda i: f[i], combine="add", name="o")
    elif case in ("compute_at_of_the_scatter", "compute_inline_of_the_scatter", "compute_with_of_the_scatter",
                  "store_at_of_the_scatter", "compute_with_into_the_scatter", "reader_at_the_scatter", "cache_write"):
        count = hist()
        p = tc.compute((10,), lambda b: count[b] * 2, name="p")
        s = tc.create_schedule(p)
        prim, run = {
            "compute_at_of_the_scatter": ("compute_at", lambda: s[count].compute_at(s[p], p.axis[0])),
            "compute_inline_of_the_scatter": ("compute_inline", lambda: s[count].compute_inline()),
            "compute_with_of_the_scatter": ("compute_with", lambda: s[count].compute_with(s[p], p.axis[0])),
            "store_at_of_the_scatter": ("store_at", lambda: s[count].store_at(s[p], p.axis[0])),
            "compute_with_into_the_scatter": ("compute_with", lambda: s[p].compute_with(s[count], count.axis[0])),
            "reader_at_the_scatter": ("compute_at", lambda: s[p].compute_at(s[count], count.axis[0])),
            "cache_write": ("cache_write", lambda: s.cache_write(count, "local")),
        }[case]
        match = {"reader_at_the_scatter": r"compute_at\(p, count.i\): count is a scatter.*a reader of a scatter runs "
                                          r"in a kernel after it",
                 "cache_write": r"cache_write\(count, 'local'\): count is a scatter"}.get(
            case, rf"{prim}\(count\.\.\.\): count is a scatter.*runs in a kernel of its own")
        with pytest.raises(tc.LoweringError, match=match):
            run()
    elif case == "in_place_without_out":
        o = hist(init=None)
        k = tc.build(tc.create_schedule(o), [x, o])
        with pytest.raises(arg, match=r"count updates the out= tensor in place.*pass out="):
            k(torch.randint(0, 10, (5,)))
    elif case == "in_place_not_an_output":
        o = hist(init=None)
        p = tc.compute((10,), lambda b: o[b] * 2, name="p")
        with pytest.raises(arg, match=r"scatter count starts as the out= tensor's values \(init=None\), so it must "
                                      r"be an output"):
            tc.build(tc.create_schedule(p), [x, p])
    elif case == "in_place_without_its_size":
        T, H, S = tc.size_vars("T H S")
        slot = tc.placeholder((T,), "int64", name="slot")
        kk = tc.placeholder((T, H), "float32", name="k")
        o = tc.scatter((S, H), (T, H), lambda t, h: (slot[t], h), lambda t, h: kk[t, h], unique=True, init=None,
                       name="o")
        k = tc.build(tc.create_schedule(o), [slot, kk, o])
        with pytest.raises(arg, match=r"size S is in no input's shape, so the call gives it"):
            k(torch.tensor([1, 4]), torch.randn(2, 3), out=torch.randn(9, 3))
        with pytest.raises(arg, match=r"out o: expected shape \(5, 3\)"):
            k(torch.tensor([1, 4]), torch.randn(2, 3), out=torch.randn(9, 3), S=5)
    elif case == "too_few_positions":
        with pytest.raises(arg, match=r"the output has 2 dimension\(s\) but at gives 1 position\(s\)"):
            tc.scatter((10, 3), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="o")
    elif case == "too_many_positions":
        with pytest.raises(arg, match=r"the output has 1 dimension\(s\) but at gives 2 position\(s\)"):
            tc.scatter((10,), (N,), lambda i: (x[i], i), lambda i: 1, combine="add", dtype="int32", name="o")
    elif case == "float_position":
        with pytest.raises(arg, match=r"position 0 must be an integer expression"):
            tc.scatter((10,), (N,), lambda i: f[i], lambda i: 1, combine="add", dtype="int32", name="o")
    elif case == "combine_max":
        with pytest.raises(arg, match=r"combine must be one of \(None, 'add'\), got 'max'"):
            tc.scatter((10,), (N,), lambda i: x[i], lambda i: 1, combine="max", dtype="int32", name="o")
    else:
        with pytest.raises(arg, match=r"it starts as a copy of f, so init= has no meaning"):
            tc.scatter(f, (N,), lambda i: i, lambda i: 1.0, init=3, name="o")


# -- 6. readers of a scatter -----------------------------------------------------------------------------------


@pytest.mark.parametrize("listed", [False, True])
def test_reader_of_a_histogram(listed):
    """p[b] = count[b] / N, in a kernel after the scatter's, with the counts an output or not; and a histogram
    of the histogram (a scatter reading a scatter)."""
    N = tc.size_vars("N")
    x = tc.placeholder((N,), "int64", name="x")
    count = tc.scatter((10,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="count")
    p = tc.compute((10,), lambda b: count[b] * 1.0 / N, name="p")
    again = tc.scatter((5,), (10,), lambda b: count[b], lambda b: 1, combine="add", dtype="int64", name="again")
    s = tc.create_schedule([p, again])
    _hist_split64(s, count)
    bo, bi = s[p].split(p.axis[0], 4)
    s[p].bind(bo, "program_id.0")
    k = tc.build(s, [x, count, p, again] if listed else [x, p, again])
    for n in (1, 301):
        xv = _bin_indices(n, 10, strided=True)
        outs = k(xv)
        ref = _bincount(xv, 10, torch.int32)
        if listed:
            assert _same(outs[0], ref)
        torch.testing.assert_close(outs[-2], ref.float() / n)
        assert _same(outs[-1], _bincount(ref, 5, torch.int64))


# -- 7. a producer placed in the scatter's loops ---------------------------------------------------------------


@pytest.mark.parametrize("place", ["root", "t", "ho", "inline"])
def test_producer_of_the_value_at_the_scatter(place):
    """new[slot[t], h, d] = E[t, h, d] with E = exp(g): E in a kernel of its own, at the scatter's token loop,
    at its head-tile loop, or inlined; exp of NaN/Inf included."""
    T, H, D = tc.size_vars("T H D")
    slot = tc.placeholder((T,), "int64", name="slot")
    g = tc.placeholder((T, H, D), "float32", name="g")
    E = tc.compute((T, H, D), lambda t, h, d: tc.exp(g[t, h, d]), name="E")
    new = tc.scatter((11, H, D), (T, H, D), lambda t, h, d: (slot[t], h, d), lambda t, h, d: E[t, h, d],
                     unique=True, name="new")
    s = tc.create_schedule(new)
    t, h, d = new.axis
    ho, hi = s[new].split(h, 2)
    s[new].reorder(t, ho, hi, d)
    s[new].bind(t, "program_id.0")
    if place in ("t", "ho"):
        s[E].compute_at(s[new], {"t": t, "ho": ho}[place])
    elif place == "inline":
        s[E].compute_inline()
    k = tc.build(s, [slot, g, new])
    for Tn, Hn, Dn in ((5, 3, 7), (1, 1, 1)):
        sl = _slots(Tn, 11)
        gv = _special(torch.randn(Dn, Hn, Tn).permute(2, 1, 0))
        keep = (sl >= 0) & (sl < 11)
        ref = torch.zeros(11, Hn, Dn).index_put_((sl[keep],), gv[keep].exp())
        torch.testing.assert_close(k(sl, gv), ref, rtol=1e-6, atol=0, equal_nan=True)  # exp: ulps apart


def test_producer_of_the_positions_at_the_scatter():
    """new[P[t], d] = g[t, d] with P = 2 * slot + 1 computed at the scatter's token loop."""
    T, D = tc.size_vars("T D")
    slot = tc.placeholder((T,), "int64", name="slot")
    g = tc.placeholder((T, D), "float32", name="g")
    P = tc.compute((T,), lambda t: slot[t] * 2 + 1, name="P")
    new = tc.scatter((20, D), (T, D), lambda t, d: (P[t], d), lambda t, d: g[t, d], unique=True, name="new")
    s = tc.create_schedule(new)
    t, d = new.axis
    s[new].bind(t, "program_id.0")
    s[P].compute_at(s[new], t)
    k = tc.build(s, [slot, g, new])
    sl = _slots(6, 10)
    gv = _special(torch.randn(3, 6).t())
    keep = (sl * 2 + 1 >= 0) & (sl * 2 + 1 < 20)
    assert _same(k(sl, gv), torch.zeros(20, 3).index_put_((sl[keep] * 2 + 1,), gv[keep]))


# -- 8. the generated source -----------------------------------------------------------------------------------


def test_source_stores_or_adds():
    """combine="add" lowers to tl.atomic_add (and no plain store of the output), combine=None to tl.store, both
    masked to the output's bounds."""
    x, count = _histogram("int32")
    src = tc.lower(tc.create_schedule(count)).source()
    assert "tl.atomic_add(count + " in src and "tl.store(" not in src
    assert "(x_tile >= 0) & (x_tile < 10)" in src
    k = _kv_write("functional", "bfloat16", "bind_t")
    src = k.program.source()
    assert re.search(r"tl\.store\(new \+ ", src) and "tl.atomic_add" not in src
    assert "< S" in src  # the position's bound: the cache's extent


def test_source_comment_names_the_positions():
    """(A helper's finding: a bare-axis position was printed with its repr in the source's comment.)"""
    src = _kv_write("functional", "bfloat16", "bind_t").program.source()
    assert "# new[slot[t], h, d] = k[t, h, d]  (over t, h, d)" in src, src


# -- a reviewer's findings (each failed before its fix) ------------------------------------------------------


def test_a_dumped_file_fills_with_an_infinite_init_and_updates_in_place(tmp_path):
    """The dumped file's launch wrote fill_(-inf) (a NameError), and dump() of an init=None scatter was refused
    with the call's 'pass out=' message; both run now, the in-place one updating a random out tensor."""
    import subprocess
    import sys

    T, S = tc.size_vars("T S")
    sl = tc.placeholder((T,), "int64", name="sl")
    v = tc.placeholder((T,), "float32", name="v")
    o = tc.scatter((S,), (T,), lambda t: sl[t], lambda t: v[t], combine="add", deterministic=False,
                   init=float("-inf"), name="o")
    u = tc.scatter((S,), (T,), lambda t: sl[t], lambda t: v[t], unique=True, init=None, name="u")
    for out, name in ((o, "fill"), (u, "inplace")):
        k = tc.build(tc.create_schedule(out), [sl, v, out])
        path = k.dump(tmp_path / f"{name}.py", T=4, S=9)
        run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        assert f"{out.name}: shape (9,)" in run.stdout


def test_a_constant_position_with_every_axis_on_the_grid():
    """a[0] += w[t], t on the grid: the bounds check of a constant position was a Python bool mask (the
    interpreter's AttributeError); it is decided at build now, and a constant outside the output writes nothing."""
    T = tc.size_vars("T")
    w = tc.placeholder((T,), "float32", name="w")
    a = tc.scatter((1,), (T,), lambda t: 0, lambda t: w[t], combine="add", deterministic=False, name="a")
    s = tc.create_schedule(a)
    s[a].bind(a.axis[0], "program_id.0")
    wv = torch.randn(7)
    torch.testing.assert_close(tc.build(s, [w, a])(wv), wv.sum().reshape(1))
    b = tc.scatter((2,), (T,), lambda t: 5, lambda t: w[t], combine="add", deterministic=False, name="b")
    s = tc.create_schedule(b)
    s[b].bind(b.axis[0], "program_id.0")
    kb = tc.build(s, [w, b])
    assert "no write" in kb.program.source()
    assert torch.equal(kb(wv), torch.zeros(2))


@pytest.mark.parametrize("dtype,init", [("int32", 1e10), ("int32", float("nan")), ("int8", 300), ("uint8", -1),
                                        ("int32", 2.5), ("bool", 2)])
def test_an_init_the_dtype_cannot_hold_is_refused(dtype, init):
    """torch's fill_ raised a RuntimeError (or wrapped -1 to 255 in uint8) at the call; refused at tc.scatter."""
    T = tc.size_vars("T")
    x = tc.placeholder((T,), "int32", name="x")
    with pytest.raises(tc.ArgumentError, match=f"init={init!r} is not a {dtype} value"):
        tc.scatter((4,), (T,), lambda t: x[t], lambda t: 1, combine="add" if dtype in ("int32",) else None,
                   unique=True, dtype=dtype, init=init, name="o")


def test_the_fingerprint_holds_the_positions_and_the_start():
    """A tuned study is found by the schedule's fingerprint: two scatters that differ only in their positions
    or their init had the same one (and would have shared timings)."""
    T = tc.size_vars("T")
    x = tc.placeholder((T,), "int32", name="x")
    prints = {tc.create_schedule(tc.scatter((9,), (T,), at, lambda t: 1, combine="add", dtype="int32", init=init,
                                            name="o")).fingerprint()
              for at, init in ((lambda t: x[t], 0), (lambda t: x[t] + 1, 0), (lambda t: x[t], 5))}
    assert len(prints) == 3
