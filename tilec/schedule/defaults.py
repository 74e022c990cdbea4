"""The default schedule: what an unscheduled stage gets, so that every compute builds and runs.

The default is made by calling the primitives on a detached stage (whose steps are its own, not in the
schedule's trace), so it is a trace too: `default_trace(s[C])` is its steps, `str()` of it the Python
that applies the same schedule by hand, and `tc.replay` of it gives a schedule that lowers to the same
loops.

A root stage is tiled on its last two spatial axes and its last reduce axis, the remaining outer
spatial loops are fused into one grid axis (`program_id.0`), and reductions loop over tiles of any
length. A stage placed with compute_at but otherwise untouched gets the same tiles on the axes that
its place does not fix, run as serial loops. A scan runs along its axis in one program: that axis is
the innermost serial loop over tiles (`_default_scan`). A sort holds its axis in one tile, a row per program
(`_default_sort`).
"""

from __future__ import annotations

from collections.abc import Iterable

from tilec.errors import ArgumentError
from tilec.ir.expr import IterVar
from tilec.schedule.schedule import Stage
from tilec.schedule.trace import Trace


def _tile_sizes(n_spatial: int, has_reduce: bool) -> list[int]:
    if n_spatial == 0:
        return []
    if n_spatial == 1:
        return [16] if has_reduce else [1024]
    return [32, 32] if has_reduce else [16, 64]


def default_stage(stage: Stage, fixed=frozenset()) -> Stage:
    """A fresh stage for `stage.tensor` with the default schedule; axes in `fixed` are left alone."""
    st = Stage(stage.sched, stage.tensor, detached=True)
    t = stage.tensor
    if t.scan_axis is not None and t.scan_axis not in fixed:
        return _default_scan(stage, st, fixed)
    if t.sort_axis is not None and t.sort_axis not in fixed:
        return _default_sort(stage, st, fixed)
    spatial = [a for a in t.axis if a not in fixed]
    reduce = [a for a in t.reduce_axis if a not in fixed]
    sizes = _tile_sizes(len(spatial), bool(reduce))
    tiled = spatial[len(spatial) - len(sizes):]
    plain = spatial[: len(spatial) - len(sizes)]
    outers, inners = [], []
    for axis, f in zip(tiled, sizes):
        o, i = st.split(axis, f)
        outers.append(o)
        inners.append(i)
    red_outer, red_inner = [], []
    if reduce:
        o, i = st.split(reduce[-1], 64 if len(spatial) <= 1 else 32)
        red_outer, red_inner = [*reduce[:-1], o], [i]
    fixed_leaves = [a for a in st.leaves if a in fixed]
    st.reorder(*fixed_leaves, *plain, *outers, *red_outer, *inners, *red_inner)
    if stage.attach is None:
        _bind_fused(st, [*plain, *outers])
    st.warps = stage.warps  # the stage's own num_warps (the user's step, not the default's): kept, not a step
    return st


def default_trace(stage: Stage, fixed: Iterable[IterVar] = frozenset()) -> Trace:
    """The steps of the default schedule of `stage` (`s[C]`) as a `Trace`: what lowering applies to a stage
    the user never scheduled (axes in `fixed`, those its compute_at place fixes, left alone).
    `print(default_trace(s[C]))` is the Python that applies it by hand; `tc.replay` of it rebuilds it.

    Args:
        stage: a stage of a schedule (`s[C]`); a cache stage has no default steps.
        fixed: the tensor's axes that its compute_at place fixes (left unsplit).

    Returns:
        The `Trace` of the default's primitive calls (empty for a cache stage).

    Raises:
        ArgumentError: `stage` is not a stage.

    Example:
        >>> print(tc.default_trace(s[C]))
        s = tc.create_schedule(outputs)
        C = s["C"]
        C_i, C_j = C.tensor.axis
        (C_k,) = C.tensor.reduce_axis
        C_io, C_ii = C.split(C_i, 32)
        C_jo, C_ji = C.split(C_j, 32)
        C_ko, C_ki = C.split(C_k, 32)
        C.reorder(C_io, C_jo, C_ko, C_ii, C_ji, C_ki)
        C_io_jo = C.fuse(C_io, C_jo)
        C.bind(C_io_jo, "program_id.0")
        <BLANKLINE>
    """
    if not isinstance(stage, Stage):
        raise ArgumentError(f"argument 1, 'stage' to default_trace: expected a stage (s[C]), got "
                            f"{type(stage).__name__}")
    t = stage.tensor
    axes = {stage.name: (tuple(a.name for a in t.axis), tuple(a.name for a in t.reduce_axis))}
    return Trace(default_stage(stage, fixed).steps, axes) if stage.kind == "compute" else Trace()


def _bind_fused(st: Stage, axes: list) -> None:
    """The axes (outer first) fused into one, bound to program_id.0: a root stage's grid."""
    if not axes:
        return
    g = axes[0]
    for nxt in axes[1:]:
        g = st.fuse(g, nxt)
    st.bind(g, "program_id.0")


def _default_scan(stage: Stage, st: Stage, fixed) -> Stage:
    """A scan along axis t: t split by 256, its outer part the innermost serial loop (a carry between its
    iterations) and its inner part a tile; the last other axis tiled by 16 (their rows scanned at once),
    the remaining outer loops fused into one grid axis, as a root stage's are."""
    t = stage.tensor.scan_axis
    others = [a for a in stage.tensor.axis if a not in fixed and a is not t]
    to, ti = st.split(t, 256)
    outers, inners = others[:-1], []
    if others:
        o, i = st.split(others[-1], 16)
        outers, inners = others[:-1] + [o], [i]
    fixed_leaves = [a for a in st.leaves if a in fixed]
    st.reorder(*fixed_leaves, *outers, to, *inners, ti)
    if stage.attach is None:
        _bind_fused(st, outers)
    st.warps = stage.warps
    return st


def _default_sort(stage: Stage, st: Stage, fixed) -> Stage:
    """A sort along axis t: t whole in one tile (split by the next power of two of its extent, which must be a
    constant; a size's needs a schedule and tc.assume), the remaining axes fused into one grid axis (a row per
    program), as a root stage's are."""
    from tilec.ir.expr import Const

    t = stage.tensor.sort_axis
    others = [a for a in stage.tensor.axis if a not in fixed and a is not t]
    ext = t.extent.value if isinstance(t.extent, Const) else 1024
    to, ti = st.split(t, 1 << max(0, (ext - 1).bit_length()))
    fixed_leaves = [a for a in st.leaves if a in fixed]
    st.reorder(*fixed_leaves, *others, to, ti)
    if stage.attach is None:
        _bind_fused(st, others)
    st.warps = stage.warps
    return st
