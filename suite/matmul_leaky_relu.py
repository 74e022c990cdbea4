"""Triton's matrix-multiplication tutorial: C = leaky_relu(A @ B), float16 operands, a float32 accumulator,
the activation applied to the accumulator, then rounded to float16.

    acc[i, j] = sum_k A[i, k] * B[k, j]                 (float32)
    C[i, j]   = fp16(acc >= 0 ? acc : 0.01 * acc)

Fast schedule: the tutorial's: BM x BN output tiles in grouped order (GROUP_M, `swizzle`), a pipelined loop
over K in BK steps with the A and B tiles loaded per step, the activation as the epilogue on the float32
tile. Knobs for the tiles, the group, the stages and the warps.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Triton tutorial 03, python/tutorials/03-matrix-multiplication.py: matmul_kernel with "
            "ACTIVATION='leaky_relu' (leaky_relu on the float32 accumulator, c = accumulator.to(float16))")
SIZES = [dict(M=37, N=45, K=29), dict(M=1, N=1, K=1), dict(M=3, N=70, K=1), dict(M=65, N=33, K=130)]


def make(fast: bool):
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float16", name="A")
    B = tc.placeholder((K, N), "float16", name="B")
    k = tc.reduce_axis(K, name="k")
    acc = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="acc", dtype="float32")
    C = tc.compute((M, N), lambda i, j: tc.where(acc[i, j] >= 0, acc[i, j], 0.01 * acc[i, j]), name="C",
                   dtype="float16")
    s = tc.create_schedule(C)
    if fast:
        i, j = acc.axis
        io, ii = s[acc].split(i, tc.knob("BM", [64, 128, 32]))
        jo, ji = s[acc].split(j, tc.knob("BN", [64, 128, 32]))
        ko, ki = s[acc].split(k, tc.knob("BK", [32, 64, 16]))
        s[acc].reorder(io, jo, ko, ii, ji, ki)
        tiles = s[acc].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1, 4]))
        s[acc].bind(tiles, "program_id.0")
        s.cache_read(A, "shared", readers=[acc]).compute_at(s[acc], ko)
        s.cache_read(B, "shared", readers=[acc]).compute_at(s[acc], ko)
        s.cache_write(acc, "local").compute_at(s[acc], tiles)
        s[acc].pipeline(ko, stages=tc.knob("stages", [3, 4, 2]))
        s[acc].num_warps(tc.knob("warps", [4, 8]))
        s[C].compute_at(s[acc], tiles)
    return s, [A, B, C]


def inputs(sizes, device):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    return [harness.randn((M, K), torch.float16, device), harness.randn((K, N), torch.float16, device)]


def reference(a, b):
    acc = a.double() @ b.double()
    return torch.where(acc >= 0, acc, 0.01 * acc).to(torch.float16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, the FLOPs for the
# tensor-core roofline (the original, Triton's tutorial kernel, is not a package to import: no `original`).
BENCH = dict(M=8192, N=8192, K=8192)
FLOPS = lambda sizes: 2 * sizes["M"] * sizes["N"] * sizes["K"]


def torch_ref(a, b):
    """cuBLAS's float16 GEMM, then leaky_relu on its float16 result."""
    return torch.nn.functional.leaky_relu(a @ b, 0.01)
