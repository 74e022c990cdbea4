"""Side-by-side timings on the GPU: tilec's kernels against eager PyTorch and torch.compile, with the
roofline floor, in one run (a benchmark, not a test).

    python benchmarks/bench.py [--json out.json] [--quick] [--no-compile] [--only gemm,mix,...]
                               [--anchor ../shared/anchors/hand_tma_gemm.py]

For each workload: check tilec's output against PyTorch on fresh random inputs (relative error),
then time every variant with triton.testing.do_bench (median after warm-up; inputs rotated past L2
where they would fit in it). Prints a table of times, TFLOP/s or TB/s, ratios (anchor time / tilec
time: above 1 means tilec is faster) and the share of the floor reached.

GEMMs are timed beside cuBLAS alone (`a @ w`) and, with `--anchor`, beside the hand-written Hopper
kernel (`hand_tma_gemm.py`: its best config per shape, each checked). A GEMM row's tilec time is the
best over two schedules: DESIGN's (examples/matmul_silu.py) and the persistent, grouped one
(examples/persistent_gemm.py); `schedule` says which won.
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
import persistent_gemm  # noqa: E402
import rmsnorm  # noqa: E402
import rowscale_fp8  # noqa: E402
import silu_mul_fp8  # noqa: E402
import softmax  # noqa: E402
import splitk_gemm  # noqa: E402
import swiglu  # noqa: E402
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
    persistent_gemm: lambda a, w: F.silu(a @ w),
    silu_mul_fp8: lambda g, u: (F.silu(g) * u * (1.0 / silu_mul_fp8.SCALE)).clamp(-448, 448).to(torch.float8_e4m3fn),
    rmsnorm: _rmsnorm_eager,
    softmax: lambda x: torch.softmax(x, dim=1),
    transpose_bias: lambda x, b: x.t() + b[:, None],
    rowscale_fp8: rowscale_fp8.reference,
    swiglu: lambda x, wg, wu: F.silu(x @ wg) * (x @ wu),
    splitk_gemm: lambda a, w: F.silu(a @ w),
}


class _Plain:
    """A GEMM example's plain-GEMM form (make(epilogue=False)), as a module the workloads can time."""

    def __init__(self, mod):
        self.mod, self.__name__ = mod, mod.__name__ + "_plain"
        self.inputs, self.reference = mod.inputs, mod.reference_gemm

    def make(self):
        return self.mod.make(epilogue=False)


class _TwoLoops:
    """examples/swiglu.py without compute_with (make(one_loop=False)): its two loops over K apart."""

    __name__ = "swiglu_two_loops"
    inputs, reference = swiglu.inputs, swiglu.reference

    @staticmethod
    def make():
        return swiglu.make(one_loop=False)


PLAIN = _Plain(persistent_gemm)
TWO_LOOPS = _TwoLoops()
EAGER[PLAIN] = lambda a, w: a @ w


def workload(name, mod, sizes, *, flops=0.0, nbytes=0.0, configs=None, compile_ref=True, schedules=None,
             cublas=False, anchor=None, silu=False):
    """Time tilec (best of `configs` over each schedule module, each checked) against eager and
    torch.compile on one shape; with `cublas`, `a @ w` alone; with `anchor`, the hand-written kernel."""
    sets = input_sets(mod, sizes, "cuda")
    ref = mod.reference(*sets[0])
    best = None
    for smod, cfgs in (schedules or [(mod, configs)]):
        s, args = smod.make()
        for config in cfgs or [None]:
            try:
                k = tc.build(s, args, config=config)
                err = max(common.check(k(*sets[0]), ref))
            except Exception as e:  # noqa: BLE001 - a failing config is reported, never chosen
                print(f"  {name} {smod.__name__} config {config}: FAILED {type(e).__name__}: {str(e)[:120]}")
                continue
            t = bench(k, sets)
            print(f"  {name} {smod.__name__} {t * 1e6:8.1f} us  {config}", flush=True)
            if best is None or t < best[0]:
                best = (t, config, err, smod.__name__)
    row = {"workload": name, "sizes": sizes}
    if best is None:
        row["error"] = "no config ran"
        return row
    t, config, err, sname = best
    row.update(tilec_us=t * 1e6, config=config, rel_error=err, schedule=sname)
    eager = EAGER[mod]
    row["eager_us"] = bench(eager, sets) * 1e6
    if cublas:
        row["cublas_us"] = bench(lambda a, w: a @ w, sets) * 1e6
        row["vs_cublas"] = row["cublas_us"] / row["tilec_us"]
    if anchor is not None:
        row.update(_anchor(anchor, sets, ref, silu))
        if "anchor_us" in row:
            row["vs_anchor"] = row["anchor_us"] / row["tilec_us"]
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


