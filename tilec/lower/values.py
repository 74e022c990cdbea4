"""Lowering, the values of a kernel: compute expressions (`tilec.ir.expr`) -> IR expressions
(`tilec.lower.code`) with the tile dimensions they vary over and their dtype (`Val`).

`ValueEmitter` is the half of the kernel builder that writes values; the other half
(`tilec.lower.builder.KernelBuilder`, which inherits this) writes the loops, stages and statements
around them. A value carries the tile dims it varies over; binary operations broadcast their operands
by inserting unit dims (`expand`); loads come from an inlined stage's expression, from registers (a value
computed in the same kernel) or from memory (a `Load` with the axes' masks); low-precision floats are
widened to float32 between rounding points; `//` and `%` round toward minus infinity as in torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.errors import LoweringError
from tilec.ir import dtypes
from tilec.ir.expr import (
    INT_BITS,
    KEEPS_INT,
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IterVar,
    Load,
    Random,
    Reduce,
    SizeVar,
    Unary,
    Where,
    size_text,
    substitute,
    walk,
)
from tilec.ir.knob import Knob
from tilec.lower import code as c
from tilec.lower import targets
from tilec.lower.nest import Assign, Note, TanhExp
from tilec.lower.nest import Load as LoadTile
from tilec.lower.nest_printer import show
from tilec.schedule.schedule import Stage


@dataclass
class Val:
    """A value in the kernel: its expression (tilec.lower.code), the tile dims it varies over, its dtype."""

    code: c.Ex
    dims: tuple[str, ...]
    dtype: str


@dataclass
class AxisVal:
    """An original axis inside a kernel: its offsets variable, dims, the loop depth defining it, mask.
    `block`: where the axis is one tile dim's block (start + arange(0, n), masked only at the tensor's
    edge), that start: a descriptor load can read it (`desc.load([start, ...])`).
    `run`: (start, n) where the axis takes the n consecutive values from start (one tile's block, padded or
    not): a producer read at shifts of it computes the window around them (`KernelBuilder.window`).
    `canon`: what the offsets and mask are, without their names (a tuple of expressions and sizes): two axes
    with one canon (of two stages) index the same elements, so a tile loaded for one serves the other
    (`shared_load`)."""

    code: c.Ex
    dims: tuple[str, ...]
    level: int
    mask: c.Ex | None
    block: c.Ex | None = None
    canon: tuple | None = None
    run: tuple | None = None  # (start, n): the axis's values here are start .. start + n - 1 (a halo's window)


def _is_name(code: c.Ex) -> bool:
    """A value written as one name (a variable, a size, a loop counter, True): used twice, it needs no temporary."""
    return isinstance(code, (c.Name, c.LoopIndex)) or (isinstance(code, c.Num) and isinstance(code.value, bool))


def _nonnegative(e: Expr) -> bool:
    """Index arithmetic on axes, sizes and non-negative ints (no loads, no subtraction): `//` and `%`
    truncate and floor alike there, so the plain operators serve."""
    for n in walk(e):
        if isinstance(n, (Load, Unary, Call, Where, Cast, Random)) or (isinstance(n, Binary) and n.op == "-"):
            return False
        if isinstance(n, Const) and (not isinstance(n.value, int) or n.value < 0):
            return False
    return True


_NARROW = ("int8", "int16", "uint8", "uint16")  # computed in int32 between rounding points (dtypes.compute_dtype)


def _may_leave_type(e: Expr) -> bool:
    """An operation of a narrow integer type whose int32 result can leave that type's range (a sum, a product, a
    negation, a left shift, `~` of an unsigned value, -128 // -1, abs(-128)): torch's result wraps around there."""
    if e.dtype not in _NARROW:
        return False
    if isinstance(e, Binary):
        return e.op in ("+", "-", "*", "//", "<<", "**")
    if isinstance(e, Unary):
        return True
    return isinstance(e, Call) and e.fn == "abs"


def tensor0d(code: c.Ex, dtype: str) -> c.Ex:
    """`code` as a tensor that a conversion applies to: a Python number becomes a 0-d tensor of its own kind
    (bool, int32, float32), an expression of numbers alone (a specialized size: `32 + 0.25`) one of `dtype`;
    anything else is a tensor already."""
    if isinstance(code, c.Num):
        v = code.value
        kind = "bool" if isinstance(v, bool) else "int32" if isinstance(v, int) else "float32"
        return c.call("full", c.Tuple(), code, c.DType(kind))
    if c.is_const(code):
        return c.call("full", c.Tuple(), code, c.DType(dtype))
    return code


