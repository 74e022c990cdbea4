"""The exceptions tilec raises. Every one is a `TilecError`, so `except tc.TilecError` catches all.

- `IllegalScheduleError`: a schedule that would compute the wrong answer (a dependence, rounding,
  bounds or parallelism violation). Carries `.primitive`, `.stage`, `.reason`, `.counterexample`.
- `LoweringError`: a legal schedule that Triton cannot express, with the fix in the message.
  `TileExtentError`, a `LoweringError`, is no longer raised (a tile of any extent lowers: one that is no
  power of two is padded); it stays exported for code that catches it.
- `ArgumentError`: a bad argument, to a primitive or at call time (also a `ValueError` and a
  `TypeError`, so code that catches those keeps working).

`UserError` is the `tilec` command's: a mistake on its command line or in the file it loads. It is not
a `TilecError`, so that the tuner never takes one for a refused candidate.
"""

from __future__ import annotations


class TilecError(Exception):
    """Base class of every error tilec raises on purpose: catch it to catch them all.

    Every message says what was wrong and what would be right.

    Example:
        >>> try:
        ...     tc.knob("BM", [])
        ... except tc.TilecError as e:
        ...     print(type(e).__name__)
        ArgumentError
    """


class IllegalScheduleError(TilecError):
    """A schedule that would compute a wrong answer: a dependence, rounding, bounds or parallelism violation.

    Raised by the primitive that makes the schedule illegal (it is undone first), and by `tc.lower` and
    `tc.build`, which check the whole schedule again with the real config.

    Args:
        message: what is wrong, with a concrete counterexample and the legal alternatives.
        primitive: the primitive that was refused (`"compute_at"`, or `"build"`).
        stage: the name of the stage it was applied to.
        reason: `"rounding"`, `"dependence"`, `"parallel"`, `"bounds"`, `"flow"` or `"online"`.
        counterexample: the instance pair (or sizes) that shows the violation.

    Example:
        >>> io, ii = s[C].split(i, 64)
        >>> try:
        ...     s[C].bind(s[C].split(k, 32)[0], "program_id.1")
        ... except tc.IllegalScheduleError as e:
        ...     print(e.primitive, e.stage, e.reason)
        bind C parallel
    """

    def __init__(self, message: str, *, primitive: str | None = None, stage: str | None = None,
                 reason: str | None = None, counterexample: object = None):
        super().__init__(message)
        self.primitive = primitive
        self.stage = stage
        self.reason = reason
        self.counterexample = counterexample


class LoweringError(TilecError):
    """A legal schedule that cannot be expressed in Triton (a pipelined tile axis, a swizzle whose axis is
    not bound to the grid); the message says what would be.

    Raised by a primitive where no later primitive could make the schedule lowerable, otherwise by
    `tc.lower` and `tc.build`.

    Example:
        >>> io, ii = s[C].split(i, 64)
        >>> try:
        ...     s[C].pipeline(ii, 2)
        ... except tc.LoweringError as e:
        ...     print(str(e)[:60])
        pipeline(C.ii): ii is a tile axis (the inner axis of split(i
    """


class TileExtentError(LoweringError):
    """A tile (a `split`'s inner axis, a `tl.arange` dimension) of an extent Triton cannot have. No longer
    raised by the lowering: a tile that is no power of two, where power-of-two sub-tiles do not serve, is
    padded to the next power of two, its lanes past the extent masked. The class stays exported (a
    `LoweringError`) for code that catches it.

    Args:
        message: what is wrong and the extents that would lower.
        stage: the `Stage` whose tile it is (tilec.errors, the bottom layer, imports no schedule class).
        split: the `Split` that made the tile.
        extent: the tile's extent under the config.
        combination: True where it is refused only because another axis of the stage has sub-tiles (so
            another choice of that axis's knob could make it lower).
        root: whether `stage` is the root of its kernel.

    Example:
        >>> issubclass(tc.TileExtentError, tc.LoweringError)
        True
        >>> io, ii = s[C].split(i, 100)  # a tile of 100 lowers, padded to 128
        >>> "tl.arange(0, 128)" in tc.lower(s).source()
        True
    """

    def __init__(self, message: str, *, stage: object, split: object, extent: int, combination: bool, root: bool):
        super().__init__(message)
        self.stage, self.split, self.extent, self.combination, self.root = stage, split, extent, combination, root


class ArgumentError(TilecError, ValueError, TypeError):
    """A bad argument: to a compute or schedule call, or a tensor handed to a kernel.

    Also a `ValueError` and a `TypeError`, so code that catches those keeps working. The message names
    the argument (`argument 2, 'factor' to split: ...`) and what it expects.

    Example:
        >>> try:
        ...     s[C].split(i, 0)
        ... except ValueError as e:
        ...     print(e)
        argument 2, 'factor' to split: expected a positive int or a tc.knob, got 0
    """


class UserError(Exception):
    """Something the user of the `tilec` command can fix (a bad flag, a missing file, a reference that
    raises): printed as one `error: ...` line, exit status 2. Not a `TilecError` (see the module docstring)."""
