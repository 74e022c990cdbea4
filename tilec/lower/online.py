"""The online rewrite of a reduction loop (tilec/ir/online.py decides it; `Plan.online`), a part of
`KernelBuilder` (builder.py): the statistics the loop carries beside its own accumulator (a running max,
sums rescaled by exp(max_old - max_new) as it grows: softmax's and attention's one pass) are initialized
before the loop (`online_init`), updated per tile (`online_update`) and finished after it (`online_finish`:
rounded, stored, the target divided by its sums). Where the max's operand is masked by a condition linear
in the axes, the loop runs only over the tiles the condition admits, unmasked where it holds everywhere
(`_online_bounds`: a causal mask's skipped and full tiles). split_k's merge of the parts' states is in
split_k.py.
"""

from __future__ import annotations

from tilec.ir.expr import IterVar, Load, Reduce, SizeVar, walk
from tilec.ir.knob import factor_value
from tilec.lower import code as c
from tilec.lower.nest import AccInit, Comment, Note, Update
from tilec.lower.reductions import _IDENTITY, compute_text
from tilec.lower.values import Val, _where
from tilec.plan.placement import Placed


def _linear(terms: list) -> c.Ex:
    """The sum of `terms` ((coefficient, expression or None for the number 1) pairs), left to right, the
    first one's sign on it: -2 * x + y - 1."""
    out = None
    for coef, e in terms:
        if e is None:
            term, neg = c.Num(abs(coef)), coef < 0
        else:
            term, neg = (e if abs(coef) == 1 else c.BinOp("*", c.Num(abs(coef)), e)), coef < 0
        if out is not None:
            out = c.BinOp("-" if neg else "+", out, term)
        elif not neg:
            out = term
        elif e is None:
            out = c.Num(coef)
        elif abs(coef) == 1:
            out = c.UnaryOp("-", e)
        else:
            out = c.BinOp("*", c.Num(coef), e)
    return out


