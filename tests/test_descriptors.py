"""Tensor-descriptor (TMA) loads (the Hopper GEMM issue): `cache_read(..., tma=True)` reads a cached tile as
`desc.load([row, col])` where the tile is a block of the tensor bounded only by its edges; a call whose
tensors TMA cannot read (unaligned, strided last dim, int64 sizes) runs the pointer form of the same
kernels. Every case runs against torch (the interpreter on a CPU) on sizes no tile divides, size-1 dims
and NaN/Inf inputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
import tilec.runtime.kernel as kernel_mod
from tilec.lower.program import Program

sys.path.insert(0, str(Path(__file__).parent))
import computes  # noqa: E402

SIZES = [(37, 45, 29), (1, 1, 1), (16, 32, 16), (70, 9, 40)]


def gemm_silu_tma(tma=True, bn=16, bias=False):
    A, W, C, Y = computes.gemm_silu()
    s = tc.create_schedule(Y)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, bn)
    ko, ki = s[C].split(C.reduce_axis[0], 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].swizzle(io, jo, 2), "program_id.0")
    s.cache_read(A, "shared", readers=[C], tma=tma).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C], tma=tma).compute_at(s[C], ko)
    s[Y].compute_at(s[C], s[C].leaves[0])
    return s, (A, W, C, Y)


def _used_descriptors(kern) -> list[bool]:
    """For each remembered call form: whether its launches pass tensor descriptors."""
    return [any(launch.descs for launch in call[3]) for call in kern._calls.values()]


def _run(kern, a, w):
    out = torch.full((a.shape[0], w.shape[1]), float("nan"))
    kern(a, w, out=out)
    torch.testing.assert_close(out, torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("sizes", SIZES)
def test_descriptor_loads_match_torch(sizes):
    s, (A, W, C, Y) = gemm_silu_tma()
    kern = tc.build(s, [A, W, Y])
    M, N, K = sizes
    a, w = torch.randn(M, K), torch.randn(K, N)
    _run(kern, a, w)
    a[0, -1], w[-1, 0] = float("nan"), float("inf")
    _run(kern, a, w)
    assert _used_descriptors(kern) == [K * 4 % 16 == 0 and N * 4 % 16 == 0]  # TMA's 16-byte row strides


def test_the_source_reads_through_descriptors():
    s, _ = gemm_silu_tma()
    src = Program(s).source()
    assert "a_tile = A_desc_16x16.load([io * 16, ko * 16])" in src
    assert "w_tile = W_desc_16x16.load([ko * 16, jo * 16])" in src
    pointer = Program(s, descriptors=False).source()
    assert "_desc" not in pointer and pointer.count("tl.load(") == 2
    assert "(tensor descriptor)" in str(tc.lower(s))


def test_unaligned_or_strided_tensors_take_the_pointer_form():
    s, (A, W, C, Y) = gemm_silu_tma()
    kern = tc.build(s, [A, W, Y])
    a, w = torch.randn(37, 32), torch.randn(32, 48)
    _run(kern, a, w)  # aligned: descriptors
    base = torch.randn(37 * 32 + 1)
    _run(kern, base[1:].view(37, 32), w)  # 4 bytes off 16-byte alignment: pointers
    _run(kern, torch.randn(32, 37).t(), w)  # a strided last dim: pointers
    _run(kern, a, w)
    assert _used_descriptors(kern) == [True, False, False]  # the aligned call's launches are kept


def test_a_broadcast_input_takes_the_pointer_form():
    s, (A, W, C, Y) = gemm_silu_tma()
    kern = tc.build(s, [A, W, Y])
    a = torch.randn(1, 32).expand(37, 32)  # stride 0 along M
    _run(kern, a, torch.randn(32, 48))
    assert _used_descriptors(kern) == [False]


def test_sub_tiles_get_a_descriptor_per_block_shape():
    s, (A, W, C, Y) = gemm_silu_tma(bn=48)
    src = Program(s).source()
    assert "W_desc_16x32.load([ko * 16, jo * 48])" in src and "W_desc_16x16.load([ko * 16, jo * 48 + 32])" in src
    kern = tc.build(s, [A, W, Y])
    for M, N, K in [(37, 100, 32), (5, 48, 16)]:
        _run(kern, torch.randn(M, K), torch.randn(K, N))


def test_a_tile_that_is_not_a_block_keeps_its_pointer_load():
    """The per-row scale b is 1-D (TMA needs 2 to 5 dims); X[i, N - 1 - j] is not a block of X."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    b = tc.placeholder((M,), "float32", name="b")
    S = tc.compute((M, N), lambda i, j: X[i, N - 1 - j] * b[i], name="S")
    s = tc.create_schedule(S)
    io, jo, ii, ji = s[S].tile(*S.axis, 16, 32)
    s[S].bind(io, "program_id.0")
    s.cache_read(b, "shared", readers=[S], tma=True).compute_at(s[S], io)
    s.cache_read(X, "shared", readers=[S], tma=True).compute_at(s[S], jo)
    src = Program(s).source()
    assert "_desc" not in src and src.count("tl.load(") == 2
    x, bb = torch.randn(20, 70), torch.randn(20)
    torch.testing.assert_close(tc.build(s, [X, b, S])(x, bb), x.flip(1) * bb[:, None])


