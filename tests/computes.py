"""The workloads the tests share, each written once: small functions that return fresh tensors (and,
for DESIGN.md's GEMM, its schedule). A test writes a GEMM or SwiGLU of its own only where its spelling is
the point (other names, dtypes, shapes, operand order or creation order, or text quoted elsewhere).

Every call makes new size variables and tensors, so a test's `tc.assume` or schedule never reaches
another test. Sizes are symbolic unless a parameter says otherwise; inputs are float32 unless a
`dtype` is given. `tests/tune_case.py` keeps its own copy of the tiny tuning GEMM: the CLI loads it by
path as a user's recipe file, and tests/test_tune_faults.py rewrites its text.
"""

from __future__ import annotations

import tilec as tc

# ---------------------------------------------------------------------------------------------
# GEMM, DESIGN.md section 1's GEMM + SiLU, and SwiGLU


def gemm(dtype="float32", *, in_dtype=None, K=None, names=None):
    """C[i, j] = sum over k of A[i, k] * W[k, j], accumulated in float32 and stored as `dtype`.

    A is (M, K), W is (K, N), both `in_dtype` (default: `dtype`); C is (M, N). `K` may be an int
    instead of a size variable. `names` renames any of "A", "W", "C". Returns (A, W, C).
    """
    n = {"A": "A", "W": "W", "C": "C", **(names or {})}
    in_dtype = in_dtype or dtype
    M, N, Kv = tc.size_vars("M N K")
    K = Kv if K is None else K
    A = tc.placeholder((M, K), in_dtype, name=n["A"])
    W = tc.placeholder((K, N), in_dtype, name=n["W"])
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k, acc_dtype="float32"),
                   name=n["C"], dtype=dtype)
    return A, W, C


def gemm_silu(dtype="float32", *, in_dtype=None, K=None, names=None):
    """DESIGN.md section 1's computation: `gemm`, then Y[i, j] = silu(C[i, j]) (in C's dtype).

    `names` renames any of "A", "W", "C", "Y". Returns (A, W, C, Y).
    """
    A, W, C = gemm(dtype, in_dtype=in_dtype, K=K, names=names)
    Y = tc.compute(C.shape, lambda i, j: tc.silu(C[i, j]), name=(names or {}).get("Y", "Y"))
    return A, W, C, Y


def swiglu(dtype="float32", *, in_dtype=None):
    """SwiGLU's gate and up projections and their product: G = X @ Wg and U = X @ Wu (each its own reduce
    axis, k and k2, accumulated in float32 and stored as `dtype`), then Y[i, j] = silu(G[i, j]) * U[i, j].

    X is (M, K), Wg and Wu are (K, N), all `in_dtype` (default: `dtype`). Returns (X, Wg, Wu, G, U, Y).
    """
    in_dtype = in_dtype or dtype
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, K), in_dtype, name="X")
    Wg = tc.placeholder((K, N), in_dtype, name="Wg")
    Wu = tc.placeholder((K, N), in_dtype, name="Wu")
    k = tc.reduce_axis(K, name="k")
    G = tc.compute((M, N), lambda i, j: tc.sum(X[i, k] * Wg[k, j], axis=k, acc_dtype="float32"), name="G",
                   dtype=dtype)
    k2 = tc.reduce_axis(K, name="k2")
    U = tc.compute((M, N), lambda i, j: tc.sum(X[i, k2] * Wu[k2, j], axis=k2, acc_dtype="float32"), name="U",
                   dtype=dtype)
    Y = tc.compute((M, N), lambda i, j: tc.silu(G[i, j]) * U[i, j], name="Y")
    return X, Wg, Wu, G, U, Y


def tile_gemm(s, C, bm=16, bn=16, bk=16, *, bind_jo=True):
    """DESIGN.md's GEMM loops on C: split i, j, k by bm, bn, bk (ints or knobs), reorder to
    (io, jo, ko, ii, ji, ki), bind io (and jo) to the grid. Returns the axes by name."""
    i, j = C.axis[:2]
    k = C.reduce_axis[-1]
    io, ii = s[C].split(i, bm)
    jo, ji = s[C].split(j, bn)
    ko, ki = s[C].split(k, bk)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    if bind_jo:
        s[C].bind(jo, "program_id.1")
    return dict(io=io, jo=jo, ko=ko, ii=ii, ji=ji, ki=ki)


def design_knobs():
    """DESIGN.md's tile knobs, with choices small enough for the interpreter: BM, BN, BK in [16, 32]."""
    return tc.knob("BM", [16, 32]), tc.knob("BN", [16, 32]), tc.knob("BK", [16, 32])


def design_schedule(dtype="float32", *, tiles=None, stages="knob", place_y=True, names=None):
    """DESIGN.md section 1's GEMM + SiLU schedule (tile sizes small enough for the interpreter).

    C tiled by `tile_gemm` (io, jo on the grid); A and W cached in shared memory at C.ko; C's
    accumulator in registers at C.jo; ko pipelined; Y = silu(C) computed at C.jo.
    `tiles`: None for `design_knobs()`, or (bm, bn, bk) ints or knobs. `stages`: "knob" for the knob
    stages in [2, 3], an int or a knob, or None for no pipeline. `place_y=False` leaves Y in its own kernel.
    `names` as for `gemm_silu`. Returns (s, (A, W, C, Y), axes).
    """
    A, W, C, Y = gemm_silu(dtype, names=names)
    s = tc.create_schedule(Y)
    ax = tile_gemm(s, C, *(design_knobs() if tiles is None else tiles))
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ax["ko"])
    s.cache_read(W, "shared", readers=[C]).compute_at(s[C], ax["ko"])
    s.cache_write(C, "local").compute_at(s[C], ax["jo"])
    if stages is not None:
        s[C].pipeline(ax["ko"], stages=tc.knob("stages", [2, 3]) if isinstance(stages, str) else stages)
    if place_y:
        s[Y].compute_at(s[C], ax["jo"])
    return s, (A, W, C, Y), ax


