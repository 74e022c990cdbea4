"""Lowering: schedule -> loop-nest IR (builder) -> Triton source (nest renderers)."""

from tilec._callable import make_callable
from tilec.lower.nest import KernelIR, render_nest, render_triton
from tilec.lower.program import Program, lower

__all__ = ["KernelIR", "Program", "lower", "render_nest", "render_triton"]

make_callable(__name__, lower)  # tc.lower(s) is lower(s); tilec.lower stays this package
