"""Halide's first example, the two-stage 3x3 blur, with blur_x computed at blur_y's tile:

    blur_x(x, y) = (in(x, y) + in(x + 1, y) + in(x + 2, y)) / 3
    blur_y(x, y) = (blur_x(x, y) + blur_x(x, y + 1) + blur_x(x, y + 2)) / 3
    blur_y.tile(x, y, xo, yo, xi, yi, 32, 32); blur_x.compute_at(blur_y, xo)

(Halide's tutorial runs it on uint16; here float32, tilec's unsigned types are to come.) Each program
computes the window of blur_x that its tile of blur_y reads: BY + 2 rows, the two past the tile computed
again by the next program (the halo, said in the nest). One kernel; blur_x's window goes through memory
(L2) between the two stages, where the shifted rows are read back.
"""

import common
import torch

import tilec as tc

SIZES = [dict(H=256, W=320), dict(H=37, W=45), dict(H=3, W=3), dict(H=70, W=5)]


def make():
    H, W = tc.size_vars("H W")
    X = tc.placeholder((H, W), "float32", name="X")
    blur_x = tc.compute((H, W - 2), lambda y, x: (X[y, x] + X[y, x + 1] + X[y, x + 2]) / 3.0, name="blur_x")
    blur_y = tc.compute((H - 2, W - 2), lambda y, x: (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) / 3.0,
                        name="blur_y")
    s = tc.create_schedule(blur_y)
    y, x = blur_y.axis
    yo, xo, yi, xi = s[blur_y].tile(y, x, tc.knob("BY", [16, 32]), tc.knob("BX", [32, 64]))
    s[blur_y].bind(yo, "program_id.0")
    s[blur_y].bind(xo, "program_id.1")
    s[blur_x].compute_at(s[blur_y], xo)
    return s, [X, blur_y]


def inputs(sizes, device):
    return [common.randn((sizes["H"], sizes["W"]), torch.float32, device)]


def reference(x):
    bx = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3.0
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3.0


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