# ---------------------------------------------------------------------------------------------
# other GEMM-shaped computations


def prologue_gemm(prologue):
    """P[i, kk] = prologue(A[i, kk]); C[i, j] = sum over r of P[i, r] * W[r, j] (float32).

    Returns (A, W, P, C); C's reduce axis is r.
    """
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    P = tc.compute((M, K), lambda i, kk: prologue(A[i, kk]), name="P")
    r = tc.reduce_axis(K, name="r")
    C = tc.compute((M, N), lambda i, j: tc.sum(P[i, r] * W[r, j], axis=r), name="C")
    return A, W, P, C


def gemm_relu_gemm():
    """A three-stage chain: C = A @ W; H = relu(C); O = H @ V (float32). Returns (A, W, V, C, H, O)."""
    M, N, K, L = tc.size_vars("M N K L")
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    V = tc.placeholder((N, L), "float32", name="V")
    k = tc.reduce_axis(K, name="k")
    n = tc.reduce_axis(N, name="n")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    H = tc.compute((M, N), lambda i, j: tc.maximum(C[i, j], 0.0), name="H")
    O = tc.compute((M, L), lambda i, ll: tc.sum(H[i, n] * V[n, ll], axis=n), name="O")
    return A, W, V, C, H, O


def two_reduce_axes():
    """C[i, j] = sum over (k1, k2) of A[i, k1, k2] * W[k1, k2, j]; Y = silu(C)."""
    M, N, K1, K2 = tc.size_vars("M N K1 K2")
    A = tc.placeholder((M, K1, K2), "float32", name="A")
    W = tc.placeholder((K1, K2, N), "float32", name="W")
    k1 = tc.reduce_axis(K1, name="k1")
    k2 = tc.reduce_axis(K2, name="k2")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k1, k2] * W[k1, k2, j], axis=[k1, k2]), name="C")
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y")
    return A, W, C, Y


# ---------------------------------------------------------------------------------------------
# row reductions


def row_reduce(op, name, body=None, dtype="float32"):
    """red[r] = op_c body(X[r, c]) over a symbolic (M, N) input; returns (M, N, X, c, red)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), dtype, name="X")
    c = tc.reduce_axis(N, name="c")
    body = body or (lambda x: x)
    red = tc.compute((M,), lambda r: op(body(X[r, c]), axis=c), name=name, dtype="float32")
    return M, N, X, c, red


def softmax():
    """Row softmax in three stages: mx = row max, den = sum of exp(X - mx), Y = exp(X - mx) / den.

    Returns (X, (c, c2), mx, den, Y).
    """
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    c2 = tc.reduce_axis(N, name="c2")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - mx[r]) / den[r], name="Y")
    return X, (c, c2), mx, den, Y


def rmsnorm(dtype="float32", eps=1e-6):
    """RMSNorm: ss[r] = sum of squares of row r (float32); Y = X * rsqrt(ss / N + eps) * w.

    Returns (X, w, c, ss, Y).
    """
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), dtype, name="X")
    w = tc.placeholder((N,), dtype, name="w")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c].astype("float32") * X[r, c], axis=c), name="ss",
                    dtype="float32")
    Y = tc.compute((M, N), lambda r, col: X[r, col] * tc.rsqrt(ss[r] / N + eps) * w[col], name="Y",
                   dtype=dtype)
    return X, w, c, ss, Y


def rowscale_fp8(dtype="float32"):
    """amax[r] = max_c |X[r, c]|; Q[r, c] = X[r, c] * 448 / amax[r] as float8_e4m3fn; S = amax / 448.

    Returns (X, c, amax, Q, S).
    """
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), dtype, name="X")
    c = tc.reduce_axis(N, name="c")
    amax = tc.compute((M,), lambda r: tc.max(tc.abs(X[r, c]), axis=c), name="amax", dtype="float32")
    Q = tc.compute((M, N), lambda r, col: tc.minimum(tc.maximum(X[r, col] * (448.0 / amax[r]), -448.0), 448.0),
                   name="Q", dtype="float8_e4m3fn")
    S = tc.compute((M,), lambda r: amax[r] / 448.0, name="S")
    return X, c, amax, Q, S


def blur(names=("blur_x", "blur_y")):
    """Halide's two-stage 3x3 blur, float32: (X, blur_x, blur_y), blur_x read by blur_y at rows y .. y + 2."""
    H, W = tc.size_vars("H W")
    X = tc.placeholder((H, W), "float32", name="X")
    bx = tc.compute((H, W - 2), lambda y, x: (X[y, x] + X[y, x + 1] + X[y, x + 2]) / 3.0, name=names[0])
    by = tc.compute((H - 2, W - 2), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3.0, name=names[1])
    return X, bx, by


def blur_reference(x):
    """(blur_x, blur_y) of `blur` in torch."""
    bx = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3.0
    return bx, (bx[:-2] + bx[1:-1] + bx[2:]) / 3.0
