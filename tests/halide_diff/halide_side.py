"""The Halide side: a `gen.Pipeline` as Halide Funcs, an abstract schedule applied with Halide's own
primitives, and the output realized on the CPU (JIT for the host).

Axis `i` (tilec's first, outer) is the last argument of a Func and `j` the first (`f(j, i)`: Halide's first
dimension is the innermost loop and the contiguous one of a numpy array read as a `hl.Buffer`), so the
initial loop nests agree. A reduction is a pure definition `f(..) = 0` and one update `f(..) += ..` over an
`RDom` named `k`; loop steps on it go to the update, where its work is, and `compute_at` into it is at the
update's loop (the LoopLevel's default, the last stage). Splits use `TailStrategy.GuardWithIf`, so that no size has to be a multiple
of a factor and no producer is computed past the region its consumers read (which would read inputs out of
bounds). Every stage that is neither inlined nor placed is `compute_root()` (tilec's default).
"""

from __future__ import annotations

import halide as hl
import numpy as np

from . import gen

NARROW = {"float16": lambda: hl.Float(16), "bfloat16": lambda: hl.BFloat(16)}


class HalideRun:
    def __init__(self, pipe: gen.Pipeline, inputs: dict[str, np.ndarray]):
        self.pipe = pipe
        self.log: list[str] = []
        self.bufs = {t.name: hl.Buffer(np.ascontiguousarray(inputs[t.name])) for t in pipe.inputs}
        self.funcs: dict[str, hl.Func] = {}
        self.loops: dict[str, dict] = {}
        for t in pipe.stages:
            self._define(t)

    # -- the algorithm
    def read(self, name: str, idx: list):
        t = self.pipe[name]
        src = self.bufs[name] if t.kind == "input" else self.funcs[name]
        e = src[tuple(reversed(idx))]
        if t.dtype != "float32":
            e = hl.cast(hl.Float(32), e)
        return e

    def _define(self, t: gen.Tensor):
        i, j = hl.Var("i"), hl.Var("j")
        ax = [i, j][: len(t.shape)]
        f = hl.Func(t.name)
        self.funcs[t.name] = f
        self.loops[t.name] = {"i": i, "j": j}
        op = t.op
        args = tuple(reversed(ax))
        k = op["kind"]
        if k == "map":
            x = self.read(op["src"], ax)
            if op["op"] == "affine":
                e = x * op["c1"] + op["c2"]
            elif op["op"] == "relu":
                e = hl.max(x, hl.f32(op["c"]))
            elif op["op"] == "square":
                e = x * x * 0.5
            elif op["op"] == "add2":
                e = x + self.read(op["other"], ax)
            else:
                e = x * self.read(op["other"], ax)
            f[args] = e
        elif k == "stencil":
            w = gen.WEIGHTS[op["taps"]]
            e = None
            for a, b in gen.taps(op["axis"], op["taps"]):
                idx = [ax[0] + a] + ([ax[1] + b] if len(ax) == 2 else [])
                wt = w[a] * w[b] if op["axis"] == 2 else w[a + b]
                term = self.read(op["src"], idx) * wt
                e = term if e is None else e + term
            f[args] = e
        elif k == "transpose":
            f[args] = self.read(op["src"], [j, i])
        elif k == "round":
            x = hl.cast(NARROW[op["to"]](), self.read(op["src"], ax))
            f[args] = x if op["store"] else hl.cast(hl.Float(32), x)
        elif k == "bcast":
            x = self.read(op["src"], ax)
            v = self.read(op["vec"], [ax[op["axis"]]])
            f[args] = x + v if op["op"] == "add" else x * v
        elif k in ("reduce", "matmul"):
            r = hl.RDom([(0, t.k_extent(self.pipe))], "k")
            self.loops[t.name]["k"] = r.x
            f[args] = hl.f32(0.0)
            if k == "reduce":
                e = self.read(op["src"], [i, r.x] if op["axis"] == 1 else [r.x, i])
            else:
                e = self.read(op["src"], [i, r.x]) * self.read(op["w"], [r.x, j])
            f[args] = f[args] + e
        else:
            raise ValueError(f"unknown stage kind {k}")

    # -- the schedule
    def target(self, stage: str):
        f = self.funcs[stage]
        return f.update(0) if self.pipe[stage].reduction else f

    def _tname(self, stage: str) -> str:
        return f"{stage}.update(0)" if self.pipe[stage].reduction else stage

    def _new(self, stage: str, name: str, like):
        v = hl.RVar(name) if isinstance(like, hl.RVar) else hl.Var(name)
        self.loops[stage][name] = v
        return v

    def apply(self, steps: list) -> None:
        G = hl.TailStrategy.GuardWithIf
        placed = set()
        for st in steps:
            op, stage = st[0], st[1]
            L = self.loops[stage]
            T = self.target(stage)
            tn = self._tname(stage)
            if op == "split":
                _, _, a, fac = st
                o, i = self._new(stage, a + "o", L[a]), self._new(stage, a + "i", L[a])
                self.log.append(f"{tn}.split({a}, {a}o, {a}i, {fac}, GuardWithIf)")
                T.split(L[a], o, i, fac, G)
            elif op == "tile":
                _, _, a, b, fa, fb = st
                ao, ai = self._new(stage, a + "o", L[a]), self._new(stage, a + "i", L[a])
                bo, bi = self._new(stage, b + "o", L[b]), self._new(stage, b + "i", L[b])
                # Halide's tile(x, y, ...) puts x inside y: x is tilec's inner axis b
                self.log.append(f"{tn}.tile({b}, {a}, {b}o, {a}o, {b}i, {a}i, {fb}, {fa}, GuardWithIf)")
                T.tile(L[b], L[a], bo, ao, bi, ai, fb, fa, G)
            elif op == "reorder":
                names = list(reversed(st[2]))  # Halide lists loops innermost first
                self.log.append(f"{tn}.reorder({', '.join(names)})")
                T.reorder(*[L[n] for n in names])
            elif op == "fuse":
                _, _, a, b = st
                both_r = isinstance(L[a], hl.RVar) and isinstance(L[b], hl.RVar)
                fused = hl.RVar(f"{a}_{b}") if both_r else hl.Var(f"{a}_{b}")
                L[f"{a}_{b}"] = fused
                self.log.append(f"{tn}.fuse({b}, {a}, {a}_{b})")
                T.fuse(L[b], L[a], fused)
            elif op == "parallel":
                self.log.append(f"{tn}.parallel({st[2]})")
                T.parallel(L[st[2]])
            elif op == "unroll":
                self.log.append(f"{tn}.unroll({st[2]})")
                T.unroll(L[st[2]])
            elif op == "compute_at":
                _, p, c, loop = st
                # the LoopLevel's default stage is the last: the update of a reduction, where its producers are read
                self.log.append(f"{p}.compute_at({c}, {loop})")
                self.funcs[p].compute_at(hl.LoopLevel(self.funcs[c], self.loops[c][loop]))
                placed.add(p)
            elif op == "store_at":
                _, p, c, loop = st
                self.log.append(f"{p}.store_at({c}, {loop})")
                self.funcs[p].store_at(hl.LoopLevel(self.funcs[c], self.loops[c][loop]))
            elif op == "compute_root":
                self.log.append(f"{stage}.compute_root()")
                self.funcs[stage].compute_root()
                placed.add(stage)
            elif op == "compute_inline":
                self.log.append(f"{stage}.compute_inline()")
                self.funcs[stage].compute_inline()
                placed.add(stage)
            else:
                raise ValueError(f"unknown step {op}")
        for t in self.pipe.stages[:-1]:
            if t.name not in placed:
                self.log.append(f"{t.name}.compute_root()  # tilec's default")
                self.funcs[t.name].compute_root()

    def realize(self) -> np.ndarray:
        out = self.pipe.output
        buf = self.funcs[out.name].realize(list(reversed(out.shape)))
        return np.array(buf, dtype=np.float32)




def run(pipe: gen.Pipeline, steps: list, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    h = HalideRun(pipe, inputs)
    h.apply(steps)
    return h.realize(), h.log
