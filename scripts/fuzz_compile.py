"""Compile the CUDA form of fuzz cases for an H100/H200 (sm_90) on a CPU, with Triton's own compiler.

The interpreter runs the interpreter form of a kernel; the GPU runs the CUDA form, which Triton's
frontend and passes may reject where the interpreter accepts (loop-carried type changes, compiler
aborts: the H200 fuzz run of 2026-12-01 found 25 such cases). Triton compiles without a GPU, so
these are caught here, in a process without TRITON_INTERPRET. A kernel in which Triton made a
tensor-core dot that tilec did not write fails too (see `_unasked_dot`):

    python scripts/fuzz_compile.py 900011 902482      # fuzz seeds: OK/FAIL per kernel, exit 1 on a FAIL
    python scripts/fuzz_compile.py --file case.py     # a reproduction script (scripts/fuzz.py --show)
    python scripts/fuzz_compile.py --random 500 --seed 1   # a campaign: every case's CUDA form
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
    from tilec.runtime.kernel import block_shape

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
            if p.kind in ("tensor", "descriptor"):
                t = prog.workspaces[p.tensor][0] if p.tensor in prog.workspaces else case["sched"].tensors[p.tensor]
                ty = str(getattr(triton.language, triton_name(t.dtype)[3:]))
                ty = {"int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
                      "uint8": "u8", "uint16": "u16"}.get(ty, ty)
                if p.kind == "tensor":
                    sig[p.name] = "*" + ty
                else:  # a host-side tensor descriptor (cache_read tma=True): Triton's own mangling of one
                    sig[p.name] = f"tensordesc<{ty}[{', '.join(map(str, block_shape(p, prog.config)))}]>"
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


def _compile_in_child(path: str, timeout: float) -> tuple[str, list]:
    """compile_case in a forked process (a Triton abort kills the child, not the campaign):
    ("refused", [message]) | ("compiled", [(kernel, error or None)]) | ("failed", [why])."""
    import json
    import signal
    import time

    from tilec.errors import TilecError

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compile, report as JSON, exit without cleanup
        os.setpgid(0, 0)  # its own group: a timeout kills Triton's ptxas too (else it held the campaign's pipes)
        os.close(r)
        try:
            out = ("compiled", compile_case(path))
        except TilecError as e:
            out = ("refused", [f"{type(e).__name__}: {str(e)[:160]}"])
        except BaseException as e:  # noqa: BLE001 - an internal error of the CUDA form is a failure
            out = ("failed", [f"internal {type(e).__name__}: {str(e)[-600:]}"])
        with os.fdopen(w, "w") as f:
            f.write(json.dumps(out))
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)  # the child and what it started (ptxas): seed 690604706's compile
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(r)
        return "failed", [f"compiling took over {timeout:g} s"]
    with os.fdopen(r) as f:
        text = f.read()
    if os.WIFSIGNALED(status):
        return "failed", [f"the compiler died of signal {os.WTERMSIG(status)} (an abort inside Triton)"]
    kind, items = json.loads(text)
    return kind, [tuple(i) if isinstance(i, list) else i for i in items]


def campaign(first: int, cases: int, budget: float, timeout: float, log=print) -> dict:
    """Compile the CUDA form of fuzz cases first, first+1, ... for sm_90; returns the counts and the
    failing seeds. Stops starting cases after `budget` seconds."""
    import time

    from tests.fuzz import gen

    counts = {"cases": 0, "refused": 0, "compiled": 0, "failed": 0, "kernels": 0}
    failures = []
    t0 = time.monotonic()
    for seed in range(first, first + cases):
        if time.monotonic() - t0 > budget:
            break
        case, _ = gen.generate(seed)
        path = Path(tempfile.gettempdir()) / f"tilec_fuzz_case_{seed}.py"
        path.write_text(case.script())
        kind, items = _compile_in_child(str(path), timeout)
        counts["cases"] += 1
        if kind == "compiled":
            counts["kernels"] += len(items)
            bad = [f"{name}: {err}" for name, err in items if err]
            kind, items = ("failed", bad) if bad else ("compiled", items)
        counts[kind] += 1
        if kind == "failed":
            failures.append((seed, items))
            log(f"FAIL seed {seed}: " + "; ".join(items)[:600])
        path.unlink()
    counts["seconds"] = round(time.monotonic() - t0, 1)
    counts["failures"] = failures
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seeds", nargs="*", type=int)
    ap.add_argument("--file", action="append", default=[], help="a reproduction script (repeatable)")
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="compile the CUDA form of N fuzz cases from --seed on (a campaign)")
    ap.add_argument("--seed", type=int, default=1, help="first seed of --random")
    ap.add_argument("--time-budget", type=float, default=float("inf"), help="seconds of --random")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one case may compile")
    a = ap.parse_args()
    if a.random:
        c = campaign(a.seed, a.random, a.time_budget, a.timeout)
        print(f"cases: {c['cases']} in {c['seconds']} s; refused: {c['refused']}; compiled: {c['compiled']} "
              f"({c['kernels']} kernels); failed: {c['failed']}")
        return 1 if c["failed"] else 0
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
