"""A sort stage's code, a part of `KernelBuilder` (builder.py): `tc.sort` and `tc.argsort` along one of the
stage's own axes, t.

The placement (`tilec.plan.placement._check_sort`) guarantees that the whole axis is in one tile of one program
(no loop over it), so the tile's lanes along t are t = 0, 1, ... and the row is sorted with one `tl.sort`. The
values are sorted as 32-bit integer keys that order as torch orders the values: an int is its own key; a
float's bits b become b ^ ((b >> 31) & 0x7fffffff) (negative floats reversed), after every NaN is made the
positive quiet NaN, so that NaN is the largest value as in torch, and -0.0 is made 0.0 (torch holds them equal,
so a sort keeps their positions' order; the sorted values then hold 0.0 where the input held -0.0). Lanes past t's end get the key that sorts
last. `argsort` sorts 64-bit keys (the value's key << 32 | the lane, or the lane's complement when descending),
so that equal values keep their positions' order (torch.sort(stable=True)), and keeps the low 32 bits.
"""

from __future__ import annotations

from tilec.errors import LoweringError
from tilec.ir import dtypes
from tilec.ir.expr import Sort
from tilec.lower import code as c
from tilec.lower.nest import Comment, Note
from tilec.lower.reductions import compute_text
from tilec.lower.values import Val, _where, castable
from tilec.schedule.schedule import Stage

_TOP = 0x7FFFFFFF  # the largest int32: the key past every value (ascending); -_TOP - 1 the one before every value


def _key_of_float(bits: c.Ex) -> c.Ex:
    """A float32's bits as an int32 that orders as the float does (negative floats' bits reversed)."""
    return c.BinOp("^", bits, c.BinOp("&", c.BinOp(">>", bits, c.Num(31)), c.Num(_TOP)))


class Sorts:
    """The sort part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def sort_step(self, x: Stage, out: list) -> Val:
        """The sorted tile (values or positions) along the sort axis's dimension; the stage's value for `finish`."""
        srt: Sort = x.tensor.body
        env = self.env[x.name]
        saved, self.stmts = self.stmts, out
        out.append(Comment(compute_text(x.tensor)))
        tdims = env[srt.axis].dims
        # tl.sort orders a tile's last dimension: the sorted axis's dim goes last (the value carries its dims)
        full = tuple(d for d in self.spatial_dims(x) if d not in tdims) + tuple(tdims)
        self._check_tile_numel(x, full)
        if len(tdims) > 1:  # the placement allows one tile of the axis (_check_sort)
            raise LoweringError(f"{x.name}: the sorted axis {srt.axis.name} spans tile dims {', '.join(tdims)}")
        v = self.emit(srt.body, x, {})
        if not tdims:  # one element along the axis: its value, at position 0
            self.stmts = saved
            return v if srt.what == "values" else Val(c.Num(0), (), "int32")
        axis = full.index(tdims[0])
        is_f = dtypes.is_float(v.dtype)
        kd = "float32" if is_f else "int32"
        code = self.expand(Val(c.To(castable(v, kd), kd) if v.dtype != kd else v.code, v.dims, kd), full, full=True)
        if is_f:  # NaN as the positive quiet NaN (the largest key), -0.0 as 0.0 (torch's sort holds them equal),
            # then the bits as an ordered int32
            code = _where(c.BinOp("!=", code, code), c.Num(float("nan")),
                          _where(c.BinOp("==", code, c.Num(0.0)), c.Num(0.0), code))
            bits = self.emit_stmt(f"{x.name}_bits", c.call("bitcast", code, dtype="int32"))
            key = _key_of_float(bits)
        else:
            key = code
        past = c.Num(-_TOP - 1) if srt.descending else c.Num(_TOP)  # sorts after every value
        mask = env[srt.axis].mask
        if mask is not None:
            key = _where(self.expand(Val(mask, tdims, "bool"), full), key, past)
        key = self.emit_stmt(f"{x.name}_key", key,
                             Note((f"{srt.body!r} as an ordered int32 key (lanes past the end sort last)",), full))
        out.append(Comment(f"sort the tile along {srt.axis.name}" + (", largest first" if srt.descending else "")
                           + ("" if srt.what == "values" else "; the low 32 bits keep each value's position")))
        if srt.what == "values":
            s = self.emit_stmt(f"{x.name}_sorted", c.call("sort", key, axis=axis, descending=srt.descending))
            if is_f:
                val = c.call("bitcast", _key_of_float(s), dtype="float32")
                res = Val(self.emit_stmt(f"{x.name}_values", val, Note((repr(srt),), full)), full, "float32")
            else:
                res = Val(s, full, "int32")
        else:
            lane = self.expand(Val(c.call("arange", 0, self.dim_extent[tdims[0]]), tdims, "int32"), full)
            low = c.BinOp("-", c.Num(_TOP), lane) if srt.descending else lane  # equal keys: the lower position first
            packed = c.BinOp("|", c.BinOp("<<", c.To(key, "int64"), c.Num(32)), c.To(low, "int64"))
            s = self.emit_stmt(f"{x.name}_sorted", c.call("sort", packed, axis=axis, descending=srt.descending))
            pos = c.To(c.BinOp("&", s, c.Num(0xFFFFFFFF)), "int32")
            if srt.descending:
                pos = c.BinOp("-", c.Num(_TOP), pos)
            res = Val(self.emit_stmt(f"{x.name}_pos", pos, Note((repr(srt),), full)), full, "int32")
        self.stmts = saved
        return res
