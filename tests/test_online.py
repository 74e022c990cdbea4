"""The online rewrite (`s[R].online(m, l)`, tilec/ir/online.py): a max and the sums that depend on it in
one loop with running statistics. Checked against a float64 reference on sizes the tiles do not divide,
size-1 rows, rows of -inf and NaN, in the looped form and the one-tile form; refused, with the rule named,
wherever the algebra does not hold; isl still checks every other dependence on the rewritten loops.
"""

from __future__ import annotations

import computes
import pytest
import torch

import tilec as tc

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # conftest makes cuda the default device there


def softmax(block, body=None, stats_dtype="float32", online=True, y_at=None):
    """Softmax with den = sum(body(X, mx)) (default exp(X - mx)) and den.online(mx)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx", dtype=stats_dtype)
    c2 = tc.reduce_axis(N, name="c2")
    body = body or (lambda x, m: tc.exp(x - m))
    den = tc.compute((M,), lambda r: tc.sum(body(X[r, c2], mx[r]), axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - mx[r]) / den[r], name="Y")
    s = tc.create_schedule(Y)
    r, col = Y.axis
    s[Y].split(col, block)
    s[Y].bind(r, "program_id.0")
    _, mi = s[mx].split(c, block)
    c2o, _ = s[den].split(c2, block)
    s[mx].compute_at(s[Y], r)
    s[den].compute_at(s[Y], r)
    if online:
        s[den].online(s[mx])
    return s, (X, mx, den, Y), c2o


def reference(x):
    return torch.softmax(x.double(), 1)


@pytest.mark.parametrize("block", [16, 128])
@pytest.mark.parametrize("shape", [(5, 100), (3, 16), (1, 1), (4, 33)])
def test_online_softmax_matches_float64(block, shape):
    s, (X, mx, den, Y), _ = softmax(block)
    kern = tc.build(s, [X, Y])
    x = torch.randn(*shape) * 4
    out = kern(x)
    torch.testing.assert_close(out.double(), reference(x), rtol=1e-5, atol=1e-7)


def test_online_softmax_rows_of_inf_and_nan():
    s, (X, mx, den, Y), _ = softmax(16)
    kern = tc.build(s, [X, Y])
    x = torch.randn(5, 70)
    x[0, :40] = float("-inf")     # the first tiles all -inf: the running max stays -inf, then grows
    x[1] = float("-inf")          # a row of -inf: NaN, as torch
    x[2, 50] = float("nan")       # NaN anywhere in the row: NaN row
    x[3, 5] = float("inf")        # +inf: NaN row (inf - inf), as torch
    out, ref = kern(x), reference(x)
    assert torch.equal(out.isnan(), ref.isnan())
    torch.testing.assert_close(out.double()[~ref.isnan()], ref[~ref.isnan()], rtol=1e-5, atol=1e-7)


def test_the_row_gives_the_same_bits_at_any_batch_size():
    s, (X, mx, den, Y), _ = softmax(16)
    kern = tc.build(s, [X, Y])
    x = torch.randn(9, 300)
    assert torch.equal(kern(x)[4], kern(x[4:5])[0])


def test_one_loop_instead_of_two():
    s, (X, mx, den, Y), _ = softmax(16)
    src = tc.lower(s).source()
    assert src.count("tl.range(") == 2  # the statistics' loop and Y's; without online there are three
    s2, *_ = softmax(16, online=False)
    assert tc.lower(s2).source().count("tl.range(") == 3


def test_online_is_replayed_from_the_trace():
    s, (X, mx, den, Y), _ = softmax(16)
    assert "den: online(mx)" in s.log
    s2 = tc.replay(s.trace, [Y])
    assert tc.lower(s2).source() == tc.lower(s).source()


@pytest.mark.parametrize("body, rule", [
    (lambda x, m: tc.exp(x - m) + 1.0, r"reads a statistic in .*only a product of one exp"),
    (lambda x, m: tc.exp(2.0 * x - m), r"subtracts mx from .*not from mx's own operand"),
    (lambda x, m: tc.exp(x - m) * tc.exp(x - m), r"has 2 factors exp"),
    (lambda x, m: x - m, r"den reads a statistic in \(X\[r, c2\] - mx\[r\]\)"),
    (lambda x, m: tc.exp(x) * 2.0, r"den does not read mx"),
    (lambda x, m: tc.exp(x - m) / m, r"divides by"),
])
def test_refused_where_the_algebra_does_not_hold(body, rule):
    s, (X, mx, den, Y), _ = softmax(16, body=body, online=False)
    with pytest.raises(tc.IllegalScheduleError, match=rule) as info:
        s[den].online(s[mx])
    assert info.value.reason == "online" and info.value.primitive == "online"
    assert not s.stages["den"].online_stats and "online" not in "\n".join(s.log)  # nothing recorded


def test_refused_without_a_max_or_with_rounded_statistics():
    s, (X, mx, den, Y), _ = softmax(16, stats_dtype="bfloat16", online=False)
    with pytest.raises(tc.IllegalScheduleError, match=r"mx is kept as bfloat16.*must be float32"):
        s[den].online(s[mx])
    s, (X, mx, den, Y), _ = softmax(16, online=False)
    with pytest.raises(tc.IllegalScheduleError, match=r"mx is not a sum"):
        s[mx].online(s[den])  # the target must be the sum; the max is a statistic
    with pytest.raises(tc.ArgumentError, match=r"the statistics this sum's loop carries"):
        s[den].online()


def test_a_target_accumulated_in_float16_is_refused():
    """Fuzz seed 340034111: a target summed in float16 was carried as fp16 and rescaled in fp32, which the
    interpreter ran and the GPU compiler refused (a loop-carried value changing type). The running sum is
    rescaled every tile, so it must be float32, like the statistics."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float16", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c].astype("float32"), axis=c), name="mx")
    c2 = tc.reduce_axis(N, name="c2")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2].astype("float32") - mx[r]), axis=c2), name="den")
    c3 = tc.reduce_axis(N, name="c3")
    O = tc.compute((M,), lambda r: tc.sum((tc.exp(X[r, c3].astype("float32") - mx[r]) / den[r]).astype("float16"),
                                          axis=c3, acc_dtype="float16"), name="O", dtype="float16")
    s = tc.create_schedule(O)
    s[O].split(c3, 16)
    with pytest.raises(tc.IllegalScheduleError, match=r"O is accumulated in float16.*must be float32") as info:
        s[O].online(s[mx], s[den])
    assert info.value.reason == "online"
    assert not s.stages["O"].online_stats


