"""Lowering, the whole schedule: which stages share a kernel, which tensors memory must hold, the
kernels in launch order. `lower(s, config)` returns it; print it to read the loop nests.
"""

from __future__ import annotations

import copy

from tilec.errors import LoweringError
from tilec.ir.knob import resolve_config
from tilec.lower import fusion, subtiles
from tilec.lower.builder import KernelBuilder
from tilec.lower.code import Form
from tilec.lower.nest import KernelIR, render_nest, render_triton, uses_libdevice
from tilec.plan.analysis import Analysis
from tilec.plan.check import check_schedule
from tilec.schedule.schedule import Schedule

TARGETS = ("cuda", "interpreter")


class Program:
    """A lowered schedule: kernels (loop-nest IR) in launch order and the buffers between them."""

    def __init__(self, sched: Schedule, config=None, *, target: str = "cuda", int64: bool = False,
                 outputs=None, specialize=None, descriptors: bool = True):
        self.sched = sched
        self.form = _form(target, int64, descriptors)
        # the passes: analysis (plan, isl facts) -> legality -> masks -> loop-nest IR, once
        self.analysis: Analysis = check_schedule(sched, resolve_config(sched.knobs, config), outputs=outputs,
                                                 specialize=_check_specialize(sched, specialize))
        self.config, self.specialize, self.facts = self.analysis.config, self.analysis.specialize, self.analysis.facts
        self.plan = self.analysis.plan
        self.masks = self.analysis.masks  # decided by isl here, before any code is written
        self.stored, self.buffers = self.plan.stored, self.plan.buffers
        self.kernels: list[KernelIR] = [self._kernel(root) for root in self.plan.kernels]
        self._source = None

    def _kernel(self, root) -> KernelIR:
        """The loop-nest IR of one kernel; a sub-tiled tile is built piece by piece and merged (subtiles.py)."""
        if root.layout.subtiled is None:
            kernel = KernelBuilder(self, root).build()
        else:
            axis, extent = root.layout.subtiled
            builds = [KernelBuilder(self, root, piece=(axis, start, length)).build()
                      for start, length in subtiles.pieces(extent)]
            kernel = subtiles.merge(builds, axis.name, extent)
        for name in kernel.stages:  # compute_with: a stage's outermost loop joins another stage's loop
            st = self.sched.stages[name]
            if st.fused_with is not None:
                other, axis = st.fused_with
                what = f"compute_with({name}, {other.name}.{axis.name})"
                own = self._outermost_loop(st, what)
                if self._outermost_loop(other, what) != axis.name:
                    raise LoweringError(f"{what}: {axis.name} is not {other.name}'s outermost loop (that is "
                                        f"{self._outermost_loop(other, what)}); compute_with fuses the outermost "
                                        f"loops of two stages placed at the same loop")
                kernel = fusion.fuse(kernel, f"{other.name}.{axis.name}", f"{name}.{own}", what)
        return kernel

    def _outermost_loop(self, st, what: str) -> str:
        """The name of the outermost serial loop of stage `st` in its kernel (a LoweringError if none)."""
        loops = self.plan.placed[st.name].layout.loops if st.name in self.plan.placed else []
        if not loops:
            raise LoweringError(f"{what}: {st.name} has no serial loop to fuse (its loops are tiles or grid "
                                f"axes); split its reduction axis and keep the outer part as a loop")
        return loops[0].name

    @property
    def target(self) -> str:
        return self.form.target

    @property
    def int64(self) -> bool:
        return self.form.int64

    def with_form(self, target: str | None = None, int64: bool | None = None,
                  descriptors: bool | None = None) -> Program:
        """This program rendered in another form (the same kernels: nothing is lowered again)."""
        other = copy.copy(self)
        other.form = _form(target or self.target, self.int64 if int64 is None else int64,
                           self.form.descriptors if descriptors is None else descriptors)
        other._source = None
        return other

    @property
    def descriptors(self) -> list:
        """(kernel, parameter) of every tensor descriptor the kernels read through (cache_read tma=True)."""
        return [(k, p) for k in self.kernels for p in k.descriptors]

    @property
    def uses_libdevice(self) -> bool:
        return any(uses_libdevice(k, self.form) for k in self.kernels)

    def source(self) -> str:
        """All kernels of the program as one Triton module, in this program's form."""
        if self._source is None:
            head = ["import triton", "import triton.language as tl"]
            if self.uses_libdevice:
                head.append("from triton.language.extra import libdevice")
            self._source = "\n".join(head) + "\n\n\n" + "\n\n".join(render_triton(k, self.form) for k in self.kernels)
        return self._source

    def __str__(self) -> str:
        parts = [render_nest(k) for k in self.kernels]
        if self.buffers:
            parts.append(f"buffers between kernels: {', '.join(self.buffers)}\n")
        return "\n".join(parts)


def _form(target: str, int64: bool, descriptors: bool = True) -> Form:
    if target not in TARGETS:
        raise LoweringError(f"target must be one of {TARGETS}, got {target!r}")
    return Form(target, bool(int64), bool(descriptors))


def _check_specialize(sched: Schedule, specialize) -> dict[str, int]:
    """`specialize` must map sizes of the schedule to positive ints that satisfy the facts; the values come
    back as plain ints (they are written into the source)."""
    import numbers
    from collections.abc import Mapping

    from tilec.errors import ArgumentError
    from tilec.ir.expr import SizeVar, evaluate, walk
    from tilec.ir.tensor import sizes_of

    if specialize is not None and not isinstance(specialize, Mapping):
        raise ArgumentError(f"specialize: expected a dict of size name -> int, e.g. {{'N': 4096}}, got "
                            f"{type(specialize).__name__} {specialize!r}")
    spec = dict(specialize or {})
    sizes = sizes_of(sched.tensors.values())
    for name, value in spec.items():
        if name not in sizes:
            raise ArgumentError(f"specialize: {name!r} is not a size of this schedule (its sizes: "
                                f"{', '.join(sizes) or 'none'})")
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ArgumentError(f"specialize: {name} must be a positive int, got {value!r}")
        spec[name] = int(value)
    for sv in sizes.values():
        for fact in sv.facts:
            used = {n.name for n in walk(fact) if isinstance(n, SizeVar)}
            if used <= set(spec) and not evaluate(fact, spec):
                raise ArgumentError(f"specialize: {', '.join(f'{k}={spec[k]}' for k in sorted(used))} breaks "
                                    f"tc.assume({fact!r}); no call could use that kernel")
    return spec


def lower(sched: Schedule, config=None, *, target: str = "cuda", specialize=None) -> Program:
    """Lower a schedule under `config` (knob name -> value; defaults for the rest). `print()` the
    result to read the loop nests; `.source()` is the Triton module that `tc.build` compiles.
    `specialize` (size name -> int) bakes sizes in as constants (masks dropped where isl proves it)."""
    return Program(sched, config, target=target, specialize=specialize)
