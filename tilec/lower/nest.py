"""Loop-nest IR: what one kernel does, as data: loops and statements over expressions (`code.py`).

The builder (`tilec.lower.builder`) produces it once per kernel; two renderers read it:
- `render_triton(kernel, form)`: Triton source. The form (`code.Form`: target "cuda" or
  "interpreter", int64 indices or not) is a rendering option: one lowering serves every form.
- `render_nest(kernel)`: the loop nest `tc.lower` prints, from each statement's `nest` reading
  (None: an index detail the nest does not show).

Statements: `ProgramId` (a grid coordinate), `TileId` (the grid coordinate a persistent tile loop is
at), `Assign` (a named value: offsets, masks, temporaries,
a stage's rounded value), `Load` / `Store` (a tile from or to memory, with its mask), `AccInit` and
`Update` (a reduction's accumulator), `Dot` (tl.dot into an accumulator), `TanhExp` (a part of tanh
that only the interpreter form computes), `Barrier` (the program's threads wait: a region in memory
written, then read), `Comment`, and `For` (a serial or unrolled loop, with its
pipelining, or a persistent program's loop over tiles).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilec.ir import dtypes
from tilec.lower import targets
from tilec.lower.code import Ex, Fmod, Tanh, paren, render, walk
from tilec.lower.render_triton import CUDA, Form

# Module-level functions a kernel may call, written once before the kernels: tl.reduce's combine functions
# for a max or min that keeps NaN as torch's amax/amin do (tl.max and tl.min drop it; max.NaN on the GPU).
NAN_COMBINE = {"max": "_max_nan", "min": "_min_nan"}
HELPERS = {
    name: (f"@triton.jit\ndef {name}(a, b):\n    # {op} of a and b, NaN if either is (torch's a{op})\n"
           f"    return tl.{op}imum(a, b, propagate_nan=tl.PropagateNan.ALL)\n")
    for op, name in NAN_COMBINE.items()}


def helpers(sources: list[str]) -> list[str]:
    """The HELPERS that the rendered kernels `sources` call, in a fixed order."""
    return [HELPERS[n] for n in HELPERS if any(f", {n})" in src for src in sources)]


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class ProgramId:
    """`name = tl.program_id(dim)`: a grid coordinate (int64 in the int64 form: `io * 1024` and the
    offsets made from it would overflow int32)."""

    name: str
    dim: int
    nest: str | None = None


@dataclass(frozen=True)
class TileId:
    """`name = loop`: the grid coordinate a persistent program's tile loop is at (int64 in the int64
    form, as a program id is)."""

    name: str
    loop: str
    nest: str | None = None


@dataclass(frozen=True)
class Assign:
    """`name = value`."""

    name: str
    value: Ex
    nest: str | None = None


@dataclass(frozen=True)
class Load:
    """`name = tl.load(address, mask=mask, other=0)`: a tile of a tensor in memory. With `desc` (a
    descriptor parameter's name) and `starts` (the tile's first index per dimension), the descriptor
    form reads it as `name = desc.load([starts])` instead: the same tile, 0 outside the tensor.
    `other`: the 0 written for the masked-out lanes; Triton casts it to the element type, and it casts
    no int to float8, so a float8 tile's is "0.0" (float32, which it casts like a value)."""

    name: str
    address: Ex
    mask: Ex | None
    nest: str | None = None
    desc: str | None = None
    starts: tuple = ()
    other: str = "0"


@dataclass(frozen=True)
class Store:
    """`tl.store(address, value, mask=mask)`; with `atomic`, `tl.atomic_add(...)` (split_k's partial sums
    with deterministic=False). With `desc` and `starts` (cache_write tma=True), the descriptor form
    writes it as `desc.store([starts], value)` instead: the same tile, nothing past the tensor's edge."""

    address: Ex
    value: Ex
    mask: Ex | None
    nest: str | None = None
    atomic: bool = False
    desc: str | None = None
    starts: tuple = ()


@dataclass(frozen=True)
class AccInit:
    """`acc = tl.full(shape, init, dtype)`: a reduction's accumulator, before its loops."""

    name: str
    shape: str
    init: str
    dtype: str
    nest: str | None = None


