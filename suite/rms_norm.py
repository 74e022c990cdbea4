"""RMSNorm's forward with its rstd output (what the backward reads), Llama's casting: the mean square and
rstd in float32, X * rstd rounded to X's dtype before the weight multiplies it.

    rstd[r] = 1 / sqrt(sum_c X[r, c]^2 / N + eps)
    Y[r, c] = bf16(X[r, c] * rstd[r]) * w[c]          (rounded to bfloat16)

Fast schedule: ROWS rows per program, the sum of squares computed at Y's rows over column tiles, rstd
stored beside Y (Liger's kernel is a program per row with the whole row in one block).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel liger_kernel/ops/rms_norm.py: _rms_norm_forward_kernel (casting_mode 'llama', "
            "offset 0; stores RSTD)")
EPS = 1e-6
SIZES = [dict(M=37, N=45), dict(M=1, N=300), dict(M=5, N=1), dict(M=3, N=1031)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    w = tc.placeholder((N,), "bfloat16", name="w")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c].astype("float32") * X[r, c], axis=c), name="ss")
    rstd = tc.compute((M,), lambda r: tc.rsqrt(ss[r] / N + EPS), name="rstd")
    Y = tc.compute((M, N), lambda r, col: (X[r, col] * rstd[r]).astype("bfloat16") * w[col], name="Y",
                   dtype="bfloat16")
    s = tc.create_schedule([Y, rstd])
    if fast:
        r, col = Y.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        ro, ri = s[Y].split(r, tc.knob("ROWS", [1, 2, 4]))
        co, ci = s[Y].split(col, block)
        s[Y].reorder(ro, co, ri, ci)
        s[Y].bind(ro, "program_id.0")
        s[ss].split(c, block)
        s[ss].compute_at(s[Y], ro)
        s[rstd].compute_at(s[Y], ro)
        s[Y].num_warps(tc.knob("warps", [4, 8]))
    return s, [X, w, Y, rstd]


def inputs(sizes, device):
    M, N = sizes["M"], sizes["N"]
    return [harness.randn((M, N), torch.bfloat16, device), harness.randn((N,), torch.bfloat16, device)]


def reference(x, w):
    xf = x.float()
    rstd = torch.rsqrt((xf * xf).mean(1) + EPS)
    y = ((xf * rstd[:, None]).to(torch.bfloat16).float() * w.float()).to(torch.bfloat16)
    return y, rstd


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(M=4096, N=8192)


def torch_ref(x, w):
    """HF Llama's LlamaRMSNorm eagerly: the mean square and rstd in float32, x * rstd rounded to x's dtype, times
    the weight in bfloat16; rstd returned too (Liger's kernel stores it for the backward)."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return (xf * rstd).to(x.dtype) * w, rstd.squeeze(-1)


def original(x, w):
    """Liger-Kernel's forward (liger_kernel.ops.rms_norm.rms_norm_forward, casting_mode 'llama', offset 0: Y and
    RSTD); liger_kernel is imported here, so a machine without it can still import this module."""
    from liger_kernel.ops.rms_norm import rms_norm_forward

    y, _, rstd, *_ = rms_norm_forward(x, w, EPS, 0.0, "llama", None)
    return y, rstd
