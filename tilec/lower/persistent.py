"""The persistent tile loop (`s[X].persistent(axis)`), a pass over the built IR: the statements after
the persistent grid axis's program id run in a loop over the tiles that program takes (pid, pid +
NUM_PROGS, ...), the program id read as the loop's tile (`TileId`); the launch runs min(#SMs, tiles)
programs (`KernelIR.persistent`, launch.py). The kernel gains the `NUM_PROGS` parameter (the number of
programs) and the parameters the tile count needs; `flatten` is the loop's flattening hint to Triton.
"""

from __future__ import annotations

import dataclasses

from tilec.errors import LoweringError
from tilec.ir.knob import Knob
from tilec.lower import code as c
from tilec.lower.builder import param_key, scalar_code
from tilec.lower.nest import For, KernelIR, Param, ProgramId, TileId, defined


def tile_loops(kernels: list[KernelIR], program) -> list[KernelIR]:
    """Each kernel whose root stage has a persistent grid axis (`Layout.persistent`), with the statements
    after that axis's `ProgramId` moved into a `For` of kind "persistent" over the tiles (from the program
    id, in steps of `NUM_PROGS`), the program id read as the loop's `TileId`; the kernel is marked
    `persistent` (its launch runs min(#SMs, tiles) programs) and gains the parameters the loop reads, in
    the order the builder sorts parameters (`param_key`). Other kernels pass through unchanged."""
    return [_tile_loop(k, program) if _persistent(k, program) else k for k in kernels]


def _persistent(kernel: KernelIR, program):
    placed = program.plan.placed.get(kernel.root)
    return placed.layout.persistent if placed is not None else None


def _names(body, out: set) -> set:
    for node in body:
        if isinstance(node, For):
            out.add(node.var)
            _names(node.body, out)
        elif defined(node) is not None:
            out.add(defined(node))
    return out


def _find(body: list, dim: int):
    """(the statement list holding the program id of grid dimension `dim`, its index), or None."""
    for n, node in enumerate(body):
        if isinstance(node, ProgramId) and node.dim == dim:
            return body, n
        if isinstance(node, For):
            found = _find(node.body, dim)
            if found is not None:
                return found
    return None


def _tile_loop(kernel: KernelIR, program) -> KernelIR:
    lay = program.plan.placed[kernel.root].layout
    axis, _ = lay.persistent
    st = lay.stage
    names = set(kernel.names) | {p.name for p in kernel.params}
    names = _names(kernel.body, names)
    params = {p.name: p for p in kernel.params}
    new: list[Param] = []

    def param(name: str, kind: str, **kw) -> str:
        if name not in params:
            if name in names:
                raise LoweringError(f"the name {name!r} is used for two different things in kernel "
                                    f"{st.name} (a tensor, size, knob or axis); rename one")
            names.add(name)
            params[name] = Param(name, kind, **kw)
            new.append(params[name])
        elif params[name].kind != kind:
            raise LoweringError(f"the name {name!r} is used for two different things in kernel "
                                f"{st.name} (a tensor, size, knob or axis); rename one")
        return name

    body = copy_body(kernel.body)
    found = _find(body, st.binds[axis])
    if found is None:
        raise LoweringError(f"{st.name}.persistent({axis.name}): no program id of {axis.name} in the built kernel "
                            f"(an internal error; please report it)")
    stmts, n = found
    var = stmts[n].name
    flatten = st.persistent_axes[axis]  # an int or a knob (a constexpr parameter)
    flat = scalar_code(flatten, program.specialize, param) if isinstance(flatten, Knob) else c.Num(bool(flatten))
    step = param("NUM_PROGS", "programs")
    tile, k = "tile", 1
    while tile in names:
        tile, k = f"tile_{k}", k + 1
    names.add(tile)
    loop = For(tile, scalar_code(axis.extent, program.specialize, param), "persistent", None,
               f"{st.name}.{axis.name}: persistent tile loop, {step} programs (min(#SMs, tiles))",
               step=c.Name(step), flatten=flat)
    loop.body = [TileId(var, tile)] + stmts[n + 1:]
    stmts[n:] = [loop]
    key = param_key(program.sched)
    ordered = list(kernel.params)
    for p in new:  # where a sort of all of them puts it: before the first one that sorts after it
        at = next((i for i, q in enumerate(ordered) if key(q) > key(p)), len(ordered))
        ordered.insert(at, p)
    return dataclasses.replace(kernel, body=body, params=ordered, persistent=True, names=frozenset(names))


def copy_body(body: list) -> list:
    """The statement lists copied (loops are mutable: a pass rewrites a copy, not the kernel it was given)."""
    return [dataclasses.replace(node, body=copy_body(node.body)) if isinstance(node, For) else node for node in body]
