"""split_k's two kernels: `plan` decides the split once per root (`SplitK`: the loop, the parts, the
workspace), and `SplitKParts`, a part of `KernelBuilder` (builder.py), emits them. The partial kernel runs one chunk of the root's outermost
reduction loop per program on a free grid dimension and stores its sum to its slice of the workspace, or
adds it with an atomic (`store_partial`); the combine kernel adds the parts' sums in order, part 0 first
(`combine_partials`), then rounds the stage and runs its epilogue. An online loop's parts carry their
statistics too, merged in order by rescaling to the running max (`_merge_online_parts`, flash-decoding's
combine). The builder's loops call these where the split loop is (`KernelBuilder.emit_loops`); the chunk
of the loop a part runs is set in `open_loop`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tilec.errors import LoweringError
from tilec.ir.expr import Const
from tilec.ir.knob import Knob, factor_value
from tilec.ir.tensor import Tensor
from tilec.lower import code as c
from tilec.lower.nest import Comment, For, Note, Store, Update
from tilec.lower.nest import Load as LoadTile
from tilec.lower.values import Val, _where
from tilec.schedule.schedule import Stage


@dataclass(frozen=True)
class SplitK:
    """split_k on a root stage, for its kernels' builders: which kernel (`mode`: "partial", its parts'
    sums to the workspace; "combine", their sum in order, then the rounding and the epilogue), the loop
    split, the number of parts (a Const or a Knob, and its value as text), the grid dimension of the
    parts, and the workspace tensor ((parts, *shape), or (*shape) zeroed for the atomics)."""

    mode: str
    axis: object
    parts_expr: object
    parts_text: str
    deterministic: bool
    dim: int
    workspace: Tensor
    stats: tuple = ()  # online statistics of the loop: (their stage name, their workspace of partial states)

    def as_mode(self, mode: str) -> SplitK:
        return dataclasses.replace(self, mode=mode)

    def describe(self) -> str:
        how = "added in order" if self.deterministic else "added with atomics (deterministic=False)"
        return (f"{self.axis.name} in {self.parts_text} parts (program_id.{self.dim}), {self.workspace.dtype} partial sums in "
                f"{self.workspace.name}, {how}; this is the {self.mode} kernel")


def _as_expr(parts):
    return parts if isinstance(parts, Knob) else Const(int(parts), "int32")


def plan(program, root) -> SplitK | None:
    """split_k on `root` (a placed root stage of `program`), decided once for its two kernels: None where
    the stage has no split_k or its loop runs once at these sizes; else the loop, the parts, the grid
    dimension and the workspaces (registered in `program.workspaces`). Refused with a `LoweringError`
    where the split cannot be made (persistent grid, not the outermost reduction loop, an unrolled loop, a
    stage computed inside the split loop after the root, compute_with, no free grid dimension, atomics over
    an online loop)."""
    st = root.stage
    if st.k_split is None:
        return None
    axis, parts, deterministic = st.k_split
    deterministic = bool(factor_value(deterministic, program.config))  # True, False or a tc.flag's choice
    what = f"{st.name}.split_k({axis.name})"
    lay = root.layout
    if lay.kind.get(axis) == "single":  # the loop runs once at these sizes: one part, no split
        return None
    if lay.persistent:
        raise LoweringError(f"{what}: {st.name}'s grid is persistent; split-K needs one program per part "
                            f"beside the tiles (drop persistent, or split_k)")
    if lay.first_reduce >= len(lay.loops) or lay.loops[lay.first_reduce] is not axis:
        first = lay.loops[lay.first_reduce].name if lay.first_reduce < len(lay.loops) else None
        raise LoweringError(f"{what}: {axis.name} is not {st.name}'s outermost reduction loop"
                            + (f" (that is {first})" if first else " (it has none: split the reduction axis "
                               "and keep the outer part as a loop)"))
    if lay.kind[axis] != "serial":
        raise LoweringError(f"{what}: {axis.name} is an unrolled loop; split-K runs a serial loop in parts")
    outer = list(st.leaves[:st.leaves.index(axis)]) if axis in st.leaves else []
    inside = sorted(o.name for level, placed in root.consumers.items() if level >= lay.first_reduce for o in placed)
    if inside:  # the partial kernel leaves consumers to the combine, which has no such loop (fuzz seed 42001095)
        raise LoweringError(f"{what}: {', '.join(inside)} {'is' if len(inside) == 1 else 'are'} computed inside "
                            f"{st.name}'s loop {axis.name}, which split_k runs in parts on programs of their own; "
                            f"compute {'it' if len(inside) == 1 else 'them'} at an axis of {st.name} outside "
                            f"{axis.name} ({', '.join(a.name for a in outer) or 'none'}) or at the root")
    if st.fused_with is not None or any(o.fused_with and o.fused_with[0] is st for o in program.sched.stages.values()):
        raise LoweringError(f"{what}: not with compute_with in the same kernel yet")
    used = set(st.binds.values())
    free = [d for d in (1, 2) if d not in used]
    if not free:
        raise LoweringError(f"{what}: program_id.1 and .2 are both bound; split-K runs its parts on a free "
                            f"grid dimension (fuse the grid axes onto program_id.0)")
    red = st.tensor.body
    name, n = f"{st.name}_part", 1
    while name in program.sched.tensors or name in program.workspaces:
        name, n = f"{st.name}_part{n}", n + 1
    shape = tuple(st.tensor.shape) if not deterministic else (_as_expr(parts),) + tuple(st.tensor.shape)
    ws = Tensor(name, shape, red.dtype)
    program.workspaces[name] = (ws, not deterministic)
    stats = []
    if st.name in program.plan.online:  # each part's running statistics too, merged in order by the combine
        if not deterministic:
            raise LoweringError(f"{what}: an online loop's parts are merged by rescaling (max, then sums), "
                                f"which atomics cannot do; split_k it deterministically")
        for t in program.plan.online[st.name].stats:
            sname, n = f"{t.name}_part", 1
            while sname in program.sched.tensors or sname in program.workspaces:
                sname, n = f"{t.name}_part{n}", n + 1
            sws = Tensor(sname, (_as_expr(parts),) + tuple(t.shape), "float32")
            program.workspaces[sname] = (sws, False)
            stats.append((t.name, sws))
    return SplitK("", axis, _as_expr(parts), str(factor_value(parts, program.config)), deterministic, free[0], ws,
                  tuple(stats))


class SplitKParts:
    """The split_k part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def _parts(self) -> c.Ex:
        """split_k's number of parts (an int, or a knob's constexpr parameter)."""
        return self.scalar(self.split.parts_expr)

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
