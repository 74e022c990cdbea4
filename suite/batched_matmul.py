"""A batched GEMM with a bias epilogue, torch.baddbmm(bias, A, W) as PyTorch Inductor lowers it to its Triton
bmm template with the bias added where the product is stored:

    C[b, i, j] = bf16(sum_k A[b, i, k] * W[b, k, j] + bias[j])        (float32 accumulator)

bfloat16 operands and output. Fast schedule: BM x BN output tiles, the batch on program_id.2 (the
template's), a pipelined loop over K, the bias added to the float32 tile in the epilogue.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("PyTorch torch/_inductor/kernel/bmm.py: bmm_template as tuned_baddbmm uses it (the bias added in "
            "the store's epilogue, addmm_epilogue), i.e. torch.baddbmm(bias, A, W) with beta = alpha = 1")
SIZES = [dict(B=2, M=37, N=45, K=29), dict(B=1, M=1, N=1, K=1), dict(B=3, M=5, N=70, K=1),
         dict(B=2, M=65, N=33, K=70)]


def make(fast: bool):
    Bt, M, N, K = tc.size_vars("B M N K")
    A = tc.placeholder((Bt, M, K), "bfloat16", name="A")
    W = tc.placeholder((Bt, K, N), "bfloat16", name="W")
    bias = tc.placeholder((N,), "bfloat16", name="bias")
    k = tc.reduce_axis(K, name="k")
    acc = tc.compute((Bt, M, N), lambda b, i, j: tc.sum(A[b, i, k] * W[b, k, j], axis=k), name="acc",
                     dtype="float32")
    C = tc.compute((Bt, M, N), lambda b, i, j: acc[b, i, j] + bias[j], name="C", dtype="bfloat16")
    s = tc.create_schedule(C)
    if fast:
        b, i, j = acc.axis
        io, jo, ii, ji = s[acc].tile(i, j, tc.knob("BM", [64, 128, 32]), tc.knob("BN", [64, 128, 32]))
        ko, ki = s[acc].split(k, tc.knob("BK", [32, 64, 16]))
        s[acc].reorder(b, io, jo, ko, ii, ji, ki)
        s[acc].bind(io, "program_id.0")
        s[acc].bind(jo, "program_id.1")
        s[acc].bind(b, "program_id.2")
        s[acc].pipeline(ko, stages=tc.knob("stages", [3, 2, 4]))
        s[acc].num_warps(tc.knob("warps", [4, 8]))
        s[C].compute_at(s[acc], jo)
    return s, [A, W, bias, C]


def inputs(sizes, device):
    B, M, N, K = (sizes[n] for n in ("B", "M", "N", "K"))
    return [harness.randn((B, M, K), torch.bfloat16, device), harness.randn((B, K, N), torch.bfloat16, device),
            harness.randn((N,), torch.bfloat16, device)]


def reference(a, w, bias):
    return (torch.bmm(a.double(), w.double()) + bias.double()).to(torch.bfloat16)


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, the FLOPs for the
# tensor-core roofline (Inductor's template is what torch.compile of torch_ref may pick: no `original`).
BENCH = dict(B=16, M=2048, N=2048, K=2048)
FLOPS = lambda sizes: 2 * sizes["B"] * sizes["M"] * sizes["N"] * sizes["K"]


def torch_ref(a, w, bias):
    """torch.baddbmm(bias, A, W), bfloat16 (cuBLAS's batched GEMM with the bias)."""
    return torch.baddbmm(bias, a, w)
