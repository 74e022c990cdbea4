"""The fuzzer's reference: tilec's compute DAG evaluated in float64 PyTorch, with an error bound per element.

Semantics (docs/schedule.md, docs/lowering.md):
- a compute's `dtype` and every `astype` are rounding points: the value is rounded there (then carried on
  in float64); between rounding points tilec computes in float32, which the error bound accounts for;
- arithmetic follows torch's promotion by category (bool < int < float; a Python number is weak): so
  `b + 1` on a bool `b` is an integer, as in torch; integers are exact (int64 here; tilec uses int32, so a
  value past int32 is marked uncertain), `//` floors and `%` takes the divisor's sign (Python, torch);
- an index that is not a plain axis reads 0 outside the tensor's bounds (a plain axis is always in range:
  the generator only reads a plain axis along a dimension of the same size);
- reductions accumulate in float64 (ints exactly) and round to the compute's dtype; `max`/`min` return
  NaN when a NaN is reduced (torch's amax/amin), and so do `tc.maximum`/`tc.minimum`;
- a sum the kernel runs in an `online()` loop (the target or a sum statistic) is the naive sum too, with a
  bound widened for the rescalings by exp(m_old - m_new) of the running sums (`Oracle._reduce`).

Each value carries `err` (a bound on |tilec - reference| from float32 arithmetic and rounding: first-order
forward error analysis) and `unc` (positions where the result is not determined: a float comparison
closer than its error, a rounding into int across an integer, an overflow boundary, a division by zero
whose sign is unknown, ...). The comparison checks exactly where the reference is NaN or +-inf, within
the bound elsewhere, and skips uncertain positions.

Outputs are written into views of larger buffers filled with a NaN-payload (or 0x5A) sentinel, so writes
past the end and elements never written are both found. Inputs are views into buffers poisoned with NaN
(or a large int) around them, with contiguous, transposed or gapped strides, so an unmasked read shows.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass, field

import torch

import tilec as tc
from tilec.ir.expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IterVar,
    Load,
    Reduce,
    Scan,
    SizeVar,
    Unary,
    Where,
    evaluate,
)

U32 = 2.0 ** -24           # unit roundoff of float32 arithmetic
TINY = 1e-30               # absolute slack per float op: float32 underflow, flush-to-zero
FLT_MAX = 3.4028234663852886e38
FLT_MIN = 2.0 ** -126         # the smallest normal float32
FLOATS = {"float64": (52, -1022), "float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126)}
MAXFIN = {"float64": sys.float_info.max, "float32": FLT_MAX, "float16": 65504.0, "bfloat16": 3.3895313892515355e38}
INTS = ("int64", "int32", "int16", "int8", "uint8")
INT_RANGE = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1), "int16": (-2**15, 2**15 - 1),
             "int8": (-128, 127), "uint8": (0, 255)}
RANK = {"b": 0, "i": 1, "f": 2}


def cat_of(dtype: str) -> str:
    return "b" if dtype == "bool" else "i" if dtype in INTS else "f"


def interpreter() -> bool:
    return not torch.cuda.is_available()


@dataclass
class V:
    """A value over an index grid: `val` (float64 / int64 / bool tensor), `err` (float64 bound, floats
    only), `unc` (bool: undetermined), `cat` ("f", "i", "b"), `weak` (a Python number)."""

    val: torch.Tensor
    err: torch.Tensor
    unc: torch.Tensor
    cat: str
    weak: bool = False


def _on_cpu(fn):
    """Run `fn` on the CPU: torch's default device the CPU, and its tensor arguments (and those of a V) moved
    there. The oracle makes and computes its tensors there (inputs from a CPU generator, so a seed gives the
    same values on every machine) and moves them to the GPU itself, whatever default device the caller set
    (the test suite sets cuda on the GPU host)."""
    def cpu(x):
        if isinstance(x, torch.Tensor):
            return x.cpu()
        if isinstance(x, V):
            return V(x.val.cpu(), x.err.cpu(), x.unc.cpu(), x.cat, x.weak)
        return x

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with torch.device("cpu"):
            return fn(*[cpu(a) for a in args], **{k: cpu(v) for k, v in kwargs.items()})
    return wrapped


# Inputs of even seeds start this many elements into their poisoned buffer: 16-byte aligned in every
# dtype, so tensor-descriptor (TMA) loads run on them; odd seeds use PAD, never aligned (pointer loads).
ALIGNED_PAD = 32


def _t(x, dtype=torch.float64) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype)


# 0-d CPU tensors (torch broadcasts them onto any device); made on the CPU explicitly, since on the GPU host
# conftest sets torch's default device to cuda before this module is imported
ZERO = torch.zeros((), dtype=torch.float64, device="cpu")
FALSE = torch.zeros((), dtype=torch.bool, device="cpu")


def exact(val: torch.Tensor, cat: str, weak: bool = False) -> V:
    return V(val, ZERO, FALSE, cat, weak)


def as_float(v: V) -> torch.Tensor:
    return v.val if v.cat == "f" else v.val.to(torch.float64)


def as_int(v: V) -> torch.Tensor:
    return v.val.to(torch.int64) if v.cat == "b" else v.val


# the smooth math functions: (torch's function, a bound of its slope or None where it is monotone, the kernel's
# own error in units of float32 roundoff: relative to the result, absolute). erf's slope is at most
# 2 / sqrt(pi); sin's and cos's 1; libdevice's and numpy's functions are within 2 ulp, the GPU's exp2 and log2
# (ex2/lg2.approx) within 2^-22, the interpreter's log1p/expm1 helpers a few ulp
_SMOOTH = {
    "erf": (torch.erf, 1.13, 4, 4),
    "sin": (torch.sin, 1.0, 4, 4),
    "cos": (torch.cos, 1.0, 4, 4),
    "exp2": (torch.exp2, None, 8, 0),
    "log2": (torch.log2, None, 8, 8),
    "log1p": (torch.log1p, None, 12, 0),
    "expm1": (torch.expm1, None, 12, 0),
}


def xm(e: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """e * |x| with 0 * inf = 0 (an exact value times anything adds no error), and an unbounded error
    times 0 unbounded (inf: an error bound is never NaN, which every comparison would read as 0)."""
    return torch.where(e == 0, ZERO, _unknown_nan(e * x.abs()))


def _unknown_nan(err: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(err), math.inf, err)


def ulp(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """The spacing of `dtype` numbers at magnitude |x| (subnormal spacing below the normal range)."""
    mant, emin = FLOATS[dtype]
    x = x.abs().clamp_min(2.0 ** emin)
    _, e = torch.frexp(torch.where(torch.isfinite(x), x, torch.ones_like(x)))
    return torch.ldexp(torch.ones_like(x), (e - 1 - mant).clamp_min(emin - mant))


def round_float(v: V, dtype: str) -> V:
    """The rounding point: v rounded to float `dtype`, to nearest even on the GPU and in the interpreter alike
    (tilec replaces the interpreter's truncating float32 -> bf16 conversion: runtime/triton_compat.py)."""
    x = as_float(v)
    r = x.to(getattr(torch, dtype)).to(torch.float64)
    mant, _ = FLOATS[dtype]
    thr = MAXFIN[dtype] * (1 + 2.0 ** -(mant + 1))
    e = v.err if v.cat == "f" else ZERO
    ax = x.abs()
    unc = v.unc | (torch.isfinite(x) & (ax + e >= thr) & (ax - e < thr))
    step = ulp(ax + e, dtype)
    err = torch.where(e == 0, ZERO, _unknown_nan(e + step))
    return V(r, torch.where(torch.isfinite(r), err, ZERO), unc, "f")


def convert(v: V, dtype: str) -> V:
    """Cast to `dtype` as torch's .to() does (a rounding point)."""
    cat = cat_of(dtype)
    if cat == "f":
        if dtype == "float64":
            return V(as_float(v), v.err if v.cat == "f" else ZERO, v.unc, "f")
        if v.cat != "f":
            x = as_float(v)
            r = x.to(getattr(torch, dtype)).to(torch.float64)
            err = ulp(x, dtype) * 2 if dtype == "bfloat16" and interpreter() else torch.zeros_like(x)
            return V(r, torch.where(r == x, ZERO, err), v.unc, "f")
        return round_float(v, dtype)
    if cat == "b":
        if v.cat == "f":
            x, e = v.val, v.err
            unc = v.unc | ((e != 0) & ~(x.abs() > e))
            return V(x != 0, ZERO, unc, "b")
        return V(v.val != 0, ZERO, v.unc, "b")
    lo, hi = INT_RANGE[dtype]
    if v.cat == "f":
        x, e = v.val, v.err
        t = torch.trunc(torch.where(torch.isfinite(x), x, ZERO))
        flip = (e > 0) & (torch.trunc(x - e) != torch.trunc(x + e))
        unc = v.unc | ~torch.isfinite(x) | flip | (t < lo) | (t > hi) | ~torch.isfinite(e)
        return V(t.to(torch.int64), ZERO, unc, "i")
    x = as_int(v)
    return V(x, ZERO, v.unc | (x < lo) | (x > hi), "i")


def _overflow(val: torch.Tensor, err: torch.Tensor, unc: torch.Tensor):
    """float32 arithmetic overflows to +-inf past FLT_MAX; near it the result is undetermined."""
    ax = val.abs()
    fin = torch.isfinite(val)
    band = fin & (ax + err >= FLT_MAX) & (ax - err <= FLT_MAX * (1 + U32))
    over = fin & (ax > FLT_MAX)
    val = torch.where(over, torch.sign(val) * math.inf, val)
    return val, torch.where(torch.isfinite(val), err, ZERO), unc | band


def _sum_overflow(x, val, err, mag, unc, dims, acc, u):
    """A sum accumulated in `acc` overflows where a partial sum passes the largest finite `acc` (65504
    for float16): which partial sums exist depends on the order of summing. Where the magnitudes of the
    finite terms stay below it nothing overflows; where all terms share a sign and the sum is past it,
    the result is that sign's infinity; elsewhere it is undetermined."""
    top = MAXFIN[acc]
    fin = torch.isfinite(val)
    possible = fin & (mag + err >= top)
    one_sign = (x >= 0).all(dim=dims) | (x <= 0).all(dim=dims)
    over = possible & one_sign & (val.abs() - err > top * (1 + u))
    val = torch.where(over, torch.sign(val) * math.inf, val)
    return val, torch.where(torch.isfinite(val), err, ZERO), unc | (possible & ~over)


def fop(val, err, unc, u=U32, exact=None) -> V:
    """A float32 result: add the rounding of this op, then model overflow. Where `exact` (operands
    without error, a correctly rounded op) and the result is a float32 number, the op is exact."""
    step = u * val.abs().nan_to_num(0.0, 0.0, 0.0) + TINY
    err = _unknown_nan(err)
    if exact is not None:
        step = torch.where(exact & (val.to(torch.float32).to(torch.float64) == val), ZERO, step)
    err = err + step
    val, err, unc = _overflow(val, err, unc)
    return V(val, err, unc, "f")


class Oracle:
    """Evaluates tensors of a tilec compute DAG on torch inputs: `Oracle(sizes, inputs).tensor(T)`."""

    def __init__(self, sizes: dict[str, int], inputs: dict[str, torch.Tensor], online=()):
        self.sizes = dict(sizes)
        self.inputs = inputs
        self.online = set(online)  # sums the kernel runs as online() members: see _reduce
        self.cache: dict[str, V] = {}
        # it computes where its inputs are, whatever torch's default device (the GPU host's tests set cuda)
        self.device = next((x.device for x in inputs.values()), torch.device("cpu"))

    def shape(self, t) -> list[int]:
        return [int(evaluate(d, self.sizes)) for d in t.shape]

    def tensor(self, t) -> V:
        with torch.device(self.device):
            return self._tensor(t)

    def _tensor(self, t) -> V:
        if t.name in self.cache:
            return self.cache[t.name]
        if t.is_placeholder:
            x = self.inputs[t.name]
            cat = cat_of(t.dtype)
            val = x.to(torch.float64) if cat == "f" else x.to(torch.int64) if cat == "i" else x.to(torch.bool)
            out = exact(val.clone(), cat)
        else:
            out = self._compute(t)
        self.cache[t.name] = out
        return out

    def _placed(self, v: V) -> V:
        """`v` with every part on the oracle's device: an exact value's 0-d CPU ZERO/FALSE error and
        uncertainty broadcast with its other parts before a reduction or a store."""
        return V(*(x.to(self.device) for x in (v.val, v.err, v.unc)), v.cat, v.weak)

    def _compute(self, t) -> V:
        if t.scatter is not None:
            return self._scatter(t)
        shape = self.shape(t)
        body = t.body
        red_axes = list(body.axes) if isinstance(body, Reduce) else []
        red_ext = [int(evaluate(a.extent, self.sizes)) for a in red_axes]
        full = shape + red_ext
        nd = len(full)
        grid = {}
        for n, a in enumerate(list(t.axis) + red_axes):
            view = [1] * nd
            view[n] = full[n]
            grid[a] = exact(torch.arange(full[n], dtype=torch.int64).view(view), "i")
        if isinstance(body, Scan):  # the operands over the output's grid, then the scan along its axis
            ops = []
            for e in body.operands:
                x = self._placed(self.expr(e, grid))
                ops.append(V(torch.broadcast_to(x.val, full), torch.broadcast_to(x.err, full),
                             torch.broadcast_to(x.unc, full), x.cat, x.weak))
            res = self._placed(convert(self._scan(body, ops, list(t.axis).index(body.axis)), t.dtype))
            return V(res.val.contiguous(), torch.broadcast_to(res.err, shape).contiguous(),
                     torch.broadcast_to(res.unc, shape).contiguous(), res.cat)
        expr = body.body if isinstance(body, Reduce) else body
        v = self._placed(self.expr(expr, grid))
        v = V(torch.broadcast_to(v.val, full), torch.broadcast_to(v.err, full), torch.broadcast_to(v.unc, full),
              v.cat, v.weak)
        if isinstance(body, Reduce):
            v = self._reduce(body, v, list(range(len(shape), nd)), online=t.name in self.online)
        res = self._placed(convert(v, t.dtype))
        return V(res.val.contiguous(), torch.broadcast_to(res.err, shape).contiguous(),
                 torch.broadcast_to(res.unc, shape).contiguous(), res.cat)

    def _scatter(self, t) -> V:
        """A scatter (tc.scatter): the value (rounded to the output's dtype) and the positions over the domain's
        grid, then each point's value put at (combine=None: the generator's positions never meet) or added to
        (combine="add") its position of the output as it starts; positions outside the output write nothing.
        A float add's bound is a sum's in any order (the atomics' order varies), n + 2 roundings of its
        magnitude; an uncertain position makes the whole output undecided."""
        spec = t.scatter
        shape = self.shape(t)
        dom = [int(evaluate(a.extent, self.sizes)) for a in t.axis]
        grid = {}
        for n, a in enumerate(t.axis):
            view = [1] * len(dom)
            view[n] = dom[n]
            grid[a] = exact(torch.arange(dom[n], dtype=torch.int64).view(view), "i")
        v = self._placed(convert(self._placed(self.expr(t.body, grid)), t.dtype))
        val = torch.broadcast_to(v.val, dom).reshape(-1)
        err = torch.broadcast_to(v.err, dom).reshape(-1)
        unc = torch.broadcast_to(v.unc, dom).reshape(-1)
        ok = torch.ones(val.shape, dtype=torch.bool)
        lin = torch.zeros(val.shape, dtype=torch.int64)
        pos_unc = torch.zeros((), dtype=torch.bool)
        for d, p in enumerate(spec.at):
            pv = self._placed(self.expr(p, grid))
            ix = torch.broadcast_to(as_int(pv), dom).reshape(-1)
            pos_unc = pos_unc | pv.unc.any()
            ok = ok & (ix >= 0) & (ix < shape[d])
            lin = lin * shape[d] + ix.clamp(0, shape[d] - 1)
        if spec.into is not None:
            start = self._placed(convert(self.tensor(spec.into), t.dtype))
        else:
            start = self._placed(convert(exact(torch.tensor(spec.init), "f" if isinstance(spec.init, float) else "i",
                                               True), t.dtype))
        size = math.prod(shape)
        out_val = torch.broadcast_to(start.val, shape).reshape(-1).clone()
        out_err = torch.broadcast_to(start.err, shape).reshape(-1).clone().to(torch.float64)
        out_unc = torch.broadcast_to(start.unc, shape).reshape(-1).clone()
        lin, val, err, unc = lin[ok], val[ok], err[ok], unc[ok]
        if spec.combine is None:
            out_val[lin] = val.to(out_val.dtype)
            out_err[lin] = err.to(torch.float64)
            out_unc[lin] = unc
        elif v.cat == "i":
            out_val = out_val.index_add(0, lin, val.to(out_val.dtype))
            lo, hi = INT_RANGE[t.dtype]
            mag = out_val.abs().to(torch.float64).index_add(0, lin, val.abs().to(torch.float64))
            hit = torch.zeros(size, dtype=torch.int64).index_add(0, lin, unc.to(torch.int64))
            out_unc = out_unc | hit.gt(0) | (mag > hi)  # a partial sum past the range wraps
        else:
            x = val.to(torch.float64)
            count = torch.ones(size, dtype=torch.float64).index_add(0, lin, torch.ones_like(x))
            mag = out_val.abs().nan_to_num(0.0, 0.0, 0.0).index_add(0, lin, x.abs().nan_to_num(0.0, 0.0, 0.0))
            out_val = out_val.index_add(0, lin, x)
            e = out_err.index_add(0, lin, err.nan_to_num(0.0, math.inf, math.inf))
            out_err = e + (count + 2) * U32 * mag + TINY * (count + 2)
            nonfin = torch.zeros(size, dtype=torch.int64).index_add(0, lin, (~torch.isfinite(x)).to(torch.int64))
            hit = torch.zeros(size, dtype=torch.int64).index_add(0, lin, unc.to(torch.int64))
            out_unc = out_unc | hit.gt(0) | nonfin.gt(0) | (mag + out_err >= MAXFIN["float32"] * 0.5)
        if pos_unc:
            out_unc = torch.ones(size, dtype=torch.bool)
        return V(out_val.view(shape), out_err.view(shape), out_unc.view(shape), v.cat)

    def _reduce(self, red: Reduce, v: V, dims: list[int], online: bool = False) -> V:
        acc = red.dtype
        cat = cat_of(acc)
        n = 1
        for d in dims:
            n *= v.val.shape[d]
        unc = v.unc.any(dim=dims) if dims else v.unc
        if cat == "b":
            b = convert(v, "bool")
            unc = b.unc.any(dim=dims)
            if red.op in ("sum", "max"):
                return V(b.val.any(dim=dims), ZERO, unc, "b")
            return V(b.val.all(dim=dims), ZERO, unc, "b")
        if cat == "i":
            x = convert(v, acc)
            unc = x.unc.any(dim=dims)
            fn = {"sum": torch.sum, "max": torch.amax, "min": torch.amin}[red.op]
            r = fn(x.val, dim=dims)
            lo, hi = INT_RANGE[acc]
            if red.op == "sum":  # a partial sum past int32 overflows too
                ps = x.val.abs().sum(dim=dims)
                unc = unc | (ps > hi)
            return V(r, ZERO, unc | (r < lo) | (r > hi), "i")
        x = as_float(v)
        e = v.err if v.cat == "f" else torch.zeros_like(x)
        e = torch.broadcast_to(e, x.shape)
        u = {"float64": 2.0 ** -53, "float32": U32, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}.get(acc, U32)
        if red.op == "sum":
            if acc in ("float16", "bfloat16"):
                # each term is converted to the accumulator's type first: a term finite in float32 but past
                # the largest float16 is +-inf there (and inf + -inf is NaN), near it undetermined (seed 43001094)
                mant, _ = FLOATS[acc]
                thr = MAXFIN[acc] * (1 + 2.0 ** -(mant + 1))
                ax = x.abs()
                fin = torch.isfinite(x)
                unc = unc | (fin & (ax + e >= thr) & (ax - e < thr)).any(dim=dims)
                x = torch.where(fin & (ax - e >= thr), torch.sign(x) * math.inf, x)
            val = x.sum(dim=dims)
            mag = x.abs().nan_to_num(0.0, 0.0, 0.0).sum(dim=dims)
            # each of the n + 2 roundings (the terms to the accumulator's type, the partial sums) errs by
            # u relative, or by half the smallest subnormal absolute where the values are that small
            # (float16 sums of tiny terms: seed 197481996)
            mant, emin = FLOATS.get(acc, FLOATS["float32"])
            sub = 2.0 ** (emin - mant - 1)
            err = e.nan_to_num(0.0, math.inf, math.inf).sum(dim=dims) + (n + 2) * (u * mag + sub) + TINY
            if online:
                # a member of an online() loop (the target or a sum statistic): each time the running max
                # grows, the terms summed so far are multiplied by alpha = exp(m_old - m_new), which adds
                # exp's rounding (2u in the interpreter; 4u + 2|m_old - m_new|u on the GPU) and the product's
                # (u). The |m_old - m_new| parts (and the rounding of m_old - m_new) add up, over the
                # rescalings, to at most |x - m|u for a term exp(x - m_running): the error the naive
                # exp(x - m) has in its bound already. So: up to 5u per rescaling, at most n - 1 of them.
                # The summation's own roundings stay at most n + 1 per term, in the online order too.
                err = err + 5 * max(n - 1, 0) * u * mag
            # exact operands that are integers with small partial sums: every order of summing is exact
            ints = ((e == 0) & (x == torch.round(x))).all(dim=dims) & (mag <= 2.0 ** (mant + 1))
            err = torch.where(ints, ZERO, err)
            if acc != "float64":
                val, err, unc = _sum_overflow(x, val, err, mag, unc, dims, acc, u)
            return V(val, err, unc, "f")
        fn = torch.amax if red.op == "max" else torch.amin
        val = fn(x, dim=dims)  # NaN-propagating, as torch
        err = torch.amax(e.nan_to_num(0.0, math.inf, math.inf), dim=dims)
        out = V(val, err, unc, "f")
        if acc in ("float16", "bfloat16"):  # rounding is monotonic: the max of the rounded values
            out = round_float(out, acc)
        return out

    def _scan(self, scan: Scan, ops: list[V], dim: int) -> V:
        """A scan along `dim`, with a bound that holds in any order of combining: the kernel scans a tile as a
        tree and adds the carry (tilec/lower/scans.py), torch loops in order. Element t is a sum (product,
        max) of t + 1 terms; a recurrence's h[t] = sum_s (prod_{s<r<=t} a_r) b_s, its products and sums up
        to t + 1 long. Where an order could turn an infinity into NaN (or back), the element is undecided."""
        acc = scan.dtype
        n = ops[0].val.shape[dim]
        count = torch.arange(1, n + 1, dtype=torch.float64, device=self.device)
        count = count.view([n if d == dim else 1 for d in range(ops[0].val.dim())])
        unc = ops[0].unc.cumsum(dim) > 0
        for v in ops[1:]:
            unc = unc | (v.unc.cumsum(dim) > 0)
        if cat_of(acc) == "i":
            x = convert(ops[0], acc)
            unc = unc | (x.unc.cumsum(dim) > 0)
            lo, hi = INT_RANGE[acc]
            if scan.op == "sum":
                unc = unc | (x.val.abs().cumsum(dim) > hi)
                return V(x.val.cumsum(dim), ZERO, unc, "i")
            fn = torch.cummax if scan.op == "max" else torch.cummin
            return V(fn(x.val, dim).values, ZERO, unc, "i")
        u = {"float64": 2.0 ** -53, "float32": U32, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}.get(acc, U32)
        xs = [as_float(v) for v in ops]
        es = [torch.broadcast_to(v.err if v.cat == "f" else ZERO, v.val.shape).nan_to_num(0.0, math.inf, math.inf)
              for v in ops]
        nonfin = torch.zeros_like(unc)
        for x in xs:
            nonfin = nonfin | (~torch.isfinite(x)).cumsum(dim).gt(0)
        if scan.op in ("max", "min"):
            fn = torch.cummax if scan.op == "max" else torch.cummin
            out = V(fn(xs[0], dim).values, torch.cummax(es[0], dim).values, unc, "f")
            return round_float(out, acc) if acc in ("float16", "bfloat16") else out
        if scan.op == "sum":
            mag = xs[0].abs().nan_to_num(0.0, 0.0, 0.0).cumsum(dim)
            err = es[0].cumsum(dim) + (count + 2) * u * mag + TINY * (count + 2)
            val = xs[0].cumsum(dim)
            unc = unc | (mag + err >= MAXFIN[acc] * 0.5)  # an infinity or NaN: the same in any order
            return V(val, torch.where(torch.isfinite(val), err, ZERO), unc, "f")
        if scan.op == "prod":
            mag = xs[0].abs().cumprod(dim)
            rel = torch.where(es[0] == 0, ZERO, es[0] / xs[0].abs())  # inf where a term 0 has an error
            grow = (1 + rel).cumprod(dim) * (1 + u) ** (count + 2) - 1
            val = xs[0].cumprod(dim)
            err = _unknown_nan(mag * grow) + TINY * (count + 2)
            unc = unc | nonfin | ~torch.isfinite(err) | (mag >= MAXFIN[acc] * 0.5) | ((mag < 1e-30) & (mag > 0))
            return V(val, torch.where(torch.isfinite(val), err, ZERO), unc, "f")
        # linear: h = a * h + b, sequentially in float64; M the recurrence of the magnitudes, E of the errors
        a, b = xs
        ea, eb = es
        h = torch.zeros_like(a.select(dim, 0))
        m = torch.zeros_like(h)
        e = torch.zeros_like(h)
        vals, mags, errs = [], [], []
        for t in range(n):
            at, bt = a.select(dim, t), b.select(dim, t)
            e = (at.abs() + ea.select(dim, t)) * e + ea.select(dim, t) * m + eb.select(dim, t)
            m = at.abs() * m + bt.abs()
            h = at * h + bt
            vals.append(h)
            mags.append(m)
            errs.append(e)
        val, mag, err = (torch.stack(z, dim) for z in (vals, mags, errs))
        err = _unknown_nan(err + 2 * (count + 2) * u * mag) + TINY * (count + 2)
        unc = unc | nonfin | ~torch.isfinite(mag) | (mag >= MAXFIN[acc] * 0.5)
        return V(val, torch.where(torch.isfinite(val), err, ZERO), unc, "f")

    # -- expressions ------------------------------------------------------------------------------
    def expr(self, e: Expr, grid: dict) -> V:
        m = getattr(self, "_" + type(e).__name__, None)
        if m is None:
            raise NotImplementedError(f"oracle: no rule for {type(e).__name__} {e!r}")
        return m(e, grid)

    def _Const(self, e: Const, grid) -> V:
        if isinstance(e.value, bool) or e.dtype == "bool":
            return exact(torch.tensor(bool(e.value)), "b", True)
        if isinstance(e.value, int):
            return exact(torch.tensor(e.value, dtype=torch.int64), "i", True)
        # a float literal is a float32 constant in the kernel
        return exact(torch.tensor(float(e.value), dtype=torch.float32).to(torch.float64), "f", True)

    def _SizeVar(self, e: SizeVar, grid) -> V:
        return exact(torch.tensor(self.sizes[e.name], dtype=torch.int64), "i")

    def _Knob(self, e, grid) -> V:  # pragma: no cover - knobs are not values of a compute
        raise NotImplementedError("a knob inside a compute body")

    def _IterVar(self, e: IterVar, grid) -> V:
        if e not in grid:
            raise NotImplementedError(f"axis {e.name} outside its compute")
        return grid[e]

    def _Load(self, e: Load, grid) -> V:
        src = self.tensor(e.tensor)
        shape = list(src.val.shape)
        idx = [as_int(self.expr(i, grid)) for i in e.indices]
        idx = list(torch.broadcast_tensors(*idx)) if idx else []
        ok = torch.ones(idx[0].shape if idx else (), dtype=torch.bool)
        for d, ix in enumerate(idx):
            ok = ok & (ix >= 0) & (ix < shape[d])
        cl = tuple(ix.clamp(0, shape[d] - 1) for d, ix in enumerate(idx))
        val = src.val[cl] if idx else src.val
        # an exact source's error is the 0-d CPU ZERO (its uncertainty FALSE): kept 0-d, never indexed with
        # indices on another device
        err = torch.broadcast_to(src.err, shape)[cl] if idx and src.err.dim() else src.err
        unc = torch.broadcast_to(src.unc, shape)[cl] if idx and src.unc.dim() else src.unc
        zero = torch.zeros((), dtype=val.dtype)
        return V(torch.where(ok, val, zero), torch.where(ok, err, ZERO), torch.where(ok, unc, FALSE), src.cat)

    def _Cast(self, e: Cast, grid) -> V:
        return convert(self.expr(e.a, grid), e.dtype)

    def _Unary(self, e: Unary, grid) -> V:
        a = self.expr(e.a, grid)
        if e.op == "~":
            if a.cat == "b":
                return V(~a.val, ZERO, a.unc, "b", a.weak)
            if a.cat == "i":
                return V(torch.bitwise_not(a.val), ZERO, a.unc, "i", a.weak)
            raise NotImplementedError("~ on a float")
        if e.op == "-":
            if a.cat == "f":
                return V(-a.val, a.err, a.unc, "f", a.weak)
            return V(-as_int(a), ZERO, a.unc, "i", a.weak)
        raise NotImplementedError(f"unary {e.op}")

    def _Call(self, e: Call, grid) -> V:
        a = self.expr(e.args[0], grid)
        if e.fn == "abs":
            if a.cat == "f":
                return V(a.val.abs(), a.err, a.unc, "f")
            return V(as_int(a).abs(), ZERO, a.unc, "i")
        if a.cat != "f" and e.fn in ("floor", "ceil", "trunc", "round", "sign"):  # of an integer: exact
            x = as_int(a)
            return V(torch.sign(x) if e.fn == "sign" else x, ZERO, a.unc, "i", a.weak)
        if e.fn in ("floor", "ceil", "trunc", "round", "sign"):
            return self._step(e.fn, a)
        x = as_float(a)
        ea = a.err if a.cat == "f" else ZERO
        unc = a.unc
        if e.fn in _SMOOTH:
            return self._smooth(e.fn, x, ea, unc)
        # On the GPU Triton's exp is ex2.approx(x * log2(e)): the rounded product errs by up to
        # 2|x|u in the exponent, ex2.approx by 2^-22.5 (PTX ISA); numpy's exp is within 1 ulp.
        exp_rel = 2 * U32 if interpreter() else (2 * x.abs().nan_to_num(0.0, 0.0, 0.0) + 4) * U32
        if e.fn == "exp":
            v = torch.exp(x)
            # exp(x + ea) - exp(x): where exp(x) underflows to 0 a relative bound would say 0
            err = torch.where(ea == 0, ZERO, _unknown_nan(torch.exp(x + ea) - v)) \
                + exp_rel * v.abs().nan_to_num(0.0, 0.0, 0.0)
        elif e.fn == "log":
            v = torch.log(x)
            safe = x > ea
            err = torch.where(safe, ea / torch.where(safe, x - ea, torch.ones_like(x)), ZERO) + U32
            unc = unc | ((ea > 0) & (x.abs() <= ea))
        elif e.fn == "sqrt":
            v = torch.sqrt(x)
            safe = x > ea
            err = torch.where(safe, ea / (torch.sqrt(x.clamp_min(0)) + torch.sqrt((x - ea).clamp_min(0))), ZERO)
            unc = unc | ((ea > 0) & (x.abs() <= ea))
            if interpreter():  # numpy's sqrt is correctly rounded
                return fop(v, err, unc, exact=ea == 0)
            # the GPU's is sqrt.approx.ftz: 2^-23 relative, and a subnormal input reads as 0
            err = err + U32 * v.abs().nan_to_num(0.0, 0.0, 0.0)
            err = torch.where((x.abs() < FLT_MIN) & (x != 0), torch.maximum(err, v.abs()), err)
        elif e.fn == "rsqrt":
            v = torch.rsqrt(x)
            safe = x > ea
            ratio = torch.where(safe, ea / torch.where(safe, x, torch.ones_like(x)), ZERO)
            err = xm(torch.pow((1 - ratio).clamp_min(1e-300), -0.5) - 1, v) + 3 * U32 * v.abs().nan_to_num(0.0, 0.0, 0.0)
            unc = unc | ((ea > 0) & (x.abs() <= ea)) | (x == 0)
            if not interpreter():  # rsqrt.approx.ftz: a subnormal input reads as 0 (+inf out)
                unc = unc | ((x.abs() < FLT_MIN) & (x != 0))
        elif e.fn == "sigmoid":  # 1 / (1 + exp(-x)): exp's relative error, scaled by 1 - sigmoid(x)
            v = torch.sigmoid(x)
            err = 0.25 * ea + (4 * U32 + exp_rel * (1 - v).abs()) * v.abs()
        elif e.fn == "silu":
            v = x * torch.sigmoid(x)
            err = 1.1 * ea + (6 * U32 + exp_rel * (1 - torch.sigmoid(x)).abs()) * v.abs().nan_to_num(0.0, 0.0, 0.0)
        elif e.fn == "tanh":
            v = torch.tanh(x)
            err = ea + 4 * U32 * (1 + v.abs().nan_to_num(0.0, 0.0, 0.0))
        else:
            raise NotImplementedError(f"call {e.fn}")
        # at 0, +-inf and NaN these functions are exact (exp(-inf) = 0, sigmoid(0) = 0.5, ...)
        special = (ea == 0) & ((x == 0) | torch.isinf(x) | torch.isnan(x))
        return fop(v, torch.where(special, ZERO, err), unc, exact=special)

    def _step(self, fn: str, a: V) -> V:
        """floor, ceil, trunc, round, sign of a float: exact, unless the operand's error interval holds a step
        (a whole number, a half for round, 0 for sign): then uncertain."""
        f = {"floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round,
             "sign": torch.sign}[fn]
        x, ea = a.val, a.err
        v = f(x)
        lo, hi = f(x - ea), f(x + ea)
        unc = a.unc | ((ea > 0) & ((lo != hi) | ~torch.isfinite(ea)))
        return V(v, ZERO, unc, "f")

    def _smooth(self, fn: str, x: torch.Tensor, ea: torch.Tensor, unc: torch.Tensor) -> V:
        """erf, sin, cos, exp2, log2, log1p, expm1: the operand's error through the function's slope over the
        interval (each is monotone there or has a slope bounded by `_SMOOTH`'s constant), plus the function's
        own error (`_SMOOTH`: units of float32 roundoff, relative or absolute)."""
        f, slope, rel, absolute = _SMOOTH[fn]
        v = f(x)
        if slope is None:  # monotone: the error is the larger move at the interval's ends
            err = torch.maximum((f(x + ea) - v).abs(), (f(x - ea) - v).abs())
            err = torch.where(ea == 0, ZERO, _unknown_nan(err))
        else:
            err = slope * ea
        if fn in ("log2", "log1p"):  # near the pole the interval leaves the domain
            edge = 0.0 if fn == "log2" else -1.0
            unc = unc | ((ea > 0) & (x - ea <= edge))
        err = err + rel * U32 * v.abs().nan_to_num(0.0, 0.0, 0.0) + absolute * U32
        special = (ea == 0) & ((x == 0) | torch.isinf(x) | torch.isnan(x))
        return fop(v, torch.where(special, ZERO, err), unc, exact=special)

    def _Where(self, e: Where, grid) -> V:
        c = convert(self.expr(e.cond, grid), "bool")
        a, b = self.expr(e.a, grid), self.expr(e.b, grid)
        cat = max(a.cat, b.cat, key=RANK.get)
        weak = a.weak and b.weak
        if cat == "f":
            xa, xb = as_float(a), as_float(b)
            ea = a.err if a.cat == "f" else ZERO
            eb = b.err if b.cat == "f" else ZERO
            val = torch.where(c.val, xa, xb)
            err = torch.where(c.val, ea, eb)
            unc = torch.where(c.val, a.unc, b.unc)
            diff = (xa - xb).abs()
            both = torch.isfinite(xa) & torch.isfinite(xb)
            same = (xa == xb) | (torch.isnan(xa) & torch.isnan(xb))
            err = torch.where(c.unc, torch.maximum(ea, eb) + torch.where(both, diff, ZERO), err)
            unc = unc | (c.unc & (a.unc | b.unc | (~both & ~same)))
            return V(val, err, unc, "f", weak)
        va, vb = (as_int(a), as_int(b)) if cat == "i" else (a.val, b.val)
        val = torch.where(c.val, va, vb)
        unc = torch.where(c.val, a.unc, b.unc) | (c.unc & ((va != vb) | a.unc | b.unc))
        return V(val, ZERO, unc, cat, weak)

    def _Binary(self, e: Binary, grid) -> V:
        a, b = self.expr(e.a, grid), self.expr(e.b, grid)
        op = e.op
        weak = a.weak and b.weak
        cat = max(a.cat, b.cat, key=RANK.get)
        if op in ("&", "|", "^"):
            fn = {"&": torch.bitwise_and, "|": torch.bitwise_or, "^": torch.bitwise_xor}[op]
            if a.cat == b.cat == "b":
                return V(fn(a.val, b.val), ZERO, a.unc | b.unc, "b", weak)
            if cat == "f":
                raise NotImplementedError("& | ^ on floats")
            return V(fn(as_int(a), as_int(b)), ZERO, a.unc | b.unc, "i", weak)
        if op in ("<<", ">>"):  # torch's rules at the result type's width W (docs/schedule.md)
            bits = {"int64": 64, "int32": 32, "int16": 16, "int8": 8}.get(e.dtype)
            if bits is None:
                raise NotImplementedError(f"{op} of {e.dtype}")
            x, y = as_int(a), as_int(b)
            ok = (y >= 0) & (y < bits)
            amount = torch.where(ok, y, torch.zeros_like(y))
            if op == "<<":
                val = torch.where(ok, x << amount, torch.zeros_like(x))
                if bits < 64:  # two's complement wrap, as the kernel's W-bit (int32: exact) shift
                    val = ((val + 2 ** (bits - 1)) & (2 ** bits - 1)) - 2 ** (bits - 1)
            else:
                val = torch.where(ok, x >> amount, torch.where(x < 0, -torch.ones_like(x), torch.zeros_like(x)))
            return V(val, ZERO, a.unc | b.unc, "i", weak)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            fn = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq, "!=": torch.ne}[op]
            if cat == "f" and repr(e.a) == repr(e.b):  # x.ne(x): a NaN test, whatever x's error
                return V(fn(as_float(a), as_float(b)), ZERO, a.unc | b.unc, "b")
            if cat == "f":
                x, y = as_float(a), as_float(b)
                ex = a.err if a.cat == "f" else ZERO
                ey = b.err if b.cat == "f" else ZERO
                es = ex + ey
                close = (es > 0) & ((x - y).abs() <= es)
                unc = a.unc | b.unc | close | (~torch.isfinite(es) & torch.isfinite(x) & torch.isfinite(y))
                return V(fn(x, y), ZERO, unc, "b")
            if cat == "b":
                return V(fn(a.val, b.val), ZERO, a.unc | b.unc, "b")
            return V(fn(as_int(a), as_int(b)), ZERO, a.unc | b.unc, "b")
        if op == "**":
            if cat != "f" or b.cat == "f" and b.err.max() > 0:
                raise NotImplementedError("** other than of a float by a constant")
            return self._power(a, b)
        if op == "/" or cat == "f":
            return self._float_binary(op, a, b, weak)
        # integers (bools count as 0 and 1, as in torch)
        x, y = as_int(a), as_int(b)
        unc = a.unc | b.unc
        if op == "+":
            val = x + y
        elif op == "-":
            val = x - y
        elif op == "*":
            val = x * y
        elif op in ("//", "%"):
            zero = y == 0
            unc = unc | zero
            y1 = torch.where(zero, torch.ones_like(y), y)
            val = torch.div(x, y1, rounding_mode="floor") if op == "//" else torch.remainder(x, y1)
        elif op == "max":
            val = torch.maximum(x, y)
        elif op == "min":
            val = torch.minimum(x, y)
        else:
            raise NotImplementedError(f"binary {op} on integers")
        if cat == "b":  # arithmetic of two bools stays bool in torch (saturating)
            if op in ("max", "min", "*"):
                return V(val != 0, ZERO, unc, "b", weak)
            return V(val != 0, ZERO, unc, "b", weak)
        big = (val < -2**31) | (val > 2**31 - 1)
        return V(val, ZERO, unc | big, "i", weak)

    def _power(self, a: V, b: V) -> V:
        """x ** c for a constant c (the fuzzer draws 2, 3, 0.5, 1.5, the last two of |x|): monotone on each side of 0,
        so the operand's error moves the result by at most the larger move at the interval's ends; the kernel's
        own error is a few units (torch's shortcuts for 2, 3, 0.5; C's pow, or exp2(c * log2|x|) in the
        interpreter, whose error grows with |c * log2|x||)."""
        x, c = as_float(a), float(b.val.item() if b.val.dim() == 0 else b.val.flatten()[0].item())
        ea = a.err if a.cat == "f" else ZERO
        v = torch.pow(x, c)
        err = torch.maximum((torch.pow(x + ea, c) - v).abs(), (torch.pow(x - ea, c) - v).abs())
        if c in (2.0, 3.0):  # x * x (* x): the interval through 0 moves it by at most the end's
            err = torch.maximum(err, (torch.pow(x.abs() + ea, c) - v.abs()).abs())
        err = torch.where(ea == 0, ZERO, _unknown_nan(err))
        lg = (c * torch.log2(x.abs().clamp_min(1e-300))).abs().nan_to_num(0.0, 0.0, 0.0)
        err = err + (8 + 2 * lg) * U32 * v.abs().nan_to_num(0.0, 0.0, 0.0)
        unc = a.unc | ((c != int(c)) & (ea > 0) & (x - ea <= 0))
        special = (ea == 0) & ((x == 0) | torch.isinf(x) | torch.isnan(x))
        return fop(v, torch.where(special, ZERO, err), unc, exact=special)

    def _float_binary(self, op: str, a: V, b: V, weak: bool) -> V:
        x, y = as_float(a), as_float(b)
        ex = a.err if a.cat == "f" else ZERO
        ey = b.err if b.cat == "f" else ZERO
        unc = a.unc | b.unc
        exact = (ex == 0) & (ey == 0)
        if op in ("+", "-"):
            v = x + y if op == "+" else x - y
            return fop(v, ex + ey, unc, exact=exact)
        if op == "*":
            v = x * y
            err = xm(ex, y) + xm(ey, x) + xm(ex, ey)
            unc = unc | ((ex > 0) & (x.abs() <= ex) & torch.isinf(y)) | ((ey > 0) & (y.abs() <= ey) & torch.isinf(x))
            return fop(v, err, unc, exact=exact)
        if op == "/":
            v = x / y
            safe = y.abs() > ey
            den = torch.where(safe, y.abs() - ey, torch.ones_like(y))
            err = torch.where(safe, (ex + xm(ey, v)) / den, ZERO)
            unc = unc | ((ey > 0) & ~safe) | (y == 0)
            unc = unc | ((ex > 0) & (x.abs() <= ex) & torch.isinf(y))
            # numpy's division is correctly rounded (the GPU's `/` is not: there, no exact case)
            return fop(v, err, unc, u=2 * U32, exact=exact if interpreter() else None)
        if op in ("max", "min"):
            v = torch.maximum(x, y) if op == "max" else torch.minimum(x, y)
            # well apart, the selected operand's error; close, either one's
            apart = (x - y).abs() > ex + ey
            pick = torch.where((x >= y) == (op == "max"), ex, ey)
            return V(v, torch.where(apart, pick, torch.maximum(ex, ey)), unc, "f", weak)
        if op in ("//", "%"):
            # torch's own (fmod-based) floor division and remainder: exact for exact operands, whatever
            # the rounding of x / y (1.0 // 0.1 is 9, though 1.0 / 0.1 rounds to 10), infinite divisors too
            q = x / y
            fq = torch.div(x, y, rounding_mode="floor")
            near = (q - torch.round(q)).abs() <= 4 * U32 * q.abs() + (ex + ey) * 4 / y.abs().clamp_min(1e-30) + TINY
            near = near & ~exact  # operands with errors near a whole quotient: either side of it
            big = exact & (fq.abs() >= 2**24)  # past float32's whole numbers the kernel's quotient rounds
            unc = unc | (y == 0) | (near & torch.isfinite(q)) | big
            if op == "//":
                return V(fq, ZERO, unc, "f", weak)
            v = torch.remainder(x, y)
            return fop(v, ex + xm(ey, fq), unc, u=4 * U32, exact=exact)
        raise NotImplementedError(f"binary {op} on floats")


