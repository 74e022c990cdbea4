"""Golden files per schedule primitive, in the style of Exo's tests: for each primitive, the loop nest and
the Triton source (the "cuda" form) of a tiny compute before and after the primitive, in
`tests/golden/primitives/<name>.txt`. They are the worked examples of docs/schedule.md's primitives.

Each case is a function `case(after)` that builds a schedule. The lines that read `after` are the
primitive (or, for the last cases, a lowering option); everything else is the setup that before and
after share. The golden file quotes the case's source (and the helpers it calls), so it says what
it shows; editing a case or a helper changes its golden file. Refresh on purpose with
`pytest --update-golden` and read the diff.

Each case also checks that the primitive changed the code, and runs the "before" and the "after"
schedules through `tc.build` (the interpreter on a CPU) on sizes that no tile divides, against torch.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch

import tilec as tc
import tilec.runtime.kernel as kernel_mod
from tilec.ir.dtypes import torch_dtype
from tilec.ir.expr import as_expr, evaluate
from tilec.lower.program import Program

SIZES = {"M": 37, "N": 45, "K": 29}  # divisible by no tile below: every mask is exercised
FOLD_CONTEXT = 3  # unchanged Triton lines kept around each change in the golden files


@dataclass
class Built:
    """What a case returns: the schedule, `tc.build`'s args, a torch reference for the outputs, and the
    options of `tilec.lower.program.Program` (target, int64)."""

    sched: tc.Schedule
    args: list
    reference: Callable
    lower: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=lambda: dict(SIZES))


# ---------------------------------------------------------------------------------------------
# computes (their source is quoted in the golden files)


def elementwise():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: tc.exp(X[i, j]) * 2.0, name="Z")
    return X, Z


def gemm(dtype="float16"):
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), dtype, name="A")
    W = tc.placeholder((K, N), dtype, name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k, acc_dtype="float32"),
                   name="C", dtype=dtype)
    return A, W, C


def gemm_silu():
    A, W, C = gemm()
    Y = tc.compute(C.shape, lambda i, j: tc.silu(C[i, j]), name="Y")
    return A, W, C, Y


def swiglu():
    M, N, K = tc.size_vars("M N K")
    X = tc.placeholder((M, K), "float16", name="X")
    Wg = tc.placeholder((K, N), "float16", name="Wg")
    Wu = tc.placeholder((K, N), "float16", name="Wu")
    k = tc.reduce_axis(K, name="k")
    G = tc.compute((M, N), lambda i, j: tc.sum(X[i, k] * Wg[k, j], axis=k, acc_dtype="float32"), name="G",
                   dtype="float16")
    k2 = tc.reduce_axis(K, name="k2")
    U = tc.compute((M, N), lambda i, j: tc.sum(X[i, k2] * Wu[k2, j], axis=k2, acc_dtype="float32"), name="U",
                   dtype="float16")
    Y = tc.compute((M, N), lambda i, j: tc.silu(G[i, j]) * U[i, j], name="Y")
    return X, Wg, Wu, G, U, Y


def torch_swiglu(x, wg, wu):
    g, u = torch_matmul(x, wg).float(), torch_matmul(x, wu).float()
    return (torch.nn.functional.silu(g) * u).to(x.dtype)


def row_center():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="ss")
    Y = tc.compute((M, N), lambda r, col: X[r, col] - ss[r] / N, name="Y")
    return X, ss, Y


def scale_exp():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] * 3.0, name="P", dtype="float16")
    Q = tc.compute((M, N), lambda i, j: tc.exp(P[i, j]), name="Q", dtype="float32")
    return X, P, Q


def row_softmax():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c, c2 = tc.reduce_axis(N, name="c"), tc.reduce_axis(N, name="c2")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    den = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - mx[r]), axis=c2), name="den")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - mx[r]) / den[r], name="Y")
    return X, mx, den, Y


def row_scale():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    b = tc.placeholder((M,), "float32", name="b")
    S = tc.compute((M, N), lambda i, j: X[i, j] * b[i], name="S")
    return X, b, S


def tanh_of():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    T = tc.compute((M, N), lambda i, j: tc.tanh(X[i, j]), name="T")
    return X, T


def torch_matmul(a, w):
    return (a.float() @ w.float()).to(a.dtype)


# ---------------------------------------------------------------------------------------------
# cases: the docstring says what to look for; the source is quoted under it


def split(after):
    """split(axis, factor): the loop over i becomes a loop over io, cdiv(M, 16) iterations, each
    working on a 16-element tile ii (a tl.arange, masked where 16 does not divide M).
    reorder(i, j) keeps the order: it only marks Z as scheduled, so that neither side gets the
    default schedule (docs/schedule.md, section 3)."""
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    i, j = Z.axis
    s[Z].reorder(i, j)
    if after:
        s[Z].split(i, 16)
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0)


def tile(after):
    """tile(x, y, fx, fy): split both axes and put the two outer loops outside the two tiles; the
    scalar loops over i and j become loops over io and jo of 16 x 32 tiles. As in split.txt,
    reorder(i, j) only marks Z as scheduled."""
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    i, j = Z.axis
    s[Z].reorder(i, j)
    if after:
        s[Z].tile(i, j, 16, 32)
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0)


def reorder(after):
    """reorder(*axes): the loop over jo moves outside the loop over io. The tiles keep their
    layout (the order among tile axes ii, ji is unchanged)."""
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 32)
    if after:
        s[Z].reorder(jo, io)
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0)


def fuse(after):
    """fuse(outer, inner): the two loops io, jo become one loop io_jo over cdiv(M, 16) * cdiv(N, 32)
    iterations; io and jo are recovered with // and %. Usually the fused axis is then bound to
    one grid dimension (bind.txt); here it stays a loop, to show fuse alone."""
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 32)
    if after:
        s[Z].fuse(io, jo)
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0)


def bind(after):
    """bind(axis, "program_id.d"): the serial loops io and jo of one program (grid (1)) become a
    2-D grid of programs, tl.program_id(0) and tl.program_id(1)."""
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 32)
    if after:
        s[Z].bind(io, "program_id.0")
        s[Z].bind(jo, "program_id.1")
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0)


def gemm_tiles(s, C):
    """The classic Triton GEMM: 16 x 16 output tiles, one per program, a serial loop over k by 16."""
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    return io, jo, ko


def compute_with(after):
    """compute_with(stage, axis): U's loop over K runs inside G's loop ko, one loop for both GEMMs of
    SwiGLU. U's accumulator is set up before the loop, G's rounding moves after it, and U's load of the
    X tile, the same tile as G's once U's loop counter is G's, is dropped: one X load feeds both dots.
    Before it, two loops over K one after the other, each loading X."""
    X, Wg, Wu, G, U, Y = swiglu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[Y].tile(*Y.axis, 16, 16)
    s[Y].bind(io, "program_id.0")
    s[Y].bind(jo, "program_id.1")
    ko, _ = s[G].split(G.reduce_axis[0], 16)
    k2o, _ = s[U].split(U.reduce_axis[0], 16)
    s[G].compute_at(s[Y], jo)
    s[U].compute_at(s[Y], jo)
    if after:
        s[U].compute_with(s[G], ko)
    return Built(s, [X, Wg, Wu, Y], torch_swiglu)


def split_k(after):
    """split_k(axis, parts): the loop over K in 3 parts, one program each (program_id.2): each sums its
    chunk of ko into the float32 workspace C_part[part, i, j]; a second kernel adds the 3 partial sums
    in order, rounds C to float16 and runs SiLU, the epilogue, on the whole sum. Before it, one kernel
    whose program loops over all of K."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    if after:
        s[C].split_k(ko, 3)
    s[Y].compute_at(s[C], jo)
    return Built(s, [A, W, Y], lambda a, w: torch.nn.functional.silu(torch_matmul(a, w).float()).to(a.dtype))


