"""The tilec side: a `gen.Pipeline` as tilec computes, the abstract schedule applied with tilec's
primitives, and the kernel built and run (Triton's interpreter on a CPU).

The mapping of Halide's steps (docs/primitives.md, "The primitives at a glance"):

| step | Halide | tilec |
|---|---|---|
| split, tile, reorder, fuse, unroll | the same names | the same names (tilec's `reorder` and `tile` list loops outer first) |
| parallel(T, loop) | `T.parallel(loop)` | `s[T].bind(loop, "program_id.N")`, N = 0, 1, 2 in the order of the stage's parallel steps |
| compute_at(P, C, loop) | `P.compute_at(C, loop)` | `s[P].compute_at(s[C], loop)` |
| compute_root(P) | `P.compute_root()` | `s[P].compute_root()` (also the default) |
| compute_inline(P) | `P.compute_inline()` (also Halide's default) | `s[P].compute_inline()` |

A step with no tilec counterpart raises `NoCounterpart` (a fourth parallel loop of one stage: Triton's
grid has three dimensions); the case counts as refused with that reason. A stage read in a narrow type
is widened where it is read (`astype("float32")`), as Halide's `cast<float>` does.
"""

from __future__ import annotations

import numpy as np

from . import gen


class NoCounterpart(Exception):
    """A Halide step that tilec has no primitive for."""


