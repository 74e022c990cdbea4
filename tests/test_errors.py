"""One test per error tilec raises on purpose: the class, and the key words of the message.

Each message should say what was wrong and what would be right (notes/style.md, "Errors teach").
Cases where tilec does not raise the error it should are strict xfails naming the bug.
"""

import re

import pytest
import torch
from computes import design_knobs, gemm_silu, prologue_gemm, tile_gemm

import tilec as tc

# ---------------------------------------------------------------------------------------------
# helpers


def gemm_silu_schedule(bind_jo=True):
    """DESIGN.md's schedule up to (not including) the caches and the placement of Y: C tiled by
    DESIGN's knobs; returns (s, tensors, axes)."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, *design_knobs(), bind_jo=bind_jo)
    return s, (A, W, C, Y), ax


def elementwise():
    """Z = X * 2 on a symbolic (M, N) input."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z")
    return X, Z


@pytest.fixture(scope="module")
def gemm_kernel():
    """A built, unscheduled GEMM+SiLU kernel (default schedule) and inputs that do not divide tiles."""
    A, W, C, Y = gemm_silu()
    kern = tc.build(tc.create_schedule(Y), [A, W, Y])
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    return kern, a, w


# ---------------------------------------------------------------------------------------------
# the exception hierarchy


def test_every_error_is_a_tilec_error():
    assert issubclass(tc.ArgumentError, tc.TilecError)
    assert issubclass(tc.IllegalScheduleError, tc.TilecError)
    assert issubclass(tc.LoweringError, tc.TilecError)
    assert issubclass(tc.TilecError, Exception)


def test_argument_error_is_value_error_and_type_error():
    assert issubclass(tc.ArgumentError, ValueError)
    assert issubclass(tc.ArgumentError, TypeError)
    with pytest.raises(ValueError, match="not a valid identifier"):
        tc.placeholder((4,), "float32", name="class")
    with pytest.raises(TypeError, match=r"expected a name \(str\)"):
        tc.placeholder((4,), "float32", name=3)


def test_illegal_schedule_error_carries_its_facts():
    e = tc.IllegalScheduleError("msg", primitive="bind", stage="C", reason="parallel", counterexample={"k": 1})
    assert (str(e), e.primitive, e.stage, e.reason, e.counterexample) == ("msg", "bind", "C", "parallel", {"k": 1})
    assert tc.IllegalScheduleError("msg").counterexample is None


# ---------------------------------------------------------------------------------------------
# names (they become identifiers in generated code)

NAMERS = {
    "placeholder": lambda n: tc.placeholder((4,), "float32", name=n),
    "compute": lambda n: tc.compute((4,), lambda i: i * 2, name=n),
    "reduce_axis": lambda n: tc.reduce_axis(4, name=n),
    "size_vars": lambda n: tc.size_vars([n]),
    "knob": lambda n: tc.knob(n, [16, 32]),
}
WHAT = {"placeholder": "placeholder name", "compute": "compute name", "reduce_axis": "axis name",
        "size_vars": "size_vars", "knob": "knob name"}


@pytest.mark.parametrize("api", list(NAMERS))
@pytest.mark.parametrize("bad", ["A); import os #", "x y", "", "1x", "é"])
def test_name_not_an_identifier(api, bad):
    with pytest.raises(tc.ArgumentError, match=rf"{WHAT[api]}: .* is not a valid identifier.*letters, digits and '_'"):
        NAMERS[api](bad)


@pytest.mark.parametrize("api", list(NAMERS))
@pytest.mark.parametrize("bad", ["class", "lambda", "None"])
def test_name_is_a_keyword(api, bad):
    with pytest.raises(tc.ArgumentError, match=rf"{WHAT[api]}: '{bad}' is not a valid identifier"):
        NAMERS[api](bad)


@pytest.mark.parametrize("api", list(NAMERS))
@pytest.mark.parametrize("bad", ["tl", "triton", "pid", "range"])
def test_name_reserved_for_generated_code(api, bad):
    with pytest.raises(tc.ArgumentError, match=rf"{WHAT[api]}: '{bad}' is reserved for the generated code.*pick another"):
        NAMERS[api](bad)


@pytest.mark.parametrize("api", list(NAMERS))
def test_name_with_leading_underscore(api):
    with pytest.raises(tc.ArgumentError, match=r"'_x' is reserved.*names starting with '_'"):
        NAMERS[api]("_x")


@pytest.mark.parametrize("api", list(NAMERS))
@pytest.mark.parametrize("bad", [3, None, b"A"])
def test_name_not_a_str(api, bad):
    with pytest.raises(tc.ArgumentError, match=rf"{WHAT[api]}: expected a name \(str\), got {type(bad).__name__}"):
        NAMERS[api](bad)


def test_size_vars_in_one_string_are_each_checked():
    with pytest.raises(tc.ArgumentError, match=r"size_vars: 'tl' is reserved"):
        tc.size_vars("M tl")


def test_size_vars_with_no_name():
    with pytest.raises(tc.ArgumentError, match=r"size_vars: expected at least one name"):
        tc.size_vars("  ")


def test_size_vars_not_a_str_or_list():
    with pytest.raises(tc.ArgumentError, match=r"size_vars"):
        tc.size_vars(3)


# ---------------------------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize("bad", ["float33", "f32", None, 3])
def test_placeholder_bad_dtype(bad):
    with pytest.raises(tc.ArgumentError, match=r"placeholder 'X': expected one of float64, float32, .*bfloat16.*got"):
        tc.placeholder((4,), bad, name="X")


def test_compute_bad_dtype():
    with pytest.raises(tc.ArgumentError, match=r"compute 'X' dtype: expected one of .*got 'f32'"):
        tc.compute((4,), lambda i: i * 2, name="X", dtype="f32")


def test_astype_bad_dtype():
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"astype: expected one of .*got 'bf16'"):
        A[0].astype("bf16")


