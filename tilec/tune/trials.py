"""A study's trials as rows and as a table: what `tilec tune` and `tilec show` print, and what a
program can read (`trial_rows(tuned.study)`). Each row: number, state, config, weighted value, per-shape
times, whether the trial measured its config itself, and a note that says why a trial was pruned,
failed, retried or seeded. Kernel times are printed in microseconds (`fmt_time`), whatever their size.

`measured_itself(trial)` is what `trials=` counts: a trial that measured its own config (completed, or
failed while being built, checked or timed). Repeats of a config (`duplicate_of`), pruned configs,
refused ones (not a config of the schedule) and interrupted trials are recorded but not counted."""

from __future__ import annotations

import math

UNIT = "us"  # microseconds, spelled in ASCII so that any terminal, log or pipe can print it


def fmt_time(s) -> str:
    """Seconds for people, always in microseconds: "12.30 us", "5,514.2 us"; "-" for none."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if type(s) not in (int, float) or not math.isfinite(s):  # not a time (a study holds what its writers put)
        return repr(s)[:40]
    us = s * 1e6
    return f"{us:.2f} {UNIT}" if abs(us) < 1000 else f"{us:,.1f} {UNIT}"


REFUSED = "not a config of this schedule"  # how a refused trial's failure begins (study.py writes it)


def measured_itself(t) -> bool:
    """Whether an optuna trial measured its own config, which is what `trials=` counts: complete, or
    failed with a reason while its config was built, checked or timed; not a repeat (`duplicate_of`),
    not pruned, not refused, not interrupted (no result)."""
    ua = t.user_attrs
    if "duplicate_of" in ua or "refused" in ua:
        return False
    if t.state.name == "COMPLETE":
        return True
    failure = ua.get("failure")
    return t.state.name == "FAIL" and isinstance(failure, str) and not failure.startswith(REFUSED)


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
        if "after_repeat" in ua:
            notes.append(f"queued after the repeat #{ua['after_repeat']}")
        if "interrupted" in ua:
            notes.append(f"interrupted ({ua['interrupted']}); queued again")
        fixed = t.system_attrs.get("fixed_params")
        config = dict(t.params) or (dict(fixed) if isinstance(fixed, dict) else {})  # a WAITING trial's: enqueued
        times = ua.get("times")
        dup = ua.get("duplicate_of")
        rows.append({"number": t.number, "state": t.state.name, "config": config, "value": t.value,
                     "times": dict(times) if isinstance(times, dict) else {},
                     "measured": measured_itself(t), "duplicate_of": dup if type(dup) is int else None,
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
    """"12 trials (10 complete, 2 pruned; 8 configs measured, 2 repeats)": the states, then how many
    configs were measured (what `trials=` counts) and how many trials repeated a config."""
    by: dict[str, int] = {}
    for r in rows:
        by[r["state"]] = by.get(r["state"], 0) + 1
    parts = [f"{by[s]} {s.lower()}" for s in sorted(by, key=lambda s: _ORDER.get(s, 5))]
    if not rows:
        return "0 trials"
    measured = sum(1 for r in rows if r.get("measured"))
    repeats = sum(1 for r in rows if r.get("duplicate_of") is not None)
    tail = f"; {measured} config{'s' * (measured != 1)} measured"
    if repeats:
        tail += f", {repeats} repeat{'s' * (repeats != 1)}"
    return f"{len(rows)} trials ({', '.join(parts)}{tail})"


def config_text(cfg: dict) -> str:
    """"BM=128,BN=64"."""
    return ",".join(f"{k}={v}" for k, v in cfg.items())