def swizzle(after):
    """swizzle(outer, inner, group): like fuse(io, jo) bound to program_id.0, but the programs run
    in groups of 2 io tiles (rows of C) going down the jo tiles together, so the programs that run at
    once share rows of A and columns of W in L2 (Triton's GROUP_M order). Before it, the same fused
    grid in plain row-major order."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    f = s[C].swizzle(io, jo, group=2) if after else s[C].fuse(io, jo)
    s[C].bind(f, "program_id.0")
    return Built(s, [A, W, C], torch_matmul)


def persistent(after):
    """persistent(axis, flatten): min(#SMs, tiles) programs instead of one per tile; each loops over
    the tiles pid, pid + NUM_PROGS, ... (NUM_PROGS is set at launch from the device's SM count). The
    body of the kernel moves into that loop unchanged."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    f = s[C].fuse(io, jo)
    s[C].bind(f, "program_id.0")
    if after:
        s[C].persistent(f, flatten=True)
    return Built(s, [A, W, C], torch_matmul)


def subtiles(after):
    """split(j, 48): a tile of 48, a multiple of 16 but not a power of two, lowers as sub-tiles of 32
    and 16 (tilec/lower/subtiles.py): the A tile is loaded once, each piece has its own W tile,
    accumulator, dot and store. Before it, a 32-wide tile."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 48 if after else 32)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    return Built(s, [A, W, C], torch_matmul)


def pipeline(after):
    """pipeline(axis, stages): the reduction loop ko gets num_stages=2, so Triton prefetches the
    next iteration's tiles of A and W. Nothing else changes."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ko = gemm_tiles(s, C)
    if after:
        s[C].pipeline(ko, stages=2)
    return Built(s, [A, W, C], torch_matmul)


def num_warps(after):
    """num_warps(n): the kernel launches with 8 warps per program instead of 4. It is a launch
    option, not a parameter of the kernel: the loop nest's header changes, and the Triton
    source only in its header comment."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    gemm_tiles(s, C)
    if after:
        s[C].num_warps(8)
    return Built(s, [A, W, C], torch_matmul)


def unroll(after):
    """unroll(axis): the serial loop iio over 4 (the outer part of the 16-row tile, split by 4)
    becomes tl.static_range(4), unrolled at compile time."""
    X, Z = elementwise()
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 32)
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    iio, iii = s[Z].split(ii, 4)
    if after:
        s[Z].unroll(iio)
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0)


def compute_at_epilogue(after):
    """compute_at, a consumer in its producer's loop: Y = silu(C) runs at C's program, on the
    finished C tile, read from registers. Two kernels and a buffer C become one kernel, and
    C is never stored."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, jo, ko = gemm_tiles(s, C)
    if after:
        s[Y].compute_at(s[C], jo)
    return Built(s, [A, W, Y], lambda a, w: torch.nn.functional.silu(torch_matmul(a, w).float()).to(a.dtype))


def compute_at_producer(after):
    """compute_at, a producer in its consumer's loop: the row sum ss runs inside Y's program, for
    the 16 rows of that program (its own loop over c, split by the default 64, runs there), and
    Y reads ss from registers. Two kernels and a buffer ss become one kernel."""
    X, ss, Y = row_center()
    s = tc.create_schedule(Y)
    ro, co, ri, ci = s[Y].tile(*Y.axis, 16, 32)
    s[Y].bind(ro, "program_id.0")
    if after:
        s[ss].compute_at(s[Y], ro)
    return Built(s, [X, Y], lambda x: x - x.mean(1, keepdim=True))


def compute_at_region(after):
    """compute_at of a producer at an outer loop (Halide's compute_at): g at h.ro, where h loops over column
    tiles inside ro. g computes the region one ro iteration reads (its 4 rows, every column, in its own loop
    over column tiles), keeps it in a buffer of its shape, and h reads it back after a barrier. Where that
    region is one tile read by h's same tiles (a row that fits), it stays in registers instead."""
    X, g = elementwise()
    h = tc.compute(g.shape, lambda r, c: g[r, c] + 1.0, name="h")
    s = tc.create_schedule(h)
    ro, co, ri, ci = s[h].tile(*h.axis, 4, 32)
    s[h].bind(ro, "program_id.0")
    if after:
        s[g].compute_at(s[h], ro)
    return Built(s, [X, h], lambda x: torch.exp(x) * 2.0 + 1.0)


def store_at(after):
    """store_at of a stencil's producer outside the loop it is computed at (Halide's sliding window): b is
    computed per row of v (each row reads b's rows r, r + 1, r + 2: 3 rows a row), stored at v's column strip.
    After the strip's first row, each row computes only the one row of b the last did not: a window that
    starts 2 rows later and holds 1 (its other lanes masked)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    b = tc.compute((M, N), lambda r, c: X[r, c] * 2.0, name="b")
    v = tc.compute((M - 2, N), lambda r, c: b[r, c] + b[r + 1, c] + b[r + 2, c], name="v")
    s = tc.create_schedule(v)
    co, ci = s[v].split(v.axis[1], 32)
    s[v].reorder(co, v.axis[0], ci)
    s[v].bind(co, "program_id.0")
    s[b].compute_at(s[v], v.axis[0])
    if after:
        s[b].store_at(s[v], co)
    return Built(s, [X, v], lambda x: 2.0 * (x[:-2] + x[1:-1] + x[2:]))


def online(after):
    """online: den's loop carries mx as a running max (the online softmax). mx's own loop goes; each tile
    updates the max, rescales den by exp(max_old - max_new) and adds its exp(x - max_new). Two loops over the
    row become one (Y's loop, the third, is unchanged)."""
    X, mx, den, Y = row_softmax()
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], 32)
    s[Y].bind(Y.axis[0], "program_id.0")
    s[den].split(den.reduce_axis[0], 32)
    s[mx].split(mx.reduce_axis[0], 32)
    s[mx].compute_at(s[Y], Y.axis[0])
    s[den].compute_at(s[Y], Y.axis[0])
    if after:
        s[den].online(s[mx])
    return Built(s, [X, Y], lambda x: torch.softmax(x, 1))


def assume_one_iteration(after):
    """tc.assume(N <= 64): isl proves that the loops over 64-column tiles run once, so they are no loops:
    the row is one tile, loaded once for the sum and the subtraction. A kernel also lowers once per call
    sizes that make a loop run once (Plan.call_facts), whatever the facts."""
    M, N = tc.size_vars("M N")
    if after:
        tc.assume(N <= 64)
        tc.assume(N >= 1)
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    ss = tc.compute((M,), lambda r: tc.sum(X[r, c], axis=c), name="ss")
    Y = tc.compute((M, N), lambda r, col: X[r, col] - ss[r] / N, name="Y")
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], 64)
    s[Y].bind(Y.axis[0], "program_id.0")
    s[ss].split(c, 64)
    s[ss].compute_at(s[Y], Y.axis[0])
    return Built(s, [X, Y], lambda x: x - x.mean(1, keepdim=True), sizes={"M": 37, "N": 45})


