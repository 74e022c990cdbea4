"""The real-kernel suite (suite/) on the GPU: each kernel's fast schedule at its module's BENCH sizes, the best of
a few configs, beside eager PyTorch, torch.compile, the kernel it is written after where that can be imported,
and the roofline, in one run (a benchmark, not a test).

    python benchmarks/suite.py [--json out.json] [--only rms_norm,softmax] [--configs 12] [--budget 420]
                               [--no-compile] [--no-original] [--auto]
    python benchmarks/suite.py --cpu-check [--only ...]    # (or --dry-run) CPU, Triton's interpreter: the code
                                                           # paths and torch_ref's agreement, not speed

Each module of suite.NAMES that defines BENCH (see suite/harness.py for the module interface) gives a row:
- tilec: the fast schedule (`make(True)`; with --auto, `tc.auto_schedule` of the default's outputs, issue 27)
  built at up to --configs configs of its knobs, chosen greedily one
  knob at a time from the best so far (the default config first), within a share of --budget seconds; a
  config that fails to build or launch is recorded and skipped; each output is checked against `torch_ref`
  (relative error ||out - ref|| / ||ref|| over each output, loose bounds per dtype: LOOSE), a wrong config is
  never chosen; the fastest checked config is the row's.
- eager: the module's `torch_ref`, what a PyTorch user writes, in the kernel's dtypes (not `reference`, which
  computes in float32/float64 for accuracy).
- compile: torch.compile(torch_ref) (default mode), compiled and warmed up first, its output checked too.
- original: the module's `original` (Liger-Kernel's op, FlashAttention's function), where the module has one and
  its package imports ("not installed" otherwise); it gets its own copies of the inputs (Liger's cross-entropy
  and RoPE write over theirs); outputs it does not return are None and not compared, a total it returns where
  the kernel returns rows is compared with the rows' sum.
- roofline: the larger of (bytes of all inputs and outputs) / (the copy bandwidth measured at the start) and
  FLOPS(sizes) / the dense tensor-core peak of the first floating input's dtype (modules with FLOPS); the %
  is that floor over tilec's time. For kernels that read only part of an input (embedding_encoder's table,
  the decode attentions' caches past each sequence's length) the bytes, and so the %, are overstated.

Times are triton.testing.do_bench medians (its default warm-up and repetitions; it clears L2 before each
repetition); a config whose one call takes over SLOW_S is timed by that call alone. Ratios are anchor time / tilec time: above 1 means tilec is faster. A failure in one kernel is
recorded in its row and the run goes on; a CUDA error that leaves the context unusable sends the kernels left
to a fresh process. The JSON (--json) is rewritten after each kernel, so a run cut short keeps its rows.

--cpu-check runs every module on the CPU at its SIZES[0] (Triton's interpreter, one config, one timed call in
place of do_bench), and first checks torch_ref against the module's float64 `reference` there (the GPU run
does that check on the GPU too); it also makes each module's BENCH inputs on the meta device to check their
memory (< MAX_BYTES). It shows that the code paths run and that torch_ref is right, nothing about speed.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path

import torch

CPU_CHECK = "--cpu-check" in sys.argv or "--dry-run" in sys.argv
# Triton's interpreter (the CPU check, or no GPU) must be chosen before triton is first imported
if CPU_CHECK or not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
DEVICE = "cpu" if CPU_CHECK or not torch.cuda.is_available() else "cuda"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # ahead of benchmarks/, whose suite.py is this file, not the suite package
suite = importlib.import_module("suite")
if not hasattr(suite, "NAMES"):
    raise ImportError(f"imported {suite.__file__} as the suite package; run from the repository root")

import tilec as tc  # noqa: E402

# Dense peaks of an H100 SXM (datasheet): tensor cores for 16-bit and 8-bit floats; float32 on the CUDA cores,
# since tilec's float32 dots are input_precision="ieee" (no TF32)
PEAK_FLOPS = {"float16": 989e12, "bfloat16": 989e12, "float8_e4m3fn": 1979e12, "float8_e5m2": 1979e12,
              "float32": 67e12}
# loose relative-error bounds (||out - ref|| / ||ref||) between tilec and torch_ref (or torch_ref and reference):
# both round in the output dtype, in different orders, and eager code may round intermediates to it
LOOSE = {"float64": 1e-6, "float32": 1e-2, "float16": 3e-2, "bfloat16": 5e-2, "float8_e4m3fn": 1.5e-1,
         "float8_e5m2": 2.5e-1}
MAX_BYTES = 8 * 2**30        # BENCH's inputs and outputs together stay under this
CHUNK = 2**24                # elements compared at a time (float64 copies of a 1 GB output do not fit twice)
OVERHEAD_S = 15.0            # a kernel's time outside its configs (make, checks, eager, original, torch.compile),
                             # guessed until measured: the configs get what the budget leaves after it
SLOW_S = 0.5                 # a call slower than this is timed once, not by do_bench (an auto schedule's worst
                             # config took 19.9 s a call: H100, issue 27)
MIN_CFG_S = 3.0              # configs' time below which a kernel tries one config only (else at least two)


def as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def nbytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed(fn, args) -> float:
    """Seconds per call: do_bench's median on the GPU; on the CPU (the check) one timed call."""
    if DEVICE == "cpu":
        t0 = time.perf_counter()
        fn(*args)
        return time.perf_counter() - t0
    from triton.testing import do_bench
    t0 = time.perf_counter()
    fn(*args)
    sync()
    once = time.perf_counter() - t0
    if once > SLOW_S:  # do_bench's repetitions of a call this slow would take minutes: the one call is the time
        return once
    return do_bench(lambda: fn(*args), return_mode="median") * 1e-3


