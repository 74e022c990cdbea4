"""GEMM: C = A @ W in float16 with a float32 accumulator, tiled and pipelined (tl.dot per K step).

A 1-D grid this time: the two tile loops are fused and bound to program_id.0.
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=256, N=192, K=128), dict(M=100, N=130, K=70), dict(M=1, N=17, K=1)]


def make():
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float16", name="A")
    W = tc.placeholder((K, N), "float16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k, acc_dtype="float32"),
                   name="C", dtype="float16")
    s = tc.create_schedule(C)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [64, 128]), tc.knob("BN", [64, 128]))
    ko, ki = s[C].split(k, tc.knob("BK", [32, 64]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].fuse(io, jo), "program_id.0")
    s[C].pipeline(ko, stages=tc.knob("stages", [3, 4]))
    return s, [A, W, C]


def inputs(sizes, device):
    return [common.randn((sizes["M"], sizes["K"]), torch.float16, device),
            common.randn((sizes["K"], sizes["N"]), torch.float16, device)]


def reference(a, w):
    return (a.float() @ w.float()).half()


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
