"""Loop-nest IR: what one kernel does, as data: loops and statements over expressions (`code.py`).

The builder (`tilec.lower.builder`) produces it once per kernel; passes (`fusion.py`, `subtiles.py`) rewrite
it by the names its nodes define and read (`defined`, `names_read`, `rename_stmt`), never by text; two
printers read it:
- `triton_printer.render_triton(kernel, form)`: Triton source, in a form (`triton_printer.Form`: target
  "cuda" or "interpreter", int64 indices or not, descriptors or pointers);
- `nest_printer.render_nest(kernel)`: the loop nest `tc.lower` prints (its loops, and the statements
  with a `Note`).

Statements: `ProgramId` (a grid coordinate), `TileId` (the grid coordinate a persistent tile loop is
at), `Assign` (a named value: offsets, masks, temporaries, a stage's rounded value), `Load` / `Store`
(a tile from or to memory, with its mask), `AccInit` and `Update` (a reduction's accumulator), `Dot`
(a matrix product into an accumulator), `TanhExp` (a part of tanh that only the interpreter form
computes), `Barrier` (the program's threads wait: a region in memory written, then read), `Comment`,
`Why` (a comment on a target's rule, which the printer words), and `For` (a serial or unrolled loop,
with its pipelining, or a persistent program's loop over tiles).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from tilec.lower.code import Ex, names_read, rename, walk


@dataclass(frozen=True)
class Note:
    """How a statement reads in the loop nest people see (`nest_printer.py`): `lhs op rhs`. Its parts are
    strings (the user's compute as written: `silu(C[i, j])`) or expressions (the kernel's names and values,
    renamed with the statement by every pass). `lhs` None: the name the statement defines, with `dims`
    (its tile dims, shown as name[dims]) where given; a statement that defines no name (a store) says its own."""

    rhs: tuple
    dims: tuple | None = None
    op: str = "="
    lhs: tuple | None = None
    piece: str | None = None  # the sub-tile piece the statement is of (subtiles.py): "ji 32:48"


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Why:
    """A comment on a rule of the target at this point, worded by its printer: `topic` "nan_reduce" (a max
    or min that keeps NaN, of `op`), "tf32_sum" (a product summed kept from becoming a TF32 dot), "dot_zero"
    (a dot operand zeroed past the end of its reduction)."""

    topic: str
    op: str | None = None


@dataclass(frozen=True)
class ProgramId:
    """`name` = the program's coordinate on grid dimension `dim`."""

    name: str
    dim: int


@dataclass(frozen=True)
class TileId:
    """`name = loop`: the grid coordinate a persistent program's tile loop is at."""

    name: str
    loop: str


@dataclass(frozen=True)
class Assign:
    """`name = value`."""

    name: str
    value: Ex
    note: Note | None = None


@dataclass(frozen=True)
class Load:
    """`name` = the tile of a tensor (of element type `dtype`) at `address`, 0 where `mask` is false. With
    `desc` (a descriptor parameter's name) and `starts` (the tile's first index per dimension), the
    descriptor form reads it through the descriptor instead: the same tile, 0 outside the tensor."""

    name: str
    address: Ex
    mask: Ex | None
    note: Note | None = None
    desc: str | None = None
    starts: tuple = ()
    dtype: str = "float32"


@dataclass(frozen=True)
class Store:
    """`value` stored at `address` where `mask` holds; with `atomic`, added atomically (split_k's partial sums
    with deterministic=False). With `desc` and `starts` (cache_write tma=True), the descriptor form writes
    it through the descriptor instead: the same tile, nothing past the tensor's edge."""

    address: Ex
    value: Ex
    mask: Ex | None
    note: Note | None = None
    atomic: bool = False
    desc: str | None = None
    starts: tuple = ()


@dataclass(frozen=True)
class AccInit:
    """`name` = a tile of `shape` (a Tuple of extents) filled with `init`, of `dtype`: a reduction's
    accumulator, before its loops."""

    name: str
    shape: Ex
    init: Ex
    dtype: str
    note: Note | None = None


@dataclass(frozen=True)
class Update:
    """`acc = value`: a reduction folds one tile into its accumulator."""

    acc: str
    value: Ex
    note: Note | None = None


@dataclass(frozen=True)
class Dot:
    """`acc` += a @ b. Operands the target's dot cannot take as they are (targets.py) are widened to
    float32 and multiplied in IEEE float32."""

    acc: str
    a: Ex
    a_dtype: str
    b: Ex
    b_dtype: str
    note: Note | None = None


@dataclass(frozen=True)
class Barrier:
    """Every thread of the program waits here, so what one thread stored to memory (a producer's region
    kept in a buffer, `Plan.scratch`) is visible to the threads that read it next."""

    note: Note | None = None


@dataclass(frozen=True)
class TanhExp:
    """`name` = exp(-2|x|), the part of tanh the interpreter form computes (it has no libdevice); nothing
    in the GPU form."""

    name: str
    x: Ex


