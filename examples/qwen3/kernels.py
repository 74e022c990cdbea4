"""The tilec kernels of a Qwen3 decoder layer: one `make_<name>(dtype, ...)` per kernel, returning
(schedule, args), the `KERNELS` registry of them, and `op(name, dtype, **params)`, which builds each kernel
once and wraps it as a torch custom op (`tilec::qwen3_<name>_<dtype>...`).

The layer, as examples/qwen3/model.py calls these ops (T = B * S tokens, C hidden, H query heads, HKV
key/value heads, G = H // HKV, D head_dim, I intermediate):

    rmsnorm          x [T, C], w [C]                      -> y [T, C]      Qwen3RMSNorm: float32 statistics,
                                                                           x * rstd rounded to dtype, times w
    linear           x [T, C], W [N, C]                   -> y [T, N]      x @ W^T (W as nn.Linear stores it):
                                                                           the QKV projection, W = cat(Wq, Wk, Wv)
    qk_norm_rope     q [B, S, H, D], k [B, S, HKV, D],    -> q' [B, S, H, D], k' [B, HKV, S, D]
                     cos, sin [B, S, D], wq, wk [D]          per-head RMSNorm over D, then RoPE (rotate_half)
    kv_cache_write   k, v [B, HKV, S, D], start [1]       -> k_cache, v_cache [B, HKV, TMAX, D] updated in place
                                                             at positions start .. start + S - 1
    attention        q [B, S, HKV, G, D], k, v [B, HKV, N, D] -> o [B, S, HKV, G, D]
                                                             causal, bottom-right aligned (query i at N - S + i),
                                                             query head (hk, g) reads KV head hk; schedule
                                                             "prefill" (FlashAttention) or "decode" (split-KV)
    linear_residual  x [T, K], W [N, K], r [T, N]         -> r + x @ W^T   (o_proj, down_proj)
    gate_up_silu     x [T, C], Wg, Wu [I, C]              -> silu(x @ Wg^T) * (x @ Wu^T)

Every compute is generic in the model's dtype (`float32`, `bfloat16`, `float16`) and rounds where HF's
Qwen3 rounds (a projection's output to dtype before its residual add or SiLU; the attention's P to dtype
before P @ V, as FlashAttention does). All hand schedules follow suite/ and examples/ (GEMM tiles with
tl.dot in grouped order, FlashAttention's online softmax, flash-decoding's split-KV). The knobs are left at
their first choices, unless `use_plans(directory)` names tuned plans (tune.py writes them: each kernel tuned
for the shapes a recorded request called it with).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import torch

import tilec as tc

DTYPES = ("float32", "bfloat16", "float16")


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"qwen3 kernels: dtype must be one of {DTYPES}, got {dtype!r}")
    return dtype


# -- RMSNorm over the hidden size -------------------------------------------------------------------------------

def make_rmsnorm(dtype: str = "float32", eps: float = 1e-6):
    """Y[r, c] = dtype(X[r, c] * rstd[r]) * w[c], rstd = rsqrt(mean_c X^2 + eps) in float32 (Qwen3RMSNorm).

    Schedule: ROWS rows per program, the sum of squares computed at the program's rows (its own loop over
    column tiles), then Y's loop over the same columns (suite/rms_norm.py's fast schedule)."""
    _check_dtype(dtype)
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), dtype, name="X")
    w = tc.placeholder((N,), dtype, name="w")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c].astype("float32") * X[r, c], axis=c), name="ss",
                    dtype="float32")
    Y = tc.compute((M, N), lambda r, col: (X[r, col] * tc.rsqrt(ss[r] / N + eps)).astype(dtype) * w[col],
                   name="Y", dtype=dtype)
    s = tc.create_schedule(Y)
    r, col = Y.axis
    block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
    ro, ri = s[Y].split(r, tc.knob("ROWS", [4, 1, 2]))
    co, ci = s[Y].split(col, block)
    s[Y].reorder(ro, co, ri, ci)
    s[Y].bind(ro, "program_id.0")
    s[ss].split(c, block)
    s[ss].compute_at(s[Y], ro)
    s[Y].num_warps(tc.knob("warps", [4, 8]))
    return s, [X, w, Y]


# -- GEMMs against nn.Linear weights [out, in] ------------------------------------------------------------------

def _gemm_tiles(s, acc, knobs=("BM", "BN", "BK")):
    """The GEMM schedule of suite/matmul_leaky_relu.py on `acc` (axes i, j; reduce axis k): BM x BN tiles in
    grouped order on one grid axis, a pipelined loop over K in BK steps, operand tiles loaded per step.
    Returns the tiles' loop (where epilogues go)."""
    i, j = acc.axis
    (k,) = acc.reduce_axis
    io, ii = s[acc].split(i, tc.knob(knobs[0], [64, 128, 32, 16]))
    jo, ji = s[acc].split(j, tc.knob(knobs[1], [64, 128, 32]))
    ko, ki = s[acc].split(k, tc.knob(knobs[2], [32, 64, 16]))
    s[acc].reorder(io, jo, ko, ii, ji, ki)
    tiles = s[acc].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1, 4]))
    s[acc].bind(tiles, "program_id.0")
    s[acc].pipeline(ko, stages=tc.knob("stages", [3, 4, 2]))
    s[acc].num_warps(tc.knob("warps", [4, 8]))
    return tiles, ko


