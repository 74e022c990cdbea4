"""Row softmax in one kernel: the row max, the sum of exp(x - max), then the division.

The max and the sum are producers computed at Y's row, and `online` runs them as one loop (den's loop
carries mx as a running max, rescaling the sum as the max grows); Y loops over the row once more. When
the row fits one tile (BLOCK >= N at a call), those loops run once, so they are no loops: the row is
read once, its exponentials computed once, and written once. Sizes that do not divide the tile are
masked (max with -inf, sum with 0).
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=64, N=1024), dict(M=37, N=1000), dict(M=1, N=1), dict(M=5, N=3000)]


def make(dtype="float32", split=False):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), dtype, name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    c2 = tc.reduce_axis(N, name="c2")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - mx[r]) / den[r], name="Y", dtype=dtype)

    s = tc.create_schedule(Y)
    r, col = Y.axis
    block = tc.knob("BLOCK", [1024, 2048, 4096, 8192, 16384])
    s[mx].split(c, block)
    c2o, _ = s[den].split(c2, block)
    s[den].online(s[mx])
    s[Y].num_warps(tc.knob("warps", [4, 8, 16]))
    if not split:  # ROWS rows per program, each row's statistics at the program
        ro, ri = s[Y].split(r, tc.knob("ROWS", [1, 2, 4]))
        colo, _ = s[Y].split(col, block)
        s[Y].reorder(ro, colo, ri)
        s[Y].bind(ro, "program_id.0")
        for T in (mx, den):
            s[T].compute_at(s[Y], ro)
        return s, [X, Y]
    colo, _ = s[Y].split(col, block)
    s[Y].bind(r, "program_id.0")
    # few long rows (decoding: 32 x 32768): the statistics in SPLIT parts of the row, on programs of their own,
    # merged in order; then Y's programs each write a block of a row
    s[den].bind(den.axis[0], "program_id.0")
    s[den].split_k(c2o, tc.knob("SPLIT", [4, 8, 16, 32]))
    s[Y].bind(colo, "program_id.1")
    return s, [X, Y]


def inputs(sizes, device, dtype=torch.float32):
    return [common.randn((sizes["M"], sizes["N"]), dtype, device, scale=3.0)]


def reference(x):
    return torch.softmax(x.float(), dim=1).to(x.dtype)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
