"""Lowering, the values of a kernel: compute expressions (`tilec.ir.expr`) -> IR expressions
(`tilec.lower.code`) with the tile dimensions they vary over and their dtype (`Val`).

`ValueEmitter` is the half of the kernel builder that writes values; the other half
(`tilec.lower.builder.KernelBuilder`, which inherits this) writes the loops, stages and statements
around them. A value carries the tile dims it varies over; binary operations broadcast their operands
with `[:, None]` (`expand`); loads come from an inlined stage's expression, from registers (a value
computed in the same kernel) or from memory (`tl.load` with the axes' masks); low-precision floats are
widened to float32 between rounding points; `//` and `%` round toward minus infinity as in torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.errors import LoweringError
from tilec.ir import dtypes
from tilec.ir.expr import (
    INT_BITS,
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IterVar,
    Load,
    Reduce,
    SizeVar,
    Unary,
    Where,
    size_text,
    substitute,
    walk,
)
from tilec.ir.knob import Knob
from tilec.lower.code import Ex, Fmod, Lit, Name, Paren, Tanh, Tensor0d, f
from tilec.lower.nest import Assign, TanhExp
from tilec.lower.nest import Load as LoadTile
from tilec.schedule.schedule import Stage

_MATH = {"exp": "tl.exp", "log": "tl.log", "sqrt": "tl.sqrt", "rsqrt": "tl.rsqrt", "abs": "tl.abs",
         "sigmoid": "tl.sigmoid"}


@dataclass
class Val:
    """A value in the kernel: its expression (tilec.lower.code), the tile dims it varies over, its dtype."""

    code: Ex
    dims: tuple[str, ...]
    dtype: str


@dataclass
class AxisVal:
    """An original axis inside a kernel: its offsets variable, dims, the loop depth defining it, mask.
    `block`: where the axis is one tile dim's block (start + tl.arange(0, n), masked only at the
    tensor's edge), that start: a descriptor load can read it (`desc.load([start, ...])`).
    `canon`: the offsets' and mask's definition as text, without their names: two axes with one canon
    (of two stages) index the same elements, so a tile loaded for one serves the other (`shared_load`)."""

    code: Ex
    dims: tuple[str, ...]
    level: int
    mask: Ex | None
    block: Ex | None = None
    canon: str | None = None


def _is_name(code: Ex) -> bool:
    """A value written as one name (a variable, a size, a loop counter, True): used twice, it needs no temporary."""
    return code.text().isidentifier()


def _nonnegative(e: Expr) -> bool:
    """Index arithmetic on axes, sizes and non-negative ints (no loads, no subtraction): `//` and `%`
    truncate and floor alike there, so the plain Triton operators serve."""
    for n in walk(e):
        if isinstance(n, (Load, Unary, Call, Where, Cast)) or (isinstance(n, Binary) and n.op == "-"):
            return False
        if isinstance(n, Const) and (not isinstance(n.value, int) or n.value < 0):
            return False
    return True


def via_float32(code: Ex, src: str, dst: str) -> Ex:
    """An int or bool going to bfloat16 or float8 goes through float32, as torch converts it (Triton's
    interpreter bit-casts int -> bfloat16 and refuses int -> float8)."""
    if not dtypes.is_float(src) and dst in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return f("{}.to(tl.float32)", Paren(code))
    return code


def castable(v: Val, dst: str) -> Ex:
    """`v` as the operand of `.to(dst)`: widened through float32 where torch converts so (`via_float32`), and
    a constant (a literal, or literals alone: a specialized size `(32 + 0.25)`) made a 0-d tensor of its
    dtype, which `.to()` applies to (a Python number has no `.to`)."""
    src = dtypes.triton_name(v.dtype)
    widened = via_float32(v.code, v.dtype, dst)
    if widened is not v.code:  # .to(tl.float32) first: on a 0-d tensor too
        widened = via_float32(Tensor0d(v.code, src), v.dtype, dst)
    return Tensor0d(widened, src)


class ValueEmitter:
    """Writes the values of a kernel into the statements being built (`self.stmts`): the builder's state
    (names, tile dims, each stage's axes, what is in scope) is `KernelBuilder`'s."""

    # -- broadcasting values --------------------------------------------------------------------
    def _order(self, dims) -> tuple[str, ...]:
        return tuple(sorted(dims, key=self.dim_order.index))

    def expand(self, v: Val, target: tuple[str, ...], full: bool = False) -> str:
        """`v` laid out over `target` dims (a superset): permute, insert None, broadcast if `full`."""
        code, dims = v.code, v.dims
        order = tuple(d for d in target if d in dims)
        if order != dims:
            if len(dims) == 2:
                code = f("tl.trans({})", code)
            else:
                code = f("tl.permute({}, " + str(tuple(dims.index(d) for d in order)) + ")", code)
        if order != target and order:
            code = f("{}[" + ", ".join(':' if d in order else 'None' for d in target) + "]", Paren(code))
        if full and order != target:
            shape = ", ".join(self.dim_extent[d] for d in target)
            shape = f"({shape},)" if len(target) == 1 else f"({shape})"
            if not dims:  # a scalar (maybe a Python number, which tl.broadcast_to does not take)
                tn = dtypes.triton_name(v.dtype) if v.dtype in dtypes.DTYPES else "tl.float32"
                return f("(tl.zeros(" + shape + ", " + tn + ") " + ('|' if v.dtype == 'bool' else '+') + " {})",
                         Paren(code))
            code = f("tl.broadcast_to({}, " + shape + ")", code)
        return code

    def combine(self, fmt: str, vals: list[Val], dtype: str, order: tuple[str, ...] | None = None) -> Val:
        """`fmt` (a template with one `{}` per value) over `vals`, each laid out over their joint dims."""
        dims = order if order is not None else self._order({d for v in vals for d in v.dims})
        return Val(f(fmt, *[self.expand(v, dims) for v in vals]), dims, dtype)

    def widen(self, v: Val) -> Val:
        """A loaded low-precision float as float32 (arithmetic runs in float32 between rounding points)."""
        c = dtypes.compute_dtype(v.dtype)
        if c == v.dtype:
            return v
        return Val(f("{}.to(" + dtypes.triton_name(c) + ")", Paren(v.code)), v.dims, c)

    def emit_stmt(self, hint: str, code: Ex, nest: str | None = None) -> Name:
        """`name = code` in the current body; the name (fresh, from `hint`) stands for the value."""
        name = self.fresh(hint)
        self.stmts.append(Assign(name, code, nest))
        return Name(name)

    # -- expressions ----------------------------------------------------------------------------
    def emit(self, e: Expr, st: Stage, loads: dict) -> Val:
        env = self.env[st.name]
        if isinstance(e, Const):
            if e.dtype == "bool":
                return Val(Lit(str(bool(e.value))), (), "bool")
            if isinstance(e.value, float):
                v = e.value
                code = 'float("inf")' if v == float("inf") else 'float("-inf")' if v == float("-inf") else \
                    'float("nan")' if v != v else repr(v)
                return Val(Lit(code), (), "float32")
            return Val(Lit(repr(e.value)), (), "int32")
        if isinstance(e, (SizeVar, Knob)):
            return Val(Lit(self.scalar(e)), (), "int32")
        if isinstance(e, IterVar):
            if e not in env:
                raise LoweringError(f"{st.name} uses axis {e.name}, which is not one of its axes")
            a = env[e]
            return Val(a.code, a.dims, "int32")
        if isinstance(e, Load):
            return self.widen(self.load(e, st, loads))
        if isinstance(e, Cast):
            v = self.emit(e.a, st, loads)
            if v.dtype == e.dtype:
                return v
            tn = dtypes.triton_name(e.dtype)
            if dtypes.is_float(e.dtype) and dtypes.compute_dtype(e.dtype) != e.dtype:
                c = dtypes.triton_name(dtypes.compute_dtype(e.dtype))
                return Val(f("{}.to(" + tn + ").to(" + c + ")", castable(v, e.dtype)),
                           v.dims, dtypes.compute_dtype(e.dtype))
            return Val(f("tl.cast({}, " + tn + ")", v.code), v.dims, e.dtype)
        if isinstance(e, Unary):
            v = self.emit(e.a, st, loads)
            if e.op == "~" and v.dtype == "bool":  # logical not: ~ of a Python bool (a specialized size's
                return Val(f("({} == 0)", Paren(v.code)), v.dims, "bool")  # comparison) is bitwise, -1
            return Val(f(e.op + "{}", Paren(v.code)), v.dims, v.dtype)
        if isinstance(e, Call):
            v = self.emit(e.args[0], st, loads)
            if not dtypes.is_float(v.dtype) and e.fn != "abs":
                v = Val(f("tl.cast({}, tl.float32)", v.code), v.dims, "float32")
            if e.fn == "silu":
                if not _is_name(v.code):
                    v = Val(self.emit_stmt("x", v.code), v.dims, v.dtype)
                return Val(f("{} * tl.sigmoid({})", v.code, v.code), v.dims, v.dtype)
            if e.fn == "tanh":
                if not _is_name(v.code):
                    v = Val(self.emit_stmt("x", v.code), v.dims, v.dtype)
                e_name = self.fresh("e")  # the interpreter form computes tl.exp(-2|x|) here (targets.py)
                self.stmts.append(TanhExp(e_name, v.code))
                return Val(Tanh(v.code, e_name), v.dims, v.dtype)
            return Val(f(_MATH[e.fn] + "({})", v.code), v.dims, v.dtype)
        if isinstance(e, Where):
            if self.fold and repr(e.cond) in self.fold:  # known true here (an online loop's unmasked tiles)
                return self.emit(e.a, st, loads)
            c, a, b = (self.emit(x, st, loads) for x in (e.cond, e.a, e.b))
            return self.combine("tl.where({}, {}, {})", [c, a, b], dtypes.promote(a.dtype, b.dtype))
        if isinstance(e, Binary):
            a, b = self.emit(e.a, st, loads), self.emit(e.b, st, loads)
            if a.dtype == b.dtype == "bool" and e.op in ("+", "*", "max", "min"):  # torch: or / and
                op = "|" if e.op in ("+", "max") else "&"
                return self.combine(f"{{}} {op} {{}}", [Val(Paren(a.code), a.dims, "bool"),
                                                       Val(Paren(b.code), b.dims, "bool")], "bool")
            if e.op in ("max", "min"):
                dtype = dtypes.promote(a.dtype, b.dtype)
                prop = ", propagate_nan=tl.PropagateNan.ALL" if dtypes.is_float(dtype) else ""  # as torch
                return self.combine(f"tl.{e.op}imum({{}}, {{}}{prop})", [a, b], dtype)
            if e.op == "/" and not dtypes.is_float(a.dtype) and not dtypes.is_float(b.dtype):
                a = Val(f("tl.cast({}, tl.float32)", a.code), a.dims, "float32")
            if e.op in ("//", "%") and not _nonnegative(e):
                return self.floor_divmod(e.op, a, b)
            if e.op in ("<<", ">>"):
                return self.shift(e.op, a, b, e.dtype)
            dtype = "bool" if e.op in ("<", "<=", ">", ">=", "==", "!=") else dtypes.promote(a.dtype, b.dtype)
            return self.combine(f"{{}} {e.op} {{}}", [Val(Paren(a.code), a.dims, a.dtype),
                                                      Val(Paren(b.code), b.dims, b.dtype)], dtype)
        if isinstance(e, Reduce):
            raise LoweringError(f"{st.name}: a reduction can only be the whole body of a compute")
        raise LoweringError(f"cannot lower expression {e}")

    def floor_divmod(self, op: str, a: Val, b: Val) -> Val:
        """Python/torch `//` and `%` (rounding toward minus infinity); Triton's integer ops truncate."""
        dtype = dtypes.promote(a.dtype, b.dtype)
        if dtypes.is_float(dtype):  # both operands tensors of one type: fmod of two Python numbers would be
            dtype = dtypes.compute_dtype(dtype)  # Python's, and libdevice's fmod takes two of float32 or float64
            a, b = (self.as_tensor_of(v, dtype) for v in (a, b))
        if not _is_name(a.code):
            a = Val(self.emit_stmt("n", a.code), a.dims, a.dtype)
        if not _is_name(b.code) and not b.code.text().lstrip("-").replace(".", "").isdigit():
            b = Val(self.emit_stmt("d", b.code), b.dims, b.dtype)
        if dtypes.is_float(dtype):
            return self.float_floor_divmod(op, a, b, dtype)
        r = self.combine("{} % {}", [a, b], dtype)
        r = Val(self.emit_stmt("r", r.code), r.dims, dtype)
        fix = self.combine("({} != 0) & (({} < 0) != ({} < 0))", [r, r, b], "bool")
        fixed = Val(fix.code, (), "bool")  # laid out already: not expanded again
        if op == "%":
            return self.combine("tl.where({}, {} + {}, {})", [fixed, r, b, r], dtype)
        return self.combine("tl.where({}, {} // {} - 1, {} // {})", [fixed, a, b, a, b], dtype)

    def shift(self, op: str, a: Val, b: Val, dtype: str) -> Val:
        """torch's `<<` and `>>` of integers of `dtype` (the promoted type, `INT_BITS` wide), computed in its compute
        type (int32 for the narrow ones, as all their arithmetic between rounding points). `>>` is arithmetic on
        signed values (Triton's `>>` of a signed int is). A shift by a negative amount or by the width or more,
        undefined in C and in Triton, is what torch makes it: 0 for `<<` and for `>>` of uint8, and the sign
        (0 or -1) for `>>` of a signed value."""
        bits, c = INT_BITS[dtype], dtypes.compute_dtype(dtype)
        top = INT_BITS[c] - 1
        text = b.code.text() if isinstance(b.code, Lit) else ""
        amount = {"True": 1, "False": 0}.get(text, int(text) if text.lstrip("-").isdigit() else None)
        a, b = (v if isinstance(v.code, Lit) or v.dtype == c else
                Val(f("{}.to(" + dtypes.triton_name(c) + ")", Paren(v.code)), v.dims, c) for v in (a, b))
        if c != dtype:  # int8/int16/uint8 run in int32 between rounding points: torch shifts values of the
            # narrow type, so an operand that may have left it ((x << 2) >> 2, ~x of uint8) is wrapped back first
            # (the left one of << needs no wrap: its low bits are the same either way)
            narrow = ").to(" + dtypes.triton_name(dtype) + ").to(" + dtypes.triton_name(c) + ")"
            a, b = (v if isinstance(v.code, Lit) or (v is a and op == "<<") else
                    Val(f("({}" + narrow, v.code), v.dims, c) for v in (a, b))
        a = Val(Paren(a.code), a.dims, a.dtype)
        if amount is not None:  # a constant amount: decided here
            if 0 <= amount < bits:
                return self.combine(f"{{}} {op} {amount}", [a], c)
            if op == "<<" or dtype == "uint8":
                return self.combine("{} * 0", [a], c)
            return self.combine(f"{{}} >> {top}", [a], c)
        if not _is_name(b.code):  # used twice
            b = Val(self.emit_stmt("sh", b.code), b.dims, b.dtype)
        ok = f"({{}} >= 0) & ({{}} < {bits})"
        if op == "<<" or dtype == "uint8":
            return self.combine(f"tl.where({ok}, {{}} {op} {{}}, 0)", [b, b, a, b], c)
        return self.combine(f"{{}} >> tl.where({ok}, {{}}, {top})", [a, b, b, b], c)

    @staticmethod
    def as_tensor_of(v: Val, dtype: str) -> Val:
        """`v` as a Triton tensor of `dtype`: a Python number becomes a 0-d tensor, another type is converted."""
        tn = dtypes.triton_name(dtype)
        if isinstance(v.code, Lit):
            return Val(f("tl.full((), {}, " + tn + ")", v.code), v.dims, dtype)
        if v.dtype != dtype:
            return Val(f("{}.to(" + tn + ")", Paren(v.code)), v.dims, dtype)
        return v

    def float_floor_divmod(self, op: str, a: Val, b: Val, dtype: str) -> Val:
        """Float `//` and `%` as torch computes them (c10's div_floor_floating and remainder): from C's fmod,
        which is exact, not from floor(a / b), which is a quotient off by one wherever a / b rounds up to a
        whole number (1.0 // 0.1 is 9.0, not 10.0). The remainder takes the divisor's sign; the quotient
        (a - r) / b, less one where that sign was fixed, is rounded to the nearest whole number (the division
        may round), its zero signed as a / b, and a zero divisor gives a / b (an infinity or NaN)."""
        dims = self._order({*a.dims, *b.dims})
        r = Val(self.emit_stmt("r", Fmod(self.expand(a, dims), self.expand(b, dims))), dims, dtype)
        fix = self.combine("({} != 0) & (({} < 0) != ({} < 0))", [r, r, b], "bool")
        fixed = Val(self.emit_stmt("fix", fix.code), fix.dims, "bool")
        if op == "%":
            return self.combine("tl.where({}, {} + {}, {})", [fixed, r, b, r], dtype)
        q = self.combine("({} - {}) / {}", [a, r, b], dtype)
        q = Val(self.emit_stmt("q", self.combine("tl.where({}, {} - 1.0, {})", [fixed, q, q], dtype).code),
                dims, dtype)
        fq = Val(self.emit_stmt("fq", f("tl.floor({})", q.code)), dims, dtype)
        whole = self.combine("tl.where({} - {} > 0.5, {} + 1.0, {})", [q, fq, fq, fq], dtype)
        signed = self.combine("tl.where({} == 0, ({} / {}) * 0.0, {})", [q, a, b, whole], dtype)
        return self.combine("tl.where({} == 0, {} / {}, {})", [b, a, b, signed], dtype)

    def dims_of(self, e: Expr, st: Stage) -> set[str]:
        """The tile dims an expression varies over (without emitting it)."""
        env = self.env[st.name]
        out: set[str] = set()
        todo = [e]
        while todo:
            node = todo.pop()
            if isinstance(node, IterVar) and node in env:
                out |= set(env[node].dims)
                continue
            if isinstance(node, Load):
                body = self.inline_body(node)
                if body is not None:  # an inlined stage varies as its expression does, not as its indices
                    todo.append(body)
                    continue
                found = self.in_scope(node.tensor.name) if node.tensor.name not in self.materialized else None
                if found is not None:
                    out |= set(found[0].dims)
                    continue
            todo.extend(node.children())
        return out

    def inline_body(self, ld: Load):
        st = self.p.sched.stages.get(ld.tensor.name)
        if st is None or st.attach != "inline":
            return None
        self.inlined.add(st.name)
        mapping = dict(zip(ld.tensor.axis, ld.indices))
        body = Cast(substitute(ld.tensor.body, lambda n: mapping.get(n) if isinstance(n, IterVar) else None),
                    ld.tensor.dtype)
        # A read outside the tensor gives 0, as a load from memory would: the inlined expression
        # is evaluated only where the indices are in bounds.
        inside = None
        for idx, dim in zip(ld.indices, ld.tensor.shape):
            if isinstance(idx, IterVar) and size_text(idx.extent) == size_text(dim):
                continue
            cond = Binary("&", Binary(">=", idx, 0), Binary("<", idx, dim))
            inside = cond if inside is None else Binary("&", inside, cond)
        if inside is not None:
            dt = ld.tensor.dtype
            zero = Const(False, "bool") if dt == "bool" else Const(0.0, "float32") if dtypes.is_float(dt) \
                else Const(0, "int32")
            body = Cast(Where(inside, body, zero), dt)
        return body

    def in_scope(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def load(self, ld: Load, st: Stage, loads: dict) -> Val:
        """A read of `ld.tensor` in its stored dtype: from an inlined body, registers, or memory."""
        body = self.inline_body(ld)
        if body is not None:
            v = self.emit(body, st, loads)
            return v
        t = ld.tensor
        found = self.in_scope(t.name) if t.name not in self.materialized else None  # in memory: read it back
        env = self.env[st.name]
        if found is not None:
            val, axis_codes, canons = found
            got = [env[i].code if isinstance(i, IterVar) and i in env else None for i in ld.indices]
            if got == axis_codes:
                return val
            # the same elements under other names (two stages' tiles of one row): the value, its dims renamed
            rename = {}
            for i, (canon, dims) in zip(ld.indices, canons):
                mine = env.get(i) if isinstance(i, IterVar) else None
                if mine is None or canon is None or mine.canon != canon:
                    rename = None
                    break
                for a, b in zip(dims, mine.dims):
                    if rename.setdefault(a, b) != b:
                        rename = None
                        break
                if rename is None:
                    break
            if rename is not None and len(set(rename.values())) == len(rename):
                return Val(val.code, tuple(rename.get(d, d) for d in val.dims), val.dtype)
            raise LoweringError(
                f"{st.name} reads {ld!r}, but {t.name} is computed in the same kernel only at the positions "
                f"of that loop ({', '.join(c.text() for c in axis_codes)}), as one tile of its own: read it at "
                f"its own axes, give the reader the same tiles (split by the same factor), or compute_root {t.name}")
        key = repr(ld)
        for scope in reversed(self.scopes):
            if ("load", st.name, key) in scope:
                return scope[("load", st.name, key)]
        if key in loads:
            return loads[key]
        shared = self.shared_load(ld, st)
        if shared is not None:
            loads[key] = shared
            return shared
        v = self.emit_load(ld, st, f"{t.name.lower()}_tile")
        loads[key] = v
        self._remember_load(ld, st, v)
        return v

    def _load_key(self, ld: Load, st: Stage):
        """(key, dims per index) of a load of a tensor this kernel does not write at plain axes, each running
        over exactly its dimension: the key holds each axis's canon (its offsets and mask without names)."""
        t, env = ld.tensor, self.env[st.name]
        if self.piece is not None:  # sub-tiles: each piece must lower to the same statements (subtiles.merge)
            return None
        if t.name in self.p.plan.kernel_of:
            if self.p.plan.kernel_of[t.name] == self.root.name:
                return None  # computed in this kernel (emit_load refuses it)
        canons, dims = [], []
        for d, idx in enumerate(ld.indices):
            if not (isinstance(idx, IterVar) and idx in env and size_text(idx.extent) == size_text(t.shape[d])):
                return None
            a = env[idx]
            if a.canon is None:
                return None
            canons.append(a.canon)
            dims.append(a.dims)
        return (t.name, tuple(canons)), dims

    def _remember_load(self, ld: Load, st: Stage, v: Val) -> None:
        found = self._load_key(ld, st)
        if found is not None:
            key, dims = found
            self.scopes[-1][("tile", key)] = (v, dims)

    def shared_load(self, ld: Load, st: Stage) -> Val | None:
        """A tile of the same tensor elements that another stage of the kernel already loaded where it is in
        scope (the same axes' canons: a row of X that a max, a sum and a division each read, loaded once),
        its dims renamed to this stage's; None if there is none."""
        found = self._load_key(ld, st)
        if found is None:
            return None
        key, dims = found
        for scope in reversed(self.scopes):
            if ("tile", key) in scope:
                v, their = scope[("tile", key)]
                rename = {}
                for mine, theirs in zip(dims, their):
                    for a, b in zip(theirs, mine):
                        if rename.setdefault(a, b) != b:
                            return None
                if len(set(rename.values())) != len(rename):
                    return None
                return Val(v.code, tuple(rename.get(d, d) for d in v.dims), v.dtype)
        return None

    def emit_load(self, ld: Load, st: Stage, hint: str, tma: bool = False) -> Val:
        t = ld.tensor
        if self.p.plan.kernel_of.get(t.name) == self.root.name and t.name not in self.materialized:
            raise LoweringError(
                f"{st.name} reads {t.name} where {t.name}, computed in the same kernel, is not finished: the "
                f"read sits inside {t.name}'s own loops (a reduction loop of one iteration, say) or in a "
                f"cache_read placed before {t.name} is computed. Place {st.name} (or the cache) after "
                f"{t.name}'s loops; a value computed in the kernel needs no cache_read")
        ptr = self.tensor_param(t)
        if t.name not in self.loads:
            self.loads.append(t.name)
        env = self.env[st.name]
        idx_vals, masks = [], []
        for d, idx in enumerate(ld.indices):
            v = self.emit(idx, st, {})
            idx_vals.append(v)
            if isinstance(idx, IterVar) and idx in env and size_text(idx.extent) == size_text(t.shape[d]):
                if env[idx].mask:  # the axis runs over exactly this dimension: its own mask suffices
                    masks.append(Val(env[idx].mask, env[idx].dims, "bool"))
            else:  # a computed index, or an axis longer than the dimension it indexes: check the bounds
                ext = self.scalar(t.shape[d])
                masks.append(Val(f("({} >= 0) & ({} < " + ext + ")", Paren(v.code), Paren(v.code)), v.dims, "bool"))
        addr = self.address(ptr, t, idx_vals)
        self._check_tile_numel(st, addr.dims)
        mask = None
        if masks:
            mask = self.combine(" & ".join(["{}"] * len(masks)), masks, "bool", order=addr.dims).code
        name = self.fresh(hint)
        desc, starts = self.descriptor(t, ld.indices, st, addr) if tma else (None, ())
        nest = f"{hint} = {ld!r}" + ("  (tensor descriptor)" if desc else "")
        other = "0.0" if t.dtype.startswith("float8") else "0"  # Triton casts no int to float8 (issue 23)
        self.stmts.append(LoadTile(name, addr.code, mask, nest, desc, starts, other))
        self.zero_outside[name] = {m.code for m in masks}  # where the load gives 0 (other=0)
        return Val(Name(name), addr.dims, t.dtype)

    def descriptor(self, t, indices, st: Stage, addr: Val) -> tuple[str | None, tuple]:
        """The descriptor parameter and block starts for the tile of tensor `t` at `indices` (a load's, or
        a stage's own axes for its store) at `addr`, or (None, ()) where a descriptor cannot read or write
        it: fewer than 2 dims, a bool tensor, an index that is not an axis running over exactly its
        dimension as one block of a tile dim, masked only at the edge, or dims out of the tensor's order."""
        env = self.env[st.name]
        if t.ndim < 2 or len(addr.dims) != t.ndim or t.dtype == "bool":  # Triton's bool (int1) has no bytes
            return None, ()
        starts = []
        for d, idx in enumerate(indices):
            if not (isinstance(idx, IterVar) and idx in env and size_text(idx.extent) == size_text(t.shape[d])):
                return None, ()
            v = env[idx]
            if v.block is None or len(v.dims) != 1 or v.dims[0] != addr.dims[d]:
                return None, ()
            starts.append(v.block)
        block = tuple(self.dim_extent[d] for d in addr.dims)
        name = self._param(f"{t.name}_desc_{'x'.join(block)}", "descriptor", tensor=t.name, block=block)
        return name, tuple(starts)

    def address(self, ptr: str, t, idx_vals: list[Val]) -> Val:
        """`T + offs_i[:, None] * stride_T_0 + ...`, its dims in the tensor's index order (the memory
        order, so a row-major tile is loaded with its contiguous dimension last)."""
        order = tuple(dict.fromkeys(d for v in idx_vals for d in v.dims))
        terms = [f("{} * stride_" + f"{t.name}_{d}", Paren(self.expand(v, order))) for d, v in enumerate(idx_vals)]
        return Val(f(" + ".join(["{}"] * (len(terms) + 1)), Name(ptr), *terms), order, "ptr")
