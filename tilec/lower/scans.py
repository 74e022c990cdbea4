"""A scan stage's code, a part of `KernelBuilder` (builder.py): `tc.cumsum/cumprod/cummax/cummin` and
`tc.linear_scan` along one of the stage's own axes, t.

The placement (`tilec.plan.placement._check_scan`) guarantees the shape of t's loops: at most one tile of t
and serial (or unrolled) loops over t, the innermost loops of the stage, none on the grid. So the elements
of one row of the scan arrive tile after tile, in order, in one program. At the first loop over t the
builder starts a carry (`scan_init`: the scan of everything before this tile, per row, at the identity);
at the innermost point (`scan_step`) the tile is scanned along t's dimension (`tl.cumsum`, `tl.cumprod`,
or `tl.associative_scan` with a combine function), combined with the carry, and the carry becomes the
tile's last lane. Lanes past t's end hold the identity, so the last lane is the running value either way.

A linear recurrence h[t] = a[t] * h[t-1] + b[t] scans the pairs (a, b) with (a1, b1) then (a2, b2) =
(a1 * a2, a2 * b1 + b2): lane t holds (A, H) = (the product of a over the tile up to t, the recurrence from
0 at the tile's start), and h = A * carry + H.
"""

from __future__ import annotations

from tilec.errors import LoweringError
from tilec.ir import dtypes
from tilec.ir.expr import Scan
from tilec.lower import code as c
from tilec.lower.nest import AccInit, Comment, Note, Update
from tilec.lower.reductions import compute_text
from tilec.lower.values import Val, _where, castable
from tilec.schedule.schedule import Stage

_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}


def identities(op: str, dtype: str) -> tuple[c.Num, ...]:
    """The values a lane past the end holds, one per operand: they leave the running value as it is (a float
    sum's is -0.0, which leaves even a -0.0 sum -0.0)."""
    is_f = dtypes.is_float(dtype)
    lo, hi = _INT_RANGE.get(dtype, _INT_RANGE["int32"])
    zero = c.Num(-0.0) if is_f else c.Num(0)
    one = c.Num(1.0) if is_f else c.Num(1)
    return {"sum": (zero,), "prod": (one,), "linear": (one, zero),
            "max": (c.Num(float("-inf")) if is_f else c.Num(lo),),
            "min": (c.Num(float("inf")) if is_f else c.Num(hi),)}[op]


def start_value(op: str, dtype: str) -> c.Num:
    """The carry before the first element: the identity of the combine (h[-1] = 0 for a recurrence)."""
    return identities(op, dtype)[-1]


