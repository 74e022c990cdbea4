"""Row softmax, as Triton's fused-softmax tutorial computes it: the row's max, the exponentials of the row
minus its max, their sum, then the division.

    m[r]    = max_c X[r, c]
    den[r]  = sum_c exp(X[r, c] - m[r])
    Y[r, c] = exp(X[r, c] - m[r]) / den[r]

Fast schedule: ROWS rows per program (the tutorial's program takes a row, one block of the whole row),
m and den computed at Y's rows in one loop over column tiles (`online`: the sum rescaled as the max
grows), then Y's loop over the row; when the row fits one tile the loops run once and the row is read once.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Triton tutorial 02, python/tutorials/02-fused-softmax.py: softmax_kernel (row_minus_max, "
            "numerator, denominator)")
SIZES = [dict(M=9, N=45), dict(M=1, N=1), dict(M=3, N=1100)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c, c2 = tc.reduce_axis(N, name="c"), tc.reduce_axis(N, name="c2")
    m = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="m")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - m[r]), axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - m[r]) / den[r], name="Y")
    s = tc.create_schedule(Y)
    if fast:
        r, col = Y.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        s[m].split(c, block)
        s[den].split(c2, block)
        s[den].online(s[m])
        ro, ri = s[Y].split(r, tc.knob("ROWS", [1, 2, 4]))
        co, ci = s[Y].split(col, block)
        s[Y].reorder(ro, co, ri, ci)
        s[Y].bind(ro, "program_id.0")
        s[m].compute_at(s[Y], ro)
        s[den].compute_at(s[Y], ro)
        s[Y].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [X, Y]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], sizes["N"]), torch.float32, device, scale=3.0)]


def reference(x):
    xd = x.double()
    e = torch.exp(xd - xd.amax(1, keepdim=True))
    return (e / e.sum(1, keepdim=True)).float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (the original, Triton's
# tutorial kernel, is not a package to import: no `original`).
BENCH = dict(M=4096, N=8192)


def torch_ref(x):
    """torch.softmax over the rows, float32."""
    return torch.softmax(x, dim=-1)