def _linear_compute(dtype, name="Y"):
    """Y[i, j] = sum_k X[i, k] * W[j, k] (float32 accumulator, rounded to dtype): F.linear without bias."""
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, K), dtype, name="X")
    W = tc.placeholder((N, K), dtype, name="W")  # nn.Linear's weight [out, in]: a transposed read
    k = tc.reduce_axis(K, name="k")
    Y = tc.compute((M, N), lambda i, j: tc.sum(X[i, k] * W[j, k], axis=k, acc_dtype="float32"), name=name,
                   dtype=dtype)
    return X, W, Y


def make_linear(dtype: str = "float32"):
    """Y = X @ W^T, W [N, K] as nn.Linear stores it (the fused QKV projection: W = cat(Wq, Wk, Wv)).

    Schedule: BM x BN tiles (grouped order), K in BK steps with tl.dot, the X and W tiles loaded per step."""
    _check_dtype(dtype)
    X, W, Y = _linear_compute(dtype)
    s = tc.create_schedule(Y)
    _, ko = _gemm_tiles(s, Y)
    s.cache_read(X, "shared", readers=[Y]).compute_at(s[Y], ko)
    s.cache_read(W, "shared", readers=[Y]).compute_at(s[Y], ko)
    return s, [X, W, Y]


def make_linear_residual(dtype: str = "float32"):
    """Out = R + dtype(X @ W^T): o_proj or down_proj with the decoder layer's residual add fused as the
    epilogue (HF rounds the projection to dtype, then adds the residual in dtype: so does this compute).

    Schedule: make_linear's tiles; the residual add runs on the accumulator tile before the store."""
    _check_dtype(dtype)
    X, W, Y = _linear_compute(dtype, name="proj")
    M, N = Y.shape
    R = tc.placeholder((M, N), dtype, name="R")
    Out = tc.compute((M, N), lambda i, j: R[i, j] + Y[i, j], name="Out", dtype=dtype)
    s = tc.create_schedule(Out)
    tiles, ko = _gemm_tiles(s, Y)
    s.cache_read(X, "shared", readers=[Y]).compute_at(s[Y], ko)
    s.cache_read(W, "shared", readers=[Y]).compute_at(s[Y], ko)
    s.cache_write(Y, "local").compute_at(s[Y], tiles)  # the accumulator in registers
    s[Out].compute_at(s[Y], tiles)                     # the residual add as the epilogue
    return s, [X, W, R, Out]


