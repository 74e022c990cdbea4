"""Differential test of tilec against Halide: random pipelines and schedules applied in both.

    python scripts/halide_diff.py --mode random|friendly|canonical [--cases N] [--seed S] [--jobs J]
        [--time-budget SECONDS] [--timeout SECONDS] [--json out.json] [--case SEED]

Each case is a pipeline of 2-4 stages and a schedule written once and applied with Halide's primitives
and tilec's (tests/halide_diff/). Halide realizes it on the CPU; a case Halide refuses is skipped. Every
other case is built and run by tilec (Triton's interpreter without a GPU) and compared with a float64
reference and with Halide's output. Prints the figures: Halide-accepted, tilec correct, refused by reason
(count and share of the gap to Halide), wrong, internal; then every failure with its case. `--case SEED`
prints one case instead: its pipeline, both schedules and the result. `--mode canonical` runs the fixed
list of well-known schedules (all of them unless --cases says fewer). Exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (a CUDA host may set 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["random", "friendly", "canonical"], default="random")
    ap.add_argument("--cases", type=int, default=None, help="number of cases (default 200; canonical: all)")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per case before it counts as hung")
    ap.add_argument("--time-budget", type=float, default=None, help="stop starting cases after this many seconds")
    ap.add_argument("--json", type=Path, default=None, help="write the figures and every outcome here")
    ap.add_argument("--case", type=int, default=None, help="run case SEED here and print it")
    ap.add_argument("--slow-work", type=int, default=None,
                    help="run cases up to this many estimated interpreted operations (default 60000; past it: slow)")
    ap.add_argument("--quiet", action="store_true", help="do not log each failure as it happens")
    a = ap.parse_args(argv)
    os.chdir(ROOT)
    if a.slow_work is not None:  # read by classify when imported, here and in the worker processes
        os.environ["TILEC_HALIDE_SLOW_WORK"] = str(a.slow_work)
    from tests.halide_diff import classify, gen

    if a.case is not None:
        out = classify.run_case(a.mode, a.case)
        print(classify.show(out))
        return 1 if out["status"] in classify.FAILURES else 0
    n = a.cases if a.cases is not None else (len(gen.canonical()) if a.mode == "canonical" else 200)
    seeds = range(a.seed, a.seed + n)
    log = (lambda _: None) if a.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    stderr_log = os.path.join(tempfile.gettempdir(), "halide_diff_workers.log")
    stats, outcomes = classify.campaign(a.mode, seeds, jobs=a.jobs, timeout=a.timeout, budget=a.time_budget,
                                        log=log, stderr_log=stderr_log)
    print(f"seeds {a.seed}..{a.seed + n - 1} (ran {stats.n})")
    print(stats.summary(a.jobs))
    failing = [o for o in outcomes if o["status"] in classify.FAILURES]
    for k, o in enumerate(failing, 1):
        print(f"\n=== failure {k}: seed {o['seed']}: {o['status']}: {o.get('key', '')}")
        print(classify.show(o))
        print(f"reproduce: python scripts/halide_diff.py --mode {a.mode} --case {o['seed']}")
    if a.json:
        slim = [{k: v for k, v in o.items() if k not in ("traceback",)} for o in outcomes]
        a.json.write_text(json.dumps(dict(summary=stats.as_json(), outcomes=slim), indent=1, default=str))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
