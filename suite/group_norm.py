"""Group norm's forward, Liger-Kernel's kernel: a program per (batch, group) sums the group's values and their
squares, then normalizes each channel of the group with its own weight and bias.

    mean[b, g]     = sum_{cg, x} X[b, g, cg, x] / (CPG * HW)
    rstd[b, g]     = 1 / sqrt(sum_{cg, x} X[b, g, cg, x]^2 / (CPG * HW) - mean[b, g]^2 + eps)
    Y[b, g, cg, x] = (X[b, g, cg, x] - mean[b, g]) * rstd[b, g] * W[g, cg] + B[g, cg]

(E[X^2] - E[X]^2, as Liger computes the variance). X is the (batch, channels, HW) activation viewed on the
host as (batch, G, CPG, HW), as Liger views it as (batch, G, CPG * HW), and W, B as (G, CPG); CPG, the
channels per group, is a constant (4); float32. Y, mean and rstd are the outputs. Fast schedule: a program
per (b, g) as Liger's, the two sums over the group's channels (a loop) and HW tiles, then Y's loop over HW
tiles with the group's channels as a tile.

The view is needed: written on X (batch, G * CPG, HW), G is no plain dimension of an input (a call cannot
read it: ArgumentError), and Y's reads mean[b, ch // CPG] are computed positions, which compute_at refuses.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = "Liger-Kernel src/liger_kernel/ops/group_norm.py: _group_norm_forward_kernel (stores Y, Mean, RSTD)"
CPG = 4
EPS = 1e-6
SIZES = [dict(NB=3, G=5, HW=45), dict(NB=2, G=1, HW=1), dict(NB=1, G=2, HW=300)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 1 s here
def make(fast: bool):
    NB, G, HW = tc.size_vars("NB G HW")
    X = tc.placeholder((NB, G, CPG, HW), "float32", name="X")
    W = tc.placeholder((G, CPG), "float32", name="W")
    Bias = tc.placeholder((G, CPG), "float32", name="Bias")
    cg, x = tc.reduce_axis(CPG, name="cg"), tc.reduce_axis(HW, name="x")
    cg2, x2 = tc.reduce_axis(CPG, name="cg2"), tc.reduce_axis(HW, name="x2")
    s1 = tc.compute((NB, G), lambda b, g: tc.sum(X[b, g, cg, x], axis=[cg, x]), name="s1")
    s2 = tc.compute((NB, G), lambda b, g: tc.sum(X[b, g, cg2, x2] * X[b, g, cg2, x2], axis=[cg2, x2]), name="s2")
    mean = tc.compute((NB, G), lambda b, g: s1[b, g] / (CPG * HW), name="mean")
    rstd = tc.compute((NB, G), lambda b, g: tc.rsqrt(s2[b, g] / (CPG * HW) - mean[b, g] * mean[b, g] + EPS),
                      name="rstd")
    Y = tc.compute((NB, G, CPG, HW), lambda b, g, c, hw: (X[b, g, c, hw] - mean[b, g]) * rstd[b, g] * W[g, c]
                   + Bias[g, c], name="Y")
    s = tc.create_schedule([Y, mean, rstd])
    if fast:
        b, g, c, hw = Y.axis
        block = tc.knob("BLOCK", [1024, 2048, 256])
        co, ci = s[Y].split(c, CPG)
        ho, hi = s[Y].split(hw, block)
        s[Y].reorder(b, g, co, ho, ci, hi)
        s[Y].bind(b, "program_id.0")
        s[Y].bind(g, "program_id.1")
        s[s1].split(x, block)  # the group's channels a serial loop outside: a tile of them would
        s[s2].split(x2, block)  # reorder the sum's updates, which isl refuses
        for T in (s1, s2, mean, rstd):
            s[T].compute_at(s[Y], g)
        s[Y].num_warps(tc.knob("warps", [4, 8]))
    return s, [X, W, Bias, Y, mean, rstd]


def inputs(sizes, device):
    NB, G, HW = sizes["NB"], sizes["G"], sizes["HW"]
    x = harness.randn((NB, G * CPG, HW), torch.float32, device, scale=2.0) + 1.0
    w = harness.randn((G * CPG,), torch.float32, device)
    b = harness.randn((G * CPG,), torch.float32, device)
    return [x.view(NB, G, CPG, HW), w.view(G, CPG), b.view(G, CPG)]


def reference(x, w, bias):
    NB, G, _, HW = x.shape
    xd = x.double()
    n = CPG * HW
    mean = xd.sum((2, 3)) / n
    rstd = torch.rsqrt((xd * xd).sum((2, 3)) / n - mean * mean + EPS)
    y = (xd - mean[:, :, None, None]) * rstd[:, :, None, None] * w.double()[None, :, :, None] \
        + bias.double()[None, :, :, None]
    return y.float(), mean.float(), rstd.float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (32 images of 256 channels in 64 groups, 64 x 64
# pixels), what a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(NB=32, G=64, HW=4096)


def torch_ref(x, w, bias):
    """The op F.group_norm runs (aten's native_group_norm, which also returns the mean and rstd the backward
    reads) on the (batch, channels, HW) activation, float32."""
    NB, G, _, HW = x.shape
    y, mean, rstd = torch.native_group_norm(x.reshape(NB, G * CPG, HW), w.reshape(-1), bias.reshape(-1), NB,
                                            G * CPG, HW, G, EPS)
    return y.view(x.shape), mean, rstd


def original(x, w, bias):
    """Liger-Kernel's forward (liger_kernel.ops.group_norm.group_norm_forward: Y, Mean, RSTD), imported here (it may
    be missing)."""
    from liger_kernel.ops.group_norm import group_norm_forward

    NB, G, _, HW = x.shape
    y, _, mean, rstd, _ = group_norm_forward(x.reshape(NB, G * CPG, HW), G * CPG, G, w.reshape(-1),
                                             bias.reshape(-1), EPS)
    return y.view(x.shape), mean, rstd
