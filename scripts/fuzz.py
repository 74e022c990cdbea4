"""Differential schedule fuzzer for tilec: random computes x random schedules x random configs, each
run through the Triton interpreter and compared with a float64 PyTorch reference.

    TRITON_INTERPRET=1 python scripts/fuzz.py --cases 500 --seed 0 [--jobs 1] [--timeout 60]
        [--time-budget SECONDS] [--save-failures DIR] [--no-reduce] [--show SEED] [--family scan]

Prints the figures (cases, refused by reason with LoweringError reasons apart, correct, wrong, internal,
hung, crash) and, for each distinct failure, its seeds and a reduced standalone reproduction script.
`--show SEED` prints the full script of one case instead. Exit status 1 if anything failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.fuzz.run import default_target  # noqa: E402 - stdlib only at import: triton is not loaded yet

default_target()  # compiled on a GPU, Triton's interpreter without one (set before triton is imported)
os.environ.setdefault("PYTHONPATH", str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200, help="number of cases (seeds seed .. seed+cases-1)")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as hung")
    ap.add_argument("--time-budget", type=float, default=None, help="stop starting cases after this many seconds")
    ap.add_argument("--save-failures", type=Path, default=None, help="write reproduction scripts here")
    ap.add_argument("--no-reduce", action="store_true", help="print failing cases without reducing them")
    ap.add_argument("--reduce-budget", type=float, default=90.0, help="seconds of reduction per failure")
    ap.add_argument("--per-signature", type=int, default=1, help="failures reduced per distinct signature")
    ap.add_argument("--show", type=int, default=None, help="print the script of case SEED and exit")
    ap.add_argument("--quiet", action="store_true", help="do not log each failure as it happens")
    ap.add_argument("--family", default=None, choices=["elementwise", "reduce", "gemm", "norm", "random", "online",
                                                        "scan", "scatter"], help="draw every case from this family")
    ap.add_argument("--auto", action="store_true", help="schedule each case's compute with tc.auto_schedule (at a "
                    "random config of its knobs) instead of the generated schedule")
    a = ap.parse_args(argv)
    if a.auto:  # read by tests/fuzz/gen.py in every worker
        os.environ["TILEC_FUZZ_AUTO"] = "1"
    if a.family:  # read by tests/fuzz/gen.py in every worker (the same seed then gives another case)
        os.environ["TILEC_FUZZ_FAMILY"] = a.family
    os.chdir(ROOT)
    from tests.fuzz import gen, run

    if a.show is not None:
        case, _ = gen.generate(a.show)
        print(case.script())
        return 0
    t0 = time.time()
    stats, reduced = run.campaign(range(a.seed, a.seed + a.cases), jobs=a.jobs, timeout=a.timeout,
                                  budget=a.time_budget, reduce=not a.no_reduce, reduce_budget=a.reduce_budget,
                                  per_signature=a.per_signature, log=(lambda *_: None) if a.quiet else
                                  (lambda m: print(m, file=sys.stderr, flush=True)))
    wall = stats.elapsed
    print(stats.summary(wall, a.jobs))
    if a.save_failures:
        a.save_failures.mkdir(parents=True, exist_ok=True)
    n = 0
    for sig, outs in stats.failures.items():
        n += 1
        seeds = [o["seed"] for o in outs]
        print(f"\n=== failure {n}: {sig[0]}: {sig[1]}")
        print(f"seeds ({len(seeds)}): {', '.join(map(str, seeds[:40]))}{' ...' if len(seeds) > 40 else ''}")
        first = outs[0]
        if first.get("message"):
            print("message: " + first["message"].strip().replace("\n", "\n  "))
        if first.get("frame"):
            print(f"last frame: {first['frame']}")
        for seed, script, note in reduced.get(sig, []):
            print(f"--- reproduction (seed {seed}; {note}):")
            print(script)
            if a.save_failures:
                (a.save_failures / f"seed{seed}_{sig[0]}.py").write_text(script)
        if not reduced.get(sig) and first.get("case") is not None:
            print("--- case (not reduced):")
            print(first["case"].script())
            if a.save_failures:
                (a.save_failures / f"seed{first['seed']}_{sig[0]}.py").write_text(first["case"].script())
    for key, outs in stats.fuzzer_errors.items():
        print(f"\n=== fuzzer error (a bug of the fuzzer): {key}\nseeds: {[o['seed'] for o in outs][:20]}")
        print(outs[0].get("traceback", ""))
    print(f"\ntotal time {time.time() - t0:.0f} s")
    return 1 if stats.failed else 0


if __name__ == "__main__":
    sys.exit(main())
