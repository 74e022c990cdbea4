"""`Schedule` and `Stage`: the record of how each stage runs. Primitives validate their arguments and
record their decision (a split/fuse relation, an order, a place, a binding) as one `Step` in the
schedule's trace (`s.trace`, tilec/schedule/trace.py); they never generate code. The trace is the
schedule: each stage's state is the fold of its steps (tilec/schedule/state.py, one function per
primitive), `s.log` and `s.fingerprint()` are its text, and `tc.replay` rebuilds the schedule from it.

Each stage's loops are derived from its original axes by its relations (split: i -> io*f + ii;
fuse: (a, b) -> a*ext(b) + b) and its leaf order, which is what `tilec.poly` turns into isl maps.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
from collections.abc import Sequence

import networkx as nx

from tilec.errors import ArgumentError, IllegalScheduleError, LoweringError
from tilec.ir.expr import Const, IterVar, show
from tilec.ir.knob import Flag, Knob
from tilec.ir.tensor import Tensor, stage_graph
from tilec.schedule import state
from tilec.schedule.state import GRID, Fuse, Made, Split
from tilec.schedule.trace import AxisRef, KnobRef, StageRef, Step, TensorRef, Trace

SCOPES = ("shared", "local")


def subtile_problem(f: int, *, spatial: bool, root: bool) -> str | None:
    """Why a tile (a `tl.arange` dimension) of extent `f` on an axis that is `spatial` (else a reduce axis) of
    a stage that is the `root` of its kernel (else computed inside another stage's kernel) is not lowered as
    power-of-two sub-tiles (tilec/lower/subtiles.py), or None where it is: a multiple of 16 on a spatial axis
    of a kernel's root stage. A power of two needs neither; any other extent is padded to the next power
    of two, its lanes past `f` masked (tilec.plan.placement.Layout.padded)."""
    if f % 16:
        return f"{f} is not a multiple of 16"
    if not root or not spatial:
        return f"{f}, a multiple of 16, is lowered as power-of-two sub-tiles only on a spatial axis of a kernel's root stage"
    return None


# The legality check each primitive runs lives above this package, in tilec.plan (an analysis of the
# schedule, checked by isl); it hands itself here when tilec.plan.check is imported, which `import
# tilec` (run before any tilec submodule) always does. Schedules record decisions; they do not import the analysis.
_primitive_check = None
_legal_places = None  # the places of a misplaced stage that would be accepted, for an error message


def set_primitive_check(check, *, places=None) -> None:
    """Install `check(sched, primitive=..., stage=...)`, run after every primitive (tilec.plan.check
    does; it returns the analysis it checked); `places(stage, target)` lists the places in `target`'s loops
    where `stage` would be accepted."""
    global _primitive_check, _legal_places
    _primitive_check, _legal_places = check, places


def checked(fn):
    """Make a primitive atomic and checked: after it runs, isl checks the whole schedule (knobs at
    their defaults); if the schedule became illegal the steps it recorded are dropped (the state folded
    again without them) and the error raised.
    A schedule that cannot be lowered yet (e.g. a spatial loop inside a reduction loop, awaiting its
    reorder) is checked at build, but a place no later primitive makes lowerable is refused here
    (`compute_at`)."""
    @functools.wraps(fn)
    def run(self, *args, **kwargs):
        sched = self.sched
        if sched._in_primitive or self.detached:
            return fn(self, *args, **kwargs)
        mark = len(sched._steps)
        sched._in_primitive = True
        try:
            result = fn(self, *args, **kwargs)
            if _primitive_check is None:  # the plan layer installs it when imported (the first tc.NAME does that);
                importlib.import_module("tilec.plan.check")  # a program that came in through this module loads it
            call = _call_text(fn.__name__, self, args)
            try:
                _primitive_check(sched, primitive=call, stage=self if self.kind == "compute" else None)
            except LoweringError:  # not lowerable yet: tc.build checks it again with the real config
                pass
        except BaseException:
            sched._drop(mark)
            raise
        finally:
            sched._in_primitive = False
        return result
    return run


def _call_text(name: str, stage, args) -> str:
    parts = []
    for a in args:
        if isinstance(a, Stage):
            parts.append(a.name)
        elif isinstance(a, IterVar):
            owner = stage.attach[0].name if name == "compute_at" and isinstance(stage.attach, tuple) else stage.name
            if name == "compute_with" and isinstance(stage.fused_with, tuple):
                owner = stage.fused_with[0].name
            if name == "store_at" and isinstance(stage.store, tuple):
                owner = stage.store[0].name
            parts.append(f"{owner}.{a.name}")
        else:
            parts.append(show(a))  # a knob by name: this is the schedule's log (fingerprint)
    if name in ("compute_at", "compute_with", "store_at"):
        parts = [f"{stage.name}"] + parts[1:]
        return f"{name}({', '.join(parts)})"
    return f"{stage.name}.{name}({', '.join(parts)})"


def _arg(n: int, name: str, prim: str, expected: str, got) -> ArgumentError:
    return ArgumentError(f"argument {n}, '{name}' to {prim}: expected {expected}, got {show(got)}")


def _factor(value, n: int, name: str, prim: str, knobs: dict) -> int | Knob:
    """A primitive's factor or count: a positive int, or a tc.knob: the one of that name in `knobs` (the
    schedule's so far, with those of the primitive's earlier arguments, `Schedule._knobs_so_far`), else it."""
    if isinstance(value, Flag):
        raise _arg(n, name, prim, f"a positive int or a tc.knob (tc.flag({value.knob_name!r}) is an on/off "
                   f"switch, for a primitive's bool)", value)
    if isinstance(value, Knob):
        old = knobs.setdefault(value.knob_name, value)
        if old is not value and old.choices != value.choices:
            raise ArgumentError(f"knob {value.knob_name!r} is declared twice with different choices: "
                                f"{list(old.choices)} and {list(value.choices)}")
        return old
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _arg(n, name, prim, "a positive int or a tc.knob", value)
    return int(value)  # a plain int: an IntEnum member's repr is not a number (the log, str(s.trace))


def _flag(value, n: int, name: str, prim: str, knobs: dict) -> int | Flag:
    """A primitive's on/off argument: True or False (as 1 or 0), or a tc.flag: the one of that name in `knobs`
    (as `_factor`), else it."""
    if isinstance(value, Flag):
        old = knobs.setdefault(value.knob_name, value)
        if not isinstance(old, Flag):
            raise ArgumentError(f"{prim}: {value.knob_name!r} is already a knob with choices "
                                f"{list(old.choices)}; name the flag otherwise")
        return old
    if not isinstance(value, bool):
        raise _arg(n, name, prim, "True, False or a tc.flag", value)
    return int(value)


def _off_or_flag(v: int | Flag) -> tuple:
    """The trailing argument a trace records for an on/off argument whose default is on: none for True (1,
    as `_flag` keeps it), False for 0, or the flag."""
    return (v,) if isinstance(v, Flag) else () if v else (False,)


class Stage:
    """The schedule of one tensor: `s[C]`. Its primitives follow TVM's names and meaning.

    `.leaves` are its loops in order (they start as the tensor's axes, then its reduce axes; `split` and
    `fuse` replace them, `reorder` orders them); `.attach` is where it is computed (None: a kernel of its
    own). Each primitive validates its arguments and appends its step to the schedule's trace, of which
    the stage's state is the fold (tilec/schedule/state.py), and is checked with isl (the whole schedule,
    knobs at their first choice): a primitive that makes the schedule illegal is dropped and raises. The
    examples of the primitives start from the computation of `tc.Schedule`'s example (`s`, `A`, `W`, `C`,
    `Y`, `i, j = C.axis`, `k`).

    Example:
        >>> s[C], s[C].leaves
        (Stage(C), [<axis i: spatial, extent M>, <axis j: spatial, extent N>, <axis k: reduce, extent K>])
        >>> print(*s[C].leaves)  # str(): the names
        i j k
    """

    def __init__(self, sched: Schedule, tensor: Tensor, kind: str = "compute", *, name=None,
                 scope=None, readers=(), detached=False):
        self.sched, self.tensor, self.kind = sched, tensor, kind
        self.name = name or tensor.name
        self.scope, self.readers = scope, tuple(readers)
        # a stage made by lowering (a default schedule) is detached: its steps are its own, not the trace's
        self.detached = detached
        self._owner = state.Alone(self) if detached else sched
        state.initial(self)  # its state (leaves, relations, attach, binds, ...): the fold of its steps from here

    def __repr__(self):
        return f"Stage({self.name})"

    @property
    def steps(self) -> list[Step]:
        """The steps applied to this stage, in order (a detached stage's own; those of the schedule's trace
        that name it otherwise): its state is their fold."""
        return [st for st in self._owner._steps if self.name in st.stages]

    # -- helpers ------------------------------------------------------------------------------
    def _record(self, primitive: str, *args, results=()) -> tuple:
        """Append the step of a primitive applied to this stage (`results`: the names of the axes it makes)
        and apply it; what it made. Axes in `args` are this stage's unless given as an AxisRef."""
        args = tuple(AxisRef(self.name, a.name) if isinstance(a, IterVar) else self.sched._ref(a) for a in args)
        return self._owner._push(Step(primitive, self.name, args, tuple(results)))

    def _not_a_scatter(self, prim: str) -> None:
        """A scatter (tc.scatter) runs at the root of a kernel of its own: its points may write any element of
        its output, so no other stage's loops can hold it (tilec/ir/scatter.py)."""
        if self.tensor is not None and self.tensor.scatter is not None and self.kind == "compute":
            raise LoweringError(f"{prim}({self.name}...): {self.name} is a scatter, whose points may write any of its "
                                f"elements; it runs in a kernel of its own (compute_root), after the stages it reads "
                                f"and before its readers")

    def _require_compute(self, prim: str) -> None:
        if self.kind != "compute":
            raise ArgumentError(f"{prim}: {self.name} is a cache stage; cache stages are only placed, with "
                                f"compute_at(stage, axis)")

    def _axis(self, axis, n: int, name: str, prim: str) -> IterVar:
        if not isinstance(axis, IterVar):
            raise _arg(n, name, prim, f"an axis of {self.name}", axis)
        if axis in self.leaves:
            return axis
        for rel in self.relations:
            if isinstance(rel, Split) and rel.parent is axis:
                raise ArgumentError(f"argument {n}, '{name}' to {prim}: axis {axis.name} of {self.name} was "
                                    f"split into {rel.outer.name}, {rel.inner.name}; use those")
            if isinstance(rel, Fuse) and axis in (rel.outer, rel.inner):
                raise ArgumentError(f"argument {n}, '{name}' to {prim}: axis {axis.name} of {self.name} was "
                                    f"fused into {rel.fused.name}; use that")
        have = ", ".join(a.name for a in self.leaves)
        owner = next((s.name for s in self.sched.stages.values() if s is not self and axis in s.leaves), None)
        whose = f"{owner}.{axis.name}" if owner else axis.name
        raise ArgumentError(f"argument {n}, '{name}' to {prim}: {whose} is not an axis of {self.name} "
                            f"(its axes are: {have})")

    def _place(self, stage, axis, prim: str, example: str, own: str) -> IterVar:
        """The arguments of a primitive that puts this stage in another compute stage's loop (compute_at,
        compute_with): `axis`, checked to be one of `stage`'s leaves."""
        if not isinstance(stage, Stage):
            raise _arg(1, "stage", prim, f"a stage, e.g. {example}", stage)
        if stage is self:
            raise ArgumentError(f"{prim}: {self.name} {own}")
        if stage.kind != "compute":
            raise _arg(1, "stage", prim, "a compute stage (not a cache stage)", stage.name)
        return stage._axis(axis, 2, "axis", prim)

    def _not_bound(self, axis: IterVar, prim: str) -> None:
        if axis in self.binds:
            raise ArgumentError(f"{prim}: {self.name}.{axis.name} is bound to program_id.{self.binds[axis]}; "
                                f"{prim} it first, then bind the result")

    def _not_a_scheduled_loop(self, axis: IterVar, prim: str) -> None:
        """A pipelined or unrolled loop split or fused would lose that silently (its leaf is gone)."""
        if axis in self.pipelines:
            raise ArgumentError(f"{prim}: {self.name}.{axis.name} is pipelined (pipeline({axis.name}, stages="
                                f"{self.pipelines[axis]})), and {prim} would replace the loop; {prim} it first, then "
                                f"pipeline the loop you want")
        if axis in self.unrolled:
            raise ArgumentError(f"{prim}: {self.name}.{axis.name} is unrolled, and {prim} would replace the loop; "
                                f"{prim} it first, then unroll the loop you want")
        if axis in self.persistent_axes:
            raise ArgumentError(f"{prim}: {self.name}.{axis.name} is persistent, and {prim} would replace the loop; "
                                f"{prim} it first, then make the grid axis you want persistent")
        if any(isinstance(r, Fuse) and r.group is not None and r.fused is axis for r in self.relations):
            raise ArgumentError(f"{prim}: {self.name}.{axis.name} is swizzled (a grouped order of programs); "
                                f"{prim} its axes before swizzle, not after")

    def _fresh(self, base: str) -> str:
        """A name for a new axis: `base`, or `base1`, `base2`, ... where the stage has had an axis so named."""
        name, n = base, 1
        while name in self.all_axes:
            name, n = f"{base}{n}", n + 1
        return name

    # -- loop structure -----------------------------------------------------------------------
    @checked
    def split(self, axis: IterVar, factor: int | Knob) -> tuple[IterVar, IterVar]:
        """Split `axis` into (outer, inner) with inner extent `factor`: i -> (i // f, i % f).

        Example: for i in range(M)  --split(i, 64)-->  for io in range(cdiv(M, 64)): for ii in range(64).
        The inner axis of a split becomes a tile (a `tl.arange` vector) unless it is unrolled. A factor that
        does not divide the extent gets masks. Triton's tiles are powers of two (a multiple of 16 on a spatial
        axis of a kernel's root stage lowers as power-of-two sub-tiles): a knob that offers a choice that can
        never be this tile while another choice can is refused here; an int factor is judged at build (the inner
        axis may still be split again or unrolled).
        Before and after, as loop nest and Triton: tests/golden/primitives/split.txt.

        Args:
            axis: a current leaf of this stage (not bound, pipelined, unrolled, persistent or swizzled).
            factor: the inner extent: a positive int or a `tc.knob`.

        Returns:
            (outer, inner): the new axes, named `<axis>o` and `<axis>i`, in the leaves in place of `axis`.

        Raises:
            ArgumentError: `axis` is not a leaf of this stage (one consumed by a split or fuse names its
                replacements), is bound or scheduled, or `factor` is not a positive int or a knob.
            LoweringError: a knob choice can never be the tile this split makes while another can.

        Example:
            >>> io, ii = s[C].split(i, 64)
            >>> print(*s[C].leaves)
            io ii j k
            >>> io, ii
            (<axis io: spatial, extent cdiv(M, 64), outer of split(i, 64)>, <axis ii: spatial, extent 64, inner of split(i, 64)>)
            >>> s[C].split(i, 32)
            Traceback (most recent call last):
            ...
            tilec.errors.ArgumentError: argument 1, 'axis' to split: axis i of C was split into io, ii; use those
        """
        self._require_compute("split")
        axis = self._axis(axis, 1, "axis", "split")
        self._not_bound(axis, "split")
        self._not_a_scheduled_loop(axis, "split")
        factor = _factor(factor, 2, "factor", "split", self.sched._knobs_so_far())
        return self._record("split", axis, factor, results=(self._fresh(f"{axis.name}o"), self._fresh(f"{axis.name}i")))

    @checked
    def tile(self, x: IterVar, y: IterVar, fx: int | Knob, fy: int | Knob) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split x and y and order the result (xo, yo, xi, yi), as TVM's tile.

        Before and after, as loop nest and Triton: tests/golden/primitives/tile.txt.

        Args:
            x: a leaf of this stage, split by `fx`.
            y: another leaf, split by `fy`.
            fx: a positive int or a `tc.knob`.
            fy: a positive int or a `tc.knob`.

        Returns:
            (xo, yo, xi, yi).

        Raises:
            ArgumentError: what `split` and `reorder` refuse, or `x` is `y`.
            LoweringError: a knob choice that can never be its tile (see `split`).

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> print(*s[C].leaves)
            io jo ii ji k
        """
        self._require_compute("tile")
        x = self._axis(x, 1, "x", "tile")
        y = self._axis(y, 2, "y", "tile")
        if x is y:
            raise _arg(2, "y", "tile", "an axis other than x", y.name)
        steps = self._owner._steps
        first = len(steps)
        xo, xi = self.split(x, fx)
        yo, yi = self.split(y, fy)
        self.reorder(xo, yo, xi, yi)
        # the trace (and log) has the two splits and the reorder, marked as tile's
        steps[first:] = [dataclasses.replace(st, within="tile") for st in steps[first:]]
        return xo, yo, xi, yi

    @checked
    def reorder(self, *axes: IterVar) -> None:
        """Put the given axes in this order, in the positions they occupy now (TVM semantics).

        Leaves not named keep their places. Tile axes (inner axes of splits) are no loops, so their place
        matters only among themselves (the layout of the register tiles); within one stage, a serial spatial
        loop may not run inside a serial reduction loop (refused at build: a later reorder may fix it).
        Before and after, as loop nest and Triton: tests/golden/primitives/reorder.txt.

        Args:
            *axes: current leaves of this stage, each named once (or one list of them).

        Raises:
            ArgumentError: an axis is not a leaf of this stage, or is named twice.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> ko, ki = s[C].split(k, 32)
            >>> s[C].reorder(io, jo, ko, ii, ji, ki)
            >>> print(*s[C].leaves)
            io jo ko ii ji ki
        """
        self._require_compute("reorder")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        checked = [self._axis(a, n + 1, f"axis{n + 1}", "reorder") for n, a in enumerate(axes)]
        if len(set(checked)) != len(checked):
            raise ArgumentError(f"reorder: an axis is named twice in ({', '.join(a.name for a in checked)})")
        self._record("reorder", *checked)

    @checked
    def fuse(self, outer: IterVar, inner: IterVar, *more: IterVar) -> IterVar:
        """Fuse two adjacent axes into one: (a, b) -> a * extent(b) + b. Used for a 1-D grid. With more
        axes, `fuse(a, b, c)` is `fuse(fuse(a, b), c)` (as TVM's): consecutive leaves, outermost first.

        Before and after, as loop nest and Triton: tests/golden/primitives/fuse.txt.

        Args:
            outer: a leaf of this stage.
            inner: the leaf right after `outer`, of the same kind (spatial or reduce).
            *more: further leaves, each right after the one before it, of the same kind.

        Returns:
            The fused axis, named `<outer>_<inner>` (`<outer>_<inner>_<more>...` for more).

        Raises:
            ArgumentError: an axis is not a leaf, is bound or scheduled, the axes are not adjacent (outer first)
                or not of one kind.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> tiles = s[C].fuse(io, jo)
            >>> s[C].bind(tiles, "program_id.0")
            >>> print(*s[C].leaves)
            io_jo ii ji k
            >>> tiles
            <axis io_jo: spatial, extent cdiv(M, 64) * cdiv(N, 64), fuse(io, jo)>
        """
        fused = self._fuse("fuse", outer, inner)
        for axis in more:
            fused = self._fuse("fuse", fused, axis)
        return fused

    @checked
    def swizzle(self, outer: IterVar, inner: IterVar, group: int | Knob) -> IterVar:
        """Fuse two adjacent spatial axes into one grid axis whose programs run in grouped order: `group`
        consecutive `outer` tiles for each `inner` tile, then the next group (Triton's GROUP_M order, for
        L2 reuse: the programs running at once share rows of A and columns of W). Returns the fused axis;
        bind it to the grid (`bind(f, "program_id.0")`), where the order of programs is free, so legality
        is that of the plain fuse. `group` is a positive int or a knob (1 is the plain row-major order).

        Before and after, as loop nest and Triton: tests/golden/primitives/swizzle.txt.

        Args:
            outer: a spatial leaf of this stage.
            inner: the spatial leaf right after it.
            group: how many `outer` tiles go down the `inner` tiles together: a positive int or a `tc.knob`.

        Returns:
            The fused axis; bind it to the grid (at build, a swizzled axis that is a loop is refused).

        Raises:
            ArgumentError: what `fuse` refuses, reduce axes, or a bad `group`.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> tiles = s[C].swizzle(io, jo, group=tc.knob("GROUP_M", [8, 4]))
            >>> s[C].bind(tiles, "program_id.0")
        """
        group = _factor(group, 3, "group", "swizzle", self.sched._knobs_so_far())
        return self._fuse("swizzle", outer, inner, group)

    def _fuse(self, prim: str, outer: IterVar, inner: IterVar, group=None) -> IterVar:
        self._require_compute(prim)
        outer = self._axis(outer, 1, "outer", prim)
        inner = self._axis(inner, 2, "inner", prim)
        self._not_bound(outer, prim)
        self._not_bound(inner, prim)
        self._not_a_scheduled_loop(outer, prim)
        self._not_a_scheduled_loop(inner, prim)
        pos = self.leaves.index(outer)
        if pos + 1 >= len(self.leaves) or self.leaves[pos + 1] is not inner:
            order = ", ".join(a.name for a in self.leaves)
            raise ArgumentError(f"{prim}: {outer.name} and {inner.name} must be adjacent, outer first; the "
                                f"order of {self.name} is ({order}); reorder them first")
        if outer.kind != inner.kind:
            raise ArgumentError(f"{prim}: {outer.name} is a {outer.kind} axis and {inner.name} a {inner.kind} "
                                f"axis; only axes of one kind can be fused")
        if group is not None and outer.kind == "reduce":
            raise ArgumentError(f"swizzle: {outer.name} and {inner.name} are reduce axes; swizzle orders "
                                f"programs, which run spatial axes (swizzle the tile axes of the output)")
        (fused,) = self._record(prim, outer, inner, *(() if group is None else (group,)),
                                results=(self._fresh(f"{outer.name}_{inner.name}"),))
        return fused

    # -- placement ----------------------------------------------------------------------------
    @checked
    def compute_at(self, stage: Stage, axis: IterVar) -> Stage:
        """Compute this stage inside `stage`'s loop `axis`.

        A producer placed in a consumer's loop computes, per iteration, the region that iteration
        needs (a prologue; for cache stages, a tile load there). A consumer placed in its producer's
        loop computes what that iteration finished (an epilogue: `s[Y].compute_at(s[C], jo)`).
        Before and after, as loop nest and Triton: tests/golden/primitives/compute_at_producer.txt and compute_at_epilogue.txt.

        isl checks the placement: a consumer of a reduction goes only where the reduction is complete. A place
        the lowering can never accept (a tile axis, which is a vector dimension and not a loop, unless it is
        unrolled first; a cache_write's accumulator inside the reduction loops) is refused here too, and every
        error names the places that would be accepted (each tried on a copy of the schedule).

        Args:
            stage: a compute stage that reads this one or is read by it (directly or through other stages);
                for a cache_read, one of its readers (or a stage a reader is computed in); for a cache_write,
                its own tensor's stage.
            axis: a current leaf of `stage`: a loop or a grid axis.

        Returns:
            This stage (so `s.cache_read(...).compute_at(...)` chains).

        Raises:
            ArgumentError: `stage` is no compute stage, is this one, is unrelated, or the place makes a cycle.
            IllegalScheduleError: the placement breaks a dependence (the message names the legal places).
            LoweringError: `axis` is a tile axis, or a cache_write's accumulator would live inside the reduction
                loops (or the tensor is no reduction).

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> ko, ki = s[C].split(k, 32)
            >>> s[C].reorder(io, jo, ko, ii, ji, ki)
            >>> s[C].bind(io, "program_id.0"); s[C].bind(jo, "program_id.1")
            >>> s[Y].compute_at(s[C], jo)
            Stage(Y)
            >>> s[Y].compute_at(s[C], ko)
            Traceback (most recent call last):
            ...
            tilec.errors.IllegalScheduleError: compute_at(Y, C.ko) makes Y read C before C's reduction over k is complete: ...Legal locations for Y are: C.io, C.jo
        """
        axis = self._place(stage, axis, "compute_at", "s[C]", "cannot be computed at its own loop")
        self._not_a_scatter("compute_at")
        if stage.tensor.scatter is not None and self.sched.related(self, stage) == "consumer":
            raise LoweringError(f"compute_at({self.name}, {stage.name}.{axis.name}): {stage.name} is a scatter, whose "
                                f"points may write any of its elements, so none is complete before its kernel ends; "
                                f"a reader of a scatter runs in a kernel after it (compute_root)")
        if self.kind == "compute" and self.sched.graph is not None:
            rel = self.sched.related(self, stage)
            if rel is None and self.sched.common_source(self, stage) is None:
                raise ArgumentError(f"compute_at: {self.name} neither reads nor is read by {stage.name} (directly "
                                    f"or through other stages), and the two read no tensor in common; a stage can "
                                    f"only be computed inside a producer or consumer of it, or a stage that shares "
                                    f"a source with it (its loops follow that source's axes)")
        if self.kind == "cache_read" and stage.tensor not in [r.tensor for r in self.readers]:
            def within(r):  # r is computed in stage's loops (directly or through other stages)
                t = r
                while isinstance(t.attach, tuple):
                    t = t.attach[0]
                    if t is stage:
                        return True
                return False
            if not any(within(r) for r in self.readers):
                readers = ", ".join(r.name for r in self.readers)
                raise ArgumentError(f"compute_at: {self.name} caches {self.tensor.name} for {readers}; place it "
                                    f"in a loop of a reader, or of a stage a reader is computed in, not of "
                                    f"{stage.name}")
        if self.kind == "cache_write" and stage.tensor is not self.tensor:
            raise ArgumentError(f"compute_at: {self.name} accumulates {self.tensor.name}; place it in a loop "
                                f"of {self.tensor.name}, not of {stage.name}")
        t = stage
        while isinstance(t.attach, tuple):
            t = t.attach[0]
            if t is self:
                raise ArgumentError(f"compute_at({self.name}, {stage.name}.{axis.name}): {stage.name} is itself "
                                    f"computed inside {self.name}, so this would make a cycle; compute_root one of them")
        self._placeable_at(stage, axis)
        self._record("compute_at", StageRef(stage.name), AxisRef(stage.name, axis.name))
        return self

    @checked
    def store_at(self, stage: Stage, axis: IterVar) -> Stage:
        """Keep this stage's values over an iteration of `stage`'s loop `axis`, an outer loop of where it is
        computed (Halide's store_at): each iteration of the compute loop inside it computes only the values
        the iterations before it (in this iteration of `axis`) did not. For a stencil's producer computed
        per row (or per block of rows) of its reader, that is Halide's sliding window: the first row computes
        the whole window, each later one only the rows the window gained (blur_x: 3 rows, then 1 per row).
        Before and after, as loop nest and Triton: tests/golden/primitives/store_at.txt.

        The values are those of the compute_at alone; only the work differs. It slides along the compute
        loop when that loop is a serial loop that advances the reader's axis the producer is read shifted
        along, by one block per iteration (`split(y, 32)` then per row `yi`, or `tile` then `split(yi, 4)`
        per block of 4); otherwise the producer is computed as without store_at, and the source says why.
        isl checks it: the producer's element is then computed once, at the iteration that first reads it.
        The region is kept in the buffer the producer's window already goes through (no folding into fewer
        rows: a buffer of the producer's shape).

        Args:
            stage: the compute stage this one is computed in (compute_at, before or after this call).
            axis: a loop of `stage` that encloses the compute_at loop (or is it: no effect).

        Returns:
            This stage.

        Raises:
            ArgumentError: `stage` is no compute stage or is this one.
            LoweringError (at build): this stage is not computed in `stage`'s loops, or `axis` is inside
                the compute_at loop.

        Example:
            >>> yo, yi = s[blur_y].split(y, 32)
            >>> s[blur_y].bind(yo, "program_id.0")
            >>> s[blur_x].compute_at(s[blur_y], yi)     # per row: 3 rows of blur_x each
            Stage(blur_x)
            >>> s[blur_x].store_at(s[blur_y], yo)       # the strip's rows kept: 1 new row per row
            Stage(blur_x)
        """
        axis = self._place(stage, axis, "store_at", "s[C]", "cannot be stored at its own loop")
        self._require_compute("store_at")
        self._not_a_scatter("store_at")
        self._record("store_at", StageRef(stage.name), AxisRef(stage.name, axis.name))
        return self

    def _tile_split(self, axis: IterVar) -> Split | None:
        """The split whose inner axis `axis` is, where the lowering makes it a tile (a `tl.arange` vector
        dimension, not a loop): a leaf neither bound to the grid nor unrolled."""
        if axis in self.binds or axis in self.unrolled or axis not in self.leaves:
            return None
        return next((r for r in self.relations if isinstance(r, Split) and r.inner is axis), None)

    def _places_text(self, stage: Stage, who: str) -> str:
        """'place Y at one of C.io, C.jo': the places of `stage`'s loops where this stage would be accepted
        (each tried on a copy of the schedule, tilec.plan.check), or that there is none now."""
        places = _legal_places(self, stage) if _legal_places is not None else []
        if not places:
            return f"no loop of {stage.name} is a legal place for {self.name} now"
        return f"place {who} at {'one of ' if len(places) > 1 else ''}{', '.join(places)}"

    def _placeable_at(self, stage: Stage, axis: IterVar) -> None:
        """Refuse a place that the lowering can never accept, whatever primitives follow (the rules that
        tilec.plan.placement applies at build): a cache_write's accumulator lives outside the reduction loops
        of a reduction. (A tile axis is a place: the loop around it, tilec.plan.placement.Plan._level.)"""
        at = f"{stage.name}.{axis.name}"
        if self.kind == "cache_write":
            if not self.tensor.is_reduction:
                raise LoweringError(
                    f"cache_write({self.tensor.name}, 'local'): {self.tensor.name} is not a reduction; there is no "
                    f"accumulator to keep in registers, so {self.name} takes no compute_at (on an elementwise stage, "
                    f"cache_write only chooses how its tiles are stored): drop the compute_at")
            inner = any(isinstance(r, Split) and r.inner is axis for r in stage.relations)
            if axis.kind == "reduce" or inner:
                why = "the inner axis of a split" if inner else "a reduction loop"
                raise LoweringError(f"compute_at({self.name}, {at}): the accumulator must live outside the reduction "
                                    f"loops, and {axis.name} is {why}; {self._places_text(stage, 'it')}")

    @checked
    def compute_with(self, stage: Stage, axis: IterVar) -> Stage:
        """Run this stage's outermost loop as one loop with `stage`'s loop `axis` (Halide's compute_with):
        each iteration does `stage`'s body, then this stage's. For two reductions over the same K placed at
        the same tile, e.g. SwiGLU's G = X @ Wg and U = X @ Wu: one loop over K whose X tile (loaded once,
        the same load in both bodies) feeds both dots.

        The two stages must not depend on each other (neither reads the other, directly or through other
        stages): then running their iterations interleaved computes what running them one after the other
        does. At lowering, both must be placed at the same loop (compute_at the same stage and axis), `axis`
        must be `stage`'s outermost loop there, and the two loops must run the same iterations (the same
        extent, both serial, the same pipelining); otherwise a `LoweringError` says which differs.

        Before and after, as loop nest and Triton: tests/golden/primitives/compute_with.txt.

        Args:
            stage: an independent compute stage (neither reads the other).
            axis: `stage`'s outermost loop where both are placed (a loop, not a tile axis).

        Returns:
            This stage.

        Raises:
            ArgumentError: `stage` is this one, or either stage already joins a loop.
            IllegalScheduleError: one stage reads the other.
            LoweringError: `axis` is a tile axis (the message names a loop to use instead), or a stage is a
                scan or a sort.

        Example:
            >>> k2 = tc.reduce_axis(K, name="k2")
            >>> U = tc.compute((M, N), lambda i, j: tc.sum(A[i, k2] * W[k2, j], axis=k2), name="U")
            >>> O = tc.compute((M, N), lambda i, j: C[i, j] * U[i, j], name="O")
            >>> so = tc.create_schedule(O)
            >>> io, jo, ii, ji = so[O].tile(*O.axis, 32, 32)
            >>> so[O].bind(io, "program_id.0"); so[O].bind(jo, "program_id.1")
            >>> loops = []
            >>> for T in (C, U):
            ...     ko, ki = so[T].split(T.reduce_axis[0], 32)
            ...     _ = so[T].compute_at(so[O], jo)
            ...     loops.append(ko)
            >>> so[U].compute_with(so[C], loops[0])
            Stage(U)
        """
        self._require_compute("compute_with")
        self._not_a_scatter("compute_with")
        if isinstance(stage, Stage):
            stage._not_a_scatter("compute_with")
        for st in (self, stage):
            if isinstance(st, Stage) and st.tensor.scan_axis is not None:
                raise LoweringError(f"compute_with({self.name}, {stage.name}...): {st.name} is a scan (along "
                                    f"{st.tensor.scan_axis.name}), whose loops carry a value between iterations; "
                                    f"scans do not share a loop with another stage. Place a reader of {st.name} "
                                    f"in its loops with compute_at instead")
            if isinstance(st, Stage) and st.tensor.sort_axis is not None:
                raise LoweringError(f"compute_with({self.name}, {stage.name}...): {st.name} is a sort (along "
                                    f"{st.tensor.sort_axis.name}), which orders a whole tile at once; sorts do not "
                                    f"share a loop with another stage. Place a reader of {st.name} in its loops "
                                    f"with compute_at instead")
        axis = self._place(stage, axis, "compute_with", "s[G]", "cannot be fused with its own loop")
        split = stage._tile_split(axis)
        if split is not None:
            outers = {r.outer for r in stage.relations if isinstance(r, Split)}
            loops = [a for a in stage.leaves if a in outers and a not in stage.binds]
            use = (f"{stage.name}'s outermost loop there, such as {stage.name}.{loops[0].name}" if loops else
                   f"{stage.name}'s outermost loop there")
            raise LoweringError(
                f"compute_with({self.name}, {stage.name}.{axis.name}): {axis.name} is a tile axis (a vector dimension, "
                f"not a loop: the inner axis of split({split.parent.name}, {split.factor})), and compute_with joins "
                f"two loops; use {use}")
        rel = self.sched.related(self, stage)
        if rel is not None:
            reader, read = (stage, self) if rel == "producer" else (self, stage)
            raise IllegalScheduleError(
                f"compute_with({self.name}, {stage.name}.{axis.name}): {reader.name} reads {read.name} (directly or "
                f"through other stages), so one loop running both would read {read.name} before it is complete "
                f"(flow dependence {read.name} -> {reader.name}); only independent stages share a loop. Place "
                f"{reader.name} after {read.name} instead (compute_at)",
                primitive="compute_with", stage=self.name, reason="flow")
        other = stage
        while other.fused_with is not None:
            other = other.fused_with[0]
            if other is self:
                raise ArgumentError(f"compute_with({self.name}, {stage.name}.{axis.name}): {stage.name} is already "
                                    f"fused with {self.name}'s loop; fuse each stage once, with one target")
        if self.fused_with is not None:
            raise ArgumentError(f"compute_with: {self.name}'s loop is already fused with "
                                f"{self.fused_with[0].name}.{self.fused_with[1].name}; a stage joins one loop")
        self._record("compute_with", StageRef(stage.name), AxisRef(stage.name, axis.name))
        return self

    @checked
    def split_k(self, axis: IterVar, parts: int | Knob, deterministic: bool | Flag = True) -> None:
        """Split-K: run this reduction's loop `axis` (its outermost reduction loop) in `parts` chunks on
        `parts` programs each, into a workspace of partial sums (in the accumulator's dtype: float32 unless
        acc_dtype says otherwise), then combine them in a second kernel in a fixed order (part 0, 1, ...),
        where the stage is rounded to its dtype and its epilogue (consumers placed in its loops) runs: a
        rounding point such as SiLU never sees a partial sum.
        For GEMMs with too few output tiles to fill the GPU (small M x N, long K).

        `deterministic=False` adds the partial sums with atomics into one zeroed workspace instead: less
        memory traffic, and the order of the additions (so the rounding) varies from run to run. A `tc.flag`
        lets the tuner try both (its choice 0, the default, is False: atomics).

        It requires a sum (`tc.sum`) computed at its kernel's root, with a free grid dimension for the
        parts (program_id.1 or .2) and not persistent; `parts` an int or a tc.knob.

        Before and after, as loop nest and Triton: tests/golden/primitives/split_k.txt.

        Args:
            axis: a reduction loop of this stage (a split of its reduce axis).
            parts: how many chunks (programs) share the loop: a positive int or a `tc.knob`.
            deterministic: True to add the parts in order in a second kernel, False for atomics, or a `tc.flag`.

        Raises:
            ArgumentError: this stage is no sum, `axis` is no reduction loop, or a bad `parts`/`deterministic`.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> ko, ki = s[C].split(k, 64)
            >>> s[C].reorder(io, jo, ko, ii, ji, ki)
            >>> s[C].bind(io, "program_id.0"); s[C].bind(jo, "program_id.1")
            >>> s[C].split_k(ko, tc.knob("SPLIT_K", [4, 2, 1]))
        """
        self._require_compute("split_k")
        if not self.tensor.is_reduction or self.tensor.body.op != "sum":
            raise ArgumentError(f"split_k: {self.name} is not a sum (tc.sum); split-K adds partial sums")
        axis = self._axis(axis, 1, "axis", "split_k")
        if axis.kind != "reduce":
            raise _arg(1, "axis", "split_k", f"a reduction loop of {self.name} (split of "
                       f"{', '.join(a.name for a in self.tensor.reduce_axis)})", axis.name)
        knobs = self.sched._knobs_so_far()
        parts = _factor(parts, 2, "parts", "split_k", knobs)
        deterministic = _flag(deterministic, 3, "deterministic", "split_k", knobs)  # 0, 1 or a Flag
        self._record("split_k", axis, parts, *_off_or_flag(deterministic))

    @checked
    def online(self, *stats: Stage, skip_masked: bool | Flag = True) -> None:
        """Run this sum's reduction loop with `stats` as running statistics (the online rewrite): one max
        `m`, then sums `l`, over the same range as this stage's reduce axis, which are computed in this
        loop instead of in loops of their own. Each iteration updates the running max, rescales every sum
        by exp(m_old - m_new), adds the tile's terms, and after the loop this stage divides by the sum
        statistics it divides by. Softmax's two passes become one (`s[den].online(mx)`: the max and the
        sum of exp(x - max) in one loop); attention's three become one (`s[O].online(m, l)` for
        O = sum_j exp(S_j - m) / l * V_j: FlashAttention).

        It requires (checked on the compute, `tilec.ir.online`; otherwise an `IllegalScheduleError` with
        reason "online" says which rule fails): this stage is a sum over one reduce axis; the statistics
        are one max and sums, each over one reduce axis of the same extent, float32 with a float32
        accumulator; every summand of the sums and of this stage is a coefficient times exactly one
        exp(X - m) with X the max's own operand (so no exponent exceeds 0), and only this stage divides,
        and only by sum statistics; elementwise stages in between are looked through (they must be
        inlined, compute_inline). The statistics' own loops (and a compute_at of them) are replaced: they
        run in this stage's loop, where isl checks every other dependence as usual. A rounding point inside
        a summand (P rounded to bfloat16) then rounds the unnormalized exp(X - m_running): the same relative
        error per element (docs/schedule.md, "online").

        Where the max's operand is `where(cond, x, -inf)` (causal attention: `j <= i`) with `cond` linear in
        the axes, every member's term is exactly its identity wherever `cond` is false, so the loop runs only
        over the tiles where it holds somewhere, and only the tiles where it fails somewhere are masked
        (bounds from `cond` and the tiles' corners). With `skip_masked=True` (the default, FlashAttention's
        semantics) a NaN or infinity of a coefficient (V) at a key of a skipped tile does not reach the
        output, as in SDPA's flash and cuDNN backends (in the tiles that run, 0 * NaN is NaN as written);
        `skip_masked=False` runs every tile, so every NaN propagates as the naive compute (and SDPA's math
        backend) has it. A `tc.flag` lets the tuner try both (its choice 0, the default, is False). No tile
        is skipped where a stage computed in the loop is stored (an output): each of its elements is written.

        Before and after, as loop nest and Triton: tests/golden/primitives/online.txt.

        Args:
            *stats: the statistics this loop carries: the max's stage first, then the sums' (`s[m], s[l]`).
            skip_masked: loop only over the tiles a causal `where` admits (True), or over all of them (False);
                or a `tc.flag`.

        Raises:
            ArgumentError: no statistics, one named twice, not a compute stage of this schedule, or a statistic
                already carried by another loop.
            IllegalScheduleError: the compute does not have the online form (reason "online").

        Example:
            >>> X = tc.placeholder((M, N), "float32", name="X")
            >>> c = tc.reduce_axis(N, name="c")
            >>> mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
            >>> c2 = tc.reduce_axis(N, name="c2")
            >>> den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="den")
            >>> sd = tc.create_schedule(den)
            >>> sd[den].online(sd[mx])
        """
        self._require_compute("online")
        if stats and isinstance(stats[-1], (bool, Flag)):  # a replayed trace passes skip_masked positionally
            stats, skip_masked = stats[:-1], stats[-1]
        skip_masked = _flag(skip_masked, len(stats) + 1, "skip_masked", "online", self.sched._knobs_so_far())
        if not stats:
            raise _arg(1, "stats", "online", "the statistics this sum's loop carries: a max, then sums (s[m], s[l])",
                       stats)
        checked = []
        for n, st in enumerate(stats):
            if not isinstance(st, Stage) or st.kind != "compute" or self.sched.stages.get(st.name) is not st:
                raise _arg(n + 1, "stat", "online", "a compute stage of this schedule (s[m])", st)
            if st is self or st in checked:
                raise ArgumentError(f"online: {st.name} is named twice (or is {self.name} itself); name each "
                                    f"statistic once")
            checked.append(st)
        from tilec.ir.online import NotOnline, online_form  # local: the compute's algebra, no schedule in it
        try:
            online_form(self.tensor, [st.tensor for st in checked])
        except NotOnline as e:
            raise IllegalScheduleError(f"online({self.name}, {', '.join(st.name for st in checked)}): {e}",
                                       primitive="online", stage=self.name, reason="online") from None
        for other in self.sched.stages.values():
            mine = set(other.online_stats) & set(checked)
            if other is not self and mine:
                raise ArgumentError(f"online: {next(iter(mine)).name} is already a statistic of {other.name}'s "
                                    f"loop; a statistic runs in one loop")
        if any(st.online_stats for st in checked) or any(self in o.online_stats for o in self.sched.stages.values()):
            raise ArgumentError(f"online({self.name}): a statistic (or {self.name}) carries statistics of its own; "
                                f"name them all in one call on the outermost sum")
        self._record("online", *(StageRef(st.name) for st in checked), *_off_or_flag(skip_masked))

    @checked
    def compute_inline(self) -> Stage:
        """Substitute this stage's expression into its readers; it gets no loops and no buffer.

        Before and after, as loop nest and Triton: tests/golden/primitives/compute_inline.txt.

        Returns:
            This stage.

        Raises:
            ArgumentError: this stage is a reduction, scan or sort (use compute_at) or an output of the schedule, or a cache.

        Example:
            >>> E = tc.compute((M, K), lambda r, c: tc.exp(A[r, c]), name="E")
            >>> Z = tc.compute((M, K), lambda r, c: E[r, c] * 2.0, name="Z")
            >>> sz = tc.create_schedule(Z)
            >>> sz[E].compute_inline()
            Stage(E)
        """
        self._require_compute("compute_inline")
        self._not_a_scatter("compute_inline")
        if self.tensor.is_reduction:
            raise ArgumentError(f"compute_inline: {self.name} is a reduction over "
                                f"{', '.join(a.name for a in self.tensor.reduce_axis)}; only elementwise "
                                f"stages can be inlined. Use compute_at to fuse it instead")
        if self.tensor.sort_axis is not None:
            raise ArgumentError(f"compute_inline: {self.name} is a {self.tensor.body.name} along "
                                f"{self.tensor.sort_axis.name} (each element depends on the whole row); only "
                                f"elementwise stages can be inlined. Place its reader in its loops with compute_at "
                                f"instead")
        if self.tensor.scan_axis is not None:
            raise ArgumentError(f"compute_inline: {self.name} is a scan along {self.tensor.scan_axis.name} (each element "
                                f"needs the ones before it, carried by its own loop); only elementwise stages can be "
                                f"inlined. Place its reader in its loops with compute_at instead")
        if self.tensor in self.sched.outputs:
            raise ArgumentError(f"compute_inline: {self.name} is an output of the schedule and must be stored")
        self._record("compute_inline")
        return self

    @checked
    def compute_root(self) -> Stage:
        """Compute this stage in a kernel of its own (the default for every stage).

        Before and after, as loop nest and Triton: tests/golden/primitives/compute_root.txt.

        Returns:
            This stage.

        Raises:
            ArgumentError: this stage is a cache stage.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> s[Y].compute_at(s[C], jo).compute_root()
            Stage(Y)
            >>> s[Y].attach is None
            True
        """
        self._require_compute("compute_root")
        self._record("compute_root")
        return self

    # -- how loops run ------------------------------------------------------------------------
    @checked
    def bind(self, axis: IterVar, thread: str) -> None:
        """Run the iterations of `axis` as Triton programs: `bind(io, "program_id.0")`.

        Before and after, as loop nest and Triton: tests/golden/primitives/bind.txt.

        Args:
            axis: a spatial leaf of this stage (the root of its kernel, at build).
            thread: "program_id.0", "program_id.1" or "program_id.2", not bound to another axis of the stage.

        Raises:
            ArgumentError: `axis` is not a leaf, `thread` is not a grid dimension or is taken (fuse the axes).
            IllegalScheduleError: `axis` runs a reduction, or a program would need another's values.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> s[C].bind(io, "program_id.0")
            >>> s[C].bind(jo, "program_id.1")
        """
        self._require_compute("bind")
        axis = self._axis(axis, 1, "axis", "bind")
        if thread not in GRID:
            raise _arg(2, "thread", "bind", f"one of {', '.join(map(repr, GRID))}", thread)
        dim = GRID.index(thread)
        for other, d in self.binds.items():
            if d == dim and other is not axis:
                raise ArgumentError(f"bind: {thread} is already bound to {other.name} of {self.name}; "
                                    f"fuse the axes to put both on one grid dimension")
        inner = {r.inner for r in self.relations if isinstance(r, Split)}
        if axis.kind == "reduce":
            raise IllegalScheduleError(
                f"bind({self.name}.{axis.name}, {thread!r}): {axis.name} runs the reduction over "
                f"{', '.join(a.name for a in self.tensor.reduce_axis)}; programs run in parallel, so each "
                f"would update the same {self.name} elements at once. Bind a spatial axis instead "
                f"({', '.join(a.name for a in self.leaves if a.kind == 'spatial' and a not in inner)})",
                primitive="bind", stage=self.name, reason="parallel",
                counterexample={axis.name: (0, 1)})
        at = f"{self.name}.{axis.name}"
        if axis in self.pipelines:  # what the lowering refuses, whatever follows: refused here
            raise LoweringError(f"bind({at}, {thread!r}): {axis.name} is pipelined (pipeline({axis.name}, stages="
                                f"{self.pipelines[axis]})), and a grid axis is no loop; only serial loops (tl.range) "
                                f"are pipelined: bind another axis, or pipeline a loop inside this one")
        if axis in self.unrolled:
            raise LoweringError(f"bind({at}, {thread!r}): {axis.name} is unrolled, and a grid axis is no loop; bind "
                                f"an axis that is not unrolled")
        if self.persistent_axes and axis not in self.persistent_axes:
            raise LoweringError(f"bind({at}, {thread!r}): {self.name}'s tile loop (persistent) runs its one grid axis "
                                f"on program_id.0, so {self.name} binds no other axis; fuse (or swizzle) the grid "
                                f"axes into one before persistent")
        self._record("bind", axis, GRID[dim])

    @checked
    def pipeline(self, axis: IterVar, stages: int | Knob) -> None:
        """Software-pipeline the serial loop `axis` with `stages` buffers (tl.range num_stages).

        Before and after, as loop nest and Triton: tests/golden/primitives/pipeline.txt.

        Args:
            axis: a leaf of this stage that is not bound (a serial loop at build, not a tile axis).
            stages: how many iterations' loads are in flight: a positive int or a `tc.knob`.

        Raises:
            ArgumentError: `axis` is not a leaf or is bound, or `stages` is not a positive int or a knob.

        Example:
            >>> ko, ki = s[C].split(k, 32)
            >>> s[C].pipeline(ko, stages=tc.knob("stages", [3, 4]))
        """
        self._require_compute("pipeline")
        axis = self._axis(axis, 1, "axis", "pipeline")
        self._not_bound(axis, "pipeline")
        split = self._tile_split(axis)
        if split is not None:  # the lowering's rule; no later primitive makes a tile axis a serial loop
            outer = split.outer
            such = (f" (such as {self.name}.{outer.name}, the loop over these tiles)" if outer in self.leaves
                    and outer not in self.binds and outer not in self.unrolled else "")
            raise LoweringError(f"pipeline({self.name}.{axis.name}): {axis.name} is a tile axis (the inner axis of "
                                f"split({split.parent.name}, {split.factor}), a vector dimension); only serial "
                                f"loops (tl.range) are pipelined: pipeline a serial loop instead{such}")
        if axis in self.unrolled:
            raise LoweringError(f"pipeline({self.name}.{axis.name}): {axis.name} is unrolled (tl.static_range); only "
                                f"serial loops (tl.range) are pipelined: unroll it or pipeline it, not both")
        self._record("pipeline", axis, _factor(stages, 2, "stages", "pipeline", self.sched._knobs_so_far()))

    def num_warps(self, n: int | Knob) -> None:
        """Launch this stage's kernel with `n` warps per program (a power of two, 1..32).

        Without it, the kernel gets the fewest of 4, 8 and 16 warps that keep its root stage's tile at 128
        values per thread. Only the kernel's root stage sets it.
        Before and after, as loop nest and Triton: tests/golden/primitives/num_warps.txt.

        Args:
            n: a power of two from 1 to 32, or a `tc.knob` whose choices all are.

        Raises:
            ArgumentError: `n` (or a choice) is not a power of two from 1 to 32, or this stage is a cache.

        Example:
            >>> s[C].num_warps(tc.knob("warps", [4, 8]))
        """
        self._require_compute("num_warps")
        choices = n.choices if isinstance(n, Knob) else (n,)
        if any(isinstance(c, bool) or c not in (1, 2, 4, 8, 16, 32) for c in choices):
            raise _arg(1, "n", "num_warps", "a power of two from 1 to 32", list(choices) if isinstance(n, Knob) else n)
        self._record("num_warps", _factor(n, 1, "n", "num_warps", self.sched._knobs_so_far()))

    @checked
    def persistent(self, axis: IterVar, flatten: bool | Flag = False) -> None:
        """Run the grid axis `axis` (bound to program_id.0, the stage's only grid axis) as a persistent
        loop: min(#SMs, extent) programs, each looping over tiles pid, pid + #programs, ... (Triton's
        persistent matmul). The SM count is read from the device at launch. `flatten` (a bool, or a
        `tc.flag` for the tuner to try both) is tl.range's: pipeline the tile loop with the loops inside it as one loop. Tiles are
        independent (they are programs of the plain grid), so legality is that of the grid.

        Before and after, as loop nest and Triton: tests/golden/primitives/persistent.txt.

        Args:
            axis: the leaf bound to program_id.0 (fuse or swizzle the tile axes into one first).
            flatten: True, False, or a `tc.flag`.

        Raises:
            ArgumentError: `axis` is not bound to program_id.0, or `flatten` is no bool or flag.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> tiles = s[C].fuse(io, jo)
            >>> s[C].bind(tiles, "program_id.0")
            >>> s[C].persistent(tiles, flatten=tc.flag("FLATTEN"))
        """
        self._require_compute("persistent")
        axis = self._axis(axis, 1, "axis", "persistent")
        flatten = _flag(flatten, 2, "flatten", "persistent", self.sched._knobs_so_far())
        if self.binds.get(axis) != 0:
            where = f"bound to program_id.{self.binds[axis]}" if axis in self.binds else "not bound to the grid"
            raise ArgumentError(f"persistent: {self.name}.{axis.name} is {where}; bind it to program_id.0 first "
                                f"(fuse the grid axes into one: the tile loop runs one grid axis)")
        others = [a.name for a in self.binds if a is not axis]
        if others:  # the lowering's rule; bound axes stay bound
            raise LoweringError(f"persistent({axis.name}): {self.name}'s tile loop runs its one grid axis on "
                                f"program_id.0, but {self.name} also binds {', '.join(others)} to the grid; fuse (or "
                                f"swizzle) the grid axes into one")
        self._record("persistent", axis, flatten if isinstance(flatten, Knob) else bool(flatten))

    @checked
    def unroll(self, axis: IterVar) -> None:
        """Unroll the loop `axis` (its extent must be a constant): tl.static_range.

        Unrolling the inner axis of a split makes it a loop instead of a tile.
        Before and after, as loop nest and Triton: tests/golden/primitives/unroll.txt.

        Args:
            axis: a leaf of this stage that is not bound; at build, of constant extent (an int or a knob).

        Raises:
            ArgumentError: `axis` is not a leaf or is bound.

        Example:
            >>> io, ii = s[C].split(i, 16)
            >>> iio, iii = s[C].split(ii, 4)
            >>> s[C].unroll(iio)
        """
        self._require_compute("unroll")
        axis = self._axis(axis, 1, "axis", "unroll")
        self._not_bound(axis, "unroll")
        if not isinstance(axis.extent, (Const, Knob)):  # the lowering's rule; an axis keeps its extent
            from tilec.ir.expr import size_text
            raise LoweringError(f"unroll({self.name}.{axis.name}): its extent {size_text(axis.extent)} is not a "
                                f"constant; unroll the inner axis of a split")
        if axis in self.pipelines:
            raise LoweringError(f"unroll({self.name}.{axis.name}): {axis.name} is pipelined (pipeline({axis.name}, "
                                f"stages={self.pipelines[axis]})); only serial loops (tl.range) are pipelined: "
                                f"unroll it or pipeline it, not both")
        self._record("unroll", axis)


class Schedule:
    """All stages of a computation: `s = tc.create_schedule(Y)`; `s[C]` is C's stage (a `Stage`, whose
    methods are the loop primitives), `s.cache_read` and `s.cache_write` make cache stages. A schedule
    records decisions; `tc.lower(s)` and `tc.build(s, args)` turn it into kernels. It prints as its trace:
    the Python of the primitive calls that built it (`tc.replay(s.trace, outputs)` rebuilds it).

    Args:
        outputs: the computed tensors the schedule stores (use `tc.create_schedule`).

    Example:
        The computation every example of the primitives (`Stage`'s methods) starts from:

        >>> M, N, K = tc.size_vars("M N K")
        >>> A = tc.placeholder((M, K), "float32", name="A")
        >>> W = tc.placeholder((K, N), "float32", name="W")
        >>> k = tc.reduce_axis(K, name="k")
        >>> C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
        >>> Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y")
        >>> s = tc.create_schedule(Y)
        >>> i, j = C.axis
        >>> io, ii = s[C].split(i, tc.knob("BM", [64, 128]))
        >>> s
        # Schedule of Y (stages: C, Y; knobs: BM)
        s = tc.create_schedule(outputs)
        BM = tc.knob("BM", [64, 128])
        C = s["C"]
        C_i, C_j = C.tensor.axis
        C_io, C_ii = C.split(C_i, BM)
        <BLANKLINE>
    """

    def __init__(self, outputs: Sequence[Tensor]):
        self.outputs = list(outputs)
        self.graph: nx.DiGraph = stage_graph(self.outputs)
        order = list(nx.lexicographical_topological_sort(
            self.graph, key=lambda n: self.graph.nodes[n]["tensor"].seq))
        self.tensors: dict[str, Tensor] = {n: self.graph.nodes[n]["tensor"] for n in order}
        self._steps: list[Step] = []  # the trace: one Step per primitive applied, in order
        self._made = Made()  # the axes and cache stages its steps made (a fold gives the same ones back)
        self._knob_pool: dict[KnobRef, Knob] = {}  # the knob each KnobRef of a step stands for
        self._in_primitive = False
        # the state: the fold of the trace (`_fold`), so far of no step
        self.stages: dict[str, Stage] = {n: Stage(self, t) for n, t in self.tensors.items() if not t.is_placeholder}
        self.knobs: dict[str, Knob] = {}  # by name, in the order the steps first name them
        self.caches: list[Stage] = []  # the cache stages the steps made, in order
        self._axes = {n: (tuple(a.name for a in st.tensor.axis), tuple(a.name for a in st.tensor.reduce_axis))
                      for n, st in self.stages.items()}

    def __repr__(self) -> str:
        """The trace as Python (`str(s.trace)`), under a comment naming the outputs, stages and knobs."""
        outs = ", ".join(t.name for t in self.outputs)
        caches = f"; caches: {', '.join(c.name for c in self.caches)}" if self.caches else ""
        knobs = f"; knobs: {', '.join(self.knobs)}" if self.knobs else ""
        return f"# Schedule of {outs} (stages: {', '.join(self.stages)}{caches}{knobs})\n{self.trace}"

    # -- the state as the fold of the trace (tilec/schedule/state.py) -----------------------------
    def _fold(self) -> None:
        """Derive the state from the trace: every stage's (the same stage objects), the knobs the steps name
        and the cache stages they make."""
        for st in self.stages.values():
            state.initial(st)
        self.knobs.clear()
        self.caches.clear()
        for step in self._steps:
            self._apply(step)

    def _apply(self, step: Step) -> tuple:
        for ref in state.knob_refs(step.args):
            self.knobs.setdefault(ref.name, self._knob_pool[ref])
        return state.apply(self, step)

    def _push(self, step: Step) -> tuple:
        """Append `step` to the trace and apply it to the state; what it made (axes, a cache stage)."""
        self._steps.append(step)
        return self._apply(step)

    def _drop(self, mark: int) -> None:
        """Drop the steps after the first `mark` (a primitive refused by its check) and fold again."""
        if len(self._steps) > mark:
            del self._steps[mark:]
            self._fold()

    def _refolded(self, steps) -> Schedule:
        """Another schedule of this computation whose trace is `steps`: their fold, no primitive run again and
        nothing checked (tilec.plan.check tries a stage's places so). It shares this schedule's axes."""
        new = copy.copy(self)
        new._steps, new._made, new.knobs, new.caches = list(steps), Made(self._made.items), {}, []
        new.stages = {n: Stage(new, st.tensor) for n, st in self.stages.items()}
        new._fold()
        return new

    def _ref(self, value):
        """A primitive's argument as its step records it: a knob by name and choices (kept in the pool the
        fold resolves it with), the rest as it is."""
        if not isinstance(value, Knob):
            return value
        ref = KnobRef(value.knob_name, value.choices, isinstance(value, Flag))
        self._knob_pool[ref] = value  # the schedule's knob of that name where it has one (`_factor`, `_flag`)
        return ref

    def _knobs_so_far(self) -> dict[str, Knob]:
        """A copy of the knobs, for one primitive's arguments to check against (and each other)."""
        return dict(self.knobs)

    def _cache_name(self, base: str) -> str:
        """A cache stage's name: `base`, with `_` appended until no stage, cache or tensor has it (a user may
        name a tensor `A_shared`; the trace finds stages by name)."""
        name = base
        while name in self.stages or name in self.tensors or any(c.name == name for c in self.caches):
            name += "_"
        return name

    def _stage_named(self, name: str) -> Stage:
        return self.stages[name] if name in self.stages else next(c for c in self.caches if c.name == name)

    def _made_by(self, step: Step, args: tuple, make) -> tuple:
        return self._made.get(step, args, make)

    @property
    def trace(self) -> Trace:
        """Every primitive applied so far, as frozen `Step`s: `str(s.trace)` is Python that rebuilds this
        schedule, and `tc.replay(s.trace, s.outputs)` rebuilds it. A refused primitive leaves none."""
        return Trace(self._steps, self._axes)

    @property
    def log(self) -> list[str]:
        """The trace as text, one line per step (`"C: split(i, 64) -> io, ii"`): part of the fingerprint
        and of each kernel's header."""
        return [st.text for st in self._steps]

    def __getitem__(self, tensor: Tensor | str) -> Stage:
        """The stage of a computed tensor: `s[C]` (or `s["C"]`).

        Args:
            tensor: a computed tensor of this schedule, or its name.

        Raises:
            ArgumentError: the tensor is an input (placeholder; cache it with `cache_read` instead), is not
                part of this schedule, or no stage has that name.

        Example:
            >>> s[C]
            Stage(C)
        """
        name = tensor.name if isinstance(tensor, Tensor) else tensor
        if isinstance(tensor, Tensor) and self.tensors.get(name) is not tensor:
            raise ArgumentError(f"{name} is not part of this schedule (its stages: {', '.join(self.stages)})")
        if name in self.stages:
            return self.stages[name]
        if name in self.tensors:
            raise ArgumentError(f"{name} is an input (placeholder) and has no loops to schedule; use "
                                f"s.cache_read({name}, 'shared', readers=[...]) to stage its tiles")
        raise ArgumentError(f"{name!r} is not a stage of this schedule (its stages: {', '.join(self.stages)})")

    @property
    def placeholders(self) -> list[Tensor]:
        """The inputs the computation reads, in creation order."""
        return [t for t in self.tensors.values() if t.is_placeholder]

    def related(self, a: Stage, b: Stage) -> str | None:
        """'producer' if b reads a's tensor (directly or through other stages), 'consumer' if a reads
        b's, else None."""
        if a is b:
            return None
        if nx.has_path(self.graph, a.tensor.name, b.tensor.name):
            return "producer"
        if nx.has_path(self.graph, b.tensor.name, a.tensor.name):
            return "consumer"
        return None

    def common_source(self, a: Stage, b: Stage) -> str | None:
        """The tensor two stages that do not read each other both read (directly or through other stages),
        whose axes say which of their axes correspond: the nearest one (fewest reads between it and the two),
        computed tensors before inputs, then the earliest in the schedule; None if they read nothing in
        common."""
        if a is b or self.graph is None:
            return None
        ta, tb = a.tensor.name, b.tensor.name
        common = nx.ancestors(self.graph, ta) & nx.ancestors(self.graph, tb)
        if not common:
            return None
        order = list(self.graph.nodes)
        return min(common, key=lambda n: (nx.shortest_path_length(self.graph, n, ta)
                                          + nx.shortest_path_length(self.graph, n, tb),
                                          self.tensors[n].is_placeholder, order.index(n)))

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Stage | Tensor] | Stage | Tensor,
                   tma: bool | Flag = False) -> Stage:
        """Stage the tiles of `tensor` that `readers` read; place it with `.compute_at(reader, axis)`.

        `tma=True` (or a `tc.flag`) loads the tiles through tensor descriptors (Hopper's TMA unit:
        `desc.load([row, col])`, out-of-bounds elements read as 0) where a tile is a block of the tensor
        in its own dimension order bounded only by the tensor's edges; other tiles, and calls whose
        tensors do not meet TMA's alignment (a contiguous last dimension, 16-byte aligned base and
        strides), use pointer loads.

        Before and after, as loop nest and Triton: tests/golden/primitives/cache_read.txt and
        tests/golden/primitives/cache_read_tma.txt.

        Args:
            tensor: a tensor of this schedule (an input or a computed tensor).
            scope: "shared" or "local" (Triton decides where a tile lives: both lower the same way).
            readers: the stages (or tensors) that read `tensor` through this cache: a list, or one of them.
            tma: True, False, or a `tc.flag`.

        Returns:
            The cache stage, named `<tensor>_<scope>`; unplaced, it changes nothing.

        Raises:
            ArgumentError: `tensor` is not of this schedule, a bad scope, no readers, or a reader that does not
                read `tensor`.

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> ko, ki = s[C].split(k, 32)
            >>> s[C].reorder(io, jo, ko, ii, ji, ki)
            >>> s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
            Stage(A_shared)
        """
        if not isinstance(tensor, Tensor) or self.tensors.get(tensor.name) is not tensor:
            raise _arg(1, "tensor", "cache_read", "a tensor of this schedule", tensor)
        if scope not in SCOPES:
            raise _arg(2, "scope", "cache_read", "'shared' or 'local'", scope)
        if isinstance(readers, (Tensor, Stage)):
            readers = [readers]
        if not readers:
            raise _arg(3, "readers", "cache_read", f"a list of stages that read {tensor.name}", readers)
        stages = []
        for r in readers:
            if isinstance(r, Tensor) and r.is_placeholder:
                raise ArgumentError(f"argument 3, 'readers' to cache_read: {r.name} is an input (placeholder); "
                                    f"readers are the stages that read {tensor.name}")
            st = r if isinstance(r, Stage) else self[r]
            if st.kind != "compute" or tensor not in st.tensor.inputs:
                raise ArgumentError(f"argument 3, 'readers' to cache_read: {st.name} does not read {tensor.name}")
            stages.append(st)
        name = self._cache_name(f"{tensor.name}_{scope}")
        tma = _flag(tma, 4, "tma", "cache_read", self._knobs_so_far())
        args = (TensorRef(tensor.name), SCOPES[SCOPES.index(scope)], tuple(StageRef(st.name) for st in stages))
        if tma != 0:  # recorded only when asked: the log (and study names) of other schedules stay
            args += (self._ref(tma) if isinstance(tma, Flag) else True,)
        (stage,) = self._push(Step("cache_read", None, args, (name,)))
        return stage

    def cache_write(self, tensor: Tensor, scope: str, tma: bool | Flag = False) -> Stage:
        """Accumulate `tensor` in a buffer (registers for 'local') written to memory once at its end.

        `tma=True` (or a `tc.flag`) writes its tiles to memory through a tensor descriptor (Hopper's TMA
        unit: `desc.store([row, col], tile)`, elements past the tensor's edge not written) where a tile
        is a block of the tensor in its own dimension order bounded only by the tensor's edges; other
        tiles, and calls whose output does not meet TMA's alignment, use pointer stores. On an
        elementwise stage (an epilogue such as SiLU) it only chooses how the tile is stored.

        Before and after, as loop nest and Triton: tests/golden/primitives/cache_write.txt and
        tests/golden/primitives/cache_write_tma.txt.

        Args:
            tensor: a computed tensor of this schedule, with no cache_write yet.
            scope: "local" (registers; Triton keeps accumulators there).
            tma: True, False, or a `tc.flag`.

        Returns:
            The cache stage, named `<tensor>_local`; place a reduction's with `.compute_at(s[T], axis)` at a
            spatial loop outside the reduction loops.

        Raises:
            ArgumentError: not a computed tensor of this schedule, a bad scope, or a second cache_write.
            LoweringError: scope "shared" (Triton keeps accumulators in registers).

        Example:
            >>> io, jo, ii, ji = s[C].tile(i, j, 64, 64)
            >>> s.cache_write(C, "local").compute_at(s[C], jo)
            Stage(C_local)
        """
        st = self[tensor] if isinstance(tensor, Tensor) else None
        if st is None:
            raise _arg(1, "tensor", "cache_write", "a computed tensor of this schedule", tensor)
        if scope not in SCOPES:
            raise _arg(2, "scope", "cache_write", "'local' (registers)", scope)
        if scope != "local":
            from tilec.errors import LoweringError
            raise LoweringError(f"cache_write({tensor.name}, {scope!r}): Triton keeps accumulators in "
                                f"registers; use scope 'local'")
        if any(c.kind == "cache_write" and c.tensor is tensor for c in self.caches):
            raise ArgumentError(f"cache_write: {tensor.name} already has a cache_write stage")
        if tensor.scatter is not None:
            from tilec.errors import LoweringError
            raise LoweringError(f"cache_write({tensor.name}, {scope!r}): {tensor.name} is a scatter, stored at computed "
                                f"positions point by point; it has no tile to accumulate or store at once")
        tma = _flag(tma, 3, "tma", "cache_write", self._knobs_so_far())
        args = (TensorRef(tensor.name), "local")
        if tma != 0:  # recorded only when asked, as cache_read's
            args += (self._ref(tma) if isinstance(tma, Flag) else True,)
        (stage,) = self._push(Step("cache_write", None, args, (self._cache_name(f"{tensor.name}_local"),)))
        return stage

    def fingerprint(self) -> str:
        """A stable text of the computation and every decision: the key of compiled-kernel caches.

        Example:
            >>> io, ii = s[C].split(i, 64)
            >>> s.fingerprint().splitlines()[-1]
            'C: split(i, 64) -> io, ii'
        """
        parts = [f"{t!r}={t.body}" + (f" at {t.scatter}" if t.scatter is not None else "")  # expressions as text
                 for t in self.tensors.values()]
        return "\n".join(parts + self.log)


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A schedule for `outputs` (a tensor or a list): every stage starts as its own kernel.

    Every stage the outputs read (directly or through other stages) is part of it, with the default
    schedule until a primitive touches its loops (`tc.default_trace(s[C])` prints that default).

    Args:
        outputs: the computed tensor the schedule stores, or a list of them.

    Returns:
        The `Schedule`.

    Raises:
        ArgumentError: an output is a placeholder (an input) or not a tensor, or two tensors share a name.

    Example:
        >>> s = tc.create_schedule(Y)
        >>> list(s.stages)
        ['C', 'Y']
    """
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs) if isinstance(outputs, (list, tuple)) else None
    if not outs or not all(isinstance(t, Tensor) for t in outs):
        raise _arg(1, "outputs", "create_schedule", "a computed tensor or a list of them", outputs)
    for t in outs:
        if t.is_placeholder:
            raise ArgumentError(f"create_schedule: {t.name} is a placeholder (an input); pass the computed "
                                f"output(s)")
    return Schedule(outs)