def test_reduction_bad_acc_dtype():
    A = tc.placeholder((4,), "float32", name="A")
    k = tc.reduce_axis(4, name="k")
    with pytest.raises(tc.ArgumentError, match=r"tc.sum acc_dtype: expected one of .*got 'fp32'"):
        tc.sum(A[k], axis=k, acc_dtype="fp32")


# ---------------------------------------------------------------------------------------------
# shapes and extents


@pytest.mark.parametrize("shape,dim,got", [(0, 0, "0"), (-1, 0, "-1"), ((4, 0), 1, "0"), ((4, -3), 1, "-3"),
                                           ((4, 2.0), 1, "2.0"), ((True,), 0, "True")])
@pytest.mark.parametrize("api", ["placeholder", "compute"])
def test_bad_dimension(api, shape, dim, got):
    make = (lambda: tc.placeholder(shape, "float32", name="X")) if api == "placeholder" else \
        (lambda: tc.compute(shape, lambda *ax: ax[0] * 2, name="X"))
    with pytest.raises(tc.ArgumentError,
                       match=rf"{api} 'X': dimension {dim}: expected a positive int or a size variable, got {got}"):
        make()


@pytest.mark.parametrize("shape", [1.5, "4", None])
def test_shape_not_a_tuple(shape):
    with pytest.raises(tc.ArgumentError, match=r"placeholder 'X': shape must be a tuple of ints and size variables"):
        tc.placeholder(shape, "float32", name="X")


def test_extent_reads_a_tensor():
    (M,) = tc.size_vars("M")
    A = tc.placeholder((M,), "int32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"dimension 0: an extent may only use sizes and ints, got"):
        tc.placeholder((M + A[0],), "float32", name="X")


@pytest.mark.parametrize("make", [lambda K: K / 2, lambda K: K > 2], ids=["K/2", "K>2"])
def test_extent_of_non_integer_type(make):
    (K,) = tc.size_vars("K")
    with pytest.raises(tc.ArgumentError, match=r"dimension 0"):
        tc.placeholder((make(K),), "float32", name="X")


@pytest.mark.parametrize("extent", [0, -2, 2.5, True, "K"])
def test_reduce_axis_bad_extent(extent):
    with pytest.raises(tc.ArgumentError, match=r"reduce_axis 'r': expected a positive int or a size variable"):
        tc.reduce_axis(extent, name="r")


# ---------------------------------------------------------------------------------------------
# expressions and computes


@pytest.mark.parametrize("idx,n", [((0,), 1), ((0, 0, 0), 3)])
def test_wrong_number_of_indices(idx, n):
    A = tc.placeholder((4, 5), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=rf"A has 2 dimensions, indexed with {n}"):
        A[idx]


def test_non_integer_index():
    A = tc.placeholder((4, 5), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"index 1 of A must be an integer expression, got 0.5"):
        A[0, 0.5]


def test_operand_not_an_expression():
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"expected a tilec expression or a number, got str 'x'"):
        A[0] + "x"


def test_bool_of_expression():
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"no truth value.*tc.where\(cond, a, b\)"):
        bool(A[0] > 0)
    with pytest.raises(tc.ArgumentError, match=r"no truth value"):
        tc.compute((4,), lambda i: A[i] if A[i] > 0 else 0.0, name="X")


def test_reduction_nested_in_expression():
    A = tc.placeholder((4, 8), "float32", name="A")
    k = tc.reduce_axis(8, name="k")
    with pytest.raises(tc.ArgumentError,
                       match=r"compute 'X': tc.sum\(...\) must be the whole body of a compute.*second compute"):
        tc.compute((4,), lambda i: tc.sum(A[i, k], axis=k) + 1.0, name="X")


def test_reduce_axis_used_but_not_reduced_inside_a_reduction():
    A = tc.placeholder((4, 8), "float32", name="A")
    k = tc.reduce_axis(8, name="k")
    k2 = tc.reduce_axis(8, name="k2")
    with pytest.raises(tc.ArgumentError, match=r"compute 'X': reduce axis k2 is used but not reduced over.*axis=\["):
        tc.compute((4, 4), lambda i, j: tc.sum(A[i, k] * A[j, k2], axis=k), name="X")


def test_reduce_axis_used_in_elementwise_body():
    A = tc.placeholder((4, 8), "float32", name="A")
    k = tc.reduce_axis(8, name="k")
    with pytest.raises(tc.ArgumentError, match=r"reduce axis k is used but not reduced over"):
        tc.compute((4,), lambda i: A[i, k] * 2.0, name="X")


def test_reduction_axis_not_a_reduce_axis():
    A = tc.placeholder((4, 8), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"tc.max: axis must be a reduce_axis or a list of them, got i"):
        tc.compute((4,), lambda i: tc.max(A[i, 0], axis=i), name="X")
    with pytest.raises(tc.ArgumentError, match=r"tc.sum: axis must be a reduce_axis .*got \[\]"):
        tc.sum(A[0, 0], axis=[])


def test_reduction_axis_not_iterable():
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"tc.sum: axis must be a reduce_axis"):
        tc.sum(A[0], axis=3)


def test_spatial_and_reduce_axis_with_one_name():
    A = tc.placeholder((4, 8), "float32", name="A")
    r = tc.reduce_axis(8, name="i")
    with pytest.raises(tc.ArgumentError, match=r"compute 'X': axis names must differ, got i, i"):
        tc.compute((4,), lambda i: tc.sum(A[i, r], axis=r), name="X")


@pytest.mark.parametrize("shape,fn,n_dims,n_args", [((4, 5), lambda i: i, 2, 1), ((4,), lambda i, j: i, 1, 2)])
def test_lambda_arity_mismatch(shape, fn, n_dims, n_args):
    with pytest.raises(tc.ArgumentError,
                       match=rf"compute 'X': the shape has {n_dims} dimension\(s\) but the function takes {n_args}"):
        tc.compute(shape, fn, name="X")


