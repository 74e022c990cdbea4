"""A reduction stage's code, a part of `KernelBuilder` (builder.py): its accumulator (`acc_init`, at the
reduction's identity), the step that folds one tile of its body into it (`update`: the tile reduced over
its reduce dims, masked with the identity, `tile_part`; or a `Dot` where the body is a product of an
(m, k) and a (k, n) tile, `try_dot`). The builder's loops call these where the reduction loops begin and
at their innermost point; the online rewrite (online.py) calls `update` for each of its sums.
"""

from __future__ import annotations

from tilec.ir import dtypes
from tilec.ir.expr import Binary, Cast, Expr, Load, Reduce, show
from tilec.lower import code as c
from tilec.lower import targets
from tilec.lower.nest import AccInit, Comment, Dot, Note, Update, Why
from tilec.lower.values import Val, _where, castable
from tilec.schedule.schedule import Stage

_IDENTITY = {"sum": c.Num(0), "max": c.Num(float("-inf")), "min": c.Num(float("inf"))}
_IDENTITY_INT = {"sum": c.Num(0), "max": c.Num(-2147483648), "min": c.Num(2147483647)}


def compute_text(t) -> str:
    """The compute a stage's code comes from, as the user wrote it: `Y[i, j] = silu(C[i, j])`."""
    if t.scatter is not None:  # written at its positions: count[x[i]] += 1
        op = "+=" if t.scatter.combine == "add" else "="
        return f"{t.name}[{', '.join(map(show, t.scatter.at))}] {op} {t.body!r}  (over {', '.join(a.name for a in t.axis)})"
    return f"{t.name}[{', '.join(a.name for a in t.axis)}] = {t.body!r}"


def _is_product(e) -> bool:
    """`e` is a multiplication, under any casts."""
    while isinstance(e, Cast):
        e = e.a
    return isinstance(e, Binary) and e.op == "*"


