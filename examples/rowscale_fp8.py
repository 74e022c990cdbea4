"""Per-row-scale fp8 quantization in one kernel: amax[r] = max_c |X[r, c]|, then
Q[r, c] = X[r, c] * (448 / amax[r]) as float8_e4m3fn, and the scale S[r] = amax[r] / 448.

The row max is complete before any element of the row is quantized: Q is placed at amax's row (the
grid axis), after amax's loop over column tiles. Placing Q inside that loop (amax.co) is illegal and
tilec says so (see docs/legality.md). When the row fits one tile (BLOCK >= N at a call), the loops run
once and are no loops: the row is read once, for the max and for the quantization.
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=64, N=1024), dict(M=37, N=1000), dict(M=1, N=1)]


def make():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    c = tc.reduce_axis(N, name="c")
    amax = tc.compute((M,), lambda r: tc.max(tc.abs(X[r, c]), axis=c), name="amax")
    Q = tc.compute((M, N), lambda r, col: tc.minimum(tc.maximum(X[r, col] * (448.0 / amax[r]), -448.0), 448.0),
                   name="Q", dtype="float8_e4m3fn")
    S = tc.compute((M,), lambda r: amax[r] / 448.0, name="S")
    s = tc.create_schedule([Q, S])
    (r,) = amax.axis
    block = tc.knob("BLOCK", [1024, 2048, 4096, 8192])
    s[amax].split(c, block)
    s[amax].bind(r, "program_id.0")
    s[Q].split(Q.axis[1], block)
    s[Q].compute_at(s[amax], r)
    s[S].compute_at(s[amax], r)
    s[amax].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [X, Q, S]


def inputs(sizes, device):
    return [common.randn((sizes["M"], sizes["N"]), torch.bfloat16, device, scale=4.0)]


def reference(x):
    amax = x.float().abs().amax(dim=1)
    q = (x.float() * (448.0 / amax)[:, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q, amax / 448.0


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