def test_compute_not_a_function():
    with pytest.raises(tc.ArgumentError, match=r"compute 'X': expected a function of the axes, got 3"):
        tc.compute((4,), 3, name="X")


def test_duplicate_tensor_names_in_one_dag():
    A1 = tc.placeholder((4,), "float32", name="A")
    A2 = tc.placeholder((4,), "float32", name="A")
    D = tc.compute((4,), lambda i: A1[i] + A2[i], name="D")
    with pytest.raises(tc.ArgumentError, match=r"two different tensors are both named 'A'; names must be unique"):
        tc.create_schedule(D)


# ---------------------------------------------------------------------------------------------
# knobs


@pytest.mark.parametrize("choices", [[], [1.5, 2], [True], [0, 16], [-16], "12", 16, None])
def test_knob_bad_choices(choices):
    with pytest.raises(tc.ArgumentError, match=r"knob 'B': choices must be a non-empty list of positive ints"):
        tc.knob("B", choices)


def test_knob_duplicate_choices():
    with pytest.raises(tc.ArgumentError, match=r"knob 'B': choices repeat a value: \[16, 16\]"):
        tc.knob("B", [16, 16])


def test_same_knob_name_with_different_choices():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], tc.knob("B", [16, 32]))
    with pytest.raises(tc.ArgumentError, match=r"knob 'B' is declared twice with different choices: \[16, 32\] and "
                                               r"\[16, 64\]"):
        s[C].split(C.axis[1], tc.knob("B", [16, 64]))


# ---------------------------------------------------------------------------------------------
# Stage primitives: argument validation


@pytest.mark.parametrize("factor", [0, -1, 1.5, True, "4", None])
def test_split_bad_factor(factor):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError,
                       match=r"argument 2, 'factor' to split: expected a positive int or a tc.knob, got"):
        s[C].split(C.axis[0], factor)


def test_split_axis_of_another_stage():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError,
                       match=r"argument 1, 'axis' to split: Y.i is not an axis of C \(its axes are: i, j, k\)"):
        s[C].split(Y.axis[0], 16)


def test_split_not_an_axis():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'axis' to split: expected an axis of C, got 'i'"):
        s[C].split("i", 16)


def test_axis_consumed_by_split_names_its_replacements():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    s[C].split(i, 16)
    with pytest.raises(tc.ArgumentError,
                       match=r"argument 1, 'axis' to split: axis i of C was split into io, ii; use those"):
        s[C].split(i, 16)
    with pytest.raises(tc.ArgumentError, match=r"argument 2, 'axis2' to reorder: axis i of C was split into io, ii"):
        s[C].reorder(j, i)


def test_axis_consumed_by_fuse_names_its_replacement():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    s[C].fuse(i, j)
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'axis' to bind: axis j of C was fused into i_j; use that"):
        s[C].bind(j, "program_id.0")


def test_tile_same_axis_twice():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    with pytest.raises(tc.ArgumentError, match=r"argument 2, 'y' to tile: expected an axis other than x, got 'i'"):
        s[C].tile(i, i, 16, 16)


def test_reorder_repeated_axis():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    with pytest.raises(tc.ArgumentError, match=r"reorder: an axis is named twice in \(j, i, j\)"):
        s[C].reorder(j, i, j)


def test_fuse_non_adjacent_axes():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    (k,) = C.reduce_axis
    with pytest.raises(tc.ArgumentError,
                       match=r"fuse: i and k must be adjacent, outer first; the order of C is \(i, j, k\); reorder"):
        s[C].fuse(i, k)
    with pytest.raises(tc.ArgumentError, match=r"fuse: j and i must be adjacent, outer first"):
        s[C].fuse(j, i)


def test_fuse_spatial_with_reduce():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    (k,) = C.reduce_axis
    with pytest.raises(tc.ArgumentError,
                       match=r"fuse: j is a spatial axis and k a reduce axis; only axes of one kind can be fused"):
        s[C].fuse(j, k)


@pytest.mark.parametrize("thread", ["program_id.3", "threadIdx.x", 0])
def test_bind_to_unknown_grid_dimension(thread):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 2, 'thread' to bind: expected one of 'program_id.0', "
                                               r"'program_id.1', 'program_id.2', got"):
        s[C].bind(C.axis[0], thread)


def test_bind_two_axes_to_one_dimension():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    s[C].bind(i, "program_id.0")
    with pytest.raises(tc.ArgumentError,
                       match=r"bind: program_id.0 is already bound to i of C; fuse the axes to put both on one grid"):
        s[C].bind(j, "program_id.0")


def test_bind_reduce_axis_is_illegal():
    s, (A, W, C, Y), ax = gemm_silu_schedule(bind_jo=False)
    with pytest.raises(tc.IllegalScheduleError,
                       match=r"bind\(C.ko, 'program_id.1'\): ko runs the reduction over k; programs run in parallel"
                             r".*Bind a spatial axis instead") as info:
        s[C].bind(ax["ko"], "program_id.1")
    e = info.value
    assert (e.reason, e.primitive, e.stage) == ("parallel", "bind", "C")
    assert e.counterexample is not None
    assert ax["ko"] not in s[C].binds


@pytest.mark.parametrize("n,got", [(3, "3"), (64, "64"), (tc.knob("nw", [4, 3]), r"\[4, 3\]")])
def test_num_warps_not_a_power_of_two(n, got):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError,
                       match=rf"argument 1, 'n' to num_warps: expected a power of two from 1 to 32, got {got}"):
        s[C].num_warps(n)


@pytest.mark.parametrize("n", [0, 1.5, True])
def test_num_warps_not_a_positive_int(n):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'n' to num_warps: expected a power of two from 1 to 32"):
        s[C].num_warps(n)


def test_failed_num_warps_leaves_no_knob():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"num_warps"):
        s[C].num_warps(tc.knob("nw", [4, 3]))
    assert "nw" not in s.knobs


def test_pipeline_bad_stages():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 2, 'stages' to pipeline: expected a positive int or a tc.knob"):
        s[C].pipeline(C.reduce_axis[0], 0)


