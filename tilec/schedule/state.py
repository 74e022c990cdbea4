"""A schedule's state as the fold of its trace: one function per primitive says what its step does.

A primitive (tilec/schedule/schedule.py) validates its arguments against the state so far, then records
one `Step` (tilec/schedule/trace.py: axes, stages, tensors and knobs by name; ints and strs). The state of
each stage (its leaves and split/fuse relations, its place, bindings, loop annotations, split-K, online
statistics, and whether any step decided its loops) and the schedule's knobs and cache stages are what
`APPLY` makes of the steps, in order, from each stage's `initial` state; no primitive sets them otherwise
(a detached stage's warps, tilec/schedule/defaults.py, and tests that place a stage by hand do). So:

- a primitive that its check refuses is dropped from the trace, and the state is folded again from the
  steps that remain (`Schedule._drop`);
- another trace's schedule of the same computation is a fold, with no primitive run again
  (`Schedule._refolded`: tilec.plan.check tries each place of a stage so, one placement step swapped);
- the fold is kept: a new step is applied to the state so far; only a dropped step folds again.

The axes a split or fuse makes and the stage a cache_read or cache_write makes are objects the user holds
(`io, ii = s[C].split(i, 64)`): `Made` keeps them by step (its primitive, results and resolved arguments),
so that folding the same steps again gives the same objects back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tilec.ir.expr import Const, IterVar, cdiv, mul
from tilec.ir.knob import Flag, Knob
from tilec.schedule.trace import AxisRef, KnobRef, StageRef, Step, TensorRef

GRID = ("program_id.0", "program_id.1", "program_id.2")


@dataclass(frozen=True)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | Knob


@dataclass(frozen=True)
class Fuse:
    """fused = outer * extent(inner) + inner. With `group` (made by `swizzle`), the fused axis runs the
    same (outer, inner) pairs in grouped order instead: `group` consecutive outer values per column of
    inner (Triton's GROUP_M order); the axis must then be bound to the grid, where order is free."""

    outer: IterVar
    inner: IterVar
    fused: IterVar
    group: int | Knob | None = None


# the primitives that decide a stage's loops: a stage none of them was applied to gets the default schedule
LOOPS = frozenset({"split", "reorder", "fuse", "swizzle", "compute_with", "split_k", "online", "bind", "pipeline",
                   "unroll", "persistent"})
PLACES = frozenset({"compute_at", "compute_root", "compute_inline"})  # the steps that set a stage's place


def initial(stage) -> None:
    """A stage's state before any step: its tensor's axes then reduce axes as leaves (a cache stage has
    none), computed at root, nothing bound or annotated."""
    axes = list(stage.tensor.axis) + list(stage.tensor.reduce_axis) if stage.kind == "compute" else []
    stage.leaves = list(axes)
    stage.relations = []  # Split and Fuse, in the order the steps made them
    stage.attach = None  # None: root; "inline"; or (stage, axis)
    stage.store = None  # store_at: (stage, axis) whose iteration keeps its values (sliding window), or None
    stage.binds = {}  # axis -> grid dimension (0, 1, 2)
    stage.pipelines = {}  # axis -> stages (int or Knob)
    stage.unrolled = set()
    stage.warps = None
    stage.tma = 0  # a cache_read's loads / cache_write's stores through tensor descriptors: 0, 1 or a Flag
    stage.persistent_axes = {}  # grid axis -> flatten (tl.range's): 0, 1 or a Flag
    stage.fused_with = None  # compute_with: (stage, its loop) this stage's loop joins
    stage.k_split = None  # split_k: (loop, parts, deterministic)
    stage.online_stats = ()  # online: the statistics this sum's loop carries
    stage.online_skip = True  # online(skip_masked=): loop only over tiles the max's where() admits
    stage.touched = False  # a step decided its loops (LOOPS): if not, lowering gives it the default
    stage.all_axes = {a.name: a for a in axes}  # every axis the stage has had, by name (names are unique in it)


def _switch(rest: tuple, default: int) -> int | Flag:
    """An on/off argument as a step records it after the others (tilec/schedule/schedule.py, `_off_or_flag`):
    absent for the default, True or False, or the flag."""
    if not rest:
        return default
    return rest[0] if isinstance(rest[0], Flag) else int(rest[0])


# -- one function per primitive: (owner, stage, step, *resolved args) -> the objects the step made ------

def _split(owner, st, step: Step, axis: IterVar, factor) -> tuple:
    def make():
        made = f"split({axis.name}, {factor})"
        inner = factor if isinstance(factor, Knob) else Const(factor, "int32")
        return (IterVar(step.results[0], cdiv(axis.extent, factor), axis.kind, f"outer of {made}"),
                IterVar(step.results[1], inner, axis.kind, f"inner of {made}"))
    outer, inner = owner._made_by(step, (axis, factor), make)
    pos = st.leaves.index(axis)
    st.leaves[pos:pos + 1] = [outer, inner]
    st.relations.append(Split(axis, outer, inner, factor))
    return outer, inner


def _reorder(owner, st, step: Step, *axes: IterVar) -> tuple:
    slots = sorted(st.leaves.index(a) for a in axes)
    for pos, a in zip(slots, axes):
        st.leaves[pos] = a
    return ()


def _fuse(owner, st, step: Step, outer: IterVar, inner: IterVar, group=None) -> tuple:
    def make():
        made = f"{step.primitive}({outer.name}, {inner.name}{'' if group is None else f', group={group}'})"
        return (IterVar(step.results[0], mul(outer.extent, inner.extent), outer.kind, made),)
    (fused,) = owner._made_by(step, (outer, inner, group), make)
    pos = st.leaves.index(outer)
    st.leaves[pos:pos + 2] = [fused]
    st.relations.append(Fuse(outer, inner, fused, group))
    return (fused,)


def _compute_at(owner, st, step: Step, target, axis: IterVar) -> tuple:
    st.attach = (target, axis)
    return ()


def _store_at(owner, st, step: Step, target, axis: IterVar) -> tuple:
    st.store = (target, axis)
    return ()


def _compute_with(owner, st, step: Step, target, axis: IterVar) -> tuple:
    st.fused_with = (target, axis)
    return ()


def _split_k(owner, st, step: Step, axis: IterVar, parts, *deterministic) -> tuple:
    st.k_split = (axis, parts, _switch(deterministic, 1))
    return ()


def _online(owner, st, step: Step, *args) -> tuple:
    n = len(args) - 1 if args and isinstance(args[-1], (bool, Knob)) else len(args)  # the statistics, then
    st.online_stats = args[:n]  # skip_masked where it is not True
    st.online_skip = _switch(args[n:], 1)
    return ()


def _place(where):
    def apply(owner, st, step: Step) -> tuple:
        st.attach = where
        return ()
    return apply


def _bind(owner, st, step: Step, axis: IterVar, thread: str) -> tuple:
    st.binds[axis] = GRID.index(thread)
    return ()


def _pipeline(owner, st, step: Step, axis: IterVar, stages) -> tuple:
    st.pipelines[axis] = stages
    return ()


def _num_warps(owner, st, step: Step, n) -> tuple:
    st.warps = n
    return ()


def _unroll(owner, st, step: Step, axis: IterVar) -> tuple:
    st.unrolled.add(axis)
    return ()


def _persistent(owner, st, step: Step, axis: IterVar, flatten) -> tuple:
    st.persistent_axes = {axis: _switch((flatten,), 0)}
    return ()


def _cache(owner, st, step: Step, tensor, scope: str, *rest) -> tuple:
    readers = tuple(rest[0]) if step.primitive == "cache_read" else ()
    tma = _switch(rest[1:] if step.primitive == "cache_read" else rest, 0)

    def make():
        from tilec.schedule.schedule import Stage  # schedule.py imports this module
        return (Stage(owner, tensor, step.primitive, name=step.results[0], scope=scope, readers=readers),)
    (cache,) = owner._made_by(step, (owner, tensor, readers), make)  # a stage is one schedule's: not shared
    initial(cache)
    cache.tma = tma
    owner.caches.append(cache)
    return (cache,)


APPLY: dict[str, Callable[..., tuple]] = {
    "split": _split, "reorder": _reorder, "fuse": _fuse, "swizzle": _fuse, "compute_at": _compute_at,
    "store_at": _store_at,
    "compute_with": _compute_with, "split_k": _split_k, "online": _online, "compute_inline": _place("inline"),
    "compute_root": _place(None), "bind": _bind, "pipeline": _pipeline, "num_warps": _num_warps, "unroll": _unroll,
    "persistent": _persistent, "cache_read": _cache, "cache_write": _cache,
}


# -- the fold ---------------------------------------------------------------------------------------

def knob_refs(args):
    """The KnobRefs among a step's arguments (a cache_read's readers are a tuple of StageRefs)."""
    for a in args:
        if isinstance(a, KnobRef):
            yield a


def _resolve(owner, a):
    if isinstance(a, AxisRef):
        return owner._stage_named(a.stage).all_axes[a.name]
    if isinstance(a, StageRef):
        return owner._stage_named(a.name)
    if isinstance(a, TensorRef):
        return owner.tensors[a.name]
    if isinstance(a, KnobRef):
        return owner._knob_pool[a]
    if isinstance(a, tuple):
        return tuple(_resolve(owner, x) for x in a)
    return a


def apply(owner, step: Step) -> tuple:
    """Apply `step` to the state of `owner` (a schedule, or a stage detached from its schedule's trace):
    the objects it made (new axes, a cache stage)."""
    st = None if step.stage is None else owner._stage_named(step.stage)
    made = APPLY[step.primitive](owner, st, step, *(_resolve(owner, a) for a in step.args))
    if st is not None:
        st.all_axes.update((a.name, a) for a in made)
        st.touched = st.touched or step.primitive in LOOPS
    return made


class Made:
    """The objects steps made, by step: its primitive, stage, results and arguments (axes, stages and knobs
    by identity), so that a fold of the same steps gives the same objects back."""

    def __init__(self, items=()):
        self.items: dict[tuple, tuple] = dict(items)

    def get(self, step: Step, args: tuple, make: Callable[[], tuple]) -> tuple:
        key = (step.primitive, step.stage, step.results, args)
        if key not in self.items:
            self.items[key] = make()
        return self.items[key]


class Alone:
    """The owner of a detached stage's steps (a default schedule, made by lowering: tilec/schedule/
    defaults.py): its steps are its own, not in the schedule's trace, and fold into its state alone."""

    def __init__(self, stage):
        self.stage, self._steps, self.made = stage, [], Made()
        self.tensors, self._knob_pool = stage.sched.tensors, stage.sched._knob_pool

    def _stage_named(self, name: str):
        return self.stage

    def _made_by(self, step: Step, args: tuple, make) -> tuple:
        return self.made.get(step, args, make)

    def _push(self, step: Step) -> tuple:
        self._steps.append(step)
        return apply(self, step)
