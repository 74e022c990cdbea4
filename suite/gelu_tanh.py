"""GELU with the tanh approximation, llm.c's forward kernel: one output per element of a flat array.

    out[i] = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))     (x = inp[i], in float32)

in bfloat16 (llm.c's floatX), the arithmetic in float32. Fast schedule: BLOCK elements per program
(llm.c's kernel takes x128 packs of 8 bf16 per thread, 512 threads a block).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("llm.c (karpathy/llm.c) llmc/gelu.cuh (train_gpt2.cu before the split into llmc/): "
            "gelu_forward_kernel2, GELU_SCALING_FACTOR sqrtf(2/pi)")
SIZES = [dict(N=4133), dict(N=1), dict(N=45), dict(N=10000)]
SQRT_2_OVER_PI = 0.7978845608028654


def make(fast: bool):
    N = tc.size_vars("N")
    inp = tc.placeholder((N,), "bfloat16", name="inp")

    def gelu(x):
        cube = 0.044715 * x * x * x
        return 0.5 * x * (1.0 + tc.tanh(SQRT_2_OVER_PI * (x + cube)))

    out = tc.compute((N,), lambda i: gelu(inp[i]), name="out", dtype="bfloat16")
    s = tc.create_schedule(out)
    if fast:
        (i,) = out.axis
        io, ii = s[out].split(i, tc.knob("BLOCK", [4096, 1024, 8192, 512]))
        s[out].bind(io, "program_id.0")
        s[out].num_warps(tc.knob("warps", [4, 8]))
    return s, [inp, out]


def inputs(sizes, device):
    return [harness.randn((sizes["N"],), torch.bfloat16, device, scale=2.0)]


def reference(inp):
    x = inp.float()
    cube = 0.044715 * x * x * x
    return (0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + cube)))).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (64M elements: GPT-2's 4C = 3072 x 8 x 1024 tokens,
# times about 2.7) and what a PyTorch user runs (llm.c's CUDA kernel is not imported: no `original`).
BENCH = dict(N=2 ** 26)


def torch_ref(inp):
    """F.gelu(approximate='tanh') in bfloat16 (computed in float32 inside, rounded once)."""
    return torch.nn.functional.gelu(inp, approximate="tanh")
