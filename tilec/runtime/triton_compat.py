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

    return _triton