def copy_bandwidth() -> dict:
    """Bytes read and written per second by a clone of 1 GiB of float32 (16 MiB on the CPU)."""
    n = 2**22 if DEVICE == "cpu" else 2**28
    x = torch.randn(n, device=DEVICE)
    x.clone()
    t = timed(torch.clone, [x])
    return {"bytes": 2 * 4 * n, "us": t * 1e6, "tb_s": 2 * 4 * n / t / 1e12}


# ---- comparing outputs ----------------------------------------------------------------------------------------

def _chunks(o, r):
    o, r = o.detach().reshape(-1), r.detach().reshape(-1)
    for i in range(0, o.numel(), CHUNK):
        yield o[i:i + CHUNK], r[i:i + CHUNK]


def compare_one(o, r, draws: bool = True) -> dict:
    """One output against its reference: {"rel_error", "ok", "why"?}. Floats: ||o - r|| / ||r|| over the places
    both are finite, and the non-finite places equal; integers: equal; a 0-d output where the reference has
    rows: against the rows' sum; `draws=False` (a random mask drawn by each side): where both are nonzero they
    agree, and the shares of nonzeros agree within sampling noise."""
    if o is None or r is None:
        return {"rel_error": None, "ok": True, "why": "not returned"}
    note = None
    if o.numel() == 1 and r.numel() > 1:
        r, note = r.double().sum().reshape(o.shape), "against the sum of the reference's rows"
    elif o.shape != r.shape:
        return {"rel_error": None, "ok": False, "why": f"shape {tuple(o.shape)} != {tuple(r.shape)}"}
    out = {}
    if o.dtype != r.dtype and note is None:
        out["why"] = f"dtype {dtype_name(o)} != {dtype_name(r)}"
    if not r.is_floating_point() and not o.is_floating_point():
        bad = sum(int((a.to(torch.int64) != b.to(torch.int64)).sum()) for a, b in _chunks(o, r))
        out.update(rel_error=0.0 if bad == 0 else 1.0, ok=bad == 0 and "why" not in out)
        if bad:
            out["why"] = f"{bad} of {o.numel()} values differ"
        return out
    num = den = 0.0
    bad = kept_o = kept_r = 0
    for a, b in _chunks(o, r):
        a, b = a.double(), b.double()
        if not draws:
            ka, kb = a != 0, b != 0
            kept_o, kept_r = kept_o + int(ka.sum()), kept_r + int(kb.sum())
            both = ka & kb
            a, b = a[both], b[both]
        fin = torch.isfinite(a) & torch.isfinite(b)
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        bad += int((~fin & ~same).sum())
        num += float((a[fin] - b[fin]).square().sum())
        den += float(b[fin].square().sum())
    err = math.sqrt(num) / max(math.sqrt(den), 1e-30)
    bound = LOOSE.get(dtype_name(r) if note is None else dtype_name(o), 1e-2)
    ok = err <= bound and bad == 0 and "why" not in out
    out.update(rel_error=err, ok=ok, bound=bound)
    if bad:
        out["why"] = f"NaN or infinities at {bad} places where the reference differs"
    elif err > bound:
        out["why"] = f"relative error {err:.3g} > {bound:g}"
    if not draws:
        n = max(o.numel(), 1)
        share_o, share_r = kept_o / n, kept_r / n
        tol = 6 * math.sqrt(0.5 / n) + 1e-3
        out["kept_share"] = [share_o, share_r]
        if abs(share_o - share_r) > tol:
            out.update(ok=False, why=f"kept shares {share_o:.4f} and {share_r:.4f} differ by more than {tol:.4f}")
    if note:
        out["note"] = note
    return out


