"""The compute language end to end: each construct built with the default schedule (or a small one)
and compared with PyTorch on fresh random inputs, at sizes that do not divide the tiles."""

from __future__ import annotations

import pytest
import torch

import tilec as tc


def _rel(out, ref):
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _run(outs, args, inputs, config=None):
    s = tc.create_schedule(outs)
    return tc.build(s, args, config=config)(*inputs)


M, N, K = tc.size_vars("M N K")


@pytest.mark.parametrize("shape", [(37, 50), (1, 1), (64, 64), (3, 300)])
def test_elementwise_math_calls(shape):
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.placeholder((M, N), "float32", name="Y")
    fns = {
        "exp": (lambda x, y: tc.exp(x) - y, lambda x, y: torch.exp(x) - y),
        "log": (lambda x, y: tc.log(tc.abs(x) + 1.0), lambda x, y: torch.log(x.abs() + 1)),
        "sqrt": (lambda x, y: tc.sqrt(tc.abs(x)) * y, lambda x, y: x.abs().sqrt() * y),
        "rsqrt": (lambda x, y: tc.rsqrt(tc.abs(x) + 0.5), lambda x, y: torch.rsqrt(x.abs() + 0.5)),
        "sigmoid": (lambda x, y: tc.sigmoid(x), lambda x, y: torch.sigmoid(x)),
        "silu": (lambda x, y: tc.silu(x + y), lambda x, y: torch.nn.functional.silu(x + y)),
        "tanh": (lambda x, y: tc.tanh(x) / (y * y + 1.0), lambda x, y: torch.tanh(x) / (y * y + 1)),
        "maxmin": (lambda x, y: tc.maximum(x, y) - tc.minimum(x, 0.5), lambda x, y: torch.maximum(x, y) - x.clamp(max=0.5)),
        "where": (lambda x, y: tc.where(x > y, x * 2.0, -y), lambda x, y: torch.where(x > y, x * 2, -y)),
        "neg_mod": (lambda x, y: -(x - y) * 3 + 1, lambda x, y: -(x - y) * 3 + 1),
    }
    torch.manual_seed(sum(shape))
    x, y = torch.randn(shape), torch.randn(shape)
    for name, (f, ref) in fns.items():
        Z = tc.compute((M, N), lambda i, j, f=f: f(X[i, j], Y[i, j]), name=f"Z_{name}")
        out = _run(Z, [X, Y, Z], [x, y])
        # elementwise, not norm-wise: exp(x) - y may cancel to a tiny value at a 1x1 shape
        assert torch.allclose(out, ref(x, y), rtol=1e-5, atol=1e-6), name


def test_comparisons_and_bool_logic():
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: tc.where((X[i] > 0.0) & (X[i] < 1.0) | X[i].eq(-1.0), 1.0, 0.0), name="Z")
    x = torch.randn(1000)
    x[:10] = -1.0
    ref = (((x > 0) & (x < 1)) | (x == -1)).float()
    assert torch.equal(_run(Z, [X, Z], [x]), ref)


def test_broadcast_by_index_and_transpose():
    X = tc.placeholder((M, N), "float32", name="X")
    rb = tc.placeholder((M,), "float32", name="rb")
    cb = tc.placeholder((N,), "float32", name="cb")
    Z = tc.compute((N, M), lambda c, r: X[r, c] * rb[r] + cb[c], name="Z")
    x, r, c = torch.randn(45, 70), torch.randn(45), torch.randn(70)
    out = _run(Z, [X, rb, cb, Z], [x, r, c])
    assert _rel(out, (x * r[:, None] + c[None, :]).t()) < 1e-6


def test_index_arithmetic_reads_shifted_elements():
    """A stencil-style read (i + 1) is masked at the tensor's bounds."""
    X = tc.placeholder((N,), "float32", name="X")
    Z = tc.compute((N,), lambda i: X[i] + tc.where(i < N - 1, X[i + 1], 0.0), name="Z")
    x = torch.randn(1500)
    ref = x + torch.cat([x[1:], torch.zeros(1)])
    assert _rel(_run(Z, [X, Z], [x]), ref) < 1e-6


