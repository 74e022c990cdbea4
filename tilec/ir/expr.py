"""Expression nodes of the compute language: constants, axes, sizes, loads, arithmetic, calls, casts,
reductions. Python operators build them (`A[i, k] * W[k, j] + 1.0`).

Every node has a nominal `dtype` that follows torch's promotion (a Python scalar is "weak" and does
not widen a tensor's type, as in torch). Nodes are immutable and compared by identity.

An expression's `str()` is its text, with axes, sizes and knobs by name (`(A[i, k] * W[k, j])`,
`cdiv(M, BM)`): what messages, loop nests, generated code and fingerprints are made of. Its `repr()` is the
same text, except for a bare axis or knob, whose repr also shows its facts (`<axis k: reduce, extent K>`,
`tc.knob("BM", [64, 128])`); so code that writes an expression as text uses `str()`, never `repr()`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

from tilec.errors import ArgumentError
from tilec.ir.dtypes import UNSIGNED, check_dtype, is_float, promote
from tilec.ir.names import check_name

# The math functions of one value: name -> (torch's function, what it computes). One table: the constructors
# (`tc.exp`, ...), their docstrings and docs/language.md's list are made from it.
MATH = {
    "exp": ("torch.exp", "e ** x"),
    "exp2": ("torch.exp2", "2 ** x"),
    "expm1": ("torch.expm1", "e ** x - 1, exact near 0"),
    "log": ("torch.log", "the natural logarithm"),
    "log2": ("torch.log2", "the base-2 logarithm"),
    "log1p": ("torch.log1p", "log(1 + x), exact near 0"),
    "sqrt": ("torch.sqrt", "the square root"),
    "rsqrt": ("torch.rsqrt", "1 / sqrt(x)"),
    "sigmoid": ("torch.sigmoid", "1 / (1 + e ** -x)"),
    "silu": ("torch.nn.functional.silu", "x * sigmoid(x)"),
    "tanh": ("torch.tanh", "the hyperbolic tangent"),
    "erf": ("torch.erf", "the error function (exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))))"),
    "sin": ("torch.sin", "the sine (radians)"),
    "cos": ("torch.cos", "the cosine (radians)"),
    "abs": ("torch.abs", "|x|"),
    "sign": ("torch.sign", "-1, 0 or 1 (0 for NaN, as torch)"),
    "floor": ("torch.floor", "the largest whole number <= x"),
    "ceil": ("torch.ceil", "the smallest whole number >= x"),
    "trunc": ("torch.trunc", "x rounded toward zero"),
    "round": ("torch.round", "x rounded to the nearest whole number, halves to even"),
}
KEEPS_INT = ("abs", "sign", "floor", "ceil", "trunc", "round")  # of an integer: its own type (torch's)


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
    def __pow__(self, o): return Binary("**", self, o)
    def __rpow__(self, o): return Binary("**", o, self)
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
    def __xor__(self, o): return Binary("^", self, o)
    def __rxor__(self, o): return Binary("^", o, self)
    def __lshift__(self, o): return Binary("<<", self, o)
    def __rlshift__(self, o): return Binary("<<", o, self)
    def __rshift__(self, o): return Binary(">>", self, o)
    def __rrshift__(self, o): return Binary(">>", o, self)
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
        raise ArgumentError(f"a tilec expression has no truth value at definition time ({self}); Python's "
                            f"`if`, `and`, `or`, `not` and the builtins max() and min() (which compare) need one: "
                            f"use tc.where(cond, a, b) instead of `if`/`and`/`or`, tc.maximum(a, b) / "
                            f"tc.minimum(a, b) instead of max(a, b) / min(a, b), and & | ~ to combine conditions")

    # Python's and other libraries' numeric hooks: an expression has no value until the kernel runs, so
    # math.*, float(), int(), torch.* and numpy.* on it would fail with a TypeError that names no fix
    def _no_number(self, what: str):
        raise ArgumentError(f"{what} of a tilec expression ({self}): it has no value at definition time. "
                            f"math.* and float()/int() need a number; inside tc.compute use tilec's functions "
                            f"({_TC_FUNCTIONS}) and .astype(dtype) to convert")

    def __float__(self): self._no_number("float() (or a math.* function, such as math.exp)")
    def __int__(self): self._no_number("int()")
    def __index__(self): self._no_number("an integer value (int(), range(), a list index)")
    def __complex__(self): self._no_number("complex()")
    # Python's rounding functions build tilec's (round(x) is tc.round(x), halves to even in both)
    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise ArgumentError(f"round({self}, {ndigits!r}): tilec rounds to whole numbers only; scale first: "
                                f"tc.round(x * 100.0) / 100.0")
        return Call("round", (self,))

    def __trunc__(self): return Call("trunc", (self,))
    def __floor__(self): return Call("floor", (self,))
    def __ceil__(self): return Call("ceil", (self,))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch.exp(A[i, j]) and friends: torch computes on tensors, not on tilec expressions."""
        raise ArgumentError(_foreign("torch", func))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy's ufuncs: a numpy scalar in an operator (np.float32(2) * X[i]) is a number; np.exp(X[i])
        and other ufuncs on an expression are refused with tilec's function to use."""
        op = _NUMPY_OPERATORS.get(ufunc.__name__)
        if method == "__call__" and op is not None and not kwargs and all(
                isinstance(x, Expr) or _is_number(x) for x in inputs):
            return op(*(x if isinstance(x, Expr) else x.item() if hasattr(x, "item") else x for x in inputs))
        if op is not None:  # an operator with a numpy array on one side
            raise ArgumentError(f"numpy.{ufunc.__name__} of a numpy array and a tilec expression: an array cannot "
                                f"be part of an expression; pass it as an input (tc.placeholder) and read it "
                                f"(B[i]), or use a number")
        raise ArgumentError(_foreign("numpy", ufunc))

    def __getattr__(self, name: str):
        """`X[i].exp()`: tensor methods do not exist on expressions; the error says which function does."""
        if name.startswith("_") or name not in _TC_NAME:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise _NoMethod(f"a tilec expression has no method {name}() (it has .astype(dtype), .eq(b) and .ne(b)); "
                        f"use {_TC_NAME[name]}")

    def __array_function__(self, func, types, args, kwargs):
        raise ArgumentError(_foreign("numpy", func))

    def astype(self, dtype) -> Expr:
        """Round this value to `dtype` here (a rounding point inside an expression)."""
        return Cast(self, check_dtype(dtype, "astype"))

    def children(self) -> tuple[Expr, ...]:
        return ()