def compute_inline(after):
    """compute_inline(): P = X * 3 (rounded to float16) is substituted into Q = exp(P): one kernel
    instead of two, no buffer P. P's rounding point stays, as .to(tl.float16).to(tl.float32)."""
    X, P, Q = scale_exp()
    s = tc.create_schedule(Q)
    if after:
        s[P].compute_inline()
    return Built(s, [X, Q], lambda x: torch.exp((x * 3.0).half().float()))


def compute_root(after):
    """compute_root(): computes the stage in a kernel of its own, which undoes compute_at or, as
    here, compute_inline (compute_inline.txt the other way round): P gets its kernel back, and
    P becomes a buffer between the two kernels that Q loads."""
    X, P, Q = scale_exp()
    s = tc.create_schedule(Q)
    s[P].compute_inline()
    if after:
        s[P].compute_root()
    return Built(s, [X, Q], lambda x: torch.exp((x * 3.0).half().float()))


def cache_read(after):
    """cache_read(tensor, scope, readers) placed with compute_at: the per-row scale b is loaded
    once per program, at io, instead of once per column tile inside the loop over jo."""
    X, b, S = row_scale()
    s = tc.create_schedule(S)
    io, jo, ii, ji = s[S].tile(*S.axis, 16, 32)
    s[S].bind(io, "program_id.0")
    if after:
        s.cache_read(b, "shared", readers=[S]).compute_at(s[S], io)
    return Built(s, [X, b, S], lambda x, b: x * b[:, None])


