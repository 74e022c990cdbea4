"""Attention written naively, run as FlashAttention: one kernel, derived by the online rewrite.

The compute is the textbook one, over batch x heads (Z x H), M queries and N keys, head dim D:
    S[z, h, i, j] = sum_d Q[z, h, i, d] * K[z, h, j, d] * scale   (causal: -inf where j > i, tc.where)
    m[z, h, i]    = max_j S          l[z, h, i] = sum_j exp(S - m)
    P[z, h, i, j] = exp(S - m) / l   (rounded to bfloat16, as FlashAttention rounds P before P·V)
    O[z, h, i, e] = sum_j P * V[z, h, j, e]
and the schedule makes it FlashAttention: a program per (query tile, z*h), the Q tile loaded once
(cache_read at the program), a loop over key tiles in which S's tile is one tl.dot (S at O's key loop),
and `online(m, l)`: the max and the sum run in O's loop as running statistics, O's accumulator rescaled
by exp(m_old - m_new), divided by l once at the end. Nothing is pattern-matched: tilec checks that the
algebra holds (tilec/ir/online.py) and isl checks every other dependence on the rewritten loop.

Causal, the loop runs only over the key tiles at or below the diagonal, and masks only the diagonal's
(bounds from `j <= i` at the tiles' corners). For decoding (one query, a long row of keys: `split=True`),
the key loop runs in SPLIT parts on a grid dimension of their own, each part's running statistics go to
a workspace, and a combine kernel merges them in order (flash-decoding; deterministic).
"""

import common
import torch

import tilec as tc

SIZES = [dict(Z=1, H=2, M=100, N=100), dict(Z=2, H=1, M=64, N=64), dict(Z=1, H=1, M=1, N=1), dict(Z=1, H=3, M=37, N=37)]
D = 64           # the head dimension of the examples (the H200 benchmark uses 128)
SCALE = D ** -0.5
CAUSAL = True


def make(causal=CAUSAL, d=D, dtype="bfloat16", skip_masked=True, split=False, lse=False):
    Z, H, M, N = tc.size_vars("Z H M N")
    Q = tc.placeholder((Z, H, M, d), dtype, name="Q")
    K = tc.placeholder((Z, H, N, d), dtype, name="K")
    V = tc.placeholder((Z, H, N, d), dtype, name="V")
    dd = tc.reduce_axis(d, name="dd")
    S = tc.compute((Z, H, M, N), lambda z, h, i, j: tc.sum(Q[z, h, i, dd] * K[z, h, j, dd], axis=dd,
                                                           acc_dtype="float32"), name="S", dtype="float32")
    scale = d ** -0.5
    if causal:
        Sc = tc.compute((Z, H, M, N), lambda z, h, i, j: tc.where(j <= i, S[z, h, i, j] * scale, float("-inf")),
                        name="Sc")
    else:
        Sc = tc.compute((Z, H, M, N), lambda z, h, i, j: S[z, h, i, j] * scale, name="Sc")
    j1 = tc.reduce_axis(N, name="j1")
    m = tc.compute((Z, H, M), lambda z, h, i: tc.max(Sc[z, h, i, j1], axis=j1), name="m")
    j2 = tc.reduce_axis(N, name="j2")
    l = tc.compute((Z, H, M), lambda z, h, i: tc.sum(tc.exp(Sc[z, h, i, j2] - m[z, h, i]), axis=j2),  # noqa: E741
                   name="l")
    P = tc.compute((Z, H, M, N), lambda z, h, i, j: tc.exp(Sc[z, h, i, j] - m[z, h, i]) / l[z, h, i],
                   name="P", dtype=dtype)
    j = tc.reduce_axis(N, name="j")
    O = tc.compute((Z, H, M, d), lambda z, h, i, e: tc.sum(P[z, h, i, j] * V[z, h, j, e], axis=j,  # noqa: E741
                                                           acc_dtype="float32"), name="O", dtype=dtype)

    # lse: the log-sum-exp of each row too (FlashAttention's second output, for the backward pass), in the
    # same kernel: it reads m and l, which O's loop computes; placed at O's query tile, it runs after the loop
    LSE = tc.compute((Z, H, M), lambda z, h, i: m[z, h, i] + tc.log(l[z, h, i]), name="LSE") if lse else None

    s = tc.create_schedule([O, LSE] if lse else O)
    z, h, i, e = O.axis
    io, ii = s[O].split(i, tc.knob("BM", [16, 32, 64, 128]))
    eo, ei = s[O].split(e, d)                            # the whole head dim: one tile
    jo, ji = s[O].split(j, tc.knob("BN", [16, 32, 64, 128]))
    s[O].reorder(z, h, io, eo, jo, ii, ei, ji)
    zh = s[O].fuse(z, h)
    s[O].bind(io, "program_id.0")
    s[O].bind(zh, "program_id.1")
    s[O].pipeline(jo, tc.knob("stages", [2, 3, 4]))
    s[O].online(s[m], s[l], skip_masked=skip_masked)      # m and l run in O's loop over key tiles
    s[Sc].compute_inline()
    s[P].compute_inline()
    s[S].split(dd, d)                                     # S's tile: one tl.dot over the head dim
    s[S].compute_at(s[O], jo)
    s.cache_read(Q, "shared", readers=[S]).compute_at(s[O], io)   # the Q tile, once per program
    s[O].num_warps(tc.knob("warps", [4, 8]))
    if split:  # decoding: the key loop in parts, each part's statistics merged in order by a combine kernel
        s[O].split_k(jo, tc.knob("SPLIT", [4, 8, 16, 32, 64]))
    if lse:
        s[LSE].compute_at(s[O], io)  # no read between O and LSE: their loops follow m's axes, which both read
        return s, [Q, K, V, O, LSE]
    return s, [Q, K, V, O]


def inputs(sizes, device, d=D, dtype=torch.bfloat16):
    z, h, n = sizes["Z"], sizes["H"], sizes["N"]
    q = common.randn((z, h, sizes.get("M", n), d), dtype, device)
    return [q, common.randn((z, h, n, d), dtype, device), common.randn((z, h, n, d), dtype, device)]


def reference(q, k, v, causal=CAUSAL):
    qf, kf, vf = (t.double() for t in (q, k, v))
    s = qf @ kf.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        m, n = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(m, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ vf).to(q.dtype)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
