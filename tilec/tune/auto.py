"""tc.auto_schedule: a schedule made by rules over the compute, whose knobs span its sketches, and
`schedule_code`: a schedule (a tuned one) as the Python a user pastes into their file and edits.

A rule is a small function `rule(s, stage) -> bool` that says itself whether it applies to a stage (False:
it does not, nothing done) and applies its primitives. `RULES` is the list, in order, each tried on every
stage it may concern (as `tilec/lower/passes.py` lists the passes):

1. `inline_elementwise`: an elementwise stage that is no output is substituted into its readers (no buffer,
   no kernel; its rounding kept as a cast);
2. `online_statistics`: a sum that reads a max (and sums of the same exp(X - max)) through inlined stages
   runs them as running statistics in its own loop (softmax's and attention's passes become one);
   `fuse_rows`: an elementwise stage that reads per-row values at its leading axes (softmax's Y of mx[r] and
   den[r]; a norm's rstd[r], an output too, and the sum it reads) runs a program per row, those values
   computed at the row: one kernel;
   `fuse_scores`: an online sum whose scores are a contraction read only by it and its statistics
   (attention's O over S) computes them in its loop over key tiles: FlashAttention, one kernel;
3. `fuse_epilogue`: a reduction read elementwise at its own position by one elementwise root stage (GEMM then
   SiLU, a row sum then a scale) is computed in that stage's tile loop: one kernel, the epilogue on the tile
   (tiled as rule 4 tiles a contraction);
4. `tile_contraction`: a sum of products over two or more spatial axes gets `tl.dot` tiles: the last two
   spatial axes tiled (BM x BN knobs), the reduce axis split (BK), the tiles' loops outermost on the grid
   (a plain GEMM's in grouped order, a GROUP_M knob), pipelined loads, warps;
5. `tile_reduction`: another reduction (an online loop's target too): a tile of its last spatial axis and of
   its reduce axis (knobs), the outer axes on the grid;
6. `tile_elementwise`: an elementwise root (or a scatter): its last axis tiled (a knob), the others on the grid
   (a small last axis that is a number, such as a head dimension, one tile, the axis before it in ROWS).

`online_statistics` is tried on consumers first (`CONSUMERS_FIRST`), so that attention's O takes both its
statistics before l would take m alone.

Every primitive is checked by isl as a hand-written one is; a rule whose primitives are refused, or after
which the schedule no longer lowers at its knobs' first choices, is undone (`_attempt`): the stage keeps what
the rules before gave it, or the default schedule. Scans and sorts keep their defaults. The knobs' first
choices are the rules' guesses; `tc.tune` searches the rest like any hand schedule's knobs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tilec.errors import ArgumentError, LoweringError, TilecError
from tilec.ir.expr import Const, Load, Reduce, walk
from tilec.ir.knob import Knob, knob
from tilec.ir.tensor import Tensor
from tilec.schedule.schedule import Schedule, Stage, create_schedule
from tilec.schedule.state import LOOPS
from tilec.schedule.trace import KnobRef, Step, Trace
from tilec.tune.cost import product_loads


def _attempt(s: Schedule, fn: Callable[[], bool], undone: list | None = None, label: str = "") -> bool:
    """Run one rule's primitives; undo them all (the trace is the state) if one is refused or the schedule
    stops lowering at the knobs' first choices, and say why in `undone` ("rule(stage): reason"). A rule whose
    schedule is legal but does not lower (a tile too large for Triton at its guesses) is tried once more with
    every new knob's choices smallest first."""
    from tilec.lower.program import lower

    mark = len(s._steps)
    guesses = None  # the LoweringError at the first guesses, when they are tried again smallest first
    for smallest in (False, True):
        _SMALLEST_FIRST[0] = smallest
        try:
            if not fn():
                s._drop(mark)
                return False
            lower(s)
            return True
        except TilecError as e:
            s._drop(mark)
            if isinstance(e, LoweringError) and guesses is None:
                guesses = e
                continue
            if undone is not None:
                also = f" (and at its guesses: {' '.join(str(guesses).split())[:200]})" if guesses else ""
                undone.append(f"{label}: {type(e).__name__}: {' '.join(str(e).split())[:300]}{also}")
            return False
        finally:
            _SMALLEST_FIRST[0] = False
    return False


