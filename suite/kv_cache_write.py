"""vLLM's cache write: the keys and values of T new tokens (T, H, D) go into a paged cache (NB blocks of BS
slots, each slot (H, D)) at the slots that slot_mapping gives (slot = block * BS + offset; -1: a padding
token, not written), as vLLM's reshape_and_cache_flash does before attention reads the cache.

    src[blk, off] = max_t where(slot_mapping[t] == blk * BS + off, t, -1)      (the token written there, or -1)
    key_out[blk, off, h, d]   = key[src, h, d]   if src >= 0 else key_cache[blk, off, h, d]
    value_out[blk, off, h, d] = value[src, h, d] if src >= 0 else value_cache[blk, off, h, d]

The formulation is a dense gather: every slot of the cache looks for its writer among the T tokens, O(NB * BS
* T) comparisons, and the whole cache is written out (O(NB * BS * H * D)), where the original writes in
place only the T tokens' slots (O(T * H * D)): a scatter (`cache[slot_mapping[t]] = key[t]`) and in-place
update, which the language lacks (docs/language.md, "Not in the language yet"). The caches are therefore
outputs of their own, the updated copies. vLLM's slots are distinct (each token has its own slot), and so
are this module's; with a repeated slot the max would pick the last token deterministically, where the
original's writes would race. float16, vLLM's layout for its FlashAttention backend, (num_blocks,
block_size, num_heads, head_size). Fast schedule: a program per tile of BSL slots (of the flattened
blocks x offsets), the slot's writer found over token tiles of BT, then both caches' (BSL x BH x BD) tiles.
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
    t = tc.reduce_axis(T, name="t")
    src = tc.compute((NB, BS), lambda blk, off: tc.max(tc.where(slot_mapping[t] == blk * BS + off, t, -1), axis=t),
                     name="src")
    key_out = tc.compute((NB, BS, H, D), lambda blk, off, h, d: tc.where(
        src[blk, off] >= 0, key[src[blk, off], h, d], key_cache[blk, off, h, d]), name="key_out")
    value_out = tc.compute((NB, BS, H, D), lambda blk, off, h, d: tc.where(
        src[blk, off] >= 0, value[src[blk, off], h, d], value_cache[blk, off, h, d]), name="value_out")
    s = tc.create_schedule([key_out, value_out])
    if fast:
        blk, off, h, d = key_out.axis
        so = s[key_out].fuse(blk, off)
        soo, soi = s[key_out].split(so, tc.knob("BSL", [16, 32, 8]))
        s[key_out].bind(soo, "program_id.0")
        for out in (key_out, value_out):  # the same (H, D) tiles in both caches
            _, _, h, d = out.axis
            ho, hi = s[out].split(h, tc.knob("BH", [4, 2, 8]))
            do, di = s[out].split(d, tc.knob("BD", [64, 128, 32]))
            s[out].reorder(ho, do, hi, di)
        s[src].split(t, tc.knob("BT", [32, 64, 16]))
        s[src].compute_at(s[key_out], soo)
        s[value_out].compute_at(s[key_out], soo)
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
