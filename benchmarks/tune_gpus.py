"""Tuning the GEMM+SiLU mix with 1, 2, 4 ... worker processes, one per GPU, on one shared study each
(a benchmark, not a test; issue 12). Needs a machine with several GPUs for its figures.

    python benchmarks/tune_gpus.py --workers 1,2 [--trials 48] [--json out.json]
    python benchmarks/tune_gpus.py --workers 1 --also 0,0 --trials 8   # two workers on GPU 0 (a check, not a figure)

For each worker count it tunes the mix of benchmarks/tune_mix.py in a fresh SQLite study (`tc.tune(...,
gpus=N)`) and reports: the tuning wall time; the wall time at which the study first reached the
one-worker study's best weighted time (from the trials' completion stamps); the speed-up over one
worker and per GPU (target >= 0.8x linear); and, for configs measured by more than one study, whether
their per-shape timings on different GPUs agree within noise (the median relative difference).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import optuna

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import matmul_silu  # noqa: E402
from tune_mix import MIX, RECIPE  # noqa: E402

import tilec as tc  # noqa: E402


def run(gpus, trials: int, storage: str, name: str) -> dict:
    s, args = matmul_silu.make()
    t0 = time.time()
    tuned = tc.tune(s, MIX, trials=trials, args=args, reference=matmul_silu.reference, storage=storage,
                    study_name=name, recipe=RECIPE, gpus=gpus, progress=False)
    wall = time.time() - t0
    study = optuna.load_study(study_name=name, storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.value is not None]
    curve = sorted((t.datetime_complete.timestamp() - t0, t.value) for t in done)
    per_shape = {json.dumps(t.params, sort_keys=True): t.user_attrs.get("times") for t in done
                 if "duplicate_of" not in t.user_attrs}
    return dict(gpus=gpus, wall_s=wall, trials=len(study.trials), measured=len(per_shape),
                best_us=min(v for _, v in curve) * 1e6, curve=curve, per_shape=per_shape,
                chosen=tuned.chosen.name, chosen_us=tuned.chosen.T * 1e6)


def reached(curve, target: float) -> float | None:
    best = float("inf")
    for t, v in curve:
        best = min(best, v)
        if best <= target * 1.0001:
            return t
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts, one per GPU (the first is the base)")
    ap.add_argument("--also", help="one more run with these GPU indices, e.g. 0,0 (two workers on GPU 0)")
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    specs = [int(c) for c in a.workers.split(",")] + ([a.also] if a.also else [])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n, gpus in enumerate(specs):
            rows.append(run(gpus, a.trials, f"sqlite:///{d}/s{n}.db", f"gpus{n}"))
    base = rows[0]
    print(f"{'workers':>8} {'wall s':>8} {'to 1-GPU best s':>16} {'speed-up':>9} {'per GPU':>8} {'best us':>9} "
          f"{'measured':>9}")
    for r in rows:
        t = reached(r["curve"], base["best_us"] / 1e6)
        t1 = reached(base["curve"], base["best_us"] / 1e6)
        k = len(str(r["gpus"]).split(",")) if isinstance(r["gpus"], str) else r["gpus"]
        speed = (t1 / t) if t and t1 else None
        r.update(to_base_best_s=t, speedup=speed, per_gpu=speed / k if speed else None)
        print(f"{str(r['gpus']):>8} {r['wall_s']:8.1f} {t if t is not None else float('nan'):16.1f} "
              f"{speed or float('nan'):9.2f} {(speed / k) if speed else float('nan'):8.2f} {r['best_us']:9.1f} "
              f"{r['measured']:9d}")
    # the same config timed on different GPUs (different studies): relative differences per shape
    diffs = []
    for r in rows[1:]:
        for cfg, times in r["per_shape"].items():
            other = base["per_shape"].get(cfg)
            if isinstance(times, dict) and isinstance(other, dict):
                diffs += [abs(times[s] - other[s]) / other[s] for s in times if s in other and other[s]]
    if diffs:
        diffs.sort()
        print(f"same config, another study/GPU: median relative difference {diffs[len(diffs) // 2]:.2%} over "
              f"{len(diffs)} shape timings")
    if a.json:
        a.json.write_text(json.dumps([{k: v for k, v in r.items() if k != "per_shape"} for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
