"""Sizes read from a product dimension (issue 26): `(M, 2 * D)` (silu_and_mul), llm.c's flat `(B, T, 3 * C)` and
`3 * NH * HS` with HS read from another input: the call reads the unknown factor, the shape check refuses a
dimension the other factors do not divide, the dumped kernel file reads them the same way; a size that no input
holds is refused at build with the reason."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import tilec as tc


def test_silu_and_mul_reads_d_from_2d():
    M, D = tc.size_vars("M D")
    X = tc.placeholder((M, 2 * D), "float32", "X")
    Y = tc.compute((M, D), lambda i, j: tc.silu(X[i, j]) * X[i, j + D], name="Y")
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], 64)
    k = tc.build(s, [X, Y])
    for m, d in ((5, 37), (1, 1), (3, 70)):
        x = torch.randn(m, 2 * d)
        y = k(x)
        assert y.shape == (m, d) and torch.allclose(y, torch.nn.functional.silu(x[:, :d]) * x[:, d:], atol=1e-6)
    with pytest.raises(tc.ArgumentError, match=r"X: expected shape \(5, 74\) \(\(M, \(2 \* D\)\) with M=5, D=37\), "
                                               r"got \(5, 75\)"):
        k(torch.randn(5, 75))


def _qkv_kernel():
    B, T, NH, HS = tc.size_vars("B T NH HS")
    QKV = tc.placeholder((B, T, 3 * NH * HS), "float32", "QKV")
    W = tc.placeholder((HS,), "float32", "W")
    K = tc.compute((B, NH, T, HS), lambda b, h, t, d: QKV[b, t, NH * HS + h * HS + d] * W[d], name="K")
    return tc.build(tc.create_schedule(K), [QKV, W, K])


def test_flat_qkv_reads_nh_from_a_product_with_a_size_read_elsewhere(tmp_path):
    """llm.c's (B, T, 3C) with C = NH * HS: HS is W's plain dimension, NH the one unknown factor of 3 * NH * HS."""
    k = _qkv_kernel()
    qkv, w = torch.randn(2, 3, 3 * 4 * 5), torch.randn(5)
    ref = qkv[:, :, 20:40].view(2, 3, 4, 5).permute(0, 2, 1, 3) * w
    assert torch.equal(k(qkv, w), ref)
    with pytest.raises(tc.ArgumentError, match="QKV: expected shape"):
        k(torch.randn(2, 3, 61), w)
    path = k.dump(tmp_path / "qkv.py", B=2, T=3, NH=4, HS=5)
    text = path.read_text()
    assert "NH = QKV.shape[2] // max((3 * HS), 1)" in text
    out = subprocess.run([sys.executable, str(path), "B=1", "T=2", "NH=3", "HS=7"], capture_output=True, text=True,
                         check=True).stdout
    assert "K: shape (1, 3, 2, 7)" in out


def test_size_in_no_input_is_refused():
    M, V = tc.size_vars("M V")
    X = tc.placeholder((M,), "float32", "X")
    Y = tc.compute((M, V), lambda i, v: X[i] * v, name="Y")
    with pytest.raises(tc.ArgumentError, match=r"size V appears in no input's shape as a dimension \(the size itself, "
                                               r"or a product of it with ints"):
        tc.build(tc.create_schedule(Y), [X, Y])


def test_two_unknown_factors_are_refused():
    """(M, A * B) with neither A nor B read elsewhere: the product does not say how it splits."""
    M, A, B = tc.size_vars("M A B")
    X = tc.placeholder((M, A * B), "float32", "X")
    Y = tc.compute((M, A), lambda i, a: X[i, a * B], name="Y")
    with pytest.raises(tc.ArgumentError, match="size A, B appears in no input's shape"):
        tc.build(tc.create_schedule(Y), [X, Y])
