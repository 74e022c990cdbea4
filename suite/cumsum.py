"""A row's running sum, `torch.cumsum(x, dim=-1)`, as a scan along the output's own axis:

    Y[r, j] = sum_{k <= j} X[r, k]          (tc.cumsum(X[r, j], axis=j))

PyTorch's CUDA kernel scans a row in blocks and carries the block's total into the next; Triton's tl.cumsum
scans one block. Fast schedule: ROWS rows per program, the row in tiles of BLOCK, each tile scanned with
tl.cumsum and added to the carry (the running total of the tiles before it), one read and one write of X.

Until scans were in the language this kernel was refused (a reduction cannot end at an axis of its compute:
`tc.sum(X[r, k], axis=k)` with k in [0, j]); a masked triangular sum over the whole row wrote it in O(N^2).
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("PyTorch aten/src/ATen/native/cuda/ScanKernels.cu / ScanUtils.cuh: cumsum along the last dimension; "
            "Triton's tl.cumsum (triton/language/standard.py)")
SIZES = [dict(M=9, N=1100), dict(M=1, N=1), dict(M=5, N=37)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.compute((M, N), lambda r, j: tc.cumsum(X[r, j], axis=j), name="Y")
    s = tc.create_schedule(Y)
    if fast:
        r, j = Y.axis
        ro, ri = s[Y].split(r, tc.knob("ROWS", [1, 2, 4]))
        jo, ji = s[Y].split(j, tc.knob("BLOCK", [1024, 2048, 512, 256]))
        s[Y].reorder(ro, jo, ri, ji)
        s[Y].bind(ro, "program_id.0")
        s[Y].num_warps(tc.knob("warps", [4, 8]))
    return s, [X, Y]


def inputs(sizes, device):
    return [harness.randn((sizes["M"], sizes["N"]), torch.float32, device)]


def reference(x):
    return torch.cumsum(x.double(), dim=-1).float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs.
BENCH = dict(M=4096, N=8192)


def torch_ref(x):
    """torch.cumsum over the rows, float32."""
    return torch.cumsum(x, dim=-1)
