"""Triton's facts, in one place: what differs between the two targets of the emitted source, the limits
of Triton's tensors, and (at the end) Triton's own behaviours the builder writes around, each a predicate
the builder asks (a product sum Triton would make a TF32 dot, a loop result its compiler needs read once,
a bool sum's type, the interpreter's int -> bfloat16 bit-cast).

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


# -- Triton's own behaviours the builder writes around, each stated here once -------------------------
# (the builder asks these; a `Why` statement in the nest, where there is one, names the rule in the source)

def product_sum_becomes_dot(op: str, acc_float: bool, ndim: int, masked: bool, product: bool) -> bool:
    """Whether Triton would rewrite this reduction into a TF32 `tl.dot`: it turns `sum(x[:, :, None] *
    y[None, :, :], axis=1)` (an unmasked float sum of a bare product over a tile of three or more dims) into
    one, which is wrong for a k tile narrower than the instruction (fuzz seed 900441). The builder adds
    `+ 0.0` to the product so that it is no bare product."""
    return op == "sum" and acc_float and ndim >= 3 and not masked and product


def loop_result_needs_one_read(acc_float: bool, looped: bool, rounded_or_online: bool) -> bool:
    """Whether a float reduction loop's result must be read through one add (`acc + 0.0`): Triton 3.6's
    TritonGPUOptimizeThreadLocality pass asserts (a compiler abort) when it has several uses. Exact for a
    sum (its +0.0 start never turns into -0.0); a max/min of -0.0 returns +0.0."""
    return looped and acc_float and rounded_or_online


def sum_cast_first(value_dtype: str, acc_dtype: str) -> bool:
    """Whether a reduction's operand is cast to its accumulator type before `tl.sum`/`tl.max`: always where
    they differ (tl.sum of bools is uint32 on the GPU, and a half-precision tile would sum in half)."""
    return value_dtype != acc_dtype


def convert_through_float32(src_float: bool, dst: str) -> bool:
    """Whether an int or bool goes to `dst` through float32, as torch converts it: Triton's interpreter
    bit-casts int -> bfloat16 and refuses int -> float8."""
    return not src_float and dst in ("bfloat16", "float8_e4m3fn", "float8_e5m2")