def test_several_reduce_axes():
    X = tc.placeholder((M, N, K), "float32", name="X")
    a = tc.reduce_axis(N, name="a")
    b = tc.reduce_axis(K, name="b")
    S = tc.compute((M,), lambda m: tc.sum(X[m, a, b] * 2.0, axis=[a, b]), name="S")
    x = torch.randn(5, 7, 90)
    assert _rel(_run(S, [X, S], [x]), 2 * x.sum((1, 2))) < 1e-5


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_reductions_of_negative_values(op):
    """Masked lanes must not win: every value negative (max) / positive (min), size not dividing."""
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    R = tc.compute((M,), lambda r: getattr(tc, op)(X[r, c], axis=c), name="R")
    x = torch.rand(33, 77) + 0.5
    x = -x if op == "max" else x
    ref = x.max(1).values if op == "max" else x.min(1).values
    assert torch.equal(_run(R, [X, R], [x]), ref)


def test_integer_compute_and_sum():
    X = tc.placeholder((M, N), "int32", name="X")
    c = tc.reduce_axis(N, name="c")
    S = tc.compute((M,), lambda r: tc.sum(X[r, c] * 3 + 1, axis=c), name="S")
    x = torch.randint(-100, 100, (9, 70), dtype=torch.int32)
    out = _run(S, [X, S], [x])
    assert out.dtype == torch.int32 and torch.equal(out, (x * 3 + 1).sum(1, dtype=torch.int32))


def test_division_of_integers_is_true_division():
    X = tc.placeholder((M,), "int32", name="X")
    Z = tc.compute((M,), lambda i: X[i] / 4, name="Z")
    x = torch.randint(-50, 50, (100,), dtype=torch.int32)
    out = _run(Z, [X, Z], [x])
    assert out.dtype == torch.float32 and torch.equal(out, x / 4)


def test_astype_rounds_inside_an_expression():
    """x.astype('float16') is a rounding point even inside a float32 expression."""
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i].astype("float16") - X[i], name="Z")
    x = torch.randn(500)
    out = _run(Z, [X, Z], [x])
    assert torch.equal(out, x.half().float() - x) and out.abs().max() > 0


def test_dtype_defaults_follow_torch_promotion():
    X = tc.placeholder((M,), "bfloat16", name="X")
    F = tc.placeholder((M,), "float32", name="F")
    assert tc.compute((M,), lambda i: X[i] * 2.0, name="a").dtype == "bfloat16"
    assert tc.compute((M,), lambda i: tc.silu(X[i]), name="b").dtype == "bfloat16"
    assert tc.compute((M,), lambda i: X[i] + F[i], name="c").dtype == "float32"
    k = tc.reduce_axis(M, name="k")
    assert tc.compute((1,), lambda z: tc.sum(X[k], axis=k), name="d").dtype == "float32"


def test_multiple_outputs_in_one_kernel():
    X = tc.placeholder((M, N), "float32", name="X")
    S = tc.compute((M, N), lambda i, j: tc.sigmoid(X[i, j]), name="S")
    T = tc.compute((M, N), lambda i, j: S[i, j] * X[i, j], name="T")
    s = tc.create_schedule([S, T])
    i, j = T.axis
    io, jo, ii, ji = s[T].tile(i, j, 16, 32)
    s[T].bind(s[T].fuse(io, jo), "program_id.0")
    si, sj = S.axis
    s[S].compute_at(s[T], s[T].leaves[0])
    k = tc.build(s, [X, S, T])
    x = torch.randn(40, 50)
    out_s, out_t = k(x)
    assert torch.allclose(out_s, torch.sigmoid(x)) and torch.allclose(out_t, torch.sigmoid(x) * x)
    assert len(k.program.kernels) == 1


def test_intermediate_buffer_between_kernels():
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    Y = tc.compute((M, N), lambda r, col: X[r, col] - mx[r], name="Y")
    k = tc.build(tc.create_schedule(Y), [X, Y])
    assert [kk.name for kk in k.program.kernels] == ["mx_kernel", "Y_kernel"] and k.program.buffers == ["mx"]
    x = torch.randn(20, 130)
    assert torch.allclose(k(x), x - x.max(1, keepdim=True).values)


