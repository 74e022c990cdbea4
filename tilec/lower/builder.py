"""Lowering, the IR pass: the analysis (plan, masks) -> loop-nest IR (`nest.KernelIR`, statement nodes
over `code` expressions), one kernel per root stage; `triton_printer.render_triton` turns it into source.

How a stage's loops become the kernel's:
- leaves bound with `bind` are grid axes (`ProgramId`); a fused grid axis is decomposed with // and %;
- the inner axis of a split is a tile axis: an `arange` vector dimension (power-of-two extent);
- every other leaf is a serial loop (`For`, pipelined if asked) or unrolled.
Each original axis gets an offset vector `offs_<axis>` (and `mask_<axis>` where the analysis says
its tiles may overrun): its value as an expression of the leaves, with its guards and block start, is
the stage's index map's (`layout.index`, tilec/plan/indexmap.py), printed here by `index_value`.

A sum of a product whose operands cover (m, k) and (k, n) tiles becomes a `Dot` into a float32
accumulator; other reductions become a sum, max or min over the reduce tile dimension, masked with
the reduction's identity. Stages placed with compute_at are emitted inside the loop they were placed
at: producers before the rest of the loop body, consumers after it. The values inside (expressions,
loads, broadcasting) are written by `ValueEmitter` (tilec/lower/values.py).
"""

from __future__ import annotations

from collections import defaultdict

from tilec.errors import LoweringError
from tilec.ir import dtypes
from tilec.ir.expr import (
    Binary,
    Cast,
    Const,
    Expr,
    IterVar,
    Load,
    Reduce,
    SizeVar,
    size_text,  # noqa: I001
    substitute,
    walk,
)
from tilec.ir.knob import Knob, factor_value
from tilec.ir.tensor import sizes_of
from tilec.lower import code as c
from tilec.lower import targets
from tilec.lower.nest import (
    AccInit,
    Assign,
    Barrier,
    Comment,
    Dot,
    For,
    KernelIR,
    Note,
    Param,
    ProgramId,
    Store,
    TileId,
    Update,
    Why,
)
from tilec.lower.nest import Load as LoadTile
from tilec.lower.nest_printer import show
from tilec.lower.values import AxisVal, Val, ValueEmitter, _where, castable
from tilec.plan.placement import Placed
from tilec.schedule.schedule import Fuse, Split, Stage

_IDENTITY = {"sum": c.Num(0), "max": c.Num(float("-inf")), "min": c.Num(float("inf"))}


def compute_text(t) -> str:
    """The compute a stage's code comes from, as the user wrote it: `Y[i, j] = silu(C[i, j])`."""
    return f"{t.name}[{', '.join(a.name for a in t.axis)}] = {t.body!r}"


_IDENTITY_INT = {"sum": c.Num(0), "max": c.Num(-2147483648), "min": c.Num(2147483647)}


def _is_product(e) -> bool:
    """`e` is a multiplication, under any casts."""
    while isinstance(e, Cast):
        e = e.a
    return isinstance(e, Binary) and e.op == "*"


def _linear(terms: list) -> c.Ex:
    """The sum of `terms` ((coefficient, expression or None for the number 1) pairs), left to right, the
    first one's sign on it: -2 * x + y - 1."""
    out = None
    for coef, e in terms:
        if e is None:
            term, neg = c.Num(abs(coef)), coef < 0
        else:
            term, neg = (e if abs(coef) == 1 else c.BinOp("*", c.Num(abs(coef)), e)), coef < 0
        if out is not None:
            out = c.BinOp("-" if neg else "+", out, term)
        elif not neg:
            out = term
        elif e is None:
            out = c.Num(coef)
        elif abs(coef) == 1:
            out = c.UnaryOp("-", e)
        else:
            out = c.BinOp("*", c.Num(coef), e)
    return out


