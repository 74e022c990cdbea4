"""The polyhedral model of a computation, built once per schedule with isl: statements and their
iteration domains, read and write accesses, and the dependences of the original program.

Statements: a reduction stage T has `_init_T[i, j]` (T = identity) and `T[i, j, k]` (T = T op body);
an elementwise stage has `T[i, j]`; a scan along j is one too, which reads its own `T[i, j - 1]` (the carry);
a sort along j is one whose reads take any j (each element depends on the whole row); a scatter `T[d]` over its
domain may write any element of T (its positions are data, or proved injective here: `_check_scatter`), which only
its readers see (a flow source, no output or anti dependence among its own writes: they do not meet, or they add
with atomics). Inlined stages are substituted into their readers first. Sizes are
isl parameters. Dependences (flow, anti, output) come from `UnionAccessInfo.compute_flow` on the
definition order (stages in topological order, each nest in its natural order), as PPCG computes them.
"""

from __future__ import annotations

import weakref

import islpy as isl

from tilec.errors import ArgumentError
from tilec.ir.dtypes import is_float
from tilec.ir.expr import Binary, Cast, Const, Expr, IterVar, Load, Reduce, SizeVar, substitute, walk
from tilec.ir.knob import Knob
from tilec.ir.tensor import sizes_of


class NotAffine(Exception):
    """An index or extent isl cannot represent exactly (the model then over-approximates)."""


