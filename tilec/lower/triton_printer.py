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

# tl.associative_scan's combine function for a first-order linear recurrence h = a * h_prev + b (tc.linear_scan,
# tilec/lower/scans.py): the pair (a1, b1) followed by (a2, b2) is (a1 * a2, a2 * b1 + b2)
SCAN_LINEAR = "_linear_combine"
HELPERS[SCAN_LINEAR] = (f"@triton.jit\ndef {SCAN_LINEAR}(a1, b1, a2, b2):\n"
                        "    # (a1, b1) then (a2, b2): h -> a2 * (a1 * h + b1) + b2\n"
                        "    return a1 * a2, a2 * b1 + b2\n")

# float32 -> float8_e5m2 on the GPU. sm_90's conversion (cvt.rn.satfinite) saturates a value past the largest
# finite one (57344) to it, infinities too; torch rounds it to +-inf from 61440 on (the tie between 57344 and
# the 65536 the format has no room for goes to even: inf), as IEEE round to nearest does. The GPU form converts
# through this helper; the interpreter's conversion is torch's already (tilec/runtime/triton_compat.py)
TO_E5M2 = "_to_e5m2"
HELPERS[TO_E5M2] = (
    f"@triton.jit\ndef {TO_E5M2}(x):\n"
    "    # float32 -> float8_e5m2 as torch rounds it: past 57344 to +-inf (0x7c / 0xfc) where the\n"
    "    # hardware's conversion saturates; NaN stays NaN\n"
    "    bits = x.to(tl.float8e5).to(tl.uint8, bitcast=True)\n"
    "    inf = tl.where(x > 0, 0x7C, 0xFC).to(tl.uint8)\n"
    "    return tl.where(tl.abs(x) >= 61440.0, inf, bits).to(tl.float8e5, bitcast=True)\n")

# The interpreter has no libdevice: where tl has no function of numpy's precision (erf, sin and cos it has),
# a `Libm` is this helper there, written with tl from the textbook identities
LIBM_HELPERS = {
    "log1p": ("_log1p", "@triton.jit\ndef _log1p(x):\n"
              "    # log(1 + x), exact near 0 (libdevice's on the GPU): log(u) * x / (u - 1) for u = 1 + x rounded\n"
              "    u = 1.0 + x\n"
              "    d = u - 1.0\n"
              "    return tl.where((d == 0.0) | (u == float(\"inf\")), x, tl.log(u) * (x / d))\n"),
    "expm1": ("_expm1", "@triton.jit\ndef _expm1(x):\n"
              "    # exp(x) - 1, exact near 0 (libdevice's on the GPU): (u - 1) * x / log(u) for u = exp(x) rounded\n"
              "    u = tl.exp(x)\n"
              "    d = u - 1.0\n"
              "    exact = (d == -1.0) | (u == float(\"inf\"))\n"
              "    return tl.where(d == 0.0, x, tl.where(exact, d, d * (x / tl.log(u))))\n"),
    "pow": ("_pow", "@triton.jit\ndef _pow(a, b):\n"
            "    # C's pow (libdevice's on the GPU, torch.pow): |a| ** b, negative for a negative base (-0 too) and an\n"
            "    # odd whole exponent, NaN for a finite negative base and a fraction; pow(a, 0) = pow(1, b) =\n"
            "    # pow(-1, +-inf) = 1\n"
            "    m = tl.exp2(b * tl.log2(tl.abs(a)))\n"
            "    whole = tl.floor(b) == b\n"
            "    odd = whole & (tl.floor(b * 0.5) != b * 0.5)\n"
            "    neg = (a < 0.0) | ((a == 0.0) & (1.0 / a < 0.0))\n"
            "    r = tl.where(neg & odd, -m, m)\n"
            "    r = tl.where((a < 0.0) & (a > float(\"-inf\")) & ~whole, float(\"nan\"), r)\n"
            "    one = (b == 0.0) | (a == 1.0) | ((tl.abs(a) == 1.0) & (tl.abs(b) == float(\"inf\")))\n"
            "    return tl.where(one, 1.0, r)\n"),
    "rint": ("_rint", "@triton.jit\ndef _rint(x):\n"
             "    # x rounded to a whole number, halves to even (libdevice's rint on the GPU, torch.round)\n"
             "    f = tl.floor(x)\n"
             "    d = x - f\n"
             "    up = (d > 0.5) | ((d == 0.5) & (tl.floor(f * 0.5) * 2.0 != f))\n"
             "    return tl.where(up, f + 1.0, f)\n"),
}
HELPERS.update({name: text for name, text in LIBM_HELPERS.values()})

