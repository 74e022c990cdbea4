"""The real-kernel suite's harness: fresh inputs, their hard variants, and the check against PyTorch.

Every kernel module of the suite (`suite/<name>.py`, listed in `suite/__init__.py`) defines:
- `ORIGINAL`: the kernel it is written after (file and function of Triton's tutorials, Liger-Kernel, llm.c,
  vLLM, Halide's apps, TVM's tutorials, FlashAttention);
- `SIZES`: size dicts; the first is the one the timing and the second config use; together they hold sizes
  that divide no tile and size-1 dimensions;
- `make(fast: bool)` -> (schedule, args): the default schedule (`tc.create_schedule(outputs)`, no primitive)
  or the fast one, a hand schedule with knobs;
- `inputs(sizes, device)` -> the torch tensors the kernel takes (fresh random values, never zeros);
- `reference(*inputs)` -> the outputs PyTorch computes (a tuple where there are several);
- optional `CALL_SIZES`: the sizes no input's shape holds, which a call gives by name (`kernel(x, V=...)`);
  `reference`, `torch_ref` and `original` take them by name too;
- optional `SPECIAL = False` with a comment why, where NaN/Inf inputs mean nothing (an index, a mask), and
  `TOLERANCE`, a dict of dtype -> relative error bound that replaces `TOLERANCE` below for that kernel.

`run(module, fast, sizes, variant)` builds the kernel, runs it on the variant of the inputs and checks every
output: `"plain"` inputs, `"strided"` (each tensor a non-contiguous view of the same values) or `"special"`
(NaN, +inf and -inf written into the float inputs: the outputs must hold NaN and infinities exactly where
PyTorch's do, and agree elsewhere).
"""

from __future__ import annotations

import torch

import tilec as tc

# ||out - ref|| / ||ref|| over the finite values, per output dtype (as examples/common.py)
TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, "float8_e4m3fn": 5e-2,
             "float8_e5m2": 1e-1}
VARIANTS = ("plain", "strided", "special")


def device() -> str:
    """'cuda' where there is a GPU; otherwise the kernels run in Triton's interpreter on the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def randn(shape, dtype, device, scale: float = 1.0) -> torch.Tensor:
    """Fresh normal random values in `dtype` (never zeros)."""
    return (torch.randn(shape, dtype=torch.float32, device=device) * scale).to(dtype)


def strided(t: torch.Tensor) -> torch.Tensor:
    """The same values as a non-contiguous view: every dimension of two or more elements is read with a step of
    two from a buffer twice as long (a 0-d or all-size-1 tensor stays as it is)."""
    if t.dim() == 0 or all(n == 1 for n in t.shape):
        return t
    big = torch.empty([2 * n if n > 1 else n for n in t.shape], dtype=t.dtype, device=t.device)
    view = big[tuple(slice(None, None, 2) if n > 1 else slice(None) for n in t.shape)]
    view.copy_(t)
    assert not view.is_contiguous() and torch.equal(view, t)
    return view


def special(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A copy of a float tensor with NaN, +inf and -inf at three random places (where it has them); other
    tensors as they are."""
    if not t.is_floating_point() or t.numel() < 3:
        return t
    out = t.clone()
    flat = out.view(-1)
    places = torch.randperm(t.numel(), generator=gen)[:3].to(t.device)
    for p, v in zip(places, (float("nan"), float("inf"), float("-inf"))):
        flat[p] = v
    return out


def variant(xs: list[torch.Tensor], name: str, seed: int = 0) -> list[torch.Tensor]:
    """The inputs `xs` as variant `name` (VARIANTS)."""
    if name == "plain":
        return xs
    if name == "strided":
        return [strided(x) for x in xs]
    if name == "special":
        gen = torch.Generator().manual_seed(seed)
        return [special(x, gen) for x in xs]
    raise ValueError(f"no input variant {name!r}; one of {VARIANTS}")