def cache_read_tma(after):
    """cache_read(tensor, scope, readers, tma=True): the A and W tiles of the GEMM's k loop are read
    through tensor descriptors (A_desc_16x16.load([row, col]): Hopper's TMA unit; 0 outside the
    tensor, as the masked load gives). The pointer loads stay in the source: a call whose tensors TMA
    cannot read (unaligned, a strided last dim) renders the kernel without descriptors."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ko = gemm_tiles(s, C)
    s.cache_read(A, "shared", readers=[C], tma=after).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C], tma=after).compute_at(s[C], ko)
    return Built(s, [A, W, C], torch_matmul)


def cache_write(after):
    """cache_write(tensor, "local") placed with compute_at: C accumulates in registers and is
    stored once per program. Triton keeps accumulators in registers anyway, so the primitive
    is validated and recorded, but the code does not change: only the kernel's header comment
    does (the test checks exactly that)."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    io, jo, ko = gemm_tiles(s, C)
    if after:
        s.cache_write(C, "local").compute_at(s[C], jo)
    return Built(s, [A, W, C], torch_matmul)


def cache_write_tma(after):
    """cache_write(tensor, "local", tma=True): the GEMM+SiLU's output tile is written through a tensor
    descriptor (Y_desc_16x16.store([row, col], tile): Hopper's TMA unit, nothing written past the
    tensor's edge), here beside descriptor loads. The pointer store stays in the source: a call whose
    output TMA cannot write (unaligned, a strided last dim) renders the kernel without descriptors."""
    A, W, C, Y = gemm_silu()
    s = tc.create_schedule(Y)
    io, jo, ko = gemm_tiles(s, C)
    s.cache_read(A, "shared", readers=[C], tma=True).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C], tma=True).compute_at(s[C], ko)
    s[Y].compute_at(s[C], jo)
    s.cache_write(Y, "local", tma=after)
    return Built(s, [A, W, Y], lambda a, w: torch.nn.functional.silu(torch_matmul(a, w)))