def make_gate_up_silu(dtype: str = "float32"):
    """Y = dtype(silu(G)) * U with G = dtype(X @ Wg^T), U = dtype(X @ Wu^T): Qwen3MLP's
    act_fn(gate_proj(x)) * up_proj(x), both GEMMs in one kernel.

    Schedule: examples/swiglu.py's: Y's BM x BN tiles (grouped order), G and U computed at the tile, U's loop
    over K run inside G's (`compute_with`): one X tile per step feeds both dots."""
    _check_dtype(dtype)
    M, NI, K = tc.size_vars("M NI K")
    X = tc.placeholder((M, K), dtype, name="X")
    Wg = tc.placeholder((NI, K), dtype, name="Wg")
    Wu = tc.placeholder((NI, K), dtype, name="Wu")
    k = tc.reduce_axis(K, name="k")
    G = tc.compute((M, NI), lambda i, j: tc.sum(X[i, k] * Wg[j, k], axis=k, acc_dtype="float32"), name="G",
                   dtype=dtype)
    k2 = tc.reduce_axis(K, name="k2")
    U = tc.compute((M, NI), lambda i, j: tc.sum(X[i, k2] * Wu[j, k2], axis=k2, acc_dtype="float32"), name="U",
                   dtype=dtype)
    Y = tc.compute((M, NI), lambda i, j: tc.silu(G[i, j]).astype(dtype) * U[i, j], name="Y", dtype=dtype)

    s = tc.create_schedule(Y)
    i, j = Y.axis
    io, ii = s[Y].split(i, tc.knob("BM", [64, 128, 32, 16]))
    jo, ji = s[Y].split(j, tc.knob("BN", [64, 128, 32]))
    s[Y].reorder(io, jo, ii, ji)
    tiles = s[Y].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1, 4]))
    s[Y].bind(tiles, "program_id.0")
    loops = []
    for T, kk, Wt in ((G, k, Wg), (U, k2, Wu)):
        ko, ki = s[T].split(kk, tc.knob("BK", [32, 64, 16]))
        s[T].pipeline(ko, stages=tc.knob("stages", [3, 4, 2]))
        s[T].compute_at(s[Y], tiles)
        s.cache_read(X, "shared", readers=[T]).compute_at(s[T], ko)
        s.cache_read(Wt, "shared", readers=[T]).compute_at(s[T], ko)
        loops.append(ko)
    s[U].compute_with(s[G], loops[0])  # one loop over K: the X tile loaded once for both dots
    return s, [X, Wg, Wu, Y]


# -- per-head q/k RMSNorm and RoPE -------------------------------------------------------------------------------

