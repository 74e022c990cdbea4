"""SwiGLU's gate, as Liger-Kernel's forward kernel computes it: SiLU of the gate in float32, rounded to the
input dtype, times the up projection.

    c[r, k] = bf16(a[r, k] * sigmoid(a[r, k])) * b[r, k]      (rounded to bfloat16)

Fast schedule: ROWS x BLOCK tiles on a 2-d grid (Liger's program takes a whole row in one block).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel src/liger_kernel/ops/swiglu.py: _swiglu_forward_kernel "
            "(c_row = silu(a_row).cast(b_row.dtype) * b_row)")
SIZES = [dict(M=37, N=45), dict(M=1, N=1), dict(M=3, N=1), dict(M=5, N=1100)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    a = tc.placeholder((M, N), "bfloat16", name="a")
    b = tc.placeholder((M, N), "bfloat16", name="b")
    c = tc.compute((M, N), lambda r, k: tc.silu(a[r, k]).astype("bfloat16") * b[r, k], name="c",
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
    af = a.float()
    g = (af * torch.sigmoid(af)).to(torch.bfloat16)
    return (g.float() * b.float()).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (Llama 3 8B's intermediate size, 8192 tokens), what
# a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(M=8192, N=14336)


def torch_ref(a, b):
    """HF's LlamaMLP gate eagerly, in bfloat16: F.silu(a) * b."""
    return torch.nn.functional.silu(a) * b


def original(a, b):
    """Liger-Kernel's LigerSiLUMulFunction (liger_kernel.ops.swiglu), imported here (it may be missing)."""
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    return LigerSiLUMulFunction.apply(a, b)