def int64_offsets(after):
    """The int64 form (Program(..., int64=True)), which tc.build switches to when a tensor has more
    than 2**31 - 1 elements: the program ids and loop counters are widened to int64 before any
    index arithmetic. Same schedule on both sides."""
    A, W, C = gemm()
    s = tc.create_schedule(C)
    gemm_tiles(s, C)
    return Built(s, [A, W, C], torch_matmul, lower={"int64": after})


def assume_drops_mask(after):
    """tc.assume(N % 32 == 0): isl proves that the 32-column tiles divide N, so mask_j is dropped
    from every load and store (mask_i stays). Every call of a built kernel checks the fact."""
    M, N = tc.size_vars("M N")
    if after:
        tc.assume(N % 32 == 0)
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: tc.exp(X[i, j]) * 2.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, 16, 32)
    s[Z].bind(io, "program_id.0")
    s[Z].bind(jo, "program_id.1")
    return Built(s, [X, Z], lambda x: torch.exp(x) * 2.0, sizes={"M": 37, "N": 64})


def interpreter_bf16_dot(after):
    """target="interpreter" (what tc.build uses without a GPU): Triton's interpreter gets tl.dot on
    bfloat16 wrong, so there the operands are widened to float32 and passed with
    input_precision="ieee". Nothing else differs from the "cuda" form."""
    A, W, C = gemm("bfloat16")
    s = tc.create_schedule(C)
    gemm_tiles(s, C)
    return Built(s, [A, W, C], torch_matmul, lower={"target": "interpreter" if after else "cuda"})


def interpreter_tanh(after):
    """target="interpreter": the interpreter has no libdevice, so tanh is a formula in tl.exp
    instead of libdevice.tanh (and the libdevice import goes)."""
    X, T = tanh_of()
    s = tc.create_schedule(T)
    return Built(s, [X, T], torch.tanh, lower={"target": "interpreter" if after else "cuda"})


CASES = [split, tile, reorder, fuse, bind, swizzle, persistent, subtiles, pipeline, num_warps, unroll, compute_at_epilogue,
         compute_at_producer, compute_at_region, store_at, compute_inline, compute_root, compute_with, split_k, online, cache_read,
         cache_read_tma, cache_write, cache_write_tma, int64_offsets,
         assume_drops_mask, assume_one_iteration, interpreter_bf16_dot, interpreter_tanh]

