"""SwiGLU: Y = silu(X @ Wg) * (X @ Wu), both GEMMs and the gate fused into one kernel.

The output Y is the kernel's root, tiled BM x BN per program; the two GEMMs G and U are producers
computed at Y's tile (compute_at in the producer direction), each looping over K in BK steps.
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=128, N=256, K=128), dict(M=100, N=130, K=70), dict(M=1, N=3, K=5)]


def make():
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, K), "bfloat16", name="X")
    Wg = tc.placeholder((K, N), "bfloat16", name="Wg")
    Wu = tc.placeholder((K, N), "bfloat16", name="Wu")
    k = tc.reduce_axis(K, name="k")
    G = tc.compute((M, N), lambda i, j: tc.sum(X[i, k] * Wg[k, j], axis=k), name="G", dtype="bfloat16")
    k2 = tc.reduce_axis(K, name="k2")
    U = tc.compute((M, N), lambda i, j: tc.sum(X[i, k2] * Wu[k2, j], axis=k2), name="U", dtype="bfloat16")
    Y = tc.compute((M, N), lambda i, j: tc.silu(G[i, j]) * U[i, j], name="Y")

    s = tc.create_schedule(Y)
    i, j = Y.axis
    io, jo, ii, ji = s[Y].tile(i, j, tc.knob("BM", [64, 128]), tc.knob("BN", [64, 128]))
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    for T, kk in ((G, k), (U, k2)):
        ko, ki = s[T].split(kk, tc.knob("BK", [32, 64]))
        s[T].pipeline(ko, stages=tc.knob("stages", [3, 4]))
        s[T].compute_at(s[Y], jo)
    return s, [X, Wg, Wu, Y]


def inputs(sizes, device):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    return [common.randn((M, K), torch.bfloat16, device), common.randn((K, N), torch.bfloat16, device),
            common.randn((K, N), torch.bfloat16, device)]


def reference(x, wg, wu):
    g = (x.float() @ wg.float()).to(torch.bfloat16)
    u = (x.float() @ wu.float()).to(torch.bfloat16)
    return (torch.nn.functional.silu(g.float()) * u.float()).to(torch.bfloat16)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