def _kind(t: Tensor) -> str:
    if t.scatter is not None:
        return "scatter"
    if t.scan_axis is not None or t.sort_axis is not None:
        return "ordered"
    if isinstance(t.body, Reduce):
        return "contraction" if _is_contraction(t) else "reduction"
    return "elementwise"


def _is_contraction(t: Tensor) -> bool:
    """A sum over one reduce axis of a product of two reads, both reading that axis, with at least two spatial
    axes (a GEMM, a batched GEMM, a convolution as a GEMM): tl.dot's shape."""
    reads = product_loads(t)
    if reads is None or len(t.axis) < 2 or len(reads) < 2:
        return False
    (k,) = t.body.axes
    return all(any(x is k for i in n.indices for x in walk(i)) for n in reads[:2])


_SMALLEST_FIRST = [False]  # set while a rule is tried again after its guesses did not lower (auto_schedule)


def _knob(s: Schedule, stage: Stage, name: str, choices: list[int]) -> Knob:
    """A knob named after its stage (one name per stage and role), declared once; its choices smallest first
    when a rule is tried again because its first guesses made a tile Triton cannot take."""
    full = f"{stage.name}_{name}"
    if full in s.knobs:
        return s.knobs[full]
    return knob(full, sorted(choices) if _SMALLEST_FIRST[0] else choices)


def _readers(s: Schedule, t: Tensor) -> list[Stage]:
    return [s.stages[n] for n in s.graph.successors(t.name) if n in s.stages]


def _through_inlined(s: Schedule, t: Tensor) -> list[Tensor]:
    """The tensors `t` reads, looking through the stages inlined into it."""
    out = []
    for p in t.inputs:
        st = s.stages.get(p.name)
        if st is not None and st.attach == "inline":
            out += _through_inlined(s, p)
        elif st is not None:
            out.append(p)
    return out


def _readers_through_inlined(s: Schedule, t: Tensor) -> list[Stage]:
    """The stages that read `t`, looking through the stages inlined into them (softmax's P = exp(S - m) / l,
    inlined: its readers read S)."""
    out = []
    for r in _readers(s, t):
        if r.attach == "inline":
            out += [x for x in _readers_through_inlined(s, r.tensor) if x not in out]
        elif r not in out:
            out.append(r)
    return out


def _same(indices, axes) -> bool:
    """Whether a read's indices are exactly `axes`, one by one (by identity: `==` on expressions builds one)."""
    return len(indices) == len(axes) and all(a is b for a, b in zip(indices, axes))


def _const(extent) -> int | None:
    """An axis extent that is a number (attention's head dimension), else None."""
    return int(extent.value) if isinstance(extent, Const) and isinstance(extent.value, int) else None


# -- the rules ---------------------------------------------------------------------------------------------

def inline_elementwise(s: Schedule, st: Stage) -> bool:
    t = st.tensor
    if _kind(t) != "elementwise" or t in s.outputs or st.attach is not None:
        return False
    st.compute_inline()
    return True


def online_statistics(s: Schedule, st: Stage) -> bool:
    """A sum that reads a max (through inlined stages) carries it, and the sums of the same exponentials it reads,
    in its own loop. Tried on consumers first (`CONSUMERS_FIRST`): attention's O takes m and l, before l
    would take m alone and leave O a third pass."""
    t = st.tensor
    if _kind(t) not in ("reduction", "contraction") or t.body.op != "sum" or st.online_stats or _statistic(s, st):
        return False
    reads = _through_inlined(s, t)
    maxes = [p for p in reads if isinstance(p.body, Reduce) and p.body.op == "max"]
    if len(maxes) != 1:
        return False
    sums = [p for p in reads if isinstance(p.body, Reduce) and p.body.op == "sum" and maxes[0] in _through_inlined(s, p)]
    st.online(s[maxes[0]], *(s[p] for p in sums))
    return True


