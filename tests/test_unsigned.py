"""uint16 (images, packed weights): loads, stores and arithmetic against torch computed in int32 and wrapped.

torch stores uint16 but computes little on it (no add, no shift, no promotion), so the reference computes in
int32 and converts back, which wraps as tilec's rounding point does. tilec's promotion extends torch's lattice:
uint16 with bool or uint8 is uint16, with a signed int the wider of it and int32, with a float that float."""

from __future__ import annotations

import pytest
import torch

import tilec as tc
from tilec.ir.dtypes import promote

N = tc.size_vars("N")


def _u16(n, lo=0, hi=65536):
    return torch.randint(lo, hi, (n,), dtype=torch.int32).to(torch.uint16)


def _build(body, dtypes_in, out_dtype):
    ps = [tc.placeholder((N,), d, f"X{k}") for k, d in enumerate(dtypes_in)]
    Y = tc.compute((N,), lambda i: body(*[p[i] for p in ps]), name="Y", dtype=out_dtype)
    s = tc.create_schedule(Y)
    s[Y].split(Y.axis[0], 32)
    return tc.build(s, [*ps, Y])


@pytest.mark.parametrize("name,body,ref", [
    ("wrap add", lambda a, b: a + b, lambda a, b: a + b),
    ("mul", lambda a, b: a * 3, lambda a, b: a * 3),
    ("sub below zero", lambda a, b: a - b, lambda a, b: a - b),
    ("shift right is logical", lambda a, b: a >> 3, lambda a, b: a >> 3),
    ("shift by 16 or more is 0", lambda a, b: (a >> 17) + (a << 16), lambda a, b: a * 0),
    ("floor div", lambda a, b: a // (b % 7 + 1), lambda a, b: a // (b % 7 + 1)),
    ("compare", lambda a, b: (a > b).astype("uint16"), lambda a, b: (a > b).int()),
    ("max", lambda a, b: tc.maximum(a, b), lambda a, b: torch.maximum(a, b)),
    ("invert", lambda a, b: ~a, lambda a, b: ~a),
])
def test_uint16_arithmetic_wraps_as_int32_then_uint16(name, body, ref):
    a, b = _u16(300), _u16(300)
    out = _build(body, ["uint16", "uint16"], "uint16")(a, b)
    assert out.dtype == torch.uint16
    expect = ref(a.int(), b.int()).to(torch.uint16)
    assert torch.equal(out.int(), expect.int()), name


def test_uint16_to_float_and_back():
    """A uint16 image blurred in float32 and rounded back (the values above 32767 stay positive)."""
    a = _u16(257)
    out = _build(lambda x: (x.astype("float32") * 0.5 + 0.25).astype("uint16"), ["uint16"], "uint16")(a)
    assert torch.equal(out.int(), (a.float() * 0.5 + 0.25).to(torch.int32).to(torch.uint16).int())
    f = _build(lambda x: x * 1.0, ["uint16"], "float32")(a)
    assert torch.equal(f, a.float())


def test_uint16_promotion():
    assert promote("uint16", "uint8") == "uint16" and promote("uint16", "bool") == "uint16"
    assert promote("uint16", "int8") == "int32" and promote("uint16", "int16") == "int32"
    assert promote("uint16", "int64") == "int64" and promote("uint16", "float16") == "float16"
    assert promote("uint16", "float8_e4m3fn") == "float32"
    U = tc.placeholder((N,), "uint16", "U")
    assert (U[0] + 1).dtype == "uint16" and (U[0] + 1.5).dtype == "float32"
    a = _u16(100, 60000)
    i8 = torch.randint(-100, 100, (100,), dtype=torch.int8)
    out = _build(lambda x, y: x + y, ["uint16", "int8"], "int32")(a, i8)
    assert torch.equal(out, a.int() + i8.int())  # uint16 + int8 is int32: 65535 + 1 does not wrap
