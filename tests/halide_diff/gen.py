"""Random pipelines and abstract schedules for the Halide differential test, and the canonical list.

A `Pipeline` is a list of input `Tensor`s and stage `Tensor`s. Every tensor has concrete sizes; shapes are
derived forward from the inputs, so every read is inside its tensor (a stencil's producer is made larger
by the halo: `out[i, j] = w0 * p[i, j] + w1 * p[i, j + 1] + w2 * p[i, j + 2]` with p two columns wider),
and tilec's "a read outside a tensor gives 0" never comes into play. Stage kinds:

| kind | value | loops |
|---|---|---|
| `map` | `p * c1 + c2`, `max(p, c)`, `p * p * 0.5`, `p + q`, `p * q` | i, j |
| `stencil` | taps 3 or 5 along axis 0, 1, or 3 x 3 along both | i, j |
| `transpose` | `p[j, i]` | i, j |
| `reduce` | `sum_k p[i, k]` or `sum_k p[k, i]` (1-D) | i, k |
| `bcast` | `p[i, j] + v[i]` (or `* v[j]`, ...), v 1-D | i, j |
| `matmul` | `sum_k p[i, k] * w[k, j]` | i, j, k |
| `round` | `p` rounded to float16/bfloat16: stored narrow, or `astype` there and back | i, j |

Loops are named by tilec's convention: axis 0 is `i` (the outer loop), axis 1 `j`, the reduction `k`;
in Halide the Func's arguments are the same Vars in reverse order (`f(j, i)`: j innermost), so both
start with the same loop nest.

A schedule is a list of steps, tuples applied by `halide_side.apply` and `tilec_side.apply`:
`("split", T, axis, factor)` makes `axis + "o"`, `axis + "i"`; `("tile", T, a, b, fa, fb)` makes
`ao, bo, ai, bi` in that order; `("reorder", T, [outer .. inner])`; `("fuse", T, outer, inner)` makes
`outer + "_" + inner`; `("parallel", T, loop)`; `("unroll", T, loop)`; `("compute_at", P, C, loop)`;
`("store_at", P, C, loop)` (after P's compute_at in C, at that loop or one outside it);
`("compute_root", P)`; `("compute_inline", P)`. A stage that is not the output and has no placement step
is computed at root in both (tilec's default; Halide's default, inlining, is written as a step).

Modes: `random` (any factors 2-12, any loop for every step) and `friendly` (power-of-two factors,
tiles innermost, reductions' spatial loops outside their reduction loops, `parallel` only on a root
stage's outer loops, producers placed at a non-tile loop of a stage that reads them). `canonical()` is a
fixed list of schedules well known from Halide (blur at tile / strip / row / inline / root, ...).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

NARROW_ULP = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


@dataclass
class Tensor:
    name: str
    shape: tuple
    dtype: str = "float32"
    kind: str = "stage"  # or "input"
    op: dict = field(default_factory=dict)

    @property
    def axes(self) -> list[str]:
        return ["i", "j"][: len(self.shape)]

    @property
    def reduction(self) -> bool:
        return self.op.get("kind") in ("reduce", "matmul")

    def k_extent(self, pipe: Pipeline) -> int:
        src = pipe[self.op["src"]]
        if self.op["kind"] == "matmul":
            return src.shape[1]
        return src.shape[self.op["axis"]]


@dataclass
class Pipeline:
    tensors: list[Tensor]

    def __getitem__(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    @property
    def inputs(self) -> list[Tensor]:
        return [t for t in self.tensors if t.kind == "input"]

    @property
    def stages(self) -> list[Tensor]:
        return [t for t in self.tensors if t.kind == "stage"]

    @property
    def output(self) -> Tensor:
        return self.stages[-1]

    def reads(self, t: Tensor) -> list[str]:
        op = t.op
        return [op[k] for k in ("src", "other", "vec", "w") if k in op]

    def consumers(self, name: str) -> list[str]:
        return [t.name for t in self.stages if name in self.reads(t)]

    def readers_closure(self, name: str) -> list[str]:
        """Stages that read `name` directly or through other stages."""
        out, todo = [], [name]
        while todo:
            n = todo.pop()
            for c in self.consumers(n):
                if c not in out:
                    out.append(c)
                    todo.append(c)
        return out

    def loops(self, t: Tensor) -> list[tuple[str, str]]:
        """(name, 'S' or 'R') of a stage's initial loops, outer to inner."""
        return [(a, "S") for a in t.axes] + ([("k", "R")] if t.reduction else [])

    def extent(self, t: Tensor, axis: str) -> int:
        if axis == "k":
            return t.k_extent(self)
        return t.shape["ij".index(axis)]

    def describe(self) -> str:
        lines = []
        for t in self.tensors:
            if t.kind == "input":
                lines.append(f"{t.name}: input {t.dtype}{list(t.shape)}")
            else:
                lines.append(f"{t.name}: {t.dtype}{list(t.shape)} = {t.op}")
        return "\n".join(lines)


