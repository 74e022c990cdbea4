"""Unit tests of the schedule primitives' rewrites (names, extents, leaf orders, placements, knobs,
the log and fingerprint), and of the loop nests `tc.lower` prints for them.
"""

import pytest
import torch
from computes import design_schedule, gemm, gemm_silu

import tilec as tc
from tilec.ir.expr import as_expr, evaluate
from tilec.schedule import Fuse, Split


def ext(axis, **env) -> int:
    """An axis extent as an int, given sizes and knob values."""
    return evaluate(as_expr(axis.extent), env)


def names(axes) -> list[str]:
    return [a.name for a in axes]


# ---------------------------------------------------------------------------------------------
# split


def test_split_names_kinds_and_extents():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    i, j = C.axis
    (k,) = C.reduce_axis
    io, ii = s[C].split(i, 16)
    ko, ki = s[C].split(k, 8)
    assert (io.name, ii.name, ko.name, ki.name) == ("io", "ii", "ko", "ki")
    assert (io.kind, ii.kind, ko.kind, ki.kind) == ("spatial", "spatial", "reduce", "reduce")
    # outer extent is cdiv(extent, factor); inner extent is the factor
    assert [ext(io, M=m) for m in (1, 16, 17, 37, 48)] == [1, 1, 2, 3, 3]
    assert ext(ii) == 16 and ext(ko, K=50) == 7 and ext(ki) == 8
    assert names(s[C].leaves) == ["io", "ii", "j", "ko", "ki"]
    assert s[C].relations == [Split(i, io, ii, 16), Split(k, ko, ki, 8)]


def test_split_of_a_constant_extent_folds():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    io, ii = s[Z].split(Z.axis[0], 16)
    assert io.extent.value == 3 and ii.extent.value == 16  # ints stay ints, no symbolic cdiv


def test_split_by_a_knob():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    bm = tc.knob("BM", [16, 64])
    io, ii = s[C].split(C.axis[0], bm)
    assert ii.extent is bm
    assert ext(io, M=100, BM=16) == 7 and ext(io, M=100, BM=64) == 2


def test_split_twice_gives_distinct_names():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, ii = s[C].split(C.axis[0], 64)
    ioo, ioi = s[C].split(io, 4)
    iio, iii = s[C].split(ii, 16)
    assert names(s[C].leaves) == ["ioo", "ioi", "iio", "iii", "j", "k"]
    assert ext(ioo, M=1000) == 4 and ext(ioi) == 4 and ext(iio) == 4 and ext(iii) == 16  # cdiv(cdiv(1000, 64), 4)


def test_split_names_avoid_existing_axes():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, io: X[i, io] + 1.0, name="Z")  # an axis is already called io
    s = tc.create_schedule(Z)
    i, io = Z.axis
    o1, i1 = s[Z].split(i, 16)
    o2, i2 = s[Z].split(io, 16)
    got = names(s[Z].leaves)
    assert got == ["io1", "ii", "ioo", "ioi"]
    assert len(set(got)) == len(got)


def test_split_names_differ_per_stage():
    # every stage names its own axes: C and Y may both have an io
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    c_io, _ = s[C].split(C.axis[0], 16)
    y_io, _ = s[Y].split(Y.axis[0], 16)
    assert c_io.name == y_io.name == "io" and c_io is not y_io


# ---------------------------------------------------------------------------------------------
# tile, reorder, fuse


def test_tile_is_split_split_reorder():
    A, W, C = gemm()
    s1 = tc.create_schedule(C)
    i, j = C.axis
    xo, yo, xi, yi = s1[C].tile(i, j, 16, 32)
    assert names((xo, yo, xi, yi)) == ["io", "jo", "ii", "ji"]
    assert names(s1[C].leaves) == ["io", "jo", "ii", "ji", "k"]
    assert ext(yo, N=50) == 2 and ext(yi) == 32

    s2 = tc.create_schedule(C)
    io, ii = s2[C].split(i, 16)
    jo, ji = s2[C].split(j, 32)
    s2[C].reorder(io, jo, ii, ji)
    assert names(s2[C].leaves) == names(s1[C].leaves)
    assert s1.log == s2.log
    assert str(tc.lower(s1)) == str(tc.lower(s2))