def make_qk_norm_rope(dtype: str = "float32", head_dim: int = 128, eps: float = 1e-6):
    """q' = rope(q_norm(q)), k' = rope(k_norm(k)), per head over head_dim, HF's order (norm, then RoPE):

        xn[.., d]  = dtype(x[.., d] * rsqrt(mean_d x^2 + eps)) * w[d]
        out[.., d] = xn[d] * cos[d] - xn[d + D/2] * sin[d]      d <  D/2   (x * cos + rotate_half(x) * sin)
        out[.., d] = xn[d] * cos[d] + xn[d - D/2] * sin[d]      d >= D/2

    q is read as [B, S, H, D] (a view of the QKV GEMM's output) and written in the same token-major layout
    (what the attention kernel reads); k is read as [B, S, HKV, D] and written as [B, HKV, S, D], the KV
    cache's layout. cos and sin are HF's position_embeddings, [B, S, D] in dtype (both halves read, as HF).

    Schedule: a program per token (b, s) as suite/rope.py, a tile of HEADS heads x the whole head dim;
    each head's sum of squares computed at the program; the normalized value inlined (recomputed at d and
    d +- D/2). q and k are two kernels (k's tile is laid out [HKV, D] at (b, s) too)."""
    _check_dtype(dtype)
    D = head_dim
    if D % 2:
        raise ValueError(f"qk_norm_rope: head_dim must be even (rotate_half), got {D}")
    half = D // 2
    B, S, H, HKV = tc.size_vars("B S H HKV")
    q = tc.placeholder((B, S, H, D), dtype, name="q")
    k = tc.placeholder((B, S, HKV, D), dtype, name="k")
    cos = tc.placeholder((B, S, D), dtype, name="cos")
    sin = tc.placeholder((B, S, D), dtype, name="sin")
    wq = tc.placeholder((D,), dtype, name="wq")
    wk = tc.placeholder((D,), dtype, name="wk")

    def sumsq(x, heads, name):
        c = tc.reduce_axis(D, name=f"{name}_c")
        return tc.compute((B, S, heads), lambda b, t, h: tc.sum(x[b, t, h, c].astype("float32") * x[b, t, h, c],
                                                                 axis=c), name=name, dtype="float32")

    ssq, ssk = sumsq(q, H, "ssq"), sumsq(k, HKV, "ssk")

    def rope(x, ss, w, b, t, h, d):
        def xn(dd):  # the normalized head value at dd (HF rounds x * rstd to dtype, then multiplies by w)
            return (x[b, t, h, dd] * tc.rsqrt(ss[b, t, h] / D + eps)).astype(dtype) * w[dd]
        first = xn(d) * cos[b, t, d] - xn(d + half) * sin[b, t, d]
        second = xn(d) * cos[b, t, d] + xn(d - half) * sin[b, t, d]
        return tc.where(d < half, first, second)

    qo = tc.compute((B, S, H, D), lambda b, t, h, d: rope(q, ssq, wq, b, t, h, d), name="qo", dtype=dtype)
    ko = tc.compute((B, HKV, S, D), lambda b, h, t, d: rope(k, ssk, wk, b, t, h, d), name="ko", dtype=dtype)

    s = tc.create_schedule([qo, ko])
    heads = tc.knob("HEADS", [16, 8, 32])
    for out, ss, (b, t, h, d) in ((qo, ssq, qo.axis), (ko, ssk, (ko.axis[0], ko.axis[2], ko.axis[1], ko.axis[3]))):
        ho, hi = s[out].split(h, heads)
        do, di = s[out].split(d, D)
        s[out].reorder(b, t, ho, do, hi, di)
        s[out].bind(t, "program_id.0")
        s[out].bind(b, "program_id.1")
        s[ss].split(ss.reduce_axis[0], D)
        s[ss].compute_at(s[out], ho)
        s[out].num_warps(tc.knob("warps", [4, 8]))
    return s, [q, k, cos, sin, wq, wk, qo, ko]


# -- the KV-cache write ------------------------------------------------------------------------------------------

def make_kv_cache_write(dtype: str = "float32"):
    """k_cache[b, h, start + s, d] = k[b, h, s, d] (and v into v_cache), in place: two scatters into the
    preallocated caches [B, HKV, TMAX, D] passed as out= (init=None; TMAX given at the call, as the caches'
    length is in no input's shape). `start` is an int64 tensor of one element, the position of the first new
    token; a position at or past TMAX is not written (the host checks the room first, model.py).

    Schedule: a program per (b, h, s) row, the head dim in one BD tile (suite/kv_cache_write.py's)."""
    _check_dtype(dtype)
    B, HKV, S, D, TMAX = tc.size_vars("B HKV S D TMAX")
    k = tc.placeholder((B, HKV, S, D), dtype, name="k")
    v = tc.placeholder((B, HKV, S, D), dtype, name="v")
    start = tc.placeholder((1,), "int64", name="start")

    def at(b, h, t, d):
        return b, h, start[0] + t, d

    outs = [tc.scatter((B, HKV, TMAX, D), (B, HKV, S, D), at, lambda b, h, t, d, x=x: x[b, h, t, d], unique=True,
                       init=None, dtype=dtype, name=name)
            for x, name in ((k, "k_cache"), (v, "v_cache"))]
    s = tc.create_schedule(outs)
    for out in outs:
        b, h, t, d = out.axis
        do, di = s[out].split(d, tc.knob("BD", [128, 64, 256]))
        row = s[out].fuse(b, h, t)
        s[out].reorder(row, do, di)
        s[out].bind(row, "program_id.0")
    return s, [k, v, start, *outs]


