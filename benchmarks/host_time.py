"""Host time per call of tilec kernels, with and without the direct launch path, beside eager PyTorch, and
whether the pointer-form GEMM's PTX is vectorized without tl.multiple_of hints (a benchmark, not a test).

    python benchmarks/host_time.py [--json out.json]

A kernel call's host time is what Python spends before the GPU can start it: tilec's argument checks and
output allocation, tensor descriptors, then Triton's launch. Where it exceeds the GPU time, the call is
host-bound and do_bench measures the host (benchmarks/NOTES.md, split-K). tilec launches a prepared
call's kernels directly (tilec/runtime/triton_compat.py: direct_launcher) after the first launch; the
"via fn[grid]" rows turn that off to show what Triton's JITFunction.run costs per launch.

Per row: host us per call (200 calls queued without waiting), GPU us per call (a CUDA graph of 20 calls),
and do_bench's median (rotated inputs), all for GEMM+SiLU at K=4096, N=12288 (examples/persistent_gemm.py)
and split-K at N=4096, K=14336 (examples/splitk_gemm.py). Each config is checked against PyTorch first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

import bench  # noqa: E402
import common  # noqa: E402
import persistent_gemm  # noqa: E402
import splitk_gemm  # noqa: E402
from gpu_time import graph_us, host_us  # noqa: E402

import tilec as tc  # noqa: E402
from tilec.runtime import triton_compat  # noqa: E402

F = torch.nn.functional


def row(name, fn, sets, ref=None):
    xs = sets[0]
    err = max(common.check(fn(*xs), ref)) if ref is not None else None
    r = {"call": name, "host_us": host_us(fn, xs), "gpu_us": graph_us(fn, xs),
         "do_bench_us": bench.bench(fn, sets) * 1e6, "rel_err": err}
    print(f"  {name:58} host {r['host_us']:7.1f}  gpu {r['gpu_us']:7.1f}  do_bench {r['do_bench_us']:7.1f}"
          + (f"  rel err {err:.1e}" if err is not None else ""), flush=True)
    return r


def tilec_rows(label, mod, config, sets, ref):
    """The same config built twice: the direct launch path, then every launch through fn[grid]."""
    s, args = mod.make()
    out = [row(f"{label} direct", tc.build(s, args, config=config), sets, ref)]
    real = triton_compat.direct_launcher
    triton_compat.direct_launcher = lambda compiled, blocks=None: None
    try:
        s, args = mod.make()
        out.append(row(f"{label} via fn[grid]", tc.build(s, args, config=config), sets, ref))
    finally:
        triton_compat.direct_launcher = real
    return out


def ptx_vectorized() -> dict:
    """Whether Triton vectorizes the pointer-form GEMM's loads and stores without tilec emitting hints:
    counts 16-byte cp.async copies and v4/v8 global stores in the PTX of a compiled kernel."""
    s, args = persistent_gemm.make()
    k = tc.build(s, args, config={"BM": 128, "BN": 128, "BK": 64, "stages": 3, "GROUP_M": 8, "FLATTEN": 0,
                                  "TMA": 0})
    a, w = persistent_gemm.inputs(dict(M=256, N=512, K=256), "cuda")
    k(a, w)
    fn = k._calls[next(iter(k._calls))][3][0].fn
    ptx = ""
    for cache in fn.device_caches.values():
        for compiled in cache[0].values():
            ptx = compiled.asm.get("ptx", "")
    found = {"cp_async_16B": len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)),  # .cg copies 16 bytes
             "cp_async_other": len(re.findall(r"cp\.async\.ca\.shared\.global", ptx)),
             "st_global_vector": len(re.findall(r"st\.global(\.\w+)*\.v[248]", ptx)),
             "st_global_scalar": len(re.findall(r"st\.global(\.\w+)*\.b16 ", ptx))}
    print(f"  PTX of the pointer-form GEMM+SiLU (128x128x64): {found}", flush=True)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    sets = bench.input_sets(persistent_gemm, dict(M=256, N=12288, K=4096), "cuda")
    ref = persistent_gemm.reference(*sets[0])
    print("GEMM+SiLU M=256, N=12288, K=4096", flush=True)
    rows.append(row("eager F.silu(a @ w)", lambda a, w: F.silu(a @ w), sets))
    base = {"BK": 64, "GROUP_M": 8, "FLATTEN": 0}
    for label, cfg in (("128x192 5st TMA loads", dict(BM=128, BN=192, stages=5, TMA=1)),
                       ("128x192 4st TMA loads+store", dict(BM=128, BN=192, stages=4, TMA=1, TMA_STORE=1)),
                       ("128x192 5st pointers", dict(BM=128, BN=192, stages=5, TMA=0))):
        rows += tilec_rows(label, persistent_gemm, {**base, "TMA_STORE": 0, **cfg}, sets, ref)
    sets = bench.input_sets(splitk_gemm, dict(M=256, N=4096, K=14336), "cuda")
    ref = splitk_gemm.reference(*sets[0])
    print("split-K GEMM+SiLU M=256, N=4096, K=14336", flush=True)
    rows.append(row("eager F.silu(a @ w)", lambda a, w: F.silu(a @ w), sets))
    for tma in (1, 0):
        cfg = {"BM": 128, "BN": 128, "BK": 64, "stages": 4, "GROUP_M": 8, "TMA": tma, "SPLIT_K": 2}
        rows += tilec_rows(f"128x128 SPLIT_K=2 TMA={tma}", splitk_gemm, cfg, sets, ref)
    out = {"rows": rows, "ptx": ptx_vectorized()}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
