"""One index map per stage: the algebra of its split/fuse relations, derived once, here.

A stage's loops come from its original axes through its relations (`split`: i -> (i // f, i % f);
`fuse`: (a, b) -> a * extent(b) + b; `swizzle`: the same pairs in grouped order). `IndexMap(stage,
config)` walks them once and says, for every axis of the stage (an original axis, one a relation made
on the way, a leaf: a loop variable):

- `origin[a]`: the original axes `a` is made from;
- `forward[a]`: its value as a `tilec.ir` expression of the original axes (what isl's time maps read,
  tilec/poly/timemap.py); `parts[a]`: the components a fused axis is kept as (lexicographic order
  without the product of a symbolic extent);
- `extent[a]`: its extent, knobs at their values and constants computed;
- `top(a)` and `overruns(a)`: the largest value its rebuilt value takes (sizes unknown: None), and
  whether that passes its extent: a split by a factor that does not divide the axis makes its last tile
  run past the end;
- `rebuilt(zero)`: every axis as an expression of the leaves (what the lowering emits), its guards (the
  conditions a non-dividing split of an inner axis adds: `inner < f`, where the inner axis was split again
  by a factor that does not divide it) and the start of each block `outer * f` whose inner axis is a leaf;
  leaves in `zero` (loops that run once) stand for 0;
- which relation made an axis, consumed it, or split it (`made_by`, `split_of`, `tile_split`,
  `splits_over`).

The placement (tilec/plan/placement.py) builds one per stage's `Layout` (`layout.index`,
`plan.index_maps[name]`); the time maps, the masks (tilec/poly/masks.py) and the lowering read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.errors import ArgumentError
from tilec.ir.expr import Binary, Const, Expr, IterVar, evaluate, substitute, walk
from tilec.ir.knob import Knob, factor_value
from tilec.schedule.schedule import Fuse, Split


def _int(n: int) -> Const:
    return Const(n, "int32")


def _factor(f) -> Expr:
    """A split's factor or a swizzle's group as an expression: an int constant, or the knob itself."""
    return f if isinstance(f, Knob) else _int(f)


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _fold(e: Expr, config: dict) -> Expr:
    """`e` with knobs at their values in `config` and its constant sub-expressions computed."""
    e = substitute(e, lambda n: _int(config[n.knob_name]) if isinstance(n, Knob) else None)

    def fold(x: Expr) -> Expr:
        try:
            return _int(evaluate(x, {}))
        except (ArgumentError, KeyError):
            pass
        return Binary(x.op, fold(x.a), fold(x.b)) if isinstance(x, Binary) else x

    return fold(e)


@dataclass(frozen=True)
class Rebuilt:
    """The stage's axes as expressions of its leaves (`IndexMap.rebuilt`).

    `value[a]`: a's value (a leaf is itself, or 0 where it runs once). `guards[a]`: conditions inside
    a's value that may fail without a's own value passing its extent (each `inner < f`). `block[a]`, for
    an axis split with a leaf as inner axis: the start of the block of f consecutive values that one
    value of the outer axis covers (`outer * f`, 0 where the outer runs once). `groups[fused]`, for a swizzled
    axis: the values its pair is made from (`Grouping`), each one node inside `value`, so code can name them once."""

    value: dict
    guards: dict
    block: dict
    groups: dict


@dataclass(frozen=True)
class Grouping:
    """A swizzle's values (`IndexMap._grouped`): `per_group` = group * extent(inner) fused values per group,
    `first` = fused // per_group * group its first outer value, `size` = min(extent(outer) - first, group)
    outer values in it (the last group may be smaller); outer = first + fused % per_group % size, inner =
    fused % per_group // size."""

    per_group: Expr
    first: Expr
    size: Expr