def test_unroll_not_an_axis():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'axis' to unroll: expected an axis of C, got 3"):
        s[C].unroll(3)


# -- checked at lowering ------------------------------------------------------------------------


def test_unroll_symbolic_extent_at_lowering():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    s[C].unroll(io)
    with pytest.raises(tc.LoweringError,
                       match=r"unroll\(C.io\): its extent .*M.* is not a constant; unroll the inner axis of a split"):
        tc.lower(s)


def test_pipeline_of_a_tile_axis_at_lowering():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    s[C].pipeline(ii, 2)
    with pytest.raises(tc.LoweringError, match=r"pipeline\(C.ii\): ii is a tile axis; only "
                                               r"serial loops \(tl.range\) are pipelined"):
        tc.lower(s)


@pytest.mark.parametrize("prim", ["pipeline", "split", "unroll", "fuse"])
def test_rewriting_a_bound_axis(prim):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    s[C].bind(io, "program_id.0")
    args = {"pipeline": (io, 2), "split": (io, 2), "unroll": (io,), "fuse": (io, C.axis[1])}[prim]
    if prim == "fuse":
        s[C].reorder(io, C.axis[1])
    with pytest.raises(tc.ArgumentError, match=rf"{prim}: C.io is bound to program_id.0; {prim} it first, then "
                                               r"bind the result"):
        getattr(s[C], prim)(*args)


@pytest.mark.parametrize("factor,lo,hi", [(24, 16, 32), (40, 32, 64), (3, 2, 4)])
def test_non_power_of_two_tile(factor, lo, hi):
    # not a multiple of 16 either (48 would lower as sub-tiles 32 + 16: tests/test_subtiles.py)
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], factor)
    with pytest.raises(tc.LoweringError, match=rf"C.ii is a tile of extent {factor} .*need a power of two and a "
                                               rf"multiple of 16 is lowered as power-of-two sub-tiles .*: use {lo} or "
                                               rf"{hi}"):
        tc.lower(s)


def test_non_power_of_two_tile_from_knob_config():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], tc.knob("BM", [16, 24]))
    tc.lower(s)  # the default, 16, is fine
    with pytest.raises(tc.LoweringError, match=r"tile of extent 24 \(from split\(i, BM\)\).*use 16 or 32"):
        tc.lower(s, {"BM": 24})


def test_spatial_loop_inside_reduction_loop():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    (k,) = C.reduce_axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    ko, ki = s[C].split(k, 16)
    s[C].reorder(ko, io, jo, ii, ji, ki)
    with pytest.raises(tc.LoweringError, match=r"C: spatial loop io runs inside reduction loop ko.*Reorder so that "
                                               r"spatial loops come before reduction loops"):
        tc.lower(s)


def test_lower_unknown_target():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.LoweringError, match=r"target must be one of \('cuda', 'interpreter'\), got 'rocm'"):
        tc.lower(tc.create_schedule(Y), target="rocm")


@pytest.mark.parametrize("clash", ["size", "stride", "knob", "axis"])
def test_one_name_for_two_things_in_a_kernel(clash):
    (K,) = tc.size_vars("K")
    if clash == "size":
        T = tc.placeholder((K,), "float32", name="K")
        Z = tc.compute((K,), lambda i: T[i] + 1.0, name="Z")
        s, name = tc.create_schedule(Z), "K"
    elif clash == "stride":
        T = tc.placeholder((4,), "float32", name="stride_Q_0")
        Q = tc.placeholder((4,), "float32", name="Q")
        Z = tc.compute((4,), lambda i: T[i] + Q[i], name="Z")
        s, name = tc.create_schedule(Z), "stride_Q_0"
    elif clash == "knob":
        T = tc.placeholder((K,), "float32", name="BM")
        Z = tc.compute((K,), lambda i: T[i] * 2.0, name="Z")
        s, name = tc.create_schedule(Z), "BM"
        s[Z].split(Z.axis[0], tc.knob("BM", [16]))
    else:  # a serial loop named like a tensor the kernel reads
        T = tc.placeholder((K, K), "float32", name="A")
        Z = tc.compute((K, K), lambda A, j: T[A, j] * 2.0, name="Z")
        s, name = tc.create_schedule(Z), "A"
        s[Z].split(Z.axis[1], 16)
    with pytest.raises(tc.LoweringError, match=rf"the name '{name}' is used for two different things in kernel Z.*rename"):
        tc.lower(s)


# ---------------------------------------------------------------------------------------------
# placement: compute_at, compute_inline, compute_root


def test_compute_at_not_a_stage():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'stage' to compute_at: expected a stage, e.g. s\[C\], got"):
        s[Y].compute_at(C, C.axis[0])


def test_compute_at_itself():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"compute_at: Y cannot be computed at its own loop"):
        s[Y].compute_at(s[Y], Y.axis[0])


def test_compute_at_unrelated_stage():
    A, W, C, Y = gemm_silu()
    X, Z = elementwise()
    V = tc.compute(Y.shape, lambda i, j: Y[i, j] + Z[i, j], name="V")
    s = tc.create_schedule(V)
    with pytest.raises(tc.ArgumentError,
                       match=r"compute_at: Z neither reads nor is read by C \(directly or through other "
                             r"stages\); a stage can only be computed inside a producer or consumer"):
        s[Z].compute_at(s[C], C.axis[0])


def test_compute_at_axis_of_another_stage():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 2, 'axis' to compute_at: Y.i is not an axis of C"):
        s[Y].compute_at(s[C], Y.axis[0])