def castable(v: Val, dst: str) -> c.Ex:
    """`v` as the operand of a conversion to `dst`: a constant made a 0-d tensor of its dtype (`tensor0d`),
    and an int or bool going to bfloat16 or float8 widened to float32 first, as torch converts it (Triton's
    interpreter bit-casts int -> bfloat16 and refuses int -> float8)."""
    x = tensor0d(v.code, v.dtype)
    if targets.convert_through_float32(dtypes.is_float(v.dtype), dst):
        x = c.To(x, "float32")
    return x


def _where(cond: c.Ex, a: c.Ex, b: c.Ex) -> c.Ex:
    return c.call("where", cond, a, b)


def _sign_differs(r: c.Ex, r2: c.Ex, b: c.Ex) -> c.Ex:
    """(r != 0) & ((r < 0) != (b < 0)): a truncated remainder `r` whose sign is not the divisor's (floor it)."""
    zero = c.Num(0)
    return c.BinOp("&", c.BinOp("!=", r, zero), c.BinOp("!=", c.BinOp("<", r2, zero), c.BinOp("<", b, zero)))


class ValueEmitter:
    """Writes the values of a kernel into the statements being built (`self.stmts`): the builder's state
    (names, tile dims, each stage's axes, what is in scope) is `KernelBuilder`'s."""

    # -- broadcasting values --------------------------------------------------------------------
    def _order(self, dims) -> tuple[str, ...]:
        return tuple(sorted(dims, key=self.dim_order.index))

    def shape(self, dims) -> c.Tuple:
        """The extents of tile dims `dims`, as a tuple expression."""
        return c.Tuple(tuple(self.dim_extent[d] for d in dims))

    def expand(self, v: Val, target: tuple[str, ...], full: bool = False) -> c.Ex:
        """`v` laid out over `target` dims (a superset): permuted, unit dims inserted, broadcast if `full`."""
        code, dims = v.code, v.dims
        order = tuple(d for d in target if d in dims)
        if order != dims:
            code = c.call("trans", code) if len(dims) == 2 else \
                c.call("permute", code, tuple(dims.index(d) for d in order))
        if order != target and order:
            code = c.Expand(code, tuple(d in order for d in target))
        if full and order != target:
            if not dims:  # a scalar (maybe a Python number, which broadcast_to does not take)
                dt = v.dtype if v.dtype in dtypes.DTYPES else "float32"
                return c.BinOp("|" if v.dtype == "bool" else "+", c.call("zeros", self.shape(target), c.DType(dt)), code)
            code = c.call("broadcast_to", code, self.shape(target))
        return code

    def combine(self, build, vals: list[Val], dtype: str, order: tuple[str, ...] | None = None) -> Val:
        """`build(*operands)` over `vals`, each laid out over their joint dims (or `order`)."""
        dims = order if order is not None else self._order({d for v in vals for d in v.dims})
        return Val(build(*[self.expand(v, dims) for v in vals]), dims, dtype)

    def widen(self, v: Val) -> Val:
        """A loaded low-precision float as float32 (arithmetic runs in float32 between rounding points)."""
        cd = dtypes.compute_dtype(v.dtype)
        if cd == v.dtype:
            return v
        return Val(c.To(v.code, cd), v.dims, cd)

    def emit_stmt(self, hint: str, code: c.Ex, note=None) -> c.Name:
        """`name = code` in the current body; the name (fresh, from `hint`) stands for the value."""
        name = self.fresh(hint)
        self.stmts.append(Assign(name, code, note))
        return c.Name(name)

    def extent_name(self, dim: str) -> str:
        """A tile dim's extent as a name: its int, or its knob's name."""
        e = self.dim_extent[dim]
        return str(e.value) if isinstance(e, c.Num) else e.id

    def is_scalar(self, code: c.Ex) -> bool:
        """A number, or a size or knob parameter: a scalar of the launch, not a tensor of the kernel."""
        return isinstance(code, c.Num) or (isinstance(code, c.Name) and code.id in self.params
                                           and self.params[code.id].kind in ("size", "constexpr"))

    # -- expressions ----------------------------------------------------------------------------
    def emit(self, e: Expr, st: Stage, loads: dict) -> Val:
        """The value of `e` in stage `st` (`loads`: the tiles already loaded)."""
        v = self.emit_node(e, st, loads)
        if _may_leave_type(e) and not self.is_scalar(v.code):
            return self.wrap(v, e.dtype)
        return v

    def wrap(self, v: Val, dtype: str) -> Val:
        """`v`, a narrow integer computed in int32, brought back into its type `dtype` (wrapped around, as torch's
        result of that type is), still in int32."""
        return Val(c.To(c.To(v.code, dtype), v.dtype), v.dims, v.dtype)

    def emit_node(self, e: Expr, st: Stage, loads: dict) -> Val:
        env = self.env[st.name]
        if isinstance(e, Const):
            if e.dtype == "bool":
                return Val(c.Num(bool(e.value)), (), "bool")
            return Val(c.Num(e.value), (), "float32" if isinstance(e.value, float) else "int32")
        if isinstance(e, (SizeVar, Knob)):
            return Val(self.scalar(e), (), "int32")
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
            if dtypes.is_float(e.dtype) and dtypes.compute_dtype(e.dtype) != e.dtype:
                cd = dtypes.compute_dtype(e.dtype)  # rounded to the narrow type, computed on in float32
                return Val(c.To(c.To(castable(v, e.dtype), e.dtype), cd), v.dims, cd)
            return Val(c.Cast(v.code, e.dtype), v.dims, e.dtype)
        if isinstance(e, Unary):
            v = self.emit(e.a, st, loads)
            if e.op == "~" and v.dtype == "bool":  # logical not: ~ of a Python bool (a specialized size's
                return Val(c.BinOp("==", v.code, c.Num(0)), v.dims, "bool")  # comparison) is bitwise, -1
            return Val(c.UnaryOp(e.op, v.code), v.dims, v.dtype)
        if isinstance(e, Call):
            return self.math(e.fn, self.emit(e.args[0], st, loads))
        if isinstance(e, Random):
            seed, offset = (self.emit(x, st, loads) for x in (e.seed, e.offset))
            offset = self.as_tensor_of(offset, "int64" if offset.dtype == "int64" else "int32")
            bits = self.combine(lambda sd, off: c.call(e.kind, sd, off), [seed, offset], e.dtype)
            if e.kind == "randint":  # unsigned 32 bits: widened to int64 without a sign
                return Val(c.To(bits.code, "int64"), bits.dims, "int64")
            return bits
        if isinstance(e, Where):
            if self.fold and repr(e.cond) in self.fold:  # known true here (an online loop's unmasked tiles)
                return self.emit(e.a, st, loads)
            cv, a, b = (self.emit(x, st, loads) for x in (e.cond, e.a, e.b))
            return self.combine(_where, [cv, a, b], dtypes.promote(a.dtype, b.dtype))
        if isinstance(e, Binary):
            a, b = self.emit(e.a, st, loads), self.emit(e.b, st, loads)
            if a.dtype == b.dtype == "bool" and e.op in ("+", "*", "max", "min"):  # torch: or / and
                op = "|" if e.op in ("+", "max") else "&"
                return self.combine(lambda x, y: c.BinOp(op, x, y), [a, b], "bool")
            if e.op in ("max", "min"):
                dtype = dtypes.promote(a.dtype, b.dtype)
                kw = {"nan": True} if dtypes.is_float(dtype) else {}  # NaN if either is, as torch
                return self.combine(lambda x, y: c.call(f"{e.op}imum", x, y, **kw), [a, b], dtype)
            if e.op == "/" and not dtypes.is_float(a.dtype) and not dtypes.is_float(b.dtype):
                a = Val(c.Cast(a.code, "float32"), a.dims, "float32")
            if e.op in ("//", "%") and not _nonnegative(e):
                return self.floor_divmod(e.op, a, b)
            if e.op in ("<<", ">>"):
                return self.shift(e.op, a, b, e.dtype)
            if e.op == "**":
                return self.power(a, b, e.dtype)
            dtype = "bool" if e.op in c.CMP else dtypes.promote(a.dtype, b.dtype)
            if e.op == "cdiv":
                return self.combine(lambda x, y: c.call("cdiv", x, y), [a, b], dtype)
            return self.combine(lambda x, y: c.BinOp(e.op, x, y), [a, b], dtype)
        if isinstance(e, Reduce):
            raise LoweringError(f"{st.name}: a reduction can only be the whole body of a compute")
        raise LoweringError(f"cannot lower expression {e}")

    def named(self, v: Val, hint: str = "x") -> Val:
        """`v` as one name (a temporary where it is an expression), to be used more than once."""
        return v if _is_name(v.code) else Val(self.emit_stmt(hint, v.code), v.dims, v.dtype)

    def math(self, fn: str, v: Val) -> Val:
        """A math function of one value (`tilec.ir.expr.MATH`) as torch computes it: of an integer, floor, ceil,
        trunc and round are the value itself, abs and sign keep its type, the others compute in float32."""
        if not dtypes.is_float(v.dtype):
            if fn in ("floor", "ceil", "trunc", "round"):
                return v
            if fn not in KEEPS_INT:
                v = Val(c.Cast(v.code, "float32"), v.dims, "float32")
        if fn == "silu":
            v = self.named(v)
            return Val(c.BinOp("*", v.code, c.call("sigmoid", v.code)), v.dims, v.dtype)
        if fn == "tanh":
            v = self.named(v)
            e_name = self.fresh("e")  # the interpreter form computes exp(-2|x|) here (triton_printer.py)
            self.stmts.append(TanhExp(e_name, v.code))
            return Val(c.Tanh(v.code, e_name), v.dims, v.dtype)
        if fn == "sign":  # (x > 0) - (x < 0): 0 for NaN and both zeros, as torch
            x = self.named(self.as_tensor_of(v, v.dtype)).code
            return Val(c.BinOp("-", c.To(c.BinOp(">", x, c.Num(0)), v.dtype), c.To(c.BinOp("<", x, c.Num(0)), v.dtype)),
                       v.dims, v.dtype)
        if fn == "trunc":
            x = self.named(v).code
            return Val(_where(c.BinOp("<", x, c.Num(0)), c.call("ceil", x), c.call("floor", x)), v.dims, v.dtype)
        libm = {"round": "rint", "erf": "erf", "sin": "sin", "cos": "cos", "log1p": "log1p", "expm1": "expm1"}
        if fn in libm:
            return Val(c.Libm(libm[fn], (self.as_tensor_of(v, v.dtype).code,)), v.dims, v.dtype)
        return Val(c.call(fn, v.code), v.dims, v.dtype)

    def power(self, a: Val, b: Val, dtype: str) -> Val:
        """torch.pow of `a` and `b` (promoted to `dtype`). An integer power (its exponent a constant >= 0, checked at
        definition) is a product, wrapped at the rounding point as torch's. Of floats, the exponents torch computes
        by its own shortcuts are those (x * x, x * x * x, sqrt, rsqrt, 1 / x, 1 / (x * x)); any other is C's pow."""
        v = b.code.value if isinstance(b.code, c.Num) else None
        n = v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        if not dtypes.is_float(dtype):
            return self.product(a, int(n), dtypes.compute_dtype(dtype))
        cd = dtypes.compute_dtype(dtype)
        a = self.as_tensor_of(a, cd) if not dtypes.is_float(a.dtype) else a
        if n in (0, 1, 2, 3):
            return self.product(a, int(n), cd)
        if n in (-1, -2):
            return self.combine(lambda x: c.BinOp("/", c.Num(1.0), x), [self.product(a, -int(n), cd)], cd)
        if n in (0.5, -0.5):
            return self.combine(lambda x: c.call("sqrt" if n > 0 else "rsqrt", x), [a], cd)
        a, b = self.as_tensor_of(a, cd), self.as_tensor_of(b, cd)
        return self.combine(lambda x, y: c.Libm("pow", (x, y)), [a, b], cd)

    def product(self, a: Val, n: int, dtype: str) -> Val:
        """`a` multiplied by itself to the power n >= 0 (by squaring past 3; 1 for n = 0, NaN included, as torch)."""
        if n == 0:
            return Val(c.Num(1.0 if dtypes.is_float(dtype) else 1), (), dtype)
        if n == 1:
            return a
        a = self.named(a)
        if n <= 3:
            code = a.code
            for _ in range(n - 1):
                code = c.BinOp("*", code, a.code)
            return Val(code, a.dims, dtype)
        half = self.named(self.product(a, n // 2, dtype), "p")
        sq = Val(c.BinOp("*", half.code, half.code), a.dims, dtype)
        return Val(c.BinOp("*", sq.code, a.code), a.dims, dtype) if n % 2 else sq

    def floor_divmod(self, op: str, a: Val, b: Val) -> Val:
        """Python/torch `//` and `%` (rounding toward minus infinity); the plain integer operators truncate."""
        dtype = dtypes.promote(a.dtype, b.dtype)
        if dtypes.is_float(dtype):  # both operands tensors of one type: fmod of two Python numbers would be
            dtype = dtypes.compute_dtype(dtype)  # Python's, and libdevice's fmod takes two of float32 or float64
            a, b = (self.as_tensor_of(v, dtype) for v in (a, b))
        if not _is_name(a.code):
            a = Val(self.emit_stmt("n", a.code), a.dims, a.dtype)
        if not _is_name(b.code) and not isinstance(b.code, c.Num):
            b = Val(self.emit_stmt("d", b.code), b.dims, b.dtype)
        if dtypes.is_float(dtype):
            return self.float_floor_divmod(op, a, b, dtype)
        r = self.combine(lambda x, y: c.BinOp("%", x, y), [a, b], dtype)
        r = Val(self.emit_stmt("r", r.code), r.dims, dtype)
        fix = self.combine(_sign_differs, [r, r, b], "bool")
        fixed = Val(fix.code, (), "bool")  # laid out already: not expanded again
        if op == "%":
            return self.combine(lambda f, r1, b1, r2: _where(f, c.BinOp("+", r1, b1), r2), [fixed, r, b, r], dtype)
        return self.combine(lambda f, a1, b1, a2, b2: _where(f, c.BinOp("-", c.BinOp("//", a1, b1), c.Num(1)),
                                                             c.BinOp("//", a2, b2)), [fixed, a, b, a, b], dtype)

    def shift(self, op: str, a: Val, b: Val, dtype: str) -> Val:
        """torch's `<<` and `>>` of integers of `dtype` (the promoted type, `INT_BITS` wide), computed in its compute
        type (int32 for the narrow ones, as all their arithmetic between rounding points). `>>` is arithmetic on
        signed values (Triton's `>>` of a signed int is). A shift by a negative amount or by the width or more,
        undefined in C and in Triton, is what torch makes it: 0 for `<<` and for `>>` of uint8 and uint16, and the sign
        (0 or -1) for `>>` of a signed value."""
        bits, cd = INT_BITS[dtype], dtypes.compute_dtype(dtype)
        top = INT_BITS[cd] - 1
        v = b.code.value if isinstance(b.code, c.Num) else None
        amount = int(v) if isinstance(v, int) else None  # a bool is an int: True shifts by 1
        a, b = (v if self.is_scalar(v.code) or v.dtype == cd else Val(c.To(v.code, cd), v.dims, cd) for v in (a, b))
        if cd != dtype:  # int8/int16/uint8/uint16 run in int32 between rounding points: torch shifts values of the
            # narrow type, so an operand that may have left it ((x << 2) >> 2, ~x of uint8) is wrapped back first
            # (the left one of << needs no wrap: its low bits are the same either way)
            a, b = (v if self.is_scalar(v.code) or (v is a and op == "<<") else
                    Val(c.To(c.To(v.code, dtype), cd), v.dims, cd) for v in (a, b))
        if amount is not None:  # a constant amount: decided here
            if 0 <= amount < bits:
                return self.combine(lambda x: c.BinOp(op, x, c.Num(amount)), [a], cd)
            if op == "<<" or dtype in dtypes.UNSIGNED:
                return self.combine(lambda x: c.BinOp("*", x, c.Num(0)), [a], cd)
            return self.combine(lambda x: c.BinOp(">>", x, c.Num(top)), [a], cd)
        if not _is_name(b.code):  # used twice
            b = Val(self.emit_stmt("sh", b.code), b.dims, b.dtype)

        def ok(x, y):
            return c.BinOp("&", c.BinOp(">=", x, c.Num(0)), c.BinOp("<", y, c.Num(bits)))
        if op == "<<" or dtype in dtypes.UNSIGNED:
            return self.combine(lambda b1, b2, a1, b3: _where(ok(b1, b2), c.BinOp(op, a1, b3), c.Num(0)),
                                [b, b, a, b], cd)
        return self.combine(lambda a1, b1, b2, b3: c.BinOp(">>", a1, _where(ok(b1, b2), b3, c.Num(top))),
                            [a, b, b, b], cd)

    def as_tensor_of(self, v: Val, dtype: str) -> Val:
        """`v` as a tensor of `dtype`: a scalar of the launch (a number, a size) becomes a 0-d tensor, another
        type is converted."""
        if self.is_scalar(v.code):
            return Val(c.call("full", c.Tuple(), v.code, c.DType(dtype)), v.dims, dtype)
        if v.dtype != dtype:
            return Val(c.To(v.code, dtype), v.dims, dtype)
        return v

    def float_floor_divmod(self, op: str, a: Val, b: Val, dtype: str) -> Val:
        """Float `//` and `%` as torch computes them (c10's div_floor_floating and remainder): from C's fmod,
        which is exact, not from floor(a / b), which is a quotient off by one wherever a / b rounds up to a
        whole number (1.0 // 0.1 is 9.0, not 10.0). The remainder takes the divisor's sign; the quotient
        (a - r) / b, less one where that sign was fixed, is rounded to the nearest whole number (the division
        may round), its zero signed as a / b, and a zero divisor gives a / b (an infinity or NaN)."""
        dims = self._order({*a.dims, *b.dims})
        r = Val(self.emit_stmt("r", c.Fmod(self.expand(a, dims), self.expand(b, dims))), dims, dtype)
        fix = self.combine(_sign_differs, [r, r, b], "bool")
        fixed = Val(self.emit_stmt("fix", fix.code), fix.dims, "bool")
        if op == "%":
            return self.combine(lambda f, r1, b1, r2: _where(f, c.BinOp("+", r1, b1), r2), [fixed, r, b, r], dtype)
        q = self.combine(lambda a1, r1, b1: c.BinOp("/", c.BinOp("-", a1, r1), b1), [a, r, b], dtype)
        q = Val(self.emit_stmt("q", self.combine(lambda f, q1, q2: _where(f, c.BinOp("-", q1, c.Num(1.0)), q2),
                                                 [fixed, q, q], dtype).code), dims, dtype)
        fq = Val(self.emit_stmt("fq", c.call("floor", q.code)), dims, dtype)
        whole = self.combine(lambda q1, f1, f2, f3: _where(c.BinOp(">", c.BinOp("-", q1, f1), c.Num(0.5)),
                                                           c.BinOp("+", f2, c.Num(1.0)), f3), [q, fq, fq, fq], dtype)
        signed = self.combine(lambda q1, a1, b1, w: _where(c.BinOp("==", q1, c.Num(0)),
                                                           c.BinOp("*", c.BinOp("/", a1, b1), c.Num(0.0)), w),
                              [q, a, b, whole], dtype)
        return self.combine(lambda b1, a1, b2, s: _where(c.BinOp("==", b1, c.Num(0)), c.BinOp("/", a1, b2), s),
                            [b, a, b, signed], dtype)

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
                f"of that loop ({', '.join(show(x) for x in axis_codes)}), as one tile of its own: read it at "
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
                masks.append(Val(c.all_of(c.BinOp(">=", v.code, c.Num(0)), c.BinOp("<", v.code, ext)), v.dims, "bool"))
        addr = self.address(ptr, t, idx_vals)
        self._check_tile_numel(st, addr.dims)
        mask = None
        if masks:
            mask = self.combine(c.all_of, masks, "bool", order=addr.dims).code
        name = self.fresh(hint)
        desc, starts = self.descriptor(t, ld.indices, st, addr) if tma else (None, ())
        note = Note((repr(ld) + ("  (tensor descriptor)" if desc else ""),))
        self.stmts.append(LoadTile(name, addr.code, mask, note, desc, starts, t.dtype))
        self.zero_outside[name] = {m.code for m in masks}  # where the load gives 0 (other=0)
        return Val(c.Name(name), addr.dims, t.dtype)

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
        block = tuple(self.extent_name(d) for d in addr.dims)
        name = self._param(f"{t.name}_desc_{'x'.join(block)}", "descriptor", tensor=t.name, block=block)
        return name, tuple(starts)

    def address(self, ptr: str, t, idx_vals: list[Val]) -> Val:
        """T + offs_i * stride_T_0 + ... (each index laid out over the tile), its dims in the tensor's index
        order (the memory order, so a row-major tile is loaded with its contiguous dimension last)."""
        order = tuple(dict.fromkeys(d for v in idx_vals for d in v.dims))
        terms = [c.BinOp("*", self.expand(v, order), c.Name(f"stride_{t.name}_{d}")) for d, v in enumerate(idx_vals)]
        return Val(c.sum_of(c.Name(ptr), *terms), order, "ptr")
