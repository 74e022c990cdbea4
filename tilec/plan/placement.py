"""Where every stage runs, as a pure function of (schedule, config): one kernel per root stage in
launch order; for each stage its own loops (`Layout`: grid / serial / unroll / tile leaves) and its
place inside another stage's loop (`Placed`: target, loop depth, which of its axes follow the target's).

The lowering emits this plan and `tilec.poly` checks it, so both see the same loops in the same order:
grid axes outermost, then serial loops in the stage's order, then tile axes (vector dimensions).
At a loop's body the order is: caches and producers placed there, the rest of the loop, consumers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import networkx as nx

from tilec.errors import LoweringError, TilecError
from tilec.ir.expr import Binary, Const, IterVar, Load, SizeVar, evaluate, size_text, substitute, walk
from tilec.ir.knob import Knob, factor_value, resolve_config
from tilec.ir.online import NotOnline, OnlineForm, online_form
from tilec.plan.indexmap import IndexMap
from tilec.poly.masks import at_most_once, single_iteration
from tilec.schedule.defaults import default_stage
from tilec.schedule.schedule import Fuse, Schedule, Split, Stage, subtile_problem

# The warps a kernel gets when its schedule sets none: enough that its root stage's tile holds at most this
# many values per thread. 4 warps up to a 128 x 128 tile, 8 for 128 x 256, 16 for 256 x 256: with 4 warps a
# 128 x 256 float32 accumulator spills its registers (7x slower on the H200, shared/notes/hopper.md).
VALUES_PER_THREAD = 128
DEFAULT_WARPS = (4, 8, 16)


def num_warps(stage: Stage, layout: Layout, config: dict) -> int:
    """The kernel's num_warps: what the schedule set (`num_warps`, a knob resolved in `config`), else the
    fewest of DEFAULT_WARPS that keep the root stage's spatial tile (times the accumulators live beside
    it: `_accumulators`) at VALUES_PER_THREAD values per thread."""
    if stage.warps is not None:
        return factor_value(stage.warps, config)
    numel = layout.spatial_tile_numel * _accumulators(stage)
    return next((w for w in DEFAULT_WARPS if numel <= VALUES_PER_THREAD * 32 * w), DEFAULT_WARPS[-1])


def _accumulators(root: Stage) -> int:
    """How many tiles the root's kernel keeps live at once, in the tiles' units: 1, plus one per stage whose
    loop runs inside another's (compute_with: SwiGLU's two accumulators share one loop over K)."""
    def under(st: Stage) -> bool:
        for _ in root.sched.stages:  # at most one step per stage (the plan refuses cycles)
            if not isinstance(st.attach, tuple):
                break
            st = st.attach[0]
        return st is root
    return 1 + sum(1 for st in root.sched.stages.values() if st.fused_with is not None and under(st))


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class MisplacedError(LoweringError):
    """A stage placed (compute_at) where the lowering cannot put it. The message offers the loops the plan
    sees; `with_places(places)` is the message that names instead the places that would be accepted
    (tilec.plan.check tries each on a copy of the schedule: `legal_places`)."""

    def __init__(self, head: str, offered: str, *, stage: Stage, target: Stage, style: str = "one of"):
        super().__init__(head + offered)
        self.head, self.stage, self.target, self.style = head, stage, target, style

    def with_places(self, places: list[str]) -> str:
        who = "it" if self.stage.kind == "cache_write" else self.stage.name
        if not places:
            return (f"{self.head}; no loop of {self.target.name} is a legal place for {self.stage.name} now"
                    + (f": compute_root({self.stage.name}), or change {self.target.name}'s loops"
                       if self.stage.kind == "compute" else f": change {self.target.name}'s loops"))
        if self.style == "listed":
            return f"{self.head}; the legal places for {self.stage.name} are: {', '.join(places)}"
        return f"{self.head}; place {who} at {'one of ' if len(places) > 1 else ''}{', '.join(places)}"


class Layout:
    """A stage's own loops in a kernel: leaves classified as grid / serial / unroll / single / tile.

    A "single" leaf is a loop that isl proves runs exactly once under the size facts (`facts`: tc.assume,
    specialized sizes, a call's sizes): `co` of `split(c, 8192)` where N <= 8192. It is no loop at all:
    its index is 0, what it would hold runs where it sits, and a place at it is the enclosing loop's."""

    def __init__(self, stage: Stage, fixed: set, root: bool, config: dict, facts=()):
        self.stage = stage
        self.index = IndexMap(stage, config)  # the split/fuse algebra of its axes (tilec/plan/indexmap.py)
        self.origin = origin = self.index.origin
        for made in self.index.scheduled:
            if made & fixed:
                names = ", ".join(a.name for a in self.index.originals if a in made and a in fixed)
                raise LoweringError(
                    f"{stage.name}: axis {names} is fixed by where {stage.name} is computed (compute_at), so "
                    f"it takes that loop's tiling; remove the split/fuse of {names} from {stage.name}")
        self.leaves = [a for a in stage.leaves if not (origin[a] & fixed)]
        # A bind on a stage computed inside another stage's kernel is ignored, and the source says so: only a
        # kernel's root stage has a grid, and the kernel's programs already run this stage's iterations in
        # parallel (as Halide's parallel on a Func computed at a loop only adds nested parallelism, the values
        # the same). Its loop runs serially; an axis the place fixes (an absorbed leaf) has no loop at all.
        self.ignored_binds = [a for a in stage.binds if not root or a not in origin or origin[a] & fixed]
        if not root and stage.warps is not None:
            raise LoweringError(f"{stage.name}.num_warps(...) has no effect: {stage.name} is computed inside another "
                                f"stage's kernel, whose root stage sets the warps; call num_warps on the root")
        self.subtiled: tuple[IterVar, int] | None = None  # a tile lowered as power-of-two pieces (subtiles.py)
        # a tile of extent f that is no power of two, where pieces do not serve: tl.arange over the next power
        # of two, each axis made from it masked to `lane < f` (tilec/lower/builder.py)
        self.padded: dict[IterVar, int] = {}
        self.kind: dict[IterVar, str] = {}
        self.tile_extent: dict[IterVar, int] = {}
        for a in self.leaves:
            if a in stage.binds and a not in self.ignored_binds:
                self.kind[a] = "grid"
            elif a in stage.unrolled:
                self.kind[a] = "unroll"
                if not isinstance(a.extent, (Const, Knob)):
                    raise LoweringError(f"unroll({stage.name}.{a.name}): its extent {size_text(a.extent)} is not a constant; "
                                        f"unroll the inner axis of a split")
            elif (split := self.index.tile_split(a)) is not None:
                self.kind[a] = "tile"
                f = self.index.factor(split)
                if not _is_pow2(f):
                    # a scan's or sort's tile is scanned (sorted) whole: padded, never in pieces
                    scan = stage.tensor.scan_axis in origin[a] or stage.tensor.sort_axis in origin[a]
                    if subtile_problem(f, spatial=a.kind == "spatial", root=root) is None \
                            and self.subtiled is None and not scan:
                        self.subtiled = (a, f)  # power-of-two pieces (a multiple of 16 on the root's spatial axis)
                    else:  # the next power of two, its lanes past f masked off (`padded`)
                        self.padded[a] = 1 << (f - 1).bit_length()
                self.tile_extent[a] = f
            else:
                self.kind[a] = "serial"
            if self.kind[a] in ("serial", "unroll") and single_iteration(a.extent, config, list(facts)):
                self.kind[a] = "single"
            if a in stage.pipelines and self.kind[a] not in ("serial", "single"):
                raise LoweringError(f"pipeline({stage.name}.{a.name}): {a.name} is a {self.kind[a]} axis; only "
                                    f"serial loops (tl.range) are pipelined")
        self.grid = sorted((a for a in self.leaves if self.kind[a] == "grid"), key=lambda a: stage.binds[a])
        for rel in self.index.fuses:
            if rel.group is not None and rel.fused in self.kind and self.kind[rel.fused] != "grid":
                raise LoweringError(f"swizzle({rel.outer.name}, {rel.inner.name}) orders programs, but "
                                    f"{stage.name}.{rel.fused.name} is a {self.kind[rel.fused]} loop; bind it to "
                                    f"the grid (bind({rel.fused.name}, 'program_id.0'))")
        # the persistent grid axis and its flatten (tl.range's), or None
        self.persistent: tuple[IterVar, int] | None = None
        for a, flatten in stage.persistent_axes.items():
            if a not in self.kind:
                continue
            others = [b.name for b in self.grid if b is not a]
            if others or stage.binds.get(a) != 0:
                raise LoweringError(f"persistent({a.name}): {stage.name}'s tile loop runs its one grid axis on "
                                    f"program_id.0, but {stage.name} also binds {', '.join(others) or a.name} "
                                    f"to the grid; fuse (or swizzle) the grid axes into one")
            self.persistent = (a, factor_value(flatten, config))
        self.loops = [a for a in self.leaves if self.kind[a] in ("serial", "unroll")]
        self.singles = [a for a in self.leaves if self.kind[a] == "single"]
        self.tiles = [a for a in self.leaves if self.kind[a] == "tile"]
        # A spatial loop inside a reduction loop runs outside it: one accumulator tile holds the iterations of
        # the loops around the reduction, and each element's updates keep their order over the reduction
        # axes, so the values are the same (Halide's update loops may run in any order; here registers hold
        # the accumulator). The source says so (`hoisted`); isl checks the order as it is lowered.
        first = next((n for n, a in enumerate(self.loops) if a.kind == "reduce"), len(self.loops))
        self.hoisted = [(a, self.loops[first]) for a in self.loops[first:] if a.kind != "reduce"]
        user = getattr(stage, "_stage", stage)  # (WithinPlace: the stage itself)
        for a, red in self.hoisted:
            # a reader placed at such a loop asked to run inside the reduction, on partial sums: as written
            if any(isinstance(st.attach, tuple) and st.attach[0] is user and st.attach[1] is a
                   and stage.sched.related(st, user) != "producer" for st in stage.sched.stages.values()):
                raise LoweringError(
                    f"{stage.name}: spatial loop {a.name} runs inside reduction loop {red.name}, and a reader of "
                    f"{stage.name} is placed at it; the accumulator would have to hold every {a.name} iteration. "
                    f"Reorder so that spatial loops come before reduction loops")
        if self.hoisted:
            self.loops = ([a for a in self.loops if a.kind != "reduce"]
                          + [a for a in self.loops if a.kind == "reduce"])
            moved = [a for a, _ in self.hoisted]  # the stage's order too (inner_loop, level_of_leaf read it)
            rest = [a for a in self.leaves if a not in moved]
            at = rest.index(self.hoisted[0][1])
            self.leaves = rest[:at] + moved + rest[at:]
        self.first_reduce = next((n for n, a in enumerate(self.loops) if a.kind == "reduce"), len(self.loops))
        # a scan's loops: the first loop over its axis (where the carry starts; None: the tile holds the axis)
        self.scan_level = _check_scan(self, fixed) if stage.tensor.scan_axis is not None else None
        if stage.tensor.sort_axis is not None:
            _check_sort(self, fixed, config, facts)
        self.warps = num_warps(stage, self, config) if root else None

    @property
    def spatial_tile_numel(self) -> int:
        """Elements of the stage's tile over its own spatial axes: its accumulator's size, when it has one."""
        numel = 1
        for a in self.tiles:
            if a.kind != "reduce":
                numel *= self.tile_extent[a]
        return numel

    def resolve(self, axis: IterVar) -> IterVar | None:
        """The leaf that a place named by `axis` means: itself, or (in a default schedule, which splits
        and fuses original axes) the outermost leaf made from it; a fused axis whose fixed piece the place
        absorbed (`WithinPlace.alias`) means the loop of its own piece."""
        axis = getattr(self.stage, "alias", {}).get(axis, axis)
        if axis in self.kind:
            return axis
        for leaf in self.leaves:
            if axis in self.origin.get(leaf, ()):
                return leaf
        return None

    def axis_level(self, axis: IterVar) -> int:
        """The depth of the innermost serial loop that original `axis` depends on (-1: none)."""
        return max((n for n, leaf in enumerate(self.loops) if axis in self.origin[leaf]), default=-1)

    def inner_loop(self, axis: IterVar, place: IterVar | None) -> IterVar | None:
        """The innermost loop (serial, unrolled, or one that runs once) inside the place at leaf `place`
        (a grid leaf or None: the kernel's top) that original `axis` depends on; None if there is none.
        Loops that run once count: whether a stage may follow an axis must not depend on the sizes."""
        seq = [a for a in self.leaves if self.kind[a] in ("serial", "unroll", "single")]
        at = seq.index(place) if place in seq else -1
        return next((leaf for leaf in reversed(seq[at + 1:]) if axis in self.origin[leaf]), None)

    def level_of_leaf(self, leaf: IterVar) -> int:
        """The loop depth a place at `leaf` means: its index among the loops; for a single leaf (no loop) or a
        tile axis, the enclosing loop's (the last loop before it in the stage's order; -1: the kernel's top)."""
        if leaf in self.loops:
            return self.loops.index(leaf)
        before = self.leaves[:self.leaves.index(leaf)]
        return max((self.loops.index(a) for a in before if a in self.loops), default=-1)


def _own_axis_leaves(lay: Layout, t: IterVar, fixed: set, what: str, axis_word: str, why_fixed: str,
                     why_fused: str) -> list:
    """The leaves of axis t of a scan or sort stage, after refusing a place that gives t its values (compute_at)
    and a fusion of t with another axis: both would cut the axis the stage runs along."""
    name = lay.stage.name
    if t in fixed:
        raise LoweringError(f"{name} is a {what} along {t.name}, and where it is computed (compute_at) gives {t.name} "
                            f"its values: {why_fixed}. Compute {name} at a loop outside {t.name} (or at root), where "
                            f"its own loops run the whole axis")
    mine = [a for a in lay.leaves if t in lay.origin[a]]
    for a in mine:
        if len(lay.origin[a]) > 1:
            others = ", ".join(sorted(b.name for b in lay.origin[a] if b is not t))
            raise LoweringError(f"{name}.{a.name} fuses the {axis_word} {t.name} with {others}: {why_fused}; fuse only "
                                f"the other axes")
    return mine


def _check_scan(lay: Layout, fixed: set) -> int | None:
    """The loop level where a scan stage's carry starts, after checking that its axis runs as
    `tilec.lower.scans` lowers it: the axis's leaves are loops and at most one tile, none fused with another
    axis, and no loop of another axis runs inside the scan's loops (the carry would have to hold a value per
    iteration of it). isl checks the rest, as the scan reads its own element t - 1 (tilec/poly/model.py): that
    the loops run t in order, and that no grid axis splits a row between programs (which run in parallel)."""
    stage, t = lay.stage, lay.stage.tensor.scan_axis
    name = stage.name
    mine = _own_axis_leaves(lay, t, fixed, "scan", "scan axis", "each iteration of that loop would start the scan "
                            "afresh", f"a scan runs along {t.name} in order, with a carry between its iterations")
    tiles = [a for a in mine if lay.kind[a] == "tile"]
    if len(tiles) > 1:
        raise LoweringError(f"{name}: the scan axis {t.name} has {len(tiles)} tile axes ({', '.join(a.name for a in tiles)}); "
                            f"a scan takes at most one tile of its axis (tl.cumsum over it): split {t.name} so that "
                            f"only its innermost part is a tile, the others serial loops")
    loops = [n for n, a in enumerate(lay.loops) if t in lay.origin[a]]
    if not loops:
        return None
    inner = [a for a in lay.loops[loops[0]:] if t not in lay.origin[a]]
    if inner:
        raise LoweringError(f"{name}: loop {inner[0].name} runs inside the scan loop {lay.loops[loops[0]].name} of {t.name}; "
                            f"the carry between the scan's iterations would have to hold one value per {inner[0].name} "
                            f"iteration. Reorder so that {name}'s other loops run outside its scan loops")
    return loops[0]


def _check_sort(lay: Layout, fixed: set, config: dict, facts) -> None:
    """A sort stage's axis as `tilec.lower.sorts` lowers it: the whole axis in one tile of one program (tl.sort
    over it), so no loop over it (a split's outer loop must run once: a constant extent, or `tc.assume`), no
    grid axis, no fusion with another axis, no place that fixes it."""
    stage, t = lay.stage, lay.stage.tensor.sort_axis
    name, what = stage.name, stage.tensor.body.name
    mine = _own_axis_leaves(lay, t, fixed, what, "sorted axis", "each iteration of that loop would sort a part of "
                            "the row", f"a {what} orders {t.name} within one tile")
    for a in mine:
        if lay.kind[a] in ("grid", "serial", "unroll") and not at_most_once(a.extent, config, list(facts)):
            raise LoweringError(f"{name}: {a.name} is a {lay.kind[a]} loop over the sorted axis {t.name}; a {what} "
                                f"orders the whole axis in one tile (tl.sort). Split {t.name} by a tile at least "
                                f"its extent {size_text(t.extent)}, so that the outer loop runs once (for a size, "
                                f"state it: tc.assume({size_text(t.extent)} <= 64))")
    tiles = [a for a in mine if lay.kind[a] == "tile"]
    if len(tiles) > 1:
        raise LoweringError(f"{name}: the sorted axis {t.name} has {len(tiles)} tile axes "
                            f"({', '.join(a.name for a in tiles)}); split it once, by a tile at least its extent")


def _reads_any(t, stats, seen=()) -> bool:
    """Whether tensor t reads one of `stats`, directly or through other stages."""
    if t.is_placeholder or t.name in seen:
        return False
    return any(u in stats or _reads_any(u, stats, seen + (t.name,)) for u in t.inputs)


@dataclass(frozen=True)
class Halo:
    """A placed producer's axis read at shifted positions of its target's axis (a stencil): in one iteration
    of the place, it runs over what that iteration reads, `target + lo` to `target + hi` past the target's own
    range (Halide's bounds inference); the overlap between iterations is computed again."""

    target: IterVar
    lo: int
    hi: int


@dataclass(frozen=True)
class Slide:
    """A stencil's producer stored outside the loop it is computed in (store_at): along `axis` (a halo axis),
    the window of iteration t > 0 of the target's loop `loop` gains only the `span` values past the window of
    iteration t - 1 (the target's block advances by one block per iteration), so it computes those alone:
    `target + hi` to `target + span + hi`. The first iteration (t == 0, in each run of the loop) computes the
    whole window (Halide's sliding window)."""

    axis: IterVar
    loop: IterVar


def block_of(lay: Layout, axis: IterVar) -> tuple | None:
    """(start, span) of target `axis`'s values in one run of its tiles: its value is linear in its tile
    leaves (`IndexMap.linear`), so they run from `start` (the tiles at 0: an expression of the other leaves)
    over at most span = 1 + sum(c * (extent - 1)) values (all of them, where the tiles nest as a split's
    pieces do). None where it is not linear in them (a tile inside a fusion's `//` or `%`)."""
    form = lay.index.linear(axis, lay.tiles, zero=frozenset(lay.singles))
    if form is None:
        return None
    rest, coef = form
    return rest, 1 + sum(c * (lay.tile_extent[t] - 1) for t, c in coef.items())


def span_of(p: Placed, axis: IterVar) -> int | None:
    """How many consecutive values p's `axis` takes at once where p sits (an upper bound): a window's
    (`Halo`: its target's span + hi - lo), a followed axis's target's, or its own tiles' (`block_of`)."""
    if axis in p.halo:
        h = p.halo[axis]
        inner = span_of(p.target, h.target)
        return None if inner is None else inner + h.hi - h.lo
    if axis in p.bound:
        return span_of(p.target, p.bound[axis])
    block = block_of(p.layout, axis)
    return None if block is None else block[1]


def halo_work(p: Placed) -> float:
    """The work of p per iteration of its place against the values the iteration covers: for each halo axis,
    (span + hi - lo) / span (the overlap with the neighbours computed again); 1 along a sliding window
    (store_at), whose iterations after the first compute only their new values. The nest's barrier line
    and the tuner's cost model (tilec/tune/cost.py) read it."""
    out = 1.0
    for axis, h in p.halo.items():
        span = span_of(p.target, h.target)
        if span is None or (p.slide is not None and p.slide.axis is axis):
            continue
        out *= (span + h.hi - h.lo) / span
    return out


def _advances(lay: Layout, axis: IterVar, loop: IterVar) -> bool:
    """Whether target `axis`'s block (`block_of`) advances by exactly its span per iteration of `loop`, a
    serial leaf, with nothing else changing: each window then starts where the last one's new values end."""
    block = block_of(lay, axis)
    form = lay.index.linear(axis, list(lay.tiles) + [loop], zero=frozenset(lay.singles))
    return block is not None and form is not None and form[1].get(loop) == block[1]


def _shift(idx) -> tuple[IterVar, int] | None:
    """An index `v`, `v + c`, `c + v` or `v - c` (v an axis, c an int) as (v, c); None for any other."""
    if isinstance(idx, IterVar):
        return idx, 0
    if isinstance(idx, Binary) and idx.op in ("+", "-"):
        a, b = idx.a, idx.b
        if isinstance(a, IterVar) and isinstance(b, Const) and isinstance(b.value, int) and not isinstance(b.value, bool):
            return a, b.value if idx.op == "+" else -b.value
        if idx.op == "+" and isinstance(b, IterVar) and isinstance(a, Const) and isinstance(a.value, int) \
                and not isinstance(a.value, bool):
            return b, a.value
    return None


def _shift_map(producer, consumer) -> tuple[dict | None, dict | None]:
    """(shifted, plain) maps of producer axis -> (consumer axis, lo, hi) from the reads of `producer` in
    consumer's body. `shifted`: over every read `producer[i + c, ...]`, each index an axis plus an int, one
    consumer axis per producer axis whatever the read, distinct axes; None where a read is at computed
    positions (`X[i * 2]`, `X[0, j]`) or the reads disagree on the axes. `plain`: the first plain read
    `producer[i, j]` alone (no shift; the lowering reads the others from memory or refuses them)."""
    found: dict | None = {}
    plain = None
    for node in consumer.loads():  # a scatter's positions too
        if node.tensor is not producer:
            continue
        shifts = [_shift(i) for i in node.indices]
        ok = all(s is not None for s in shifts) and len({v for v, _ in shifts}) == len(shifts)
        if ok and plain is None and all(d == 0 for _, d in shifts):
            plain = {a: (v, 0, 0) for a, (v, _) in zip(producer.axis, shifts)}
        if not ok:
            found = None
        for a, (v, d) in zip(producer.axis, shifts) if found is not None else ():
            old = found.get(a)
            if old is not None and old[0] is not v:
                found = None
                break
            found[a] = (v, d, d) if old is None else (v, min(old[1], d), max(old[2], d))
    return found or None, plain


def _access(t, shift: int = 0) -> str:
    """An example access of tensor t for a message: `P[i, j]`, or with the first index shifted `P[i + 1, j]`."""
    names = ["i", "j", "k", "l", "m", "n"][:len(t.axis)] or [""]
    if shift:
        names[0] = f"{names[0]} + {shift}"
    return f"{t.name}[{', '.join(names)}]"


def bound_axes(x: Stage, target: Stage) -> tuple[dict[IterVar, IterVar], dict[IterVar, Halo]]:
    """For `x` placed in `target`'s loop: which of x's axes follow which of target's axes (`bound`), and which
    follow one at shifted positions (`halo`: a producer read by a stencil).

    Along the chain of reads between them (`C[i, j]` in Y's body, directly or through stages in
    between), each access `P[i + c, j]` says which index variable names which axis, and by which shifts;
    composing them gives the correspondence, the shifts adding up. A consumer placed in a producer's loop
    follows its first plain read (isl then checks the others: a read of the next element is a broken
    dependence, with its counterexample). A producer's axes that no axis of the target names are its own:
    it computes them over their whole extent.
    """
    sched = x.sched
    rel = sched.related(x, target)
    if rel is None:  # siblings: outputs that share loops through a tensor both read
        return _sibling_axes(x, target), {}
    producer, consumer = (x, target) if rel == "producer" else (target, x)
    path = nx.shortest_path(sched.graph, producer.tensor.name, consumer.tensor.name)
    m = {a: (a, 0, 0) for a in producer.tensor.axis}
    for p, c in zip(path, path[1:]):
        shifted, plain = _shift_map(sched.tensors[p], sched.tensors[c])
        step = (shifted or plain) if rel == "producer" else plain
        if step is None and rel != "producer":
            raise LoweringError(
                f"compute_at({x.name}, {target.name}): not supported: {c} reads {p} only at shifted or computed "
                f"positions (a halo, as in a stencil) inside {p}'s own loops, where only the current position is "
                f"computed; sharing loops needs a plain access like {_access(sched.tensors[p])}. Compute {x.name} "
                f"at root instead, "
                f"or place {target.name} in {x.name}'s loops (a producer placed in a stencil's loops computes the "
                f"halo)")
        if step is None:
            raise LoweringError(
                f"compute_at({x.name}, {target.name}): not supported: {c} reads {p} at computed positions (an "
                f"index that is not an axis plus a constant) or at different axes in different reads; sharing "
                f"loops needs accesses like {_access(sched.tensors[p])} or {_access(sched.tensors[p], 1)}. Compute "
                f"{x.name} at root instead")
        m = {a: (step[v][0], lo + step[v][1], hi + step[v][2]) for a, (v, lo, hi) in m.items() if v in step}
    bound = {a: v for a, (v, lo, hi) in m.items() if lo == hi == 0}
    if rel != "producer":
        return {v: a for a, v in bound.items()}, {}
    return bound, {a: Halo(v, lo, hi) for a, (v, lo, hi) in m.items() if not lo == hi == 0}


class WithinPlace:
    """A placed stage seen without its own splits of the axes its place fixes (`absorbed`, in the order they
    were made). In Halide a producer's split inside its compute_at region orders the region's points; here
    the place gives those axes their values (one value, or the target's tile, held at once), so such a
    split has nothing left to order: its loops are absorbed into the place, and the nest says so.

    A fusion of such a piece with an own axis (`fuse(io, jo)` where the place fixes i) keeps only its own
    part: the fixed piece is a loop that runs once inside the place (its values come from the place), so
    the fused loop is the own axis's loop (`alias`: io_jo -> jo), said in the source. Only where the fused
    axis is a plain loop (a leaf no later split or fusion takes, not unrolled, pipelined or persistent);
    otherwise nothing is absorbed and `Layout` refuses the split with its reason. Every other attribute is
    the stage's own."""

    def __init__(self, stage: Stage, fixed: set, config: dict):
        self._stage = stage
        origin = IndexMap(stage, config).origin
        consumed = {a for r in stage.relations for a in ((r.parent,) if isinstance(r, Split) else (r.outer, r.inner))}
        plain = {a for a in stage.leaves if a not in consumed and a not in stage.unrolled
                 and a not in stage.pipelines and a not in stage.persistent_axes}
        absorbed, self.alias = [], {}
        for r in stage.relations:
            if (origin[r.parent] if isinstance(r, Split) else origin[r.fused]) <= fixed:
                absorbed.append(r)
            elif isinstance(r, Fuse) and r.group is None and r.fused in plain:
                sides = [(a, b) for a, b in ((r.outer, r.inner), (r.inner, r.outer))
                         if origin[a] <= fixed and not origin[b] & fixed]
                if sides:
                    absorbed.append(r)
                    self.alias[r.fused] = sides[0][1]
        # what an absorbed relation made and no loop stands for (an aliased fusion's own piece is its loop)
        gone = {a for r in absorbed for a in ((r.outer, r.inner) if isinstance(r, Split) else
                                              () if r.fused in self.alias else (r.fused,))}
        if any(a in gone for r in stage.relations if r not in absorbed
               for a in ((r.parent,) if isinstance(r, Split) else (r.outer, r.inner))):
            absorbed, self.alias = [], {}  # a fixed axis's piece split or fused again otherwise: Layout refuses it
        self.absorbed = tuple(absorbed)
        self.relations = [r for r in stage.relations if r not in absorbed]
        self.leaves = [self.alias.get(a, a) for a in stage.leaves if not origin[a] <= fixed]

    def __getattr__(self, name):
        return getattr(self._stage, name)


def _plain_chain(sched, src: str, dst: str, x: Stage, target: Stage) -> dict:
    """src's axes -> dst's axes along the reads from src to dst, each a plain access `src[i, j]`."""
    path = nx.shortest_path(sched.graph, src, dst)
    m = {a: a for a in sched.tensors[src].axis}
    for p, c in zip(path, path[1:]):
        _, plain = _shift_map(sched.tensors[p], sched.tensors[c])
        if plain is None:
            raise LoweringError(
                f"compute_at({x.name}, {target.name}): the two share loops through {src}, which both read, but {c} "
                f"reads {p} only at shifted or computed positions; sharing loops needs plain accesses like "
                f"{_access(sched.tensors[p])} on the way. Compute {x.name} at root instead")
        m = {a: plain[v][0] for a, v in m.items() if v in plain}
    return m


def _sibling_axes(x: Stage, target: Stage) -> dict[IterVar, IterVar]:
    """For `x` placed in the loops of `target`, which neither reads nor is read by it (O beside its
    log-sum-exp, a loss beside its gradient): x's axes that follow target's, through the tensor both read
    (`Schedule.common_source`): an axis of it read plainly by both names one axis of each. x runs where a
    consumer would (after the rest of the loop), its other axes its own."""
    sched = x.sched
    src = sched.common_source(x, target)
    to_x = _plain_chain(sched, src, x.tensor.name, x, target)
    to_t = _plain_chain(sched, src, target.tensor.name, x, target)
    return {to_x[a]: to_t[a] for a in to_x if a in to_t and to_x[a] in x.tensor.axis}


def layout_of(stage: Stage, fixed: set, root: bool, config: dict, facts=()) -> Layout:
    """The stage's effective loops: its own schedule (without its splits of the axes its place fixes:
    `WithinPlace`), or the default one if it was never scheduled."""
    st = stage
    if not stage.touched:
        st = default_stage(stage, frozenset(fixed))
        st.attach = stage.attach
    elif fixed and (within := WithinPlace(stage, fixed, config)).absorbed:
        st = within
    return Layout(st, fixed, root, config, facts)


@dataclass(eq=False)
class Placed:
    """A stage in a kernel: its loops, and where it sits in its target's loop nest."""

    stage: Stage
    layout: Layout
    target: Placed | None = None
    level: int = -1                 # -1: the kernel's top (inside the grid); n: body of target's loop n
    bound: dict = field(default_factory=dict)       # x axis -> target axis
    halo: dict = field(default_factory=dict)        # x axis -> Halo: follows a target axis at shifted positions
    slide: Slide | None = None      # store_at: the halo axis whose window slides along the place's loop
    unslid: str = ""                # store_at outside the place that slides nothing: why (said in the source)
    producers: dict = field(default_factory=lambda: defaultdict(list))  # my level -> [Placed]
    consumers: dict = field(default_factory=lambda: defaultdict(list))
    caches: dict = field(default_factory=lambda: defaultdict(list))      # my level -> [cache Stage]

    online: list = field(default_factory=list)  # statistics computed in my reduction loop (online)

    @property
    def name(self) -> str:
        return self.stage.name


class Plan:
    """Kernels (root `Placed` in launch order) and the tensors memory must hold."""

    def __init__(self, sched: Schedule, config=None, outputs=None, facts=()):
        self.sched = sched
        self.config = resolve_config(sched.knobs, config)
        self.facts = tuple(facts)  # what isl may assume about sizes (single loops)
        # online(): each target's rewritten group (tilec.ir.online), and which target each statistic runs in
        self.online: dict[str, OnlineForm] = {}
        self.online_of: dict[str, Stage] = {}
        for st in sched.stages.values():
            if st.online_stats:
                try:
                    self.online[st.name] = online_form(st.tensor, [t.tensor for t in st.online_stats])
                except NotOnline as e:  # the primitive checked it; the compute cannot have changed
                    raise LoweringError(f"online({st.name}): {e}") from None
                for t in st.online_stats:
                    self.online_of[t.name] = st
        self._check_online(sched)
        self.kernel_of = {n: self._root(st).name for n, st in sched.stages.items() if st.attach != "inline"}
        out_names = [t.name for t in (outputs if outputs is not None else sched.outputs)]
        for c in sched.caches:
            if c.kind == "cache_read" and c.tensor.name in sched.stages and sched.stages[c.tensor.name].attach == "inline":
                raise LoweringError(f"{c.name} caches {c.tensor.name}, which is inlined (compute_inline): it has no "
                                    f"buffer to load tiles from, its expression is computed where it is read; drop "
                                    f"the cache_read or compute_root({c.tensor.name})")
        for name in out_names:
            if name in sched.stages and sched.stages[name].attach == "inline":
                raise LoweringError(f"{name} is listed as an output of the kernel, but it is inlined "
                                    f"(compute_inline), so it is never stored; compute_root({name}) or leave it "
                                    f"out of the outputs")
        for st in sched.stages.values():
            if st.store is not None and not (isinstance(st.attach, tuple) and st.attach[0] is st.store[0]):
                where = (f"computed at {st.attach[0].name}'s loops" if isinstance(st.attach, tuple) else
                         "inlined" if st.attach == "inline" else "computed at root")
                raise LoweringError(f"store_at({st.name}, {st.store[0].name}.{st.store[1].name}): {st.name} is {where}; "
                                    f"store_at keeps the values of a stage computed in {st.store[0].name}'s loops, at "
                                    f"its compute_at loop or outside it: compute_at({st.name}, {st.store[0].name}, ...) "
                                    f"too, or drop the store_at")
        self.stored = set(out_names)
        self.out_names = out_names
        self.scratch: set[str] = set()  # producers at an outer loop whose region is kept in memory (_place)
        for p, c in sched.graph.edges:
            if p in self.kernel_of and any(k != self.kernel_of[p] for k in self._reader_kernels(c)):
                self.stored.add(p)
        order = nx.DiGraph()
        order.add_nodes_from(dict.fromkeys(self.kernel_of.values()))
        for p, c in sched.graph.edges:  # a reader through inlined stages runs where they are evaluated
            kp = self.kernel_of.get(p)
            for kc in self._reader_kernels(c) if kp else ():
                if kc != kp:
                    order.add_edge(kp, kc)
        try:
            roots = list(nx.lexicographical_topological_sort(order, key=list(sched.stages).index))
        except nx.NetworkXUnfeasible as e:
            cycle = [a for a, _ in nx.find_cycle(order)]
            path = " -> ".join(f"{a}_kernel" for a in cycle + cycle[:1])
            raise LoweringError(f"the placements make two kernels need each other's results ({path}, each "
                                f"reading what the next computes); compute_root one of the stages involved") from e
        self.placed: dict[str, Placed] = {}
        self._regions: list[Placed] = []  # producers at an outer loop, with axes of their own
        self.kernels = [self._place(sched.stages[r], None, -1, {}) for r in roots]
        for p in self._regions:
            if not self._in_registers(p):
                # its region is more than one tile, or a reader reads it by other tiles: kept in memory, a
                # buffer of its shape the call allocates, written before its readers read it back
                self.scratch.add(p.name)
                self.stored.add(p.name)
        self.buffers = sorted(self.stored - set(out_names))

    @property
    def index_maps(self) -> dict[str, IndexMap]:
        """Stage name -> the split/fuse algebra of its loops (its layout's `IndexMap`, built once with it)."""
        return {name: p.layout.index for name, p in self.placed.items()}

    def kernel_name(self, root: str) -> str:
        """The name of the kernel whose root stage is `root`, after what it computes for the caller: the
        outputs it stores (`Y_kernel`), else the buffers it stores for later kernels, else its root."""
        outs = [n for n in self.out_names if self.kernel_of.get(n) == root]
        if not outs:
            outs = [n for n in sorted(self.stored) if self.kernel_of.get(n) == root]
        return "_".join(outs or [root]) + "_kernel"

    def call_facts(self, sizes: dict) -> tuple:
        """The facts a call's sizes add, for each split of the plan (of any stage, default schedules
        included) whose extent depends on sizes: `extent % factor == 0` where the factor divides it at
        `sizes` (its tiles need no mask), and `cdiv(extent, factor) == 1` where its outer loop runs once
        (a loop of no iterations stays a loop). A kernel lowers once per distinct set
        (tilec/runtime/kernel.py), in which those masks are dropped and those loops are no loops
        (`Layout`'s single leaves), as a tc.assume or a specialized size would have them."""
        out = {}

        def value(e):
            return substitute(e, lambda n: Const(self.config[n.knob_name], "int32") if isinstance(n, Knob) else None)

        for p in self.placed.values():
            for rel in p.layout.index.splits:
                if not any(isinstance(n, SizeVar) for n in walk(rel.parent.extent)):
                    continue
                try:
                    extent = evaluate(rel.parent.extent, sizes | self.config)
                except (KeyError, TilecError):
                    continue
                f = p.layout.index.factor(rel)
                parent = value(rel.parent.extent)  # knobs at their values: a fact is of sizes and ints
                if extent >= 1 and extent % f == 0:
                    fact = Binary("==", Binary("%", parent, Const(f, "int32")), Const(0, "int32"))
                    out.setdefault(size_text(fact), fact)
            for a in p.layout.loops:  # any loop (a split's outer, a fused one, a whole axis) that runs once
                if not any(isinstance(n, SizeVar) for n in walk(a.extent)):
                    continue
                try:
                    trips = evaluate(a.extent, sizes | self.config)
                except (KeyError, TilecError):
                    continue
                if trips == 1:
                    fact = Binary("==", value(a.extent), Const(1, "int32"))
                    out.setdefault(size_text(fact), fact)
        return tuple(out[k] for k in sorted(out))

    def _tile(self, p: Placed, axis: IterVar):
        """(factor, extent) where original `axis` of placed stage p is one tile over its whole extent (a split
        whose outer loop runs once, maybe through the loops p follows); None where loops run over it."""
        if axis in p.bound:
            return self._tile(p.target, p.bound[axis])
        lay = p.layout
        leaves = [leaf for leaf in lay.leaves if axis in lay.origin[leaf]]
        if any(lay.kind[leaf] not in ("single", "tile") for leaf in leaves):
            return None
        split = lay.index.split_of(axis)
        if split is None or [lay.kind.get(split.outer), lay.kind.get(split.inner)] != ["single", "tile"]:
            return None
        return lay.index.factor(split), size_text(axis.extent)

    def _in_registers(self, p: Placed) -> bool:
        """Whether producer p's region (at an outer loop of its consumer) is one tile that every reader in the
        kernel reads by the same tiles: then it stays in registers; else it goes through memory."""
        if p.halo:  # a stencil's window: its readers read it at shifted positions, other threads' elements
            return False
        own = [a for a in p.stage.tensor.axis if a not in p.bound]
        tiles = {a: self._tile(p, a) for a in own}
        if any(t is None for t in tiles.values()):
            return False
        if any(c.kind == "cache_read" and c.tensor is p.stage.tensor for c in self.sched.caches):
            return False
        kernel = self.kernel_of[p.name]
        for reader in self.sched.graph.successors(p.name):
            q = self.placed.get(reader)
            if q is None or self.kernel_of.get(reader) != kernel:
                if reader in self.sched.stages and self.sched.stages[reader].attach == "inline":
                    return False  # read through an inlined stage: at positions it computes
                continue
            for node in q.stage.tensor.loads():
                if node.tensor is p.stage.tensor:
                    for a, idx in zip(p.stage.tensor.axis, node.indices):
                        if a in tiles and (not isinstance(idx, IterVar) or self._tile(q, idx) != tiles[a]):
                            return False
        return True

    def _reader_kernels(self, name: str) -> set[str]:
        """The kernels that evaluate stage `name` (an inlined stage: those of its readers)."""
        if name in self.kernel_of:
            return {self.kernel_of[name]}
        return {k for c in self.sched.graph.successors(name) for k in self._reader_kernels(c)}

    def _root(self, st: Stage) -> Stage:
        seen = []
        if st.name in self.online_of:  # a statistic runs in its target's loop
            st = self.online_of[st.name]
        while isinstance(st.attach, tuple):
            seen.append(st.name)
            st = st.attach[0]
            if st.attach == "inline":
                raise LoweringError(f"{seen[-1]} is computed at {st.name}, which is inlined and has no loops")
            if st.name in seen:
                raise LoweringError(f"compute_at forms a cycle: {' -> '.join(seen + [st.name])}")
        return st

    def _level(self, placed: Placed, who: Stage, axis: IterVar) -> int:
        lay = placed.layout
        fixed = set(placed.bound) | set(placed.halo)
        if fixed and IndexMap(placed.stage, self.config).origin.get(axis, frozenset({None})) <= fixed:
            # an axis the target's own place gives its values (no loop of the target runs over it): every
            # iteration of it is inside one run of the target's body, so the place is that body's top
            return -1
        leaf = lay.resolve(axis)
        if leaf is not None and lay.kind.get(leaf) == "grid":
            return -1
        if leaf is not None and (leaf in lay.loops or leaf in lay.singles or lay.kind.get(leaf) == "tile"):
            # a tile axis is a vector dimension, no loop: a place at it is the loop around it (Halide's
            # compute_at at an innermost xi computes per point what that loop's tile computes at once)
            return lay.level_of_leaf(leaf)
        where = [a.name for a in lay.grid + lay.loops]
        raise MisplacedError(
            f"compute_at({who.name}, {placed.name}.{axis.name}): {axis.name} is a tile axis (a vector dimension, "
            f"not a loop) or not a loop of {placed.name}'s kernel",
            f"; place {who.name} at one of {', '.join(f'{placed.name}.{w}' for w in where) or 'none (compute_root)'}",
            stage=who, target=placed.stage)

    def _place(self, stage: Stage, target: Placed | None, level: int, bound: dict, halo=None) -> Placed:
        halo = halo or {}
        lay = layout_of(stage, set(bound) | set(halo), target is None, self.config, self.facts)
        me = Placed(stage, lay, target, level, bound, halo)
        self.placed[stage.name] = me
        for c in self.sched.caches:
            if c.kind == "cache_read" and isinstance(c.attach, tuple) and c.attach[0] is stage:
                me.caches[self._level(me, c, c.attach[1])].append(c)
            elif c.kind == "cache_write" and isinstance(c.attach, tuple) and c.attach[0] is stage:
                self._check_cache_write(c, me)
        for other in self.sched.stages.values():
            if other.name in self.online_of:
                continue  # placed in its target's loop below, whatever its own compute_at said
            if isinstance(other.attach, tuple) and other.attach[0] is stage:
                lvl = self._level(me, other, other.attach[1])
                producer = self.sched.related(other, stage) == "producer"
                bound, halo = bound_axes(other, stage)
                place = lay.resolve(other.attach[1])
                if lay.kind.get(place) == "tile":  # the loop around it: the last before it, one that runs once
                    around = [a for a in lay.leaves[:lay.leaves.index(place)]  # too (at sizes where the loop
                              if lay.kind[a] in ("serial", "unroll", "single")]  # does, it still holds the place)
                    place = around[-1] if around else None
                follows = bound | {axis: h.target for axis, h in halo.items()}
                late = {axis: lay.inner_loop(taxis, place) for axis, taxis in follows.items()}
                late = {axis: loop for axis, loop in late.items() if loop is not None}
                if late and not producer:
                    axis, loop = next(iter(late.items()))
                    raise MisplacedError(
                        f"compute_at({other.name}, {stage.name}): {other.name}'s axis {axis.name} follows "
                        f"{stage.name}'s loop {loop.name}, which runs inside the place chosen; place {other.name} at "
                        f"{stage.name}.{loop.name} or further in", "", stage=other, target=stage, style="listed")
                # a producer at an outer loop (Halide's compute_at): the axes that follow loops inside the
                # place are its own, over their whole extent (its own loops): it computes the region that
                # one iteration of the place reads
                child = self._place(other, me, lvl, {a: t for a, t in bound.items() if a not in late},
                                    {a: h for a, h in halo.items() if a not in late})
                if other.store is not None:
                    self._store(child, other)
                if producer and any(a not in child.bound for a in other.tensor.axis):
                    self._regions.append(child)
                (me.producers if producer else me.consumers)[lvl].append(child)
        if stage.name in self.online:
            self._place_online(me)
        return me

    def _store(self, child: Placed, stage: Stage) -> None:
        """store_at(stage, T.axis) with stage computed at T's loop: where T's loop slides a halo window, the
        producer computes each iteration's new values alone (`Slide`); else it is computed as without it,
        and `unslid` says why (the values are the same either way; only the work differs)."""
        target, axis = stage.store  # target is child's (checked in __init__)
        me = child.target
        level = self._level(me, stage, axis)
        if level > child.level:
            raise LoweringError(f"store_at({stage.name}, {target.name}.{axis.name}): {axis.name} runs inside "
                                f"the loop {stage.name} is computed at ({stage.attach[1].name}); a stage is stored "
                                f"at its compute_at loop or outside it, where its values outlive one computation")
        if level == child.level:
            return  # stored where computed: what compute_at alone does
        lay = me.layout
        loop = lay.loops[child.level] if child.level >= 0 else None
        if loop is None or lay.kind[loop] != "serial":
            child.unslid = (f"{stage.name} is computed at {'the top of the program' if loop is None else f'loop {loop.name}'}"
                            f", no serial loop, so nothing slides")
            return
        for a, h in child.halo.items():
            if _advances(lay, h.target, loop):
                child.slide = Slide(a, loop)
                return
        child.unslid = (f"loop {loop.name} advances no axis {stage.name} is read shifted along "
                        f"({', '.join(h.target.name for h in child.halo.values()) or 'none'}) by one block per "
                        f"iteration, so nothing slides")

    def _place_online(self, me: Placed) -> None:
        """The statistics of `me`'s online loop: each placed in its innermost loop (before its own update),
        all of its axes following `me`'s (tilec.ir.online's mapping), no loops of their own."""
        form = self.online[me.name]
        if not me.stage.tensor.is_reduction:
            return
        level = len(me.layout.loops) - 1
        for t in form.stats:
            st = self.sched.stages[t.name]
            bound = dict(form.members[t.name].axes)
            lay = Layout(default_stage(st, frozenset(bound)), set(bound), False, self.config, self.facts)
            child = Placed(st, lay, me, level, bound)
            self.placed[st.name] = child
            me.online.append(child)

    def _check_online(self, sched: Schedule) -> None:
        """What the online rewrite needs of the schedule (its algebra is checked on the compute): the
        elementwise stages it looks through are inlined, and nothing is placed in a statistic's loops."""
        for target, form in self.online.items():
            # in the group's order (not a set's, which differs between processes): one culprit named alike
            members = list(dict.fromkeys(t.name for t in (form.target, *form.stats)))
            for name in members:
                for node in walk(sched.tensors[name].body):
                    if not isinstance(node, Load) or node.tensor.name in members or node.tensor.is_placeholder:
                        continue
                    t = node.tensor
                    if not t.is_reduction and _reads_any(t, form.stats) and sched.stages[t.name].attach != "inline":
                        raise LoweringError(f"online({target}): {t.name} reads a statistic of the loop "
                                            f"({', '.join(s.name for s in form.stats)}), whose value changes while "
                                            f"the loop runs, so the online form computes {t.name}'s expression "
                                            f"in {target}'s loop: compute_inline({t.name})")
            for st in sched.stages.values():
                if isinstance(st.attach, tuple) and st.attach[0].name in self.online_of:
                    stat = st.attach[0].name
                    raise LoweringError(f"{st.name} is computed at {stat}'s loop, but {stat} runs in {target}'s "
                                        f"loop (online), with no loops of its own; place {st.name} at "
                                        f"{self.online_of[stat].name} instead")
            for c in sched.caches:
                if isinstance(c.attach, tuple) and c.attach[0].name in self.online_of:
                    raise LoweringError(f"{c.name} is placed in a loop of {c.attach[0].name}, which runs in "
                                        f"{target}'s loop (online); place it in {target}'s loops")

    @property
    def rewritten(self) -> set[tuple[str, str]]:
        """(statistic, member) pairs of every online group: the dependences the online algebra replaces
        (a member reads the running statistic, rescaled), which legality does not check as written."""
        out = set()
        for form in self.online.values():
            names = [t.name for t in (form.target, *form.stats)]
            out |= {(s.name, b) for s in form.stats for b in names if b != s.name}
        return out

    def _check_cache_write(self, c: Stage, placed: Placed) -> None:
        st, axis = c.attach
        if not st.tensor.is_reduction:
            raise LoweringError(f"cache_write({st.name}, 'local'): {st.name} is not a reduction; there is no "
                                f"accumulator to keep in registers")
        # the split inners of st's own leaves (st untouched has none, and its layout is a default one's)
        inner = placed.layout.index.split_inners() if placed.layout.stage is st else frozenset()
        legal = []
        for a in st.leaves:
            if a.kind == "reduce":
                break
            if a not in inner:
                legal.append(a)
        if axis not in legal:
            raise MisplacedError(f"{c.name}.compute_at({st.name}, {axis.name}): the accumulator must live outside "
                                 f"the reduction loops", f"; place it at one of {', '.join(a.name for a in legal)}",
                                 stage=c, target=st)