def _row_stages(s: Schedule, st: Stage) -> list[Stage]:
    """The stages `st` needs once per row: reductions and elementwise stages (an output too, such as a norm's
    rstd) read at a prefix of their reader's axes, found from `st` through such stages (a norm's Y reads
    rstd[r], which reads ss[r]), each read by nothing but `st` and the others found, and placed nowhere yet;
    and an elementwise output of st's shape that st reads at its own point, which the row's sums read too (a
    fused add's z = x + residual: stored row by row, as the row is reached). A running statistic follows its
    online loop and is not one of them."""
    found: list[Stage] = []
    frontier = [st]
    while True:
        _explore_rows(s, st, frontier, found)
        # an output of st's rows that reads the row's values too (cross-entropy's loss[r] beside dX[r, v]) is
        # computed at the row as well, and what it reads at its rows with it
        frontier = [r for f in found for r in _readers_through_inlined(s, f.tensor) if _row_output(s, st, r, found)]
        if not frontier:
            break
        frontier = list(dict.fromkeys(frontier))
        found += frontier
    chain = {st.name, *(f.name for f in found)}
    # every reader of a stage found must be in the chain (else the row's value is needed elsewhere too)
    while True:
        keep = [f for f in found if all(r.name in chain for r in _readers_through_inlined(s, f.tensor))]
        if len(keep) == len(found):
            order = list(s.stages)  # producers first: a row's sums before the row output that reads them
            return sorted(found, key=lambda f: order.index(f.name))
        found = keep
        chain = {st.name, *(f.name for f in found)}


def _row_output(s: Schedule, st: Stage, r: Stage, found: list[Stage]) -> bool:
    """Whether `r` is an elementwise output, placed nowhere, of one axis fewer than `st` with st's leading extents:
    a value per row of st, stored as the row is reached."""
    t = r.tensor
    return (r is not st and r not in found and t in s.outputs and _kind(t) == "elementwise" and r.attach is None
            and not r.touched and len(t.axis) == len(st.tensor.axis) - 1
            and all(str(a.extent) == str(b.extent) for a, b in zip(t.axis, st.tensor.axis)))


def _explore_rows(s: Schedule, st: Stage, frontier: list[Stage], found: list[Stage]) -> None:
    """Add to `found` the stages read once per row from the stages in `frontier` (see `_row_stages`)."""
    while frontier:
        q = frontier.pop()
        for p in _through_inlined(s, q.tensor):
            ps = s.stages[p.name]
            if ps in found or ps is st or ps.attach is not None or _kind(p) not in ("reduction", "elementwise") \
                    or _statistic(s, ps) or (p in s.outputs and _kind(p) != "elementwise") or ps.touched and not _only_online(s, ps):
                continue
            own = list(q.tensor.axis)
            if not _read_at_rows(s, q.tensor, p, own):
                continue
            if q is st and len(p.axis) >= len(own) and not (p in s.outputs and _kind(p) == "elementwise"):
                continue  # read at every point of st: not a row's value (but an output stored on the way: below)
            found.append(ps)
            frontier.append(ps)


def _read_at_rows(s: Schedule, t: Tensor, p: Tensor, axes: list) -> bool:
    """Whether every read of `p` by `t`, through the stages inlined into t, is at a prefix of t's `axes` (p[r] in
    Y[r, c]); a stage inlined counts where t reads it at its own point (cross-entropy's lse[r] = m[r] + log(d[r]),
    inlined into dX[r, v]: d is read at dX's row)."""
    seen = False
    for n in t.loads():
        if n.tensor is p:
            if len(n.indices) != len(p.axis) or not _same(n.indices, axes[:len(n.indices)]):
                return False
            seen = True
        elif getattr(s.stages.get(n.tensor.name), "attach", None) == "inline" and p in _through_inlined_all(s, n.tensor):
            if len(n.indices) != len(n.tensor.axis) or not _same(n.indices, axes[:len(n.indices)]):
                return False
            if not _read_at_rows(s, n.tensor, p, list(n.tensor.axis)):
                return False
            seen = True
    return seen


def _through_inlined_all(s: Schedule, t: Tensor) -> list[Tensor]:
    """The tensors `t` reads, looking through inlined stages, those inlined stages included."""
    out = []
    for p in t.inputs:
        out.append(p)
        if getattr(s.stages.get(p.name), "attach", None) == "inline":
            out += _through_inlined_all(s, p)
    return out