def test_compute_at_inside_reduction_loop_is_illegal():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    with pytest.raises(tc.IllegalScheduleError, match=r"^compute_at\(Y, C.ko\) makes Y read C before C's reduction "
                                                      r"over k is complete") as info:
        s[Y].compute_at(s[C], ax["ko"])
    e = info.value
    msg = str(e)
    assert e.reason == "rounding" and e.primitive == "compute_at" and e.stage == "Y"
    assert e.counterexample is not None
    for word in ("Y", "C", "ko", "reduction over k", "flow dependence C -> Y"):
        assert word in msg, word
    legal = re.search(r"Legal locations for Y are: (.*)$", msg)
    assert legal and "C.jo" in legal.group(1).split(", ") and "C.ko" not in legal.group(1)
    assert s[Y].attach is None  # the failed primitive left the schedule as it was
    s[Y].compute_at(s[C], ax["jo"])  # the suggested place is accepted


def test_reorder_after_compute_at_moves_a_grid_axis_only_in_name():
    """Grid axes run outermost whatever the order says, so this reorder keeps Y after the k loop."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].compute_at(s[C], ax["jo"])
    s[C].reorder(ax["ko"], ax["jo"])
    assert "Y_val" in tc.lower(s).source()


def test_reorder_puts_a_serial_spatial_loop_inside_the_reduction():
    s, (A, W, C, Y), ax = gemm_silu_schedule(bind_jo=False)
    s[Y].compute_at(s[C], ax["jo"])
    s[C].reorder(ax["ko"], ax["jo"])  # not lowerable yet: the primitive leaves it to build
    with pytest.raises(tc.LoweringError, match=r"C: spatial loop jo runs inside reduction loop ko"):
        tc.lower(s)


def test_build_rechecks_a_schedule_changed_behind_the_primitives():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].attach = (s[C], ax["ko"])  # bypasses compute_at's check
    with pytest.raises(tc.IllegalScheduleError, match=r"build makes Y read C before C's reduction over k "
                                                      r"is complete.*Legal locations for Y are: C.io, C.jo") as info:
        tc.lower(s)
    assert info.value.primitive == "build" and info.value.reason == "rounding"


def test_compute_at_epilogue_outside_a_loop_that_defines_its_axis():
    s, (A, W, C, Y), ax = gemm_silu_schedule(bind_jo=False)  # jo is a serial loop inside io
    s[Y].compute_at(s[C], ax["io"])
    with pytest.raises(tc.LoweringError, match=r"compute_at\(Y, C\): Y's axis j follows C's loop .* runs inside the "
                                               r"place chosen; place Y at C.jo or further in"):
        tc.lower(s)


def test_compute_at_on_a_tile_axis():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[C].reorder(ax["ii"], ax["ji"], ax["ko"])  # tiles before the reduction loop: ji is a legal place for Y
    s[Y].compute_at(s[C], ax["ji"])
    with pytest.raises(tc.LoweringError, match=r"compute_at\(Y, C.ji\): ji is a tile axis \(a vector dimension, not a "
                                               r"loop\).*place Y at one of C.io, C.jo, C.ko"):
        tc.lower(s)


def test_compute_at_needs_plain_axis_positions():
    A, W, C, _ = gemm_silu()
    N = C.shape[1]
    Yp = tc.compute(C.shape, lambda i, j: tc.silu(C[i, (j + 1) % N]), name="Yp")
    s = tc.create_schedule(Yp)
    jo, ji = s[C].split(C.axis[1], 16)
    s[Yp].compute_at(s[C], jo)
    with pytest.raises(tc.LoweringError, match=r"compute_at\(Yp, C\): not supported: Yp reads C only at shifted "
                                               r"or computed positions \(a halo"):
        tc.lower(s)


def test_fused_consumer_reads_other_positions():
    A, W, C, _ = gemm_silu()
    Ys = tc.compute(C.shape, lambda i, j: C[i, j] + C[i, 0], name="Ys")
    s = tc.create_schedule(Ys)
    io, ii = s[C].split(C.axis[0], 16)
    jo, ji = s[C].split(C.axis[1], 16)
    s[C].reorder(io, jo, ii, ji, C.reduce_axis[0])
    s[Ys].compute_at(s[C], jo)
    with pytest.raises(tc.LoweringError, match=r"Ys reads C\[i, 0\], but C is computed in the same kernel only at the "
                                               r"positions of that loop.*compute_root C"):
        tc.lower(s)


def test_producer_at_consumer_with_a_free_axis():
    """P at C.io, where C's reduction over P's column axis runs in a loop inside io: P computes its whole
    row block there (Halide's compute_at) and C reads it back from memory (once an error)."""
    A, W, P, C = prologue_gemm(lambda a: a * 2.0)
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)  # the reduction's loops are ro, ri
    s[P].compute_at(s[C], ax["io"])  # P's column axis follows r, which is still free at io
    prog = tc.lower(s)
    assert prog.plan.scratch == {"P"} and "tl.debug_barrier()" in prog.source()
    a, w = torch.randn(37, 70), torch.randn(70, 20)
    torch.testing.assert_close(tc.build(s, [A, W, C])(a, w), (a * 2.0) @ w, rtol=1e-4, atol=1e-4)


def test_split_of_an_axis_fixed_by_compute_at():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].compute_at(s[C], ax["jo"])
    s[Y].split(Y.axis[0], 4)
    with pytest.raises(tc.LoweringError, match=r"Y: axis i is fixed by where Y is computed \(compute_at\).*remove the "
                                               r"split/fuse of i from Y"):
        tc.lower(s)


def test_compute_at_cycle():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].compute_at(s[C], ax["jo"])
    with pytest.raises(tc.ArgumentError, match=r"compute_at\(C, Y.i\): Y is itself computed inside C, so this "
                                               r"would make a cycle"):
        s[C].compute_at(s[Y], Y.axis[0])


def test_compute_at_an_inlined_stage():
    X, Z1 = elementwise()
    Z2 = tc.compute(Z1.shape, lambda i, j: Z1[i, j] + 1.0, name="Z2")
    Z3 = tc.compute(Z1.shape, lambda i, j: Z2[i, j] * 3.0, name="Z3")
    s = tc.create_schedule(Z3)
    s[Z2].compute_inline()
    s[Z1].compute_at(s[Z2], Z2.axis[0])
    with pytest.raises(tc.LoweringError, match=r"Z is computed at Z2, which is inlined and has no loops"):
        tc.lower(s)