# ---------------------------------------------------------------------------------------------
# inputs and outputs


SENTINEL = {1: 0x5A, 2: 0x7DA5, 4: 0x7FA5A5A5, 8: 0x7FF5A5A5A5A5A5A5}
RAW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
PAD = 37  # sentinel elements on each side of an output, poison on each side of an input


def _sentinel(dtype: torch.dtype) -> int:
    size = torch.empty((), dtype=dtype).element_size()
    if dtype == torch.bfloat16:
        return 0x7FA5
    if dtype == torch.int32:
        return 0x5A5A5A5A
    return SENTINEL[size]


def _strides(shape: list[int], layout: str) -> list[int]:
    n = len(shape)
    order = list(range(n))
    if layout == "t":
        order = order[::-1]  # column-major: the first dimension is the contiguous one
    strides = [0] * n
    step = 2 if layout == "s" else 1  # "s": gaps between elements and rows
    for d in reversed(order):  # "0" is row-major too; make_input then sets dim 0's stride to 0
        strides[d] = step
        step *= shape[d] + (1 if layout == "s" else 0)
    return strides


@_on_cpu
def make_input(shape: list[int], dtype: str, spec: dict, gen: torch.Generator, pad: int = PAD):
    """One input tensor, a view into a poisoned buffer (`pad` elements of poison before it, PAD after);
    returns (view, buffer). `spec`: layout, scale, shift, grid, special + kinds (NaN / +-inf at random
    elements), ninf_rows (whole rows of -inf), ninf_prefix (rows whose first elements are -inf), range (ints)."""
    tdt = getattr(torch, dtype)
    strides = _strides(shape, spec.get("layout", "c"))
    span = 1 + sum((s - 1) * st for s, st in zip(shape, strides))
    cat = cat_of(dtype)
    if cat == "f":
        buf = torch.full((span + pad + PAD,), math.nan, dtype=tdt)
        vals = torch.randn(shape, generator=gen, dtype=torch.float64) * spec.get("scale", 1.0) + spec.get("shift", 0.0)
        if spec.get("grid"):  # multiples of 1/grid: sums and products stay exact, so roundings are checked exactly
            vals = torch.round(vals * spec["grid"]) / spec["grid"]
        special = spec.get("special", 0.0)
        if special:
            kinds = torch.tensor([float(k) for k in spec.get("kinds", ["nan", "inf", "-inf"])], dtype=torch.float64)
            pick = torch.randint(0, len(kinds), shape, generator=gen)
            hit = torch.rand(shape, generator=gen, dtype=torch.float64) < special
            vals = torch.where(hit, kinds[pick], vals)
        if len(shape) >= 2 and spec.get("ninf_rows"):  # whole rows (along the last dimension) of -inf
            rows = torch.rand(shape[:-1], generator=gen, dtype=torch.float64) < spec["ninf_rows"]
            vals = torch.where(rows[..., None], -math.inf, vals)
        if len(shape) >= 2 and spec.get("ninf_prefix"):  # rows whose first r elements are -inf (r random)
            rows = torch.rand(shape[:-1], generator=gen, dtype=torch.float64) < spec["ninf_prefix"]
            r = torch.randint(0, shape[-1] + 1, shape[:-1], generator=gen)
            vals = torch.where(rows[..., None] & (torch.arange(shape[-1]) < r[..., None]), -math.inf, vals)
        vals = vals.to(tdt)
    elif cat == "i":
        buf = torch.full((span + pad + PAD,), 1_000_003 if dtype != "uint8" else 201, dtype=tdt)
        lo, hi = spec.get("range", (-5, 6))
        vals = torch.randint(lo, hi, shape, generator=gen).to(tdt)
    else:
        buf = torch.ones((span + pad + PAD,), dtype=tdt)
        vals = torch.rand(shape, generator=gen) < spec.get("p", 0.5)
    if spec.get("layout") == "0" and len(shape) >= 1:  # broadcast along dim 0: stride 0, one row stored
        torch.as_strided(buf, shape[1:], strides[1:], storage_offset=pad).copy_(vals[0])
        return torch.as_strided(buf, shape, [0] + strides[1:], storage_offset=pad), buf
    view = torch.as_strided(buf, shape, strides, storage_offset=pad)
    view.copy_(vals)
    return view, buf