_TC_FUNCTIONS = ("tc.exp, tc.log, tc.sqrt, tc.sin, tc.erf and the other math functions of docs/language.md, "
                 "tc.pow (**), tc.clamp, tc.maximum, tc.minimum, tc.where, tc.sum, tc.max, tc.min, tc.cumsum")
# the tilec function for a torch or numpy function of that name (the math functions are added below, from MATH)
_TC_NAME = {"expit": "tc.sigmoid", "absolute": "tc.abs", "rint": "tc.round", "power": "tc.pow (or **)",
            "pow": "tc.pow (or **)", "float_power": "tc.pow (or **)",
            "fabs": "tc.abs", "maximum": "tc.maximum", "fmax": "tc.maximum", "minimum": "tc.minimum",
            "fmin": "tc.minimum", "where": "tc.where", "sum": "tc.sum(x, axis=k)", "amax": "tc.max(x, axis=k)",
            "max": "tc.max(x, axis=k) (over a reduce axis) or tc.maximum(a, b) (of two values)",
            "amin": "tc.min(x, axis=k)",
            "min": "tc.min(x, axis=k) (over a reduce axis) or tc.minimum(a, b) (of two values)",
            "relu": "tc.maximum(x, 0.0)", "clamp": "tc.clamp(x, lo, hi)",
            "clip": "tc.clamp(x, lo, hi)", "square": "x * x", "reciprocal": "1.0 / x",
            "neg": "-x", "negative": "-x", "mul": "*", "multiply": "*", "add": "+", "sub": "-", "subtract": "-",
            "div": "/", "divide": "/", "true_divide": "/",
            "cumsum": "tc.cumsum(x, axis=t)", "cumprod": "tc.cumprod(x, axis=t)", "cummax": "tc.cummax(x, axis=t)",
            "cummin": "tc.cummin(x, axis=t)", "sort": "tc.sort(x, axis=t)", "argsort": "tc.argsort(x, axis=t)",
            "topk": "tc.sort(x, axis=t, descending=True) and a reader of its first k"}


_TC_NAME.update({fn: f"tc.{fn}" for fn in MATH})


class _NoMethod(ArgumentError, AttributeError):
    """`X[i].exp()`: an AttributeError (so hasattr() is False) that says which tilec function to use."""


def _foreign(lib: str, func) -> str:
    """The message for a torch or numpy function applied to a tilec expression."""
    name = getattr(func, "__name__", None) or str(func)
    name = name.strip("_").removeprefix("r") if name.startswith("__") else name
    use = _TC_NAME.get(name)
    hint = f"use {use}" if use else f"use tilec's functions ({_TC_FUNCTIONS}) and Python's operators"
    return (f"{lib}.{name} cannot compute on a tilec expression: inside tc.compute, a value is a tilec "
            f"expression, not a {lib} {'tensor' if lib == 'torch' else 'array'}; {hint}")


def _is_number(x) -> bool:
    import numbers
    return isinstance(x, numbers.Number) and not isinstance(x, bool) or type(x).__module__ == "numpy" and \
        hasattr(x, "item") and getattr(x, "ndim", 1) == 0


def _numpy_operators():
    import operator
    table = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": operator.truediv,
             "true_divide": operator.truediv, "floor_divide": operator.floordiv, "remainder": operator.mod,
             "less": operator.lt, "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
             "bitwise_and": operator.and_, "bitwise_or": operator.or_, "bitwise_xor": operator.xor,
             "left_shift": operator.lshift, "right_shift": operator.rshift, "invert": operator.invert,
             "negative": operator.neg, "power": operator.pow,
             "equal": lambda a, b: as_expr(a).eq(b), "not_equal": lambda a, b: as_expr(a).ne(b)}
    return table


_NUMPY_OPERATORS = _numpy_operators()


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
    if type(value).__module__.split(".")[0] in ("torch", "numpy"):
        raise ArgumentError(f"expected a tilec expression or a number, got {type(value).__name__} {value!r}: a "
                            f"tensor or array cannot be part of an expression; pass it as an input "
                            f"(tc.placeholder) and read it (B[i]), or use a number (x.item())")
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

    def __iter__(self):  # `M, = tc.size_vars("M")` / `(M,) = ...`, written when one name gave a 1-tuple
        raise ArgumentError(f"{self.name} is one size, not a tuple: tc.size_vars({self.name!r}) gives the size "
                            f"itself (several names give a tuple); write {self.name} = tc.size_vars({self.name!r}), "
                            f"or ({self.name},) = tc.size_vars({self.name + ','!r})")

    def __getitem__(self, index):  # `tc.size_vars("M")[0]`, the same
        raise ArgumentError(f"{self.name}[{index!r}]: {self.name} is one size, not a tuple: "
                            f"tc.size_vars({self.name!r}) gives the size itself; use {self.name}")

    def __repr__(self):
        return self.name


class IterVar(Expr):
    """An axis: a spatial axis of a compute, a reduce axis, or one made by split/fuse.

    `extent` is an expression of sizes and knobs; `kind` is "spatial" or "reduce"; `origin` says which
    primitive made it, as text (`outer of split(i, 64)`), or is None for a compute's own axes. Its str() is
    its name, as in the expressions it appears in (`A[i, k]`); its repr shows its facts too:
    `<axis io: spatial, extent cdiv(M, 64), outer of split(i, 64)>`.
    """

    dtype = "int32"

    def __init__(self, name: str, extent, kind: str, origin: str | None = None):
        self.name = check_name(name, "axis name")
        self.extent = extent
        self.kind = kind
        self.origin = origin

    def __str__(self):
        return self.name

    def __repr__(self):
        made = f", {self.origin}" if self.origin else ""
        return f"<axis {self.name}: {self.kind}, extent {size_text(as_expr(self.extent))}{made}>"


class Load(Expr):
    """`T[i, j]`: read tensor T at index expressions."""

    def __init__(self, tensor, indices: Sequence[Expr]):
        self.tensor, self.indices = tensor, tuple(indices)
        self.dtype = tensor.dtype

    def children(self):
        return self.indices

    def __repr__(self):
        return f"{self.tensor.name}[{', '.join(map(str, self.indices))}]"


