"""The lowering pass list (tilec/lower/passes.py): its order, each pass documented in its own file, and a
pass rewriting copies (the kernels it is given stay as they were)."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import tilec as tc
from tilec.lower import fusion, passes, persistent, subtiles
from tilec.lower.nest import For, TileId

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def test_the_pass_list_is_build_then_each_rewrite_in_its_own_file():
    assert passes.PASSES == [passes.build, subtiles.merge_pieces, persistent.tile_loops, fusion.compute_with]
    modules = [inspect.getmodule(p) for p in passes.PASSES[1:]]
    assert len(set(modules)) == len(modules)  # one rewrite, one file
    for p in passes.PASSES:
        assert len(inspect.getdoc(p).split()) >= 25, p.__name__  # a paragraph saying what it does
        assert list(inspect.signature(p).parameters) == ["kernels", "program"]
    for m in modules:
        assert len(inspect.getdoc(m).split()) >= 25, m.__name__


def test_the_persistent_pass_rewrites_a_copy():
    import persistent_gemm

    s, _ = persistent_gemm.make()
    program = tc.lower(s, {"BN": 192})  # sub-tiles too: a build per piece, merged, then the tile loop
    pieces = passes.build([], program)
    assert [k.piece for k in pieces] == [("ji", 192, 0, 128), ("ji", 192, 128, 64)]
    built = subtiles.merge_pieces(pieces, program)
    assert len(built) == 1 and built[0].piece is None
    before = [list(k.body) for k in built]
    after = persistent.tile_loops(built, program)
    assert [list(k.body) for k in built] == before and not any(k.persistent for k in built)
    (kernel,) = after
    loops = [n for n in kernel.body if isinstance(n, For) and n.kind == "persistent"]
    assert len(loops) == 1 and isinstance(loops[0].body[0], TileId) and kernel.persistent
    assert "NUM_PROGS" in [p.name for p in kernel.params] and "NUM_PROGS" not in [p.name for p in built[0].params]
    assert after == program.kernels  # the program's kernels are this pass's, fused by compute_with (none here)