def test_default_schedule_3d_and_scalar_output():
    B = tc.size_vars("B")
    X = tc.placeholder((B, M, N), "float32", name="X")
    Z = tc.compute((B, M, N), lambda b, i, j: X[b, i, j] * 2.0, name="Z")
    x = torch.randn(3, 5, 70)
    assert torch.equal(_run(Z, [X, Z], [x]), x * 2)
    r = tc.reduce_axis(N, name="r")
    V = tc.placeholder((N,), "float32", name="V")
    S = tc.compute((1,), lambda z: tc.sum(V[r], axis=r), name="S")
    v = torch.randn(3000)
    assert _rel(_run(S, [V, S], [v]), v.sum().reshape(1)) < 1e-5


def test_constant_shapes_drop_masks_when_tiles_divide():
    X = tc.placeholder((64, 128), "float32", name="X")
    Z = tc.compute((64, 128), lambda i, j: X[i, j] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    i, j = Z.axis
    io, jo, ii, ji = s[Z].tile(i, j, 16, 32)
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    src = tc.lower(s).source()
    assert "mask" not in src
    x = torch.randn(64, 128)
    assert torch.equal(tc.build(s, [X, Z])(x), x + 1)
    # and a constant size that does not divide keeps its mask
    X2 = tc.placeholder((60, 128), "float32", name="X2")
    Z2 = tc.compute((60, 128), lambda i, j: X2[i, j] + 1.0, name="Z2")
    s2 = tc.create_schedule(Z2)
    i, j = Z2.axis
    io, jo, ii, ji = s2[Z2].tile(i, j, 16, 32)
    src2 = tc.lower(s2).source()
    assert "mask_i = offs_i < 60" in src2 and "mask_j" not in src2


def test_unroll_and_serial_spatial_loops():
    X = tc.placeholder((M, 8), "float32", name="X")
    Z = tc.compute((M, 8), lambda i, j: X[i, j] * X[i, j], name="Z")
    s = tc.create_schedule(Z)
    i, j = Z.axis
    io, ii = s[Z].split(i, 16)
    jo, ji = s[Z].split(j, 2)
    s[Z].unroll(ji)
    s[Z].reorder(io, ii, jo, ji)
    src = tc.lower(s).source()
    assert "tl.static_range(2)" in src and "for io in tl.range" in src
    x = torch.randn(37, 8)
    assert torch.equal(tc.build(s, [X, Z])(x), x * x)


def test_compute_inline_keeps_rounding_point():
    X = tc.placeholder((M,), "float32", name="X")
    H = tc.compute((M,), lambda i: X[i] * 3.0, name="H", dtype="float16")
    Z = tc.compute((M,), lambda i: H[i] - X[i] * 3.0, name="Z")
    s = tc.create_schedule(Z)
    s[H].compute_inline()
    k = tc.build(s, [X, Z])
    x = torch.randn(700)
    assert len(k.program.kernels) == 1
    assert torch.equal(k(x), (x * 3).half().float() - x * 3)


def test_axis_longer_than_the_dimension_it_indexes_reads_zeros_past_the_end():
    Ms, Ns = tc.size_vars("Ms Ns")
    X = tc.placeholder((Ms,), "float32", name="X")
    Y = tc.placeholder((Ns,), "float32", name="Y")
    Z = tc.compute((Ns,), lambda i: X[i] + Y[i], name="Z")
    x, y = torch.randn(3), torch.randn(2000)
    ref = y.clone()
    ref[:3] += x
    assert torch.equal(_run(Z, [X, Y, Z], [x, y]), ref)


def test_equality_builds_a_comparison_and_sum_of_comparisons_counts():
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: tc.where(X[i] == 0.0, 1.0, X[i]), name="Z")
    x = torch.randn(300)
    x[::7] = 0.0
    assert torch.equal(_run(Z, [X, Z], [x]), torch.where(x == 0, 1.0, x))
    k = tc.reduce_axis(M, name="k")
    S = tc.compute((1,), lambda z: tc.sum(X[k] > 0.0, axis=k), name="S")
    out = _run(S, [X, S], [x])
    assert out.dtype == torch.int32 and out.item() == int((x > 0).sum())