@dataclass
class Case:
    mode: str
    seed: int
    pipe: Pipeline
    steps: list
    name: str = ""

    def describe(self) -> str:
        head = f"case {self.mode} {self.seed}" + (f" ({self.name})" if self.name else "")
        return head + "\npipeline:\n  " + self.pipe.describe().replace("\n", "\n  ") + "\nschedule:\n" + "".join(
            f"  {s}\n" for s in self.steps)


# ---------------------------------------------------------------------------------------------------------
# pipelines

MAPS = ["affine", "relu", "square", "add2", "mul2"]


def _map(rng, src: Tensor, pool: list[Tensor], name: str) -> Tensor:
    others = [t for t in pool if t.shape == src.shape and t.name != src.name]
    ops = MAPS if others else MAPS[:3]
    op = rng.choice(ops)
    d = {"kind": "map", "op": op, "src": src.name}
    if op == "affine":
        d.update(c1=rng.choice([0.5, 1.5, -0.75]), c2=rng.choice([0.25, -1.0, 0.0]))
    elif op == "relu":
        d.update(c=rng.choice([0.0, 0.25, -0.5]))
    elif op in ("add2", "mul2"):
        d.update(other=rng.choice(others).name)
    return Tensor(name, src.shape, op=d)


WEIGHTS = {3: [0.25, 0.5, 0.25], 5: [0.0625, 0.25, 0.375, 0.25, 0.0625]}


def stencil(name, src: Tensor, axis: int, taps: int) -> Tensor:
    shape = list(src.shape)
    for a in ([0, 1] if axis == 2 else [axis]):
        shape[a] -= taps - 1
    return Tensor(name, tuple(shape), op={"kind": "stencil", "src": src.name, "axis": axis, "taps": taps})


def taps(axis: int, count: int) -> list[tuple[int, int]]:
    """A stencil's read offsets (rows, cols): `count` taps along axis 0 or 1, or count x count for axis 2."""
    if axis == 2:
        return [(a, b) for a in range(count) for b in range(count)]
    if axis == 0:
        return [(a, 0) for a in range(count)]
    return [(0, b) for b in range(count)]