@dataclass
class For:
    """A serial loop over `var` in [start (default 0), extent): pipelined with `stages`, or unrolled; or a
    persistent program's tile loop over [program_id(0), extent) in steps of the program count (`step`),
    flattened or not (`flatten`: a bool, or a knob's constexpr). Its body is filled while the builder walks
    the loop; passes replace it, never change it in place."""

    var: str
    extent: Ex
    kind: str            # "serial" | "unroll" | "persistent"
    stages: Ex | None
    role: str            # e.g. "C.ko: serial reduction loop"
    body: list = field(default_factory=list)
    step: Ex | None = None
    flatten: Ex | None = None
    key: str | None = None      # "stage.axis" of the loop this is (compute_with finds loops by it)
    start: Ex | None = None     # a serial loop's first value when not 0 (split_k: this program's chunk)

    @property
    def head(self) -> tuple:
        """What the loop runs over, without its body: two loops of one head run the same iterations."""
        return self.var, self.start, self.extent, self.kind, self.stages, self.step, self.flatten


@dataclass
class Param:
    name: str
    kind: str            # "tensor" | "size" | "programs" | "stride" | "constexpr" | "descriptor"
    tensor: str | None = None
    dim: int | None = None
    block: tuple[str, ...] = ()  # a descriptor's block shape: ints or knob names, per tensor dimension


@dataclass
class KernelIR:
    """One kernel: its parameters, grid (one extent per program_id dim) and body."""

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
    # FMA contraction allowed: a kernel with an online rewrite, whose rounding is the rewrite's anyway (exp's
    # x * log2(e) and a scaled score minus the max fuse); every other kernel rounds each operation as written
    fp_fusion: bool = False
    config: dict = field(default_factory=dict)  # knob name -> value: the constexpr parameters' values
    names: frozenset = frozenset()  # every name the build gave out (a pass's new name avoids them)
    # a build of one power-of-two piece of a sub-tiled tile: (tile axis name, tile extent, start, length);
    # the pass subtiles.merge_pieces makes one kernel of a tile's pieces
    piece: tuple | None = None

    @property
    def descriptors(self) -> list[Param]:
        """The tensor-descriptor parameters (the descriptor form passes them; the pointer form does not)."""
        return [p for p in self.params if p.kind == "descriptor"]


# -- what a statement defines and reads, and renaming it ---------------------------------------------

_EXPR_FIELDS = ("value", "address", "mask", "a", "b", "x", "shape", "init", "starts")


def defined(node) -> str | None:
    """The name a statement writes (None: it writes none)."""
    if isinstance(node, (ProgramId, TileId, Assign, Load, AccInit, TanhExp)):
        return node.name
    if isinstance(node, (Update, Dot)):
        return node.acc
    return None


def stmt_exprs(node):
    """The expressions a statement (or a loop's head) holds."""
    names = ("start", "extent", "step", "flatten", "stages") if isinstance(node, For) else _EXPR_FIELDS
    for name in names:
        e = getattr(node, name, None)
        for x in (e if isinstance(e, tuple) else (e,)):
            if isinstance(x, Ex):
                yield x


def names_read_stmt(node) -> set[str]:
    """The variables a statement reads (a loop: its head's and its body's, less its own counter)."""
    out: set[str] = set()
    for e in stmt_exprs(node):
        out |= names_read(e)
    if isinstance(node, Dot):
        out.add(node.acc)
    elif isinstance(node, TileId):
        out.add(node.loop)
    elif isinstance(node, For):
        for n in node.body:
            out |= names_read_stmt(n)
    return out


def rename_stmt(node, mapping: dict):
    """`node` with the names in `mapping` replaced: what it reads and what it writes (a loop: its counter,
    head and body too)."""
    if not mapping:
        return node
    if isinstance(node, For):
        return dataclasses.replace(node, var=mapping.get(node.var, node.var),
                                   body=[rename_stmt(n, mapping) for n in node.body],
                                   **{k: rename(getattr(node, k), mapping)
                                      for k in ("start", "extent", "step", "flatten", "stages")})
    changes = {}
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        if isinstance(v, Note):
            new = dataclasses.replace(v, rhs=rename(v.rhs, mapping), lhs=rename(v.lhs, mapping))
            if new != v:
                changes[f.name] = new
        elif isinstance(v, (Ex, tuple)):
            new = rename(v, mapping)
            if new != v:
                changes[f.name] = new
        elif f.name in ("name", "acc", "loop") and isinstance(v, str) and v in mapping:
            changes[f.name] = mapping[v]
    return dataclasses.replace(node, **changes) if changes else node


def expressions(body):
    """Every expression in `body` (loops included), and every expression inside those."""
    for node in body:
        for e in stmt_exprs(node):
            yield from walk(e)
        if isinstance(node, For):
            yield from expressions(node.body)
