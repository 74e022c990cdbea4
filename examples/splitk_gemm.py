"""GEMM + SiLU with split-K: Y = silu(A @ W) in bfloat16 for shapes with few output tiles and a long K
(a decoder's down projection: M = 256 tokens, N = 4096, K = 14336): 128 x 128 tiles give 64 programs
on 132 SMs. `split_k` runs the loop over K in SPLIT_K chunks on SPLIT_K programs each (program_id.1),
their float32 partial sums go to a workspace, and a second kernel adds them in order, rounds C to
bfloat16 and applies SiLU to the whole sum. Output tiles in grouped order (`swizzle`), A and W tiles
through tensor descriptors when the TMA flag is on; `num_warps` is tilec's default.
Run: `python examples/splitk_gemm.py` (with TRITON_INTERPRET=1 on a CPU).
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=256, N=256, K=512), dict(M=100, N=130, K=70), dict(M=1, N=1, K=1), dict(M=65, N=1, K=300)]


def make():
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "bfloat16", name="A")
    W = tc.placeholder((K, N), "bfloat16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k, acc_dtype="float32"),
                   name="C", dtype="bfloat16")
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y")

    s = tc.create_schedule(Y)
    i, j = C.axis
    io, ii = s[C].split(i, tc.knob("BM", [128, 64]))
    jo, ji = s[C].split(j, tc.knob("BN", [128, 64, 256]))
    ko, ki = s[C].split(k, tc.knob("BK", [64, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    tiles = s[C].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1]))
    s[C].bind(tiles, "program_id.0")
    tma = tc.flag("TMA")
    s.cache_read(A, "shared", readers=[C], tma=tma).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C], tma=tma).compute_at(s[C], ko)
    s[C].pipeline(ko, stages=tc.knob("stages", [4, 3, 2]))
    s[C].split_k(ko, tc.knob("SPLIT_K", [2, 1, 3, 4]))  # the parts run on program_id.1
    s[Y].compute_at(s[C], tiles)  # SiLU in the combine kernel, on the whole sum
    return s, [A, W, Y]


def inputs(sizes, device):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    return [common.randn((M, K), torch.bfloat16, device), common.randn((K, N), torch.bfloat16, device)]


def reference(a, w):
    c = (a.float() @ w.float()).to(torch.bfloat16)
    return torch.nn.functional.silu(c.float()).to(torch.bfloat16)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