def test_floor_division_and_modulo_follow_torch():
    A = tc.placeholder((M,), "int32", name="A")
    B = tc.compute((M,), lambda i: (A[i] // 3) * 100 + A[i] % 3, name="B")
    a = torch.arange(-50, 50, dtype=torch.int32)
    assert torch.equal(_run(B, [A, B], [a]), (a // 3) * 100 + a % 3)
    F = tc.placeholder((M,), "float32", name="F")
    G = tc.compute((M,), lambda i: (F[i] // 0.5) * 10.0 + F[i] % 0.7, name="G")
    f = torch.randn(500) * 5
    assert torch.allclose(_run(G, [F, G], [f]), (f // 0.5) * 10 + f % 0.7, atol=1e-4)


@pytest.mark.parametrize("const", [False, True])
def test_split_of_a_fused_axis_is_masked(const):
    shape = (37, 50) if const else tc.size_vars("Mf Nf")
    X = tc.placeholder(shape, "float32", name="X")
    Z = tc.compute(shape, lambda i, j: X[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    fo, fi = s[Z].split(s[Z].fuse(*Z.axis), 128)
    s[Z].bind(fo, "program_id.0")
    k = tc.build(s, [X, Z])
    assert "mask_i" in k.source
    x = torch.randn(37, 50)
    assert torch.equal(k(x), x * 2)


# --- integer bit operations (issue 23: `X[i] << 2` raised a raw TypeError naming the class Load) -------------

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]


_DEVICE = torch.empty(0).device  # the default device: cuda on the GPU host (tests/conftest.py)


def _ints(dtype: str, n: int, gen) -> torch.Tensor:
    info = torch.iinfo(getattr(torch, dtype))
    return torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64, device="cpu").to(_DEVICE, getattr(torch, dtype))


def _amounts(dtype: str, n: int, gen) -> torch.Tensor:
    """Shift amounts: in range, negative, at and past the bit width (torch's rules, not C's)."""
    lo = 0 if dtype == "uint8" else -70
    return torch.randint(lo, 70, (n,), generator=gen, dtype=torch.int64, device="cpu").to(_DEVICE, getattr(torch, dtype))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("n", [1, 37, 300])
def test_bit_operations_of_two_tensors_follow_torch(dtype, n):
    gen = torch.Generator().manual_seed(n)
    A = tc.placeholder((M,), dtype, name="A")
    B = tc.placeholder((M,), dtype, name="B")
    S = tc.placeholder((M,), dtype, name="S")
    ops = {"shl": lambda x, y, s: x << s, "shr": lambda x, y, s: x >> s, "xor": lambda x, y, s: x ^ y,
           "and": lambda x, y, s: x & y, "or": lambda x, y, s: x | y, "not": lambda x, y, s: ~x}
    a, b, s = _ints(dtype, n, gen), _ints(dtype, n, gen), _amounts(dtype, n, gen)
    if n >= 4:  # all bits set, one bit, none, and a value whose shift overflows the narrow types
        a[:4] = torch.tensor([-1 if dtype != "uint8" else 255, 1, 0, 100]).to(a.dtype)
    for name, op in ops.items():
        C = tc.compute((M,), lambda i, op=op: op(A[i], B[i], S[i]), name="C")
        assert C.dtype == dtype, (name, C.dtype)
        got = _run(C, [A, B, S, C], [a, b, s])
        assert torch.equal(got, op(a, b, s)), (name, dtype, got, op(a, b, s))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_by_constants_and_of_constants_follow_torch(dtype):
    """A Python int is weak (the tensor's type), and torch wraps it to that type before it shifts."""
    gen = torch.Generator().manual_seed(7)
    A = tc.placeholder((M,), dtype, name="A")
    a = _ints(dtype, 45, gen)
    small = _amounts(dtype, 45, gen) % 8
    cases = [lambda x: x << 3, lambda x: x >> 2, lambda x: x << 0, lambda x: x >> 0, lambda x: x ^ 5,
             lambda x: x << 70, lambda x: x >> 70, lambda x: x << -1, lambda x: x >> -3, lambda x: 3 ^ x,
             lambda x: x & 6, lambda x: 6 | x, lambda x: x ^ True]
    if dtype in ("int8", "int16", "uint8"):
        cases += [lambda x: x << 257, lambda x: x >> 263]  # wrapped to the type first: 257 is 1 in int8
    if dtype != "int64":
        cases += [lambda x: x << 31, lambda x: x >> 31, lambda x: x << 32]
    for fn in cases:
        C = tc.compute((M,), lambda i, fn=fn: fn(A[i]), name="C")
        assert torch.equal(_run(C, [A, C], [a]), fn(a)), (dtype, C.body)
    S = tc.placeholder((M,), dtype, name="S")
    for fn in (lambda s: 3 << s, lambda s: -8 >> s, lambda s: 100 >> s, lambda s: 1 << s):
        if dtype == "uint8" and fn(torch.tensor(0)).item() < 0:
            continue
        C = tc.compute((M,), lambda i, fn=fn: fn(S[i]), name="C")
        assert torch.equal(_run(C, [S, C], [small]), fn(small)), (dtype, C.body)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_of_values_that_left_the_narrow_type_follow_torch(dtype):
    """torch shifts values of the narrow type; tilec runs int8/int16/uint8 in int32 between rounding points,
    so an operand that left the type ((x << 2) >> 2, ~x of uint8, an overflowing amount) is wrapped back first
    (a review's find: these gave x, 220 for uint8 70, ... where torch gives the wrapped values)."""
    gen = torch.Generator().manual_seed(23)
    A = tc.placeholder((M,), dtype, name="A")
    B = tc.placeholder((M,), dtype, name="B")
    a, b = _ints(dtype, 300, gen), _amounts(dtype, 300, gen) % 12
    cases = [lambda x, y: (x << 2) >> 2, lambda x, y: (~x) >> 1, lambda x, y: (x + y) >> 1,
             lambda x, y: x >> (y * 20), lambda x, y: x << (y * 20), lambda x, y: ((x << y) >> y) << 1]
    for fn in cases:
        C = tc.compute((M,), lambda i, fn=fn: fn(A[i], B[i]), name="C")
        assert torch.equal(_run(C, [A, B, C], [a, b]), fn(a, b)), (dtype, C.body)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_by_python_ints_outside_int32_wrap_as_torch(dtype):
    """A Python int outside int32 takes the tensor's type in a shift and is wrapped to it, as torch does
    (a review's find: x >> (2**32 + 1) gave -1 / 0 in int64, torch shifts by 1 in x's type)."""
    gen = torch.Generator().manual_seed(5)
    A = tc.placeholder((M,), dtype, name="A")
    a = _ints(dtype, 45, gen)
    for fn in (lambda x: x >> (2**32 + 1), lambda x: x << 2**31, lambda x: (2**33 + 3) << (x & 3),
               lambda x: (2**40) >> (x & 7)):
        C = tc.compute((M,), lambda i, fn=fn: fn(A[i]), name="C")
        want = fn(a)
        assert C.dtype == str(want.dtype).removeprefix("torch."), (dtype, C.dtype, want.dtype)
        assert torch.equal(_run(C, [A, C], [a]), want), (dtype, C.body)


def test_bit_operations_promote_as_torch():
    gen = torch.Generator().manual_seed(3)
    I8 = tc.placeholder((M,), "int8", name="I8")
    I32 = tc.placeholder((M,), "int32", name="I32")
    I64 = tc.placeholder((M,), "int64", name="I64")
    Bo = tc.placeholder((M,), "bool", name="Bo")
    i8, i32 = _ints("int8", 40, gen), _ints("int32", 40, gen)
    i64 = torch.randint(0, 70, (40,), generator=gen, device="cpu").to(_DEVICE)
    bo = torch.rand(40, generator=gen, device="cpu").to(_DEVICE) < 0.5
    cases = {"int32": lambda x8, x32, x64, b: x32 << x8, "int64": lambda x8, x32, x64, b: x32 << x64,
             "int64 ": lambda x8, x32, x64, b: x8 >> x64, "int8": lambda x8, x32, x64, b: x8 ^ b,
             "bool": lambda x8, x32, x64, b: b ^ (x8 > 0), "bool ": lambda x8, x32, x64, b: ~b ^ True,
             "int64  ": lambda x8, x32, x64, b: b << 2, "int64   ": lambda x8, x32, x64, b: 1 << b}
    for want, fn in cases.items():
        C = tc.compute((M,), lambda i, fn=fn: fn(I8[i], I32[i], I64[i], Bo[i]), name="C")
        ref = fn(i8, i32, i64, bo)
        assert C.dtype == want.strip() == str(ref.dtype).removeprefix("torch."), (want, C.dtype, ref.dtype)
        assert torch.equal(_run(C, [I8, I32, I64, Bo, C], [i8, i32, i64, bo]), ref), want


def test_bit_operations_inside_a_reduction_and_an_index():
    A = tc.placeholder((M, N), "int32", name="A")
    k = tc.reduce_axis(N, name="k")
    C = tc.compute((M,), lambda i: tc.sum((A[i, k] >> 1) ^ (A[i, k] << 2), axis=k), name="C")
    a = torch.randint(-1000, 1000, (5, 33), dtype=torch.int32)
    assert torch.equal(_run(C, [A, C], [a]), ((a >> 1) ^ (a << 2)).sum(1, dtype=torch.int32))
    D = tc.compute((M, N), lambda i, j: A[i, j ^ 1], name="D")  # swap neighbours: index arithmetic
    ref = torch.zeros_like(a)
    for j in range(33):
        if j ^ 1 < 33:
            ref[:, j] = a[:, j ^ 1]
    assert torch.equal(_run(D, [A, D], [a]), ref)


@pytest.mark.parametrize("write,refused", [
    (lambda F, I, Bo: F << 2, r"^\(X\[i\] << 2\): << needs integer operands \(as in torch\), got float32 and int32; "
                              r"multiply by a power of two \(x \* 4.0\) to scale a float, or convert it first "
                              r"\(x.astype\('int32'\) << 2\)$"),
    (lambda F, I, Bo: I >> F, r"^\(I\[i\] >> X\[i\]\): >> needs integer operands \(as in torch\), got int32 and float32"),
    (lambda F, I, Bo: F ^ I, r"^\(X\[i\] \^ I\[i\]\): \^ needs bool or integer operands \(as in torch\), got float32 "
                             r"and int32; compare first"),
    (lambda F, I, Bo: 2.0 << I, r"<< needs integer operands \(as in torch\), got float32 and int32"),
    (lambda F, I, Bo: Bo << Bo, r"^\(B\[i\] << B\[i\]\): << needs integer operands \(as in torch, which has no shift "
                                r"of bools\), got bool and bool; convert one first \(x.astype\('int32'\)\)$"),
    (lambda F, I, Bo: Bo >> True, r"got bool and bool"),
    (lambda F, I, Bo: ~F, r"~ needs a bool or integer value"),
])
def test_bit_operations_on_floats_or_shifts_of_bools_are_refused(write, refused):
    F = tc.placeholder((M,), "float32", name="X")
    Ip = tc.placeholder((M,), "int32", name="I")
    Bp = tc.placeholder((M,), "bool", name="B")
    with pytest.raises(tc.ArgumentError, match=refused):
        tc.compute((M,), lambda i: write(F[i], Ip[i], Bp[i]), name="C")


@pytest.mark.parametrize("extent", [lambda: M >> 1, lambda: M & 7, lambda: M ^ 1, lambda: M << 1, lambda: ~M])
def test_bit_operations_in_an_extent_are_refused(extent):
    """isl reads affine extents only; `M & 7` as a shape escaped as an internal NotAffine exception."""
    A = tc.placeholder((M,), "int32", name="A")
    with pytest.raises(tc.ArgumentError, match=r"^compute 'D': dimension 0: an extent may use \+, -, \*, // and % of "
                                               r"sizes and ints, got .*; bit operations"):
        tc.compute((extent(),), lambda i: A[i] * 2, name="D")
