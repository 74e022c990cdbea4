"""What differs between the two targets of the emitted source, in one place.

- "cuda": compiled by Triton for the GPU.
- "interpreter": Triton's CPU interpreter (TRITON_INTERPRET=1), which (Triton 3.6 and 3.9)
  * computes `tl.dot` on bfloat16 operands wrongly: bf16 operands are widened to float32 there
    (the products of bf16 values are exact in float32, so the result is the same up to summation order);
  * has no libdevice (`extern_elementwise`): tanh is written with tl.exp there, and C's fmod (the exact
    remainder that float `//` and `%` start from) is Triton's float `%`, which the interpreter computes
    with numpy's fmod, exactly; on the GPU Triton's float `%` is LLVM's frem, which NVPTX expands to
    x - y * trunc(x / y), inexact, so the GPU form calls libdevice's fmod.
The Triton printer (triton_printer.py) writes each form from these facts; golden tests pin the "cuda" form, and
`tests/test_golden.py` checks that the forms differ only here.
"""

from __future__ import annotations

MAX_TILE_NUMEL = 1 << 20  # triton.language.TRITON_MAX_TENSOR_NUMEL: elements of one tensor
# values of one tile (times the copies an unrolled loop makes) per thread: past this, Triton 3.6
# compiles for minutes (sm_90: 4096 per thread takes 10-30 s; 2048 with two 4-d permutes, 158 s) and
# the kernel spills to local memory. A 256 x 256 float32 accumulator with 8 warps is 256.
MAX_PER_THREAD = 1024
# elements of one tile of three or more dimensions (a reduction's operand over a 2-d tile, say): Triton 3.6
# compiles a 1024 x 64 x 4 max-reduction tile for sm_90 in 72 s on a CPU (16 warps; fuzz seed 445829361),
# 512 x 64 x 4 in 15 s, 256 x 64 x 4 in 6 s
MAX_TILE_NUMEL_3D = 1 << 17

NATIVE_DOT = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def native_dot(dtype_a: str, dtype_b: str, target: str) -> bool:
    """Whether tl.dot may take these operand types as they are (else both are widened to float32)."""
    if dtype_a != dtype_b or dtype_a not in NATIVE_DOT:
        return False
    return not (target == "interpreter" and dtype_a == "bfloat16")
