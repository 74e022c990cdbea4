"""The schedule of every statement as an isl map into one anonymous time space, read off the
placement plan (the same plan the lowering emits).

A time vector is: [kernel, grid coordinates (padded to the same count in every kernel), then per loop
level a position and the loop's value, then the tile coordinates]. A stage placed in another's loop
starts with that stage's vector up to the loop, then its position among what is placed there
(producers, the loop's own body, consumers). Where a placement does not fix a loop's value (a stage
recomputed in every iteration of a loop it does not depend on) that coordinate is free in its range.
A fused axis is kept as its components, which preserves the lexicographic order without the
non-affine product of a symbolic extent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from tilec.poly.masks import facts_set
from tilec.poly.model import NotAffine, PolyModel, aff

_VAR = re.compile(r"\b_a\d+\b")


_HALO = re.compile(r"\b_h\d+\b")


@dataclass(frozen=True)
class Entry:
    """One time coordinate: an affine value, or free in [0, ext); `label` says which loop it is. A value
    may use existential variables `_hN` (a stencil's shift, `Placed.halo`) bounded by `exists`."""

    value: str | None
    ext: str | None = None
    label: str = ""
    exists: tuple[str, ...] = ()


def _const(n: int, label: str = "") -> Entry:
    return Entry(str(n), None, label)


class TimeMaps:
    """Builds `maps[stmt] : stmt instance -> time` for every statement of `model` under `plan` (a
    `tilec.plan.placement.Plan`, handed down: the analysis of the schedule lives above this package)."""

    def __init__(self, model: PolyModel, plan, facts=()):
        self.model, self.plan, self.config = model, plan, plan.config
        # the sizes the program runs at: a loop that runs once there (a single leaf) has no time coordinate,
        # which is exact only under the facts that make it run once
        self.facts = facts_set(model.ctx, model.pre, list(facts))
        self.approx: set[str] = set()  # stages whose loop values isl cannot express exactly
        self.halo_vars: dict = {}  # (stage, axis) -> the existential of its shift (Placed.halo)
        self.names = {p.name: {a: f"_a{n}" for n, a in enumerate(list(p.stage.tensor.axis)
                                                                   + list(p.stage.tensor.reduce_axis))}
                      for p in plan.placed.values()}
        self.leaf = {name: self._leaf_entries(p) for name, p in plan.placed.items()}
        self.kernel_index = {}
        for k, root in enumerate(plan.kernels):
            for p in self._walk(root):
                self.kernel_index[p.name] = k
        self.G = max((len(self._grid(r)) for r in plan.kernels), default=0)
        vectors: dict[str, list[Entry]] = {}
        for p in plan.placed.values():
            for stmt in model.stage_stmts.get(p.name, []):
                vectors[stmt.name] = self._vector(p, stmt.kind)
        self.D = max((len(v) for v in vectors.values()), default=1)
        self.labels = {}
        self.free: dict[str, set[int]] = {}  # time dims a statement does not fix (it is recomputed along them)
        self.maps: dict[str, isl.Map] = {}
        for name, vec in vectors.items():
            vec = vec + [_const(0)] * (self.D - len(vec))
            self.labels[name] = [e.label for e in vec]
            self.maps[name] = self._map(model.stmts[name], vec)
        # isl.md pitfall 1: lexicographic comparisons silently pair nothing across different time
        # spaces, which would make any schedule look legal. Every map lands in one anonymous space.
        spaces = {m.get_space().range().to_str() for m in self.maps.values()}
        assert len(spaces) <= 1 and all(m.dim(isl.dim_type.out) == self.D for m in self.maps.values()), spaces

    # -- the plan as entries ----------------------------------------------------------------------
    def _walk(self, p):
        yield p
        for side in (p.producers, p.consumers):
            for lst in side.values():
                for q in lst:
                    yield from self._walk(q)
        yield from p.online

    def _leaf_entries(self, p) -> dict:
        """Each axis of p's layout (original, made on the way, leaf) as entries in p's variables: one per
        component (a fused axis is kept as its components), read off the layout's index map."""
        index, names = p.layout.index, self.names[p.name]
        entry: dict = {}
        for a in index.parts:
            for q in index.parts[a]:
                if q not in entry:
                    entry[q] = self._entry(p, index, q, names, entry)
        return {a: [entry[q] for q in parts] for a, parts in index.parts.items()}

    def _entry(self, p, index, q, names: dict, entry: dict) -> Entry:
        """Component q (an original axis, or an axis a split made) as an affine value of p's variables, or
        free where isl cannot express it (then p is approximate): a split of a fused axis whose inner
        components' extents are not int literals (an original axis of constant extent or a split's
        factor), or a split of a value made from such a split (`entry`: the components before q)."""
        split = index.made_by(q)
        if split is None:
            return Entry(names[q], aff(q.extent, {}, self.config), q.name)
        f = str(index.factor(split))
        parts = index.parts[split.parent]
        try:
            if any(entry[r].value is None for r in parts) or not all(self._literal(index, r) for r in parts[1:]):
                raise NotAffine(split.parent.name)
            value = aff(index.forward[q], names, self.config)
        except NotAffine:
            self.approx.add(p.name)
            return Entry(None, f if q is split.inner else None, q.name)
        return Entry(value, f if q is split.inner else aff(index.extent[q], {}, self.config), q.name)

    def _literal(self, index, q) -> bool:
        """Whether component q's extent is an int literal: a split's factor or an original axis's constant."""
        made = index.made_by(q)
        return q is made.inner if made is not None else aff(q.extent, {}, self.config).isdigit()

    def _grid(self, p) -> list[Entry]:
        out = []
        for a in p.layout.grid:
            out += [Entry(e.value, e.ext, f"{p.name}.{e.label} (grid)") for e in self.leaf[p.name][a]]
        return out

    def _items(self, p, level: int) -> list:
        """What runs in p's loop `level`, in order: producers, p's own part, consumers."""
        own = ["INIT", "INNER"] if (p.stage.tensor.is_reduction and level == p.layout.first_reduce - 1) \
            else ["INNER"]
        if p.online and level == len(p.layout.loops) - 1:  # online statistics: updated before p's own update
            own = own[:-1] + list(p.online) + own[-1:]
        return list(p.producers.get(level, [])) + own + list(p.consumers.get(level, []))

    def _pos(self, p, level: int, what) -> Entry:
        items = self._items(p, level)
        idx = next(n for n, it in enumerate(items) if it is what or (isinstance(it, str) and it == what))
        return _const(idx, f"position in {p.name}'s loop {level}")

    def _loop(self, p, n: int) -> list[Entry]:
        a = p.layout.loops[n]
        return [Entry(e.value, e.ext, f"{p.name}.{e.label}") for e in self.leaf[p.name][a]]

    def _halo_var(self, p, axis) -> str:
        return self.halo_vars.setdefault((p.name, axis), f"_h{len(self.halo_vars)}")

    def _translate(self, entries: list[Entry], src, dst) -> list[Entry]:
        """Entries in src's variables rewritten in dst's (dst follows src through dst.bound). An axis dst
        follows at shifted positions (dst.halo: dst's element x is computed where src's axis is x - h, for
        each shift h in [lo, hi] within src's extent) is written with an existential `_hN` for the shift."""
        rename = {self.names[src.name][ta]: self.names[dst.name][xa] for xa, ta in dst.bound.items()}
        where: dict[str, tuple[str, ...]] = {}
        for xa, h in dst.halo.items():
            var, hv = self.names[dst.name][xa], self._halo_var(dst, xa)
            ta = self.names[src.name][h.target]
            rename[ta] = f"({var} - {hv})"
            ext = aff(h.target.extent, {}, self.config)
            where[ta] = (f"{h.lo} <= {hv} <= {h.hi}", f"0 <= {var} - {hv} < {ext}")
        if dst.slide is not None:
            # store_at's sliding window: after the first iteration of the loop, only the values past the last
            # window (shift hi); in the first (the loop's value 0), the whole window
            h, ta = dst.halo[dst.slide.axis], self.names[src.name][dst.halo[dst.slide.axis].target]
            (loop,) = self.leaf[src.name][dst.slide.loop]
            if loop.value is None or set(_VAR.findall(loop.value)) - set(rename):
                raise NotAffine(f"the loop {dst.slide.loop.name} {dst.name} slides along")
            first = _VAR.sub(lambda m: rename.get(m.group(0), m.group(0)), loop.value)
            where[ta] += (f"({self._halo_var(dst, dst.slide.axis)} = {h.hi} or {first} = 0)",)
        out = []
        for e in entries:
            if e.value is None:
                out.append(e)
                continue
            used = set(_VAR.findall(e.value))
            if used - set(rename):
                out.append(Entry(None, e.ext, e.label))  # not fixed by dst: recomputed for every value
            else:
                def sub(text: str) -> str:
                    return _VAR.sub(lambda m: rename[m.group(0)], text)
                exists = tuple(sub(x) for x in e.exists) + tuple(x for ta in sorted(used) for x in where.get(ta, ()))
                out.append(Entry(sub(e.value), e.ext, e.label, exists))
        return out

    def _base(self, p) -> list[Entry]:
        if p.target is None:
            return [_const(self.kernel_index[p.name], "kernel")]
        t = p.target
        prefix = self._base(t) + self._grid_padded(t)
        if p.level >= 0:
            prefix.append(self._pos(t, -1, "INNER"))
            for n in range(p.level + 1):
                prefix += self._loop(t, n)
                if n < p.level:
                    prefix.append(self._pos(t, n, "INNER"))
        return self._translate(prefix, t, p) + [self._pos(t, p.level, p)]

    def _grid_padded(self, p) -> list[Entry]:
        if p.target is not None:
            return []
        g = self._grid(p)
        return g + [_const(0)] * (self.G - len(g))

    def _tiles(self, p, axis) -> list[Entry]:
        if axis in p.bound:
            return self._translate(self._tiles(p.target, p.bound[axis]), p.target, p)
        out = []
        for leaf in p.layout.tiles:
            if axis in p.layout.index.origin[leaf]:
                out += self.leaf[p.name][leaf]
        return out

    def prefix_length(self, p, level: int) -> int:
        """How many time coordinates of p's statements fix an iteration of p's loop `level` (-1: the
        program): its base, the grid, and the loops down to `level` with their positions."""
        n = len(self._base(p)) + len(self._grid_padded(p))
        if level >= 0:
            n += 1 + sum(len(self._loop(p, m)) for m in range(level + 1)) + level
        return n

    def _vector(self, p, kind: str) -> list[Entry]:
        if kind == "init" and p.target is not None and p in p.target.online:
            # an online statistic starts where its target's accumulator does, before the loop
            return self._translate(self._vector(p.target, "init"), p.target, p)
        vec = self._base(p) + self._grid_padded(p)
        lay = p.layout
        last = lay.first_reduce - 1 if kind == "init" else len(lay.loops) - 1
        vec.append(self._pos(p, -1, "INIT" if kind == "init" and last == -1 else "INNER"))
        for n in range(last + 1):
            vec += self._loop(p, n)
            vec.append(self._pos(p, n, "INIT" if kind == "init" and n == last else "INNER"))
        axes = p.stage.tensor.axis if kind == "init" else list(p.stage.tensor.axis) + list(p.stage.tensor.reduce_axis)
        for a in axes:
            vec += self._tiles(p, a)
        return vec

    def _map(self, stmt, vec: list[Entry]) -> isl.Map:
        cons = []
        have = set(stmt.names.values())
        free = self.free.setdefault(stmt.name, set())
        exists: dict[str, None] = {}
        for n, e in enumerate(vec):
            if e.value is not None and not set(_VAR.findall(e.value)) <= have:
                e = Entry(None, e.ext, e.label)  # e.g. a reduce loop seen from the init statement: any value
            if e.value is None or _HALO.search(e.value):
                # free, or one of the iterations whose window holds the element: a recomputation
                free.add(n)
            if e.value is not None:
                exists.update(dict.fromkeys(e.exists))
                cons.append(f"_t{n} = {e.value}")
            elif e.ext is not None:
                cons.append(f"0 <= _t{n} < {e.ext}")
            else:
                cons.append(f"_t{n} >= 0")
        dims = ", ".join(f"_t{n}" for n in range(len(vec)))
        body = " and ".join(cons)
        if exists:
            names = sorted({v for x in exists for v in _HALO.findall(x)}, key=lambda v: int(v[2:]))
            body = f"exists ({', '.join(names)} : {' and '.join(list(exists) + cons)})"
        text = f"{self.model.pre}{{ {stmt.name}[{stmt.vars}] -> [{dims}] : {body} }}"
        m = isl.Map.read_from_str(self.model.ctx, text)
        if self.facts is not None:
            m = m.intersect_params(self.facts)
        return m.intersect_domain(isl.Set.from_union_set(self.model.domain.extract_set(m.get_space().domain())))
