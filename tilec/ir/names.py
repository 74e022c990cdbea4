"""Validation of the names users give tensors and axes: they become identifiers in generated code."""

from __future__ import annotations

import keyword

from tilec.errors import ArgumentError

# Names the generated Triton source uses for itself; a user tensor or axis may not take them.
RESERVED = frozenset({"tl", "triton", "torch", "math", "pid", "range", "min", "max", "abs", "float", "int"})


def check_name(name: object, what: str) -> str:
    """Return `name` if it is a plain identifier that is safe to emit; otherwise raise ArgumentError."""
    if not isinstance(name, str):
        raise ArgumentError(f"{what}: expected a name (str), got {type(name).__name__} {name!r}")
    if not name.isidentifier() or not name.isascii() or keyword.iskeyword(name):
        raise ArgumentError(
            f"{what}: {name!r} is not a valid identifier; names become variables in the generated "
            "Triton code, so use letters, digits and '_' (not starting with a digit), e.g. 'A' or 'k'")
    if name.startswith("_") or name in RESERVED:
        raise ArgumentError(
            f"{what}: {name!r} is reserved for the generated code (names starting with '_' and "
            f"{', '.join(sorted(RESERVED))}); pick another name")
    return name
