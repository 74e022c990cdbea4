"""The real-kernel suite (suite/): every kernel against PyTorch, with its default schedule (no primitive) and its
fast one, at each of its sizes (sizes that divide no tile, size-1 dimensions), on non-contiguous inputs and on
inputs holding NaN and infinities; the fast schedule at the last choice of every knob too. The kernels tilec
cannot write yet are refused with the reason their module states.

All but two tests are the slow tier (each builds a schedule, most interpret a kernel); the fast tier checks that
suite/ lists every module and runs the refusals."""

from __future__ import annotations

import importlib
import sys
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import suite  # noqa: E402
import tilec as tc  # noqa: E402
from suite import harness  # noqa: E402


def _module(name):
    return importlib.import_module(f"suite.{name}")


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _runs():
    for name in suite.NAMES:
        mod = _module(name)
        for fast in (False, True):
            for n, sizes in enumerate(mod.SIZES):
                sid = "-".join(f"{k}{v}" for k, v in sizes.items())
                yield pytest.param(name, fast, n, "plain", id=f"{name}-{'fast' if fast else 'default'}-{sid}")
        for which in ("strided", "special"):
            if which == "special" and not getattr(mod, "SPECIAL", True):
                continue
            for fast in (False, True):
                yield pytest.param(name, fast, 0, which, id=f"{name}-{'fast' if fast else 'default'}-{which}")


@pytest.mark.slow
@pytest.mark.parametrize("name,fast,n,which", list(_runs()))
def test_kernel_matches_torch(name, fast, n, which):
    mod = _module(name)
    errs = harness.run(mod, fast, mod.SIZES[n], which, seed=_seed(name, fast, n, which))
    assert len(errs) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", suite.NAMES)
def test_kernel_other_config(name):
    """The fast schedule at the last choice of every knob (other tiles, warps, stages) is correct too."""
    mod = _module(name)
    s, _ = mod.make(True)
    config = {k: knob.choices[-1] for k, knob in s.knobs.items()}
    harness.run(mod, True, mod.SIZES[-1], "plain", config=config, seed=_seed(name, "config"))


@pytest.mark.slow
@pytest.mark.parametrize("name", suite.NAMES)
def test_module_is_complete(name):
    """Every kernel says what it is written after and defines what the harness calls; its sizes hold a size-1
    dimension (of a size, or of an output: Halide's blur at H = 3); its fast schedule has primitives where the
    default has none."""
    mod = _module(name)
    assert mod.__doc__ and isinstance(mod.ORIGINAL, str) and len(mod.ORIGINAL) > 20
    def has_one(sizes):
        given = {n: sizes[n] for n in getattr(mod, "CALL_SIZES", ())}
        outs = mod.reference(*mod.inputs(sizes, "cpu"), **given)
        return 1 in sizes.values() or any(1 in o.shape for o in (outs if isinstance(outs, tuple) else (outs,)))
    assert mod.SIZES and any(has_one(sizes) for sizes in mod.SIZES), "no size-1 dimension among SIZES or outputs"
    for attr in ("make", "inputs", "reference"):
        assert callable(getattr(mod, attr))
    default, _ = mod.make(False)
    fast, _ = mod.make(True)
    assert not default.trace.steps and fast.trace.steps, "the default schedule is untouched, the fast one is not"


@pytest.mark.parametrize("name", suite.REFUSED)
def test_refused_kernel_says_why(name):
    """A kernel tilec cannot write yet is refused with a TilecError that gives its module's reason."""
    mod = _module(name)
    assert mod.__doc__ and mod.ORIGINAL and mod.REASON
    with pytest.raises(tc.TilecError) as e:
        mod.make(True)
    assert mod.REASON in str(e.value)


def test_suite_lists_every_module():
    """Every module of suite/ is in NAMES or REFUSED, once."""
    here = Path(suite.__file__).parent
    files = {p.stem for p in here.glob("*.py")} - {"__init__", "harness"}
    listed = suite.NAMES + suite.REFUSED
    assert len(listed) == len(set(listed)) and set(listed) == files


@pytest.mark.slow
def test_gpu_benchmark_paths_run_on_a_cpu(tmp_path):
    """benchmarks/suite.py (the GPU table) on a CPU with `--cpu-check`: four kernels through every path (configs
    checked against the native-dtype `torch_ref`, eager, torch.compile, the JSON; a size given at the call), so
    that it cannot rot between the GPU runs that use it."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "suite.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "suite.py"), "--cpu-check", "--only",
                        "layer_norm,dropout,halide_blur_u16,padded_vocab_softmax", "--json", str(out)],
                       capture_output=True, text=True, cwd=root, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "with a failure (tilec, torch_ref, BENCH's memory): none" in p.stdout, p.stdout[-2000:]
    assert "torch.compile failed: none" in p.stdout
    assert out.exists() and json.loads(out.read_text())


@pytest.mark.slow
def test_gpu_benchmark_auto_path_runs_on_a_cpu(tmp_path):
    """benchmarks/suite.py --auto (issue 27's GPU table: tc.auto_schedule's schedule in place of the fast one) on a
    CPU with --cpu-check: the auto schedule's knobs are the config searched, checked against torch_ref."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "auto.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "suite.py"), "--cpu-check", "--auto", "--no-compile",
                        "--only", "swiglu,matmul_leaky_relu", "--json", str(out)],
                       capture_output=True, text=True, cwd=root, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "with a failure (tilec, torch_ref, BENCH's memory): none" in p.stdout, p.stdout[-2000:]
    rows = {r["kernel"]: r for r in json.loads(out.read_text())["rows"]}
    assert "C_BM" in str(rows["matmul_leaky_relu"]) and "c_BLOCK" in str(rows["swiglu"])


@pytest.mark.slow
def test_transfer_benchmark_runs_on_a_cpu(tmp_path):
    """benchmarks/transfer.py (issue 27 item 4: does the learned cost model make later kernels tune faster?) on a
    CPU with --cpu-check: each kernel's auto schedule tuned twice, analytic and learned, every trial recorded.
    kl_div is tuned on the suite's inputs (log-probabilities; on tc.tune's normal random ones its reference is
    NaN and every candidate failed)."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "transfer.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "transfer.py"), "--cpu-check",
                        "--only", "gelu_exact,kl_div", "--json", str(out)],
                       capture_output=True, text=True, cwd=root, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = json.loads(out.read_text())
    assert [r["kernel"] for r in data["rows"]] == ["gelu_exact", "kl_div"]
    for r in data["rows"]:
        assert "error" not in r, r
        for m in ("analytic", "learned"):
            assert r[m]["trials"] and r[m]["best_us"] > 0 and r[m]["cost_model"] == "the analytic cost model"
    assert data["summary"]["kernels"] == 2 and data["summary"]["learned_used_on"] == []
