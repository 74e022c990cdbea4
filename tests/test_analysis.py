"""isl analyses besides legality: which partial-tile masks a kernel needs (facts from `tc.assume`,
shape specialization), and the footprints / resource estimates of cached tiles (`tc.analyze`).

Facts are stored on the size variable, so every test makes fresh sizes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from computes import gemm, tile_gemm

import tilec as tc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import common  # noqa: E402
import matmul_silu  # noqa: E402

DEV = common.device()


def randn(*shape, dtype=torch.float32):
    return common.randn(shape, dtype, DEV)


# ---------------------------------------------------------------------------------------------
# C. masks from isl


def tiled_elementwise(bm=64, bn=64):
    """Z = X * 2 + 1 on symbolic (M, N), tiled bm x bn on a 2-D grid; fresh sizes each call."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0 + 1.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, bm, bn)
    s[Z].bind(io, "program_id.0")
    s[Z].bind(jo, "program_id.1")
    return (M, N), (X, Z), s


def masks(source: str) -> set[str]:
    """The mask variables a kernel defines (`mask_i = offs_i < M`)."""
    return set(re.findall(r"^\s*(mask_\w+) = ", source, flags=re.M))


def run_and_check(kernel, x):
    common.check(kernel(x), x * 2.0 + 1.0)


def test_symbolic_sizes_mask_both_axes():
    _, (X, Z), s = tiled_elementwise()
    src = tc.lower(s).source()
    assert masks(src) == {"mask_i", "mask_j"}
    assert "mask_i = offs_i < M" in src and "mask_j = offs_j < N" in src
    kernel = tc.build(s, [X, Z])
    for shape in [(100, 130), (1, 1), (64, 64), (65, 200)]:
        run_and_check(kernel, randn(*shape))


def test_assume_divisible_drops_the_mask_on_that_axis_only():
    (M, N), (X, Z), s = tiled_elementwise()
    tc.assume(M % 64 == 0)
    src = tc.lower(s).source()
    assert masks(src) == {"mask_j"}
    assert "mask_i" not in src and "mask_j = offs_j < N" in src
    kernel = tc.build(s, [X, Z])
    assert masks(kernel.source) == {"mask_j"}
    for shape in [(128, 130), (64, 1), (192, 64)]:
        run_and_check(kernel, randn(*shape))


def test_assumed_multiple_of_a_larger_tile_divides_a_smaller_one():
    (M, N), (X, Z), s = tiled_elementwise(bm=32, bn=16)
    tc.assume(M % 64 == 0)
    tc.assume(N % 48 == 0)  # 48 is a multiple of 16
    assert masks(tc.lower(s).source()) == set()
    run_and_check(tc.build(s, [X, Z]), randn(128, 96))


def test_assumed_multiple_of_a_smaller_tile_keeps_the_mask():
    (M, N), (X, Z), s = tiled_elementwise(bm=128)
    tc.assume(M % 64 == 0)  # M = 64 does not fill a tile of 128
    assert masks(tc.lower(s).source()) == {"mask_i", "mask_j"}
    run_and_check(tc.build(s, [X, Z]), randn(64, 70))


def test_assume_with_a_tile_knob_is_decided_per_config():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0 + 1.0, name="Z")
    s = tc.create_schedule(Z)
    io, jo, ii, ji = s[Z].tile(*Z.axis, tc.knob("BM", [64, 128]), 64)
    s[Z].bind(io, "program_id.0")
    s[Z].bind(jo, "program_id.1")
    tc.assume(M % 64 == 0)
    assert masks(tc.lower(s, {"BM": 64}).source()) == {"mask_j"}
    assert masks(tc.lower(s, {"BM": 128}).source()) == {"mask_i", "mask_j"}
    x = randn(192, 70)
    for bm in (64, 128):
        run_and_check(tc.build(s, [X, Z], config={"BM": bm}), x)


