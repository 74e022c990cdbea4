"""Tensors of the compute language: `placeholder` (an input) and `compute` (a stage defined by an
expression per output element), and the DAG of stages they form (a networkx graph).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import networkx as nx

from tilec.errors import ArgumentError
from tilec.ir.dtypes import check_dtype
from tilec.ir.expr import Expr, IterVar, Load, Reduce, Scan, SizeVar, Sort, as_expr, check_extent, show, walk
from tilec.ir.names import check_name


class Tensor:
    """An input (`placeholder`) or a computed stage (`compute`). Index it to read: `A[i, k]`.

    `.name`, `.shape` (ints and expressions of sizes), `.dtype`; for a compute, `.axis` (its spatial axes,
    named after the function's parameters), `.reduce_axis` and `.body` (the expression). Make one with
    `tc.placeholder` or `tc.compute`.

    Example:
        >>> print(*C.axis, *C.reduce_axis, C.dtype)
        i j k float32
        >>> C.reduce_axis
        (<axis k: reduce, extent K>,)
        >>> C[i, j]
        C[i, j]
    """

    _created = 0  # creation order: makes every ordering of stages (and generated code) stable
    scatter = None  # a scatter's ScatterSpec (tilec/ir/scatter.py): its axes are its domain's, not its shape's

    def __init__(self, name: str, shape: tuple[Expr, ...], dtype: str, *, axis=(), body=None):
        self.name, self.shape, self.dtype = name, shape, dtype
        Tensor._created += 1
        self.seq = Tensor._created
        self.axis: tuple[IterVar, ...] = tuple(axis)
        self.body: Expr | None = body

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body, Reduce)

    @property
    def scan_axis(self) -> IterVar | None:
        """The axis a scan stage (`tc.cumsum`, ..., `tc.linear_scan`) runs along; None for any other stage."""
        return self.body.axis if isinstance(self.body, Scan) else None

    @property
    def sort_axis(self) -> IterVar | None:
        """The axis a sort stage (`tc.sort`, `tc.argsort`) orders; None for any other stage."""
        return self.body.axis if isinstance(self.body, Sort) else None

    @property
    def read_exprs(self) -> list[Expr]:
        """The expressions whose loads this stage reads: its body, and a scatter's positions."""
        return ([] if self.body is None else [self.body]) + list(self.scatter.at if self.scatter is not None else ())

    def loads(self) -> list[Load]:
        """Every read in this stage's expressions (its body and a scatter's positions), in walk order."""
        return [n for e in self.read_exprs for n in walk(e) if isinstance(n, Load)]

    @property
    def inputs(self) -> list[Tensor]:
        """The tensors this stage reads, in first-read order, without repeats."""
        seen: dict[int, Tensor] = {}
        for node in self.loads():  # a scatter also reads its positions' tensors, and what it starts as
            seen.setdefault(id(node.tensor), node.tensor)
        if self.scatter is not None and self.scatter.into is not None:
            seen.setdefault(id(self.scatter.into), self.scatter.into)
        return list(seen.values())

    def __getitem__(self, idx) -> Load:
        """`T[i, j]`: read this tensor at integer expressions of axes and sizes (one per dimension).

        An index that is not a plain axis is masked to the tensor's bounds (`X[i, j - 1]` reads 0 at j = 0).

        Raises:
            ArgumentError: the wrong number of indices, or an index that is no integer expression.
        """
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.ndim:
            raise ArgumentError(f"{self.name} has {self.ndim} dimensions, indexed with {len(idx)}: "
                                f"{self.name}[{', '.join(map(show, idx))}]")
        return Load(self, integer_indices(idx, lambda n: f"index {n} of {self.name}"))

    def __repr__(self):
        kind = "placeholder" if self.is_placeholder else "scatter" if self.scatter is not None else "compute"
        return f"<{kind} {self.name}[{', '.join(map(str, self.shape))}] {self.dtype}>"

    def __call__(self, *args, **kwargs):
        raise ArgumentError(f"{self.name}(...): a tensor is read by indexing, {self.name}[i, j], not called")

    def __setitem__(self, idx, value):
        raise ArgumentError(f"{self.name}[...] = ...: tensors are not assigned; define a tensor's values with "
                            f"tc.compute(shape, lambda i, j: ..., name=...)")


def integer_indices(idx, what) -> list[Expr]:
    """`idx` as integer expressions of axes, sizes and reads (a read's indices, a scatter's positions); `what(n)`
    names index n in the error."""
    exprs = []
    for n, e in enumerate(idx):
        try:
            e = as_expr(e)
        except ArgumentError:
            raise ArgumentError(f"{what(n)}: expected an integer expression of axes and sizes, got "
                                f"{type(e).__name__} {e!r}") from None
        if e.dtype not in ("int32", "int64"):
            raise ArgumentError(f"{what(n)} must be an integer expression, got {e} ({e.dtype}); indices are int32 "
                                f"or int64 (narrower integers: .astype('int32'))")
        exprs.append(e)
    return exprs


def _shape(shape, what: str, affine: bool = True) -> tuple[Expr, ...]:
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise ArgumentError(f"{what}: shape must be a tuple of ints and size variables, got {shape!r}")
    return tuple(check_extent(d, f"{what}: dimension {n}", affine) for n, d in enumerate(shape))


def placeholder(shape: Sequence[int | Expr] | int | Expr, dtype: str, name: str) -> Tensor:
    """An input tensor: `A = tc.placeholder((M, K), "bfloat16", name="A")`.

    A kernel's call passes a torch tensor of this dtype and shape for it (sizes are read from the shapes).

    Args:
        shape: a tuple of positive ints and integer expressions of sizes (or one of them).
        dtype: torch's name of the element type: "float32", "bfloat16", "float16", "float8_e4m3fn", "int32", ...
        name: an identifier, unique in the computation; it names the kernel parameter.

    Returns:
        The input `Tensor`.

    Raises:
        ArgumentError: a dimension that is not a positive int or an integer expression of sizes, an unknown
            dtype, or a name that is no identifier (or is reserved).

    Example:
        >>> B = tc.placeholder((M, 8), "bfloat16", name="B")
        >>> B
        <placeholder B[M, 8] bfloat16>
    """
    name = check_name(name, "placeholder name")
    return Tensor(name, _shape(shape, f"placeholder {name!r}", affine=False), check_dtype(dtype, f"placeholder {name!r}"))


def compute(shape: Sequence[int | Expr] | int | Expr, fcompute: Callable[..., Expr], name: str,
            dtype: str | None = None) -> Tensor:
    """A stage: `C = tc.compute((M, N), lambda i, j: ..., name="C", dtype="bfloat16")`.

    The lambda's parameter names become the axis names (`C.axis`). A reduction (`tc.sum/max/min`)
    must be the whole body, as in TVM; anything done to its result goes in a second compute.
    `dtype` is the stored type (a rounding point); by default the body's type. Inside the function,
    values are tilec expressions: use `tc.exp`, `tc.maximum`, `tc.where`, ... and Python's operators
    (torch.*, math.*, numpy.*, `if` and Python's max() are refused with the tilec function to use).

    Args:
        shape: a tuple of positive ints and integer expressions of sizes (or one of them).
        fcompute: a function of one axis per dimension that returns the element's value.
        name: an identifier, unique in the computation.
        dtype: the stored dtype; by default the body's (a reduction's accumulator dtype).

    Returns:
        The computed `Tensor` (a stage of any schedule that stores it or reads it).

    Raises:
        ArgumentError: the function's arity differs from the shape's, the body is no expression (or uses
            torch / math / numpy or Python control flow), a reduction is not the whole body, an axis of
            another compute is used, or a bad name, shape or dtype.

    Example:
        >>> S = tc.compute((M, K), lambda r, c: A[r, c] * 2.0, name="S", dtype="bfloat16")
        >>> S, S.axis
        (<compute S[M, K] bfloat16>, (<axis r: spatial, extent M>, <axis c: spatial, extent K>))
    """
    name = check_name(name, "compute name")
    shape = _shape(shape, f"compute {name!r}")
    if not callable(fcompute):
        raise ArgumentError(f"compute {name!r}: expected a function of the axes, got {fcompute!r}")
    params = [p.name for p in inspect.signature(fcompute).parameters.values()
              if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != len(shape):
        raise ArgumentError(f"compute {name!r}: the shape has {len(shape)} dimension(s) but the function "
                            f"takes {len(params)} argument(s) ({', '.join(params)}); give one axis name per "
                            f"dimension, e.g. lambda i, j: ...")
    axes = tuple(IterVar(p, d, "spatial") for p, d in zip(params, shape))
    body = as_expr(fcompute(*axes))
    for node in walk(body):
        if isinstance(node, (Reduce, Scan, Sort)) and node is not body:
            what = f"tc.{node.op}" if isinstance(node, Reduce) else f"tc.{node.name}"
            kind = "reduction" if isinstance(node, Reduce) else "scan" if isinstance(node, Scan) else "sort"
            raise ArgumentError(
                f"compute {name!r}: {what}(...) must be the whole body of a compute, not part of "
                f"an expression; compute the {kind} on its own and use it in a second compute (which can be fused "
                f"back with compute_at)")
    if isinstance(body, (Scan, Sort)) and body.axis not in axes:
        raise ArgumentError(f"compute {name!r}: tc.{body.name} runs along {body.axis.name}, which is not one of this "
                            f"compute's axes ({', '.join(a.name for a in axes)}); scan along one of them")
    reduced = body.axes if isinstance(body, Reduce) else ()
    for node in walk(body):
        if isinstance(node, IterVar) and node not in axes and node not in reduced:
            if node.kind == "reduce":
                raise ArgumentError(f"compute {name!r}: reduce axis {node.name} is used but not reduced over; "
                                    f"add it to axis=[...] of a tc.sum/max/min that is the whole body")
            raise ArgumentError(f"compute {name!r}: axis {node.name} belongs to another compute; use this "
                                f"compute's own axes ({', '.join(a.name for a in axes)})")
    if isinstance(body, Reduce):
        names = [a.name for a in axes] + [a.name for a in body.axes]
        if len(set(names)) != len(names):
            raise ArgumentError(f"compute {name!r}: axis names must differ, got {', '.join(names)}")
        for node in walk(body.body):
            if isinstance(node, IterVar) and node.kind == "reduce" and node not in body.axes:
                raise ArgumentError(f"compute {name!r}: reduce axis {node.name} is used but not reduced "
                                    f"over; add it to axis=[...]")
    dtype = check_dtype(dtype, f"compute {name!r} dtype") if dtype is not None else body.dtype
    return Tensor(name, shape, dtype, axis=axes, body=body)


def stage_graph(outputs: Sequence[Tensor]) -> nx.DiGraph:
    """The DAG of tensors reachable from `outputs`: an edge producer -> consumer per read."""
    g = nx.DiGraph()
    seen: dict[str, Tensor] = {}
    todo = list(outputs)
    while todo:
        t = todo.pop()
        if t.name in seen:
            if seen[t.name] is not t:
                raise ArgumentError(f"two different tensors are both named {t.name!r}; names must be unique")
            continue
        seen[t.name] = t
        g.add_node(t.name, tensor=t)
        for p in t.inputs:
            todo.append(p)
            g.add_edge(p.name, t.name)
    return g


def sizes_of(tensors: Sequence[Tensor], *, reduce_extents: bool = True) -> dict:
    """The size variables (name -> SizeVar) that `tensors` use, in first-use order: their shapes, then
    (unless `reduce_extents=False`) their reduce axes' extents, where a size may appear alone. The one
    definition of "a schedule's sizes": isl's parameters, a kernel's size arguments, what a shape mix
    must give, what `specialize` may name."""
    exprs = [e for t in tensors for e in t.shape]
    if reduce_extents:  # and a scatter's domain, which no shape of its own holds
        exprs += [a.extent for t in tensors for a in (*t.reduce_axis, *(t.axis if t.scatter is not None else ()))]
    return {n.name: n for e in exprs for n in walk(e) if isinstance(n, SizeVar)}
