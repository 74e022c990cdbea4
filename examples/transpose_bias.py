"""Transpose with a broadcast bias: T[r, c] = X[c, r] + b[r], tiled 2-D (a bias per output row)."""

import common
import torch

import tilec as tc

SIZES = [dict(M=256, N=128), dict(M=100, N=130), dict(M=1, N=1)]


def make():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    b = tc.placeholder((N,), "float32", name="b")
    T = tc.compute((N, M), lambda r, c: X[c, r] + b[r], name="T")
    s = tc.create_schedule(T)
    r, c = T.axis
    ro, co, ri, ci = s[T].tile(r, c, tc.knob("BR", [32, 64]), tc.knob("BC", [32, 64]))
    s[T].bind(ro, "program_id.0")
    s[T].bind(co, "program_id.1")
    return s, [X, b, T]


def inputs(sizes, device):
    return [common.randn((sizes["M"], sizes["N"]), torch.float32, device),
            common.randn((sizes["N"],), torch.float32, device)]


def reference(x, b):
    return x.t() + b[:, None]


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
