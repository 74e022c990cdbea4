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
loads, broadcasting) are written by `ValueEmitter` (tilec/lower/values.py). Its other parts are mixins,
each in its own file: a reduction's accumulator and steps (reductions.py), a scan's carry and steps
(scans.py), a sort's keys (sorts.py), the online rewrite of a loop's
statistics (online.py), split_k's partial and combine kernels (split_k.py), cache_read's loads (caches.py).
The rewrites of the built IR are passes (passes.py).
"""

from __future__ import annotations

from collections import defaultdict

from tilec.errors import LoweringError
from tilec.ir import dtypes
from tilec.ir.expr import (
    Binary,
    Const,
    Expr,
    IterVar,
    SizeVar,
    size_text,  # noqa: I001
    substitute,
    walk,
)
from tilec.ir.knob import Knob, factor_value
from tilec.ir.tensor import sizes_of
from tilec.lower import code as c
from tilec.lower import targets
from tilec.lower.caches import CacheReads
from tilec.lower.nest import (
    Assign,
    Barrier,
    Comment,
    For,
    KernelIR,
    Note,
    Param,
    ProgramId,
    Store,
)
from tilec.lower.nest_printer import show
from tilec.lower.online import OnlineLoop
from tilec.lower.reductions import Reductions, compute_text
from tilec.lower.scans import Scans
from tilec.lower.scatters import Scatters
from tilec.lower.sorts import Sorts
from tilec.lower.split_k import SplitKParts
from tilec.lower.values import AxisVal, Val, ValueEmitter, castable
from tilec.plan.placement import Placed, block_of, halo_work
from tilec.schedule.schedule import Fuse, Split, Stage


def scalar_code(e: Expr, specialize: dict, param) -> c.Ex:
    """A scalar size expression (sizes, knobs, ints) as an expression of a kernel's parameters: a size in
    `specialize` is its number, another size or a knob the parameter `param(name, kind)` names."""
    if isinstance(e, Const):
        return c.Num(e.value)
    if isinstance(e, SizeVar):
        if e.name in specialize:
            return c.Num(int(specialize[e.name]), size=e.name)
        return c.Name(param(e.name, "size"))
    if isinstance(e, Knob):
        return c.Name(param(e.knob_name, "constexpr"))
    if isinstance(e, Binary) and e.op == "cdiv":
        return c.call("cdiv", scalar_code(e.a, specialize, param), scalar_code(e.b, specialize, param))
    if isinstance(e, Binary) and e.op in ("*", "+", "-", "//", "%"):
        return c.BinOp(e.op, scalar_code(e.a, specialize, param), scalar_code(e.b, specialize, param))
    raise LoweringError(f"cannot use {e!r} as a size in generated code")


_PARAM_KINDS = {"tensor": 0, "descriptor": 1, "size": 2, "programs": 3, "stride": 4, "constexpr": 5}


def param_key(sched):
    """The order of a kernel's parameters (a sort key): tensors, descriptors, sizes, the program count,
    strides, constexprs; within a kind, sizes and tensors in the schedule's order."""
    size_order = list(sizes_of(sched.tensors.values()))
    tensor_order = list(sched.tensors)

    def rank(p: Param):
        if p.kind == "size" and p.name in size_order:
            return size_order.index(p.name)
        return tensor_order.index(p.tensor) if p.tensor in tensor_order else 0

    return lambda p: (_PARAM_KINDS[p.kind], rank(p))


