"""Regression tests: each bug the reliability work (tester's report, schedule fuzzer) found, as the
smallest program that showed it, compared with PyTorch on fresh random inputs.

Every test here failed before its fix: a wrong answer, an internal error (not a TilecError), or an
error that came from isl or Triton instead of tilec.
"""

import pytest
import torch

import tilec as tc


def _close(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


# -- wrong answers ---------------------------------------------------------------------------------

def test_inlined_stage_read_at_a_shifted_index_reads_zero_outside():
    """`Y[i] = P[i - 1]` with P inlined evaluated P's expression at i = -1 instead of reading 0 there,
    as a read of P from memory does."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    P = tc.compute((N,), lambda i: tc.exp(X[i]) + 1.0, name="P")
    Y = tc.compute((N,), lambda i: P[i - 1] * 2.0 + P[i + 1], name="Y")
    s = tc.create_schedule(Y)
    s[P].compute_inline()
    x = torch.randn(10)
    p = torch.exp(x) + 1
    zero = torch.zeros(1)
    want = torch.cat([zero, p[:-1]]) * 2 + torch.cat([p[1:], zero])
    _close(tc.build(s, [X, Y])(x), want)


def test_split_of_a_split_inner_axis_by_a_larger_factor_counts_each_element_once():
    """split(k, 4) then split(ki, 8): the 8-wide tile of kii ran past ki's extent 4 and was masked only
    against K, so a sum counted elements twice."""
    M, K = tc.size_vars("M K")
    X = tc.placeholder((M, K), "float32", name="X")
    k = tc.reduce_axis(K, name="k")
    S = tc.compute((M,), lambda i: tc.sum(X[i, k], axis=k), name="S")
    s = tc.create_schedule(S)
    (i,) = S.axis
    io, ii = s[S].split(i, 4)
    ko, ki = s[S].split(k, 4)
    s[S].split(ki, 8)
    s[S].bind(io, "program_id.0")
    x = torch.randn(5, 10)
    _close(tc.build(s, [X, S])(x), x.sum(1))


def test_split_of_a_split_spatial_axis_by_a_non_divisor():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    i, j = Y.axis
    jo, ji = s[Y].split(j, 6)
    s[Y].split(ji, 4)
    x = torch.randn(3, 13)
    _close(tc.build(s, [X, Y])(x), x * 2)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_reductions_propagate_nan_as_torch(op):
    """tl.max/tl.min skip NaN (interpreter: nanmax; GPU: maxnum); torch's amax/amin return NaN."""
    M, K = tc.size_vars("M K")
    X = tc.placeholder((M, K), "float32", name="X")
    k = tc.reduce_axis(K, name="k")
    R = tc.compute((M,), lambda i: getattr(tc, op)(X[i, k], axis=k), name="R")
    x = torch.randn(5, 100)
    x[0, 5] = float("nan")
    x[1, 99] = float("nan")
    x[2, 0] = float("inf")
    x[3, 7] = -float("inf")
    x[4, :] = float("nan")
    want = x.amax(1) if op == "max" else x.amin(1)
    _close(tc.build(tc.create_schedule(R), [X, R])(x), want)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_elementwise_maximum_minimum_propagate_nan(op):
    """tl.maximum defaults to maxnum (NaN dropped) on the GPU; torch.maximum propagates NaN."""
    N = tc.size_vars("N")
    A = tc.placeholder((N,), "float32", name="A")
    B = tc.placeholder((N,), "float32", name="B")
    Y = tc.compute((N,), lambda i: getattr(tc, op)(A[i], B[i]), name="Y")
    kernel = tc.build(tc.create_schedule(Y), [A, B, Y])
    assert "propagate_nan=tl.PropagateNan.ALL" in kernel.source
    a, b = torch.randn(8), torch.randn(8)
    a[1], b[2], a[3], b[3] = float("nan"), float("nan"), float("nan"), float("nan")
    _close(kernel(a, b), getattr(torch, op)(a, b))


@pytest.mark.parametrize("name,fn,ref", [
    ("bool_plus_int", lambda B, C, i: B[i] + 1, lambda b, c: b + 1),
    ("bool_plus_bool", lambda B, C, i: B[i] + C[i], lambda b, c: b + c),
    ("bool_times_bool", lambda B, C, i: B[i] * C[i], lambda b, c: b * c),
    ("bool_maximum", lambda B, C, i: tc.maximum(B[i], C[i]), lambda b, c: torch.maximum(b, c)),
    ("bool_times_float", lambda B, C, i: B[i] * 2.5, lambda b, c: b * 2.5),
    ("bool_where_int", lambda B, C, i: tc.where(C[i], B[i], 3), lambda b, c: torch.where(c, b, 3)),
])
def test_bool_arithmetic_promotes_as_torch(name, fn, ref):
    """`x + 1` on a bool tensor is int64 in torch (a Python int is of a higher category than bool);
    bool + bool is a logical or, bool * bool a logical and."""
    N = tc.size_vars("N")
    B = tc.placeholder((N,), "bool", name="B")
    C = tc.placeholder((N,), "bool", name="C")
    Y = tc.compute((N,), lambda i: fn(B, C, i), name="Y")
    b, c = torch.rand(9) > 0.5, torch.rand(9) > 0.5
    got = tc.build(tc.create_schedule(Y), [B, C, Y])(b, c)
    want = ref(b, c)
    assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("make,match", [
    (lambda B, F: -B, "negation of a bool"),
    (lambda B, F: B - B, "on two bool values"),
    (lambda B, F: ~F, "needs a bool or integer"),
    (lambda B, F: F & B, "needs bool or integer operands"),
])
def test_operators_torch_refuses_are_refused(make, match):
    N = tc.size_vars("N")
    B = tc.placeholder((N,), "bool", name="B")
    F = tc.placeholder((N,), "float32", name="F")
    with pytest.raises(tc.ArgumentError, match=match):
        make(B[0], F[0])


# -- internal errors ---------------------------------------------------------------------------------

def test_size_used_only_as_a_reduce_extent_is_refused_clearly():
    """A size that is only a reduce axis' extent gave an isl syntax error (not an isl parameter). Since issue 26
    such a size is given at the call."""
    M, K = tc.size_vars("M K")
    X = tc.placeholder((M, 8), "float32", name="X")
    k = tc.reduce_axis(K, name="k")
    S = tc.compute((M,), lambda i: tc.sum(X[i, k % 8], axis=k), name="S")
    s = tc.create_schedule(S)
    s[S].split(S.axis[0], 4)
    kern = tc.build(s, [X, S])
    with pytest.raises(tc.ArgumentError, match="size K is in no input's shape"):
        kern(torch.randn(5, 8))
    x = torch.randn(5, 8)
    assert torch.allclose(kern(x, K=20), x.sum(1) * 2 + x[:, :4].sum(1), atol=1e-5)


def test_split_of_a_split_of_a_fused_axis_builds_and_is_right():
    """fuse(i, j) with symbolic extents, split, split again: isl syntax error ('None' in a map)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    x = torch.randn(5, 7)
    for bind in (False, True):
        s = tc.create_schedule(Y)
        f = s[Y].fuse(*Y.axis)
        fo, fi = s[Y].split(f, 16)
        s[Y].split(fi, 8 if bind else 4)
        if bind:
            s[Y].bind(fo, "program_id.0")
        _close(tc.build(s, [X, Y])(x), x * 2)


def test_tile_over_tritons_element_limit_is_a_lowering_error():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    i, j = Y.axis
    s[Y].split(i, 2048)
    s[Y].split(j, 1024)
    with pytest.raises(tc.LoweringError, match="tile of 2097152 elements .* at most 1048576"):
        tc.build(s, [X, Y])


def test_a_tile_too_large_per_thread_is_a_lowering_error_not_a_compile_of_minutes():
    """H200 fuzz seeds 911677, 911040, 910273 'hung': 8192, 2048 and (64 unrolled copies) 4096 values
    per thread, which Triton compiles for minutes (and would spill to local memory)."""
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    i, j = Y.axis
    s[Y].split(i, 256)
    s[Y].split(j, 1024)
    s[Y].num_warps(4)  # (without num_warps the default is 16 warps here: 512 values per thread)
    with pytest.raises(tc.LoweringError, match=r"262144 elements .*: 2048 values per thread with 4 warps\. "
                                               r"Past 1024 .* or more warps \(num_warps\)"):
        tc.build(s, [X, Y])
    s[Y].num_warps(8)  # 1024 per thread: builds, and is right
    x = torch.randn(300, 1030)
    _close(tc.build(s, [X, Y])(x), x * 2)
    v = tc.placeholder((M,), "float32", name="v")  # seed 912377: a value of 256 stored broadcast to 262144
    B = tc.compute((M, N), lambda i, j: v[i] * 2.0, name="B")
    s = tc.create_schedule(B)
    i, j = B.axis
    s[B].split(i, 256)
    s[B].split(j, 1024)
    s[B].num_warps(4)
    with pytest.raises(tc.LoweringError, match=r"B works on a tile of 262144 elements"):
        tc.build(s, [v, B])
    A = tc.placeholder((M, K), "float32", name="A")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M,), lambda i: tc.sum(A[i, k], axis=k), name="C")
    s = tc.create_schedule(C)
    (i,) = C.axis
    io, ii = s[C].split(i, 128)
    ko, ki = s[C].split(k, 512)
    kio, kii = s[C].split(ki, 64)
    s[C].reorder(io, ko, kio, ii, kii)
    s[C].unroll(kio)  # 8 copies of a 128 x 64 tile: 64 values per thread each with 4 warps, 512 in all
    a = torch.randn(130, 600)
    _close(tc.build(s, [A, C])(a), a.sum(1))
    s[C].num_warps(1)  # 256 each on one warp, 2048 in all
    with pytest.raises(tc.LoweringError, match=r"8192 elements .*, in 8 unrolled copies: 2048 values per thread "
                                               r"with 1 warp\. "):
        tc.build(s, [A, C])


def test_resources_of_a_cache_of_a_computed_index():
    """kernel.resources raised ValueError: the box of a non-affine read is unbounded in isl."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda i, j: X[i, (j * j) % N] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    i, j = Y.axis
    io, ii = s[Y].split(i, 4)
    jo, ji = s[Y].split(j, 4)
    s[Y].reorder(io, jo, ii, ji)
    s.cache_read(X, "shared", readers=[Y]).compute_at(s[Y], jo)
    kernel = tc.build(s, [X, Y])
    (res,) = kernel.resources
    assert res.footprints[0].box == [4, 4] and res.footprints[0].offset.startswith("computed index")
    x = torch.randn(5, 7)
    jj = torch.arange(7)
    _close(kernel(x), x[:, (jj * jj) % 7] * 2)


def test_scalar_comparison_combined_with_a_tile_of_bools():
    """`(X[0] > 0.75) | (U[i] > 0)`: the interpreter typed the 0-d comparison as float32 and numpy's
    bitwise_or then failed (an internal error on the CPU; triton_compat fixes the comparison types)."""
    N = tc.size_vars("N")
    X = tc.placeholder((1,), "float32", name="X")
    U = tc.placeholder((N,), "float16", name="U")
    C = tc.compute((N,), lambda i: (X[0] > 0.75) | (U[i] > 0.0), name="C")
    D = tc.compute((N,), lambda i: tc.where(U[i] < 0.0, X[0] <= 0.0, U[i] > 1.0), name="D")
    kernel = tc.build(tc.create_schedule([C, D]), [X, U, C, D])
    x, u = torch.randn(1), torch.randn(11).half()
    c, d = kernel(x, u)
    assert torch.equal(c, (x > 0.75) | (u > 0)) and torch.equal(d, torch.where(u < 0, x <= 0, u > 1))


def test_gemm_of_an_inlined_operand_that_does_not_vary_along_k():
    """P[i, k] = A[i, 0], inlined into sum(P[i, k] * W[k, j]): the operand's dims were read off P's
    indices (i, k) instead of its expression (i only), so tl.dot got a 1-D operand (seed 5387)."""
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float16", name="A")
    W = tc.placeholder((K, N), "float16", name="W")
    P = tc.compute((M, K), lambda i, j: A[i, 0], name="P")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(P[i, k] * W[k, j], axis=k, acc_dtype="float32"), name="C",
                   dtype="float32")
    s = tc.create_schedule(C)
    s[P].compute_inline()
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    a, w = torch.randn(20, 33).half(), torch.randn(33, 18).half()
    want = (a[:, :1].float().expand(20, 33)) @ w.float()
    torch.testing.assert_close(tc.build(s, [A, W, C])(a, w), want, rtol=1e-3, atol=1e-3)


