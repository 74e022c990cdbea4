"""GEMM + SiLU, the design's schedule: Y = silu(A @ W), accumulated in float32, C rounded to bf16.

The GEMM is tiled BM x BN per program with a pipelined loop over K in steps of BK; A and W tiles are
loaded per step, the accumulator lives in registers, and SiLU runs on the finished tile (epilogue).
Run: `python examples/matmul_silu.py` (with TRITON_INTERPRET=1 on a CPU).
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=256, N=256, K=128), dict(M=100, N=130, K=70), dict(M=1, N=1, K=1), dict(M=65, N=1, K=300)]


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
    (kk,) = C.reduce_axis
    io, ii = s[C].split(i, tc.knob("BM", [64, 128, 256]))
    jo, ji = s[C].split(j, tc.knob("BN", [64, 128, 256]))
    ko, ki = s[C].split(kk, tc.knob("BK", [32, 64]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_write(C, "local").compute_at(s[C], jo)
    s[C].pipeline(ko, stages=tc.knob("stages", [2, 3, 4]))
    s[C].num_warps(tc.knob("warps", [4, 8]))
    s[Y].compute_at(s[C], jo)
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
