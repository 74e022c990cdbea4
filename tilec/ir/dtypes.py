"""Element types: torch's names, their Triton spellings, and the promotion rule of expressions.

A compute's dtype is a rounding point (the stored value is rounded to it); between rounding points
floating-point arithmetic runs in float32, so low-precision values are widened when loaded.
"""

from __future__ import annotations

import torch

from tilec.errors import ArgumentError

# torch name -> Triton name
_TRITON = {
    "float64": "tl.float64",
    "float32": "tl.float32",
    "float16": "tl.float16",
    "bfloat16": "tl.bfloat16",
    "float8_e4m3fn": "tl.float8e4nv",
    "float8_e5m2": "tl.float8e5",
    "int64": "tl.int64",
    "int32": "tl.int32",
    "int16": "tl.int16",
    "int8": "tl.int8",
    "uint8": "tl.uint8",
    "uint16": "tl.uint16",
    "bool": "tl.int1",
}
DTYPES = tuple(_TRITON)
UNSIGNED = ("uint8", "uint16")
FLOATS = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def check_dtype(dtype: object, what: str = "dtype") -> str:
    """Return `dtype` as a torch name ('bfloat16'), accepting a torch.dtype too; else ArgumentError."""
    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    if not isinstance(dtype, str) or dtype not in _TRITON:
        raise ArgumentError(f"{what}: expected one of {', '.join(DTYPES)}, got {dtype!r}")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def triton_name(dtype: str) -> str:
    return _TRITON[dtype]


def torch_dtype(dtype: str) -> torch.dtype:
    return getattr(torch, dtype)


def compute_dtype(dtype: str) -> str:
    """The type arithmetic on a value of `dtype` runs in: float32 for floats narrower than it."""
    if is_float(dtype):
        return "float64" if dtype == "float64" else "float32"
    return "int32" if dtype in ("int8", "int16", "uint8", "uint16") else dtype


def promote(a: str, b: str) -> str:
    """torch's promotion of two dtypes (float8 promotes through float32). torch promotes no uint16; tilec extends
    its rule: uint16 with bool or uint8 is uint16, with a float that float, with a signed int the wider of it and
    int32 (the narrowest signed type holding both)."""
    if a == b:
        return a
    if "uint16" in (a, b):
        other = b if a == "uint16" else a
        if other in ("bool", "uint8"):
            return "uint16"
        if is_float(other):
            return compute_dtype(other) if other.startswith("float8") else other
        return "int64" if other == "int64" else "int32"
    if a.startswith("float8") or b.startswith("float8"):
        a, b = compute_dtype(a), compute_dtype(b)
    return str(torch.promote_types(torch_dtype(a), torch_dtype(b))).removeprefix("torch.")


def itemsize(dtype: str) -> int:
    return torch_dtype(dtype).itemsize
