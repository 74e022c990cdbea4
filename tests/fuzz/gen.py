"""The fuzzer's case generator: one (compute, schedule, config, inputs) case per seed.

`generate(seed)` draws everything from `random.Random(seed)`, so a seed number is the whole case. Every
statement is built as Python text and executed at once in the case's namespace, so the text is exactly
what ran and the next choice can look at the live schedule (its leaves, knobs, stages); `Case.script()`
is then a standalone reproduction script (run it from the repository root).

Computes (families): elementwise chains with broadcasts and shifted reads (`P[i - 1]`, `N - 1 - j`, a
constant index: out of range they read 0, as docs/schedule.md says), bool and int arithmetic
(comparisons, `&`, `|`, `^`, `~`, `<<`, `>>`, `b + 1`, `//`, `%`), float16 / bfloat16 / float32 values and rounding points
(`astype`, compute dtypes), reductions over one or two axes (sum / max / min), GEMMs with transposed
operands, multi-stage DAGs (softmax / rmsnorm / layernorm shapes, two consumers of one producer), symbolic
and constant sizes (also 1 and sizes that divide no tile), `tc.assume` facts and `specialize`. `fam_online`
(ONLINE_SHARE of the seeds, decided apart from the case's own random stream, so the other seeds' cases are
as before): a row max `m`, `l = sum(exp(A - m))` and a softmax, logsumexp or weighted sum (P·V) over them,
with causal-style `tc.where(j <= i, x, -inf)` operands, scores from a GEMM, elementwise stages between
(inlined or not), rounding points inside the summands, bodies that break the online algebra, statistics
stored as outputs, and -inf rows / row prefixes in the inputs.

Schedules: random sequences of every primitive with random arguments (ints and knobs, powers of two or
not, larger than the extent), mixed with "sensible" moves (tile + reorder + bind, epilogues, prologues,
caches), so that both refusals and deep legal schedules are exercised; for fam_online, `online` with right
or wrong arguments (m_online: statistics missing, extra, twice; a wrong target; skip_masked either way) at
any point of FlashAttention's or the softmax example's schedule (s_online). A primitive that raises a
`tc.TilecError` is refused: it stays in the script as `attempt(lambda: ...)` and generation goes on. Any
other exception stops the case as an internal error, at that statement.
"""

from __future__ import annotations

import math
import os
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import tilec as tc
from tilec.schedule.schedule import Split

SIZE_NAMES = ("M", "N", "K", "L")
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
KNOB_NAMES = ("BA", "BB", "BC", "BD")
MAX_GRID = 6000        # elements of the largest index grid of a compute (spatial x reduce)
MAX_TENSOR = 2500      # elements of a tensor
ONLINE_SHARE = 0.12    # the share of seeds that are fam_online cases (decided by a stream of their own)


SCAN_SHARE = 0.10      # the share of the other seeds that are fam_scan cases (a stream of their own too)


def seed_mix_scan(seed: int) -> int:
    """The seed of the stream that decides whether a case is fam_scan (apart, as `seed_mix`)."""
    return (seed * 0x85EBCA77 + 0x5CA7) % (1 << 61)


SCATTER_SHARE = 0.08   # the share of the seeds left that are fam_scatter cases (a stream of their own)


def seed_mix_scatter(seed: int) -> int:
    """The seed of the stream that decides whether a case is fam_scatter (apart, as `seed_mix`)."""
    return (seed * 0xC2B2AE3D + 0x5CA77E) % (1 << 61)


def seed_mix(seed: int) -> int:
    """The seed of the stream that decides whether a case is fam_online: apart from the case's own stream,
    so that adding the family left every other seed's case as it was."""
    return (seed * 0x9E3779B1 + 0x5EED) % (1 << 61)


@dataclass
class Line:
    """One schedule statement: `code` as it ran, `kind` "ok" | "refused" | "internal"."""

    code: str
    kind: str = "ok"

    def text(self) -> str:
        if self.kind == "refused":
            return f"attempt(lambda: {self.code})"
        return self.code


@dataclass
class Case:
    seed: int
    family: str = ""
    sizes: dict = field(default_factory=dict)      # name -> value
    symbolic: dict = field(default_factory=dict)   # name -> bool
    facts: dict = field(default_factory=dict)      # name -> divisor (tc.assume(S % d == 0))
    compute: list = field(default_factory=list)    # statements: placeholders, computes, create_schedule
    sched: list = field(default_factory=list)      # Line
    config: dict = field(default_factory=dict)
    args: list = field(default_factory=list)       # names for tc.build
    inputs: dict = field(default_factory=dict)     # placeholder name -> input spec (oracle.make_input)
    specialize: list = field(default_factory=list)  # size names baked in with specialize=
    error: str | None = None                       # the traceback of an internal error while generating
    error_line: str | None = None

    def copy(self) -> Case:
        return Case(self.seed, self.family, dict(self.sizes), dict(self.symbolic), dict(self.facts),
                    list(self.compute), [Line(x.code, x.kind) for x in self.sched], dict(self.config),
                    list(self.args), {k: dict(v) for k, v in self.inputs.items()}, list(self.specialize),
                    self.error, self.error_line)

    # -- text -------------------------------------------------------------------------------------
    def size_lines(self) -> list[str]:
        lines = [f"SIZES = {self.sizes!r}"]
        sym = [n for n in self.sizes if self.symbolic.get(n)]
        if sym:
            lines.append(f"{', '.join(sym)} = tc.size_vars({' '.join(sym)!r})")  # one name: the size itself
        for n in self.sizes:
            if not self.symbolic.get(n):
                lines.append(f"{n} = SIZES[{n!r}]")
        for n, d in self.facts.items():
            if self.symbolic.get(n):
                lines.append(f"tc.assume({n} % {d} == 0)")
        return lines

    def tail_lines(self) -> list[str]:
        spec = "{" + ", ".join(f"{n!r}: SIZES[{n!r}]" for n in self.specialize) + "}" if self.specialize else "None"
        return [
            f"config = {self.config!r}",
            f"CASE = dict(sched=s, args=[{', '.join(self.args)}], config=config, sizes=SIZES,",
            f"            inputs={self.inputs!r},",
            f"            seed={self.seed}, specialize={spec})",
        ]

    def body(self, upto: int | None = None) -> str:
        """The statements of the case (sizes, compute, schedule, config, CASE), as one text."""
        sched = self.sched if upto is None else self.sched[:upto]
        lines = self.size_lines() + self.compute + [x.text() for x in sched]
        if upto is None and self.error is None:
            lines += self.tail_lines()
        return "\n".join(lines) + "\n"

    def script(self, note: str = "", pending: str | None = None) -> str:
        """A standalone reproduction script: run it from the repository root. With `pending`, the script
        of a case cut short just before that statement (it ends with the statement)."""
        head = [
            f'"""tilec fuzz case, seed {self.seed} ({self.family}). {note}'.rstrip() + "",
            "",
            "Run from the repository root: TRITON_INTERPRET=1 python this_file.py",
            '"""',
            "import os",
            "import sys",
            "",
            "sys.path.insert(0, os.getcwd())",
            "import tilec as tc  # noqa: E402",
            "from tests.fuzz.oracle import attempt, run_script_case  # noqa: E402,F401",
            "",
        ]
        if pending is not None:
            return "\n".join(head) + "\n" + self.body(upto=len(self.sched)) + pending + "\n"
        text = "\n".join(head) + "\n" + self.body()
        if self.error is None:
            text += "\nif __name__ == \"__main__\":\n    run_script_case(CASE)\n"
        return text


# ---------------------------------------------------------------------------------------------
# expressions as text


@dataclass
class E:
    code: str
    cat: str          # "f", "i", "b"
    weak: bool = False


def _cat(dtype: str) -> str:
    return "b" if dtype == "bool" else "i" if dtype.startswith(("int", "uint")) else "f"


class _Ctx:
    """What a compute body may use: its axes (lambda names, size names), the tensors it may read."""

    def __init__(self, axes, sources, p_shift):
        self.axes = axes            # [(name, size)]
        self.sources = sources      # [tensor name]
        self.p_shift = p_shift


