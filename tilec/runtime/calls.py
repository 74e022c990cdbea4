"""The hooks by which a call of a `Kernel`, a `Tuned` or an op of `as_op` reaches the open recordings
(`tc.record`, tilec/tune/record.py): what the runtime layer knows of recording, no more.

`SINKS` is the list of open recordings (each has `_count(target, name, sizes)`); a caller tests it first, so a
call costs one test of an empty list when nothing records. A call is counted once, by the outermost of the
callers: a Tuned or an op runs its parts inside `counted_call()`, and `inside()` tells the parts not to count.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SINKS: list = []  # the recordings open, innermost last (each counts every call)
_INSIDE = contextvars.ContextVar("tilec_record_inside", default=False)  # a counted call is running its parts
_CAPTURE = contextvars.ContextVar("tilec_record_capture", default=None)  # a CallLog capturing: counts go there only
_LOCK = threading.Lock()


def open_sink(sink) -> None:
    with _LOCK:
        SINKS.append(sink)


def close_sink(sink) -> None:
    with _LOCK:
        SINKS.remove(sink)


def count(target, name: str, sizes: dict[str, int]) -> None:
    """One call of `target` (named `name`) with `sizes`, in every open recording (callers test `SINKS`
    first), unless it runs inside a call already counted."""
    if _INSIDE.get():
        return
    log = _CAPTURE.get()
    if log is not None:  # a graph being captured: nothing runs now; its replays count (CallLog)
        log._count(target, name, sizes)
        return
    for rec in list(SINKS):
        if not isinstance(rec, CallLog):  # another thread's capture: its log takes only its own calls
            rec._count(target, name, sizes)


@contextmanager
def counted_call() -> Iterator[None]:
    """Run a call's parts uncounted (a Tuned's kernel, an op's Tuned): the caller counts the call itself."""
    token = _INSIDE.set(True)
    try:
        yield
    finally:
        _INSIDE.reset(token)


def inside() -> bool:
    """Whether a counted call is running its parts (so this one is not to be counted)."""
    return _INSIDE.get()


class CallLog:
    """The calls made while capturing (a CUDA graph's capture: its Python runs once, no kernel runs), counted
    again into the recordings open at each replay: a graph's replays are calls like any other.

        log = CallLog()
        with log.capturing():   # logged here, counted in no recording
            ...
        log.replay()            # each call logged, counted once in every recording open now
    """

    def __init__(self):
        self.calls: list[tuple[object, str, dict[str, int]]] = []

    def _count(self, target, name: str, sizes: dict[str, int]) -> None:
        self.calls.append((target, name, dict(sizes)))

    @contextmanager
    def capturing(self) -> Iterator[CallLog]:
        open_sink(self)  # so that callers, which test SINKS first, report their calls
        token = _CAPTURE.set(self)
        try:
            yield self
        finally:
            _CAPTURE.reset(token)
            close_sink(self)

    def replay(self) -> None:
        if SINKS and not _INSIDE.get():
            for target, name, sizes in self.calls:
                count(target, name, sizes)