class Reductions:
    """The reduction part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def acc_init(self, x: Stage, out: list):
        red: Reduce = x.tensor.body
        dims = self.spatial_dims(x)
        self._check_tile_numel(x, dims)
        name = self.fresh(f"acc_{x.name}")
        is_f = dtypes.is_float(red.dtype)
        init = (_IDENTITY if is_f else _IDENTITY_INT)[red.op]
        out.append(Comment(compute_text(x.tensor)))
        out.append(AccInit(name, self.shape(dims), init, red.dtype,
                           Note((init, f"  # {red.dtype} accumulator of {x.name}"), dims)))
        return name, dims, red.dtype

    def update(self, x: Stage, acc, out: list, red: Reduce | None = None, rescale: Val | None = None) -> None:
        """The innermost step of a reduction: fold this tile of the body into the accumulator. `red`: the
        reduction to fold (default: the stage's own; online: its rewritten summand); `rescale`: a factor
        the accumulator is multiplied by first (online: exp(m_old - m_new))."""
        name, sdims, acc_dtype = acc
        red = red if red is not None else x.tensor.body
        env = self.env[x.name]
        rdims = self._order({d for a in red.axes for d in env[a].dims})
        saved, self.stmts = self.stmts, out
        if rescale is not None:
            out.append(Update(name, c.BinOp("*", c.Name(name), self.expand(rescale, sdims)),
                              Note((rescale.code, "  # the running max grew"), sdims, "*=")))
        dot = self.try_dot(x, red, sdims, rdims, name, out)
        if not dot:
            body = self.tile_part(x, red, sdims, rdims, acc_dtype)
            kw = {"nan": True} if red.op != "sum" and dtypes.is_float(acc_dtype) else {}
            part = self.expand(Val(body, sdims, acc_dtype), sdims, full=True)
            value = c.BinOp("+", c.Name(name), part) if red.op == "sum" else \
                c.call(f"{red.op}imum", c.Name(name), part, **kw)
            over = f"  over tile [{', '.join(rdims)}]"
            note = Note((f"{red.body!r}{over}",), sdims, "+=") if red.op == "sum" else \
                Note((f"{red.op}(", c.Name(name), f", {red.body!r}){over}"), sdims)
            out.append(Update(name, value, note))
        self.stmts = saved

    def tile_part(self, x: Stage, red: Reduce, sdims, rdims, acc_dtype: str, name: str | None = None):
        """The reduction of this tile of `red`'s body over its reduce dims (masked with the identity where the
        reduce axes overrun; a max/min that meets a NaN is NaN), laid out over `sdims`, in `acc_dtype`.
        `name`: whose tile value it is (default: stage x's)."""
        env = self.env[x.name]
        loads: dict = {}
        v = self.emit(red.body, x, loads)
        if targets.sum_cast_first(v.dtype, acc_dtype):
            v = Val(c.Cast(v.code, acc_dtype), v.dims, acc_dtype)
        full = self._order(set(sdims) | set(rdims))
        self._check_tile_numel(x, full)
        body = self.expand(v, full, full=True)
        masks = [Val(env[a].mask, env[a].dims, "bool") for a in red.axes if env[a].mask]
        if targets.product_sum_becomes_dot(red.op, dtypes.is_float(acc_dtype), len(full), bool(masks),
                                           _is_product(red.body)):
            self.stmts.append(Why("tf32_sum"))  # not a bare product: Triton would make a TF32 tl.dot of it
            body = c.BinOp("+", body, c.Num(0.0))
        if masks:
            m = self.combine(c.all_of, masks, "bool")
            ident = (_IDENTITY if dtypes.is_float(acc_dtype) else _IDENTITY_INT)[red.op]
            body = _where(self.expand(m, full), body, ident)
        nan = red.op != "sum" and dtypes.is_float(acc_dtype)
        for d in sorted(rdims, key=full.index, reverse=True):
            if nan:  # the plain max/min skip NaN; torch's amax/amin return it: a reduction whose combine keeps it
                body = c.call("reduce", body, axis=full.index(d), op=red.op)
            else:
                body = c.call(red.op, body, axis=full.index(d))
        if nan:
            self.stmts.append(Why("nan_reduce", red.op))
            body = self.emit_stmt(f"tile_{name or x.name}", body)
        if acc_dtype not in ("float32", "int32"):  # Python numbers in where() widen to float32 / int32
            body = c.To(body, acc_dtype)
        return body

    def try_dot(self, x, red, sdims, rdims, acc, out) -> bool:
        """Lower sum(a * b) over one reduce tile dim to a `Dot` when a covers (m, k) and b (k, n)."""
        if red.op != "sum" or red.dtype != "float32" or len(sdims) != 2 or len(rdims) != 1:
            return False
        body = red.body
        while isinstance(body, Cast) and body.dtype == "float32":
            body = body.a
        if not (isinstance(body, Binary) and body.op == "*"):
            return False
        m, n = sdims
        k = rdims[0]
        da, db = self.dims_of(body.a, x), self.dims_of(body.b, x)
        if da == {m, k} and db == {k, n}:
            lhs, rhs = body.a, body.b
        elif db == {m, k} and da == {k, n}:
            lhs, rhs = body.b, body.a
        else:
            return False
        if any(self.extent_value(d) < 16 for d in (m, n, k)):
            return False
        loads: dict = {}
        env = self.env[x.name]
        kmasks = [Val(env[a].mask, env[a].dims, "bool") for a in red.axes if env[a].mask]

        def operand(e: Expr, order: tuple[str, str]) -> Val:
            inner = e
            while isinstance(inner, Cast) and inner.dtype == "float32":
                inner = inner.a
            if isinstance(inner, Load):
                v = self.load(inner, x, loads)
            elif isinstance(inner, Cast) and dtypes.is_float(inner.dtype) and dtypes.compute_dtype(inner.dtype) != inner.dtype:
                # a value rounded to bfloat16 (attention's P) goes to tl.dot as that type, not widened back
                a = self.emit(inner.a, x, loads)
                v = Val(c.To(castable(a, inner.dtype), inner.dtype), a.dims, inner.dtype)
            else:
                v = self.emit(e, x, loads)
            padded = isinstance(v.code, c.Name) and {m.code for m in kmasks} <= self.zero_outside.get(v.code.id, set())
            v = Val(self.expand(v, order), order, v.dtype)
            if kmasks and not padded:
                # past the end of k, tl.dot multiplies the other operand's 0 by this one: a value computed in
                # the kernel (log(0) = -inf there, say) would make 0 * inf = NaN of every sum (seed 197481165)
                self.stmts.append(Why("dot_zero"))
                name = self.emit_stmt("operand", v.code)
                m = self.combine(c.all_of, kmasks, "bool", order=order)
                v = Val(_where(m.code, name, c.call("zeros_like", name)), order, v.dtype)
            return v

        a, b = operand(lhs, (m, k)), operand(rhs, (k, n))
        # bf16/fp16/fp8 pairs go to tl.dot as they are; anything else (or bf16 in the interpreter) is
        # widened to float32 with input_precision="ieee", decided when the kernel is rendered (nest.Dot)
        out.append(Dot(acc, a.code, a.dtype, b.code, b.dtype,
                       Note((f"{red.body!r}  over tile [{k}]",), (m, n), "+=")))
        return True