def test_reorder_puts_given_axes_in_the_positions_they_occupy():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, ii = s[C].split(C.axis[0], 16)
    jo, ji = s[C].split(C.axis[1], 16)
    assert names(s[C].leaves) == ["io", "ii", "jo", "ji", "k"]
    s[C].reorder(ji, io)  # occupy slots 0 and 3, in the order given; the others stay put
    assert names(s[C].leaves) == ["ji", "ii", "jo", "io", "k"]
    s[C].reorder([io, jo, ii, ji])  # a list works too
    assert names(s[C].leaves) == ["io", "jo", "ii", "ji", "k"]
    s[C].reorder(io)  # a single axis: no change
    assert names(s[C].leaves) == ["io", "jo", "ii", "ji", "k"]


def test_fuse_name_extent_and_leaf_order():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    f = s[C].fuse(io, jo)
    assert f.name == "io_jo" and f.kind == "spatial"
    assert ext(f, M=37, N=50) == 3 * 4
    assert names(s[C].leaves) == ["io_jo", "ii", "ji", "k"]
    assert s[C].relations[-1] == Fuse(io, jo, f)


def test_fuse_of_constant_extents_folds():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    f = s[Z].fuse(*Z.axis)
    assert f.extent.value == 37 * 50


def test_fuse_of_three_axes_is_two_fuses_and_runs():
    """fuse(a, b, c) = fuse(fuse(a, b), c), as TVM's fuse(*args) (Stage.fuse took exactly two axes); the axes
    must be consecutive leaves, outer first, as for two."""
    X = tc.placeholder((3, 5, 7, 4), "float32", name="X")
    Z = tc.compute((3, 5, 7, 4), lambda a, b, c, d: X[a, b, c, d] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    a, b, c, d = Z.axis
    with pytest.raises(tc.ArgumentError, match=r"fuse: a_b and d must be adjacent"):
        s[Z].fuse(a, b, d)
    assert names(s[Z].leaves) == ["a", "b", "c", "d"]  # the refused call left nothing behind
    f = s[Z].fuse(a, b, c)
    assert f.name == "a_b_c" and f.extent.value == 3 * 5 * 7 and names(s[Z].leaves) == ["a_b_c", "d"]
    s[Z].bind(f, "program_id.0")
    x = torch.randn(3, 5, 7, 4)
    torch.testing.assert_close(tc.build(s, [X, Z])(x), 2 * x)
    again = tc.replay(s.trace, s.outputs)
    assert names(again[Z].leaves) == ["a_b_c", "d"] and again.fingerprint() == s.fingerprint()


def test_fuse_then_split():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    f = s[Z].fuse(*Z.axis)
    o, i = s[Z].split(f, 256)
    assert names(s[Z].leaves) == ["i_jo", "i_ji"] and ext(o) == 8  # cdiv(1850, 256)


# ---------------------------------------------------------------------------------------------
# placement


def test_compute_at_inline_root_set_attach():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z1 = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z1")
    Z2 = tc.compute((37, 50), lambda i, j: Z1[i, j] + 1.0, name="Z2")
    s = tc.create_schedule(Z2)
    assert s[Z1].attach is None and s[Z2].attach is None  # every stage starts at the root
    io, ii = s[Z2].split(Z2.axis[0], 16)
    assert s[Z1].compute_at(s[Z2], io) is s[Z1]
    assert s[Z1].attach == (s[Z2], io)
    assert s[Z1].compute_inline() is s[Z1]
    assert s[Z1].attach == "inline"
    assert s[Z1].compute_root() is s[Z1]
    assert s[Z1].attach is None


def test_cache_stages_record_scope_readers_and_place():
    s, (A, W, C, Y), _ = design_schedule()
    a_sh, w_sh, c_loc = s.caches
    assert (a_sh.name, a_sh.kind, a_sh.scope, a_sh.readers) == ("A_shared", "cache_read", "shared", (s[C],))
    assert (w_sh.name, c_loc.name, c_loc.kind, c_loc.scope) == ("W_shared", "C_local", "cache_write", "local")
    leaves = {a.name: a for a in s[C].leaves}
    assert a_sh.attach == (s[C], leaves["ko"]) and c_loc.attach == (s[C], leaves["jo"])
    assert names(s[C].leaves) == ["io", "jo", "ko", "ii", "ji", "ki"]  # the computing stage keeps its loops


def test_second_cache_read_of_one_tensor_gets_its_own_name():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    first = s.cache_read(A, "shared", readers=[C])
    second = s.cache_read(A, "shared", readers=[C])
    assert first.name == "A_shared" and second.name != first.name


def test_bind_pipeline_num_warps_unroll_record_decisions():
    s, (A, W, C, Y), _ = design_schedule(stages=3)
    leaves = {a.name: a for a in s[C].leaves}
    assert s[C].binds == {leaves["io"]: 0, leaves["jo"]: 1}
    assert s[C].pipelines == {leaves["ko"]: 3}
    s[C].num_warps(8)
    s[C].unroll(leaves["ki"])
    assert s[C].warps == 8 and s[C].unrolled == {leaves["ki"]}


# ---------------------------------------------------------------------------------------------
# knobs, log, fingerprint


def test_knobs_are_registered_on_the_schedule():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    assert s.knobs == {}
    bm = tc.knob("BM", [16, 32])
    s[C].split(C.axis[0], bm)
    s[C].split(C.axis[1], bm)  # one knob, two places
    ko, ki = s[C].split(C.reduce_axis[0], tc.knob("BK", [32, 16]))
    s[C].pipeline(ko, tc.knob("stages", [2, 3]))
    s[C].num_warps(tc.knob("warps", [4, 8]))
    assert list(s.knobs) == ["BM", "BK", "stages", "warps"]
    assert s.knobs["BM"] is bm and s.knobs["BK"].choices == (32, 16)
    # defaults are each knob's first choice; a config overrides some of them
    assert tc.lower(s).config == {"BM": 16, "BK": 32, "stages": 2, "warps": 4}
    assert tc.lower(s, {"BK": 16, "warps": 8}).config == {"BM": 16, "BK": 16, "stages": 2, "warps": 8}


def test_a_knob_redeclared_with_the_same_choices_is_the_same_knob():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    first = tc.knob("B", [16, 32])
    s[C].split(C.axis[0], first)
    s[C].split(C.axis[1], tc.knob("B", [16, 32]))
    assert list(s.knobs) == ["B"]
    assert all(r.factor is first for r in s[C].relations)


def test_log_records_the_calls():
    s, (A, W, C, Y), _ = design_schedule()
    assert s.log == [
        "C: split(i, BM) -> io, ii",
        "C: split(j, BN) -> jo, ji",
        "C: split(k, BK) -> ko, ki",
        "C: reorder(io, jo, ko, ii, ji, ki)",
        "C: bind(io, 'program_id.0')",
        "C: bind(jo, 'program_id.1')",
        "cache_read(A, 'shared', readers=[C]) -> A_shared",
        "A_shared: compute_at(C, ko)",
        "cache_read(W, 'shared', readers=[C]) -> W_shared",
        "W_shared: compute_at(C, ko)",
        "cache_write(C, 'local') -> C_local",
        "C_local: compute_at(C, jo)",
        "C: pipeline(ko, stages=stages)",
        "Y: compute_at(C, jo)",
    ]


def test_log_records_other_primitives_and_not_failed_calls():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z1 = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z1")
    Z2 = tc.compute((37, 50), lambda i, j: Z1[i, j] + 1.0, name="Z2")
    s = tc.create_schedule(Z2)
    i, j = Z2.axis
    f = s[Z2].fuse(i, j)
    o, n = s[Z2].split(f, 4)
    s[Z2].unroll(n)
    s[Z2].num_warps(2)
    s[Z1].compute_inline()
    with pytest.raises(tc.ArgumentError, match="factor"):
        s[Z2].split(o, 0)
    with pytest.raises(tc.ArgumentError, match="unrolled"):
        s[Z2].split(n, 2)
    s[Z1].compute_root()
    assert s.log == [
        "Z2: fuse(i, j) -> i_j",
        "Z2: split(i_j, 4) -> i_jo, i_ji",
        "Z2: unroll(i_ji)",
        "Z2: num_warps(2)",
        "Z1: compute_inline()",
        "Z1: compute_root()",
    ]


def test_fingerprint_follows_the_schedule():
    def fp(factor=None, extra=False):
        A, W, C = gemm()
        s = tc.create_schedule(C)
        if factor is not None:
            io, ii = s[C].split(C.axis[0], factor)
            if extra:
                s[C].bind(io, "program_id.0")
        return s.fingerprint()

    base = fp()
    assert fp() == base  # the same computation and schedule give the same key
    assert fp(16) != base
    assert fp(16) == fp(16)
    assert fp(32) != fp(16)
    assert fp(16, extra=True) != fp(16)


def test_fingerprint_follows_the_computation():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z1 = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z")
    Z2 = tc.compute((37, 50), lambda i, j: X[i, j] * 3.0, name="Z")
    assert tc.create_schedule(Z1).fingerprint() != tc.create_schedule(Z2).fingerprint()


def test_fingerprint_changes_when_the_schedule_is_mutated():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    seen = {s.fingerprint()}
    jo, ji = s[C].split(C.axis[1], 16)
    seen.add(s.fingerprint())
    s[Y].compute_at(s[C], jo)
    seen.add(s.fingerprint())
    s.cache_read(A, "shared", readers=[C])
    seen.add(s.fingerprint())
    assert len(seen) == 4


# ---------------------------------------------------------------------------------------------
# what tc.lower prints


def test_lower_design_schedule_loop_nest():
    s, _, _ = design_schedule()
    text = str(tc.lower(s, config={"BM": 16, "BN": 32, "BK": 16, "stages": 3}))
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0].startswith("kernel Y_kernel  (stages: C, Y; num_warps=4)")  # named after its output
    assert "config: BK=16, BM=16, BN=32, stages=3" in lines
    assert "grid (cdiv(M, 16), cdiv(N, 32))" in lines
    assert "acc_C[ii, ji] = 0  # float32 accumulator of C" in lines
    loop = next(line for line in lines if line.startswith("for ko in [0, cdiv(K, 16)):"))
    assert "serial, pipelined stages=" in loop and "# C.ko: serial reduction loop" in loop
    assert "(tl.dot)" in text and "Y_val = silu(C[i, j])" in lines
    assert "Y[i, j] = Y_val  # store, float32" in lines
    # the epilogue runs after the reduction loop, not inside it
    assert lines.index("Y_val = silu(C[i, j])") > lines.index(loop)
    depth = {line.split("=")[0].strip(): len(line) - len(line.lstrip()) for line in text.splitlines() if "=" in line}
    assert depth["Y_val"] == depth["acc_C[ii, ji]"]
    assert "buffers between kernels" not in text  # C never goes to memory


