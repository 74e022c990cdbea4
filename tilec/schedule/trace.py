"""Schedules as replayable traces (TVM's trace, tinygrad's `Opt` list).

Every primitive applied to a schedule appends one frozen `Step` to `s.trace`. A step names what it
touches instead of holding it: axes as (stage name, axis name), stages, tensors and knobs by name (a knob
with its choices), ints and strs as they are. So a trace is plain data: hashable, comparable, and
independent of the schedule that made it.

- `step.text` is the line of the schedule's log for it (`"C: split(i, 64) -> io, ii"`); `s.log` and so
  `s.fingerprint()` (the key of kernel caches and tuning studies) are these lines.
- `str(s.trace)` is Python source that rebuilds the schedule as `s`, with `tc` (tilec) and `outputs` (the
  output tensor or the list of them) in scope.
- `replay(trace, outputs)` rebuilds it by calling the real primitives again, so each one is validated and
  checked as it was the first time; the result has the same fingerprint and lowers to the same source.
- A schedule's state is the fold of its trace (tilec/schedule/state.py, one function per primitive).
"""

from __future__ import annotations

import functools
import json
import keyword
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from tilec.errors import ArgumentError, TilecError
from tilec.ir.tensor import Tensor

if TYPE_CHECKING:
    from tilec.schedule.schedule import Schedule


class AxisRef(NamedTuple):
    """An axis of a stage, by name: `AxisRef("C", "io")` is `C.io`."""

    stage: str
    name: str


class StageRef(NamedTuple):
    """A stage (a compute stage or a cache stage), by name."""

    name: str


class TensorRef(NamedTuple):
    """A tensor of the schedule (an input or a computed tensor), by name."""

    name: str


class KnobRef(NamedTuple):
    """A knob, by name and choices: `tc.knob(name, choices)`; with `flag`, `tc.flag(name)`."""

    name: str
    choices: tuple[int, ...]
    flag: bool = False


# primitive -> (applied to a stage: True, or to the schedule: False; keyword names of positional arguments)
PRIMITIVES: dict[str, tuple[bool, dict[int, str]]] = {
    "split": (True, {}), "reorder": (True, {}), "fuse": (True, {}), "compute_at": (True, {}),
    "store_at": (True, {}),
    "compute_with": (True, {}), "split_k": (True, {1: "parts", 2: "deterministic"}), "online": (True, {}),
    "compute_inline": (True, {}), "compute_root": (True, {}), "bind": (True, {}),
    "pipeline": (True, {1: "stages"}), "num_warps": (True, {}), "unroll": (True, {}),
    "swizzle": (True, {2: "group"}), "persistent": (True, {1: "flatten"}),
    "cache_read": (False, {2: "readers", 3: "tma"}), "cache_write": (False, {2: "tma"}),
}
CACHES = ("cache_read", "cache_write")  # the primitives that create a stage (its name: the step's result)


def _arg_text(value) -> str:
    """An argument as the schedule's log writes it: names for axes, stages, tensors and knobs."""
    if isinstance(value, (AxisRef, StageRef, TensorRef, KnobRef)):
        return value.name
    if isinstance(value, tuple):
        return f"[{', '.join(_arg_text(v) for v in value)}]"
    return repr(value)