def test_an_intermediate_that_reads_a_statistic_must_be_inlined():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    E = tc.compute((M, N), lambda r, k: tc.exp(X[r, k] - mx[r]), name="E")
    c2 = tc.reduce_axis(N, name="c2")
    den = tc.compute((M,), lambda r: tc.sum(E[r, c2], axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: X[r, col] / den[r], name="Y")
    s = tc.create_schedule(Y)
    s[Y].bind(Y.axis[0], "program_id.0")
    s[den].compute_at(s[Y], Y.axis[0])
    s[den].split(c2, 16)
    s[den].online(s[mx])
    with pytest.raises(tc.LoweringError, match=r"E reads a statistic .*compute_inline\(E\)"):
        tc.lower(s)
    s[E].compute_inline()
    x = torch.randn(3, 50)
    xe = torch.exp(x.double() - x.double().amax(1, keepdim=True))
    torch.testing.assert_close(tc.build(s, [X, Y])(x).double(), x.double() / xe.sum(1, keepdim=True))


def test_isl_still_checks_the_other_dependences():
    """A consumer placed inside the online loop would read the sum before it is complete."""
    X, (c, c2), mx, den, _ = computes.softmax()
    Z = tc.compute(mx.shape, lambda r: tc.log(den[r]) + mx[r], name="Z")  # logsumexp
    s = tc.create_schedule(Z)
    s[den].bind(den.axis[0], "program_id.0")
    c2o, _ = s[den].split(c2, 16)
    s[den].online(s[mx])
    with pytest.raises(tc.IllegalScheduleError, match=r"read den before den's reduction") as info:
        s[Z].compute_at(s[den], c2o)
    assert info.value.reason == "rounding"
    s[Z].compute_at(s[den], den.axis[0])
    x = torch.randn(6, 45) * 3
    torch.testing.assert_close(tc.build(s, [X, Z])(x).double(), torch.logsumexp(x.double(), 1))


# --- attention: examples/attention.py, the naive compute made FlashAttention by online(m, l) --------------

def _attention():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import attention
    return attention


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("config", [{"BM": 16, "BN": 16}, {"BM": 32, "BN": 16}, {"BM": 16, "BN": 32}])
@pytest.mark.slow
def test_attention_matches_float64(causal, config):
    att = _attention()
    s, args = att.make(causal=causal, d=32, dtype="float16")
    kern = tc.build(s, args, config=config)
    for sizes in ({"Z": 1, "H": 2, "N": 45}, {"Z": 2, "H": 1, "N": 16}, {"Z": 1, "H": 1, "N": 1}):
        q, k, v = att.inputs(sizes, DEVICE, d=32, dtype=torch.float16)
        out = kern(q, k, v).double()
        ref = att.reference(q, k, v, causal=causal).double()
        err = ((out - ref).norm() / ref.norm()).item()
        assert err < 2e-3, (sizes, err)  # float16 rounding of P and O


@pytest.mark.slow
def test_causal_attention_skips_the_masked_tiles():
    att = _attention()
    s, args = att.make(causal=True, d=32, dtype="float16")
    src = tc.lower(s, {"BM": 16, "BN": 16}).source()
    assert src.count("tl.range(") == 2  # the unmasked tiles below the diagonal, then the diagonal's
    assert "jo_hi = " in src and "jo_full_hi = " in src
    unmasked = src.split("for jo in")[1].split("for jo in")[0]
    assert "<= offs_i" not in unmasked  # the causal where() is folded away where it holds everywhere
    s2, _ = att.make(causal=False, d=32, dtype="float16")
    assert tc.lower(s2, {"BM": 16, "BN": 16}).source().count("tl.range(") == 1  # no mask: one loop


@pytest.mark.parametrize("store_s", [True, False])
def test_a_stored_stage_in_the_skipped_loop_runs_every_tile(store_s):
    # fuzz seed 24807380: S, computed in O's online loop and also an output, was left unwritten in the tiles
    # the causal where() skips (rows 8.. of a 9 x 9 S with 8-wide tiles); a stored stage now makes every
    # tile run, and an S that is not stored keeps the skip
    M, N, L = tc.size_vars("M N L")
    Q = tc.placeholder((M, L), "float32", name="Q")
    B = tc.placeholder((N,), "float32", name="B")
    k = tc.reduce_axis(L, name="k")
    S = tc.compute((M, N), lambda i, j: tc.sum(Q[i, k] * B[j], axis=k), name="S")
    k1 = tc.reduce_axis(N, name="k1")
    m = tc.compute((M,), lambda i: tc.max(tc.where(k1 >= i, S[i, k1], float("-inf")), axis=k1), name="m")
    k2 = tc.reduce_axis(N, name="k2")
    O = tc.compute((M,), lambda i: tc.sum(tc.exp(tc.where(k2 >= i, S[i, k2], float("-inf")) - m[i]), axis=k2),
                   name="O")
    s = tc.create_schedule([m, O])
    s[O].online(s[m])
    k2o, _ = s[O].split(O.reduce_axis[0], 8)
    s[S].compute_at(s[O], k2o)
    args = [Q, B, m, O, S] if store_s else [Q, B, m, O]
    kernel = tc.build(s, args)
    assert ("k2o_lo = " in kernel.source) != store_s  # the skip's bounds, only where S is not stored
    q, b = torch.randn(9, 3), torch.randn(9)
    got = kernel(q, b)
    s_ref = q.sum(1, keepdim=True) * b
    masked = torch.where(torch.arange(9)[None, :] >= torch.arange(9)[:, None], s_ref, float("-inf"))
    m_ref = masked.amax(1)
    torch.testing.assert_close(got[0], m_ref)
    torch.testing.assert_close(got[1], torch.exp(masked - m_ref[:, None]).sum(1))
    if store_s:
        torch.testing.assert_close(got[2], s_ref)


@pytest.mark.slow
def test_skip_masked_false_runs_every_tile_and_propagates_nan_as_written():
    att = _attention()
    q, k, v = att.inputs({"Z": 1, "H": 1, "N": 40}, DEVICE, d=32, dtype=torch.float16)
    v[0, 0, 39, 0] = float("nan")  # the last key: masked for every query but the last
    out = {}
    for skip in (True, False):
        s, args = att.make(causal=True, d=32, dtype="float16", skip_masked=skip)
        assert ("O: online(m, l)" if skip else "O: online(m, l, False)") in s.log
        src = tc.lower(s, {"BM": 16, "BN": 16}).source()
        assert src.count("tl.range(") == (2 if skip else 1)
        out[skip] = tc.build(s, args, config={"BM": 16, "BN": 16})(q, k, v)
    ref = att.reference(q, k, v, causal=True)
    # naive: 0 * NaN = NaN for every query that sees the key's tile; skipping: only the diagonal tile's rows
    assert out[False][0, 0, :, 0].isnan().all()
    assert out[True][0, 0, :32, 0].isnan().sum() == 0 and out[True][0, 0, 32:, 0].isnan().all()
    assert ref[0, 0, 39, 0].isnan()


@pytest.mark.slow
def test_skip_masked_as_a_flag_is_a_knob_the_tuner_searches():
    """Issue 23: primitives.md says a tc.flag goes wherever a primitive takes a bool, but online refused
    `skip_masked=tc.flag(...)` (and printed the flag's name as the value). It is a knob now: each choice
    lowers as the bool does, matches the reference, the trace replays it, and the tuner's search space has it."""
    from tilec.tune.space import SearchSpace

    att = _attention()
    s, args = att.make(causal=True, d=32, dtype="float16", skip_masked=tc.flag("SKIP"))
    assert "O: online(m, l, SKIP)" in s.log and 'skip_masked' not in str(s.trace).split("online")[0]
    assert SearchSpace(s, tc.ShapeMix([({"Z": 1, "H": 1, "N": 40}, 1)])).knobs["SKIP"] == [0, 1]
    again = tc.replay(s.trace, args[-1:])
    q, k, v = att.inputs({"Z": 1, "H": 2, "N": 40}, DEVICE, d=32, dtype=torch.float16)
    ref = att.reference(q, k, v, causal=True).double()
    for skip in (0, 1):
        config = {"BM": 16, "BN": 16, "SKIP": skip}
        src = tc.lower(s, config).source()
        assert src.count("tl.range(") == (2 if skip else 1)  # as test_skip_masked_false_runs_every_tile...
        assert tc.lower(again, config).source() == src
        out = tc.build(s, args, config=config)(q, k, v).double()
        assert ((out - ref).norm() / ref.norm()).item() < 2e-3
    with pytest.raises(tc.ArgumentError, match=r"^argument 3, 'skip_masked' to online: expected True, False or a "
                                               r"tc.flag, got 'no'$"):
        att.make(causal=True, d=32, dtype="float16", skip_masked="no")


@pytest.mark.parametrize("split", [1, 4, 7])
@pytest.mark.slow
def test_decode_attention_split_in_parts_matches_float64(split):
    """One query, a long row of keys: the key loop in SPLIT parts, merged in order by the combine kernel."""
    att = _attention()
    s, args = att.make(causal=False, d=32, dtype="float16", split=True)
    if split == 4:  # the example's knob
        kern = tc.build(s, args, config={"BM": 16, "BN": 16, "SPLIT": 4})
    else:  # any number of parts, the tiles not dividing them
        O = s.stages["O"]
        O.k_split = None
        O.split_k(next(a for a in O.leaves if a.name == "jo"), split)
        kern = tc.build(s, args, config={"BM": 16, "BN": 16})
    assert len(kern.program.kernels) == 2 and set(kern.program.workspaces) == {"O_part", "m_part", "l_part"}
    for sizes in ({"Z": 1, "H": 3, "M": 1, "N": 300}, {"Z": 2, "H": 1, "M": 5, "N": 33}, {"Z": 1, "H": 1, "M": 1, "N": 1}):
        q, k, v = att.inputs(sizes, DEVICE, d=32, dtype=torch.float16)
        out = kern(q, k, v).double()
        ref = att.reference(q, k, v, causal=False).double()
        assert ((out - ref).norm() / ref.norm()).item() < 2e-3, sizes


@pytest.mark.slow
def test_decode_rows_give_the_same_bits_at_any_batch_size():
    att = _attention()
    s, args = att.make(causal=False, d=32, dtype="float16", split=True)
    kern = tc.build(s, args, config={"BM": 16, "BN": 16, "SPLIT": 8})
    q, k, v = att.inputs({"Z": 3, "H": 2, "M": 1, "N": 200}, DEVICE, d=32, dtype=torch.float16)
    whole = kern(q, k, v)
    one = kern(q[1:2].contiguous(), k[1:2].contiguous(), v[1:2].contiguous())
    assert torch.equal(whole[1], one[0]) and torch.equal(kern(q, k, v), whole)  # and run to run


@pytest.mark.slow
def test_the_tuner_searches_the_row_knobs_like_any_other():
    """examples/softmax.py's knobs (BLOCK: row-resident or looped, ROWS, warps) tuned on a mix where one
    shape's rows fit one tile and the other's do not; every measured config was checked on both."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import softmax as example

    s, args = example.make()
    mix = tc.ShapeMix([({"M": 4, "N": 1000}, 3), ({"M": 2, "N": 3000}, 1)])
    tuned = tc.tune(s, mix, trials=3, args=args, reference=lambda x: torch.softmax(x, 1), progress=False)
    done = [t for t in tuned.trials() if t["state"] == "COMPLETE"]
    assert len(done) >= 3 and all(set(t["times"]) == {"M=4,N=1000", "M=2,N=3000"} for t in done)
    x = torch.randn(4, 1000, device=DEVICE)
    torch.testing.assert_close(tuned(x), torch.softmax(x, 1), rtol=1e-5, atol=1e-6)
    block = tuned.chosen.configs["M=4,N=1000"]["BLOCK"]  # every choice is >= 1000: the row fits one tile
    assert block >= 1000 and "tl.range(" not in tuned.source(M=4, N=1000).split("def Y_kernel")[1]


# --- fuzz finds (helper's online family, seeds 8000331 and 8201491): regression tests first -----------------

def _logsumexp(block):
    X, (c, c2), mx, den, _ = computes.softmax()
    Z = tc.compute(mx.shape, lambda r: tc.log(den[r]) + mx[r], name="Z")
    s = tc.create_schedule([Z])
    s[Z].bind(Z.axis[0], "program_id.0")
    s[mx].split(c, block)
    s[den].split(c2, block)
    s[mx].compute_at(s[Z], Z.axis[0])
    s[den].compute_at(s[Z], Z.axis[0])
    s[den].online(s[mx])
    return s, X, den, Z


@pytest.mark.parametrize("n", [10, 40])
def test_a_row_whose_max_is_minus_inf_gives_nan_as_written(n):
    """Fuzz seed 8000331: a row of -inf has max -inf, and the naive sum of exp(-inf - -inf) is NaN. The looped
    online form's guard (a max still -inf subtracts 0) made the sum 0 there, so log(sum) + max was -inf: the
    answer depended on whether the row fit one tile."""
    s, X, den, Z = _logsumexp(16)
    kern = tc.build(s, [X, Z, den])
    x = torch.randn(3, n, device=DEVICE)
    x[0] = float("-inf")
    x[2, : n // 2] = float("-inf")  # the first tiles all -inf, then finite: exact, not NaN
    z, d = kern(x)
    xd = x.double()
    mx = xd.amax(1, keepdim=True)
    want_d = torch.exp(xd - mx).sum(1)  # NaN in row 0, as written
    assert torch.equal(d.isnan(), want_d.isnan()) and d[0].isnan() and z[0].isnan()
    torch.testing.assert_close(d[1:].double(), want_d[1:], rtol=1e-5, atol=0)
    torch.testing.assert_close(z[1:].double(), torch.logsumexp(xd[1:], 1), rtol=1e-5, atol=1e-6)


def test_masked_online_loop_inside_a_serial_spatial_loop():
    """Fuzz seed 8201491: the online loop's tile bounds (from its where()) were assigned after the serial
    loop that encloses the online loop (emit_stmt wrote to the stage's statements, not the loop's), so the
    kernel read them before they were set (UnboundLocalError, NameError when compiled)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, M), "float32", name="X")
    V = tc.placeholder((M, N), "float32", name="V")
    k = tc.reduce_axis(M, name="k")
    m = tc.compute((M,), lambda i: tc.max(tc.where(k <= i, X[i, k], float("-inf")), axis=k), name="m")
    k1 = tc.reduce_axis(M, name="k1")
    O = tc.compute((M, N), lambda i, j: tc.sum(tc.exp(tc.where(k1 <= i, X[i, k1], float("-inf")) - m[i]) * V[k1, j],
                                               axis=k1), name="O")
    s = tc.create_schedule([O])
    i, j = O.axis
    io, ii = s[O].split(i, 16)
    jo, ji = s[O].split(j, 16)
    ko, ki = s[O].split(O.reduce_axis[0], 16)
    s[O].reorder(io, jo, ko, ii, ji, ki)  # jo: a serial spatial loop around the online loop over ko
    s[O].bind(io, "program_id.0")
    s[O].online(s[m])
    x, v = torch.randn(40, 40, device=DEVICE), torch.randn(40, 33, device=DEVICE)
    xd = x.double().masked_fill(torch.ones(40, 40, dtype=torch.bool, device=DEVICE).triu(1), float("-inf"))
    want = torch.exp(xd - xd.amax(1, keepdim=True)) @ v.double()
    torch.testing.assert_close(tc.build(s, [X, V, O])(x, v).double(), want, rtol=1e-5, atol=1e-5)


