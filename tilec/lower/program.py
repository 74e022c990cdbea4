"""Lowering, the whole schedule: which stages share a kernel, which tensors memory must hold, the
kernels in launch order. `lower(s, config)` returns it; print it to read the loop nests.
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx

from tilec.errors import LoweringError
from tilec.lower.builder import KernelBuilder
from tilec.lower.nest import KernelIR, render_nest, render_triton
from tilec.poly.legality import check_schedule
from tilec.schedule.knob import resolve_config
from tilec.schedule.schedule import Schedule, Stage

TARGETS = ("cuda", "interpreter")


class Program:
    """A lowered schedule: kernels (loop-nest IR) in launch order and the buffers between them."""

    def __init__(self, sched: Schedule, config=None, *, target: str = "cuda", int64: bool = False,
                 outputs=None):
        if target not in TARGETS:
            raise LoweringError(f"target must be one of {TARGETS}, got {target!r}")
        self.sched, self.target, self.int64 = sched, target, int64
        self.config = resolve_config(sched.knobs, config)
        self.uses_libdevice = False
        check_schedule(sched)
        self.attached: dict[tuple, list[Stage]] = defaultdict(list)
        self.caches: dict[tuple, list[Stage]] = defaultdict(list)
        self.emitted: set[str] = set()
        for st in sched.stages.values():
            if isinstance(st.attach, tuple):
                target_stage, axis = st.attach
                self.attached[(target_stage.name, axis)].append(st)
        for c in sched.caches:
            if c.kind == "cache_read" and isinstance(c.attach, tuple):
                self.caches[(c.attach[0].name, c.attach[1])].append(c)
            elif c.kind == "cache_write" and isinstance(c.attach, tuple):
                self._check_cache_write(c)
        self.kernel_of = {name: self._root(st).name for name, st in sched.stages.items() if st.attach != "inline"}
        out_names = [t.name for t in (outputs if outputs is not None else sched.outputs)]
        self.stored = set(out_names)
        for p, c in sched.graph.edges:
            if p in self.kernel_of and any(k != self.kernel_of[p] for k in self._reader_kernels(c)):
                self.stored.add(p)
        order = nx.DiGraph()
        order.add_nodes_from(dict.fromkeys(self.kernel_of.values()))
        for p, c in sched.graph.edges:
            kp, kc = self.kernel_of.get(p), self.kernel_of.get(c)
            if kp and kc and kp != kc:
                order.add_edge(kp, kc)
        try:
            roots = list(nx.lexicographical_topological_sort(order, key=list(sched.stages).index))
        except nx.NetworkXUnfeasible as e:
            cycle = [a for a, _ in nx.find_cycle(order)]
            path = " -> ".join(f"{a}_kernel" for a in cycle + cycle[:1])
            raise LoweringError(f"the placements make two kernels need each other's results ({path}, each "
                                f"reading what the next computes); compute_root one of the stages involved") from e
        self.kernels: list[KernelIR] = [KernelBuilder(self, sched.stages[r]).build() for r in roots]
        emitted = {n for k in self.kernels for n in k.stages} | self.emitted
        for st in list(sched.stages.values()) + [c for c in sched.caches if c.kind == "cache_read"]:
            if isinstance(st.attach, tuple) and st.name not in emitted:
                tgt, axis = st.attach
                raise LoweringError(
                    f"compute_at({st.name}, {tgt.name}.{axis.name}): {axis.name} is a tile axis (a vector "
                    f"dimension, not a loop) or not a loop of {tgt.name}'s kernel; place {st.name} at one of "
                    f"{tgt.name}'s loops or grid axes")
        self.buffers = sorted(self.stored - set(out_names))

    def _reader_kernels(self, name: str) -> set[str]:
        """The kernels that evaluate stage `name` (an inlined stage: those of its readers)."""
        if name in self.kernel_of:
            return {self.kernel_of[name]}
        return {k for c in self.sched.graph.successors(name) for k in self._reader_kernels(c)}

    def _root(self, st: Stage) -> Stage:
        seen = []
        while isinstance(st.attach, tuple):
            seen.append(st.name)
            st = st.attach[0]
            if st.attach == "inline":
                raise LoweringError(f"{seen[-1]} is computed at {st.name}, which is inlined and has no loops")
            if st.name in seen:
                raise LoweringError(f"compute_at forms a cycle: {' -> '.join(seen + [st.name])}")
        return st

    def _check_cache_write(self, c: Stage) -> None:
        st, axis = c.attach
        if not st.tensor.is_reduction:
            raise LoweringError(f"cache_write({st.name}, 'local'): {st.name} is not a reduction; there is no "
                                f"accumulator to keep in registers")
        inner = {r.inner for r in st.relations if hasattr(r, "inner") and hasattr(r, "factor")}
        legal = []
        for a in st.leaves:
            if a.kind == "reduce":
                break
            if a not in inner:
                legal.append(a)
        if axis not in legal:
            raise LoweringError(f"{c.name}.compute_at({st.name}, {axis.name}): the accumulator must live outside "
                                f"the reduction loops; place it at one of {', '.join(a.name for a in legal)}")

    def source(self) -> str:
        """All kernels of the program as one Triton module."""
        head = ["import triton", "import triton.language as tl"]
        if self.uses_libdevice:
            head.append("from triton.language.extra import libdevice")
        return "\n".join(head) + "\n\n\n" + "\n\n".join(render_triton(k) for k in self.kernels)

    def __str__(self) -> str:
        parts = [render_nest(k) for k in self.kernels]
        if self.buffers:
            parts.append(f"buffers between kernels: {', '.join(self.buffers)}\n")
        return "\n".join(parts)


def lower(sched: Schedule, config=None, *, target: str = "cuda") -> Program:
    """Lower a schedule under `config` (knob name -> value; defaults for the rest). `print()` the
    result to read the loop nests; `.source()` is the Triton module that `tc.build` compiles."""
    return Program(sched, config, target=target)
