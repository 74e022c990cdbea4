"""Softmax's backward from its output, as Liger-Kernel's kernel computes it: a program per row sums dy * y
over the row, then writes the gradient.

    dot[r]   = sum_c dy[r, c] * y[r, c]
    dx[r, c] = y[r, c] * (dy[r, c] - dot[r])

float32 (Liger's kernel keeps the input dtype). Fast schedule: ROWS rows per program, dot computed at dx's
rows over column tiles (the multi-block kernel's first loop), then dx's loop.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel src/liger_kernel/ops/softmax.py: _softmax_multi_block_backward_kernel / "
            "_softmax_single_block_backward_kernel (dx = y * (dy - sum(dy * y)))")
SIZES = [dict(M=19, N=45), dict(M=1, N=1), dict(M=5, N=1), dict(M=3, N=1100)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    dy = tc.placeholder((M, N), "float32", name="dy")
    y = tc.placeholder((M, N), "float32", name="y")
    c = tc.reduce_axis(N, name="c")
    dot = tc.compute((M,), lambda r: tc.sum(dy[r, c] * y[r, c], axis=c), name="dot")
    dx = tc.compute((M, N), lambda r, col: y[r, col] * (dy[r, col] - dot[r]), name="dx")
    s = tc.create_schedule(dx)
    if fast:
        r, col = dx.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        ro, ri = s[dx].split(r, tc.knob("ROWS", [1, 2, 4]))
        co, ci = s[dx].split(col, block)
        s[dx].reorder(ro, co, ri, ci)
        s[dx].bind(ro, "program_id.0")
        s[dot].split(c, block)
        s[dot].compute_at(s[dx], ro)
        s[dx].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [dy, y, dx]


def inputs(sizes, device):
    M, N = sizes["M"], sizes["N"]
    y = torch.softmax(harness.randn((M, N), torch.float32, device, scale=2.0), 1)
    return [harness.randn((M, N), torch.float32, device), y]


def reference(dy, y):
    dyd, yd = dy.double(), y.double()
    return (yd * (dyd - (dyd * yd).sum(1, keepdim=True))).float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(M=4096, N=8192)


def torch_ref(dy, y):
    """What autograd runs for torch.softmax's backward: aten's _softmax_backward_data, float32."""
    return torch._softmax_backward_data(dy, y, -1, y.dtype)


def original(dy, y):
    """Liger-Kernel's backward (liger_kernel.ops.softmax._softmax_backward, what LigerSoftmaxFunction.backward
    calls), with the block size and warps its forward picks (calculate_settings of the row length; one block
    when the row fits it). liger_kernel is imported here (it may be missing)."""
    from liger_kernel.ops.softmax import _softmax_backward
    from liger_kernel.ops.utils import calculate_settings

    block, warps = calculate_settings(dy.shape[-1])
    return _softmax_backward(dy, y, block, warps, dy.shape[-1] > block)