def test_a_row_of_minus_inf_in_a_reduction_that_runs_once_inside_a_spatial_loop():
    """Fuzz seed 8500892: the target's reduction loop ran once (no loop) inside a serial spatial loop; the
    update took the -inf guard (it looked for any loop), the finish did not (it looked at the reduction's),
    so a row of -inf gave a sum of 0, not NaN."""
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, N), "float32", name="X")
    V = tc.placeholder((N, K), "float32", name="V")
    k = tc.reduce_axis(N, name="k")
    m = tc.compute((M,), lambda i: tc.max(X[i, k], axis=k), name="m")
    k1 = tc.reduce_axis(N, name="k1")
    O = tc.compute((M, K), lambda i, j: tc.sum(tc.exp(X[i, k1] - m[i]) * V[k1, j], axis=k1), name="O")
    s = tc.create_schedule([O])
    i, j = O.axis
    s[O].bind(i, "program_id.0")  # j: a serial loop of K iterations, one element each
    s[O].split(k1, 64)             # runs once for N <= 64
    s[O].online(s[m])
    x, v = torch.randn(3, 40, device=DEVICE), torch.randn(40, 5, device=DEVICE)
    x[1] = float("-inf")
    out = tc.build(s, [X, V, O])(x, v)
    xd = x.double()
    ref = torch.exp(xd - xd.amax(1, keepdim=True)) @ v.double()
    assert torch.equal(out.isnan(), ref.isnan()) and out[1].isnan().all()
    torch.testing.assert_close(out[[0, 2]].double(), ref[[0, 2]], rtol=1e-5, atol=1e-5)