def generate_pipeline(rng: random.Random, size_lo=5, size_hi=24) -> Pipeline:
    def size():
        return 1 if rng.random() < 0.06 else rng.randint(size_lo, size_hi)

    inputs = [Tensor("A", (size(), size()), kind="input")]
    tensors: list[Tensor] = list(inputs)
    n = rng.randint(2, 4)
    prev = inputs[0]
    nin = 1
    for s in range(n):
        name = f"s{s}"
        kinds = ["map", "transpose", "round"]
        if len(prev.shape) == 2:
            kinds += ["reduce", "matmul", "matmul", "bcast", "stencil", "stencil", "stencil"]
        elif prev.shape[0] >= 3:
            kinds += ["stencil", "bcast2"]
        else:
            kinds += ["bcast2"]
        if len(prev.shape) == 1:
            kinds.remove("transpose")
        kind = rng.choice(kinds)
        if kind == "map":
            t = _map(rng, prev, tensors, name)
        elif kind == "transpose":
            t = Tensor(name, prev.shape[::-1], op={"kind": "transpose", "src": prev.name})
        elif kind == "round":
            to = rng.choice(["float16", "bfloat16"])
            store = rng.random() < 0.5
            t = Tensor(name, prev.shape, dtype=to if store else "float32",
                       op={"kind": "round", "src": prev.name, "to": to, "store": store})
        elif kind == "reduce":
            axis = rng.choice([0, 1])
            t = Tensor(name, (prev.shape[1 - axis],), op={"kind": "reduce", "src": prev.name, "axis": axis})
        elif kind == "matmul":
            K = prev.shape[1]
            cands = [x for x in tensors if len(x.shape) == 2 and x.shape[0] == K and x.name != prev.name]
            if cands and rng.random() < 0.3:
                w = rng.choice(cands)
            else:
                w = Tensor(f"W{nin}", (K, size()), kind="input")
                nin += 1
                tensors.insert(nin - 1, w)
            t = Tensor(name, (prev.shape[0], w.shape[1]), op={"kind": "matmul", "src": prev.name, "w": w.name})
        elif kind == "bcast":
            axis = rng.choice([0, 1])
            L = prev.shape[axis]
            cands = [x for x in tensors if len(x.shape) == 1 and x.shape[0] == L]
            if cands and rng.random() < 0.7:
                v = rng.choice(cands)
            else:
                v = Tensor(f"V{nin}", (L,), kind="input")
                nin += 1
                tensors.insert(nin - 1, v)
            t = Tensor(name, prev.shape, op={"kind": "bcast", "src": prev.name, "vec": v.name, "axis": axis,
                                             "op": rng.choice(["add", "mul"])})
        elif kind == "bcast2":  # a 1-D tensor broadcast against a 2-D one it indexes by rows or columns
            axis = rng.choice([0, 1])
            other = Tensor(f"B{nin}", (prev.shape[0], size()) if axis == 0 else (size(), prev.shape[0]),
                           kind="input")
            nin += 1
            tensors.insert(nin - 1, other)
            t = Tensor(name, other.shape, op={"kind": "bcast", "src": other.name, "vec": prev.name, "axis": axis,
                                              "op": rng.choice(["add", "mul"])})
        else:  # stencil
            choices = []
            for axis in ([0, 1, 2] if len(prev.shape) == 2 else [0]):
                for taps in (3, 5):
                    if taps == 5 and axis == 2:
                        continue
                    dims = [0, 1] if axis == 2 else [axis]
                    if all(prev.shape[a] >= taps for a in dims):
                        choices.append((axis, taps))
            if not choices:
                # make the input larger instead: a stencil straight on a fresh, wider input
                axis, taps = rng.choice([(a, 3) for a in range(len(prev.shape))])
                grown = list(prev.shape)
                grown[axis] += 2
                src = Tensor(f"H{nin}", tuple(grown), kind="input")
                nin += 1
                tensors.insert(nin - 1, src)
                t = stencil(name, src, axis, taps)
                # keep the chain: the stencil's output is combined with prev
                tensors.append(t)
                t = Tensor(f"{name}b", prev.shape, op={"kind": "map", "op": "add2", "src": prev.name, "other": name})
                tensors.append(t)
                prev = t
                continue
            axis, taps = rng.choice(choices)
            t = stencil(name, prev, axis, taps)
        tensors.append(t)
        prev = t
    last = tensors[-1]
    if last.op["kind"] == "round" and last.op["store"]:  # outputs stay float32: both sides return them as such
        last.op["store"], last.dtype = False, "float32"
    return Pipeline(tensors)


# ---------------------------------------------------------------------------------------------------------
# schedules


