"""One test per error tilec raises on purpose: the class, and the key words of the message.

Each message should say what was wrong and what would be right (notes/style.md, "Errors teach").
Cases where tilec does not raise the error it should are strict xfails naming the bug.
"""

import math
import re
import sys

import numpy as np
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
    with pytest.raises(ValueError, match="is a Python keyword"):
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
    # issue 23: the message said "not a valid identifier ... use letters, digits and '_'", which 'lambda' is made of
    with pytest.raises(tc.ArgumentError, match=rf"^{WHAT[api]}: '{bad}' is a Python keyword, and names become "
                                               rf"variables in the generated Triton code; pick another name, "
                                               rf"e.g. '{bad}_'$"):
        NAMERS[api](bad)


@pytest.mark.parametrize("api", list(NAMERS))
@pytest.mark.parametrize("bad", ["tl", "triton", "pid", "range"])
def test_name_reserved_for_generated_code(api, bad):
    with pytest.raises(tc.ArgumentError, match=rf"{WHAT[api]}: '{bad}' is reserved for the generated code.*pick another"):
        NAMERS[api](bad)


def test_knob_named_num_stages_says_what_sets_the_pipeline_depth():
    """Issue 23: the knob name `num_stages` is refused as reserved; the message says which primitive takes
    that knob and where the reserved names are listed."""
    with pytest.raises(tc.ArgumentError, match=r"^knob name: 'num_stages' is reserved: Triton's kernel launch takes it "
                                               r"as a keyword .*; pipeline\(axis, stages=tc.knob\('STAGES', \[2, 3\]\)\) "
                                               r"sets a pipeline's depth \(docs/schedule.md, section 1, lists the "
                                               r"reserved names\); pick another name, e.g. 'num_stages_'$"):
        tc.knob("num_stages", [2, 3])
    with pytest.raises(tc.ArgumentError, match=r"num_warps\(tc.knob\('WARPS', \[4, 8\]\)\) sets the warps"):
        tc.knob("num_warps", [4, 8])
    with pytest.raises(tc.ArgumentError, match=r"'grid' is reserved: .*\(docs/schedule.md, section 1, lists the "
                                               r"reserved names\); pick another name, e.g. 'grid_'$"):
        tc.size_vars("grid")


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


def test_size_vars_of_one_name_is_the_size():
    """Issue 23: `M = tc.size_vars("M")` gave a 1-tuple, and the next line failed far away. One name gives the
    size (TVM's te.var), several a tuple; a trailing comma or a list asks for a tuple (sympy's symbols)."""
    M = tc.size_vars("M")
    assert isinstance(M, tc.ir.expr.SizeVar) and M.name == "M"
    X = tc.placeholder((M, 4), "float32", name="X")
    assert str(X.shape[0]) == "M"
    M, N = tc.size_vars("M N")
    assert (M.name, N.name) == ("M", "N")
    assert [v.name for v in tc.size_vars("M,")] == ["M"]
    assert [v.name for v in tc.size_vars(" M , ")] == ["M"]
    assert [v.name for v in tc.size_vars(["M"])] == ["M"]
    assert [v.name for v in tc.size_vars(("M", "N"))] == ["M", "N"]


def test_unpacking_one_size_says_it_is_one_size():
    """`M, = tc.size_vars("M")` and `tc.size_vars("M")[0]`, right when one name gave a 1-tuple, say what to
    write now (a review's find: Python's "cannot unpack non-iterable SizeVar object")."""
    with pytest.raises(tc.ArgumentError, match=r"M is one size, not a tuple: .*write M = tc.size_vars\('M'\), "
                                              r"or \(M,\) = tc.size_vars\('M,'\)"):
        M, = tc.size_vars("M")
    with pytest.raises(tc.ArgumentError, match=r"M\[0\]: M is one size, not a tuple"):
        tc.size_vars("M")[0]  # noqa: B018


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
    M = tc.size_vars("M")
    A = tc.placeholder((M,), "int32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"dimension 0: an extent may only use sizes and ints, got"):
        tc.placeholder((M + A[0],), "float32", name="X")


@pytest.mark.parametrize("make", [lambda K: K / 2, lambda K: K > 2], ids=["K/2", "K>2"])
def test_extent_of_non_integer_type(make):
    K = tc.size_vars("K")
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


@pytest.mark.parametrize("body,hint", [
    (lambda A, i: max(A[i], 0.0), r"builtins max\(\) and min\(\).*tc.maximum\(a, b\) / tc.minimum\(a, b\)"),
    (lambda A, i: min(A[i], 1.0), r"builtins max\(\) and min\(\).*tc.maximum\(a, b\) / tc.minimum\(a, b\)"),
    (lambda A, i: A[i] > 0 and A[i] < 1, r"& \| ~ to combine conditions$"),
    (lambda A, i: not A[i] > 0, r"& \| ~ to combine conditions$"),
])
def test_python_control_flow_on_an_expression_names_the_tilec_function(body, hint):
    """Issue 11: Python's max()/min() compare, and the comparison's truth value is refused with the fix."""
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"^a tilec expression has no truth value at definition time .*" + hint):
        tc.compute((4,), lambda i: body(A, i), name="X")


