"""The math functions of the compute language (tilec.ir.expr.MATH), `**` / tc.pow and tc.clamp against torch:
every function in float32, float16 and int32 on random values and on the edges (signed zeros, halves, tiny and
huge values, NaN, infinities), the powers torch computes by shortcuts and by C's pow, integer powers that wrap,
and the refusals (a bool argument, an integer power by a computed or negative exponent)."""

from __future__ import annotations

import math

import pytest
import torch

import tilec as tc
from tilec.ir.expr import MATH

N = tc.size_vars("N")
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-7, -1e-7, 1e-30, 88.0, -100.0, 1e5, 3.0e38,
         float("nan"), float("inf"), float("-inf")]
TORCH = {"silu": torch.nn.functional.silu}


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _run(body, xs, out_dtype, block=64):
    """One kernel: Y[i] = body(x0[i], x1[i], ...), split by `block`."""
    ps = [tc.placeholder((N,), _dtype(x), f"X{k}") for k, x in enumerate(xs)]
    Y = tc.compute((N,), lambda i: body(*[p[i] for p in ps]), name="Y", dtype=out_dtype)
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[0], block)
    return tc.build(s, [*ps, Y])(*xs)


def _same(out, ref, rtol):
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert torch.equal(out.isnan(), ref.isnan()), "NaN where torch has none, or none where it has one"
    o, r = out.double(), ref.double()
    ok = torch.isclose(o, r, rtol=rtol, atol=1e-6) | (o.isnan() & r.isnan())
    bad = (~ok).nonzero().flatten()
    assert bad.numel() == 0, f"{bad.numel()} values differ, e.g. {o[bad[:3]].tolist()} != {r[bad[:3]].tolist()}"


def _values(dtype: str) -> torch.Tensor:
    if dtype == "int32":
        return torch.randint(-50, 50, (101,), dtype=torch.int32)
    x = torch.cat([torch.randn(181) * 3, torch.tensor(EDGES)])
    return x.to(getattr(torch, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("fn", list(MATH))
def test_math_function_matches_torch(fn, dtype):
    """tc.<fn> computes torch's function, its result of torch's type (an integer's floor is itself, its sin a
    float32), within a few units in the last place; NaN exactly where torch's is."""
    x = _values(dtype)
    tfn = TORCH.get(fn) or getattr(torch, fn)
    ref = tfn(x.float() if fn == "silu" and dtype == "int32" else x)
    out = _run(getattr(tc, fn), [x], _dtype(ref))
    _same(out, ref, rtol=2e-6 if dtype != "float16" else 1e-3)


def test_math_table_is_the_api():
    """Every MATH function is tc.<name>, with torch's function named in its docstring."""
    for fn, (torch_name, _) in MATH.items():
        assert getattr(tc, fn).__name__ == fn and torch_name in getattr(tc, fn).__doc__


POW_A = torch.cat([torch.randn(100) * 3, torch.tensor([0.0, -0.0, 1.0, -1.0, -2.0, 2.0, math.nan, math.inf, -math.inf,
                                                       -1.0, 0.0, -0.0, -0.0, -math.inf])])
POW_B = torch.cat([torch.randn(100) * 2, torch.tensor([0.0, -1.0, math.nan, math.inf, 3.0, -3.0, 0.0, -2.0, 3.0,
                                                       -math.inf, -1.0, -1.0, 2.7, 2.7])])


@pytest.mark.parametrize("exponent", [None, 0, 1, 2, 3, 7, -1, -2, 0.5, -0.5, 2.7, -1.3])
def test_float_power_matches_torch(exponent):
    """x ** y and x ** c (torch's shortcuts for 2, 3, 0.5, -0.5, -1, -2; C's pow otherwise): signed zeros,
    negative bases, infinities and NaN as torch has them."""
    if exponent is None:
        out, ref = _run(lambda a, b: a ** b, [POW_A, POW_B], "float32"), POW_A ** POW_B
    else:
        out, ref = _run(lambda a: a ** exponent, [POW_A], "float32"), POW_A ** exponent
    _same(out, ref, rtol=1e-5)


def test_number_to_a_power_and_pow():
    """2.0 ** x and tc.pow(x, y) are the same pow."""
    _same(_run(lambda b: 2.0 ** b, [POW_B], "float32"), 2.0 ** POW_B, rtol=1e-5)
    _same(_run(lambda a, b: tc.pow(a, b), [POW_A, POW_B], "float32"), torch.pow(POW_A, POW_B), rtol=1e-5)


@pytest.mark.parametrize("dtype,n", [("int32", 0), ("int32", 2), ("int32", 5), ("int32", 13), ("int8", 3),
                                     ("uint8", 5), ("int64", 9)])
def test_integer_power_wraps_as_torch(dtype, n):
    """An integer to a constant power is its product, wrapped to the type as torch's is."""
    x = torch.randint(-9 if dtype != "uint8" else 0, 9, (57,), dtype=getattr(torch, dtype))
    assert torch.equal(_run(lambda a: a ** n, [x], dtype), x ** n)


def test_clamp_matches_torch():
    """tc.clamp with tensor bounds, one bound, min > max (then max) and NaN anywhere (NaN)."""
    lo = torch.cat([torch.full((100,), -1.0), torch.tensor([math.nan, 0.0, 2.0, -math.inf] * 3 + [0.0, 0.0])])
    _same(_run(lambda a, lo_, hi: tc.clamp(a, lo_, hi), [POW_A, lo, POW_B], "float32"),
          torch.clamp(POW_A, lo, POW_B), rtol=0)
    _same(_run(lambda a: tc.clamp(a, min=0.0), [POW_A], "float32"), torch.clamp(POW_A, min=0.0), rtol=0)
    _same(_run(lambda a: tc.clamp(a, max=0.5), [POW_A], "float32"), torch.clamp(POW_A, max=0.5), rtol=0)


def test_python_rounding_builds_tilec_rounding():
    """round(x), math.floor, math.ceil and math.trunc on an expression build tc.round, floor, ceil, trunc."""
    x = _values("float32")
    for py, tfn in ((round, torch.round), (math.floor, torch.floor), (math.ceil, torch.ceil), (math.trunc, torch.trunc)):
        _same(_run(py, [x], "float32"), tfn(x), rtol=0)


def test_round_halves_to_even():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 8388607.5, 8388609.0, -3.5])
    _same(_run(tc.round, [x], "float32"), torch.round(x), rtol=0)


