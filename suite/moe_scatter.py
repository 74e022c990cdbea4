"""MoE's token permutation, as vLLM's moe_align_block_size writes it: count the tokens routed to each expert,
their running sum (each expert's first slot), then write each token's id at its expert's slot plus its rank
among that expert's tokens:

    count[expert[i]] += 1                                  (tc.scatter, combine="add": int32 atomics)
    start[e]    = cumsum(count)[e] - count[e]              (tc.cumsum: a scan)
    rank[i]     = sum_{i' < i} (expert[i'] == expert[i])
    sorted_ids[start[expert[i]] + rank[i]] = i             (tc.scatter, unique=True: the positions are a permutation)

The result is the tokens ordered by expert, each expert's tokens in token order (torch.argsort(expert,
stable=True)); the original also pads each expert's run to a multiple of the GEMM's block size, which this
module leaves out. The rank is a dense count, O(T^2) comparisons, where the original keeps a running counter
per expert in shared memory (a per-expert prefix of the one-hot matrix; that needs a scan over tokens per
expert, O(T * E), or atomics whose order is the data's). The number of experts E is in no input's shape: the
call gives it (`kernel(expert, E=...)`). Expert ids are in [0, E). Fast schedule: tiles of BT tokens per program
for the count and the scatter, the rank's token pairs in (BT x BJ) tiles, the experts' scan in one tile.
"""

import torch

import tilec as tc

ORIGINAL = ("vLLM csrc/moe/moe_align_sum_kernels.cu: moe_align_block_size_kernel (the per-expert counts, their "
            "cumsum, then sorted_token_ids[cumsum[expert] + rank] = token)")
CALL_SIZES = ("E",)
SPECIAL = False  # the input is expert ids: it holds no NaN or infinity
SIZES = [dict(T=300, E=8), dict(T=1, E=1), dict(T=37, E=5)]


def make(fast: bool):
    T, E = tc.size_vars("T E")
    expert = tc.placeholder((T,), "int32", name="expert")
    count = tc.scatter((E,), (T,), lambda t: expert[t], lambda t: 1, combine="add", dtype="int32", name="count")
    total = tc.compute((E,), lambda e: tc.cumsum(count[e], axis=e), name="total")
    start = tc.compute((E,), lambda e: total[e] - count[e], name="start")
    j = tc.reduce_axis(T, name="j")
    rank = tc.compute((T,), lambda t: tc.sum(tc.where(j < t, (expert[j] == expert[t]).astype("int32"), 0), axis=j),
                      name="rank")
    sorted_ids = tc.scatter((T,), (T,), lambda t: start[expert[t]] + rank[t], lambda t: t, unique=True,
                            dtype="int32", name="sorted_ids")
    s = tc.create_schedule(sorted_ids)
    if fast:
        bt = tc.knob("BT", [128, 64, 256])
        for st in (count, sorted_ids):
            (t,) = st.axis
            to, ti = s[st].split(t, bt)
            s[st].bind(to, "program_id.0")
        (t,) = rank.axis
        to, ti = s[rank].split(t, bt)
        jo, ji = s[rank].split(j, tc.knob("BJ", [64, 32, 128]))
        s[rank].reorder(to, jo, ti, ji)
        s[rank].bind(to, "program_id.0")
        s[start].compute_at(s[total], total.axis[0])
    return s, [expert, sorted_ids]


def inputs(sizes, device):
    return [torch.randint(0, sizes["E"], (sizes["T"],), dtype=torch.int32, device=device)]


def reference(expert, E):
    return torch.argsort(expert, stable=True).to(torch.int32)


BENCH = dict(T=16384, E=64)


def torch_ref(expert, E):
    """torch.argsort(stable=True) of the expert ids: the tokens grouped by expert, in token order."""
    return torch.argsort(expert, stable=True).to(torch.int32)
