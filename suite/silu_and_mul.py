"""vLLM's silu_and_mul: the gate and the up projection side by side in one (M, 2 * D) input, D read from it.

    Y[m, d] = silu(X[m, d]) * X[m, D + d]
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = "vLLM csrc/activation_kernels.cu: act_and_mul_kernel with silu_kernel (silu_and_mul, input [..., 2 * d])"
SIZES = [dict(M=37, D=45), dict(M=1, D=1), dict(M=3, D=1500)]


def make(fast: bool):
    M, D = tc.size_vars("M D")
    X = tc.placeholder((M, 2 * D), "bfloat16", name="X")
    Y = tc.compute((M, D), lambda m, d: tc.silu(X[m, d]) * X[m, D + d], name="Y", dtype="bfloat16")
    s = tc.create_schedule(Y)
    if fast:
        m, d = Y.axis
        do, _ = s[Y].split(d, tc.knob("BLOCK", [512, 1024]))
        s[Y].bind(m, "program_id.0")
        s[Y].bind(do, "program_id.1")
    return s, [X, Y]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], 2 * sizes["D"]), torch.bfloat16, device)]


def reference(x):
    d = x.shape[1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[:, :d]) * xf[:, d:]).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (8192 tokens, Llama 3 8B's intermediate size) and
# what a PyTorch user runs (vLLM's CUDA kernel is not imported: no `original`).
BENCH = dict(M=8192, D=14336)


def torch_ref(x):
    """vLLM's SiluAndMul.forward_native: F.silu(x[..., :d]) * x[..., d:], bfloat16."""
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]