# -- attention over the cache: prefill (FlashAttention) and decode (split-KV) ------------------------------------

def _attention_compute(dtype, head_dim, scale):
    """The textbook attention, grouped-query and causal with the mask aligned bottom-right:

        S[b, i, hk, g, j] = sum_d q[b, i, hk, g, d] * k[b, hk, j, d] * scale,  -inf where j > i + N - M
        P = dtype(exp(S - max_j S) / sum_j exp(S - max_j S))
        O[b, i, hk, g, e] = dtype(sum_j P[b, i, hk, g, j] * v[b, hk, j, e])

    q is [B, M, HKV, G, D] (the [B, M, H, D] query viewed with H = HKV * G: head hk * G + g reads KV head
    hk, i.e. h // G); k and v are the first N positions of the cache [B, HKV, N, D] (the M new tokens last)."""
    D = head_dim
    B, M, HKV, G, N = tc.size_vars("B M HKV G N")
    q = tc.placeholder((B, M, HKV, G, D), dtype, name="q")
    k = tc.placeholder((B, HKV, N, D), dtype, name="k")
    v = tc.placeholder((B, HKV, N, D), dtype, name="v")
    dd = tc.reduce_axis(D, name="dd")
    S = tc.compute((B, M, HKV, G, N), lambda b, i, hk, g, j: tc.sum(q[b, i, hk, g, dd] * k[b, hk, j, dd], axis=dd,
                                                                     acc_dtype="float32"), name="S", dtype="float32")
    Sc = tc.compute((B, M, HKV, G, N), lambda b, i, hk, g, j: tc.where(j <= i + N - M, S[b, i, hk, g, j] * scale,
                                                                       float("-inf")), name="Sc")
    j1, j2, j = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((B, M, HKV, G), lambda b, i, hk, g: tc.max(Sc[b, i, hk, g, j1], axis=j1), name="m")
    l = tc.compute((B, M, HKV, G), lambda b, i, hk, g: tc.sum(tc.exp(Sc[b, i, hk, g, j2] - m[b, i, hk, g]),  # noqa: E741
                                                              axis=j2), name="l")
    P = tc.compute((B, M, HKV, G, N), lambda b, i, hk, g, jj: tc.exp(Sc[b, i, hk, g, jj] - m[b, i, hk, g])
                   / l[b, i, hk, g], name="P", dtype=dtype)
    O = tc.compute((B, M, HKV, G, D), lambda b, i, hk, g, e: tc.sum(P[b, i, hk, g, j] * v[b, hk, j, e], axis=j,  # noqa: E741
                                                                     acc_dtype="float32"), name="O", dtype=dtype)
    return (q, k, v, O), (S, Sc, m, l, P), j


def make_attention(dtype: str = "float32", head_dim: int = 128, scale: float | None = None, decode: bool = False):
    """Causal grouped-query attention over the KV cache (see _attention_compute), one kernel (two for decode).

    decode=False (prefill), FlashAttention (suite/flash_attention.py): a program per (query tile of BM
    tokens, b * hk * g head), the q tile loaded once, a pipelined loop over key tiles with S's tile one
    tl.dot, `online(m, l)`: the running max and sum, the key tiles wholly above the (shifted) diagonal skipped.
    decode=True (one new token, M = 1), flash-decoding (suite/gqa_decode_attention.py): a program per (b, hk)
    holding its G query heads as the rows of one tile (K and V loaded once for the group), the key loop
    split in SPLIT parts on a grid axis of their own, merged in order by a combine kernel."""
    _check_dtype(dtype)
    D = head_dim
    scale = D ** -0.5 if scale is None else scale
    (q, k, v, O), (S, Sc, m, l, P), j = _attention_compute(dtype, D, scale)
    s = tc.create_schedule(O)
    b, i, hk, g, e = O.axis
    if decode:
        _decode_schedule(s, q, (S, Sc, m, l, P, O), j, rows=(b, i, hk), g=g, e=e, D=D)
        return s, [q, k, v, O]
    eo, ei = s[O].split(e, D)  # the whole head dim: one tile
    jo, ji = s[O].split(j, tc.knob("BN", [32, 64, 16, 128]))
    io, ii = s[O].split(i, tc.knob("BM", [64, 128, 16, 32]))
    s[O].reorder(b, hk, g, io, eo, jo, ii, ei, ji)
    head = s[O].fuse(b, hk, g)
    s[O].bind(io, "program_id.0")
    s[O].bind(head, "program_id.1")
    _attention_loop(s, q, (S, Sc, m, l, P, O), jo, q_at=io, D=D)
    return s, [q, k, v, O]


