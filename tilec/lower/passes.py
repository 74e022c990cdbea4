"""Lowering's pass list (Halide's `src/Lower.cpp` is the model): the analysis (plan, legality, masks) is
done by the time `Program` runs these; each pass takes the kernels built so far (a list of `KernelIR`,
in launch order) and the `Program` (its plan, schedule, config and size facts) and returns the kernels
it makes of them. `PASSES` is the sequence, in order, in this one place.

A new kernel-level rewrite is a new file in tilec/lower with a function `(kernels, program) -> kernels`
and a docstring saying what it does, plus one line in `PASSES`. A pass rewrites copies of the statement
lists it changes (`persistent.copy_body`), never the kernels it was given, and gives new names that
avoid `KernelIR.names` and every name the kernel defines.

`TILEC_LOGS=passes` prints the loop nest of every kernel after each pass (to stderr, under the pass's
name), as `print(tc.lower(...))` does at the end.
"""

from __future__ import annotations

import os
import sys

from tilec.errors import ArgumentError
from tilec.lower import fusion, persistent, split_k, subtiles
from tilec.lower.builder import KernelBuilder
from tilec.lower.nest import KernelIR
from tilec.lower.nest_printer import render_nest


def build(kernels: list[KernelIR], program) -> list[KernelIR]:
    """The loop-nest IR of each root stage's kernel, in launch order (`KernelBuilder`, builder.py): its
    loops, the stages placed in them, their values. A sub-tiled tile (a 192-wide tile) is built once per
    power-of-two piece (the next pass merges them); a split_k root is two kernels, the partial sums and
    their combine (split_k.py). The online rewrite of a loop's statistics (online.py) and split_k's loops
    are emitted by the builder as it walks the loops."""
    out = list(kernels)
    for root in program.plan.kernels:
        split = split_k.plan(program, root)
        for mode in [None] if split is None else [split.as_mode("partial"), split.as_mode("combine")]:
            if root.layout.subtiled is None:
                out.append(KernelBuilder(program, root, split=mode).build())
                continue
            axis, extent = root.layout.subtiled  # one build per power-of-two piece (KernelIR.piece)
            out += [KernelBuilder(program, root, piece=(axis, start, length), split=mode).build()
                    for start, length in subtiles.pieces(extent)]
    return out


PASSES = [
    build,                  # the nest of each kernel (a sub-tiled one: a build per piece; split_k: two kernels)
    subtiles.merge_pieces,  # sub-tiles: a tile's builds per power-of-two piece merged into one kernel
    persistent.tile_loops,  # persistent grid axes: the statements after their program id in a tile loop
    fusion.compute_with,    # compute_with: a stage's outermost loop fused into the sibling loop it names
]


def run(program) -> list[KernelIR]:
    """The kernels of `program`: each pass of `PASSES` in turn, from none."""
    kernels: list[KernelIR] = []
    show = "passes" in log_names()
    for step in PASSES:
        kernels = step(kernels, program)
        if show:
            text = "".join(render_nest(k) for k in kernels)
            print(f"# tilec: after pass {step.__module__.rsplit('.', 1)[-1]}.{step.__name__}\n{text}",
                  file=sys.stderr)
    return kernels


LOGS = ("output_code", "passes")  # what TILEC_LOGS may name (comma-separated), as TORCH_LOGS does


def log_names() -> set[str]:
    """The TILEC_LOGS switches set: `output_code` prints each generated module and its path as it is built
    (tilec/runtime/kernel.py), `passes` the loop nest after each lowering pass, both to stderr. An unknown
    name is an `ArgumentError`, not silence, wherever it is read (`tc.lower` too)."""
    names = {n.strip() for n in os.environ.get("TILEC_LOGS", "").split(",") if n.strip()}
    unknown = sorted(names - set(LOGS))
    if unknown:
        raise ArgumentError(f"TILEC_LOGS={os.environ['TILEC_LOGS']!r}: unknown {', '.join(unknown)}; it takes "
                            f"a comma-separated list of {', '.join(LOGS)}")
    return names
