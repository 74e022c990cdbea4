"""Lowering, the whole schedule: which stages share a kernel, which tensors memory must hold, the
kernels in launch order. `lower(s, config)` returns it; print it to read the loop nests.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from tilec.errors import ArgumentError, LoweringError
from tilec.ir.knob import resolve_config
from tilec.lower import passes
from tilec.lower.nest import KernelIR
from tilec.lower.nest_printer import render_nest
from tilec.lower.triton_printer import Form, module, uses_libdevice
from tilec.plan.analysis import Analysis
from tilec.plan.check import check_schedule
from tilec.schedule.schedule import Schedule

TARGETS = ("cuda", "interpreter")


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
