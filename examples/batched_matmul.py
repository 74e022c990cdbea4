"""Batched GEMM: C[b] = A[b] @ W[b] in bfloat16 with a float32 accumulator; the batch on program_id.2."""

import common
import torch

import tilec as tc

SIZES = [dict(B=4, M=128, N=128, K=64), dict(B=3, M=100, N=130, K=70), dict(B=1, M=1, N=1, K=1)]


def make():
    B, M, N, K = tc.size_vars("B M N K")
    A = tc.placeholder((B, M, K), "bfloat16", name="A")
    W = tc.placeholder((B, K, N), "bfloat16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((B, M, N), lambda b, i, j: tc.sum(A[b, i, k] * W[b, k, j], axis=k), name="C",
                   dtype="bfloat16")
    s = tc.create_schedule(C)
    b, i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [64, 128]), tc.knob("BN", [64, 128]))
    ko, ki = s[C].split(k, tc.knob("BK", [32, 64]))
    s[C].reorder(b, io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].bind(b, "program_id.2")
    s[C].pipeline(ko, stages=3)
    return s, [A, W, C]


def inputs(sizes, device):
    B, M, N, K = (sizes[n] for n in "BMNK")
    return [common.randn((B, M, K), torch.bfloat16, device), common.randn((B, K, N), torch.bfloat16, device)]


def reference(a, w):
    return torch.bmm(a.float(), w.float()).to(torch.bfloat16)


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