def test_specialize_drops_the_remaining_mask():
    (M, N), (X, Z), s = tiled_elementwise()
    tc.assume(M % 64 == 0)
    src = tc.lower(s, specialize={"N": 256}).source()
    assert masks(src) == set()
    kernel = tc.build(s, [X, Z], specialize={"N": 256})
    assert masks(kernel.source) == set() and "tl.load(X" in kernel.source
    assert "mask=" not in kernel.source
    run_and_check(kernel, randn(128, 256))
    generic = tc.build(s, [X, Z])
    assert masks(generic.source) == {"mask_j"}  # the generic kernel keeps its mask
    run_and_check(generic, randn(128, 200))


def test_specialize_to_a_size_the_tile_does_not_divide_keeps_the_mask():
    (M, N), (X, Z), s = tiled_elementwise()
    kernel = tc.build(s, [X, Z], specialize={"N": 200})
    assert masks(kernel.source) == {"mask_i", "mask_j"}
    run_and_check(kernel, randn(3, 200))


def test_reduction_mask_dropped_by_a_fact_on_k():
    A, W, C = gemm()
    K = A.shape[1]
    (k,) = C.reduce_axis
    s = tc.create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.axis, 16, 16)
    ko, ki = s[C].split(k, 32)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    assert masks(tc.lower(s).source()) == {"mask_i", "mask_j", "mask_k"}
    tc.assume(K % 32 == 0)
    assert masks(tc.lower(s).source()) == {"mask_i", "mask_j"}
    a, w = randn(20, 64), randn(64, 30)
    common.check(tc.build(s, [A, W, C])(a, w), a @ w)


def test_call_that_breaks_a_fact_is_refused():
    (M, N), (X, Z), s = tiled_elementwise()
    tc.assume(M % 64 == 0)
    kernel = tc.build(s, [X, Z])
    with pytest.raises(tc.ArgumentError, match=r"the sizes M=100, N=130 break the fact tc.assume\(.*M % 64.*== 0.*\) "
                                               r"this kernel was compiled with \(its masks rely on it\)"):
        kernel(randn(100, 130))
    run_and_check(kernel, randn(64, 130))  # the kernel still works for sizes that keep the fact


def test_call_with_another_size_than_the_specialization_is_refused():
    (M, N), (X, Z), s = tiled_elementwise()
    kernel = tc.build(s, [X, Z], specialize={"N": 256})
    with pytest.raises(tc.ArgumentError, match=r"this kernel is specialized for N=256, but the tensors give N=128; "
                                               r"build another kernel for that size"):
        kernel(randn(64, 128))
    run_and_check(kernel, randn(7, 256))


def test_call_that_breaks_both_fact_and_specialization_names_one():
    (M, N), (X, Z), s = tiled_elementwise()
    tc.assume(M % 64 == 0)
    kernel = tc.build(s, [X, Z], specialize={"N": 256})
    with pytest.raises(tc.ArgumentError, match=r"specialized for N=256|break the fact"):
        kernel(randn(65, 255))


def test_equality_fact_drops_the_mask():
    (M, N), (X, Z), s = tiled_elementwise()
    tc.assume(M == 128)
    assert masks(tc.lower(s).source()) == {"mask_j"}
    kernel = tc.build(s, [X, Z])
    run_and_check(kernel, randn(128, 3))
    with pytest.raises(tc.ArgumentError, match=r"the sizes M=64, N=64 break the fact tc.assume\(.*M == 128"):
        kernel(randn(64, 64))


@pytest.mark.parametrize("spec", [{"Q": 3}, {"N": "256"}, {"M": 100}], ids=["unknown-name", "not-an-int",
                                                                              "contradicts-a-fact"])
def test_bad_specialization_is_an_argument_error(spec):
    (M, N), (X, Z), s = tiled_elementwise()
    tc.assume(M % 64 == 0)
    with pytest.raises(tc.ArgumentError, match=r"specialize"):
        tc.build(s, [X, Z], specialize=spec)


