"""Knobs: named choices (`tc.knob("BM", [64, 128])`) that stand wherever a factor or count goes.

A schedule with knobs is a family of kernels; a config (`{"BM": 128}`) picks one. The tuner searches
the knobs; without a config each knob takes its first choice.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

from tilec.errors import ArgumentError
from tilec.ir.expr import Expr
from tilec.ir.names import check_name


class Knob(Expr):
    """A tunable integer: `tc.knob("BM", [64, 128, 256])`. The first choice is the default.

    It stands wherever a split factor, a pipeline depth or a warp count goes; a config (`{"BM": 128}`)
    picks one choice, and `tc.tune` searches them. In the Triton source it is a `tl.constexpr` parameter
    of its name. Its str() is its name (`BM`), as it appears in extents (`cdiv(M, BM)`) and messages;
    its repr is the call that makes it (`tc.knob("BM", [64, 128])`, as a schedule's trace writes it);
    `.name`, `.choices` and `.default` are its facts.

    Args:
        name: an identifier (it names the kernel parameter), unique in the schedule.
        choices: distinct positive ints; the first is the default.

    Raises:
        ArgumentError: the name is no identifier, or the choices are empty, not positive ints, or repeat.

    Example:
        >>> BM = tc.knob("BM", [64, 128])
        >>> BM, BM.name, BM.choices, BM.default
        (tc.knob("BM", [64, 128]), 'BM', (64, 128), 64)
        >>> print(BM, M * BM)  # in an expression, by name
        BM (M * BM)
    """

    dtype = "int32"

    def __init__(self, name: str, choices: Sequence[int]):
        self.knob_name = check_name(name, "knob name")
        choices = list(choices) if isinstance(choices, (list, tuple, range)) else None
        if not choices or not all(_is_int(c) and c > 0 for c in choices):
            raise ArgumentError(f"knob {name!r}: choices must be a non-empty list of positive ints, "
                                f"e.g. tc.knob({name!r}, [64, 128])")
        choices = [int(c) for c in choices]  # plain ints: an IntEnum's repr is not a number
        if len(set(choices)) != len(choices):
            raise ArgumentError(f"knob {name!r}: choices repeat a value: {choices}")
        self.choices = tuple(choices)

    @property
    def name(self) -> str:
        return self.knob_name

    @property
    def default(self) -> int:
        return self.choices[0]

    def __str__(self):
        return self.knob_name

    def __repr__(self):
        return f'tc.knob("{self.knob_name}", {list(self.choices)})'


class Flag(Knob):
    """A tunable on/off switch: `tc.flag("FLATTEN")`, choices 0 (off, the default) and 1 (on). It
    stands where a primitive takes a bool (`persistent(f, flatten=tc.flag("FLATTEN"))`), never as a
    factor or count.

    Args:
        name: an identifier, unique in the schedule.

    Raises:
        ArgumentError: the name is no identifier.

    Example:
        >>> TMA = tc.flag("TMA")
        >>> TMA, TMA.choices
        (tc.flag("TMA"), (0, 1))
    """

    def __init__(self, name: str):
        self.knob_name = check_name(name, "flag name")
        self.choices = (0, 1)

    def __repr__(self):
        return f'tc.flag("{self.knob_name}")'


def flag(name: str) -> Flag:
    """Declare a tunable on/off switch (choices 0 and 1), e.g. tl.range's flatten in `persistent` or
    the `tma` of `cache_read`.

    Args:
        name: an identifier, unique in the schedule.

    Returns:
        The `Flag`; pass it where a primitive takes a bool.

    Raises:
        ArgumentError: the name is no identifier.

    Example:
        >>> tma = tc.flag("TMA")
        >>> cache = s.cache_read(A, "shared", readers=[C], tma=tma)
        >>> sorted(s.knobs)
        ['TMA']
    """
    return Flag(name)


def knob(name: str, choices: Sequence[int]) -> Knob:
    """Declare a tunable value; use it as a split factor, pipeline depth or warp count.

    One name means one knob across the whole schedule (a name declared again with other choices is
    refused). A split by a knob must offer choices that can all be its tile (powers of two, or multiples
    of 16 lowered as sub-tiles on a spatial axis of a kernel's root stage) when one of them can.

    Args:
        name: an identifier (it names the kernel parameter).
        choices: distinct positive ints; the first is the default (what `tc.lower(s)` uses).

    Returns:
        The `Knob`.

    Raises:
        ArgumentError: the name is no identifier, or the choices are empty, not positive ints, or repeat.

    Example:
        >>> BM = tc.knob("BM", [64, 128])
        >>> io, ii = s[C].split(i, BM)
        >>> print(tc.lower(s, config={"BM": 128}))  # doctest: +ELLIPSIS
        kernel C_kernel  (stages: C; num_warps=4)
          config: BM=128
        ...
    """
    return Knob(name, choices)


def resolve_config(knobs: Mapping[str, Knob], config: Mapping[str, int] | None) -> dict[str, int]:
    """Complete `config` with each knob's default; reject unknown names and values not offered.

    A config is a dict (any Mapping) of knob name -> int; a value must be an int (16.0 and True are
    refused even where they compare equal to a choice) and is returned as a plain int.
    """
    have = ", ".join(sorted(knobs)) or "none"
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ArgumentError(f"config: expected a dict of knob name -> int, e.g. {{'BM': 128}}, got "
                            f"{type(config).__name__} {config!r}")
    config = dict(config)
    for name in config:
        if not isinstance(name, str):
            raise ArgumentError(f"config: knob names are strs, got {name!r} (the schedule's knobs: {have})")
    unknown = sorted(set(config) - set(knobs))
    if unknown:
        raise ArgumentError(f"config names {', '.join(map(repr, unknown))}, which the schedule does not "
                            f"use; its knobs are: {have}")
    out = {}
    for name, k in knobs.items():
        value = config.get(name, k.default)
        if not _is_int(value):
            raise ArgumentError(f"config {name}={value!r}: expected an int, one of the choices of knob "
                                f"{name!r}: {list(k.choices)}")
        value = int(value)
        if value not in k.choices:
            raise ArgumentError(f"config {name}={value!r} is not one of the choices of knob {name!r}: "
                                f"{list(k.choices)}")
        out[name] = value
    return out


def _is_int(value) -> bool:
    """An integer that is not a bool: a Python int (or subclass) or a numpy integer."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def factor_value(factor, config: Mapping[str, int]) -> int:
    """The int a factor stands for under `config` (a Knob looks itself up)."""
    return config[factor.knob_name] if isinstance(factor, Knob) else factor
