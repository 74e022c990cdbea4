"""GPT-2's encoder, llm.c's forward: each token's embedding row plus its position's row.

    out[b, t, c] = wte[inp[b, t], c] + wpe[t, c]

inp int32 token ids, wte (V, C) and wpe (maxT, C) bfloat16 (llm.c's floatX), the sum in float32 rounded to
bfloat16. Fast schedule: a program per (b, t) token and a block of channels (llm.c's thread takes an x128
pack of channels of one token).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("llm.c (karpathy/llm.c) llmc/encoder.cuh (train_gpt2.cu before the split into llmc/): "
            "encoder_forward_kernel3, out[b, t, :] = wte[inp[b, t], :] + wpe[t, :]")
SIZES = [dict(B=2, T=7, V=50, P=9, C=45), dict(B=1, T=1, V=1, P=1, C=1), dict(B=3, T=5, V=11, P=5, C=300)]


def make(fast: bool):
    B, T, V, P, C = tc.size_vars("B T V P C")
    inp = tc.placeholder((B, T), "int32", name="inp")
    wte = tc.placeholder((V, C), "bfloat16", name="wte")
    wpe = tc.placeholder((P, C), "bfloat16", name="wpe")
    out = tc.compute((B, T, C), lambda b, t, c: wte[inp[b, t], c] + wpe[t, c], name="out", dtype="bfloat16")
    s = tc.create_schedule(out)
    if fast:
        b, t, c = out.axis
        co, ci = s[out].split(c, tc.knob("BLOCK", [1024, 256, 64]))
        bt = s[out].fuse(b, t)
        s[out].bind(bt, "program_id.0")
        s[out].bind(co, "program_id.1")
        s[out].num_warps(tc.knob("warps", [4, 8]))
    return s, [inp, wte, wpe, out]


def inputs(sizes, device):
    B, T, V, P, C = (sizes[n] for n in ("B", "T", "V", "P", "C"))
    return [torch.randint(0, V, (B, T), dtype=torch.int32, device=device),
            harness.randn((V, C), torch.bfloat16, device), harness.randn((P, C), torch.bfloat16, device)]


def reference(inp, wte, wpe):
    T = inp.shape[1]
    return (wte.float()[inp.long()] + wpe.float()[:T][None]).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (GPT-2 XL: C = 1600, its vocabulary and 1024
# positions; 32 sequences of 1024 tokens) and what a PyTorch user runs (llm.c's CUDA kernel is not imported: no
# `original`). Only the rows the tokens pick are read: the roofline that counts all of wte's bytes is too high.
BENCH = dict(B=32, T=1024, V=50257, P=1024, C=1600)


def torch_ref(inp, wte, wpe):
    """GPT-2's forward eagerly: F.embedding of the tokens plus the positions' rows, in bfloat16."""
    return torch.nn.functional.embedding(inp, wte) + wpe[:inp.shape[1]]