# The helpers a golden file quotes when its case (or a helper it quotes) calls them.
QUOTED = [elementwise, gemm, gemm_silu, swiglu, torch_swiglu, row_center, row_softmax, scale_exp, row_scale, tanh_of,
          gemm_tiles]


# ---------------------------------------------------------------------------------------------
# the golden text


def _source_and_doc(fn) -> tuple[str, str]:
    """The function's source without its docstring, and the docstring."""
    src = textwrap.dedent(inspect.getsource(fn))
    body = ast.parse(src).body[0].body
    doc = inspect.getdoc(fn) or ""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        lines = src.splitlines()
        src = "\n".join(lines[: body[0].lineno - 1] + lines[body[0].end_lineno:])
    return src.rstrip(), doc


def _quoted(src: str) -> list:
    """The helpers of QUOTED that `src` calls, directly or through each other, in QUOTED's order."""
    found, todo = set(), [src]
    while todo:
        text = todo.pop()
        for helper in QUOTED:
            if helper not in found and re.search(rf"\b{helper.__name__}\(", text):
                found.add(helper)
                todo.append(_source_and_doc(helper)[0])
    return [h for h in QUOTED if h in found]


def _comment(text: str, indent: str = "") -> list[str]:
    return [f"#{indent} {line}".rstrip() for line in text.splitlines()]


def _lower(built: Built):
    return Program(built.sched, target=built.lower.get("target", "cuda"), int64=built.lower.get("int64", False))


def _code(source: str) -> list[str]:
    """The source without comment lines: what runs."""
    return [line for line in source.splitlines() if not line.strip().startswith("#")]


def golden_text(case) -> tuple[str, tuple]:
    before, after = case(False), case(True)
    pb, pa = _lower(before), _lower(after)
    case_src, doc = _source_and_doc(case)
    head = [f"# {case.__name__}: the loop nest and the Triton source before and after", "#"]
    head += _comment(doc) + ["#", "# The code (tests/test_golden_primitives.py): the lines that read `after` make the",
                             "# difference, the rest is shared by before and after; a case returns",
                             "# Built(schedule, tc.build's args, a torch reference for checking the result)."]
    for helper in _quoted(case_src):
        head += _comment(_source_and_doc(helper)[0], "   ") + ["#"]
    head += _comment(case_src, "   ")
    text = "\n".join(head) + "\n\n"
    text += "## before: loop nest\n\n" + str(pb) + "\n"
    text += "## after: loop nest\n\n" + str(pa) + "\n"
    text += ("## triton, before -> after, kernel by kernel: '-' lines are only before, '+' lines only\n"
             "## after, the rest in both; long runs of unchanged lines are cut to '...'\n")
    for title, lines in _triton_sections(pb.source(), pa.source()):
        text += f"\n## triton: {title}\n" + "\n".join(lines) + "\n"
    return text, (pb, pa, before, after)


def _kernels(source: str) -> dict[str, list[str]]:
    """A Triton module split into its imports and its kernels (each from its header comment on)."""
    chunks = re.split(r"\n+(?=# \w+ \(tilec\): computes )", source.strip("\n"))
    out = {"imports": chunks[0].splitlines()}
    for chunk in chunks[1:]:
        out[re.search(r"^def (\w+)\(", chunk, re.M).group(1)] = chunk.splitlines()
    return out


def _triton_sections(before: str, after: str):
    """(title, marked lines) for the imports and each kernel of before and after, in launch order."""
    kb, ka = _kernels(before), _kernels(after)
    nb, na = list(kb), list(ka)
    names = []
    for _, i1, i2, j1, j2 in difflib.SequenceMatcher(a=nb, b=na, autojunk=False).get_opcodes():
        names += nb[i1:i2] + [n for n in na[j1:j2] if n not in kb]
    for name in names:
        if name not in ka:
            yield f"{name}, only before", _diff(kb[name], [])
        elif name not in kb:
            yield f"{name}, only after", _diff([], ka[name])
        elif kb[name] == ka[name]:
            if name != "imports":
                yield f"{name}, the same before and after", [f"  ...  ({len(ka[name])} unchanged lines)"]
        else:
            yield f"{name}, changed", _diff(kb[name], ka[name])