DOT = "tl.dot"  # the matrix product a `Dot` statement is (the nest names it too)
_PLAIN = {"zeros_like", "broadcast_to", "trans", "permute", "where", "exp", "log", "sqrt", "rsqrt", "abs",
          "sigmoid", "floor", "ceil", "exp2", "log2", "cdiv", "rand", "randn", "randint", "arange", "full", "zeros", "maximum", "minimum"}


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

    def binding(self, e: c.Ex) -> int:
        """How tightly `e` binds as printed in this form: the interpreter's tanh is a product, its fmod a `%`."""
        if self.form.target != "cuda" and isinstance(e, (c.Tanh, c.Fmod)):
            return c.PREC["*"]
        return c.binding(e)

    def operand(self, op: str, e: c.Ex, right: bool) -> str:
        text = self.ex(e)
        return f"({text})" if c.needs_parens(op, e, right, self.binding) else text

    def postfix_base(self, e: c.Ex) -> str:
        text = self.ex(e)
        return f"({text})" if self.binding(e) < c.POSTFIX or isinstance(e, c.Num) else text

    def chain(self, op: str, terms) -> str:
        return f" {op} ".join(self.operand(op, t, n > 0) for n, t in enumerate(terms))

    def ex(self, e) -> str:  # noqa: C901 - one case per node
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
            return f"{e.op}({text})" if self.binding(e.x) <= c.UNARY else f"{e.op}{text}"
        if isinstance(e, c.Sum):
            return self.chain("+", e.terms)
        if isinstance(e, c.All):
            return self.chain("&", e.terms)
        if isinstance(e, c.Cast):
            return f"tl.cast({self.ex(e.x)}, {tname(e.dtype)})"
        if isinstance(e, c.To):
            if e.dtype == "float8_e5m2" and self.form.target == "cuda":  # saturates on the GPU: TO_E5M2
                return f"{TO_E5M2}({self.ex(e.x)})"
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
        if isinstance(e, c.Libm):
            args = ", ".join(self.ex(a) for a in e.args)
            if self.form.target == "cuda":
                return f"libdevice.{e.fn}({args})"
            return f"{LIBM_HELPERS[e.fn][0]}({args})" if e.fn in LIBM_HELPERS else f"tl.{e.fn}({args})"
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
        if e.fn in ("cumsum", "cumprod"):
            return f"tl.{e.fn}({args[0]}, axis={e.attr('axis')})"
        if e.fn == "scan":  # a cummax / cummin that keeps NaN, or a recurrence's pairs
            fn = SCAN_LINEAR if e.attr("op") == "linear" else NAN_COMBINE[e.attr("op")]
            return f"tl.associative_scan({args[0]}, {e.attr('axis')}, {fn})"
        if e.fn == "sort":
            return f"tl.sort({args[0]}, dim={e.attr('axis')}, descending={e.attr('descending')})"
        if e.fn == "bitcast":
            return f"{self.postfix_base(e.args[0])}.to({tname(e.attr('dtype'))}, bitcast=True)"
        if e.fn == "item":
            return f"{self.postfix_base(e.args[0])}[{e.attr('index')}]"
        if e.fn in _PLAIN:
            return f"tl.{e.fn}({', '.join(args)})"
        raise TypeError(f"no Triton spelling of the intrinsic {e.fn!r}")