def test_inlined_stage_listed_as_an_output_is_refused():
    """An inlined stage named in build's args was never stored: the output came back unwritten
    (fuzzer seed 10558)."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    Q = tc.compute((N,), lambda i: X[i] + 1.0, name="Q")
    Y = tc.compute((N,), lambda i: Q[i] * 2.0, name="Y")
    s = tc.create_schedule(Y)
    s[Q].compute_inline()
    with pytest.raises(tc.LoweringError, match="Q is listed as an output of the kernel, but it is inlined"):
        tc.build(s, [X, Y, Q])


def test_cache_read_of_an_inlined_stage_is_refused():
    """cache_read of an inlined stage loaded it from a buffer that does not exist: KeyError at the
    launch (tester's report; fuzzer seed 20295)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="P")
    Y = tc.compute((M, N), lambda i, j: P[i, j] + 1.0, name="Y")
    s = tc.create_schedule(Y)
    s[P].compute_inline()
    jo, ji = s[Y].split(Y.axis[1], 4)
    s.cache_read(P, "shared", readers=[s[Y]]).compute_at(s[Y], jo)
    with pytest.raises(tc.LoweringError, match="P_shared caches P, which is inlined"):
        tc.build(s, [X, Y])


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float16"])
def test_int_to_narrow_float_goes_through_float32(dtype):
    """A count of comparisons stored as bfloat16 came back as 9e-41 (the interpreter bit-casts
    int -> bfloat16) and int -> float8 failed inside Triton (fuzzer seed 60718). torch converts
    through float32, and so does the kernel now."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.sum(X[i, k] <= 0.5, axis=k), name="R", dtype=dtype)
    Q = tc.compute((M,), lambda i: (X[i, 0] * 3.0).astype("int32").astype(dtype), name="Q")
    x = torch.randn(3, 13)  # counts and ints up to 16: exact in float8 (the interpreter rounds it wrongly)
    r, q = tc.build(tc.create_schedule([R, Q]), [X, R, Q])(x)
    torch.testing.assert_close(r.float(), (x <= 0.5).sum(1).to(getattr(torch, dtype)).float())
    torch.testing.assert_close(q.float(), (x[:, 0] * 3).int().to(getattr(torch, dtype)).float())


def test_reduction_of_a_constant_over_two_axes():
    """tc.sum(2.0, axis=[k, k1]) emitted tl.broadcast_to(2.0, ...), which Triton refuses for a Python
    number (fuzzer seed 60154)."""
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, N, K), "float32", name="X")
    k, k1 = tc.reduce_axis(N, name="k"), tc.reduce_axis(K, name="k1")
    R = tc.compute((M,), lambda i: tc.sum(2.0, axis=[k, k1]), name="R")
    B = tc.compute((M,), lambda i: tc.max(True, axis=[k]), name="B", dtype="bool")
    r, b = tc.build(tc.create_schedule([R, B]), [X, R, B])(torch.randn(3, 5, 70))
    torch.testing.assert_close(r, torch.full((3,), 700.0))
    assert b.dtype == torch.bool and bool(b.all())


def test_sum_of_a_comparison_with_no_tile_dimension():
    """`acc_D = acc_D + v_tile == 0.0`: the body of a reduction with no tile dimension was not
    parenthesized, so the comparison took the sum as its left side (fuzzer seeds 6320, 12022)."""
    V = tc.placeholder((7,), "float32", name="V")
    k = tc.reduce_axis(7, name="k")
    D = tc.compute((1,), lambda i: tc.sum(V[k].eq(0.0), axis=k), name="D")
    s = tc.create_schedule([D])
    s[D].reorder(*D.axis, k)
    v = torch.tensor([0.0, 1, 0, 2, 5, 0, 3])
    assert tc.build(s, [V, D])(v).tolist() == [3]


def test_python_bool_on_the_left_of_and_or():
    """`True & (X[i] > 0)` raised a plain TypeError: Expr had no __rand__/__ror__ (fuzzer)."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    A = tc.compute((N,), lambda i: True & (X[i] > 0.0), name="A")
    B = tc.compute((N,), lambda i: False | (X[i] < 0.0), name="B")
    x = torch.randn(9)
    a, b = tc.build(tc.create_schedule([A, B]), [X, A, B])(x)
    assert torch.equal(a, x > 0) and torch.equal(b, x < 0)


def test_float_reduction_loop_result_is_read_through_one_op():
    """Triton 3.6's TritonGPUOptimizeThreadLocality asserts (aborting the compiler) when a float
    reduction loop's result has several uses (GPU fuzz seed 901852); the kernel reads it once."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.sum(X[i, k], axis=k), name="R")
    Z = tc.compute((M, N), lambda i, j: tc.where(R[i] > 0.0, R[i], X[i, j] - R[i]), name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 32, 16)
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    s[R].split(k, 8)
    s[R].compute_at(s[Z], s[Z].leaves[0])
    kernel = tc.build(s, [X, Z])
    assert "R_val = acc_R + 0.0" in kernel.source
    x = torch.randn(20, 24)
    r = x.sum(1, keepdim=True)
    torch.testing.assert_close(kernel(x), torch.where(r > 0, r.expand(20, 24), x - r), rtol=1e-5, atol=1e-5)


def test_narrow_float_and_bool_accumulators_keep_their_type_in_the_loop():
    """A float16 min accumulator became float32 after tl.where with a Python number, and a sum of
    bools uint32 (Triton refuses a loop-carried type change: GPU fuzz seeds 900011, 902482)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(M, name="k")
    R = tc.compute((N,), lambda i: tc.min(X[k, i] * 2.0, axis=k, acc_dtype="float16"), name="R", dtype="float32")
    E = tc.compute((N,), lambda i: tc.sum(X[k, i] > 0.0, axis=k), name="E", dtype="int32")
    src = tc.lower(tc.create_schedule([R, E]), target="cuda").source()
    assert "tile_R.to(tl.float16)" in src and "> 0.0, tl.int32)" in src
    x = torch.randn(70, 5)
    r, e = tc.build(tc.create_schedule([R, E]), [X, R, E])(x)
    torch.testing.assert_close(r, (x * 2).half().amin(0).float())
    assert torch.equal(e, (x > 0).sum(0).int())


def test_constant_stage_converted_to_a_narrow_type():
    """`D_val = 33.333333333333336.to(tl.float16)`: a constant body was converted with .to() on a
    Python number (GPU fuzz seed 910628)."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    D = tc.compute((N,), lambda i: 100.0 / 3.0, name="D", dtype="float16")
    E = tc.compute((N,), lambda i: X[i] + 1.0, name="E")
    src = tc.lower(tc.create_schedule([D, E]), target="cuda").source()
    assert "tl.full((), 33.333333333333336, tl.float32).to(tl.float16)" in src
    d, e = tc.build(tc.create_schedule([D, E]), [X, D, E])(torch.randn(5))
    assert torch.equal(d, torch.full((5,), 100.0 / 3.0).half())


@pytest.mark.slow
def test_cuda_form_of_gpu_only_failures_compiles_for_sm90():
    """The H200 fuzz run found kernels the interpreter ran but Triton's GPU compiler refused or
    aborted on (seeds in tests/fuzz/gpu_cases). Triton compiles for sm_90 without a GPU, in a process
    without TRITON_INTERPRET: scripts/fuzz_compile.py."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cases = sorted((root / "tests" / "fuzz" / "gpu_cases").glob("seed*.py"))
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    args = [sys.executable, str(root / "scripts" / "fuzz_compile.py")] + [a for c in cases for a in ("--file", str(c))]
    run = subprocess.run(args, capture_output=True, text=True, cwd=root, env=env, timeout=600)
    assert run.returncode == 0 and run.stdout.count("OK ") >= len(cases), run.stdout + run.stderr


def test_dot_operand_computed_in_the_kernel_is_zero_past_the_reduction_end():
    """Fuzz seed 197481165: P = log(A) computed at C.ko and fed to tl.dot. Past the end of k (K=5 in a
    32-wide tile) A's masked load gives 0, log(0) = -inf, and the other operand's 0 times -inf is NaN,
    which tl.dot summed into every valid element. Operands not loaded with k's mask are zeroed there."""
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((K, M), "float32", name="A")
    W = tc.placeholder((K, N), "bfloat16", name="W")
    P = tc.compute((K, M), lambda i, j: tc.log(A[i, j]), name="P")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(W[k, j] * P[k, i], axis=k, acc_dtype="float32"), name="C")
    s = tc.create_schedule([C])
    i, j = C.axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 32)
    ko, ki = s[C].split(C.reduce_axis[0], 32)
    s[P].compute_at(s[C], ko)
    assert "tl.dot(" in tc.lower(s).source()
    kernel = tc.build(s, [A, W, C])
    a = torch.rand(5, 37) + 0.5
    w = torch.randn(5, 3).to(torch.bfloat16)
    got = kernel(a, w)
    want = (w.float().T @ torch.log(a)).T
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_cast_of_a_specialized_size_expression():
    """Fuzz seed 6003365: with N specialized, (N + 0.25).astype("float16") was written `(32 + 0.25).to(...)`,
    a Python float, which has no `.to`. A constant expression is made a 0-d tensor first."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    E = tc.compute((M, N), lambda i, j: (N + 0.25).astype("float16") * X[i, j], name="E", dtype="float16")
    K = tc.compute((M, N), lambda i, j: (N * 2).astype("bfloat16") + X[i, j], name="K")  # int -> bf16: via f32
    s = tc.create_schedule([E, K])
    kernel = tc.build(s, [X, E, K], specialize={"N": 32})
    assert "tl.full((), 32 + 0.25, tl.float32)" in kernel.source
    x = torch.randn(6, 32)
    e, k = kernel(x)
    _close(e.float(), (torch.tensor(32.25).half().float() * x).half().float())
    _close(k, x + 64.0)


def test_a_descriptor_of_a_buffer_between_kernels_that_tma_cannot_read():
    """Fuzz seed 6001274: a cache_read with tma=True of C, a (33, 5) bool buffer between two kernels: its
    5-byte rows are no multiple of 16, and Triton's TensorDescriptor asserted. Only the inputs were checked;
    now every tensor a descriptor reads is, and the call reads C by pointers. (A bool tensor is never read
    through a descriptor: Triton's int1 has no bytes.) Here C is float16: 10-byte rows at N=5, 32 at 16."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    C = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="C", dtype="float16")
    k = tc.reduce_axis(N, name="k")
    D = tc.compute((M,), lambda i: tc.sum(C[i, k].astype("float32") - X[i, k], axis=k), name="D")
    s = tc.create_schedule([D])
    ro, ri = s[D].split(D.axis[0], 16)
    ko, ki = s[D].split(k, 16)
    s[D].reorder(ro, ko, ri, ki)
    s[D].bind(ro, "program_id.0")
    s.cache_read(C, "shared", readers=[D], tma=True).compute_at(s[D], ko)
    kernel = tc.build(s, [X, D])
    assert "C_desc_16x16.load(" in kernel.source
    for n in (5, 16):  # 5 float16 columns: pointers; 16: TMA's rules hold
        x = torch.randn(33, n)
        _close(kernel(x), ((x * 2.0).half().float() - x).sum(1))
    used = [any(launch.descs for launch in call[3]) for call in kernel._calls.values()]
    assert used == [False, True]


def test_a_large_three_dimensional_tile_is_refused_not_compiled_for_minutes():
    """Fuzz seed 445829361 (the sm_90 compile campaign): a row max with its row tile split again by 1024,
    which makes a 1024 x 64 x 4 reduction operand (262144 elements, 16 warps by default). Triton 3.6
    compiled it for 72 s on a CPU (512 x 64 x 4: 15 s; 256 x 64 x 4: 6 s), past the campaign's 60 s. A
    tile of three or more dimensions past 2**17 elements is a LoweringError now, with the fix."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    k = tc.reduce_axis(N, name="k")
    mx = tc.compute((M,), lambda r: tc.max(X[r, k], axis=k), name="mx")

    def sched(outer):
        s = tc.create_schedule([mx])
        ro, ri = s[mx].split(mx.axis[0], 64)
        ko, ki = s[mx].split(k, 4)
        s[mx].reorder(ro, ko, ri, ki)
        s[mx].split(ro, outer)
        return s
    with pytest.raises(tc.LoweringError, match=r"mx works on a 3-d tile of 262144 elements .*Triton compiles "
                                               r"for minutes; use smaller split factors"):
        tc.lower(sched(1024))
    kernel = tc.build(sched(32), [X, mx])  # 32 x 64 x 4: builds, and matches torch
    x = torch.randn(70, 9).bfloat16()
    x[3, 2] = float("nan")
    torch.testing.assert_close(kernel(x).float(), x.float().amax(1), equal_nan=True)


def test_not_of_a_specialized_size_comparison_is_logical():
    """Fuzz seed 7100058: ~(M == 0) with M specialized to 1 became `~(1 == 0)` in the kernel, a Python
    bool, whose ~ is bitwise (-1), so C = ~(M == 0) * 2.0 gave -2.0 instead of 2.0. ~ of a bool is logical
    not, on tensors and Python bools alike."""
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "int32", name="X")
    C = tc.compute((M, M), lambda i, j: ~M.eq(0) * 2.0 + (~(X[i] > 0)).astype("float32"), name="C")
    x = torch.tensor([3, -1, 0], dtype=torch.int32)
    want = 2.0 + (x <= 0).float()[:, None].expand(3, 3)
    for spec in (None, {"M": 3}):
        _close(tc.build(tc.create_schedule(C), [X, C], specialize=spec)(x), want)


def test_float_floor_division_and_remainder_are_torchs_where_the_quotient_rounds_to_a_whole_number():
    """Float `//` was tl.floor(a / b) and `%` was a - b * that: where a / b rounds up to a whole number
    (1.0 / 0.1 is 10.000000149 in float32, but 0.1 goes into 1.0 only 9 times) both were off by one
    quotient, silently (found by a newcomer's walk-through; random normal data never hits it). torch
    (and Python) use C's fmod, which is exact, and correct its sign; so does tilec now, with the
    same handling of zero divisors, infinities and signed zeros."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    D = tc.placeholder((M, N), "float32", name="D")
    Q = tc.compute((M, N), lambda i, j: X[i, j] // D[i, j], name="Q")
    R = tc.compute((M, N), lambda i, j: X[i, j] % D[i, j], name="R")
    Qc = tc.compute((M, N), lambda i, j: X[i, j] // 0.1, name="Qc")
    Rc = tc.compute((M, N), lambda i, j: X[i, j] % -0.3, name="Rc")
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 2.0, 0.7, 3.0, 5.0, inf, -7.5, 7.5, -0.0, 0.0, 3.0, -3.0, nan, 2.5]])
    d = torch.tensor([[0.1, 0.2, 0.1, 0.3, 0.5, 2.0, inf, -inf, 2.0, -2.0, 0.0, 0.0, 1.0, -0.7]])
    torch.manual_seed(0)
    xr = torch.cat([x, torch.randn(3, x.shape[1]) * 10])
    dr = torch.cat([d, torch.randn(3, d.shape[1]).abs() * 0.3 + 0.05])
    for T, want in ((Q, xr // dr), (R, xr % dr)):
        got = tc.build(tc.create_schedule(T), [X, D, T])(xr, dr)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(torch.signbit(got), torch.signbit(want)) or T is R  # signed zeros of //
    for T, want in ((Qc, xr // 0.1), (Rc, xr % -0.3)):
        got = tc.build(tc.create_schedule(T), [X, T])(xr)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    # float16 in, float32 arithmetic, rounded once at the store (as tilec computes low-precision floats)
    H = tc.placeholder((M, N), "float16", name="H")
    Qh = tc.compute((M, N), lambda i, j: H[i, j] // 0.1, name="Qh")
    h = torch.tensor([[1.0, 2.0, 0.5, 3.0, -1.0, 0.3]], dtype=torch.float16)
    got = tc.build(tc.create_schedule(Qh), [H, Qh])(h)
    assert got.tolist() == (h.float() // 0.1).half().tolist() == [[9.0, 19.0, 4.0, 29.0, -10.0, 3.0]]


def test_float32_to_bfloat16_and_float8_round_as_torch_does_in_the_interpreter_too():
    """Triton's interpreter rounded float32 -> float8_e4m3fn wrongly at ties (100 -> 104, torch 96), for
    subnormals (0.001 -> 0), past the largest value (500 -> 256, torch saturates at 448) and near powers of
    two (31.4 -> 16), and float32 -> bfloat16 toward zero: every fp8 output of a CPU run was silently off by
    up to 2x (found by a newcomer's walk-through). Conversions are torch's there now; on the GPU they are
    the hardware's round to nearest even (checked there by the examples' fp8 tests)."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    Q = tc.compute((N,), lambda i: X[i] * 1.0, name="Q", dtype="float8_e4m3fn")
    E = tc.compute((N,), lambda i: X[i] * 1.0, name="E", dtype="float8_e5m2")
    B = tc.compute((N,), lambda i: X[i] * 1.0, name="B", dtype="bfloat16")
    C = tc.compute((N,), lambda i: X[i].astype("float8_e4m3fn").astype("float32") * 2.0, name="C")
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([100.0, 200.0, 400.0, 500.0, 1000.0, -500.0, 0.001, 31.4, 0.3, -0.0, 1e-9, 3.0e4, 7e4, inf,
                      -inf, nan, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -9])
    x = torch.cat([x, torch.randn(200) * 30, torch.randn(60) * 1e-3])
    saturated = x.clamp(-448.0, 448.0)  # NaN stays NaN
    if _torch_at_least(2, 12):  # the reference is torch's own conversion there
        e4m3 = torch.float8_e4m3fn
        assert torch.equal(x.to(e4m3).view(torch.uint8), saturated.to(e4m3).view(torch.uint8))
    for T in (Q, E, B):
        got = tc.build(tc.create_schedule(T), [X, T])(x)
        want = (saturated if T is Q else x).to(got.dtype)
        assert torch.equal(got.view(torch.uint8 if got.element_size() == 1 else torch.int16)[~x.isnan()],
                           want.view(torch.uint8 if want.element_size() == 1 else torch.int16)[~x.isnan()]), T.name
        assert got.float()[x.isnan()].isnan().all()
    got = tc.build(tc.create_schedule(C), [X, C])(x)
    torch.testing.assert_close(got, saturated.to(torch.float8_e4m3fn).float() * 2.0, rtol=0, atol=0, equal_nan=True)


def _torch_at_least(major: int, minor: int) -> bool:
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (major, minor)


def test_float32_to_float8_e5m2_past_its_largest_value_is_infinite_in_the_gpu_form_too():
    """sm_90's float32 -> float8_e5m2 conversion (Triton's cvt.rn.satfinite) saturates values past 57344, and
    infinities, to +-57344, where torch rounds them to +-inf (from 61440, the tie that goes to even). The GPU
    form converts through the helper `_to_e5m2`, which writes the infinities itself; the interpreter form's
    conversion is torch's already. Here: the GPU form calls it (the interpreter form does not), and the
    helper, run in the interpreter, gives torch's bits for every input (on the GPU the examples and the
    interpreter-too test above check it against torch)."""
    from tilec.lower.triton_printer import HELPERS, TO_E5M2
    from tilec.runtime.kernel import load_module

    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    E = tc.compute((N,), lambda i: X[i] * 2.0, name="E", dtype="float8_e5m2")
    Q = tc.compute((N,), lambda i: X[i] * 2.0, name="Q", dtype="float8_e4m3fn")
    gpu, cpu = tc.lower(tc.create_schedule(E)).source(), tc.lower(tc.create_schedule(E), target="interpreter").source()
    assert f"def {TO_E5M2}(x):" in gpu and f"E_val = {TO_E5M2}(" in gpu
    assert TO_E5M2 not in cpu and ".to(tl.float8e5)" in cpu
    assert TO_E5M2 not in tc.lower(tc.create_schedule(Q)).source()  # e4m3fn saturates in torch too

    source = ("import triton\nimport triton.language as tl\n\n\n" + HELPERS[TO_E5M2] + "\n\n@triton.jit\n"
              "def k(X, Y, n, BLOCK: tl.constexpr):\n    i = tl.arange(0, BLOCK)\n"
              "    tl.store(Y + i, _to_e5m2(tl.load(X + i, mask=i < n)), mask=i < n)\n")
    mod = load_module(source, "e5m2_helper")
    inf = float("inf")
    x = torch.tensor([0.0, -0.0, 1.5, 3.0e-6, 1e-9, 57344.0, 60000.0, 61439.0, 61440.0, 61441.0, 7e4, 1e6, -7e4,
                      -61440.0, inf, -inf, float("nan")])
    x = torch.cat([x, torch.randn(100) * 3e4, torch.randn(20) * 1e-5])
    y = torch.empty(x.shape, dtype=torch.float8_e5m2)
    mod.k[(1,)](x, y, x.numel(), BLOCK=256)
    want = x.to(torch.float8_e5m2)
    assert torch.equal(y.view(torch.uint8)[~x.isnan()], want.view(torch.uint8)[~x.isnan()])
    assert y.float()[x.isnan()].isnan().all()
    assert want[8].float().item() == inf and want[7].float().item() == 57344.0  # the threshold is torch's


def test_an_int32_sum_past_int32_wraps_as_torchs_does():
    # fuzz seed 24903880: Triton's interpreter summed a tile of int32 values in int64 and refused the 0-d
    # result past int32 (an InterpreterError, counted as internal); the GPU and torch wrap around
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    k = tc.reduce_axis(M, name="k")
    E = tc.compute((M,), lambda i: tc.sum(X[i].astype("int32") + k * 0, axis=k), name="E")
    s = tc.create_schedule(E)
    s[E].split(E.reduce_axis[0], 128)
    x = torch.tensor([2.0e9, -2.1e9, 1.5e9])
    got = tc.build(s, [X, E])(x)
    want = x.to(torch.int32)[:, None].expand(3, 3).sum(1, dtype=torch.int32)
    assert got.dtype == torch.int32 and torch.equal(got, want)


class _Wrapped:
    """A torch reference for narrow integers: int64 values, each operation's result wrapped to `dtype` as torch's
    result of that type is (torch itself computes almost nothing on uint16)."""

    def __init__(self, x, dtype):
        self.x, self.dtype = x, dtype

    def _w(self, x):
        return _Wrapped(x.to(getattr(torch, self.dtype)).to(torch.int64), self.dtype)

    def __add__(self, o): return self._w(self.x + o.x)
    def __mul__(self, o): return self._w(self.x * o)
    def __floordiv__(self, o): return self._w(self.x // o)
    def __neg__(self): return self._w(-self.x)
    def __rshift__(self, o): return self._w(self.x >> o)
    def __lshift__(self, o): return self._w(self.x << o)
    def __invert__(self): return self._w(~self.x)
    def __pow__(self, o): return self._w(self.x ** o)
    def __gt__(self, o): return _Wrapped(self.x > o.x, "bool")
    def astype(self, d): return _Wrapped(self.x.to(getattr(torch, d)), d)


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "uint16"])
@pytest.mark.parametrize("name,body", [
    ("sum then floor-divide", lambda a, mx: (a + a) // 3),
    ("product then compare", lambda a, mx: ((a * 3) > a).astype("int32")),
    ("negate then shift", lambda a, mx: (-a) >> 1),
    ("shift left then floor-divide", lambda a, mx: (a << 3) // 5),
    ("invert then max", lambda a, mx: mx(~a, a)),
    ("power then to float", lambda a, mx: (a ** 3).astype("float32")),
])
def test_narrow_int_arithmetic_wraps_at_each_operation(dtype, name, body):
    """Issue 26: int8/int16/uint8/uint16 compute in int32, and tilec wrapped the value to its type only where it
    was stored: (a + a) // 3 of int8 a = 100 gave 66 where torch's a + a is already -56 (an int8), so -19. An
    operation whose result can leave the type now wraps it, as torch's result of that type does."""
    N = tc.size_vars("N")
    A = tc.placeholder((N,), dtype, name="A")
    Y = tc.compute((N,), lambda i: body(A[i], tc.maximum), name="Y")
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[0], 16)
    info = torch.iinfo(getattr(torch, dtype))
    a = torch.randint(info.min, info.max + 1, (57,), dtype=torch.int64)
    a[:4] = torch.tensor([info.max, info.min, info.max // 2 + 3, 1])
    out = tc.build(s, [A, Y])(a.to(getattr(torch, dtype)))
    ref = body(_Wrapped(a, dtype), lambda x, y: _Wrapped(torch.maximum(x.x, y.x), dtype))
    assert str(out.dtype) == f"torch.{ref.dtype}", (out.dtype, ref.dtype)
    got = out if out.is_floating_point() else out.to(torch.int64)
    want = ref.x.float() if out.is_floating_point() else ref.x.to(torch.int64)
    assert torch.equal(got, want), f"{name}: {got[:4].tolist()} != {want[:4].tolist()}"


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_matrix_product_keeps_nan(dtype):
    """Issue 26 (found by the real-kernel suite's fp8 GEMM on NaN inputs): Triton 3.6's interpreter converts a
    float8 tl.dot operand to float16 by its own bit surgery, which reads float8_e4m3fn's NaN byte 0x7F as 480,
    so a NaN in A gave a finite C (482 here) where torch's is NaN. tilec's conversion fix covers that path too."""
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), dtype, name="A")
    B = tc.placeholder((K, N), dtype, name="B")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="C", dtype="float32")
    s = tc.create_schedule(C)
    i, j = C.axis
    s[C].tile(i, j, 16, 16)
    s[C].split(k, 16)
    a = torch.randn(20, 19).to(getattr(torch, dtype))
    b = torch.randn(19, 18).to(getattr(torch, dtype))
    a[0, 1] = float("nan")
    a[3, 2] = float("inf")
    ref = a.float() @ b.float()
    out = tc.build(s, [A, B, C])(a, b)
    assert torch.equal(out.isnan(), ref.isnan()) and torch.equal(out.isinf(), ref.isinf())
    fin = ref.isfinite()
    assert torch.allclose(out[fin], ref[fin], rtol=1e-5, atol=1e-5)


def test_compute_extent_product_of_two_sizes_is_refused_with_the_reason():
    """Issue 26 (found writing the real-kernel suite): a compute of shape (HKV * G,) raised tilec.poly.model.NotAffine,
    a bare Exception, from the isl model at build. isl reads affine extents only: a compute's or a reduce axis's
    extent that multiplies two sizes is an ArgumentError at definition that says so (a placeholder may have one:
    its shape is only read)."""
    HKV, G = tc.size_vars("HKV G")
    X = tc.placeholder((HKV * G,), "float32", name="X")  # accepted: G is read from it as the unknown factor
    with pytest.raises(tc.ArgumentError, match=r"compute 'Y': dimension 0: the extent \(HKV \* G\) multiplies two sizes"):
        tc.compute((HKV * G,), lambda h: X[h], name="Y")
    with pytest.raises(tc.ArgumentError, match=r"reduce_axis 'k': the extent \(HKV \* G\) multiplies two sizes"):
        tc.reduce_axis(HKV * G, name="k")
    with pytest.raises(tc.ArgumentError, match="divides by a size"):
        tc.compute((HKV // G,), lambda h: X[h], name="Z")


def test_compute_at_a_tile_axis_whose_loop_runs_once_at_the_call():
    """A reader placed at a tile axis (Y.ti: the loop around it, Y.to) was refused at the call where that loop runs
    once (T <= 16 here: `to` is then a single leaf, and the place was taken as the kernel's top, outside `to`):
    "Z's axis t follows Y's loop to, which runs inside the place chosen" (found by tests/test_scan.py's sweep)."""
    B, T = tc.size_vars("B T")
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: X[b, t] + 1.0, name="Y")
    Z = tc.compute((B, T), lambda b, t: Y[b, t] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    to, ti = s[Y].split(Y.axis[1], 16)
    s[Y].bind(Y.axis[0], "program_id.0")
    s[Z].compute_at(s[Y], ti)
    k = tc.build(s, [X, Z])
    for shape in ((3, 37), (3, 16), (2, 1)):
        x = torch.randn(shape)
        assert torch.allclose(k(x), (x + 1) * 2)
