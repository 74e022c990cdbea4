"""Everything that depends on the Triton version or on running under Triton's interpreter, in one place.

- With no CUDA device, kernels run through Triton's CPU interpreter; `TRITON_INTERPRET=1` must be set
  before `triton` is first imported, so this module sets it and imports Triton lazily.
- What the emitted source does differently for the interpreter (bf16 tl.dot, tanh, fmod) lives in
  `tilec/lower/targets.py`. What the interpreter itself gets wrong is fixed here, in tilec's process:
  comparisons typed like their operands, and float32 -> bfloat16 / float8 conversions (truncated, or
  rounded wrongly at ties, subnormals and overflow), which are torch's in tilec's process. A kernel
  file run on its own (`python <file>.py` of the interpreter form) runs Triton's interpreter as it is.
- The interpreter computes every lane of a tile in numpy, the lanes a mask leaves out too (0 / 0 past the
  edge), and numpy warns there; `quiet_launch` keeps those warnings out of a tilec launch.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings

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
        _fix_interpreter_rounding()
        _fix_interpreter_int_reductions()
    return _triton


@contextlib.contextmanager
def quiet_launch():
    """Around one launch of a tilec kernel: in the interpreter, numpy's warnings of the launch are not
    shown (its floating-point errors, `invalid value encountered in divide` from 0 / 0 in lanes a mask
    leaves out, `All-NaN slice encountered` from its nanmax of a tile of NaNs, which tilec's max flags
    itself, and the interpreter's own deprecated array-to-scalar conversions). A correct kernel prints
    nothing; the values are untouched (a NaN the kernel computes is in its output). On the GPU nothing
    changes: numpy does not run the kernel there."""
    if target() != "interpreter":
        yield
        return
    import numpy as np

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "All-NaN (slice|axis) encountered", RuntimeWarning)
        warnings.filterwarnings("ignore", "Conversion of an array with ndim > 0 to a scalar", DeprecationWarning)
        yield


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


def _fix_interpreter_int_reductions() -> None:
    """Triton 3.6's interpreter sums a 1-d integer tile with numpy, which widens int32 to int64, and then
    refuses a 0-d result past int32 (OverflowError) where the GPU, and torch for an int32 result, wrap
    around (fuzz seed 24903880: a sum of int32 casts of infinities). Here the 0-d result wraps as a tile's
    already did (numpy's astype)."""
    import numpy as np
    from triton.runtime import interpreter

    ops = interpreter.ReduceOps
    if getattr(ops, "_tilec_int_wrap", False):
        return
    original = ops.to_tensor

    def to_tensor(self, ret, dtype):
        if not getattr(ret, "shape", None) and isinstance(ret, (int, np.integer)) and dtype.is_int():
            ret = np.asarray(ret).astype(interpreter._get_np_dtype(dtype))  # wraps, as on the GPU
        return original(self, ret, dtype)

    ops.to_tensor = to_tensor
    ops._tilec_int_wrap = True


def _fix_interpreter_rounding() -> None:
    """Triton 3.6's interpreter converts float32 to bfloat16 by truncation and to float8 by bit surgery that
    rounds ties up (100 -> 104 in float8_e4m3fn, where torch and the GPU give 96), flushes subnormals
    (0.001 -> 0) and wraps past the largest value (500 -> 256; torch saturates at 448): fp8 outputs of a
    CPU run were off by up to 2x. Here those conversions (round to nearest even, the default on the GPU)
    are torch's, and so are float8 -> float32 and float8 -> float16 (the interpreter read float8_e4m3fn's NaN as 480,
    in loads and in tl.dot's operands, which it widens to float16); an explicit
    round-toward-zero and every other conversion stay the interpreter's."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    if getattr(interpreter, "_tilec_rounding_fixed", False):
        return
    original = interpreter._convert_float
    nearest = (None, interpreter._ir.ROUNDING_MODE.RTNE)
    to = {tl.bfloat16: (torch.bfloat16, torch.int16, np.uint16), tl.float8e4nv: (torch.float8_e4m3fn, torch.uint8, np.uint8),
          tl.float8e5: (torch.float8_e5m2, torch.uint8, np.uint8)}
    wide = {tl.float32: (torch.float32, np.uint32), tl.float16: (torch.float16, np.uint16)}

    def convert(input, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.float32 and output_dtype in to and rounding_mode in nearest:
            dtype, bits, raw = to[output_dtype]
            x = torch.from_numpy(np.array(input, dtype=np.float32, copy=True))
            return x.to(dtype).view(bits).numpy().view(raw).reshape(np.shape(input))
        if input_dtype in (tl.float8e4nv, tl.float8e5) and output_dtype in wide:  # e4m3fn's NaN was 480
            dtype, bits, raw = to[input_dtype]
            x = torch.from_numpy(np.array(input, copy=True).view(raw).view(np.uint8))
            wide_dtype, wide_raw = wide[output_dtype]  # float16: how the interpreter's tl.dot reads fp8 operands
            return x.view(dtype).to(wide_dtype).numpy().view(wide_raw).reshape(np.shape(input))
        return original(input, input_dtype, output_dtype, rounding_mode)

    interpreter._convert_float = convert
    interpreter._tilec_rounding_fixed = True


def direct_launcher(compiled, blocks=None):
    """A faster way to launch a kernel again: `launch(grid, args)` calls the compiled kernel that
    `fn[grid](...)` returned through its launcher, with `args` in the order of fn's parameters
    (constexpr ones included; the launcher skips them) and, at each position of `blocks` (position ->
    block shape), the tensor a host-side tensor descriptor reads. It skips what Triton's
    `JITFunction.run` does on every call (binding keyword arguments, specializing each argument on its
    value and alignment, the cache lookup) and, where this Triton's launcher allows (`_raw_launch`),
    re-encoding each descriptor's CUDA tensor map: those are kept per (tensor address, shape,
    strides), which is all a tensor map holds. Both cost tens of µs of host time per call: more than
    the GPU time of a 40 µs GEMM. The caller must launch only with arguments that specialize as the
    first call's did (tilec/runtime/kernel.py keys its prepared calls on shapes, strides, alignment).

    `launch` returns False, launching nothing, where the direct call would differ from Triton's:
    a launch hook is set (a profiler wants launch metadata) or the current device is not the one
    the kernel was loaded on. None where this is not a compiled CUDA kernel of a Triton with these
    internals (the interpreter; another version): then every launch goes through `fn[grid]`."""
    if target() != "cuda" or not all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata")):
        return None
    try:
        from triton import knobs
        from triton.runtime.driver import driver
    except ImportError:  # pragma: no cover - Triton 3.6 has both
        return None
    active = driver.active
    device = active.get_current_device()
    hooks = knobs.runtime
    blocks = dict(blocks or {})
    run, function, packed = compiled.run, compiled.function, compiled.packed_metadata
    descriptor = tensor_descriptor()
    raw = _raw_launch(run, compiled, sorted(blocks))

    def ready(grid):
        if _hooked(hooks.launch_enter_hook) or _hooked(hooks.launch_exit_hook):
            return None
        if active.get_current_device() != device:
            return None
        return grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1

    if raw is None:  # Triton's launcher as it is: descriptors made and encoded per launch
        def launch(grid, args) -> bool:
            g = ready(grid)
            if g is None:
                return False
            args = [descriptor.from_tensor(a, blocks[i]) if i in blocks else a for i, a in enumerate(args)]
            run(*g, active.get_current_stream(device), function, packed, None, None, None, *args)
            return True
        return launch

    raw_launch, encode, cooperative, pdl = raw
    maps: dict[tuple, list] = {}  # (position, address, shape, strides) -> the descriptor's launcher args

    def launch(grid, args) -> bool:
        g = ready(grid)
        if g is None:
            return False
        final = []
        for i, a in enumerate(args):
            if i not in blocks:
                final.append(a)
                continue
            key = (i, a.data_ptr(), tuple(a.shape), a.stride())
            enc = maps.get(key)
            if enc is None:
                if len(maps) >= 256:
                    maps.clear()
                enc = maps[key] = encode(descriptor.from_tensor(a, blocks[i]), i)
            final.extend(enc)
        raw_launch(*g, active.get_current_stream(device), function, cooperative, pdl, None, None, packed, None,
                   None, None, *final)
        return True

    return launch


def _raw_launch(run, compiled, positions):
    """(the C launch function, encode(descriptor, position) -> its launcher args, cooperative, pdl) of a
    compiled kernel whose descriptors are the parameters at `positions`, for Triton 3.6's CUDA launcher
    (backends/nvidia/driver.py: CudaLauncher wraps the C launch in `wrap_handle_tensordesc`, which calls
    `make_tensordesc_arg` per descriptor per launch). None where the launcher is not that one, the kernel
    needs scratch memory, or its descriptors are not the expected ones: then launches go through `run`."""
    try:
        from triton.backends.nvidia import driver as nvidia
    except ImportError:  # pragma: no cover - a Triton without the CUDA backend
        return None
    need = ("launch", "launch_cooperative_grid", "launch_pdl", "global_scratch_size", "profile_scratch_size")
    if not isinstance(run, getattr(nvidia, "CudaLauncher", ())) or not all(hasattr(run, a) for a in need):
        return None
    if run.global_scratch_size or run.profile_scratch_size or not hasattr(nvidia, "make_tensordesc_arg"):
        return None
    signature = list(getattr(compiled.src, "signature", {}).values())
    if [i for i, sig in enumerate(signature) if isinstance(sig, str) and sig.startswith("tensordesc")] != positions:
        return None
    launch = run.launch
    if positions:  # the C function inside wrap_handle_tensordesc's closure
        cells = dict(zip(launch.__code__.co_freevars, (c.cell_contents for c in launch.__closure__ or ())))
        launch = cells.get("launcher")
        if launch is None:
            return None
    metas = list(getattr(compiled.metadata, "tensordesc_meta", None) or [None] * len(positions))
    if len(metas) != len(positions) or any(m is None for m in metas):
        # before Hopper Triton rewrites descriptors to pointers: their launcher args hold the tensor
        # itself, which a kept encoding would keep alive (every call's fresh output): not kept then
        return None
    meta_at = dict(zip(positions, metas))

    def encode(desc, position):
        return nvidia.make_tensordesc_arg(desc, meta_at[position])

    return launch, encode, run.launch_cooperative_grid, run.launch_pdl


def _hooked(hook) -> bool:
    """Whether a Triton launch hook is set: None, or a HookChain (Triton 3.6's knobs) with no calls, is not."""
    return hook is not None and bool(getattr(hook, "calls", True))
