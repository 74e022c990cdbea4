"""What `tc.tune`'s progress bar says besides counts (issue 23, point 9): how long the configs still
wanted will take at the rate measured so far, and, in Triton's interpreter, that its times say nothing
about a GPU. The bar itself is `_Progress` in study.py; this module holds no state of tuning."""

from __future__ import annotations

import time
from collections.abc import Callable

INTERPRETER_NOTE = ("tilec: no CUDA device, so Triton's interpreter runs every candidate: its times only "
                    "exercise the search and say nothing about GPU speed")


def interpreter_note(target: str) -> str | None:
    """The line a tuning run prints once where kernels run in Triton's interpreter (`target`:
    triton_compat.target()); None on a GPU."""
    return INTERPRETER_NOTE if target == "interpreter" else None


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: `0.31 s`, `4.2 s`, `45 s`, `12 min`, `3.5 h`."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 99.5:
        return f"{seconds:.0f} s"
    if seconds < 99.5 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Estimate:
    """The time the rest of a tuning run will take at the rate of this run so far: the seconds since it
    started over the configs it has measured (workers in parallel make the rate faster, a slow compile
    slower; configs a resumed study measured before do not count). `clock` is for tests."""

    def __init__(self, total: int, done: int, clock: Callable[[], float] = time.monotonic):
        self.total, self.done, self.clock = total, done, clock
        self.start = clock()

    def text(self, measured: int) -> str:
        """`~12 min left at 45 s/config` once this run has measured a config and some are still wanted;
        "" before (no rate yet) and after (nothing left)."""
        new = measured - self.done
        left = self.total - measured
        if new <= 0 or left <= 0:
            return ""
        per_config = (self.clock() - self.start) / new
        return f"~{duration_text(per_config * left)} left at {duration_text(per_config)}/config"
