"""Shared helpers of the examples: the device to run on, fresh random inputs, the accuracy check.

Every example module defines `make()` -> (schedule, args), `inputs(sizes, device)`, `reference(*inputs)`,
`SIZES` (a list of size dicts, the first one used by `main`), and runs `run(module)` as a script.
"""

from __future__ import annotations

import torch

import tilec as tc

# Relative error bounds ||out - ref|| / ||ref|| per output dtype (see the project's GPU notes), on the GPU and
# in Triton's CPU interpreter alike: the interpreter rounds float32 -> bf16 toward zero and float32 -> float8
# wrongly (ties, subnormals, overflow), but tilec makes those conversions torch's in its own process
# (tilec/runtime/triton_compat.py).
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, "float8_e4m3fn": 5e-2}


def device() -> str:
    """'cuda' where there is a GPU; otherwise kernels run on the CPU through Triton's interpreter."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def randn(shape, dtype, device, scale: float = 1.0) -> torch.Tensor:
    """Fresh normal random values (never zeros), in `dtype`."""
    return (torch.randn(shape, dtype=torch.float32, device=device) * scale).to(dtype)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere gives inf."""
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any():
        return float("inf")
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(outs, refs) -> list[float]:
    """Compare each output with its reference; raise AssertionError past the dtype's bound."""
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    refs = refs if isinstance(refs, (tuple, list)) else [refs]
    errs = []
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape, r.dtype)
        err = rel_error(o, r)
        bound = TOLERANCE[str(o.dtype).removeprefix("torch.")]
        assert err <= bound, f"relative error {err:.3g} > {bound:g} ({o.dtype})"
        errs.append(err)
    return errs


def run(module, sizes=None, config=None, show=True) -> list[float]:
    """Build the example's schedule, run it on fresh inputs, check against PyTorch, show the code."""
    s, args = module.make()
    kernel = tc.build(s, args, config=config)
    sizes = sizes or module.SIZES[0]
    xs = module.inputs(sizes, device())
    errs = check(kernel(*xs), module.reference(*xs))
    if show:
        print(tc.lower(s, config))
        print(kernel.source)
        print(f"{module.__name__}: sizes {sizes}, relative error {', '.join(f'{e:.2e}' for e in errs)}: OK")
    return errs
