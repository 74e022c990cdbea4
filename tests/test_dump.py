"""Kernel files you can read and run: each call's module is written as `<outputs>_<hash>.py` with its
launch code, `python that_file.py` runs it on random inputs, `TILEC_LOGS=output_code` prints each module
as it is built, kernels are named after what they store and each stage's code follows a comment with
its compute. The launch code must do what tilec's own call does: compared bit for bit on every example."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.errors import ArgumentError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

NAMES = ["matmul_silu", "persistent_gemm", "swiglu", "splitk_gemm", "rmsnorm", "softmax", "transpose_bias",
         "batched_matmul", "silu_mul_fp8", "rowscale_fp8", "attention"]


def _env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TILEC_LOGS")}
    env["TILEC_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))
    return env | extra


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit, NaN where NaN (the same kernels on the same inputs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        a, b = a.float(), b.float()
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return bool((a == b).all())


# the file's launch() runs Triton's interpreter as it is, without tilec's quiet_launch (triton_compat.py),
# so the interpreter's deprecated numpy array-to-scalar conversion shows here
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0 to a scalar:DeprecationWarning")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_the_kernel_file_launches_what_the_kernel_runs(name):
    """Each example at a size that divides no tile (its second SIZES entry where it has one): the file's
    launch() on the same inputs gives the kernel's outputs exactly."""
    mod = importlib.import_module(name)
    s, args = mod.make()
    kern = tc.build(s, args)
    sizes = mod.SIZES[1] if len(mod.SIZES) > 1 else mod.SIZES[0]
    torch.manual_seed(3)
    xs = mod.inputs(sizes, "cpu" if not torch.cuda.is_available() else "cuda")
    outs = kern(*xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    path = kern.path
    assert path is not None and path.exists()
    assert path.name.startswith("_".join(t.name for t in kern.outputs) + "_")
    text = path.read_text()
    assert "def launch(" in text and "def main(" in text and 'if __name__ == "__main__":' in text
    assert all(f"def {k.name}(" in text for k in kern.program.kernels)
    dumped = _import(path, f"dumped_{name}")
    again = dumped.launch(*xs)
    again = again if isinstance(again, tuple) else (again,)
    assert len(again) == len(outs)
    for a, b in zip(again, outs):
        assert _same(a, b), f"{name}: the file's launch() differs from the kernel's call"


@pytest.mark.slow
def test_python_runs_a_dumped_file(tmp_path):
    """`kernel.dump(**sizes)` writes the file; `python file` runs it at its sizes and at others given by name,
    without tilec imported and without TRITON_INTERPRET set."""
    import matmul_silu

    s, args = matmul_silu.make()
    kern = tc.build(s, args)
    path = kern.dump(tmp_path / "y.py", M=37, K=45, N=20)
    assert path == tmp_path / "y.py"
    strip = lambda text: text[:text.index("EXAMPLE_SIZES = ")]  # noqa: E731
    assert strip(path.read_text()) == strip(kern.path.read_text())  # the very file the call ran
    assert "EXAMPLE_SIZES = {'M': 37, 'K': 45, 'N': 20}" in path.read_text()
    env = _env(tmp_path)
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # no tilec on the path: the file stands alone
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Y: shape (37, 20) torch.bfloat16, sum " in p.stdout
    p = subprocess.run([sys.executable, str(path), "M=5", "K=3", "N=70"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Y: shape (5, 70) torch.bfloat16" in p.stdout
    p = subprocess.run([sys.executable, str(path), "Q=5"], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert p.returncode != 0 and "expected NAME=INT for the sizes ['M', 'K', 'N']" in p.stderr


def test_a_file_lowered_for_some_sizes_refuses_others():
    """Softmax's rows that fit one tile lower with no loop (a call fact): its file says so for longer rows
    instead of computing the row's max over the first tile only."""
    import softmax

    s, args = softmax.make()
    kern = tc.build(s, args)
    path = kern.dump(M=3, N=100)
    dumped = _import(path, "dumped_softmax_short")
    x = torch.randn(3, 100)
    torch.testing.assert_close(dumped.launch(x), torch.softmax(x, -1))
    facts = [f for f in kern._programs if f[2]]
    assert facts, "a call fact was expected for a row that fits one tile"
    with pytest.raises(ValueError, match="lowered for sizes where"):
        dumped.launch(torch.randn(3, 5000))


def test_dump_checks_its_sizes():
    import matmul_silu

    s, args = matmul_silu.make()
    kern = tc.build(s, args)
    with pytest.raises(ArgumentError, match="missing N"):
        kern.dump(M=3, K=4)
    with pytest.raises(ArgumentError, match="not a size of the inputs: Z"):
        kern.dump(M=3, K=4, N=5, Z=1)
    with pytest.raises(ArgumentError, match="size M must be an int >= 0"):
        kern.dump(M=-1, K=4, N=5)


@pytest.mark.slow
def test_tilec_logs_output_code_prints_each_module_and_its_path(tmp_path):
    script = ("import sys; sys.path.insert(0, 'examples'); import torch, tilec as tc, matmul_silu as m\n"
              "s, args = m.make(); k = tc.build(s, args)\n"
              "dev = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
              "k(torch.randn(9, 7, device=dev).bfloat16(), torch.randn(7, 5, device=dev).bfloat16())\n"
              "print('PATH', k.path)\n")
    env = _env(tmp_path, TILEC_LOGS="output_code")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       cwd=EXAMPLES.parent, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    path = p.stdout.split("PATH ")[1].strip()
    assert f"tilec: kernel module {path}" in p.stderr
    assert "def Y_kernel(" in p.stderr and "def launch(A, W, *, Y=None):" in p.stderr
    # without the switch: nothing printed
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(tmp_path),
                       cwd=EXAMPLES.parent, timeout=300)
    assert p.returncode == 0 and "tilec: kernel module" not in p.stderr


def test_an_unknown_tilec_logs_name_is_an_error(monkeypatch):
    from tilec.runtime import kernel as kernel_mod

    monkeypatch.setenv("TILEC_LOGS", "output_code,graphs")
    with pytest.raises(ArgumentError, match="unknown graphs; it takes a comma-separated list of output_code, passes"):
        kernel_mod.logs()
    monkeypatch.setenv("TILEC_LOGS", "passes,output_code")
    assert kernel_mod.logs() == {"passes", "output_code"}


def test_tc_lower_refuses_an_unknown_tilec_logs_name_too(monkeypatch):
    # tc.lower alone (no build) used to ignore a misspelt switch: TILEC_LOGS=pases printed nothing, silently
    import persistent_gemm

    s, _ = persistent_gemm.make()
    monkeypatch.setenv("TILEC_LOGS", "pases")
    with pytest.raises(ArgumentError, match="TILEC_LOGS='pases': unknown pases"):
        tc.lower(s)


def test_tilec_logs_passes_prints_the_nest_after_each_pass(monkeypatch, capsys):
    import persistent_gemm

    from tilec.lower.passes import PASSES

    s, _ = persistent_gemm.make()
    program = tc.lower(s)
    assert capsys.readouterr().err == ""  # without the switch: nothing printed
    monkeypatch.setenv("TILEC_LOGS", "passes")
    program = tc.lower(s)
    err = capsys.readouterr().err
    heads = [f"# tilec: after pass {p.__module__.rsplit('.', 1)[-1]}.{p.__name__}" for p in PASSES]
    assert [line for line in err.splitlines() if line.startswith("# tilec: after pass")] == heads
    assert heads[:4] == ["# tilec: after pass passes.build", "# tilec: after pass subtiles.merge_pieces",
                         "# tilec: after pass persistent.tile_loops", "# tilec: after pass fusion.compute_with"]
    built, tiled = err.split(heads[2])[0], err.split(heads[2])[1].split(heads[3])[0]
    assert "persistent tile loop" not in built and "persistent tile loop" in tiled  # each pass's own nest
    assert err.rstrip().endswith(str(program).rstrip())  # the last pass's nest is the program's


def test_kernels_are_named_after_what_they_store():
    import rowscale_fp8
    import splitk_gemm

    s, args = rowscale_fp8.make()
    assert [k.name for k in tc.lower(s).kernels] == ["Q_S_kernel"]
    s, args = splitk_gemm.make()
    assert [k.name for k in tc.lower(s).kernels] == ["C_partial_kernel", "Y_kernel"]


def test_each_stage_follows_a_comment_with_its_compute():
    import matmul_silu

    s, args = matmul_silu.make()
    src = tc.lower(s).source()
    lines = src.splitlines()
    i = lines.index("    # Y[i, j] = silu(C[i, j])")
    assert "Y_val" in lines[i + 2]  # the comment, then x = C_val..., then Y_val = ...
    assert "    # C[i, j] = sum((A[i, k] * W[k, j]), axis=[k])" in lines


def test_tilec_lower_writes_the_gpu_file_on_a_cpu(tmp_path):
    """`tilec lower FILE --target cuda --sizes ... --out PATH`: the GPU form's runnable file, made without a
    GPU (no interpreter prelude, libdevice's tanh and the like as compiled; TMA descriptors where the sizes
    allow them), and the printed source for a target and sizes."""
    from tilec import cli

    out = tmp_path / "y_cuda.py"
    assert cli.main(["lower", str(EXAMPLES / "persistent_gemm.py"), "--config", "TMA=1", "--target", "cuda",
                     "--sizes", "M=256,K=256,N=256", "--out", str(out)]) == 0
    text = out.read_text()
    assert "TRITON_INTERPRET" not in text and "enable_fp_fusion=False" in text
    assert "TensorDescriptor.from_tensor(" in text  # 256 x 256 bf16: rows of 512 B, TMA-aligned
    compile(text, str(out), "exec")
    odd = tmp_path / "y_odd.py"
    assert cli.main(["lower", str(EXAMPLES / "persistent_gemm.py"), "--config", "TMA=1", "--target", "cuda",
                     "--sizes", "M=256,K=100,N=256", "--out", str(odd)]) == 0
    assert "TensorDescriptor" not in odd.read_text()  # rows of 200 B: the pointer form, as a call would


def test_tilec_lower_prints_a_target_and_sizes(capsys):
    from tilec import cli

    assert cli.main(["lower", str(EXAMPLES / "softmax.py"), "--target", "interpreter", "--sizes", "M=3,N=100"]) == 0
    out = capsys.readouterr().out
    assert "# Triton source (interpreter form)" in out and "sizes M=3,N=100" in out
    assert not re.search(r"^\s*for \w+ in ", out.split("# Triton source")[1], re.M)  # one tile a row: no loop
    assert cli.main(["lower", str(EXAMPLES / "softmax.py"), "--out", "x.py"]) == 2
    assert "--out writes a runnable kernel file for one call: give its sizes with --sizes" in capsys.readouterr().err


@pytest.mark.parametrize("role", ["size", "tensor"])
@pytest.mark.parametrize("name", ["launch", "main", "cdiv", "sizes", "outs", "random_tensor", "programs",
                                  "TensorDescriptor", "NEEDED_SIZES", "EXAMPLE_SIZES", "sys", "Y_kernel", "x"])
@pytest.mark.slow
def test_user_names_cannot_shadow_the_launch_code(name, role, tmp_path):
    """A size or an input named like what the launch code calls (its helpers, the kernel): the file still
    launches what the kernel runs, and `python file` runs."""
    N = tc.size_vars(name if role == "size" else "N")
    X = tc.placeholder((N,), "float32", name=name if role == "tensor" else "X")
    B = tc.placeholder((4,), "float32", name="B")
    Y = tc.compute((N,), lambda i: tc.exp(X[i]) + B[i % 4], name="Y")
    kern = tc.build(tc.create_schedule(Y), [X, B, Y])
    xs = [torch.randn(37), torch.randn(4)]
    y = kern(*xs)
    dumped = _import(kern.path, f"dumped_names_{role}_{name}")
    assert _same(dumped.launch(*xs), y)
    path = kern.dump(tmp_path / "f.py", **{N.name: 9})
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Y: shape (9,) torch.float32" in p.stdout


def test_a_kernel_without_inputs_has_launch_code_too(tmp_path):
    """Fuzz seeds 790545812, 790546017: a compute of constants only (no inputs) wrote `def launch(, *, Y=None)`,
    a syntax error at the first call."""
    M = tc.size_vars("M")
    Y = tc.compute((M, 3), lambda i, j: tc.exp(i * 0.5 + j), name="Y", dtype="float32")
    ky = tc.build(tc.create_schedule(Y), [Y])  # M appears in no input: each call gives it
    with pytest.raises(ArgumentError, match="size M is in no input's shape"):
        ky()
    y = ky(M=5)
    assert "def launch(*, M, Y=None):" in ky.path.read_text()
    assert _same(_import(ky.path, "dumped_no_inputs_m").launch(M=5), y)
    Z = tc.compute((4, 3), lambda i, j: tc.exp(i * 0.5 + j), name="Z", dtype="float32")
    kern = tc.build(tc.create_schedule(Z), [Z])
    z = kern()
    dumped = _import(kern.path, "dumped_no_inputs")
    assert "def launch(*, Z=None):" in kern.path.read_text()
    assert _same(dumped.launch(), z)