_CMP = ("<", "<=", ">", ">=", "==", "!=")
_BITWISE = ("&", "|", "^")
_SHIFTS = ("<<", ">>")
INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16}  # an integer dtype's width


def _weak_python_int(x: Expr) -> Expr:
    """A Python int outside int32, which `as_expr` holds as an int64 cast (not weak), as a weak constant again:
    a shift's number operand takes the other operand's type and is wrapped to it (`_wrap_int`), as torch does
    (`x >> (2**32 + 1)` on an int8 x shifts by 1), instead of widening the shift to int64."""
    if isinstance(x, Cast) and isinstance(x.a, Const) and type(x.a.value) is int and x.dtype == "int64":
        return Const(x.a.value, "int64")  # weak: the other operand's type wins (_promote)
    return x


def _wrap_int(c: Const, dtype: str) -> Const:
    """A weak int made a value of the integer `dtype`, as torch converts a Python number before it shifts
    (`x << 257` on an int8 x shifts by 1): two's complement, wrapped to the type's width."""
    bits = INT_BITS[dtype]
    v = int(c.value) % (1 << bits)
    if dtype not in UNSIGNED and v >= 1 << (bits - 1):
        v -= 1 << bits
    return c if v == c.value else Const(v, "int32")


def _check_pow(a: Expr, b: Expr) -> None:
    """`a ** b` as torch takes it: no bools; of two integers, a constant exponent >= 0."""
    if "bool" in (a.dtype, b.dtype):
        raise ArgumentError(f"({a} ** {b}): a power of or by a bool value is not supported; convert it first "
                            f"(x.astype('float32'))")
    if not is_float(_promote(a, b)):
        if not (isinstance(b, Const) and type(b.value) is int and b.value >= 0):
            raise ArgumentError(f"({a} ** {b}): an integer power needs a constant exponent >= 0 (torch refuses "
                                f"negative ones); for a computed exponent convert the base to float first "
                                f"(x.astype('float32') ** y)")


class Binary(Expr):
    def __init__(self, op: str, a, b):
        self.op, self.a, self.b = op, as_expr(a), as_expr(b)
        if op in _SHIFTS:  # torch converts a Python int operand of a shift to the other's type, however large
            self.a, self.b = (_weak_python_int(x) for x in (self.a, self.b))
        self.weak = self.a.weak and self.b.weak
        both_bool = self.a.dtype == "bool" and self.b.dtype == "bool"
        if both_bool and op in ("-", "//", "%"):
            raise ArgumentError(f"{op} on two bool values is not supported (as in torch); cast one with "
                                f".astype('int32') first: {self.a} {op} {self.b}")
        if op in _BITWISE and (is_float(self.a.dtype) or is_float(self.b.dtype)):
            raise ArgumentError(f"({self.a} {op} {self.b}): {op} needs bool or integer operands (as in torch), got "
                                f"{self.a.dtype} and {self.b.dtype}; compare first, e.g. (x > 0) {op} (y > 0)")
        if op in _SHIFTS and (is_float(self.a.dtype) or is_float(self.b.dtype)):
            raise ArgumentError(f"({self.a} {op} {self.b}): {op} needs integer operands (as in torch), got "
                                f"{self.a.dtype} and {self.b.dtype}; multiply by a power of two (x * 4.0) to scale a "
                                f"float, or convert it first (x.astype('int32') {op} 2)")
        if op in _SHIFTS and _promote(self.a, self.b) == "bool":
            raise ArgumentError(f"({self.a} {op} {self.b}): {op} needs integer operands (as in torch, which has no "
                                f"shift of bools), got bool and bool; convert one first (x.astype('int32'))")
        if op == "**":
            _check_pow(self.a, self.b)
        if op in _CMP:
            self.dtype = "bool"
        elif op == "/":
            d = _promote(self.a, self.b)
            self.dtype = d if is_float(d) else "float32"
        elif op in _BITWISE:
            self.dtype = "bool" if self.a.dtype == self.b.dtype == "bool" else _promote(self.a, self.b)
        else:
            self.dtype = _promote(self.a, self.b)
        if op in _SHIFTS and self.dtype in INT_BITS:  # a weak int operand is first a value of the result's type
            self.a, self.b = (_wrap_int(x, self.dtype) if isinstance(x, Const) and x.weak and type(x.value) is int
                              else x for x in (self.a, self.b))

    def __bool__(self):
        # `axis in [...]` and dict lookups ask whether two named things (axes, sizes) are one: identity. A
        # comparison of values (`V[i, j] == 0` in a Python `if`) has no truth value before the kernel runs
        # (and a knob or flag, which only a schedule holds, is no value either: `tma != 0` asks if one was given)
        named = (IterVar, SizeVar)
        if self.op in ("==", "!=") and (self.a is self.b or (isinstance(self.a, named) and isinstance(self.b, named))
                                        or hasattr(self.a, "knob_name") or hasattr(self.b, "knob_name")):
            return (self.a is self.b) == (self.op == "==")
        return Expr.__bool__(self)

    def children(self):
        return (self.a, self.b)

    def __repr__(self):
        if self.op in ("max", "min"):
            return f"{self.op}imum({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


class Unary(Expr):
    def __init__(self, op: str, a):
        self.op, self.a = op, as_expr(a)
        if op == "-" and self.a.dtype == "bool":
            raise ArgumentError(f"-{self.a}: negation of a bool value is not supported (as in torch); "
                                f"use ~ to invert a mask")
        if op == "~" and is_float(self.a.dtype):
            raise ArgumentError(f"~{self.a}: ~ needs a bool or integer value (as in torch), got "
                                f"{self.a.dtype}")
        self.dtype, self.weak = self.a.dtype, self.a.weak

    def children(self):
        return (self.a,)

    def __repr__(self):
        return f"{self.op}{self.a}"




class Call(Expr):
    """A math function of one value (`MATH`): exp, log, sin, erf, floor, ..."""

    def __init__(self, fn: str, args: Sequence):
        self.fn, self.args = fn, tuple(as_expr(a) for a in args)
        d = self.args[0].dtype
        if d == "bool":
            raise ArgumentError(f"{fn}({self.args[0]}): {fn} of a bool value is not supported (as in torch); "
                                f"convert it first: {fn}(x.astype('float32'))")
        self.dtype = d if (is_float(d) or fn in KEEPS_INT) else "float32"
        self.weak = self.args[0].weak and fn in KEEPS_INT

    def children(self):
        return self.args

    def __repr__(self):
        return f"{self.fn}({', '.join(map(str, self.args))})"


