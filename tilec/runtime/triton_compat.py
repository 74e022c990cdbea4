"""Everything that depends on the Triton version or on running under Triton's interpreter, in one place.

- With no CUDA device, kernels run through Triton's CPU interpreter; `TRITON_INTERPRET=1` must be set
  before `triton` is first imported, so this module sets it and imports Triton lazily.
- What the emitted source does differently for the interpreter (bf16 tl.dot, tanh) lives in
  `tilec/lower/targets.py`. The interpreter also rounds float32 -> bfloat16 toward zero and
  float32 -> float8 wrongly near powers of two: CPU tests allow for that in those types.
"""

from __future__ import annotations

import functools
import os

import torch

from tilec.errors import TilecError


@functools.cache
def target() -> str:
    """'cuda' when a CUDA device is present, else 'interpreter' (Triton's CPU interpreter)."""
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") != "1":
        return "cuda"
    return "interpreter"


@functools.cache
def triton():
    """Import Triton, first setting up the interpreter when there is no GPU."""
    import sys

    if target() == "interpreter":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            raise TilecError("no CUDA device, so tilec runs kernels with Triton's interpreter, which needs "
                             "TRITON_INTERPRET=1 before triton is imported; set it in the environment")
        os.environ["TRITON_INTERPRET"] = "1"
    import triton as _triton

    if target() == "interpreter":
        _fix_interpreter_comparisons()
    return _triton


@functools.cache
def tensor_descriptor():
    """Triton's host-side tensor descriptor class (`TensorDescriptor.from_tensor(t, block_shape)`: a TMA
    descriptor on Hopper; the interpreter reads it too)."""
    triton()
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor


@functools.cache
def out_of_resources() -> type[BaseException]:
    """Triton's error for a compiled kernel that needs more shared memory (or registers) than the device
    has; raised at the first launch."""
    try:
        from triton.runtime.errors import OutOfResources
    except ImportError:  # pragma: no cover - every Triton since 2.1 has it
        return _Never
    return OutOfResources


class _Never(Exception):
    """An exception nothing raises (what out_of_resources gives when Triton lacks the error)."""


def _fix_interpreter_comparisons() -> None:
    """Triton 3.6's interpreter types a comparison's result like its operands (float32 for floats)
    instead of int1. On 0-d values it then converts the bools to float32, and `(x > 0.5) | mask`
    with a scalar x fails in numpy (found by the schedule fuzzer). Comparisons here return int1."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    ops = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
           "EQ": np.equal, "NE": np.not_equal}
    builder = interpreter.InterpreterBuilder
    if getattr(builder, "_tilec_comparisons_fixed", False):
        return

    def compare(op):
        return lambda self, lhs, rhs: interpreter.TensorHandle(np.asarray(op(lhs.data, rhs.data)), tl.int1)

    for name in dir(builder):
        if name.startswith(("create_icmp", "create_fcmp")) and name[-2:] in ops:
            setattr(builder, name, compare(ops[name[-2:]]))
    builder._tilec_comparisons_fixed = True
