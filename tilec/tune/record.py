"""Recording the shapes a program really calls its kernels with (`tc.record`, issue 28). The calls reach a
recording through tilec/runtime/calls.py, the hooks in `Kernel`, `Tuned` and the ops of `as_op`.

    with tc.record() as rec:
        run_the_program()
    rec.mix(kernel)           # a ShapeMix weighted by the calls counted, for tc.tune
    rec.save("rec.json")      # tilec tune FILE --mix-from rec.json

While a recording is open, every call in the process (any thread) of a `Kernel`, a `Tuned` and a custom op made by `as_op` counts one
call of its sizes (the values of the schedule's size names, read from the inputs' shapes as a call reads
them). A call is counted once, by the outermost of them: an op's call under the op's name (`tilec::rms_norm`),
not again under the Tuned it runs, nor under the Tuned's kernel. A call that raises is not counted. Calls
traced by torch.compile (the op's fake) are not calls and are not counted; the compiled graph's real calls
are. A replay of `tc.graphed`'s graph counts the tilec calls its capture made (the capture, which runs no
kernel, counts none); other CUDA graphs' replays (torch.compile's "reduce-overhead", a hand-made
torch.cuda.CUDAGraph) launch no Python call and are not counted: record such a program before capturing it. With no recording open, the cost to a call is one test of an empty list.

Sizes of 0 are kept in the counts but left out of a mix (a ShapeMix holds sizes of at least 1, and such a call
does no work). A long tail of shapes (a decode position per step) is bucketed the way the tuner's bucket plan
groups shapes (`tilec.tune.plans._bucket`: each size that varies rounded up to a power of two), each bucket
stood for by its largest shape recorded, weighted by all of its calls.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from tilec.errors import ArgumentError
from tilec.runtime import calls as hooks

__all__ = ["Recording", "record", "load_recording"]

_LOCK = threading.Lock()
FORMAT = "tilec-recording"
VERSION = 1


class _Entry:
    """One recorded kernel or op: its name, what was called (None once loaded from a file) and its calls by
    sizes (a tuple of (name, value) pairs, names sorted)."""

    def __init__(self, name: str, target):
        self.name, self.target = name, target
        self.calls: Counter = Counter()


class Recording:
    """The calls a program made while the recording was open, per kernel and op, by shape: `tc.record()` makes
    one, `rec.mix(kernel)` turns a kernel's calls into the `ShapeMix` to tune for, `rec.save(path)` writes them
    as JSON (`tilec tune FILE --mix-from PATH`, `tc.load_recording(path)`). It prints as a table of its
    kernels, calls and shapes.

    `rec.names()` lists what was called (an op's qualified name, a kernel's or Tuned's output names joined by
    "_", with "#2" added where two share a name); `rec.calls(what)` gives a kernel's counts by shape key
    ("M=1,N=4096") and `rec.total(what)` their sum.
    """

    def __init__(self):
        self._entries: dict[str, _Entry] = {}
        self._by_target: dict[tuple[int, str], _Entry] = {}

    # -- counting (called by Kernel, Tuned and the ops of as_op) ---------------------------------------------
    def _count(self, target, name: str, sizes: dict[str, int]) -> None:
        with _LOCK:
            e = self._by_target.get((id(target), name))  # an op apart from the kernel it runs, called directly
            if e is None or e.target is not target:
                e = _Entry(_unique(name, self._entries), target)
                self._entries[e.name] = e
                self._by_target[id(target), name] = e
            e.calls[tuple(sorted(sizes.items()))] += 1

    # -- reading -----------------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """The kernels and ops called, in the order of their first call."""
        return list(self._entries)

    def _entry(self, what) -> _Entry:
        if isinstance(what, str):
            if what in self._entries:
                return self._entries[what]
            short = [e for n, e in self._entries.items() if n.split("::")[-1] == what]
            if len(short) == 1:
                return short[0]
        else:
            qualname = getattr(what, "_qualname", None)  # an op (torch.library.CustomOpDef): by its name
            if isinstance(qualname, str) and qualname in self._entries:
                return self._entries[qualname]
            mine = [e for e in self._entries.values() if e.target is what]
            direct = [e for e in mine if "::" not in e.name]  # called itself, not through an op made of it
            if len(mine) == 1 or len(direct) == 1:
                return (direct or mine)[0]
            if not mine:  # the Tuned that `what` is a kernel of
                mine = [e for e in self._entries.values() if _wraps(e.target, what)]
                if len(mine) == 1:
                    return mine[0]
            if mine:
                raise ArgumentError(f"record: {_describe(what)} was recorded under several names: "
                                    f"{', '.join(e.name for e in mine)}; name which one")
        raise ArgumentError(f"record: {_describe(what)} was not called while this recording was open; it recorded "
                            f"{', '.join(self._entries) or 'no call'}")

    def _counts(self, e: _Entry) -> Counter:
        with _LOCK:  # a copy: another thread may be counting into the open recording
            return Counter(e.calls)

    def calls(self, what) -> dict[str, int]:
        """The calls of a kernel, Tuned, op or name: shape key ("M=1,N=4096") -> count, most called first."""
        e = self._entry(what)
        return {",".join(f"{k}={v}" for k, v in shape): n for shape, n in self._counts(e).most_common()}

    def total(self, what) -> int:
        """How many calls of a kernel, Tuned, op or name were recorded."""
        return sum(self._counts(self._entry(what)).values())

    def mix(self, what, *, max_shapes: int = 16):
        """The `ShapeMix` of a kernel's calls, weighted by their counts: each shape recorded where there are at
        most `max_shapes` of them, else buckets (each varying size rounded up to a power of two, a bucket
        stood for by its largest shape recorded, weighted by its calls). Shapes with a size 0 are left out.

        Args:
            what: the Kernel, Tuned or op called, or its name in `names()`.
            max_shapes: the most shapes kept as they are (at least 1).

        Returns:
            A `tc.ShapeMix`.

        Raises:
            ArgumentError: `what` was not called while recording, every call had a size 0, or `max_shapes` is
                not a positive int.
        """
        from tilec.tune.mix import ShapeMix
        from tilec.tune.plans import _bucket
        if type(max_shapes) is not int or max_shapes < 1:
            raise ArgumentError(f"record.mix: max_shapes={max_shapes!r}; give a positive int")
        e = self._entry(what)
        calls = {shape: n for shape, n in self._counts(e).items() if all(v >= 1 for _, v in shape)}
        if not calls:
            raise ArgumentError(f"record.mix: every call of {e.name} had a size 0 ({self.calls(e.name)}); a "
                                f"mix holds sizes of at least 1")
        if len(calls) > max_shapes:
            dicts = [dict(s) for s in calls]
            varying = sorted({k for d in dicts for k in d if len({x[k] for x in dicts}) > 1})
            groups: dict[tuple, list] = {}
            for shape, n in calls.items():
                groups.setdefault(_bucket(dict(shape), varying), []).append((shape, n))
            calls = {max(members, key=lambda m: math.prod(v for _, v in m[0]))[0]: sum(n for _, n in members)
                     for members in groups.values()}
        return ShapeMix([(dict(s), n) for s, n in sorted(calls.items(), key=lambda x: -x[1])])

    # -- files -------------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        """The recording as JSON text: {"format", "version", "kernels": {name: [[sizes, count], ...]}}."""
        with _LOCK:
            entries = {n: Counter(e.calls) for n, e in self._entries.items()}
        return json.dumps({"format": FORMAT, "version": VERSION,
                           "kernels": {n: [[dict(s), c] for s, c in calls.most_common()]
                                       for n, calls in entries.items()}}, indent=1)

    def save(self, path: str | os.PathLike) -> str:
        """Write the recording as JSON to `path` (replacing it), for `tilec tune FILE --mix-from PATH` or
        `tc.load_recording`. Returns the path."""
        text = self.to_json()
        tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        return os.fspath(path)

    def __repr__(self) -> str:
        with _LOCK:
            rows = [f"  {n}: {sum(e.calls.values())} call(s), {len(e.calls)} shape(s)"
                    for n, e in self._entries.items()]
        return "<Recording\n" + "\n".join(rows) + ">" if rows else "<Recording: no call>"


def _unique(name: str, taken) -> str:
    if name not in taken:
        return name
    i = 2
    while f"{name}#{i}" in taken:
        i += 1
    return f"{name}#{i}"


def _wraps(target, what) -> bool:
    """Whether the recorded `target` (an op's Kernel or Tuned) is `what` or holds it (a Tuned's kernel)."""
    if target is None:
        return False
    if target is what:
        return True
    kernels = getattr(target, "kernels", None)
    return isinstance(kernels, dict) and any(k is what for k in kernels.values())


def _describe(what) -> str:
    return repr(what) if isinstance(what, str) else type(what).__name__ + " " + repr(what)[:80]


@contextmanager
def record() -> Iterator[Recording]:
    """Count the calls of tilec kernels, tuned plans and their custom ops by shape while the block runs.

    Returns:
        (as the `with` value) the `Recording`: `rec.mix(kernel)` is the ShapeMix of that kernel's calls,
        `rec.save(path)` writes them for `tilec tune FILE --mix-from PATH`.

    Example:
        >>> kernel = tc.build(s, [A, W, Y])
        >>> with tc.record() as rec:
        ...     for m in (40, 40, 40, 8):
        ...         _ = kernel(torch.randn(m, 24), torch.randn(24, 20))
        >>> rec.calls(kernel)
        {'K=24,M=40,N=20': 3, 'K=24,M=8,N=20': 1}
        >>> rec.mix(kernel)
        ShapeMix(K=24,M=40,N=20: 0.750, K=24,M=8,N=20: 0.250)
    """
    rec = Recording()
    hooks.open_sink(rec)
    try:
        yield rec
    finally:
        hooks.close_sink(rec)


def load_recording(path: str | os.PathLike) -> Recording:
    """A recording saved by `rec.save` (`Recording.to_json`'s form), read back and checked: the kernels'
    names, each shape's sizes (identifiers -> ints >= 0) and counts (ints >= 1).

    Args:
        path: the JSON file.

    Returns:
        The `Recording` (its kernels by name: `rec.mix("tilec::rms_norm")`).

    Raises:
        ArgumentError: the file cannot be read, is not JSON, or is not a recording (what is wrong is named).

    Example:
        >>> kernel = tc.build(s, [A, W, Y])
        >>> with tc.record() as rec:
        ...     _ = kernel(torch.randn(40, 24), torch.randn(24, 20))
        >>> import pathlib, tempfile
        >>> path = rec.save(pathlib.Path(tempfile.mkdtemp()) / "rec.json")
        >>> tc.load_recording(path).calls("Y")
        {'K=24,M=40,N=20': 1}
    """
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ArgumentError(f"load_recording: cannot read {os.fspath(path)!r}: {e.strerror or e}") from None
    except ValueError as e:
        raise ArgumentError(f"load_recording: {os.fspath(path)!r} is not JSON ({e})") from None
    where = f"load_recording({os.fspath(path)!r})"
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ArgumentError(f"{where}: not a tilec recording of version {VERSION} (expected an object with "
                            f"\"format\": \"{FORMAT}\" and \"version\": {VERSION}, as rec.save writes)")
    kernels = data.get("kernels")
    if not isinstance(kernels, dict):
        raise ArgumentError(f"{where}: \"kernels\" must be an object of name -> [[sizes, count], ...]")
    rec = Recording()
    for name, calls in kernels.items():
        if not isinstance(calls, list):
            raise ArgumentError(f"{where}: kernel {name!r}: expected a list of [sizes, count] pairs")
        e = _Entry(name, None)
        for item in calls:
            ok = (isinstance(item, list) and len(item) == 2 and isinstance(item[0], dict)
                  and type(item[1]) is int and item[1] >= 1
                  and all(isinstance(k, str) and k.isidentifier() and type(v) is int and v >= 0
                          for k, v in item[0].items()))
            if not ok:
                raise ArgumentError(f"{where}: kernel {name!r}: {str(item)[:120]} is not [sizes, count] (sizes an "
                                    f"object of size name -> int >= 0, count an int >= 1)")
            e.calls[tuple(sorted(item[0].items()))] += item[1]
        if len({tuple(k for k, _ in shape) for shape in e.calls}) > 1 or any(not shape for shape in e.calls):
            raise ArgumentError(f"{where}: kernel {name!r}: its calls must all give the same size names, at least "
                                f"one (a kernel's sizes); got {sorted({tuple(k for k, _ in s) for s in e.calls})}")
        rec._entries[name] = e
    return rec
