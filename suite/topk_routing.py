"""Mixture-of-experts routing: the softmax of each token's router logits over E experts, its K largest
probabilities and their experts (in decreasing order), the K weights renormalized to sum to 1.

    p[t, e]       = exp(G[t, e] - max_e G) / sum_e exp(G[t, e] - max_e G)
    order[t, :]   = argsort(p[t, :], descending)          (tc.argsort: the experts, most probable first)
    ids[t, r]     = order[t, r]                           (r < K)
    w[t, r]       = p[t, order[t, r]]                     (a gather of G, p's formula there)
    weights[t, r] = w[t, r] / sum_r2 w[t, r2]

The experts are ordered by one sort of the row (`tl.sort` of the probabilities' keys packed with their
positions), O(E log^2 E) per token, where vLLM's topk_softmax selects the K largest with K passes of a
warp-level argmax, O(E * K): for K = 2 of 64 experts the sort does more work, but it is one pass and the row
stays in registers. A sort needs its whole axis in one tile: E <= 256 (`tc.assume`, vLLM's fast path's limit
too). Equal probabilities keep the lower expert first (a stable sort); torch.topk's order among equal values
is its own, so the logits are random float32 values, where two equal probabilities do not occur. K is a
constant of the module. The ids are int32, as vLLM's topk_ids. Fast schedule: a program per tile of BT
tokens; the softmax statistics, the sorted experts of the BT x 256 tile, the gather and the renormalization
computed there, the two outputs stored side by side.

Before sorts were in the language, the rank of each expert was counted by comparing it with every other,
O(E^2) per token, and rank r selected by a masked sum.
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
SIZES = [dict(T=6, E=24), dict(T=1, E=8), dict(T=5, E=2), dict(T=3, E=60)]  # the default schedule sorts a row per element: small in the interpreter


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take seconds here
def make(fast: bool):
    T, E = tc.size_vars("T E")
    tc.assume(E <= 256)
    G = tc.placeholder((T, E), "float32", name="G")
    e1, e2 = (tc.reduce_axis(E, name=n) for n in ("e1", "e2"))
    r2 = tc.reduce_axis(K, name="r2")
    mx = tc.compute((T,), lambda t: tc.max(G[t, e1], axis=e1), name="mx")
    den = tc.compute((T,), lambda t: tc.sum(tc.exp(G[t, e2] - mx[t]), axis=e2), name="den")
    p = tc.compute((T, E), lambda t, e: tc.exp(G[t, e] - mx[t]) / den[t], name="p")
    order = tc.compute((T, E), lambda t, e: tc.argsort(p[t, e], axis=e, descending=True), name="order")
    ids = tc.compute((T, K), lambda t, r: order[t, r], name="ids")
    # p at the expert's position, written out (p's formula at a gathered column): mx and den are then read
    # at plain positions, which lets them be placed in the tokens' loop with the rest
    w = tc.compute((T, K), lambda t, r: tc.exp(G[t, order[t, r]] - mx[t]) / den[t], name="w")
    wsum = tc.compute((T,), lambda t: tc.sum(w[t, r2], axis=r2), name="wsum")
    weights = tc.compute((T, K), lambda t, r: w[t, r] / wsum[t], name="weights")
    s = tc.create_schedule([weights, ids])
    if fast:
        BT = tc.knob("BT", [16, 32, 8])
        t, r = weights.axis
        to, ti = s[weights].split(t, BT)
        ro, ri = s[weights].split(r, K)
        s[weights].reorder(to, ro, ti, ri)
        s[weights].bind(to, "program_id.0")
        for stage, ax in ((mx, e1), (den, e2), (wsum, r2)):
            s[stage].split(ax, 256 if ax is not r2 else K)
        for stage in (ids, w):
            s[stage].split(stage.axis[1], K)  # the K ranks: one tile
        s[order].split(order.axis[1], 256)  # the whole row of experts: one tile
        s[p].compute_inline()
        for stage in (mx, den, order, w, wsum):
            s[stage].compute_at(s[weights], to)
        s[ids].compute_at(s[weights], ro)  # beside weights, its ranks following weights' (through order)
    return s, [G, weights, ids]


def inputs(sizes, device):
    return [harness.randn((sizes["T"], sizes["E"]), torch.float32, device, scale=2.0)]


def reference(g):
    p = torch.softmax(g.float(), dim=-1)
    w, ids = torch.topk(p, K, dim=-1)
    return w / w.sum(dim=-1, keepdim=True), ids.to(torch.int32)