RANDOM = {
    "rand": ("float32", "uniform in [0, 1): Triton's tl.rand"),
    "randn": ("float32", "standard normal (Box-Muller of two uniforms): Triton's tl.randn"),
    "randint": ("int64", "32 random bits, in [0, 2**32): Triton's tl.randint"),
}


class Random(Expr):
    """`tc.rand/randn/randint(seed, offset)`: Philox 4x32 (10 rounds) of two integers, Triton's counter-based
    generator. A pure function of (seed, offset): the same value in every schedule, on the GPU and in the
    interpreter (randn up to its float math), recomputed anywhere without state."""

    def __init__(self, kind: str, seed, offset):
        self.kind, self.seed, self.offset = kind, as_expr(seed), as_expr(offset)
        for what, x in (("seed", self.seed), ("offset", self.offset)):
            if is_float(x.dtype) or x.dtype == "bool":
                raise ArgumentError(f"tc.{kind}({self.seed}, {self.offset}): the {what} must be an integer, got "
                                    f"{x.dtype} {x}; e.g. tc.{kind}(seed[0], i * N + j) with seed an int64 input")
        self.dtype = RANDOM[kind][0]

    def children(self):
        return (self.seed, self.offset)

    def __repr__(self):
        return f"{self.kind}({self.seed}, {self.offset})"


class Where(Expr):
    def __init__(self, cond, a, b):
        self.cond, self.a, self.b = as_expr(cond), as_expr(a), as_expr(b)
        self.dtype = _promote(self.a, self.b)
        self.weak = self.a.weak and self.b.weak

    def children(self):
        return (self.cond, self.a, self.b)

    def __repr__(self):
        return f"where({self.cond}, {self.a}, {self.b})"


class Cast(Expr):
    def __init__(self, a, dtype: str):
        self.a, self.dtype = as_expr(a), dtype

    def children(self):
        return (self.a,)

    def __repr__(self):
        return f"{self.a}.astype({self.dtype!r})"


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
        return f"{self.op}({self.body}, axis=[{', '.join(a.name for a in self.axes)}])"


SCANS = {  # op -> (the constructor, torch's equivalent, what it computes)
    "sum": ("cumsum", "torch.cumsum(x, dim)", "the running sum"),
    "prod": ("cumprod", "torch.cumprod(x, dim)", "the running product"),
    "max": ("cummax", "torch.cummax(x, dim).values", "the running maximum (NaN from the first NaN on)"),
    "min": ("cummin", "torch.cummin(x, dim).values", "the running minimum (NaN from the first NaN on)"),
    "linear": ("linear_scan", "h = 0; for t: h = a[t] * h + b[t]; out[t] = h",
               "the first-order linear recurrence h[t] = a[t] * h[t-1] + b[t] from h[-1] = 0"),
}


class Scan(Expr):
    """`tc.cumsum/cumprod/cummax/cummin(x, axis=t)`, `tc.linear_scan(a, b, axis=t)`: a scan (inclusive prefix)
    along `axis`, one of the compute's own axes: element t combines the operands at positions 0..t of that
    axis (the other axes fixed), accumulating in `acc_dtype`. The whole body of a compute, as a reduction is."""

    def __init__(self, op: str, operands: Sequence, axis: IterVar, acc_dtype: str):
        self.op, self.operands, self.axis, self.dtype = op, tuple(as_expr(x) for x in operands), axis, acc_dtype

    @property
    def acc_dtype(self) -> str:
        return self.dtype

    @property
    def name(self) -> str:
        """The constructor's name: cumsum, cumprod, cummax, cummin, linear_scan."""
        return SCANS[self.op][0]

    def children(self):
        return self.operands

    def __repr__(self):
        return f"{self.name}({', '.join(map(str, self.operands))}, axis={self.axis.name})"


SORT_KEYS = ("float32", "float16", "bfloat16", "int32", "int16", "int8", "uint8", "uint16")  # 32-bit keys


class Sort(Expr):
    """`tc.sort(x, axis=t)` / `tc.argsort(x, axis=t)`: x along the compute's own axis t in order (`what` "values",
    of x's dtype) or the positions that put it in order ("indices", int32), ascending or `descending`; equal
    values keep their positions' order (torch.sort(stable=True)), NaN sorts as the largest value. The whole body
    of a compute; the whole axis is in one tile of one program."""

    def __init__(self, what: str, body, axis: IterVar, descending: bool):
        self.what, self.body, self.axis, self.descending = what, as_expr(body), axis, bool(descending)
        self.dtype = self.body.dtype if what == "values" else "int32"

    @property
    def name(self) -> str:
        return "sort" if self.what == "values" else "argsort"

    def children(self):
        return (self.body,)

    def __repr__(self):
        return f"{self.name}({self.body}, axis={self.axis.name}{', descending=True' if self.descending else ''})"


# ---------------------------------------------------------------------------------------------
# user-facing constructors


def size_vars(names: str | Iterable[str]) -> SizeVar | tuple[SizeVar, ...]:
    """`M, N, K = tc.size_vars("M N K")`: symbolic sizes, bound from tensor shapes at call time.

    One kernel serves every value of its sizes; each call reads them from the shapes of its inputs.

    One name in a string gives the size itself (`M = tc.size_vars("M")`, as TVM's `te.var`); several names
    give a tuple, in order. As in sympy's `symbols`, a trailing comma (`"M,"`) or a list or tuple of names
    (`["M"]`) always gives a tuple, so `(M,) = tc.size_vars("M,")` unpacks.

    Args:
        names: the names, in one string (separated by spaces or commas) or a list; identifiers.

    Returns:
        The `SizeVar` of a string of one name; otherwise a tuple of one `SizeVar` per name, in order.

    Raises:
        ArgumentError: no name, a name that is no identifier (or is reserved), or names neither in a
            string nor a list.

    Example:
        >>> M, N = tc.size_vars("M N")
        >>> X = tc.placeholder((M, N), "float32", name="X")
        >>> X
        <placeholder X[M, N] float32>
        >>> tc.size_vars("B"), tc.size_vars("B,")
        (B, (B,))
    """
    one = isinstance(names, str) and not names.rstrip().endswith(",")
    if isinstance(names, str):
        names = names.replace(",", " ").split()
    elif not isinstance(names, (list, tuple)):
        raise ArgumentError(f"size_vars: expected names in a string ('M N K') or a list, got {names!r}")
    out = tuple(SizeVar(n) for n in names)
    if not out:
        raise ArgumentError("size_vars: expected at least one name, e.g. tc.size_vars('M N K')")
    return out[0] if one and len(out) == 1 else out


