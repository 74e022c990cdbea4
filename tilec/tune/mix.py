"""`ShapeMix`: the shapes a program really calls a kernel with, weighted by how often.

Sizes are positive ints and weights positive finite numbers (NaN, infinities, zero and negative
weights are refused); `ShapeMix.parse` reads the command line's form and says what it could not read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tilec.errors import ArgumentError
from tilec.ir.tensor import sizes_of


class ShapeMix:
    """The shapes a kernel is called with and how often: what `tc.tune` measures and plans for.

    Each shape gives every size of the schedule (the tuner refuses a mix that misses one or names one the
    schedule lacks); `fixed` sizes are added to every shape (a shape's own sizes win). Weights are call
    counts or frequencies, normalised to sum to 1: a config's objective is the weighted time
    sum_s w_s * t_s. `.shapes` (full size dicts) and `.weights` hold them, iterating gives
    (shape, weight) pairs, `ShapeMix.key(shape)` names a shape ("K=4096,M=256,N=12288", the key of
    `Tuned.kernels`), and `ShapeMix.parse` reads the command line's form. It prints as its shapes and
    weights.

    Args:
        shapes: a non-empty list of (sizes, weight) pairs: sizes a dict of size name -> positive int,
            weight a positive finite number.
        fixed: size name -> positive int, the sizes shared by every shape.

    Raises:
        ArgumentError: `shapes` is empty or not a list, an entry is no (dict, weight) pair, a weight is not a
            positive finite number (NaN, infinities, zero and negative weights are refused), a size name is
            no identifier or a size no positive int, a shape is listed twice, or the weights add up to
            infinity.

    Example:
        >>> mix = tc.ShapeMix([({"M": 256}, 8), ({"M": 1536}, 2)], fixed={"K": 4096, "N": 12288})
        >>> mix
        ShapeMix(K=4096,M=256,N=12288: 0.800, K=4096,M=1536,N=12288: 0.200)
        >>> mix.shapes[1], mix.weights
        ({'K': 4096, 'N': 12288, 'M': 1536}, [0.8, 0.2])
        >>> tc.ShapeMix.parse("M=256:8,1536:2", fixed="K=4096,N=12288").weights
        [0.8, 0.2]
    """

    def __init__(self, shapes: Sequence[tuple[Mapping[str, int], float]], fixed: Mapping[str, int] | None = None):
        fixed = dict(fixed or {})
        if not isinstance(shapes, (list, tuple)) or not shapes:
            raise ArgumentError("ShapeMix: expected a non-empty list of (sizes, weight) pairs, e.g. "
                                "[({'M': 256}, 8), ({'M': 1536}, 1)]")
        self.shapes: list[dict[str, int]] = []
        weights = []
        for n, item in enumerate(shapes):
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], Mapping)):
                raise ArgumentError(f"ShapeMix: entry {n} must be (sizes dict, weight), got {item!r}")
            sizes, w = item
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < math.inf:
                raise ArgumentError(f"ShapeMix: entry {n}'s weight must be a positive number, got {w!r}")
            full = {**fixed, **sizes}
            for k, v in full.items():
                if not isinstance(k, str) or not k.isidentifier():
                    raise ArgumentError(f"ShapeMix: entry {n} names size {k!r}; size names are identifiers like M")
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ArgumentError(f"ShapeMix: size {k} of entry {n} must be a positive int, got {v!r}")
            if full in self.shapes:
                raise ArgumentError(f"ShapeMix: the shape {full} is listed twice; add the weights instead")
            self.shapes.append(full)
            weights.append(float(w))
        total = sum(weights)
        if not math.isfinite(total):
            raise ArgumentError(f"ShapeMix: the weights add up to {total}; give call counts or frequencies "
                                f"of a sensible size")
        self.weights = [w / total for w in weights]
        self.fixed = fixed

    def __iter__(self):
        return iter(zip(self.shapes, self.weights))

    def __len__(self):
        return len(self.shapes)

    @staticmethod
    def key(sizes: Mapping[str, int]) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(sizes.items()))

    @classmethod
    def parse(cls, text: str, fixed: str = "") -> ShapeMix:
        """The command line's form: "M=256:8,1536:1,2048:1" (one varying size, value:weight) or
        "M=256;N=64:8|M=512;N=64:1" (several sizes), with fixed "K=4096,N=12288"."""
        if not isinstance(text, str) or not isinstance(fixed, str):
            raise ArgumentError(f"ShapeMix.parse: expected strings, got {text!r} and {fixed!r}")
        fx = dict(_size(p, "fixed size") for p in fixed.split(",") if p.strip())
        shapes = []
        if "|" in text or ";" in text:
            for part in text.split("|"):
                sizes, colon, w = part.rpartition(":")
                if not colon:
                    raise ArgumentError(f"ShapeMix.parse: shape {part!r} has no weight; write sizes:weight, "
                                        f"e.g. M=256;N=64:8")
                shapes.append((dict(_size(p, "size") for p in sizes.split(";")), _weight(w)))
        else:
            name, eq, rest = text.partition("=")
            if not eq or not name.strip().isidentifier():
                raise ArgumentError(f"ShapeMix.parse: cannot read {text!r}: expected NAME=value:weight,..., "
                                    f"e.g. M=256:8,1536:1")
            for part in rest.split(","):
                v, _, w = part.partition(":")
                shapes.append((dict([_size(f"{name}={v}", "size")]), _weight(w or "1")))
        return cls(shapes, fixed=fx)

    def check_sizes(self, sched, what: str = "the schedule", add: str = "put it in fixed=") -> None:
        """Every shape must give exactly the sizes of `sched` (`tilec.ir.tensor.sizes_of`, the one
        definition): none missing, none it does not use. `what` names the schedule in the message,
        `add` says where a missing size goes."""
        need = sorted(sizes_of(sched.tensors.values()))
        for shape in self.shapes:
            missing, extra = [n for n in need if n not in shape], sorted(set(shape) - set(need))
            if missing:
                raise ArgumentError(f"the mix's shape {ShapeMix.key(shape)} does not give size {', '.join(missing)} "
                                    f"of {what}; every shape needs {', '.join(need)} ({add})")
            if extra:
                raise ArgumentError(f"the mix gives size {', '.join(extra)}, which {what} does not use (its "
                                    f"sizes: {', '.join(need) or 'none'})")

    def __repr__(self):
        return "ShapeMix(" + ", ".join(f"{self.key(s)}: {w:.3f}" for s, w in self) + ")"


def _size(text: str, what: str) -> tuple[str, int]:
    """"M=256" -> ("M", 256), or an ArgumentError naming what is wrong."""
    name, eq, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not eq or not name.isidentifier():
        raise ArgumentError(f"ShapeMix.parse: cannot read {what} {text.strip()!r}: expected NAME=int, e.g. M=256")
    try:
        n = int(value)
    except ValueError:
        raise ArgumentError(f"ShapeMix.parse: {what} {name}={value!r} is not an int; sizes are positive "
                            f"ints, e.g. {name}=256") from None
    if n < 1:
        raise ArgumentError(f"ShapeMix.parse: {what} {name}={n} must be a positive int")
    return name, n


def _weight(text: str) -> float:
    try:
        w = float(text)
    except ValueError:
        raise ArgumentError(f"ShapeMix.parse: weight {text.strip()!r} is not a number; weights are positive "
                            f"numbers (call counts or frequencies), e.g. M=256:8") from None
    if not 0 < w < math.inf:
        raise ArgumentError(f"ShapeMix.parse: a weight must be a positive number (finite, not zero), got "
                            f"{text.strip()!r}")
    return w
