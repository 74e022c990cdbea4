"""tc.rand / tc.randn / tc.randint: Triton's Philox, checked against the algorithm written out in numpy
(suite/harness.py's `philox`), bit for bit for rand and randint; the same numbers under any schedule (a
counter-based generator is a pure function of seed and offset); seeds from an input or a constant; refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilec as tc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from suite.harness import philox  # noqa: E402

M, N = tc.size_vars("M N")


def _draw(kind, schedule=None, seed_input=True, offset=lambda i, j: i * N + j, keep_r=True):
    X = tc.placeholder((M, N), "float32", "X")
    S = tc.placeholder((1,), "int64", "S")
    fn = getattr(tc, kind)
    R = tc.compute((M, N), lambda i, j: fn(S[0] if seed_input else 12345, offset(i, j)), name="R")
    Y = tc.compute((M, N), lambda i, j: X[i, j] + R[i, j].astype("float32"), name="Y")
    s = tc.create_schedule([R, Y] if keep_r else Y)
    if schedule:
        schedule(s, R, Y)
    outs = [R, Y] if keep_r else [Y]
    return tc.build(s, [X, S, *outs] if seed_input else [X, *outs])


@pytest.mark.parametrize("kind", ["rand", "randint", "randn"])
def test_random_matches_philox(kind):
    """The numbers are Philox's for (seed, offset), the seed's high word included."""
    seed = 0x1234_5678_9ABC
    k = _draw(kind, lambda s, R, Y: s[R].split(R.axis[1], 16))
    x = torch.randn(7, 45)
    r, y = k(x, torch.tensor([seed]))
    ref = philox(seed, torch.arange(7 * 45).view(7, 45), kind)
    assert r.dtype == ref.dtype
    if kind == "randn":
        assert torch.allclose(r, ref, rtol=1e-5, atol=1e-5)
        assert abs(r.mean()) < 0.2 and 0.8 < r.std() < 1.2
    else:
        assert torch.equal(r, ref)
    assert torch.allclose(y, x + r.float())
    if kind == "rand":
        assert r.min() >= 0 and r.max() < 1


def test_random_is_the_same_under_any_schedule():
    """Tiles, programs, fusion and inlining change nothing: each element's offset alone picks its number."""
    def tiled(s, R, Y):
        i, j = Y.axis
        io, jo, _, _ = s[Y].tile(i, j, 4, 32)
        s[Y].bind(io, "program_id.0")
        s[R].compute_inline()

    def fused(s, R, Y):
        i, j = Y.axis
        ij = s[Y].fuse(i, j)
        o, _ = s[Y].split(ij, 64)
        s[R].compute_at(s[Y], o)

    x = torch.randn(9, 70)
    seed = torch.tensor([7])
    base = _draw("rand")(x, seed)[1]
    assert torch.equal(base, x + philox(7, torch.arange(9 * 70).view(9, 70)))
    for sched in (tiled, fused):
        assert torch.equal(_draw("rand", sched, keep_r=False)(x, seed), base)
    assert not torch.equal(_draw("rand")(x, torch.tensor([8]))[1], base), "another seed, other numbers"


def test_constant_seed_and_int64_offset():
    """A seed written in the compute; an offset that is int64 (its high word is Philox's second counter)."""
    k = _draw("randint", seed_input=False, offset=lambda i, j: (i * N + j).astype("int64") + 2**33)
    r, _ = k(torch.randn(3, 5))
    assert torch.equal(r, philox(12345, torch.arange(15).view(3, 5) + 2**33, "randint"))


def test_random_refusals():
    X = tc.placeholder((M, N), "float32", "Xq")
    with pytest.raises(tc.ArgumentError, match="the seed must be an integer"):
        tc.rand(X[0, 0], 0)
    with pytest.raises(tc.ArgumentError, match="the offset must be an integer"):
        tc.randn(1, X[0, 0])
