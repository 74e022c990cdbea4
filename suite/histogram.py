"""A histogram of integer values: how many of the N values x[i] fall in each of NBINS bins (values in [0, NBINS)),
as int32 counts, as the original does it: each value read once, 1 added to its bin.

    count[x[i]] += 1                      (tc.scatter, combine="add": atomic adds of int32, exact in any order)

A value outside [0, NBINS) adds to no bin (a position outside the output is not written); this module's values
are all inside, as torch.bincount requires. The bin count is a constant of the module (NBINS); with it given at
the call (`minlength`), it would be a size no input's shape holds (kernel(x, NBINS=...)). The original adds in
shared memory per block, then merges the blocks' counts into global memory; here every value is one global
atomic add (contended on the GPU when many values share a bin). Fast schedule: a program per tile of BN values.
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
    count = tc.scatter((NBINS,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="count")
    s = tc.create_schedule(count)
    if fast:
        (i,) = count.axis
        io, ii = s[count].split(i, tc.knob("BN", [1024, 512, 2048]))
        s[count].bind(io, "program_id.0")
    return s, [x, count]


def inputs(sizes, device):
    return [torch.randint(0, NBINS, (sizes["N"],), dtype=torch.int64, device=device)]


def reference(x):
    return torch.bincount(x, minlength=NBINS).to(torch.int32)


BENCH = dict(N=1 << 24)


def torch_ref(x):
    """torch.bincount (its CUDA kernel: shared-memory atomics per block, then a global merge)."""
    return torch.bincount(x, minlength=NBINS).to(torch.int32)