def test_placements_make_kernels_depend_on_each_other():
    # Z3 (reads Z1 and Z2) is computed in Z1's kernel, but Z2's kernel needs Z1 first
    X, Z1 = elementwise()
    Z2 = tc.compute(Z1.shape, lambda i, j: Z1[i, j] + 1.0, name="Z2")
    Z3 = tc.compute(Z1.shape, lambda i, j: Z2[i, j] + Z1[i, j], name="Z3")
    s = tc.create_schedule(Z3)
    s[Z3].compute_at(s[Z1], Z1.axis[0])
    with pytest.raises(tc.LoweringError, match=r"the placements make two kernels need each other's results "
                                               r"\(Z_kernel -> Z2_kernel -> Z_kernel.*compute_root one of the stages"):
        tc.lower(s)


def test_compute_inline_of_a_reduction():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"compute_inline: C is a reduction over k; only elementwise stages can "
                                               r"be inlined. Use compute_at"):
        s[C].compute_inline()


def test_compute_inline_of_an_output():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"compute_inline: Y is an output of the schedule and must be stored"):
        s[Y].compute_inline()


# ---------------------------------------------------------------------------------------------
# the Schedule: s[...], cache_read, cache_write, create_schedule


def test_stage_of_a_placeholder():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"A is an input \(placeholder\) and has no loops to schedule; use "
                                               r"s.cache_read\(A, 'shared'"):
        s[A]


def test_stage_of_an_unknown_name():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"'Q' is not a stage of this schedule \(its stages: C, Y\)"):
        s["Q"]


def test_stage_of_a_tensor_from_another_dag():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    other = tc.compute((4,), lambda i: i * 2, name="C")
    with pytest.raises(tc.ArgumentError, match=r"C is not part of this schedule \(its stages: C, Y\)"):
        s[other]


def test_cache_read_bad_scope():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError,
                       match=r"argument 2, 'scope' to cache_read: expected 'shared' or 'local', got 'global'"):
        s.cache_read(A, "global", readers=[C])


@pytest.mark.parametrize("as_stage", [False, True])
def test_cache_read_for_a_non_reader(as_stage):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 3, 'readers' to cache_read: Y does not read A"):
        s.cache_read(A, "shared", readers=[s[Y] if as_stage else Y])


def test_cache_read_with_no_readers():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError, match=r"argument 3, 'readers' to cache_read: expected a list of stages that "
                                               r"read A, got \[\]"):
        s.cache_read(A, "shared", readers=[])


@pytest.mark.parametrize("bad", ["A", 3, "foreign"])
def test_cache_read_of_a_non_tensor(bad):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    if bad == "foreign":
        bad = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'tensor' to cache_read: expected a tensor of this schedule"):
        s.cache_read(bad, "shared", readers=[C])


def test_cache_write_shared_is_a_lowering_error():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.LoweringError, match=r"cache_write\(C, 'shared'\): Triton keeps accumulators in registers; "
                                               r"use scope 'local'"):
        s.cache_write(C, "shared")


def test_cache_write_twice():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s.cache_write(C, "local")
    with pytest.raises(tc.ArgumentError, match=r"cache_write: C already has a cache_write stage"):
        s.cache_write(C, "local")


def test_cache_write_of_a_non_tensor():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    with pytest.raises(tc.ArgumentError,
                       match=r"argument 1, 'tensor' to cache_write: expected a computed tensor of this schedule"):
        s.cache_write("C", "local")


def test_cache_write_of_a_non_reduction_at_lowering():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s.cache_write(Y, "local").compute_at(s[Y], Y.axis[0])
    with pytest.raises(tc.LoweringError, match=r"cache_write\(Y, 'local'\): Y is not a reduction; there is no "
                                               r"accumulator"):
        tc.lower(s)


def test_cache_write_inside_the_reduction_loop_at_lowering():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s.cache_write(C, "local").compute_at(s[C], ax["ko"])
    with pytest.raises(tc.LoweringError, match=r"C_local.compute_at\(C, ko\): the accumulator must live outside the "
                                               r"reduction loops; place it at one of io, jo"):
        tc.lower(s)


CACHE_PRIMITIVES = {
    "split": lambda st, C: st.split(C.axis[0], 16),
    "reorder": lambda st, C: st.reorder(*C.axis),
    "fuse": lambda st, C: st.fuse(*C.axis),
    "bind": lambda st, C: st.bind(C.axis[0], "program_id.0"),
    "pipeline": lambda st, C: st.pipeline(C.reduce_axis[0], 2),
    "num_warps": lambda st, C: st.num_warps(4),
    "unroll": lambda st, C: st.unroll(C.axis[0]),
    "compute_inline": lambda st, C: st.compute_inline(),
    "compute_root": lambda st, C: st.compute_root(),
}


@pytest.mark.parametrize("kind", ["cache_read", "cache_write"])
@pytest.mark.parametrize("prim", list(CACHE_PRIMITIVES))
def test_cache_stage_only_takes_compute_at(kind, prim):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    st = s.cache_read(A, "shared", readers=[C]) if kind == "cache_read" else s.cache_write(C, "local")
    with pytest.raises(tc.ArgumentError,
                       match=rf"{prim}: {st.name} is a cache stage; cache stages are only placed, with compute_at"):
        CACHE_PRIMITIVES[prim](st, C)


def test_tile_of_a_cache_stage():
    # tile checks its axes before the stage kind, so the message is the generic "not an axis" one
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    st = s.cache_write(C, "local")
    with pytest.raises(tc.ArgumentError, match=r"tile.*C_local"):
        st.tile(*C.axis, 16, 16)


def test_cache_read_placed_at_a_non_reader():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    cr = s.cache_read(A, "shared", readers=[C])
    with pytest.raises(tc.ArgumentError, match=r"compute_at: A_shared caches A for C; place it in a loop of a reader, "
                                               r"or of a stage a reader is computed in, not of Y"):
        cr.compute_at(s[Y], Y.axis[0])


