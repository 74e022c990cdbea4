"""Rotary position embedding of q and k, HuggingFace Llama's rotate_half layout, as Liger-Kernel's kernel
applies it: q with H heads, k with KH (fewer, grouped-query) heads, the cos and sin tables given.

    y[b, s, h, d] = x[b, s, h, d] * cos[s, d] - x[b, s, h, d + D/2] * sin[s, d]             d <  D/2
    y[b, s, h, d] = x[b, s, h, d] * cos[s, d - D/2] + x[b, s, h, d - D/2] * sin[s, d - D/2]   d >= D/2

(only the tables' left halves are read: HF's right half repeats them). q and k bfloat16 in Liger's
physical layout (B, S, heads, D), the tables float32 (S, D); the arithmetic in float32, rounded to
bfloat16. Two outputs. Fast schedule: a program per token (b, s) as Liger's, all of its heads and the head
dim in one tile, q and k in two kernels. Liger rotates both in one program; in tilec, k placed at q's token
(compute_at through the tables both read) does not follow q's token: each program would loop over every
(b, s) of k, B * S times the work (the values right), so k gets a kernel of its own.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel src/liger_kernel/ops/rope.py: _triton_rope (forward, BACKWARD_PASS=False), "
            "rope_forward; HF transformers modeling_llama.py apply_rotary_pos_emb / rotate_half")
D = 64
HALF = D // 2
SIZES = [dict(B=2, S=7, H=6, KH=2), dict(B=1, S=1, H=1, KH=1), dict(B=3, S=5, H=4, KH=4)]


def make(fast: bool):
    B, S, H, KH = tc.size_vars("B S H KH")
    q = tc.placeholder((B, S, H, D), "bfloat16", name="q")
    k = tc.placeholder((B, S, KH, D), "bfloat16", name="k")
    cos = tc.placeholder((S, D), "float32", name="cos")
    sin = tc.placeholder((S, D), "float32", name="sin")

    def rope(x, b, s, h, d):
        first = x[b, s, h, d] * cos[s, d] - x[b, s, h, d + HALF] * sin[s, d]
        second = x[b, s, h, d] * cos[s, d - HALF] + x[b, s, h, d - HALF] * sin[s, d - HALF]
        return tc.where(d < HALF, first, second)

    qo = tc.compute((B, S, H, D), lambda b, s, h, d: rope(q, b, s, h, d), name="qo", dtype="bfloat16")
    ko = tc.compute((B, S, KH, D), lambda b, s, h, d: rope(k, b, s, h, d), name="ko", dtype="bfloat16")
    sch = tc.create_schedule([qo, ko])
    if fast:
        b, s, h, d = qo.axis
        heads = tc.knob("HEADS", [16, 8, 32])
        for T in (qo, ko):
            b, s, h, d = T.axis
            ho, hi = sch[T].split(h, heads)
            do, di = sch[T].split(d, D)
            sch[T].reorder(b, s, ho, do, hi, di)
            sch[T].bind(s, "program_id.0")
            sch[T].bind(b, "program_id.1")
            sch[T].num_warps(tc.knob("warps", [4, 8]))
    return sch, [q, k, cos, sin, qo, ko]


def inputs(sizes, device):
    B, S, H, KH = (sizes[n] for n in ("B", "S", "H", "KH"))
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32, device=device) / D))
    pos = torch.arange(S, dtype=torch.float32, device=device) + torch.randint(0, 1000, (1,), device=device)
    freqs = torch.outer(pos, inv_freq) + 0.01 * harness.randn((S, HALF), torch.float32, device)
    emb = torch.cat([freqs, freqs], dim=-1)
    return [harness.randn((B, S, H, D), torch.bfloat16, device), harness.randn((B, S, KH, D), torch.bfloat16, device),
            emb.cos(), emb.sin()]


def reference(q, k, cos, sin):
    c = torch.cat([cos[:, :HALF], cos[:, :HALF]], -1).double()[None, :, None, :]
    s = torch.cat([sin[:, :HALF], sin[:, :HALF]], -1).double()[None, :, None, :]

    def rotate_half(x):
        return torch.cat([-x[..., HALF:], x[..., :HALF]], -1)

    return tuple((x.double() * c + rotate_half(x.double()) * s).to(x.dtype) for x in (q, k))



# The benchmark's (benchmarks/suite.py): its sizes on the GPU (Llama's 32 query and 8 KV heads, 4096 tokens),
# what a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(B=8, S=4096, H=32, KH=8)


def torch_ref(q, k, cos, sin):
    """HF Llama's apply_rotary_pos_emb eagerly (q * cos + rotate_half(q) * sin), the tables cast to q's dtype as
    its rotary embedding returns them, broadcast over the (B, S, heads, D) layout."""
    c = cos.to(q.dtype)[None, :, None, :]
    s = sin.to(q.dtype)[None, :, None, :]

    def rotate_half(x):
        return torch.cat((-x[..., HALF:], x[..., :HALF]), dim=-1)

    return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s


def original(q, k, cos, sin):
    """Liger-Kernel's rope_forward (liger_kernel.ops.rope), which takes q and k as (B, heads, S, D) views of the
    (B, S, heads, D) storage and rotates them in place (the benchmark gives it copies). liger_kernel is imported
    here (it may be missing)."""
    from liger_kernel.ops.rope import rope_forward

    qo, ko, _, _ = rope_forward(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
    return qo.transpose(1, 2), ko.transpose(1, 2)