def fuse_rows(s: Schedule, st: Stage) -> bool:
    """A root elementwise stage that reads per-row values at its leading axes (softmax's Y reads mx[r] and den[r],
    RMSNorm's Y its rstd[r], which reads the row's sum of squares) runs a program per row, its last axis a loop
    of BLOCK tiles, and those values computed at the row: one kernel, the row's statistics before its elements."""
    t = st.tensor
    if _kind(t) != "elementwise" or st.attach is not None or st.touched or len(t.axis) < 2:
        return False
    rows = _row_stages(s, st)
    if not any(_kind(r.tensor) == "reduction" for r in rows):
        return False
    *outer, last = list(t.axis)
    lo, li = st.split(last, _knob(s, st, "BLOCK", [1024, 256, 4096]))
    st.reorder(*outer, lo, li)
    g = _grid(st, outer)
    outs = [r for r in rows if _row_output(s, st, r, [])]
    for ps in sorted(rows, key=lambda r: r not in outs):  # the row outputs placed first, to place at below
        # a row's sum that only a row output reads (cross-entropy's smoothing sum, read by the loss) is computed
        # at that output: beside it at the row, the output would read the sum before its loop
        owner = [r for r in outs if {x.name for x in _readers_through_inlined(s, ps.tensor)} == {r.name}]
        if owner:
            ps.compute_at(owner[0], owner[0].tensor.axis[-1])
        else:
            ps.compute_at(st, g)
        if _kind(ps.tensor) == "reduction":
            ps.split(ps.tensor.reduce_axis[-1], _knob(s, ps, "BR", [1024, 256, 4096]))
        elif len(ps.tensor.axis) == len(t.axis):  # an output of st's shape (a fused add's sum): stored row by row
            ps.split(ps.tensor.axis[-1], _knob(s, ps, "BLOCK", [1024, 256, 4096]))
    st.num_warps(_knob(s, st, "warps", [4, 8]))
    return True


def _statistic(s: Schedule, st: Stage) -> bool:
    """Whether `st` is a running statistic of another stage's online loop (its own loop is replaced)."""
    return any(st in other.online_stats for other in s.stages.values())


def fuse_scores(s: Schedule, st: Stage) -> bool:
    """FlashAttention's shape: an online sum of products O (O = sum_j P[.., i, j] * V[j, e], P = exp(S - m) / l
    inlined) whose scores S, a contraction read only by O and O's statistics, are computed in O's loop over
    tiles of j: O's rows (i: BM) and its last axis (e: whole where it is a number, the head dimension) a
    program, j in tiles of BN, pipelined; S's own reduction (over the head dimension) in one tile where it
    is a number. One kernel, no score matrix in memory."""
    t = st.tensor
    if (not isinstance(t.body, Reduce) or t.body.op != "sum" or len(t.body.axes) != 1 or len(t.axis) < 2
            or not st.online_stats or st.attach is not None or not _only_online(s, st)):
        return False
    group = {st.name, *(x.name for x in st.online_stats)}
    scores = [p for p in _through_inlined(s, t) if _kind(p) == "contraction" and s.stages[p.name].attach is None
              and not s.stages[p.name].touched and {r.name for r in _readers_through_inlined(s, p)} <= group
              and len(p.axis) == len(t.axis) and str(p.axis[-1].extent) == str(t.reduce_axis[0].extent)]
    if len(scores) != 1:
        return False
    sc = s.stages[scores[0].name]
    *outer, i, e = list(t.axis)
    (j,) = t.reduce_axis
    io, ii = st.split(i, _knob(s, st, "BM", [1, 16, 64] if _keys_per_row(sc.tensor) else [64, 128, 16]))
    width = _const(e.extent)
    eo, ei = st.split(e, width if width is not None and width <= 256 else _knob(s, st, "BE", [64, 128, 32]))
    jo, ji = st.split(j, _knob(s, st, "BN", [64, 32, 128]))
    st.reorder(*outer, io, eo, jo, ii, ei, ji)
    _grid(st, [*outer, io, eo])
    st.pipeline(jo, _knob(s, st, "stages", [3, 2, 4]))
    st.num_warps(_knob(s, st, "warps", [4, 8]))
    (dd,) = sc.tensor.reduce_axis[-1:]
    depth = _const(dd.extent)
    sc.split(dd, depth if depth is not None and depth <= 256 else _knob(s, sc, "BK", [64, 32, 128]))
    sc.compute_at(st, jo)
    return True