def _attention_loop(s, q, stages, jo, q_at, D: int) -> None:
    """What prefill and decode share: m and l online in O's loop `jo` over key tiles, Sc and P inlined, S's
    tile one tl.dot over the head dim computed per key tile, the q tile loaded once per program (at `q_at`)."""
    S, Sc, m, l, P, O = stages  # noqa: E741
    s[O].online(s[m], s[l])  # m and l run in O's loop over key tiles
    s[Sc].compute_inline()
    s[P].compute_inline()
    s[S].split(S.reduce_axis[0], D)  # S's tile: one tl.dot over the head dim
    s[S].compute_at(s[O], jo)
    s.cache_read(q, "shared", readers=[S]).compute_at(s[O], q_at)  # the q tile, once per program
    s[O].pipeline(jo, tc.knob("stages", [2, 3, 4]))
    s[O].num_warps(tc.knob("warps", [4, 8]))


def _decode_schedule(s, q, stages, j, rows, g, e, D: int) -> None:
    """Flash-decoding on O (one new token per row): a program per fused `rows` (b, hk) holding the group's
    query heads `g` as the rows of one tile (K and V loaded once for the group), the head dim `e` one tile,
    the key loop split in SPLIT parts on a grid axis of their own, merged in order by a combine kernel."""
    O = stages[-1]
    eo, ei = s[O].split(e, D)  # the whole head dim: one tile
    jo, ji = s[O].split(j, tc.knob("BN", [32, 64, 16, 128]))
    go, gi = s[O].split(g, tc.knob("BG", [16, 32]))  # the group's query heads: the rows of a tile
    s[O].reorder(*rows, go, eo, jo, gi, ei, ji)
    row = s[O].fuse(*rows)
    s[O].bind(row, "program_id.0")
    s[O].bind(go, "program_id.1")
    _attention_loop(s, q, stages, jo, q_at=go, D=D)
    s[O].split_k(jo, tc.knob("SPLIT", [4, 2, 8, 16]))


