"""GEMM + SiLU the Hopper way: Y = silu(A @ W) in bfloat16, with the output tiles in grouped order
(`swizzle`, GROUP_M rows of tiles at a time, for L2 reuse) run by persistent programs (`persistent`:
one program per SM, each looping over tiles; `flatten` lets Triton pipeline the tile loop with the
loop over K), the A and W tiles read through tensor descriptors when the TMA flag is on, the output
tile written through one when TMA_STORE is on (`cache_write(..., tma=)`). A 192-wide tile (a BN choice)
lowers as 128 + 64 sub-tiles sharing the A tile. `num_warps` is left to tilec's
default, which follows the accumulator's size (8 warps for 128 x 256).

`make(epilogue=False)` is the plain GEMM (C = A @ W) with the same schedule; benchmarks/bench.py times
both beside cuBLAS. Run: `python examples/persistent_gemm.py` (with TRITON_INTERPRET=1 on a CPU).
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=256, N=256, K=128), dict(M=100, N=130, K=70), dict(M=1, N=1, K=1), dict(M=65, N=1, K=300)]


def make(epilogue=True):
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "bfloat16", name="A")
    W = tc.placeholder((K, N), "bfloat16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k, acc_dtype="float32"),
                   name="C", dtype="bfloat16")
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y") if epilogue else None

    s = tc.create_schedule(Y if epilogue else C)
    i, j = C.axis
    io, ii = s[C].split(i, tc.knob("BM", [64, 128]))
    jo, ji = s[C].split(j, tc.knob("BN", [64, 128, 256, 192]))
    ko, ki = s[C].split(k, tc.knob("BK", [32, 64]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    tiles = s[C].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1, 4]))
    s[C].bind(tiles, "program_id.0")
    s[C].persistent(tiles, flatten=tc.flag("FLATTEN"))
    tma = tc.flag("TMA")  # tensor-descriptor loads of the A and W tiles, or pointer loads
    s.cache_read(A, "shared", readers=[C], tma=tma).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C], tma=tma).compute_at(s[C], ko)
    s[C].pipeline(ko, stages=tc.knob("stages", [3, 4, 5, 2]))
    out = Y if epilogue else C
    if epilogue:
        s[Y].compute_at(s[C], tiles)
    s.cache_write(out, "local", tma=tc.flag("TMA_STORE"))  # the output tile stored through a descriptor, or not
    return s, [A, W, out]


def inputs(sizes, device):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    return [common.randn((M, K), torch.bfloat16, device), common.randn((K, N), torch.bfloat16, device)]


def reference(a, w):
    c = (a.float() @ w.float()).to(torch.bfloat16)
    return torch.nn.functional.silu(c.float()).to(torch.bfloat16)


def reference_gemm(a, w):
    return (a.float() @ w.float()).to(torch.bfloat16)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
