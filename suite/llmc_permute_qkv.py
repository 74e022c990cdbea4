"""llm.c's attention input permute: the flat (B, T, 3C) qkv projection split into q, k, v of (B, NH, T, HS), with
C = NH * HS: NH is read as the one unknown factor of 3 * NH * HS (HS from the head-size input's shape).

    q[b, h, t, d] = qkv[b, t, h * HS + d]; k: + C; v: + 2C
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = "llm.c dev/cuda/attention_forward.cu / train_gpt2.cu: permute_kernel (inp (B, T, 3, NH, HS) -> q, k, v)"
SIZES = [dict(B=2, T=7, NH=3, HS=5), dict(B=1, T=1, NH=1, HS=1), dict(B=1, T=33, NH=2, HS=64)]


def make(fast: bool):
    B, T, NH, HS = tc.size_vars("B T NH HS")
    qkv = tc.placeholder((B, T, 3 * NH * HS), "float32", name="qkv")
    # llm.c passes the head size as an int; tilec reads sizes from shapes only (sizes given at the call are not in
    # the language yet), so an input whose shape is (HS,) carries it and is not read
    hs = tc.placeholder((HS,), "int8", name="hs")
    C = NH * HS
    q, k, v = (tc.compute((B, NH, T, HS), lambda b, h, t, d, p=p: qkv[b, t, p * C + h * HS + d], name=n)
               for p, n in enumerate(("q", "k", "v")))
    s = tc.create_schedule([q, k, v])
    if fast:
        for o in (q, k, v):
            b, h, t, d = o.axis
            bh = s[o].fuse(b, h)
            to, _ = s[o].split(t, tc.knob("BT", [16, 64]))
            s[o].bind(bh, "program_id.0")
            s[o].bind(to, "program_id.1")
    return s, [qkv, hs, q, k, v]


def inputs(sizes, device):
    B, T, NH, HS = sizes["B"], sizes["T"], sizes["NH"], sizes["HS"]
    return [harness.randn((B, T, 3 * NH * HS), torch.float32, device), torch.ones(HS, dtype=torch.int8, device=device)]


def reference(qkv, hs):
    B, T, C3 = qkv.shape
    HS = hs.shape[0]
    NH = C3 // 3 // HS
    parts = qkv.view(B, T, 3, NH, HS).permute(2, 0, 3, 1, 4)
    return tuple(p.contiguous() for p in parts)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (GPT-2 XL: 25 heads of 64, 16 sequences of 1024
# tokens) and what a PyTorch user runs (llm.c's CUDA kernel is not imported: no `original`).
BENCH = dict(B=16, T=1024, NH=25, HS=64)


def torch_ref(qkv, hs):
    """llm.c's PyTorch model: the (B, T, 3C) projection viewed as (B, T, 3, NH, HS), split and permuted into three
    contiguous (B, NH, T, HS) tensors, float32."""
    B, T, C3 = qkv.shape
    HS = hs.shape[0]
    q, k, v = qkv.view(B, T, 3, C3 // 3 // HS, HS).permute(2, 0, 3, 1, 4).unbind(0)
    return q.contiguous(), k.contiguous(), v.contiguous()
