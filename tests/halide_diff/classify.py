"""Running one Halide differential case, classifying it, and running campaigns of them.

A case (mode, seed) runs in Halide first. If Halide refuses the schedule (a `halide.HalideError` at a
schedule call or at realize), the case is `halide-refused` and tilec is not asked. Otherwise tilec builds
and runs it, and the outcome is one of:

- `correct`: tilec's output is within the float64 reference's bound (reference.py);
- `wrong`: it is not (a silent wrong answer: the crucial finding, printed with its reproducer);
- `refused`: a `tc.TilecError` (or a step with no tilec counterpart), keyed by the error's class and its
  first line with names and numbers replaced (`normalize`, as the schedule fuzzer does);
- `internal`: any other exception from tilec;
- `slow`: built, but its loop nests estimate more interpreted operations than a case may take here
  (`tests/fuzz/run.py`'s estimate); not run, not counted correct;
- `harness-error`: a bug of this harness, not of tilec: an exception in our own code, or Halide's output
  off the reference (then our Halide and tilec programs are not the same pipeline).

`hung` (past the timeout) and `crash` (the worker died) come from the pool. `campaign` runs cases in
`jobs` spawned worker processes with a per-case timeout and a time budget, as `tests/fuzz/run.py` does.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import random
import re
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

# interpreted operations (about 150 us each): past this a case is `slow`, not run (`--slow-work`, which sets
# TILEC_HALIDE_SLOW_WORK for the worker processes, runs more of them)
SLOW_WORK = int(os.environ.get("TILEC_HALIDE_SLOW_WORK", "60000"))
ROOT = Path(__file__).resolve().parents[2]


def make_inputs(pipe, seed) -> dict:
    import numpy as np

    rng = np.random.default_rng(random.Random(f"inputs:{seed}").getrandbits(32))
    return {t.name: rng.uniform(-1.0, 1.0, size=t.shape).astype(np.float32) for t in pipe.inputs}


def _normalize(msg: str, names: dict[str, str]) -> str:
    from tests.fuzz.run import normalize

    return normalize(msg, names)


def _halide_reason(e: BaseException, names: dict) -> str:
    lines = [x for x in str(e).splitlines() if x.strip()]
    first = lines[0] if lines else ""
    first = re.sub(r"^Error:\s*", "", first)
    first = re.sub(r"\$\w+", "", first)  # k$x -> k
    first = re.sub(r'"', "", first)
    return _normalize(first, names)


def _frame(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return "?"
    f = tb[-1]
    path = f.filename
    for root in ("tilec/", "triton/", "torch/", "tests/"):
        if root in path:
            path = root + path.split(root, 1)[1]
            break
    return f"{path}:{f.lineno} in {f.name}"


def _ours(exc: BaseException) -> bool:
    """Whether the exception was raised in this harness's own code (its last frame is ours)."""
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and "tests/halide_diff/" in tb[-1].filename