def render(e, form: Form = CUDA) -> str:
    """The Triton text of one expression."""
    return Printer(form).ex(e)


def tanh_exp(name: str, x: str, target: str) -> str | None:
    """The statement computing `name` = exp(-2|x|) for the interpreter's tanh; none on the GPU."""
    return None if target == "cuda" else f"{name} = tl.exp(-2.0 * tl.abs({x}))"


# -- statements and kernels ---------------------------------------------------------------------------

_WHY = {  # what a `Why` statement says, per topic
    "nan_reduce": lambda op: f"tl.{op} skips NaN, torch's a{op} returns it: {NAN_COMBINE[op]} keeps it",
    "tf32_sum": lambda op: "+ 0.0: a bare broadcast product summed is made a TF32 tl.dot by Triton",
    "dot_zero": lambda op: "zero past the end of the reduction: tl.dot sums every lane of the tile",
}


def _dot_operand(x: c.Ex, dtype: str) -> c.Ex:
    """A tl.dot operand widened to float32 (low-precision floats with .to, others with tl.cast)."""
    cd = dtypes.compute_dtype(dtype)
    if cd != dtype:
        x, dtype = c.To(x, cd), cd
    return x if dtype == "float32" else c.Cast(x, "float32")


def _other(dtype: str) -> str:
    """The 0 a masked load writes where its mask is false. Triton casts it to the element type, and it casts no
    int to float8, so a float8 tile's is 0.0 (float32, which it casts like a value; issue 23)."""
    return "0.0" if dtype.startswith("float8") else "0"


def statement(node, form: Form = CUDA) -> str | None:  # noqa: C901 - one case per statement
    """The Triton line of one statement (None: nothing in this form)."""
    from tilec.lower import nest as n

    r = Printer(form)
    if isinstance(node, n.Comment):
        return f"# {node.text}"
    if isinstance(node, n.Why):
        return f"# {_WHY[node.topic](node.op)}"
    if isinstance(node, n.ProgramId):
        return f"{node.name} = tl.program_id({node.dim})" + (".to(tl.int64)" if form.int64 else "")
    if isinstance(node, n.TileId):  # tl.cast: the interpreter's loop counter is a Python int
        return f"{node.name} = tl.cast({node.loop}, tl.int64)" if form.int64 else f"{node.name} = {node.loop}"
    if isinstance(node, n.Assign):
        return f"{node.name} = {r(node.value)}"
    if isinstance(node, n.Load):
        if node.desc is not None and form.descriptors:
            return f"{node.name} = {node.desc}.load([{', '.join(r(s) for s in node.starts)}])"
        mask = f", mask={r(node.mask)}, other={_other(node.dtype)}" if node.mask is not None else ""
        return f"{node.name} = tl.load({r(node.address)}{mask})"
    if isinstance(node, n.Store):
        if node.desc is not None and form.descriptors:
            return f"{node.desc}.store([{', '.join(r(s) for s in node.starts)}], {r(node.value)})"
        mask = f", mask={r(node.mask)}" if node.mask is not None else ""
        return f"tl.{'atomic_add' if node.atomic else 'store'}({r(node.address)}, {r(node.value)}{mask})"
    if isinstance(node, n.AccInit):
        shape = f"[{', '.join(r(x) for x in node.shape.items)}]"
        return f"{node.name} = tl.full({shape}, {r(node.init)}, {tname(node.dtype)})"
    if isinstance(node, n.Update):
        return f"{node.acc} = {r(node.value)}"
    if isinstance(node, n.Dot):
        if targets.native_dot(node.a_dtype, node.b_dtype, form.target):
            return f"{node.acc} = {DOT}({r(node.a)}, {r(node.b)}, {node.acc})"
        a, b = r(_dot_operand(node.a, node.a_dtype)), r(_dot_operand(node.b, node.b_dtype))
        return f'{node.acc} = {DOT}({a}, {b}, {node.acc}, input_precision="ieee")'
    if isinstance(node, n.TanhExp):
        return tanh_exp(node.name, r(node.x), form.target)
    if isinstance(node, n.Barrier):
        return "tl.debug_barrier()"
    raise TypeError(f"not a statement of the loop-nest IR: {node!r}")


