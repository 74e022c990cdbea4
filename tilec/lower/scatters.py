"""A scatter stage's store, a part of `KernelBuilder` (builder.py): where a compute stores its tile at its own
axes, a scatter (`tc.scatter`, tilec/ir/scatter.py) stores it at its positions.

Each point of the stage's tile has its own position, one integer value per output dimension (the positions'
expressions emitted like any value of the stage: a read of `x[i]` is a gather), so the address is laid out over
all of the stage's tile dims and the value broadcast to them. The mask is the tile's own (points past the
domain's end) and the output's bounds (a position outside the output is not written). combine=None stores
(`tl.store`; the positions never meet: unique, or proved injective by isl), combine="add" adds
(`tl.atomic_add`: points that meet, in one tile or in two programs, each add once). What the output starts as
is not this kernel's: the runtime fills it before the kernel runs (tilec/runtime/kernel.py).
"""

from __future__ import annotations

from tilec.lower import code as c
from tilec.lower.nest import Comment, Note, Store
from tilec.lower.values import Val, castable
from tilec.schedule.schedule import Stage


class Scatters:
    """The scatter part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def scatter_store(self, x: Stage, val: Val, out: list) -> None:
        """Store (or add) the stage's rounded value `val` at its positions."""
        t, spec = x.tensor, x.tensor.scatter
        env = self.env[x.name]
        dims = self._order({d for a in t.axis for d in env[a].dims} | set(val.dims))
        saved, self.stmts = self.stmts, out
        pos = []
        for p in spec.at:
            v = self.emit(p, x, {})
            if v.dims or isinstance(v.code, (c.Name, c.Num)):
                pos.append(v)
            else:  # a scalar expression of sizes: named once
                pos.append(Val(self.emit_stmt(f"{t.name}_pos", v.code), (), v.dtype))
        self.stmts = saved
        addr = self.address(self.tensor_param(t), t, pos)
        if addr.dims:
            addr = Val(self.expand(addr, dims, full=True), dims, "ptr")
        else:  # every point writes one position (an "add" into one element): a tile of that one address
            addr = Val(c.sum_of(addr.code, self.expand(Val(c.Num(0), (), "int32"), dims, full=True)), dims, "ptr")
        inside = [Val(env[a].mask, env[a].dims, "bool") for a in t.axis if env[a].mask]
        for d, v in enumerate(pos):  # 0 <= position < the output's extent, or no write
            bound = self.scalar(t.shape[d])
            if isinstance(v.code, c.Num) and isinstance(bound, c.Num):  # known here (a constant position)
                if 0 <= v.code.value < bound.value:
                    continue
                out.append(Comment(f"{t.name}: position {d} is {v.code.value}, outside [0, {bound.value}): no write"))
                return
            inside.append(Val(c.BinOp("&", c.BinOp(">=", v.code, c.Num(0)), c.BinOp("<", v.code, bound)),
                              v.dims, "bool"))
        mask = self.combine(c.all_of, inside, "bool", order=dims).code if inside else None
        add = spec.combine == "add"
        where = ", ".join(map(str, spec.at))
        note = Note((val.code, f"  # {'atomic add' if add else 'store'} at computed positions, {t.dtype}"),
                    op="+=" if add else "=", lhs=(f"{t.name}[{where}]",))
        value = val if val.dtype == t.dtype else Val(c.To(castable(val, t.dtype), t.dtype), val.dims, t.dtype)
        out.append(Store(addr.code, self.expand(value, dims, full=True), mask, note, atomic=add))
