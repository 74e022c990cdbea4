"""vLLM's cache write: the keys and values of T new tokens (T, H, D) go into a paged cache (NB blocks of BS
slots, each slot (H, D)) at the slots that slot_mapping gives (slot = block * BS + offset; -1: a padding
token, not written), as vLLM's reshape_and_cache_flash does before attention reads the cache.

    key_out[slot_mapping[t] // BS, slot_mapping[t] % BS, h, d]   = key[t, h, d]      (tc.scatter into key_cache)
    value_out[slot_mapping[t] // BS, slot_mapping[t] % BS, h, d] = value[t, h, d]    (tc.scatter into value_cache)

Each token's (H, D) values are written once at its slot: O(T * H * D), as the original. A padding token's slot
-1 is block -1, outside the cache: not written (a position outside the output is not written). The slots are
data, so `unique=True` states what vLLM guarantees: no two tokens share a slot. The suite calls its kernels as
functions, so each scatter starts as a copy of its cache (`tc.scatter(key_cache, ...)`: torch's out-of-place
`index_put`), and the copy costs O(NB * BS * H * D); a server updates its cache in place instead, with
`tc.scatter((NB, BS, H, D), ..., init=None)` and `kernel(key, slot_mapping, out=key_cache, NB=..., BS=...)`
(tests/test_scatter.py). float16, vLLM's layout for its FlashAttention backend, (num_blocks, block_size,
num_heads, head_size). Fast schedule: a program per token, the (H, D) values in tiles of BH x BD; the two
scatters are two kernels (a scatter runs in a kernel of its own).
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("vLLM csrc/cache_kernels.cu: reshape_and_cache_flash_kernel (key_cache [num_blocks, block_size, "
            "num_heads, head_size], slot_mapping; slot_idx < 0 skipped), as reshape_and_cache_kernel for the "
            "paged-attention layout")
SIZES = [dict(T=29, NB=2, BS=16, H=3, D=40), dict(T=1, NB=1, BS=16, H=1, D=8),
         dict(T=7, NB=3, BS=8, H=2, D=64)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take seconds here
def make(fast: bool):
    T, NB, BS, H, D = tc.size_vars("T NB BS H D")
    key = tc.placeholder((T, H, D), "float16", name="key")
    value = tc.placeholder((T, H, D), "float16", name="value")
    key_cache = tc.placeholder((NB, BS, H, D), "float16", name="key_cache")
    value_cache = tc.placeholder((NB, BS, H, D), "float16", name="value_cache")
    slot_mapping = tc.placeholder((T,), "int64", name="slot_mapping")

    def at(t, h, d):
        return slot_mapping[t] // BS, slot_mapping[t] % BS, h, d

    key_out = tc.scatter(key_cache, (T, H, D), at, lambda t, h, d: key[t, h, d], unique=True, name="key_out")
    value_out = tc.scatter(value_cache, (T, H, D), at, lambda t, h, d: value[t, h, d], unique=True, name="value_out")
    s = tc.create_schedule([key_out, value_out])
    if fast:
        for out in (key_out, value_out):
            t, h, d = out.axis
            ho, hi = s[out].split(h, tc.knob("BH", [4, 2, 8]))
            do, di = s[out].split(d, tc.knob("BD", [128, 64, 32]))
            s[out].reorder(t, ho, do, hi, di)
            s[out].bind(t, "program_id.0")
    return s, [key, value, key_cache, value_cache, slot_mapping, key_out, value_out]


def inputs(sizes, device):
    T, NB, BS, H, D = (sizes[n] for n in ("T", "NB", "BS", "H", "D"))
    slots = torch.randperm(NB * BS, device=device)[:T]
    slots[torch.rand(T, device=device) < 0.2] = -1  # padding tokens: not written
    return [harness.randn((T, H, D), torch.float16, device), harness.randn((T, H, D), torch.float16, device),
            harness.randn((NB, BS, H, D), torch.float16, device), harness.randn((NB, BS, H, D), torch.float16, device),
            slots.to(torch.int64)]


def reference(key, value, key_cache, value_cache, slot_mapping):
    NB, BS, H, D = key_cache.shape
    keep = slot_mapping >= 0
    outs = []
    for new, cache in ((key, key_cache), (value, value_cache)):
        out = cache.clone()
        out.view(NB * BS, H, D)[slot_mapping[keep]] = new[keep]
        outs.append(out)
    return tuple(outs)


BENCH = dict(T=256, NB=2048, BS=16, H=8, D=128)  # 256 new tokens into a 64 MiB cache per K and V


def torch_ref(key, value, key_cache, value_cache, slot_mapping):
    """The same out-of-place update in torch: a copy of each cache, then index_put_ of the tokens with a slot."""
    NB, BS, H, D = key_cache.shape
    keep = slot_mapping >= 0
    outs = []
    for new, cache in ((key, key_cache), (value, value_cache)):
        out = cache.clone()
        out.view(NB * BS, H, D).index_put_((slot_mapping[keep],), new[keep])
        outs.append(out)
    return tuple(outs)