_FACT_OPS = ("<", "<=", ">", ">=", "==", "!=")


def assume(fact: Expr) -> None:
    """State a fact about sizes that isl may use: `tc.assume(M % 64 == 0)`, `tc.assume(K >= 128)`,
    `tc.assume(N.eq(4096))`. Kernels then check it on every call (ArgumentError if it fails).

    A fact compares affine expressions of sizes and ints (+, -, * by an int, // and % by a positive int),
    the facts isl reads. One that no sizes (each at least 1) satisfy, alone or with the facts already
    stated on its sizes, is refused: every call would fail. The fact is kept on the size objects, for
    every compute that uses them.

    Args:
        fact: a comparison (`<`, `<=`, `>`, `>=`, `==`, `!=`, or `.eq()` / `.ne()`) of sizes and ints.

    Raises:
        ArgumentError: not a comparison of sizes and ints, not affine, or no sizes satisfy it.

    Example:
        >>> L = tc.size_vars("L")
        >>> tc.assume(L % 64 == 0)
        >>> L.facts
        [((L % 64) == 0)]
    """
    import islpy as isl

    if not (isinstance(fact, Binary) and fact.op in _FACT_OPS):
        raise ArgumentError(f"tc.assume: expected a comparison of sizes, such as M % 64 == 0 or K >= 128, "
                            f"got {show(fact)}")
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


def reduce_axis(extent: int | Expr, name: str) -> IterVar:
    """A reduction axis over `range(extent)`: `k = tc.reduce_axis(K, name="k")`.

    Use it in a `tc.sum` / `tc.max` / `tc.min` that is the whole body of a compute. An axis's str() is its
    name, as in the expressions it appears in; its repr shows its kind and extent too (`.kind`, `.extent`).

    Args:
        extent: a positive int, or an integer expression of sizes.
        name: an identifier; it names the loop in the generated code.

    Returns:
        The axis (an `IterVar` of kind "reduce").

    Raises:
        ArgumentError: the extent is not a positive int or an integer expression of sizes, or the name
            is no identifier.

    Example:
        >>> r = tc.reduce_axis(K, name="r")
        >>> r, r.extent, r.kind
        (<axis r: reduce, extent K>, K, 'reduce')
        >>> print(r, A[i, r])
        r A[i, r]
    """
    return IterVar(name, check_extent(extent, f"reduce_axis {name!r}"), "reduce")


def _not_affine(extent: Expr) -> str | None:
    """Why isl cannot read `extent` as an affine expression of the sizes, or None: a product of two sizes, a
    division or remainder by a size."""
    def has_size(e):
        return any(isinstance(n, SizeVar) for n in walk(e))
    for node in walk(extent):
        if isinstance(node, Binary) and node.op == "*" and has_size(node.a) and has_size(node.b):
            return "multiplies two sizes"
        if isinstance(node, Binary) and node.op in ("//", "%", "cdiv") and has_size(node.b):
            return "divides by a size"
    return None


def check_extent(extent, what: str, affine: bool = True) -> Expr:
    """An extent is a positive int or an expression of size variables; `affine` (a compute's dimension, a reduce
    axis: isl's domains) refuses what isl cannot represent (a product of two sizes, a division by one), which a
    placeholder's shape, only read, may hold."""
    if isinstance(extent, bool) or not isinstance(extent, (int, Expr)):
        raise ArgumentError(f"{what}: expected a positive int or a size variable, got {extent!r}")
    if isinstance(extent, int):
        if extent < 1:
            raise ArgumentError(f"{what}: expected a positive int or a size variable, got {extent}")
        return Const(extent, "int32")
    for node in walk(extent):
        if isinstance(node, (Load, IterVar, Reduce, Scan, Sort, Random, Call)):
            raise ArgumentError(f"{what}: an extent may only use sizes and ints, got {extent}")
        if isinstance(node, (Binary, Unary)) and node.op in (*_BITWISE, *_SHIFTS, "~", "**"):
            raise ArgumentError(f"{what}: an extent may use +, -, *, // and % of sizes and ints, got {extent}; bit "
                                f"operations are not affine, and isl reads affine extents (M // 2, not M >> 1)")
    if extent.dtype not in ("int32", "int64"):
        raise ArgumentError(f"{what}: an extent must be an integer expression of sizes, got {extent} "
                            f"({extent.dtype}); use // for division")
    why = _not_affine(extent) if affine else None
    if why:
        raise ArgumentError(f"{what}: the extent {extent} {why}, which isl (the legality checker) cannot represent: "
                            f"an extent must be affine in the sizes (M + 1, 2 * N, N // 4). Give it a size of its own "
                            f"(HG = tc.size_vars('HG')), or make each factor an axis of its own")
    return extent


def _reduce(op: str, body, axis, acc_dtype) -> Reduce:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis) if isinstance(axis, (list, tuple)) else ()
    if not axes or not all(isinstance(a, IterVar) and a.kind == "reduce" for a in axes):
        two = {"max": "tc.maximum(a, b)", "min": "tc.minimum(a, b)", "sum": "a + b"}[op]
        raise ArgumentError(f"tc.{op}: axis must be a reduce_axis or a list of them, got {show(axis)} (tc.{op} reduces "
                            f"over an axis; for two values use {two})")
    body = as_expr(body)
    if acc_dtype is None:
        acc_dtype = "float32" if is_float(body.dtype) else "int32"  # a sum of comparisons counts, as in torch
        if body.dtype == "float64":
            acc_dtype = "float64"
    return Reduce(op, body, axes, check_dtype(acc_dtype, f"tc.{op} acc_dtype"))


def _scan(op: str, operands: Sequence, axis, acc_dtype) -> Scan:
    name = SCANS[op][0]
    if not (isinstance(axis, IterVar) and axis.kind == "spatial"):
        raise ArgumentError(f"tc.{name}: axis must be one of the compute's own axes (a parameter of its function, "
                            f"e.g. lambda b, t: tc.{name}(X[b, t], axis=t)), got {show(axis)}; a scan runs along "
                            f"an axis of the output, unlike tc.sum's reduce axis")
    operands = [as_expr(x) for x in operands]
    for x in operands:
        if x.dtype == "bool" and op != "sum":
            raise ArgumentError(f"tc.{name} of a bool value is not supported; convert it first: x.astype('int32')")
    if acc_dtype is None:
        floats = [x.dtype for x in operands if is_float(x.dtype)]
        acc_dtype = "float64" if "float64" in floats else "float32" if floats else "int32"
    return Scan(op, operands, axis, check_dtype(acc_dtype, f"tc.{name} acc_dtype"))