def aff(e: Expr, names: dict, config: dict) -> str:
    """isl text of an integer expression of axes (`names`: IterVar -> isl name), sizes and knobs."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return str(e.value)
    if isinstance(e, SizeVar):
        return e.name
    if isinstance(e, Knob):
        return str(config[e.knob_name])
    if isinstance(e, IterVar):
        if e not in names:
            raise NotAffine(e.name)
        return names[e]
    if isinstance(e, Binary):
        if e.op in ("+", "-"):
            return f"({aff(e.a, names, config)} {e.op} {aff(e.b, names, config)})"
        if e.op == "*":
            a, b = aff(e.a, names, config), aff(e.b, names, config)
            if not (a.lstrip("-").isdigit() or b.lstrip("-").isdigit()):
                raise NotAffine(str(e))
            return f"({a} * {b})"
        if e.op in ("//", "%", "cdiv"):
            b = aff(e.b, names, config)
            if not b.isdigit() or int(b) <= 0:
                raise NotAffine(str(e))
            a = aff(e.a, names, config)
            if e.op == "//":
                return f"floor(({a})/{b})"
            if e.op == "cdiv":
                return f"floor(({a} + {int(b) - 1})/{b})"
            return f"(({a}) mod {b})"
    raise NotAffine(str(e))


class Statement:
    """One statement: its isl name, its stage, its variables (original axes -> isl names), domain."""

    def __init__(self, name: str, stage: str, axes: list, kind: str):
        self.name, self.stage, self.axes, self.kind = name, stage, axes, kind  # kind: init|update|compute
        self.names = {a: f"_a{n}" for n, a in enumerate(axes)}

    @property
    def vars(self) -> str:
        return ", ".join(self.names[a] for a in self.axes)


class PolyModel:
    """Domains, accesses and dependences of a schedule's computation (independent of its loops)."""

    def __init__(self, sched):
        self.sched = sched
        self.ctx = isl.Context()  # one context per model: isl contexts are not shared (isl.md pitfall 6)
        self.params = list(sizes_of(sched.tensors.values()))
        self.pre = f"[{', '.join(self.params)}] -> "
        self.stmts: dict[str, Statement] = {}
        self.stage_stmts: dict[str, list[Statement]] = {}
        for name, st in sched.stages.items():
            t = st.tensor
            if st.attach == "inline":
                continue
            if t.is_reduction:
                out = [Statement(f"_init_{name}", name, list(t.axis), "init"),
                       Statement(name, name, list(t.axis) + list(t.reduce_axis), "update")]
            else:
                out = [Statement(name, name, list(t.axis), "compute")]
            self.stage_stmts[name] = out
            for s in out:
                self.stmts[s.name] = s
        self.domain = self._union_set([self._domain_text(s) for s in self.stmts.values()])
        reads, writes, may_writes = [], [], []
        for s in self.stmts.values():
            t = sched.tensors[s.stage]
            spatial = ", ".join(s.names[a] for a in t.axis)
            if t.scatter is not None:  # any element: its readers wait for the whole scatter
                may_writes.append(self._anywhere(s, t))
                for p in t.scatter.at:
                    reads += self._reads(s, p)
            else:
                writes.append(f"{s.name}[{s.vars}] -> {t.name}[{spatial}]")
            if s.kind == "update":
                reads.append(f"{s.name}[{s.vars}] -> {t.name}[{spatial}]")
            if s.kind != "init":
                body = t.body.body if isinstance(t.body, Reduce) else t.body
                reads += self._reads(s, body, whole=t.sort_axis)
            if t.scan_axis is not None:  # a scan's element t carries element t - 1 of its own axis
                prev = ", ".join(f"{s.names[a]} - 1" if a is t.scan_axis else s.names[a] for a in t.axis)
                reads.append(f"{s.name}[{s.vars}] -> {t.name}[{prev}]")
        self.reads = self._union_map(reads).intersect_domain(self.domain)
        self.writes = self._union_map(writes).intersect_domain(self.domain)
        self.may_writes = self._union_map(may_writes).intersect_domain(self.domain)
        self.order = self._original_order()
        # sizes are at least 1 (and satisfy the facts stated with tc.assume)
        self.context = isl.Set.read_from_str(
            self.ctx, self.pre + "{ : " + " and ".join([f"{p} >= 1" for p in self.params] + ["1 = 1"]) + " }")
        for stmts in self.stage_stmts.values():
            if sched.tensors[stmts[0].stage].scatter is not None:
                self._check_scatter(stmts[0])
        raw = self._flow(self.reads, must=self.writes, may=self.may_writes).get_may_dependence()
        raw = raw.intersect_params(self.context)
        false = self._flow(self.writes, must=self.writes, may=self.writes.union(self.reads)).get_may_dependence()
        false = false.intersect_params(self.context)
        self.raw = raw.coalesce()
        self.false = false.coalesce()
        self.deps = raw.union(false).coalesce()
        self.dep_maps = [self.deps.get_map_list().get_at(i) for i in range(self.deps.n_map())]
        self.false_maps = [self.false.get_map_list().get_at(i) for i in range(self.false.n_map())]

    # -- building blocks ------------------------------------------------------------------------
    def _union_set(self, parts: list[str]) -> isl.UnionSet:
        return isl.UnionSet.read_from_str(self.ctx, self.pre + "{ " + "; ".join(parts) + " }")

    def _union_map(self, parts: list[str]) -> isl.UnionMap:
        if not parts:
            return isl.UnionMap.read_from_str(self.ctx, self.pre + "{ }")
        return isl.UnionMap.read_from_str(self.ctx, self.pre + "{ " + "; ".join(parts) + " }")

    def _domain_text(self, s: Statement) -> str:
        bounds = [f"0 <= {s.names[a]} < {aff(a.extent, {}, {})}" for a in s.axes]
        return f"{s.name}[{s.vars}]" + (" : " + " and ".join(bounds) if bounds else "")

    def _anywhere(self, s: Statement, t) -> str:
        """s may touch any element of t: the relation to all of t's elements."""
        dims = [f"_x{d}" for d in range(t.ndim)]
        rng = " and ".join(f"0 <= _x{d} < {aff(e, {}, {})}" for d, e in enumerate(t.shape))
        return f"{s.name}[{s.vars}] -> {t.name}[{', '.join(dims)}]" + (f" : {rng}" if rng else "")

    def _check_scatter(self, s: Statement) -> None:
        """A scatter whose positions are affine writes each element at most once, or it needs what makes
        meeting writes defined (combine="add", and deterministic=False for floats): isl proves the positions
        injective over the domain, else the error gives two points that write one element."""
        t = self.sched.tensors[s.stage]
        spec = t.scatter
        if spec.data or (spec.combine == "add" and not (is_float(t.dtype) and spec.deterministic)):
            return  # data positions were checked at tc.scatter; integer adds (or accepted float ones) may meet
        try:
            idx = [aff(p, s.names, {}) for p in spec.at]
        except NotAffine:
            why = "combine='add'" + (" with deterministic=False" if is_float(t.dtype) else "")
            raise ArgumentError(f"scatter {t.name!r}: isl cannot read its positions ({', '.join(map(str, spec.at))}), "
                                f"so it cannot prove that no two points write one element; use {why}, or "
                                f"positions affine in the axes") from None
        m = isl.Map.read_from_str(self.ctx, self.pre + "{ " + f"{s.name}[{s.vars}] -> {t.name}[{', '.join(idx)}]"
                                  + " }").intersect_domain(isl.Set.read_from_str(self.ctx, self.pre + "{ "
                                                                                 + self._domain_text(s) + " }"))
        m = m.intersect_params(isl.Set.read_from_str(self.ctx, self.pre + "{ : " + " and ".join(
            [f"{p} >= 1" for p in self.params] + ["1 = 1"]) + " }"))
        inside = " and ".join(f"0 <= _x{d} < {aff(e, {}, {})}" for d, e in enumerate(t.shape))
        m = m.intersect_range(isl.Set.read_from_str(self.ctx, self.pre + "{ " + f"{t.name}[{', '.join(f'_x{d}' for d in range(t.ndim))}]"
                                                    + (f" : {inside}" if inside else "") + " }"))  # writes that land
        meet = m.apply_range(m.reverse()).subtract(isl.Map.identity(m.get_space().domain().map_from_set()))
        if meet.is_empty():
            return
        pt = meet.wrap().sample_point()
        n = len(s.axes)
        val = [pt.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(2 * n)]
        sizes = ", ".join(f"{p}={pt.get_coordinate_val(isl.dim_type.param, i).to_python()}"
                          for i, p in enumerate(self.params))
        a = ", ".join(f"{ax.name}={v}" for ax, v in zip(s.axes, val[:n]))
        b = ", ".join(f"{ax.name}={v}" for ax, v in zip(s.axes, val[n:]))
        text = f"({a}) and ({b})" + (f" at {sizes}" if sizes else "")
        what = ("its values would replace each other, in an order no one decides (combine=None)" if spec.combine is None
                else "float atomic adds that meet land in a varying order, so the rounding varies run to run")
        fix = ("pass deterministic=False" if spec.combine == "add" else
               "use combine='add'" + (" with deterministic=False" if is_float(t.dtype) else ""))
        raise ArgumentError(f"scatter {t.name!r}: two points of its domain write one element ({text}), and {what}; "
                            f"{fix}, or positions that differ for different points")

    def _inline(self, body: Expr) -> Expr:
        """Substitute inlined stages (keeping their rounding as a cast) until none is left."""
        def sub(n):
            if isinstance(n, Load) and n.tensor.name in self.sched.stages \
                    and self.sched.stages[n.tensor.name].attach == "inline":
                m = dict(zip(n.tensor.axis, n.indices))
                inner = substitute(n.tensor.body, lambda x: m.get(x) if isinstance(x, IterVar) else None)
                return Cast(self._inline(inner), n.tensor.dtype)
            return None
        return substitute(body, sub)

    def _reads(self, s: Statement, body: Expr, inputs: bool = False, whole: IterVar | None = None) -> list[str]:
        """s's reads in `body`; `whole`: an axis of s along which each instance reads every position (a sort's:
        element t of the output depends on the whole row)."""
        out = []
        names, where = s.names, ""
        if whole is not None:
            names = dict(s.names) | {whole: "_w"}
            where = f" : 0 <= _w < {aff(whole.extent, {}, {})}"
        for node in walk(self._inline(body)):
            if not isinstance(node, Load) or (node.tensor.name not in self.stage_stmts and not inputs):
                continue  # inputs have no writers: no dependence can start there
            t = node.tensor
            try:
                idx = [aff(i, names, {}) for i in node.indices]
                text = f"{s.name}[{s.vars}] -> {t.name}[{', '.join(idx)}]"
                if whole is not None and any("_w" in i for i in idx):  # any position along the axis: an
                    outs = [f"_o{d}" for d in range(len(idx))]          # existential of the read
                    eqs = " and ".join(f"{o} = {i}" for o, i in zip(outs, idx))
                    text = (f"{s.name}[{s.vars}] -> {t.name}[{', '.join(outs)}] : exists (_w{where} "
                            f"and {eqs})")
                out.append(text)
            except NotAffine:  # unknown position: may read any element
                dims = [f"_x{d}" for d in range(t.ndim)]
                rng = " and ".join(f"0 <= _x{d} < {aff(e, {}, {})}" for d, e in enumerate(t.shape))
                out.append(f"{s.name}[{s.vars}] -> {t.name}[{', '.join(dims)}]" + (f" : {rng}" if rng else ""))
        return out

    def _original_order(self) -> isl.UnionMap:
        width = max(len(s.axes) for s in self.stmts.values()) + 2
        parts = []
        for pos, stmts in enumerate(self.stage_stmts.values()):
            for s in stmts:
                dims = [str(pos), "1" if s.kind == "update" else "0"] + [s.names[a] for a in s.axes]
                dims += ["0"] * (width - len(dims))
                parts.append(f"{s.name}[{s.vars}] -> [{', '.join(dims)}]")
        return self._union_map(parts).intersect_domain(self.domain)

    def _flow(self, sink, must=None, may=None):
        ai = isl.UnionAccessInfo.from_sink(sink)
        if must is not None:
            ai = ai.set_must_source(must)
        if may is not None:
            ai = ai.set_may_source(may)
        return ai.set_schedule_map(self.order).compute_flow()

    def reads_of(self, stmt: Statement, tensor: str) -> isl.Map | None:
        """stmt's reads of `tensor` (inputs included), for footprints."""
        t = self.sched.tensors[stmt.stage]
        body = t.body.body if isinstance(t.body, Reduce) else t.body
        parts = [r for e in (body, *(t.scatter.at if t.scatter is not None else ()))
                 for r in self._reads(stmt, e, inputs=True, whole=t.sort_axis) if f"-> {tensor}[" in r]
        if not parts:
            return None
        um = self._union_map(parts).intersect_domain(self.domain)
        return isl.Map.from_union_map(um)

    def is_flow(self, dep: isl.Map) -> bool:
        """Whether some instance pair of `dep` is a read of a value written (not only an order)."""
        return not dep.intersect(isl.Map.from_union_map(
            self.raw.intersect_domain(isl.UnionSet.from_set(dep.domain()))
            .intersect_range(isl.UnionSet.from_set(dep.range())))).is_empty() \
            if not self.raw.is_empty() else False


_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # schedule -> (key, model)


def model_of(sched) -> PolyModel:
    """The model of `sched`'s computation, built on first use and kept while the schedule lives. It
    depends only on the computation and on which stages are inlined (not on loops or places)."""
    key = tuple((n, st.attach == "inline") for n, st in sched.stages.items())
    cached = _MODELS.get(sched)
    if cached is None or cached[0] != key:
        cached = _MODELS[sched] = (key, PolyModel(sched))
    return cached[1]


def share_model(copy, original) -> None:
    """Let `copy` (a schedule of the same computation, e.g. with one stage placed elsewhere) use
    `original`'s model instead of building its own."""
    _MODELS[copy] = (tuple((n, st.attach == "inline") for n, st in original.stages.items()), model_of(original))