# --- a helper's review of the online lowering (scripts under the interpreter): regression tests first -----

@pytest.mark.slow
def test_a_where_in_another_stage_that_prints_like_the_mask_is_not_folded():
    """Review F1: the unmasked tiles' fold matched any where() whose text was the mask's, j <= i, also in a
    stage computed in the loop with axes of its own named j and i (V masked by key <= head dim): wrong values."""
    Z, H, M, N = tc.size_vars("Z H M N")
    d = 32
    Q = tc.placeholder((Z, H, M, d), "float32", name="Q")
    K = tc.placeholder((Z, H, N, d), "float32", name="K")
    V = tc.placeholder((Z, H, N, d), "float32", name="V")
    dd = tc.reduce_axis(d, name="dd")
    S = tc.compute((Z, H, M, N), lambda z, h, i, j: tc.sum(Q[z, h, i, dd] * K[z, h, j, dd], axis=dd), name="S")
    Sc = tc.compute((Z, H, M, N), lambda z, h, i, j: tc.where(j <= i, S[z, h, i, j], float("-inf")), name="Sc")
    Vm = tc.compute((Z, H, N, d), lambda z, h, j, i: tc.where(j <= i, V[z, h, j, i], 0.0), name="Vm")
    j1, j2, j = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((Z, H, M), lambda z, h, i: tc.max(Sc[z, h, i, j1], axis=j1), name="m")
    l = tc.compute((Z, H, M), lambda z, h, i: tc.sum(tc.exp(Sc[z, h, i, j2] - m[z, h, i]), axis=j2), name="l")  # noqa: E741
    P = tc.compute((Z, H, M, N), lambda z, h, i, j: tc.exp(Sc[z, h, i, j] - m[z, h, i]) / l[z, h, i], name="P")
    O = tc.compute((Z, H, M, d), lambda z, h, i, e: tc.sum(P[z, h, i, j] * Vm[z, h, j, e], axis=j), name="O")  # noqa: E741
    s = tc.create_schedule(O)
    z, h, i, e = O.axis
    io, ii = s[O].split(i, 16)
    eo, ei = s[O].split(e, d)
    jo, ji = s[O].split(j, 16)
    s[O].reorder(z, h, io, eo, jo, ii, ei, ji)
    s[O].bind(io, "program_id.0")
    s[O].bind(s[O].fuse(z, h), "program_id.1")
    s[O].online(s[m], s[l])
    s[Sc].compute_inline()
    s[P].compute_inline()
    s[S].compute_at(s[O], jo)
    s[Vm].compute_at(s[O], jo)
    q, k, v = (torch.randn(1, 1, 40, d, device=DEVICE) for _ in range(3))
    sc = (q.double() @ k.double().transpose(-1, -2)).masked_fill(
        torch.ones(40, 40, dtype=torch.bool, device=DEVICE).triu(1), float("-inf"))
    vm = torch.where(torch.arange(40, device=DEVICE)[:, None] <= torch.arange(d, device=DEVICE)[None, :], v.double(), 0.0)
    torch.testing.assert_close(tc.build(s, [Q, K, V, O])(q, k, v).double(), torch.softmax(sc, -1) @ vm,
                               rtol=1e-5, atol=1e-5)