class OnlineLoop:
    """The online part of `KernelBuilder` (a mixin: it reads the builder's state and values)."""

    def online_init(self, placed: Placed, out: list, looped: bool) -> dict:
        """The accumulators of the statistics `placed`'s loop carries (online), beside its own: the running
        max at -inf, each sum at 0, laid out over the target's tiles of their axes."""
        x = placed.stage
        form = self.p.plan.online[x.name]
        env = self.env[x.name]
        out.append(Comment(f"{', '.join(t.name for t in form.stats)}: online statistics of {x.name}'s loop "
                           + ("(a running max; the sums rescaled by exp(max_old - max_new) as it grows)"
                              if looped else "(its loop runs once here: one tile, nothing to rescale)")))
        accs = {}
        for st in placed.online:
            t = st.stage.tensor
            axes = form.members[t.name].axes
            self.env[t.name] = {a: env[b] for a, b in axes.items() if b in env}  # spatial: the target's
            self.placed[t.name] = st
            self.stages.append(t.name)
            dims = self._order({d for a in t.axis for d in self.env[t.name][a].dims})
            name = self.fresh(f"acc_{t.name}")
            init = _IDENTITY[t.body.op]
            out.append(Comment(compute_text(t)))
            out.append(AccInit(name, self.shape(dims), init, "float32",
                               Note((init, f"  # float32 running {t.body.op} of {t.name}"), dims)))
            accs[t.name] = (name, dims, "float32")
        if looped and form.mask is not None and factor_value(x.online_skip, self.config) \
                and (self.split is None or self.part is not None):  # (split_k: in its partial kernel)
            saved, self.stmts = self.stmts, out  # the bounds go here, before the loop (fuzz seed 8201491)
            self._online_bounds(placed, form, out)
            self.stmts = saved
        return accs

    def _stored_inside(self, placed: Placed, level: int) -> bool:
        """Whether a stage computed inside `placed`'s loop `level` (or deeper) is stored to memory (an
        output, a buffer): skipping the tiles the mask excludes would leave its elements there unwritten."""
        stored = self.p.plan.stored

        def inside(p: Placed) -> bool:
            groups = list(p.producers.items()) + list(p.consumers.items())
            return any(q.name in stored or inside(q) for lev, qs in groups for q in qs)

        groups = list(placed.producers.items()) + list(placed.consumers.items())
        return any(q.name in stored or inside(q) for lev, qs in groups if lev >= level for q in qs)

    def _online_bounds(self, placed: Placed, form, out: list) -> None:
        """Where the max's operand is where(cond, x, -inf) with cond linear in the axes: the tiles of the
        online loop where cond holds somewhere (the others add each member's identity) and those where it
        holds everywhere (no mask needed), from cond at the tile's corners; the loop then runs as up to
        three loops in order: masked, unmasked, masked. Nothing is done where cond is not of that form.
        In split_k's partial kernel the tiles where cond holds somewhere are cut in the parts' chunks (each
        part's tiles masked): a ragged length bounds the work of every part, as flash-decoding's split."""
        from tilec.ir.online import inequalities
        x, lay = placed.stage, placed.layout
        (j,) = x.tensor.body.axes
        loops = [n for n, leaf in enumerate(lay.loops) if j in lay.origin[leaf]]
        split = lay.index.split_of(j)
        ineqs = inequalities(form.mask)
        if ineqs is None or len(loops) != 1 or split is None or lay.loops[loops[0]] is not split.outer \
                or split.inner not in lay.tiles:
            return
        if self._stored_inside(placed, loops[0]):
            return  # a stage computed in the loop is stored: every tile of it must run (fuzz seed 24807380)
        env = self.env[x.name]
        bn = self.factor(split.factor)

        def corner(a, high: bool) -> c.Ex | None:
            """The least (or greatest) value of axis a over the tile, or None if it is not a block."""
            if isinstance(a, SizeVar):
                return self.scalar(a)
            if isinstance(a, Load):  # a read (lens[b]): a bound where it is one value in this program, its
                axes = {n for i in a.indices for n in walk(i) if isinstance(n, IterVar)}  # indices known before
                if j in axes or not axes <= set(env):  # the loop (not the loop's own axis)
                    return None
                r = self.emit(a, x, {})
                return r.code if not r.dims else None
            v = env.get(a)
            if v is None:
                return None
            if not v.dims:
                return v.code
            if v.block is None or len(v.dims) != 1:
                return None
            return c.BinOp("-", c.BinOp("+", v.block, self.dim_extent[v.dims[0]]), c.Num(1)) if high else v.block

        def total(rest: dict, high: bool, sign: int, plus: list) -> c.Ex | None:
            """sign * (the linear `rest`'s least (high=False) or greatest value over the tile), then the terms
            `plus` ((coefficient, expression) pairs), added left to right."""
            const = sign * rest.get(None, 0)
            terms = []
            for k, coef in rest.items():
                if k is None:
                    continue
                v = corner(k, high == (coef > 0))
                if v is None:
                    return None
                terms.append((coef * sign, v))
            if const:
                terms.append((const, None))
            return _linear(terms + plus)

        uppers, lowers, full_hi, full_lo, whole = [], [], [], [], True
        for q in ineqs:
            cj = q.get(j, 0)
            if cj not in (-1, 0, 1):
                return
            rest = {k: v for k, v in q.items() if k is not j}

            if cj == 1:    # j <= -rest: tiles from the first, up to the last whose first (every) j is <= -rest
                hi_t, full_t = total(rest, False, -1, [(1, bn)]), total(rest, True, -1, [(1, None)])
                if hi_t is None or full_t is None:
                    return
                uppers.append(c.BinOp("//", c.call("maximum", hi_t, 0), bn))
                full_hi.append(c.BinOp("//", c.call("maximum", full_t, 0), bn))
            elif cj == -1:  # j >= rest
                lo_t, full_t = total(rest, False, 1, [(0, None)]), total(rest, True, 1, [(1, bn), (-1, None)])
                if lo_t is None or full_t is None:
                    return
                lowers.append(c.BinOp("//", c.call("maximum", lo_t, 0), bn))
                full_lo.append(c.BinOp("//", c.call("maximum", full_t, 0), bn))
            elif total(rest, False, 1, []) is None:
                return
            else:
                whole = False  # holds or not for the whole tile alike: no tile known unmasked
        if not uppers and not lowers:
            return
        n = self.scalar(lay.loops[loops[0]].extent)

        def fold(op, items):
            out_ = items[0]
            for it in items[1:]:
                out_ = c.call(op, out_, it)
            return out_
        name = lay.loops[loops[0]].name
        cond = repr(form.mask)
        split = self.part is not None and x is self.root and lay.loops[loops[0]] is self.split.axis
        if self.part is not None and not split:
            return  # split_k of another loop: its chunks are the loop's own (every tile of the chunk, masked)
        out.append(Comment(f"{x.name}.{name}: only the tiles where {cond} holds somewhere" + (
            ", cut in the parts' chunks" if split else "; unmasked where it holds everywhere")
            + " (the other tiles add nothing: exp(-inf) = 0)"))
        lo = self.emit_stmt(f"{name}_lo", fold("maximum", lowers)) if lowers else c.Num(0)
        hi = self.emit_stmt(f"{name}_hi", fold("minimum", uppers + [n])) if uppers else n
        pieces = []
        if split:
            zero = lo == c.Num(0)
            span = c.call("maximum", hi if zero else c.BinOp("-", hi, lo), 0)
            chunk = self.emit_stmt(f"chunk_{name}", c.call("cdiv", span, self._parts()))
            first = c.BinOp("*", c.Name(self.part), chunk)
            p_lo = self.emit_stmt(f"{name}_part_lo", first if zero else c.BinOp("+", lo, first))
            p_hi = self.emit_stmt(f"{name}_part_hi", c.call("minimum", c.BinOp("+", p_lo, chunk), hi))
            pieces.append((p_lo, p_hi, set(), f"this part's chunk of the tiles where {cond} holds somewhere (masked)"))
        elif whole:
            f_lo = self.emit_stmt(f"{name}_full_lo", fold("minimum", [fold("maximum", full_lo + [lo]), hi])
                                  if full_lo else lo)
            f_hi = self.emit_stmt(f"{name}_full_hi", fold("maximum", [fold("minimum", full_hi + [hi]), f_lo])
                                  if full_hi else hi)
            if full_lo:
                pieces.append((lo, f_lo, set(), f"tiles where {cond} holds in part (masked)"))
            pieces.append((f_lo, f_hi, {cond}, f"tiles where {cond} holds everywhere (unmasked)"))
            if full_hi:
                pieces.append((f_hi, hi, set(), f"tiles where {cond} holds in part (masked)"))
        else:
            pieces.append((lo, hi, set(), f"tiles where {cond} holds somewhere (masked)"))
        self.online_pieces[x.name] = (loops[0], pieces)

    def online_update(self, placed: Placed, acc, accs: dict, out: list) -> None:
        """One tile of the online loop: the tile's max and the new running max; each sum (and the target)
        rescaled by exp(max_old - max_new) and given the tile's terms exp(X - max_new) * ...; the max
        taken last. Where the max is still -inf (all of it masked so far) the exponents use 0: the terms
        are 0 and nothing is rescaled into NaN."""
        x = placed.stage
        form = self.p.plan.online[x.name]
        env = self.env[x.name]
        red: Reduce = x.tensor.body
        looped = placed.layout.first_reduce < len(placed.layout.loops)  # reduction loops, not just any loop
        rdims = self._order({d for a in red.axes for d in env[a].dims})
        m = form.max
        m_acc, m_dims, _ = accs[m.name]
        saved, self.stmts = self.stmts, out
        self.fold = self.piece_fold  # the mask, in the target's axes, where it holds on the whole tile
        tile = self.tile_part(x, Reduce("max", form.members[m.name].body, red.axes, "float32"), m_dims, rdims,
                              "float32", name=m.name)
        tile = self.emit_stmt(f"tile_{m.name}", tile) if not isinstance(tile, c.Name) else tile
        new = self.emit_stmt(f"{m.name}_new", c.call("maximum", c.Name(m_acc), tile, nan=True),
                             Note(("max(", c.Name(m_acc), f", max over tile [{', '.join(rdims)}] of "
                                   f"{form.members[m.name].body!r})"), m_dims))
        safe, alpha = new, None  # one tile: a max of -inf makes the row NaN, as the naive compute does
        if looped:
            out.append(Comment("a max still -inf subtracts 0 instead: exp(-inf - -inf) would be NaN"))
            safe = self.emit_stmt(f"{m.name}_safe", _where(c.BinOp("==", new, c.Num(float("-inf"))), c.Num(0.0), new))
            alpha = Val(self.emit_stmt(f"alpha_{m.name}", c.call("exp", c.BinOp("-", c.Name(m_acc), safe)),
                                       Note(("exp(", c.Name(m_acc), " - ", new, ")"))), m_dims, "float32")
        # the members read the max as its running value
        axes = form.members[m.name].axes
        self.scopes[-1][m.name] = (Val(safe, m_dims, "float32"), [env[axes[a]].code for a in m.axis],
                                   [(env[axes[a]].canon, env[axes[a]].dims) for a in m.axis])
        for t in form.sums:
            self.update(x, accs[t.name], out, Reduce("sum", form.members[t.name].body, red.axes, "float32"), alpha)
        body = form.members[x.name].body
        self.update(x, acc, out, Reduce("sum", body, red.axes, red.dtype), alpha)
        out.append(Update(m_acc, new, Note((new,), m_dims)))
        self.fold = set()
        self.stmts = saved

    def online_finish(self, placed: Placed, accs: dict, result: Val, out: list, looped: bool,
                      guarded: bool | None = None) -> Val:
        """After the online loop: each statistic's final value (rounded, stored, kept for its readers), and
        the target's sum divided by the sum statistics it divides by. `guarded` (default: `looped`): the
        sums were computed with the -inf guard (a loop, or split_k's merge), so where the final max is
        -inf (every term exp(-inf - -inf), NaN as written) they are made NaN, as the naive compute has them."""
        x = placed.stage
        form = self.p.plan.online[x.name]
        guarded = looped if guarded is None else guarded
        m_acc, m_dims, _ = accs[form.max.name]
        nan_where = None
        if guarded:
            out.append(Comment("a row whose max is -inf: every term is exp(-inf - -inf), NaN as written"))
            saved, self.stmts = self.stmts, out
            nan_where = Val(self.emit_stmt(f"{form.max.name}_none", c.BinOp("==", c.Name(m_acc), c.Num(float("-inf")))),
                            m_dims, "bool")
            self.stmts = saved
        for st in placed.online:
            t = st.stage.tensor
            name, dims, dtype = accs[t.name]
            value = c.BinOp("+", c.Name(name), c.Num(0.0)) if looped else c.Name(name)  # one use of a loop's result
            if nan_where is not None and t is not form.max:
                value = _where(self.expand(nan_where, dims), c.Num(float("nan")), value)
            out.append(Comment(f"{t.name} computed in {x.name}'s loop (online)"))
            self.finish(st.stage, Val(value, dims, dtype), out)
        if nan_where is not None:
            result = Val(_where(self.expand(nan_where, result.dims), c.Num(float("nan")), result.code),
                         result.dims, result.dtype)
        for t in form.members[x.name].divisors:
            val = self.in_scope(t.name)[0]
            result = Val(c.BinOp("/", result.code, self.expand(val, result.dims)), result.dims, result.dtype)
        return result