def _keys_per_row(scores: Tensor) -> bool:
    """Whether a scores contraction S[.., i, j] reads its keys at i too (varlen decode's k_cache[c, j, h // G, d]
    for query head h = i): rows then share no key tile, so a program of one row reads each key once, where a
    tile of rows would read a key tile per row."""
    *_, i, j = scores.axis
    def uses(idx, v):
        return any(x is v for x in walk(idx))
    return any(any(uses(x, j) for x in n.indices) and any(uses(x, i) for x in n.indices) for n in scores.loads())


def fuse_epilogue(s: Schedule, st: Stage) -> bool:
    """Place a reduction in the tile loop of its one elementwise reader (which `tile_elementwise` tiles first)."""
    t = st.tensor
    if _kind(t) not in ("contraction", "reduction") or t in s.outputs or st.attach is not None or st.online_stats:
        return False
    readers = _readers(s, t)
    if len(readers) != 1 or _kind(readers[0].tensor) != "elementwise" or readers[0].attach is not None:
        return False
    y = readers[0]
    if len(y.tensor.axis) != len(t.axis):
        return False
    reads = [n for n in walk(y.tensor.body) if isinstance(n, Load) and n.tensor is t]
    if not reads or not all(_same(n.indices, y.tensor.axis) for n in reads):
        return False
    if any(st2.online_stats and t in [x.tensor for x in st2.online_stats] for st2 in s.stages.values()):
        return False
    loops = _tile_like(s, y, t)
    st.compute_at(y, loops[-1])
    _split_reduce(s, st, t, 32 if _kind(t) == "contraction" else 256)
    return True


def _tile_like(s: Schedule, y: Stage, t: Tensor) -> list:
    """Tile root stage y as its producer t would be tiled (a contraction's output tiles, else an elementwise
    stage's), returning the grid loops (outermost first)."""
    if _kind(t) == "contraction":
        return _tile_2d(s, y, [64, 128, 32], [64, 128, 32])
    return _tile_rows(s, y)


def _tile_2d(s: Schedule, st: Stage, bm: list, bn: list) -> list:
    axes = list(st.tensor.axis)
    *outer, i, j = axes
    io, jo, ii, ji = st.tile(i, j, _knob(s, st, "BM", bm), _knob(s, st, "BN", bn))
    g = _tile_grid(s, st, outer, io, jo)
    st.num_warps(_knob(s, st, "warps", [4, 8]))
    return [g]


def _tile_grid(s: Schedule, st: Stage, outer: list, io, jo):
    """The grid of a 2-D tiling: a plain GEMM's tiles in grouped order (GROUP_M, for L2 reuse: 8, or 1, the
    row-major order, or 4), a batched one's (outer axes first) fused in row-major order."""
    if outer:
        return _grid(st, [*outer, io, jo])
    g = st.swizzle(io, jo, group=_knob(s, st, "GROUP_M", [8, 1, 4]))
    st.bind(g, "program_id.0")
    return g


def _tile_rows(s: Schedule, st: Stage) -> list:
    *outer, last = list(st.tensor.axis)
    lo, li = st.split(last, _knob(s, st, "BLOCK", [1024, 256, 2048]))
    st.reorder(*outer, lo, li)
    return [_grid(st, [*outer, lo])]


def _grid(st: Stage, axes: list):
    g = axes[0]
    for a in axes[1:]:
        g = st.fuse(g, a)
    st.bind(g, "program_id.0")
    return g


def _split_reduce(s: Schedule, st: Stage, t: Tensor, default: int) -> None:
    (k,) = t.reduce_axis[-1:]
    choices = [32, 64, 16] if default == 32 else [256, 1024, 64]
    ko, ki = st.split(k, _knob(s, st, "BK", choices))
    if default == 32:
        st.pipeline(ko, _knob(s, st, "stages", [3, 2, 4]))