def test_lower_prints_pipeline_depth_and_warps():
    s, (A, W, C, Y), _ = design_schedule(stages=3)
    s[C].num_warps(8)
    text = str(tc.lower(s, {"BM": 32}))
    assert "num_warps=8" in text.splitlines()[0]
    assert "for ko in [0, cdiv(K, 16)):  serial, pipelined stages=3  # C.ko: serial reduction loop" in text


def test_lower_source_uses_config_and_pipeline():
    s, _, _ = design_schedule()
    prog = tc.lower(s, config={"BM": 16, "BN": 32, "BK": 16, "stages": 3})
    src = prog.source()
    assert "# config: BK=16, BM=16, BN=32, stages=3" in src
    assert "for ko in tl.range(0, tl.cdiv(K, BK), num_stages=stages):" in src
    assert "io = tl.program_id(0)" in src and "jo = tl.program_id(1)" in src


def test_lower_default_schedule():
    A, W, C = gemm()
    text = str(tc.lower(tc.create_schedule(C)))
    assert "grid (cdiv(M, 32) * cdiv(N, 32))" in text  # outer tiles fused onto program_id.0
    assert "for ko in [0, cdiv(K, 32)):  serial  # C.ko: serial reduction loop" in text


def test_lower_without_compute_at_gives_two_kernels_and_a_buffer():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    text = str(tc.lower(s))
    assert "kernel C_kernel" in text and "kernel Y_kernel" in text
    assert "buffers between kernels: C" in text