@dataclass
class Leaf:
    name: str
    kind: str  # "S" or "R"
    extent: int
    tile: bool = False  # the inner axis of a split (a vector dimension in tilec)
    fused: bool = False


def _leaves(pipe: Pipeline) -> dict[str, list[Leaf]]:
    return {t.name: [Leaf(a, k, pipe.extent(t, a)) for a, k in pipe.loops(t)] for t in pipe.stages}


POW2 = [2, 4, 8, 16]


def _factor(rng, mode, extent):
    if mode == "friendly":
        return rng.choice(POW2)
    cands = [f for f in range(2, 13) if extent % f] or [rng.randint(2, 12)]
    return rng.choice(cands)


def generate_schedule(rng: random.Random, pipe: Pipeline, mode: str) -> list:
    steps: list = []
    leaves = _leaves(pipe)
    out = pipe.output.name
    placement: dict[str, tuple] = {}
    # placements first decided (from the output back, so that a producer is never placed in a stage that is
    # itself inlined: Halide has no loops there), so that friendly schedules touch loops only where they matter
    for t in reversed(pipe.stages[:-1]):
        readers = [c for c in pipe.consumers(t.name) if placement.get(c, ("",))[0] != "inline"]
        allr = [c for c in pipe.readers_closure(t.name) if placement.get(c, ("",))[0] != "inline"]
        r = rng.random()
        if r < 0.3 or not allr:
            placement[t.name] = ("root",)
        elif r < 0.45 and not t.reduction and readers:
            placement[t.name] = ("inline",)
        else:
            direct = mode == "friendly" or rng.random() < 0.85
            placement[t.name] = ("at", rng.choice(readers if direct and readers else allr))
    # loop steps per stage
    for t in pipe.stages:
        L = leaves[t.name]
        nsteps = rng.choice([0, 1, 2, 2, 3]) if mode == "random" else rng.choice([0, 1, 2])
        if placement.get(t.name, ("",))[0] == "inline":
            nsteps = 0
        if mode == "friendly":
            _friendly_loops(rng, t, L, steps, nsteps)
        else:
            for _ in range(nsteps):
                _random_loop_step(rng, t, L, steps)
    # parallel loops
    for t in pipe.stages:
        L = leaves[t.name]
        root = t.name == out or placement[t.name][0] == "root"
        if mode == "friendly":
            if root and rng.random() < 0.5:
                outer = [x for x in L if x.kind == "S" and not x.tile]
                if outer:
                    steps.append(("parallel", t.name, outer[0].name))
        else:  # what Halide refuses (a parallel reduction loop, an unroll of a loop of unknown extent) is rare
            if rng.random() < 0.3 and placement.get(t.name, ("",))[0] != "inline":
                cands = [x for x in L if x.kind == "S"] if rng.random() < 0.95 else L
                if cands:
                    steps.append(("parallel", t.name, rng.choice(cands).name))
            if rng.random() < 0.1 and placement.get(t.name, ("",))[0] != "inline":
                small = [x for x in L if x.tile and x.extent <= 8]
                if small:
                    steps.append(("unroll", t.name, rng.choice(small).name))
    # placements
    for name, p in placement.items():
        if p[0] == "root":
            if rng.random() < 0.5:
                steps.append(("compute_root", name))
        elif p[0] == "inline":
            steps.append(("compute_inline", name))
        else:
            cons = p[1]
            L = leaves[cons]
            if mode == "friendly":
                cands = [x for x in L if not x.tile]
                sp = [x for x in cands if x.kind == "S"]
                cands = sp or cands
            else:
                cands = L
            if not cands:
                steps.append(("compute_root", name))
                continue
            at = rng.choice(cands)
            steps.append(("compute_at", name, cons, at.name))
            # store_at a loop outside (a quarter of the placements): decided by its own generator, seeded by the
            # steps so far, so that the schedules drawn before it existed stay as they were
            side = random.Random(repr(steps))
            outer = [x for x in L[:L.index(at)] if x.kind == "S"]
            if outer and side.random() < 0.25:
                steps.append(("store_at", name, cons, side.choice(outer).name))
    return steps