def _diff(a: list[str], b: list[str], keep: int = FOLD_CONTEXT) -> list[str]:
    """Every line of a and b in one order, marked '  ' (in both), '- ' (only in a) or '+ ' (only in
    b), like `diff -u`; a long run of unchanged lines keeps `keep` lines at each end that touches
    a change, and the rest becomes one '...' line."""
    out = []
    ops = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    for n, (op, i1, i2, j1, j2) in enumerate(ops):
        if op != "equal":
            out += [f"- {line}".rstrip() for line in a[i1:i2]] + [f"+ {line}".rstrip() for line in b[j1:j2]]
            continue
        run = [f"  {line}".rstrip() for line in a[i1:i2]]
        head = keep if n > 0 else 0                 # lines after the change before this run
        tail = keep if n < len(ops) - 1 else 0      # lines before the change after this run
        if len(run) >= head + tail + 4:  # cut only where it saves 3 lines or more
            run = run[:head] + [f"  ...  ({len(run) - head - tail} unchanged lines)"] + run[len(run) - tail:]
        out += run
    return out


# ---------------------------------------------------------------------------------------------
# the test


def _inputs(built: Built) -> list[torch.Tensor]:
    out = []
    for t in built.args:
        if t.is_placeholder:
            shape = [evaluate(as_expr(e), built.sizes) for e in t.shape]
            out.append(torch.randn(shape).to(torch_dtype(t.dtype)))
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_primitive_golden(case, golden, monkeypatch):
    text, (pb, pa, before, after) = golden_text(case)
    golden(f"primitives/{case.__name__}.txt", text)

    nest_changed = str(pb) != str(pa)
    code_changed = _code(pb.source()) != _code(pa.source())
    if case is cache_write:
        # Impossible to change the code: Triton keeps accumulators in registers, so cache_write only
        # records itself in the header comment (docs/schedule.md, section 6).
        assert not nest_changed and not code_changed and pb.source() != pa.source()
    elif case is num_warps:
        # A launch option: the nest's header says it; the source only in its header comment.
        assert nest_changed and not code_changed and pb.source() != pa.source()
    else:
        assert code_changed

    # both schedules compute the right thing, on sizes that the tiles do not divide
    _check_semantics(before)
    if case is int64_offsets:
        monkeypatch.setattr(kernel_mod, "_INT32_LIMIT", 100)  # tensors past 100 elements take int64
    kern = _check_semantics(after)
    if case is int64_offsets:
        assert any(form[0] for form in kern._programs)  # the int64 program ran (form: int64, descriptors, facts)


def _check_semantics(built: Built):
    kern = tc.build(built.sched, built.args)
    inputs = _inputs(built)
    want = built.reference(*inputs)
    tol = {torch.float16: 1e-2, torch.bfloat16: 3e-2}.get(want.dtype, 1e-4)
    torch.testing.assert_close(kern(*inputs), want, rtol=tol, atol=tol)
    return kern


def test_each_primitive_docstring_points_at_its_golden_file():
    """The golden files are the primitives' worked examples: each docstring names its file, which exists."""
    from pathlib import Path

    from tilec.schedule.schedule import Schedule, Stage

    root = Path(__file__).resolve().parent / "golden" / "primitives"
    prims = ["split", "tile", "reorder", "fuse", "compute_at", "store_at", "compute_inline", "compute_root", "bind",
             "pipeline", "num_warps", "unroll"]
    for owner, names in ((Stage, prims), (Schedule, ["cache_read", "cache_write"])):
        for name in names:
            doc = getattr(owner, name).__doc__ or ""
            files = re.findall(r"tests/golden/primitives/(\w+\.txt)", doc)
            assert files, f"{owner.__name__}.{name}'s docstring names no golden file"
            for f in files:
                assert (root / f).is_file(), f"{owner.__name__}.{name} names {f}, which does not exist"
