"""Golden files: the printed loop nest and the emitted Triton source (the GPU form) of canonical
schedules, compared verbatim. Refresh on purpose with `pytest --update-golden` and read the diff."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import tilec as tc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import computes  # noqa: E402

NAMES = ["matmul", "matmul_silu", "swiglu", "splitk_gemm", "rmsnorm", "softmax", "transpose_bias", "batched_matmul",
         "silu_mul_fp8", "rowscale_fp8", "attention", "blur", "separable5", "stencil_after_reduction",
         "attention_lse", "cross_entropy", "blur_sliding"]


@pytest.mark.parametrize("name", NAMES)
def test_example_golden(name, golden):
    s, _ = importlib.import_module(name).make()
    prog = tc.lower(s, target="cuda")
    golden(f"{name}.nest.txt", str(prog))
    golden(f"{name}.triton.txt", prog.source())


def _default_computes():
    _, _, C = computes.gemm("float32", in_dtype="float16")  # float16 inputs, C stored as its float32 sum
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    c = tc.reduce_axis(N, name="c")
    mx = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="mx")
    Y = tc.compute((M, N), lambda r, col: tc.exp(X[r, col] - mx[r]), name="Y")
    return {"default_gemm": C, "default_two_kernels": Y}


@pytest.mark.parametrize("name", ["default_gemm", "default_two_kernels"])
def test_default_schedule_golden(name, golden):
    """Unscheduled computes get the default schedule; its code is stable too."""
    out = _default_computes()[name]
    prog = tc.lower(tc.create_schedule(out), target="cuda")
    golden(f"{name}.nest.txt", str(prog))
    golden(f"{name}.triton.txt", prog.source())


def test_interpreter_form_differs_only_in_bf16_dot():
    """The interpreter form widens bf16 tl.dot operands (Triton's interpreter gets them wrong);
    nothing else differs from the GPU form."""
    s, _ = importlib.import_module("matmul_silu").make()
    gpu = tc.lower(s, target="cuda").source().splitlines()
    cpu = tc.lower(s, target="interpreter").source().splitlines()
    diff = [(g, c) for g, c in zip(gpu, cpu) if g != c]
    assert len(gpu) == len(cpu) and len(diff) == 1
    assert "tl.dot(a_tile, w_tile, acc_C)" in diff[0][0]
    assert 'a_tile.to(tl.float32)' in diff[0][1] and 'input_precision="ieee"' in diff[0][1]


def _scan_schedules():
    """A running sum with a reader in its scan loop, a recurrence over 2-d tiles (rows x steps), and the experts
    of 4 tokens ordered by a descending argsort."""
    B, T = tc.size_vars("B T")
    X = tc.placeholder((B, T), "float32", name="X")
    Y = tc.compute((B, T), lambda b, t: tc.cumsum(X[b, t], axis=t), name="Y")
    Z = tc.compute((B, T), lambda b, t: Y[b, t] * 2.0, name="Z")
    s1 = tc.create_schedule(Z)
    to, ti = s1[Y].split(Y.axis[1], 64)
    s1[Y].bind(Y.axis[0], "program_id.0")
    s1[Z].compute_at(s1[Y], to)
    A = tc.placeholder((B, T), "float16", name="A")
    H = tc.compute((B, T), lambda b, t: tc.linear_scan(A[b, t], X[b, t], axis=t), name="H", dtype="float16")
    s2 = tc.create_schedule(H)
    bo, bi = s2[H].split(H.axis[0], 4)
    to, ti = s2[H].split(H.axis[1], 32)
    s2[H].reorder(bo, to, bi, ti)
    s2[H].bind(bo, "program_id.0")
    T2, E = tc.size_vars("T2 E")
    tc.assume(E <= 64)
    G = tc.placeholder((T2, E), "float32", name="G")
    order = tc.compute((T2, E), lambda t, e: tc.argsort(G[t, e], axis=e, descending=True), name="order")
    s3 = tc.create_schedule(order)
    to, ti = s3[order].split(order.axis[0], 4)
    eo, ei = s3[order].split(order.axis[1], 64)
    s3[order].reorder(to, eo, ti, ei)
    s3[order].bind(to, "program_id.0")
    return {"scan_cumsum": s1, "scan_linear": s2, "sort_argsort": s3}


@pytest.mark.parametrize("name", ["scan_cumsum", "scan_linear", "sort_argsort"])
def test_scan_golden(name, golden):
    """A scan's carry, its tile scan (tl.cumsum; tl.associative_scan of a recurrence's pairs) and the last lane;
    a sort's keys (a float's bits ordered as the float, NaN largest) packed with the positions."""
    prog = tc.lower(_scan_schedules()[name], target="cuda")
    golden(f"{name}.nest.txt", str(prog))
    golden(f"{name}.triton.txt", prog.source())


def _scatter_schedules():
    """A histogram (int32 atomic adds at data positions, out-of-range ones masked) and a cache write (a store at
    a data row of a (S, D) cache, unique=True), each over tiles of its domain."""
    N = tc.size_vars("N")
    x = tc.placeholder((N,), "int64", name="x")
    count = tc.scatter((100,), (N,), lambda i: x[i], lambda i: 1, combine="add", dtype="int32", name="count")
    s1 = tc.create_schedule(count)
    io, ii = s1[count].split(count.axis[0], tc.knob("BN", [1024, 512]))
    s1[count].bind(io, "program_id.0")
    T, S, D = tc.size_vars("T S D")
    cache = tc.placeholder((S, D), "bfloat16", name="cache")
    slot = tc.placeholder((T,), "int32", name="slot")
    k = tc.placeholder((T, D), "bfloat16", name="k")
    new = tc.scatter(cache, (T, D), lambda t, d: (slot[t], d), lambda t, d: k[t, d], unique=True, name="new")
    s2 = tc.create_schedule(new)
    do, di = s2[new].split(new.axis[1], 64)
    s2[new].bind(new.axis[0], "program_id.0")
    return {"scatter_histogram": s1, "scatter_cache_write": s2}


@pytest.mark.parametrize("name", ["scatter_histogram", "scatter_cache_write"])
def test_scatter_golden(name, golden):
    """A scatter's store at its positions: the address over the tile, the mask to the output's bounds, tl.store
    or tl.atomic_add."""
    prog = tc.lower(_scatter_schedules()[name], target="cuda")
    golden(f"{name}.nest.txt", str(prog))
    golden(f"{name}.triton.txt", prog.source())
