"""Row softmax in one kernel: the row max, then the sum of exp(x - max), then the division.

Both reductions are producers computed at Y's row (each its own loop over column tiles); Y loops over
the row a third time. Sizes that do not divide the tile are masked (max with -inf, sum with 0).
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=64, N=1024), dict(M=37, N=1000), dict(M=1, N=1), dict(M=5, N=3000)]


def make():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    c2 = tc.reduce_axis(N, name="c2")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - mx[r]) / den[r], name="Y")

    s = tc.create_schedule(Y)
    r, col = Y.axis
    block = tc.knob("BLOCK", [1024, 2048])
    s[Y].split(col, block)
    s[Y].bind(r, "program_id.0")
    for T, axis in ((mx, c), (den, c2)):
        s[T].split(axis, block)
        s[T].compute_at(s[Y], r)
    return s, [X, Y]


def inputs(sizes, device):
    return [common.randn((sizes["M"], sizes["N"]), torch.float32, device, scale=3.0)]


def reference(x):
    return torch.softmax(x, dim=1)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
