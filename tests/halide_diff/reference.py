"""The float64 reference of a `gen.Pipeline`, with a bound on how far a float32 computation may be from it.

Every stage is computed in float64 from its inputs and rounded to its dtype when stored (float32, or
float16/bfloat16 for a stored rounding point; a round trip rounds to the narrow type and back), as tilec's
rounding points say (docs/schedule.md). Beside each value goes a magnitude `mag`, a bound on the sum of
the absolute values of the terms that made it (for a sum, the sum of |terms|; for a product, the product
of the magnitudes). A float32 result within `rel * mag + abs_` of the reference is correct, where `rel`
counts float32 roundings (more for longer sums) and one unit in the last place of each narrow rounding
point, doubled for every product after it (a product of two values each off by a relative e is off by
2e); `abs_` covers float16's subnormals. A rounding point that float32 and float64 round to neighbouring
narrow values is inside that bound; a wrong index, a missed term or a lost rounding point is far outside.
"""

from __future__ import annotations

import numpy as np
import torch

from . import gen

TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _round(x: torch.Tensor, dtype: str) -> torch.Tensor:
    return x.to(torch.float32).to(TORCH[dtype]).to(torch.float64) if dtype != "float32" else \
        x.to(torch.float32).to(torch.float64)


def evaluate(pipe: gen.Pipeline, inputs: dict[str, np.ndarray]):
    """Returns (value, mag, rel, abs_) of the pipeline's output, as float64 numpy arrays and floats."""
    val: dict[str, torch.Tensor] = {}
    mag: dict[str, torch.Tensor] = {}
    for t in pipe.inputs:
        val[t.name] = torch.from_numpy(inputs[t.name]).to(torch.float64)
        mag[t.name] = val[t.name].abs()
    rel = 8 * 2.0 ** -24
    abs_ = 0.0
    for t in pipe.stages:
        op = t.op
        k = op["kind"]
        x, m = val[op["src"]], mag[op["src"]]
        if k == "map":
            o = op["op"]
            if o == "affine":
                v, mm = x * op["c1"] + op["c2"], m * abs(op["c1"]) + abs(op["c2"])
            elif o == "relu":
                v, mm = torch.clamp(x, min=op["c"]), torch.clamp(m, min=abs(op["c"]))
            elif o == "square":
                v, mm = x * x * 0.5, m * m
                rel, abs_ = 2 * rel, 2 * abs_ * m.max().item()
            elif o == "add2":
                v, mm = x + val[op["other"]], m + mag[op["other"]]
            else:
                v, mm = x * val[op["other"]], 2 * m * mag[op["other"]]
                rel, abs_ = 2 * rel, abs_ * (m.max().item() + mag[op["other"]].max().item())
        elif k == "stencil":
            w = gen.WEIGHTS[op["taps"]]
            v = mm = 0
            for a, b in gen.taps(op["axis"], op["taps"]):
                wt = w[a] * w[b] if op["axis"] == 2 else w[a + b]
                sl = _shift(x, a, b, t.shape)
                v = v + sl * wt
                mm = mm + _shift(m, a, b, t.shape) * abs(wt)
            rel += (len(gen.taps(op["axis"], op["taps"])) + 2) * 2.0 ** -24
        elif k == "transpose":
            v, mm = x.T, m.T
        elif k == "round":
            v = _round(x, op["to"])
            mm = m
            rel += gen.NARROW_ULP[op["to"]]
            if op["to"] == "float16":
                abs_ += 2.0 ** -24
        elif k == "bcast":
            vec, vm = val[op["vec"]], mag[op["vec"]]
            if op["axis"] == 0:
                vec, vm = vec[:, None], vm[:, None]
            else:
                vec, vm = vec[None, :], vm[None, :]
            if op["op"] == "add":
                v, mm = x + vec, m + vm
            else:
                v, mm = x * vec, 2 * m * vm
                rel, abs_ = 2 * rel, abs_ * (m.max().item() + vm.max().item())
        elif k == "reduce":
            v, mm = x.sum(dim=op["axis"]), m.sum(dim=op["axis"])
            rel += (x.shape[op["axis"]] + 2) * 2.0 ** -24
        elif k == "matmul":
            w, wm = val[op["w"]], mag[op["w"]]
            v, mm = x @ w, 2 * (m @ wm)
            rel = 2 * rel + (x.shape[1] + 2) * 2.0 ** -24
            abs_ = abs_ * x.shape[1] * (m.max().item() + wm.max().item()) if abs_ else 0.0
        else:
            raise ValueError(k)
        assert tuple(v.shape) == tuple(t.shape), (t.name, tuple(v.shape), t.shape)
        val[t.name] = _round(v, t.dtype)
        mag[t.name] = mm
    out = pipe.output.name
    return val[out].numpy(), mag[out].numpy(), rel, abs_


def _shift(x: torch.Tensor, a: int, b: int, shape) -> torch.Tensor:
    if x.dim() == 1:
        return x[a: a + shape[0]]
    return x[a: a + shape[0], b: b + shape[1]]




def compare(got: np.ndarray, ref: np.ndarray, mag: np.ndarray, rel: float, abs_: float, slack: float = 1.0):
    """None if `got` is within the bound of `ref`, else a description of the worst element."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != ref.shape:
        return f"shape {got.shape}, expected {ref.shape}"
    tol = slack * (rel * mag + abs_) + 1e-30
    err = np.abs(got - ref)
    bad = ~(err <= tol)  # NaN counts as bad
    if not bad.any():
        return None
    idx = np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(err / tol, nan=np.inf), 0)), ref.shape)
    return (f"{int(bad.sum())} of {ref.size} elements off; worst at {tuple(int(i) for i in idx)}: "
            f"expected {ref[idx]!r}, got {got[idx]!r} (tolerance {tol[idx]:.3g})")
