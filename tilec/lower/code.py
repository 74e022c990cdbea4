"""Expressions of the loop-nest IR: small immutable trees, in tilec's terms, that printers turn into text.

A kernel's values (offsets, masks, loaded tiles, arithmetic) are these nodes; nothing here is written in
any target's spelling. Two printers read them: `triton_printer.py` (the Triton source, in a `Form`: GPU
or interpreter, int32 or int64 indices, descriptor loads or pointers) and `nest_printer.py` (the loop
nest `tc.lower` prints). Both print infix operators with Python's binding (`PREC`): a parenthesis is
written where an operand binds looser than its operator needs, and nowhere else.

Nodes:
- `Name` (a variable or a kernel parameter), `Num` (an int, float or bool: inf and nan included; a
  specialized size is a number that remembers its size's name),
  `LoopIndex` (the counter of a serial loop: widened in the int64 form), `DType` (an element type as
  an operand), `Tuple` (a shape or a permutation);
- `BinOp` (`+ - * / // % & | ^ << >>` and comparisons), `UnaryOp` (`-`, `~`), `Sum` and `All`
  (index terms added, masks and-ed, left to right: one flat chain);
- `Call(fn, args, kw)`: an intrinsic by its tilec name (`INTRINSICS`), `Cast` (convert, any operand),
  `To` (convert a tensor), `Expand` (new unit dimensions: `pattern` True keeps a dimension, False
  inserts one), `Tanh`, `Fmod` and `Libm` (whose form differs per target).

`walk(e)` yields every node; `names_read(e)` the variables it reads; `rename(e, mapping)` renames them
(the one place a pass renames values: sub-tiles, compute_with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

# the intrinsics a Call may name, and what each computes (triton_printer.py spells them for Triton)
INTRINSICS = {
    "arange": "arange(start, end): the ints start .. end - 1, a 1-d tile",
    "full": "full(shape, value, dtype): a tile (or, shape (), a 0-d tensor) of one value",
    "zeros": "zeros(shape, dtype)",
    "zeros_like": "zeros_like(x)",
    "broadcast_to": "broadcast_to(x, shape)",
    "trans": "trans(x): a 2-d tile transposed",
    "permute": "permute(x, order)",
    "where": "where(cond, a, b)",
    "maximum": "maximum(a, b); nan=True: NaN if either is (torch's)",
    "minimum": "minimum(a, b); nan=True: NaN if either is",
    "exp": "exp(x)", "log": "log(x)", "sqrt": "sqrt(x)", "rsqrt": "rsqrt(x)", "abs": "abs(x)",
    "sigmoid": "sigmoid(x)", "floor": "floor(x)", "ceil": "ceil(x)", "exp2": "exp2(x)", "log2": "log2(x)",
    "sum": "sum(x, axis=d)", "max": "max(x, axis=d)", "min": "min(x, axis=d)",
    "reduce": "reduce(x, axis=d, op='max' | 'min'): a max or min that keeps NaN (torch's amax / amin)",
    "cumsum": "cumsum(x, axis=d): the inclusive running sum along d", "cumprod": "cumprod(x, axis=d)",
    "scan": "scan(x, axis=d, op='max' | 'min' | 'linear'): an associative scan along d (a cummax / cummin that "
            "keeps NaN; 'linear': x a pair (a, b), the recurrence's pairs (tilec/lower/scans.py))",
    "item": "item(x, index=n): element n of a tuple (a recurrence scan's pair)",
    "sort": "sort(x, axis=d, descending=b): x's lanes along d in order (tilec/lower/sorts.py)",
    "bitcast": "bitcast(x, dtype=t): x's bits as a tensor of t, of the same width",
    "cdiv": "cdiv(a, b): ceil(a / b) of non-negative ints",
    "rand": "rand(seed, offset): Philox uniform in [0, 1)", "randn": "randn(seed, offset): Philox normal",
    "randint": "randint(seed, offset): Philox 32 random bits (unsigned)",
}

# Python's binding of the infix operators (both printers write Python syntax): higher binds tighter
CMP = ("<", "<=", ">", ">=", "==", "!=")
PREC = {**{op: 5 for op in CMP}, "|": 6, "^": 7, "&": 8, "<<": 9, ">>": 9, "+": 10, "-": 10,
        "*": 11, "/": 11, "//": 11, "%": 11}
UNARY, POSTFIX, ATOM = 12, 14, 15
_MUL = ("*", "/", "//", "%")


class Ex:
    """An expression of the kernel IR."""

    def children(self) -> tuple:
        return tuple(x for f in fields(self) for x in _flat(getattr(self, f.name)) if isinstance(x, Ex))


def _flat(v):
    if isinstance(v, tuple):
        for x in v:
            yield from _flat(x)
    else:
        yield v


@dataclass(frozen=True)
class Name(Ex):
    """A variable of the kernel, or one of its parameters (a size, a knob's constexpr, a tensor)."""

    id: str


@dataclass(frozen=True, eq=False)
class Num(Ex):
    """A Python number or bool; two are equal when they are of one type and print alike (nan too)."""

    value: int | float | bool
    size: str | None = None  # the size this number is (a specialized size): the nest shows its name

    def _key(self):
        return type(self.value), repr(self.value)

    def __eq__(self, other):
        return isinstance(other, Num) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    @property
    def negative(self) -> bool:
        """Written with a leading minus (-3, -0.0; not float("-inf"), which is a call)."""
        v = self.value
        return not isinstance(v, bool) and not (isinstance(v, float) and (math.isinf(v) or math.isnan(v))) \
            and math.copysign(1, v) < 0


@dataclass(frozen=True)
class LoopIndex(Ex):
    """The counter of a serial loop: a Python int in the interpreter, widened in the int64 form."""

    var: str


@dataclass(frozen=True)
class DType(Ex):
    """An element type as an operand (tilec's name: "float32", "bool")."""

    dtype: str


@dataclass(frozen=True)
class Tuple(Ex):
    """A tuple of expressions: a shape, a permutation."""

    items: tuple = ()


@dataclass(frozen=True)
class BinOp(Ex):
    op: str
    a: Ex
    b: Ex


@dataclass(frozen=True)
class UnaryOp(Ex):
    op: str  # "-" or "~"
    x: Ex


@dataclass(frozen=True)
class Sum(Ex):
    """terms[0] + terms[1] + ..., added left to right (offsets, addresses: ints and pointers)."""

    terms: tuple


@dataclass(frozen=True)
class All(Ex):
    """terms[0] & terms[1] & ..., left to right: a conjunction of masks."""

    terms: tuple


@dataclass(frozen=True)
class Call(Ex):
    """An intrinsic (`INTRINSICS`) of positional `args` and keyword attributes `kw` ((name, value) pairs,
    each value an int, bool or str: an axis, nan=True, a reduction's op)."""

    fn: str
    args: tuple = ()
    kw: tuple = ()

    def __post_init__(self):
        if self.fn not in INTRINSICS:
            raise ValueError(f"not an intrinsic of the kernel IR: {self.fn!r}")

    def attr(self, key: str, default=None):
        return dict(self.kw).get(key, default)


@dataclass(frozen=True)
class Cast(Ex):
    """x converted to `dtype` (any operand, a Python number too)."""

    x: Ex
    dtype: str


@dataclass(frozen=True)
class To(Ex):
    """x, a tensor, converted to `dtype`."""

    x: Ex
    dtype: str


@dataclass(frozen=True)
class Expand(Ex):
    """x with unit dimensions inserted: `pattern[d]` True keeps one of x's dimensions, False inserts one."""

    x: Ex
    pattern: tuple


@dataclass(frozen=True)
class Tanh(Ex):
    """tanh(x), `x` a name: libdevice on the GPU; with exp in the interpreter, which has no libdevice
    (`e` names the exp(-2|x|) that a `TanhExp` statement computes there)."""

    x: Ex
    e: str


@dataclass(frozen=True)
class Fmod(Ex):
    """C's fmod(a, b) of floats, exact (the start of float `//` and `%`): libdevice on the GPU, the
    interpreter's own float remainder there (triton_printer.py says why)."""

    a: Ex
    b: Ex


# libdevice's functions that a `Libm` names: the GPU's precise ones, torch's semantics
LIBM = {"erf": "erf(x)", "sin": "sin(x)", "cos": "cos(x)", "log1p": "log(1 + x), exact near 0",
        "expm1": "exp(x) - 1, exact near 0", "pow": "pow(a, b): C's", "rint": "x rounded to a whole number, halves to even"}


@dataclass(frozen=True)
class Libm(Ex):
    """A math function (`LIBM`) whose precise form is libdevice's: there on the GPU; the interpreter has no
    libdevice, so there numpy's (through tl) or a helper written with tl (triton_printer.py's HELPERS)."""

    fn: str
    args: tuple

    def __post_init__(self):
        if self.fn not in LIBM:
            raise ValueError(f"not a LIBM function of the kernel IR: {self.fn!r}")


def call(fn: str, *args, **kw) -> Call:
    """Call(fn, args, kw), numbers and names among `args` made nodes: call("maximum", a, b, nan=True)."""
    return Call(fn, tuple(ex(a) for a in args), tuple(sorted(kw.items())))


def ex(x) -> Ex:
    """`x` as an expression: a node as it is, a number or bool as a `Num`, a str as a `Name`, a tuple as a `Tuple`."""
    if isinstance(x, Ex):
        return x
    if isinstance(x, (bool, int, float)):
        return Num(x)
    if isinstance(x, str):
        return Name(x)
    if isinstance(x, tuple):
        return Tuple(tuple(ex(i) for i in x))
    raise TypeError(f"not an expression: {x!r}")


def sum_of(*terms) -> Ex:
    """The terms added left to right; a term that is a Sum joins the chain (one flat sum)."""
    flat = tuple(t for x in terms for t in (x.terms if isinstance(x, Sum) else (ex(x),)))
    return flat[0] if len(flat) == 1 else Sum(flat)


def all_of(*terms) -> Ex:
    """The masks and-ed left to right; a term that is an All joins the chain (one flat conjunction)."""
    flat = tuple(t for x in terms for t in (x.terms if isinstance(x, All) else (ex(x),)))
    return flat[0] if len(flat) == 1 else All(flat)


def is_const(e: Ex) -> bool:
    """An expression of numbers alone (a literal, or literals under arithmetic: a specialized size `32 + 0.25`)."""
    if isinstance(e, Num):
        return True
    if isinstance(e, (BinOp, UnaryOp, Sum)):
        return all(is_const(c) for c in e.children())
    return False


# -- walking and renaming ------------------------------------------------------------------------

def walk(e: Ex):
    """`e` and every expression inside it."""
    yield e
    for c in e.children():
        yield from walk(c)


def names_read(e: Ex | None) -> set[str]:
    """The variables `e` reads (names, loop counters, the exp a Tanh reads in the interpreter)."""
    out: set[str] = set()
    if e is None:
        return out
    for n in walk(e):
        if isinstance(n, Name):
            out.add(n.id)
        elif isinstance(n, LoopIndex):
            out.add(n.var)
        elif isinstance(n, Tanh):
            out.add(n.e)
    return out


def rename(e, mapping: dict):
    """`e` with the variables in `mapping` renamed (None, a tuple of expressions, or an expression). A
    mapping's value is a new name, or an expression that a `Name` (not a loop counter) is replaced by."""
    if e is None or not mapping:
        return e
    if isinstance(e, tuple):
        return tuple(rename(x, mapping) for x in e)
    if isinstance(e, Name):
        new = mapping.get(e.id, e.id)
        return new if isinstance(new, Ex) else Name(new)
    if isinstance(e, LoopIndex):
        return LoopIndex(mapping.get(e.var, e.var))
    if isinstance(e, Tanh):
        return Tanh(rename(e.x, mapping), mapping.get(e.e, e.e))
    if not isinstance(e, Ex):
        return e
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, (Ex, tuple)):
            new = rename(v, mapping)
            if new != v:
                changes[f.name] = new
    if not changes:
        return e
    return type(e)(**{f.name: changes.get(f.name, getattr(e, f.name)) for f in fields(e)})


# -- Python's binding, for the printers --------------------------------------------------------------

def binding(e: Ex) -> int:
    """How tightly `e`, printed, binds (`PREC`; unary minus, postfix and atoms above every infix operator)."""
    if isinstance(e, BinOp):
        return PREC[e.op]
    if isinstance(e, Sum):
        return PREC["+"]
    if isinstance(e, All):
        return PREC["&"]
    if isinstance(e, UnaryOp) or (isinstance(e, Num) and e.negative):
        return UNARY
    if isinstance(e, (To, Expand)):
        return POSTFIX
    return ATOM


def needs_parens(op: str, child: Ex, right: bool, bind=binding) -> bool:
    """Whether `child`, an operand of the infix `op` (on its right if `right`), is parenthesized: where it binds
    looser; on the right, or under a comparison (Python chains those), where it binds the same too. `bind`:
    the printer's binding, where a node's printed form differs per target."""
    p, c = PREC[op], bind(child)
    if c == p and op in _MUL and isinstance(child, BinOp) and child.op != op:
        return True  # for the reader: (a // b) * c, (a / b) * c, not a // b * c
    return c < p or (c == p and (right or op in CMP))