def test_a_statistic_read_at_other_positions_is_refused():
    """Review F2 and M1: l subtracting the max of another row (m[b, a], or mx[0]) was accepted; the online
    form subtracts the running max of its own row, a silent wrong answer (or a misleading build error)."""
    N = tc.size_vars("N")
    X = tc.placeholder((4, 4, N), "float32", name="X")
    j1, j2, j3 = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j3"))
    m = tc.compute((4, 4), lambda a, b: tc.max(X[a, b, j1], axis=j1), name="m")
    l = tc.compute((4, 4), lambda a, b: tc.sum(tc.exp(X[a, b, j2] - m[b, a]), axis=j2), name="l")  # noqa: E741
    R = tc.compute((4, 4), lambda a, b: tc.sum(tc.exp(X[a, b, j3] - m[a, b]) * X[a, b, j3] / l[a, b], axis=j3),
                   name="R")
    s = tc.create_schedule(R)
    with pytest.raises(tc.IllegalScheduleError, match=r"l reads m at \[b, a\].*its own \[a, b\]") as info:
        s[R].online(s[m], s[l])
    assert info.value.reason == "online"
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c, c2, c3 = (tc.reduce_axis(N, name=n) for n in ("c", "c2", "c3"))
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    l = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[0]), axis=c2), name="l")  # noqa: E741
    R = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c3] - mx[r]) * X[r, c3] / l[r], axis=c3), name="R")
    with pytest.raises(tc.IllegalScheduleError, match=r"l reads mx at \[0\]"):
        _online(R, mx, l)


