"""vLLM's paged attention (v1) for decoding: one query token per sequence; the sequence's keys and values live
in fixed-size blocks of a shared cache, found through its row of the block table; G query heads share each
KV head.

    blk(b, j)      = block_tables[b, j // BS]                          (BS = 16 tokens a block)
    S[b, hk, g, j] = scale * sum_d q[b, hk, g, d] * k_cache[blk, hk, d // X, j % BS, d % X],
                     -inf where j >= seq_lens[b]                        (X = 8: 16 bytes of float16)
    m = max_j S      l = sum_j exp(S - m)      P = fp16(exp(S - m) / l)
    out[b, hk, g, e] = fp16(sum_j P * (v_cache[blk, hk, e, j % BS] if j < seq_lens[b] else 0))

The caches in vLLM's layouts: k_cache (num_blocks, HKV, D / X, BS, X), v_cache (num_blocks, HKV, D, BS);
float16, D = 64; q (num_seqs, num_heads, D) viewed on the host as (num_seqs, HKV, G, D) (head h reads KV
head h // G, vLLM's num_queries_per_kv); the key axis runs over the table's MB blocks. V past the context is
0, as vLLM zeroes it ("they may contain NaNs"); the probabilities are rounded to float16 before P @ V, as
v1's logits are converted to the cache type. Fast schedule: a program per (sequence, KV head) with its G
query heads as one tile (v1's block takes one head), the key loop over BN-token tiles of whole blocks with
`online(m, l)`.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("vLLM csrc/attention/attention_kernels.cuh: paged_attention_kernel as paged_attention_v1_kernel "
            "launches it (k_cache [num_blocks, num_kv_heads, head_size/x, block_size, x], v_cache [num_blocks, "
            "num_kv_heads, head_size, block_size], block_tables, seq_lens)")
D = 64
BS = 16
X = 8
SCALE = D ** -0.5
SIZES = [dict(B=1, HKV=2, G=3, MB=2, NB=5), dict(B=2, HKV=1, G=1, MB=2, NB=4)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 3 s here
def make(fast: bool):
    B, HKV, G, MB, NB = tc.size_vars("B HKV G MB NB")
    q = tc.placeholder((B, HKV, G, D), "float16", name="q")
    k_cache = tc.placeholder((NB, HKV, D // X, BS, X), "float16", name="k_cache")
    v_cache = tc.placeholder((NB, HKV, D, BS), "float16", name="v_cache")
    block_tables = tc.placeholder((B, MB), "int32", name="block_tables")
    seq_lens = tc.placeholder((B,), "int32", name="seq_lens")
    N = MB * BS
    dd = tc.reduce_axis(D, name="dd")

    def blk(b, j):
        return block_tables[b, j // BS]

    S = tc.compute((B, HKV, G, N), lambda b, hk, g, j: tc.sum(
        q[b, hk, g, dd] * k_cache[blk(b, j), hk, dd // X, j % BS, dd % X], axis=dd), name="S", dtype="float32")
    Sc = tc.compute((B, HKV, G, N), lambda b, hk, g, j: tc.where(j < seq_lens[b], S[b, hk, g, j] * SCALE,
                                                                 float("-inf")), name="Sc")
    j1, j2, j = (tc.reduce_axis(N, name=n) for n in ("j1", "j2", "j"))
    m = tc.compute((B, HKV, G), lambda b, hk, g: tc.max(Sc[b, hk, g, j1], axis=j1), name="m")
    l = tc.compute((B, HKV, G), lambda b, hk, g: tc.sum(tc.exp(Sc[b, hk, g, j2] - m[b, hk, g]), axis=j2), name="l")
    P = tc.compute((B, HKV, G, N), lambda b, hk, g, jj: tc.exp(Sc[b, hk, g, jj] - m[b, hk, g]) / l[b, hk, g],
                   name="P", dtype="float16")
    out = tc.compute((B, HKV, G, D), lambda b, hk, g, e: tc.sum(
        P[b, hk, g, j] * tc.where(j < seq_lens[b], v_cache[blk(b, j), hk, e, j % BS], 0.0), axis=j), name="out",
        dtype="float16")
    s = tc.create_schedule(out)
    if fast:
        b, hk, g, e = out.axis
        go, gi = s[out].split(g, tc.knob("BG", [16, 32]))
        eo, ei = s[out].split(e, D)
        jo, ji = s[out].split(j, tc.knob("BN", [64, 32, 16]))
        s[out].reorder(b, hk, go, eo, jo, gi, ei, ji)
        bh = s[out].fuse(b, hk)
        s[out].bind(bh, "program_id.0")
        s[out].bind(go, "program_id.1")
        s[out].online(s[m], s[l])
        s[Sc].compute_inline()
        s[P].compute_inline()
        s[S].split(dd, D)
        s[S].compute_at(s[out], jo)
        s.cache_read(q, "shared", readers=[S]).compute_at(s[out], go)
        s[out].num_warps(tc.knob("warps", [4, 8]))
    return s, [q, k_cache, v_cache, block_tables, seq_lens, out]


def inputs(sizes, device):
    B, HKV, G, MB, NB = (sizes[n] for n in ("B", "HKV", "G", "MB", "NB"))
    q = harness.randn((B, HKV * G, D), torch.float16, device)
    tables = torch.randint(0, NB, (B, MB), dtype=torch.int32, device=device)
    tables.view(-1)[:min(NB, B * MB)] = torch.randperm(NB, device=device)[:B * MB].to(torch.int32)
    return [q.view(B, HKV, G, D), harness.randn((NB, HKV, D // X, BS, X), torch.float16, device),
            harness.randn((NB, HKV, D, BS), torch.float16, device), tables,
            torch.randint(1, MB * BS + 1, (B,), dtype=torch.int32, device=device)]


def reference(q, k_cache, v_cache, block_tables, seq_lens):
    B, HKV, G, _ = q.shape
    MB = block_tables.shape[1]
    blocks = block_tables.long()                                             # (B, MB)
    k = k_cache.double()[blocks]                                             # (B, MB, HKV, D/X, BS, X)
    k = k.permute(0, 2, 1, 4, 3, 5).reshape(B, HKV, MB * BS, D)              # (B, HKV, N, D)
    v = v_cache.double()[blocks].permute(0, 2, 1, 4, 3).reshape(B, HKV, MB * BS, D)
    s = torch.einsum("bhgd,bhjd->bhgj", q.double(), k).float().double() * SCALE
    valid = torch.arange(MB * BS, device=q.device)[None, :] < seq_lens[:, None].long()
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    p = (e / e.sum(-1, keepdim=True)).to(torch.float16).double()
    v = torch.where(valid[:, None, :, None], v, 0.0)
    return torch.einsum("bhgj,bhje->bhge", p, v).to(torch.float16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (64 sequences, 32 query heads on 8 KV heads, up to
# 256 blocks = 4096 tokens each, each block in the cache once; lengths drawn in 1..MB * BS), what a PyTorch user
# runs and the FLOPs (4 B HQ N D; memory-bound). vLLM's CUDA kernel is not imported: no `original`.
BENCH = dict(B=64, HKV=8, G=4, MB=256, NB=64 * 256)
FLOPS = lambda sizes: 4 * sizes["B"] * sizes["HKV"] * sizes["G"] * sizes["MB"] * BS * D


def torch_ref(q, k_cache, v_cache, block_tables, seq_lens):
    """Eager PyTorch: each sequence's blocks gathered from the caches through its table row into (B, HKV, N, D),
    then F.scaled_dot_product_attention with grouped-query heads (enable_gqa) and a boolean mask of the first
    seq_lens[b] tokens."""
    B, HKV, G, _ = q.shape
    MB = block_tables.shape[1]
    blocks = block_tables.long()
    k = k_cache[blocks].permute(0, 2, 1, 4, 3, 5).reshape(B, HKV, MB * BS, D)
    v = v_cache[blocks].permute(0, 2, 1, 4, 3).reshape(B, HKV, MB * BS, D)
    valid = torch.arange(MB * BS, device=q.device)[None, :] < seq_lens[:, None]
    o = torch.nn.functional.scaled_dot_product_attention(q.reshape(B, HKV * G, 1, D), k, v,
                                                         attn_mask=valid[:, None, None, :], enable_gqa=True)
    return o.view(B, HKV, G, D)
