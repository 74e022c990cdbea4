"""Expression nodes of the compute language: constants, axes, sizes, loads, arithmetic, calls, casts,
reductions. Python operators build them (`A[i, k] * W[k, j] + 1.0`).

Every node has a nominal `dtype` that follows torch's promotion (a Python scalar is "weak" and does
not widen a tensor's type, as in torch). Nodes are immutable and compared by identity.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

from tilec.errors import ArgumentError
from tilec.ir.dtypes import check_dtype, is_float, promote
from tilec.ir.names import check_name


class Expr:
    """Base class of expression nodes. Arithmetic and comparisons build new nodes."""

    dtype: str = "float32"
    weak: bool = False  # a Python scalar: takes the other operand's type

    # arithmetic
    def __add__(self, o): return Binary("+", self, o)
    def __radd__(self, o): return Binary("+", o, self)
    def __sub__(self, o): return Binary("-", self, o)
    def __rsub__(self, o): return Binary("-", o, self)
    def __mul__(self, o): return Binary("*", self, o)
    def __rmul__(self, o): return Binary("*", o, self)
    def __truediv__(self, o): return Binary("/", self, o)
    def __rtruediv__(self, o): return Binary("/", o, self)
    def __floordiv__(self, o): return Binary("//", self, o)
    def __rfloordiv__(self, o): return Binary("//", o, self)
    def __mod__(self, o): return Binary("%", self, o)
    def __rmod__(self, o): return Binary("%", o, self)
    def __neg__(self): return Unary("-", self)
    def __abs__(self): return Call("abs", (self,))
    # comparisons (== and != are methods, so expressions stay hashable)
    def __lt__(self, o): return Binary("<", self, o)
    def __le__(self, o): return Binary("<=", self, o)
    def __gt__(self, o): return Binary(">", self, o)
    def __ge__(self, o): return Binary(">=", self, o)
    def __and__(self, o): return Binary("&", self, o)
    def __rand__(self, o): return Binary("&", o, self)
    def __or__(self, o): return Binary("|", self, o)
    def __ror__(self, o): return Binary("|", o, self)
    def __invert__(self): return Unary("~", self)
    def eq(self, o): return Binary("==", self, o)
    def ne(self, o): return Binary("!=", self, o)

    def __eq__(self, o):
        """`X[i] == 0` builds a comparison (as TVM's EqualOp); its truth value is identity, so
        expressions still work as dict keys and in `in` tests."""
        try:
            return Binary("==", self, o)
        except ArgumentError:
            return NotImplemented

    def __ne__(self, o):
        try:
            return Binary("!=", self, o)
        except ArgumentError:
            return NotImplemented

    __hash__ = object.__hash__

    def __bool__(self):
        raise ArgumentError("a tilec expression has no truth value at definition time; "
                            "use tc.where(cond, a, b) instead of `if`/`and`/`or`")

    def astype(self, dtype) -> Expr:
        """Round this value to `dtype` here (a rounding point inside an expression)."""
        return Cast(self, check_dtype(dtype, "astype"))

    def children(self) -> tuple[Expr, ...]:
        return ()


def as_expr(value: object) -> Expr:
    """Wrap a Python number as a weak constant; pass expressions through.

    Numbers of other types (numpy scalars, IntEnum members) become plain ints and floats first, so only the
    repr of an int or a float is ever written into generated code. An int outside int32 is an int64 value
    (a cast, and not weak): `X[i] + 3_000_000_000` computes in int64 for an int32 X (where torch would wrap
    around) and in X's type for a float X; an int outside int64 and a NaN are refused.
    """
    import numbers

    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(value, "bool")
    if isinstance(value, numbers.Integral):
        value = int(value)
        if -2**31 <= value < 2**31:
            return Const(value, "int32")
        if -2**63 <= value < 2**63:
            return Cast(Const(value, "int64"), "int64")  # the cast holds it in an int64 in the kernel too
        raise ArgumentError(f"the int constant {value} does not fit in int64, the widest integer tilec "
                            f"computes with; use a float (e.g. {value}.0) or an int in [-2**63, 2**63)")
    if isinstance(value, numbers.Real):
        value = float(value)
        return Const(value, "float32")  # NaN and infinities included (emitted as float("nan") etc.)
    raise ArgumentError(f"expected a tilec expression or a number, got {type(value).__name__} {value!r}")


def _category(dtype: str) -> int:
    return 0 if dtype == "bool" else 2 if is_float(dtype) else 1


def _promote(a: Expr, b: Expr) -> str:
    """torch's rule: a Python number (weak) keeps the tensor's type unless it is of a higher category
    (bool < int < float); then the result is that category's default type (int64, float32)."""
    if a.weak != b.weak:
        weak, strong = (a, b) if a.weak else (b, a)
        if _category(weak.dtype) > _category(strong.dtype):
            return "float32" if is_float(weak.dtype) else "int64"
        return strong.dtype
    return promote(a.dtype, b.dtype)


class Const(Expr):
    def __init__(self, value, dtype: str):
        self.value, self.dtype, self.weak = value, dtype, True

    def __repr__(self):
        return repr(self.value)


class SizeVar(Expr):
    """A symbolic size (`M, N, K = tc.size_vars("M N K")`): one kernel serves many shapes.

    Facts stated with `tc.assume` (e.g. `M % 64 == 0`) are kept on the size; isl uses them to drop
    masks, and every call checks that the tensors' sizes satisfy them.
    """

    dtype = "int32"

    def __init__(self, name: str):
        self.name = check_name(name, "size_vars")
        self.facts: list[Expr] = []

    def __repr__(self):
        return self.name


class IterVar(Expr):
    """An axis: a spatial axis of a compute, a reduce axis, or one made by split/fuse.

    `extent` is an expression of sizes and knobs; `kind` is "spatial" or "reduce".
    """

    dtype = "int32"

    def __init__(self, name: str, extent, kind: str):
        self.name = check_name(name, "axis name")
        self.extent = extent
        self.kind = kind

    def __repr__(self):
        return self.name


class Load(Expr):
    """`T[i, j]`: read tensor T at index expressions."""

    def __init__(self, tensor, indices: Sequence[Expr]):
        self.tensor, self.indices = tensor, tuple(indices)
        self.dtype = tensor.dtype

    def children(self):
        return self.indices

    def __repr__(self):
        return f"{self.tensor.name}[{', '.join(map(repr, self.indices))}]"


_CMP = ("<", "<=", ">", ">=", "==", "!=")


class Binary(Expr):
    def __init__(self, op: str, a, b):
        self.op, self.a, self.b = op, as_expr(a), as_expr(b)
        self.weak = self.a.weak and self.b.weak
        both_bool = self.a.dtype == "bool" and self.b.dtype == "bool"
        if both_bool and op in ("-", "//", "%"):
            raise ArgumentError(f"{op} on two bool values is not supported (as in torch); cast one with "
                                f".astype('int32') first: {self.a!r} {op} {self.b!r}")
        if op in ("&", "|") and (is_float(self.a.dtype) or is_float(self.b.dtype)):
            raise ArgumentError(f"{op} needs bool or integer operands (as in torch), got {self.a.dtype} and "
                                f"{self.b.dtype}: {self.a!r} {op} {self.b!r}; compare first, e.g. (x > 0) {op} (y > 0)")
        if op in _CMP:
            self.dtype = "bool"
        elif op == "/":
            d = _promote(self.a, self.b)
            self.dtype = d if is_float(d) else "float32"
        elif op in ("&", "|"):
            self.dtype = "bool" if self.a.dtype == self.b.dtype == "bool" else _promote(self.a, self.b)
        else:
            self.dtype = _promote(self.a, self.b)

    def __bool__(self):
        if self.op == "==":
            return self.a is self.b
        if self.op == "!=":
            return self.a is not self.b
        return Expr.__bool__(self)

    def children(self):
        return (self.a, self.b)

    def __repr__(self):
        if self.op in ("max", "min"):
            return f"{self.op}imum({self.a!r}, {self.b!r})"
        return f"({self.a!r} {self.op} {self.b!r})"


class Unary(Expr):
    def __init__(self, op: str, a):
        self.op, self.a = op, as_expr(a)
        if op == "-" and self.a.dtype == "bool":
            raise ArgumentError(f"-{self.a!r}: negation of a bool value is not supported (as in torch); "
                                f"use ~ to invert a mask")
        if op == "~" and is_float(self.a.dtype):
            raise ArgumentError(f"~{self.a!r}: ~ needs a bool or integer value (as in torch), got "
                                f"{self.a.dtype}")
        self.dtype, self.weak = self.a.dtype, self.a.weak

    def children(self):
        return (self.a,)

    def __repr__(self):
        return f"{self.op}{self.a!r}"


MATH = ("exp", "log", "sqrt", "rsqrt", "sigmoid", "silu", "tanh", "abs")


class Call(Expr):
    """A math function of one value: exp, log, sqrt, rsqrt, sigmoid, silu, tanh, abs."""

    def __init__(self, fn: str, args: Sequence):
        self.fn, self.args = fn, tuple(as_expr(a) for a in args)
        d = self.args[0].dtype
        self.dtype = d if (is_float(d) or fn == "abs") else "float32"

    def children(self):
        return self.args

    def __repr__(self):
        return f"{self.fn}({', '.join(map(repr, self.args))})"


class Where(Expr):
    def __init__(self, cond, a, b):
        self.cond, self.a, self.b = as_expr(cond), as_expr(a), as_expr(b)
        self.dtype = _promote(self.a, self.b)
        self.weak = self.a.weak and self.b.weak

    def children(self):
        return (self.cond, self.a, self.b)

    def __repr__(self):
        return f"where({self.cond!r}, {self.a!r}, {self.b!r})"


class Cast(Expr):
    def __init__(self, a, dtype: str):
        self.a, self.dtype = as_expr(a), dtype

    def children(self):
        return (self.a,)

    def __repr__(self):
        return f"{self.a!r}.astype({self.dtype!r})"


class Reduce(Expr):
    """`tc.sum/max/min(body, axis=...)`: combine `body` over reduce axes, accumulating in `acc_dtype`."""

    def __init__(self, op: str, body, axes: tuple[IterVar, ...], acc_dtype: str):
        self.op, self.body, self.axes, self.dtype = op, as_expr(body), axes, acc_dtype

    @property
    def acc_dtype(self) -> str:
        return self.dtype

    def children(self):
        return (self.body,)

    def __repr__(self):
        return f"{self.op}({self.body!r}, axis=[{', '.join(a.name for a in self.axes)}])"


# ---------------------------------------------------------------------------------------------
# user-facing constructors


def size_vars(names: str | Iterable[str]) -> tuple[SizeVar, ...]:
    """`M, N, K = tc.size_vars("M N K")`: symbolic sizes, bound from tensor shapes at call time."""
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    elif not isinstance(names, (list, tuple)):
        raise ArgumentError(f"size_vars: expected names in a string ('M N K') or a list, got {names!r}")
    out = tuple(SizeVar(n) for n in names)
    if not out:
        raise ArgumentError("size_vars: expected at least one name, e.g. tc.size_vars('M N K')")
    return out


_FACT_OPS = ("<", "<=", ">", ">=", "==", "!=")


def assume(fact) -> None:
    """State a fact about sizes that isl may use: `tc.assume(M % 64 == 0)`, `tc.assume(K >= 128)`,
    `tc.assume(N.eq(4096))`. Kernels then check it on every call (ArgumentError if it fails).

    A fact compares affine expressions of sizes and ints (+, -, * by an int, // and % by a positive int),
    the facts isl reads. One that no sizes (each at least 1) satisfy, alone or with the facts already
    stated on its sizes, is refused: every call would fail.
    """
    import islpy as isl

    if not (isinstance(fact, Binary) and fact.op in _FACT_OPS):
        raise ArgumentError(f"tc.assume: expected a comparison of sizes, such as M % 64 == 0 or K >= 128, "
                            f"got {fact!r}")
    def plain_int(n):  # an int past int32 is a cast of a constant (as_expr); here it is just an int
        if isinstance(n, Cast) and isinstance(n.a, Const) and type(n.a.value) is int:
            return Const(n.a.value, "int64")
        return None

    if any(isinstance(n, Cast) for n in walk(fact)):
        fact = substitute(fact, plain_int)
    sizes = [n for n in walk(fact) if isinstance(n, SizeVar)]
    bad = [n for n in walk(fact) if not isinstance(n, (SizeVar, Const, Binary))]
    if bad or not sizes:
        raise ArgumentError(f"tc.assume: a fact may only use sizes and ints, got {fact!r}")
    for n in walk(fact):
        if isinstance(n, Const) and type(n.value) is not int:
            raise ArgumentError(f"tc.assume({fact!r}): {n!r} is not an int; a fact compares integer "
                                f"expressions of sizes and ints, e.g. M >= 128")

    def has_size(e):
        return any(isinstance(x, SizeVar) for x in walk(e))

    for n in walk(fact):
        if not isinstance(n, Binary) or n is fact:
            continue
        if n.op not in ("+", "-", "*", "//", "%"):
            raise ArgumentError(f"tc.assume({fact!r}): {n!r} uses {n.op}, but a fact may only use +, -, * "
                                f"by an int, and // and % by a positive int; isl reads no other facts"
                                + ("; use // for division" if n.op == "/" else ""))
        if n.op in ("//", "%") and not (isinstance(n.b, Const) and n.b.value > 0):
            raise ArgumentError(f"tc.assume({fact!r}): the divisor in {n!r} must be a positive int "
                                f"(got {n.b!r}), e.g. M % 64 == 0")
        if n.op == "*" and has_size(n.a) and has_size(n.b):
            raise ArgumentError(f"tc.assume({fact!r}): {n!r} multiplies two sizes; isl can only use facts "
                                f"that are affine in the sizes (multiply them by ints only)")

    def text(e) -> str:  # isl text of a checked fact
        if not has_size(e):
            v = evaluate(e, {})
            return f"({v})" if v < 0 else str(v)
        if isinstance(e, SizeVar):
            return e.name
        a, b = text(e.a), text(e.b)
        if e.op == "//":
            return f"floor(({a})/{b})"
        if e.op == "%":
            return f"(({a}) mod {b})"
        return f"({a} {'=' if e.op == '==' else e.op} {b})"

    related: list = []  # facts already stated on these sizes, and on the sizes those mention
    todo, seen = list(dict.fromkeys(sizes)), set()
    while todo:
        sv = todo.pop(0)
        if id(sv) in seen:
            continue
        seen.add(id(sv))
        for f in sv.facts:
            if all(f is not g for g in related):
                related.append(f)
                todo += [n for n in walk(f) if isinstance(n, SizeVar)]

    def satisfiable(facts) -> bool:
        names = sorted({n.name for f in facts for n in walk(f) if isinstance(n, SizeVar)})
        try:
            cond = " and ".join([f"{p} >= 1" for p in names] + [text(f) for f in facts])
            space = isl.Set.read_from_str(isl.DEFAULT_CONTEXT, f"[{', '.join(names)}] -> {{ : {cond} }}")
            return not space.is_empty()
        except (isl.Error, ArgumentError, AttributeError, KeyError):  # a fact set by hand, not through assume
            return True

    if not satisfiable([fact]):
        raise ArgumentError(f"tc.assume({fact!r}): no sizes satisfy it (sizes are at least 1), so every call "
                            f"would fail; fix or drop it")
    if related and not satisfiable([fact, *related]):
        before = ", ".join(f"tc.assume({f!r})" for f in related)
        raise ArgumentError(f"tc.assume({fact!r}): no sizes satisfy it together with {before} (sizes are at "
                            f"least 1), so every call would fail; fix or drop it")
    for sv in dict.fromkeys(sizes):
        sv.facts.append(fact)


def reduce_axis(extent, name: str) -> IterVar:
    """A reduction axis over `range(extent)`: `k = tc.reduce_axis(K, name="k")`."""
    return IterVar(name, check_extent(extent, f"reduce_axis {name!r}"), "reduce")


def check_extent(extent, what: str) -> Expr:
    """An extent is a positive int or an expression of size variables."""
    if isinstance(extent, bool) or not isinstance(extent, (int, Expr)):
        raise ArgumentError(f"{what}: expected a positive int or a size variable, got {extent!r}")
    if isinstance(extent, int):
        if extent < 1:
            raise ArgumentError(f"{what}: expected a positive int or a size variable, got {extent}")
        return Const(extent, "int32")
    for node in walk(extent):
        if isinstance(node, (Load, IterVar, Reduce)):
            raise ArgumentError(f"{what}: an extent may only use sizes and ints, got {extent!r}")
    if extent.dtype not in ("int32", "int64"):
        raise ArgumentError(f"{what}: an extent must be an integer expression of sizes, got {extent!r} "
                            f"({extent.dtype}); use // for division")
    return extent


def _reduce(op: str, body, axis, acc_dtype) -> Reduce:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis) if isinstance(axis, (list, tuple)) else ()
    if not axes or not all(isinstance(a, IterVar) and a.kind == "reduce" for a in axes):
        raise ArgumentError(f"tc.{op}: axis must be a reduce_axis or a list of them, got {axis!r}")
    body = as_expr(body)
    if acc_dtype is None:
        acc_dtype = "float32" if is_float(body.dtype) else "int32"  # a sum of comparisons counts, as in torch
        if body.dtype == "float64":
            acc_dtype = "float64"
    return Reduce(op, body, axes, check_dtype(acc_dtype, f"tc.{op} acc_dtype"))


