"""Causal softmax of attention scores with the ALiBi bias, its slopes computed in the kernel.

    slope[h]        = 2 ** (-8 (h + 1) / H)                      (H a power of two, as BLOOM's)
    P[b, h, i, j]   = softmax_j (S[b, h, i, j] - slope[h] * (i - j)),  j <= i; 0 past the diagonal

The max and the sum of exponentials are two row reductions computed at each row of P (fast schedule: one row
per program, the row in tiles).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("BLOOM's ALiBi, transformers/models/bloom/modeling_bloom.py: build_alibi_tensor (slopes 2 ** (-8 h / H)) "
            "with FlashAttention's alibi_slopes bias (flash_attn/flash_attn_interface.py), as a causal softmax")
SIZES = [dict(B=1, H=2, T=19), dict(B=1, H=1, T=1), dict(B=2, H=1, T=29)]


def make(fast: bool):
    B, H, T = tc.size_vars("B H T")
    S = tc.placeholder((B, H, T, T), "float32", name="S")
    k, k2 = tc.reduce_axis(T, name="k"), tc.reduce_axis(T, name="k2")

    def biased(b, h, i, j):
        slope = tc.exp2(-8.0 * (h + 1) / H)
        return tc.where(j <= i, S[b, h, i, j] - slope * (i - j), float("-inf"))

    m = tc.compute((B, H, T), lambda b, h, i: tc.max(biased(b, h, i, k), axis=k), name="m")
    se = tc.compute((B, H, T), lambda b, h, i: tc.sum(tc.exp(biased(b, h, i, k2) - m[b, h, i]), axis=k2), name="se")
    P = tc.compute((B, H, T, T), lambda b, h, i, j: tc.exp(biased(b, h, i, j) - m[b, h, i]) / se[b, h, i], name="P")
    s = tc.create_schedule(P)
    if fast:
        b, h, i, j = P.axis
        s[P].split(j, tc.knob("BLOCK", [256, 1024]))
        row = s[P].fuse(s[P].fuse(b, h), i)
        s[P].bind(row, "program_id.0")
        s[m].split(k, tc.knob("BLOCK", [256, 1024]))
        s[se].split(k2, tc.knob("BLOCK", [256, 1024]))
        s[m].compute_at(s[P], row)
        s[se].compute_at(s[P], row)
    return s, [S, P]


def inputs(sizes, device):
    return [harness.randn((sizes["B"], sizes["H"], sizes["T"], sizes["T"]), torch.float32, device)]


def reference(scores):
    _, H, T, _ = scores.shape
    slopes = torch.pow(2.0, -8.0 * torch.arange(1, H + 1, dtype=torch.float64) / H).to(scores.device)
    i = torch.arange(T, device=scores.device)
    dist = (i[:, None] - i[None, :]).double()
    biased = scores.double() - slopes[:, None, None] * dist
    biased = biased.masked_fill(i[None, :] > i[:, None], float("-inf"))
    return torch.softmax(biased, -1).float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (2 x 16 heads, 2048 tokens: 512 MiB of scores) and
# what a PyTorch user runs (no kernel to import: no `original`).
BENCH = dict(B=2, H=16, T=2048)


def torch_ref(scores):
    """BLOOM's eager form: the ALiBi bias as build_alibi_tensor makes it, slope[h] * j (a softmax row is the same
    shifted by slope[h] * i), added to the scores, the causal mask filled with -inf, torch.softmax; float32."""
    _, H, T, _ = scores.shape
    slopes = torch.pow(2.0, -8.0 * torch.arange(1, H + 1, dtype=torch.float32, device=scores.device) / H)
    pos = torch.arange(T, device=scores.device)
    alibi = slopes[:, None, None] * pos.float()[None, None, :]                    # (H, 1, T)
    causal = pos[None, :] > pos[:, None]
    return torch.softmax((scores + alibi).masked_fill(causal, float("-inf")), dim=-1)