def make_attention_decode_static(dtype: str = "float32", head_dim: int = 128, scale: float | None = None):
    """Decode attention over the whole preallocated cache, the new token's position a tensor: the fixed-shape
    form a CUDA graph replays (model.py's GraphDecoder). One new token per sequence, at position pos[0]; keys
    0 .. pos[0] are attended (the new one included), the rest of the cache is not read:

        S[b, hk, g, j] = sum_d q[b, hk, g, d] * k[b, hk, j, d] * scale,  -inf where j > pos[0]
        P = dtype(softmax_j S)      O[b, hk, g, e] = dtype(sum_j P * (v[b, hk, j, e] where j <= pos[0], else 0))

    q is [B, HKV, G, D] (the [B, 1, H, D] query), k and v the whole caches [B, HKV, TMAX, D]; every shape is
    the same at every step, and so is every address (the caches', pos's): only pos's value changes.

    Schedule: make_attention's decode (flash-decoding), the key loop split in SPLIT parts; each part runs
    its chunk of the tiles up to pos[0] (loaded before the loop), so a step reads the keys written so far,
    not the whole cache (docs/online.md, "Masked tiles")."""
    _check_dtype(dtype)
    D = head_dim
    scale = D ** -0.5 if scale is None else scale
    B, HKV, G, N = tc.size_vars("B HKV G N")
    q = tc.placeholder((B, HKV, G, D), dtype, name="q")
    k = tc.placeholder((B, HKV, N, D), dtype, name="k")
    v = tc.placeholder((B, HKV, N, D), dtype, name="v")
    pos = tc.placeholder((1,), "int64", name="pos")
    dd = tc.reduce_axis(D, name="dd")
    S = tc.compute((B, HKV, G, N), lambda b, hk, g, j: tc.sum(q[b, hk, g, dd] * k[b, hk, j, dd], axis=dd,
                                                               acc_dtype="float32"), name="S", dtype="float32")
    Sc = tc.compute((B, HKV, G, N), lambda b, hk, g, j: tc.where(j <= pos[0], S[b, hk, g, j] * scale,
                                                                  float("-inf")), name="Sc")
    j1, j2, j = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((B, HKV, G), lambda b, hk, g: tc.max(Sc[b, hk, g, j1], axis=j1), name="m")
    l = tc.compute((B, HKV, G), lambda b, hk, g: tc.sum(tc.exp(Sc[b, hk, g, j2] - m[b, hk, g]), axis=j2),  # noqa: E741
                   name="l")
    P = tc.compute((B, HKV, G, N), lambda b, hk, g, jj: tc.exp(Sc[b, hk, g, jj] - m[b, hk, g]) / l[b, hk, g],
                   name="P", dtype=dtype)
    O = tc.compute((B, HKV, G, D), lambda b, hk, g, e: tc.sum(  # noqa: E741
        P[b, hk, g, j] * tc.where(j <= pos[0], v[b, hk, j, e], 0.0), axis=j, acc_dtype="float32"), name="O",
        dtype=dtype)
    s = tc.create_schedule(O)
    b, hk, g, e = O.axis
    _decode_schedule(s, q, (S, Sc, m, l, P, O), j, rows=(b, hk), g=g, e=e, D=D)
    return s, [q, k, v, pos, O]


def make_attention_prefill(dtype: str = "float32", head_dim: int = 128, scale: float | None = None):
    return make_attention(dtype, head_dim, scale, decode=False)


def make_attention_decode(dtype: str = "float32", head_dim: int = 128, scale: float | None = None):
    return make_attention(dtype, head_dim, scale, decode=True)


# -- the registry and the custom ops -----------------------------------------------------------------------------

KERNELS = {
    "rmsnorm": make_rmsnorm,
    "linear": make_linear,
    "qk_norm_rope": make_qk_norm_rope,
    "kv_cache_write": make_kv_cache_write,
    "attention_prefill": make_attention_prefill,
    "attention_decode": make_attention_decode,
    "attention_decode_static": make_attention_decode_static,
    "linear_residual": make_linear_residual,
    "gate_up_silu": make_gate_up_silu,
}


def op_name(name: str, dtype: str, **params) -> str:
    """`qwen3_<name>_<dtype>[_<param><value>...]`, a valid identifier: one op per (kernel, dtype, constants)
    (e.g. `qwen3_rmsnorm_float32_eps1e_06`), so that two models with other constants get two ops."""
    tag = "".join(f"_{k}{v}" for k, v in sorted(params.items()))
    return re.sub(r"[^0-9A-Za-z_]", "_", f"qwen3_{name}_{dtype}{tag}")


SPECS: dict[str, tuple[str, str, dict]] = {}  # op name -> (kernel name, dtype, constants), as op() made them
PLANS: list[Path] = []  # directories of tuned plans (use_plans): <op name>.json, served by tc.load


def use_plans(directory) -> None:
    """Serve each kernel from a tuned plan where `directory` holds one (`<op name>.json`, as tune.py writes
    them): call before the first op is made (before `model.patch`). A plan tuned on another device or Triton
    version is served with its generic config (tc.load warns); a kernel without a plan keeps its first
    choices."""
    if SPECS:
        raise RuntimeError("use_plans: ops were made already (their kernels are built); call it before patch()")
    PLANS.append(Path(directory))