class IndexMap:
    """The split/fuse algebra of `stage`'s axes under `config` (knob values). See the module's text."""

    def __init__(self, stage, config: dict):
        self.stage, self.config = stage, config
        self.originals: tuple[IterVar, ...] = tuple(stage.tensor.axis) + tuple(stage.tensor.reduce_axis)
        self.leaves: tuple[IterVar, ...] = tuple(stage.leaves)
        self.relations: tuple[Split | Fuse, ...] = tuple(stage.relations)
        self.splits = tuple(r for r in self.relations if isinstance(r, Split))
        self.fuses = tuple(r for r in self.relations if isinstance(r, Fuse))
        self._made_by: dict[IterVar, Split | Fuse] = {}
        self._consumed_by: dict[IterVar, Split | Fuse] = {}
        self.origin: dict[IterVar, frozenset] = {a: frozenset({a}) for a in self.originals}
        self.forward: dict[IterVar, Expr] = {a: a for a in self.originals}
        self.parts: dict[IterVar, tuple[IterVar, ...]] = {a: (a,) for a in self.originals}
        self.extent: dict[IterVar, Expr] = {a: _fold(a.extent, config) for a in self.originals}
        # the original axes each relation rebuilds, in the order the relations were applied
        self.scheduled: list[frozenset] = []
        for rel in self.relations:
            if isinstance(rel, Split):
                self._consumed_by[rel.parent] = rel
                made, origin = (rel.outer, rel.inner), self.origin[rel.parent]
                f = _factor(rel.factor)
                self.forward[rel.outer] = Binary("//", self.forward[rel.parent], f)
                self.forward[rel.inner] = Binary("%", self.forward[rel.parent], f)
                for a in made:
                    self.parts[a] = (a,)
            else:
                self._consumed_by[rel.outer] = self._consumed_by[rel.inner] = rel
                made, origin = (rel.fused,), self.origin[rel.outer] | self.origin[rel.inner]
                self.parts[rel.fused] = self.parts[rel.outer] + self.parts[rel.inner]
                self.forward[rel.fused] = self._horner(self.parts[rel.fused])
            for a in made:
                self._made_by[a] = rel
                self.origin[a] = origin
                self.extent[a] = _fold(a.extent, config)
            self.scheduled.append(origin)
        self._leaves = frozenset(self.leaves)
        self._top: dict[IterVar, int | None] = {}
        self._rebuilt: dict[frozenset, Rebuilt] = {}

    def _horner(self, parts) -> Expr:
        """A fused axis's value from its components: ((p0 * e1 + p1) * e2 + p2) ..., e_k their extents."""
        value = self.forward[parts[0]]
        for p in parts[1:]:
            value = Binary("+", Binary("*", value, self.extent[p]), self.forward[p])
        return value

    # -- which relation made, consumed or split an axis --------------------------------------------
    def made_by(self, axis: IterVar) -> Split | Fuse | None:
        """The relation that made `axis`; None for an original axis."""
        return self._made_by.get(axis)

    def split_of(self, axis: IterVar) -> Split | None:
        """The split of `axis` (whose parent it is), or None."""
        rel = self._consumed_by.get(axis)
        return rel if isinstance(rel, Split) else None

    def tile_split(self, axis: IterVar) -> Split | None:
        """The split whose inner axis `axis` is, or None."""
        rel = self._made_by.get(axis)
        return rel if isinstance(rel, Split) and rel.inner is axis else None

    def split_inners(self) -> frozenset:
        """The inner axes of the stage's splits."""
        return frozenset(r.inner for r in self.splits)

    def splits_over(self, axis: IterVar) -> tuple[Split, ...]:
        """The splits of a value made from original `axis`: of it, of what it was split into, or of a fusion
        with it, in the order they were applied. Each may leave a partial last tile over `axis`."""
        return tuple(r for r in self.splits if axis in self.origin[r.parent])

    def factor(self, split: Split) -> int:
        """The int a split's factor is under the config."""
        return factor_value(split.factor, self.config)

    # -- the largest values ----------------------------------------------------------------------
    def _const_extent(self, a: IterVar) -> int | None:
        try:
            return evaluate(a.extent, self.config)
        except (ArgumentError, KeyError):
            return None

    def top(self, axis: IterVar) -> int | None:
        """The largest value `axis`'s value, rebuilt from the leaves, can take (None: not known before the
        sizes are): a leaf's extent - 1; a split's parent top(outer) * f + top(inner); a fused axis's outer
        top(fused) // extent(inner), its inner min(top(fused), extent(inner) - 1)."""
        if axis not in self._top:
            self._top[axis] = self._largest(axis)
        return self._top[axis]

    def _largest(self, axis: IterVar) -> int | None:
        rel = self._consumed_by.get(axis)
        if isinstance(rel, Split):
            o, i = self.top(rel.outer), self.top(rel.inner)
            return None if o is None or i is None else o * self.factor(rel) + i
        if isinstance(rel, Fuse):
            fused, ext = self.top(rel.fused), self._const_extent(rel.inner)
            if fused is None or ext is None:
                return None
            return fused // ext if axis is rel.outer else min(fused, ext - 1)
        ext = self._const_extent(axis)
        return None if ext is None else ext - 1

    def overruns(self, axis: IterVar) -> bool:
        """Whether `axis`'s rebuilt value may reach its extent (or that is not known before the sizes are):
        a split by a factor that does not divide it makes the last tile run past it."""
        top, ext = self.top(axis), self._const_extent(axis)
        return top is None or ext is None or top >= ext

    # -- every axis from the leaves ----------------------------------------------------------------
    def rebuilt(self, zero=frozenset()) -> Rebuilt:
        """Every axis as an expression of the leaves, leaves in `zero` (loops that run once) at 0; its
        guards and block starts (see `Rebuilt`)."""
        zero = frozenset(zero)
        if zero not in self._rebuilt:
            self._rebuilt[zero] = self._rebuild(zero)
        return self._rebuilt[zero]

    def _rebuild(self, zero: frozenset) -> Rebuilt:
        value: dict[IterVar, Expr] = {a: _int(0) if a in zero else a for a in self.leaves}
        guards: dict[IterVar, tuple] = {a: () for a in self.leaves}
        block: dict[IterVar, Expr] = {}
        groups: dict[IterVar, Grouping] = {}
        for rel in reversed(self.relations):
            if isinstance(rel, Split):
                o, i, f = value[rel.outer], value[rel.inner], _factor(rel.factor)
                value[rel.parent] = i if _is_zero(o) else Binary("+", Binary("*", o, f), i)
                if rel.inner in self._leaves:
                    block[rel.parent] = _int(0) if _is_zero(o) else Binary("*", o, f)
                guards[rel.parent] = guards[rel.outer] + guards[rel.inner]
                if rel.inner not in self._leaves and self.overruns(rel.inner):
                    guards[rel.parent] += (Binary("<", i, f),)
                continue
            fused = value[rel.fused]
            if rel.group is not None:
                groups[rel.fused], value[rel.outer], value[rel.inner] = self._grouped(rel, fused)
            else:
                value[rel.outer] = Binary("//", fused, rel.inner.extent)
                value[rel.inner] = Binary("%", fused, rel.inner.extent)
            guards[rel.outer] = guards[rel.inner] = guards[rel.fused]
        return Rebuilt(value, guards, block, groups)

    def linear(self, axis: IterVar, leaves, zero=frozenset()) -> tuple[Expr, dict] | None:
        """`axis`'s rebuilt value (`rebuilt(zero)`) as `rest + sum(c * leaf)` over `leaves`, each c an int under
        the config, `rest` an expression of the other leaves; None where a leaf is not linear there (inside a
        `//`, a `%` or a product with another leaf: a fusion's pieces), or where no leaf makes `axis` (its
        place gives its values: `WithinPlace`). A stencil's window over a target axis
        whose block is several tile dims reads it (`KernelBuilder.window`): the values run from `rest` to
        `rest + sum(c * (extent - 1))`."""
        track = frozenset(leaves)
        const = {}  # sub-expressions that are a known int (a factor, a knob at its value)

        def lin(e: Expr) -> tuple[Expr, dict] | None:
            if e in track:
                return _int(0), {e: 1}
            if not any(n in track for n in walk(e)):
                return e, {}
            if not isinstance(e, Binary) or e.op not in ("+", "*"):
                return None
            if e.op == "+":
                a, b = lin(e.a), lin(e.b)
                if a is None or b is None:
                    return None
                coef = dict(a[1])
                for k, v in b[1].items():
                    coef[k] = coef.get(k, 0) + v
                rest = b[0] if _is_zero(a[0]) else a[0] if _is_zero(b[0]) else Binary("+", a[0], b[0])
                return rest, coef
            for side, other in ((e.b, e.a), (e.a, e.b)):
                if any(n in track for n in walk(side)):
                    continue
                try:
                    k = const[side] if side in const else evaluate(side, self.config)
                except (ArgumentError, KeyError):
                    return None
                const[side] = k
                inner = lin(other)
                if inner is None:
                    return None
                rest = inner[0] if _is_zero(inner[0]) else Binary("*", inner[0], side)
                return rest, {leaf: c * k for leaf, c in inner[1].items()}
            return None

        value = self.rebuilt(zero).value
        return lin(value[axis]) if axis in value else None  # (an axis a place fixes has no value here)

    @staticmethod
    def _grouped(rel: Fuse, fused: Expr) -> tuple[Grouping, Expr, Expr]:
        """The (outer, inner) pair a swizzled axis's value stands for, and the values they are made from:
        programs in groups of `group` outer values, each group running down its inner values (Triton's
        GROUP_M order; the last group may be smaller)."""
        group = _factor(rel.group)
        per_group = Binary("*", group, rel.inner.extent)
        first = Binary("*", Binary("//", fused, per_group), group)
        size = Binary("min", Binary("-", rel.outer.extent, first), group)
        within = Binary("%", fused, per_group)
        return (Grouping(per_group, first, size), Binary("+", first, Binary("%", within, size)),
                Binary("//", within, size))