def test_cache_write_placed_at_another_stage():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    cw = s.cache_write(C, "local")
    with pytest.raises(tc.ArgumentError, match=r"compute_at: C_local accumulates C; place it in a loop of C, not of Y"):
        cw.compute_at(s[Y], Y.axis[0])


def test_compute_at_a_cache_stage():
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    cw = s.cache_write(C, "local")
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'stage' to compute_at: expected a compute stage \(not a "
                                               r"cache stage\), got 'C_local'"):
        s[Y].compute_at(cw, C.axis[0])


def test_cache_read_placed_before_its_tile_is_known():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ax["io"])
    with pytest.raises(tc.LoweringError, match=r"A_shared is placed where the tile of A\[i, k\] is not yet known: its "
                                               r"index k changes in a loop inside that place"):
        tc.lower(s)


def test_create_schedule_of_a_placeholder():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.ArgumentError, match=r"create_schedule: A is a placeholder \(an input\); pass the computed"):
        tc.create_schedule(A)
    with pytest.raises(tc.ArgumentError, match=r"create_schedule: A is a placeholder"):
        tc.create_schedule([Y, A])


@pytest.mark.parametrize("bad", [3, [], "Y"])
def test_create_schedule_of_a_non_tensor(bad):
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'outputs' to create_schedule: expected a computed tensor "
                                               r"or a list of them"):
        tc.create_schedule(bad)


# ---------------------------------------------------------------------------------------------
# tc.build and configs


def test_build_not_a_schedule():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.ArgumentError, match=r"argument 1, 'sched' to build: expected a Schedule, got Tensor"):
        tc.build(Y, [A, W, Y])


@pytest.mark.parametrize("args", ["one", "str"])
def test_build_args_not_a_list_of_tensors(args):
    A, W, C, Y = gemm_silu()
    bad = A if args == "one" else [A, "W", Y]
    with pytest.raises(tc.ArgumentError, match=r"argument 2, 'args' to build: expected a list of tensors"):
        tc.build(tc.create_schedule(Y), bad)


def test_build_missing_an_input():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.ArgumentError, match=r"build: the schedule reads W, so args must list it \(args: A, Y\)"):
        tc.build(tc.create_schedule(Y), [A, Y])


def test_build_missing_an_output():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.ArgumentError, match=r"build: Y is an output of the schedule; list it in args"):
        tc.build(tc.create_schedule(Y), [A, W])


def test_build_tensor_listed_twice():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.ArgumentError, match=r"build: a tensor is listed twice in args: \['A', 'W', 'W', 'Y'\]"):
        tc.build(tc.create_schedule(Y), [A, W, W, Y])


def test_build_tensor_computed_by_another_schedule():
    A, W, C, Y = gemm_silu()
    X, Z = elementwise()
    with pytest.raises(tc.ArgumentError, match=r"build: Z is not computed by this schedule \(its stages: C, Y\)"):
        tc.build(tc.create_schedule(Y), [A, W, Y, Z])


def test_build_size_var_not_inferable():
    (P,) = tc.size_vars("P")
    X = tc.placeholder((P * 2,), "float32", name="X")
    Z = tc.compute((P * 2,), lambda i: X[i] + 1.0, name="Z")
    with pytest.raises(tc.ArgumentError, match=r"build: size P appears in no input's shape as a plain dimension"):
        tc.build(tc.create_schedule(Z), [X, Z])


@pytest.mark.parametrize("entry", ["lower", "build"])
def test_config_unknown_knob(entry):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], tc.knob("BM", [16, 32]))
    with pytest.raises(tc.ArgumentError, match=r"config names 'BX', which the schedule does not use; its knobs are: BM"):
        tc.lower(s, {"BX": 16}) if entry == "lower" else tc.build(s, [A, W, Y], config={"BX": 16})


def test_config_for_a_schedule_without_knobs():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.ArgumentError, match=r"config names 'BM'.*its knobs are: none"):
        tc.lower(tc.create_schedule(Y), {"BM": 16})


@pytest.mark.parametrize("entry", ["lower", "build"])
def test_config_value_not_among_choices(entry):
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], tc.knob("BM", [16, 32]))
    with pytest.raises(tc.ArgumentError, match=r"config BM=64 is not one of the choices of knob 'BM': \[16, 32\]"):
        tc.lower(s, {"BM": 64}) if entry == "lower" else tc.build(s, [A, W, Y], config={"BM": 64})


# ---------------------------------------------------------------------------------------------
# calling a Kernel


def test_kernel_runs(gemm_kernel):
    # the control for the call-time errors below: right inputs, shapes that do not divide the tiles
    kern, a, w = gemm_kernel
    torch.testing.assert_close(kern(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_call_wrong_number_of_tensors(gemm_kernel, n):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=rf"expected 2 input tensors \(A, W\), got {n}"):
        kern(*[a, w, a, w][:n])


@pytest.mark.parametrize("bad,typ", [([1.0], "list"), (3.0, "float")])
def test_call_non_tensor(gemm_kernel, bad, typ):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=rf"W: expected a torch.Tensor, got {typ}"):
        kern(a, bad)


def test_call_wrong_dtype(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"W: expected dtype float32, got float16"):
        kern(a, w.half())


def test_call_wrong_ndim(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"W: expected 2 dimensions \[K, N\], got shape \(29,\)"):
        kern(a, w[0])


def test_call_inconsistent_size_var(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"W: expected shape \(50, 29\) \(\(K, N\) with .*K=50.*\), got \(49, 29\)"):
        kern(a, torch.randn(49, 29))


def test_call_inconsistent_size_var_between_two_inputs():
    (M,) = tc.size_vars("M")
    P1 = tc.placeholder((M,), "float32", name="P1")
    P2 = tc.placeholder((M,), "float32", name="P2")
    Q = tc.compute((M,), lambda i: P1[i] + P2[i], name="Q")
    kern = tc.build(tc.create_schedule(Q), [P1, P2, Q])
    with pytest.raises(tc.ArgumentError, match=r"P2: expected shape \(37,\) .*M=37.*got \(50,\)"):
        kern(torch.randn(37), torch.randn(50))