def compare(outs, refs, draws: bool = True) -> dict:
    """Every output against its reference: {"rel_error": the largest, "ok", "outputs": [...], "why"?}; with no
    reference (torch_ref failed at these sizes), unchecked."""
    if refs is None:
        return {"rel_error": None, "ok": True, "unchecked": True}
    outs, refs = as_tuple(outs), as_tuple(refs)
    if len(outs) != len(refs):
        return {"rel_error": None, "ok": False, "why": f"{len(outs)} outputs, {len(refs)} references"}
    each = [compare_one(o, r, draws) for o, r in zip(outs, refs)]
    errs = [e["rel_error"] for e in each if e["rel_error"] is not None]
    res = {"rel_error": max(errs) if errs else None, "ok": all(e["ok"] for e in each), "outputs": each}
    whys = [f"output {n}: {e['why']}" for n, e in enumerate(each) if not e["ok"]]
    if whys:
        res["why"] = "; ".join(whys)
    return res


# ---- one kernel ----------------------------------------------------------------------------------------------

def short(e: BaseException, n: int = 240) -> str:
    return f"{type(e).__name__}: {str(e).strip()}"[:n]


def greedy_configs(knobs: dict):
    """Configs to try, one knob at a time from the best so far: yields a config, receives its time (None when it
    failed); the default config (every knob's first choice) first."""
    names = list(knobs)
    best = {n: knobs[n].choices[0] for n in names}
    best_t = yield dict(best)
    seen = [dict(best)]
    for n in names:
        for v in knobs[n].choices[1:]:
            cfg = {**best, n: v}
            if cfg in seen:
                continue
            seen.append(cfg)
            t = yield cfg
            if t is not None and (best_t is None or t < best_t):
                best, best_t = cfg, t
    # every knob tried once: the rest of the product, nearest the best first (fewest knobs changed)
    rest = [dict(zip(names, vals)) for vals in itertools.product(*(knobs[n].choices for n in names))]
    rest.sort(key=lambda c: sum(c[n] != best[n] for n in names))
    for cfg in rest:
        if cfg not in seen:
            seen.append(cfg)
            yield cfg


def tilec_best(name, mod, xs, refs, draws, a, allow_s) -> dict:
    """Build and time the fast schedule's configs; the row's tilec fields."""
    if a.auto:  # issue 27: the schedule tc.auto_schedule makes of the default's outputs, its knobs searched alike
        s0, args = mod.make(False)
        s = tc.auto_schedule(list(s0.outputs))
    else:
        s, args = mod.make(True)
    limit = 1 if CPU_CHECK else a.configs
    gen = greedy_configs(s.knobs)
    records, best, t_prev = [], None, None
    start = time.perf_counter()
    try:
        cfg = next(gen)
        while cfg is not None and len(records) < limit:
            t, rec = None, {"config": cfg}
            try:
                k = tc.build(s, args, config=cfg)
                if getattr(mod, "CALL", None):
                    k = functools.partial(k, **mod.CALL)
                outs = k(*xs)
                sync()
                chk = compare(outs, refs, draws)
                rec["rel_error"] = chk["rel_error"]
                if chk["ok"]:
                    t = timed(k, xs)
                    rec["us"] = t * 1e6
                    if best is None or t < best[0]:
                        best = (t, cfg, chk, nbytes(as_tuple(outs)))
                    err = chk["rel_error"]
                    print(f"    {name} {cfg}: {t * 1e6:10.1f} us  rel err "
                          f"{'unchecked' if err is None else f'{err:.1e}'}", flush=True)
                else:  # a wrong config is never chosen (nor timed)
                    rec["failed"] = f"wrong: {chk.get('why')}"
                    print(f"    {name} {cfg}: WRONG {chk.get('why')}", flush=True)
                del outs, k
            except Exception as e:  # noqa: BLE001 - a config that fails to build or run is recorded, not chosen
                t, rec["failed"] = None, short(e)
                print(f"    {name} {cfg}: FAILED {short(e, 160)}", flush=True)
            records.append(rec)
            t_prev = time.perf_counter() - start
            if best is not None and t_prev > allow_s and len(records) >= (2 if allow_s >= MIN_CFG_S else 1):
                break
            cfg = gen.send(t)
    except StopIteration:
        pass
    row = {"configs": records, "config_s": time.perf_counter() - start, "config_allow_s": allow_s}
    if best is None:
        row["tilec_error"] = "no config ran and passed: " + "; ".join(r.get("failed", "") for r in records)[:600]
        return row
    t, cfg, chk, out_bytes = best
    row.update(tilec_us=t * 1e6, config=cfg, rel_error=chk["rel_error"], check=chk, out_bytes=out_bytes)
    return row