def tile_contraction(s: Schedule, st: Stage) -> bool:
    t = st.tensor
    if _kind(t) != "contraction" or st.attach is not None or st.touched or _statistic(s, st):
        return False
    *outer, i, j = list(t.axis)
    (k,) = t.reduce_axis
    io, ii = st.split(i, _knob(s, st, "BM", [64, 128, 32]))
    jo, ji = st.split(j, _knob(s, st, "BN", [64, 128, 32]))
    ko, ki = st.split(k, _knob(s, st, "BK", [32, 64, 16]))
    st.reorder(*outer, io, jo, ko, ii, ji, ki)
    _tile_grid(s, st, outer, io, jo)
    st.pipeline(ko, _knob(s, st, "stages", [3, 2, 4]))
    st.num_warps(_knob(s, st, "warps", [4, 8]))
    return True


def _only_online(s: Schedule, st: Stage) -> bool:
    """Whether the only step that decided `st`'s loops is `online` (its loops are still the default's serial
    ones, which a root stage must not keep: one program for the whole reduction)."""
    return bool(st.online_stats) and all(x.primitive == "online" or x.primitive not in LOOPS
                                         for x in s.trace.steps if x.stage == st.name)


def tile_reduction(s: Schedule, st: Stage) -> bool:
    """A root reduction (an online loop's target too): its reduce axis split (BR), its last spatial axis in
    tiles of BS rows, the outer spatial axes on the grid."""
    t = st.tensor
    if (_kind(t) not in ("reduction", "contraction") or st.attach is not None or _statistic(s, st)
            or (st.touched and not _only_online(s, st))):
        return False
    *outer, last = list(t.axis) or [None]
    k = t.reduce_axis[-1]
    ko, ki = st.split(k, _knob(s, st, "BR", [256, 1024, 64]))
    if last is None:
        st.reorder(*t.reduce_axis[:-1], ko, ki)
        return True
    lo, li = st.split(last, _knob(s, st, "BS", [1, 4, 16]))
    st.reorder(*outer, lo, *t.reduce_axis[:-1], ko, li, ki)
    _grid(st, [*outer, lo])
    return True