def tune_inputs(name: str, dtype: str, **params):
    """The inputs `tc.tune` measures kernel `name` on, where normal random ones would not be a call's: the
    static decode attention's position is the cache's last (the tuner's random small ints would bound its loop
    at a tile or two, not at a request's thousands of keys). None: the tuner's random inputs."""
    if name != "attention_decode_static":
        return None
    dt = getattr(torch, dtype)

    def inputs(sizes, device):
        B, HKV, G, N, D = sizes["B"], sizes["HKV"], sizes["G"], sizes["N"], params.get("head_dim", 128)
        return [torch.randn(B, HKV, G, D, device=device).to(dt), torch.randn(B, HKV, N, D, device=device).to(dt),
                torch.randn(B, HKV, N, D, device=device).to(dt), torch.tensor([N - 1], device=device)]
    return inputs


def tune_plans(rec, out, trials: int, only=None, **tune_options) -> dict[str, str]:
    """Tune each op recorded in `rec` (a tc.record Recording; the ops made by op(), those of `only` where given)
    for the mix of its recorded calls and save the plan as `out`/<op name>.json, where use_plans finds it. The
    KV-cache write (in place, its cache length given at the call) is left out, and so is an op none of whose
    configs ran at its shapes (said). Returns op name -> path."""
    import time
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    saved = {}
    for qualname in rec.names():
        op_ = qualname.split("::")[-1]
        if op_ not in SPECS or SPECS[op_][0] == "kv_cache_write" or (only is not None and SPECS[op_][0] not in only):
            continue
        name, dtype, params = SPECS[op_]
        s, args = make(name, dtype, **params)
        mix = rec.mix(qualname)
        t0 = time.perf_counter()
        try:
            tuned = tc.tune(s, mix, trials=trials, args=args, progress=False,
                            inputs=tune_inputs(name, dtype, **params), **tune_options)
        except tc.TilecError as e:  # no config of this kernel ran at these shapes: said, and left untuned
            print(f"{op_}: not tuned ({str(e)[:200]})", flush=True)
            continue
        saved[op_] = tuned.save(out / f"{op_}.json")
        print(f"{op_}: {mix} -> plan {tuned.chosen.name}, {tuned.chosen.T * 1e6:.1f} us/call "
              f"({time.perf_counter() - t0:.1f} s) -> {saved[op_]}", flush=True)
    return saved


def planned() -> list[str]:
    """The ops made so far that are served from a tuned plan (use_plans), by op name."""
    return [op for op, (name, dtype, params) in SPECS.items()
            if isinstance(kernel(name, dtype, **params), tc.Tuned)]


def make(name: str, dtype: str, **params):
    """(schedule, args) of kernel `name` for `dtype` and its constants."""
    if name not in KERNELS:
        raise KeyError(f"qwen3: no kernel {name!r}; there are {sorted(KERNELS)}")
    return KERNELS[name](dtype, **params)


@functools.cache
def kernel(name: str, dtype: str, **params):
    """The kernel `name` for `dtype` and its constants, built once per process (the isl checks of a schedule
    take seconds): the tuned plan of `use_plans` where there is one (a `tc.Tuned`), else a `tc.Kernel` at its
    knobs' first choices."""
    s, args = make(name, dtype, **params)
    for directory in PLANS:
        path = directory / f"{op_name(name, dtype, **params)}.json"
        if path.exists():
            return tc.load(path, list(s.outputs))
    return tc.build(s, args)


@functools.cache
def op(name: str, dtype: str, **params):
    """The kernel as a torch custom op `tilec::qwen3_<name>_<dtype>...` (tilec's `as_op`), built once.
    kv_cache_write's outputs are in-place scatters: its op takes the caches after the new keys, values and
    start, updates them (`Tensor(a!)`) and returns nothing; TMAX is read from the caches' shape."""
    k = kernel(name, dtype, **params)
    qualname = op_name(name, dtype, **params)
    SPECS[qualname] = (name, dtype, dict(params))
    return k.as_op(qualname)