def bound(mod, sizes):
    """`mod` with its torch_ref, reference and original taking the sizes that no tensor holds (`CALL_SIZES`, given
    to a tilec kernel by name) from `sizes`; the kernel's call takes them from `.CALL`."""
    given = {n: sizes[n] for n in getattr(mod, "CALL_SIZES", ())}
    if not given:
        return mod
    ns = types.SimpleNamespace(**{k: getattr(mod, k) for k in dir(mod) if not k.startswith("__")})
    for fn in ("torch_ref", "reference", "original"):
        if hasattr(mod, fn):
            setattr(ns, fn, functools.partial(getattr(mod, fn), **given))
    ns.CALL = given
    return ns


def small_check(mod, draws) -> dict:
    """torch_ref against the module's float64 `reference` at SIZES[0] on this device."""
    torch.manual_seed(1)
    try:  # the dtypes must be the kernel's exactly: compare() fails a dtype that differs
        xs = mod.inputs(mod.SIZES[0], DEVICE)
        mod = bound(mod, mod.SIZES[0])
        return compare(mod.torch_ref(*xs), mod.reference(*xs), draws)
    except Exception as e:  # noqa: BLE001 - recorded in the row
        return {"ok": False, "why": short(e)}


def meta_bytes(mod) -> dict:
    """BENCH's inputs (and torch_ref's outputs, where its ops run on the meta device) made on the meta device:
    their bytes, without memory."""
    out = {}
    try:
        xs = mod.inputs(mod.BENCH, "meta")
        mod = bound(mod, mod.BENCH)
        out["bench_in_bytes"] = nbytes(xs)
        out["bench_out_bytes"] = nbytes(as_tuple(mod.torch_ref(*xs)))
    except Exception as e:  # noqa: BLE001 - some ops (data-dependent indexing) have no meta kernel: not an error
        out["meta_note"] = short(e, 160)
    return out


def original_row(mod, xs, refs, draws) -> dict:
    if not hasattr(mod, "original"):
        return {"original": "none"}
    try:
        outs = mod.original(*[t.clone() for t in xs])  # on copies: some originals write over their inputs
        sync()
    except ImportError as e:
        return {"original": f"not installed ({short(e, 120)})"}
    except Exception as e:  # noqa: BLE001 - recorded in the row
        return {"original": "failed", "original_error": short(e, 400)}
    chk = compare(outs, refs, draws)
    del outs
    own = [t.clone() for t in xs]
    row = {"original": "ran", "original_rel_error": chk["rel_error"], "original_check": chk}
    try:
        row["original_us"] = timed(mod.original, own) * 1e6
    except Exception as e:  # noqa: BLE001
        row["original_error"] = short(e, 400)
    if not chk["ok"]:
        row["original_error"] = f"disagrees with torch_ref: {chk.get('why')}"
    return row