def test_the_int64_form_reads_through_pointers(monkeypatch):
    monkeypatch.setattr(kernel_mod, "_INT32_LIMIT", 100)  # tensors past 100 elements take int64
    s, (A, W, C, Y) = gemm_silu_tma()
    kern = tc.build(s, [A, W, Y])
    _run(kern, torch.randn(37, 32), torch.randn(32, 48))
    assert {form[:2] for form in kern._programs} == {(False, True), (True, False)}  # [2]: the call's facts
    assert "_desc" not in kern._program(True).source()


def test_tma_in_the_trace_and_as_a_flag():
    s, (A, W, C, Y) = gemm_silu_tma(tma=tc.flag("TMA"))
    assert "cache_read(A, 'shared', readers=[C], tma=TMA) -> A_shared" in s.log
    assert 'TMA = tc.flag("TMA")' in str(s.trace)
    again = tc.replay(s.trace, [Y])
    assert again.fingerprint() == s.fingerprint()
    assert "_desc" in Program(s, {"TMA": 1}).source() and "_desc" not in Program(s, {"TMA": 0}).source()
    s0, _ = gemm_silu_tma(tma=False)
    assert "cache_read(A, 'shared', readers=[C]) -> A_shared" in s0.log  # the log of untouched schedules


def test_tma_argument_is_checked():
    A, W, C = computes.gemm()
    s = tc.create_schedule(C)
    with pytest.raises(tc.ArgumentError, match=r"argument 4, 'tma' to cache_read: expected True, False or a "
                                               r"tc.flag, got 'yes'"):
        s.cache_read(A, "shared", readers=[C], tma="yes")
    s[C].split(C.axis[0], tc.knob("TMA", [16, 32]))
    with pytest.raises(tc.ArgumentError, match=r"'TMA' is already a knob"):
        s.cache_read(A, "shared", readers=[C], tma=tc.flag("TMA"))


# -- stores: cache_write(..., tma=True) ------------------------------------------------------------

def gemm_silu_tma_store(store=True, bn=16, loads=True):
    s, (A, W, C, Y) = gemm_silu_tma(tma=loads, bn=bn)
    s.cache_write(Y, "local", tma=store)
    return s, (A, W, C, Y)


@pytest.mark.parametrize("sizes", SIZES)
def test_descriptor_stores_match_torch(sizes):
    """The epilogue's tile written by `Y_desc.store(...)`: the edge tiles too (TMA writes nothing past the
    tensor's edge, which a NaN-filled out= would show), with NaN/Inf inputs."""
    s, (A, W, C, Y) = gemm_silu_tma_store()
    kern = tc.build(s, [A, W, Y])
    M, N, K = sizes
    a, w = torch.randn(M, K), torch.randn(K, N)
    _run(kern, a, w)
    a[0, -1], w[-1, 0] = float("nan"), float("inf")
    _run(kern, a, w)
    assert _used_descriptors(kern) == [K * 4 % 16 == 0 and N * 4 % 16 == 0]


