"""Decoding attention with grouped-query heads over a KV cache: one query token per sequence, HKV key/value
heads each shared by G query heads, each sequence attending to the first seqlens[b] entries of its cache
(FlashAttention's flash_attn_with_kvcache with cache_seqlens, its split-KV kernel for decoding).

    S[b, hk, g, j] = sum_d q[b, hk, g, d] * K[b, j, hk, d] * scale,   -inf where j >= seqlens[b]
    m = max_j S      l = sum_j exp(S - m)      P = bf16(exp(S - m) / l)
    O[b, hk, g, e] = bf16(sum_j P[b, hk, g, j] * (V[b, j, hk, e] if j < seqlens[b] else 0))

q is the (B, HQ, D) query viewed on the host as (B, HKV, G, D) (query head h reads KV head h // G, as
FlashAttention maps them); the caches in FlashAttention's layout (B, Ncache, HKV, D), bfloat16, D = 64.
V past a sequence's length is read as 0, as FlashAttention's predicated loads give it (a NaN left in the
cache there does not reach the output).
Fast schedule: flash-decoding: a program per (b, kv head) holding its G query heads as the rows of one tile
(the grouped kernel's trick: K and V loaded once for the group), the key loop with `online(m, l)`, split in
SPLIT parts on a grid dimension of their own (`split_k`), merged in order by a combine kernel.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("FlashAttention flash_attn/flash_attn_interface.py flash_attn_with_kvcache (cache_seqlens; "
            "csrc/flash_attn/src/flash_fwd_kernel.h compute_attn_1rowblock_splitkv + combine_attn_seqk_parallel)")
D = 64
SCALE = D ** -0.5
SIZES = [dict(B=1, HKV=2, G=3, N=29), dict(B=1, HKV=1, G=1, N=1)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 3 s here
def make(fast: bool):
    B, HKV, G, N = tc.size_vars("B HKV G N")
    q = tc.placeholder((B, HKV, G, D), "bfloat16", name="q")
    K = tc.placeholder((B, N, HKV, D), "bfloat16", name="K")
    V = tc.placeholder((B, N, HKV, D), "bfloat16", name="V")
    seqlens = tc.placeholder((B,), "int32", name="seqlens")
    dd = tc.reduce_axis(D, name="dd")
    S = tc.compute((B, HKV, G, N), lambda b, hk, g, j: tc.sum(q[b, hk, g, dd] * K[b, j, hk, dd], axis=dd), name="S",
                   dtype="float32")
    Sc = tc.compute((B, HKV, G, N), lambda b, hk, g, j: tc.where(j < seqlens[b], S[b, hk, g, j] * SCALE,
                                                                 float("-inf")), name="Sc")
    j1, j2, j = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((B, HKV, G), lambda b, hk, g: tc.max(Sc[b, hk, g, j1], axis=j1), name="m")
    l = tc.compute((B, HKV, G), lambda b, hk, g: tc.sum(tc.exp(Sc[b, hk, g, j2] - m[b, hk, g]), axis=j2), name="l")
    P = tc.compute((B, HKV, G, N), lambda b, hk, g, jj: tc.exp(Sc[b, hk, g, jj] - m[b, hk, g]) / l[b, hk, g],
                   name="P", dtype="bfloat16")
    O = tc.compute((B, HKV, G, D), lambda b, hk, g, e: tc.sum(
        P[b, hk, g, j] * tc.where(j < seqlens[b], V[b, j, hk, e], 0.0), axis=j), name="O", dtype="bfloat16")
    s = tc.create_schedule(O)
    if fast:
        b, hk, g, e = O.axis
        go, gi = s[O].split(g, tc.knob("BG", [16, 32]))
        eo, ei = s[O].split(e, D)
        jo, ji = s[O].split(j, tc.knob("BN", [64, 128, 16]))
        s[O].reorder(b, hk, go, eo, jo, gi, ei, ji)
        bh = s[O].fuse(b, hk)
        s[O].bind(bh, "program_id.0")
        s[O].bind(go, "program_id.1")
        s[O].online(s[m], s[l])
        s[Sc].compute_inline()
        s[P].compute_inline()
        s[S].split(dd, D)
        s[S].compute_at(s[O], jo)
        s.cache_read(q, "shared", readers=[S]).compute_at(s[O], go)
        s[O].pipeline(jo, tc.knob("stages", [2, 3]))
        s[O].num_warps(tc.knob("warps", [4, 8]))
        s[O].split_k(jo, tc.knob("SPLIT", [4, 2, 8]))
    return s, [q, K, V, seqlens, O]


def inputs(sizes, device):
    B, HKV, G, N = (sizes[n] for n in ("B", "HKV", "G", "N"))
    q = harness.randn((B, HKV * G, D), torch.bfloat16, device)
    return [q.view(B, HKV, G, D), harness.randn((B, N, HKV, D), torch.bfloat16, device),
            harness.randn((B, N, HKV, D), torch.bfloat16, device),
            torch.randint(1, N + 1, (B,), dtype=torch.int32, device=device)]


def reference(q, k, v, seqlens):
    qd, kd, vd = q.double(), k.double(), v.double()
    s = torch.einsum("bhgd,bjhd->bhgj", qd, kd).float().double() * SCALE  # S rounded to float32
    N = k.shape[1]
    valid = torch.arange(N, device=q.device)[None, :] < seqlens[:, None].long()   # (B, N)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    p = (e / e.sum(-1, keepdim=True)).to(torch.bfloat16).double()
    vd = torch.where(valid[:, :, None, None], vd, 0.0)
    return torch.einsum("bhgj,bjhe->bhge", p, vd).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (64 sequences, 32 query heads on 8 KV heads, a
# 4096-token cache; each sequence's length drawn in 1..N), what a PyTorch user runs, FlashAttention's function,
# and the FLOPs (4 B HQ N D; memory-bound: the caches' bytes decide).
BENCH = dict(B=64, HKV=8, G=4, N=4096)
FLOPS = lambda sizes: 4 * sizes["B"] * sizes["HKV"] * sizes["G"] * sizes["N"] * D


def torch_ref(q, k, v, seqlens):
    """F.scaled_dot_product_attention on one query token per sequence: the caches viewed as (B, HKV, N, D),
    grouped-query heads (enable_gqa), a boolean mask of each sequence's first seqlens[b] entries."""
    B, HKV, G, _ = q.shape
    N = k.shape[1]
    valid = torch.arange(N, device=q.device)[None, :] < seqlens[:, None]
    o = torch.nn.functional.scaled_dot_product_attention(
        q.reshape(B, HKV * G, 1, D), k.transpose(1, 2), v.transpose(1, 2), attn_mask=valid[:, None, None, :],
        enable_gqa=True)
    return o.view(B, HKV, G, D)


def original(q, k, v, seqlens):
    """FlashAttention's flash_attn_with_kvcache (cache_seqlens, its split-KV decoding kernel); flash_attn is
    imported here (it may be missing)."""
    from flash_attn import flash_attn_with_kvcache

    B, HKV, G, _ = q.shape
    o = flash_attn_with_kvcache(q.reshape(B, 1, HKV * G, D), k, v, cache_seqlens=seqlens, softmax_scale=SCALE)
    return o.view(B, HKV, G, D)