@_on_cpu
def make_inputs(kernel_inputs, sizes: dict, specs: dict, seed: int):
    """Inputs for each placeholder in `kernel_inputs` order: {name: (view, buffer)}."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for t in kernel_inputs:
        shape = [int(evaluate(d, sizes)) for d in t.shape]
        out[t.name] = make_input(shape, t.dtype, specs.get(t.name, {}), gen, ALIGNED_PAD if seed % 2 == 0 else PAD)
    return out


@_on_cpu
def make_output(shape: list[int], dtype: str):
    """A dense view in the middle of a sentinel-filled buffer: (view, buffer)."""
    tdt = getattr(torch, dtype)
    n = math.prod(shape)
    buf = torch.empty((n + 2 * PAD,), dtype=tdt)
    raw = buf.view(RAW[buf.element_size()])
    raw.fill_(_sentinel(tdt) if buf.element_size() > 1 else 0x5A)
    view = buf[PAD:PAD + n].view(shape) if shape else buf[PAD:PAD + 1].view(())
    return view, buf


@_on_cpu
def check_output(name: str, view: torch.Tensor, buf: torch.Tensor, ref: V) -> list[dict]:
    """Compare one output with its reference and check its sentinels; a list of problems."""
    problems = []
    raw = buf.view(RAW[buf.element_size()])
    pattern = _sentinel(buf.dtype) if buf.element_size() > 1 else 0x5A
    if buf.element_size() == 2 and pattern > 0x7FFF:
        pattern -= 1 << 16
    n = view.numel()
    pad = torch.cat([raw[:PAD], raw[PAD + n:]])
    if (pad != pattern).any():
        bad = (pad != pattern).nonzero().flatten()
        where = [int(i) - PAD if i < PAD else int(i) - PAD + n for i in bad[:4]]
        problems.append(dict(output=name, kind="out-of-bounds write", count=int(bad.numel()),
                             detail=f"sentinel overwritten at flat offsets {where} (relative to the first element)"))
    body = raw[PAD:PAD + n].view(view.shape)
    unwritten = body == pattern
    if buf.dtype == torch.bool:
        unwritten = unwritten | (body > 1)
    if unwritten.any():
        idx = [tuple(i.tolist()) for i in unwritten.nonzero()[:4]]
        problems.append(dict(output=name, kind="unwritten", count=int(unwritten.sum()),
                             detail=f"elements never written, e.g. at {idx}"))
    got = view.clone()
    if buf.dtype == torch.bool:
        got = torch.where(unwritten, False, body != 0)
    problems += compare(name, got, ref, skip=unwritten)
    return problems


@_on_cpu
def compare(name: str, got: torch.Tensor, ref: V, skip: torch.Tensor | None = None) -> list[dict]:
    """Compare `got` with reference `ref` (already rounded to got's dtype); a list of problems."""
    want = torch.broadcast_to(ref.val, got.shape)
    unc = torch.broadcast_to(ref.unc, got.shape)
    if skip is not None:
        unc = unc | skip
    if ref.cat != "f":
        g = got.to(torch.int64) if ref.cat == "i" else got.to(torch.bool)
        w = want.to(g.dtype)
        bad = (g != w) & ~unc
        if bad.any():
            return [_problem(name, "value", bad, g, w)]
        return []
    g = got.to(torch.float64)
    err = torch.broadcast_to(ref.err, got.shape)
    certain = ~unc & (torch.isfinite(err) | ~torch.isfinite(want))
    problems = []
    want_nan = torch.isnan(want)
    bad_nan = certain & (want_nan != torch.isnan(g))
    if bad_nan.any():
        problems.append(_problem(name, "nan", bad_nan, g, want))
    want_inf = torch.isinf(want)
    bad_inf = certain & want_inf & (g != want) & ~torch.isnan(g)
    if bad_inf.any():
        problems.append(_problem(name, "inf", bad_inf, g, want))
    fin = certain & torch.isfinite(want)
    tol = 2 * err
    bad = fin & ~torch.isnan(g) & ~((g - want).abs() <= tol)
    if bad.any():
        problems.append(_problem(name, "value", bad, g, want, tol))
    return problems


def _problem(name, kind, bad, got, want, tol=None) -> dict:
    idx = bad.nonzero()[:3]
    ex = []
    for i in idx:
        i = tuple(i.tolist())
        item = f"{list(i)}: got {got[i].item()!r}, want {want[i].item()!r}"
        if tol is not None:
            item += f" (tol {float(tol[i]):.3g})"
        ex.append(item)
    return dict(output=name, kind=kind, count=int(bad.sum()), total=bad.numel(), detail="; ".join(ex))


# ---------------------------------------------------------------------------------------------
# one case


@dataclass
class Report:
    ok: bool
    problems: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    uncertain: float = 0.0  # share of output elements the oracle could not decide

    def __str__(self) -> str:
        if self.ok:
            return f"OK: outputs {', '.join(self.outputs)} match the reference (undecided share {self.uncertain:.2f})"
        lines = ["WRONG:"]
        for p in self.problems:
            cnt = f" {p['count']}/{p['total']} elements" if "total" in p else f" {p.get('count', '')}"
            lines.append(f"  {p['output']}: {p['kind']}{cnt}: {p['detail']}")
        return "\n".join(lines)

    @property
    def signature(self) -> str:
        return ",".join(sorted({p["kind"] for p in self.problems}))


def _to_device(view: torch.Tensor, buf: torch.Tensor):
    dev = buf.to("cuda")
    return dev.as_strided(view.shape, view.stride(), view.storage_offset()), dev


def _to_host(view: torch.Tensor, buf: torch.Tensor):
    host = buf.cpu()
    return host.as_strided(view.shape, view.stride(), view.storage_offset()), host


def check_kernel(sched, args, config=None, sizes=None, inputs=None, seed=0, specialize=None, kernel=None) -> Report:
    """Build `sched`, run it on fresh inputs into sentinel-guarded outputs, compare with the oracle.

    A `tc.TilecError` from `tc.build` or from the call propagates (the case is refused); so does any
    other exception (an internal error). Returns a Report.
    """
    sizes = dict(sizes or {})
    if kernel is None:
        kernel = tc.build(sched, args, config=config, specialize=specialize)
    ins = make_inputs(kernel.inputs, sizes, inputs or {}, seed)
    before = {n: b.clone() for n, (_, b) in ins.items()}
    outs = {}
    for t in kernel.outputs:
        shape = [int(evaluate(d, sizes)) for d in t.shape]
        outs[t.name] = make_output(shape, t.dtype)
    given = {n: sizes[n] for n in kernel.call_sizes}  # sizes no input's shape holds: given at the call
    if kernel.target == "cuda":  # compiled on a GPU: the same views of the same buffers, on the device
        dev_in, dev_out = ({n: _to_device(v, b) for n, (v, b) in d.items()} for d in (ins, outs))
        kernel(*[dev_in[t.name][0] for t in kernel.inputs], out=[dev_out[t.name][0] for t in kernel.outputs],
               **given)
        outs = {n: _to_host(v, b) for n, (v, b) in dev_out.items()}
        ins = {n: _to_host(v, b) for n, (v, b) in dev_in.items()}
    else:
        kernel(*[ins[t.name][0] for t in kernel.inputs], out=[outs[t.name][0] for t in kernel.outputs], **given)
    online = set()  # the sums the kernel computes in online() loops (their bound is wider: Oracle._reduce)
    for st in sched.stages.values() if sched is not None else ():
        if getattr(st, "online_stats", ()):
            online |= {st.name} | {x.name for x in st.online_stats}
    oracle = Oracle(sizes, {n: v for n, (v, _) in ins.items()}, online=online)
    problems = []
    n_unc = n_all = 0
    for t in kernel.outputs:
        view, buf = outs[t.name]
        ref = oracle.tensor(t)
        problems += check_output(t.name, view, buf, ref)
        n_unc += int(torch.broadcast_to(ref.unc, view.shape).sum())
        n_all += view.numel()
    for n, (_, b) in ins.items():
        if not torch.equal(b.view(RAW[b.element_size()]), before[n].view(RAW[b.element_size()])):
            problems.append(dict(output=n, kind="input modified", count=1, detail="the kernel wrote into an input"))
    return Report(not problems, problems, [t.name for t in kernel.outputs], n_unc / max(n_all, 1))


def attempt(fn):
    """Run one schedule primitive that the fuzzer saw refused; a TilecError is expected and ignored."""
    try:
        return fn()
    except tc.TilecError:
        return None


def run_script_case(case: dict) -> Report:
    """The end of a reproduction script: build, run, compare; print the report, exit 1 if wrong."""
    report = check_kernel(**case)
    print(report)
    if not report.ok:
        raise SystemExit(1)
    return report
