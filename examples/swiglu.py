"""SwiGLU: Y = silu(X @ Wg) * (X @ Wu), both GEMMs and the gate fused into one kernel, one X tile per step.

The output Y is the kernel's root, tiled BM x BN per program in grouped order (`swizzle`, GROUP_M rows
of tiles at a time); the two GEMMs G and U are producers computed at Y's tile (compute_at in the
producer direction), each over K in BK steps, and `compute_with` runs U's loop over K inside G's: one
loop whose X tile, loaded once, feeds both dots (X @ Wg and X @ Wu), SiLU and the product in the
epilogue. The X and W tiles go through tensor descriptors when the TMA flag is on, the Y tile when
TMA_STORE is on. `num_warps` is
tilec's default, which counts both accumulators (8 warps for two 128 x 128 float32 tiles).
Run: `python examples/swiglu.py` (with TRITON_INTERPRET=1 on a CPU).
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=128, N=256, K=128), dict(M=100, N=130, K=70), dict(M=1, N=3, K=5)]


def make(one_loop=True):
    """The schedule; `one_loop=False` leaves the two loops over K apart (the X tile loaded in each)."""
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
    io, ii = s[Y].split(i, tc.knob("BM", [64, 128]))
    jo, ji = s[Y].split(j, tc.knob("BN", [64, 128, 192, 256]))
    s[Y].reorder(io, jo, ii, ji)
    tiles = s[Y].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1, 4]))
    s[Y].bind(tiles, "program_id.0")
    tma = tc.flag("TMA")  # tensor-descriptor loads of the X and W tiles, or pointer loads
    loops = []
    for T, kk, Wt in ((G, k, Wg), (U, k2, Wu)):
        ko, ki = s[T].split(kk, tc.knob("BK", [64, 32]))
        s[T].pipeline(ko, stages=tc.knob("stages", [3, 4, 2]))
        s[T].compute_at(s[Y], tiles)
        s.cache_read(X, "shared", readers=[T], tma=tma).compute_at(s[T], ko)
        s.cache_read(Wt, "shared", readers=[T], tma=tma).compute_at(s[T], ko)
        loops.append(ko)
    if one_loop:
        s[U].compute_with(s[G], loops[0])  # one loop over K: the X tile is loaded once for both dots
    s.cache_write(Y, "local", tma=tc.flag("TMA_STORE"))  # Y's tile stored through a descriptor, or not
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