def sum(expr, axis, acc_dtype=None) -> Reduce:  # noqa: A001 - mirrors tvm.te.sum
    """Sum of `expr` over the reduce axis (or axes) `axis`, accumulated in `acc_dtype`."""
    return _reduce("sum", expr, axis, acc_dtype)


def max(expr, axis, acc_dtype=None) -> Reduce:  # noqa: A001
    """Maximum of `expr` over `axis`."""
    return _reduce("max", expr, axis, acc_dtype)


def min(expr, axis, acc_dtype=None) -> Reduce:  # noqa: A001
    """Minimum of `expr` over `axis`."""
    return _reduce("min", expr, axis, acc_dtype)


def _call(fn):
    def make(x):
        return Call(fn, (x,))
    make.__name__ = fn
    make.__doc__ = f"Elementwise {fn}, computed in float32."
    return make


exp, log, sqrt, rsqrt, sigmoid, silu, tanh = (_call(f) for f in MATH[:7])
abs = _call("abs")  # noqa: A001


def maximum(a, b) -> Expr:
    """Elementwise maximum of two values."""
    return Binary("max", a, b)


def minimum(a, b) -> Expr:
    """Elementwise minimum of two values."""
    return Binary("min", a, b)


def where(cond, a, b) -> Expr:
    """`a` where `cond` holds, else `b`."""
    return Where(cond, a, b)


