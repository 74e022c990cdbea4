"""Does the tenth kernel tune faster than the first? (issue 27, scope item 4: the learned cost model)

    python benchmarks/transfer.py [--json out.json] [--only rms_norm,softmax,...] [--trials 10] [--budget 500]
    python benchmarks/transfer.py --cpu-check [--only ...]    # CPU, Triton's interpreter: the code paths only

For each kernel of the real-kernel suite in turn (the order of --only), `tc.auto_schedule` of the module's
default outputs is tuned twice with `tc.tune` at the module's BENCH sizes (one shape), `--trials` configs each,
seeded with half of them:
- analytic: `cost_model="analytic"` (cost.py alone ranks the seeds), in a storage of its own;
- learned: `cost_model="learned"`, in a second storage that keeps every earlier kernel's trials, so kernel k is
  seeded by a model fitted on kernels 1..k-1 of this run (from the third on, and only where it orders the
  earlier kernels' configs better than the analytic model: `learned.py`).
The two tunings of a kernel run one after the other on the same machine (analytic first: the learned one
finds Triton's compile cache warm, so only trial counts are compared between them, not tuning seconds).

Per kernel and pass: the best time the study found, the best among its seeds (the model's picks, measured
first), and the trials it took to come within 5% of the best time either pass found. Summary: over the
kernels the learned model seeded, the geometric mean of (analytic seeds' best / learned seeds' best) and the
mean trials-to-5% of each pass. Times: `tc.tune`'s default timer (do_bench medians); candidates are checked
against the module's `torch_ref` (its float64 `reference` on the CPU check) on the tuner's random inputs.
Tuning runs in this process (jobs=0: a recipe-less schedule on a GPU is not isolated), a kernel at a time;
the JSON is rewritten after each kernel.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

CPU_CHECK = "--cpu-check" in sys.argv
if CPU_CHECK or not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
suite = importlib.import_module("suite")
if not hasattr(suite, "NAMES"):
    raise ImportError(f"imported {suite.__file__} as the suite package; run from the repository root")

import tilec as tc  # noqa: E402

KERNELS = ("rms_norm,softmax,layer_norm,gelu_exact,softplus,swiglu,geglu,fused_add_rms_norm,kl_div,"
           "silu_and_mul,matmul_leaky_relu,batched_matmul")
NEAR = 1.05  # "within 5% of the best either pass found"


def _reference(mod):
    """The check of every candidate: the module's float64 `reference` on the CPU check; on the GPU its `torch_ref`
    where it has one (the reference of fp8_rowscale_gemm broadcasts to M x K x N: 4096 GiB at BENCH)."""
    fn = mod.reference if CPU_CHECK else getattr(mod, "torch_ref", mod.reference)

    def reference(*xs):
        out = fn(*xs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(o.float() if o.dtype == torch.float64 else o for o in outs)
    return reference


def cpu_sizes(bench: dict) -> dict:
    """The CPU check's sizes: BENCH's, each at most 256 (the auto schedule's tiles are pruned where they
    exceed every extent, so SIZES[0]'s small shapes would leave nothing to tune)."""
    return {k: min(v, 256) for k, v in bench.items()}


def _timer(kernel, xs):  # the CPU check: one wall-clock call (the interpreter's time means nothing)
    t0 = time.perf_counter()
    kernel(*xs)
    return time.perf_counter() - t0


def tune_one(mod, sched, args, sizes, trials, storage, cost_model) -> dict:
    """One tuning of `sched` at `sizes`: its trials in measured order and the study's facts."""
    mix = tc.ShapeMix([(sizes, 1)])
    t0 = time.perf_counter()
    tuned = tc.tune(sched, mix, trials=trials, args=args, reference=_reference(mod), storage=storage,
                    inputs=mod.inputs,  # the suite's own inputs: kl_div's log-probabilities, int4's packed words
                    jobs=0, progress=False, seeds=trials // 2, cost_model=cost_model,
                    timer=_timer if CPU_CHECK else None, study_name=f"{mod.__name__}-{cost_model}")
    seconds = time.perf_counter() - t0
    rows = []
    for t in sorted(tuned.study.trials, key=lambda t: t.number):
        if "duplicate_of" in t.user_attrs or t.state.name not in ("COMPLETE", "FAIL"):
            continue
        rows.append({"number": t.number, "config": dict(t.params), "seed": t.user_attrs.get("seed"),
                     "us": t.value * 1e6 if t.state.name == "COMPLETE" else None,
                     "failure": t.user_attrs.get("failure")})
    return {"cost_model": tuned.study.user_attrs.get("cost_model"), "tune_s": seconds, "trials": rows}


def summarize(run: dict, best_us: float) -> dict:
    """Best, seeds' best and trials to within NEAR of `best_us` of one pass."""
    times = [r["us"] for r in run["trials"]]
    done = [t for t in times if t is not None]
    seeds = [r["us"] for r in run["trials"] if r["seed"] is not None and r["us"] is not None]
    running, to_near = math.inf, None
    for k, t in enumerate(times, 1):
        running = min(running, t if t is not None else math.inf)
        if to_near is None and running <= NEAR * best_us:
            to_near = k
    return {"best_us": min(done) if done else None, "seeds_best_us": min(seeds) if seeds else None,
            "trials_to_near": to_near, "measured": len(times)}


def geomean(xs):
    xs = [x for x in xs if x and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--only", default=KERNELS)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--budget", type=float, default=500.0, help="seconds: no kernel starts after this")
    ap.add_argument("--cpu-check", action="store_true")
    a = ap.parse_args()
    names = a.only.split(",")
    unknown = [n for n in names if n not in suite.NAMES]
    if unknown:
        ap.error(f"not suite kernels: {', '.join(unknown)}")
    trials = 2 if a.cpu_check else a.trials
    tmp = Path(tempfile.mkdtemp(prefix="tilec-transfer-"))
    stores = {m: f"sqlite:///{tmp / (m + '.db')}" for m in ("analytic", "learned")}
    meta = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() and not a.cpu_check else "cpu",
            "torch": torch.__version__, "triton": importlib.import_module("triton").__version__,
            "trials": trials, "near": NEAR}
    rows, t_start = [], time.perf_counter()
    for name in names:
        if time.perf_counter() - t_start > a.budget:
            rows.append({"kernel": name, "skipped": "budget spent"})
            continue
        mod = importlib.import_module(f"suite.{name}")
        sizes = cpu_sizes(mod.BENCH) if a.cpu_check else mod.BENCH
        row = {"kernel": name, "sizes": sizes}
        try:
            for m in ("analytic", "learned"):
                s0, args = mod.make(False)
                sched = tc.auto_schedule(list(s0.outputs))
                row[m] = tune_one(mod, sched, args, sizes, trials, stores[m], m)
            best = min((r["us"] for m in ("analytic", "learned") for r in row[m]["trials"] if r["us"] is not None),
                       default=None)
            if best is not None:
                for m in ("analytic", "learned"):
                    row[m].update(summarize(row[m], best))
        except Exception as e:  # noqa: BLE001 - one kernel's failure is its row's, and the run goes on
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        rows.append(row)
        show(row)
        if a.json:
            Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows, "summary": summary(rows)}, indent=1))
    print(json.dumps(summary(rows), indent=1))


