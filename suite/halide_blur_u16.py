"""Halide's blur app on uint16: a 3x1 then a 1x3 box, each a sum of three uint16 values (wrapping, as Halide's
uint16 arithmetic does) divided by 3 (floor), the output two rows and columns smaller than the input.

    blur_x[y, x] = (in[y, x] + in[y, x + 1] + in[y, x + 2]) // 3        (uint16)
    out[y, x]    = (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) // 3

Fast schedule, Halide's GPU one: out in 2-d tiles, one per program; blur_x computed at the tile with its halo
(two more rows) and recomputed by neighbouring tiles.
"""

import torch

import tilec as tc

ORIGINAL = ("Halide apps/blur/halide_blur_generator.cpp: HalideBlur (blur_x, blur_y of uint16, "
            "(a + b + c) / 3), its GPU schedule gpu_tile + compute_at")
SIZES = [dict(H=37, W=45), dict(H=3, W=3), dict(H=9, W=300)]
SPECIAL = False  # uint16 holds no NaN or infinity


def make(fast: bool):
    H, W = tc.size_vars("H W")
    inp = tc.placeholder((H, W), "uint16", name="inp")
    bx = tc.compute((H, W - 2), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) // 3, name="blur_x")
    out = tc.compute((H - 2, W - 2), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) // 3, name="out")
    s = tc.create_schedule(out)
    if fast:
        y, x = out.axis
        yo, xo, _, _ = s[out].tile(y, x, tc.knob("TY", [8, 16]), tc.knob("TX", [32, 64]))
        s[out].bind(yo, "program_id.1")
        s[out].bind(xo, "program_id.0")
        s[bx].compute_at(s[out], xo)
    return s, [inp, out]


def inputs(sizes, device):
    return [torch.randint(0, 65536, (sizes["H"], sizes["W"]), dtype=torch.int32, device=device).to(torch.uint16)]


def reference(inp):
    def wrap(v):  # Halide's (and tilec's) uint16 arithmetic: every sum wraps around at 2**16
        return v % 65536

    a = inp.to(torch.int64)
    bx = wrap(wrap(a[:, :-2] + a[:, 1:-1]) + a[:, 2:]) // 3
    out = wrap(wrap(bx[:-2] + bx[1:-1]) + bx[2:]) // 3
    return out.to(torch.uint16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (an 8192 x 8192 uint16 image) and what a PyTorch user
# runs (Halide's generator is not imported: no `original`).
BENCH = dict(H=8192, W=8192)


def torch_ref(inp):
    """Eagerly in int32 (PyTorch has no uint16 arithmetic on the GPU): the three-tap sums as slices, wrapped to 16
    bits as Halide's uint16 sums wrap, floor-divided by 3, the result cast back to uint16."""
    a = inp.to(torch.int32)
    bx = ((a[:, :-2] + a[:, 1:-1] + a[:, 2:]) & 0xFFFF) // 3
    return (((bx[:-2] + bx[1:-1] + bx[2:]) & 0xFFFF) // 3).to(torch.uint16)
