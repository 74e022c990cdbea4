"""The algebra of the online rewrite (Milakov & Gimelshein 2018; FlashAttention): when it holds, and
what each reduction of the group computes in the rewritten loop.

A group is a target reduction R (a sum) and its statistics: one max `m` and sums `l`, all over one
range (R's reduce axis). Written naively, m is complete before l reads it (`l = sum_j exp(X_j - m)`) and
m and l before R does (`R = sum_j exp(X_j - m) * G_j / l`): three loops over j. The online form runs one
loop, carrying the running max m' and each sum's running value, and rescales the sums by
exp(m'_old - m'_new) whenever the max grows. That is exact algebra when every member's body is

    coefficient * exp(X_j - m) / (a product of sum statistics)

with X the max's own body (so every exponent is at most 0) and nothing else reading a statistic: then
sum_j exp(X_j - m_final) * G_j = exp(m' - m_final) * sum_j exp(X_j - m') * G_j for any m', and a division
by a sum statistic (constant over j) is done once, after the loop, with its final value.
`online_form` checks exactly that on the compute, with the elementwise stages between looked through,
and says why where it does not hold. A rounding point inside a body (P rounded to bfloat16 before P·V)
stays where it is, but rounds the unnormalized exp(X_j - m') instead of the normalized value: the same
relative error per element (docs/online.md states the bound).
"""

from __future__ import annotations

from dataclasses import dataclass

from tilec.ir.expr import Binary, Call, Cast, Const, Expr, IterVar, Load, Reduce, Where, substitute, walk


class NotOnline(Exception):
    """Why a group of reductions has no online form (the message is for people)."""


@dataclass(frozen=True)
class Member:
    """One reduction of the group in the rewritten loop: `body` is its summand (or, for the max, its
    operand) with the elementwise stages between substituted and the divisions by sum statistics taken
    out; `divisors` are those statistics, divided by once after the loop; `axes` maps the member's axes
    (spatial and its reduce axis) to the target's."""

    tensor: object
    body: Expr
    divisors: tuple
    axes: dict


@dataclass(frozen=True)
class OnlineForm:
    """The rewritten group: the target, the max statistic, the sum statistics in order, and each
    member's rewritten body (`members`, by tensor name)."""

    target: object
    max: object
    sums: tuple
    members: dict
    mask: Expr | None = None  # cond where the max's operand is where(cond, x, -inf), in the target's axes

    @property
    def stats(self) -> tuple:
        return (self.max, *self.sums)


def _reads(e: Expr, tensors) -> bool:
    names = {t.name for t in tensors}
    return any(isinstance(n, Load) and n.tensor.name in names for n in walk(e))


def looked_through(e: Expr, stats, stop) -> Expr:
    """`e` with every elementwise stage that reads a statistic (directly or through others) substituted,
    its rounding kept as a cast; `stop` (names) are never substituted (the group's own members)."""
    def depends(t, seen=()) -> bool:
        if t.is_placeholder or t.name in seen:
            return False
        if t in stats:
            return True
        return any(depends(u, seen + (t.name,)) for u in t.inputs)

    def sub(n):
        if isinstance(n, Load) and not n.tensor.is_placeholder and not n.tensor.is_reduction \
                and n.tensor.name not in stop and depends(n.tensor):
            m = dict(zip(n.tensor.axis, n.indices))
            inner = substitute(n.tensor.body, lambda x: m.get(x) if isinstance(x, IterVar) else None)
            return Cast(looked_through(inner, stats, stop), n.tensor.dtype)
        return None
    return substitute(e, sub)


def _map_axes(member, target_body: Expr, target) -> dict:
    """member axis -> target axis: the spatial axes from the target's read of the member (its indices must
    be the target's plain axes), the member's reduce axis to the target's."""
    for n in walk(target_body):
        if isinstance(n, Load) and n.tensor is member:
            if not all(isinstance(i, IterVar) for i in n.indices) or len(set(n.indices)) != len(n.indices):
                raise NotOnline(f"{target.name} reads {n}: the online form needs {member.name} read at plain "
                                f"axes, one per dimension")
            axes = dict(zip(member.axis, n.indices))
            break
    else:
        axes = None
    return axes