def compile_row(mod, xs, refs, draws) -> dict:
    torch._dynamo.reset()
    try:
        t0 = time.perf_counter()
        comp = torch.compile(mod.torch_ref)
        outs = comp(*xs)
        comp(*xs)
        sync()
        row = {"compile_s": time.perf_counter() - t0}
        chk = compare(outs, refs, draws)
        del outs
        row["compile_rel_error"] = chk["rel_error"]
        if not chk["ok"]:
            row["compile_wrong"] = chk.get("why")
        row["compile_us"] = timed(comp, xs) * 1e6
        return row
    except Exception as e:  # noqa: BLE001 - recorded in the row
        return {"compile_error": short(e, 400)}


def run_kernel(row, a, bw_tb_s, allow_s) -> dict:
    """Fill `row` (a dict holding "kernel") as the kernel's parts run: what ran stays in it when one fails."""
    name = row["kernel"]
    mod = importlib.import_module(f"suite.{name}")
    row["original_of"] = getattr(mod, "ORIGINAL", "")[:200]
    if not hasattr(mod, "BENCH"):
        row["skipped"] = "no BENCH"
        return row
    if not hasattr(mod, "torch_ref"):
        row["skipped"] = "no torch_ref"
        return row
    draws = getattr(mod, "SAME_DRAWS", True)
    t_start = time.perf_counter()

    # torch_ref against the float64 reference at the small sizes
    row["small_check"] = small_check(mod, draws)
    sc = row["small_check"]
    print(f"  {name}: torch_ref vs reference at {mod.SIZES[0]}: "
          f"{'ok' if sc.get('ok') else 'FAILED'} rel err {sc.get('rel_error')}"
          + ("" if sc.get("ok") else f"  ({sc.get('why')})"), flush=True)
    if CPU_CHECK:
        row.update(meta_bytes(mod))
        if "bench_out_bytes" in row:
            row["bench_bytes_ok"] = row["bench_in_bytes"] + row["bench_out_bytes"] < MAX_BYTES
        elif "bench_in_bytes" in row:
            row["bench_bytes_ok"] = 2 * row["bench_in_bytes"] < MAX_BYTES  # outputs as large as inputs, at most
        print(f"  {name}: BENCH {mod.BENCH}: inputs {row.get('bench_in_bytes', 0) / 2**20:.0f} MiB, outputs "
              f"{row.get('bench_out_bytes', 0) / 2**20:.0f} MiB {row.get('meta_note', '')}", flush=True)

    sizes = mod.SIZES[0] if CPU_CHECK else mod.BENCH
    row["sizes"] = sizes
    torch.manual_seed(0)
    xs = mod.inputs(sizes, DEVICE)
    mod = bound(mod, sizes)  # the sizes no tensor holds, given to every call from here on
    row["in_bytes"] = nbytes(xs)
    try:
        refs = as_tuple(mod.torch_ref(*xs))
        sync()
        row["ref_out_bytes"] = nbytes(refs)
        row["eager_us"] = timed(mod.torch_ref, xs) * 1e6
    except Exception as e:  # noqa: BLE001 - tilec still runs, unchecked (and said so)
        refs = None
        row["eager_error"] = short(e, 400)
        print(f"  {name}: torch_ref FAILED at {sizes}: {short(e)}; tilec's outputs go unchecked", flush=True)

    row.update(tilec_best(name, mod, xs, refs, draws, a, allow_s))
    if not a.no_original:
        row.update(original_row(mod, xs, refs, draws))
    if not a.no_compile:
        row.update(compile_row(mod, xs, refs, draws))

    # roofline
    total = row["in_bytes"] + row.get("out_bytes", row.get("ref_out_bytes", 0))
    row["bytes"] = total
    mem_s = total / (bw_tb_s * 1e12)
    flops = float(mod.FLOPS(sizes)) if hasattr(mod, "FLOPS") else 0.0
    first = next((x for x in xs if x.is_floating_point()), None)
    peak = PEAK_FLOPS.get(dtype_name(first)) if first is not None else None
    flop_s = flops / peak if flops and peak else 0.0
    row.update(flops=flops, peak_flops=peak if flops else None, mem_floor_us=mem_s * 1e6,
               flop_floor_us=flop_s * 1e6, bound="flops" if flop_s > mem_s else "memory")
    floor = max(mem_s, flop_s)
    if "tilec_us" in row:
        row["roofline_pct"] = 100 * floor * 1e6 / row["tilec_us"]
        for key in ("original", "eager", "compile"):
            if row.get(f"{key}_us"):
                row[f"{key}_over_tilec"] = row[f"{key}_us"] / row["tilec_us"]
    if DEVICE == "cuda":
        row["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    row["wall_s"] = time.perf_counter() - t_start
    return row


# ---- the table -----------------------------------------------------------------------------------------------

def fmt(v, spec=".1f", width=9):
    return f"{v:{width}{spec}}" if isinstance(v, (int, float)) and v is not None else f"{'-':>{width}}"


def print_table(rows):
    print("\nratios: anchor time / tilec time (above 1: tilec faster); roof% = roofline floor / tilec time")
    head = (f"{'kernel':24} {'tilec us':>9} {'orig us':>9} {'eager us':>9} {'comp us':>9} {'orig/t':>7} "
            f"{'eager/t':>7} {'comp/t':>7} {'roof%':>6} {'bound':>6} {'rel err':>8}  config / notes")
    print(head)
    print("-" * len(head))
    for r in rows:
        notes = []
        if r.get("skipped"):
            notes.append(r["skipped"])
        if r.get("error"):
            notes.append(f"ERROR {r['error'][:100]}")
        if r.get("tilec_error"):
            notes.append(f"tilec: {r['tilec_error'][:100]}")
        orig = r.get("original", "")
        if orig and orig not in ("ran", "none"):
            notes.append(f"original: {orig[:60]}")
        if r.get("original_error"):
            notes.append(f"original: {r['original_error'][:100]}")
        if r.get("eager_error"):
            notes.append(f"torch_ref: {r['eager_error'][:100]}")
        if r.get("compile_error"):
            notes.append(f"compile: {r['compile_error'][:100]}")
        if r.get("compile_wrong"):
            notes.append(f"compile wrong: {r['compile_wrong'][:80]}")
        sc = r.get("small_check")
        if sc is not None and not sc.get("ok"):
            notes.append(f"torch_ref vs reference: {str(sc.get('why'))[:100]}")
        orig_col = r.get("original_us")
        err = r.get("rel_error")
        print(f"{r['kernel']:24} {fmt(r.get('tilec_us'))} {fmt(orig_col)} {fmt(r.get('eager_us'))} "
              f"{fmt(r.get('compile_us'))} {fmt(r.get('original_over_tilec'), '.2f', 7)} "
              f"{fmt(r.get('eager_over_tilec'), '.2f', 7)} {fmt(r.get('compile_over_tilec'), '.2f', 7)} "
              f"{fmt(r.get('roofline_pct'), '.0f', 6)} {r.get('bound', '-')[:6]:>6} "
              f"{(f'{err:.1e}' if isinstance(err, float) else '-'):>8}  {r.get('config', '')} {' | '.join(notes)}")


def write_json(path, meta, rows):
    if path:
        Path(path).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))