@pytest.mark.parametrize("body,match", [
    (lambda A, i: torch.exp(A[i]), r"^torch.exp cannot compute on a tilec expression: .*; use tc.exp$"),
    (lambda A, i: torch.nn.functional.silu(A[i]), r"^torch.silu cannot .*use tc.silu$"),
    (lambda A, i: torch.maximum(A[i], A[i] * 2.0), r"^torch.maximum cannot .*use tc.maximum$"),
    (lambda A, i: torch.where(A[i] > 0, A[i], 0.0), r"^torch.where cannot .*use tc.where$"),
    (lambda A, i: torch.relu(A[i]), r"^torch.relu cannot .*use tc.maximum\(x, 0.0\)$"),
    (lambda A, i: torch.erf(A[i]), r"^torch.erf cannot .*use tc.erf$"),
    (lambda A, i: torch.lgamma(A[i]), r"^torch.lgamma cannot .*use tilec's functions \(tc.exp, tc.log, .*\) and "
                                      r"Python's operators$"),
    (lambda A, i: torch.tensor(2.0) * A[i], r"got Tensor tensor\(2.\): a tensor or array cannot be part of an "
                                            r"expression; pass it as an input \(tc.placeholder\)"),
])
def test_torch_on_an_expression_names_the_tilec_function(body, match):
    """Issue 11: torch.exp(A[i]) raised torch's TypeError (must be Tensor, not Load)."""
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=match):
        tc.compute((4,), lambda i: body(A, i), name="X")


@pytest.mark.parametrize("body,match", [
    (lambda A, i: math.exp(A[i]), r"^float\(\) \(or a math.\* function, such as math.exp\) of a tilec expression "
                                  r"\(A\[i\]\): it has no value at definition time.*tc.exp, tc.log"),
    (lambda A, i: math.sqrt(A[i]), r"math.\* function.*tc.sqrt"),
    (lambda A, i: float(A[i]), r"^float\(\).*no value at definition time"),
    (lambda A, i: A[int(i)], r"^int\(\) of a tilec expression \(i\)"),
    (lambda A, i: round(A[i], 2), r"^round\(A\[i\], 2\): tilec rounds to whole numbers only"),
    (lambda A, i: A[i].exp(), r"^a tilec expression has no method exp\(\) .*; use tc.exp$"),
    (lambda A, i: np.exp(A[i]), r"^numpy.exp cannot compute on a tilec expression: .*; use tc.exp$"),
    (lambda A, i: np.sum(A[i]), r"^numpy.sum cannot .*; use tc.sum\(x, axis=k\)$"),
    (lambda A, i: np.ones(2) * A[i], r"^numpy.multiply of a numpy array and a tilec expression: an array cannot be "
                                     r"part of an expression"),
])
def test_math_numpy_and_conversions_on_an_expression_name_the_fix(body, match):
    """Issue 11: math.exp(A[i]) raised `must be real number, not Load`, np.exp a ufunc loop error; each is now an
    ArgumentError (still a TypeError) saying what to use. (A[i] ** 2, round() and math.floor build tilec's
    power and rounding since issue 26: tests/test_math.py.)"""
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=match) as info:
        tc.compute((4,), lambda i: body(A, i), name="X")
    assert isinstance(info.value, TypeError)


def test_a_tensor_is_read_by_indexing_not_called_or_assigned():
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"^A\(...\): a tensor is read by indexing, A\[i, j\], not called$"):
        tc.compute((4,), lambda i: A(i) * 2.0, name="X")
    with pytest.raises(tc.ArgumentError, match=r"^A\[...\] = ...: tensors are not assigned; define a tensor's values "
                                               r"with tc.compute"):
        A[0] = 1.0