def _online(R, *stats):
    s = tc.create_schedule(R)
    s[R].online(*(s[t] for t in stats))
    return s


def test_a_summand_rounded_to_an_integer_is_refused():
    """Review F3: P rounded to int32 inside the summand was accepted; rounding the unnormalized exp(x - m')
    to an integer is not rounding exp(x - m) / l (0 for most terms)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c, c2, c3 = (tc.reduce_axis(N, name=n) for n in ("c", "c2", "c3"))
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    l = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="l")  # noqa: E741
    P = tc.compute((M, N), lambda r, k: tc.exp(X[r, k] - mx[r]) / l[r], name="P", dtype="int32")
    R = tc.compute((M,), lambda r: tc.sum(P[r, c3] * X[r, c3], axis=c3, acc_dtype="float32"), name="R")
    with pytest.raises(tc.IllegalScheduleError, match=r"int32.*a float rounding point"):
        _online(R, mx, l)


def test_a_coefficient_that_reads_a_statistic_through_another_reduction_is_refused():
    """Review M2 and M3: R dividing by l (not named a statistic), or reading g = sum(X - mx), was accepted and
    then refused at build with advice that cannot work (compute_root, a cycle of kernels)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c, c2, c3, c4 = (tc.reduce_axis(N, name=n) for n in ("c", "c2", "c3", "c4"))
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    l = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="l")  # noqa: E741
    g = tc.compute((M,), lambda r: tc.sum(X[r, c4] - mx[r], axis=c4), name="g")
    R = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c3] - mx[r]) / l[r], axis=c3), name="R")
    with pytest.raises(tc.IllegalScheduleError, match=r"R reads l, which reads mx.*name l among the statistics"):
        _online(R, mx)
    c5 = tc.reduce_axis(N, name="c5")
    R2 = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c5] - mx[r]) * g[r] / l[r], axis=c5), name="R2")
    with pytest.raises(tc.IllegalScheduleError, match=r"R2 reads g, which reads mx"):
        _online(R2, mx, l)