class TilecRun:
    def __init__(self, pipe: gen.Pipeline):
        import tilec as tc

        self.tc = tc
        self.pipe = pipe
        self.log: list[str] = []
        self.tensors: dict = {}
        for t in pipe.tensors:
            if t.kind == "input":
                self.tensors[t.name] = tc.placeholder(t.shape, t.dtype, name=t.name)
            else:
                self.tensors[t.name] = self._define(t)
        self.s = tc.create_schedule(self.tensors[pipe.output.name])
        self.loops: dict[str, dict] = {}
        for t in pipe.stages:
            T = self.tensors[t.name]
            self.loops[t.name] = {a.name: a for a in list(T.axis) + list(T.reduce_axis)}
        self.binds: dict[str, int] = {}

    def read(self, name, idx):
        t = self.pipe[name]
        e = self.tensors[name][tuple(idx)]
        return e.astype("float32") if t.dtype != "float32" else e

    def _define(self, t: gen.Tensor):
        tc = self.tc
        op = t.op
        k = op["kind"]
        if k == "map":
            def body(*ax):
                x = self.read(op["src"], ax)
                if op["op"] == "affine":
                    return x * op["c1"] + op["c2"]
                if op["op"] == "relu":
                    return tc.maximum(x, op["c"])
                if op["op"] == "square":
                    return x * x * 0.5
                if op["op"] == "add2":
                    return x + self.read(op["other"], ax)
                return x * self.read(op["other"], ax)
        elif k == "stencil":
            w = gen.WEIGHTS[op["taps"]]

            def body(*ax):
                e = None
                for a, b in gen.taps(op["axis"], op["taps"]):
                    idx = [ax[0] + a] + ([ax[1] + b] if len(ax) == 2 else [])
                    wt = w[a] * w[b] if op["axis"] == 2 else w[a + b]
                    term = self.read(op["src"], idx) * wt
                    e = term if e is None else e + term
                return e
        elif k == "transpose":
            def body(i, j):
                return self.read(op["src"], [j, i])
        elif k == "round":
            def body(*ax):
                x = self.read(op["src"], ax).astype(op["to"])
                return x if op["store"] else x.astype("float32")
        elif k == "bcast":
            def body(*ax):
                x = self.read(op["src"], ax)
                v = self.read(op["vec"], [ax[op["axis"]]])
                return x + v if op["op"] == "add" else x * v
        elif k == "reduce":
            r = tc.reduce_axis(t.k_extent(self.pipe), name="k")

            def body(i):
                return tc.sum(self.read(op["src"], [i, r] if op["axis"] == 1 else [r, i]), axis=r)
        elif k == "matmul":
            r = tc.reduce_axis(t.k_extent(self.pipe), name="k")

            def body(i, j):
                return tc.sum(self.read(op["src"], [i, r]) * self.read(op["w"], [r, j]), axis=r)
        else:
            raise ValueError(f"unknown stage kind {k}")
        if len(t.shape) == 1 and k not in ("reduce",):
            fn = lambda i: body(i)
        elif len(t.shape) == 2 and k not in ("transpose", "matmul"):
            fn = lambda i, j: body(i, j)
        else:
            fn = body
        return tc.compute(t.shape, fn, name=t.name, dtype=t.dtype)

    def apply(self, steps: list) -> None:
        s = self.s
        for st in steps:
            op, stage = st[0], st[1]
            L = self.loops[stage]
            S = s[self.tensors[stage]]
            if op == "split":
                _, _, a, fac = st
                self.log.append(f"s[{stage}].split({a}, {fac})")
                o, i = S.split(L[a], fac)
                L[a + "o"], L[a + "i"] = o, i
            elif op == "tile":
                _, _, a, b, fa, fb = st
                self.log.append(f"s[{stage}].tile({a}, {b}, {fa}, {fb})")
                ao, bo, ai, bi = S.tile(L[a], L[b], fa, fb)
                L[a + "o"], L[b + "o"], L[a + "i"], L[b + "i"] = ao, bo, ai, bi
            elif op == "reorder":
                self.log.append(f"s[{stage}].reorder({', '.join(st[2])})")
                S.reorder(*[L[n] for n in st[2]])
            elif op == "fuse":
                _, _, a, b = st
                self.log.append(f"s[{stage}].fuse({a}, {b})")
                L[f"{a}_{b}"] = S.fuse(L[a], L[b])
            elif op == "parallel":
                n = self.binds.get(stage, 0)
                if n >= 3:
                    raise NoCounterpart("a fourth parallel loop in one stage: Triton's grid has three dimensions")
                self.binds[stage] = n + 1
                self.log.append(f's[{stage}].bind({st[2]}, "program_id.{n}")')
                S.bind(L[st[2]], f"program_id.{n}")
            elif op == "unroll":
                self.log.append(f"s[{stage}].unroll({st[2]})")
                S.unroll(L[st[2]])
            elif op == "compute_at":
                _, p, c, loop = st
                self.log.append(f"s[{p}].compute_at(s[{c}], {loop})")
                s[self.tensors[p]].compute_at(s[self.tensors[c]], self.loops[c][loop])
            elif op == "store_at":
                _, p, c, loop = st
                self.log.append(f"s[{p}].store_at(s[{c}], {loop})")
                s[self.tensors[p]].store_at(s[self.tensors[c]], self.loops[c][loop])
            elif op == "compute_root":
                self.log.append(f"s[{stage}].compute_root()")
                S.compute_root()
            elif op == "compute_inline":
                self.log.append(f"s[{stage}].compute_inline()")
                S.compute_inline()
            else:
                raise ValueError(f"unknown step {op}")

    def build(self):
        args = [self.tensors[t.name] for t in self.pipe.inputs] + [self.tensors[self.pipe.output.name]]
        return self.tc.build(self.s, args)

    def names(self) -> dict[str, str]:
        """Names a refusal may mention, and the placeholder each is replaced by in its reason key."""
        out = {t.name: "T" for t in self.pipe.tensors}
        for L in self.loops.values():
            for n in L:
                out.setdefault(n, "a")
        for st in list(self.s.stages.values()):
            for a in st.leaves:
                out.setdefault(a.name, "a")
        return out




def run_kernel(kernel, pipe: gen.Pipeline, inputs: dict[str, np.ndarray]) -> np.ndarray:
    import torch

    args = [torch.from_numpy(np.ascontiguousarray(inputs[t.name])) for t in pipe.inputs]
    out = kernel(*args)
    return out.float().numpy()
