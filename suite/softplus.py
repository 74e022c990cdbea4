"""Softplus with torch's beta and threshold: above the threshold the input itself, else log1p(exp(beta x)) / beta.

    Y[r, c] = where(beta * X[r, c] > threshold, X[r, c], log1p(exp(beta * X[r, c])) / beta)
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("PyTorch aten/src/ATen/native/cuda/ActivationSoftplusKernel.cu: softplus_kernel "
            "((x * beta) > threshold ? x : log1p(exp(x * beta)) / beta)")
BETA, THRESHOLD = 2.0, 20.0
SIZES = [dict(M=37, N=45), dict(M=1, N=1), dict(M=3, N=2000)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float16", name="X")
    Y = tc.compute((M, N), lambda r, c: tc.where(X[r, c] * BETA > THRESHOLD, X[r, c],
                                                 tc.log1p(tc.exp(X[r, c] * BETA)) / BETA), name="Y", dtype="float16")
    s = tc.create_schedule(Y)
    if fast:
        r, c = Y.axis
        co, _ = s[Y].split(c, tc.knob("BLOCK", [512, 1024]))
        s[Y].bind(r, "program_id.0")
        s[Y].bind(co, "program_id.1")
    return s, [X, Y]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], sizes["N"]), torch.float16, device, scale=8.0)]


def reference(x):
    return torch.nn.functional.softplus(x.float(), beta=BETA, threshold=THRESHOLD).half()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (the original is
# PyTorch's own kernel: torch_ref).
BENCH = dict(M=8192, N=8192)


def torch_ref(x):
    """F.softplus with the same beta and threshold, float16."""
    return torch.nn.functional.softplus(x, beta=BETA, threshold=THRESHOLD)