def run_case(mode: str, seed: int, run_tilec: bool = True) -> dict:
    """Run one case in Halide and tilec and classify it. The dict holds `status`, `key` (the reason, for
    refusals and failures), `message`, and the logs of both schedules."""
    import halide as hl

    from . import gen, halide_side, reference, tilec_side

    t0 = time.time()
    out: dict = dict(mode=mode, seed=seed)
    try:
        case = gen.generate(mode, seed)
    except Exception as e:  # noqa: BLE001 - a generator bug is the harness's
        return dict(out, status="harness-error", key=f"generator: {type(e).__name__}: {e}",
                    message=traceback.format_exc()[-2000:])
    out["name"] = case.name
    out["case"] = case.describe()
    names = {t.name: "T" for t in case.pipe.tensors}
    for st in case.steps:
        for x in st[2:]:
            if isinstance(x, str) and x not in names:
                names[x] = "a"
            elif isinstance(x, list):
                names.update({n: "a" for n in x if n not in names})
    names.update({a: "a" for a in ("i", "j", "k") if a not in names})
    inputs = make_inputs(case.pipe, seed)
    # -- Halide
    h = None
    try:
        h = halide_side.HalideRun(case.pipe, inputs)
        h.apply(case.steps)
        hout = h.realize()
    except hl.HalideError as e:
        if "Input buffer" in str(e):  # an input read out of its bounds: Halide's bounds of this schedule, or ours?
            try:
                plain = halide_side.HalideRun(case.pipe, inputs)
                plain.apply([])
                plain.realize()
            except Exception as e2:  # noqa: BLE001 - the pipeline itself reads out of bounds: our bug
                return dict(out, status="harness-error", key="the unscheduled Halide pipeline fails",
                            message=str(e2)[:600])
        return dict(out, status="halide-refused", key=_halide_reason(e, names), message=str(e)[:600],
                    halide_log=h.log if h else [], elapsed=time.time() - t0)
    except Exception as e:  # noqa: BLE001 - our Halide program is wrong, not Halide
        return dict(out, status="harness-error", key=f"halide side: {type(e).__name__} at {_frame(e)}",
                    message=traceback.format_exc()[-2000:], halide_log=h.log if h else [])
    out["halide_log"] = h.log
    ref, mag, rel, abs_ = reference.evaluate(case.pipe, inputs)
    bad = reference.compare(hout, ref, mag, rel, abs_)
    if bad:
        return dict(out, status="harness-error", key="Halide's output is off the float64 reference",
                    message=bad, elapsed=time.time() - t0)
    if not run_tilec:
        return dict(out, status="halide-only")
    # -- tilec
    import tilec as tc

    t = None
    where = "compute"
    try:
        t = tilec_side.TilecRun(case.pipe)
        where = "schedule"
        t.apply(case.steps)
        where = "build"
        kernel = t.build()
    except tilec_side.NoCounterpart as e:
        return dict(out, status="refused", stage=where, key=f"no tilec counterpart: {e}", message=str(e),
                    tilec_log=t.log if t else [], elapsed=time.time() - t0)
    except tc.TilecError as e:
        return _refusal(out, where, e, t, names, t0)
    except Exception as e:  # noqa: BLE001
        return _failure(out, where, e, t, names, t0)
    out["tilec_log"] = t.log
    from tests.fuzz.run import estimate_work

    try:
        work = estimate_work(kernel, {})
    except Exception:  # noqa: BLE001 - the estimate is a convenience; run the case
        work = None
    if work is not None and work > SLOW_WORK:
        return dict(out, status="slow", work=work, elapsed=time.time() - t0)
    try:
        got = tilec_side.run_kernel(kernel, case.pipe, inputs)
    except tc.TilecError as e:
        return _refusal(out, "call", e, t, names, t0)
    except Exception as e:  # noqa: BLE001
        return _failure(out, "call", e, t, names, t0)
    bad = reference.compare(got, ref, mag, rel, abs_)
    vs_halide = reference.compare(got, hout.astype("float64"), mag, 2 * rel, 2 * abs_)
    out.update(work=work, elapsed=time.time() - t0, vs_halide=vs_halide)
    if bad:
        return dict(out, status="wrong", key="tilec's output is off the float64 reference", message=bad)
    return dict(out, status="correct")


def _refusal(out, where, e, t, names, t0):
    if t is not None:
        try:
            names = {**t.names(), **names}
        except Exception:  # noqa: BLE001
            pass
    cls = type(e).__name__
    reason = getattr(e, "reason", None)
    text = _normalize(str(e), names)
    key = f"{cls}[{reason}]: {text}" if reason else f"{cls}: {text}"
    return dict(out, status="refused", stage=where, key=key, cls=cls, message=str(e)[:800],
                tilec_log=t.log if t else [], elapsed=time.time() - t0)


