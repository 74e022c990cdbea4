"""The exceptions tilec raises. Every one is a `TilecError`, so `except tc.TilecError` catches all.

- `IllegalScheduleError`: a schedule that would compute the wrong answer (a dependence, rounding,
  bounds or parallelism violation). Carries `.primitive`, `.stage`, `.reason`, `.counterexample`.
- `LoweringError`: a legal schedule that Triton cannot express (e.g. a non-power-of-two tile), with
  the fix in the message.
- `ArgumentError`: a bad argument, to a primitive or at call time (also a `ValueError` and a
  `TypeError`, so code that catches those keeps working).
"""

from __future__ import annotations


class TilecError(Exception):
    """Base class of every error tilec raises on purpose."""


class IllegalScheduleError(TilecError):
    """A schedule that would compute a wrong answer."""

    def __init__(self, message: str, *, primitive: str | None = None, stage: str | None = None,
                 reason: str | None = None, counterexample: object = None):
        super().__init__(message)
        self.primitive = primitive
        self.stage = stage
        self.reason = reason
        self.counterexample = counterexample


class LoweringError(TilecError):
    """A legal schedule that cannot be expressed in Triton; the message says what would be."""


class ArgumentError(TilecError, ValueError, TypeError):
    """A bad argument: to a compute or schedule call, or a tensor handed to a kernel."""
