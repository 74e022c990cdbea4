"""The reductions table on the GPU: tilec's softmax, RMSNorm, per-row fp8 quantization and attention
kernels beside eager PyTorch, torch.compile and PyTorch's attention backends, in one run (a benchmark,
not a test).

    python benchmarks/reductions.py [--json out.json] [--quick] [--no-compile] [--compile-mode MODE]
                                    [--only copy,softmax,rmsnorm,rowscale,attention,decode]
    python benchmarks/reductions.py --smoke --no-compile     # CPU, Triton's interpreter: runs, not speed

First row: the device copy bandwidth, measured (`dst.copy_(src)` on 1 GiB of float32: bytes read and
written / median time); every "% of copy" below is against this number.

Memory-bound rows (softmax float32 and bfloat16, RMSNorm and per-row-scale fp8 bfloat16): every tilec
config is checked against the example's reference (relative error) and timed; the fastest that passed
is the row's, beside eager PyTorch and torch.compile (default mode, one static compile per shape).
Effective TB/s counts the fewest bytes: each input read once, each output written once.

Attention rows (bfloat16, Z=2 x H=16 heads, head dim 128, N = 1024, 4096, 8192, causal and not):
tilec's configs, then scaled_dot_product_attention under the flash, cuDNN and math backends (math only
for N <= 4096: it materializes the N x N scores). Each output is checked on its first two (z, h) pairs
against a float32 attention computed there. TFLOP/s counts 4 * Z * H * N^2 * d, half of it when causal.

Decode rows (--only decode): softmax float32 32 x 32768 with its statistics split over programs
(softmax.make(split=True)) and with one program a row, RMSNorm 1 x 4096, and attention with one query
and 32768 keys (Z=1 x H=32, d=128) split over the keys (attention.make(split=True), flash-decoding),
its time as a share of the byte floor (K and V read once at the measured copy bandwidth) beside SDPA's.

Times are triton.testing.do_bench medians after warm-up, inputs rotated past L2 (bench.py's bench).
Ratios are anchor time / tilec time: above 1 means tilec is faster. With --smoke the sizes are tiny
and run on the CPU through Triton's interpreter, timed with time.perf_counter; the CUDA-only anchors
are skipped. It shows that the script runs end to end and checks correctness, nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path

import torch

# Triton's interpreter (the smoke run, or no GPU) must be chosen before triton is first imported.
SMOKE = "--smoke" in sys.argv
if SMOKE or not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
GPU = os.environ.get("TRITON_INTERPRET", "0") != "1"
DEVICE = "cuda" if GPU else "cpu"

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]
import attention  # noqa: E402
import bench as B  # noqa: E402
import common  # noqa: E402
import rmsnorm  # noqa: E402
import rowscale_fp8  # noqa: E402
import softmax  # noqa: E402

import tilec as tc  # noqa: E402

F = torch.nn.functional
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


def timed(fn, sets):
    """Median seconds of fn over the rotated input sets: bench.bench on the GPU, perf_counter otherwise
    (one warm-up call, then three timed)."""
    if GPU:
        return B.bench(fn, sets)
    fn(*sets[0])
    ts = []
    for i in range(3):
        t0 = time.perf_counter()
        fn(*sets[i % len(sets)])
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def inputs_of(fn):
    """A stand-in module whose `inputs(sizes, device)` is fn, for bench.input_sets."""
    return types.SimpleNamespace(inputs=fn)


def copy_row():
    """The device copy bandwidth: dst.copy_(src) on 1 GiB of float32 (16 MiB in the smoke run)."""
    n = 2 ** 22 if SMOKE else 2 ** 28
    src = torch.randn(n, device=DEVICE)
    dst = torch.empty_like(src)
    t = timed(lambda s, d: d.copy_(s), [[src, dst]])
    nbytes = 2 * n * 4
    row = {"workload": f"copy {nbytes // 2 // 2 ** 20} MiB fp32", "copy_us": t * 1e6, "tb_s": nbytes / t / 1e12}
    print(f"  copy {row['copy_us']:9.1f} us  {row['tb_s']:.3f} TB/s", flush=True)
    return row


def best_config(name, make, configs, sets, check):
    """Build, check (`check(out)` -> rel error, raising when wrong) and time each config; return the
    per-config records and the fastest passing one as (seconds, config, rel error), or None."""
    s, args = make()
    records, best = [], None
    for config in configs:
        try:
            k = tc.build(s, args, config=config)
            err = check(k(*sets[0]))
        except Exception as e:  # noqa: BLE001 - a failing config is reported, never chosen
            reason = f"{type(e).__name__}: {str(e)[:160]}"
            print(f"  {name} config {config}: FAILED {reason}", flush=True)
            records.append({"config": config, "failed": reason})
            continue
        t = timed(k, sets)
        print(f"  {name} {t * 1e6:9.1f} us  rel err {err:.1e}  {config}", flush=True)
        records.append({"config": config, "us": t * 1e6, "rel_error": err})
        if best is None or t < best[0]:
            best = (t, config, err)
    return records, best


def compiled_us(fn, sets, mode):
    """torch.compile(fn) timed on the sets (compiled afresh, static shapes), or the reason it failed."""
    torch._dynamo.reset()
    try:
        comp = torch.compile(fn, mode=mode, dynamic=False)
        comp(*sets[0])
        return timed(comp, sets) * 1e6, None
    except Exception as e:  # noqa: BLE001 - reported in the row
        return None, f"{type(e).__name__}: {str(e)[:160]}"


def memory_row(name, mod, make, inputs, sizes, configs, nbytes, opts, copy_tb_s):
    """tilec's best config against eager and torch.compile on one memory-bound workload."""
    sets = B.input_sets(inputs_of(inputs), sizes, DEVICE)
    ref = mod.reference(*sets[0])
    records, best = best_config(name, make, configs, sets, lambda out: max(common.check(out, ref)))
    row = {"workload": name, "sizes": sizes, "bytes": nbytes, "configs": records}
    if best is None:
        row["error"] = "no config passed"
        return row
    t, config, err = best
    eager = B.EAGER[mod]
    row.update(tilec_us=t * 1e6, config=config, rel_error=err, tb_s=nbytes / t / 1e12)
    row["eager_us"] = timed(eager, sets) * 1e6
    if copy_tb_s:
        row["copy_pct"] = 100 * row["tb_s"] / copy_tb_s
    if not opts.no_compile:
        row["compile_us"], row["compile_error"] = compiled_us(eager, sets, opts.compile_mode)
    for key in ("eager", "compile"):
        if row.get(f"{key}_us"):
            row[f"vs_{key}"] = row[f"{key}_us"] / row["tilec_us"]
    comp = f"{row['compile_us']:.1f} us" if row.get("compile_us") else row.get("compile_error", "not run")
    print(f"  {name}: eager {row['eager_us']:.1f} us, compile {comp}", flush=True)
    return row