class KernelBuilder(CacheReads, OnlineLoop, SplitKParts, Reductions, Scans, Sorts, Scatters, ValueEmitter):
    """Builds the loop-nest IR of the kernel whose root stage is `root`: its loops, stages and statements
    here, its values in `ValueEmitter` (tilec/lower/values.py), its reductions, online loops, split_k
    kernels and cache_reads in the mixins it inherits."""

    def __init__(self, program, root: Placed, piece=None, split=None):
        self.p, self.root_placed, self.root, self.config = program, root, root.stage, program.config
        self.piece = piece  # (tile axis, start, length): build only this piece of a sub-tiled tile
        self.split = split  # split_k: a SplitK (which of its two kernels this is), or None
        self.part: str | None = None  # split_k's partial kernel: the program id of this program's part
        self.full_extent: dict[str, c.Ex] = {}  # a sub-tiled dim's whole extent, for the size checks
        self.warps = root.layout.warps  # the schedule's num_warps, or the plan's default for its tile
        self.unrolled = 1  # copies of the code being emitted: the product of the enclosing unrolled loops
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
        self.loop_vars: dict[str, dict] = {}  # stage -> its loops' counters (a sliding window reads its place's)
        self.leaf_vals: dict[str, dict] = {}  # stage -> the code of its leaves (a halo's window reads its target's)
        self.online_pieces: dict = {}  # online target -> (its loop's depth, [(start, end, fold, what)])
        self.fold: set[str] = set()  # where() conditions known true here (an online loop's unmasked tiles)
        self.piece_fold: set[str] = set()  # those of the online loop piece being emitted (its members' only)
        self.carries: dict[str, tuple] = {}  # scan stage -> (its carry's name, dims) inside its scan loops

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
        return scalar_code(e, self.p.specialize, self._param)

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
                                    v.canon and (v.canon, "<", size_text(axis.extent)), v.run)
        for axis, h in placed.halo.items():  # a stencil's producer: the window the place's iteration reads
            env[axis] = self._window(placed, axis, h, out)
        leaf_val: dict[Expr, Val] = {}  # the code of each leaf (and of a value named once), by its index-map node
        self.leaf_vals[x.name] = leaf_val
        level_of: dict[IterVar, int] = {}
        saved = self.stmts
        self.stmts = out
        alias = getattr(st, "alias", {})
        for rel in getattr(st, "absorbed", ()):  # WithinPlace: its splits of axes the place gives values
            if isinstance(rel, Fuse) and rel.fused in alias:
                own = alias[rel.fused]
                fixed = rel.inner if own is rel.outer else rel.outer
                out.append(Comment(f"{x.name}: fuse({rel.outer.name}, {rel.inner.name}) absorbed: {fixed.name} follows "
                                   f"{placed.target.name}'s loops (a loop that runs once here), so "
                                   f"{rel.fused.name} loops over {own.name}"))
                continue
            step, axes = ((f"split({rel.parent.name}, {show(self.factor(rel.factor))})", rel.parent.name)
                          if isinstance(rel, Split) else
                          (f"fuse({rel.outer.name}, {rel.inner.name})", f"{rel.outer.name}, {rel.inner.name}"))
            out.append(Comment(f"{x.name}: {step} absorbed: {axes} follow{'s' if isinstance(rel, Split) else ''} "
                               f"{placed.target.name}'s loops, which give "
                               f"{'it its' if isinstance(rel, Split) else 'them their'} values"))
        for a, red in lay.hoisted:
            out.append(Comment(f"{x.name}: spatial loop {a.name} runs outside reduction loop {red.name} (the accumulator "
                               f"holds one tile; each element's updates keep their order)"))
        for a in lay.ignored_binds:
            out.append(Comment(f"{x.name}: bind({a.name}, 'program_id.{st.binds[a]}') ignored: {x.name} is computed in "
                               f"{self.root.name}'s kernel, whose programs are the grid"))
        if lay.grid:
            out.append(Comment(f"{x.name}: grid axes " + ", ".join(
                f"{a.name} -> program_id.{st.binds[a]}" for a in lay.grid)))
        for a in lay.grid:
            var = self.fresh(a.name)
            self.stmts.append(ProgramId(var, st.binds[a]))  # int64 in the int64 form (nest.py)
            leaf_val[a], level_of[a] = Val(c.Name(var), (), "int32"), -1
        if self.split is not None and self.split.mode == "partial" and x is self.root:
            self.part = self.fresh("part")
            out.append(Comment(f"{x.name}: split_k part -> program_id.{self.split.dim}: this program sums one "
                               f"chunk of {self.split.axis.name}"))
            self.stmts.append(ProgramId(self.part, self.split.dim))
        loop_vars = self.loop_vars[x.name] = {}
        for n, a in enumerate(lay.loops):
            loop_vars[a] = self.fresh(a.name)
            leaf_val[a], level_of[a] = Val(c.LoopIndex(loop_vars[a]), (), "int32"), n
        lane_guard: dict[IterVar, Val] = {}  # a padded tile's leaf -> `lane < f` (Layout.padded)
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
            if a in lay.padded:  # a tile of f lanes, no power of two: the next one, its lanes past f masked
                self.dim_extent[dim] = c.Num(lay.padded[a])
                arange = c.call("arange", 0, lay.padded[a])
                lane_guard[a] = Val(c.BinOp("<", arange, self.factor(factor)), (dim,), "bool")
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
        run: dict[IterVar, tuple] = {}  # axis -> (start, f): its f consecutive values here (AxisVal.run)
        for axis in lay.index.originals:
            if axis in env:
                continue
            value[axis] = self.index_value(r.value[axis], leaf_val)
            guards[axis] = [self.index_value(g, leaf_val) for g in r.guards[axis]]
            guards[axis] += [lane_guard[a] for a in dict.fromkeys(walk(r.value[axis])) if a in lane_guard]
            split = lay.index.split_of(axis)
            if axis in r.block and split.inner in lay.tiles:
                start = self.index_value(r.block[axis], leaf_val)
                if not start.dims:
                    block[axis] = start.code
                    if self.piece is not None and self.piece[0] is split.inner and self.piece[1]:
                        piece = c.Num(self.piece[1])  # this piece's place in the sub-tiled tile
                        block[axis] = piece if start.code == c.Num(0) else c.BinOp("+", start.code, piece)
                    if self.piece is None and not r.guards[axis]:
                        run[axis] = (start.code, lay.tile_extent[split.inner])
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
                                    block.get(axis) if not guards[axis] else None, canon, run.get(axis))

        define(defs[-1], out)
        self._attached(placed, -1, "producer", out)
        self.emit_loops(placed, loop_vars, defs, define, 0, out)
        self._attached(placed, -1, "consumer", out)
        self.stmts = saved

    def window(self, placed: Placed, axis: IterVar, h) -> tuple[c.Ex, int, int]:
        """(start, span, n) of the window of producer axis `axis` that one iteration of its place reads
        (`Halo`): its target axis runs over [start, start + span) there (one value, or one tile's block), so
        the reads cover n = span + hi - lo values from start + lo."""
        tv = self.env[placed.target.name][h.target]
        if not tv.dims:
            span, start = 1, tv.code
        elif len(tv.dims) == 1 and tv.run is not None:
            start, span = tv.run
        else:  # several tile dims (a split tile split again): from the smallest value to the largest
            t = placed.target
            own = h.target not in t.bound and h.target not in t.halo  # values from t's own leaves
            block = block_of(t.layout, h.target) if own and self.piece is None else None
            if block is None:
                raise LoweringError(
                    f"{placed.name} is computed at {placed.target.name}'s loops and read at shifted positions of "
                    f"{placed.target.name}.{h.target.name} (a halo), whose values in one iteration there are not "
                    f"one block of a tile (a fused or sub-tiled axis); split {h.target.name} plainly, or compute "
                    f"{placed.name} at root")
            rest, span = block
            start = self.index_value(rest, self.leaf_vals[placed.target.name]).code
        return start, span, span + h.hi - h.lo

    def _window(self, placed: Placed, axis: IterVar, h, out: list) -> AxisVal:
        """A tile dim of a power of two over the window (`window`), masked to it and to the axis's extent.
        Sliding (`Placed.slide`, store_at): after its loop's first iteration, the window starts hi - lo
        values later and holds span values (the ones the last window lacked), the lanes past them masked."""
        start, span, n = self.window(placed, axis, h)
        size = 1 << (n - 1).bit_length()
        dim = self.fresh(f"{axis.name}_halo")
        # laid out where the axis's own tile would be: before the dims of the axes after it (no transposes)
        tenv, axes = self.env[placed.target.name], list(placed.stage.tensor.axis)
        later = [self.dim_order.index(d) for b in axes[axes.index(axis) + 1:] if b in placed.bound
                 for d in tenv[placed.bound[b]].dims if d in self.dim_order]
        self.dim_order.insert(min(later, default=len(self.dim_order)), dim)
        self.dim_extent[dim] = c.Num(size)
        first = c.sum_of(start, c.Num(h.lo)) if h.lo > 0 else (c.BinOp("-", start, c.Num(-h.lo)) if h.lo else start)
        count = c.Num(n)
        if placed.slide is not None and placed.slide.axis is axis and h.hi > h.lo:
            t = c.LoopIndex(self.loop_vars[placed.target.name][placed.slide.loop])
            later_ = self.fresh(f"slid_{axis.name}")  # 1 after the loop's first iteration, else 0
            out.append(Comment(f"{placed.name} stored at {placed.target.name}.{placed.stage.store[1].name} (store_at): "
                               f"after the first {placed.slide.loop.name}, only the {span} new value"
                               f"{'s' if span > 1 else ''} of {axis.name} (a sliding window)"))
            out.append(Assign(later_, c.call("minimum", t, 1)))
            skip = c.BinOp("*", c.Name(later_), c.Num(h.hi - h.lo))
            first, count = c.sum_of(first, skip), c.BinOp("-", c.Num(n), skip)
        offs, mask = self.fresh(f"offs_{axis.name}"), self.fresh(f"mask_{axis.name}")
        arange = c.call("arange", 0, size)
        out.append(Assign(offs, c.sum_of(first, arange)))
        conds = [c.BinOp("<", c.Name(offs), self.scalar(axis.extent))]
        if h.lo < 0:
            conds.insert(0, c.BinOp(">=", c.Name(offs), c.Num(0)))
        if size != n or not isinstance(count, c.Num):
            conds.insert(0, c.BinOp("<", arange, count))
        out.append(Assign(mask, c.all_of(*conds)))
        level = self.env[placed.target.name][h.target].level
        # its values lie in [first, first + n) (fewer where it slides): a window of a stage placed in it
        return AxisVal(c.Name(offs), (dim,), level, c.Name(mask), run=(first, n))

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
                               + (": its region, in memory" if other.name in self.p.plan.scratch else "")
                               + self._halo_note(other)))
            if other.unslid:
                out.append(Comment(f"{other.name} stored at {x.name}.{other.stage.store[1].name} (store_at): {other.unslid}"))
            self.emit_stage(other, out)
            if other.name in self.p.plan.scratch:  # its readers load it back, other threads' elements too
                out.append(Barrier(Note((f"  # {other.name}'s region stored{self._halo_note(other)}: the "
                                         "program's threads wait",),
                                        op="", lhs=("barrier",))))
                self.materialized.add(other.name)

    def _halo_note(self, placed: Placed) -> str:
        """What a stencil's window costs: per axis, the values computed per iteration of the place against
        the values the iteration itself covers (the overlap with its neighbours is computed again)."""
        if not placed.halo:
            return ""
        parts = []
        for axis, h in placed.halo.items():
            _, span, n = self.window(placed, axis, h)
            size = 1 << (n - 1).bit_length()
            tile = f" in a tile of {size}" if size != n else ""
            if placed.slide is not None and placed.slide.axis is axis and h.hi > h.lo:  # store_at: a sliding window
                parts.append(f"{axis.name}: {n} in the first {placed.slide.loop.name}, then {span} per {span}{tile}, "
                             f"sliding")
                continue
            parts.append(f"{axis.name}: {n} per {span}{tile}")
        return f" (halo recomputed: {', '.join(parts)}, {halo_work(placed):.2f}x the work)"

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
            if targets.loop_result_needs_one_read(dtypes.is_float(acc[2]), n < len(lay.loops),
                                                  acc[2] == x.tensor.dtype or bool(online)):
                result = Val(c.BinOp("+", c.Name(acc[0]), c.Num(0.0)), acc[1], acc[2])
            if online:
                result = self.online_finish(placed, online, result, out, looped=n < len(lay.loops))
            self.finish(x, result, out)
            return
        if n == lay.scan_level:  # a scan's first loop over its axis: the carry starts here (scans.py)
            self.scan_init(x, out)
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
        scan = x.tensor.scan_axis
        if scan is not None and scan in lay.origin[a]:
            what = "scan"
        role = f"{x.name}.{a.name}: {'unrolled' if lay.kind[a] == 'unroll' else 'serial'} {what} loop" + \
            (f" of {scan.name}" if what == "scan" else "")
        extent, start = self.scalar(a.extent), None
        if piece is not None:  # an online loop's tiles (online_pieces; under split_k, this part's chunk of them)
            start, extent, what = piece
            start = None if start == c.Num(0) else start
            role = f"{x.name}.{a.name}: serial reduction loop, {what}"
        elif self.part is not None and x is self.root and a is self.split.axis:  # this program's chunk
            chunk = self.fresh(f"chunk_{a.name}")
            whole = extent
            value = c.call("cdiv", whole, self._parts())
            out.append(Assign(chunk, value, Note((value, "  # iterations per part"))))
            start = c.BinOp("*", c.Name(self.part), c.Name(chunk))
            extent = c.call("minimum", c.BinOp("+", start, c.Name(chunk)), whole)
            role = f"{x.name}.{a.name}: serial reduction loop, one chunk per part (split_k)"
        loop = For(loop_vars[a], extent, lay.kind[a], stages, role,
                   key=f"{x.name}.{a.name}", start=start)
        out.append(loop)
        return loop

    # -- computing ------------------------------------------------------------------------------
    def spatial_dims(self, x: Stage) -> tuple[str, ...]:
        env = self.env[x.name]
        return self._order({d for a in x.tensor.axis for d in env[a].dims})

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

    def compute(self, x: Stage, out: list) -> None:
        """The body of an elementwise stage (or a scan) at its innermost point: compute, then store/keep."""
        if x.tensor.scan_axis is not None:
            self.finish(x, self.scan_step(x, out), out)
            return
        if x.tensor.sort_axis is not None:
            self.finish(x, self.sort_step(x, out), out)
            return
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
        if t.scatter is not None:  # stored at its positions (scatters.py); no reader shares its kernel
            if t.name not in self.stores:
                self.stores.append(t.name)
            self.scatter_store(x, val, out)
            return
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
        params = sorted(self.params.values(), key=param_key(self.p.sched))
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
            outputs=self.stores, inputs=self.loads,
            fp_fusion=any(n in self.p.plan.online for n in self.stages), config=dict(self.config),
            names=frozenset(self.names),
            piece=None if self.piece is None else (self.piece[0].name, self.root_placed.layout.subtiled[1]) + self.piece[1:])
