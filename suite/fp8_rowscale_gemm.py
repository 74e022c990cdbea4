"""An fp8 GEMM with a per-row scale of A (per token) and a per-column scale of B (per channel), bfloat16 out,
as vLLM's Triton scaled_mm computes it: the float8_e4m3fn product accumulated in float32, the scales applied
to the accumulator after the K loop, then rounded.

    acc[i, j] = sum_k A[i, k] * B[k, j]                     (float32)
    C[i, j]   = bf16(scale_b[j] * (scale_a[i] * acc[i, j]))

Fast schedule: BM x BN output tiles in grouped order, a pipelined loop over K, the A and B tiles loaded per
step, the two scales loaded once per tile and applied in the epilogue.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("vLLM vllm/model_executor/layers/quantization/compressed_tensors/triton_scaled_mm.py: "
            "scaled_mm_kernel (per-token scale_a, per-channel scale_b, no bias); torch._scaled_mm rowwise")
SIZES = [dict(M=37, N=45, K=29), dict(M=1, N=1, K=1), dict(M=3, N=70, K=1), dict(M=65, N=33, K=130)]


def make(fast: bool):
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float8_e4m3fn", name="A")
    B = tc.placeholder((K, N), "float8_e4m3fn", name="B")
    scale_a = tc.placeholder((M,), "float32", name="scale_a")
    scale_b = tc.placeholder((N,), "float32", name="scale_b")
    k = tc.reduce_axis(K, name="k")
    acc = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * B[k, j], axis=k), name="acc", dtype="float32")
    C = tc.compute((M, N), lambda i, j: scale_b[j] * (scale_a[i] * acc[i, j]), name="C", dtype="bfloat16")
    s = tc.create_schedule(C)
    if fast:
        i, j = acc.axis
        io, ii = s[acc].split(i, tc.knob("BM", [64, 128, 32]))
        jo, ji = s[acc].split(j, tc.knob("BN", [64, 128, 32]))
        ko, ki = s[acc].split(k, tc.knob("BK", [64, 128, 32]))
        s[acc].reorder(io, jo, ko, ii, ji, ki)
        tiles = s[acc].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1, 4]))
        s[acc].bind(tiles, "program_id.0")
        s.cache_read(A, "shared", readers=[acc]).compute_at(s[acc], ko)
        s.cache_read(B, "shared", readers=[acc]).compute_at(s[acc], ko)
        s[acc].pipeline(ko, stages=tc.knob("stages", [3, 4, 2]))
        s[acc].num_warps(tc.knob("warps", [4, 8]))
        s[C].compute_at(s[acc], tiles)
    return s, [A, B, scale_a, scale_b, C]


def inputs(sizes, device):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    f8 = torch.float8_e4m3fn
    return [harness.randn((M, K), f8, device, scale=4.0), harness.randn((K, N), f8, device, scale=4.0),
            harness.randn((M,), torch.float32, device).abs() * 0.1 + 0.01,
            harness.randn((N,), torch.float32, device).abs() * 0.1 + 0.01]


def reference(a, b, scale_a, scale_b):
    acc = (a.double()[:, :, None] * b.double()[None]).sum(1)
    return (scale_b.double()[None, :] * (scale_a.double()[:, None] * acc)).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, the FLOPs for the
# tensor-core roofline (vLLM's kernel is not imported: no `original`).
BENCH = dict(M=8192, N=8192, K=8192)
FLOPS = lambda sizes: 2 * sizes["M"] * sizes["N"] * sizes["K"]


def torch_ref(a, b, scale_a, scale_b):
    """torch._scaled_mm with row-wise scales (per-token scale_a (M, 1), per-channel scale_b (1, N)), bfloat16 out;
    it takes B column-major, so B is transposed into that layout first (a copy of K x N bytes, part of the
    timing). Where a size is no multiple of 16 (the small test sizes), which _scaled_mm refuses, the product is
    computed in float32 and scaled."""
    M, K = a.shape
    N = b.shape[1]
    if M % 16 == 0 and K % 16 == 0 and N % 16 == 0:
        return torch._scaled_mm(a, b.t().contiguous().t(), scale_a=scale_a[:, None], scale_b=scale_b[None, :],
                                out_dtype=torch.bfloat16)
    return (scale_b[None, :] * (scale_a[:, None] * (a.float() @ b.float()))).to(torch.bfloat16)
