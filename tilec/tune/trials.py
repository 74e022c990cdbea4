"""A study's trials as rows and as a table: what `tilec tune` and `tilec show` print, and what a
program can read (`trial_rows(tuned.study)`). Each row: number, state, config, weighted value, per-shape
times, and a note that says why a trial was pruned, failed, retried or seeded."""

from __future__ import annotations

import math


def fmt_time(s) -> str:
    """Seconds for people: "12.30 us", "1.234 ms"; "-" for none."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if type(s) not in (int, float):  # not a time (a study holds what its writers put there)
        return repr(s)[:40]
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    if s < 1:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


_ORDER = {"COMPLETE": 0, "RUNNING": 1, "WAITING": 2, "FAIL": 3, "PRUNED": 4}


def trial_rows(study) -> list[dict]:
    """Every trial of an optuna study: number, state, config, value, per-shape times, note."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        ua = t.user_attrs
        notes = []
        if "seed" in ua:
            notes.append(f"seed ({ua['seed']})")
        if "duplicate_of" in ua:
            notes.append(f"same config as #{ua['duplicate_of']}")
        if "failed_trial" in t.system_attrs:
            notes.append(f"retry of #{t.system_attrs['failed_trial']}")
        if "pruned" in ua:
            notes.append(f"pruned: {ua['pruned']}")
        if "failure" in ua:
            notes.append(f"failed: {ua['failure']}")
        elif t.state.name == "FAIL" and "interrupted" not in ua:
            notes.append("failed: no result recorded (interrupted, or its worker died)")
        if "retry_of" in ua:
            notes.append(f"retry of #{ua['retry_of']}")
        if "interrupted" in ua:
            notes.append(f"interrupted ({ua['interrupted']}); queued again")
        fixed = t.system_attrs.get("fixed_params")
        config = dict(t.params) or (dict(fixed) if isinstance(fixed, dict) else {})  # a WAITING trial's: enqueued
        times = ua.get("times")
        rows.append({"number": t.number, "state": t.state.name, "config": config, "value": t.value,
                     "times": dict(times) if isinstance(times, dict) else {},
                     "note": " ".join("; ".join(str(n) for n in notes).split())})
    return rows


def best_first(rows: list[dict]) -> list[dict]:
    """Completed trials fastest first, then running, waiting, failed and pruned ones."""
    return sorted(rows, key=lambda r: (_ORDER.get(r["state"], 5),
                                       r["value"] if r["value"] is not None else math.inf, r["number"]))


def format_table(rows: list[dict], shapes: list[str] | None = None) -> str:
    """The rows as an aligned text table: number, state, each knob, weighted time, each shape's time, note."""
    knobs: list[str] = []
    for r in rows:
        knobs += [k for k in r["config"] if k not in knobs]
    if shapes is None:
        shapes = []
        for r in rows:
            shapes += [k for k in r["times"] if k not in shapes]
    head = ["#", "state", *knobs, "weighted", *shapes, "note"]
    body = [[str(r["number"]), r["state"], *(str(r["config"].get(k, "-")) for k in knobs),
             fmt_time(r["value"]), *(fmt_time(r["times"].get(s)) for s in shapes), r["note"]] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    left = {1, len(head) - 1}  # state and note read left to right; numbers line up on the right
    lines = []
    for cells in [head, *body]:
        text = "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        lines.append(text.rstrip())
    return "\n".join(lines)


def counts_text(rows) -> str:
    """"12 trials (10 complete, 2 failed)"."""
    by: dict[str, int] = {}
    for r in rows:
        by[r["state"]] = by.get(r["state"], 0) + 1
    parts = [f"{by[s]} {s.lower()}" for s in sorted(by, key=lambda s: _ORDER.get(s, 5))]
    return f"{len(rows)} trials ({', '.join(parts)})" if rows else "0 trials"


def config_text(cfg: dict) -> str:
    """"BM=128,BN=64"."""
    return ",".join(f"{k}={v}" for k, v in cfg.items())