def test_facts_stay_with_their_own_size_vars():
    """A fact on one computation's M does not drop masks of another computation's M."""
    (M1, _), _, _ = tiled_elementwise()
    tc.assume(M1 % 64 == 0)
    _, (X, Z), s = tiled_elementwise()
    assert masks(tc.lower(s).source()) == {"mask_i", "mask_j"}


# ---------------------------------------------------------------------------------------------
# D. footprints and resources


CONFIGS = [
    {"BM": 64, "BN": 128, "BK": 32, "stages": 2, "warps": 4},
    {"BM": 128, "BN": 64, "BK": 64, "stages": 3, "warps": 8},
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c['BM']}x{c['BN']}x{c['BK']}s{c['stages']}")
def test_gemm_silu_footprints(config):
    s, args = matmul_silu.make()  # A, W in bfloat16 (2 bytes)
    (res,) = tc.analyze(s, config)
    assert res.kernel == "Y_kernel"  # named after what it stores
    assert res.num_warps == config["warps"]
    fp = {f.tensor: f for f in res.footprints}
    assert set(fp) == {"A", "W"}
    BM, BN, BK, st = config["BM"], config["BN"], config["BK"], config["stages"]
    assert fp["A"].box == [BM, BK] and fp["W"].box == [BK, BN]
    assert fp["A"].cache == "A_shared" and fp["W"].cache == "W_shared"
    for f in fp.values():
        assert f.bytes == f.box[0] * f.box[1] * 2
        assert f.buffers == st
    assert res.shared_bytes == sum(f.bytes * f.buffers for f in fp.values()) == (BM * BK + BK * BN) * 2 * st
    assert res.fits
    assert f"A[({BM}*io), ({BK}*ko)]" in fp["A"].offset
    assert f"W[({BK}*ko), ({BN}*jo)]" in fp["W"].offset
    assert "does not fit" not in str(res) and f"shared {res.shared_bytes} B" in str(res)


def test_footprint_bytes_follow_the_dtype():
    """The same schedule in float32: boxes unchanged, bytes doubled."""
    s16, _ = matmul_silu.make()
    A, W, C = gemm()
    s = tc.create_schedule(C)
    ko = tile_gemm(s, C, 64, 128, 32)["ko"]
    s.cache_read(A, "shared", readers=[C]).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C]).compute_at(s[C], ko)
    s[C].pipeline(ko, stages=2)
    (r32,) = tc.analyze(s)
    (r16,) = tc.analyze(s16, CONFIGS[0])
    assert [f.box for f in r32.footprints] == [f.box for f in r16.footprints] == [[64, 32], [32, 128]]
    assert [f.bytes for f in r32.footprints] == [2 * f.bytes for f in r16.footprints]
    assert r32.shared_bytes == 2 * r16.shared_bytes


def test_too_large_a_config_does_not_fit():
    s, _ = matmul_silu.make()
    config = {"BM": 256, "BN": 256, "BK": 64, "stages": 4, "warps": 4}
    (res,) = tc.analyze(s, config)
    assert res.shared_bytes == (256 * 64 + 64 * 256) * 2 * 4 == 262_144
    assert res.shared_bytes > 232_448
    assert not res.fits
    assert "does not fit" in str(res)


def test_kernel_resources_equal_the_analysis_of_its_config():
    s, args = matmul_silu.make()
    for config in CONFIGS:
        kernel = tc.build(s, args, config=config)
        assert kernel.config == config
        assert kernel.resources == tc.analyze(s, kernel.config)
    kernel = tc.build(s, args)  # defaults: every knob's first choice
    assert kernel.resources == tc.analyze(s, kernel.config) == tc.analyze(s)


def test_one_resource_entry_per_kernel_and_none_without_caches():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Z1 = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z1")
    c = tc.reduce_axis(N, name="c")
    R = tc.compute((M,), lambda r: tc.sum(Z1[r, c], axis=c), name="R")
    s = tc.create_schedule(R)
    res = tc.analyze(s)
    assert [r.kernel for r in res] == ["Z1_kernel", "R_kernel"]
    assert all(r.footprints == [] and r.shared_bytes == 0 and r.fits for r in res)
