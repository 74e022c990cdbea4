"""Running kernels in Triton's CPU interpreter as a user sees it (issue 23, points 7 and 8): a correct
kernel prints no numpy warnings from the lanes its masks leave out, and a float8 input is read at sizes
its tile does not divide (the masked load's `other=` must be castable to float8, which the GPU
compiler needs as much as the interpreter: its CUDA form is compiled for sm_90 here too)."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import tilec as tc

ROOT = Path(__file__).resolve().parent.parent


def _tiled(stage, *tiles):
    """Split each axis of `stage` by its tile and bind the outer ones to the grid, outer loops first."""
    s = tc.create_schedule(stage)
    outer, inner = [], []
    for axis, tile in zip(stage.axis, tiles):
        o, i = s[stage].split(axis, tile)
        outer.append(o)
        inner.append(i)
    s[stage].reorder(*outer, *inner)
    for d, o in enumerate(outer):
        s[stage].bind(o, f"program_id.{d}")
    return s


def _warnings_of(fn):
    """fn()'s result and every warning it raised, none filtered out (not even repeats at one place)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [f"{w.category.__name__}: {w.message}" for w in caught]


def test_masked_lanes_print_no_numpy_warnings():
    """Issue 23 point 7: at 20 x 19 in 16 x 16 tiles, the lanes past the edge load 0, and the interpreter's
    numpy computed 0 / 0 and log(0) there, printing `RuntimeWarning: invalid value encountered in divide`
    (and `divide by zero encountered in log`) into the user's script, for a kernel that is right."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    D = tc.placeholder((M, N), "float32", name="D")
    Y = tc.compute((M, N), lambda i, j: X[i, j] / D[i, j] + tc.log(D[i, j]) + tc.sqrt(X[i, j]), name="Y")
    kernel = tc.build(_tiled(Y, 16, 16), [X, D, Y])
    x, d = torch.rand(20, 19) + 0.1, torch.rand(20, 19) + 0.5
    y, caught = _warnings_of(lambda: kernel(x, d))
    assert caught == []
    torch.testing.assert_close(y, x / d + torch.log(d) + torch.sqrt(x))


def test_nan_a_kernel_computes_still_reaches_the_output_without_warnings():
    """Only the warnings go: log of a negative is NaN, a max over a row with a NaN is NaN (tilec's max
    propagates NaN as torch's does; the interpreter's numpy nanmax warned `All-NaN slice encountered` on
    a tile of NaNs), inf / inf is NaN and 1 / 0 is inf, in the output as in torch."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    L = tc.compute((M, N), lambda i, j: tc.log(X[i, j]) + X[i, j] / X[i, j], name="L")
    c = tc.reduce_axis(N, name="c")
    R = tc.compute((M,), lambda i: tc.max(X[i, c] * 2.0, axis=c), name="R")
    s = tc.create_schedule([L, R])
    s[R].split(c, 16)
    kernel = tc.build(s, [X, L, R])
    x = torch.randn(5, 19)
    x[0, 3] = -1.0
    x[1, :] = float("nan")
    x[2, 4] = float("inf")
    x[3, 5] = 0.0
    (l, r), caught = _warnings_of(lambda: kernel(x))
    assert caught == []
    torch.testing.assert_close(l, torch.log(x) + x / x, equal_nan=True)
    torch.testing.assert_close(r, (x * 2.0).amax(dim=1), equal_nan=True)
    assert l[0, 3].isnan() and l[2, 4].isnan() and l[3, 5].isnan() and r[1].isnan()


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CPU user's path: the GPU host's numpy 2.4 fails Triton 3.6's "
                    "interpreter itself (shared/notes/gpu.md), and kernels there run compiled")
def test_a_user_script_in_the_interpreter_prints_nothing():
    """Point 7 as a user meets it: a script run with Python's default warning filters (`-W default`: every
    warning shown once per place) prints its own output and nothing else."""
    script = (
        "import torch\nimport tilec as tc\n"
        "M, N = tc.size_vars('M N')\n"
        "X = tc.placeholder((M, N), 'float32', name='X')\n"
        "Y = tc.compute((M, N), lambda i, j: 1.0 / X[i, j] + tc.log(X[i, j]), name='Y')\n"
        "s = tc.create_schedule(Y)\n"
        "s[Y].split(Y.axis[1], 16)\n"
        "x = torch.rand(3, 21) + 0.5\n"
        "y = tc.build(s, [X, Y])(x)\n"
        "print(torch.allclose(y, 1.0 / x + torch.log(x)))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300)
    assert (run.returncode, run.stdout, run.stderr) == (0, "True\n", "")


def _fp8_gemm(a_dtype: str, b_dtype: str):
    """C = A @ B in float32 from float8 inputs: 16 x 16 output tiles, k in tiles of 32 (tl.dot)."""
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), a_dtype, name="A")
    B = tc.placeholder((K, N), b_dtype, name="B")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k),
                   name="C")
    s = tc.create_schedule(C)
    i, j = C.axis
    io, ii = s[C].split(i, 16)
    jo, ji = s[C].split(j, 16)
    ko, ki = s[C].split(k, 32)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    return s, [A, B, C]


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_gemm_at_sizes_its_tiles_do_not_divide(dtype):
    """Issue 23 point 8: the masked load of a float8 tile was `tl.load(..., other=0)`, and Triton casts
    that int32 0 to the element type, which it cannot do for float8 (`cannot cast ... to fp8e4nv`): the
    kernel was exact at 32 x 32 x 64 and failed at every ragged size. Compared with torch in float32
    from the float8 values (each product is exact in float32; the tolerance is tilec's for float32)."""
    s, args = _fp8_gemm(dtype, dtype)
    assert "tl.dot(" in tc.lower(s).source()
    kernel = tc.build(s, args)
    torch.manual_seed(23)
    for m, n, k in [(32, 32, 64), (20, 19, 21), (1, 17, 33), (37, 5, 70)]:
        a = torch.randn(m, k).to(getattr(torch, dtype))
        b = torch.randn(k, n).to(getattr(torch, dtype))
        torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-5, atol=1e-5)


_SM90_CASE = """import tilec as tc
M, N, K = tc.size_vars("M N K")
A = tc.placeholder((M, K), "float8_e4m3fn", name="A")
B = tc.placeholder((K, N), "float8_e5m2", name="B")
k = tc.reduce_axis(K, name="k")
C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k].astype("float32") * B[k, j].astype("float32"), axis=k), name="C")
s = tc.create_schedule(C)
i, j = C.axis
io, ii = s[C].split(i, 64)
jo, ji = s[C].split(j, 64)
ko, ki = s[C].split(k, 32)
s[C].reorder(io, jo, ko, ii, ji, ki)
s[C].bind(io, "program_id.0")
s[C].bind(jo, "program_id.1")
CASE = dict(sched=s, args=[A, B, C], config={})
"""


@pytest.mark.slow
def test_float8_masked_loads_compile_for_sm90(tmp_path):
    """The same loads in the CUDA form: Triton's GPU frontend refused `other=0` for a float8 pointer as
    the interpreter did (the cast is Triton's, not the interpreter's). The form tilec writes for the GPU
    compiles for an H100/H200 (sm_90) on this CPU (scripts/fuzz_compile.py), e4m3 times e5m2 in tl.dot."""
    case = tmp_path / "fp8_ragged_gemm.py"
    case.write_text(_SM90_CASE)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz_compile.py"), "--file", str(case)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert run.returncode == 0 and "OK   fp8_ragged_gemm.py C_kernel" in run.stdout, run.stdout + run.stderr