def tile_elementwise(s: Schedule, st: Stage) -> bool:
    """An elementwise root (or a scatter): its last axis in BLOCK tiles, the others on the grid; where the last
    axis is a small number (RoPE's head dimension, 64), it is one tile and the axis before it is split in ROWS
    so that a program still holds about 1024 elements."""
    t = st.tensor
    if _kind(t) not in ("elementwise", "scatter") or st.attach is not None or st.touched:
        return False
    width = _const(t.axis[-1].extent) if len(t.axis) >= 2 else None
    if width is None or width >= 512:
        _tile_rows(s, st)
        return True
    *outer, prev, last = list(t.axis)
    tile = 1 << max(0, (width - 1).bit_length())  # the next power of two
    rows = sorted({max(1, n // tile) for n in (1024, 256, 4096)}, key=[1024 // tile, 256 // tile, 4096 // tile].index)
    po, pi = st.split(prev, _knob(s, st, "ROWS", rows))
    lo, li = st.split(last, tile)
    st.reorder(*outer, po, lo, pi, li)
    _grid(st, [*outer, po, lo])
    return True


RULES: list[Callable[[Schedule, Stage], bool]] = [inline_elementwise, online_statistics, fuse_rows, fuse_scores,
                                                  fuse_epilogue, tile_contraction, tile_reduction, tile_elementwise]
CONSUMERS_FIRST = {online_statistics}  # rules tried on the stages in reverse order (readers before producers)


def auto_schedule(*outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A schedule of `outputs` made by rules (`RULES`: inline, online, epilogue fusion, dot tiles, reduction
    and elementwise tiles), with knobs for its tile sizes, pipelining and warps; checked as any schedule.

    Build it as it is (the knobs' first choices), or give it to `tc.tune`, which searches its knobs for the
    shape mix; `schedule_code(s, config)` prints it as the Python that makes it by hand.

    Args:
        *outputs: the computed tensors to store (or one list of them).

    Returns:
        The `Schedule` (`s.trace` holds what the rules did; `s.auto_undone` lists each rule that began on a
        stage and was undone, "rule(stage): the error that refused it").

    Raises:
        ArgumentError: no outputs, or something other than computed tensors.

    Example:
        >>> s2 = tc.auto_schedule(Y)          # C (A @ W) is computed in Y's tiles: one kernel, tl.dot
        >>> sorted(s2.knobs)
        ['C_BK', 'C_stages', 'Y_BM', 'Y_BN', 'Y_GROUP_M', 'Y_warps']
        >>> [k.name for k in tc.lower(s2).kernels]
        ['Y_kernel']
        >>> a, w = torch.randn(40, 24), torch.randn(24, 20)
        >>> torch.allclose(tc.build(s2, [A, W, Y])(a, w), torch.nn.functional.silu(a @ w), atol=1e-4)
        True
    """
    outs = list(outputs[0]) if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)) else list(outputs)
    if not outs or not all(isinstance(t, Tensor) and not t.is_placeholder for t in outs):
        raise ArgumentError(f"auto_schedule: expected the computed tensors to store, got {outs!r}")
    s = create_schedule(outs)
    undone: list[str] = []
    for rule in RULES:
        for name in (reversed(list(s.stages)) if rule in CONSUMERS_FIRST else list(s.stages)):
            st = s.stages[name]
            if st.kind == "compute":
                _attempt(s, lambda rule=rule, st=st: rule(s, st), undone, f"{rule.__name__}({name})")
    s.auto_undone = undone  # the rules that applied to a stage and were undone, with the reason
    return s


def schedule_code(s: Schedule, config: dict | None = None) -> str:
    """The schedule as Python that makes it by hand (`print(schedule_code(s))`): its trace, each knob's value in
    `config` made its first choice (a flag's written as True or False), so the code, built as it is, makes the
    very kernel (the same source) the config does, and stays a space `tc.tune` can search. It starts with
    `s = tc.create_schedule(outputs)`; define `outputs` (and `tc`) before it.

    Args:
        s: a schedule (`tc.auto_schedule(...)`, a tuned `Tuned.schedule`).
        config: knob name -> value (a tuned plan's config).

    Returns:
        The Python text.

    Raises:
        ArgumentError: `config` names a knob the schedule lacks or a value not among its choices.

    Example:
        >>> io, ii = s[C].split(i, tc.knob("BM", [64, 128]))
        >>> print(tc.schedule_code(s, {"BM": 128}), end="")
        s = tc.create_schedule(outputs)
        BM = tc.knob("BM", [128, 64])
        C = s["C"]
        C_i, C_j = C.tensor.axis
        C_io, C_ii = C.split(C_i, BM)
    """
    if not isinstance(s, Schedule):
        raise ArgumentError(f"schedule_code: expected a Schedule, got {type(s).__name__}")
    config = dict(config or {})
    for name, value in config.items():
        if name not in s.knobs:
            raise ArgumentError(f"schedule_code: {name!r} is no knob of this schedule (its knobs: "
                                f"{', '.join(sorted(s.knobs)) or 'none'})")
        if value not in s.knobs[name].choices:
            raise ArgumentError(f"schedule_code: {name}={value!r} is not one of its choices {list(s.knobs[name].choices)}")

    def fixed(a):  # a knob keeps its name and choices, its chosen value first (the choice a build makes)
        if isinstance(a, KnobRef) and not a.flag and a.name in config:
            v = config[a.name]
            return KnobRef(a.name, (v, *(c for c in a.choices if c != v)), a.flag)
        if isinstance(a, KnobRef) and a.flag and a.name in config:
            return bool(config[a.name])  # a flag's choices are (0, 1): its value is written out
        if isinstance(a, tuple) and not hasattr(a, "_fields"):
            return tuple(fixed(x) for x in a)
        return a

    steps = [Step(st.primitive, st.stage, tuple(fixed(a) for a in st.args), st.results, st.within) for st in s.trace.steps]
    return str(Trace(steps, s.trace.axes))


class AutoTuned:
    """`tc.autotuned(...)`: a callable that tunes the auto schedule of its outputs for each new shape it is called
    with (a study of `trials` configs in `storage`, where a later process finds it measured: it then builds
    without measuring), and afterwards dispatches that shape to its tuned kernel. `.tuned` holds the `Tuned`
    of each shape (by its sizes' key), `.schedule` the auto schedule, `.schedule_code(**sizes)` a tuned
    shape's schedule as code."""

    def __init__(self, outputs, args, reference, trials: int, storage: str | None, progress):
        from tilec.runtime.kernel import Kernel

        self.schedule = auto_schedule(outputs)
        self.args, self.reference, self.trials, self.storage, self.progress = args, reference, trials, storage, progress
        self._shape_kernel = Kernel(self.schedule, args)  # reads a call's sizes (and checks its tensors)
        if self._shape_kernel.call_sizes:
            raise ArgumentError(f"autotuned: the size {', '.join(self._shape_kernel.call_sizes)} is in no input's "
                                f"shape; the tuner reads every size from the tensors it makes")
        self.tuned: dict = {}

    def _sizes(self, tensors) -> dict[str, int]:
        n = len(self._shape_kernel.inputs)
        self._shape_kernel._bind(list(tensors[:n]))  # a call's tensors checked (shapes, dtypes) before tuning
        return self._shape_kernel.read_sizes(tensors[:n])

    def __call__(self, *tensors, out=None):
        from tilec.tune.mix import ShapeMix
        from tilec.tune.study import tune

        sizes = self._sizes(tensors)
        key = ShapeMix.key(sizes)
        if key not in self.tuned:
            self.tuned[key] = tune(self.schedule, ShapeMix([(sizes, 1)]), trials=self.trials, args=self.args,
                                   reference=self.reference, storage=self.storage, progress=self.progress)
        return self.tuned[key](*tensors, out=out)

    def schedule_code(self, **sizes: int) -> str:
        """The schedule tuned for a shape already called (all its sizes), as code (`tc.schedule_code`)."""
        from tilec.tune.mix import ShapeMix

        key = ShapeMix.key(sizes)
        if key not in self.tuned:
            raise ArgumentError(f"schedule_code: no shape {key or '(none)'} was tuned yet; called with: "
                                f"{', '.join(self.tuned) or 'nothing'}")
        return self.tuned[key].schedule_code()


def autotuned(*outputs: Tensor | Sequence[Tensor], args: Sequence[Tensor], reference: Callable | None = None,
              trials: int = 16, storage: str | None = None, progress: bool | None = None) -> AutoTuned:
    """The one-line path for a compute without a schedule: `op = tc.autotuned(Y, args=[A, W, Y])`, then `op(a, w)`.

    The first call with a new shape tunes `tc.auto_schedule(outputs)` for that shape (`tc.tune` with a mix of
    that one shape, `trials` configs, each checked against `reference` or the unscheduled compute; the
    progress bar shows it), and later calls of the shape run the tuned kernel. The study is stored (`storage`,
    default: SQLite under ~/.cache/tilec), so another process that calls the same shape finds it measured and
    only builds.

    Args:
        *outputs: the computed tensors (or one list of them).
        args: the kernel's tensors, inputs then outputs (as `tc.build`'s).
        reference: a function of the inputs giving the expected outputs (optional).
        trials: configs measured per shape.
        storage: an optuna storage URL for the studies.
        progress: `tc.tune`'s progress argument (None: a bar where stderr is a terminal).

    Returns:
        An `AutoTuned` callable.

    Raises:
        ArgumentError: no outputs, or a size in no input's shape (the tuner reads sizes from tensors).

    Example:
        >>> op = tc.autotuned(Y, args=[A, W, Y], trials=2, progress=False)  # doctest: +SKIP
        >>> y = op(torch.randn(40, 24), torch.randn(24, 20))   # tunes M=40, N=20, K=24, then runs  # doctest: +SKIP
    """
    outs = list(outputs[0]) if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)) else list(outputs)
    return AutoTuned(outs, list(args), reference, trials, storage, progress)
