"""How long the isl legality checks take: per schedule primitive and per build, for computes of 1,
4 and 16 stages (a benchmark, not a test; runs on a CPU).

    python benchmarks/check_time.py [--json out.json]

Each compute is a chain: a row-wise sum (a reduction) followed by elementwise stages that use it, the
last one the output. The schedule tiles the output's columns, binds its rows to the grid, and places the row sum at the
row and every other stage at the column tile (compute_at), so every primitive call runs the full check. Target (issue 3):
under 50 ms per primitive for 4 stages.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import tilec as tc
from tilec.poly import legality
from tilec.poly.model import model_of


def chain(n: int):
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    stages = []
    if n == 1:
        return X, [tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="S0")]
    c = tc.reduce_axis(N, name="c")
    first = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="S0")
    stages.append(first)
    prev = None
    for k in range(1, n):
        if prev is None:
            prev = tc.compute((M, N), lambda i, j: X[i, j] - first[i], name=f"S{k}")
        else:
            p = prev
            prev = tc.compute((M, N), lambda i, j, p=p: p[i, j] * 0.5 + X[i, j], name=f"S{k}")
        stages.append(prev)
    return X, stages


checks = {"n": 0}
_find = legality.find_violations


def _counting(*args, **kwargs):
    checks["n"] += 1
    return _find(*args, **kwargs)


legality.find_violations = _counting  # count the checks that really ran (a primitive skips none here)


def schedule_calls(n: int):
    """A fresh n-stage compute, its schedule, and the primitive calls to time (in order)."""
    X, stages = chain(n)
    out = stages[-1]
    s = tc.create_schedule(out)
    i, j = out.axis
    loops = {}
    calls = [lambda: loops.update(zip(("jo", "ji"), s[out].split(j, 64))),
             lambda: s[out].bind(i, "program_id.0")]
    # consumers first, so that every step can be lowered and checked: the row sum at the row,
    # the elementwise stages at the column tile
    for st in reversed(stages[:-1]):
        calls.append(lambda st=st: s[st].compute_at(s[out], i if st.is_reduction else loops["jo"]))
    return s, calls


def run(n: int, repeats: int = 3) -> dict:
    prim_times, build_times, deps_times, checked = [], [], [], []
    for _ in range(repeats):
        s, calls = schedule_calls(n)
        t0 = time.perf_counter()
        model_of(s)
        deps_times.append(time.perf_counter() - t0)
        for call in calls:
            before = checks["n"]
            t0 = time.perf_counter()
            call()
            prim_times.append(time.perf_counter() - t0)
            checked.append(checks["n"] > before)
        t0 = time.perf_counter()
        tc.lower(s)
        build_times.append(time.perf_counter() - t0)
    assert all(checked), "a primitive skipped its check (schedule not lowerable at that step)"
    return {"stages": n, "primitives_timed": len(prim_times),
            "primitive_ms_median": 1e3 * statistics.median(prim_times),
            "primitive_ms_max": 1e3 * max(prim_times),
            "build_ms_median": 1e3 * statistics.median(build_times),
            "dependences_ms_median": 1e3 * statistics.median(deps_times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here as JSON")
    args = ap.parse_args()
    rows = [run(n) for n in (1, 4, 16)]
    print(f"{'stages':>6} {'prims':>6} {'per primitive (median / max)':>30} {'per build':>10} {'deps once':>10}")
    for r in rows:
        print(f"{r['stages']:>6} {r['primitives_timed']:>6} {r['primitive_ms_median']:>17.1f} / {r['primitive_ms_max']:>6.1f} ms"
              f" {r['build_ms_median']:>7.1f} ms {r['dependences_ms_median']:>7.1f} ms")
    four = next(r for r in rows if r["stages"] == 4)
    print(f"target: < 50 ms per primitive at 4 stages -> {'met' if four['primitive_ms_max'] < 50 else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
