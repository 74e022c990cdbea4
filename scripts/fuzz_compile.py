"""Compile the CUDA form of fuzz cases for an H100/H200 (sm_90) on a CPU, with Triton's own compiler.

The interpreter runs the interpreter form of a kernel; the GPU runs the CUDA form, which Triton's
frontend and passes may reject where the interpreter accepts (loop-carried type changes, compiler
aborts: the H200 fuzz run of 2026-12-01 found 25 such cases). Triton compiles without a GPU, so
these are caught here, in a process without TRITON_INTERPRET. A kernel in which Triton made a
tensor-core dot that tilec did not write fails too (see `_unasked_dot`):

    python scripts/fuzz_compile.py 900011 902482      # fuzz seeds: OK/FAIL per kernel, exit 1 on a FAIL
    python scripts/fuzz_compile.py --file case.py     # a reproduction script (scripts/fuzz.py --show)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # before triton is imported: real @triton.jit functions
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _unasked_dot(name: str, source: str, ttgir: str) -> str | None:
    """A tensor-core dot that tilec did not write: Triton's combine pass rewrites
    `tl.sum(x[:, :, None] * y[None, :, :], axis=1)` into a TF32 `tl.dot`, wrong for a k tile narrower
    than the instruction's k (its operand is replicated: fuzz seed 900441 summed 8 times) and TF32
    where the compute asked for float32."""
    body = source.split(f"def {name}(", 1)[1].split("\n@triton.jit", 1)[0]
    if "tl.dot(" not in body and ("tt.dot" in ttgir or "warp_group_dot" in ttgir):
        return "Triton made a tl.dot of a tile sum that tilec did not lower to tl.dot"
    return None


def compile_case(path: str) -> list[tuple[str, str | None]]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from tilec.ir.dtypes import triton_name
    from tilec.lower.program import Program

    code = Path(path).read_text().replace('if __name__ == "__main__":\n    run_script_case(CASE)', "")
    ns: dict = {}
    exec(compile(code, path, "exec"), ns)  # noqa: S102 - a reproduction script the fuzzer wrote
    case = ns["CASE"]
    outputs = [a for a in case["args"] if not a.is_placeholder]
    prog = Program(case["sched"], case["config"], target="cuda", outputs=outputs, specialize=case.get("specialize"))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(prog.source())
    spec = importlib.util.spec_from_file_location("tilec_cuda_form", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    results = []
    for k in prog.kernels:
        sig, consts = {}, {}
        for p in k.params:
            if p.kind == "tensor":
                ty = str(getattr(triton.language, triton_name(case["sched"].tensors[p.tensor].dtype)[3:]))
                sig[p.name] = "*" + {"int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                                     "uint8": "u8"}.get(ty, ty)
            elif p.kind == "constexpr":
                sig[p.name], consts[p.name] = "constexpr", prog.config[p.name]
            else:
                sig[p.name] = "i32"
        try:
            compiled = triton.compile(ASTSource(getattr(mod, k.name), sig, consts), target=GPUTarget("cuda", 90, 32))
            results.append((k.name, _unasked_dot(k.name, prog.source(), compiled.asm["ttgir"])))
        except Exception as e:  # noqa: BLE001 - every compiler failure is reported
            results.append((k.name, f"{type(e).__name__}: {str(e)[-600:]}"))
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seeds", nargs="*", type=int)
    ap.add_argument("--file", action="append", default=[], help="a reproduction script (repeatable)")
    a = ap.parse_args()
    paths = list(a.file)
    for seed in a.seeds:
        out = Path(tempfile.gettempdir()) / f"tilec_fuzz_case_{seed}.py"
        out.write_text(subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--show", str(seed)],
                                      capture_output=True, text=True, check=True, cwd=ROOT).stdout)
        paths.append(str(out))
    from tilec.errors import TilecError

    failed = 0
    for path in paths:
        try:
            results = compile_case(path)
        except TilecError as e:  # the case is refused: nothing to compile
            print(f"REFUSED {Path(path).name}: {type(e).__name__}: {str(e)[:120]}")
            continue
        for name, err in results:
            print(f"{'OK  ' if err is None else 'FAIL'} {Path(path).name} {name}" + (f"\n{err}" if err else ""))
            failed += err is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
