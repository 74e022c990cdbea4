"""A row's prefix sum, as a user first writes it: a reduction over k from 0 to j (the output's own axis).

    Y[r, j] = sum_{k <= j} X[r, k]

Refused: a reduce axis's extent may use sizes and ints only, so a reduction cannot end at an axis of its compute.
Scans (`torch.cumsum`, `cumprod`, `cummax`, associative scans) are not in the language yet. What can be written
today is the masked triangular sum over the whole row (`tc.sum(tc.where(k <= j, X[r, k], 0.0), axis=k)`), quadratic
in the row's length: suite/selective_scan.py uses that form.
"""

import tilec as tc

ORIGINAL = ("PyTorch aten/src/ATen/native/cuda/ScanKernels.cu / ScanUtils.cuh: cumsum along the last dimension; "
            "Triton's tl.cumsum (triton/language/standard.py)")
REASON = "an extent may only use sizes and ints"


def make(fast: bool):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")

    def prefix(r, j):
        k = tc.reduce_axis(j + 1, name="k")
        return tc.sum(X[r, k], axis=k)

    Y = tc.compute((M, N), prefix, name="Y")
    return tc.create_schedule(Y), [X, Y]