def test_a_missing_method_is_still_an_attribute_error():
    A = tc.placeholder((4,), "float32", name="A")
    assert not hasattr(A[0], "exp") and not hasattr(A[0], "no_such_thing")
    with pytest.raises(AttributeError, match=r"'Load' object has no attribute 'no_such_thing'"):
        A[0].no_such_thing  # noqa: B018


def test_numpy_scalars_are_numbers_in_an_expression():
    """The numpy hooks refuse ufuncs, not numbers: np.float32(2.0) * A[i] is 2.0 * A[i], on either side."""
    A = tc.placeholder((4,), "float32", name="A")
    for got, want in ((np.float32(2.0) * A[0], "(2.0 * A[0])"), (A[0] * np.float32(2.0), "(A[0] * 2.0)"),
                      (np.int64(3) + A[0], "(3 + A[0])"), (np.float32(1.0) < A[0], "(A[0] > 1.0)")):
        assert repr(got) == want
    assert (np.float32(2.0) * A[0]).dtype == "float32"


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


@pytest.mark.parametrize("op,two", [("max", r"tc.maximum\(a, b\)"), ("min", r"tc.minimum\(a, b\)")])
def test_a_reduction_called_on_two_values_names_the_elementwise_function(op, two):
    """tc.max(x, 0.0) (numpy's or Python's max of two values) is a reduction over an axis in tilec."""
    A = tc.placeholder((4,), "float32", name="A")
    with pytest.raises(tc.ArgumentError, match=rf"^tc.{op}: axis must be a reduce_axis or a list of them, got 0.0 "
                                               rf"\(tc.{op} reduces over an axis; for two values use {two}\)$"):
        tc.compute((4,), lambda i: getattr(tc, op)(A[i], 0.0), name="X")


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


