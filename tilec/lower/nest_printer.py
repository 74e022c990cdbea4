"""The loop-nest printer: the IR as the nest `tc.lower` prints, for people.

It prints the same nodes the Triton printer does (`triton_printer.py`), so every name a nest line shows is
the kernel's: a loop's bounds, an accumulator, a temporary. Expressions are written in tilec's words
(`cdiv`, `max`, `exp`), knobs as their values under the config; new unit dimensions and conversions of
index types are left out. What a statement means for the user's compute (`C_val = silu(C[i, j])`) is
its `Note`, whose names are expressions of the node too.
"""

from __future__ import annotations

from tilec.lower import code as c
from tilec.lower.triton_printer import DOT, num

_SPELL = {"maximum": "max", "minimum": "min", "rint": "round"}


class NestPrinter:
    """Expressions in the nest's words; `values`: knob name -> its value under the config."""

    def __init__(self, values: dict | None = None):
        self.values = values or {}

    def operand(self, op: str, e: c.Ex, right: bool) -> str:
        text = self.ex(e)
        return f"({text})" if c.needs_parens(op, e, right) else text

    def ex(self, e) -> str:  # noqa: C901 - one case per node
        if isinstance(e, c.Name):
            return str(self.values[e.id]) if e.id in self.values else e.id
        if isinstance(e, c.Num):
            return e.size or num(e.value)
        if isinstance(e, c.LoopIndex):
            return e.var
        if isinstance(e, c.DType):
            return repr(e.dtype)
        if isinstance(e, c.Tuple):
            items = [self.ex(x) for x in e.items]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(e, c.BinOp):
            return f"{self.operand(e.op, e.a, False)} {e.op} {self.operand(e.op, e.b, True)}"
        if isinstance(e, c.UnaryOp):
            text = self.ex(e.x)
            return f"{e.op}({text})" if c.binding(e.x) <= c.UNARY else f"{e.op}{text}"
        if isinstance(e, (c.Sum, c.All)):
            op = "+" if isinstance(e, c.Sum) else "&"
            return f" {op} ".join(self.operand(op, t, n > 0) for n, t in enumerate(e.terms))
        if isinstance(e, (c.Cast, c.To)):
            text = self.ex(e.x)
            return f"{text if c.binding(e.x) >= c.POSTFIX else f'({text})'}.astype({e.dtype!r})"
        if isinstance(e, c.Expand):
            return self.ex(e.x)
        if isinstance(e, c.Call) and e.fn == "scan":
            return f"scan_{e.attr('op')}({self.ex(e.args[0])}, axis={e.attr('axis')})"
        if isinstance(e, c.Call) and e.fn == "item":
            return f"{self.ex(e.args[0])}[{e.attr('index')}]"
        if isinstance(e, c.Call):
            return f"{_SPELL.get(e.fn, e.fn)}({', '.join(self.ex(a) for a in e.args)})"
        if isinstance(e, c.Tanh):
            return f"tanh({self.ex(e.x)})"
        if isinstance(e, c.Libm):
            return f"{_SPELL.get(e.fn, e.fn)}({', '.join(self.ex(a) for a in e.args)})"
        if isinstance(e, c.Fmod):
            return f"fmod({self.ex(e.a)}, {self.ex(e.b)})"
        raise TypeError(f"not an expression of the kernel IR: {e!r}")


def show(e, values: dict | None = None) -> str:
    """One expression in the nest's words (for the nest, and for messages)."""
    return NestPrinter(values).ex(e)


def line(node, p: NestPrinter) -> str:
    """A statement's nest line, from its `Note`: the name it defines (or the note's own left side), then
    the right side; a dot says which instruction it is."""
    from tilec.lower.nest import Dot, defined

    note = node.note
    parts = lambda xs: "".join(x if isinstance(x, str) else p.ex(x) for x in xs)  # noqa: E731
    if note.lhs is not None:
        lhs = parts(note.lhs)
    else:
        lhs = defined(node) + (f"[{', '.join(note.dims)}]" if note.dims is not None else "")
    text = lhs + (f" {note.op} " if note.op else "") + parts(note.rhs)
    if isinstance(node, Dot):
        text += f"  ({DOT})"
    return text + (f"  [{note.piece}]" if note.piece else "")


def span(loop, values: dict) -> str:
    """What a loop runs over, for people: [0, cdiv(K, 32)), or a persistent loop's tiles."""
    p = NestPrinter(values)
    if loop.kind == "persistent":
        return f"[program_id.0, {p.ex(loop.extent)}) step #programs"
    return f"[{p.ex(loop.start) if loop.start is not None else 0}, {p.ex(loop.extent)})"


def render_nest(kernel) -> str:
    """The kernel as a loop nest for people: grid, loops with their roles, stores and computes."""
    from tilec.lower.nest import For

    values = kernel.config
    p = NestPrinter(values)
    out = [f"kernel {kernel.name}  (stages: {', '.join(kernel.stages)}; num_warps={kernel.num_warps})"]
    if kernel.header[1] != "config: none (no knobs)":
        out.append(f"  {kernel.header[1]}")
    dims = ", ".join(kernel.grid_text) or "1"
    if kernel.persistent:
        dims = f"min(#SMs, {dims})"
    out.append(f"  grid ({dims})")

    def emit(body, indent):
        pad = "  " * indent
        for node in body:
            if isinstance(node, For):
                how = {"unroll": "unrolled", "persistent": "persistent"}.get(node.kind, "serial")
                if node.stages is not None:
                    how += f", pipelined stages={p.ex(node.stages)}"
                if node.kind == "persistent" and _truthy(node.flatten, values):
                    how += ", flattened"
                out.append(f"{pad}for {node.var} in {span(node, values)}:  {how}  # {node.role}")
                emit(node.body, indent + 1)
            elif getattr(node, "note", None) is not None:
                out.append(pad + line(node, p))

    emit(kernel.body, 2)
    return "\n".join(out) + "\n"


def _truthy(e, values: dict) -> bool:
    if isinstance(e, c.Num):
        return bool(e.value)
    return isinstance(e, c.Name) and bool(values.get(e.id))