def online_form(target, stats) -> OnlineForm:
    """The online form of `target` (a Tensor: a sum over one reduce axis) with `stats` (Tensors: one max, then
    sums), or NotOnline saying which rule fails."""
    if not isinstance(target.body, Reduce) or target.body.op != "sum" or len(target.body.axes) != 1:
        raise NotOnline(f"{target.name} is not a sum over one reduce axis; the online form runs a sum's loop")
    (j,) = target.body.axes
    if target.body.dtype != "float32":
        raise NotOnline(f"{target.name} is accumulated in {target.body.dtype}; the online form rescales its "
                        f"running sum at every tile, so it must be float32 (acc_dtype='float32', cast after)")
    maxes = [t for t in stats if isinstance(t.body, Reduce) and t.body.op == "max"]
    if len(maxes) != 1:
        raise NotOnline(f"the statistics need exactly one max (the running max the sums are rescaled by), got "
                        f"{len(maxes)}: {', '.join(t.name for t in stats)}")
    (m,) = maxes
    sums = [t for t in stats if t is not m]
    for t in stats:
        red = t.body
        if not isinstance(red, Reduce) or red.op not in ("max", "sum") or len(red.axes) != 1:
            raise NotOnline(f"{t.name} is not a max or a sum over one reduce axis")
        if str(red.axes[0].extent) != str(j.extent):
            raise NotOnline(f"{t.name} reduces over {red.axes[0].name} of extent {red.axes[0].extent}, but "
                            f"{target.name} over {j.name} of extent {j.extent}: one loop runs one range")
        if red.dtype != "float32" or t.dtype != "float32":
            raise NotOnline(f"{t.name} is kept as {t.dtype} (accumulated in {red.dtype}); the online form carries "
                            f"its running value, so it must be float32 with a float32 accumulator")
    names = {t.name for t in (target, *stats)}
    members: dict = {}
    # the max's operand, in its own axes: every exponent must be it, minus the max
    (c,) = m.body.axes
    x = looked_through(m.body.body, stats, names)
    if _reads(x, stats):
        raise NotOnline(f"{m.name}'s operand {x} reads a statistic; the max must not depend on the group")
    target_body = looked_through(target.body.body, stats, names)
    # every member's axes, as the target's: the target reads each statistic (directly, or through a sum
    # statistic it divides by)
    axes_of = {target.name: {**{a: a for a in target.axis}, j: j}}
    for t in (*sums, m):
        found = _map_axes(t, target_body, target)
        if found is None:
            for s in sums:  # read only by a sum statistic: compose through it
                if s.name in axes_of:
                    inner = _map_axes(t, looked_through(s.body.body, stats, names), s)
                    if inner is not None:
                        found = {a: axes_of[s.name].get(b, b) for a, b in inner.items()}
                        break
        if found is None:
            raise NotOnline(f"{target.name} does not read {t.name}; the statistics are what its sum depends on")
        found[t.body.axes[0]] = j
        axes_of[t.name] = found

    def rename(e: Expr, t) -> Expr:
        mapping = axes_of[t.name]
        return substitute(e, lambda n: mapping.get(n) if isinstance(n, IterVar) else None)

    def own(load: Load, owner) -> None:
        """A statistic read at its own positions in the target's frame (each index the target's axis that
        its axis follows), or NotOnline: the loop keeps the running value of that tile only."""
        want = [str(axes_of[load.tensor.name][a]) for a in load.tensor.axis]
        got = [str(rename(i, owner)) for i in load.indices]
        if got != want:
            raise NotOnline(f"{owner.name} reads {load.tensor.name} at [{', '.join(map(str, load.indices))}], but the "
                            f"online form has its running value only at its own [{', '.join(want)}] (the "
                            f"target's positions)")

    x_in_target = rename(x, m)
    members[m.name] = Member(m, x_in_target, (), axes_of[m.name])
    for t in (*sums, target):
        body = looked_through(t.body.body, stats, names)
        kept, divisors, exps = _factor(body, t, m, stats, sums if t is target else (), x_in_target, rename, own)
        if exps != 1:
            raise NotOnline(f"{t.name}'s summand {body} has {exps} factors exp(... - {m.name}[...]); the online "
                            f"form rescales a summand with exactly one, exp({x} - {m.name}[...]) times a "
                            f"coefficient that reads no statistic")
        members[t.name] = Member(t, rename(kept, t) if t is not target else kept, tuple(divisors), axes_of[t.name])
    mask = None
    whole = rename(_all_elementwise(m.body.body), m)  # the max's operand, every elementwise stage substituted
    while isinstance(whole, Cast) and whole.dtype == whole.a.dtype:  # a rounding point that rounds nothing
        whole = whole.a
    if isinstance(whole, Where) and isinstance(whole.b, Const) and whole.b.value == float("-inf"):
        mask = whole.cond  # where it is false, every member's term is its identity (exp(-inf) = 0)
    return OnlineForm(target, m, tuple(sums), members, mask)


def _all_elementwise(e: Expr) -> Expr:
    """`e` with every computed elementwise stage it reads substituted (their rounding kept as casts)."""
    def sub(n):
        if isinstance(n, Load) and not n.tensor.is_placeholder and not n.tensor.is_reduction:
            m = dict(zip(n.tensor.axis, n.indices))
            inner = substitute(n.tensor.body, lambda x: m.get(x) if isinstance(x, IterVar) else None)
            return Cast(_all_elementwise(inner), n.tensor.dtype)
        return None
    return substitute(e, sub)


def _depends(t, stats, seen=()) -> bool:
    """Whether computed tensor t reads one of `stats`, directly or through other stages."""
    if t.is_placeholder or t.name in seen:
        return False
    return any(u in stats or _depends(u, stats, seen + (t.name,)) for u in t.inputs)


