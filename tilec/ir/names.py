"""Validation of the names users give tensors, sizes, axes and knobs: they become identifiers in generated
code, parameters of a Triton kernel (passed by keyword at launch), and (sizes) parameters of isl sets.
"""

from __future__ import annotations

import keyword

from tilec.errors import ArgumentError

# Names the generated Triton source uses for itself; a user tensor or axis may not take them.
# (`libdevice` is the CUDA math module the source imports; `interpreter_semantic` is the name Triton's
# interpreter inserts into every assignment of the kernel it runs.)
RESERVED = frozenset({"tl", "triton", "torch", "math", "pid", "range", "min", "max", "abs", "float", "int",
                      "libdevice", "interpreter_semantic"})

# Names Triton 3.6's launch path takes as keywords next to the kernel's own parameters, which tilec passes
# by keyword: `fn[grid](**args)` calls `JITFunction.run(self, *args, grid, warmup, **kwargs)` (and the
# interpreter's `run`), whose kwargs also carry the compile options (the fields of CUDAOptions and
# HIPOptions), `debug`, `instrumentation_mode` and the refused `device`, `device_type`, `stream`; the binder
# Triton generates for a kernel, `def dynamic_func(<params>, **options)`, reads the globals `backend`,
# `specialize_impl` and `JITCallable`. A kernel parameter with one of these names breaks the launch or,
# worse, silently sets the option (a size named `num_warps`). tests/test_hostile.py checks this list
# against the installed Triton.
LAUNCH_KEYWORDS = frozenset({
    # JITFunction.run / InterpretedFunction.run and the binder
    "self", "grid", "warmup", "device", "device_type", "stream", "options", "backend", "specialize_impl",
    "JITCallable",
    # CUDAOptions
    "num_warps", "num_ctas", "num_stages", "warp_size", "maxnreg", "ptx_version", "ptx_options",
    "ir_override", "enable_fp_fusion", "enable_reflect_ftz", "launch_cooperative_grid", "launch_pdl", "supported_fp8_dtypes",
    "deprecated_fp8_dot_operand_dtypes", "default_dot_input_precision", "allowed_dot_input_precisions",
    "max_num_imprecise_acc_default", "extern_libs", "debug", "backend_name", "sanitize_overflow", "arch",
    "instrumentation_mode",
    # HIPOptions (beyond the shared ones)
    "allow_flush_denorm", "kpack", "matrix_instr_nonkdim", "schedule_hint", "waves_per_eu",
})

# Words isl's parser reads as keywords, in any mix of case ("NaN", "Floor"): a size with one of these names
# would make every isl set that mentions it a syntax error.
ISL_KEYWORDS = frozenset({"exists", "and", "or", "not", "implies", "infty", "infinity", "nan", "rat", "true",
                          "false", "ceil", "floor", "ceild", "floord", "mod", "min", "max"})


def check_name(name: object, what: str) -> str:
    """Return `name` if it is a plain identifier that is safe to emit; otherwise raise ArgumentError."""
    if not isinstance(name, str):
        raise ArgumentError(f"{what}: expected a name (str), got {type(name).__name__} {name!r}")
    if keyword.iskeyword(name):
        raise ArgumentError(
            f"{what}: {name!r} is a Python keyword, and names become variables in the generated Triton code; "
            f"pick another name, e.g. {name + '_'!r}")
    if not name.isidentifier() or not name.isascii():
        raise ArgumentError(
            f"{what}: {name!r} is not a valid identifier; names become variables in the generated "
            "Triton code, so use letters, digits and '_' (not starting with a digit), e.g. 'A' or 'k'")
    if name.startswith("_") or name in RESERVED:
        raise ArgumentError(
            f"{what}: {name!r} is reserved for the generated code (names starting with '_' and "
            f"{', '.join(sorted(RESERVED))}); pick another name")
    if name in LAUNCH_KEYWORDS:
        use = {"num_stages": "; pipeline(axis, stages=tc.knob('STAGES', [2, 3])) sets a pipeline's depth",
               "num_warps": "; num_warps(tc.knob('WARPS', [4, 8])) sets the warps"}.get(name, "")
        raise ArgumentError(
            f"{what}: {name!r} is reserved: Triton's kernel launch takes it as a keyword (its own argument or "
            f"a compile option such as num_warps), so a kernel parameter of that name would break the launch{use} "
            f"(docs/schedule.md, section 1, lists the reserved names); pick another name, e.g. {name + '_'!r}")
    if name.lower() in ISL_KEYWORDS:
        raise ArgumentError(
            f"{what}: {name!r} is reserved: isl, which tilec uses to prove schedules legal, reads it as a "
            f"keyword (in any case: {', '.join(sorted(ISL_KEYWORDS))}); pick another name, e.g. {name + '_'!r}")
    return name