def philox(seed: int, offsets: torch.Tensor, kind: str = "rand") -> torch.Tensor:
    """What `tc.rand/randn/randint(seed, offset)` draws, computed here in numpy from the algorithm (Philox 4x32, 10
    rounds, as Triton's triton/language/random.py: key = the seed's two 32-bit words, counter = the offset's): the
    reference a kernel that draws random numbers is checked against. `offsets`: integers >= 0, any shape."""
    import numpy as np

    mask = np.uint64(0xFFFFFFFF)
    off = offsets.detach().cpu().to(torch.int64).numpy().astype(np.uint64)
    c0, c1 = off & mask, off >> np.uint64(32)
    c2 = c3 = np.zeros_like(c0)
    k0 = np.full_like(c0, np.uint64(seed % 2**64) & mask)
    k1 = np.full_like(c0, (np.uint64(seed % 2**64) >> np.uint64(32)) & mask)
    a, b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(10):
        _c0, _c2 = c0, c2
        c0 = ((b * _c2) >> np.uint64(32)) ^ c1 ^ k0
        c2 = ((a * _c0) >> np.uint64(32)) ^ c3 ^ k1
        c1, c3 = (b * _c2) & mask, (a * _c0) & mask
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask, (k1 + np.uint64(0xBB67AE85)) & mask
    if kind == "randint":
        return torch.from_numpy(c0.astype(np.int64))

    def uniform(x):
        x = x.astype(np.uint32).view(np.int32).astype(np.int64)
        x = np.where(x < 0, -x - 1, x).astype(np.float32)
        return x * np.float32(4.6566127342e-10)

    if kind == "rand":
        return torch.from_numpy(uniform(c0))
    if kind == "randn":  # Box-Muller of the first two words, in float32
        u1, u2 = np.maximum(np.float32(1e-7), uniform(c0)), uniform(c1)
        th = np.float32(6.283185307179586) * u2
        return torch.from_numpy(np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(th))
    raise ValueError(f"kind: rand, randn or randint, got {kind!r}")


def check(outs, refs, tolerance: dict | None = None) -> list[float]:
    """Each output against its reference: the same shape and dtype; integers and bools equal; floats with NaN
    and each infinity exactly where the reference has them and the finite values within the dtype's relative
    error bound. Returns the relative errors; AssertionError names the first output that fails."""
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
    assert len(outs) == len(refs), f"{len(outs)} outputs, {len(refs)} references"
    bounds = {**TOLERANCE, **(tolerance or {})}
    errs = []
    for n, (o, r) in enumerate(zip(outs, refs)):
        assert o.shape == r.shape and o.dtype == r.dtype, f"output {n}: {o.shape} {o.dtype} != {r.shape} {r.dtype}"
        if not r.is_floating_point():
            bad = (o != r).sum().item()
            assert bad == 0, f"output {n} ({o.dtype}): {bad} of {o.numel()} values differ"
            errs.append(0.0)
            continue
        o64, r64 = o.double().cpu(), r.double().cpu()
        for what, f in (("NaN", torch.isnan), ("+inf", lambda x: x == float("inf")),
                        ("-inf", lambda x: x == float("-inf"))):
            differ = (f(o64) != f(r64)).sum().item()
            assert differ == 0, f"output {n}: {what} at {differ} places where the reference differs"
        fin = torch.isfinite(r64)
        d, ref = (o64 - r64)[fin], r64[fin]
        err = (d.norm() / ref.norm().clamp_min(1e-30)).item() if ref.numel() else 0.0
        bound = bounds[str(o.dtype).removeprefix("torch.")]
        assert err <= bound, f"output {n}: relative error {err:.3g} > {bound:g} ({o.dtype})"
        errs.append(err)
    return errs


def run(module, fast: bool, sizes: dict, which: str = "plain", config: dict | None = None, seed: int = 0):
    """Build `module`'s default or fast schedule, run it on fresh inputs of `sizes` in variant `which`, check it
    against `module.reference`; return the relative errors."""
    torch.manual_seed(seed)
    s, args = module.make(fast)
    kernel = tc.build(s, args, config=config)
    xs = variant(module.inputs(sizes, device()), which, seed)
    given = {n: sizes[n] for n in getattr(module, "CALL_SIZES", ())}  # in no input's shape: given by name
    refs = module.reference(*xs, **given)
    return check(kernel(*xs, **given), refs, getattr(module, "TOLERANCE", None))
