"""Causal attention's forward, written as the textbook computes it and scheduled as FlashAttention, after
Triton's fused-attention tutorial (its forward kernel, causal):

    S[z, h, i, j] = sum_d Q[z, h, i, d] * K[z, h, j, d] * scale,   -inf where j > i
    m[z, h, i]    = max_j S          l[z, h, i] = sum_j exp(S - m)
    P[z, h, i, j] = bf16(exp(S - m) / l)
    O[z, h, i, e] = bf16(sum_j P * V[z, h, j, e])                  (float32 accumulators)

Q, K, V bfloat16 (Z, H, N, D), D = 64. Fast schedule: the tutorial's: a program per (query tile, z * h), the
Q tile loaded once, a pipelined loop over key tiles with S's tile one tl.dot, `online(m, l)` (the running max
and sum, the accumulator rescaled; divided by l at the end), the loop running only over the tiles at or
below the diagonal. P is rounded to bfloat16 before P @ V as the tutorial's p.to(dtype) is: the default
schedule rounds exp(S - m) / l as written, the online loop the unnormalized exp(S - m') as the tutorial
does (docs/online.md, "Rounding"). A NaN in V above the diagonal reaches the output as 0 * NaN in the
naive compute and in the tiles that run; the fast schedule skips the tiles wholly above the diagonal
(FlashAttention's semantics), so the special variant runs at N = 29, one query tile, where none is skipped.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Triton tutorial 06, python/tutorials/06-fused-attention.py: _attn_fwd / _attn_fwd_inner "
            "(causal, STAGE 3: the off-diagonal then the diagonal blocks, online softmax)")
D = 64
SCALE = D ** -0.5
SIZES = [dict(Z=1, H=3, N=29), dict(Z=1, H=1, N=20)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 3 s here
def make(fast: bool):
    Z, H, N = tc.size_vars("Z H N")
    Q = tc.placeholder((Z, H, N, D), "bfloat16", name="Q")
    K = tc.placeholder((Z, H, N, D), "bfloat16", name="K")
    V = tc.placeholder((Z, H, N, D), "bfloat16", name="V")
    dd = tc.reduce_axis(D, name="dd")
    S = tc.compute((Z, H, N, N), lambda z, h, i, j: tc.sum(Q[z, h, i, dd] * K[z, h, j, dd], axis=dd), name="S",
                   dtype="float32")
    Sc = tc.compute((Z, H, N, N), lambda z, h, i, j: tc.where(j <= i, S[z, h, i, j] * SCALE, float("-inf")),
                    name="Sc")
    j1, j2, j = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((Z, H, N), lambda z, h, i: tc.max(Sc[z, h, i, j1], axis=j1), name="m")
    l = tc.compute((Z, H, N), lambda z, h, i: tc.sum(tc.exp(Sc[z, h, i, j2] - m[z, h, i]), axis=j2), name="l")
    P = tc.compute((Z, H, N, N), lambda z, h, i, jj: tc.exp(Sc[z, h, i, jj] - m[z, h, i]) / l[z, h, i], name="P",
                   dtype="bfloat16")
    O = tc.compute((Z, H, N, D), lambda z, h, i, e: tc.sum(P[z, h, i, j] * V[z, h, j, e], axis=j), name="O",
                   dtype="bfloat16")
    s = tc.create_schedule(O)
    if fast:
        z, h, i, e = O.axis
        io, ii = s[O].split(i, tc.knob("BM", [64, 128, 16]))
        eo, ei = s[O].split(e, D)
        jo, ji = s[O].split(j, tc.knob("BN", [32, 64, 16]))
        s[O].reorder(z, h, io, eo, jo, ii, ei, ji)
        zh = s[O].fuse(z, h)
        s[O].bind(io, "program_id.0")
        s[O].bind(zh, "program_id.1")
        s[O].pipeline(jo, tc.knob("stages", [3, 4, 2]))
        s[O].online(s[m], s[l])
        s[Sc].compute_inline()
        s[P].compute_inline()
        s[S].split(dd, D)
        s[S].compute_at(s[O], jo)
        s.cache_read(Q, "shared", readers=[S]).compute_at(s[O], io)
        s[O].num_warps(tc.knob("warps", [4, 8]))
    return s, [Q, K, V, O]


def inputs(sizes, device):
    shape = (sizes["Z"], sizes["H"], sizes["N"], D)
    return [harness.randn(shape, torch.bfloat16, device) for _ in range(3)]


def reference(q, k, v):
    qf, kf, vf = (t.double() for t in (q, k, v))
    s = (qf @ kf.transpose(-1, -2)).float().double() * SCALE  # S rounded to float32, as its compute's dtype
    n = q.shape[2]
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - m)
    p = (e / e.sum(-1, keepdim=True)).to(torch.bfloat16).double()
    return (p @ vf).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (the tutorial's batch 4 x 32 heads, 4096 tokens; D is
# this module's 64), what a PyTorch user runs, the FLOPs for the tensor-core roofline (causal: half of
# 4 Z H N^2 D). Triton's tutorial kernel is not a package to import: no `original`.
BENCH = dict(Z=4, H=32, N=4096)
FLOPS = lambda sizes: 2 * sizes["Z"] * sizes["H"] * sizes["N"] ** 2 * D


def torch_ref(q, k, v):
    """F.scaled_dot_product_attention, causal, bfloat16 (FlashAttention's backend on the GPU)."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
