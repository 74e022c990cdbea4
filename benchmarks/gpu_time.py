"""GPU-only and host-included times of split-K GEMM+SiLU configs beside eager PyTorch and cuBLAS, per shape
(a benchmark, not a test): N=4096, K=14336, M in 128, 256, 512 (examples/splitk_gemm.py).

    python benchmarks/gpu_time.py

GPU-only: a CUDA graph of 20 calls, replayed (the median of 5 replays per call). Host-included:
`bench.bench` (triton's do_bench over the calls as Python makes them). Where the second is well above
the first, the call is bound by its host time (launches, tensor descriptors made per call), not by
the GPU: benchmarks/NOTES.md (split-K) has the figures. Each config is checked against PyTorch first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

import bench  # noqa: E402
import common  # noqa: E402
import splitk_gemm  # noqa: E402

import tilec as tc  # noqa: E402


def graph_us(fn, xs, n=20) -> float:
    """Microseconds per call of fn(*xs) on the GPU alone: a CUDA graph of n calls, median of 5 replays."""
    fn(*xs)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn(*xs)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(1e3 * e0.elapsed_time(e1) / n)
    return sorted(times)[2]


def host_us(fn, xs, n=200) -> float:
    """Microseconds of host time per call (the calls queued without waiting for the GPU)."""
    fn(*xs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*xs)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / n


def main():
    s, args = splitk_gemm.make()
    eager = lambda a, w: torch.nn.functional.silu(a @ w)  # noqa: E731
    for M in (128, 256, 512):
        sets = bench.input_sets(splitk_gemm, dict(M=M, N=4096, K=14336), "cuda")
        xs = sets[0]
        ref = splitk_gemm.reference(*xs)
        print(f"M={M}: eager graph {graph_us(eager, xs):.1f} us, do_bench {bench.bench(eager, sets) * 1e6:.1f}; "
              f"cuBLAS alone graph {graph_us(lambda a, w: a @ w, xs):.1f}", flush=True)
        for bm, bn, tma in ((128, 128, 0), (128, 128, 1), (64, 128, 0)):
            for sk in (1, 2, 3, 4):
                c = {"BM": bm, "BN": bn, "BK": 64, "stages": 4, "GROUP_M": 8, "TMA": tma, "SPLIT_K": sk}
                k = tc.build(s, args, config=c)
                err = max(common.check(k(*xs), ref))
                print(f"  {bm}x{bn} TMA={tma} SPLIT_K={sk}: graph {graph_us(k, xs):6.1f}  do_bench "
                      f"{bench.bench(k, sets) * 1e6:6.1f}  host {host_us(k, xs):6.1f}  rel err {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