def test_call_constant_dim_mismatch():
    X = tc.placeholder((37, 50), "float32", name="X")
    Z = tc.compute((37, 50), lambda i, j: X[i, j] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    with pytest.raises(tc.ArgumentError, match=r"X: expected shape \(37, 50\).*got \(37, 51\)"):
        kern(torch.randn(37, 51))


def test_call_on_meta_device(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"tensors are on meta but this kernel runs on .*move them with \.to\("):
        kern(a.to("meta"), w.to("meta"))


def test_call_on_two_devices(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"W is on meta but A is on .*put all tensors on one device"):
        kern(a, w.to("meta"))


@pytest.mark.parametrize("out,got", [(torch.empty(37, 30), r"\(37, 30\) float32"),
                                     (torch.empty(37, 29, dtype=torch.float64), r"\(37, 29\) float64")])
def test_out_wrong_shape_or_dtype(gemm_kernel, out, got):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=rf"out Y: expected shape \(37, 29\) and dtype float32, got {got}"):
        kern(a, w, out=out)


def test_outputs_passed_positionally_are_checked(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"out Y: expected shape \(37, 29\)"):
        kern(a, w, torch.empty(37, 30))


def test_out_wrong_count(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"out: expected 1 tensor\(s\) \(Y\), got 2"):
        kern(a, w, out=[torch.empty(37, 29), torch.empty(37, 29)])


def test_out_not_a_tensor(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"out Y: expected a torch.Tensor, got int"):
        kern(a, w, out=[3])


def test_out_on_another_device(gemm_kernel):
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"out Y is on meta, the inputs on"):
        kern(a, w, out=torch.empty(37, 29, device="meta"))


@pytest.mark.parametrize("out,strides", [(torch.empty(8, 16)[:, ::2], r"\(16, 2\)"),
                                         (torch.empty(8, 1).expand(8, 8), r"\(1, 0\)")],
                         ids=["gaps", "overlap"])
def test_out_not_dense(out, strides):
    X = tc.placeholder((8, 8), "float32", name="X")
    Z = tc.compute((8, 8), lambda i, j: X[i, j] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    with pytest.raises(tc.ArgumentError, match=rf"out Z: its strides {strides} make elements overlap or leave gaps; "
                                               r"pass a dense tensor"):
        kern(torch.randn(8, 8), out=out)


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_out_accepted_when_right(gemm_kernel, layout):
    # the control for the out= errors above: a dense out, in any order of dims, is written in place
    kern, a, w = gemm_kernel
    out = torch.empty(37, 29) if layout == "contiguous" else torch.empty(29, 37).t()
    assert kern(a, w, out=out) is out
    torch.testing.assert_close(out, torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_grid_dimension_too_large():
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    io, ii = s[Z].split(Z.axis[0], 1)
    jo, ji = s[Z].split(Z.axis[1], 1)
    s[Z].reorder(io, jo, ii, ji)
    s[Z].bind(io, "program_id.0")
    s[Z].bind(jo, "program_id.1")
    kern = tc.build(s, [X, Z])
    with pytest.raises(tc.LoweringError, match=r"Z_kernel: program_id.1 would need 65537 programs, but Triton allows "
                                               r"65535.*bind the larger axis to program_id.0"):
        kern(torch.randn(1, 65537))


def test_interpreter_needs_env_before_triton_import(monkeypatch):
    from tilec.runtime import triton_compat

    if triton_compat.target() != "interpreter":
        pytest.skip("only without a CUDA device")
    import triton  # noqa: F401  (triton already imported is the situation tested)

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(tc.TilecError, match=r"needs TRITON_INTERPRET=1 before triton is imported"):
        triton_compat.triton.__wrapped__()


def test_bind_of_an_axis_fixed_by_the_placement():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].bind(Y.axis[0], "program_id.0")
    s[Y].compute_at(s[C], ax["jo"])
    with pytest.raises(tc.LoweringError, match=r"Y: bind\(i\) has no effect, because where Y is computed "
                                               r"\(compute_at\) fixes that axis; remove the bind"):
        tc.lower(s)


def test_num_warps_of_a_stage_inside_another_kernel():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].num_warps(8)
    s[Y].compute_at(s[C], ax["jo"])
    with pytest.raises(tc.LoweringError, match=r"Y.num_warps\(...\) has no effect: Y is computed inside another "
                                               r"stage's kernel.*call num_warps on the root"):
        tc.lower(s)


@pytest.mark.parametrize("first", ["pipeline", "unroll"])
@pytest.mark.parametrize("then", ["split", "fuse"])
def test_splitting_or_fusing_a_pipelined_or_unrolled_loop_is_refused(first, then):
    """Fuzz seed 901975's schedule: pipeline(ko) then split(ko) dropped the pipelining without a word
    (the loop it named was gone). Now the split (or fuse) is refused, and the schedule is as before."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.sum(X[i, k], axis=k), name="R")
    s = tc.create_schedule(R)
    io, ii = s[R].split(R.axis[0], 16)
    ko, ki = s[R].split(R.reduce_axis[0], 8)
    s[R].reorder(io, ko, ii, ki)
    s[R].bind(io, "program_id.0")
    if first == "pipeline":
        s[R].pipeline(ko, stages=2)
    else:
        s[R].unroll(ki)
    target = ko if first == "pipeline" else ki
    before = s.fingerprint()
    with pytest.raises(tc.ArgumentError, match=rf"{then}: R\.{target.name} is {first}[a-z]*\b.*{then} it first, then "
                                               rf"{first} the loop you want"):
        if then == "split":
            s[R].split(target, 2)
        else:
            s[R].fuse(ko, ki)
    assert s.fingerprint() == before
