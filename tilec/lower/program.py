"""Lowering, the whole schedule: which stages share a kernel, which tensors memory must hold, the
kernels in launch order. `lower(s, config)` returns it; print it to read the loop nests.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from tilec.errors import ArgumentError, LoweringError
from tilec.ir.expr import Const
from tilec.ir.knob import Knob, factor_value, resolve_config
from tilec.ir.tensor import Tensor
from tilec.lower import passes, subtiles
from tilec.lower.builder import KernelBuilder
from tilec.lower.nest import KernelIR
from tilec.lower.nest_printer import render_nest
from tilec.lower.triton_printer import Form, module, uses_libdevice
from tilec.plan.analysis import Analysis
from tilec.plan.check import check_schedule
from tilec.schedule.schedule import Schedule

TARGETS = ("cuda", "interpreter")


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


class Program:
    """A lowered schedule: kernels (loop-nest IR) in launch order and the buffers between them."""

    def __init__(self, sched: Schedule, config=None, *, target: str = "cuda", int64: bool = False,
                 outputs=None, specialize=None, descriptors: bool = True, assume=(), analysis: Analysis | None = None):
        self.sched = sched
        self.form = _form(target, int64, descriptors)
        # the passes: analysis (plan, isl facts) -> legality -> masks -> loop-nest IR, once. `assume`: the
        # facts of a call's sizes (Plan.call_facts), under which the loops that run once are no loops.
        # `analysis`: one already checked (tilec.plan.check.at_sizes: a kernel's plan under a call's size
        # facts), which gives the config, outputs, specialization and facts instead of the arguments
        if analysis is None:
            analysis = check_schedule(sched, resolve_config(sched.knobs, config), outputs=outputs,
                                      specialize=_check_specialize(sched, specialize), assume=assume)
        elif analysis.sched is not sched or not analysis.checked:
            raise LoweringError("internal: Program(analysis=...) takes a checked analysis of the same schedule")
        self.analysis: Analysis = analysis
        self.config, self.specialize, self.facts = self.analysis.config, self.analysis.specialize, self.analysis.facts
        self.plan = self.analysis.plan
        self.masks = self.analysis.masks  # decided by isl here, before any code is written
        self.stored, self.buffers = self.plan.stored, self.plan.buffers
        self.workspaces: dict[str, tuple] = {}  # split_k: name -> (its Tensor, zeroed before the call)
        roots = {r.stage.name for r in self.plan.kernels}
        for st in sched.stages.values():
            if st.k_split is not None and st.name not in roots:
                raise LoweringError(f"{st.name}.split_k({st.k_split[0].name}): {st.name} is computed inside another "
                                    f"stage's kernel (compute_at or inline); split-K splits a kernel's root stage: "
                                    f"compute_root({st.name}), or place its consumers in its loops instead")
        self.kernels: list[KernelIR] = passes.run(self)  # the build, then each rewrite (lower/passes.py)
        self._source = None

    def _kernels(self, root) -> list[KernelIR]:
        """The kernels of one root stage: one, or split_k's partial and combine kernels."""
        split = self._split_k(root)
        if split is None:
            return [self._kernel(root)]
        return [self._kernel(root, split.as_mode("partial")), self._kernel(root, split.as_mode("combine"))]

    def _split_k(self, root) -> SplitK | None:
        st = root.stage
        if st.k_split is None:
            return None
        axis, parts, deterministic = st.k_split
        deterministic = bool(factor_value(deterministic, self.config))  # True, False or a tc.flag's choice
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
        if st.fused_with is not None or any(o.fused_with and o.fused_with[0] is st for o in self.sched.stages.values()):
            raise LoweringError(f"{what}: not with compute_with in the same kernel yet")
        used = set(st.binds.values())
        free = [d for d in (1, 2) if d not in used]
        if not free:
            raise LoweringError(f"{what}: program_id.1 and .2 are both bound; split-K runs its parts on a free "
                                f"grid dimension (fuse the grid axes onto program_id.0)")
        red = st.tensor.body
        name, n = f"{st.name}_part", 1
        while name in self.sched.tensors or name in self.workspaces:
            name, n = f"{st.name}_part{n}", n + 1
        shape = tuple(st.tensor.shape) if not deterministic else (_as_expr(parts),) + tuple(st.tensor.shape)
        ws = Tensor(name, shape, red.dtype)
        self.workspaces[name] = (ws, not deterministic)
        stats = []
        if st.name in self.plan.online:  # each part's running statistics too, merged in order by the combine
            if not deterministic:
                raise LoweringError(f"{what}: an online loop's parts are merged by rescaling (max, then sums), "
                                    f"which atomics cannot do; split_k it deterministically")
            for t in self.plan.online[st.name].stats:
                sname, n = f"{t.name}_part", 1
                while sname in self.sched.tensors or sname in self.workspaces:
                    sname, n = f"{t.name}_part{n}", n + 1
                sws = Tensor(sname, (_as_expr(parts),) + tuple(t.shape), "float32")
                self.workspaces[sname] = (sws, False)
                stats.append((t.name, sws))
        return SplitK("", axis, _as_expr(parts), str(factor_value(parts, self.config)), deterministic, free[0], ws,
                      tuple(stats))

    def _kernel(self, root, split=None) -> KernelIR:
        """The loop-nest IR of one kernel; a sub-tiled tile is built piece by piece and merged (subtiles.py)."""
        if root.layout.subtiled is None:
            return KernelBuilder(self, root, split=split).build()
        axis, extent = root.layout.subtiled
        builds = [KernelBuilder(self, root, piece=(axis, start, length), split=split).build()
                  for start, length in subtiles.pieces(extent)]
        return subtiles.merge(builds, axis.name, extent)

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
            self._source = module(self.kernels, self.form)
        return self._source

    def __repr__(self) -> str:
        kernels = "; ".join(f"{k.name} (stages {', '.join(k.stages)})" for k in self.kernels)
        config = ", ".join(f"{k}={v}" for k, v in sorted(self.config.items())) or "none"
        buffers = f"; buffers {', '.join(self.buffers)}" if self.buffers else ""
        return f"<Program: {kernels}; config {config}{buffers}; target {self.target}>"

    def __str__(self) -> str:
        parts = [render_nest(k) for k in self.kernels]
        if self.buffers:
            parts.append(f"buffers between kernels: {', '.join(self.buffers)}\n")
        if self.workspaces:
            parts.append("split_k workspaces: " + ", ".join(
                f"{n}[{', '.join(map(str, t.shape))}] {t.dtype}" + (" (zeroed: atomics)" if z else "")
                for n, (t, z) in self.workspaces.items()) + "\n")
        return "\n".join(parts)