def test_a_descriptor_store_writes_nothing_past_the_tensors_edge():
    """out= the front of a larger buffer: the last row of tiles runs past out's 37 rows, and TMA's box is
    clipped at the tensor's edge, so the buffer's rest keeps its values."""
    s, (A, W, C, Y) = gemm_silu_tma_store()
    kern = tc.build(s, [A, W, Y])
    a, w = torch.randn(37, 32), torch.randn(32, 40)
    buf = torch.full((48 * 40,), 7.0)
    out = buf[:37 * 40].view(37, 40)
    kern(a, w, out=out)
    torch.testing.assert_close(out, torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)
    assert torch.equal(buf[37 * 40:], torch.full((11 * 40,), 7.0))
    assert _used_descriptors(kern) == [True]


def test_the_source_stores_through_a_descriptor():
    s, _ = gemm_silu_tma_store(loads=False)
    src = Program(s).source()
    assert "Y_desc_16x16.store([io * 16, jo * 16], Y_val)" in src and "tl.load(" in src
    pointer = Program(s, descriptors=False).source()
    assert "_desc" not in pointer and "tl.store(Y + " in pointer
    assert "Y[i, j] = Y_val  # store, float32  (tensor descriptor)" in str(tc.lower(s))


def test_sub_tiles_store_through_a_descriptor_per_piece():
    s, (A, W, C, Y) = gemm_silu_tma_store(bn=48)
    src = Program(s).source()
    assert "Y_desc_16x32.store([io * 16, jo * 48], Y_val)" in src
    assert "Y_desc_16x16.store([io * 16, jo * 48 + 32], Y_val_1)" in src
    kern = tc.build(s, [A, W, Y])
    for M, N, K in [(37, 100, 32), (5, 48, 16)]:
        _run(kern, torch.randn(M, K), torch.randn(K, N))


def test_an_unaligned_out_takes_the_pointer_store():
    s, (A, W, C, Y) = gemm_silu_tma_store()
    kern = tc.build(s, [A, W, Y])
    a, w = torch.randn(37, 32), torch.randn(32, 48)
    base = torch.full((37 * 48 + 1,), float("nan"))
    out = base[1:].view(37, 48)  # 4 bytes off TMA's 16-byte alignment
    kern(a, w, out=out)
    torch.testing.assert_close(out, torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)
    assert torch.isnan(base[0]) and _used_descriptors(kern) == [False]


def test_a_store_that_is_not_a_block_keeps_its_pointer_store():
    """A 1-D output (TMA needs 2 to 5 dims) is stored by pointers whatever cache_write asks."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.sum(X[i, k], axis=k), name="R")
    s = tc.create_schedule(R)
    io, ii = s[R].split(R.axis[0], 16)
    s[R].bind(io, "program_id.0")
    s.cache_write(R, "local", tma=True)
    src = Program(s).source()
    assert "_desc" not in src and "tl.store(R + " in src
    x = torch.randn(20, 70)
    torch.testing.assert_close(tc.build(s, [X, R])(x), x.sum(1), rtol=1e-5, atol=1e-5)


def test_tma_store_in_the_trace_and_checked():
    s, (A, W, C, Y) = gemm_silu_tma_store(store=tc.flag("TMA_STORE"))
    assert "cache_write(Y, 'local', tma=TMA_STORE) -> Y_local" in s.log
    again = tc.replay(s.trace, [Y])
    assert again.fingerprint() == s.fingerprint()
    assert ".store([" in Program(s, {"TMA_STORE": 1}).source()
    assert ".store([" not in Program(s, {"TMA_STORE": 0}).source()
    s0, (A, W, C, Y) = gemm_silu_tma(tma=False)
    with pytest.raises(tc.ArgumentError, match=r"argument 3, 'tma' to cache_write: expected True, False or a "
                                               r"tc.flag, got 1.5"):
        s0.cache_write(Y, "local", tma=1.5)


def test_a_block_past_tmas_256_element_box_takes_the_pointer_form():
    """A tensor map's box has at most 256 elements a dimension: a 16 x 512 tile with tma=True is read by
    pointers (on the GPU the descriptor would fail at launch), with the same result."""
    assert kernel_mod._descriptor_fits(torch.empty(64, 1024), [16, 256])
    assert not kernel_mod._descriptor_fits(torch.empty(64, 1024), [16, 512])
    s, (A, W, C, Y) = gemm_silu_tma(bn=512)
    kern = tc.build(s, [A, W, Y])
    _run(kern, torch.randn(20, 32), torch.randn(32, 600))
    assert _used_descriptors(kern) == [False]
