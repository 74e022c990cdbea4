"""MoE's token permutation, as vLLM's moe_align_block_size writes it: count the tokens routed to each expert,
their running sum (each expert's first slot), then write each token's id at its expert's slot plus its rank
among that expert's tokens:

    count[e]    = sum_i (expert[i] == e)
    start[e]    = cumsum(count)[e] - count[e]              (tc.cumsum: a scan, in the language)
    rank[i]     = sum_{i' < i} (expert[i'] == expert[i])
    sorted_ids[start[expert[i]] + rank[i]] = i             (a scatter)

Refused: the last step writes at a position computed from data, and a compute defines each element of its own
tensor (`tc.compute(shape, lambda pos: ...)`); there is no `out[idx[i]] = ...` (docs/language.md, "Not in the
language yet": scatter). The dense form would search, for each slot, the token that lands there: O(T^2).
"""

import tilec as tc

ORIGINAL = ("vLLM csrc/moe/moe_align_sum_kernels.cu: moe_align_block_size_kernel (the per-expert counts, their "
            "cumsum, then sorted_token_ids[cumsum[expert] + rank] = token)")
REASON = "tensors are not assigned"


def make(fast: bool):
    T, E = tc.size_vars("T E")
    expert = tc.placeholder((T,), "int32", name="expert")
    i = tc.reduce_axis(T, name="i")
    count = tc.compute((E,), lambda e: tc.sum((expert[i] == e).astype("int32"), axis=i), name="count")
    total = tc.compute((E,), lambda e: tc.cumsum(count[e], axis=e), name="total")
    start = tc.compute((E,), lambda e: total[e] - count[e], name="start")
    j = tc.reduce_axis(T, name="j")
    rank = tc.compute((T,), lambda t: tc.sum(tc.where(j < t, (expert[j] == expert[t]).astype("int32"), 0), axis=j),
                      name="rank")
    sorted_ids = tc.placeholder((T,), "int32", name="sorted_ids")
    t = rank.axis[0]  # the kernel's last step, per token t, as a user first writes it: refused here
    sorted_ids[start[expert[t]] + rank[t]] = t
    return tc.create_schedule(sorted_ids), [expert, sorted_ids]