def _form(target: str, int64: bool, descriptors: bool = True) -> Form:
    if target not in TARGETS:
        raise LoweringError(f"target must be one of {TARGETS}, got {target!r}")
    return Form(target, bool(int64), bool(descriptors))


def _check_specialize(sched: Schedule, specialize) -> dict[str, int]:
    """`specialize` must map sizes of the schedule to positive ints that satisfy the facts; the values come
    back as plain ints (they are written into the source)."""
    import numbers

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
                                    f"tc.assume({fact}); no call could use that kernel")
    return spec


def lower(sched: Schedule, config: Mapping[str, int] | None = None, *, target: str = "cuda",
          specialize: Mapping[str, int] | None = None) -> Program:
    """Lower a schedule under `config` to its kernels, without compiling or running anything.

    The schedule is checked as `tc.build` checks it (isl proves it legal under this config), then each
    kernel is built as loop-nest IR. `print()` the result to read the loop nests; `.source()` is the
    Triton module, `.kernels` the kernels in launch order and `.buffers` the tensors stored between
    them. It prints (repr) as a summary of its kernels, config and target.

    Args:
        sched: the schedule.
        config: knob name -> value; knobs it leaves out take their first choice.
        target: the form of `.source()`: "cuda" (the GPU's, the default here, whatever the machine) or
            "interpreter" (Triton's CPU interpreter; tilec/lower/targets.py says what differs).
        specialize: size name -> positive int, baked into the source as constants (masks dropped where
            isl proves it); a kernel built so refuses calls with other sizes.

    Returns:
        The `Program`.

    Raises:
        ArgumentError: `sched` is not a Schedule; the config names a knob the schedule lacks or gives a
            value that is not one of its choices; `specialize` names no size of the schedule, gives no
            positive int or breaks a `tc.assume` fact.
        IllegalScheduleError: the schedule would compute a wrong answer under this config.
        LoweringError: `target` is neither "cuda" nor "interpreter", or the schedule cannot be expressed
            in Triton under this config.

    Example:
        >>> io, ii = s[C].split(i, tc.knob("BM", [16, 32]))
        >>> program = tc.lower(s, config={"BM": 32})
        >>> program
        <Program: C_kernel (stages C); Y_kernel (stages Y); config BM=32; buffers C; target cuda>
        >>> print(program)  # doctest: +ELLIPSIS
        kernel C_kernel  (stages: C; num_warps=4)
          config: BM=32
          grid (1)
            for io in [0, cdiv(M, 32)):  serial  # C.io: serial spatial loop
        ...
        >>> "@triton.jit" in program.source()
        True
    """
    if not isinstance(sched, Schedule):
        raise ArgumentError(f"argument 1, 'sched' to lower: expected a Schedule, got {type(sched).__name__}")
    return Program(sched, config, target=target, specialize=specialize)