_SCAN_DOC = """{what} of `expr` along `axis`, one of the compute's own axes, as `{torch}`: element t of that
    axis combines `expr` at positions 0, 1, ..., t (the other axes fixed), accumulating in `acc_dtype`.

    It must be the whole body of a compute (as a reduction is); do anything else to its result in a second
    compute, which `compute_at` can place in the scan's loops. The scan axis runs in order inside one
    program: it may be split (its outer loops serial, at most one tile, scanned with `tl.{tl}` and a carry
    between the loop's iterations) but not bound to the grid, fused, or placed in another stage's loops;
    the stage's other loops must run outside its scan loops.{extra}

    Args:
        expr: the value to scan: an expression of the compute's axes.
        axis: the compute's axis to scan along (a parameter of its function).
        acc_dtype: the accumulator's dtype; by default float32 for a float body (float64 stays float64)
            and int32 for an integer or bool one (torch's integer cumsum is int64: pass "int64").

    Returns:
        The scan, for `tc.compute`'s function to return.

    Raises:
        ArgumentError: `axis` is not a spatial axis, a bool value to a scan other than cumsum, or `acc_dtype`
            is no dtype.

    Example:
        >>> C = tc.compute((M, K), lambda i, kk: tc.{name}(A[i, kk], axis=kk), name="C")
        >>> C.body
        {name}(A[i, kk], axis=kk)
    """


def cumsum(expr: Expr, axis: IterVar, acc_dtype: str | None = None) -> Scan:
    return _scan("sum", [expr], axis, acc_dtype)


def cumprod(expr: Expr, axis: IterVar, acc_dtype: str | None = None) -> Scan:
    return _scan("prod", [expr], axis, acc_dtype)


def cummax(expr: Expr, axis: IterVar, acc_dtype: str | None = None) -> Scan:
    return _scan("max", [expr], axis, acc_dtype)


def cummin(expr: Expr, axis: IterVar, acc_dtype: str | None = None) -> Scan:
    return _scan("min", [expr], axis, acc_dtype)


cumsum.__doc__ = _SCAN_DOC.format(what="Running sum", torch="torch.cumsum(x, dim)", tl="cumsum", name="cumsum",
                                  extra="")
cumprod.__doc__ = _SCAN_DOC.format(what="Running product", torch="torch.cumprod(x, dim)", tl="cumprod",
                                   name="cumprod", extra="")
cummax.__doc__ = _SCAN_DOC.format(what="Running maximum", torch="torch.cummax(x, dim).values", tl="associative_scan",
                                  name="cummax", extra=" A NaN makes it NaN from there on, as torch's (its indices "
                                  "are not computed).")
cummin.__doc__ = _SCAN_DOC.format(what="Running minimum", torch="torch.cummin(x, dim).values", tl="associative_scan",
                                  name="cummin", extra=" A NaN makes it NaN from there on, as torch's (its indices "
                                  "are not computed).")


def linear_scan(a: Expr | float, b: Expr | float, axis: IterVar, acc_dtype: str | None = None) -> Scan:
    """The first-order linear recurrence h[t] = a[t] * h[t-1] + b[t] along `axis`, from h[-1] = 0: the
    associative scan of state-space models (Mamba's selective scan: a = exp(dt * A), b = dt * B * x), of
    exponential moving averages (a = 1 - alpha, b = alpha * x) and of linear RNNs.

    Computed as an associative scan of the pairs (a, b) with (a1, b1) then (a2, b2) = (a1 * a2, a2 * b1 + b2)
    (`tl.associative_scan` within a tile, a carried h between the scan loop's iterations); the products
    associate in another order than the sequential loop, so floats differ from it by rounding. The same rules
    as `tc.cumsum`: the whole body of a compute, along one of its own axes, run in order inside one program.

    Args:
        a: the factor of h[t-1]: an expression of the compute's axes, or a number.
        b: the term added: an expression of the compute's axes, or a number.
        axis: the compute's axis to scan along.
        acc_dtype: the state's dtype; by default float32 (float64 if an operand is), int32 for integers.

    Returns:
        The scan, for `tc.compute`'s function to return.

    Raises:
        ArgumentError: `axis` is not a spatial axis, or `acc_dtype` is no dtype.

    Example:
        >>> H = tc.compute((M, K), lambda i, kk: tc.linear_scan(0.9, A[i, kk], axis=kk), name="H")
        >>> H.body
        linear_scan(0.9, A[i, kk], axis=kk)
    """
    return _scan("linear", [a, b], axis, acc_dtype)


def _sort(what: str, expr, axis, descending) -> Sort:
    name = "sort" if what == "values" else "argsort"
    if not (isinstance(axis, IterVar) and axis.kind == "spatial"):
        raise ArgumentError(f"tc.{name}: axis must be one of the compute's own axes (a parameter of its function, "
                            f"e.g. lambda t, e: tc.{name}(X[t, e], axis=e)), got {show(axis)}")
    if not isinstance(descending, bool):
        raise ArgumentError(f"tc.{name}: descending must be True or False, got {descending!r}")
    body = as_expr(expr)
    if body.dtype not in SORT_KEYS:
        raise ArgumentError(f"tc.{name} of {body.dtype} values is not supported (keys are 32 bits: "
                            f"{', '.join(SORT_KEYS)}); convert it first, e.g. x.astype('float32')")
    return Sort(what, body, axis, descending)


