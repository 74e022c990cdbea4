"""Footprints and resources: the region of a tensor each cached tile covers (offset and box size,
from isl), buffer shapes, and an estimate of shared memory and registers per program.

The box of `cache_read(A).compute_at(C, ko)` is the set of A's elements that C reads during one
iteration of its loops down to `ko`, as in PPCG's `gpu_group.c`: the access composed with the
inverse of that loop prefix; its extent per dimension comes from the deltas (isl.md recipe (d)).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from tilec.ir.dtypes import itemsize
from tilec.ir.knob import factor_value

SHARED_LIMIT = 232_448  # bytes of shared memory one program may use on Hopper (H100/H200)
REGISTER_LIMIT = 255    # 32-bit registers one thread may use


@dataclass
class Footprint:
    """One cached tile: the tensor, where it sits (`offset`, isl text) and its box size."""

    cache: str
    tensor: str
    box: list[int]
    offset: str
    bytes: int
    buffers: int  # copies in flight (pipeline stages of the loop it sits in, else 1)


@dataclass
class Resources:
    """Estimated use of one kernel's program: shared memory, registers per thread, and footprints."""

    kernel: str
    num_warps: int
    shared_bytes: int
    registers_per_thread: int
    footprints: list[Footprint] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.shared_bytes <= SHARED_LIMIT and self.registers_per_thread <= REGISTER_LIMIT

    def __str__(self) -> str:
        lines = [f"{self.kernel}: shared {self.shared_bytes} B of {SHARED_LIMIT}, ~{self.registers_per_thread} "
                 f"registers/thread of {REGISTER_LIMIT} with {self.num_warps} warps"
                 + ("" if self.fits else "  (does not fit)")]
        for f in self.footprints:
            lines.append(f"  {f.cache}: {f.tensor} box {f.box} at {f.offset}, {f.bytes} B x {f.buffers}")
        return "\n".join(lines)


def _box(tile: isl.Map) -> list[int] | None:
    """The box size per dimension; None where a computed (non-affine) index leaves it unbounded."""
    d = tile.reverse().apply_range(tile).deltas()
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    out = []
    for i in range(d.dim(isl.dim_type.set)):
        v = d.dim_max_val(i)
        if not v.is_int():
            return None
        out.append(v.to_python() + 1)
    return out


def _readable(text: str, labels: list[str]) -> str:
    """isl text with time coordinates named after their loops (`_t1` -> `io`)."""
    import re

    def name(m):
        n = int(m.group(2))
        lab = labels[n] if n < len(labels) else ""
        loop = lab.split(" ")[0].split(".")[-1] if "." in lab else f"_t{n}"
        return f"{m.group(1)}*{loop}" if m.group(1) else loop
    return re.sub(r"(\d)?_t(\d+)\b", name, text)


def resources(model, plan, maps) -> list[Resources]:
    """Footprints and resource estimates of every kernel of `plan` (its model and time maps given:
    `tilec.plan.Analysis.resources` is the one caller)."""
    out = []
    for root in plan.kernels:
        warps = root.layout.warps  # the schedule's num_warps, or the plan's default for its tile
        res = Resources(plan.kernel_name(root.name), warps, 0, 0)
        regs = 0
        for p in maps._walk(root):
            stmt = model.stage_stmts[p.name][-1]
            tiles = [leaf for leaf in p.layout.tiles]
            if p.stage.tensor.is_reduction:
                acc = 1
                for leaf in tiles:
                    if leaf.kind == "spatial":
                        acc *= p.layout.tile_extent[leaf]
                regs += acc  # float32 accumulator elements
            for level, caches in p.caches.items():
                n = maps.prefix_length(p, level)
                prefix = maps.maps[stmt.name].project_out(isl.dim_type.out, n, maps.D - n)
                for c in caches:
                    reads = model.reads_of(stmt, c.tensor.name)
                    if reads is None:
                        continue
                    tile = prefix.reverse().apply_range(reads)
                    box = _box(tile)
                    if box is None:  # a gather at computed indices: one element per lane of the tiles
                        box = [p.layout.tile_extent[leaf] for leaf in tiles]
                        offset = "computed index (gathered tile)"
                    else:
                        offset = _readable(tile.lexmin_pw_multi_aff().to_str(), maps.labels[stmt.name][:n])
                    size = 1
                    for b in box:
                        size *= b
                    stages = p.layout.stage.pipelines.get(p.layout.loops[level]) if level >= 0 else None
                    buffers = factor_value(stages, plan.config) if stages is not None else 1
                    nbytes = size * itemsize(c.tensor.dtype)
                    res.footprints.append(Footprint(c.name, c.tensor.name, box, offset, nbytes, buffers))
                    res.shared_bytes += nbytes * buffers
                    regs += size * itemsize(c.tensor.dtype) // 4
        res.registers_per_thread = -(-regs // (32 * warps)) + 32  # + ~32 for addresses and loop state
        out.append(res)
    return out