class Generator:
    """Builds one case; `progress(text)` (if given) receives the case's text before each statement
    that could hang, so that a timed-out worker still leaves its reproduction behind."""

    def __init__(self, seed: int, progress: Callable[[str], None] | None = None):
        self.seed = seed
        self.rng = random.Random(seed)
        # bit operations (^, <<, >>) replace some of the main stream's choices from a stream of their own, so
        # every other choice of a seed's case is as before they were added
        self.bits = random.Random(seed_mix(seed) ^ 0xB175)
        self.math = random.Random(seed_mix(seed) ^ 0x3A7)  # issue 26's math functions, likewise
        self.case = Case(seed)
        self.ns: dict = {"tc": tc, "attempt": _attempt}
        self.progress = progress
        self.tensors: dict[str, dict] = {}   # name -> dims, dtype, kind, reduce
        self.axis_var: dict[int, str] = {}
        self.n_red = 0
        self.dead = False

    # -- running statements ---------------------------------------------------------------------
    def run(self, code: str) -> None:
        exec(compile(code, f"<fuzz case {self.seed}>", "exec"), self.ns)

    def compute_line(self, code: str) -> None:
        self.case.compute.append(code)
        self.run(code)

    def sched_line(self, code: str, assign: Callable | None = None):
        """Run one schedule statement. `code` is an expression; `assign(result)` gives the text of
        the variables to assign its result to (None: nothing to assign). Returns the result or None."""
        if self.dead:
            return None
        if self.progress:
            self.progress(self.case.script("cut short at the last statement (it hung or crashed)", pending=code))
        try:
            self.ns["_r"] = None
            self.run(f"_r = {code}")
        except tc.TilecError:
            self.case.sched.append(Line(code, "refused"))
            return None
        except Exception:
            self.case.sched.append(Line(code, "internal"))
            self.case.error = traceback.format_exc()
            self.case.error_line = code
            self.dead = True
            return None
        result = self.ns.pop("_r")
        target = assign(result) if assign else None
        if target:
            self.case.sched.append(Line(f"{target} = {code}"))
            self.ns["_last"] = result
            self.run(f"{target} = _last")
        else:
            self.case.sched.append(Line(code))
        return result

    # -- sizes ----------------------------------------------------------------------------------
    def pick_size(self) -> int:
        r = self.rng.random()
        if r < 0.1:
            return 1
        if r < 0.45:
            return self.rng.randint(2, 8)
        if r < 0.95:
            return self.rng.randint(9, 40)
        return self.rng.randint(41, 70)

    def make_sizes(self, n: int) -> list[str]:
        names = list(SIZE_NAMES[:n])
        mode = self.rng.random()
        for name in names:
            self.case.sizes[name] = self.pick_size()
            self.case.symbolic[name] = mode < 0.45 or (mode < 0.75 and self.rng.random() < 0.5)
        for name in names:
            if self.case.symbolic[name] and self.rng.random() < 0.12:
                d = self.rng.choice([2, 4, 8, 16])
                self.case.facts[name] = d
                self.case.sizes[name] = d * self.rng.randint(1, max(1, 40 // d))
        return names

    def fit_sizes(self) -> None:
        """Shrink sizes until every tensor and index grid is small (the interpreter is slow)."""
        for _ in range(64):
            worst = 1
            for t in self.tensors.values():
                n = math.prod(self.case.sizes[d] for d in t["dims"])
                grid = n * math.prod(self.case.sizes[d] for d in t.get("red", ()))
                worst = max(worst, n / MAX_TENSOR, grid / MAX_GRID)
            if worst <= 1:
                return
            name = max(self.case.sizes, key=self.case.sizes.get)
            d = self.case.facts.get(name, 1)
            v = max(d, (self.case.sizes[name] * 2 // 3) // d * d)
            if v == self.case.sizes[name]:
                v = max(1, v - d) if v > d else v
                if v == self.case.sizes[name]:
                    return
            self.case.sizes[name] = v

    # -- tensors --------------------------------------------------------------------------------
    def placeholder(self, name: str, dims: list[str], dtype: str) -> str:
        self.tensors[name] = dict(dims=list(dims), dtype=dtype, kind="input")
        shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        self.compute_line(f"{name} = tc.placeholder({shape}, {dtype!r}, name={name!r})")
        spec: dict = {}
        r = self.rng.random()
        if r < 0.15:
            spec["layout"] = "t"
        elif r < 0.25:
            spec["layout"] = "s"
        elif r < 0.29:
            spec["layout"] = "0"
        cat = _cat(dtype)
        if cat == "f":
            if self.rng.random() < 0.2:
                spec["special"] = self.rng.choice([0.02, 0.05, 0.2])
                spec["kinds"] = self.rng.choice([["nan"], ["inf", "-inf"], ["nan", "inf", "-inf"], [0.0, "inf"]])
            if self.rng.random() < 0.15:
                spec["scale"] = self.rng.choice([0.01, 10.0, 300.0])
            if self.rng.random() < 0.15:  # all of one sign: identities of max/min and masked lanes show
                spec["shift"] = self.rng.choice([-4.0, 4.0])
            if self.rng.random() < 0.35:
                spec["grid"] = self.rng.choice([1, 4, 16])
        elif cat == "i":
            spec["range"] = self.rng.choice([(-5, 6), (0, 4), (-40, 40)])
        self.case.inputs[name] = spec
        return name

    def red_axis(self, size: str) -> str:
        name = "k" if self.n_red == 0 else f"k{self.n_red}"
        self.n_red += 1
        self.compute_line(f"{name} = tc.reduce_axis({size}, name={name!r})")
        return name

    def compute(self, name, dims, body_fn, dtype=None, red=None, red_op="sum", acc=None) -> str:
        """Define compute `name` over `dims`; `body_fn(ctx_axes)` returns the body E; `red` a list of
        reduce sizes."""
        params = ["i", "j", "h"][:len(dims)]
        axes = list(zip(params, dims))
        raxes = []
        for size in red or []:
            raxes.append((self.red_axis(size), size))
        body = body_fn(axes + raxes)
        code = body.code
        if red:
            ax = raxes[0][0] if len(raxes) == 1 else "[" + ", ".join(a for a, _ in raxes) + "]"
            acc_txt = f", acc_dtype={acc!r}" if acc else ""
            code = f"tc.{red_op}({code}, axis={ax}{acc_txt})"
        shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        dt = f", dtype={dtype!r}" if dtype else ""
        self.compute_line(f"{name} = tc.compute({shape}, lambda {', '.join(params)}: {code}, name={name!r}{dt})")
        t = self.ns[name]
        self.tensors[name] = dict(dims=list(dims), dtype=t.dtype, kind="compute", red=[s for _, s in raxes],
                                  reduce=bool(red))
        return name

    # -- reading and expressions ----------------------------------------------------------------
    def index(self, size: str, axes, p_shift: float) -> str:
        rng = self.rng
        cands = [a for a, s in axes if s == size]
        r = rng.random()
        if cands and r < 0.9:
            a = rng.choice(cands)
            if rng.random() < p_shift:
                return rng.choice([f"{a} - 1", f"{a} + 1", f"{a} - 2", f"{size} - 1 - {a}", f"{a} // 2",
                                   f"2 * {a}", f"{a} + 3"])
            return a
        if axes and r < 0.95:
            a, _ = rng.choice(axes)
            return rng.choice([f"{a} + 1", f"{a} - 1", f"{a} // 2"])
        return rng.choice(["0", f"{size} - 1", "1"])

    def read(self, name: str, axes, p_shift: float) -> E:
        t = self.tensors[name]
        idx = ", ".join(self.index(d, axes, p_shift) for d in t["dims"])
        return E(f"{name}[{idx}]", _cat(t["dtype"]))

    def const(self, cat: str) -> E:
        if cat == "f":
            return E(repr(self.rng.choice([0.5, 2.0, -1.5, 3.0, 0.0, 1e-3, 100.0, -0.25])), "f", True)
        if cat == "i":
            return E(repr(self.rng.choice([1, 2, -3, 0, 7, 5])), "i", True)
        return E(repr(self.rng.choice([True, False])), "b", True)

    def to_cat(self, e: E, cat: str) -> E:
        """Convert `e` to category `cat` the ways a user would write it."""
        rng = self.rng
        if e.cat == cat:
            return e
        if e.weak:  # a Python number: take a number of the other kind
            return self.const(cat)
        c = e.code
        if cat == "f":
            if e.cat == "i":
                return E(rng.choice([f"{c}.astype('float32')", f"({c} * 0.5)", f"({c} / 2)", f"({c} + 0.25)"]), "f")
            return E(rng.choice([f"tc.where({c}, 1.5, -0.5)", f"{c}.astype('float32')", f"({c} * 2.0)"]), "f")
        if cat == "i":
            if e.cat == "f":
                return E(rng.choice([f"{c}.astype('int32')", f"({c} > 0.0).astype('int32')",
                                     f"tc.where({c} > 0.5, 1, -2)"]), "i")
            return E(rng.choice([f"{c}.astype('int32')", f"({c} + 1)", f"tc.where({c}, 3, -1)", f"({c} * 2)"]), "i")
        if e.cat == "f":
            return E(rng.choice([f"({c} > 0.0)", f"({c} <= 0.5)", f"{c}.ne({c})", f"({c} >= -1.0)",
                                 f"{c}.eq(0.0)"]), "b")
        return E(rng.choice([f"({c} > 0)", f"({c} % 2).eq(0)", f"{c}.ne(1)", f"({c} <= 2)"]), "b")

    def leaf(self, ctx: _Ctx, cat: str) -> E:
        rng = self.rng
        r = rng.random()
        if ctx.sources and r < 0.7:
            same = [s for s in ctx.sources if _cat(self.tensors[s]["dtype"]) == cat]
            src = rng.choice(same) if same and rng.random() < 0.8 else rng.choice(ctx.sources)
            return self.to_cat(self.read(src, ctx.axes, ctx.p_shift), cat)
        if r < 0.85 or not ctx.axes:
            return self.const(cat)
        a, size = rng.choice(ctx.axes)
        code = rng.choice([a, size, f"({a} + 1)", f"({size} - {a})"])
        v = E(code, "i", code == size and not self.case.symbolic.get(size))  # a constant size is an int
        return self.to_cat(v, cat)

    def unary(self, e: E) -> E:
        rng, c = self.rng, e.code
        if e.weak:  # a Python number has no methods; leave it be
            return e
        if e.cat == "f":
            code = rng.choice([
                f"(-{c})", f"tc.exp({c})", f"tc.exp(-tc.abs({c}))", f"tc.log(tc.abs({c}) + 1.0)", f"tc.log({c})",
                f"tc.sqrt(tc.abs({c}))", f"tc.sqrt({c})", f"tc.rsqrt(tc.abs({c}) + 0.5)", f"tc.sigmoid({c})",
                f"tc.silu({c})", f"tc.tanh({c})", f"tc.abs({c})", f"{c}.astype('float16')",
                f"{c}.astype('bfloat16')", f"({c} * 2.0)", f"({c} + 1.0)", f"({c} // 0.75)", f"({c} % 2.0)",
                f"{c}.astype('float32')", f"({c} / 3.0)"])
            if self.math.random() < 0.3:  # issue 26's math, from its own stream (the main one is as before)
                code = self.math.choice([
                    f"tc.erf({c})", f"tc.sin({c})", f"tc.cos({c})", f"tc.exp2(-tc.abs({c}))",
                    f"tc.log2(tc.abs({c}) + 1.0)", f"tc.log1p(tc.abs({c}))", f"tc.expm1(-tc.abs({c}))",
                    f"tc.floor({c})", f"tc.ceil({c})", f"tc.trunc({c})", f"tc.round({c})", f"tc.sign({c})",
                    f"({c} ** 2)", f"({c} ** 3)", f"(tc.abs({c}) ** 0.5)", f"(tc.abs({c}) ** 1.5)",
                    f"tc.clamp({c}, -1.0, 2.0)"])
            return E(code, "f")
        if e.cat == "i":
            code = rng.choice([f"(-{c})", f"tc.abs({c})", f"({c} // 2)", f"({c} % 3)", f"({c} // -2)",
                               f"({c} % -3)", f"({c} * 3)", f"({c} + 1)", f"({c} - 4)"])
            if self.bits.random() < 0.5:
                code = self.bits.choice([f"({c} << 3)", f"({c} >> 1)", f"({c} ^ 5)", f"(~{c})", f"({c} << 40)",
                                         f"({c} >> 33)", f"(-7 >> {c})", f"(1 << {c})", f"({c} & 6)"])
            return E(code, "i")
        return E(f"(~{c})", "b")

    def binary(self, ctx: _Ctx, a: E, b: E, cat: str) -> E:
        rng = self.rng
        orig_a, orig_b = a, b
        a, b = self.to_cat(a, cat), self.to_cat(b, cat)
        weak = a.weak and b.weak
        if cat == "b":
            r = rng.random()
            if r < 0.5:
                if a.weak:
                    a, b = b, a
                op = rng.choice(['&', '|'])
                return E(f"({a.code} {self.bits.choice(['^', op]) if self.bits.random() < 0.3 else op} {b.code})",
                         "b", weak)
            if r < 0.75:  # compare the values a and b came from
                c2 = rng.choice(["f", "i"])
                x, y = self.to_cat(orig_a, c2), self.to_cat(orig_b, c2)
                op = rng.choice(["<", "<=", ">", ">="])
                if x.weak and y.weak:
                    return E(f"({x.code} {op} {y.code})", "b", True)
                if x.weak:
                    x, y = y, x
                return E(f"({x.code} {op} {y.code})", "b")
            return E(f"tc.where({self.leaf(ctx, 'b').code}, {a.code}, {b.code})", "b")
        r = rng.random()
        if r < 0.55:
            op = rng.choice(["+", "-", "*"] if cat == "i" else ["+", "-", "*", "+", "*"])
            if cat == "i" and not (a.weak and b.weak) and self.bits.random() < 0.5:
                op = self.bits.choice(["^", "<<", ">>", "&", "|"])
            return E(f"({a.code} {op} {b.code})", cat, weak)
        if r < 0.65 and cat == "f":
            den = rng.choice([f"(tc.abs({b.code}) + 1.0)", b.code, "3.0", f"(tc.abs({b.code}) + 0.5)"])
            if den == b.code and a.weak and b.weak and float(eval(b.code)) == 0.0:
                den = "3.0"  # two Python numbers divide in Python: 0.001 / 0.0 raised ZeroDivisionError (seed 24706044)
            py_den = den == "3.0" or (den == b.code and b.weak)  # a Python number: tc.abs(...) is not
            return E(f"({a.code} / {den})", "f", a.weak and py_den)
        if r < 0.8:
            return E(f"tc.{rng.choice(['maximum', 'minimum'])}({a.code}, {b.code})", cat, weak)
        cond = self.to_cat(self.leaf(ctx, rng.choice(["b", "f", "i"])), "b")
        return E(f"tc.where({cond.code}, {a.code}, {b.code})", cat, weak)

    def expr(self, ctx: _Ctx, cat: str, required: list[E], extra: int) -> E:
        """A random expression of category `cat` that uses every `required` value once at least."""
        rng = self.rng
        parts = list(required) + [self.leaf(ctx, cat) for _ in range(extra)]
        if not parts:
            parts = [self.leaf(ctx, cat)]
        rng.shuffle(parts)
        parts = [self.unary(p) if rng.random() < 0.3 else p for p in parts]
        while len(parts) > 1:
            n = rng.randrange(len(parts) - 1)
            a, b = parts[n], parts[n + 1]
            c = self.binary(ctx, a, b, cat if rng.random() < 0.85 else rng.choice(["f", "i", "b"]))
            if rng.random() < 0.2:
                c = self.unary(c)
            parts[n:n + 2] = [c]
        return self.to_cat(parts[0], cat)

    def dtype_for(self, cat: str) -> str | None:
        rng = self.rng
        r = rng.random()
        if cat == "f":
            return None if r < 0.35 else rng.choice(FLOAT_DTYPES + ("int32",) if r > 0.97 else FLOAT_DTYPES)
        if cat == "i":
            return None if r < 0.5 else rng.choice(["int32", "float32", "float16", "bool"])
        return None if r < 0.5 else rng.choice(["bool", "int32", "float32"])

    def in_dtype(self, cats="fib") -> str:
        r = self.rng.random()
        if "f" in cats and (r < 0.7 or cats == "f"):
            return self.rng.choice(["float32", "float32", "float16", "bfloat16"])
        if "i" in cats and (r < 0.85 or "b" not in cats):
            return "int32" if self.rng.random() < 0.9 else "int64"
        return "bool"

    # -- families -------------------------------------------------------------------------------
    def fam_elementwise(self) -> list[str]:
        rng = self.rng
        rank = rng.choice([1, 2, 2, 2, 3])
        names = self.make_sizes(rank)
        dims = names[:]
        p_shift = 0.0 if rng.random() < 0.4 else rng.choice([0.1, 0.25, 0.5])
        X = self.placeholder("X", dims, self.in_dtype())
        srcs = [X]
        if rank >= 2 and rng.random() < 0.6:
            srcs.append(self.placeholder("b", [rng.choice(dims)], self.in_dtype()))
        if rank >= 2 and rng.random() < 0.25:
            srcs.append(self.placeholder("U", dims[::-1], self.in_dtype()))
        prev = None
        outs = []
        n_stages = rng.choice([1, 2, 2, 3])
        for n in range(n_stages):
            name = ["P", "Q", "Y"][n if n < n_stages - 1 else 2] if n_stages > 1 else "Y"
            if n == n_stages - 1:
                name = "Y"
            cat = rng.choice(["f", "f", "f", "i", "b"])
            sdims = dims if rng.random() < 0.85 else dims[::-1]
            used = ([prev] if prev else []) + rng.sample(srcs, k=rng.randint(0 if prev else 1, min(2, len(srcs))))

            def body(axes, used=used, cat=cat):
                ctx = _Ctx(axes, list(dict.fromkeys(used)), p_shift)
                req = [self.read(u, axes, p_shift) for u in dict.fromkeys(used)]
                return self.expr(ctx, cat, req, rng.randint(0, 2))
            self.compute(name, sdims, body, dtype=self.dtype_for(cat))
            if prev and rng.random() < 0.15:
                outs.append(prev)  # a second output: an intermediate stage too
            prev = name
        return outs + [prev]

    def fam_reduce(self) -> list[str]:
        rng = self.rng
        two = rng.random() < 0.25
        names = self.make_sizes(3 if two else 2)
        M, N = names[0], names[1]
        p_shift = 0.0 if rng.random() < 0.6 else 0.2
        X = self.placeholder("X", names if two else [M, N], self.in_dtype("fff" if rng.random() < 0.8 else "fib"))
        srcs = [X]
        if rng.random() < 0.3:
            srcs.append(self.placeholder("w", [N], self.in_dtype("f")))
        prod = None
        if rng.random() < 0.3:  # an elementwise producer feeding the reduction
            def pbody(axes):
                ctx = _Ctx(axes, [X], p_shift)
                return self.expr(ctx, "f", [self.read(X, axes, 0.0)], rng.randint(0, 1))
            prod = self.compute("P", names if two else [M, N], pbody, dtype=rng.choice([None, "float16", "float32"]))
        op = rng.choice(["sum", "sum", "max", "min"])
        src = prod or X
        cat = "f" if _cat(self.tensors[src]["dtype"]) == "f" or rng.random() < 0.5 else rng.choice(["i", "b"])
        red = names[1:] if two else [N]
        if rng.random() < 0.15 and not two:
            red_dims, out_dims = [M], [N]   # reduce over the first dimension (a column reduction)
            red = red_dims
        else:
            out_dims = [M]

        def rbody(axes):
            ctx = _Ctx(axes, srcs if src is X else [src] + srcs[1:], p_shift)
            r = rng.random()
            if r < 0.05:  # a body that is a bare comparison, or one that need not read the reduced tensor
                x = self.to_cat(self.read(src, axes, p_shift), rng.choice(["f", "i"]))
                return E(f"({x.code} {rng.choice(['>', '<=', '>='])} {self.const(x.cat).code})", "b")
            if r < 0.08:
                return self.expr(_Ctx(axes, [], p_shift), cat, [], rng.randint(0, 1))
            return self.expr(ctx, cat, [self.read(src, axes, p_shift)], rng.randint(0, 1))
        acc = rng.choice([None, None, None, "float32", "float16"]) if cat == "f" else None
        R = self.compute("R", out_dims, rbody, dtype=self.dtype_for(cat) if cat != "b" else None, red=red,
                         red_op=op, acc=acc)
        outs = [R]
        if rng.random() < 0.7:
            full = names if two else [M, N]
            c_dims = full[:2] if not two else [M, N]

            def ybody(axes):
                ctx = _Ctx(axes, [X, R] + srcs[1:], p_shift)
                return self.expr(ctx, "f", [self.read(R, axes, p_shift)], rng.randint(1, 2))
            Y = self.compute("Y", c_dims, ybody, dtype=self.dtype_for("f"))
            outs = [Y]
            if rng.random() < 0.3:
                outs = [R, Y]
            if rng.random() < 0.3:  # a second consumer of R
                def zbody(axes):
                    ctx = _Ctx(axes, [R, Y], p_shift)
                    return self.expr(ctx, "f", [self.read(R, axes, 0.0), self.read(Y, axes, 0.0)], 0)
                outs.append(self.compute("Z", c_dims, zbody))
                outs.remove(Y) if rng.random() < 0.5 else None
        return outs

    def fam_scan(self) -> list[str]:
        """A scan (tc.cumsum / cumprod / cummax / cummin / linear_scan) along one axis of a 1-3-d compute, of an
        expression of inputs, and a reader of it (elementwise, at shifted positions or the row's last one)."""
        rng = self.rng
        rank = rng.choice([1, 2, 2, 3])
        names = self.make_sizes(rank)
        p_shift = 0.0 if rng.random() < 0.6 else 0.2
        op = rng.choice(["cumsum", "cumsum", "cummax", "cummin", "cumprod", "linear_scan"])
        cat = "f" if op in ("cumprod", "linear_scan") or rng.random() < 0.75 else "i"
        X = self.placeholder("X", names, self.in_dtype("fff" if cat == "f" else "i"))
        srcs = [X]
        if op == "linear_scan":
            srcs.append(self.placeholder("A", names, self.in_dtype("f")))
        params = ["i", "j", "h"][:rank]
        axes = list(zip(params, names))
        ax = params[rng.randrange(rank)]
        ctx = _Ctx(axes, [X], p_shift)
        body = self.expr(ctx, cat, [self.read(X, axes, p_shift)], rng.randint(0, 1))
        if op == "cumprod":  # near 1, so that products of a few hundred stay finite
            code = f"(1.0 + 0.05 * tc.tanh({self.to_cat(body, 'f').code}))"
        elif op == "linear_scan":
            code = f"tc.sigmoid({self.read(srcs[1], axes, 0.0).code}), {self.to_cat(body, 'f').code}"
        else:
            code = body.code
        acc = rng.choice([None, None, "float32"]) if cat == "f" else None
        acc_txt = f", acc_dtype={acc!r}" if acc else ""
        dtype = self.dtype_for(cat) if cat == "f" else None
        shape = "(" + ", ".join(names) + ("," if rank == 1 else "") + ")"
        dt = f", dtype={dtype!r}" if dtype else ""
        self.compute_line(f"S = tc.compute({shape}, lambda {', '.join(params)}: tc.{op}({code}, axis={ax}{acc_txt}), "
                          f"name='S'{dt})")
        t = self.ns["S"]
        self.tensors["S"] = dict(dims=list(names), dtype=t.dtype, kind="compute", red=[], reduce=False)
        if rng.random() < 0.4:
            return ["S"]

        def ybody(axes):
            ctx = _Ctx(axes, ["S", X], p_shift)
            return self.expr(ctx, "f", [self.read("S", axes, p_shift)], rng.randint(0, 1))
        Y = self.compute("Y", names, ybody, dtype=self.dtype_for("f"))
        return [Y] if rng.random() < 0.7 else ["S", Y]

    def fam_scatter(self) -> list[str]:
        """A scatter (tc.scatter) over a 1-2-d domain: a histogram (int adds at data positions X[...] + c, some
        outside the output), float adds at data positions (deterministic=False), or stores at affine injective
        positions (a reversal, a transpose, 2 * i + c) of a value expression, starting at a number or as a copy of
        an input; then, for stores, maybe an elementwise reader of it."""
        rng = self.rng
        rank = rng.choice([1, 2, 2])
        names = self.make_sizes(rank)
        params = ["i", "j"][:rank]
        axes = list(zip(params, names))
        p_shift = 0.0 if rng.random() < 0.6 else 0.2
        kind = rng.choice(["hist", "hist", "fadd", "store", "store"])
        dom = "(" + ", ".join(names) + ("," if rank == 1 else "") + ")"
        lam = f"lambda {', '.join(params)}: "
        if kind in ("hist", "fadd"):
            X = self.placeholder("X", names, "int32" if rng.random() < 0.8 else "int64")
            bins = rng.randint(1, 12)
            pos = [f"X[{', '.join(params)}]" + rng.choice(["", " + 3", " + 5", " - 1"])]
            shape = [str(bins)]
            if rank == 2 and rng.random() < 0.5:  # a histogram per column
                pos.append(params[1])
                shape.append(names[1])
            if kind == "hist":
                V = self.placeholder("V", names, "int32")
                ctx = _Ctx(axes, [V], p_shift)
                value = self.to_cat(self.expr(ctx, "i", [self.read(V, axes, p_shift)], rng.randint(0, 1)), "i").code \
                    if rng.random() < 0.6 else "1"
                extra = f", combine='add', dtype={rng.choice(['int32', 'int64'])!r}"
            else:
                V = self.placeholder("V", names, self.in_dtype("f"))
                ctx = _Ctx(axes, [V], p_shift)
                value = self.to_cat(self.expr(ctx, "f", [self.read(V, axes, p_shift)], rng.randint(0, 1)), "f").code
                extra = ", combine='add', deterministic=False, dtype='float32'"
            init = rng.choice(["", "", ", init=2", ", init=-1"])
            target = "(" + ", ".join(shape) + ("," if len(shape) == 1 else "") + ")"
            at = pos[0] if len(pos) == 1 else "(" + ", ".join(pos) + ")"
            self.compute_line(f"O = tc.scatter({target}, {dom}, {lam}{at}, {lam}{value}, name='O'{init}{extra})")
            self.tensors["O"] = dict(dims=list(names), dtype=self.ns["O"].dtype, kind="compute", red=[], reduce=False)
            return ["O"]
        X = self.placeholder("X", names, self.in_dtype("fi"))
        cat = _cat(self.tensors["X"]["dtype"])
        ctx = _Ctx(axes, [X], p_shift)
        value = self.expr(ctx, cat, [self.read(X, axes, p_shift)], rng.randint(0, 1)).code
        if rank == 2 and rng.random() < 0.6:
            out_dims, at = [names[1], names[0]], f"({params[1]}, {params[0]})"
        elif rng.random() < 0.5:
            out_dims, at = list(names), "(" + ", ".join(f"{n} - 1 - {a}" for a, n in axes) + ")"
        else:
            c = rng.randint(0, 2)
            out_dims = [f"2 * {names[0]} + {c}", *names[1:]]
            at = "(" + ", ".join([f"2 * {params[0]} + {c}", *params[1:]]) + ")"
        dtype = self.dtype_for(cat)
        dt = f", dtype={dtype!r}" if dtype else ""
        into = out_dims == list(names) and rng.random() < 0.4
        if into:  # starts as a copy of an input of the output's shape
            target = self.placeholder("B", names, self.in_dtype("fi"))
        else:
            target = "(" + ", ".join(out_dims) + ("," if rank == 1 else "") + ")"
            inits = ["", "", ", init=1", ", init=0"] if dtype == "bool" else ["", "", ", init=1", ", init=-2"]
            dt += rng.choice(inits)  # a bool output takes 0 or 1 (seed 31000104 drew -2: the fuzzer's error)
        self.compute_line(f"O = tc.scatter({target}, {dom}, {lam}{at}, {lam}{value}, name='O'{dt})")
        self.tensors["O"] = dict(dims=list(names), dtype=self.ns["O"].dtype, kind="compute", red=[], reduce=False)
        if out_dims != list(names) or rng.random() < 0.5:
            return ["O"]

        def ybody(axes):
            ctx = _Ctx(axes, ["O", X], p_shift)
            return self.expr(ctx, "f", [self.read("O", axes, p_shift)], rng.randint(0, 1))
        Y = self.compute("Y", names, ybody, dtype=self.dtype_for("f"))
        return [Y] if rng.random() < 0.7 else ["O", Y]

    def fam_gemm(self) -> list[str]:
        rng = self.rng
        batched = rng.random() < 0.15
        names = self.make_sizes(4 if batched else 3)
        M, N, K = names[:3]
        Bt = names[3] if batched else None
        dt = rng.choice(["float32", "float16", "bfloat16", "float32"])
        dt2 = dt if rng.random() < 0.85 else rng.choice(FLOAT_DTYPES)
        ta, tb = rng.random() < 0.3, rng.random() < 0.3
        pre = [Bt] if batched else []
        A = self.placeholder("A", pre + ([K, M] if ta else [M, K]), dt)
        W = self.placeholder("W", pre + ([N, K] if tb else [K, N]), dt2)
        left = A
        if rng.random() < 0.2:
            left = self.compute("P", pre + ([K, M] if ta else [M, K]),
                                lambda axes: self.expr(_Ctx(axes, [A], 0.0), "f", [self.read(A, axes, 0.0)], 0),
                                dtype=rng.choice([None, dt]))
        def cbody(axes):
            names_ = {s: a for a, s in axes}
            b = [names_[Bt]] if batched else []
            i, j, k = names_[M], names_[N], names_[K]
            a_idx = b + ([k, i] if ta else [i, k])
            w_idx = b + ([j, k] if tb else [k, j])
            lhs = f"{left}[{', '.join(a_idx)}]"
            rhs = f"{W}[{', '.join(w_idx)}]"
            if rng.random() < 0.2:
                lhs = f"{lhs}.astype('float32')"
            if rng.random() < 0.2:
                return E(f"{rhs} * {lhs}", "f")
            return E(f"{lhs} * {rhs}", "f")
        cdims = pre + [M, N]
        if K in cdims:
            raise AssertionError("size names collide")
        C = self.compute("C", cdims, cbody, dtype=rng.choice([None, "float32", "float16", "bfloat16"]),
                         red=[K], acc=rng.choice(["float32", "float32", None]))
        outs = [C]
        twin = None
        if rng.random() < 0.4:  # a second GEMM of the same left operand (SwiGLU's X @ Wg and X @ Wu)
            W2 = self.placeholder("W2", pre + ([N, K] if tb else [K, N]), rng.choice([dt2, dt2, "float32"]))

            def dbody(axes):
                names_ = {s: a for a, s in axes}
                b = [names_[Bt]] if batched else []
                i, j, k = names_[M], names_[N], names_[K]
                a_idx = b + ([k, i] if ta else [i, k])
                w_idx = b + ([j, k] if tb else [k, j])
                return E(f"{left}[{', '.join(a_idx)}] * {W2}[{', '.join(w_idx)}]", "f")
            twin = self.compute("D", cdims, dbody, dtype=rng.choice([None, "float32", dt]), red=[K],
                                acc=rng.choice(["float32", None]))
        if twin is not None or rng.random() < 0.6:
            srcs = [C] + ([twin] if twin is not None else [])
            if rng.random() < 0.5:
                srcs.append(self.placeholder("bias", [N], rng.choice(FLOAT_DTYPES)))

            def ybody(axes):
                ctx = _Ctx(axes, srcs, 0.0)
                return self.expr(ctx, "f", [self.read(s, axes, 0.0) for s in srcs], rng.randint(0, 1))
            Y = self.compute("Y", cdims, ybody, dtype=rng.choice([None, dt]))
            outs = [C, Y] if rng.random() < 0.25 else [Y]
        return outs

    def s_twins(self):
        """SwiGLU's schedule on fam_gemm's two GEMMs C and D: their consumer tiled, both placed at its tile,
        their loops over K split alike (mostly) and fused with compute_with, tiles cached (maybe by TMA)."""
        rng = self.rng
        s = self.ns["s"]
        stages = {st.name: st for st in self.compute_stages()}
        C, D = stages.get("C"), stages.get("D")
        root = stages.get("Y")
        if C is None or D is None or root is None or root.tensor not in s.outputs:
            return
        spatial = [a for a in root.leaves if a.kind == "spatial"]
        outs, ins = [], []
        for a in spatial[-2:]:  # the examples' output tile: the last two spatial axes split, outer parts bound
            r = self.do_split(root, a, str(rng.choice([1, 4, 16, 32, 64])) if rng.random() < 0.9 else
                              self.knob([16, 32, 64]))
            if r is None:
                return
            outs.append(r[0])
            ins.append(r[1])
        self.do_reorder(root, [a for a in root.leaves if a not in ins] + ins)
        at = outs[-1]
        if len(outs) == 2 and rng.random() < 0.4:
            at = (self.do_swizzle if rng.random() < 0.5 else self.do_fuse)(root, outs[0], outs[1])
            if at is None:
                return
            self.do_bind(root, at, 0)
            if rng.random() < 0.3:
                self.do_persistent(root, at)
        else:
            for d, a in enumerate(outs):
                self.do_bind(root, a, d)
        if self.dead:
            return
        f = str(rng.choice([4, 8, 16, 32])) if rng.random() < 0.8 else self.knob([8, 16, 32])
        loops = {}
        order = [C, D] if rng.random() < 0.7 else [D, C]
        stages_ = rng.choice([None, "2", "3", self.knob([1, 2, 3])])
        for st in order:
            ff = f if rng.random() < 0.85 else str(rng.choice([4, 8, 16, 32]))
            red = [a for a in st.leaves if a.kind == "reduce"]
            r = self.do_split(st, red[-1], ff) if red else None
            if r is None:
                continue
            loops[st.name] = r[0]
            if stages_ is not None and rng.random() < 0.9:
                self.sched_line(f"{self.stage_var(st)}.pipeline({self.av(r[0])}, stages={stages_})")
            self.do_compute_at(st, root, at)
            if rng.random() < 0.5:
                for t in st.tensor.inputs:
                    tma = rng.choice(["", ", tma=True"])
                    c = self.sched_line(f"s.cache_read({t.name}, 'shared', readers=[{self.stage_var(st)}]{tma})",
                                        lambda res: res.name)
                    if c is not None:
                        self.sched_line(f"{c.name}.compute_at({self.stage_var(st)}, {self.av(r[0])})")
            if self.dead:
                return
        first, second = order
        if first.name in loops and rng.random() < 0.9:
            self.sched_line(f"{self.stage_var(second)}.compute_with({self.stage_var(first)}, "
                            f"{self.av(loops[first.name])})")

    def m_compute_with(self, pairs=None):
        """compute_with between two reductions: placed at the same loop (as SwiGLU's) when there are such
        pairs, else any two stages (most are refused: related, or not at one loop)."""
        rng = self.rng
        s = self.ns["s"]
        stages = self.compute_stages()
        if pairs is None:
            pairs = [(a, b) for a in stages for b in stages if a is not b and a.tensor.is_reduction
                     and b.tensor.is_reduction and not s.related(a, b) and a.attach == b.attach
                     and isinstance(a.attach, tuple)]
        if pairs and rng.random() < 0.9:
            a, b = rng.choice(pairs)
        elif len(stages) >= 2:
            a, b = rng.sample(stages, 2)
        else:
            return
        inner = self.inner_axes(a)
        loops = [x for x in a.leaves if x.kind == "reduce" and x not in inner and x not in a.binds]
        ax = loops[0] if loops and rng.random() < 0.85 else self.pick_leaf(a)
        if ax is not None:
            self.sched_line(f"{self.stage_var(b)}.compute_with({self.stage_var(a)}, {self.av(ax)})")

    def fam_norm(self) -> list[str]:
        rng = self.rng
        M, N = self.make_sizes(2)
        dt = rng.choice(["float32", "float16", "bfloat16"])
        self.placeholder("X", [M, N], dt)
        kind = rng.choice(["softmax", "rmsnorm", "layernorm", "logsumexp"])
        mid = rng.choice([None, "float32", dt])
        if kind == "softmax":
            k = self.red_axis(N)
            self.compute_line(f"mx = tc.compute(({M},), lambda r: tc.max(X[r, {k}], axis={k}), name='mx')")
            k2 = self.red_axis(N)
            self.compute_line(f"den = tc.compute(({M},), lambda r: tc.sum(tc.exp(X[r, {k2}] - mx[r]), axis={k2}), "
                              f"name='den'{', dtype=' + repr(mid) if mid else ''})")
            self.compute_line(f"Y = tc.compute(({M}, {N}), lambda r, c: tc.exp(X[r, c] - mx[r]) / den[r], name='Y', "
                              f"dtype={dt!r})")
            reg = [("mx", [M], [N]), ("den", [M], [N]), ("Y", [M, N], [])]
        elif kind == "logsumexp":
            k = self.red_axis(N)
            self.compute_line(f"mx = tc.compute(({M},), lambda r: tc.max(X[r, {k}], axis={k}), name='mx')")
            k2 = self.red_axis(N)
            self.compute_line(f"den = tc.compute(({M},), lambda r: tc.sum(tc.exp(X[r, {k2}] - mx[r]), axis={k2}), "
                              f"name='den')")
            self.compute_line(f"Y = tc.compute(({M},), lambda r: tc.log(den[r]) + mx[r], name='Y')")
            reg = [("mx", [M], [N]), ("den", [M], [N]), ("Y", [M], [])]
        elif kind == "rmsnorm":
            self.placeholder("w", [N], rng.choice([dt, "float32"]))
            k = self.red_axis(N)
            self.compute_line(f"ss = tc.compute(({M},), lambda r: tc.sum(X[r, {k}].astype('float32') * X[r, {k}], "
                              f"axis={k}), name='ss'{', dtype=' + repr(mid) if mid else ''})")
            self.compute_line(f"Y = tc.compute(({M}, {N}), lambda r, c: X[r, c] * tc.rsqrt(ss[r] / {N} + 1e-6) * w[c], "
                              f"name='Y', dtype={dt!r})")
            reg = [("ss", [M], [N]), ("Y", [M, N], [])]
        else:
            k = self.red_axis(N)
            self.compute_line(f"mean = tc.compute(({M},), lambda r: tc.sum(X[r, {k}], axis={k}) , name='mean')")
            self.compute_line(f"mu = tc.compute(({M},), lambda r: mean[r] / {N}, name='mu')")
            k2 = self.red_axis(N)
            self.compute_line(f"var = tc.compute(({M},), lambda r: tc.sum((X[r, {k2}] - mu[r]) * (X[r, {k2}] - mu[r]), "
                              f"axis={k2}), name='var')")
            self.compute_line(f"Y = tc.compute(({M}, {N}), lambda r, c: (X[r, c] - mu[r]) * tc.rsqrt(var[r] / {N} "
                              f"+ 1e-5), name='Y', dtype={dt!r})")
            reg = [("mean", [M], [N]), ("mu", [M], []), ("var", [M], [N]), ("Y", [M, N], [])]
        for name, dims, red in reg:
            t = self.ns[name]
            self.tensors[name] = dict(dims=dims, dtype=t.dtype, kind="compute", red=red, reduce=bool(red))
        outs = ["Y"]
        if rng.random() < 0.2:
            outs = [reg[0][0], "Y"]
        return outs

    def fam_random(self) -> list[str]:
        """A random DAG: 2-4 stages, each elementwise or a reduction, over earlier tensors."""
        rng = self.rng
        names = self.make_sizes(rng.choice([2, 3]))
        p_shift = 0.0 if rng.random() < 0.5 else 0.2
        pool = []
        for n in range(rng.randint(1, 3)):
            r = rng.randint(1, min(2, len(names)))
            pool.append(self.placeholder(["X", "U", "V"][n], rng.sample(names, r), self.in_dtype()))
        made = []
        for n in range(rng.randint(2, 4)):
            name = ["C", "D", "E", "F"][n]
            base = rng.choice(pool + made)
            dims = list(self.tensors[base]["dims"])
            reduce = rng.random() < 0.35 and len(dims) >= 1
            red = []
            if reduce:
                red = [dims.pop(rng.randrange(len(dims)))]
                if not dims:
                    bound = [s for p in pool for s in self.tensors[p]["dims"]]
                    dims = [rng.choice([s for s in bound if s not in red] or bound)]
            elif rng.random() < 0.3 and len(dims) < 3:
                bound = [s for p in pool for s in self.tensors[p]["dims"]]  # sizes the inputs give
                dims.append(rng.choice([s for s in bound if s not in dims] or bound))
            srcs = list(dict.fromkeys([base] + rng.sample(pool + made, k=min(len(pool + made), rng.randint(0, 1)))))
            cat = rng.choice(["f", "f", "i", "b"])

            def body(axes, srcs=srcs, cat=cat):
                ctx = _Ctx(axes, srcs, p_shift)
                return self.expr(ctx, cat, [self.read(s, axes, p_shift) for s in srcs], rng.randint(0, 1))
            self.compute(name, dims, body, dtype=self.dtype_for(cat), red=red or None,
                         red_op=rng.choice(["sum", "max", "min"]))
            made.append(name)
        readers = {s for n in made for s in self.ns[n].inputs if s.name in made}
        sinks = [n for n in made if self.ns[n] not in readers]
        if rng.random() < 0.2:
            extra = [n for n in made if n not in sinks]
            if extra:
                sinks = [rng.choice(extra)] + sinks
        return sinks

    def fam_online(self) -> list[str]:
        """Softmax / attention shapes for `online`: a row max `m` of an operand A (X, a scaled X, a score
        S = Q·Kt, maybe `tc.where(cond, ., -inf)` with a causal-style cond, maybe an elementwise stage Sc),
        `l = sum_j exp(A - m)` (maybe through an elementwise stage E, maybe rounded inside the summand or
        weighted), and one consumer: a softmax Y = exp(A - m) / l, a logsumexp Z = log(l) + m, or a
        weighted sum O = sum_j exp(A - m) / l * V (P·V, maybe through a stage P; V of rank 1 or 2, or X
        itself as the coefficient). About one case in seven has a body that breaks the online algebra
        (so the refusals are exercised); some store a statistic as an output. Records in `self.online`
        what the schedule and the inputs need: the right target and statistics, whether A is masked,
        which inputs are coefficients."""
        rng = self.rng
        kind = rng.choice(["softmax", "lse", "pv", "pv", "pv", "wsum"])
        attn = rng.random() < 0.25                      # A from a GEMM over a head dimension
        square = rng.random() < 0.4                     # queries and keys over one size (causal attention)
        two_d = kind == "pv" and rng.random() < 0.75    # V[key, e] rather than V[key]
        names = self.make_sizes((1 if square else 2) + two_d + attn)
        rows = names[0]
        keys = rows if square else names[1]
        rest = names[1 if square else 2:]
        vdim = rest.pop(0) if two_d else None
        hdim = rest.pop(0) if attn else None
        broken = rng.random() < 0.15                    # one body (chosen below) breaks the algebra
        where_broken = rng.choice(["m", "l", "target"]) if broken else None
        coef: list[str] = []                            # inputs read as coefficients (not in A)
        # the max's operand A(i, j)
        if attn:
            dt = rng.choice(["float32", "float16", "bfloat16"])
            self.placeholder("Q", [rows, hdim], dt)
            self.placeholder("Kt", [keys, hdim], dt)  # "K" is a size name
            d = self.red_axis(hdim)
            self.compute_line(f"S = tc.compute(({rows}, {keys}), lambda i, j: tc.sum(Q[i, {d}] * Kt[j, {d}], "
                              f"axis={d}, acc_dtype='float32'), name='S', dtype='float32')")
            self.tensors["S"] = dict(dims=[rows, keys], dtype="float32", kind="compute", red=[hdim], reduce=True)
            src, cast = "S", None
        else:
            dt = rng.choice(["float32", "float32", "float32", "float16", "bfloat16"])
            self.placeholder("X", [rows, keys], dt)
            src = "X"
            cast = "float32" if dt != "float32" and rng.random() < 0.5 else None
        scale = rng.choice([None, None, "0.5", "0.125", "3.0"])
        cond = None
        if rng.random() < 0.5:
            cond = rng.choice(["{j} <= {i}", "{j} <= {i}", "{j} <= {i}", "{j} < {i}", "{j} <= {i} + 2",
                               "{j} + 2 <= {i}", "{j} >= {i}", "{i} + {j} < " + keys, "{j} <= 2 * {i}",
                               "({j} // 2) <= {i}"])
        swapped = cond is not None and rng.random() < 0.1  # tc.where(not cond, -inf, x): no mask it can skip

        def operand(i: str, j: str) -> str:
            x = f"{src}[{i}, {j}]"
            if cast:
                x = f"{x}.astype({cast!r})"
            if scale:
                x = f"{x} * {scale}"
            if cond is None:
                return x
            c = cond.format(i=i, j=j)
            if swapped:
                return f"tc.where(~({c}), float('-inf'), {x})"
            return f"tc.where({c}, {x}, float('-inf'))"
        if rng.random() < 0.3:  # A as an elementwise stage of its own (inlined or not by the schedule)
            sdt = rng.choice([None, None, None, "float32", "bfloat16"])
            self.compute_line(f"Sc = tc.compute(({rows}, {keys}), lambda i, j: {operand('i', 'j')}, name='Sc'"
                              f"{', dtype=' + repr(sdt) if sdt else ''})")
            self.tensors["Sc"] = dict(dims=[rows, keys], dtype=self.ns["Sc"].dtype, kind="compute", red=[],
                                      reduce=False)

            def A(i: str, j: str) -> str:
                return f"Sc[{i}, {j}]"
        else:
            A = operand
        # m: the row max
        k = self.red_axis(keys)
        mbody, mdt = A("i", k), ""
        if where_broken == "m":  # an operand the exponents do not subtract m from, or a rounded statistic
            if rng.random() < 0.5:
                mbody = f"{mbody} * 2.0 + 1.0"
            else:
                mdt = ", dtype='bfloat16'"
        self.compute_line(f"m = tc.compute(({rows},), lambda i: tc.max({mbody}, axis={k}), name='m'{mdt})")
        self.tensors["m"] = dict(dims=[rows], dtype=self.ns["m"].dtype, kind="compute", red=[keys], reduce=True)
        e_stage = rng.random() < 0.3  # E = exp(A - m) as an elementwise stage (it reads a statistic)
        if e_stage:
            edt = rng.choice([None, None, "float32", "bfloat16", "float16"])
            self.compute_line(f"E = tc.compute(({rows}, {keys}), lambda i, j: tc.exp({A('i', 'j')} - m[i]), "
                              f"name='E'{', dtype=' + repr(edt) if edt else ''})")
            self.tensors["E"] = dict(dims=[rows, keys], dtype=self.ns["E"].dtype, kind="compute", red=[],
                                     reduce=False)

        def expo(i: str, j: str) -> str:  # exp(A - m) at (i, j), through E or written out
            return f"E[{i}, {j}]" if e_stage else f"tc.exp({A(i, j)} - m[{i}])"
        # l: the sum of exp(A - m), unless the target is an unnormalized sum
        has_l = kind in ("softmax", "lse") or rng.random() < 0.88
        if has_l:
            k1 = self.red_axis(keys)
            r = rng.random()
            if where_broken == "l":
                body = rng.choice([
                    f"{expo('i', k1)} + 1.0", f"tc.exp(2.0 * {A('i', k1)} - m[i])",
                    f"{expo('i', k1)} * {expo('i', k1)}", f"({A('i', k1)} - m[i])", f"{expo('i', k1)} / m[i]",
                    f"tc.exp({A('i', k1)} - m[i - 1])", f"tc.exp({A('i', k1)} - m[i] - 1.0)",
                    f"tc.exp({src}[i, {k1}] - m[i])", f"tc.exp(m[i] - {A('i', k1)})"])
            elif r < 0.15:
                body = f"{expo('i', k1)}.astype({rng.choice(['bfloat16', 'float16'])!r})"
            elif r < 0.27:
                if "w" not in self.tensors:
                    self.placeholder("w", [keys], rng.choice(["float32", "float16"]))
                    coef.append("w")
                body = f"{expo('i', k1)} * w[{k1}]"
            else:
                body = expo("i", k1)
            ldt = ""
            if where_broken == "l" and rng.random() < 0.3:
                ldt = rng.choice([", dtype='bfloat16'", ", dtype='float16'"])
            acc = ", acc_dtype='float16'" if where_broken == "l" and not ldt and rng.random() < 0.2 else ""
            self.compute_line(f"l = tc.compute(({rows},), lambda i: tc.sum({body}, axis={k1}{acc}), name='l'{ldt})")
            self.tensors["l"] = dict(dims=[rows], dtype=self.ns["l"].dtype, kind="compute", red=[keys], reduce=True)
        stats = ["m", "l"] if has_l else ["m"]
        outs: list[str]
        if kind == "softmax":
            ydt = rng.choice([None, None, "float16", "bfloat16"])
            self.compute_line(f"Y = tc.compute(({rows}, {keys}), lambda i, j: {expo('i', 'j')} / l[i], name='Y'"
                              f"{', dtype=' + repr(ydt) if ydt else ''})")
            self.tensors["Y"] = dict(dims=[rows, keys], dtype=self.ns["Y"].dtype, kind="compute", red=[],
                                     reduce=False)
            target, stats, outs = "l", ["m"], ["Y"]
        elif kind == "lse":
            self.compute_line(f"Z = tc.compute(({rows},), lambda i: tc.log(l[i]) + m[i], name='Z')")
            self.tensors["Z"] = dict(dims=[rows], dtype="float32", kind="compute", red=[], reduce=False)
            target, stats, outs = "l", ["m"], ["Z"]
        else:
            k2 = self.red_axis(keys)
            vdt = rng.choice(["float32", "float32", "float16", "bfloat16"])
            if kind == "pv" or rng.random() < 0.6:
                self.placeholder("V", [keys, vdim] if two_d else [keys], vdt)
                coef.append("V")
                v = f"V[{k2}, j]" if two_d else f"V[{k2}]"
            else:  # the row's own values as coefficients: an expectation of X under the softmax
                v = f"{src}[i, {k2}]"
                coef += ["Q", "Kt"] if attn else [src]
            p_stage = has_l and rng.random() < 0.5
            if p_stage:
                pdt = rng.choice([None, None, "float32", "bfloat16", "float16"])
                self.compute_line(f"P = tc.compute(({rows}, {keys}), lambda i, j: {expo('i', 'j')} / l[i], "
                                  f"name='P'{', dtype=' + repr(pdt) if pdt else ''})")
                self.tensors["P"] = dict(dims=[rows, keys], dtype=self.ns["P"].dtype, kind="compute", red=[],
                                         reduce=False)
                p = f"P[i, {k2}]"
            else:
                p = f"{expo('i', k2)} / l[i]" if has_l else expo("i", k2)
            r = rng.random()
            if where_broken == "target":
                body = rng.choice([f"{p} * {v} + 1.0", f"{p} * {v} * m[i]", f"{expo('i', k2)} * {v} / (l[i] + 1.0)"
                                   if has_l else f"{expo('i', k2)} * {v} / m[i]",
                                   f"{p} * {v} / l[i]" if has_l else f"{p} * {p} * {v}",
                                   f"tc.exp({A('i', k2)} * 2.0 - m[i]) * {v}"])
            elif r < 0.12:
                body = f"({p}).astype({rng.choice(['bfloat16', 'float16'])!r}) * {v}"
            elif r < 0.22 and has_l and not p_stage:
                body = f"({expo('i', k2)} * {v}) / l[i]"
            elif r < 0.3:
                body = f"{v} * {p}"
            else:
                body = f"{p} * {v}"
            # never a bfloat16 accumulator: Triton 3.6's interpreter sums bfloat16 tiles wrong (tl.sum of
            # [-1.5, 3, 1, 2] is inf), so the interpreter could not check it
            acc = rng.choice([", acc_dtype='float32'", ", acc_dtype='float32'", ""] * 6 + [", acc_dtype='float16'"])
            odt = rng.choice([None, None, "float16", "bfloat16", "float32"])
            dims = [rows, vdim] if two_d else [rows]
            shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
            params = "i, j" if two_d else "i"
            self.compute_line(f"O = tc.compute({shape}, lambda {params}: tc.sum({body}, axis={k2}{acc}), name='O'"
                              f"{', dtype=' + repr(odt) if odt else ''})")
            self.tensors["O"] = dict(dims=dims, dtype=self.ns["O"].dtype, kind="compute", red=[keys], reduce=True)
            target, outs = "O", ["O"]
        if rng.random() < 0.2:  # a statistic stored too
            outs = [rng.choice(stats)] + outs
        # masked: the operand has a where(); a swapped one counts too (conservative, see online_inputs)
        self.online = dict(target=target, stats=stats, masked=cond is not None, coef=coef, kind=kind)
        return outs

    # -- schedules ------------------------------------------------------------------------------
    def stage_var(self, st) -> str:
        return f"s[{st.tensor.name}]" if st.kind == "compute" else st.name

    def av(self, axis) -> str:
        return self.axis_var[id(axis)]

    def name_axes(self, st, axes) -> str:
        names = []
        for a in axes:
            v = f"{st.tensor.name}_{a.name}"
            self.axis_var[id(a)] = v
            names.append(v)
        return ", ".join(names)

    def factor(self, extent_hint: int = 16):
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            return str(rng.choice([1, 2, 4, 4, 8, 8, 16, 16, 32, 64]))
        if r < 0.68:
            return str(rng.choice([3, 5, 6, 12, 48, 80, 96, 192]))
        if r < 0.76:
            return str(rng.choice([128, 256, extent_hint + 1, 1024]))
        return self.knob([1, 2, 4, 8, 16, 32, 64, 3, 128])

    def knob(self, pool) -> str:
        rng = self.rng
        s = self.ns["s"]
        name = rng.choice(KNOB_NAMES)
        if name in s.knobs and rng.random() < 0.85:
            choices = list(s.knobs[name].choices)
        else:
            choices = rng.sample(pool, rng.randint(1, 3))
        return f"tc.knob({name!r}, {choices!r})"

    def compute_stages(self):
        return list(self.ns["s"].stages.values())

    def inner_axes(self, st) -> set:
        return {r.inner for r in st.relations if isinstance(r, Split)}

    def extent_hint(self, axis) -> int:
        try:
            return int(tc.ir.expr.evaluate(axis.extent, {**self.case.sizes, **self.knob_defaults()}))
        except Exception:
            return 16

    def knob_defaults(self) -> dict:
        return {n: k.default for n, k in self.ns["s"].knobs.items()}

    def do_split(self, st, axis, factor=None):
        f = factor or self.factor(self.extent_hint(axis))
        return self.sched_line(f"{self.stage_var(st)}.split({self.av(axis)}, {f})",
                               lambda r: self.name_axes(st, r))

    def do_tile(self, st, x, y, fx=None, fy=None):
        fx = fx or self.factor(self.extent_hint(x))
        fy = fy or self.factor(self.extent_hint(y))
        return self.sched_line(f"{self.stage_var(st)}.tile({self.av(x)}, {self.av(y)}, {fx}, {fy})",
                               lambda r: self.name_axes(st, r))

    def do_reorder(self, st, axes):
        self.sched_line(f"{self.stage_var(st)}.reorder({', '.join(self.av(a) for a in axes)})")

    def do_fuse(self, st, a, b):
        return self.sched_line(f"{self.stage_var(st)}.fuse({self.av(a)}, {self.av(b)})",
                               lambda r: self.name_axes(st, [r]))

    def do_swizzle(self, st, a, b):
        group = self.rng.choice(["1", "2", "3", "4", "8", self.knob([1, 2, 4, 8])])
        return self.sched_line(f"{self.stage_var(st)}.swizzle({self.av(a)}, {self.av(b)}, group={group})",
                               lambda r: self.name_axes(st, [r]))

    def do_split_k(self, st, axis):
        rng = self.rng
        parts = rng.choice(["2", "3", "4", "1", "7", self.knob([1, 2, 4])])
        det = "" if rng.random() < 0.7 else ", deterministic=False"
        self.sched_line(f"{self.stage_var(st)}.split_k({self.av(axis)}, {parts}{det})")

    def do_persistent(self, st, axis):
        flatten = self.rng.choice(["False", "True", f"tc.flag({self.rng.choice(KNOB_NAMES)!r})"])
        self.sched_line(f"{self.stage_var(st)}.persistent({self.av(axis)}, flatten={flatten})")

    def do_bind(self, st, axis, d=0):
        self.sched_line(f"{self.stage_var(st)}.bind({self.av(axis)}, 'program_id.{d}')")

    def do_compute_at(self, st, target, axis):
        self.sched_line(f"{self.stage_var(st)}.compute_at({self.stage_var(target)}, {self.av(axis)})")

    def pick_leaf(self, st, pred=None):
        leaves = [a for a in st.leaves if pred is None or pred(a)]
        return self.rng.choice(leaves) if leaves else None

    def related_stages(self, st):
        s = self.ns["s"]
        return [o for o in s.stages.values() if o is not st and s.related(st, o)]

    # macros: sensible moves
    def m_tile(self, st):
        rng = self.rng
        inner = self.inner_axes(st)
        spatial = [a for a in st.leaves if a.kind == "spatial" and a not in inner and a not in st.binds]
        reduce = [a for a in st.leaves if a.kind == "reduce" and a not in inner]
        pw = [1, 2, 4, 8, 16, 32, 64]
        outs, ins = [], []
        for a in spatial[-rng.randint(1, 2):] if spatial else []:
            f = str(rng.choice(pw[2:])) if rng.random() < 0.8 else self.knob(pw[3:])
            r = self.do_split(st, a, f)
            if r:
                outs.append(r[0])
                ins.append(r[1])
        routs, rins = [], []
        if reduce and rng.random() < 0.85:
            f = str(rng.choice(pw[2:])) if rng.random() < 0.8 else self.knob(pw[3:])
            r = self.do_split(st, reduce[-1], f)
            if r:
                routs.append(r[0])
                rins.append(r[1])
        order = [a for a in st.leaves if a.kind == "spatial" and a not in ins] + \
                [a for a in st.leaves if a.kind == "reduce" and a not in rins] + ins + rins
        if len(order) > 1 and order != st.leaves and rng.random() < 0.9:
            self.do_reorder(st, order)
        r = rng.random()
        if r < 0.45 and len(outs) == 2:
            pos = st.leaves.index(outs[0]) if outs[0] in st.leaves else -1
            if pos >= 0 and pos + 1 < len(st.leaves) and st.leaves[pos + 1] is outs[1]:
                swizzled = rng.random() < 0.4
                g = (self.do_swizzle if swizzled else self.do_fuse)(st, outs[0], outs[1])
                if g is not None:
                    self.do_bind(st, g, 0)
                    if rng.random() < 0.35:
                        self.do_persistent(st, g)
                    return
        if r < 0.85:
            for d, a in enumerate(outs[:2]):
                self.do_bind(st, a, d)
        if routs and rng.random() < 0.3:
            self.sched_line(f"{self.stage_var(st)}.pipeline({self.av(routs[0])}, "
                            f"stages={rng.choice(['2', '3', self.knob([1, 2, 3, 4])])})")
        if routs and rng.random() < 0.35:
            self.do_split_k(st, routs[0])

    def m_epilogue(self, st):
        prods = [o for o in self.related_stages(st) if self.ns["s"].related(st, o) == "consumer"]
        if not prods:
            return
        p = self.rng.choice(prods)
        inner = self.inner_axes(p)
        ax = _either(self.pick_leaf(p, lambda a: a.kind == "spatial" and a not in inner), self.pick_leaf(p))
        if ax is not None:
            self.do_compute_at(st, p, ax)

    def m_prologue(self, st):
        cons = [o for o in self.related_stages(st) if self.ns["s"].related(st, o) == "producer"]
        if not cons:
            return
        c = self.rng.choice(cons)
        inner = self.inner_axes(c)
        ax = _either(self.pick_leaf(c, lambda a: a not in inner), self.pick_leaf(c))
        if ax is not None:
            self.do_compute_at(st, c, ax)

    def m_cache_read(self, st):
        srcs = st.tensor.inputs
        if not srcs:
            return
        t = self.rng.choice(srcs)
        scope = self.rng.choice(["shared", "shared", "local"])
        tma = self.rng.choice(["", "", ", tma=True", f", tma=tc.flag({self.rng.choice(KNOB_NAMES)!r})"])
        cache = self.sched_line(f"s.cache_read({t.name}, {scope!r}, readers=[{self.stage_var(st)}]{tma})",
                                lambda r: r.name)
        if cache is not None and self.rng.random() < 0.85:
            inner = self.inner_axes(st)
            ax = _either(self.pick_leaf(st, lambda a: a not in inner), self.pick_leaf(st))
            if ax is not None:
                self.sched_line(f"{cache.name}.compute_at({self.stage_var(st)}, {self.av(ax)})")

    def m_cache_write(self, st):
        scope = "local" if self.rng.random() < 0.9 else "shared"
        tma = self.rng.choice(["", "", ", tma=True", f", tma=tc.flag({self.rng.choice(KNOB_NAMES)!r})"])
        cache = self.sched_line(f"s.cache_write({st.tensor.name}, {scope!r}{tma})", lambda r: r.name)
        if cache is not None and self.rng.random() < (0.9 if st.tensor.is_reduction else 0.3):
            inner = self.inner_axes(st)
            ax = _either(self.pick_leaf(st, lambda a: a.kind == "spatial" and a not in inner), self.pick_leaf(st))
            if ax is not None:
                self.sched_line(f"{cache.name}.compute_at({self.stage_var(st)}, {self.av(ax)})")

    def m_inline(self, st):
        self.sched_line(f"{self.stage_var(st)}.compute_inline()")

    # random primitives
    def random_primitive(self):
        rng = self.rng
        s = self.ns["s"]
        stages = self.compute_stages()
        st = rng.choice(stages)
        kind = rng.choices(
            ["split", "tile", "reorder", "fuse", "compute_at", "inline", "root", "bind", "pipeline", "unroll",
             "num_warps", "cache_read", "cache_write", "cache_at", "swizzle", "persistent", "compute_with",
             "split_k", "online"],  # online last, weight 0 outside fam_online: other seeds draw as before
            weights=[20, 7, 10, 8, 14, 6, 3, 10, 5, 5, 4, 4, 3, 4, 3, 3, 2, 2,
                     8 if self.case.family == "online" else 0])[0]
        leaves = list(st.leaves)
        if kind == "split" and leaves:
            self.do_split(st, rng.choice(leaves))
        elif kind == "tile" and len(leaves) >= 2:
            x, y = rng.sample(leaves, 2)
            self.do_tile(st, x, y)
        elif kind == "reorder" and len(leaves) >= 2:
            sub = rng.sample(leaves, rng.randint(2, len(leaves)))
            self.do_reorder(st, sub)
        elif kind == "fuse" and len(leaves) >= 2:
            n = rng.randrange(len(leaves) - 1)
            a, b = (leaves[n], leaves[n + 1]) if rng.random() < 0.85 else rng.sample(leaves, 2)
            self.do_fuse(st, a, b)
        elif kind == "swizzle" and len(leaves) >= 2:
            n = rng.randrange(len(leaves) - 1)
            a, b = (leaves[n], leaves[n + 1]) if rng.random() < 0.85 else rng.sample(leaves, 2)
            self.do_swizzle(st, a, b)
        elif kind == "persistent" and leaves:
            bound = [a for a in leaves if a in st.binds]
            self.do_persistent(st, rng.choice(bound) if bound and rng.random() < 0.8 else rng.choice(leaves))
        elif kind == "compute_with":
            self.m_compute_with()
        elif kind == "split_k":
            reds = [x for x in stages if x.tensor.is_reduction]
            t = rng.choice(reds) if reds and rng.random() < 0.9 else st
            loops = [a for a in t.leaves if a.kind == "reduce" and a not in self.inner_axes(t)]
            ax = loops[0] if loops and rng.random() < 0.85 else self.pick_leaf(t)
            if ax is not None:
                self.do_split_k(t, ax)
        elif kind == "compute_at":
            others = [o for o in stages if o is not st]
            rel = self.related_stages(st)
            if others:
                t = rng.choice(rel) if rel and rng.random() < 0.9 else rng.choice(others)
                if t.leaves:
                    self.do_compute_at(st, t, rng.choice(t.leaves))
        elif kind == "inline":
            self.m_inline(st)
        elif kind == "root":
            self.sched_line(f"{self.stage_var(st)}.compute_root()")
        elif kind == "bind" and leaves:
            self.do_bind(st, rng.choice(leaves), rng.choice([0, 0, 0, 1, 2]))
        elif kind == "pipeline" and leaves:
            n = rng.choice(["1", "2", "3", "4", self.knob([1, 2, 3, 4])])
            self.sched_line(f"{self.stage_var(st)}.pipeline({self.av(rng.choice(leaves))}, stages={n})")
        elif kind == "unroll" and leaves:
            self.sched_line(f"{self.stage_var(st)}.unroll({self.av(rng.choice(leaves))})")
        elif kind == "num_warps":
            n = rng.choice(["1", "2", "4", "8", "16", "32", "6", self.knob([1, 2, 4, 8])])
            self.sched_line(f"{self.stage_var(st)}.num_warps({n})")
        elif kind == "cache_read":
            self.m_cache_read(st)
        elif kind == "cache_write":
            reds = [x for x in stages if x.tensor.is_reduction]
            self.m_cache_write(rng.choice(reds) if reds and rng.random() < 0.8 else st)
        elif kind == "online":
            self.m_online()
        elif kind == "cache_at":
            caches = [c for c in s.caches]
            if caches:
                c = rng.choice(caches)
                t = rng.choice(stages)
                if t.leaves:
                    self.sched_line(f"{c.name}.compute_at({self.stage_var(t)}, {self.av(rng.choice(t.leaves))})")

    def outer_leaf(self, st, last=True):
        """A loop (not a tile) of `st` to place things at: its innermost spatial loop, or any loop."""
        inner = self.inner_axes(st)
        loops = [a for a in st.leaves if a not in inner and a.kind == "spatial"]
        if loops and (last or self.rng.random() < 0.7):
            return loops[-1] if last else self.rng.choice(loops)
        return self.pick_leaf(st, lambda a: a not in inner)

    def s_fused(self):
        """A schedule as the examples write them: tiled roots, producers fused into their consumers (as
        prologues, or a GEMM's epilogue), caches at the reduction loop, pipelining, warps."""
        rng = self.rng
        s = self.ns["s"]
        stages = self.compute_stages()
        epi = [(r, y) for r in stages if r.tensor.is_reduction for y in stages
               if r.tensor in y.tensor.inputs and not y.tensor.is_reduction]
        if epi and rng.random() < (0.15 if "W2" in self.tensors else 0.5):  # the reduction is the root; its
            # consumer runs as the epilogue (with twin GEMMs, mostly the other way: both at the consumer)
            r, y = rng.choice(epi)
            self.m_tile(r)
            ko = next((a for a in r.leaves if a.kind == "reduce" and a not in self.inner_axes(r)), None)
            for t in r.tensor.inputs:
                if rng.random() < 0.5 and ko is not None:
                    c = self.sched_line(f"s.cache_read({t.name}, 'shared', readers=[{self.stage_var(r)}])",
                                        lambda res: res.name)
                    if c is not None:
                        self.sched_line(f"{c.name}.compute_at({self.stage_var(r)}, {self.av(ko)})")
            at = self.outer_leaf(r)
            if at is not None and rng.random() < 0.5:
                tma = rng.choice(["", ", tma=True"])
                c = self.sched_line(f"s.cache_write({r.tensor.name}, 'local'{tma})", lambda res: res.name)
                if c is not None:
                    self.sched_line(f"{c.name}.compute_at({self.stage_var(r)}, {self.av(at)})")
            if at is not None:
                self.do_compute_at(y, r, at)
            return
        roots = [st for st in stages if st.tensor in s.outputs]
        root = rng.choice(roots)
        self.m_tile(root)
        if rng.random() < 0.3:
            self.sched_line(f"{self.stage_var(root)}.num_warps({rng.choice(['1', '2', '8', self.knob([2, 4, 8])])})")
        placed = {root.name}
        red_factor = None
        for st in reversed(stages):
            if st.name in placed or st.tensor in s.outputs:
                continue
            readers = [o for o in stages if st.tensor in o.tensor.inputs and o.name in placed]
            if not readers:
                continue
            target = rng.choice(readers)
            if not st.tensor.is_reduction and rng.random() < 0.4:
                self.m_inline(st)
            else:
                red = [a for a in st.leaves if a.kind == "reduce"]
                if red and rng.random() < 0.8:
                    f = str(rng.choice([2, 4, 8, 16, 32, 64])) if rng.random() < 0.8 else self.knob([4, 8, 16, 32])
                    if red_factor is not None and rng.random() < 0.7:  # a twin reduction: the same loop
                        f = red_factor
                    red_factor = f
                    self.do_split(st, red[-1], f)
                at = self.outer_leaf(target, last=rng.random() < 0.7)
                if at is not None:
                    self.do_compute_at(st, target, at)
            placed.add(st.name)
            if self.dead:
                return
        if rng.random() < 0.6:
            self.m_compute_with()

    # online (fam_online)
    def m_online(self):
        """`online` with random, sometimes wrong, arguments: mostly fam_online's right target and statistics
        (in either order; skip_masked left out, True or False), else a wrong target, a statistic missing, a
        stage that is no statistic (an elementwise stage, the score GEMM), a statistic named twice, none, or
        a statistic as the target."""
        rng = self.rng
        live = {x.name for x in self.compute_stages()}
        info = getattr(self, "online", None) or {}
        target, stats = info.get("target"), list(info.get("stats", ()))
        if target not in live or not all(n in live for n in stats):
            reds = sorted(n for n in live if self.ns["s"].stages[n].tensor.is_reduction) or sorted(live)
            target = rng.choice(reds)
            stats = rng.sample(reds, rng.randint(0, len(reds)))
        r = rng.random()
        others = sorted(live - {target} - set(stats))
        if r < 0.7:
            if rng.random() < 0.2:
                stats = stats[::-1]
        elif r < 0.76:  # another stage as the target (a statistic as its own statistic: the 0.97 branch)
            target = rng.choice(others or sorted(live))
        elif r < 0.82:
            stats = [rng.choice(stats)] if stats else stats
        elif r < 0.87 and others:
            stats.insert(rng.randrange(len(stats) + 1), rng.choice(others))
        elif r < 0.91 and stats:
            stats.append(stats[0])
        elif r < 0.94:
            stats = []
        elif r < 0.97 and stats:
            target, stats = stats[-1], [target] + stats[:-1]
        else:
            target = rng.choice(sorted(live))
            stats = rng.sample(sorted(live), rng.randint(1, min(3, len(live))))
        args = [f"s[{n}]" for n in stats]
        skip = rng.choice([None, None, None, "skip_masked=False", "skip_masked=False", "skip_masked=True",
                           "False", "skip_masked=1" if rng.random() < 0.1 else None])
        if skip:
            args.append(skip)
        self.sched_line(f"s[{target}].online({', '.join(args)})")

    def s_online(self):
        """The examples' schedules on fam_online's compute, with random deviations: FlashAttention's for a
        weighted sum O (its rows and keys split, the row tile bound, the key loop maybe pipelined or split_k,
        S at the key loop, the stages between inlined mostly, caches), the softmax example's for Y or Z (the
        statistics' key loops split alike and placed at the row, or split_k of l's loop at the root). `online`
        (m_online: right or wrong arguments) comes at a random point: first (the statistics not yet placed),
        after the tiling, after the placements, or last; a few random primitives follow."""
        rng = self.rng
        info = self.online
        when = rng.choice(["first", "tiled", "placed", "placed", "last"])
        if when == "first":
            self.m_online()
        stages = {x.name: x for x in self.compute_stages()}
        pw = ["1", "2", "4", "8", "16", "32"]
        if info["target"] == "O":
            O = stages["O"]
            sp = [a for a in O.leaves if a.kind == "spatial"]
            red = [a for a in O.leaves if a.kind == "reduce"]
            outer, inner = [], []
            for n, a in enumerate(sp):
                if n > 0 and rng.random() < 0.3:
                    continue  # the value dimension whole
                f = rng.choice(pw if n == 0 else pw[2:] + ["64"]) if rng.random() < 0.8 else self.knob([4, 8, 16, 32])
                r = self.do_split(O, a, f)
                if r:
                    outer.append(r[0])
                    inner.append(r[1])
            rk = None
            if red and rng.random() < 0.9:
                f = rng.choice(pw[1:] + ["3", "64"]) if rng.random() < 0.8 else self.knob([2, 4, 8, 16, 32])
                rk = self.do_split(O, red[0], f)
            if self.dead:
                return
            order = [a for a in O.leaves if a.kind == "spatial" and a not in inner] + \
                    [a for a in O.leaves if a.kind == "reduce" and (rk is None or a is not rk[1])] + inner + \
                    ([rk[1]] if rk else [])
            if len(order) > 1 and order != O.leaves and rng.random() < 0.9:
                self.do_reorder(O, order)
            if outer and rng.random() < 0.9:
                self.do_bind(O, outer[0], 0)
                if len(outer) > 1 and rng.random() < 0.5:
                    self.do_bind(O, outer[1], 1)
            if rk and rng.random() < 0.4:
                self.sched_line(f"s[O].pipeline({self.av(rk[0])}, stages={rng.choice(['2', '3', self.knob([1, 2, 3])])})")
            if rk and rng.random() < 0.15:  # flash-decoding: the key loop in parts, merged by a combine kernel
                self.do_split_k(O, rk[0])
            if when == "tiled":
                self.m_online()
            loop = rk[0] if rk else None
            for name, p in (("Sc", 0.8), ("E", 0.75), ("P", 0.85)):
                if name not in stages:
                    continue
                if rng.random() < p:
                    self.m_inline(stages[name])
                elif rng.random() < 0.6 and O.leaves:
                    self.do_compute_at(stages[name], O, loop if loop is not None and rng.random() < 0.7
                                       else rng.choice(O.leaves))
            if "S" in stages:
                S = stages["S"]
                sred = [a for a in S.leaves if a.kind == "reduce"]
                if sred and rng.random() < 0.8:
                    self.do_split(S, sred[0], rng.choice(["16", "32", "64", "8"]))
                if O.leaves and rng.random() < 0.85:
                    self.do_compute_at(S, O, loop if loop is not None and rng.random() < 0.8 else rng.choice(O.leaves))
            for name in info["stats"]:  # their placement is replaced by the online loop (if online holds)
                if name in stages and rng.random() < 0.25 and O.leaves:
                    self.do_compute_at(stages[name], O, rng.choice(O.leaves))
            if loop is not None and rng.random() < 0.3:
                t = rng.choice([t.name for t in O.tensor.inputs if t.is_placeholder] or ["none"])
                if t != "none":
                    c = self.sched_line(f"s.cache_read({t}, 'shared', readers=[s[O]])", lambda res: res.name)
                    if c is not None:
                        self.sched_line(f"{c.name}.compute_at(s[O], {self.av(loop)})")
            if "S" in stages and outer and rng.random() < 0.3:
                c = self.sched_line("s.cache_read(Q, 'shared', readers=[s[S]])", lambda res: res.name)
                if c is not None:
                    self.sched_line(f"{c.name}.compute_at(s[O], {self.av(outer[0])})")
        else:
            root = stages["Y"] if "Y" in stages else stages["Z"]
            v = self.stage_var(root)
            row = root.leaves[0]
            if rng.random() < 0.3:
                r = self.do_split(root, row, rng.choice(pw))
                if r:
                    row = r[0]
            if rng.random() < 0.9:
                self.do_bind(root, row, 0)
            block = rng.choice(pw[1:] + ["64", "5"]) if rng.random() < 0.8 else self.knob([4, 8, 16, 32, 64])
            if root.name == "Y" and rng.random() < 0.85:
                self.do_split(root, root.tensor.axis[1], block)
            if when == "tiled":
                self.m_online()
            split = rng.random() < 0.2  # few long rows: the statistics' loop in parts (split_k), at the root
            for name in ("m", "l"):
                st = stages[name]  # Y and Z read both
                red = [a for a in st.leaves if a.kind == "reduce"]
                parts = None
                if red and rng.random() < 0.85:
                    parts = self.do_split(st, red[0], block if rng.random() < 0.75 else rng.choice(pw))
                if split and name == "l":
                    self.do_bind(st, st.tensor.axis[0], 0)
                    if parts:
                        self.do_split_k(st, parts[0])
                elif not split and rng.random() < 0.85 and root.leaves:
                    self.do_compute_at(st, root, row if row in root.leaves and rng.random() < 0.85
                                       else rng.choice(root.leaves))
            for name, p in (("Sc", 0.7), ("E", 0.65)):
                if name in stages and rng.random() < p:
                    self.m_inline(stages[name])
            if rng.random() < 0.2:
                self.sched_line(f"{v}.num_warps({rng.choice(['1', '2', '8', self.knob([2, 4, 8])])})")
        if self.dead:
            return
        if when == "placed":
            self.m_online()
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            if self.dead:
                return
            self.random_primitive()
        if when == "last":
            self.m_online()

    def s_online_family(self):
        """fam_online's schedules: mostly s_online; else the generic schedules of every family, with
        `online` (m_online) first or last."""
        rng = self.rng
        if rng.random() < 0.7:
            self.s_online()
            return
        first = rng.random() < 0.4
        if first:
            self.m_online()
        self.schedule_any()
        if not first and not self.dead and rng.random() < 0.8:
            self.m_online()

    def online_inputs(self):
        """fam_online's inputs: sometimes rows, or the first elements of rows, of -inf in the operand (a
        running max that starts at -inf and grows, a row whose max is -inf); and where the max's operand is
        masked (tc.where(cond, x, -inf)) and an online call lets skip_masked be True, no NaN or infinity in a
        coefficient (V, w, or the row's own values): there a coefficient's NaN at a key of a skipped tile
        does not reach the output, unlike in the naive compute the oracle evaluates (Stage.online's docstring).
        Every online line counts, refused or not: a reduced case may keep any of them."""
        rng = self.rng
        info = self.online
        for name in ("X", "Q"):
            spec = self.case.inputs.get(name)
            if spec is None:
                continue
            if rng.random() < 0.2:
                spec["ninf_rows"] = rng.choice([0.2, 0.5])
            if rng.random() < 0.25:
                spec["ninf_prefix"] = rng.choice([0.5, 1.0])
        calls = [x.code for x in self.case.sched if ".online(" in x.code]
        skips = any("False" not in c for c in calls)
        if info["masked"] and skips:
            for name in info["coef"]:
                for key in ("special", "kinds", "ninf_rows", "ninf_prefix"):
                    self.case.inputs.get(name, {}).pop(key, None)

    def schedule(self):
        """The case's schedule: fam_online's own (s_online_family), or the generic one (schedule_any)."""
        if self.case.family == "online":
            self.s_online_family()
            return
        self.schedule_any()

    def schedule_any(self):
        """The generic schedule: nothing, s_twins or s_fused, or random macros, then random primitives."""
        rng = self.rng
        if rng.random() < 0.1:
            return
        stages = self.compute_stages()
        twins = "W2" in self.tensors  # fam_gemm's second GEMM: fused schedules (compute_with) more often
        if twins and rng.random() < 0.7:
            self.s_twins()
            for _ in range(rng.choice([0, 0, 0, 1, 2])):
                if self.dead:
                    return
                self.random_primitive()
            return
        if rng.random() < (0.7 if twins else 0.35):
            self.s_fused()
            if self.dead:
                return
            for _ in range(rng.choice([0, 0, 0, 1, 2, 3])):
                self.random_primitive()
                if self.dead:
                    return
            return
        n_macro = rng.choice([0, 1, 1, 2, 2, 3, 4])
        for _ in range(n_macro):
            st = rng.choice(stages)
            m = rng.choices([self.m_tile, self.m_epilogue, self.m_prologue, self.m_cache_read, self.m_cache_write,
                             self.m_inline], weights=[40, 20, 15, 10, 8, 7])[0]
            if m is self.m_cache_write and not st.tensor.is_reduction and rng.random() < 0.6:
                m = self.m_tile
            if m is self.m_inline and (st.tensor.is_reduction or st.tensor in self.ns["s"].outputs):
                m = self.m_epilogue
            m(st)
            if self.dead:
                return
        for _ in range(rng.choice([0, 0, 1, 2, 3, 4, 6])):
            self.random_primitive()
            if self.dead:
                return

    # -- the case -------------------------------------------------------------------------------
    def generate(self) -> Case:
        rng = self.rng
        fam = rng.choices(["elementwise", "reduce", "gemm", "norm", "random"], weights=[25, 25, 20, 12, 18])[0]
        if random.Random(seed_mix(self.seed)).random() < ONLINE_SHARE:  # drawn apart: other seeds are as before
            fam = "online"
        elif random.Random(seed_mix_scan(self.seed)).random() < SCAN_SHARE:
            fam = "scan"
        elif random.Random(seed_mix_scatter(self.seed)).random() < SCATTER_SHARE:
            fam = "scatter"
        fam = os.environ.get("TILEC_FUZZ_FAMILY", fam)  # a campaign of one family (scripts/fuzz.py --family)
        self.case.family = fam
        self.ns["SIZES"] = self.case.sizes
        # the sizes must exist before the compute statements run: define them up front, fix values later
        outs = self._with_sizes(getattr(self, f"fam_{fam}"))
        s_line = f"s = tc.create_schedule([{', '.join(outs)}])"
        self.compute_line(s_line)
        for name, t in self.tensors.items():
            if t["kind"] == "compute" and self.ns["s"].tensors.get(name) is self.ns[name]:
                T = self.ns[name]
                axes = list(T.axis) + list(T.reduce_axis)
                names = self.name_axes(self.ns["s"][T], axes)
                self.compute_line(f"{names}{',' if len(axes) == 1 else ''} = "
                                  + (f"{name}.axis" if not T.reduce_axis else
                                     f"{name}.axis + {name}.reduce_axis"))
        self.schedule()
        if self.dead:
            return self.case
        if fam == "online":
            self.online_inputs()
        s = self.ns["s"]
        self.case.config = {n: rng.choice(k.choices) for n, k in sorted(s.knobs.items())}
        inputs = [t.name for t in s.placeholders]
        rng.shuffle(inputs)
        outputs = [t.name for t in s.outputs]
        extra = [n for n, t in self.tensors.items() if t["kind"] == "compute" and n not in outputs
                 and s.tensors.get(n) is self.ns[n]]
        if extra and rng.random() < 0.1:
            outputs.append(rng.choice(extra))
        self.case.args = inputs + outputs
        self.case.inputs = {n: v for n, v in self.case.inputs.items() if n in inputs}
        used = {n.name for t in s.tensors.values() for d in t.shape for n in tc.ir.expr.walk(d)
                if isinstance(n, tc.ir.expr.SizeVar)}
        sym = [n for n in self.case.sizes if self.case.symbolic[n] and n in used]
        if sym and rng.random() < 0.1:
            self.case.specialize = [rng.choice(sym)]
        self.run("\n".join(self.case.tail_lines()))
        if self.progress:  # a case that hangs at build or run leaves its whole script behind
            self.progress(self.case.script("it hung or crashed the worker"))
        return self.case

    def _with_sizes(self, fam) -> list[str]:
        """Run a family with sizes defined in the namespace as they are made (then shrunk to fit)."""
        orig_make = self.make_sizes

        def make(n):
            names = orig_make(n)
            for line in self.case.size_lines():
                self.run(line)
            return names
        self.make_sizes = make
        outs = fam()
        self.make_sizes = orig_make
        before = dict(self.case.sizes)
        self.fit_sizes()
        if before != self.case.sizes:  # re-run with the shrunk sizes: the compute text does not change
            self.rerun_compute()
        return outs

    def rerun_compute(self) -> None:
        self.ns = {"tc": tc, "attempt": _attempt, "SIZES": self.case.sizes}
        for line in self.case.size_lines() + self.case.compute:
            self.run(line)


def _either(a, b):
    return a if a is not None else b


def _attempt(fn):
    try:
        return fn()
    except tc.TilecError:
        return None


def generate(seed: int, progress=None) -> tuple[Case, dict]:
    """The case of `seed` and its live namespace (`ns["CASE"]` holds check_kernel's arguments). With
    TILEC_FUZZ_AUTO=1 (scripts/fuzz.py --auto), the generated schedule is replaced by `tc.auto_schedule`'s at a
    random config of its knobs (`auto_variant`)."""
    g = Generator(seed, progress)
    case = g.generate()
    if os.environ.get("TILEC_FUZZ_AUTO") == "1" and case.error is None:
        return auto_variant(case)
    return case, g.ns


def auto_variant(case: Case) -> tuple[Case, dict]:
    """The same compute, sizes and inputs, scheduled by `tc.auto_schedule` of its outputs, at a config drawn from
    its knobs with the case's seed."""
    c = case.copy()
    # the tensors the case builds with, outputs among them (an intermediate listed there is stored too)
    c.sched = [Line(f"s = tc.auto_schedule([t for t in [{', '.join(c.args)}] if not t.is_placeholder])")]
    c.config = {}
    ns = exec_case(c)
    rng = random.Random(case.seed * 7919 + 17)
    c.config = {n: rng.choice(list(k.choices)) for n, k in sorted(ns["s"].knobs.items())}
    return c, exec_case(c)


def exec_case(case: Case) -> dict:
    """Run a case's text (sizes, compute, schedule, tail) in a fresh namespace; returns the namespace."""
    ns: dict = {"tc": tc, "attempt": _attempt, "__name__": "tilec_fuzz_case"}
    exec(compile(case.body(), f"<fuzz case {case.seed}>", "exec"), ns)
    return ns