@dataclass(frozen=True)
class Step:
    """One primitive applied to a schedule, as plain, frozen data.

    - `primitive`: its name (`"split"`, `"compute_at"`, `"cache_read"`, ...);
    - `stage`: the name of the stage it was applied to (`s[C].split(...)`: `"C"`); None for the
      primitives of the schedule itself (`cache_read`, `cache_write`);
    - `args`: its arguments in the primitive's order: `AxisRef`, `StageRef`, `TensorRef`, `KnobRef`, ints
      and strs, a tuple of `StageRef` for `cache_read`'s readers;
    - `results`: the names of what it made: the new axes of `split`/`fuse`, the cache stage of
      `cache_read`/`cache_write`;
    - `within`: the primitive that made this step by calling others (`"tile"` for the two splits and the
      reorder that `tile` is), None for a call of the user's.
    """

    primitive: str
    stage: str | None
    args: tuple = ()
    results: tuple[str, ...] = ()
    within: str | None = field(default=None)

    def __post_init__(self):
        if self.primitive not in PRIMITIVES:
            raise ArgumentError(f"Step: unknown primitive {self.primitive!r} (the primitives: "
                                f"{', '.join(PRIMITIVES)})")
        on_stage = PRIMITIVES[self.primitive][0]
        if on_stage != isinstance(self.stage, str):
            raise ArgumentError(f"Step: {self.primitive} is applied to "
                                f"{'a stage: give its name' if on_stage else 'the schedule: stage must be None'}, "
                                f"got stage={self.stage!r}")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "results", tuple(self.results))
        if not all(isinstance(r, str) for r in self.results):
            raise ArgumentError(f"Step: results are names (strs), got {self.results!r}")

    @functools.cached_property
    def text(self) -> str:
        """The line of the schedule's log: `"C: split(i, 64) -> io, ii"`."""
        keywords = PRIMITIVES[self.primitive][1]
        args = ", ".join(f"{keywords[n]}={_arg_text(a)}" if n in keywords else _arg_text(a)
                         for n, a in enumerate(self.args))
        line = f"{self.primitive}({args})"
        if self.results:
            line += f" -> {', '.join(self.results)}"
        return line if self.stage is None else f"{self.stage}: {line}"

    @property
    def stages(self) -> frozenset[str]:
        """The names of the stages this step concerns: the stage it is applied to, and the cache stage it
        creates. A kernel's header lists the steps of its stages."""
        made = {self.results[0]} if self.primitive in CACHES and self.results else set()
        return frozenset(({self.stage} if self.stage is not None else set()) | made)

    def __str__(self) -> str:
        return self.text