def test_shared_loads_and_sub_tiles_of_one_kernel():
    """Review F4: with 192-wide sub-tiles (128 + 64), piece 0's X tile was shared with g's and piece 1's was
    not, so the pieces lowered to different nests: an internal error, at N <= 128 only."""
    M, N = tc.size_vars("M N")
    A = tc.placeholder((M, N), "float32", name="A")
    X = tc.placeholder((N,), "float32", name="X")
    g = tc.compute((N,), lambda j: X[j] * 2.0, name="g")
    Y = tc.compute((M, N), lambda i, j: A[i, j] + X[j] + g[j], name="Y")
    s = tc.create_schedule(Y)
    i, j = Y.axis
    io, ii = s[Y].split(i, 16)
    jo, ji = s[Y].split(j, 192)
    s[Y].reorder(io, jo, ii, ji)
    s[Y].bind(io, "program_id.0")
    s[g].split(g.axis[0], 128)
    s[g].compute_at(s[Y], io)
    kern = tc.build(s, [A, X, Y])
    for n in (100, 150, 1000):
        a, x = torch.randn(20, n, device=DEVICE), torch.randn(n, device=DEVICE)
        torch.testing.assert_close(kern(a, x), a + 3 * x)


def test_a_knob_and_an_int_of_one_value_make_the_same_tiles():
    """Review F5: g split by a knob at 64 and h by 64: the plan kept g's region in registers (equal factors),
    the builder compared the offsets' text (tl.arange(0, BLOCK) is not tl.arange(0, 64)) and refused the
    read, where the rows fit one tile."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    g = tc.compute((M, N), lambda r, c: tc.exp(X[r, c]) * 2.0, name="g")
    h = tc.compute((M, N), lambda r, c: g[r, c] + 1.0, name="h")
    s = tc.create_schedule(h)
    ro, co, ri, ci = s[h].tile(*h.axis, 4, 64)
    s[h].bind(ro, "program_id.0")
    s[g].split(g.axis[1], tc.knob("BLOCK", [64, 128]))
    s[g].compute_at(s[h], ro)
    kern = tc.build(s, [X, h], config={"BLOCK": 64})
    for n in (100, 64, 50):
        x = torch.randn(7, n, device=DEVICE)
        torch.testing.assert_close(kern(x), torch.exp(x) * 2.0 + 1.0)


_TWO_CULPRITS = """
import tilec as tc
M, N = tc.size_vars("M N")
X = tc.placeholder((M, N), "float32", name="X")
V = tc.placeholder((N,), "float32", name="V")
k, k1, k2 = tc.reduce_axis(N, name="k"), tc.reduce_axis(N, name="k1"), tc.reduce_axis(N, name="k2")
m = tc.compute((M,), lambda i: tc.max(X[i, k], axis=k), name="m")
E = tc.compute((M, N), lambda i, j: tc.exp(X[i, j] - m[i]), name="E")
l = tc.compute((M,), lambda i: tc.sum(E[i, k1], axis=k1), name="l")
P = tc.compute((M, N), lambda i, j: E[i, j] / l[i], name="P")
O = tc.compute((M,), lambda i: tc.sum(V[k2] * P[i, k2], axis=k2), name="O")
s = tc.create_schedule([O])
try:
    s[O].online(s[m], s[l])
    tc.build(s, [X, V, O])
except tc.TilecError as e:
    print(e)
