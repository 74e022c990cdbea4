"""Layer norm's backward for the input, as Triton's layer-norm tutorial computes it (its dX part; the partial
dW and dB sums that kernel also accumulates with locks are left out):

    xhat[r, c] = (X[r, c] - mean[r]) * rstd[r]          wdy[r, c] = w[c] * dY[r, c]
    c1[r]      = sum_c xhat * wdy / N                    c2[r]     = sum_c wdy / N
    dX[r, c]   = (wdy - (xhat * c1[r] + c2[r])) * rstd[r]

X, dY, w and dX float16, mean and rstd float32 (the forward's outputs), the arithmetic in float32. Fast
schedule: ROWS rows per program (the tutorial's program takes a row), c1 and c2 computed at dX's rows over
column tiles, then dX's loop.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Triton tutorial 05, python/tutorials/05-layer-norm.py: _layer_norm_bwd_dx_fused (the DX part; "
            "the DW/DB partial sums left out)")
EPS = 1e-5
SIZES = [dict(M=19, N=45), dict(M=1, N=1), dict(M=5, N=1), dict(M=3, N=1100)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float16", name="X")
    dY = tc.placeholder((M, N), "float16", name="dY")
    w = tc.placeholder((N,), "float16", name="w")
    mean = tc.placeholder((M,), "float32", name="mean")
    rstd = tc.placeholder((M,), "float32", name="rstd")
    c, c2 = tc.reduce_axis(N, name="c"), tc.reduce_axis(N, name="c2")

    def xhat(r, col):
        return (X[r, col] - mean[r]) * rstd[r]

    def wdy(r, col):
        return w[col] * dY[r, col]

    s1 = tc.compute((M,), lambda r: tc.sum(xhat(r, c) * wdy(r, c), axis=c), name="s1")
    s2 = tc.compute((M,), lambda r: tc.sum(wdy(r, c2), axis=c2), name="s2")
    dX = tc.compute((M, N), lambda r, col: (wdy(r, col) - (xhat(r, col) * (s1[r] / N) + s2[r] / N)) * rstd[r],
                    name="dX", dtype="float16")
    s = tc.create_schedule(dX)
    if fast:
        r, col = dX.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        ro, ri = s[dX].split(r, tc.knob("ROWS", [1, 2, 4]))
        co, ci = s[dX].split(col, block)
        s[dX].reorder(ro, co, ri, ci)
        s[dX].bind(ro, "program_id.0")
        s[s1].split(c, block)
        s[s2].split(c2, block)
        s[s1].compute_at(s[dX], ro)
        s[s2].compute_at(s[dX], ro)
        s[dX].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [X, dY, w, mean, rstd, dX]


def inputs(sizes, device):
    M, N = sizes["M"], sizes["N"]
    x = harness.randn((M, N), torch.float16, device)
    xf = x.float()
    mean = xf.mean(1)
    rstd = torch.rsqrt(((xf - mean[:, None]) ** 2).mean(1) + EPS)
    return [x, harness.randn((M, N), torch.float16, device), harness.randn((N,), torch.float16, device), mean, rstd]


def reference(x, dy, w, mean, rstd):
    N = x.shape[1]
    xhat = (x.double() - mean.double()[:, None]) * rstd.double()[:, None]
    wdy = w.double() * dy.double()
    c1 = (xhat * wdy).sum(1, keepdim=True) / N
    c2 = wdy.sum(1, keepdim=True) / N
    return ((wdy - (xhat * c1 + c2)) * rstd.double()[:, None]).to(torch.float16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (Triton's tutorial
# kernel is not a package to import: no `original`).
BENCH = dict(M=4096, N=8192)


def torch_ref(x, dy, w, mean, rstd):
    """What autograd runs for F.layer_norm's input gradient: aten's native_layer_norm_backward with only dX asked
    for, float16. Its statistics are (M, 1) in float32 on the GPU (in x's dtype on the CPU, as the CPU kernel
    reads them)."""
    stats = torch.float32 if x.is_cuda else x.dtype
    dx, _, _ = torch.ops.aten.native_layer_norm_backward(dy, x, [x.shape[1]], mean[:, None].to(stats),
                                                         rstd[:, None].to(stats), w, None, [True, False, False])
    return dx
