"""Loop fusion for `compute_with`: two sibling loops of a kernel's IR become one.

`s[U].compute_with(s[G], ko)` asks that U's outermost loop run as one loop with G's loop `ko`. The
kernel is built as usual (G's loop, then U's, each with its accumulator and loads), and this pass,
on the built IR, turns

    acc_G = 0;  for ko: {G's body};  G_val = acc_G ...;  acc_U = 0;  for k2o: {U's body};  U_val = ...

into

    acc_G = 0;  acc_U = 0;  for ko: {G's body; U's body with k2o -> ko};  G_val = ...;  U_val = ...

The statements between the two loops that read what the first loop computes (G's rounding) move
after the fused loop; the others (U's accumulator) move before it. In the fused body, a statement of
U's that is the same as one of G's once renamed (the offsets along K, the X tile: the same address
and mask) is dropped and its name read as G's: one X load feeds both dots.

It is legal because the schedule refused (`IllegalScheduleError`) two stages of which one reads the
other: their iterations are independent, so interleaving them computes the same values. Everything
else that could change a value is refused here with a `LoweringError`: loops that differ (extent,
kind, pipelining), loops that are not siblings, a statement between them that U's loop reads but that
needs G's loop, U's loop reading what G's loop computes.
"""

from __future__ import annotations

import copy
import dataclasses

from tilec.errors import LoweringError
from tilec.lower.nest import Assign, Comment, For, KernelIR, Load, defined, names_read_stmt, rename_stmt
from tilec.lower.nest_printer import show
from tilec.lower.triton_printer import render


def _written(body) -> set[str]:
    out = set()
    for node in body:
        if isinstance(node, For):
            out.add(node.var)
            out |= _written(node.body)
        elif defined(node) is not None:
            out.add(defined(node))
    return out


def _find(body: list, key: str):
    """(the statement list holding the loop `key`, its index), searching nested loops too; or None."""
    for n, node in enumerate(body):
        if isinstance(node, For):
            if node.key == key:
                return body, n
            found = _find(node.body, key)
            if found is not None:
                return found
    return None


def _same(node) -> object:
    """A statement without what names or describes it: two equal ones compute the same value."""
    return dataclasses.replace(node, name="", note=None)


