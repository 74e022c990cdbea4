"""The Triton printer: the loop-nest IR (`nest.py` statements over `code.py` expressions) as Triton source.

Every Triton spelling of tilec lives here: the intrinsics' names (`tl.where`, `tl.cdiv`, ...), conversions
(`tl.cast(x, t)`, `x.to(t)`), new dimensions (`x[:, None]`), the loops (`tl.range`, `tl.static_range`),
loads and stores (pointers or tensor descriptors), `tl.dot` and the helpers a kernel calls. A `Form`
says how one kernel is rendered; one lowering serves every form:
- `Form.target`: "cuda" (Triton compiling for the GPU) or "interpreter" (Triton's CPU interpreter, which
  computes a bf16 `tl.dot` wrongly and has no libdevice: targets.py says what differs and why);
- `Form.int64`: loop counters and program ids widened to int64 (indices past 2**31);
- `Form.descriptors`: loads and stores that the schedule put through tensor descriptors do so (else pointers).

Parentheses follow Python's binding (`code.needs_parens`), never the text: an operand is parenthesized
where it binds looser than its operator needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilec.ir import dtypes
from tilec.lower import code as c
from tilec.lower import targets


@dataclass(frozen=True)
class Form:
    """How a kernel is rendered: for which target, with which index width, and whether the loads a
    schedule asked to go through tensor descriptors (`cache_read(..., tma=True)`) do (else: pointers)."""

    target: str = "cuda"
    int64: bool = False
    descriptors: bool = True


CUDA = Form()

# tl.reduce's combine functions for a max or min that keeps NaN as torch's amax/amin do (tl.max and tl.min
# drop it; max.NaN on the GPU): module-level functions written once before the kernels that call them
NAN_COMBINE = {"max": "_max_nan", "min": "_min_nan"}
HELPERS = {
    name: (f"@triton.jit\ndef {name}(a, b):\n    # {op} of a and b, NaN if either is (torch's a{op})\n"
           f"    return tl.{op}imum(a, b, propagate_nan=tl.PropagateNan.ALL)\n")
    for op, name in NAN_COMBINE.items()}

_PLAIN = {"zeros_like", "broadcast_to", "trans", "permute", "where", "exp", "log", "sqrt", "rsqrt", "abs",
          "sigmoid", "floor", "cdiv", "arange", "full", "zeros", "maximum", "minimum"}


def tname(dtype: str) -> str:
    """Triton's name of an element type."""
    return dtypes.triton_name(dtype)


def num(v) -> str:
    """A Python number as Triton source: 3, 0.5, True, float("-inf")."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and math.isnan(v):
        return 'float("nan")'
    if isinstance(v, float) and math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(v)


class Printer:
    """Expressions as Triton text in one form."""

    def __init__(self, form: Form = CUDA):
        self.form = form

    def __call__(self, e) -> str:
        return self.ex(e)

    def operand(self, op: str, e: c.Ex, right: bool) -> str:
        text = self.ex(e)
        return f"({text})" if c.needs_parens(op, e, right) else text

    def postfix_base(self, e: c.Ex) -> str:
        text = self.ex(e)
        return f"({text})" if c.binding(e) < c.POSTFIX or isinstance(e, c.Num) else text

    def chain(self, op: str, terms) -> str:
        return f" {op} ".join(self.operand(op, t, n > 0) for n, t in enumerate(terms))

    def ex(self, e) -> str:  # noqa: C901 - one case per node
        if isinstance(e, (c.Lit, c.Fmt, c.Paren, c.Tensor0d)):  # legacy templates, until nothing builds them
            return c.render(e, self.form)
        if isinstance(e, c.Name):
            return e.id
        if isinstance(e, c.Num):
            return num(e.value)
        if isinstance(e, c.LoopIndex):
            return f"tl.cast({e.var}, tl.int64)" if self.form.int64 else e.var
        if isinstance(e, c.DType):
            return tname(e.dtype)
        if isinstance(e, c.Tuple):
            items = [self.ex(x) for x in e.items]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(e, c.BinOp):
            return f"{self.operand(e.op, e.a, False)} {e.op} {self.operand(e.op, e.b, True)}"
        if isinstance(e, c.UnaryOp):
            text = self.ex(e.x)
            return f"{e.op}({text})" if c.binding(e.x) <= c.UNARY else f"{e.op}{text}"
        if isinstance(e, c.Sum):
            return self.chain("+", e.terms)
        if isinstance(e, c.All):
            return self.chain("&", e.terms)
        if isinstance(e, c.Cast):
            return f"tl.cast({self.ex(e.x)}, {tname(e.dtype)})"
        if isinstance(e, c.To):
            return f"{self.postfix_base(e.x)}.to({tname(e.dtype)})"
        if isinstance(e, c.Expand):
            return f"{self.postfix_base(e.x)}[{', '.join(':' if keep else 'None' for keep in e.pattern)}]"
        if isinstance(e, c.Call):
            return self.call(e)
        if isinstance(e, c.Tanh):
            x = self.ex(e.x)
            if self.form.target == "cuda":
                return f"libdevice.tanh({x})"
            return f"tl.where({x} >= 0, 1.0, -1.0) * (1.0 - {e.e}) / (1.0 + {e.e})"
        if isinstance(e, c.Fmod):
            if self.form.target == "cuda":
                return f"libdevice.fmod({self.ex(e.a)}, {self.ex(e.b)})"
            return f"{self.operand('%', e.a, False)} % {self.operand('%', e.b, True)}"
        raise TypeError(f"not an expression of the kernel IR: {e!r}")

    def call(self, e: c.Call) -> str:
        args = [self.ex(a) for a in e.args]
        if e.fn in ("maximum", "minimum"):
            nan = ", propagate_nan=tl.PropagateNan.ALL" if e.attr("nan") else ""
            return f"tl.{e.fn}({', '.join(args)}{nan})"
        if e.fn in ("sum", "max", "min"):
            return f"tl.{e.fn}({args[0]}, axis={e.attr('axis')})"
        if e.fn == "reduce":
            return f"tl.reduce({args[0]}, {e.attr('axis')}, {NAN_COMBINE[e.attr('op')]})"
        if e.fn in _PLAIN:
            return f"tl.{e.fn}({', '.join(args)})"
        raise TypeError(f"no Triton spelling of the intrinsic {e.fn!r}")


def render(e, form: Form = CUDA) -> str:
    """The Triton text of one expression."""
    return Printer(form).ex(e)


def tanh_exp(name: str, x: str, target: str) -> str | None:
    """The statement computing `name` = exp(-2|x|) for the interpreter's tanh; none on the GPU."""
    return None if target == "cuda" else f"{name} = tl.exp(-2.0 * tl.abs({x}))"