class KernelBuilder(ValueEmitter):
    """Builds the loop-nest IR of the kernel whose root stage is `root`: its loops, stages and statements
    here, its values in `ValueEmitter` (tilec/lower/values.py)."""

    def __init__(self, program, root: Placed, piece=None, split=None):
        self.p, self.root_placed, self.root, self.config = program, root, root.stage, program.config
        self.piece = piece  # (tile axis, start, length): build only this piece of a sub-tiled tile
        self.split = split  # split_k: a SplitK (which of its two kernels this is), or None
        self.part: str | None = None  # split_k's partial kernel: the program id of this program's part
        self.full_extent: dict[str, c.Ex] = {}  # a sub-tiled dim's whole extent, for the size checks
        self.warps = root.layout.warps  # the schedule's num_warps, or the plan's default for its tile
        self.unrolled = 1  # copies of the code being emitted: the product of the enclosing unrolled loops
        self.persistent = None  # (grid variable, its statement list, its index) of a persistent grid axis
        self.params: dict[str, Param] = {}
        self.names: set[str] = set()
        self.dim_order: list[str] = []
        self.dim_extent: dict[str, c.Ex] = {}  # a tile dim's extent: a Num, or a knob's Name
        self.env: dict[str, dict[IterVar, AxisVal]] = {}
        self.scopes: list[dict] = [{}]
        self.stages: list[str] = []
        self.loads: list[str] = []
        self.stores: list[str] = []
        self.stmts: list | None = None
        self.placed: dict[str, Placed] = {}
        self.inlined: set[str] = set()
        self.caches_here: set[str] = set()
        self.zero_outside: dict[str, set] = {}  # a loaded tile's name -> the masks outside which it is 0
        self.materialized: set[str] = set()  # producers whose region is in memory by now (Plan.scratch)
        self.online_pieces: dict = {}  # online target -> (its loop's depth, [(start, end, fold, what)])
        self.fold: set[str] = set()  # where() conditions known true here (an online loop's unmasked tiles)
        self.piece_fold: set[str] = set()  # those of the online loop piece being emitted (its members' only)

    # -- names and parameters -------------------------------------------------------------------
    def fresh(self, name: str) -> str:
        base, n = name, 1
        while name in self.names:
            name, n = f"{base}_{n}", n + 1
        self.names.add(name)
        return name

    def _param(self, name: str, kind: str, **kw) -> str:
        if name not in self.params:
            if name in self.names:
                raise LoweringError(f"the name {name!r} is used for two different things in kernel "
                                    f"{self.root.name} (a tensor, size, knob or axis); rename one")
            self.names.add(name)
            self.params[name] = Param(name, kind, **kw)
        elif self.params[name].kind != kind:
            raise LoweringError(f"the name {name!r} is used for two different things in kernel "
                                f"{self.root.name} (a tensor, size, knob or axis); rename one")
        return name

    def tensor_param(self, t) -> str:
        name = self._param(t.name, "tensor", tensor=t.name)
        for d in range(t.ndim):
            self._param(f"stride_{t.name}_{d}", "stride", tensor=t.name, dim=d)
        return name

    def scalar(self, e: Expr) -> c.Ex:
        """A scalar size expression (sizes, knobs, ints) as an expression of the kernel's parameters."""
        if isinstance(e, Const):
            return c.Num(e.value)
        if isinstance(e, SizeVar):
            if e.name in self.p.specialize:
                return c.Num(int(self.p.specialize[e.name]), size=e.name)
            return c.Name(self._param(e.name, "size"))
        if isinstance(e, Knob):
            return c.Name(self._param(e.knob_name, "constexpr"))
        if isinstance(e, Binary) and e.op == "cdiv":
            return c.call("cdiv", self.scalar(e.a), self.scalar(e.b))
        if isinstance(e, Binary) and e.op in ("*", "+", "-", "//", "%"):
            return c.BinOp(e.op, self.scalar(e.a), self.scalar(e.b))
        raise LoweringError(f"cannot use {e!r} as a size in generated code")

    def index_value(self, e: Expr, known: dict) -> Val:
        """An expression of a stage's index map (tilec/plan/indexmap.py) as code; `known` holds the code of
        its leaves and of the values named once (a swizzle's). A split's parent `outer * f + inner` is one
        flat sum of the levels' terms, each laid out over their joint tile dims; an expression of no leaf is
        a size (`scalar`)."""
        if e in known:  # (expressions hash by identity: the map's nodes are shared, not rebuilt)
            return known[e]
        if not any(n in known for n in walk(e)):
            return Val(self.scalar(e), (), "int32")
        if e.op == "+" and e.a not in known and isinstance(e.a, Binary) and e.a.op == "*":
            (o, f), i = (e.a.a, e.a.b), e.b
            return self.combine(lambda x, y: c.sum_of(c.BinOp("*", x, self.scalar(f)), y),
                                [self.index_value(o, known), self.index_value(i, known)], "int32")
        a, b = self.index_value(e.a, known), self.index_value(e.b, known)
        build = (lambda x, y: c.call("minimum", x, y)) if e.op == "min" else (lambda x, y: c.BinOp(e.op, x, y))
        return self.combine(build, [a, b], "bool" if e.op in c.CMP else "int32")

    def factor(self, f) -> c.Ex:
        """A split factor or group size (an int, or a knob's constexpr parameter)."""
        return self.scalar(f) if isinstance(f, Knob) else c.Num(int(f))

    def extent_value(self, dim: str, whole: bool = False) -> int:
        """A tile dim's extent under the config (`whole`: a sub-tiled dim's whole tile, not its piece)."""
        e = self.full_extent.get(dim, self.dim_extent[dim]) if whole else self.dim_extent[dim]
        return e.value if isinstance(e, c.Num) else self.config[e.id]

    def text(self, e: Expr) -> str:
        """A size expression for people, knobs replaced by their values: cdiv(M, 128) * cdiv(N, 64)."""
        return size_text(substitute(e, lambda n: Const(self.config[n.knob_name], "int32")
                                    if isinstance(n, Knob) else None))

    # -- stages ---------------------------------------------------------------------------------
    def emit_stage(self, placed: Placed, out: list) -> None:
        """Emit a placed stage (its own loops and compute, and what is placed in them) into `out`."""
        x, lay = placed.stage, placed.layout
        st = lay.stage
        self.placed[x.name] = placed
        if x.name not in self.stages:  # a stage in an online loop's pieces is emitted once per piece
            self.stages.append(x.name)
        env: dict[IterVar, AxisVal] = {}
        if placed.target is not None:
            tenv = self.env[placed.target.name]
            env = {axis: tenv[taxis] for axis, taxis in placed.bound.items()}
        self.env[x.name] = env
        for axis, taxis in placed.bound.items():  # shorter than the loop it follows: mask its own end
            if size_text(axis.extent) != size_text(taxis.extent):
                v = env[axis]
                mask = self.fresh(f"mask_{axis.name}_{x.name}")
                cond = c.BinOp("<", v.code, self.scalar(axis.extent))
                out.append(Assign(mask, c.BinOp("&", cond, v.mask) if v.mask else cond))
                env[axis] = AxisVal(v.code, v.dims, v.level, c.Name(mask), None,
                                    v.canon and (v.canon, "<", size_text(axis.extent)))
        leaf_val: dict[Expr, Val] = {}  # the code of each leaf (and of a value named once), by its index-map node
        level_of: dict[IterVar, int] = {}
        saved = self.stmts
        self.stmts = out
        if lay.grid:
            out.append(Comment(f"{x.name}: grid axes " + ", ".join(
                f"{a.name} -> program_id.{st.binds[a]}" for a in lay.grid)))
        for a in lay.grid:
            var = self.fresh(a.name)
            if lay.persistent and lay.persistent[0] is a:  # build() puts what follows in the tile loop
                self.persistent = (var, self.stmts, len(self.stmts))
            self.stmts.append(ProgramId(var, st.binds[a]))  # int64 in the int64 form (nest.py)
            leaf_val[a], level_of[a] = Val(c.Name(var), (), "int32"), -1
        if self.split is not None and self.split.mode == "partial" and x is self.root:
            self.part = self.fresh("part")
            out.append(Comment(f"{x.name}: split_k part -> program_id.{self.split.dim}: this program sums one "
                               f"chunk of {self.split.axis.name}"))
            self.stmts.append(ProgramId(self.part, self.split.dim))
        loop_vars = {}
        for n, a in enumerate(lay.loops):
            loop_vars[a] = self.fresh(a.name)
            leaf_val[a], level_of[a] = Val(c.LoopIndex(loop_vars[a]), (), "int32"), n
        for a in lay.tiles:
            dim = self.fresh(a.name)
            self.dim_order.append(dim)
            factor = lay.index.tile_split(a).factor
            self.dim_extent[dim] = self.scalar(factor) if isinstance(factor, Knob) else c.Num(lay.tile_extent[a])
            arange = c.call("arange", 0, self.dim_extent[dim])
            if self.piece is not None and self.piece[0] is a:  # one power-of-two piece of the tile
                _, start, length = self.piece
                self.full_extent[dim], self.dim_extent[dim] = c.Num(lay.tile_extent[a]), c.Num(length)
                arange = c.call("arange", 0, length)
                arange = c.BinOp("+", c.Num(start), arange) if start else arange
            leaf_val[a], level_of[a] = Val(arange, (dim,), "int32"), -1
        # every original axis from the leaves (tilec/plan/indexmap.py); a loop that runs once (isl, under the
        # size facts) is no loop: its index is 0 there
        r = lay.index.rebuilt(zero=frozenset(lay.singles))
        self._relation_params(lay.index)
        for rel in reversed(lay.index.fuses):  # a swizzled pair is named once, before the offsets that use it
            if rel.group is not None:
                self.grouped(x, rel, r, leaf_val, out)
        defs: dict[int, list] = defaultdict(list)
        value: dict[IterVar, Val] = {}
        guards: dict[IterVar, list[Val]] = {}  # conditions inside an axis's value (`Rebuilt.guards`)
        block: dict[IterVar, c.Ex] = {}  # axis -> the start of its block, where it is outer * f + a tile's arange
        for axis in lay.index.originals:
            if axis in env:
                continue
            value[axis] = self.index_value(r.value[axis], leaf_val)
            guards[axis] = [self.index_value(g, leaf_val) for g in r.guards[axis]]
            split = lay.index.split_of(axis)
            if axis in r.block and split.inner in lay.tiles:
                start = self.index_value(r.block[axis], leaf_val)
                if not start.dims:
                    block[axis] = start.code
                    if self.piece is not None and self.piece[0] is split.inner and self.piece[1]:
                        piece = c.Num(self.piece[1])  # this piece's place in the sub-tiled tile
                        block[axis] = piece if start.code == c.Num(0) else c.BinOp("+", start.code, piece)
            leaves = [a for a in walk(r.value[axis]) if isinstance(a, IterVar) and a in level_of]
            level_of[axis] = max((level_of[a] for a in leaves), default=-1)  # the innermost loop it changes in
            defs[level_of[axis]].append(axis)

        def define(axes: list, stmts: list) -> None:
            for axis in axes:
                v = value[axis]
                name = self.fresh(f"offs_{axis.name}")
                stmts.append(Assign(name, v.code))  # int64 form: of int64 program ids and loop counters
                mask = None
                conds = []
                if self.p.masks[x.name][axis]:  # decided by isl in the analysis (tilec.plan)
                    conds.append(Val(c.BinOp("<", c.Name(name), self.scalar(axis.extent)), v.dims, "bool"))
                conds += guards[axis]
                if conds:
                    mask = self.fresh(f"mask_{axis.name}")
                    stmts.append(Assign(mask, self.combine(c.all_of, conds, "bool", order=v.dims).code))
                canon = self._canon(v.code, v.dims, axis, self.p.masks[x.name][axis], guards[axis])
                env[axis] = AxisVal(c.Name(name), v.dims, level_of[axis], c.Name(mask) if mask else None,
                                    block.get(axis) if not guards[axis] else None, canon)

        define(defs[-1], out)
        self._attached(placed, -1, "producer", out)
        self.emit_loops(placed, loop_vars, defs, define, 0, out)
        self._attached(placed, -1, "consumer", out)
        self.stmts = saved

    def _check_tile_numel(self, x: Stage, dims) -> None:
        """Triton's tensors hold at most 2**20 elements: check each tile the kernel materializes (a load,
        an accumulator, a reduction's operand, a stage's value; a dot's (m, n, k) product never is)."""
        numel = 1
        for d in dims:
            numel *= self.extent_value(d, whole=True)
        shape = " x ".join(f"{d}={self.extent_name(d)}" for d in self._order(dims))
        if numel > targets.MAX_TILE_NUMEL:
            raise LoweringError(f"{x.name} works on a tile of {numel} elements ({shape}), but Triton's tensors "
                                f"hold at most {targets.MAX_TILE_NUMEL}; use smaller split factors")
        if len(dims) >= 3 and numel > targets.MAX_TILE_NUMEL_3D:
            raise LoweringError(f"{x.name} works on a {len(dims)}-d tile of {numel} elements ({shape}); past "
                                f"{targets.MAX_TILE_NUMEL_3D} elements in three or more dimensions Triton compiles "
                                f"for minutes; use smaller split factors")
        per_thread = numel * self.unrolled // (32 * self.warps)
        if per_thread > targets.MAX_PER_THREAD:
            copies = f", in {self.unrolled} unrolled copies" if self.unrolled > 1 else ""
            raise LoweringError(
                f"{x.name} works on a tile of {numel} elements ({shape}){copies}: {per_thread} values per "
                f"thread with {self.warps} warp{'s' if self.warps != 1 else ''}. Past {targets.MAX_PER_THREAD} Triton compiles for minutes "
                f"and the kernel spills its registers to local memory; use smaller split factors, unroll "
                f"less, or more warps (num_warps)")

    def _relation_params(self, index) -> None:
        """Each knob (and size) of the stage's splits and fusions is a parameter of the kernel, even one that
        no offset needs (a split whose outer loop runs once): registered here, in the reverse order of the
        relations, the order the kernel's signature lists them in."""
        for rel in reversed(index.relations):
            if isinstance(rel, Split):
                self.factor(rel.factor)
            elif rel.group is not None:
                self.scalar(rel.outer.extent), self.scalar(rel.inner.extent), self.factor(rel.group)
            else:
                self.scalar(rel.inner.extent)

    def grouped(self, x: Stage, rel: Fuse, r, known: dict, out: list) -> None:
        """Name the values a swizzled grid axis's (outer, inner) pair is made from (`Grouping`,
        tilec/plan/indexmap.py: programs in groups of `group` outer tiles, each group running down its inner
        tiles), then the pair, and put their names in `known`. The fused axis is a grid coordinate
        (placement checks), so these are scalars."""
        g, o, i = r.groups[rel.fused], rel.outer.name, rel.inner.name
        fused = self.index_value(r.value[rel.fused], known).code
        out.append(Comment(f"{x.name}.{rel.fused.name}: programs in groups of {show(self.factor(rel.group))} {o} "
                           "tiles (swizzle)"))
        for hint, e in (("per_group", g.per_group), ("first", g.first), ("group_size", g.size)):
            known[e] = Val(self.emit_stmt(f"{hint}_{o}", self.index_value(e, known).code), (), "int32")
        pair = r.value[rel.outer], r.value[rel.inner]
        codes = [self.index_value(e, known).code for e in pair]
        ov, iv = self.fresh(o), self.fresh(i)
        note = Note(("swizzle(", fused, f", group={factor_value(rel.group, self.config)})"),
                    lhs=(c.Name(ov), ", ", c.Name(iv)))
        out.append(Assign(ov, codes[0]))
        out.append(Assign(iv, codes[1], note))
        known[pair[0]], known[pair[1]] = Val(c.Name(ov), (), "int32"), Val(c.Name(iv), (), "int32")

    def _attached(self, placed: Placed, level: int, which: str, out: list) -> None:
        """Emit what is placed at `placed`'s loop `level`: caches and producers first, consumers after."""
        x = placed.stage
        if which == "consumer" and self.split is not None and self.split.mode == "partial" and x is self.root:
            return  # split_k: the stage is not complete in its partial kernel; its consumers run in the combine
        if which == "producer":
            for c in placed.caches.get(level, []):
                self.emit_cache(c, x, level, out)
                self.caches_here.add(c.name)
        for other in (placed.producers if which == "producer" else placed.consumers).get(level, []):
            where = placed.layout.loops[level].name if level >= 0 else "grid"
            out.append(Comment(f"{other.name} computed at {x.name}.{other.stage.attach[1].name}"
                               + (f" (loop {where})" if where != other.stage.attach[1].name and level >= 0 else "")
                               + (": its region, in memory" if other.name in self.p.plan.scratch else "")))
            self.emit_stage(other, out)
            if other.name in self.p.plan.scratch:  # its readers load it back, other threads' elements too
                out.append(Barrier(Note((f"  # {other.name}'s region stored: the program's threads wait",),
                                        op="", lhs=("barrier",))))
                self.materialized.add(other.name)

    def emit_cache(self, c: Stage, x: Stage, level: int, out: list) -> None:
        """A cache_read placed here (x's loop `level`): load now the tiles of the cached tensor that its
        readers use. A reader computed further in (placed in x's loops, directly or through others) gets its
        tile here when every index of it is known here: the axes it takes from x's loops down to this one,
        and its own axes where each is one tile over its whole extent (no loop of its own runs over them);
        its load later finds that tile (the same elements: `shared_load`)."""
        saved, self.stmts = self.stmts, out
        tma = bool(factor_value(c.tma, self.config))
        for reader in c.readers:
            nodes = [n for n in walk(reader.tensor.body) if isinstance(n, Load) and n.tensor is c.tensor]
            out.append(Comment(f"{c.name}: tile of {c.tensor.name} read by {reader.name}, loaded here"))
            if reader is x:
                env = self.env[x.name]
                for node in nodes:
                    key = ("load", x.name, repr(node))
                    if key in self.scopes[-1]:
                        continue
                    late = [i.name for i in node.indices for i in walk(i)
                            if isinstance(i, IterVar) and i in env and env[i].level > level]
                    missing = [i.name for i in node.indices for i in walk(i) if isinstance(i, IterVar) and i not in env]
                    if late or missing:
                        raise LoweringError(
                            f"{c.name} is placed where the tile of {node!r} is not yet known: its index "
                            f"{', '.join(late or missing)} changes in a loop inside that place; place {c.name} at "
                            f"that loop instead")
                    self.scopes[-1][key] = self.emit_load(node, x, f"{c.tensor.name.lower()}_tile", tma=tma)
                continue
            placed = self.p.plan.placed.get(reader.name)
            if placed is None or not self._inside(placed, x):
                raise LoweringError(f"{c.name} is placed in {x.name}'s loop, but its reader {reader.name} is not "
                                    f"computed inside {x.name}'s loops; place {c.name} in a loop of {reader.name} or "
                                    f"of the stage {reader.name} is computed at")
            before = self.env.get(reader.name)
            env = self.env[reader.name] = {}
            try:
                for node in nodes:
                    for i in node.indices:
                        for a in walk(i):
                            if isinstance(a, IterVar) and a not in env:
                                v = self._hoisted_axis(placed, a, x, level, out)
                                if v is None:
                                    raise LoweringError(
                                        f"{c.name} is placed where the tile of {node!r} is not yet known: {reader.name}'s "
                                        f"index {a.name} changes in a loop inside that place (of {reader.name}'s or "
                                        f"of the stages it is computed in); place {c.name} at that loop instead")
                                env[a] = v
                    v = self.emit_load(node, reader, f"{c.tensor.name.lower()}_tile", tma=tma)
                    self._remember_load(node, reader, v)
            finally:
                if before is None:
                    del self.env[reader.name]
                else:
                    self.env[reader.name] = before
        self.stmts = saved

    def _inside(self, placed: Placed, x: Stage) -> bool:
        """Whether `placed` is computed in x's loops (directly, or in a stage that is)."""
        t = placed.target
        while t is not None:
            if t.stage is x:
                return True
            t = t.target
        return False

    def _hoisted_axis(self, p: Placed, a: IterVar, x: Stage, level: int, out: list) -> AxisVal | None:
        """Stage p's axis `a` as known at x's loop `level`, where p runs further in; None where a loop inside
        that place changes it. An axis p takes from x's loops is x's (defined at `level` or above); one p
        takes from a stage in between is that stage's; p's own axis is defined here if it is one tile over
        its whole extent."""
        if a in p.bound:
            if p.target.stage is x:
                v = self.env[x.name].get(p.bound[a])
                return v if v is not None and v.level <= level else None
            return self._hoisted_axis(p.target, p.bound[a], x, level, out)
        tile = self.p.plan._tile(p, a)
        if tile is None:
            return None
        lay = p.layout
        split = lay.index.split_of(a)
        dim = self.fresh(split.inner.name)
        self.dim_order.append(dim)
        self.dim_extent[dim] = self.scalar(split.factor) if isinstance(split.factor, Knob) else c.Num(tile[0])
        value = c.call("arange", 0, self.dim_extent[dim])
        name = self.fresh(f"offs_{a.name}")
        out.append(Assign(name, value))
        masked = self.p.masks[p.name][a]
        mask = None
        if masked:
            mask = self.fresh(f"mask_{a.name}")
            out.append(Assign(mask, c.BinOp("<", c.Name(name), self.scalar(a.extent))))
        return AxisVal(c.Name(name), (dim,), level, c.Name(mask) if mask else None, c.Num(0),
                       self._canon(value, (dim,), a, masked, []))

    def _canon(self, code: c.Ex, dims, axis: IterVar, masked: bool, guards) -> tuple:
        """What an axis's offsets and mask are, whatever their names (`AxisVal.canon`): two axes of one canon
        (in two stages: a row of X read by a max, a sum and a division) read one tile of a tensor. A knob's
        constexpr stands for its value: a tile of BLOCK = 64 is a tile of 64 (review F5)."""
        values = {k: c.Num(v) for k, v in self.config.items()}
        return (c.rename(code, values), tuple(c.rename(self.dim_extent[d], values) for d in dims),
                size_text(axis.extent) if masked else "unmasked", tuple(c.rename(g.code, values) for g in guards))

    def emit_loops(self, placed, loop_vars, defs, define, n, out) -> None:
        x, lay = placed.stage, placed.layout
        if n == lay.first_reduce and x.tensor.is_reduction and self.split is not None and x is self.root:
            acc = self.acc_init(x, out)
            online = self.online_init(placed, out, looped=True) if placed.online else None
            if self.split.mode == "partial":  # this program's chunk of the loop, its sum to the workspace
                self.emit_reduce_loops(placed, loop_vars, defs, define, n, out, acc, online)
                self.store_partial(x, acc, out, online)
                return
            self.combine_partials(x, acc, out, online)  # the combine kernel: the parts' sums, in order
            result = Val(c.Name(acc[0]), acc[1], acc[2])
            if online:
                result = self.online_finish(placed, online, result, out, looped=False, guarded=True)
            self.finish(x, result, out)
            return
        if n == lay.first_reduce and x.tensor.is_reduction:
            acc = self.acc_init(x, out)
            online = self.online_init(placed, out, looped=n < len(lay.loops)) if placed.online else None
            self.emit_reduce_loops(placed, loop_vars, defs, define, n, out, acc, online)
            result = Val(c.Name(acc[0]), acc[1], acc[2])
            if n < len(lay.loops) and dtypes.is_float(acc[2]) and (acc[2] == x.tensor.dtype or online):
                # Triton 3.6's TritonGPUOptimizeThreadLocality pass asserts (a compiler abort) when the
                # result of a float reduction loop has several uses: read it through one add. Exact for
                # a sum (its +0.0 start never turns into -0.0); a max/min of -0.0 returns +0.0.
                result = Val(c.BinOp("+", c.Name(acc[0]), c.Num(0.0)), acc[1], acc[2])
            if online:
                result = self.online_finish(placed, online, result, out, looped=n < len(lay.loops))
            self.finish(x, result, out)
            return
        if n == len(lay.loops):
            self.compute(x, out)
            return
        self._loop(placed, loop_vars, defs, define, n, out,
                   lambda body: self.emit_loops(placed, loop_vars, defs, define, n + 1, body))

    def emit_reduce_loops(self, placed, loop_vars, defs, define, n, out, acc, online=None) -> None:
        if n == len(placed.layout.loops):
            if online:
                self.online_update(placed, acc, online, out)
            else:
                self.update(placed.stage, acc, out)
            return
        inner = lambda body: self.emit_reduce_loops(placed, loop_vars, defs, define, n + 1, body, acc, online)  # noqa: E731
        pieces = self.online_pieces.get(placed.name)
        if online and pieces and pieces[0] == n:  # the online loop over the tiles its mask admits, in order
            for start, end, fold, what in pieces[1]:
                self.piece_fold = fold  # folded in the members' summands only (online_update), not in the
                self._loop(placed, loop_vars, defs, define, n, out, inner, (start, end, what))  # stages in
            self.piece_fold = set()                                        # the loop, whose axes are theirs
            return
        self._loop(placed, loop_vars, defs, define, n, out, inner)

    # -- the online rewrite (tilec/ir/online.py) --------------------------------------------------
    def online_init(self, placed: Placed, out: list, looped: bool) -> dict:
        """The accumulators of the statistics `placed`'s loop carries (online), beside its own: the running
        max at -inf, each sum at 0, laid out over the target's tiles of their axes."""
        x = placed.stage
        form = self.p.plan.online[x.name]
        env = self.env[x.name]
        out.append(Comment(f"{', '.join(t.name for t in form.stats)}: online statistics of {x.name}'s loop "
                           + ("(a running max; the sums rescaled by exp(max_old - max_new) as it grows)"
                              if looped else "(its loop runs once here: one tile, nothing to rescale)")))
        accs = {}
        for st in placed.online:
            t = st.stage.tensor
            axes = form.members[t.name].axes
            self.env[t.name] = {a: env[b] for a, b in axes.items() if b in env}  # spatial: the target's
            self.placed[t.name] = st
            self.stages.append(t.name)
            dims = self._order({d for a in t.axis for d in self.env[t.name][a].dims})
            name = self.fresh(f"acc_{t.name}")
            init = _IDENTITY[t.body.op]
            out.append(Comment(compute_text(t)))
            out.append(AccInit(name, self.shape(dims), init, "float32",
                               Note((init, f"  # float32 running {t.body.op} of {t.name}"), dims)))
            accs[t.name] = (name, dims, "float32")
        if looped and form.mask is not None and factor_value(x.online_skip, self.config) and self.split is None:
            saved, self.stmts = self.stmts, out  # the bounds go here, before the loop (fuzz seed 8201491)
            self._online_bounds(placed, form, out)  # (split_k: every tile of the chunk, masked)
            self.stmts = saved
        return accs

    def _online_bounds(self, placed: Placed, form, out: list) -> None:
        """Where the max's operand is where(cond, x, -inf) with cond linear in the axes: the tiles of the
        online loop where cond holds somewhere (the others add each member's identity) and those where it
        holds everywhere (no mask needed), from cond at the tile's corners; the loop then runs as up to
        three loops in order: masked, unmasked, masked. Nothing is done where cond is not of that form."""
        from tilec.ir.online import inequalities
        x, lay = placed.stage, placed.layout
        (j,) = x.tensor.body.axes
        loops = [n for n, leaf in enumerate(lay.loops) if j in lay.origin[leaf]]
        split = lay.index.split_of(j)
        ineqs = inequalities(form.mask)
        if ineqs is None or len(loops) != 1 or split is None or lay.loops[loops[0]] is not split.outer \
                or split.inner not in lay.tiles:
            return
        env = self.env[x.name]
        bn = self.factor(split.factor)

        def corner(a, high: bool) -> c.Ex | None:
            """The least (or greatest) value of axis a over the tile, or None if it is not a block."""
            if isinstance(a, SizeVar):
                return self.scalar(a)
            v = env.get(a)
            if v is None:
                return None
            if not v.dims:
                return v.code
            if v.block is None or len(v.dims) != 1:
                return None
            return c.BinOp("-", c.BinOp("+", v.block, self.dim_extent[v.dims[0]]), c.Num(1)) if high else v.block

        def total(rest: dict, high: bool, sign: int, plus: list) -> c.Ex | None:
            """sign * (the linear `rest`'s least (high=False) or greatest value over the tile), then the terms
            `plus` ((coefficient, expression) pairs), added left to right."""
            const = sign * rest.get(None, 0)
            terms = []
            for k, coef in rest.items():
                if k is None:
                    continue
                v = corner(k, high == (coef > 0))
                if v is None:
                    return None
                terms.append((coef * sign, v))
            if const:
                terms.append((const, None))
            return _linear(terms + plus)

        uppers, lowers, full_hi, full_lo, whole = [], [], [], [], True
        for q in ineqs:
            cj = q.get(j, 0)
            if cj not in (-1, 0, 1):
                return
            rest = {k: v for k, v in q.items() if k is not j}

            if cj == 1:    # j <= -rest: tiles from the first, up to the last whose first (every) j is <= -rest
                hi_t, full_t = total(rest, False, -1, [(1, bn)]), total(rest, True, -1, [(1, None)])
                if hi_t is None or full_t is None:
                    return
                uppers.append(c.BinOp("//", c.call("maximum", hi_t, 0), bn))
                full_hi.append(c.BinOp("//", c.call("maximum", full_t, 0), bn))
            elif cj == -1:  # j >= rest
                lo_t, full_t = total(rest, False, 1, [(0, None)]), total(rest, True, 1, [(1, bn), (-1, None)])
                if lo_t is None or full_t is None:
                    return
                lowers.append(c.BinOp("//", c.call("maximum", lo_t, 0), bn))
                full_lo.append(c.BinOp("//", c.call("maximum", full_t, 0), bn))
            elif total(rest, False, 1, []) is None:
                return
            else:
                whole = False  # holds or not for the whole tile alike: no tile known unmasked
        if not uppers and not lowers:
            return
        n = self.scalar(lay.loops[loops[0]].extent)

        def fold(op, items):
            out_ = items[0]
            for it in items[1:]:
                out_ = c.call(op, out_, it)
            return out_
        name = lay.loops[loops[0]].name
        cond = repr(form.mask)
        out.append(Comment(f"{x.name}.{name}: only the tiles where {cond} holds somewhere; unmasked where it holds "
                           f"everywhere (the other tiles add nothing: exp(-inf) = 0)"))
        lo = self.emit_stmt(f"{name}_lo", fold("maximum", lowers)) if lowers else c.Num(0)
        hi = self.emit_stmt(f"{name}_hi", fold("minimum", uppers + [n])) if uppers else n
        pieces = []
        if whole:
            f_lo = self.emit_stmt(f"{name}_full_lo", fold("minimum", [fold("maximum", full_lo + [lo]), hi])
                                  if full_lo else lo)
            f_hi = self.emit_stmt(f"{name}_full_hi", fold("maximum", [fold("minimum", full_hi + [hi]), f_lo])
                                  if full_hi else hi)
            if full_lo:
                pieces.append((lo, f_lo, set(), f"tiles where {cond} holds in part (masked)"))
            pieces.append((f_lo, f_hi, {cond}, f"tiles where {cond} holds everywhere (unmasked)"))
            if full_hi:
                pieces.append((f_hi, hi, set(), f"tiles where {cond} holds in part (masked)"))
        else:
            pieces.append((lo, hi, set(), f"tiles where {cond} holds somewhere (masked)"))
        self.online_pieces[x.name] = (loops[0], pieces)

    def online_update(self, placed: Placed, acc, accs: dict, out: list) -> None:
        """One tile of the online loop: the tile's max and the new running max; each sum (and the target)
        rescaled by exp(max_old - max_new) and given the tile's terms exp(X - max_new) * ...; the max
        taken last. Where the max is still -inf (all of it masked so far) the exponents use 0: the terms
        are 0 and nothing is rescaled into NaN."""
        x = placed.stage
        form = self.p.plan.online[x.name]
        env = self.env[x.name]
        red: Reduce = x.tensor.body
        looped = placed.layout.first_reduce < len(placed.layout.loops)  # reduction loops, not just any loop
        rdims = self._order({d for a in red.axes for d in env[a].dims})
        m = form.max
        m_acc, m_dims, _ = accs[m.name]
        saved, self.stmts = self.stmts, out
        self.fold = self.piece_fold  # the mask, in the target's axes, where it holds on the whole tile
        tile = self.tile_part(x, Reduce("max", form.members[m.name].body, red.axes, "float32"), m_dims, rdims,
                              "float32", name=m.name)
        tile = self.emit_stmt(f"tile_{m.name}", tile) if not isinstance(tile, c.Name) else tile
        new = self.emit_stmt(f"{m.name}_new", c.call("maximum", c.Name(m_acc), tile, nan=True),
                             Note(("max(", c.Name(m_acc), f", max over tile [{', '.join(rdims)}] of "
                                   f"{form.members[m.name].body!r})"), m_dims))
        safe, alpha = new, None  # one tile: a max of -inf makes the row NaN, as the naive compute does
        if looped:
            out.append(Comment("a max still -inf subtracts 0 instead: exp(-inf - -inf) would be NaN"))
            safe = self.emit_stmt(f"{m.name}_safe", _where(c.BinOp("==", new, c.Num(float("-inf"))), c.Num(0.0), new))
            alpha = Val(self.emit_stmt(f"alpha_{m.name}", c.call("exp", c.BinOp("-", c.Name(m_acc), safe)),
                                       Note(("exp(", c.Name(m_acc), " - ", new, ")"))), m_dims, "float32")
        # the members read the max as its running value
        axes = form.members[m.name].axes
        self.scopes[-1][m.name] = (Val(safe, m_dims, "float32"), [env[axes[a]].code for a in m.axis],
                                   [(env[axes[a]].canon, env[axes[a]].dims) for a in m.axis])
        for t in form.sums:
            self.update(x, accs[t.name], out, Reduce("sum", form.members[t.name].body, red.axes, "float32"), alpha)
        body = form.members[x.name].body
        self.update(x, acc, out, Reduce("sum", body, red.axes, red.dtype), alpha)
        out.append(Update(m_acc, new, Note((new,), m_dims)))
        self.fold = set()
        self.stmts = saved

    def online_finish(self, placed: Placed, accs: dict, result: Val, out: list, looped: bool,
                      guarded: bool | None = None) -> Val:
        """After the online loop: each statistic's final value (rounded, stored, kept for its readers), and
        the target's sum divided by the sum statistics it divides by. `guarded` (default: `looped`): the
        sums were computed with the -inf guard (a loop, or split_k's merge), so where the final max is
        -inf (every term exp(-inf - -inf), NaN as written) they are made NaN, as the naive compute has them."""
        x = placed.stage
        form = self.p.plan.online[x.name]
        guarded = looped if guarded is None else guarded
        m_acc, m_dims, _ = accs[form.max.name]
        nan_where = None
        if guarded:
            out.append(Comment("a row whose max is -inf: every term is exp(-inf - -inf), NaN as written"))
            saved, self.stmts = self.stmts, out
            nan_where = Val(self.emit_stmt(f"{form.max.name}_none", c.BinOp("==", c.Name(m_acc), c.Num(float("-inf")))),
                            m_dims, "bool")
            self.stmts = saved
        for st in placed.online:
            t = st.stage.tensor
            name, dims, dtype = accs[t.name]
            value = c.BinOp("+", c.Name(name), c.Num(0.0)) if looped else c.Name(name)  # one use of a loop's result
            if nan_where is not None and t is not form.max:
                value = _where(self.expand(nan_where, dims), c.Num(float("nan")), value)
            out.append(Comment(f"{t.name} computed in {x.name}'s loop (online)"))
            self.finish(st.stage, Val(value, dims, dtype), out)
        if nan_where is not None:
            result = Val(_where(self.expand(nan_where, result.dims), c.Num(float("nan")), result.code),
                         result.dims, result.dtype)
        for t in form.members[x.name].divisors:
            val = self.in_scope(t.name)[0]
            result = Val(c.BinOp("/", result.code, self.expand(val, result.dims)), result.dims, result.dtype)
        return result

    def _loop(self, placed, loop_vars, defs, define, n, out, inner, piece=None) -> None:
        """Loop n of a stage: offsets it defines, what is placed in it, the inner part, consumers. `piece`:
        (start, end, what): the loop over that range only (an online loop's tiles, `online_pieces`)."""
        loop = self.open_loop(placed.stage, placed.layout, loop_vars, n, out, piece)
        self.scopes.append({})
        copies = self.unrolled
        if placed.layout.kind[placed.layout.loops[n]] == "unroll":
            ext = placed.layout.loops[n].extent  # a Const or a Knob (placement checks)
            self.unrolled *= max(1, ext.value if isinstance(ext, Const) else factor_value(ext, self.config))
        define(defs[n], loop.body)
        self._attached(placed, n, "producer", loop.body)
        inner(loop.body)
        self._attached(placed, n, "consumer", loop.body)
        self.unrolled = copies
        self.scopes.pop()

    def open_loop(self, x, lay, loop_vars, n, out, piece=None) -> For:
        a = lay.loops[n]
        st = lay.stage
        stages = st.pipelines.get(a)
        stages = None if stages is None else self.factor(stages)  # (its parameter first: the signature's order)
        what = "reduction" if a.kind == "reduce" else "spatial"
        role = f"{x.name}.{a.name}: {'unrolled' if lay.kind[a] == 'unroll' else 'serial'} {what} loop"
        extent, start = self.scalar(a.extent), None
        if self.part is not None and x is self.root and a is self.split.axis:  # this program's chunk
            chunk = self.fresh(f"chunk_{a.name}")
            whole = extent
            value = c.call("cdiv", whole, self._parts())
            out.append(Assign(chunk, value, Note((value, "  # iterations per part"))))
            start = c.BinOp("*", c.Name(self.part), c.Name(chunk))
            extent = c.call("minimum", c.BinOp("+", start, c.Name(chunk)), whole)
            role = f"{x.name}.{a.name}: serial reduction loop, one chunk per part (split_k)"
        if piece is not None:
            start, extent, what = piece
            start = None if start == c.Num(0) else start
            role = f"{x.name}.{a.name}: serial reduction loop, {what}"
        loop = For(loop_vars[a], extent, lay.kind[a], stages, role,
                   key=f"{x.name}.{a.name}", start=start)
        out.append(loop)
        return loop

    # -- computing ------------------------------------------------------------------------------
    def spatial_dims(self, x: Stage) -> tuple[str, ...]:
        env = self.env[x.name]
        return self._order({d for a in x.tensor.axis for d in env[a].dims})

    def acc_init(self, x: Stage, out: list):
        red: Reduce = x.tensor.body
        dims = self.spatial_dims(x)
        self._check_tile_numel(x, dims)
        name = self.fresh(f"acc_{x.name}")
        is_f = dtypes.is_float(red.dtype)
        init = (_IDENTITY if is_f else _IDENTITY_INT)[red.op]
        out.append(Comment(compute_text(x.tensor)))
        out.append(AccInit(name, self.shape(dims), init, red.dtype,
                           Note((init, f"  # {red.dtype} accumulator of {x.name}"), dims)))
        return name, dims, red.dtype

    def update(self, x: Stage, acc, out: list, red: Reduce | None = None, rescale: Val | None = None) -> None:
        """The innermost step of a reduction: fold this tile of the body into the accumulator. `red`: the
        reduction to fold (default: the stage's own; online: its rewritten summand); `rescale`: a factor
        the accumulator is multiplied by first (online: exp(m_old - m_new))."""
        name, sdims, acc_dtype = acc
        red = red if red is not None else x.tensor.body
        env = self.env[x.name]
        rdims = self._order({d for a in red.axes for d in env[a].dims})
        saved, self.stmts = self.stmts, out
        if rescale is not None:
            out.append(Update(name, c.BinOp("*", c.Name(name), self.expand(rescale, sdims)),
                              Note((rescale.code, "  # the running max grew"), sdims, "*=")))
        dot = self.try_dot(x, red, sdims, rdims, name, out)
        if not dot:
            body = self.tile_part(x, red, sdims, rdims, acc_dtype)
            kw = {"nan": True} if red.op != "sum" and dtypes.is_float(acc_dtype) else {}
            part = self.expand(Val(body, sdims, acc_dtype), sdims, full=True)
            value = c.BinOp("+", c.Name(name), part) if red.op == "sum" else \
                c.call(f"{red.op}imum", c.Name(name), part, **kw)
            over = f"  over tile [{', '.join(rdims)}]"
            note = Note((f"{red.body!r}{over}",), sdims, "+=") if red.op == "sum" else \
                Note((f"{red.op}(", c.Name(name), f", {red.body!r}){over}"), sdims)
            out.append(Update(name, value, note))
        self.stmts = saved

    def tile_part(self, x: Stage, red: Reduce, sdims, rdims, acc_dtype: str, name: str | None = None):
        """The reduction of this tile of `red`'s body over its reduce dims (masked with the identity where the
        reduce axes overrun; a max/min that meets a NaN is NaN), laid out over `sdims`, in `acc_dtype`.
        `name`: whose tile value it is (default: stage x's)."""
        env = self.env[x.name]
        loads: dict = {}
        v = self.emit(red.body, x, loads)
        if v.dtype != acc_dtype:  # tl.sum of bools is uint32 on the GPU: sum in the accumulator type
            v = Val(c.Cast(v.code, acc_dtype), v.dims, acc_dtype)
        full = self._order(set(sdims) | set(rdims))
        self._check_tile_numel(x, full)
        body = self.expand(v, full, full=True)
        masks = [Val(env[a].mask, env[a].dims, "bool") for a in red.axes if env[a].mask]
        if (red.op == "sum" and dtypes.is_float(acc_dtype) and len(full) >= 3 and not masks
                and _is_product(red.body)):
            # Triton rewrites sum(x[:, :, None] * y[None, :, :], axis=1) into a TF32 tl.dot, which
            # is wrong for a k tile narrower than its instruction (fuzz seed 900441): not a bare product
            self.stmts.append(Why("tf32_sum"))
            body = c.BinOp("+", body, c.Num(0.0))
        if masks:
            m = self.combine(c.all_of, masks, "bool")
            ident = (_IDENTITY if dtypes.is_float(acc_dtype) else _IDENTITY_INT)[red.op]
            body = _where(self.expand(m, full), body, ident)
        nan = red.op != "sum" and dtypes.is_float(acc_dtype)
        for d in sorted(rdims, key=full.index, reverse=True):
            if nan:  # the plain max/min skip NaN; torch's amax/amin return it: a reduction whose combine keeps it
                body = c.call("reduce", body, axis=full.index(d), op=red.op)
            else:
                body = c.call(red.op, body, axis=full.index(d))
        if nan:
            self.stmts.append(Why("nan_reduce", red.op))
            body = self.emit_stmt(f"tile_{name or x.name}", body)
        if acc_dtype not in ("float32", "int32"):  # Python numbers in where() widen to float32 / int32
            body = c.To(body, acc_dtype)
        return body

    def try_dot(self, x, red, sdims, rdims, acc, out) -> bool:
        """Lower sum(a * b) over one reduce tile dim to a `Dot` when a covers (m, k) and b (k, n)."""
        if red.op != "sum" or red.dtype != "float32" or len(sdims) != 2 or len(rdims) != 1:
            return False
        body = red.body
        while isinstance(body, Cast) and body.dtype == "float32":
            body = body.a
        if not (isinstance(body, Binary) and body.op == "*"):
            return False
        m, n = sdims
        k = rdims[0]
        da, db = self.dims_of(body.a, x), self.dims_of(body.b, x)
        if da == {m, k} and db == {k, n}:
            lhs, rhs = body.a, body.b
        elif db == {m, k} and da == {k, n}:
            lhs, rhs = body.b, body.a
        else:
            return False
        if any(self.extent_value(d) < 16 for d in (m, n, k)):
            return False
        loads: dict = {}
        env = self.env[x.name]
        kmasks = [Val(env[a].mask, env[a].dims, "bool") for a in red.axes if env[a].mask]

        def operand(e: Expr, order: tuple[str, str]) -> Val:
            inner = e
            while isinstance(inner, Cast) and inner.dtype == "float32":
                inner = inner.a
            if isinstance(inner, Load):
                v = self.load(inner, x, loads)
            elif isinstance(inner, Cast) and dtypes.is_float(inner.dtype) and dtypes.compute_dtype(inner.dtype) != inner.dtype:
                # a value rounded to bfloat16 (attention's P) goes to tl.dot as that type, not widened back
                a = self.emit(inner.a, x, loads)
                v = Val(c.To(castable(a, inner.dtype), inner.dtype), a.dims, inner.dtype)
            else:
                v = self.emit(e, x, loads)
            padded = isinstance(v.code, c.Name) and {m.code for m in kmasks} <= self.zero_outside.get(v.code.id, set())
            v = Val(self.expand(v, order), order, v.dtype)
            if kmasks and not padded:
                # past the end of k, tl.dot multiplies the other operand's 0 by this one: a value computed in
                # the kernel (log(0) = -inf there, say) would make 0 * inf = NaN of every sum (seed 197481165)
                self.stmts.append(Why("dot_zero"))
                name = self.emit_stmt("operand", v.code)
                m = self.combine(c.all_of, kmasks, "bool", order=order)
                v = Val(_where(m.code, name, c.call("zeros_like", name)), order, v.dtype)
            return v

        a, b = operand(lhs, (m, k)), operand(rhs, (k, n))
        # bf16/fp16/fp8 pairs go to tl.dot as they are; anything else (or bf16 in the interpreter) is
        # widened to float32 with input_precision="ieee", decided when the kernel is rendered (nest.Dot)
        out.append(Dot(acc, a.code, a.dtype, b.code, b.dtype,
                       Note((f"{red.body!r}  over tile [{k}]",), (m, n), "+=")))
        return True

    def _parts(self) -> c.Ex:
        """split_k's number of parts (an int, or a knob's constexpr parameter)."""
        return self.scalar(self.split.parts_expr)

    def _tile_in(self, x: Stage, t, lead: c.Ex | None = None) -> tuple[Val, c.Ex | None]:
        """(address, mask) of stage x's tile in tensor `t` (x's own tensor, or split_k's workspace, whose
        first index `lead` is the part), masked where x's axes may overrun."""
        env = self.env[x.name]
        idx = ([Val(lead, (), "int32")] if lead is not None else []) + \
              [Val(env[a].code, env[a].dims, "int32") for a in x.tensor.axis]
        addr = self.address(self.tensor_param(t), t, idx)
        masks = [Val(env[a].mask, env[a].dims, "bool") for a in x.tensor.axis if env[a].mask]
        mask = self.combine(c.all_of, masks, "bool", order=addr.dims).code if masks else None
        return addr, mask

    def store_partial(self, x: Stage, acc, out: list, online=None) -> None:
        """split_k's partial kernel: this part's sum of the tile, to its slice of the workspace (or added
        to the one sum with an atomic, deterministic=False); an online loop's statistics too, each to its
        workspace (the sum is as the loop left it: rescaled to this part's max, not divided)."""
        name, dims, dtype = acc
        ws = self.split.workspace
        atomic = not self.split.deterministic
        for st, w, (n, d, t) in [(x, ws, acc)] + [(self.placed[s].stage, sws, online[s]) for s, sws in self.split.stats]:
            addr, mask = self._tile_in(st, w, None if atomic else c.Name(self.part))
            if w.name not in self.stores:
                self.stores.append(w.name)
            axes = ", ".join(a.name for a in st.tensor.axis)
            lhs = (f"{w.name}[{axes}]",) if atomic else (f"{w.name}[", c.Name(self.part), f", {axes}]")
            note = Note((c.Name(n), f"  # {'atomic add' if atomic else 'store'}, {t}"), op="+=" if atomic else "=",
                        lhs=lhs)
            out.append(Store(addr.code, self.expand(Val(c.Name(n), d, t), addr.dims, full=True), mask, note,
                             atomic=atomic))

    def combine_partials(self, x: Stage, acc, out: list, online=None) -> None:
        """split_k's combine kernel: the parts' sums of the tile added in order, part 0 first (or the one
        atomic sum loaded), into the accumulator; the stage is rounded and its epilogue runs after. For an
        online loop, the parts' states are merged in order as its tiles were: the max of the maxes, every
        sum rescaled to it (flash-decoding's combine)."""
        if online:
            self._merge_online_parts(x, acc, online, out)
            return
        name, dims, dtype = acc
        ws = self.split.workspace
        if ws.name not in self.loads:
            self.loads.append(ws.name)
        part = None
        if self.split.deterministic:  # a loop over the parts, part 0 first
            part = self.fresh("part")
            loop = For(part, self._parts(), "serial", None, f"{x.name}: the split_k parts' sums, added in order")
            out.append(loop)
            out = loop.body
        saved, self.stmts = self.stmts, out  # what the addresses need goes where the load is
        addr, mask = self._tile_in(x, ws, c.LoopIndex(part) if part else None)
        part_tile = self.fresh(f"{ws.name.lower()}_tile")
        where = (f"{ws.name}[", c.LoopIndex(part), ", ...]") if part else (f"{ws.name}[...]",)
        out.append(LoadTile(part_tile, addr.code, mask, Note(where), dtype=ws.dtype))
        tile = self.expand(Val(c.Name(part_tile), addr.dims, dtype), dims, full=True)  # in the accumulator's order
        out.append(Update(name, c.BinOp("+", c.Name(name), tile),
                          Note((c.Name(part_tile),), dims if part else None, "+=")))
        self.stmts = saved

    def _merge_online_parts(self, x: Stage, acc, accs: dict, out: list) -> None:
        """The combine kernel of an online loop's split_k: for each part in order, its max m_p, sums l_p and
        the target's sum r_p: m = max(m, m_p); every sum s = s * exp(m_old - m) + s_p * exp(m_p - m)."""
        form = self.p.plan.online[x.name]
        part = self.fresh("part")
        loop = For(part, self._parts(), "serial", None,
                   f"{x.name}: the split_k parts' states merged in order (online: rescaled to the running max)")
        out.append(loop)
        body = loop.body
        saved, self.stmts = self.stmts, body
        tiles, workspace = {}, {}
        for st, w, (_, _, t) in [(x, self.split.workspace, acc)] + \
                [(self.placed[s].stage, sws, accs[s]) for s, sws in self.split.stats]:
            if w.name not in self.loads:
                self.loads.append(w.name)
            addr, mask = self._tile_in(st, w, c.LoopIndex(part))
            tile = self.fresh(f"{w.name.lower()}_tile")
            body.append(LoadTile(tile, addr.code, mask, Note((f"{w.name}[", c.LoopIndex(part), ", ...]")), dtype=w.dtype))
            tiles[st.name] = Val(c.Name(tile), addr.dims, t)
            workspace[st.name] = w.name
        m = form.max.name
        m_acc, m_dims, _ = accs[m]
        mp = Val(self.expand(tiles[m], m_dims), m_dims, "float32")
        new = self.emit_stmt(f"{m}_new", c.call("maximum", c.Name(m_acc), mp.code, nan=True),
                             Note(("max(", c.Name(m_acc), f", {workspace[m]}[", c.LoopIndex(part), "])")))
        body.append(Comment("a max still -inf subtracts 0 instead: exp(-inf - -inf) would be NaN"))
        safe = self.emit_stmt(f"{m}_safe", _where(c.BinOp("==", new, c.Num(float("-inf"))), c.Num(0.0), new))
        old_scale = Val(self.emit_stmt(f"alpha_{m}", c.call("exp", c.BinOp("-", c.Name(m_acc), safe))), m_dims, "float32")
        part_scale = Val(self.emit_stmt(f"beta_{m}", c.call("exp", c.BinOp("-", mp.code, safe))), m_dims, "float32")
        for name, (n, d, t) in [(s, accs[s]) for s in (t.name for t in form.sums)] + [(x.name, acc)]:
            tile = Val(self.expand(tiles[name], d), d, t)
            body.append(Update(n, c.BinOp("+", c.BinOp("*", c.Name(n), self.expand(old_scale, d)),
                                          c.BinOp("*", tile.code, self.expand(part_scale, d))),
                               Note((c.Name(n), " * ", old_scale.code, f" + {workspace[name]}[", c.LoopIndex(part),
                                     "] * ", part_scale.code), d)))
        body.append(Update(m_acc, new, Note((new,))))
        self.stmts = saved

    def compute(self, x: Stage, out: list) -> None:
        """The body of an elementwise stage at its innermost point: compute, then store/keep."""
        saved, self.stmts = self.stmts, out
        out.append(Comment(compute_text(x.tensor)))
        v = self.emit(x.tensor.body, x, {})
        self.stmts = saved
        self.finish(x, v, out)

    def finish(self, x: Stage, v: Val, out: list) -> None:
        """Round the stage's value to its dtype, store it if memory needs it, keep it for fusion."""
        t = x.tensor
        self._check_tile_numel(x, v.dims)
        name = self.fresh(f"{t.name}_val")
        code = v.code if v.dtype == t.dtype else c.To(castable(v, t.dtype), t.dtype)
        out.append(Assign(name, code, None if x.tensor.is_reduction else Note((repr(t.body),))))
        val = Val(c.Name(name), v.dims, t.dtype)
        env = self.env[x.name]
        if t.name in self.p.stored:
            if t.name not in self.stores:
                self.stores.append(t.name)
            addr, mask = self._tile_in(x, t)
            self._check_tile_numel(x, addr.dims)  # the value is broadcast to the stored tile
            axes = ", ".join(a.name for a in t.axis)
            desc, starts = self.descriptor(t, t.axis, x, addr) if self._tma_store(t) else (None, ())
            note = Note((val.code, f"  # store, {t.dtype}" + ("  (tensor descriptor)" if desc else "")),
                        lhs=(f"{t.name}[{axes}]",))
            out.append(Store(addr.code, self.expand(val, addr.dims, full=True), mask, note, desc=desc, starts=starts))
        self.scopes[-1][t.name] = (val, [env[a].code for a in t.axis], [(env[a].canon, env[a].dims) for a in t.axis])

    def _tma_store(self, t) -> bool:
        """Whether the schedule asks for t's tiles to be stored through a tensor descriptor (cache_write tma)."""
        return any(c.kind == "cache_write" and c.tensor is t and factor_value(c.tma, self.config)
                   for c in self.p.sched.caches)

    def tile_loop(self, lay) -> None:
        """Persistent: the statements after the grid axis's program id run in a loop over the tiles that
        program takes (pid, pid + NUM_PROGS, ...); the launch runs min(#SMs, tiles) programs."""
        var, stmts, n = self.persistent
        axis, _ = lay.persistent
        st = lay.stage
        flatten = st.persistent_axes[axis]  # an int or a knob (a constexpr parameter)
        flat = self.scalar(flatten) if isinstance(flatten, Knob) else c.Num(bool(flatten))
        step = self._param("NUM_PROGS", "programs")
        tile = self.fresh("tile")
        loop = For(tile, self.scalar(axis.extent), "persistent", None,
                   f"{st.name}.{axis.name}: persistent tile loop, {step} programs (min(#SMs, tiles))",
                   step=c.Name(step), flatten=flat)
        loop.body = [TileId(var, tile)] + stmts[n + 1:]
        stmts[n:] = [loop]

    # -- the kernel -----------------------------------------------------------------------------
    def build(self) -> KernelIR:
        body: list = []
        self.stmts = body
        self.emit_stage(self.root_placed, body)
        lay = self.root_placed.layout
        warps = self.warps
        grid = [Const(1, "int32")] * 3
        for a in lay.grid:
            grid[lay.stage.binds[a]] = a.extent
        ndim = max([lay.stage.binds[a] + 1 for a in lay.grid], default=1)
        if self.part is not None:  # split_k's partial kernel: one program per part on a grid dimension
            grid[self.split.dim] = self.split.parts_expr
            ndim = max(ndim, self.split.dim + 1)
        grid = grid[:ndim]
        kinds = {"tensor": 0, "descriptor": 1, "size": 2, "programs": 3, "stride": 4, "constexpr": 5}
        size_order = list(sizes_of(self.p.sched.tensors.values()))
        tensor_order = list(self.p.sched.tensors)

        def rank(p: Param):
            if p.kind == "size" and p.name in size_order:
                return size_order.index(p.name)
            return tensor_order.index(p.tensor) if p.tensor in tensor_order else 0

        if self.persistent:
            self.tile_loop(lay)
        params = sorted(self.params.values(), key=lambda p: (kinds[p.kind], rank(p)))
        mine = set(self.stages) | self.inlined | self.caches_here | {f"{n}_local" for n in self.stages}
        log = [step.text for step in self.p.sched.trace if step.stages & mine]  # the steps about its stages
        name = (f"{self.root.name}_partial_kernel" if self.part is not None  # split_k: its parts' sums
                else self.p.plan.kernel_name(self.root.name))
        header = [f"{name} (tilec): computes {', '.join(self.stages)} in the loops of stage {self.root.name}",
                  f"config: {', '.join(f'{k}={v}' for k, v in sorted(self.config.items())) or 'none (no knobs)'}",
                  "schedule:"] + [f"  {line}" for line in log]
        header += [f"  {n}: default schedule (tiles on its last axes)" for n in self.stages
                   if not self.p.sched.stages[n].touched and self.placed[n].layout.leaves]
        if self.split is not None:
            header.insert(2, f"split_k: {self.split.describe()}")
        return KernelIR(
            name=name, root=self.root.name, stages=self.stages, params=params,
            grid=grid, grid_text=[self.text(g) for g in grid], body=body, header=header, num_warps=warps,
            outputs=self.stores, inputs=self.loads, persistent=self.persistent is not None,
            fp_fusion=any(n in self.p.plan.online for n in self.stages), config=dict(self.config))