def test_math_refusals():
    X = tc.placeholder((N,), "float32", "Xr")
    Ii = tc.placeholder((N,), "int32", "Ir")
    with pytest.raises(tc.ArgumentError, match="bool value is not supported"):
        tc.sin(X[0] > 0)
    with pytest.raises(tc.ArgumentError, match="constant exponent >= 0"):
        Ii[0] ** Ii[0]
    with pytest.raises(tc.ArgumentError, match="constant exponent >= 0"):
        Ii[0] ** -1
    with pytest.raises(tc.ArgumentError, match="power of or by a bool"):
        X[0] ** (X[0] > 0)
    with pytest.raises(tc.ArgumentError, match="give min, max or both"):
        tc.clamp(X[0])
    with pytest.raises(tc.ArgumentError, match="whole numbers only"):
        round(X[0], 2)


def test_math_of_integers_keeps_or_widens_type():
    Ii = tc.placeholder((N,), "int16", "Ik")
    assert tc.floor(Ii[0]).dtype == "int16" and tc.abs(Ii[0]).dtype == "int16" and tc.sign(Ii[0]).dtype == "int16"
    assert tc.sin(Ii[0]).dtype == "float32" and (Ii[0] ** 0.5).dtype == "float32" and (Ii[0] ** 2).dtype == "int16"


def test_language_page_lists_every_expression():
    """docs/language.md names every math function with its torch function, every random kind and operator."""
    from pathlib import Path

    from tilec.ir.expr import RANDOM
    page = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text()
    for fn, (torch_name, _) in MATH.items():
        assert f"| `tc.{fn}(x)` | `{torch_name}` |" in page, fn
    for kind in RANDOM:
        assert f"`tc.{kind}(seed, offset)`" in page, kind
    for op in ("a + b", "a / b", "a // b", "a ** b", "-a", "a << b", "tc.where(c, a, b)", "tc.clamp(x, min, max)",
               "tc.maximum(a, b)", "tc.sum(x, axis=k", "tc.max(x, axis=k)", 'x.astype("bfloat16")',
               "tc.cumsum(x, axis=t", "tc.cumprod(x, axis=t", "tc.cummax(x, axis=t)", "tc.cummin(x, axis=t)",
               "tc.linear_scan(a, b, axis=t)", "tc.sort(x, axis=t, descending=False)",
               "tc.argsort(x, axis=t, descending=False)"):
        assert f"`{op}" in page, op


def test_extent_refuses_math_power_and_random():
    for bad in (lambda n: tc.floor(n), lambda n: n ** 2, lambda n: tc.randint(1, n)):
        with pytest.raises(tc.ArgumentError, match="an extent may"):
            tc.reduce_axis(bad(N), name="k")
