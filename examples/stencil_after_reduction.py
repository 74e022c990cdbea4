"""A stencil after a reduction, the reduction placed in the stencil's loops: the energy of each pixel over
C channels, E[y, x] = sum_c X[c, y, x]^2, then a 3x3 box of it, B[y, x] = sum of E over the 3x3
neighbourhood / 9. E is computed at B's tile: each program sums the channels of the (BY + 2) x (BX + 2)
window its tile reads (the border computed again by its neighbours: the halo), then the box reads it
back. One kernel; the box never sees a partial sum (isl checks the reduction is complete where it reads).
"""

import common
import torch

import tilec as tc

SIZES = [dict(C=8, H=128, W=128), dict(C=3, H=37, W=41), dict(C=1, H=3, W=3), dict(C=5, H=66, W=4)]


def make():
    C, H, W = tc.size_vars("C H W")
    X = tc.placeholder((C, H, W), "float32", name="X")
    c = tc.reduce_axis(C, name="c")
    E = tc.compute((H, W), lambda y, x: tc.sum(X[c, y, x] * X[c, y, x], axis=c), name="E")
    B = tc.compute((H - 2, W - 2), lambda y, x: sum(E[y + i, x + j] for i in range(3) for j in range(3)) / 9.0,
                   name="B")
    s = tc.create_schedule(B)
    y, x = B.axis
    yo, xo, yi, xi = s[B].tile(y, x, tc.knob("BY", [16, 32]), tc.knob("BX", [32, 16]))
    s[B].bind(yo, "program_id.0")
    s[B].bind(xo, "program_id.1")
    s[E].split(c, tc.knob("BC", [1, 2]))  # channels a few at a time: the window's tile times BC stays small
    s[E].compute_at(s[B], xo)
    return s, [X, B]


def inputs(sizes, device):
    return [common.randn((sizes["C"], sizes["H"], sizes["W"]), torch.float32, device)]


def reference(x):
    e = (x * x).sum(0)
    h, w = e.shape
    return sum(e[i:h - 2 + i, j:w - 2 + j] for i in range(3) for j in range(3)) / 9.0


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