def test_unroll_of_a_symbolic_extent_is_refused_at_the_unroll():
    """Issue 11: was refused only by tc.build; an axis keeps its extent, so no later primitive helps."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    with pytest.raises(tc.LoweringError,
                       match=r"^unroll\(C.io\): its extent cdiv\(M, 16\) is not a constant; unroll the inner axis of a "
                             r"split$"):
        s[C].unroll(io)
    assert s[C].unrolled == set()
    s[C].unroll(ii)  # the inner axis: a constant extent
    tc.lower(s)


def test_pipeline_of_a_tile_axis_is_refused_at_the_pipeline():
    """Issue 11: was refused only by tc.build; a tile axis never becomes a serial loop (unrolled it is an
    unrolled loop, bound a grid axis: neither is pipelined)."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    with pytest.raises(tc.LoweringError, match=r"^pipeline\(C.ii\): ii is a tile axis \(the inner axis of split\(i, "
                                               r"16\), a vector dimension\); only serial loops \(tl.range\) are "
                                               r"pipelined: pipeline a serial loop instead \(such as C.io, the loop "
                                               r"over these tiles\)$"):
        s[C].pipeline(ii, 2)
    assert s[C].pipelines == {}
    s[C].pipeline(io, 2)  # the loop the message names
    tc.lower(s)
    s[C].bind(s[C].split(C.axis[1], 16)[0], "program_id.0")
    with pytest.raises(tc.LoweringError, match=r"pipeline a serial loop instead$"):  # jo is bound: not named
        s[C].pipeline(s[C].leaves[3], 2)


@pytest.mark.parametrize("first,then,match", [
    ("unroll", "pipeline", r"^pipeline\(C.iio\): iio is unrolled \(tl.static_range\); only serial loops \(tl.range\) "
                           r"are pipelined: unroll it or pipeline it, not both$"),
    ("pipeline", "unroll", r"^unroll\(C.iio\): iio is pipelined \(pipeline\(iio, stages=2\)\); only serial loops "
                           r"\(tl.range\) are pipelined: unroll it or pipeline it, not both$"),
    ("pipeline", "bind", r"^bind\(C.iio, 'program_id.0'\): iio is pipelined \(pipeline\(iio, stages=2\)\), and a grid "
                         r"axis is no loop"),
    ("unroll", "bind", r"^bind\(C.iio, 'program_id.0'\): iio is unrolled, and a grid axis is no loop"),
])
def test_a_loop_scheduled_two_ways_the_lowering_refuses_is_refused_at_the_second(first, then, match):
    """Issue 11: pipeline of an unrolled loop and unroll of a pipelined one failed at tc.build; bind of
    either failed at build (pipelined) or dropped the unroll silently (the grid wins)."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    iio, iii = s[C].split(ii, 4)
    s[C].reorder(iio, io)
    getattr(s[C], first)(*((iio, 2) if first == "pipeline" else (iio,)))
    before = s.fingerprint()
    args = {"pipeline": (iio, 2), "unroll": (iio,), "bind": (iio, "program_id.0")}[then]
    with pytest.raises(tc.LoweringError, match=match):
        getattr(s[C], then)(*args)
    assert s.fingerprint() == before


def test_persistent_with_another_grid_axis_is_refused_at_the_primitive():
    """Issue 11: a persistent axis beside another grid axis failed at tc.build, either order."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()  # io on program_id.0, jo on program_id.1
    with pytest.raises(tc.LoweringError, match=r"^persistent\(io\): C's tile loop runs its one grid axis on "
                                               r"program_id.0, but C also binds jo to the grid; fuse \(or swizzle\) the "
                                               r"grid axes into one$"):
        s[C].persistent(ax["io"])
    s, (A, W, C, Y), ax = gemm_silu_schedule(bind_jo=False)
    s[C].persistent(ax["io"])
    with pytest.raises(tc.LoweringError, match=r"^bind\(C.jo, 'program_id.1'\): C's tile loop \(persistent\) runs its "
                                               r"one grid axis on program_id.0, so C binds no other axis"):
        s[C].bind(ax["jo"], "program_id.1")
    assert ax["jo"] not in s[C].binds


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


@pytest.mark.parametrize("factor,padded", [(24, 32), (40, 64), (3, 4), (100, 128)])
def test_non_power_of_two_tile_is_padded(factor, padded):
    """Issue 25: a tile of any extent builds: tl.arange over the next power of two, its lanes past the factor
    masked (it was a TileExtentError unless sub-tiles served: a multiple of 16 on the root's spatial axis)."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], factor)
    src = tc.lower(s).source()
    assert f"tl.arange(0, {padded})" in src and f"(tl.arange(0, {padded}) < {factor})" in src
    kernel = tc.build(s, [A, W, Y])
    for m, n, k in [(factor + 3, 5, 6), (1, 1, 1)]:  # a last tile of 3 rows past the padded lanes; size 1
        a, w = torch.randn(m, k), torch.randn(k, n)
        torch.testing.assert_close(kernel(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_tile_extent_error_is_still_exported():
    """The class stays (code may catch it), though the lowering pads such tiles now (issue 25)."""
    assert issubclass(tc.TileExtentError, tc.LoweringError) and "TileExtentError" in tc.__all__
    assert tc.TileExtentError.__module__ == "tilec.errors"  # where the other error classes are


@pytest.mark.parametrize("choices", [[16, 24], [24, 16]])
def test_non_power_of_two_knob_choices_each_build(choices):
    """Issue 11 refused a knob choice that could never be its tile (24 beside 16) at the split; with padded
    tiles every choice is one (issue 25), so the split keeps them all and each builds correct."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    s[C].split(C.axis[0], tc.knob("BM", choices))
    s[C].split(C.reduce_axis[0], tc.knob("BK", [48, 32]))  # 48 on a reduce axis: padded (no sub-tiles there)
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    for bm in choices:
        kernel = tc.build(s, [A, W, Y], config={"BM": bm, "BK": 48})
        torch.testing.assert_close(kernel(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_a_tile_that_sub_tiles_as_root_is_padded_inside_another_kernel():
    """g's tile of 96 lowers as sub-tiles (64 + 32) while g is its kernel's root; computed inside h's kernel
    it is padded to 128 instead (it was refused at the compute_at)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    g = tc.compute((M, N), lambda r, c: tc.exp(X[r, c]), name="g")
    h = tc.compute((M, N), lambda r, c: g[r, c] * 2.0, name="h")
    s = tc.create_schedule(h)
    ro, co, ri, ci = s[h].tile(*h.axis, 16, 64)
    s[h].bind(ro, "program_id.0")
    s[g].split(g.axis[1], tc.knob("BG", [64, 96]))
    s[g].compute_at(s[h], ro)
    assert "(tl.arange(0, 128) < BG)" in tc.lower(s, {"BG": 96}).source()
    x = torch.randn(20, 200)
    torch.testing.assert_close(tc.build(s, [X, h], config={"BG": 96})(x), torch.exp(x) * 2.0)


def test_a_knob_whose_choices_are_all_no_tile_is_left_to_build():
    """split(j, 6) may be split again (test_regressions.py): a knob none of whose choices is a tile is a
    factor the primitive cannot judge yet, as an int is."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    jo, ji = s[C].split(C.axis[1], tc.knob("BN", [6, 12]))
    s[C].split(ji, 2)
    tc.lower(s, {"BN": 12})


def test_spatial_loop_inside_reduction_loop_runs_outside_it():
    """Issue 25: C's loops (ko, io, jo): the spatial loops run outside the reduction loop, the source says so,
    and each element's updates keep their order over k (it was refused; Halide accepts any order)."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    i, j = C.axis
    (k,) = C.reduce_axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    ko, ki = s[C].split(k, 16)
    s[C].reorder(ko, io, jo, ii, ji, ki)
    src = tc.lower(s).source()
    assert "# C: spatial loop io runs outside reduction loop ko (the accumulator holds one tile" in src
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    torch.testing.assert_close(tc.build(s, [A, W, Y])(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_lower_unknown_target():
    A, W, C, Y = gemm_silu()
    with pytest.raises(tc.LoweringError, match=r"target must be one of \('cuda', 'interpreter'\), got 'rocm'"):
        tc.lower(tc.create_schedule(Y), target="rocm")


@pytest.mark.parametrize("clash", ["size", "stride", "knob", "axis"])
def test_one_name_for_two_things_in_a_kernel(clash):
    K = tc.size_vars("K")
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
                             r"stages\), and the two read no tensor in common; a stage can only be computed inside "
                             r"a producer or consumer of it, or a stage that shares a source with it"):
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
    """Issue 25: a tile axis is a place, as in Halide (compute_at at an innermost xi): the loop around it.
    With C's tiles ordered before its reduction loop, Y at C.ji runs after that loop, for the whole tile (it
    was refused, since issue 11, as "a vector dimension, not a loop")."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[C].reorder(ax["ii"], ax["ji"], ax["ko"])  # tiles before the reduction loop (tiles are no loops)
    s[Y].compute_at(s[C], ax["ji"])
    kernel = tc.build(s, [A, W, Y])
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    torch.testing.assert_close(kernel(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)
    assert len(tc.lower(s).kernels) == 1


def test_a_misplaced_stage_found_at_build_names_the_places_that_build():
    """A place that bypasses compute_at (set by hand): tc.build's message names the places that are
    accepted, not every loop of C's kernel. At C.ki (a tile of the reduction: the loop around it is ko) Y
    would read C before its sum is complete."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].attach = (s[C], ax["ki"])
    with pytest.raises(tc.IllegalScheduleError, match=r"^build makes Y read C before C's reduction over k is "
                                                      r"complete: .*Legal locations for Y are: C.io, C.jo$"):
        tc.lower(s)


# ---------------------------------------------------------------------------------------------
# the places an error suggests are accepted: each is applied and the schedule builds (issue 11)

_PLACES = re.compile(r"(?:Legal locations for \w+ are: |the legal places for \w+ are: |place \w+ at (?:one of )?)"
                     r"((?:[A-Za-z]\w*\.[A-Za-z]\w*)(?:, [A-Za-z]\w*\.[A-Za-z]\w*)*)")


def suggested_places(message: str) -> list[str]:
    """Every place ('C.jo') an error message suggests, in each of the forms tilec writes them."""
    return [p for group in _PLACES.findall(message) for p in group.split(", ")]


def _leaf(s, place: str):
    stage, name = place.split(".")
    return s[stage], next(a for a in s[stage].leaves if a.name == name)


def _example(name: str):
    """An example's module (examples/<name>.py), for its make()."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent / "examples"
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))  # the examples import their `common`
    spec = importlib.util.spec_from_file_location(f"example_{name}", root / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gemm():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    return s, [A, W, Y], ax


def _gemm_serial_jo():
    s, (A, W, C, Y), ax = gemm_silu_schedule(bind_jo=False)
    return s, [A, W, Y], ax


def _y(s):
    return s[s.tensors["Y"]]


def _cache(kind, tensor):
    def place(s, target, axis):
        C = s.tensors["C"]
        st = (s.cache_read(s.tensors[tensor], "shared", readers=[C]) if kind == "read"
              else s.cache_write(C, "local"))
        st.compute_at(target, axis)
    return place


MISPLACED = {  # the schedule, how the stage is placed at (target, axis), the axis that misplaces it
    "Y at C.ko (a reduction)": (_gemm, lambda s, t, a: _y(s).compute_at(t, a), "ko"),
    "Y at the tile C.ji": (_gemm, lambda s, t, a: _y(s).compute_at(t, a), "ji"),
    "Y at the tile C.ki": (_gemm, lambda s, t, a: _y(s).compute_at(t, a), "ki"),
    "C_local at C.ko": (_gemm, _cache("write", None), "ko"),
    "C_local at the tile C.ii": (_gemm, _cache("write", None), "ii"),
}


@pytest.mark.parametrize("tensor,tile,loop", [("A", "ki", "ko"), ("W", "ji", "ko")])
def test_a_cache_read_at_a_tile_axis_is_at_the_loop_around_it(tensor, tile, loop):
    """Issue 25: a tile axis is a place (the loop around it); a cache there is the cache at that loop."""
    sources = []
    for where in (tile, loop):
        s, args, ax = _gemm()
        _cache("read", tensor)(s, s[s.tensors["C"]], ax[where])
        sources.append(tc.lower(s).source().split("@triton.jit")[1])
        tc.build(s, args)
    assert sources[0] == sources[1].replace(f"compute_at(C, {loop})", f"compute_at(C, {tile})")


@pytest.mark.parametrize("case", list(MISPLACED))
@pytest.mark.slow
def test_each_place_a_primitive_suggests_builds(case):
    make, place, bad = MISPLACED[case]
    s, args, ax = make()
    with pytest.raises(tc.TilecError) as info:
        place(s, s[s.tensors["C"]], ax[bad])
    places = suggested_places(str(info.value))
    assert places, str(info.value)
    for where in places:
        s, args, ax = make()
        place(s, *_leaf(s, where))
        tc.build(s, args)


def test_each_place_a_build_error_suggests_builds():
    """Places found only at build (set behind compute_at's back, or made illegal by a later reorder)."""
    def by_hand(s, ax):
        _y(s).attach = (s[s.tensors["C"]], ax["ki"])

    def outer(s, ax):
        _y(s).compute_at(s[s.tensors["C"]], ax["io"])  # Y's j follows the serial jo inside io

    def behind(s, ax):
        C = s.tensors["C"]
        s.cache_write(C, "local").compute_at(s[C], ax["jo"])
        s[C].reorder(ax["ko"], ax["jo"])

    cases = [(_gemm, by_hand, lambda s, t, a: _y(s).compute_at(t, a)),
             (_gemm_serial_jo, outer, lambda s, t, a: _y(s).compute_at(t, a)),
             (_gemm, behind, None)]
    for make, misplace, place in cases:
        s, args, ax = make()
        misplace(s, ax)
        with pytest.raises(tc.TilecError) as info:
            tc.build(s, args)
        places = suggested_places(str(info.value))
        assert places, str(info.value)
        for where in places:
            s, args, ax = make()
            if place is None:  # the cache_write of `behind`, placed where suggested
                C = s.tensors["C"]
                cw = s.cache_write(C, "local")
                s[C].reorder(ax["ko"], ax["jo"])
                cw.compute_at(*_leaf(s, where))
            else:
                place(s, *_leaf(s, where))
            tc.build(s, args)


def test_the_suggested_place_computes_the_right_values():
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    with pytest.raises(tc.IllegalScheduleError) as info:  # at C.ki, the loop around it (ko): a partial sum
        s[Y].compute_at(s[C], ax["ki"])
    places = suggested_places(str(info.value))
    assert places == ["C.io", "C.jo"]
    s[Y].compute_at(*_leaf(s, places[-1]))
    a, w = torch.randn(37, 20), torch.randn(20, 29)
    torch.testing.assert_close(tc.build(s, [A, W, Y])(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_compute_with_at_a_tile_axis_is_refused_and_names_a_loop_that_builds():
    """Issue 11: compute_with at a tile axis was refused only at build."""
    swiglu = _example("swiglu")
    s, args = swiglu.make(one_loop=False)
    G, U = s[s.tensors["G"]], s[s.tensors["U"]]
    ki = next(a for a in G.leaves if a.name == "ki")
    with pytest.raises(tc.LoweringError, match=r"^compute_with\(U, G.ki\): ki is a tile axis \(a vector dimension, not "
                                               r"a loop: the inner axis of split\(k, BK\)\), and compute_with joins two "
                                               r"loops; use G's outermost loop there, such as G.ko$") as info:
        U.compute_with(G, ki)
    assert U.fused_with is None
    U.compute_with(*_leaf(s, re.search(r"such as (\w+\.\w+)", str(info.value)).group(1)))
    tc.build(s, args)


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
    """Issue 25: a placed stage's own split of an axis its place fixes is absorbed into the place (Halide's
    split inside a compute_at region only orders the region's points; here the place's tile holds them at
    once), and the source says so; it was refused."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].compute_at(s[C], ax["jo"])
    s[Y].split(Y.axis[0], 4)
    assert "# Y: split(i, 4) absorbed: i follows C's loops, which give it its values" in tc.lower(s).source()
    kernel = tc.build(s, [A, W, Y])
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    torch.testing.assert_close(kernel(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_fuse_of_an_axis_fixed_by_compute_at_with_its_own():
    """P at C.io: P's row axis follows C's rows, its column axis kk (C's reduction runs over it in a loop
    inside io) is its own; a fusion of the two keeps its own part (the row is a loop that runs once inside
    the place: Halide's friendly case 295), and the source says so. It was refused."""
    A, W, P, C = prologue_gemm(lambda a: a * 2.0)
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)
    s[P].compute_at(s[C], ax["io"])
    f = s[P].fuse(*P.axis)
    src = tc.lower(s).source()
    assert f"# P: fuse(i, kk) absorbed: i follows C's loops (a loop that runs once here), so {f.name} loops over kk" \
        in src, src
    a, w = torch.randn(37, 70), torch.randn(70, 20)
    torch.testing.assert_close(tc.build(s, [A, W, C])(a, w), (a * 2.0) @ w, rtol=1e-4, atol=1e-4)


def test_split_of_a_fusion_with_an_axis_fixed_by_compute_at():
    """A fusion of a fixed axis with an own one that is split again has no loop to be: the split's pieces
    would range over the fixed part too. Refused, naming the axis."""
    A, W, P, C = prologue_gemm(lambda a: a * 2.0)
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)
    s[P].compute_at(s[C], ax["io"])
    s[P].split(s[P].fuse(*P.axis), 8)
    with pytest.raises(tc.LoweringError, match=r"P: axis i is fixed by where P is computed \(compute_at\).*remove the "
                                               r"split/fuse of i from P"):
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


def test_cache_write_of_a_non_reduction_is_refused_at_its_compute_at():
    """Issue 11: was refused only by tc.build; Y's compute never becomes a reduction, so compute_at says it."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    cw = s.cache_write(Y, "local")
    with pytest.raises(tc.LoweringError, match=r"^cache_write\(Y, 'local'\): Y is not a reduction; there is no "
                                               r"accumulator to keep in registers, so Y_local takes no compute_at .*"
                                               r"drop the compute_at"):
        cw.compute_at(s[Y], Y.axis[0])
    assert cw.attach is None
    tc.lower(s)  # unplaced, it only chooses how Y's tiles are stored


@pytest.mark.parametrize("axis,why", [("ko", "a reduction loop"), ("ki", "the inner axis of a split"),
                                      ("ii", "the inner axis of a split")])
def test_cache_write_inside_the_reduction_loop_is_refused_at_its_compute_at(axis, why):
    """Issue 11: was refused only by tc.build. A reduction loop or a split's inner axis is never a place
    for the accumulator, whatever follows."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    cw = s.cache_write(C, "local")
    with pytest.raises(tc.LoweringError, match=rf"^compute_at\(C_local, C.{axis}\): the accumulator must live outside "
                                               rf"the reduction loops, and {axis} is {why}; place it at one of C.io, "
                                               rf"C.jo$"):
        cw.compute_at(s[C], ax[axis])
    assert cw.attach is None


def test_cache_write_behind_a_reduction_loop_at_lowering():
    """jo after ko in C's order (a reorder could undo it) is left to build, whose message names the places
    that build (C.io; not C.jo, refused by the same rule)."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s.cache_write(C, "local").compute_at(s[C], ax["jo"])
    s[C].reorder(ax["ko"], ax["jo"])
    with pytest.raises(tc.LoweringError, match=r"^C_local.compute_at\(C, jo\): the accumulator must live outside the "
                                               r"reduction loops; place it at C.io$"):
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
    """A size no input's shape holds is given at the call (issue 26; P * 2 holds P: tests/test_sizes.py), and a
    call without it is refused with the reason."""
    P, Q = tc.size_vars("P Q")
    X = tc.placeholder((P * 2,), "float32", name="X")
    Z = tc.compute((Q,), lambda i: X[i] + 1.0, name="Z")
    k = tc.build(tc.create_schedule(Z), [X, Z])
    assert k.call_sizes == ["Q"]
    with pytest.raises(tc.ArgumentError, match=r"size Q is in no input's shape, so the call gives it"):
        k(torch.randn(6))


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
    M = tc.size_vars("M")
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
    """A tensor after the inputs is an output: its error says so (a newcomer passing one input too many
    read 'out Y: expected shape ...' without knowing where an output came from)."""
    kern, a, w = gemm_kernel
    with pytest.raises(tc.ArgumentError, match=r"^out Y: expected shape \(37, 29\) and dtype float32, got \(37, 30\) "
                                               r"float32 \(the call passed 3 tensors: after the 2 input\(s\) A, W, the "
                                               r"rest are taken as the output\(s\) Y\)$"):
        kern(a, w, torch.empty(37, 30))
    with pytest.raises(tc.ArgumentError, match=r"^out Y: expected shape \(37, 29\) and dtype float32, got \(37, 30\) "
                                               r"float32$"):  # out= says nothing more
        kern(a, w, out=torch.empty(37, 30))


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
    """Issue 25: a bind on a stage computed in another stage's kernel is ignored, and the source says so
    (it was refused): the kernel's programs are the grid; the values are the same."""
    s, (A, W, C, Y), ax = gemm_silu_schedule()
    s[Y].bind(Y.axis[0], "program_id.0")
    s[Y].compute_at(s[C], ax["jo"])
    assert "# Y: bind(i, 'program_id.0') ignored: Y is computed in C's kernel, whose programs are the grid" in \
        tc.lower(s).source()
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    torch.testing.assert_close(tc.build(s, [A, W, Y])(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


def test_bind_of_a_loop_of_a_placed_producer_runs_it_serially():
    A, W, P, C = prologue_gemm(lambda a: a * 2.0)
    s = tc.create_schedule(C)
    ax = tile_gemm(s, C)
    kko, kki = s[P].split(P.axis[1], 16)
    s[P].bind(kko, "program_id.1")
    s[P].compute_at(s[C], ax["io"])
    src = tc.lower(s).source()
    assert "# P: bind(kko, 'program_id.1') ignored: P is computed in C's kernel, whose programs are the grid" in src
    assert "for kko in tl.range(0, tl.cdiv(K, 16)):" in src
    a, w = torch.randn(37, 50), torch.randn(50, 29)
    torch.testing.assert_close(tc.build(s, [A, W, C])(a, w), (a * 2.0) @ w, rtol=1e-4, atol=1e-4)


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


def test_a_python_if_on_an_equality_is_refused_not_silently_false():
    """Found by the docs run (issue 11): `a if V[i, j] == 0 else b` built b silently, since `==`'s truth value
    was whether both sides are one object (for `axis in list`); a comparison with a value is refused like
    `if V[i, j] > 0`, which always was."""
    M, N = tc.size_vars("M N")
    V = tc.placeholder((M, N), "float32", name="V")
    with pytest.raises(tc.ArgumentError, match=r"no truth value at definition time.*tc.where"):
        tc.compute((M, N), lambda i, j: -1.0 if V[i, j] == 0 else V[i, j], name="Y")
    with pytest.raises(tc.ArgumentError, match=r"no truth value at definition time"):
        tc.compute((M, N), lambda i, j: -1.0 if V[i, j] != V[i, j] else V[i, j], name="Y2")
    i, j = tc.compute((M, N), lambda i, j: V[i, j], name="Z").axis
    assert i in [j, i] and i not in [j] and (i == i) and not (i == j)  # axes are still found in lists
