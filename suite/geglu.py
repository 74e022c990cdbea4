"""GEGLU's gate with the tanh approximation of GELU, as Liger-Kernel's forward kernel computes it: GELU of
the gate in float32, rounded to the input dtype, times the up projection.

    g[r, k] = 0.5 * a * (1 + tanh(sqrt(2 / pi) * (a + 0.044715 * a^3)))     (a = a[r, k], float32)
    c[r, k] = bf16(g[r, k]) * b[r, k]                                          (rounded to bfloat16)

Fast schedule: ROWS x BLOCK tiles on a 2-d grid (Liger's program takes a whole row in one block).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel src/liger_kernel/ops/geglu.py: _geglu_tanh_forward_kernel "
            "(c_row = geglu_a.cast(b_row.dtype) * b_row)")
SIZES = [dict(M=37, N=45), dict(M=1, N=1), dict(M=3, N=1), dict(M=5, N=1100)]
SQRT_2_OVER_PI = 0.7978845608028654


def make(fast: bool):
    M, N = tc.size_vars("M N")
    a = tc.placeholder((M, N), "bfloat16", name="a")
    b = tc.placeholder((M, N), "bfloat16", name="b")

    def gelu(x):
        return 0.5 * x * (1.0 + tc.tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))

    c = tc.compute((M, N), lambda r, k: gelu(a[r, k].astype("float32")).astype("bfloat16") * b[r, k], name="c",
                   dtype="bfloat16")
    s = tc.create_schedule(c)
    if fast:
        r, k = c.axis
        ro, ko, ri, ki = s[c].tile(r, k, tc.knob("ROWS", [4, 1, 16]), tc.knob("BLOCK", [1024, 2048, 256]))
        s[c].bind(ro, "program_id.0")
        s[c].bind(ko, "program_id.1")
        s[c].num_warps(tc.knob("warps", [4, 8]))
    return s, [a, b, c]


def inputs(sizes, device):
    M, N = sizes["M"], sizes["N"]
    return [harness.randn((M, N), torch.bfloat16, device, scale=2.0), harness.randn((M, N), torch.bfloat16, device)]


def reference(a, b):
    # float32, as the kernel computes the gate: where tanh rounds to -1 (a < -5 or so) 1 + tanh is 0 there, and a
    # float64 gate's tiny value would be a relative error of 1
    x = a.float()
    g = 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))
    return (g.to(torch.bfloat16).float() * b.float()).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(M=8192, N=14336)


def torch_ref(a, b):
    """HF's GemmaMLP gate eagerly, in bfloat16: F.gelu(a, approximate='tanh') * b."""
    return torch.nn.functional.gelu(a, approximate="tanh") * b


def original(a, b):
    """Liger-Kernel's LigerGELUMulFunction (liger_kernel.ops.geglu), imported here (it may be missing)."""
    from liger_kernel.ops.geglu import LigerGELUMulFunction

    return LigerGELUMulFunction.apply(a, b)
