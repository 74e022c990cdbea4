"""A histogram of integer values: how many of the N values x[i] fall in each of NBINS bins (values in [0, NBINS)),
as int32 counts.

    count[b] = sum_i (x[i] == b)          (a sum of comparisons counts them, in int32)

The formulation is dense: every bin compares itself with every value, O(N * NBINS) work, where the original
reads each value once and adds 1 to its bin (O(N), shared-memory atomics per block, then a global merge):
that is a scatter (`count[x[i]] += 1`), which the language lacks (docs/language.md, "Not in the language
yet": scatter and in-place update). The bin count is a constant of the module (NBINS): torch's
`minlength` is a number given at the call, and no input's shape holds it (sizes given at the call are
missing too). Fast schedule: a program per tile of BB bins, the values in tiles of BN, each iteration one
(BB x BN) comparison tile summed along the values.
"""

import torch

import tilec as tc

ORIGINAL = ("PyTorch aten/src/ATen/native/cuda/SummaryOps.cu: _bincount_cuda -> kernelHistogram1D (shared-memory "
            "atomicAdd per bin, then a global merge); Triton python/triton/language/core.py: histogram")
NBINS = 100
SPECIAL = False  # the input is integer bin indices: it holds no NaN or infinity
SIZES = [dict(N=1037), dict(N=1), dict(N=5), dict(N=3000)]


def make(fast: bool):
    N = tc.size_vars("N")
    x = tc.placeholder((N,), "int64", name="x")
    i = tc.reduce_axis(N, name="i")
    count = tc.compute((NBINS,), lambda b: tc.sum(x[i] == b, axis=i), name="count", dtype="int32")
    s = tc.create_schedule(count)
    if fast:
        (b,) = count.axis
        bo, bi = s[count].split(b, tc.knob("BB", [128, 64, 32]))
        io, ii = s[count].split(i, tc.knob("BN", [256, 128, 512]))
        s[count].reorder(bo, io, bi, ii)
        s[count].bind(bo, "program_id.0")
    return s, [x, count]


def inputs(sizes, device):
    return [torch.randint(0, NBINS, (sizes["N"],), dtype=torch.int64, device=device)]


def reference(x):
    return torch.bincount(x, minlength=NBINS).to(torch.int32)
