"""A separable 5-tap filter (binomial weights 1 4 6 4 1 / 16), the horizontal pass computed at the vertical
pass's tile: each program computes BY + 4 rows of the horizontal pass (the four past its tile again in
the next program: the halo) and reads them back at five row offsets. One kernel.
"""

import common
import torch

import tilec as tc

SIZES = [dict(H=256, W=256), dict(H=41, W=50), dict(H=5, W=5), dict(H=9, W=100)]
TAPS = (1.0 / 16, 4.0 / 16, 6.0 / 16, 4.0 / 16, 1.0 / 16)


def make():
    H, W = tc.size_vars("H W")
    X = tc.placeholder((H, W), "float32", name="X")
    hx = tc.compute((H, W - 4), lambda y, x: sum(TAPS[t] * X[y, x + t] for t in range(5)), name="hx")
    vy = tc.compute((H - 4, W - 4), lambda y, x: sum(TAPS[t] * hx[y + t, x] for t in range(5)), name="vy")
    s = tc.create_schedule(vy)
    y, x = vy.axis
    yo, xo, yi, xi = s[vy].tile(y, x, tc.knob("BY", [32, 16]), tc.knob("BX", [64, 32]))
    s[vy].bind(yo, "program_id.0")
    s[vy].bind(xo, "program_id.1")
    s[hx].compute_at(s[vy], xo)
    return s, [X, vy]


def inputs(sizes, device):
    return [common.randn((sizes["H"], sizes["W"]), torch.float32, device)]


def reference(x):
    h = sum(TAPS[t] * x[:, t:x.shape[1] - 4 + t] for t in range(5))
    return sum(TAPS[t] * h[t:h.shape[0] - 4 + t] for t in range(5))


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