def softmax_configs(n):
    """The row-resident form (BLOCK = next power of two >= N, warps 4, 8, 16; 2 and 4 rows a program), then
    the looped two-pass form (BLOCK 2048 and 4096 where smaller than N, warps 4 and 8)."""
    resident = max(1024, 1 << (n - 1).bit_length())
    out = [{"BLOCK": resident, "warps": w} for w in (4, 8, 16)]
    out += [{"BLOCK": resident, "ROWS": r, "warps": w} for r in (2, 4) for w in (8, 16)]  # rows per program
    return out + [{"BLOCK": b, "warps": w} for b in (2048, 4096) if b < n for w in (4, 8)]


def attention_ref(q, k, v, causal, pairs=2):
    """Attention in float32 on the first `pairs` (z, h) pairs (the example's float64 one is too big here)."""
    q, k, v = (t.flatten(0, 1)[:pairs].float() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def slice_error(out, ref):
    """Relative error of out's first (z, h) pairs against ref; raise past the bfloat16 bound."""
    err = common.rel_error(out.flatten(0, 1)[:ref.shape[0]], ref)
    bound = common.TOLERANCE["bfloat16"]
    assert err <= bound, f"relative error {err:.3g} > {bound:g} on the first {ref.shape[0]} (z, h) pairs"
    return err


def sdpa_anchor(backend, causal, sets, ref, n):
    """scaled_dot_product_attention under one backend: time and rel error, or why it did not run."""
    if backend != "math" and not GPU:
        return {f"{backend}_error": "skipped: needs CUDA"}
    if backend == "math" and n > 4096:
        return {f"{backend}_error": "skipped: N > 4096 (materializes N x N scores)"}
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    try:
        with sdpa_kernel(BACKENDS[backend]):
            err = common.rel_error(fn(*sets[0]).flatten(0, 1)[:ref.shape[0]], ref)
            t = timed(fn, sets)
    except Exception as e:  # noqa: BLE001 - an unavailable backend is reported, not fatal
        return {f"{backend}_error": f"unavailable: {type(e).__name__}: {str(e)[:160]}"}
    return {f"{backend}_us": t * 1e6, f"{backend}_rel_error": err}


ATTENTION_CONFIGS = [(128, 64, 3, 8), (128, 64, 4, 8), (128, 128, 2, 8), (128, 128, 3, 8), (64, 64, 3, 4),
                     (64, 128, 3, 4), (128, 32, 4, 8)]


def attention_row(sizes, d, causal, quick):
    """tilec's best attention config against SDPA's flash, cuDNN and math backends on one shape."""
    z, h, n = sizes["Z"], sizes["H"], sizes["N"]
    name = f"attention {'causal' if causal else 'full'} {z}x{h}x{n} d={d}"
    sets = B.input_sets(inputs_of(lambda s, dev: attention.inputs(s, dev, d=d)), sizes, DEVICE)
    ref = attention_ref(*sets[0], causal)
    configs = [dict(BM=bm, BN=bn, stages=st, warps=w) for bm, bn, st, w in ATTENTION_CONFIGS[:2 if quick else None]]
    records, best = best_config(name, lambda: attention.make(causal=causal, d=d), configs, sets,
                                lambda out: slice_error(out, ref))
    flops = 4 * z * h * n * n * d / (2 if causal else 1)
    row = {"workload": name, "sizes": sizes, "d": d, "causal": causal, "flops": flops, "configs": records}
    if best is None:
        row["error"] = "no config passed"
        return row
    t, config, err = best
    row.update(tilec_us=t * 1e6, config=config, rel_error=err, tflops=flops / t / 1e12)
    for backend in BACKENDS:
        row.update(sdpa_anchor(backend, causal, sets, ref, n))
        if f"{backend}_us" in row:
            row[f"vs_{backend}"] = row[f"{backend}_us"] / row["tilec_us"]
            row[f"{backend}_tflops"] = flops / row[f"{backend}_us"] / 1e6
            print(f"  {name}: {backend} {row[f'{backend}_us']:.1f} us, rel err {row[f'{backend}_rel_error']:.1e}",
                  flush=True)
        else:
            print(f"  {name}: {backend} {row[f'{backend}_error']}", flush=True)
    return row


DECODE_CONFIGS = [(64, 16, 3, 4), (128, 16, 3, 4), (64, 32, 3, 4), (128, 32, 2, 4), (64, 64, 3, 4), (128, 8, 3, 4),
                  (64, 32, 4, 4), (32, 32, 3, 4)]


def decode_row(sizes, d, quick, copy_tb_s):
    """Decoding (one query, a long row of keys): tilec's split-KV attention (make(split=True): the key loop
    in SPLIT parts, a combine kernel) against SDPA's backends, as a share of the byte floor (K and V read
    once at the measured copy bandwidth)."""
    z, h, m, n = sizes["Z"], sizes["H"], sizes["M"], sizes["N"]
    name = f"attention decode {z}x{h} q{m} k{n} d={d}"
    sets = B.input_sets(inputs_of(lambda s, dev: attention.inputs(s, dev, d=d)), sizes, DEVICE)
    ref = attention_ref(*sets[0], False)
    configs = [dict(BM=16, BN=bn, SPLIT=sp, stages=st, warps=w) for bn, sp, st, w in DECODE_CONFIGS[:2 if quick else None]]
    records, best = best_config(name, lambda: attention.make(causal=False, d=d, split=True), configs, sets,
                                lambda out: slice_error(out, ref))
    nbytes = 2 * (2 * z * h * n * d + 2 * z * h * m * d)
    row = {"workload": name, "sizes": sizes, "d": d, "causal": False, "bytes": nbytes, "configs": records}
    if best is None:
        row["error"] = "no config passed"
        return row
    t, config, err = best
    row.update(tilec_us=t * 1e6, config=config, rel_error=err, tb_s=nbytes / t / 1e12)
    if copy_tb_s:
        row["floor_us"] = nbytes / (copy_tb_s * 1e12) * 1e6
        row["floor_pct"] = 100 * row["floor_us"] / row["tilec_us"]
    for backend in BACKENDS:
        row.update(sdpa_anchor(backend, False, sets, ref, n if backend != "math" else m))
        if f"{backend}_us" in row:
            row[f"vs_{backend}"] = row[f"{backend}_us"] / row["tilec_us"]
            if copy_tb_s:
                row[f"{backend}_floor_pct"] = 100 * row["floor_us"] / row[f"{backend}_us"]
            print(f"  {name}: {backend} {row[f'{backend}_us']:.1f} us, rel err {row[f'{backend}_rel_error']:.1e}",
                  flush=True)
        else:
            print(f"  {name}: {backend} {row[f'{backend}_error']}", flush=True)
    return row


MEMORY_COLUMNS = [("tilec us", "tilec_us", "9.1f"), ("eager us", "eager_us", "9.1f"),
                  ("compile us", "compile_us", "10.1f"), ("x eager", "vs_eager", "7.2f"),
                  ("x compile", "vs_compile", "9.2f"), ("TB/s", "tb_s", "6.2f"), ("% copy", "copy_pct", "6.1f"),
                  ("rel err", "rel_error", "8.1e")]
ATTENTION_COLUMNS = [("tilec us", "tilec_us", "9.1f"), ("flash us", "flash_us", "9.1f"),
                     ("cuDNN us", "cudnn_us", "9.1f"), ("math us", "math_us", "9.1f"), ("x flash", "vs_flash", "7.2f"),
                     ("x cuDNN", "vs_cudnn", "7.2f"), ("x math", "vs_math", "6.2f"), ("TFLOP/s", "tflops", "7.1f"),
                     ("floor%", "floor_pct", "6.1f"), ("flash floor%", "flash_floor_pct", "6.1f"),
                     ("rel err", "rel_error", "8.1e")]


def print_table(rows):
    """The summary: the copy bandwidth, then one line per memory-bound and per attention row."""
    if not GPU:
        print("\nCPU RUN through Triton's interpreter (--smoke, or no CUDA device): the times say nothing about "
              "speed; it shows that the script runs end to end and that every result is correct.")
    for r in rows:
        if "copy_us" in r:
            print(f"\n{r['workload']}: {r['copy_us']:.1f} us, {r['tb_s']:.3f} TB/s (read + written)")
    for columns, is_attention in ((MEMORY_COLUMNS, False), (ATTENTION_COLUMNS, True)):
        group = [r for r in rows if "copy_us" not in r and ("causal" in r) == is_attention]
        if not group:
            continue
        widths = [max(len(head), int(fmt.split(".")[0])) for head, _, fmt in columns]
        print(f"\n{'workload':42} " + " ".join(f"{head:>{w}}" for (head, _, _), w in zip(columns, widths))
              + "  config")
        for r in group:
            cells = [format(r[key], fmt) if isinstance(r.get(key), (int, float)) else "-"
                     for _, key, fmt in columns]
            print(f"{r['workload']:42} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths))
                  + f"  {r.get('config', r.get('error'))}")
    notes = [f"  {r['workload']}: {key.removesuffix('_error')} {v}" for r in rows for key, v in r.items()
             if key.endswith("_error") and key != "rel_error" and isinstance(v, str)]
    if notes:
        print("\nnot timed:\n" + "\n".join(notes))


def main():
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--json", help="write every row, all figures, to this path")
    ap.add_argument("--quick", action="store_true", help="the first two configs of each workload")
    ap.add_argument("--only", help="comma-separated groups: copy, softmax, rmsnorm, rowscale, attention, decode")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (default: its default mode)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU through Triton's interpreter")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    want = lambda group: only is None or group in only
    cut = lambda cfgs: cfgs[:2] if a.quick else cfgs
    rows, copy_tb_s = [], None
    if any(want(g) for g in ("copy", "softmax", "rmsnorm", "rowscale", "decode")):  # the rows' % needs it
        rows.append(copy_row())
        copy_tb_s = rows[-1]["tb_s"]
    softmax_shapes = [(8, 3000)] if a.smoke else [(4096, 4096), (16384, 8192)]
    for dtype in (torch.float32, torch.bfloat16) if want("softmax") else ():
        for m, n in softmax_shapes:
            name = f"softmax {str(dtype).removeprefix('torch.')} {m}x{n}"
            rows.append(memory_row(name, softmax, lambda dt=dtype: softmax.make(dtype=str(dt).removeprefix("torch.")),
                                   lambda s, dev, dt=dtype: softmax.inputs(s, dev, dtype=dt), dict(M=m, N=n),
                                   cut(softmax_configs(n)), 2 * m * n * dtype.itemsize, a, copy_tb_s))
    if want("decode"):  # few long rows: the statistics split over programs, then Y's programs over the row
        m, n = (2, 3000) if a.smoke else (32, 32768)
        split_cfgs = [{"BLOCK": b, "SPLIT": p, "warps": w} for b in (2048, 4096) for p in (8, 16, 32) for w in (4, 8)]
        rows.append(memory_row(f"softmax float32 {m}x{n} split", softmax, lambda: softmax.make(split=True),
                               softmax.inputs, dict(M=m, N=n), cut(split_cfgs), 8 * m * n, a, copy_tb_s))
        rows.append(memory_row(f"softmax float32 {m}x{n} one program a row", softmax, softmax.make, softmax.inputs,
                               dict(M=m, N=n), cut([{"BLOCK": 16384, "warps": w} for w in (8, 16)]), 8 * m * n, a,
                               copy_tb_s))
        rows.append(memory_row("rmsnorm bfloat16 1x4096", rmsnorm, rmsnorm.make, rmsnorm.inputs, dict(M=1, N=4096),
                               cut([{"BLOCK": 4096, "warps": w} for w in (4, 8, 16)]), 2 * 3 * 4096, a, copy_tb_s))
        dec = dict(Z=1, H=2, M=1, N=300) if a.smoke else dict(Z=1, H=32, M=1, N=32768)
        rows.append(decode_row(dec, 64 if a.smoke else 128, a.quick, copy_tb_s))
    norm_cfgs = [{"BLOCK": 4096, "warps": w} for w in (4, 8, 16)] + [{"BLOCK": 2048, "warps": 8}]
    norm_cfgs += [{"BLOCK": 4096, "ROWS": r, "warps": w} for r in (2, 4) for w in (4, 8, 16)]
    for m, n in ([(4, 3000)] if a.smoke else [(1024, 4096), (16384, 4096)]) if want("rmsnorm") else ():
        rows.append(memory_row(f"rmsnorm bfloat16 {m}x{n}", rmsnorm, rmsnorm.make, rmsnorm.inputs, dict(M=m, N=n),
                               cut(norm_cfgs), 2 * (2 * m * n + n), a, copy_tb_s))
    quant_cfgs = [{"BLOCK": 8192, "warps": w} for w in (4, 8, 16)] + [{"BLOCK": 2048, "warps": 8}]
    for m, n in ([(4, 3000)] if a.smoke else [(8192, 8192)]) if want("rowscale") else ():
        rows.append(memory_row(f"rowscale_fp8 bfloat16 {m}x{n}", rowscale_fp8, rowscale_fp8.make,
                               rowscale_fp8.inputs, dict(M=m, N=n), cut(quant_cfgs), 3 * m * n + 4 * m, a,
                               copy_tb_s))
    shapes, d = ([dict(Z=1, H=2, N=40)], 64) if a.smoke else ([dict(Z=2, H=16, N=n) for n in (1024, 4096, 8192)], 128)
    for sizes in shapes if want("attention") else ():
        for causal in (True, False):
            rows.append(attention_row(sizes, d, causal, a.quick))
    print_table(rows)
    if a.json:
        meta = {"device": torch.cuda.get_device_name() if GPU else "cpu (Triton interpreter)",
                "torch": torch.__version__, "triton": __import__("triton").__version__, "smoke": not GPU}
        Path(a.json).write_text(json.dumps({**meta, "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