"""


def test_an_online_refusal_with_two_culprits_names_the_same_one_in_every_process():
    """E (read by l) and P (read by O) both read a statistic and are not inlined: the refusal named the one
    it met first in a set of names, which Python's string hashing orders differently in each process
    (fuzz seeds 24100040, 24100801). It names them in the group's order now: the target's reads first."""
    import os
    import subprocess
    import sys

    said = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "TRITON_INTERPRET": "1"}
        out = subprocess.run([sys.executable, "-c", _TWO_CULPRITS], env=env, capture_output=True, text=True,
                             timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert out.returncode == 0, out.stderr[-2000:]
        said.add(out.stdout.strip())
    assert len(said) == 1, said
    assert "online(O): P reads a statistic" in said.pop()


def _ragged_softmax_sum(rows_per_program: int):
    """O[b] = sum_j softmax(where(j < lens[b], X[b, j], -inf))_j * V[b, j]: each row's loop bounded by its length."""
    B, N = tc.size_vars("B N")
    X = tc.placeholder((B, N), "float32", name="X")
    V = tc.placeholder((B, N), "float32", name="V")
    lens = tc.placeholder((B,), "int32", name="lens")
    Xm = tc.compute((B, N), lambda b, j: tc.where(j < lens[b], X[b, j], float("-inf")), name="Xm")
    j1, j2, j3 = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j3"))
    m = tc.compute((B,), lambda b: tc.max(Xm[b, j1], axis=j1), name="m")
    l = tc.compute((B,), lambda b: tc.sum(tc.exp(Xm[b, j2] - m[b]), axis=j2), name="l")  # noqa: E741
    O = tc.compute((B,), lambda b: tc.sum(tc.exp(Xm[b, j3] - m[b]) / l[b] * V[b, j3], axis=j3), name="O")
    s = tc.create_schedule(O)
    s[Xm].compute_inline()
    (b,) = O.axis
    if rows_per_program == 1:
        s[O].bind(b, "program_id.0")
    else:
        bo, bi = s[O].split(b, rows_per_program)
        s[O].bind(bo, "program_id.0")
    jo, ji = s[O].split(j3, 8)
    s[O].reorder(*[a for a in s[O].leaves if a is not jo and a is not ji], jo, ji)
    s[O].online(s[m], s[l])
    return s, [X, V, lens, O]


@pytest.mark.parametrize("rows_per_program", [1, 4])
def test_a_loop_bounded_by_a_length_read_from_data(rows_per_program):
    """A ragged batch (varlen attention's key loop): where the max's operand is where(j < lens[b], x, -inf) and
    lens[b] is one value per program, the loop stops at the row's last tile (FlashAttention's n_block_max),
    its full tiles unmasked; where a program holds several rows, lens[b] is a tile and every tile runs, masked.
    Both agree with torch, NaN/inf past a row's length included (they are never read into the output)."""
    s, args = _ragged_softmax_sum(rows_per_program)
    src = tc.lower(s, target="cuda").source()
    assert ("j3o_hi = tl.minimum(tl.maximum(lens_tile" in src) == (rows_per_program == 1)
    kern = tc.build(s, args)
    x, v = torch.randn(7, 37), torch.randn(7, 37)
    lens = torch.tensor([37, 1, 8, 9, 16, 30, 2], dtype=torch.int32)
    pad = torch.arange(37)[None, :] >= lens[:, None].long()
    x[pad] = float("nan")  # past each row's end: masked, never reaches the output
    want = (torch.softmax(torch.where(pad, float("-inf"), x.double()), 1) * torch.where(pad, 0.0, v.double())).sum(1)
    torch.testing.assert_close(kern(x, v, lens).double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("parts", [3, 8])
def test_a_loop_bounded_by_a_length_split_in_parts(parts):
    """split_k of a length-bounded loop (a CUDA-graph decode over a whole preallocated cache, examples/qwen3):
    each part runs its chunk of the tiles below the row's length, not of the whole row, so a key past the
    last tile is never read. V is inf there: a part running those tiles masked would give 0 * inf = NaN."""
    s, args = _ragged_softmax_sum(1)
    O = s.stages["O"]
    O.split_k(next(a for a in O.leaves if a.name == "j3o"), parts)
    kern = tc.build(s, args)
    src = kern.source
    assert "chunk_j3o = tl.cdiv(tl.maximum(j3o_hi, 0), " in src and "tl.range(j3o_part_lo, j3o_part_hi" in src
    x, v = torch.randn(7, 61), torch.randn(7, 61)
    lens = torch.tensor([61, 1, 8, 9, 16, 30, 2], dtype=torch.int32)
    pad = torch.arange(61)[None, :] >= lens[:, None].long()
    x[pad] = float("nan")
    past_last_tile = torch.arange(61)[None, :] >= (lens[:, None].long() + 7) // 8 * 8
    v[past_last_tile] = float("inf")
    want = (torch.softmax(torch.where(pad, float("-inf"), x.double()), 1) * torch.where(pad, 0.0, v.double())).sum(1)
    torch.testing.assert_close(kern(x, v, lens).double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_causal_attention_split_in_parts_runs_each_query_tiles_keys():
    """Causal attention with its key loop split in parts: each part's chunk is cut from the query tile's own
    keys (up to its diagonal), from the mask at the tile's corners."""
    att = _attention()
    s, args = att.make(causal=True, d=32, dtype="float16", split=True)
    O = s.stages["O"]
    O.k_split = None
    O.split_k(next(a for a in O.leaves if a.name == "jo"), 3)
    kern = tc.build(s, args, config={"BM": 16, "BN": 16})
    assert "chunk_jo = tl.cdiv(tl.maximum(jo_hi, 0), 3)" in kern.source
    for sizes in ({"Z": 1, "H": 2, "N": 45}, {"Z": 2, "H": 1, "N": 16}, {"Z": 1, "H": 1, "N": 1}):
        q, k, v = att.inputs(sizes, DEVICE, d=32, dtype=torch.float16)
        out = kern(q, k, v).double()
        ref = att.reference(q, k, v, causal=True).double()
        assert ((out - ref).norm() / ref.norm()).item() < 2e-3, sizes
