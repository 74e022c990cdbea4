"""DESIGN.md section 1's GEMM + SiLU schedule exactly as written there: no `num_warps`, no swizzle, no
persistent programs, no tensor descriptors, tiles from {64, 128, 256}. A recipe for
benchmarks/tune_design.py (tuning workers rebuild the schedule from this file's make())."""

import torch

import tilec as tc


def make():
    M, N, K = tc.size_vars("M N K")                      # symbolic sizes: one kernel, many shapes
    A = tc.placeholder((M, K), "bfloat16", name="A")
    W = tc.placeholder((K, N), "bfloat16", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k, acc_dtype="float32"),
                   name="C", dtype="bfloat16")             # accumulate in f32, round to bf16
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y")

    s = tc.create_schedule(Y)
    i, j = C.axis; (kk,) = C.reduce_axis  # noqa: E702 - as DESIGN.md writes it
    io, ii = s[C].split(i, tc.knob("BM", [64, 128, 256]))
    jo, ji = s[C].split(j, tc.knob("BN", [64, 128, 256]))
    ko, ki = s[C].split(kk, tc.knob("BK", [32, 64]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0"); s[C].bind(jo, "program_id.1")  # noqa: E702
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_write(C, "local").compute_at(s[C], jo)       # accumulator lives in registers
    s[C].pipeline(ko, stages=tc.knob("stages", [2, 3, 4]))
    s[Y].compute_at(s[C], jo)                            # SiLU fused as the epilogue
    return s, [A, W, Y]


def reference(a, w):
    c = (a.float() @ w.float()).to(torch.bfloat16)
    return torch.nn.functional.silu(c.float()).to(torch.bfloat16)