def _loop(node, form: Form) -> str:
    r = Printer(form)
    stages = f", num_stages={r(node.stages)}" if node.stages is not None else ""
    if node.kind == "unroll":
        return f"for {node.var} in tl.static_range({r(node.extent)}):"
    if node.kind == "persistent":
        return (f"for {node.var} in tl.range(tl.program_id(0), {r(node.extent)}, {r(node.step)}{stages}, "
                f"flatten={r(node.flatten)}):")
    start = r(node.start) if node.start is not None else "0"
    return f"for {node.var} in tl.range({start}, {r(node.extent)}{stages}):"


def render_triton(kernel, form: Form = CUDA) -> str:
    """The kernel as Triton source: header comment, signature, body with a comment per loop."""
    from tilec.lower.nest import For

    lines = [f"# {h}" if h else "#" for h in kernel.header]
    lines += ["@triton.jit"]
    sig = [p.name + (": tl.constexpr" if p.kind == "constexpr" else "") for p in kernel.params
           if p.kind != "descriptor" or form.descriptors]
    lines.append(f"def {kernel.name}(")
    lines += [f"    {s}," for s in sig]
    lines.append("):")

    def emit(body, indent):
        pad = "    " * indent
        for node in body:
            if isinstance(node, For):
                lines.append(f"{pad}# {node.role}")
                lines.append(pad + _loop(node, form))
                emit(node.body, indent + 1)
                continue
            line = statement(node, form)
            if line is not None:
                lines.append(pad + line)

    emit(kernel.body, 1)
    return "\n".join(lines) + "\n"


def helpers(kernels, form: Form = CUDA) -> list[str]:
    """The HELPERS that the kernels call in this form (a max or min reduction or scan that keeps NaN, a linear
    recurrence's combine, the GPU's
    float8_e5m2 conversion, the interpreter's forms of libdevice functions), in a fixed order."""
    from tilec.lower.nest import expressions

    found = [e for k in kernels for e in expressions(k.body)]
    ops = {e.attr("op") for e in found if isinstance(e, c.Call) and e.fn in ("reduce", "scan")}
    names = {SCAN_LINEAR if op == "linear" else NAN_COMBINE[op] for op in ops}
    if form.target != "cuda":
        names |= {LIBM_HELPERS[e.fn][0] for e in found if isinstance(e, c.Libm) and e.fn in LIBM_HELPERS}
    if form.target == "cuda" and any(isinstance(e, c.To) and e.dtype == "float8_e5m2" for e in found):
        names.add(TO_E5M2)
    return [HELPERS[name] for name in HELPERS if name in names]


def uses_libdevice(kernel, form: Form) -> bool:
    """Whether the kernel in this form calls libdevice (tanh, fmod and the `Libm` functions on the GPU)."""
    from tilec.lower.nest import expressions

    return form.target == "cuda" and any(isinstance(e, (c.Tanh, c.Fmod, c.Libm)) for e in expressions(kernel.body))


def module(kernels, form: Form = CUDA) -> str:
    """The kernels as one Triton module: imports, the helpers they call, the kernels."""
    head = ["import triton", "import triton.language as tl"]
    if any(uses_libdevice(k, form) for k in kernels):
        head.append("from triton.language.extra import libdevice")
    return "\n".join(head) + "\n\n\n" + "\n\n".join(helpers(kernels, form) + [render_triton(k, form) for k in kernels])
