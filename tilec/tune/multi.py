"""Tuning on several GPUs: one worker process per GPU, all adding trials to one shared study.

`tilec tune FILE --gpus all|N|0,1,...` (and `tc.tune(..., gpus=..., recipe=FILE)`) start, before the
study's own process tunes, one `tilec tune FILE --worker` process per entry of `gpus`, each pinned to
its GPU with `CUDA_VISIBLE_DEVICES` and all on one study (SQLite on one host; a PostgreSQL URL works
the same, and on several hosts each host runs `tilec tune ... --worker` itself). Each worker compiles
candidates in its own processes on the host's cores (`jobs` each) and times them on its GPU alone (a
lock per worker process: the GPUs do not disturb each other's timings, and one GPU's timings never
overlap). The shared study is what keeps the workers apart: a config being measured by one is copied,
not measured again, by another (`study.py`'s `settle`), and a worker that dies leaves its running trial
to the heartbeat, which fails it so that the others go on. When every worker has ended, this process
tops the study up to `trials` measured configs if the workers fell short (one died) and picks the plan
from the study, the same kind of result as a one-GPU study.

Without a GPU (Triton's interpreter), `gpus=N` starts N workers on the CPU: the same code path, for
tests; `gpus="0,0"` puts two workers on GPU 0 (also for tests: their timings then share the GPU).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tilec.errors import ArgumentError
from tilec.tune.mix import ShapeMix


@dataclass
class WorkerRun:
    """How one worker process ended: its device ("cpu" without a GPU), exit status, log file, seconds."""

    device: str
    returncode: int
    log: Path
    seconds: float

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def devices(gpus, cuda: bool, count: int) -> list[str]:
    """The device of each worker for `gpus`: "all" (every visible GPU), an int N (the first N GPUs; N
    CPU workers without a GPU), or device indices ("0,1" or [0, 1]; repeats put several workers on one
    GPU). `cuda`: whether there is a GPU; `count`: how many are visible."""
    what = f"gpus={gpus!r}"
    if isinstance(gpus, str) and gpus.strip() == "all":
        if not cuda:
            raise ArgumentError(f"{what}: there is no GPU here; gpus=N starts N workers on the CPU (Triton's "
                                f"interpreter), e.g. gpus=2")
        return [str(d) for d in range(count)]
    if isinstance(gpus, str) and gpus.strip().isdigit() and "," not in gpus:
        gpus = int(gpus)
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        if gpus < 1:
            raise ArgumentError(f"{what}: expected at least 1 worker")
        if not cuda:
            return ["cpu"] * gpus
        if gpus > count:
            raise ArgumentError(f"{what}: only {count} GPU(s) are visible here (CUDA_VISIBLE_DEVICES="
                                f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); give at most {count}, "
                                f"or device indices with repeats (e.g. '0,0') for several workers per GPU")
        return [str(d) for d in range(gpus)]
    items = gpus.split(",") if isinstance(gpus, str) else gpus
    if not isinstance(items, (list, tuple)) or not items:
        raise ArgumentError(f"{what}: expected 'all', a number of workers, or GPU indices like '0,1'")
    out = []
    for item in items:
        text = str(item).strip()
        if isinstance(item, bool) or not text.isdigit():
            raise ArgumentError(f"{what}: {item!r} is not a GPU index; expected 'all', N, or indices like '0,1'")
        if not cuda:
            raise ArgumentError(f"{what}: there is no GPU here to pin workers to; gpus=N starts N workers on the "
                                f"CPU (Triton's interpreter)")
        if int(text) >= count:
            raise ArgumentError(f"{what}: GPU {text} is not visible here ({count} visible: 0..{count - 1})")
        out.append(text)
    return out


def mix_text(mix: ShapeMix) -> str:
    """The mix as `tilec tune --mix` reads it (every size of every shape; the weights as they are)."""
    return "|".join(";".join(f"{k}={v}" for k, v in sorted(sizes.items())) + f":{weight!r}" for sizes, weight in mix)


def run_workers(recipe: str, mix: ShapeMix, devs: list[str], trials: int, storage: str, study: str, *,
                jobs: int | None = None, timeout: float | None = None, log_dir: str | Path | None = None,
                env: dict | None = None) -> list[WorkerRun]:
    """Start one `tilec tune RECIPE --worker` process per device in `devs` on the shared study and wait for
    all of them; returns how each ended (a worker that fails does not stop the others). Each one's output
    goes to `<log_dir>/worker<k>.log`."""
    if storage.startswith("sqlite") and ":memory:" in storage:
        raise ArgumentError("several workers need a storage they can share: a SQLite file or a server URL, "
                            "not an in-memory database")
    log_dir = Path(log_dir) if log_dir is not None else Path(os.environ.get("TMPDIR", "/tmp")) / f"tilec-workers-{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for k, dev in enumerate(devs):
        cmd = [sys.executable, "-m", "tilec", "tune", str(recipe), "--mix", mix_text(mix), "--trials", str(trials),
               "--storage", storage, "--study", study, "--worker", "--no-progress"]
        if jobs is not None:
            cmd += ["--jobs", str(jobs)]
        if timeout is not None:
            cmd += ["--timeout", str(timeout)]
        e = dict(os.environ if env is None else env)
        if dev != "cpu":
            e["CUDA_VISIBLE_DEVICES"] = _physical(dev, e)
        log = log_dir / f"worker{k}.log"
        f = log.open("w")
        procs.append((dev, subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=e), log, f, time.monotonic()))
    runs = []
    for dev, p, log, f, t0 in procs:
        rc = p.wait()
        f.close()
        runs.append(WorkerRun(dev, rc, log, time.monotonic() - t0))
    return runs


def _physical(dev: str, env: dict) -> str:
    """Device index `dev` among the visible GPUs, as CUDA_VISIBLE_DEVICES names it (an index into the
    parent's own CUDA_VISIBLE_DEVICES list where that is set)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible:
        names = [v.strip() for v in visible.split(",") if v.strip()]
        if int(dev) < len(names):
            return names[int(dev)]
    return dev