def fuse(kernel: KernelIR, first: str, second: str, what: str) -> KernelIR:
    """`kernel` with the loop keyed `second` ("U.k2o") fused into the loop `first` ("G.ko"); `what` names
    the primitive in errors ("compute_with(U, G.ko)")."""
    def fail(why: str) -> LoweringError:
        return LoweringError(f"{what}: {why}")

    kernel = copy.deepcopy(kernel)  # the builder's loops are left as they were built

    a, b = _find(kernel.body, first), _find(kernel.body, second)
    if a is None or b is None:
        missing = first if a is None else second
        raise fail(f"kernel {kernel.name} has no loop {missing}; both stages must be placed in one kernel, at "
                   f"the same loop (compute_at the same stage and axis), and the loops must be serial loops")
    (body, i), (body2, j) = a, b
    if body is not body2:
        raise fail(f"the loops {first} and {second} are not in the same loop of kernel {kernel.name}; place both "
                   f"stages at the same loop (compute_at the same stage and axis)")
    target, own = body[i], body[j]
    head = lambda x: (x.start, x.extent, x.kind, x.stages)  # noqa: E731
    if head(target) != head(own):
        values = kernel.config
        extents = [show(x.extent, values) for x in (target, own)]
        stages = [f", stages={show(x.stages, values)}" if x.stages is not None else "" for x in (target, own)]
        written = (f" (as written: {render(target.extent)} and {render(own.extent)}; split both by the same knob)"
                   if target.extent != own.extent and extents[0] == extents[1] else "")
        raise fail(f"the loops differ: {first} runs [0, {extents[0]}) {target.kind}{stages[0]}, {second} runs "
                   f"[0, {extents[1]}) {own.kind}{stages[1]}{written}; give both the same split factor and pipelining")
    if target.kind != "serial":
        raise fail(f"{first} is a {target.kind} loop; only serial loops are fused")
    lo, hi = min(i, j), max(i, j)
    one, two = body[lo], body[hi]
    # the statements between the loops: those that need the first loop go after the fused loop
    needs = _written([one]) | {one.var}
    before, after = [], []
    for node in body[lo + 1:hi]:
        if names_read_stmt(node) & needs:
            after.append(node)
            needs |= _written([node])
        else:
            before.append(node)
    late = names_read_stmt(two) & needs
    if late:
        raise fail(f"{two.key}'s loop reads {', '.join(sorted(late))}, which is computed by or after {one.key}'s "
                   f"loop; the stages are not independent there")
    early = names_read_stmt(one) & _written(before)
    if early:  # pragma: no cover - names are unique in a kernel; a guard, never a mixed-up kernel
        raise fail(f"{one.key}'s loop reads {', '.join(sorted(early))} (an internal error; please report it)")

    # the fused body: the first loop's statements, then the second's renamed, shared statements once
    ren = {two.var: one.var}
    seen = {_same(n): n.name for n in one.body if isinstance(n, (Assign, Load))}
    comments = {n for n in one.body if isinstance(n, Comment)}
    merged = list(one.body)
    for node in two.body:
        new = rename_stmt(node, ren)
        if isinstance(new, (Assign, Load)) and _same(new) in seen:
            ren[new.name] = seen[_same(new)]
            if isinstance(new, Load) and merged and isinstance(merged[-1], Comment) and merged[-1] not in comments:
                note = merged[-1].text.replace(", loaded here", "")  # "X_shared_: tile of X read by U"
                merged[-1] = Comment(f"{note}: {seen[_same(new)]}, the same tile, loaded once above")
            continue
        if isinstance(new, Comment) and new in comments:
            continue
        merged.append(new)
    role = f"{one.role}; {two.role.split(':')[0]} runs in it too (compute_with)"
    fused = dataclasses.replace(one, body=merged, role=role, key=target.key)  # the target's loop, for the next
    body[lo:hi + 1] = before + [fused] + after
    return kernel


# -- the pass ---------------------------------------------------------------------------------

def compute_with(kernels: list[KernelIR], program) -> list[KernelIR]:
    """Each kernel with its compute_with stages' outermost loops fused into the loops they name (`fuse`),
    in the order of the kernel's stages. A stage and its target whose loops both run once at these sizes
    need nothing (their bodies are one block already); a stage without a serial loop, or a target loop
    that is not its stage's outermost, is refused with a `LoweringError` saying which loop to use."""
    return [_compute_with(k, program) for k in kernels]


def _compute_with(kernel: KernelIR, program) -> KernelIR:
    for name in kernel.stages:  # compute_with: a stage's outermost loop joins another stage's loop
        st = program.sched.stages[name]
        if st.fused_with is not None:
            other, axis = st.fused_with
            what = f"compute_with({name}, {other.name}.{axis.name})"
            if _runs_once(program, st) and _runs_once(program, other):
                continue  # both loops run once at these sizes: the two bodies are one block already
            own = _outermost_loop(program, st, what)
            if _outermost_loop(program, other, what) != axis.name:
                raise LoweringError(f"{what}: {axis.name} is not {other.name}'s outermost loop (that is "
                                    f"{_outermost_loop(program, other, what)}); compute_with fuses the outermost "
                                    f"loops of two stages placed at the same loop")
            kernel = fuse(kernel, f"{other.name}.{axis.name}", f"{name}.{own}", what)
    return kernel


def _runs_once(program, st) -> bool:
    """Whether stage st's loops all run once here (single leaves: no loop to fuse)."""
    lay = program.plan.placed[st.name].layout if st.name in program.plan.placed else None
    return lay is not None and not lay.loops and bool(lay.singles)


def _outermost_loop(program, st, what: str) -> str:
    """The name of the outermost serial loop of stage `st` in its kernel (a LoweringError if none)."""
    loops = program.plan.placed[st.name].layout.loops if st.name in program.plan.placed else []
    if not loops:
        raise LoweringError(f"{what}: {st.name} has no serial loop to fuse (its loops are tiles or grid "
                            f"axes); split its reduction axis and keep the outer part as a loop")
    return loops[0].name
