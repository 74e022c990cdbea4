"""Sub-tiles: a tile whose extent is a multiple of 16 but not a power of two (Triton's tensors need
powers of two) is lowered as power-of-two pieces, e.g. a 192-wide tile as 128 + 64.

The build pass builds the kernel once per piece (`KernelBuilder(..., piece=(axis, start, length))`: the
tile's `arange` covers that piece only; `KernelIR.piece` says which), and this file's pass,
`merge_pieces`, merges the builds statement by statement (`merge`). The
builds have the same loops and statements in the same order; where a statement is the same in every
build (the A tile of a GEMM, the offsets along other axes, the loops), the kernel has it once; where
it differs (the W tile, the accumulator, the dot, the epilogue and the store of each piece), it has
one copy per piece, each piece's names renamed (`acc_C`, `acc_C_1`). This is how cuBLAS's 192 x 128
tile shapes reach Triton: one A load feeds two dots.

A value that combines the pieces (a reduction over the sub-tiled axis in the same kernel) cannot be
split this way; `merge` refuses it with a `LoweringError`, never a kernel that mixes pieces. A piece's
names are renamed in its statements' expression nodes (`nest.rename_stmt`), wherever they are read.
"""

from __future__ import annotations

import dataclasses

from tilec.errors import LoweringError
from tilec.lower.nest import Dot, For, KernelIR, Update, defined, rename_stmt


def pieces(extent: int) -> list[tuple[int, int]]:
    """(start, length) of the power-of-two pieces of a tile of `extent`, largest first: 192 -> (0, 128),
    (128, 64); 112 -> (0, 64), (64, 32), (96, 16)."""
    out, start = [], 0
    for bit in reversed(range(extent.bit_length())):
        if extent >> bit & 1:
            out.append((start, 1 << bit))
            start += 1 << bit
    return out


def _retarget(node, name: str):
    field = "acc" if isinstance(node, (Update, Dot)) else "name"
    return dataclasses.replace(node, **{field: name})


def _mark(node, label: str):
    note = getattr(node, "note", None)
    return dataclasses.replace(node, note=dataclasses.replace(note, piece=label)) if note else node


# -- the merge ---------------------------------------------------------------------------------

class _Merge:
    def __init__(self, kernels: list[KernelIR], labels: list[str]):
        self.kernels, self.labels = kernels, labels
        self.renames: list[dict[str, str]] = [{} for _ in kernels]
        self.used: set[str] = set()
        for k in kernels:
            self._collect(k.body)
            self.used |= {p.name for p in k.params}  # a new name must not shadow a size or tensor either
        self.written: set[str] = set()

    def _collect(self, body) -> None:
        for node in body:
            if isinstance(node, For):
                self.used.add(node.var)
                self._collect(node.body)
            elif defined(node) is not None:
                self.used.add(defined(node))

    def fresh(self, name: str, n: int) -> str:
        new, extra = f"{name}_{n}", 1
        while new in self.used:
            new, extra = f"{name}_{n}_{extra}", extra + 1
        self.used.add(new)
        return new

    def fail(self, why: str) -> LoweringError:
        return LoweringError(f"{self.kernels[0].name}: cannot lower the sub-tiles ({', '.join(self.labels)}): {why}")

    def body(self, bodies: list[list]) -> list:
        if len({len(b) for b in bodies}) != 1:
            raise self.fail("the pieces lower to different loop nests (an internal error; please report it)")
        out = []
        for nodes in zip(*bodies):
            first = nodes[0]
            if isinstance(first, For):
                head = [n.head if isinstance(n, For) else None for n in nodes]
                if len(set(head)) != 1:
                    raise self.fail("the pieces lower to different loops (an internal error; please report it)")
                loop = dataclasses.replace(first, body=self.body([n.body for n in nodes]))
                out.append(loop)
                continue
            if not all(type(n) is type(first) for n in nodes):
                raise self.fail("the pieces lower to different statements (an internal error; please report it)")
            before = set(self.written)
            variants = [first] + [rename_stmt(n, self.renames[k]) for k, n in enumerate(nodes[1:], 1)]
            own = [k for k in range(1, len(nodes)) if variants[k] != first]
            if not own:
                out.append(first)
            else:
                out.append(_mark(first, self.labels[0]))
                t0 = defined(first)
                for k in own:
                    node = variants[k]
                    t = defined(node)
                    if t is not None and t == t0:
                        if t in before:
                            raise self.fail(
                                f"{t} combines the pieces (a reduction over the sub-tiled axis in this kernel); "
                                f"use a power-of-two tile there, or compute that stage in its own kernel")
                        self.renames[k][t] = self.fresh(t, k)
                        node = _retarget(node, self.renames[k][t])
                    out.append(_mark(node, self.labels[k]))
                    if defined(node) is not None:
                        self.written.add(defined(node))
            if t0 := defined(first):
                self.written.add(t0)
        return out


def merge_pieces(kernels: list[KernelIR], program) -> list[KernelIR]:
    """The pass: each run of builds of one kernel's pieces (`KernelIR.piece`, made by the build pass for
    a sub-tiled tile) merged into one kernel; every other kernel as it is."""
    out: list[KernelIR] = []
    run: list[KernelIR] = []
    for k in kernels + [None]:
        if run and (k is None or k.piece is None or k.name != run[0].name):
            axis, extent = run[0].piece[:2]
            out.append(dataclasses.replace(merge(run, axis, extent), piece=None))
            run = []
        if k is not None and k.piece is not None:
            run.append(k)
        elif k is not None:
            out.append(k)
    return out


def merge(kernels: list[KernelIR], axis: str, extent: int) -> KernelIR:
    """One kernel from its builds per piece of the `extent`-wide tile of `axis` (same loops, same order)."""
    parts = pieces(extent)
    labels = [f"{axis} {start}:{start + length}" for start, length in parts]
    m = _Merge(kernels, labels)
    body = m.body([k.body for k in kernels])
    header = list(kernels[0].header)
    header.insert(2, f"sub-tiles: {axis} ({extent} wide) as {' + '.join(str(n) for _, n in parts)}")
    params = {}
    for k in kernels:  # each piece's parameters (a descriptor per block shape: one per piece)
        for p in k.params:
            params.setdefault(p.name, p)
    order = {p.name: n for n, p in enumerate(kernels[0].params)}
    kinds = [p.kind for p in kernels[0].params]
    merged = sorted(params.values(), key=lambda p: (kinds.index(p.kind) if p.kind in kinds else -1,
                                                    order.get(p.name, len(order))))
    return dataclasses.replace(kernels[0], body=body, header=header, params=merged)

