"""Layer norm's forward with its mean and rstd outputs (what the backward reads).

    mean[r] = sum_c X[r, c] / N
    rstd[r] = 1 / sqrt(sum_c (X[r, c] - mean[r])^2 / N + eps)
    Y[r, c] = (X[r, c] - mean[r]) * rstd[r] * w[c] + b[c]

Fast schedule: a program per row (as the tutorial's), the two row sums computed at Y's row over column tiles,
mean and rstd stored beside Y.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Triton tutorial 05, python/tutorials/05-layer-norm.py: _layer_norm_fwd_fused (outputs Mean, Rstd); "
            "Liger-Kernel liger_kernel/ops/layer_norm.py: _layer_norm_forward_kernel")
EPS = 1e-5
SIZES = [dict(M=37, N=300), dict(M=1, N=1), dict(M=5, N=1), dict(M=3, N=2049)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float16", name="X")
    w = tc.placeholder((N,), "float16", name="w")
    b = tc.placeholder((N,), "float16", name="b")
    c, c2 = tc.reduce_axis(N, name="c"), tc.reduce_axis(N, name="c2")
    total = tc.compute((M,), lambda r: tc.sum(X[r, c].astype("float32"), axis=c), name="total")
    mean = tc.compute((M,), lambda r: total[r] / N, name="mean")
    sq = tc.compute((M,), lambda r: tc.sum((X[r, c2] - mean[r]) * (X[r, c2] - mean[r]), axis=c2), name="sq")
    rstd = tc.compute((M,), lambda r: tc.rsqrt(sq[r] / N + EPS), name="rstd")
    Y = tc.compute((M, N), lambda r, col: (X[r, col] - mean[r]) * rstd[r] * w[col] + b[col], name="Y",
                   dtype="float16")
    s = tc.create_schedule([Y, mean, rstd])
    if fast:
        r, col = Y.axis
        s[Y].split(col, tc.knob("BLOCK", [1024, 2048, 4096]))
        s[Y].bind(r, "program_id.0")
        s[total].split(c, tc.knob("BLOCK", [1024, 2048, 4096]))
        s[sq].split(c2, tc.knob("BLOCK", [1024, 2048, 4096]))
        for stage in (total, mean, sq, rstd):
            s[stage].compute_at(s[Y], r)
    return s, [X, w, b, Y, mean, rstd]


def inputs(sizes, device):
    M, N = sizes["M"], sizes["N"]
    return [harness.randn((M, N), torch.float16, device), harness.randn((N,), torch.float16, device),
            harness.randn((N,), torch.float16, device)]


def reference(x, w, b):
    xf = x.float()
    mean = xf.mean(1)
    rstd = torch.rsqrt(((xf - mean[:, None]) ** 2).mean(1) + EPS)
    y = ((xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()).half()
    return y, mean, rstd


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(M=4096, N=8192)


def torch_ref(x, w, b):
    """PyTorch eagerly, in float16: the op F.layer_norm runs in training (aten's native_layer_norm), which also
    returns the mean and rstd that the backward reads ((M, 1), float32 on the GPU; x's dtype on the CPU)."""
    y, mean, rstd = torch.native_layer_norm(x, [x.shape[1]], w, b, EPS)
    return y, mean.view(-1).float(), rstd.view(-1).float()


def original(x, w, b):
    """Liger-Kernel's forward (liger_kernel.ops.layer_norm.layer_norm_forward: Y, Mean, RSTD); liger_kernel is
    imported here, so a machine without it can still import this module."""
    from liger_kernel.ops.layer_norm import layer_norm_forward

    y, _, mean, rstd, _, _ = layer_norm_forward(x, w, b, EPS)
    return y, mean, rstd
