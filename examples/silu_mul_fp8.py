"""SiLU(G) * U, rounded to bf16, then quantized to fp8 (e4m3) with a fixed scale, in one pass.

H is inlined into Q (compute_inline), yet its bf16 rounding point stays: the fused kernel gives the
bits of the two separate steps. Values are clamped to e4m3's range (+-448) before the cast.
"""

import common
import torch

import tilec as tc

SCALE = 0.05
SIZES = [dict(M=128, N=512), dict(M=100, N=130), dict(M=1, N=1)]


def make():
    M, N = tc.size_vars("M N")
    G = tc.placeholder((M, N), "bfloat16", name="G")
    U = tc.placeholder((M, N), "bfloat16", name="U")
    H = tc.compute((M, N), lambda i, j: tc.silu(G[i, j]) * U[i, j], name="H", dtype="bfloat16")
    Q = tc.compute((M, N), lambda i, j: tc.minimum(tc.maximum(H[i, j] * (1.0 / SCALE), -448.0), 448.0),
                   name="Q", dtype="float8_e4m3fn")
    s = tc.create_schedule(Q)
    s[H].compute_inline()
    i, j = Q.axis
    io, jo, ii, ji = s[Q].tile(i, j, tc.knob("BM", [16, 32]), tc.knob("BN", [128, 256]))
    s[Q].bind(s[Q].fuse(io, jo), "program_id.0")
    return s, [G, U, Q]


def inputs(sizes, device):
    return [common.randn((sizes["M"], sizes["N"]), torch.bfloat16, device),
            common.randn((sizes["M"], sizes["N"]), torch.bfloat16, device)]


def reference(g, u):
    h = (torch.nn.functional.silu(g.float()) * u.float()).to(torch.bfloat16)
    return (h.float() * (1.0 / SCALE)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
