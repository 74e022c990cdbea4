"""The compute language: dtypes, expressions, placeholders/computes and their DAG."""

from tilec.ir.dtypes import DTYPES, check_dtype
from tilec.ir.expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IterVar,
    Load,
    Reduce,
    SizeVar,
    Unary,
    Where,
    abs,
    assume,
    exp,
    log,
    max,
    maximum,
    min,
    minimum,
    reduce_axis,
    rsqrt,
    sigmoid,
    silu,
    size_vars,
    sqrt,
    sum,
    tanh,
    where,
)
from tilec.ir.tensor import Tensor, compute, placeholder, stage_graph

__all__ = [
    "assume",
    "DTYPES", "Binary", "Call", "Cast", "Const", "Expr", "IterVar", "Load", "Reduce", "SizeVar",
    "Tensor", "Unary", "Where", "abs", "check_dtype", "compute", "exp", "log", "max", "maximum", "min",
    "minimum", "placeholder", "reduce_axis", "rsqrt", "sigmoid", "silu", "size_vars", "sqrt",
    "stage_graph", "sum", "tanh", "where",
]
