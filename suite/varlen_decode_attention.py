"""Decoding attention over a ragged batch: one new query token per sequence and query head; sequence b attends
to the first cache_seqlens[b] entries of its KV cache, which is row cache_batch_idx[b] of a cache of BC
sequences of up to NC tokens; G query heads share each of the HKV key/value heads (head h reads KV head
h // G), as FlashAttention's flash_attn_with_kvcache takes them.

    c = cache_batch_idx[b]
    S[b, h, j] = scale * sum_d q[b, h, d] * k_cache[c, j, h // G, d],    -inf where j >= cache_seqlens[b]
    m = max_j S      l = sum_j exp(S - m)      P = fp16(exp(S - m) / l)
    out[b, h, e] = fp16(sum_j P[b, h, j] * (v_cache[c, j, h // G, e] if j < cache_seqlens[b] else 0))

float16, D = 64, the caches in FlashAttention's layout (batch_size_cache, seqlen_cache, nheads_k, headdim);
q (B, HQ, D) with HQ = HKV * G, G = 4 query heads per KV head (Llama-3-8B's 32 / 8). G is a constant of the
module: with G a size too, the extent HKV * G of q's heads is a product of two sizes, which isl's model
refuses (tilec.poly.model.NotAffine, not a TilecError, at the first primitive or the build). P is rounded
to float16 before P @ V, as FlashAttention rounds it to the input type; V past a sequence's length is read
as 0, as its predicated loads give it.

The loop over keys stops at each sequence's last block, as the original's (its n_block_max from the length):
the max's operand is where(j < cache_seqlens[b], ..., -inf), and with b on the grid cache_seqlens[b] is one
value per program, loaded before the loop, which runs over the blocks below it unmasked, then the last one
masked (docs/online.md, "Masked tiles"): O(cache_seqlens[b]) work per (b, h), not O(NC). Fast schedule: a
program per (b, query head), the key loop over BN-token tiles with `online(m, l)` (FlashAttention's running
max and sum), q's row loaded once.
suite/gqa_decode_attention.py is the same attention with the query heads grouped per KV head on the host,
bfloat16 and split-KV; this one indexes the KV head by h // G in the compute and gathers the cache row
through cache_batch_idx.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("FlashAttention flash_attn/flash_attn_interface.py: flash_attn_with_kvcache (cache_seqlens, "
            "cache_batch_idx; csrc/flash_attn/src/flash_fwd_kernel.h compute_attn_1rowblock_splitkv, its key "
            "loop bounded by the sequence's length)")
D = 64
G = 4
SCALE = D ** -0.5
SIZES = [dict(B=2, HKV=2, BC=3, NC=29), dict(B=1, HKV=1, BC=1, NC=1), dict(B=1, HKV=3, BC=2, NC=45)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take seconds here
def make(fast: bool):
    B, HKV, BC, NC = tc.size_vars("B HKV BC NC")
    q = tc.placeholder((B, G * HKV, D), "float16", name="q")
    k_cache = tc.placeholder((BC, NC, HKV, D), "float16", name="k_cache")
    v_cache = tc.placeholder((BC, NC, HKV, D), "float16", name="v_cache")
    cache_seqlens = tc.placeholder((B,), "int32", name="cache_seqlens")
    cache_batch_idx = tc.placeholder((B,), "int32", name="cache_batch_idx")
    HQ = G * HKV
    dd = tc.reduce_axis(D, name="dd")
    S = tc.compute((B, HQ, NC), lambda b, h, j: tc.sum(
        q[b, h, dd] * k_cache[cache_batch_idx[b], j, h // G, dd], axis=dd), name="S", dtype="float32")
    Sc = tc.compute((B, HQ, NC), lambda b, h, j: tc.where(j < cache_seqlens[b], S[b, h, j] * SCALE, float("-inf")),
                    name="Sc")
    j1, j2, j = (tc.reduce_axis(NC, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((B, HQ), lambda b, h: tc.max(Sc[b, h, j1], axis=j1), name="m")
    l = tc.compute((B, HQ), lambda b, h: tc.sum(tc.exp(Sc[b, h, j2] - m[b, h]), axis=j2), name="l")  # noqa: E741
    P = tc.compute((B, HQ, NC), lambda b, h, jj: tc.exp(Sc[b, h, jj] - m[b, h]) / l[b, h], name="P",
                   dtype="float16")
    out = tc.compute((B, HQ, D), lambda b, h, e: tc.sum(
        P[b, h, j] * tc.where(j < cache_seqlens[b], v_cache[cache_batch_idx[b], j, h // G, e], 0.0), axis=j),
        name="out", dtype="float16")
    s = tc.create_schedule(out)
    if fast:
        b, h, e = out.axis
        eo, ei = s[out].split(e, D)
        jo, ji = s[out].split(j, tc.knob("BN", [64, 32, 16]))
        s[out].reorder(b, h, eo, jo, ei, ji)
        bh = s[out].fuse(b, h)
        s[out].bind(bh, "program_id.0")
        s[out].online(s[m], s[l])
        s[Sc].compute_inline()
        s[P].compute_inline()
        s[S].split(dd, D)
        s[S].compute_at(s[out], jo)
        s.cache_read(q, "shared", readers=[S]).compute_at(s[out], bh)
        s[out].num_warps(tc.knob("warps", [4, 8]))
    return s, [q, k_cache, v_cache, cache_seqlens, cache_batch_idx, out]


def inputs(sizes, device):
    B, HKV, BC, NC = (sizes[n] for n in ("B", "HKV", "BC", "NC"))
    return [harness.randn((B, HKV * G, D), torch.float16, device),
            harness.randn((BC, NC, HKV, D), torch.float16, device),
            harness.randn((BC, NC, HKV, D), torch.float16, device),
            torch.randint(1, NC + 1, (B,), dtype=torch.int32, device=device),
            torch.randint(0, BC, (B,), dtype=torch.int32, device=device)]


def reference(q, k_cache, v_cache, cache_seqlens, cache_batch_idx):
    B, HQ, _ = q.shape
    NC, HKV = k_cache.shape[1], k_cache.shape[2]
    rows = cache_batch_idx.long()
    k = k_cache.double()[rows].repeat_interleave(HQ // HKV, dim=2)          # (B, NC, HQ, D)
    v = v_cache.double()[rows].repeat_interleave(HQ // HKV, dim=2)
    s = torch.einsum("bhd,bjhd->bhj", q.double(), k).float().double() * SCALE  # S rounded to float32
    valid = torch.arange(NC, device=q.device)[None, :] < cache_seqlens[:, None].long()   # (B, NC)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    p = (e / e.sum(-1, keepdim=True)).to(torch.float16).double()
    v = torch.where(valid[:, :, None, None], v, 0.0)
    return torch.einsum("bhj,bjhe->bhe", p, v).to(torch.float16)


BENCH = dict(B=64, HKV=8, BC=64, NC=4096)  # Llama-3-8B's heads; lengths uniform in [1, 4096]: half the cache read
FLOPS = lambda sizes: 4 * sizes["B"] * sizes["HKV"] * G * sizes["NC"] * D // 2  # noqa: E731 (the keys read, on average)


def torch_ref(q, k_cache, v_cache, cache_seqlens, cache_batch_idx):
    """F.scaled_dot_product_attention over each sequence's cache row (gathered through cache_batch_idx), grouped
    query heads, a boolean mask of its first cache_seqlens[b] keys; float16 as the kernel."""
    B, HQ, _ = q.shape
    rows = cache_batch_idx.long()
    k = k_cache[rows].transpose(1, 2)  # (B, HKV, NC, D)
    v = v_cache[rows].transpose(1, 2)
    valid = torch.arange(k.shape[2], device=q.device)[None, :] < cache_seqlens[:, None].long()
    out = torch.nn.functional.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=valid[:, None, None, :],
                                                           scale=SCALE, enable_gqa=True)
    return out[:, :, 0, :]