class Trace(Sequence):
    """The steps of a schedule, in the order they were applied: an immutable sequence of `Step`s (len,
    iteration, indexing and slicing, ==, hashable). `str(trace)` is Python that rebuilds the schedule.

    `axes` maps each compute stage to the names of its axes and reduce axes (`{"C": (("i", "j"),
    ("k",))}`); the Python text uses it to unpack `C.tensor.axis`. It is not part of the value: two traces
    with the same steps are equal. Without it (a trace built by hand) an axis is looked up by name.
    """

    __slots__ = ("_steps", "_axes")

    def __init__(self, steps: Iterable[Step] = (), axes=None):
        steps = tuple(steps)
        for n, st in enumerate(steps):
            if not isinstance(st, Step):
                raise ArgumentError(f"Trace: item {n} is not a Step, got {type(st).__name__} {st!r}")
        items = dict(axes or {})
        axes = tuple((name, tuple(sp), tuple(red)) for name, (sp, red) in items.items())
        object.__setattr__(self, "_steps", steps)
        object.__setattr__(self, "_axes", axes)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Trace is immutable (cannot set {name!r}); a schedule appends to its own")

    def __reduce__(self):  # pickle and copy through __init__ (attributes cannot be set)
        return Trace, (self._steps, self.axes)

    def __len__(self) -> int:
        return len(self._steps)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Trace(self._steps[index], self.axes)
        return self._steps[index]

    def __iter__(self):
        return iter(self._steps)

    def __eq__(self, other):  # the steps alone, as a tuple's: `axes` only spells them in Python
        if not isinstance(other, Trace):
            return NotImplemented
        return self._steps == other._steps

    def __hash__(self):
        return hash(self._steps)

    def __repr__(self):
        return f"Trace({[st.text for st in self._steps]!r})"

    @property
    def steps(self) -> tuple[Step, ...]:
        return self._steps

    @property
    def axes(self) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        return {name: (sp, red) for name, sp, red in self._axes}

    @property
    def lines(self) -> list[str]:
        """The schedule's log: one line per step."""
        return [st.text for st in self._steps]

    def __str__(self) -> str:
        return _Writer(self).source()

    def to_json(self) -> str:
        """The trace as JSON text (plain data: names, ints, strs, bools), which `Trace.from_json` reads back:
        what a tuning study stores of the schedule it tuned (tilec/tune/study.py, `stored_plan`)."""
        steps = [{"primitive": st.primitive, "stage": st.stage, "args": [_to_data(a) for a in st.args],
                  "results": list(st.results), "within": st.within} for st in self._steps]
        return json.dumps({"steps": steps, "axes": {n: [list(sp), list(red)] for n, sp, red in self._axes}},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        """The trace of `to_json`'s text. Read back from storage it is data, checked before use: anything but
        what `to_json` writes raises `ArgumentError` (and `replay` validates each step against its outputs).

        Example:
            >>> from tilec.schedule import Trace
            >>> io, ii = s[C].split(i, tc.knob("BM", [64, 128]))
            >>> Trace.from_json(s.trace.to_json()) == s.trace
            True
        """
        try:
            data = _items(json.loads(text), dict)
            steps = []
            for d in _items(data["steps"], list):
                within = _items(d, dict)["within"]
                if within is not None and not isinstance(within, str):
                    raise TypeError(f"within is a primitive's name or null, got {within!r}")
                args = tuple(_from_data(a) for a in _items(d["args"], list))
                steps.append(Step(d["primitive"], d["stage"], args, _names(d["results"]), within))
            axes = {}
            for n, pair in _items(data["axes"], dict).items():
                if len(_items(pair, list)) != 2:
                    raise TypeError(f"the axes of {n} are [axis names, reduce axis names], got {pair!r}")
                axes[n] = (_names(pair[0]), _names(pair[1]))
        except (ArgumentError, TypeError, ValueError, KeyError) as e:
            why = f"no {e}" if isinstance(e, KeyError) else str(e)
            raise ArgumentError(f"Trace.from_json: not a trace's JSON text (Trace.to_json): {why}"[:500]) from None
        return cls(steps, axes)


# -- the JSON form of a trace ----------------------------------------------------------------------

def _to_data(a):
    if isinstance(a, AxisRef):
        return {"axis": [a.stage, a.name]}
    if isinstance(a, StageRef):
        return {"stage": a.name}
    if isinstance(a, TensorRef):
        return {"tensor": a.name}
    if isinstance(a, KnobRef):
        return {"knob": a.name, "choices": list(a.choices), "flag": a.flag}
    if isinstance(a, tuple):
        return [_to_data(x) for x in a]
    return a  # an int, a str or a bool


def _items(value, kind: type):
    if not isinstance(value, kind):
        raise TypeError(f"expected a {kind.__name__}, got {type(value).__name__}")
    return value


def _names(value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise TypeError(f"expected a list of names, got {value!r}")
    return tuple(value)


def _from_data(a):
    """One argument of a step from its JSON form: exactly what `_to_data` writes, else TypeError."""
    if isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, list):
        return tuple(_from_data(x) for x in a)
    if isinstance(a, dict) and set(a) == {"axis"} and len(_names(a["axis"])) == 2:
        return AxisRef(*a["axis"])
    if isinstance(a, dict) and set(a) in ({"stage"}, {"tensor"}) and isinstance(next(iter(a.values())), str):
        return StageRef(a["stage"]) if "stage" in a else TensorRef(a["tensor"])
    if isinstance(a, dict) and set(a) == {"knob", "choices", "flag"} and isinstance(a["knob"], str) \
            and isinstance(a["flag"], bool) and isinstance(a["choices"], list) \
            and all(type(c) is int for c in a["choices"]):
        return KnobRef(a["knob"], tuple(a["choices"]), a["flag"])
    raise TypeError(f"not an argument of a step: {a!r}"[:200])


# -- the Python text of a trace --------------------------------------------------------------------

def _tile_group(steps: Sequence[Step], n: int) -> bool:
    """Whether steps[n:n + 3] are the split, split and reorder that one call of `tile` made."""
    if n + 3 > len(steps) or any(st.within != "tile" for st in steps[n:n + 3]):
        return False
    a, b, r = steps[n:n + 3]
    return (a.primitive == b.primitive == "split" and r.primitive == "reorder" and a.stage == b.stage == r.stage
            and len(a.args) == len(b.args) == 2 and len(a.results) == len(b.results) == 2
            and tuple(x.name if isinstance(x, AxisRef) else None for x in r.args)
            == (a.results[0], b.results[0], a.results[1], b.results[1]))


def _groups(steps: Sequence[Step]):
    """(index, steps of one primitive call): a tile group is one call, every other step one."""
    n = 0
    while n < len(steps):
        size = 3 if _tile_group(steps, n) else 1
        yield n, steps[n:n + size]
        n += size


def _quote(text: str) -> str:
    return f'"{text}"' if text.isprintable() and '"' not in text and "\\" not in text else repr(text)


class _Writer:
    """Python source for a trace: one line per primitive call, with variables named after what they hold
    (`C` for s["C"], `C_io` for its axis io, `BM` for the knob BM)."""

    def __init__(self, trace: Trace):
        self.trace, self.axes = trace, trace.axes
        self.used = {"s", "tc", "outputs"} | set(keyword.kwlist)
        self.var: dict[tuple, str] = {}
        self.lines = ["s = tc.create_schedule(outputs)"]
        self.wanted: set[tuple[str, str]] = set()  # (stage, "axis" | "reduce_axis") some step names
        for st in trace:
            for ref in self._refs(st.args):
                if isinstance(ref, AxisRef):
                    group = self._group_of(ref)
                    if group:
                        self.wanted.add((ref.stage, group))

    @staticmethod
    def _refs(args):
        for a in args:
            yield from (a if isinstance(a, tuple) and not isinstance(a, (AxisRef, StageRef, TensorRef, KnobRef))
                        else (a,))

    def _group_of(self, ref: AxisRef) -> str | None:
        sp, red = self.axes.get(ref.stage, ((), ()))
        return "axis" if ref.name in sp else "reduce_axis" if ref.name in red else None

    def fresh(self, base: str) -> str:
        name = base
        while name in self.used:
            name += "_"
        self.used.add(name)
        return name

    def stage(self, name: str) -> str:
        key = ("stage", name)
        if key not in self.var:
            v = self.var[key] = self.fresh(name)
            self.lines.append(f"{v} = s[{_quote(name)}]")
            for group in ("axis", "reduce_axis"):
                if (name, group) in self.wanted:
                    self._unpack(name, group)
        return self.var[key]

    def _unpack(self, stage: str, group: str) -> None:
        names = self.axes[stage][0 if group == "axis" else 1]
        targets = [self.fresh(f"{self.var['stage', stage]}_{a}") for a in names]
        for a, v in zip(names, targets):
            self.var["axis", stage, a] = v
        lhs = f"({targets[0]},)" if len(targets) == 1 else ", ".join(targets)
        self.lines.append(f"{lhs} = {self.var['stage', stage]}.tensor.{group}")

    def axis(self, ref: AxisRef) -> str:
        key = ("axis", ref.stage, ref.name)
        if key not in self.var:
            st = self.stage(ref.stage)
            if key not in self.var:  # not an axis the trace's metadata knows: look it up by name
                self.var[key] = v = self.fresh(f"{st}_{ref.name}")
                self.lines.append(f"{v} = {{a.name: a for a in {st}.tensor.axis + {st}.tensor.reduce_axis}}"
                                  f"[{_quote(ref.name)}]")
        return self.var[key]

    def bind_results(self, stage: str | None, names) -> str:
        prefix = f"{self.var['stage', stage]}_" if stage is not None else ""
        out = []
        for a in names:
            v = self.var["axis", stage, a] = self.fresh(f"{prefix}{a}")
            out.append(v)
        return ", ".join(out)

    def value(self, a) -> str:
        if isinstance(a, AxisRef):
            return self.axis(a)
        if isinstance(a, StageRef):
            return self.stage(a.name)
        if isinstance(a, TensorRef):
            return f"s.tensors[{_quote(a.name)}]"
        if isinstance(a, KnobRef):
            key = ("knob", a.name, a.choices, a.flag)
            if key not in self.var:
                v = self.var[key] = self.fresh(a.name)
                if a.flag:
                    self.lines.append(f"{v} = tc.flag({_quote(a.name)})")
                else:
                    self.lines.append(f"{v} = tc.knob({_quote(a.name)}, {list(a.choices)!r})")
            return self.var[key]
        if isinstance(a, tuple):
            return f"[{', '.join(self.value(x) for x in a)}]"
        if isinstance(a, str):
            return _quote(a)
        return repr(a)

    def call(self, group: Sequence[Step]) -> None:
        st = group[0]
        if len(group) == 3:  # one call of tile: split(x, fx), split(y, fy), reorder(xo, yo, xi, yi)
            a, b, _ = group
            on = self.stage(st.stage)
            args = [self.value(a.args[0]), self.value(b.args[0]), self.value(a.args[1]), self.value(b.args[1])]
            lhs = self.bind_results(st.stage, [a.results[0], b.results[0], a.results[1], b.results[1]])
            self.lines.append(f"{lhs} = {on}.tile({', '.join(args)})")
            return
        keywords = PRIMITIVES[st.primitive][1]
        on = "s" if st.stage is None else self.stage(st.stage)
        args = ", ".join(f"{keywords[n]}={self.value(a)}" if n in keywords else self.value(a)
                         for n, a in enumerate(st.args))
        line = f"{on}.{st.primitive}({args})"
        if st.primitive in CACHES and st.results:
            v = self.var["stage", st.results[0]] = self.fresh(st.results[0])
            line = f"{v} = {line}"
        elif st.results:
            line = f"{self.bind_results(st.stage, st.results)} = {line}"
        self.lines.append(line)

    def source(self) -> str:
        for st in self.trace:  # the knobs first: the tuning space at a glance
            for ref in self._refs(st.args):
                if isinstance(ref, KnobRef):
                    self.value(ref)
        for _, group in _groups(self.trace.steps):
            self.call(group)
        return "\n".join(self.lines) + "\n"


# -- replay ----------------------------------------------------------------------------------------

def replay(trace: Iterable[Step], outputs: Tensor | Sequence[Tensor], *, check: bool = True) -> Schedule:
    """Rebuild a schedule of `outputs` (a tensor or a list) from `trace` (`s.trace`, or any sequence of
    `Step`s) by applying each step's primitive again: the result has the same fingerprint and lowers to
    the same source as the schedule the trace was taken from.

    Each primitive validates its arguments as it did the first time, and with `check=True` (the
    default) isl checks the schedule after each one; `check=False` skips that check (`tc.lower` and
    `tc.build` check the whole schedule anyway). A step that names a stage, axis or tensor the new
    schedule does not have, or whose primitive makes something else than the trace says, raises
    `ArgumentError` naming the step.

    Args:
        trace: a `Trace` (`s.trace`, `tc.default_trace(s[C])`) or a sequence of `Step`s.
        outputs: the computed tensor (or list of them) of the new schedule: the same computation, or one
            with the same names.
        check: run the isl check after each step (True), or leave it to `tc.lower` / `tc.build`.

    Returns:
        The new `Schedule`.

    Raises:
        ArgumentError: the trace is not a sequence of steps, or a step does not fit `outputs`.
        IllegalScheduleError: (with `check=True`) a step makes the schedule illegal for `outputs`.

    Example:
        >>> io, ii = s[C].split(i, 64)
        >>> r = tc.replay(s.trace, [Y])
        >>> r.fingerprint() == s.fingerprint()
        True
    """
    from tilec.schedule.schedule import create_schedule  # schedule.py imports this module

    if isinstance(trace, (str, bytes)) or not isinstance(trace, Iterable):
        raise ArgumentError(f"argument 1, 'trace' to replay: expected a Trace (s.trace) or a list of Steps, got "
                            f"{type(trace).__name__}")
    steps = tuple(trace)
    for n, st in enumerate(steps):
        if not isinstance(st, Step):
            raise ArgumentError(f"argument 1, 'trace' to replay: item {n} is not a Step, got "
                                f"{type(st).__name__} {st!r}")
    sched = create_schedule(outputs)
    knobs: dict = {}
    for n, group in _groups(steps):
        _apply(sched, n, group, check, knobs)
    return sched


def _where(n: int, group: Sequence[Step]) -> str:
    if len(group) == 1:
        return f"replay: trace[{n}] ({group[0].text})"
    return f"replay: trace[{n}:{n + len(group)}] (tile: {'; '.join(st.text for st in group)})"


def _find_stage(sched, name: str, where: str):
    if name in sched.stages:
        return sched.stages[name]
    for c in sched.caches:
        if c.name == name:
            return c
    have = ", ".join([*sched.stages, *(c.name for c in sched.caches)])
    raise ArgumentError(f"{where}: the schedule has no stage {name} (its stages: {have})")


def _find_axis(sched, ref: AxisRef, where: str):
    st = _find_stage(sched, ref.stage, where)
    if ref.name not in st.all_axes:  # consumed axes too: the primitive itself says what replaced them
        have = ", ".join(a.name for a in st.leaves) or "none"
        raise ArgumentError(f"{where}: {ref.stage} has no axis {ref.name} (its axes: {have})")
    return st.all_axes[ref.name]


def _resolve(sched, a, where: str, knobs: dict):
    from tilec.ir.knob import Flag, Knob
    if isinstance(a, AxisRef):
        return _find_axis(sched, a, where)
    if isinstance(a, StageRef):
        return _find_stage(sched, a.name, where)
    if isinstance(a, TensorRef):
        if a.name not in sched.tensors:
            raise ArgumentError(f"{where}: the schedule has no tensor {a.name} (its tensors: "
                                f"{', '.join(sched.tensors)})")
        return sched.tensors[a.name]
    if isinstance(a, KnobRef):
        key = (a.name, tuple(a.choices), a.flag)
        if key not in knobs:
            knobs[key] = Flag(a.name) if a.flag else Knob(a.name, a.choices)
        return knobs[key]
    if isinstance(a, tuple):
        return [_resolve(sched, x, where, knobs) for x in a]
    return a


def _apply(sched, n: int, group: Sequence[Step], check: bool, knobs: dict) -> None:
    where = _where(n, group)
    first = group[0]
    args = [_resolve(sched, a, where, knobs) for a in first.args]
    target = sched if first.stage is None else _find_stage(sched, first.stage, where)
    if len(group) == 3:  # tile(x, y, fx, fy), as the user called it
        y, fy = (_resolve(sched, a, where, knobs) for a in group[1].args)
        name, args = "tile", [args[0], y, args[1], fy]
    else:
        name = first.primitive
    before = len(sched._steps)
    outer = sched._in_primitive
    if not check:
        sched._in_primitive = True  # what `checked` does for a primitive called by another: no isl check
    try:
        getattr(target, name)(*args)
    except ArgumentError as e:
        raise ArgumentError(f"{where}: {e}") from e
    except TilecError as e:
        e.add_note(f"raised by {where}")
        raise
    finally:
        sched._in_primitive = outer
    made = sched._steps[before:]

    def key(st: Step):
        return st.primitive, st.stage, st.args, st.results

    if [key(st) for st in made] != [key(st) for st in group]:
        got = "; ".join(st.text for st in made) or "nothing"
        raise ArgumentError(f"{where}: on these outputs the primitive made {got}; the trace was taken from "
                            f"another computation")
