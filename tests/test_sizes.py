"""Sizes read from a product dimension (issue 26): `(M, 2 * D)` (silu_and_mul), llm.c's flat `(B, T, 3 * C)` and
`3 * NH * HS` with HS read from another input: the call reads the unknown factor, the shape check refuses a
dimension the other factors do not divide, the dumped kernel file reads them the same way; a size that no input
holds is given at the call by name (`kernel(x, V=...)`)."""

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


def _row_scale():
    M, V = tc.size_vars("M V")
    X = tc.placeholder((M,), "float32", "X")
    Y = tc.compute((M, V), lambda i, v: X[i] * (v + 1), name="Y")
    return tc.build(tc.create_schedule(Y), [X, Y])


def test_size_in_no_input_is_given_at_the_call(tmp_path):
    """A size no input's shape holds (a runtime vocabulary size) is given by name: kernel(x, V=...); each value is
    its own call (launches kept per value); the dumped file's launch takes it by keyword too."""
    k = _row_scale()
    assert k.call_sizes == ["V"]
    x = torch.randn(5)
    for v in (7, 1, 130, 7):
        y = k(x, V=v)
        assert y.shape == (5, v) and torch.equal(y, x[:, None] * torch.arange(1, v + 1, dtype=torch.float32))
    out = torch.empty(5, 3)
    assert k(x, V=3, out=out) is out and torch.equal(out, x[:, None] * torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(tc.ArgumentError, match=r"out Y: expected shape \(5, 4\)"):
        k(x, V=4, out=out)
    path = k.dump(tmp_path / "k.py", M=5, V=9)
    run = subprocess.run([sys.executable, str(path), "M=4", "V=6"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Y: shape (4, 6) torch.float32" in run.stdout


@pytest.mark.parametrize("sizes,message", [
    ({}, r"size V is in no input's shape, so the call gives it: kernel\(\.\.\., V=\.\.\.\)"),
    ({"V": 3, "M": 5}, r"size M is read from X's shape \(dimension 0\); give only the sizes no input's shape holds \(V\)"),
    ({"V": 3, "W": 1}, r"unexpected keyword W: not a size of this kernel; the sizes a call gives by name are V"),
    ({"V": -1}, r"size V must be an int >= 0, got -1"),
    ({"V": True}, r"size V must be an int >= 0, got True"),
    ({"V": 2.0}, r"size V must be an int >= 0, got 2.0"),
])
def test_call_sizes_are_checked(sizes, message):
    with pytest.raises(tc.ArgumentError, match=message):
        _row_scale()(torch.randn(5), **sizes)


def test_a_kernel_with_all_sizes_read_takes_no_size():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", "X")
    Y = tc.compute((M,), lambda i: X[i] * 2.0, name="Y")
    k = tc.build(tc.create_schedule(Y), [X, Y])
    assert k.call_sizes == []
    with pytest.raises(tc.ArgumentError, match="size M is read from X's shape"):
        k(torch.randn(3), M=3)


def test_call_sizes_refused_where_sizes_come_from_tensors():
    """A custom op and the tuner read every size from tensors: a kernel with a size given at the call is refused
    with the reason, not run wrong."""
    k = _row_scale()
    with pytest.raises(tc.ArgumentError, match=r"as_op\('row_scale_v'\): the size V is in no input's shape"):
        k.as_op("row_scale_v")
    M, V = tc.size_vars("M V")
    X = tc.placeholder((M,), "float32", "X")
    Y = tc.compute((M, V), lambda i, v: X[i] * v, name="Y")
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[1], tc.knob("B", [16, 32]))
    mix = tc.ShapeMix([({"M": 8, "V": 5}, 1)])
    with pytest.raises(tc.ArgumentError, match=r"tc.tune: the size V is in no input's shape"):
        tc.tune(s, mix, trials=1, args=[X, Y], jobs=0)


def test_two_unknown_factors_are_given_at_the_call():
    """(M, A * B) with neither A nor B read elsewhere: the product does not say how it splits, so both are given
    at the call, and the shape check holds the product to the dimension."""
    M, A, B = tc.size_vars("M A B")
    X = tc.placeholder((M, A * B), "float32", "X")
    Y = tc.compute((M, A), lambda i, a: X[i, a * B], name="Y")
    k = tc.build(tc.create_schedule(Y), [X, Y])
    assert k.call_sizes == ["A", "B"]
    x = torch.randn(3, 12)
    assert torch.equal(k(x, A=4, B=3), x[:, ::3])
    assert torch.equal(k(x, A=3, B=4), x[:, ::4])
    with pytest.raises(tc.ArgumentError, match=r"X: expected shape \(3, 10\)"):
        k(x, A=5, B=2)
