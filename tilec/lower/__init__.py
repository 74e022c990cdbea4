"""Lowering: schedule -> loop-nest IR (builder) -> Triton source (nest renderers)."""

from tilec.lower.nest import KernelIR, render_nest, render_triton
from tilec.lower.program import Program, lower

__all__ = ["KernelIR", "Program", "lower", "render_nest", "render_triton"]