@dataclass(frozen=True)
class Update:
    """`acc = value`: a reduction folds one tile into its accumulator."""

    acc: str
    value: Ex
    nest: str | None = None


@dataclass(frozen=True)
class Dot:
    """`acc = tl.dot(a, b, acc)`. Operands the target's tl.dot cannot take as they are (targets.py)
    are widened to float32 and multiplied with input_precision="ieee"."""

    acc: str
    a: Ex
    a_dtype: str
    b: Ex
    b_dtype: str
    nest: str | None = None


@dataclass(frozen=True)
class Barrier:
    """`tl.debug_barrier()`: every thread of the program waits here, so what one thread stored to memory
    (a producer's region kept in a buffer, `Plan.scratch`) is visible to the threads that read it next."""

    nest: str | None = None


@dataclass(frozen=True)
class TanhExp:
    """`e = tl.exp(-2.0 * tl.abs(x))`, the part of tanh the interpreter form computes (it has no
    libdevice); nothing in the GPU form."""

    name: str
    x: Ex


@dataclass
class For:
    """A serial loop over `var` in [0, extent): `tl.range` (pipelined with `stages`) or unrolled; or a
    persistent program's tile loop over [program_id(0), extent) in steps of the program count (`step`),
    tl.range's `flatten` on. Its body is filled while the builder walks the loop; nothing changes it after."""

    var: str
    extent: str          # Triton expression
    extent_text: str     # the same, for people
    kind: str            # "serial" | "unroll" | "persistent"
    stages: str | None
    role: str            # e.g. "C.ko: serial reduction loop"
    body: list = field(default_factory=list)
    stages_text: str | None = None  # the pipeline depth under the config, for people
    step: str | None = None     # persistent: the kernel parameter holding the number of programs
    flatten: str | None = None  # persistent: tl.range's flatten (True, False, or a constexpr parameter)
    flatten_text: str | None = None  # the same under the config, for people
    key: str | None = None      # "stage.axis" of the loop this is (compute_with finds loops by it)
    start: str | None = None    # a serial loop's first value when not 0 (split_k: this program's chunk)
    start_text: str | None = None


@dataclass
class Param:
    name: str
    kind: str            # "tensor" | "size" | "programs" | "stride" | "constexpr" | "descriptor"
    tensor: str | None = None
    dim: int | None = None
    block: tuple[str, ...] = ()  # a descriptor's block shape: ints or knob names, per tensor dimension


@dataclass
class KernelIR:
    """One Triton kernel: its parameters, grid (one extent per program_id dim) and body."""

    name: str
    root: str
    stages: list[str]
    params: list[Param]
    grid: list              # ir Exprs, evaluated at launch
    grid_text: list[str]
    body: list
    header: list[str]
    num_warps: int
    outputs: list[str]      # tensors this kernel stores
    inputs: list[str]       # tensors it loads
    persistent: bool = False  # grid[0] is the tile count; min(it, #SMs) programs run them (a tile loop)
    # FMA contraction allowed: a kernel with an online rewrite, whose rounding is the rewrite's anyway (tl.exp's
    # x * log2(e) and a scaled score minus the max fuse); every other kernel rounds each operation as written
    fp_fusion: bool = False

    @property
    def descriptors(self) -> list[Param]:
        """The tensor-descriptor parameters (the descriptor form passes them; the pointer form does not)."""
        return [p for p in self.params if p.kind == "descriptor"]


def _stages_kw(stages: str | None) -> str:
    return f", num_stages={stages}" if stages else ""


def _dot_operand(x: Ex, dtype: str, form: Form) -> str:
    """A tl.dot operand widened to float32 (low-precision floats with .to, others with tl.cast)."""
    code = render(x, form)
    c = dtypes.compute_dtype(dtype)
    if c != dtype:
        code, dtype = f"{paren(code)}.to({dtypes.triton_name(c)})", c
    return code if dtype == "float32" else f"tl.cast({code}, tl.float32)"