def sort(expr: Expr, axis: IterVar, descending: bool = False) -> Sort:
    """`expr` along `axis` (one of the compute's own axes) in increasing order, or decreasing with
    `descending=True`, as `torch.sort(x, dim, descending, stable=True).values`: element t of the axis is the
    t-th smallest (largest). NaN sorts as the largest value (last, or first when descending), as torch's.

    The whole body of a compute (as a reduction is). The whole axis is sorted in one tile (`tl.sort`): split
    it by a tile at least its extent, so that its outer loop runs once (a constant extent, or
    `tc.assume(E <= 64)` for a size); no loop over it, no grid axis, no place that fixes it. Top-k is a reader
    of the first k elements of a descending sort.

    Args:
        expr: the values: an expression of the compute's axes, of a float type of at most 32 bits or an int
            type of at most 32 bits.
        axis: the compute's axis to sort along.
        descending: largest first.

    Returns:
        The sort, for `tc.compute`'s function to return; its dtype is `expr`'s.

    Raises:
        ArgumentError: `axis` is not a spatial axis, `descending` is no bool, or `expr` is 64-bit or bool.

    Example:
        >>> S = tc.compute((M, K), lambda i, kk: tc.sort(A[i, kk], axis=kk, descending=True), name="S")
        >>> S.body
        sort(A[i, kk], axis=kk, descending=True)
    """
    return _sort("values", expr, axis, descending)


def argsort(expr: Expr, axis: IterVar, descending: bool = False) -> Sort:
    """The positions along `axis` that put `expr` in order: element t is the index of the t-th smallest (with
    `descending=True` largest) value, as `torch.sort(x, dim, descending, stable=True).indices` (equal values
    keep their positions' order; NaN is the largest), but int32 (torch's are int64). The same rules as
    `tc.sort`: the whole body of a compute, the whole axis in one tile.

    Args:
        expr: the values to order (float or int, at most 32 bits).
        axis: the compute's axis to sort along.
        descending: largest first.

    Returns:
        The positions, int32.

    Raises:
        ArgumentError: as `tc.sort`.

    Example:
        >>> I = tc.compute((M, K), lambda i, kk: tc.argsort(A[i, kk], axis=kk), name="I")
        >>> I.dtype
        'int32'
    """
    return _sort("indices", expr, axis, descending)


_REDUCE_DOC = """{what} of `expr` over the reduce axis (or axes) `axis`, accumulated in `acc_dtype`.

    It must be the whole body of a compute (as in TVM); do anything else to its result in a second
    compute, which `compute_at` can fuse back.{extra}

    Args:
        expr: the value to reduce: an expression of the compute's axes and `axis`.
        axis: a `tc.reduce_axis`, or a list of them.
        acc_dtype: the accumulator's dtype; by default float32 for a float body (float64 stays float64)
            and int32 for an integer or bool body.

    Returns:
        The reduction, for `tc.compute`'s function to return.

    Raises:
        ArgumentError: `axis` is no reduce axis (or list of them), or `acc_dtype` is no dtype.

    Example:
        >>> C = tc.compute((M, N), lambda i, j: tc.{name}(A[i, k] * W[k, j], axis=k), name="C")
        >>> C.body
        {name}((A[i, k] * W[k, j]), axis=[k])
    """


def sum(expr: Expr, axis: IterVar | Sequence[IterVar], acc_dtype: str | None = None) -> Reduce:  # noqa: A001
    return _reduce("sum", expr, axis, acc_dtype)


def max(expr: Expr, axis: IterVar | Sequence[IterVar], acc_dtype: str | None = None) -> Reduce:  # noqa: A001
    return _reduce("max", expr, axis, acc_dtype)


def min(expr: Expr, axis: IterVar | Sequence[IterVar], acc_dtype: str | None = None) -> Reduce:  # noqa: A001
    return _reduce("min", expr, axis, acc_dtype)


sum.__doc__ = _REDUCE_DOC.format(what="Sum", name="sum", extra="")
max.__doc__ = _REDUCE_DOC.format(what="Maximum", name="max", extra=" A NaN in `expr` makes the result NaN, as "
                                 "torch's amax.")
min.__doc__ = _REDUCE_DOC.format(what="Minimum", name="min", extra=" A NaN in `expr` makes the result NaN, as "
                                 "torch's amin.")


_CALL_DOC = """Elementwise {fn} of one value: `tc.{fn}(X[i, j])`, as `{torch}`: {what}.

    {kind}; a float16, bfloat16 or float8 value computes in float32 between rounding points.

    Args:
        x: an expression, or a number.

    Returns:
        The expression `{fn}(x)`.

    Raises:
        ArgumentError: `x` is neither an expression nor a number, or is a bool.

    Example:
        >>> Z = tc.compute((M, K), lambda i, kk: tc.{fn}(A[i, kk]), name="Z")
        >>> Z.body
        {fn}(A[i, kk])
    """

_KIND = {True: "Of an integer argument the result is the argument itself, of its type (as torch)",
         False: "It computes in floating point (an integer argument is converted to float32, the result's type)"}


def _call(fn):
    def make(x: Expr | float) -> Expr:
        return Call(fn, (x,))
    make.__name__ = make.__qualname__ = fn
    torch_name, what = MATH[fn]
    kind = _KIND[fn in KEEPS_INT] if fn != "abs" else "Of an integer argument the result keeps its type (as torch)"
    make.__doc__ = _CALL_DOC.format(fn=fn, torch=torch_name, what=what, kind=kind)
    return make


exp, exp2, expm1, log, log2, log1p, sqrt, rsqrt, sigmoid, silu, tanh, erf, sin, cos = (
    _call(f) for f in ("exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "sigmoid", "silu", "tanh",
                       "erf", "sin", "cos"))
abs, sign, floor, ceil, trunc, round = (_call(f) for f in KEEPS_INT)  # noqa: A001


def pow(a: Expr | float, b: Expr | float) -> Expr:  # noqa: A001
    """`a ** b` elementwise, as `torch.pow` (also written `X[i] ** 2`).

    The type follows torch's promotion. Of floats it is C's pow: a negative base with a fractional exponent is
    NaN, `pow(x, 0)` and `pow(1, y)` are 1 even for NaN; the exponents 2, 3, 0.5, -0.5, -1 and -2 compute as
    torch's own shortcuts do (x * x, sqrt(x), ...). Of integers the exponent must be a constant >= 0 (torch
    refuses negative ones); the product wraps around as torch's does.

    Args:
        a: the base, an expression or a number.
        b: the exponent, an expression or a number.

    Returns:
        The expression `(a ** b)`.

    Raises:
        ArgumentError: an operand is neither an expression nor a number, is a bool, or both are integers and
            the exponent is not a constant >= 0.

    Example:
        >>> P = tc.compute((M, K), lambda i, kk: A[i, kk] ** 2 + tc.pow(2.0, A[i, kk]), name="P")
        >>> P.body
        ((A[i, kk] ** 2) + (2.0 ** A[i, kk]))
    """
    return Binary("**", a, b)


