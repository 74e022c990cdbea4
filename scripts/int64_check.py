"""Check tilec's int64 index path on tensors whose element offsets pass 2**31, against torch.

Kernels index with int32 until some tensor (input, output or buffer between kernels) has more than
2**31 - 1 elements or an element that far from its first; then `Kernel._prepare` launches the int64
form of the program (`kernel._program(True)`). On a CPU that cannot be run at full size (the interpreter
would take hours), so this script is for a CUDA machine: each case allocates 2-5 GB (the H200 has 139 GB).

    python scripts/int64_check.py            # on a CUDA machine: PASS/FAIL per case, exit 1 on any FAIL
    python scripts/int64_check.py --small    # anywhere (TRITON_INTERPRET=1 on a CPU): the same cases at
                                             # small sizes, the int64 form forced, to check the script

Without a CUDA device (and without --small) it prints SKIP and exits 0. Each case runs in its own process:
a kernel that faults (an illegal memory access) leaves CUDA unusable in the process that launched it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (by tilec)

import tilec as tc  # noqa: E402
from tilec.runtime import kernel as kernel_mod  # noqa: E402

BIG = 2**31


def elementwise_1d(n, device):
    """Z = X + 1 on a 1-D int8 tensor of n elements."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "int8", name="X")
    Z = tc.compute((N,), lambda i: X[i] + 1, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    x = torch.randint(-100, 100, (n,), dtype=torch.int8, device=device)
    return kern, (x,), lambda z: torch.equal(z, x + 1)


def elementwise_2d(rows, cols, device):
    """Z = X * 2 on a 2-D bfloat16 tensor (exact in bfloat16)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    x = torch.randn(rows, cols, dtype=torch.bfloat16, device=device)
    return kern, (x,), lambda z: torch.equal(z, x * 2)


def transposed_input(rows, cols, device):
    """Z = X * 2 where X is a transposed view: the offset of X[i, j] is j * rows + i."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    x = torch.randn(cols, rows, dtype=torch.bfloat16, device=device).t()
    return kern, (x,), lambda z: torch.equal(z, x * 2)


def row_sum(rows, cols, device):
    """R[i] = sum_k X[i, k] over int8 values in [-1, 1], accumulated in int32 (exact)."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "int8", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.sum(X[i, k], axis=k, acc_dtype="int32"), name="R")
    kern = tc.build(tc.create_schedule(R), [X, R])
    x = torch.randint(-1, 2, (rows, cols), dtype=torch.int8, device=device)
    return kern, (x,), lambda r: torch.equal(r, x.sum(1, dtype=torch.int32))


def column_sum(rows, cols, device):
    """R[j] = sum_i X[i, j] of bfloat16 values, accumulated in float32."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "bfloat16", name="X")
    k = tc.reduce_axis(M, name="k")
    R = tc.compute((N,), lambda j: tc.sum(X[k, j], axis=k, acc_dtype="float32"), name="R")
    kern = tc.build(tc.create_schedule(R), [X, R])
    x = torch.randn(rows, cols, dtype=torch.bfloat16, device=device)
    ref = x.float().sum(0)
    return kern, (x,), lambda r: torch.allclose(r, ref, rtol=1e-3, atol=1e-2 * rows**0.5)


def expanded_input(n, device):
    """Z = X + 1 where X is one int8 expanded to n elements (stride 0: numel passes 2**31, offsets do not)."""
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "int8", name="X")
    Z = tc.compute((N,), lambda i: X[i] + 1, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    x = torch.full((1,), 5, dtype=torch.int8, device=device).expand(n)
    return kern, (x,), lambda z: bool((z == 6).all())


def cases(small: bool):
    """(name, make, args): full sizes pass 2**31 elements or offsets; small ones are for --small."""
    if small:
        return [("elementwise 1-D int8", elementwise_1d, (3000,)),
                ("elementwise 2-D bfloat16", elementwise_2d, (67, 40)),
                ("transposed input view", transposed_input, (67, 40)),
                ("row sum int8 -> int32", row_sum, (40, 77)),
                ("column sum bfloat16 -> float32", column_sum, (67, 40)),
                ("expanded input (stride 0)", expanded_input, (3000,))]
    return [("elementwise 1-D int8", elementwise_1d, (BIG + 2**20 + 7,)),
            ("elementwise 2-D bfloat16", elementwise_2d, (2**16 + 3, 2**15)),
            ("transposed input view", transposed_input, (2**16 + 3, 2**15)),
            ("row sum int8 -> int32", row_sum, (2**15, 2**16 + 5)),
            ("column sum bfloat16 -> float32", column_sum, (2**16 + 1, 2**15)),
            ("expanded input (stride 0)", expanded_input, (BIG + 5,))]


def run_case(index: int, small: bool) -> bool:
    """Run one case in this process; print its PASS/FAIL line."""
    name, make, sizes = cases(small)[index]
    cuda = torch.cuda.is_available()
    if small:
        kernel_mod._INT32_LIMIT = 1000  # so that the small cases take the int64 form too
    t0 = time.perf_counter()
    try:
        kern, inputs, check = make(*sizes, "cuda" if cuda else "cpu")
        got = kern(*inputs)
        if cuda:
            torch.cuda.synchronize()
        ok = check(got)
        int64 = True in kern._programs
        detail = f"sizes {sizes}, int64 program {'used' if int64 else 'NOT used'}"
        ok = ok and int64
        if not ok and got.dim() >= 1:
            detail += f"; first values {got.flatten()[:4].tolist()}, last {got.flatten()[-4:].tolist()}"
    except Exception as e:  # a crash is a failure of this case
        ok, detail = False, f"{type(e).__name__}: {e}".splitlines()[0][:300]
        traceback.print_exc(limit=3)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="small sizes, the int64 form forced (runs anywhere)")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    ap.add_argument("--case", type=int, help=argparse.SUPPRESS)  # one case, in this process (used by main)
    args = ap.parse_args(argv)
    if args.case is not None:
        return 0 if run_case(args.case, args.small) else 1
    cuda = torch.cuda.is_available()
    if not cuda and not args.small:
        print("SKIP: int64_check needs a CUDA device (its tensors pass 2**31 elements, 2-5 GB each); "
              "run with --small to check the script itself")
        return 0
    print(f"int64_check: device {torch.cuda.get_device_name() if cuda else 'cpu (Triton interpreter)'}, "
          f"torch {torch.__version__}", flush=True)
    failed = 0
    for index, (name, _, _) in enumerate(cases(args.small)):
        if args.only and args.only not in name:
            continue
        cmd = [sys.executable, os.path.abspath(__file__), "--case", str(index)]
        cmd += ["--small"] if args.small else []
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = proc.stdout.splitlines()
        verdict = [line for line in lines if line.startswith(("PASS ", "FAIL "))]
        if proc.returncode == 0 and verdict and verdict[-1].startswith("PASS"):
            print(verdict[-1], flush=True)
            continue
        failed += 1
        notes = [line for line in lines if not line.startswith(("PASS ", "FAIL "))][-10:]
        print("\n".join(f"    {line}" for line in notes))
        print(verdict[-1] if verdict else f"FAIL {name}: its process exited with {proc.returncode}",
              flush=True)
    print(f"int64_check: {'all passed' if not failed else f'{failed} FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