def show(row):
    if "error" in row:
        print(f"{row['kernel']:22s} ERROR {row['error'][:200]}", flush=True)
        return
    parts = []
    for m in ("analytic", "learned"):
        r = row[m]
        parts.append(f"{m}: best {r.get('best_us') or math.nan:9.1f} us, seeds' best {r.get('seeds_best_us') or math.nan:9.1f}"
                     f" us, to 5% in {r.get('trials_to_near')} trials, {r['tune_s']:5.1f} s")
    print(f"{row['kernel']:22s} " + " | ".join(parts) + f" [{row['learned']['cost_model'][:60]}]", flush=True)


def summary(rows) -> dict:
    used = [r for r in rows if "learned" in r and str(r["learned"].get("cost_model", "")).startswith("learned model")]
    out = {"kernels": len(rows), "learned_used_on": [r["kernel"] for r in used]}
    if used:
        out["seeds_best_analytic_over_learned_geomean"] = geomean(
            [r["analytic"]["seeds_best_us"] / r["learned"]["seeds_best_us"] for r in used
             if r["analytic"].get("seeds_best_us") and r["learned"].get("seeds_best_us")])
        for m in ("analytic", "learned"):
            ks = [r[m]["trials_to_near"] for r in used if r[m].get("trials_to_near")]
            out[f"trials_to_near_mean_{m}"] = sum(ks) / len(ks) if ks else None
    return out


if __name__ == "__main__":
    main()
