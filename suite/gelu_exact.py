"""Exact GELU (erf form, torch's default `approximate='none'`), bfloat16 in and out, computed in float32.

    Y[r, c] = 0.5 * X[r, c] * (1 + erf(X[r, c] / sqrt(2)))
"""

import math

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("PyTorch aten/src/ATen/native/cuda/ActivationGeluKernel.cu: GeluCUDAKernelImpl, GeluType::None "
            "(0.5 * x * (1 + erf(x * M_SQRT1_2)))")
SIZES = [dict(M=37, N=45), dict(M=1, N=1), dict(M=2, N=3000)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    Y = tc.compute((M, N), lambda r, c: 0.5 * X[r, c] * (1.0 + tc.erf(X[r, c] * (1 / math.sqrt(2)))), name="Y",
                   dtype="bfloat16")
    s = tc.create_schedule(Y)
    if fast:
        r, c = Y.axis
        ro, co, _, _ = s[Y].tile(r, c, tc.knob("ROWS", [1, 4]), tc.knob("BLOCK", [512, 1024]))
        s[Y].bind(ro, "program_id.0")
        s[Y].bind(co, "program_id.1")
    return s, [X, Y]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], sizes["N"]), torch.bfloat16, device, scale=2.0)]


def reference(x):
    # in float64: torch's vectorized float32 CPU GELU gives NaN for +inf on AVX-512 (2.13.0 on an AMD EPYC; its
    # scalar path, float64 and CUDA give inf, as the formula does); float64 rounds to the same bfloat16 here
    return torch.nn.functional.gelu(x.double()).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (the original is
# PyTorch's own kernel: torch_ref).
BENCH = dict(M=8192, N=8192)


def torch_ref(x):
    """F.gelu (erf form) in bfloat16."""
    return torch.nn.functional.gelu(x)