def test_lower_compute_inline_removes_the_stage():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z1 = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z1")
    Z2 = tc.compute((37, 50), lambda i, j: Z1[i, j] + 1.0, name="Z2")
    s = tc.create_schedule(Z2)
    assert "kernel Z1_kernel" in str(tc.lower(s))
    s[Z1].compute_inline()
    text = str(tc.lower(s))
    assert "kernel Z1_kernel" not in text and "buffers between kernels" not in text
    assert "kernel Z2_kernel  (stages: Z2;" in text
    s[Z1].compute_root()
    assert "buffers between kernels: Z1" in str(tc.lower(s))


def test_lower_unroll_inner_axis_of_a_split():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 4)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].unroll(ki)
    prog = tc.lower(s)
    assert "for ki in [0, 4):  unrolled  # C.ki: unrolled reduction loop" in str(prog)
    assert "for ki in tl.static_range(4):" in prog.source()


def test_lower_reduction_over_two_axes():
    M, R, S = tc.size_vars("M R S")
    X = tc.placeholder((M, R, S), "float32", name="X")
    r1 = tc.reduce_axis(R, name="r1")
    r2 = tc.reduce_axis(S, name="r2")
    T = tc.compute((M,), lambda i: tc.sum(X[i, r1, r2], axis=[r1, r2]), name="T")
    text = str(tc.lower(tc.create_schedule(T)))
    assert "for r1 in [0, R):  serial  # T.r1: serial reduction loop" in text
    assert "for r2o in [0, cdiv(S, 64)):" in text


