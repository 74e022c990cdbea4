"""A direct 2-d convolution, stride 1, a 3 x 3 filter with zero padding 1, as TVM's "How to optimize
convolution on GPU" tutorial writes it: a padded copy of the input (zero outside, `where`), then the sum over
input channels and filter taps. NCHW here (PyTorch's layout; the tutorial's is HWCN), float32.

    Apad[n, c, y, x] = A[n, c, y - 1, x - 1] if 1 <= y <= H and 1 <= x <= W, else 0
    B[n, f, y, x]    = sum_{ry, rx, rc} Apad[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx]

Fast schedule: the tutorial's ideas in Triton's terms: Apad inlined (the tutorial's compute_inline), an
output tile of BF filters x BX columns per program and row, the taps (ry, rx) serial loops, the input
channels in BC tiles: each update is a (BF x BC) x (BC x BX) tl.dot of the filter's tap and the shifted
input row. The reduce axes are written taps first: a tile of channels inside the tap loops keeps the sum's
order (isl refuses a schedule that reorders a sum's updates).
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("TVM gallery/how_to/optimize_operators/opt_conv_cuda.py ('How to optimize convolution on GPU'): "
            "Apad = if_then_else(...) and B = te.sum(Apad[yy + ry, xx + rx, rc, nn] * W[ry, rx, rc, ff]), "
            "kernel 3, pad 1, stride 1 (layout NCHW here)")
R = 3
PAD = 1
SIZES = [dict(N=2, C=3, H=3, W=11, F=5), dict(N=1, C=1, H=1, W=1, F=1), dict(N=1, C=17, H=1, W=20, F=18)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 1 s here
def make(fast: bool):
    N, C, H, W, F = tc.size_vars("N C H W F")
    A = tc.placeholder((N, C, H, W), "float32", name="A")
    Wt = tc.placeholder((F, C, R, R), "float32", name="Wt")
    Apad = tc.compute((N, C, H + 2 * PAD, W + 2 * PAD), lambda n, c, y, x: tc.where(
        (y >= PAD) & (y - PAD < H) & (x >= PAD) & (x - PAD < W), A[n, c, y - PAD, x - PAD], 0.0), name="Apad")
    ry, rx, rc = tc.reduce_axis(R, name="ry"), tc.reduce_axis(R, name="rx"), tc.reduce_axis(C, name="rc")
    B = tc.compute((N, F, H, W), lambda n, f, y, x: tc.sum(Apad[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx],
                                                           axis=[ry, rx, rc]), name="B")
    s = tc.create_schedule(B)
    if fast:
        n, f, y, x = B.axis
        s[Apad].compute_inline()
        fo, fi = s[B].split(f, tc.knob("BF", [16, 32, 64]))
        xo, xi = s[B].split(x, tc.knob("BX", [32, 64, 16]))
        rco, rci = s[B].split(rc, tc.knob("BC", [16, 32]))
        s[B].reorder(n, y, fo, xo, ry, rx, rco, fi, xi, rci)
        ny = s[B].fuse(n, y)
        s[B].bind(ny, "program_id.0")
        s[B].bind(fo, "program_id.1")
        s[B].bind(xo, "program_id.2")
        s[B].num_warps(tc.knob("warps", [4, 8]))
    return s, [A, Wt, B]


def inputs(sizes, device):
    N, C, H, W, F = (sizes[n] for n in ("N", "C", "H", "W", "F"))
    return [harness.randn((N, C, H, W), torch.float32, device), harness.randn((F, C, R, R), torch.float32, device)]


def reference(a, w):
    # explicit sums in float64 (IEEE NaN/inf semantics, as the kernel's), not a library convolution
    N, C, H, W = a.shape
    ap = torch.nn.functional.pad(a.double(), (PAD, PAD, PAD, PAD))
    out = 0
    for ry in range(R):
        for rx in range(R):
            win = ap[:, :, ry:ry + H, rx:rx + W]                       # (N, C, H, W)
            out = out + (win[:, None] * w.double()[None, :, :, ry, rx, None, None]).sum(2)
    return out.float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (a ResNet stage at 56 x 56), what a PyTorch user
# runs, the FLOPs for the roofline (TVM's schedule is not imported: no `original`).
BENCH = dict(N=32, C=128, H=56, W=56, F=128)
FLOPS = lambda sizes: 2 * sizes["N"] * sizes["F"] * sizes["H"] * sizes["W"] * sizes["C"] * R * R


def torch_ref(a, w):
    """F.conv2d (cuDNN on the GPU), padding 1, float32, under PyTorch's defaults (cuDNN may use TF32 for it:
    torch.backends.cudnn.allow_tf32 is True by default, unlike tilec's float32 dots)."""
    return torch.nn.functional.conv2d(a, w, padding=PAD)