def _factor(e: Expr, owner, m, stats, divisible, x_target: Expr, rename, own):
    """(e without its divisions by the sum statistics in `divisible`, those statistics, the number of
    exp(X - m) factors) for a member's summand `e` (in `owner`'s axes); NotOnline where a statistic is
    read any other way. `own(load)`: NotOnline unless a statistic is read at its own positions (the target's
    tile of it: the running value the loop has)."""
    if not _reads(e, stats):  # a coefficient: it must not read a statistic through another stage either
        for n in walk(e):
            if isinstance(n, Load) and not n.tensor.is_placeholder and _depends(n.tensor, stats):
                via = next(s for s in stats if s in n.tensor.inputs or _depends(n.tensor, (s,)))
                raise NotOnline(f"{owner.name} reads {n.tensor.name}, which reads {via.name}, a statistic the loop "
                                f"computes as it runs: name {n.tensor.name} among the statistics if it is one "
                                f"(online(..., {n.tensor.name})); the online form cannot run anything else of it "
                                f"in the loop")
        return e, [], 0
    if isinstance(e, Cast):
        from tilec.ir.dtypes import is_float
        if not is_float(e.dtype):
            raise NotOnline(f"{owner.name}'s summand rounds {e.a} to {e.dtype}, not a float rounding point: the "
                            f"online form rounds the unnormalized exp(X - m') there, which keeps the error only of "
                            f"a float rounding point; round to a float dtype, or not at all")
        kept, divs, n = _factor(e.a, owner, m, stats, divisible, x_target, rename, own)
        return Cast(kept, e.dtype), divs, n
    if isinstance(e, Binary) and e.op == "*":
        a, da, na = _factor(e.a, owner, m, stats, divisible, x_target, rename, own)
        b, db, nb = _factor(e.b, owner, m, stats, divisible, x_target, rename, own)
        return Binary("*", a, b), da + db, na + nb
    if isinstance(e, Binary) and e.op == "/":
        a, da, na = _factor(e.a, owner, m, stats, divisible, x_target, rename, own)
        if not _reads(e.b, stats):
            _factor(e.b, owner, m, stats, (), x_target, rename, own)  # a coefficient, checked as one
            return Binary("/", a, e.b), da, na
        d = e.b
        while isinstance(d, Cast) and d.dtype == "float32":
            d = d.a
        if isinstance(d, Load) and d.tensor in divisible and d.tensor not in da:
            own(d, owner)
            return a, da + [d.tensor], na
        raise NotOnline(f"{owner.name} divides by {e.b}; in the online form only the target divides, and "
                        f"only by a sum statistic read as it is, once")
    if isinstance(e, Call) and e.fn == "exp":
        arg = e.args[0]
        if isinstance(arg, Binary) and arg.op == "-" and isinstance(arg.b, Load) and arg.b.tensor is m \
                and not _reads(arg.a, stats):
            own(arg.b, owner)
            if str(rename(arg.a, owner)) != str(x_target):
                raise NotOnline(f"{owner.name}'s exp({arg}) subtracts {m.name} from {arg.a}, not from "
                                f"{m.name}'s own operand: the running max bounds only that (a larger exponent "
                                f"could overflow)")
            return e, [], 1
    raise NotOnline(f"{owner.name} reads a statistic in {e}; the online form allows only a product of one "
                    f"exp(X - {m.name}[...]) and a coefficient, divided (in the target) by sum statistics")


def inequalities(cond: Expr) -> list[dict] | None:
    """`cond` (a conjunction of comparisons of integer expressions of axes, sizes, ints and reads of integer
    tensors, `j < lens[b]`) as linear inequalities, each {term: coefficient} meaning sum(coefficient * term)
    <= 0, the term None standing for 1; None where cond is not of that form. A read is a term of its own
    (a value the lowering knows per program where its indices are: a loop bound from data)."""
    if isinstance(cond, Binary) and cond.op == "&":
        a, b = inequalities(cond.a), inequalities(cond.b)
        return None if a is None or b is None else a + b
    if not (isinstance(cond, Binary) and cond.op in ("<", "<=", ">", ">=")):
        return None
    lhs, rhs = _linear(cond.a), _linear(cond.b)
    if lhs is None or rhs is None:
        return None
    diff = dict(lhs)
    for k, v in rhs.items():
        diff[k] = diff.get(k, 0) - v
    if cond.op in (">", ">="):
        diff = {k: -v for k, v in diff.items()}
    if cond.op in ("<", ">"):  # integers: a < b is a - b + 1 <= 0
        diff[None] = diff.get(None, 0) + 1
    return [{k: v for k, v in diff.items() if v}]


def _linear(e: Expr) -> dict | None:
    from tilec.ir.expr import SizeVar
    if isinstance(e, Const) and type(e.value) is int:
        return {None: e.value}
    if isinstance(e, (IterVar, SizeVar)):
        return {e: 1}
    if isinstance(e, Load) and e.dtype in ("int32", "int64", "int16", "int8", "uint8", "uint16"):
        return {e: 1}  # a per-sequence length, lens[b]
    if isinstance(e, Binary) and e.op in ("+", "-"):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + (v if e.op == "+" else -v)
        return out
    if isinstance(e, Binary) and e.op == "*":
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        if set(a) == {None}:
            a, b = b, a
        if set(b) != {None}:
            return None
        return {k: v * b[None] for k, v in a.items()}
    return None
