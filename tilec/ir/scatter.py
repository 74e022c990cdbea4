"""Scatters: `tc.scatter`, a stage that writes each point of its own domain to a computed position of its
output (`count[x[i]] += 1`, `cache[slot[t], h, d] = k[t, h, d]`), where a compute writes each point of its
shape at that point.

A scatter is a `Tensor` of the output's shape whose axes are the domain's (`over`), whose body is the value
written, and whose `scatter` (`ScatterSpec`) holds the rest: the index expressions (`at`), how a write meets
what the element holds (`combine`: None replaces it, "add" adds to it), what the output starts as (`init`: a
number, a copy of the tensor `into`, or, with `init=None`, what the `out=` tensor given at the call holds: an
update in place) and what the user promised (`unique`: no two points write one element; `deterministic`).

What is checked, and where: here, what needs no proof (a data-dependent index that may repeat must have
`unique=True` or an "add"; float "add"s whose order can vary need `deterministic=False`); in the polyhedral
model (tilec/poly/model.py), an affine index is proved injective or a counterexample is given; placement keeps a
scatter in a kernel of its own, after every kernel its values need and before every reader
(tilec/schedule/schedule.py refuses compute_at, compute_inline and compute_with on it); the builder
(tilec/lower/builder.py, `scatter_store`) stores or adds each value at its position, masked to the output's
bounds (a position outside the output is not written, as a read outside a tensor reads 0); the runtime fills
the output before the scatter's kernel (tilec/runtime/kernel.py).
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tilec.errors import ArgumentError
from tilec.ir.dtypes import check_dtype, is_float
from tilec.ir.expr import Expr, IterVar, Load, Random, Reduce, Scan, Sort, as_expr, walk
from tilec.ir.names import check_name
from tilec.ir.tensor import Tensor, _shape, integer_indices

COMBINES = (None, "add")
ADD_DTYPES = ("int32", "int64", "float32")  # what tl.atomic_add adds on the GPU and in the interpreter alike


@dataclass(frozen=True)
class ScatterSpec:
    """What makes a stage a scatter (`Tensor.scatter`): its output positions `at` (one integer expression of
    its domain axes per output dimension), `combine` (None or "add"), `init` (a number; None: the out=
    tensor's values), `into` (a placeholder whose copy the output starts as, or None), `unique` (the user's
    promise that no two points write one element), `deterministic` (False: the user accepts float atomics'
    varying order) and `data` (whether a position reads a tensor: nothing about it can be proved)."""

    at: tuple[Expr, ...]
    combine: str | None
    init: object
    into: Tensor | None
    unique: bool
    deterministic: bool
    data: bool

    def __str__(self) -> str:  # the fingerprint's text of everything that makes the scatter (positions as text)
        into = None if self.into is None else self.into.name
        return (f"[{', '.join(map(str, self.at))}] combine={self.combine} init={self.init!r} into={into} "
                f"unique={self.unique} deterministic={self.deterministic}")

    def describe(self) -> str:
        start = (f"a copy of {self.into.name}" if self.into is not None else
                 "the out= tensor's values (in place)" if self.init is None else f"{self.init!r}")
        how = "added (atomics)" if self.combine == "add" else "stored"
        return f"scatter: values {how} at computed positions; the output starts as {start}"


def scatter(target: Sequence[int | Expr] | int | Expr | Tensor, over: Sequence[int | Expr] | int | Expr,
            at: Callable[..., object], value: Callable[..., object], name: str, *, combine: str | None = None,
            init: float | int | None = 0, unique: bool = False, deterministic: bool = True,
            dtype: str | None = None) -> Tensor:
    """A scatter: for each point of the domain `over`, write `value(*point)` at position `at(*point)` of the output.

        count = tc.scatter((NBINS,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="count")
        new = tc.scatter(cache, (T, H, D), lambda t, h, d: (slot[t], h, d), lambda t, h, d: k[t, h, d],
                         unique=True, name="new")

    torch's equivalents: `out.index_put_(idx, v)` (combine=None), `index_put_(..., accumulate=True)`,
    `index_add_`, `scatter_add_`, `bincount` (combine="add"). A position outside the output is not written
    (torch raises there; tilec's reads outside a tensor read 0, its writes there do nothing).

    Args:
        target: the output's shape (it starts as `init`) or a placeholder whose copy it starts as (its shape,
            and its dtype unless `dtype` says otherwise).
        over: the domain's shape; `at` and `value` take one axis per dimension (named after their parameters).
        at: the position written: one integer expression per output dimension (a tuple, or one expression
            for a 1-d output); it may read tensors (`x[i]`).
        value: the value written (cast to the output's dtype first, as torch's index_put_ does).
        name: an identifier, unique in the computation.
        combine: None (the value replaces the element) or "add" (it is added, with atomics).
        init: what the output starts as when `target` is a shape: a number (default 0), or None for what the
            `out=` tensor passed at the call holds (an update in place; the call must pass out=).
        unique: the promise that no two points write one element (required for combine=None when a position
            reads a tensor; an affine position is proved instead, and a false promise is refused).
        deterministic: False accepts float atomic adds, whose order (so the rounding) varies from run to run.
        dtype: the output's dtype; by default the target's, else the value's.

    Returns:
        The output `Tensor` (a stage whose axes are `over`'s; schedule it like any compute, in a kernel of its own).

    Raises:
        ArgumentError: a bad shape, name, dtype or combine; `at` has the wrong number of positions or one is no
            integer; positions that read data may repeat and neither `unique=True` nor combine="add" says what
            then; a float "add" that may meet another without `deterministic=False`; an "add" of a dtype the
            atomics lack; a reduction, scan or sort inside `at` or `value`; `into` is not a placeholder.

    Example:
        >>> x = tc.placeholder((M,), "int64", name="x")
        >>> count = tc.scatter((4,), (M,), lambda r: x[r], lambda r: 1, combine="add", dtype="int32", name="count")
        >>> count, count.axis
        (<scatter count[4] int32>, (<axis r: spatial, extent M>,))
        >>> tc.build(tc.create_schedule(count), [x, count])(torch.tensor([0, 3, 3, 1, 3, 9])).tolist()
        [1, 1, 0, 3]
    """
    name = check_name(name, "scatter name")
    what = f"scatter {name!r}"
    into = None
    if isinstance(target, Tensor):
        if not target.is_placeholder:
            raise ArgumentError(f"{what}: the tensor it starts as must be an input (a placeholder), got the compute "
                                f"{target.name}; scatter into a placeholder, or into a shape with init=")
        into, shape = target, target.shape
        if init != 0:
            raise ArgumentError(f"{what}: it starts as a copy of {target.name}, so init= has no meaning; leave it out")
        init = None
    else:
        shape = _shape(target, what)
        if init is not None and (isinstance(init, bool) or not isinstance(init, numbers.Real)):
            raise ArgumentError(f"{what}: init must be a number or None (the out= tensor's values), got {init!r}")
    over = _shape(over, f"{what} domain")
    if combine not in COMBINES:
        raise ArgumentError(f"{what}: combine must be one of {COMBINES}, got {combine!r}")
    for flag, fname in ((unique, "unique"), (deterministic, "deterministic")):
        if not isinstance(flag, bool):
            raise ArgumentError(f"{what}: {fname} must be True or False, got {flag!r}")
    axes = _axes(at, over, what, "at")
    if _axes(value, over, what, "value") != [a.name for a in axes]:
        raise ArgumentError(f"{what}: at and value must take the same parameters (the domain's axis names)")
    raw_at = at(*axes)
    positions = tuple(raw_at) if isinstance(raw_at, (tuple, list)) else (raw_at,)
    if len(positions) != len(shape):
        raise ArgumentError(f"{what}: the output has {len(shape)} dimension(s) but at gives {len(positions)} "
                            f"position(s); give one integer expression per output dimension")
    exprs = integer_indices(positions, lambda n: f"{what}: position {n}")
    body = as_expr(value(*axes))
    for e in (*exprs, body):
        for node in walk(e):
            if isinstance(node, (Reduce, Scan, Sort)):
                raise ArgumentError(f"{what}: a reduction, scan or sort inside a scatter's at or value is not "
                                    f"supported; compute it in a compute of its own and scatter that")
            if isinstance(node, Random):
                raise ArgumentError(f"{what}: random numbers inside a scatter are not supported; draw them in a "
                                    f"compute of its own and scatter that")
            if isinstance(node, IterVar) and node not in axes:
                raise ArgumentError(f"{what}: axis {node.name} belongs to another compute; use the scatter's own "
                                    f"axes ({', '.join(a.name for a in axes)})")
    out_dtype = check_dtype(dtype, f"{what} dtype") if dtype is not None else \
        (into.dtype if into is not None else body.dtype)
    data = any(isinstance(node, Load) for e in exprs for node in walk(e))
    if combine is None and data and not unique:
        raise ArgumentError(
            f"{what}: its positions read a tensor, so tilec cannot prove that no two points write one element, "
            f"and with combine=None which of two writes lands would be a race (torch leaves it undefined too); "
            f"pass unique=True if no two points ever write one element, or combine='add' to add them")
    if combine == "add":
        if out_dtype not in ADD_DTYPES:
            raise ArgumentError(f"{what}: combine='add' adds with atomics, which tilec makes for "
                                f"{', '.join(ADD_DTYPES)}, not {out_dtype}; scatter into {ADD_DTYPES[-1]} and cast in a "
                                f"compute after it")
        if is_float(out_dtype) and deterministic and not unique and data:  # affine: proved or refused by isl
            raise ArgumentError(
                f"{what}: float atomic adds that meet at one element land in a varying order, so the sum's "
                f"rounding varies from run to run; pass deterministic=False to accept that (as split_k does), "
                f"unique=True if no two points write one element, or scatter integers")
    if init is not None:
        init = _check_init(init, out_dtype, what)
    t = Tensor(name, shape, out_dtype, axis=axes, body=body)
    t.scatter = ScatterSpec(tuple(exprs), combine, init, into, bool(unique), bool(deterministic), data)
    return t


def _check_init(init, dtype: str, what: str):
    """`init` as a plain int or float that `dtype` holds exactly (torch's fill_ would raise or wrap otherwise)."""
    import math

    import torch

    if is_float(dtype):
        return float(init)
    info = torch.iinfo(getattr(torch, dtype)) if dtype != "bool" else None
    ok = isinstance(init, numbers.Real) and math.isfinite(init) and float(init).is_integer()
    if ok and dtype == "bool":
        ok = init in (0, 1)
    elif ok:
        ok = info.min <= int(init) <= info.max
    if not ok:
        what_range = "0 or 1" if dtype == "bool" else f"an integer in [{info.min}, {info.max}]"
        raise ArgumentError(f"{what}: init={init!r} is not a {dtype} value; give {what_range}")
    return bool(init) if dtype == "bool" else int(init)


def _axes(fn, over: tuple, what: str, which: str) -> list[IterVar]:
    if not callable(fn):
        raise ArgumentError(f"{what}: {which} must be a function of the domain's axes, got {fn!r}")
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != len(over):
        raise ArgumentError(f"{what}: the domain has {len(over)} dimension(s) but {which} takes {len(params)} "
                            f"argument(s) ({', '.join(params)}); give one axis name per dimension")
    if len(set(params)) != len(params):
        raise ArgumentError(f"{what}: axis names must differ, got {', '.join(params)}")
    return [IterVar(p, d, "spatial") for p, d in zip(params, over)] if which == "at" else params
