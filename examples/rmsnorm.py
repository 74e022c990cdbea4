"""RMSNorm: Y[r, c] = X[r, c] * rsqrt(mean_c X[r, c]^2 + eps) * w[c], ROWS rows per program.

The sum of squares `ss` is a producer computed at Y's row (its own loop over column tiles, float32);
Y then loops over the same row again to normalize. One kernel, Y written once; X read twice, or once
when the row fits one tile (BLOCK >= N at a call: the loops run once, so they are no loops and the two
stages share the row's load).
"""

import common
import torch

import tilec as tc

EPS = 1e-6
SIZES = [dict(M=64, N=4096), dict(M=37, N=1000), dict(M=1, N=4096), dict(M=3, N=1)]


def make():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    w = tc.placeholder((N,), "bfloat16", name="w")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c].astype("float32") * X[r, c], axis=c), name="ss",
                    dtype="float32")
    Y = tc.compute((M, N), lambda r, col: X[r, col] * tc.rsqrt(ss[r] / N + EPS) * w[col], name="Y",
                   dtype="bfloat16")

    s = tc.create_schedule(Y)
    r, col = Y.axis
    ro, ri = s[Y].split(r, tc.knob("ROWS", [1, 2, 4]))  # rows per program: w's tile serves them all
    co, ci = s[Y].split(col, tc.knob("BLOCK", [1024, 2048, 4096, 8192]))
    s[Y].reorder(ro, co, ri, ci)
    s[Y].bind(ro, "program_id.0")
    s[ss].split(c, tc.knob("BLOCK", [1024, 2048, 4096, 8192]))
    s[ss].compute_at(s[Y], ro)
    s[Y].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [X, w, Y]


def inputs(sizes, device):
    return [common.randn((sizes["M"], sizes["N"]), torch.bfloat16, device),
            common.randn((sizes["N"],), torch.bfloat16, device)]


def reference(x, w):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + EPS) * w.float()).to(torch.bfloat16)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
