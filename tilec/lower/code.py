"""Expressions of the loop-nest IR: small immutable trees that render to Triton text.

A kernel's values (offsets, masks, loaded tiles, arithmetic) are built as these nodes, not as finished
strings, so that what differs between the forms of one kernel is decided when it is rendered:
- `Form.int64`: loop counters and program ids are widened to int64 (indices past 2**31);
- `Form.target`: "cuda" or "interpreter" (Triton's CPU interpreter has no libdevice; see targets.py).

Nodes: `Name` (a variable), `Lit` (a Python literal or a Triton constant), `LoopIndex` (a loop
counter), `Fmt` (an operator written as a format template over its operands), `Paren` (its operand
parenthesized unless atomic), `Tensor0d` (a Python number as a 0-d tensor, so `.to()` applies),
`Tanh` and `Fmod`. `render(e, form)` gives the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilec.lower import targets


@dataclass(frozen=True)
class Form:
    """How a kernel is rendered: for which target, with which index width, and whether the loads a
    schedule asked to go through tensor descriptors (`cache_read(..., tma=True)`) do (else: pointers)."""

    target: str = "cuda"
    int64: bool = False
    descriptors: bool = True


CUDA = Form()


class Ex:
    """An expression of the kernel IR."""

    def text(self, form: Form = CUDA) -> str:
        return render(self, form)


@dataclass(frozen=True)
class Name(Ex):
    id: str


@dataclass(frozen=True)
class Lit(Ex):
    """Literal text: a number (`1.0`, `float("inf")`), `True`, or a Triton constant such as `tl.float32`."""

    text_: str


@dataclass(frozen=True)
class LoopIndex(Ex):
    """The counter of a serial loop: a Python int in the interpreter, widened in the int64 form."""

    var: str


@dataclass(frozen=True)
class Fmt(Ex):
    """An operation written as `template.format(*operands)`, e.g. Fmt("{} + {}", (a, b))."""

    template: str
    args: tuple = ()


@dataclass(frozen=True)
class Paren(Ex):
    """Its operand, parenthesized unless it is a name, a number, an indexed name or a call."""

    x: Ex


@dataclass(frozen=True)
class Tensor0d(Ex):
    """Its operand as something `.to()` applies to: a Python number literal, or an expression of literals
    only (a specialized size: `(32 + 0.25)`), becomes a 0-d tensor of `dtype` (a Triton type: "tl.float32")."""

    x: Ex
    dtype: str | None = None


@dataclass(frozen=True)
class Tanh(Ex):
    """tanh(x), `x` a name: libdevice on the GPU; with tl.exp in the interpreter, which has no
    libdevice (`e` names the tl.exp(-2|x|) that a `TanhExp` statement computes there)."""

    x: Ex
    e: str


@dataclass(frozen=True)
class Fmod(Ex):
    """C's fmod(a, b) of floats, exact (the start of float `//` and `%`): libdevice on the GPU, Triton's
    `%` in the interpreter (numpy's fmod there; on the GPU Triton's `%` is inexact: targets.py)."""

    a: Ex
    b: Ex


def f(template: str, *args) -> Fmt:
    """Fmt with operands given positionally: f("{} * {}", a, b)."""
    return Fmt(template, tuple(args))


def render(e: Ex, form: Form = CUDA) -> str:
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Lit):
        return e.text_
    if isinstance(e, LoopIndex):
        return f"tl.cast({e.var}, tl.int64)" if form.int64 else e.var
    if isinstance(e, Fmt):
        return e.template.format(*(render(a, form) for a in e.args))
    if isinstance(e, Paren):
        return paren(render(e.x, form))
    if isinstance(e, Tensor0d):
        return tensor0d(render(e.x, form), e.dtype)
    if isinstance(e, Tanh):
        return targets.tanh(render(e.x, form), e.e, form.target)
    if isinstance(e, Fmod):
        return targets.fmod(render(e.a, form), render(e.b, form), form.target)
    raise TypeError(f"not an expression of the kernel IR: {e!r}")


def walk(e: Ex):
    """`e` and every expression inside it."""
    yield e
    if isinstance(e, Fmt):
        for a in e.args:
            yield from walk(a)
    elif isinstance(e, (Paren, Tensor0d, Tanh)):
        yield from walk(e.x)
    elif isinstance(e, Fmod):
        yield from walk(e.a)
        yield from walk(e.b)


def paren(code: str) -> str:
    """`code` wrapped in parentheses unless it is a name, a number or an indexed name."""
    if re.fullmatch(r"[\w.]+(\[[:, None]*\])?", code) or re.fullmatch(r"\d+\.?\d*(e-?\d+)?", code):
        return code
    m = re.match(r"[\w.]+\(", code)
    if m and code.endswith(")"):  # a call: atomic if its opening parenthesis closes at the end
        depth = 0
        for n, ch in enumerate(code[m.end() - 1:], start=m.end() - 1):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                return code if n == len(code) - 1 else f"({code})"
    return f"({code})"


def tensor0d(code: str, dtype: str | None = None) -> str:
    """`code` as something `.to()` applies to: a Python number literal becomes a 0-d tensor; so does an
    expression of number literals alone (Python would compute it as a float or int), as `dtype`."""
    if re.fullmatch(r"-?\d+\.?\d*(e[-+]?\d+)?|True|False|float\(\"-?(inf|nan)\"\)", code):
        kind = 'tl.int1' if code in ('True', 'False') else 'tl.float32' if not code.lstrip('-').isdigit() else 'tl.int32'
        return f"tl.full((), {code}, {kind})"
    if dtype is not None and re.fullmatch(r"[\d\s.+\-*/%()]+", code):
        return f"tl.full((), {code}, {dtype})"
    return paren(code)
