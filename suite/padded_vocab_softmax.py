"""Softmax over a runtime vocabulary, as a serving stack samples from an LM head whose weight is padded: the
logits have Vp columns (the vocabulary rounded up to a multiple of 64 for the GEMM), and only the first V, the
real vocabulary, which no tensor's shape holds, are the distribution:

    m[r]    = max_{c < V} X[r, c]
    den[r]  = sum_{c < V} exp(X[r, c] - m[r])
    P[r, c] = exp(X[r, c] - m[r]) / den[r]            (c < V; P is (M, V))

V is a size given at the call: `kernel(x, V=50257)` (`Kernel.call_sizes`); a read past Vp is 0, as every read
outside a tensor is, so V <= Vp is the caller's to keep (the reference slices `x[:, :V]`, which asks the same).
Fast schedule: as suite/softmax.py's, ROWS rows per program, m and den in one online loop over the row's
column tiles, then P's loop over them.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("vLLM vllm/model_executor/layers/logits_processor.py: LogitsProcessor._get_logits (logits[..., "
            ":org_vocab_size] of the padded LM head's output), then the sampler's softmax")
CALL_SIZES = ("V",)
SIZES = [dict(M=9, Vp=1152, V=1100), dict(M=1, Vp=64, V=1), dict(M=3, Vp=64, V=37)]


def make(fast: bool):
    M, Vp, V = tc.size_vars("M Vp V")
    X = tc.placeholder((M, Vp), "float32", name="X")
    c, c2 = tc.reduce_axis(V, name="c"), tc.reduce_axis(V, name="c2")
    m = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="m")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - m[r]), axis=c2), name="den")
    P = tc.compute((M, V), lambda r, col: tc.exp(X[r, col] - m[r]) / den[r], name="P")
    s = tc.create_schedule(P)
    if fast:
        r, col = P.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        s[m].split(c, block)
        s[den].split(c2, block)
        s[den].online(s[m])
        ro, ri = s[P].split(r, tc.knob("ROWS", [1, 2, 4]))
        co, ci = s[P].split(col, block)
        s[P].reorder(ro, co, ri, ci)
        s[P].bind(ro, "program_id.0")
        s[m].compute_at(s[P], ro)
        s[den].compute_at(s[P], ro)
        s[P].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [X, P]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], sizes["Vp"]), torch.float32, device, scale=3.0)]


def reference(x, V):
    xd = x[:, :V].double()
    e = torch.exp(xd - xd.amax(1, keepdim=True))
    return (e / e.sum(1, keepdim=True)).float()


# The benchmark's (benchmarks/suite.py): GPT-2's vocabulary (50257, padded to 50304) for 256 rows.
BENCH = dict(M=256, Vp=50304, V=50257)


def torch_ref(x, V):
    """torch.softmax of the first V logits, float32."""
    return torch.softmax(x[:, :V], dim=-1)
