"""Measuring a config on every shape of the mix: build, check against the reference on fresh random
inputs (or the user's `inputs(sizes, device)`), then time. A config that fails to build, runs out of resources or gives a wrong answer is a
`CandidateFailure` with its reason (the study records it as a failed trial, never a winner)."""

from __future__ import annotations

import math
import statistics
import time

import torch

from tilec.errors import ArgumentError, TilecError
from tilec.ir.expr import evaluate
from tilec.runtime import triton_compat
from tilec.runtime.kernel import Kernel
from tilec.tune.mix import ShapeMix

# relative error bounds ||out - ref|| / ||ref|| per output dtype (shared notes); on the GPU and in Triton's
# interpreter alike (tilec makes the interpreter's float32 -> bf16/fp8 conversions torch's: triton_compat)
TOLERANCE = {"float64": 1e-9, "float32": 1e-4, "float16": 2e-3, "bfloat16": 1e-2,
             "float8_e4m3fn": 5e-2, "float8_e5m2": 1e-1}


class CandidateFailure(Exception):
    """A candidate config that must not win: it failed to build or run, or computed a wrong answer."""


def default_timer(kernel, inputs) -> float:
    """Seconds per call: triton's do_bench median on a GPU; a wall-clock median in the interpreter."""
    if triton_compat.target() == "cuda":
        from triton.testing import do_bench
        return do_bench(lambda: kernel(*inputs), warmup=10, rep=40, return_mode="median") * 1e-3
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        kernel(*inputs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def random_inputs(sched, inputs, sizes: dict, device, seed: int = 0) -> list[torch.Tensor]:
    """Fresh normal random inputs (never zeros) for `sizes`; integer inputs get small random ints."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for t in inputs:
        shape = [evaluate(e, sizes) for e in t.shape]
        dt = getattr(torch, t.dtype)
        if dt.is_floating_point:  # made on the CPU with its own generator (whatever the default device)
            x = torch.randn(shape, generator=g, device="cpu").to(dt)
        else:
            x = torch.randint(-8, 9, shape, generator=g, device="cpu").to(dt)
        out.append(x.to(device))
    return out


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any() or torch.isinf(out).any() != torch.isinf(ref).any():
        return float("inf")
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


class Measurer:
    """Builds and measures configs of a schedule on the shapes of a mix, checking each result."""

    def __init__(self, sched, args, mix, reference, timer=None, device=None, inputs=None):
        self.sched, self.args, self.mix = sched, args, mix
        self.reference = reference
        self.timer = timer or default_timer
        self.device = device or ("cuda" if triton_compat.target() == "cuda" else "cpu")
        self.inputs_of = [t for t in args if t.is_placeholder]
        self.cases = []
        for n, (shape, _) in enumerate(mix):
            if inputs is None:
                xs = random_inputs(sched, self.inputs_of, shape, self.device, seed=n)
            else:  # the user's: inputs a kernel is valid on (log-probabilities, packed int4, indices in range)
                xs = self._check_inputs(shape, inputs(dict(shape), self.device))
            refs = reference(*xs)
            refs = list(refs) if isinstance(refs, (tuple, list)) else [refs]
            self._check_reference(shape, refs)
            self.cases.append((shape, xs, refs))

    def _check_inputs(self, shape: dict, xs) -> list[torch.Tensor]:
        """What `inputs(sizes, device)` returned must be one tensor per input placeholder, of its shape and dtype
        at `shape` (moved to the measuring device): else every candidate would fail for the inputs' fault."""
        key = ShapeMix.key(shape)
        want = ", ".join(f"{t.name} {tuple(evaluate(e, shape) for e in t.shape)} {t.dtype}" for t in self.inputs_of)
        xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
        if len(xs) != len(self.inputs_of) or not all(isinstance(x, torch.Tensor) for x in xs):
            got = ", ".join(f"{tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__ for x in xs)
            raise ArgumentError(f"inputs() returned {len(xs)} value(s) ({got}) at {key}; it must return the input "
                                f"tensors, one each, in the order of args: {want}")
        for t, x in zip(self.inputs_of, xs):
            s = tuple(evaluate(e, shape) for e in t.shape)
            if tuple(x.shape) != s or x.dtype != getattr(torch, t.dtype):
                raise ArgumentError(f"inputs() returned {tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} for "
                                    f"{t.name} at {key}, which is {s} {t.dtype} (inputs: {want})")
        return [x.to(self.device) for x in xs]

    def _check_reference(self, shape: dict, refs: list) -> None:
        """The reference's outputs must be tensors of the outputs' shapes at `shape`, one per output: else
        every candidate would fail with a message about a kernel that did nothing wrong."""
        outputs = [t for t in self.args if not t.is_placeholder]
        key = ShapeMix.key(shape)
        want = ", ".join(f"{t.name} {tuple(evaluate(e, shape) for e in t.shape)}" for t in outputs)
        if len(refs) != len(outputs) or not all(isinstance(r, torch.Tensor) for r in refs):
            got = ", ".join(f"{tuple(r.shape)}" if isinstance(r, torch.Tensor) else type(r).__name__ for r in refs)
            raise ArgumentError(f"the reference returned {len(refs)} value(s) ({got}) at {key}; it must return the "
                                f"outputs, one tensor each: {want}")
        for t, r in zip(outputs, refs):
            s = tuple(evaluate(e, shape) for e in t.shape)
            if tuple(r.shape) != s:
                raise ArgumentError(f"the reference returned shape {tuple(r.shape)} for {t.name} at {key}, whose "
                                    f"shape is {s} (outputs: {want})")

    def build(self, config: dict) -> Kernel:
        try:
            return Kernel(self.sched, self.args, config)
        except TilecError as e:
            raise CandidateFailure(f"does not lower: {e}") from e

    def measure(self, config: dict, before_timing=None) -> dict[str, float]:
        """Per-shape seconds for `config`; raises CandidateFailure. Every shape is compiled and checked
        first, then `before_timing()` is called (a measuring worker waits there for its turn on the
        GPU: compiles overlap, timings do not), then every shape is timed."""
        kernel = self.build(config)
        times = {}
        for shape, xs, refs in self.cases:
            key = ShapeMix.key(shape)
            try:
                outs = kernel(*xs)
            except Exception as e:  # noqa: BLE001 - compile errors, out of resources: all fail the trial
                raise CandidateFailure(f"fails at {key}: {type(e).__name__}: {str(e)[:300]}") from e
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            for o, r in zip(outs, refs):
                err = rel_error(o, r.to(o.dtype) if r.dtype != o.dtype else r)
                bound = TOLERANCE.get(str(o.dtype).removeprefix("torch."), 1e-4)
                if not err <= bound:
                    raise CandidateFailure(f"wrong answer at {key}: relative error {err:.3g} > {bound:g}")
        if before_timing is not None:
            before_timing()
        for shape, xs, _ in self.cases:
            key = ShapeMix.key(shape)
            try:
                times[key] = float(self.timer(kernel, xs))
            except CandidateFailure:
                raise
            except Exception as e:  # noqa: BLE001 - out of resources at launch, a timeout, ...
                raise CandidateFailure(f"fails at {key} while timing: {type(e).__name__}: {str(e)[:300]}") from e
            if not (math.isfinite(times[key]) and times[key] >= 0):
                raise CandidateFailure(f"fails at {key} while timing: the timer returned {times[key]!r} seconds")
        return times
