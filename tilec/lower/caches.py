"""cache_read emission, a part of `KernelBuilder` (builder.py): a cache_read placed at a stage's loop
loads there the tiles of the cached tensor that its readers use (`emit_cache`), through a tensor
descriptor where it asks for tma; a reader computed further in gets its tile where every index of it is
known at that place (`_hoisted_axis`), and its own load later finds that tile (`shared_load`). A cache
placed where a tile is not yet known is refused with a `LoweringError` that names the loop to use.
"""

from __future__ import annotations

from tilec.errors import LoweringError
from tilec.ir.expr import IterVar, walk
from tilec.ir.knob import Knob, factor_value
from tilec.lower import code as c
from tilec.lower.nest import Assign, Comment
from tilec.lower.values import AxisVal
from tilec.plan.placement import Placed
from tilec.schedule.schedule import Stage


class CacheReads:
    """The cache_read part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def emit_cache(self, c: Stage, x: Stage, level: int, out: list) -> None:
        """A cache_read placed here (x's loop `level`): load now the tiles of the cached tensor that its
        readers use. A reader computed further in (placed in x's loops, directly or through others) gets its
        tile here when every index of it is known here: the axes it takes from x's loops down to this one,
        and its own axes where each is one tile over its whole extent (no loop of its own runs over them);
        its load later finds that tile (the same elements: `shared_load`)."""
        saved, self.stmts = self.stmts, out
        tma = bool(factor_value(c.tma, self.config))
        for reader in c.readers:
            nodes = [n for n in reader.tensor.loads() if n.tensor is c.tensor]
            out.append(Comment(f"{c.name}: tile of {c.tensor.name} read by {reader.name}, loaded here"))
            if reader is x:
                env = self.env[x.name]
                for node in nodes:
                    key = ("load", x.name, repr(node))
                    if key in self.scopes[-1]:
                        continue
                    late = [i.name for i in node.indices for i in walk(i)
                            if isinstance(i, IterVar) and i in env and env[i].level > level]
                    missing = [i.name for i in node.indices for i in walk(i) if isinstance(i, IterVar) and i not in env]
                    if late or missing:
                        raise LoweringError(
                            f"{c.name} is placed where the tile of {node!r} is not yet known: its index "
                            f"{', '.join(late or missing)} changes in a loop inside that place; place {c.name} at "
                            f"that loop instead")
                    self.scopes[-1][key] = self.emit_load(node, x, f"{c.tensor.name.lower()}_tile", tma=tma)
                continue
            placed = self.p.plan.placed.get(reader.name)
            if placed is None or not self._inside(placed, x):
                raise LoweringError(f"{c.name} is placed in {x.name}'s loop, but its reader {reader.name} is not "
                                    f"computed inside {x.name}'s loops; place {c.name} in a loop of {reader.name} or "
                                    f"of the stage {reader.name} is computed at")
            before = self.env.get(reader.name)
            env = self.env[reader.name] = {}
            try:
                for node in nodes:
                    for i in node.indices:
                        for a in walk(i):
                            if isinstance(a, IterVar) and a not in env:
                                v = self._hoisted_axis(placed, a, x, level, out)
                                if v is None:
                                    raise LoweringError(
                                        f"{c.name} is placed where the tile of {node!r} is not yet known: {reader.name}'s "
                                        f"index {a.name} changes in a loop inside that place (of {reader.name}'s or "
                                        f"of the stages it is computed in); place {c.name} at that loop instead")
                                env[a] = v
                    v = self.emit_load(node, reader, f"{c.tensor.name.lower()}_tile", tma=tma)
                    self._remember_load(node, reader, v)
            finally:
                if before is None:
                    del self.env[reader.name]
                else:
                    self.env[reader.name] = before
        self.stmts = saved

    def _inside(self, placed: Placed, x: Stage) -> bool:
        """Whether `placed` is computed in x's loops (directly, or in a stage that is)."""
        t = placed.target
        while t is not None:
            if t.stage is x:
                return True
            t = t.target
        return False

    def _hoisted_axis(self, p: Placed, a: IterVar, x: Stage, level: int, out: list) -> AxisVal | None:
        """Stage p's axis `a` as known at x's loop `level`, where p runs further in; None where a loop inside
        that place changes it. An axis p takes from x's loops is x's (defined at `level` or above); one p
        takes from a stage in between is that stage's; p's own axis is defined here if it is one tile over
        its whole extent."""
        if a in p.bound:
            if p.target.stage is x:
                v = self.env[x.name].get(p.bound[a])
                return v if v is not None and v.level <= level else None
            return self._hoisted_axis(p.target, p.bound[a], x, level, out)
        tile = self.p.plan._tile(p, a)
        if tile is None:
            return None
        lay = p.layout
        split = lay.index.split_of(a)
        dim = self.fresh(split.inner.name)
        self.dim_order.append(dim)
        self.dim_extent[dim] = self.scalar(split.factor) if isinstance(split.factor, Knob) else c.Num(tile[0])
        value = c.call("arange", 0, self.dim_extent[dim])
        name = self.fresh(f"offs_{a.name}")
        out.append(Assign(name, value))
        masked = self.p.masks[p.name][a]
        mask = None
        if masked:
            mask = self.fresh(f"mask_{a.name}")
            out.append(Assign(mask, c.BinOp("<", c.Name(name), self.scalar(a.extent))))
        return AxisVal(c.Name(name), (dim,), level, c.Name(mask) if mask else None, c.Num(0),
                       self._canon(value, (dim,), a, masked, []))
