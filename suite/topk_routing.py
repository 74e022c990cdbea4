"""Mixture-of-experts routing: the softmax of each token's router logits over E experts, its K largest
probabilities and their experts (in decreasing order), the K weights renormalized to sum to 1.

    p[t, e]    = exp(G[t, e] - max_e G) / sum_e exp(G[t, e] - max_e G)
    rank[t, e] = sum_e2 (p[t, e2] > p[t, e]) | (p[t, e2] == p[t, e] & e2 < e)   (how many experts beat e)
    ids[t, r]  = sum_e where(rank[t, e] == r, e, 0)                             (r < K: the expert of rank r)
    w[t, r]    = sum_e where(rank[t, e] == r, p[t, e], 0)
    weights[t, r] = w[t, r] / sum_r2 w[t, r2]

The formulation is dense: a rank by counting, every expert compared with every other, O(E^2) per token, then
a selection of rank r by a masked sum over the experts, O(E * K), where the original selects the K largest
with K passes of an argmax over the row (vLLM's topk_softmax: a warp-level max-reduction per pass, O(E * K))
or a sort. A top-k (or sort) primitive in the language would make it that algorithm (docs/language.md,
"Not in the language yet": sort and top-k). The rank breaks ties by the smaller index; torch.topk's order
among equal values is its own, so the logits are random float32 values, where two equal probabilities do not
occur. K is a constant of the module (torch.topk's k is a number given at the call, and no input's shape
holds it). The ids are int32, as vLLM's topk_ids. Fast schedule: a program per tile of BT tokens; the
softmax statistics, the (BT x E x E) comparison tile of the rank and the selection computed there, the two
outputs stored side by side.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("vLLM vllm/model_executor/layers/fused_moe/fused_moe.py: fused_topk (csrc/moe/topk_softmax_kernels.cu: "
            "topkGatingSoftmax, then topk_weights / topk_weights.sum(-1) when renormalize)")
K = 2
# A NaN or infinity in a row makes its softmax NaN, and the "top-k" of NaN values is the order torch.topk's
# implementation happens to give: the ids of such a row mean nothing
SPECIAL = False
SIZES = [dict(T=37, E=64), dict(T=1, E=8), dict(T=5, E=2), dict(T=3, E=60)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 4 s here
def make(fast: bool):
    T, E = tc.size_vars("T E")
    G = tc.placeholder((T, E), "float32", name="G")
    e1, e2, e3, e4, e5 = (tc.reduce_axis(E, name=n) for n in ("e1", "e2", "e3", "e4", "e5"))
    r2 = tc.reduce_axis(K, name="r2")
    mx = tc.compute((T,), lambda t: tc.max(G[t, e1], axis=e1), name="mx")
    den = tc.compute((T,), lambda t: tc.sum(tc.exp(G[t, e2] - mx[t]), axis=e2), name="den")
    p = tc.compute((T, E), lambda t, e: tc.exp(G[t, e] - mx[t]) / den[t], name="p")
    rank = tc.compute((T, E), lambda t, e: tc.sum((p[t, e3] > p[t, e]) | ((p[t, e3] == p[t, e]) & (e3 < e)),
                                                  axis=e3), name="rank")
    ids = tc.compute((T, K), lambda t, r: tc.sum(tc.where(rank[t, e4] == r, e4, 0), axis=e4), name="ids",
                     dtype="int32")
    w = tc.compute((T, K), lambda t, r: tc.sum(tc.where(rank[t, e5] == r, p[t, e5], 0.0), axis=e5), name="w")
    wsum = tc.compute((T,), lambda t: tc.sum(w[t, r2], axis=r2), name="wsum")
    weights = tc.compute((T, K), lambda t, r: w[t, r] / wsum[t], name="weights")
    s = tc.create_schedule([weights, ids])
    if fast:
        BT = tc.knob("BT", [16, 32, 8])
        BE = tc.knob("BE", [64, 128, 32])
        t, r = weights.axis
        to, ti = s[weights].split(t, BT)
        ro, ri = s[weights].split(r, K)
        s[weights].reorder(to, ro, ti, ri)
        s[weights].bind(to, "program_id.0")
        for stage, ax in ((mx, e1), (den, e2), (ids, e4), (w, e5), (wsum, r2)):
            s[stage].split(ax, BE if ax is not r2 else K)
        for stage in (ids, w):
            s[stage].split(stage.axis[1], K)  # the K ranks: one tile
        s[p].compute_inline()
        s[rank].split(rank.axis[1], BE)
        s[rank].split(e3, BE)
        for stage in (mx, den, rank, w, wsum, ids):
            s[stage].compute_at(s[weights], to)
    return s, [G, weights, ids]


def inputs(sizes, device):
    return [harness.randn((sizes["T"], sizes["E"]), torch.float32, device, scale=2.0)]


def reference(g):
    p = torch.softmax(g.float(), dim=-1)
    w, ids = torch.topk(p, K, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), ids.to(torch.int32)
