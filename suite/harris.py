"""Halide's Harris corner detector (apps/harris): gray from RGB, Sobel-style gradients (1/12 weights), the
structure tensor's products summed over a 3 x 3 box, then the response det - 0.04 * trace^2; float32, the
input's edges clamped (Halide's BoundaryConditions::repeat_edge), the output the input's size.

    gray(x, y) = 0.299 in(x, y, 0) + 0.587 in(x, y, 1) + 0.114 in(x, y, 2)         (in clamped at the edges)
    Ix = [-1 0 1; -2 0 2; -1 0 1] / 12 * gray (along x)      Iy = the same along y
    Sxx = box3x3(Ix * Ix)      Syy = box3x3(Iy * Iy)      Sxy = box3x3(Ix * Iy)
    out(x, y) = Sxx * Syy - Sxy^2 - 0.04 * (Sxx + Syy)^2

tilec's arrays start at 0, so each stage is defined over the region its readers need, offset: gray over
(H + 4, W + 4) (index v is pixel v - 2), the gradients and products over (H + 2, W + 2) (pixel v - 1). The
input is planar (3, H, W), as Halide's input(x, y, c) lies in memory. Fast schedule: Halide's GPU
schedule in tilec's terms: BY x BX output tiles a program each, the box sums and products inlined into
the output, the gradients and gray computed at the tile (their windows, the halo computed again by the
neighbours).
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Halide apps/harris/harris_generator.cpp: Harris::generate (gray, Iy, Ix, Ixx, Iyy, Ixy, sum3x3 "
            "Sxx/Syy/Sxy, det, trace, det - 0.04 * trace^2), with BoundaryConditions::repeat_edge on the input")
# not 1 x 1: a constant image's response is 0, and float32's rounding residue in the gradients' sums (1e-9) would
# be a relative error of 1 against it
SIZES = [dict(H=13, W=29), dict(H=1, W=7), dict(H=18, W=20)]
SOBEL = ((-1.0, 0.0, 1.0), (-2.0, 0.0, 2.0), (-1.0, 0.0, 1.0))   # [dy][dx] for Ix; Iy is its transpose


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 1.5 s here
def make(fast: bool):
    H, W = tc.size_vars("H W")
    inp = tc.placeholder((3, H, W), "float32", name="inp")

    def clamp(v, n):
        return tc.minimum(tc.maximum(v, 0), n - 1)

    def px(c, y, x):  # the input at pixel (y, x) of the extended grid, edges repeated
        return inp[c, clamp(y - 2, H), clamp(x - 2, W)]

    gray = tc.compute((H + 4, W + 4), lambda y, x: 0.299 * px(0, y, x) + 0.587 * px(1, y, x) + 0.114 * px(2, y, x),
                      name="gray")

    def grad(weights):
        return lambda y, x: sum(weights[dy][dx] / 12.0 * gray[y + dy, x + dx]
                                for dy in range(3) for dx in range(3) if weights[dy][dx] != 0.0)

    Ix = tc.compute((H + 2, W + 2), grad(SOBEL), name="Ix")
    Iy = tc.compute((H + 2, W + 2), grad(tuple(zip(*SOBEL))), name="Iy")
    Ixx = tc.compute((H + 2, W + 2), lambda y, x: Ix[y, x] * Ix[y, x], name="Ixx")
    Iyy = tc.compute((H + 2, W + 2), lambda y, x: Iy[y, x] * Iy[y, x], name="Iyy")
    Ixy = tc.compute((H + 2, W + 2), lambda y, x: Ix[y, x] * Iy[y, x], name="Ixy")

    def box(f):
        return lambda y, x: sum(f[y + dy, x + dx] for dy in range(3) for dx in range(3))

    Sxx = tc.compute((H, W), box(Ixx), name="Sxx")
    Syy = tc.compute((H, W), box(Iyy), name="Syy")
    Sxy = tc.compute((H, W), box(Ixy), name="Sxy")
    det = tc.compute((H, W), lambda y, x: Sxx[y, x] * Syy[y, x] - Sxy[y, x] * Sxy[y, x], name="det")
    trace = tc.compute((H, W), lambda y, x: Sxx[y, x] + Syy[y, x], name="trace")
    out = tc.compute((H, W), lambda y, x: det[y, x] - 0.04 * trace[y, x] * trace[y, x], name="out")
    s = tc.create_schedule(out)
    if fast:
        y, x = out.axis
        yo, xo, yi, xi = s[out].tile(y, x, tc.knob("BY", [16, 8, 32]), tc.knob("BX", [32, 64, 16]))
        s[out].bind(yo, "program_id.0")
        s[out].bind(xo, "program_id.1")
        for T in (det, trace, Sxx, Syy, Sxy, Ixx, Iyy, Ixy):
            s[T].compute_inline()
        for T in (Ix, Iy, gray):
            s[T].compute_at(s[out], xo)
        s[out].num_warps(tc.knob("warps", [4, 8]))
    return s, [inp, out]


def inputs(sizes, device):
    return [harness.randn((3, sizes["H"], sizes["W"]), torch.float32, device)]


def reference(inp):
    x = inp.double()
    g = 0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2]
    g = torch.nn.functional.pad(g[None, None], (2, 2, 2, 2), mode="replicate")[0, 0]   # (H + 4, W + 4)
    H, W = inp.shape[1:]

    def shifted(a, dy, dx, h, w):
        return a[dy:dy + h, dx:dx + w]

    ix = sum(SOBEL[dy][dx] / 12.0 * shifted(g, dy, dx, H + 2, W + 2) for dy in range(3) for dx in range(3))
    iy = sum(SOBEL[dx][dy] / 12.0 * shifted(g, dy, dx, H + 2, W + 2) for dy in range(3) for dx in range(3))
    sxx, syy, sxy = (sum(shifted(p, dy, dx, H, W) for dy in range(3) for dx in range(3))
                     for p in (ix * ix, iy * iy, ix * iy))
    trace = sxx + syy
    return (sxx * syy - sxy * sxy - 0.04 * trace * trace).float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (Halide's generator is
# not imported: no `original`).
BENCH = dict(H=4096, W=4096)


def torch_ref(inp):
    """Eagerly in float32: gray, its edges repeated (F.pad 'replicate'), the gradients as shifted slices, the
    three products' 3 x 3 box sums by one F.avg_pool2d (times 9), then the response."""
    H, W = inp.shape[1:]
    gray = 0.299 * inp[0] + 0.587 * inp[1] + 0.114 * inp[2]
    g = torch.nn.functional.pad(gray[None, None], (2, 2, 2, 2), mode="replicate")[0, 0]   # (H + 4, W + 4)

    def at(dy, dx):
        return g[dy:dy + H + 2, dx:dx + W + 2]

    ix = (at(0, 2) - at(0, 0) + 2 * (at(1, 2) - at(1, 0)) + at(2, 2) - at(2, 0)) / 12
    iy = (at(2, 0) - at(0, 0) + 2 * (at(2, 1) - at(0, 1)) + at(2, 2) - at(0, 2)) / 12
    sxx, syy, sxy = torch.nn.functional.avg_pool2d(torch.stack([ix * ix, iy * iy, ix * iy]), 3, stride=1) * 9
    trace = sxx + syy
    return sxx * syy - sxy * sxy - 0.04 * trace * trace