def _failure(out, where, e, t, names, t0):
    status = "harness-error" if _ours(e) else "internal"
    frame = _frame(e)
    key = f"{type(e).__name__} at {re.sub(r':[0-9]+ in ', ':', frame)}: {_normalize(str(e), names)[:80]}"
    return dict(out, status=status, stage=where, key=key, message=f"{type(e).__name__}: {str(e)[:600]}",
                traceback=traceback.format_exc()[-3000:], tilec_log=t.log if t else [], elapsed=time.time() - t0)


# ---------------------------------------------------------------------------------------------------------
# worker processes


def _worker(conn, log_path) -> None:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    if log_path:  # Halide prints warnings (emulated float16) on fds 1 and 2: keep them out of the table
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    import halide  # noqa: F401

    import tilec  # noqa: F401

    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        mode, seed = msg
        try:
            res = run_case(mode, seed)
        except Exception as e:  # noqa: BLE001
            res = dict(mode=mode, seed=seed, status="harness-error", key=f"run_case: {type(e).__name__}",
                       message=traceback.format_exc()[-2000:])
        conn.send(("done", res))


class _W:
    def __init__(self, ctx, log_path):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, log_path), daemon=True)
        self.proc.start()
        child.close()
        self.ready, self.task, self.started, self.tasks = False, None, time.time(), 0

    def stop(self, kill=False):
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


