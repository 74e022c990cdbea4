"""The runtime: calling conventions, out=, strided inputs, caching, and the 64-bit index path."""

from __future__ import annotations

import pytest
import torch

import tilec as tc
from tilec.runtime import kernel as kernel_mod


def _axpy():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.placeholder((M, N), "float32", name="Y")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0 + Y[i, j], name="Z")
    return X, Y, Z


def test_outputs_allocated_given_positionally_or_by_out():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    x, y = torch.randn(30, 40), torch.randn(30, 40)
    ref = x * 2 + y
    assert torch.equal(k(x, y), ref)
    z = torch.full((30, 40), float("nan"))
    assert k(x, y, z) is z and torch.equal(z, ref)
    z2 = torch.full((30, 40), float("nan"))
    assert k(x, y, out=z2) is z2 and torch.equal(z2, ref)


def test_strided_inputs_and_outputs():
    """Views (transposed, sliced) are read through their strides; a transposed out is written so."""
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    xb, yb = torch.randn(40, 30), torch.randn(30, 80)
    x, y = xb.t(), yb[:, ::2]
    out = torch.empty(40, 30).t()
    k(x, y, out=out)
    assert torch.equal(out, x * 2 + y)


def test_broadcast_input_with_zero_stride():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    x = torch.randn(1, 40).expand(30, 40)
    y = torch.randn(30, 40)
    assert torch.equal(k(x, y), x * 2 + y)


def test_compiled_module_is_cached():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    k(torch.randn(4, 4), torch.randn(4, 4))
    n = len(kernel_mod._MODULES)
    k(torch.randn(9, 5), torch.randn(9, 5))
    k2 = tc.build(tc.create_schedule(Z), [X, Y, Z])
    k2(torch.randn(3, 3), torch.randn(3, 3))
    assert len(kernel_mod._MODULES) == n


def test_int64_indexing_path(monkeypatch):
    """Past 2**31 elements offsets are computed in 64 bits; shown here by lowering the limit."""
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    assert "tl.int64" not in k.source
    monkeypatch.setattr(kernel_mod, "_INT32_LIMIT", 100)
    x, y = torch.randn(30, 40), torch.randn(30, 40)
    assert torch.equal(k(x, y), x * 2 + y)
    assert (True, False) in k._programs and "tl.program_id(0).to(tl.int64)" in k._programs[True, False].source()


def test_empty_tensor_launches_nothing():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    out = k(torch.randn(0, 5), torch.randn(0, 5))
    assert out.shape == (0, 5)


def test_config_selects_knob_values_and_kernel_reports_it():
    X, Y, Z = _axpy()
    s = tc.create_schedule(Z)
    i, j = Z.axis
    io, jo, ii, ji = s[Z].tile(i, j, tc.knob("BM", [8, 16]), tc.knob("BN", [32, 64]))
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    k = tc.build(s, [X, Y, Z], config={"BN": 64})
    assert k.config == {"BM": 8, "BN": 64}
    assert "# config: BM=8, BN=64" in k.source
    x, y = torch.randn(20, 100), torch.randn(20, 100)
    assert torch.equal(k(x, y), x * 2 + y)


def test_grid_dim_limit_is_reported():
    M = tc.size_vars("M")[0]
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    (i,) = Z.axis
    io, ii = s[Z].split(i, 1)
    s[Z].bind(io, "program_id.1")
    k = tc.build(s, [X, Z])
    with pytest.raises(tc.LoweringError, match="65535 on grid dims 1 and 2"):
        k(torch.randn(70000))


def test_a_kernel_too_large_for_the_device_is_a_lowering_error(monkeypatch):
    """Fuzz seed 922140 on the H200: a tl.dot whose operand tile (64 x 1024 float32) Triton stages in
    shared memory needs more than the device has; Triton raises OutOfResources at the first launch,
    which must reach the user as a LoweringError that says what to change, not an internal error."""
    from triton.runtime.errors import OutOfResources

    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    mod = kernel_mod.load_module(k.source)
    name = k.program.kernels[0].name

    class TooLarge:
        __name__ = name

        def __getitem__(self, grid):
            def launch(**kwargs):
                raise OutOfResources(262144, 232448, "shared memory")
            return launch

    monkeypatch.setattr(mod, name, TooLarge())
    x = torch.randn(37, 45)
    with pytest.raises(tc.LoweringError, match=rf"{name}: the compiled kernel needs more shared memory .*"
                                               r"262144 needed, 232448 available.*smaller split factors"):
        k(x, x)
