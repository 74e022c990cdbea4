"""`ShapeMix`: the shapes a program really calls a kernel with, weighted by how often."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tilec.errors import ArgumentError


class ShapeMix:
    """`tc.ShapeMix([({"M": 256}, 8), ({"M": 1536}, 1)], fixed={"K": 4096, "N": 12288})`.

    Weights are call counts or frequencies; they are normalised. `fixed` sizes apply to every shape.
    """

    def __init__(self, shapes: Sequence, fixed: Mapping[str, int] | None = None):
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
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w <= 0:
                raise ArgumentError(f"ShapeMix: entry {n}'s weight must be a positive number, got {w!r}")
            full = {**fixed, **sizes}
            for k, v in full.items():
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ArgumentError(f"ShapeMix: size {k} of entry {n} must be a positive int, got {v!r}")
            if full in self.shapes:
                raise ArgumentError(f"ShapeMix: the shape {full} is listed twice; add the weights instead")
            self.shapes.append(full)
            weights.append(float(w))
        total = sum(weights)
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
        fx = {k: int(v) for k, v in (p.split("=") for p in fixed.split(",") if p)} if fixed else {}
        shapes = []
        if "|" in text or ";" in text:
            for part in text.split("|"):
                sizes, w = part.rsplit(":", 1)
                shapes.append(({k: int(v) for k, v in (p.split("=") for p in sizes.split(";"))}, float(w)))
        else:
            name, rest = text.split("=", 1)
            for part in rest.split(","):
                v, _, w = part.partition(":")
                shapes.append(({name.strip(): int(v)}, float(w or 1)))
        return cls(shapes, fixed=fx)

    def __repr__(self):
        return "ShapeMix(" + ", ".join(f"{self.key(s)}: {w:.3f}" for s, w in self) + ")"
