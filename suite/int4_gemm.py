"""A GPTQ int4-weight GEMM, AutoGPTQ's Triton kernel: eight 4-bit weights packed along K in each int32 word,
unpacked with a shift and a mask, per-group zero points (packed eight to a word along N, stored minus one)
and float16 scales, a float16 activation, a float32 accumulator.

    q[k, j]  = (qweight[k // 8, j] >> 4 * (k % 8)) & 15
    z[g, j]  = ((qzeros[g, j // 8] >> 4 * (j % 8)) & 15) + 1
    Wd[k, j] = fp16((q[k, j] - z[k // GS, j]) * scales[k // GS, j])               (GS = 32, the group size)
    C[i, j]  = fp16(sum_k A[i, k] * Wd[k, j])

K a multiple of 8, N a multiple of 8 (the packings); the groups need not divide K. The group of a row is
k // GS (AutoGPTQ reads it from g_idx, which without act-order is that). Fast schedule: the tutorial GEMM's
tiles, the dequantized weight computed at each step of the K loop (a prologue: its BK x BN tile unpacked in
registers from the packed words, as the kernel does), the A tile loaded per step.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("AutoGPTQ auto_gptq/nn_modules/triton_utils/kernels.py: quant_matmul_248_kernel (bits=4, "
            "b = (b >> shifter) & maxq, zeros = ((zeros >> zeros_shifter) & maxq) + 1, b = (b - zeros) * scales; "
            "after GPTQ-triton's matmul4_kernel)")
GS = 32
SIZES = [dict(M=37, N=40, K=72), dict(M=1, N=8, K=8), dict(M=3, N=24, K=256)]


def make(fast: bool):
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float16", name="A")
    qweight = tc.placeholder((K // 8, N), "int32", name="qweight")
    qzeros = tc.placeholder(((K + GS - 1) // GS, N // 8), "int32", name="qzeros")
    scales = tc.placeholder(((K + GS - 1) // GS, N), "float16", name="scales")
    Wd = tc.compute((K, N), lambda k, j: (((qweight[k // 8, j] >> (4 * (k % 8))) & 15)
                                          - (((qzeros[k // GS, j // 8] >> (4 * (j % 8))) & 15) + 1))
                    * scales[k // GS, j], name="Wd", dtype="float16")
    kk = tc.reduce_axis(K, name="kk")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, kk] * Wd[kk, j], axis=kk), name="C", dtype="float16")
    s = tc.create_schedule(C)
    if fast:
        i, j = C.axis
        io, ii = s[C].split(i, tc.knob("BM", [32, 64, 16]))
        jo, ji = s[C].split(j, tc.knob("BN", [64, 128, 32]))
        ko, ki = s[C].split(kk, tc.knob("BK", [32, 64]))
        s[C].reorder(io, jo, ko, ii, ji, ki)
        tiles = s[C].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 1]))
        s[C].bind(tiles, "program_id.0")
        s[Wd].compute_at(s[C], ko)
        s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
        s[C].pipeline(ko, stages=tc.knob("stages", [2, 3, 4]))
        s[C].num_warps(tc.knob("warps", [4, 8]))
    return s, [A, qweight, qzeros, scales, C]


def _pack(q: torch.Tensor, dim: int) -> torch.Tensor:
    """Eight 4-bit values (0..15) per int32 along `dim`, the first in the low bits (GPTQ's packing)."""
    q = q.movedim(dim, 0).to(torch.int64)
    q = q.reshape(q.shape[0] // 8, 8, *q.shape[1:])
    word = sum(q[:, n] << (4 * n) for n in range(8))
    word = torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)  # the bits as int32
    return word.movedim(0, dim)


def inputs(sizes, device):
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    groups = (K + GS - 1) // GS
    q = torch.randint(0, 16, (K, N), device=device)
    z = torch.randint(0, 16, (groups, N), device=device)  # stored minus one, as GPTQ stores them
    scales = (harness.randn((groups, N), torch.float32, device).abs() * 0.05 + 0.01).half()
    return [harness.randn((M, K), torch.float16, device), _pack(q, 0), _pack(z, 1), scales]


def _unpack(word: torch.Tensor, dim: int) -> torch.Tensor:
    w = word.movedim(dim, 0).to(torch.int64) & 0xFFFFFFFF
    q = torch.stack([(w >> (4 * n)) & 15 for n in range(8)], 1)
    return q.reshape(-1, *q.shape[2:]).movedim(0, dim)


def reference(a, qweight, qzeros, scales):
    K = a.shape[1]
    g = torch.arange(K, device=a.device) // GS
    q = _unpack(qweight, 0)
    z = _unpack(qzeros, 1) + 1
    wd = ((q - z[g]).double() * scales.double()[g]).half()
    return (a.double()[:, :, None] * wd.double()[None]).sum(1).half()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU, what a PyTorch user runs, the FLOPs for the
# tensor-core roofline (AutoGPTQ's kernel is not imported: no `original`).
BENCH = dict(M=4096, N=4096, K=4096)
FLOPS = lambda sizes: 2 * sizes["M"] * sizes["N"] * sizes["K"]


def torch_ref(a, qweight, qzeros, scales):
    """Eager PyTorch as a GPTQ fallback path writes it: unpack the weights and zero points with shifts and masks,
    dequantize to float16 ((q - z) * scale, per group of GS rows), then cuBLAS's float16 GEMM."""
    K, N = a.shape[1], qweight.shape[1]
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=a.device)
    q = ((qweight[:, None, :] >> shifts[None, :, None]) & 15).reshape(K, N)
    z = (((qzeros[:, :, None] >> shifts[None, None, :]) & 15) + 1).reshape(qzeros.shape[0], N)
    g = torch.arange(K, device=a.device) // GS
    w = ((q - z[g]) * scales[g]).to(a.dtype)
    return a @ w