def _anchor_configs(configs):
    """The part of the anchor's sweep that fits the time of one device call: 128 x 256 tiles with 3 stages
    and 8 warps, 128-wide ones with 4 stages (its fastest on the H200, shared/notes/hopper.md), each plain,
    persistent and persistent + flatten."""
    return [c for c in configs if (c["BN"] == 256 and c["stages"] == 3 and c["warps"] == 8)
            or (c["BN"] == 128 and c["stages"] == 4)]


def _anchor(path, sets, ref, silu):
    """The hand-written kernel's best config on these inputs (each checked as tilec's are)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("hand_anchor", path)
    hand = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hand)
    a, w = sets[0]
    best = None
    for cfg in _anchor_configs(hand.configs(small=a.shape[0] <= 512)):
        try:
            fns = [hand.make(x, y, cfg, silu) for x, y in sets]
            common.check(fns[0](), ref)
        except Exception:  # noqa: BLE001 - its failing configs are skipped, as its own sweep does
            continue
        t = bench(lambda fn: fn(), [[fn] for fn in fns])  # rotated past L2, as tilec's inputs are
        if best is None or t < best[0]:
            best = (t, cfg)
    return {} if best is None else {"anchor_us": best[0] * 1e6, "anchor_cfg": best[1]}


def persistent_configs(quick):
    """examples/persistent_gemm.py's configs: 128 x 256 (8 warps by default) and 128 x 192 (sub-tiles
    128 + 64) tiles, with and without tensor descriptors (TMA loads; TMA_STORE: the output tile too) and
    flatten."""
    out = []
    for bm, bn, st, fl, tma, store in [(128, 256, 3, 0, 1, 0), (128, 256, 3, 1, 1, 0), (128, 192, 5, 0, 1, 0),
                                       (128, 192, 4, 0, 1, 0), (128, 256, 3, 0, 0, 0), (128, 192, 4, 0, 0, 0),
                                       (128, 128, 4, 0, 1, 0), (128, 256, 3, 0, 1, 1), (128, 256, 3, 1, 1, 1),
                                       (128, 192, 4, 0, 1, 1)]:
        out.append({"BM": bm, "BN": bn, "BK": 64, "stages": st, "GROUP_M": 8, "FLATTEN": fl, "TMA": tma,
                    "TMA_STORE": store})
    return out[:2] if quick else out


def swiglu_configs(quick):
    """examples/swiglu.py's configs: 128 x 128 output tiles (two float32 accumulators: 8 warps by default),
    64 x 128, and 192- or 256-wide ones (at M=256, 128 x 192 tiles are 128 programs: one wave on 132 SMs),
    with and without tensor descriptors (TMA_STORE: the Y tile stored through one too)."""
    out = []
    for bm, bn, st, tma, store in [(128, 128, 3, 1, 0), (128, 128, 4, 1, 0), (64, 128, 4, 1, 0), (128, 64, 4, 1, 0),
                                   (128, 128, 3, 0, 0), (64, 128, 4, 0, 0), (128, 192, 3, 1, 0), (64, 256, 3, 1, 0),
                                   (64, 192, 4, 1, 0), (128, 128, 3, 1, 1), (64, 128, 4, 1, 1), (64, 256, 3, 1, 1),
                                   (64, 192, 4, 1, 1)]:
        out.append({"BM": bm, "BN": bn, "BK": 64, "stages": st, "GROUP_M": 8, "TMA": tma, "TMA_STORE": store})
    return out[:2] if quick else out


def splitk_configs(quick, parts=(1, 2, 3, 4)):
    """examples/splitk_gemm.py's configs: 128 x 128 and 128 x 64 tiles with TMA, SPLIT_K parts each."""
    out = []
    for bm, bn, st in [(128, 128, 4), (128, 128, 3), (128, 64, 4), (64, 128, 4)]:
        for sk in parts:
            out.append({"BM": bm, "BN": bn, "BK": 64, "stages": st, "GROUP_M": 8, "TMA": 1, "SPLIT_K": sk})
    return out[:4] if quick else out


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
    ap.add_argument("--only", help="comma-separated groups: gemm, mix, swiglu, splitk, other")
    ap.add_argument("--anchor", help="path of the hand-written kernel (shared/anchors/hand_tma_gemm.py)")
    a = ap.parse_args()
    cr = not a.no_compile
    only = set(a.only.split(",")) if a.only else None
    want = lambda group: only is None or group in only  # noqa: E731
    rows = []
    K, N = 4096, 12288
    both = [(matmul_silu, gemm_configs(a.quick)), (persistent_gemm, persistent_configs(a.quick))]
    for M in (256, 1536, 2048) if want("mix") else ():
        rows.append(workload(f"gemm_silu M={M}", matmul_silu, dict(M=M, N=N, K=K), flops=2 * M * N * K,
                             nbytes=2 * (M * K + K * N + M * N), schedules=both, compile_ref=cr, cublas=True,
                             anchor=a.anchor, silu=True))
    for n in (4096, 8192) if want("gemm") else ():
        rows.append(workload(f"gemm {n}^3", PLAIN, dict(M=n, N=n, K=n), flops=2 * n ** 3, nbytes=6 * n * n,
                             configs=persistent_configs(a.quick), compile_ref=cr, cublas=True, anchor=a.anchor))
    for M in (256, 1536, 2048) if want("swiglu") else ():
        sizes = dict(M=M, N=N, K=K)
        rows.append(workload(f"swiglu M={M}", swiglu, sizes, flops=4 * M * N * K,
                             nbytes=2 * (M * K + 2 * K * N + M * N),
                             schedules=[(swiglu, swiglu_configs(a.quick))], compile_ref=cr))
        two = workload(f"swiglu M={M} two loops", swiglu, sizes, flops=4 * M * N * K,
                       nbytes=2 * (M * K + 2 * K * N + M * N), schedules=[(TWO_LOOPS, swiglu_configs(a.quick))],
                       compile_ref=False)
        rows.append(two)
    for M, Nk, Kk in ((128, 4096, 14336), (256, 4096, 14336), (512, 4096, 14336)) if want("splitk") else ():
        sizes = dict(M=M, N=Nk, K=Kk)
        fl, nb = 2 * M * Nk * Kk, 2 * (M * Kk + Kk * Nk + M * Nk)
        rows.append(workload(f"splitk {M}x{Nk}x{Kk}", splitk_gemm, sizes, flops=fl, nbytes=nb, cublas=True,
                             schedules=[(splitk_gemm, splitk_configs(a.quick))], compile_ref=cr))
        rows.append(workload(f"splitk {M}x{Nk}x{Kk} SPLIT_K=1", splitk_gemm, sizes, flops=fl, nbytes=nb,
                             schedules=[(splitk_gemm, splitk_configs(a.quick, parts=(1,)))], compile_ref=False))
    if not want("other"):
        return _report(rows, a.json)
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
    _report(rows, a.json)