def walk(expr: Expr):
    """Yield `expr` and all its sub-expressions, parents first."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children()))


def substitute(expr: Expr, fn) -> Expr:
    """Rebuild `expr` bottom-up, replacing each node n by fn(n) when that returns non-None."""
    new = fn(expr)
    if new is not None:
        return new
    if isinstance(expr, Load):
        return Load(expr.tensor, [substitute(i, fn) for i in expr.indices])
    if isinstance(expr, Binary):
        return Binary(expr.op, substitute(expr.a, fn), substitute(expr.b, fn))
    if isinstance(expr, Unary):
        return Unary(expr.op, substitute(expr.a, fn))
    if isinstance(expr, Call):
        return Call(expr.fn, [substitute(a, fn) for a in expr.args])
    if isinstance(expr, Where):
        return Where(substitute(expr.cond, fn), substitute(expr.a, fn), substitute(expr.b, fn))
    if isinstance(expr, Cast):
        return Cast(substitute(expr.a, fn), expr.dtype)
    if isinstance(expr, Reduce):
        return Reduce(expr.op, substitute(expr.body, fn), expr.axes, expr.dtype)
    return expr


def evaluate(expr: Expr, env: dict) -> int:
    """Evaluate an integer expression of sizes (and knob values) given `env` name -> int."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, (SizeVar, IterVar)):
        return env[expr.name]
    if hasattr(expr, "knob_name"):
        return env[expr.knob_name]
    if isinstance(expr, Binary):
        a, b = evaluate(expr.a, env), evaluate(expr.b, env)
        ops = {"+": a + b, "-": a - b, "*": a * b}
        if expr.op in ops:
            return ops[expr.op]
        if expr.op == "//":
            return a // b
        if expr.op == "%":
            return a % b
        if expr.op == "cdiv":
            return -(-a // b)
        if expr.op in ("max", "min"):
            return builtins.max(a, b) if expr.op == "max" else builtins.min(a, b)
        cmp = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}
        if expr.op in cmp:
            return cmp[expr.op]
    raise ArgumentError(f"cannot evaluate {expr!r} as an integer size")


def size_text(e: Expr) -> str:
    """A size expression for people: cdiv(M, 64) * cdiv(N, BN)."""
    if isinstance(e, Binary) and e.op == "cdiv":
        return f"cdiv({size_text(e.a)}, {size_text(e.b)})"
    if isinstance(e, Binary):
        return f"{size_text(e.a)} {e.op} {size_text(e.b)}"
    return repr(e)


def cdiv(a, b) -> Expr:
    """ceil(a / b) on sizes, folded when both are ints."""
    a, b = as_expr(a), as_expr(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(-(-a.value // b.value), "int32")
    if isinstance(b, Const) and b.value == 1:
        return a
    return Binary("cdiv", a, b)


def mul(a, b) -> Expr:
    """a * b on sizes, folded when both are ints."""
    a, b = as_expr(a), as_expr(b)
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value * b.value, "int32")
    if isinstance(a, Const) and a.value == 1:
        return b
    if isinstance(b, Const) and b.value == 1:
        return a
    return Binary("*", a, b)
