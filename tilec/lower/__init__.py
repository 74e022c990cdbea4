"""Lowering: schedule -> loop-nest IR (builder, nest.py over code.py's expressions) -> Triton source
(triton_printer.py) and the printed loop nest (nest_printer.py). `tc.lower` is the
function `tilec.lower.program.lower`; this package's modules are reached through it too
(tilec/_packages.py)."""

from tilec._packages import reach_through
from tilec.lower.nest import KernelIR
from tilec.lower.nest_printer import render_nest
from tilec.lower.program import Program, lower
from tilec.lower.triton_printer import render_triton

__all__ = ["KernelIR", "Program", "lower", "render_nest", "render_triton"]

reach_through(__name__, lower)