def _report(rows, json_path):
    for prefix, suffix, label in (("gemm_silu M=", "", "gemm_silu mix 8:1:1 (weighted per call)"),
                                  ("swiglu M=", "", "swiglu mix 8:1:1 (weighted per call)"),
                                  ("swiglu M=", " two loops", "swiglu two loops mix 8:1:1")):
        _mix_row(rows, prefix, suffix, label)
    _print(rows, json_path)


def _mix_row(rows, prefix, suffix, label):
    """The design's mix (M = 256, 1536, 2048 at 8:1:1) per weighted call, from the rows `prefix` M `suffix`."""
    mix = [r for r in rows if r["workload"] in (f"{prefix}{m}{suffix}" for m in (256, 1536, 2048))
           and "tilec_us" in r]
    if len(mix) == 3:
        w = (8, 1, 1)
        row = {"workload": label}
        for key in ("tilec_us", "eager_us", "compile_us", "cublas_us", "anchor_us"):
            if all(key in r for r in mix):
                row[key] = sum(wi * r[key] for wi, r in zip(w, mix)) / 10
        for key, base in (("vs_eager", "eager_us"), ("vs_compile", "compile_us"), ("vs_cublas", "cublas_us"),
                          ("vs_anchor", "anchor_us")):
            if base in row:
                row[key] = row[base] / row["tilec_us"]
        rows.append(row)


def _print(rows, json_path):
    print(f"\n{'workload':34} {'tilec us':>9} {'eager us':>9} {'compile us':>10} {'cuBLAS us':>9} {'anchor us':>9} "
          f"{'x eager':>8} {'x compile':>9} {'x cuBLAS':>8} {'x anchor':>8} {'floor%':>7} {'rel err':>8}  config")

    def f(r, key, fmt):
        v = r.get(key)
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    for r in rows:
        share = f"{100 * r['floor_share']:.0f}%" if r.get("floor_share") else "-"
        print(f"{r['workload']:34} {f(r, 'tilec_us', '9.1f')} {f(r, 'eager_us', '9.1f')} "
              f"{f(r, 'compile_us', '10.1f')} {f(r, 'cublas_us', '9.1f')} {f(r, 'anchor_us', '9.1f')} "
              f"{f(r, 'vs_eager', '8.2f')} {f(r, 'vs_compile', '9.2f')} {f(r, 'vs_cublas', '8.2f')} "
              f"{f(r, 'vs_anchor', '8.2f')} {share:>7} {f(r, 'rel_error', '8.1e')}  {r.get('schedule', '')} "
              f"{r.get('config')}")
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