def campaign(mode: str, seeds, jobs: int = 1, timeout: float = 90.0, budget: float | None = None,
             log=lambda m: None, max_tasks: int = 200, stderr_log: str | None = None):
    """Run the cases (mode, seed) for seed in `seeds` in `jobs` workers; returns (Stats, outcomes)."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in paths if p])
    os.environ.setdefault("TRITON_INTERPRET", "1")
    ctx = mp.get_context("spawn")
    stats = Stats(mode)
    outcomes = []
    t0 = time.time()
    deadline = t0 + budget if budget else None
    seeds = iter(seeds)
    workers: list[_W | None] = [None] * jobs
    exhausted = False
    try:
        while True:
            for n in range(jobs):
                w = workers[n]
                if w is None:
                    w = workers[n] = _W(ctx, stderr_log)
                if w.ready and w.task is None and not exhausted:
                    seed = None if deadline and time.time() > deadline else next(seeds, None)
                    if seed is None:
                        exhausted = True
                        continue
                    w.task, w.started = seed, time.time()
                    w.conn.send((mode, seed))
            busy = [w for w in workers if w is not None and (w.task is not None or not w.ready)]
            if exhausted and not any(w.task is not None for w in busy):
                break
            now = time.time()
            waits = [w.started + (timeout if w.ready else 180.0) - now for w in busy]
            ready = wait([w.conn for w in busy], timeout=max(0.01, min(waits) if waits else 0.1))
            for w in busy:
                res = None
                if w.conn in ready:
                    try:
                        kind, payload = w.conn.recv()
                    except (EOFError, OSError):
                        res = dict(mode=mode, seed=w.task, status="crash", key="crash",
                                   message=f"worker died, exit code {w.proc.exitcode}")
                    else:
                        if kind == "ready":
                            w.ready = True
                            continue
                        res = payload
                        w.task, w.tasks = None, w.tasks + 1
                        if w.tasks >= max_tasks:
                            w.stop()
                            workers[workers.index(w)] = None
                elif time.time() - w.started > (timeout if w.ready else 180.0):
                    res = dict(mode=mode, seed=w.task, status="hung", key="hung",
                               message=f"past the {timeout:.0f} s timeout")
                if res is not None and res.get("status") in ("hung", "crash"):
                    w.stop(kill=True)
                    workers[workers.index(w)] = None
                if res is not None and res.get("seed") is not None:
                    stats.add(res)
                    outcomes.append(res)
                    if res["status"] in FAILURES:
                        log(f"seed {res['seed']}: {res['status']}: {res.get('key', '')}")
    finally:
        for w in workers:
            if w is not None:
                w.stop(kill=True)
    stats.elapsed = time.time() - t0
    return stats, outcomes


FAILURES = ("wrong", "internal", "harness-error", "hung", "crash")


class Stats:
    def __init__(self, mode: str):
        self.mode = mode
        self.status = collections.Counter()
        self.refused = collections.Counter()
        self.halide_refused = collections.Counter()
        self.failures: dict[str, list] = collections.defaultdict(list)
        self.elapsed = 0.0
        self.vs_halide_off = 0

    def add(self, out: dict) -> None:
        st = out["status"]
        self.status[st] += 1
        if st == "refused":
            self.refused[out["key"]] += 1
        elif st == "halide-refused":
            self.halide_refused[out["key"]] += 1
        elif st in FAILURES:
            self.failures[f"{st}: {out.get('key', '')}"].append(out["seed"])
        if st == "correct" and out.get("vs_halide"):
            self.vs_halide_off += 1

    @property
    def n(self) -> int:
        return sum(self.status.values())

    @property
    def accepted(self) -> int:
        return self.n - self.status["halide-refused"] - self.status["harness-error"]

    @property
    def failed(self) -> int:
        return sum(self.status[s] for s in FAILURES)

    def summary(self, jobs: int = 1, top: int = 15) -> str:
        acc = self.accepted
        corr = self.status["correct"]
        gap = acc - corr
        pc = lambda a, b: f"{100 * a / b:.1f}%" if b else "-"
        rate = f" in {self.elapsed:.0f} s with {jobs} job(s)" if self.elapsed else ""
        lines = [f"mode {self.mode}: {self.n} cases{rate}",
                 f"  halide-refused: {self.status['halide-refused']} (skipped)",
                 f"  Halide-accepted: {acc}",
                 f"    tilec correct: {corr} ({pc(corr, acc)}); of these off Halide's output beyond 2x the "
                 f"bound: {self.vs_halide_off}",
                 f"    refused: {self.status['refused']} ({pc(self.status['refused'], acc)} of accepted, "
                 f"{pc(self.status['refused'], gap)} of the gap of {gap})"]
        for k, v in self.refused.most_common(top):
            lines.append(f"      {v:5d}  {pc(v, gap):>6} of gap  {k}")
        if len(self.refused) > top:
            rest = sum(v for _, v in self.refused.most_common()[top:])
            lines.append(f"      {rest:5d}  {pc(rest, gap):>6} of gap  ... {len(self.refused) - top} more reasons")
        for st in ("slow", "wrong", "internal", "hung", "crash"):
            lines.append(f"    {st}: {self.status[st]}")
        lines.append(f"  harness errors: {self.status['harness-error']}")
        if self.halide_refused:
            lines.append("  Halide's refusals (top 5):")
            for k, v in self.halide_refused.most_common(5):
                lines.append(f"      {v:5d}  {k}")
        return "\n".join(lines)

    def as_json(self) -> dict:
        return dict(mode=self.mode, cases=self.n, status=dict(self.status), accepted=self.accepted,
                    refused=dict(self.refused.most_common()), halide_refused=dict(self.halide_refused.most_common()),
                    failures=dict(self.failures), elapsed=self.elapsed, correct_off_halide=self.vs_halide_off)


def show(out: dict) -> str:
    """A case's outcome as text: the pipeline, both schedules, the result."""
    parts = [out.get("case", f"case {out.get('mode')} {out.get('seed')}")]
    if out.get("halide_log"):
        parts.append("Halide schedule:\n" + "".join(f"  {x}\n" for x in out["halide_log"]))
    if out.get("tilec_log"):
        parts.append("tilec schedule:\n" + "".join(f"  {x}\n" for x in out["tilec_log"]))
    parts.append(f"result: {out['status']}" + (f": {out['key']}" if out.get("key") else ""))
    if out.get("message"):
        parts.append("message: " + out["message"].strip().replace("\n", "\n  "))
    if out.get("traceback"):
        parts.append(out["traceback"])
    if out.get("vs_halide"):
        parts.append("against Halide: " + out["vs_halide"])
    return "\n".join(parts)