def test_pipeline_alone_is_not_dropped():
    A, W, C = gemm()
    s = tc.create_schedule(C)
    s[C].pipeline(C.reduce_axis[0], 3)
    assert "pipelined stages=3" in str(tc.lower(s))


@pytest.mark.parametrize("then", ["split", "fuse"])
def test_binding_survives_split_or_fuse_of_the_bound_axis(then):
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 16)
    s[Z].bind(io, "program_id.0")
    s[Z].bind(jo, "program_id.1")
    try:
        if then == "split":
            s[Z].split(io, 2)
        else:
            s[Z].fuse(io, jo)
        src = tc.lower(s).source()
    except tc.TilecError:
        return  # refusing the rewrite is as good as keeping the binding
    assert "tl.program_id(0)" in src


# ---------------------------------------------------------------------------------------------
# end to end: the rewrites compute the right thing on sizes that do not divide the tiles


def test_design_schedule_runs_on_sizes_that_do_not_divide_tiles():
    s, (A, W, C, Y), _ = design_schedule()
    kern = tc.build(s, [A, W, Y], config={"BM": 16, "BN": 32, "BK": 16, "stages": 2})
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    torch.testing.assert_close(kern(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_fused_grid_and_unrolled_loop_run():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: tc.exp(X[i, j]) * 2.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 4, 16)
    g = s[Z].fuse(io, jo)
    s[Z].bind(g, "program_id.0")
    iio, iii = s[Z].split(ii, 2)
    s[Z].reorder(g, iio, iii, ji)
    s[Z].unroll(iio)
    kern = tc.build(s, [X, Z])
    x = torch.randn(37, 50)
    torch.testing.assert_close(kern(x), torch.exp(x) * 2.0)