def clamp(x: Expr | float, min: Expr | float | None = None, max: Expr | float | None = None) -> Expr:  # noqa: A002
    """`x` clamped to [min, max], as `torch.clamp`: `minimum(maximum(x, min), max)`.

    A NaN in `x` or a bound gives NaN (as torch); where min > max the result is max. The type is the promotion
    of the three (a Python number does not widen a tensor's type).

    Args:
        x: an expression or a number.
        min: the lower bound (an expression or a number), or None for none.
        max: the upper bound, or None for none.

    Returns:
        The expression.

    Raises:
        ArgumentError: both bounds are None, or an operand is neither an expression nor a number.

    Example:
        >>> R = tc.compute((M, K), lambda i, kk: tc.clamp(A[i, kk], 0.0, 6.0), name="R")  # ReLU6
        >>> R.body
        minimum(maximum(A[i, kk], 0.0), 6.0)
    """
    if min is None and max is None:
        raise ArgumentError(f"tc.clamp({x}): give min, max or both (as torch.clamp)")
    out = as_expr(x)
    if min is not None:
        out = Binary("max", out, min)
    if max is not None:
        out = Binary("min", out, max)
    return out


_RANDOM_DOC = """Random numbers, {what}, at `offset` of the stream `seed`: `tc.{kind}(seed, offset)`.

    Philox 4x32 with 10 rounds (Triton's generator): counter-based, so the value is a pure function of the two
    integers. Give each element its own offset (`i * N + j`) and the same seed: any schedule, tile or device
    draws the same numbers (randn's float math aside), and a recomputed value (a halo, an inlined stage) is
    the same value. The seed is any integer expression, e.g. `seed[0]` of an int64 input of one element, so
    that a new seed needs no new kernel; offsets must be >= 0 (an int64 offset past 2**31 draws from another
    counter word, as Triton's).

    Args:
        seed: an integer expression or int.
        offset: an integer expression or int, >= 0.

    Returns:
        The expression, of type {dtype}.

    Raises:
        ArgumentError: seed or offset is not an integer.

    Example:
        >>> S = tc.placeholder((1,), "int64", name="S")
        >>> D = tc.compute((M, K), lambda i, kk: tc.where(tc.{kind}(S[0], i * K + kk) > 0.5, A[i, kk], 0.0),
        ...                name="D")
    """


def _random(kind):
    def make(seed: Expr | int, offset: Expr | int) -> Expr:
        return Random(kind, seed, offset)
    make.__name__ = make.__qualname__ = kind
    make.__doc__ = _RANDOM_DOC.format(kind=kind, what=RANDOM[kind][1], dtype=RANDOM[kind][0])
    return make


rand, randn, randint = (_random(k) for k in RANDOM)


def maximum(a: Expr | float, b: Expr | float) -> Expr:
    """Elementwise maximum of two values (Python's `max(a, b)` cannot compare expressions).

    The result's type follows torch's promotion (a Python number does not widen a tensor's type).

    Args:
        a: an expression or a number.
        b: an expression or a number.

    Returns:
        The expression `maximum(a, b)`.

    Raises:
        ArgumentError: an operand is neither an expression nor a number.

    Example:
        >>> R = tc.compute((M, K), lambda i, kk: tc.maximum(A[i, kk], 0.0), name="R")  # ReLU
        >>> R.body
        maximum(A[i, kk], 0.0)
    """
    return Binary("max", a, b)


def minimum(a: Expr | float, b: Expr | float) -> Expr:
    """Elementwise minimum of two values (Python's `min(a, b)` cannot compare expressions).

    Args:
        a: an expression or a number.
        b: an expression or a number.

    Returns:
        The expression `minimum(a, b)`.

    Raises:
        ArgumentError: an operand is neither an expression nor a number.

    Example:
        >>> R = tc.compute((M, K), lambda i, kk: tc.minimum(A[i, kk], 6.0), name="R")
        >>> R.body
        minimum(A[i, kk], 6.0)
    """
    return Binary("min", a, b)


def where(cond: Expr | bool, a: Expr | float, b: Expr | float) -> Expr:
    """`a` where `cond` holds, else `b`: the expression form of `a if cond else b`.

    Args:
        cond: a bool expression (a comparison: `X[i] > 0`, `j <= i`; combine them with `&`, `|`, `~`).
        a: the value where `cond` holds.
        b: the value elsewhere.

    Returns:
        The expression; its type is the promotion of `a`'s and `b`'s.

    Raises:
        ArgumentError: an operand is neither an expression nor a number.

    Example:
        >>> R = tc.compute((M, K), lambda i, kk: tc.where(A[i, kk] > 0, A[i, kk], 0.0), name="R")
        >>> R.body
        where((A[i, kk] > 0), A[i, kk], 0.0)
    """
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
    if isinstance(expr, Random):
        return Random(expr.kind, substitute(expr.seed, fn), substitute(expr.offset, fn))
    if isinstance(expr, Cast):
        return Cast(substitute(expr.a, fn), expr.dtype)
    if isinstance(expr, Reduce):
        return Reduce(expr.op, substitute(expr.body, fn), expr.axes, expr.dtype)
    if isinstance(expr, Scan):
        return Scan(expr.op, [substitute(x, fn) for x in expr.operands], expr.axis, expr.dtype)
    if isinstance(expr, Sort):
        return Sort(expr.what, substitute(expr.body, fn), expr.axis, expr.descending)
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
    raise ArgumentError(f"cannot evaluate {show(expr)} as an integer size")


def size_text(e: Expr) -> str:
    """A size expression for people: cdiv(M, 64) * cdiv(N, BN)."""
    if isinstance(e, Binary) and e.op == "cdiv":
        return f"cdiv({size_text(e.a)}, {size_text(e.b)})"
    if isinstance(e, Binary):
        return f"{size_text(e.a)} {e.op} {size_text(e.b)}"
    return str(e)


def show(x) -> str:
    """A value for a message, as its repr would have it but with expressions as their text (axes and knobs
    by name, also inside lists and tuples): `[i, k]`, not the reprs of the axes."""
    if isinstance(x, Expr):
        return str(x)
    if isinstance(x, list):
        return f"[{', '.join(map(show, x))}]"
    if isinstance(x, tuple):
        return f"({', '.join(map(show, x))}{',' if len(x) == 1 else ''})"
    return repr(x)


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