def versions() -> dict:
    """The versions of the originals' packages (None: not installed)."""
    from importlib import metadata
    out = {}
    for pkg in ("liger-kernel", "flash-attn"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def has_bench(name) -> bool:
    try:
        return hasattr(importlib.import_module(f"suite.{name}"), "BENCH")
    except Exception:  # noqa: BLE001 - the import's error is reported in its row
        return True


def context_alive() -> bool:
    if DEVICE != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        (torch.ones(1, device="cuda") + 1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None, help="write the rows (and the run's facts) here")
    ap.add_argument("--only", default="", help="comma-separated kernel names (suite.NAMES)")
    ap.add_argument("--configs", type=int, default=12, help="most configs tried per kernel")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds for the whole run; each kernel's configs get a share of what is left")
    ap.add_argument("--auto", action="store_true",
                    help="time tc.auto_schedule's schedule of each kernel (its knobs searched as the fast one's) "
                         "in place of the module's fast schedule: run once with and once without, as ratios")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-original", action="store_true")
    ap.add_argument("--cpu-check", "--dry-run", action="store_true",
                    help="CPU, Triton's interpreter, SIZES[0], one config: the code paths")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if DEVICE == "cpu" and not CPU_CHECK:
        sys.exit("no GPU here: run with --cpu-check (the CPU check of the code paths), or on the GPU host")

    names = list(suite.NAMES)
    if a.only:
        want = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in want if n not in names]
        if unknown:
            sys.exit(f"--only: not in suite.NAMES: {unknown}")
        names = want

    benched = [has_bench(n) for n in names]
    bw = copy_bandwidth()
    meta = {"device": torch.cuda.get_device_name() if DEVICE == "cuda" else f"cpu ({platform.processor()})",
            "cpu_check": CPU_CHECK, "torch": torch.__version__, "triton": importlib.import_module("triton").__version__,
            "python": platform.python_version(), "copy": bw, "peak_flops": PEAK_FLOPS, "loose": LOOSE,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32, "packages": versions(), "args": vars(a)}
    print(f"device: {meta['device']}; torch {meta['torch']}, triton {meta['triton']}; originals' packages: "
          f"{meta['packages']}")
    print(f"peaks used: copy bandwidth {bw['tb_s']:.3f} TB/s (measured: clone of {bw['bytes'] // 2 // 2**20} MiB, "
          f"{bw['us']:.1f} us); dense FLOP/s: bf16/fp16 {PEAK_FLOPS['bfloat16'] / 1e12:.0f}T, "
          f"fp8 {PEAK_FLOPS['float8_e4m3fn'] / 1e12:.0f}T (tensor cores), fp32 {PEAK_FLOPS['float32'] / 1e12:.0f}T "
          f"(CUDA cores: tilec's fp32 dots are IEEE)", flush=True)

    rows = []
    for n, name in enumerate(names):
        # the configs' share: what the budget leaves after every kernel left pays its measured overhead
        left_s, todo = a.budget - (time.perf_counter() - t0), max(1, sum(benched[n:]))
        spent = [r["wall_s"] - r.get("config_s", 0.0) for r in rows if "wall_s" in r]
        overhead = sum(spent) / len(spent) if spent else OVERHEAD_S
        allow_s = max(0.0, (left_s - overhead * todo) / todo)
        print(f"[{n + 1}/{len(names)}] {name}" + ("" if CPU_CHECK else f" (configs: {allow_s:.0f} s)"), flush=True)
        row = {"kernel": name}
        try:
            run_kernel(row, a, bw["tb_s"], allow_s)
        except Exception as e:  # noqa: BLE001 - one kernel's failure is its row's, never the run's
            row.update(error=short(e, 600), traceback=traceback.format_exc()[-2000:])
            print(f"  {name}: ERROR {short(e)}", flush=True)
        rows.append(row)
        write_json(a.json, meta, rows)
        torch._dynamo.reset()
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        if not context_alive():  # a CUDA error that poisons the context: the rest in a fresh process
            rest = names[n + 1:]
            print(f"  the CUDA context is unusable after {name}; {len(rest)} kernels go to a fresh process", flush=True)
            if rest:
                rows += child(rest, a, t0)
                write_json(a.json, meta, rows)
            break

    print_table(rows)
    failed = [r["kernel"] for r in rows if r.get("error") or r.get("tilec_error") or r.get("compile_wrong")
              or r.get("eager_error")
              or (r.get("small_check") and not r["small_check"].get("ok")) or r.get("bench_bytes_ok") is False]
    orig = {r["kernel"]: r.get("original_error", r.get("original")) for r in rows
            if r.get("original") not in (None, "none", "ran") or r.get("original_error")}
    comp = [r["kernel"] for r in rows if r.get("compile_error")]
    print(f"\n{len(rows)} kernels in {time.perf_counter() - t0:.0f} s; with a failure (tilec, torch_ref, BENCH's "
          f"memory): {failed or 'none'}")
    print(f"originals not run or failed: {orig or 'none'}")
    print(f"torch.compile failed: {comp or 'none'}")
    if a.json:
        print(f"wrote {a.json}")


def child(names, a, t0) -> list:
    """Run `names` in a fresh process (after a CUDA error poisoned this one's context); its rows."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "rows.json"
        cmd = [sys.executable, __file__, "--only", ",".join(names), "--json", str(out), "--configs", str(a.configs),
               "--budget", str(max(60.0, a.budget - (time.perf_counter() - t0)))]
        cmd += ["--no-compile"] * a.no_compile + ["--no-original"] * a.no_original + ["--cpu-check"] * CPU_CHECK
        cmd += ["--auto"] * a.auto
        subprocess.run(cmd, check=False)
        if not out.exists():
            return [{"kernel": n, "error": "the fresh process wrote no row"} for n in names]
        return json.loads(out.read_text())["rows"]


if __name__ == "__main__":
    main()