class Scans:
    """The scan part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def _carry_dims(self, x: Stage) -> tuple[str, ...]:
        """The tile dims of the rows being scanned: the stage's spatial dims other than its scan axis's."""
        env, t = self.env[x.name], x.tensor.scan_axis
        return self._order({d for a in x.tensor.axis if a is not t for d in env[a].dims})

    def scan_init(self, x: Stage, out: list) -> None:
        """Before the first loop over the scan axis: the carry, one value per row, at the start value."""
        scan: Scan = x.tensor.body
        dims = self._carry_dims(x)
        name = self.fresh(f"carry_{x.name}")
        init = start_value(scan.op, scan.dtype)
        out.append(Comment(f"{x.name}: a scan along {scan.axis.name}; the carry holds each row's {scan.name} so far"))
        out.append(AccInit(name, self.shape(dims), init, scan.dtype,
                           Note((init, f"  # {scan.dtype} carry of {x.name}"), dims)))
        self.carries[x.name] = (name, dims)

    def scan_step(self, x: Stage, out: list) -> Val:
        """The scan of this tile along its axis's dimension, combined with the carry (updated to its last
        lane); the stage's value for `finish`."""
        scan: Scan = x.tensor.body
        env, acc = self.env[x.name], scan.dtype
        saved, self.stmts = self.stmts, out
        out.append(Comment(compute_text(x.tensor)))
        full = self.spatial_dims(x)
        self._check_tile_numel(x, full)
        tdims = env[scan.axis].dims
        if len(tdims) > 1:  # the placement allows one tile of the axis (_check_scan)
            raise LoweringError(f"{x.name}: the scan axis {scan.axis.name} spans tile dims {', '.join(tdims)}")
        loads: dict = {}
        vals = []
        mask = env[scan.axis].mask
        for v, ident in zip((self.emit(e, x, loads) for e in scan.operands), identities(scan.op, acc)):
            if v.dtype != acc:
                v = Val(c.To(castable(v, acc), acc), v.dims, acc)
            code = self.expand(v, full, full=True)
            if mask is not None:  # lanes past the axis's end: the identity, which keeps the running value
                code = _where(self.expand(Val(mask, env[scan.axis].dims, "bool"), full), code, ident)
            vals.append(self.emit_stmt(f"{x.name}_in", code))
        axis = full.index(tdims[0]) if tdims else None
        if axis is not None:
            out.append(Comment(f"scan the tile along {scan.axis.name} (lanes past its end hold the identity)"
                               + (", after the carry; the carry becomes its last lane" if x.name in self.carries else "")))
        parts = self._scan_tile(scan, vals, axis, x.name)
        carry = self.carries.get(x.name)
        if carry is None:
            value = parts[-1]
        else:
            cname, cdims = carry
            prev = self.expand(Val(c.Name(cname), cdims, acc), full)
            value = {"sum": lambda: c.BinOp("+", prev, parts[0]),
                     "prod": lambda: c.BinOp("*", prev, parts[0]),
                     "max": lambda: c.call("maximum", prev, parts[0], nan=True),
                     "min": lambda: c.call("minimum", prev, parts[0], nan=True),
                     "linear": lambda: c.BinOp("+", c.BinOp("*", parts[0], prev), parts[1])}[scan.op]()
        value = self.emit_stmt(f"{x.name}_scan", value, Note((f"{scan!r}",), full))
        if carry is not None:
            last = value
            if axis is not None:  # the tile's last lane along the axis (the others are -0.0 / 0: an exact sum)
                dim = tdims[0]
                ext = self.dim_extent[dim]
                lane = Val(c.BinOp("==", c.call("arange", 0, ext), c.BinOp("-", ext, c.Num(1))), (dim,), "bool")
                filler = c.Num(-0.0) if dtypes.is_float(acc) else c.Num(0)
                last = c.call("sum", _where(self.expand(lane, full), value, filler), axis=axis)
                if acc not in ("float32", "int32"):
                    last = c.To(last, acc)
            out.append(Update(cname, last, Note((f"the last lane of {x.name}'s scan along {scan.axis.name}",), cdims)))
        self.stmts = saved
        return Val(value, full, acc)

    def _scan_tile(self, scan: Scan, vals: list[c.Name], axis: int | None, name: str) -> list[c.Ex]:
        """The inclusive scan of the operands' tile along dimension `axis` (None: the tile holds one element of
        the axis, which is its own scan): [the scan] or, for a recurrence, [A, H]."""
        if axis is None:
            return list(vals)
        if scan.op in ("sum", "prod"):
            return [self.emit_stmt(f"{name}_tile", c.call("cumsum" if scan.op == "sum" else "cumprod", vals[0],
                                                          axis=axis))]
        if scan.op in ("max", "min"):
            return [self.emit_stmt(f"{name}_tile", c.call("scan", vals[0], axis=axis, op=scan.op))]
        pair = self.emit_stmt(f"{name}_tile", c.call("scan", c.Tuple(tuple(vals)), axis=axis, op="linear"))
        return [self.emit_stmt(f"{name}_a", c.call("item", pair, index=0)),
                self.emit_stmt(f"{name}_h", c.call("item", pair, index=1))]