def _split(L, idx, f, name_o=None, name_i=None):
    x = L[idx]
    o = Leaf(name_o or x.name + "o", x.kind, -(-x.extent // f))
    i = Leaf(name_i or x.name + "i", x.kind, f, tile=True)
    L[idx: idx + 1] = [o, i]
    return o, i


def _random_loop_step(rng, t, L, steps):
    op = rng.choice(["split", "split", "tile", "reorder", "fuse"])
    names = [x.name for x in L]
    if op == "split":
        x = rng.choice(L)
        f = _factor(rng, "random", x.extent)
        if x.name + "o" in names or x.name + "i" in names:
            return
        steps.append(("split", t.name, x.name, f))
        _split(L, names.index(x.name), f)
    elif op == "tile":
        if len(L) < 2:
            return
        a, b = rng.sample(range(len(L)), 2)
        a, b = min(a, b), max(a, b)
        xa, xb = L[a], L[b]
        fa, fb = _factor(rng, "random", xa.extent), _factor(rng, "random", xb.extent)
        if any(n in names for n in (xa.name + "o", xa.name + "i", xb.name + "o", xb.name + "i")):
            return
        steps.append(("tile", t.name, xa.name, xb.name, fa, fb))
        ao, ai = _split(L, a, fa)
        b = [x.name for x in L].index(xb.name)
        bo, bi = _split(L, b, fb)
        pos = sorted(L.index(x) for x in (ao, bo, ai, bi))
        for p, x in zip(pos, (ao, bo, ai, bi)):
            L[p] = x
    elif op == "reorder":
        if len(L) < 2:
            return
        k = rng.randint(2, min(3, len(L)))
        idx = sorted(rng.sample(range(len(L)), k))
        chosen = [L[i] for i in idx]
        rng.shuffle(chosen)
        steps.append(("reorder", t.name, [x.name for x in chosen]))
        for p, x in zip(idx, chosen):
            L[p] = x
    else:
        if len(L) < 2:
            return
        p = rng.randrange(len(L) - 1)
        a, b = L[p], L[p + 1]
        if a.kind != b.kind and rng.random() < 0.95:  # Halide refuses to fuse a Var with an RVar
            return
        name = f"{a.name}_{b.name}"
        steps.append(("fuse", t.name, a.name, b.name))
        L[p: p + 2] = [Leaf(name, a.kind, a.extent * b.extent, fused=True)]


def _friendly_loops(rng, t, L, steps, nsteps):
    """Power-of-two splits of spatial loops, tiles innermost, reduction loops after the spatial outers."""
    if nsteps == 0:
        return
    sp = [x for x in L if x.kind == "S"]
    if len(sp) == 2 and rng.random() < 0.5:
        fa, fb = rng.choice(POW2), rng.choice(POW2)
        steps.append(("tile", t.name, sp[0].name, sp[1].name, fa, fb))
        names = [x.name for x in L]
        ao, ai = _split(L, names.index(sp[0].name), fa)
        names = [x.name for x in L]
        bo, bi = _split(L, names.index(sp[1].name), fb)
    else:
        for x in sp:
            if rng.random() < 0.7:
                f = rng.choice(POW2)
                steps.append(("split", t.name, x.name, f))
                _split(L, [y.name for y in L].index(x.name), f)
    red = [x for x in L if x.kind == "R"]
    if red and rng.random() < 0.6:
        f = rng.choice(POW2)
        steps.append(("split", t.name, red[0].name, f))
        _split(L, L.index(red[0]), f)
    order = ([x for x in L if x.kind == "S" and not x.tile] + [x for x in L if x.kind == "R" and not x.tile]
             + [x for x in L if x.tile])
    if order != L:
        steps.append(("reorder", t.name, [x.name for x in order]))
        L[:] = order
    if nsteps >= 2:
        outer = [x for x in L if x.kind == "S" and not x.tile]
        if len(outer) == 2 and L.index(outer[1]) == L.index(outer[0]) + 1 and rng.random() < 0.4:
            steps.append(("fuse", t.name, outer[0].name, outer[1].name))
            p = L.index(outer[0])
            L[p: p + 2] = [Leaf(f"{outer[0].name}_{outer[1].name}", "S", outer[0].extent * outer[1].extent, fused=True)]


def generate(mode: str, seed: int) -> Case:
    if mode == "canonical":
        cases = canonical()
        return cases[seed % len(cases)]
    rng = random.Random(f"{mode}:{seed}")
    pipe = generate_pipeline(rng)
    steps = generate_schedule(rng, pipe, mode)
    return Case(mode, seed, pipe, steps)


# ---------------------------------------------------------------------------------------------------------
# the canonical list


def _t(name, shape, **op):
    dtype = op.pop("dtype", "float32")
    return Tensor(name, tuple(shape), dtype=dtype, op=op)


def _inp(name, shape):
    return Tensor(name, tuple(shape), kind="input")


def _blur(H=23, W=37):
    A = _inp("A", (H + 2, W + 2))
    bx = stencil("blur_x", A, 1, 3)
    by = stencil("blur_y", bx, 0, 3)
    return Pipeline([A, bx, by])


def _sep5(H=21, W=30):
    A = _inp("A", (H + 4, W + 4))
    bx = stencil("pass_x", A, 1, 5)
    by = stencil("pass_y", bx, 0, 5)
    return Pipeline([A, bx, by])


def _pointwise2(H=19, W=45):
    A = _inp("A", (H, W))
    f = _t("f", (H, W), kind="map", op="affine", src="A", c1=1.5, c2=0.25)
    g = _t("g", (H, W), kind="map", op="square", src="f")
    return Pipeline([A, f, g])


def _gemm_epilogue(M=27, K=19, N=21):
    A, W = _inp("A", (M, K)), _inp("W", (K, N))
    C = _t("C", (M, N), kind="matmul", src="A", w="W")
    Y = _t("Y", (M, N), kind="map", op="relu", src="C", c=0.0)
    return Pipeline([A, W, C, Y])


def _rowsum_stencil(M=22, N=17):
    A = _inp("A", (M + 2, N))
    R = _t("R", (M + 2,), kind="reduce", src="A", axis=1)
    S = stencil("S", R, 0, 3)
    return Pipeline([A, R, S])


def _rowsum_stencil_2d(M=22, N=17):
    A = _inp("A", (M + 2, N))
    R = _t("R", (M + 2,), kind="reduce", src="A", axis=1)
    S = stencil("S", R, 0, 3)
    B = _inp("B", (M, N))
    Y = _t("Y", (M, N), kind="bcast", src="B", vec="S", axis=0, op="mul")
    return Pipeline([A, R, B, S, Y])


def _normalize(M=26, N=19):
    A = _inp("A", (M, N))
    R = _t("R", (M,), kind="reduce", src="A", axis=1)
    Y = _t("Y", (M, N), kind="bcast", src="A", vec="R", axis=0, op="add")
    return Pipeline([A, R, Y])


def _transpose_map(M=18, N=29):
    A = _inp("A", (M, N))
    T = _t("T", (N, M), kind="transpose", src="A")
    Y = _t("Y", (N, M), kind="map", op="affine", src="T", c1=-0.75, c2=0.25)
    return Pipeline([A, T, Y])


def _round_stencil(H=20, W=33, to="float16", store=True):
    A = _inp("A", (H, W + 2))
    Rd = _t("Rd", (H, W + 2), kind="round", src="A", to=to, store=store, dtype=to if store else "float32")
    S = stencil("S", Rd, 1, 3)
    return Pipeline([A, Rd, S])


def _mm_chain(M=13, K=11, N=17, P=9):
    A, W1, W2 = _inp("A", (M, K)), _inp("W1", (K, N)), _inp("W2", (N, P))
    C = _t("C", (M, N), kind="matmul", src="A", w="W1")
    D = _t("D", (M, P), kind="matmul", src="C", w="W2")
    return Pipeline([A, W1, W2, C, D])


def canonical() -> list[Case]:
    cs: list[tuple[str, Pipeline, list]] = []
    blur = _blur()
    tile = [("tile", "blur_y", "i", "j", 8, 16)]
    cs += [
        ("blur: blur_x at root", blur, [("compute_root", "blur_x")]),
        ("blur: blur_x inline", blur, [("compute_inline", "blur_x")]),
        ("blur: blur_x at blur_y's tile", blur, tile + [("compute_at", "blur_x", "blur_y", "jo")]),
        ("blur: blur_x at blur_y's tile, rows parallel", blur,
         tile + [("parallel", "blur_y", "io"), ("compute_at", "blur_x", "blur_y", "jo")]),
        ("blur: blur_x at a strip of 8 rows", blur,
         [("split", "blur_y", "i", 8), ("compute_at", "blur_x", "blur_y", "io")]),
        ("blur: blur_x per row", blur, [("compute_at", "blur_x", "blur_y", "i")]),
        ("blur: blur_x per row, column tiles", blur,
         [("split", "blur_y", "j", 16), ("compute_at", "blur_x", "blur_y", "i")]),
        ("blur: blur_x at blur_y's innermost tile loop", blur, tile + [("compute_at", "blur_x", "blur_y", "ji")]),
        ("blur: blur_x at the fused tile loop", blur,
         tile + [("fuse", "blur_y", "io", "jo"), ("parallel", "blur_y", "io_jo"),
                 ("compute_at", "blur_x", "blur_y", "io_jo")]),
        ("blur: both tiled, blur_x at blur_y's tile", blur,
         tile + [("tile", "blur_x", "i", "j", 8, 16), ("compute_at", "blur_x", "blur_y", "jo")]),
        ("blur: blur_x at root, tiled and parallel", blur,
         [("tile", "blur_x", "i", "j", 4, 32), ("parallel", "blur_x", "io"), ("compute_root", "blur_x")] + tile),
        ("blur: blur_x at blur_y's row of tiles (outer io)", blur,
         tile + [("compute_at", "blur_x", "blur_y", "io")]),
        ("blur: blur_x per row, stored at the column strip (sliding window)", blur,
         [("split", "blur_y", "j", 16), ("reorder", "blur_y", ["jo", "i", "ji"]), ("parallel", "blur_y", "jo"),
          ("compute_at", "blur_x", "blur_y", "i"), ("store_at", "blur_x", "blur_y", "jo")]),
        ("blur: blur_x per block of 4 rows, stored at the column strip (sliding window)", blur,
         [("tile", "blur_y", "i", "j", 4, 16), ("reorder", "blur_y", ["jo", "io", "ii", "ji"]),
          ("parallel", "blur_y", "jo"), ("compute_at", "blur_x", "blur_y", "io"),
          ("store_at", "blur_x", "blur_y", "jo")]),
        ("blur: blur_x at the tile, stored at the row of tiles (nothing slides)", blur,
         tile + [("parallel", "blur_y", "io"), ("compute_at", "blur_x", "blur_y", "jo"),
                 ("store_at", "blur_x", "blur_y", "io")]),
    ]
    sep = _sep5()
    cs += [
        ("separable 5-tap: first pass at the tile", sep,
         [("tile", "pass_y", "i", "j", 8, 8), ("compute_at", "pass_x", "pass_y", "jo")]),
        ("separable 5-tap: first pass at root", sep, [("tile", "pass_y", "i", "j", 8, 8)]),
        ("separable 5-tap: first pass inline", sep, [("compute_inline", "pass_x")]),
        ("separable 5-tap: first pass per strip", sep,
         [("split", "pass_y", "i", 4), ("compute_at", "pass_x", "pass_y", "io")]),
        ("separable 5-tap: first pass per row, stored at the column strip (sliding window)", sep,
         [("split", "pass_y", "j", 8), ("reorder", "pass_y", ["jo", "i", "ji"]), ("parallel", "pass_y", "jo"),
          ("compute_at", "pass_x", "pass_y", "i"), ("store_at", "pass_x", "pass_y", "jo")]),
    ]
    pw = _pointwise2()
    cs += [
        ("pointwise: producer at the innermost loop of a tiled consumer", pw,
         [("tile", "g", "i", "j", 4, 16), ("compute_at", "f", "g", "ji")]),
        ("pointwise: producer at the tile", pw,
         [("tile", "g", "i", "j", 4, 16), ("parallel", "g", "io"), ("compute_at", "f", "g", "jo")]),
        ("pointwise: producer inline, consumer split and reordered", pw,
         [("split", "g", "j", 8), ("reorder", "g", ["jo", "i", "ji"]), ("compute_inline", "f")]),
        ("pointwise: producer per row, fused", pw,
         [("split", "g", "j", 16), ("compute_at", "f", "g", "i")]),
    ]
    ge = _gemm_epilogue()
    cs += [
        ("gemm at the output tile, keeping its own row split", ge,
         [("tile", "Y", "i", "j", 16, 16), ("split", "C", "i", 8), ("compute_at", "C", "Y", "jo")]),
        ("gemm at the output tile, k split", ge,
         [("tile", "Y", "i", "j", 16, 16), ("split", "C", "k", 8), ("reorder", "C", ["i", "j", "ko", "ki"]),
          ("compute_at", "C", "Y", "jo")]),
        ("gemm tiled at root, epilogue separate", ge,
         [("tile", "C", "i", "j", 16, 16), ("split", "C", "k", 8), ("reorder", "C", ["io", "jo", "ko", "ii", "ji", "ki"]),
          ("parallel", "C", "io"), ("compute_root", "C")]),
        ("gemm per output row", ge, [("compute_at", "C", "Y", "i")]),
    ]
    cs += [
        ("stencil after a row sum, the sum at the stencil's strip", _rowsum_stencil(),
         [("split", "S", "i", 8), ("compute_at", "R", "S", "io")]),
        ("stencil after a row sum, the sum at root", _rowsum_stencil(), [("split", "S", "i", 8)]),
        ("row sum, stencil and broadcast: sum and stencil at the output's rows", _rowsum_stencil_2d(),
         [("split", "Y", "i", 8), ("compute_at", "S", "Y", "io"), ("compute_at", "R", "Y", "io")]),
        ("normalization: the row sum per row", _normalize(), [("compute_at", "R", "Y", "i")]),
        ("normalization: the row sum at a strip of rows", _normalize(),
         [("split", "Y", "i", 4), ("compute_at", "R", "Y", "io")]),
        ("transpose at the consumer's tile", _transpose_map(),
         [("tile", "Y", "i", "j", 8, 8), ("compute_at", "T", "Y", "jo")]),
        ("transpose inline, consumer tiled", _transpose_map(),
         [("tile", "Y", "i", "j", 8, 8), ("compute_inline", "T")]),
        ("float16 rounding, then a stencil at its tile", _round_stencil(),
         [("split", "S", "j", 16), ("compute_at", "Rd", "S", "jo")]),
        ("bfloat16 round trip inlined into a stencil", _round_stencil(to="bfloat16", store=False),
         [("compute_inline", "Rd")]),
        ("two matmuls, the first per row of the second", _mm_chain(), [("compute_at", "C", "D", "i")]),
        ("two matmuls, the first at a strip of rows", _mm_chain(),
         [("split", "D", "i", 4), ("compute_at", "C", "D", "io")]),
    ]
    return [Case("canonical", n, pipe, steps, name) for n, (name, pipe, steps) in enumerate(cs)]
