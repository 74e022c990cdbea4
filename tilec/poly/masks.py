"""What the size facts prove about a stage's loops and tiles: a partial-tile mask on an axis is dropped
only where isl proves that every split of it divides its extent, and a loop is no loop at all where isl
proves it runs exactly once (`single_iteration`), for all sizes allowed by the facts (`tc.assume`,
constant shapes, shape specialization, and a call's own sizes: a split by a factor its extent does not
exceed, `call_facts`)."""

from __future__ import annotations

import functools

import islpy as isl

from tilec.ir.expr import SizeVar, walk
from tilec.poly.model import NotAffine, aff


def facts_of(sched, specialize=None) -> list:
    """Every fact stated on the schedule's sizes, plus `specialize` (size name -> value) as equalities."""
    seen: dict[int, object] = {}
    for t in sched.tensors.values():
        for e in t.shape:
            for n in walk(e):
                if isinstance(n, SizeVar):
                    for f in n.facts:
                        seen.setdefault(id(f), f)
    out = list(seen.values())
    return out + [("==", name, value) for name, value in sorted((specialize or {}).items())]


@functools.lru_cache(maxsize=4096)
def _divides(extent: str, factor: int, params: tuple, facts: tuple) -> bool:
    ctx = isl.DEFAULT_CONTEXT
    pre = f"[{', '.join(params)}] -> " if params else ""
    context = " and ".join((f"{extent} >= 1",) + facts)
    bad = isl.Set.read_from_str(ctx, f"{pre}{{ : {context} and ({extent}) mod {factor} != 0 }}")
    return bad.is_empty()


@functools.lru_cache(maxsize=4096)
def _exactly_one(extent: str, params: tuple, facts: tuple) -> bool:
    ctx = isl.DEFAULT_CONTEXT
    pre = f"[{', '.join(params)}] -> " if params else ""
    context = " and ".join(facts + ("1 = 1",))
    bad = isl.Set.read_from_str(ctx, f"{pre}{{ : {context} and (({extent}) >= 2 or ({extent}) <= 0) }}")
    return bad.is_empty()


def _fact_text(f) -> str:
    if isinstance(f, tuple):
        return f"{f[1]} = {f[2]}"
    op = {"==": "=", "!=": "!="}.get(f.op, f.op)
    return f"{aff(f.a, {}, {})} {op} {aff(f.b, {}, {})}"


def _names_and_texts(facts: list) -> tuple[list[str], tuple]:
    names = sorted({n.name for f in facts if not isinstance(f, tuple) for n in walk(f) if isinstance(n, SizeVar)}
                   | {f[1] for f in facts if isinstance(f, tuple)})
    try:
        texts = tuple(_fact_text(f) for f in facts)
    except NotAffine:
        texts = ()
    return names, texts


def _loop_text(extent, config: dict, facts: list):
    """(the extent as isl text, the parameters, the facts' texts), or None where isl cannot read the extent."""
    names, texts = _names_and_texts(facts)
    try:
        ext = aff(extent, {}, config)
    except NotAffine:
        return None
    params = sorted(set(names) | {n.name for n in walk(extent) if isinstance(n, SizeVar)})
    return ext, tuple(params), texts


def single_iteration(extent, config: dict, facts: list) -> bool:
    """Whether a loop of `extent` (an expression of sizes and knobs) runs exactly once for every size the
    facts allow: `cdiv(N, 8192)` under `N >= 1 and N <= 8192` (sizes may be 0 at a call), `cdiv(60, 64)`.
    Such a loop is lowered as no loop."""
    loop = _loop_text(extent, config, facts)
    return loop is not None and _exactly_one(*loop)


def at_most_once(extent, config: dict, facts: list) -> bool:
    """Whether a loop of `extent` runs at most once for every size the facts allow (sizes are at least 0 at a
    call): `cdiv(E, 64)` under `E <= 64`. A sort's axis must fit one tile: its outer loop may run once, or not
    at all for an empty row."""
    loop = _loop_text(extent, config, facts)
    if loop is None:
        return False
    ext, params, texts = loop
    pre = f"[{', '.join(params)}] -> " if params else ""
    context = " and ".join(texts + ("1 = 1",))
    return isl.Set.read_from_str(isl.DEFAULT_CONTEXT, f"{pre}{{ : {context} and ({ext}) >= 2 }}").is_empty()


def facts_set(ctx, pre: str, facts: list):
    """The facts as an isl parameter set in `ctx` (a model's, its parameters `pre`), or None if there are
    none (or one isl cannot read, which then constrains nothing)."""
    _, texts = _names_and_texts(facts)
    if not texts:
        return None
    return isl.Set.read_from_str(ctx, f"{pre}{{ : {' and '.join(texts)} }}")


def needs_mask(layout, axis, config: dict, facts: list) -> bool:
    """Whether tiles of original `axis` of the stage may overrun its extent: some split of a value made from
    it (the layout's index map, tilec/plan/indexmap.py) may not divide what it splits."""
    names, texts = _names_and_texts(facts)
    for rel in layout.index.splits_over(axis):  # a split of it, or of a fusion with it
        f = layout.index.factor(rel)
        try:
            ext = aff(rel.parent.extent, {}, config)
        except NotAffine:
            return True
        params = sorted(set(names) | {n.name for n in walk(rel.parent.extent) if isinstance(n, SizeVar)})
        if not _divides(ext, f, tuple(params), texts):
            return True
    return False
