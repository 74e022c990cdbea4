"""Lowering: schedule -> loop-nest IR (builder) -> Triton source (nest renderers). `tc.lower` is the
function `tilec.lower.program.lower`; this package's modules are reached through it too
(tilec/_packages.py)."""

from tilec._packages import reach_through
from tilec.lower.nest import KernelIR, render_nest, render_triton
from tilec.lower.program import Program, lower

__all__ = ["KernelIR", "Program", "lower", "render_nest", "render_triton"]

reach_through(__name__, lower)
