"""Side-by-side timings on the GPU: tilec's kernels against eager PyTorch and torch.compile, with the
roofline floor, in one run (a benchmark, not a test).

    python benchmarks/bench.py [--json out.json] [--quick] [--no-compile]

For each workload: check tilec's output against PyTorch on fresh random inputs (relative error),
then time every variant with triton.testing.do_bench (median after warm-up; inputs rotated past L2
where they would fit in it). Prints a table of times, TFLOP/s or TB/s, ratios (anchor time / tilec
time: above 1 means tilec is faster) and the share of the floor reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import common  # noqa: E402
import matmul_silu  # noqa: E402
import rmsnorm  # noqa: E402
import rowscale_fp8  # noqa: E402
import silu_mul_fp8  # noqa: E402
import softmax  # noqa: E402
import transpose_bias  # noqa: E402

import tilec as tc  # noqa: E402

PEAK_BF16 = 700e12   # cuBLAS bf16 GEMM rate measured on this H200 (shared/notes/gpu.md: 678-790 TFLOP/s)
BANDWIDTH = 4.25e12  # device copy bandwidth (4.28 TB/s measured)
L2 = 60 * 2**20


def bench(fn, inputs_list, reps=50):
    """Median time (s) of fn over rotating input sets (so L2 holds no previous result)."""
    from triton.testing import do_bench
    state = {"n": 0}

    def run():
        xs = inputs_list[state["n"] % len(inputs_list)]
        state["n"] += 1
        fn(*xs)

    return do_bench(run, warmup=25, rep=reps, return_mode="median") * 1e-3


def input_sets(mod, sizes, device):
    first = mod.inputs(sizes, device)
    nbytes = sum(x.numel() * x.element_size() for x in first)
    n = 1 if nbytes > 2 * L2 else min(8, 2 + (2 * L2) // max(nbytes, 1))
    return [first] + [mod.inputs(sizes, device) for _ in range(n - 1)]


F = torch.nn.functional


def _rmsnorm_eager(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + rmsnorm.EPS)).to(x.dtype) * w


# What a PyTorch user writes (the anchor timed against; the examples' `reference` functions are
# accuracy references that compute in float32 and are not what eager code looks like).
EAGER = {
    matmul_silu: lambda a, w: F.silu(a @ w),
    silu_mul_fp8: lambda g, u: (F.silu(g) * u * (1.0 / silu_mul_fp8.SCALE)).clamp(-448, 448).to(torch.float8_e4m3fn),
    rmsnorm: _rmsnorm_eager,
    softmax: lambda x: torch.softmax(x, dim=1),
    transpose_bias: lambda x, b: x.t() + b[:, None],
    rowscale_fp8: rowscale_fp8.reference,
}


def workload(name, mod, sizes, *, flops=0.0, nbytes=0.0, configs=None, compile_ref=True):
    """Time tilec (best of `configs`, each checked) against eager and torch.compile on one shape."""
    s, args = mod.make()
    sets = input_sets(mod, sizes, "cuda")
    ref = mod.reference(*sets[0])
    best = None
    for config in configs or [None]:
        try:
            k = tc.build(s, args, config=config)
            err = max(common.check(k(*sets[0]), ref))
        except Exception as e:  # noqa: BLE001 - a failing config is reported, never chosen
            print(f"  {name} config {config}: FAILED {type(e).__name__}: {str(e)[:120]}")
            continue
        t = bench(k, sets)
        if best is None or t < best[0]:
            best = (t, config, err)
    row = {"workload": name, "sizes": sizes}
    if best is None:
        row["error"] = "no config ran"
        return row
    t, config, err = best
    row.update(tilec_us=t * 1e6, config=config, rel_error=err)
    eager = EAGER[mod]
    row["eager_us"] = bench(eager, sets) * 1e6
    if compile_ref:
        try:
            comp = torch.compile(eager, mode="max-autotune-no-cudagraphs", dynamic=False)
            comp(*sets[0])
            row["compile_us"] = bench(comp, sets) * 1e6
        except Exception as e:  # noqa: BLE001
            row["compile_error"] = f"{type(e).__name__}: {str(e)[:100]}"
    floor = max(flops / PEAK_BF16, nbytes / BANDWIDTH)
    row["floor_us"] = floor * 1e6
    row["floor_share"] = floor / t if floor else None
    row["vs_eager"] = row["eager_us"] / row["tilec_us"]
    if "compile_us" in row:
        row["vs_compile"] = row["compile_us"] / row["tilec_us"]
    return row


def gemm_configs(quick):
    out = []
    for bm, bn, bk, st, w in [(128, 128, 64, 3, 4), (128, 256, 64, 3, 8), (64, 128, 64, 4, 4),
                              (128, 128, 64, 4, 8), (256, 128, 64, 3, 8), (64, 256, 64, 3, 4)]:
        out.append({"BM": bm, "BN": bn, "BK": bk, "stages": st, "warps": w})
    return out[:2] if quick else out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    cr = not a.no_compile
    rows = []
    K, N = 4096, 12288
    for M in (256, 1536, 2048):
        rows.append(workload(f"gemm_silu M={M}", matmul_silu, dict(M=M, N=N, K=K), flops=2 * M * N * K,
                             nbytes=2 * (M * K + K * N + M * N), configs=gemm_configs(a.quick), compile_ref=cr))
    for M in (1024, 8192):
        rows.append(workload(f"silu_mul_fp8 {M}x12288", silu_mul_fp8, dict(M=M, N=12288),
                             nbytes=M * 12288 * 5, configs=[{"BM": 16, "BN": 256}, {"BM": 32, "BN": 128}],
                             compile_ref=cr))
    for M in (1, 1024, 16384):
        rows.append(workload(f"rmsnorm {M}x4096", rmsnorm, dict(M=M, N=4096), nbytes=M * 4096 * 4 + 8192,
                             configs=[{"BLOCK": 4096, "warps": 8}, {"BLOCK": 2048, "warps": 8},
                                      {"BLOCK": 1024, "warps": 4}], compile_ref=cr))
    for M, Nn in ((4096, 4096), (16384, 8192)):
        rows.append(workload(f"softmax {M}x{Nn}", softmax, dict(M=M, N=Nn), nbytes=M * Nn * 8,
                             configs=[{"BLOCK": 1024}, {"BLOCK": 2048}], compile_ref=cr))
    rows.append(workload("transpose 8192x8192", transpose_bias, dict(M=8192, N=8192), nbytes=8192 * 8192 * 8,
                         configs=[{"BR": 32, "BC": 32}, {"BR": 64, "BC": 64}, {"BR": 32, "BC": 64}], compile_ref=cr))
    rows.append(workload("rowscale_fp8 8192x8192", rowscale_fp8, dict(M=8192, N=8192), nbytes=8192 * 8192 * 3,
                         configs=[{"BLOCK": 1024}, {"BLOCK": 2048}], compile_ref=cr))
    mix = [r for r in rows if r["workload"].startswith("gemm_silu") and "tilec_us" in r]
    if len(mix) == 3:
        w = (8, 1, 1)
        rows.append({"workload": "gemm_silu mix 8:1:1 (weighted per call)",
                     "tilec_us": sum(wi * r["tilec_us"] for wi, r in zip(w, mix)) / 10,
                     "eager_us": sum(wi * r["eager_us"] for wi, r in zip(w, mix)) / 10})
        rows[-1]["vs_eager"] = rows[-1]["eager_us"] / rows[-1]["tilec_us"]
    print(f"\n{'workload':34} {'tilec us':>9} {'eager us':>9} {'compile us':>10} {'x eager':>8} {'x compile':>9} "
          f"{'floor%':>7} {'rel err':>8}  config")
    def f(r, key, fmt):
        v = r.get(key)
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    for r in rows:
        share = f"{100 * r['floor_share']:.0f}%" if r.get("floor_share") else "-"
        print(f"{r['workload']:34} {f(r, 'tilec_us', '9.1f')} {f(r, 'eager_us', '9.1f')} "
              f"{f(r, 'compile_us', '10.1f')} {f(r, 'vs_eager', '8.2f')} {f(r, 'vs_compile', '9.2f')} {share:>7} "
              f"{f(r, 'rel_error', '8.1e')}  {r.get('config')}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