def statement(node, form: Form = CUDA) -> str | None:
    """The Triton line of one statement (None: nothing in this form)."""
    r = lambda e: render(e, form)  # noqa: E731
    if isinstance(node, Comment):
        return f"# {node.text}"
    if isinstance(node, ProgramId):
        return f"{node.name} = tl.program_id({node.dim})" + (".to(tl.int64)" if form.int64 else "")
    if isinstance(node, TileId):  # tl.cast: the interpreter's loop counter is a Python int
        return f"{node.name} = tl.cast({node.loop}, tl.int64)" if form.int64 else f"{node.name} = {node.loop}"
    if isinstance(node, Assign):
        return f"{node.name} = {r(node.value)}"
    if isinstance(node, Load):
        if node.desc is not None and form.descriptors:
            return f"{node.name} = {node.desc}.load([{', '.join(r(s) for s in node.starts)}])"
        mask = f", mask={r(node.mask)}, other={node.other}" if node.mask is not None else ""
        return f"{node.name} = tl.load({r(node.address)}{mask})"
    if isinstance(node, Store):
        if node.desc is not None and form.descriptors:
            return f"{node.desc}.store([{', '.join(r(s) for s in node.starts)}], {r(node.value)})"
        mask = f", mask={r(node.mask)}" if node.mask is not None else ""
        return f"tl.{'atomic_add' if node.atomic else 'store'}({r(node.address)}, {r(node.value)}{mask})"
    if isinstance(node, AccInit):
        return f"{node.name} = tl.full({node.shape}, {node.init}, {dtypes.triton_name(node.dtype)})"
    if isinstance(node, Update):
        return f"{node.acc} = {r(node.value)}"
    if isinstance(node, Dot):
        if targets.native_dot(node.a_dtype, node.b_dtype, form.target):
            return f"{node.acc} = tl.dot({r(node.a)}, {r(node.b)}, {node.acc})"
        a, b = _dot_operand(node.a, node.a_dtype, form), _dot_operand(node.b, node.b_dtype, form)
        return f'{node.acc} = tl.dot({a}, {b}, {node.acc}, input_precision="ieee")'
    if isinstance(node, TanhExp):
        return targets.tanh_exp(node.name, r(node.x), form.target)
    if isinstance(node, Barrier):
        return "tl.debug_barrier()"
    raise TypeError(f"not a statement of the loop-nest IR: {node!r}")


def expressions(body):
    """Every expression in `body` (loops included)."""
    for node in body:
        if isinstance(node, For):
            yield from expressions(node.body)
            continue
        for name in ("value", "address", "mask", "a", "b", "x"):
            e = getattr(node, name, None)
            if isinstance(e, Ex):
                yield from walk(e)


def uses_libdevice(kernel: KernelIR, form: Form) -> bool:
    """Whether the kernel in this form calls libdevice (tanh and fmod on the GPU)."""
    return form.target == "cuda" and any(isinstance(e, (Tanh, Fmod)) for e in expressions(kernel.body))


def render_triton(kernel: KernelIR, form: Form = CUDA) -> str:
    """The kernel as Triton source: header comment, signature, body with a comment per loop."""
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
                if node.kind == "unroll":
                    lines.append(f"{pad}for {node.var} in tl.static_range({node.extent}):")
                elif node.kind == "persistent":
                    lines.append(f"{pad}for {node.var} in tl.range(tl.program_id(0), {node.extent}, {node.step}"
                                 f"{_stages_kw(node.stages)}, flatten={node.flatten}):")
                else:
                    lines.append(f"{pad}for {node.var} in tl.range({node.start or 0}, {node.extent}"
                                 f"{_stages_kw(node.stages)}):")
                emit(node.body, indent + 1)
                continue
            line = statement(node, form)
            if line is not None:
                lines.append(pad + line)

    emit(kernel.body, 1)
    return "\n".join(lines) + "\n"


def render_nest(kernel: KernelIR) -> str:
    """The kernel as a loop nest for people: grid, loops with their roles, stores and computes."""
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
                if node.stages:
                    how += f", pipelined stages={node.stages_text or node.stages}"
                span = f"[{node.start_text or 0}, {node.extent_text})"
                if node.kind == "persistent":
                    span = f"[program_id.0, {node.extent_text}) step #programs"
                    how += ", flattened" if node.flatten_text == "True" else ""
                out.append(f"{pad}for {node.var} in {span}:  {how}  # {node.role}")
                emit(node.body, indent + 1)
            elif getattr(node, "nest", None):
                out.append(pad + node.nest)

    emit(kernel.body, 2)
    return "\n".join(out) + "\n"
