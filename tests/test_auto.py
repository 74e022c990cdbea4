"""tc.auto_schedule (tilec/tune/auto.py): a schedule made by rules over the compute alone, and
tc.schedule_code, the schedule as Python a user pastes and edits.

Every example and every kernel of the real-kernel suite, given only its outputs, gets a schedule that builds a
kernel matching PyTorch (on sizes that divide no tile; the slow tier runs them all, the default tier a few); the
rules do what they say (a GEMM's epilogue in its tiles with tl.dot, elementwise stages inlined, knobs per stage);
and the code `schedule_code` prints, run again, rebuilds the same Triton source, at the knobs' first choices and
at other ones.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.tune import auto

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

import suite  # noqa: E402
from suite import harness  # noqa: E402

EXAMPLES = ["attention", "attention_lse", "batched_matmul", "blur", "blur_sliding", "cross_entropy", "matmul",
            "matmul_silu", "persistent_gemm", "rmsnorm", "rowscale_fp8", "separable5", "silu_mul_fp8", "softmax",
            "splitk_gemm", "stencil_after_reduction", "swiglu", "transpose_bias"]
FAST = {"matmul_silu", "blur", "rmsnorm", "swiglu", "histogram", "kv_cache_write"}
# the interpreter runs these auto schedules for minutes (conv2d's and harris's tiles are loops of single
# elements there): checked on the GPU host, not in CI
TOO_SLOW_HERE = {"conv2d", "harris"}


def _param(name):
    marks = () if name in FAST else (pytest.mark.slow,)
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_param(n) for n in EXAMPLES])
def test_every_example_auto_scheduled_matches_torch(name):
    import common

    mod = importlib.import_module(name)
    s0, args = mod.make()
    s = tc.auto_schedule(list(s0.outputs))
    kernel = tc.build(s, args)
    torch.manual_seed(1)
    # the smallest of the example's sizes past its first that is not all ones (they divide no tile)
    sizes = min((d for d in mod.SIZES[1:] if set(d.values()) != {1}), key=lambda d: math.prod(d.values()))
    xs = mod.inputs(sizes, "cpu")
    common.check(kernel(*xs), mod.reference(*xs))


@pytest.mark.parametrize("name", [_param(n) for n in suite.NAMES if n not in TOO_SLOW_HERE])
def test_suite_kernels_auto_scheduled_match_torch(name):
    mod = importlib.import_module(f"suite.{name}")
    s0, args = mod.make(False)
    s = tc.auto_schedule(list(s0.outputs))
    # a rule undone is undone for a refusal of the schedule itself, never an error of the rules' own code
    assert all("IllegalScheduleError" in u or "LoweringError" in u for u in s.auto_undone), s.auto_undone
    assert not any("truth value" in u for u in s.auto_undone), s.auto_undone
    kernel = tc.build(s, args)
    sizes = mod.SIZES[-1]
    torch.manual_seed(2)
    xs = harness.variant(mod.inputs(sizes, "cpu"), "strided", 2)
    given = {n: sizes[n] for n in getattr(mod, "CALL_SIZES", ())}
    harness.check(kernel(*xs, **given), mod.reference(*xs, **given), getattr(mod, "TOLERANCE", None))


def _gemm_silu():
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]) * 2.0, name="Y", dtype="float16")
    return [A, W, Y], Y


def test_a_gemm_epilogue_runs_in_the_gemm_tiles_with_tl_dot():
    args, Y = _gemm_silu()
    s = tc.auto_schedule(Y)
    prog = tc.lower(s)
    assert [k.name for k in prog.kernels] == ["Y_kernel"]
    assert "tl.dot(" in prog.source() and set(s.knobs) == {"C_BK", "C_stages", "Y_BM", "Y_BN", "Y_GROUP_M", "Y_warps"}
    a, w = torch.randn(37, 19), torch.randn(19, 45)
    out = tc.build(s, args)(a, w)
    torch.testing.assert_close(out, (torch.nn.functional.silu(a @ w) * 2.0).half(), atol=2e-3, rtol=2e-3)


def test_elementwise_stages_are_inlined_and_outputs_kept():
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    E = tc.compute((N,), lambda i: tc.exp(X[i]), name="E")
    F = tc.compute((N,), lambda i: E[i] + 1.0, name="F")
    G = tc.compute((N,), lambda i: F[i] * E[i], name="G")
    s = tc.auto_schedule([G, F])  # F is an output: stored, not inlined
    assert s["E"].attach == "inline" and s["F"].attach != "inline"
    assert len(tc.lower(s).kernels) == 2
    x = torch.randn(1000)
    g, f = tc.build(s, [X, G, F])(x)
    torch.testing.assert_close(f, torch.exp(x) + 1.0)
    torch.testing.assert_close(g, (torch.exp(x) + 1.0) * torch.exp(x))


@pytest.mark.parametrize("name", ["matmul_silu", "blur", "softmax", "cross_entropy"])
def test_the_schedule_code_rebuilds_the_same_source(name):
    """The printed code, run with the outputs defined, makes a schedule that lowers to the same source, at the
    knobs' first choices and at their last ones."""
    mod = importlib.import_module(name)
    s0, args = mod.make()
    outputs = list(s0.outputs)
    s = tc.auto_schedule(outputs)
    for config in ({}, {n: k.choices[-1] for n, k in s.knobs.items()}):
        code = tc.schedule_code(s, config)
        ns = {"tc": tc, "outputs": outputs}
        exec(compile(code, "<schedule_code>", "exec"), ns)
        assert set(ns["s"].knobs) == set(s.knobs)  # still a space to tune, its first choices the config's
        try:
            want = tc.lower(s, config).source()
        except tc.TilecError as e:  # a config the tuner would record as failing: the code is refused alike
            with pytest.raises(tc.TilecError):
                tc.lower(ns["s"]).source()
            assert str(e)
            continue
        assert tc.lower(ns["s"]).source() == want


def test_schedule_code_refuses_a_config_the_schedule_does_not_have():
    _, Y = _gemm_silu()
    s = tc.auto_schedule(Y)
    with pytest.raises(tc.ArgumentError, match="'BX' is no knob of this schedule"):
        tc.schedule_code(s, {"BX": 64})
    with pytest.raises(tc.ArgumentError, match="Y_BM=48 is not one of its choices"):
        tc.schedule_code(s, {"Y_BM": 48})
    with pytest.raises(tc.ArgumentError, match="expected the computed tensors"):
        tc.auto_schedule()


def test_a_softmax_and_a_norm_are_one_kernel_a_program_per_row():
    """online_statistics makes den carry mx; fuse_rows computes den (and RMSNorm's sum) at its reader's row:
    one kernel each, a program per row, as the hand schedules of examples/softmax.py and rmsnorm.py."""
    import rmsnorm
    import softmax

    for mod, stats in ((softmax, {"den", "mx"}), (rmsnorm, {"ss"})):
        s0, args = mod.make()
        s = tc.auto_schedule(list(s0.outputs))
        (kernel,) = tc.lower(s).kernels
        assert set(kernel.stages) == {"Y"} | stats
        assert s["Y"].binds and "Y_BLOCK" in s.knobs


def test_a_norm_that_stores_its_row_statistics_is_one_kernel():
    """Liger's norms return rstd (and mean) for the backward: outputs read by Y at its row. fuse_rows places
    them, and the sums they read, at Y's row (H100, issue 27's first GPU run: three and five kernels before);
    a fused add's z (an output Y reads at its own point, and the row's sum reads) is stored row by row."""
    for name, stages in (("rms_norm", {"Y", "rstd", "ss"}), ("layer_norm", {"Y", "mean", "rstd", "total", "sq"}),
                         ("group_norm", None), ("fused_add_rms_norm", {"out", "z", "ss"})):
        mod = importlib.import_module(f"suite.{name}")
        s0, _ = mod.make(False)
        s = tc.auto_schedule(list(s0.outputs))
        (kernel,) = tc.lower(s).kernels
        assert stages is None or set(kernel.stages) == stages


def test_an_online_loop_at_the_root_gets_a_grid():
    """A sum whose only schedule is `online` over its max, stored as it is (no row to be fused into), is still tiled
    by tile_reduction. Before, `online` counted as a schedule of its loops and the kernel was one program looping
    over every row and column (cross_entropy's d: 19.9 s per call on the H100 at 4096 x 32000)."""
    M, N = tc.size_vars("M N")
    x = tc.placeholder((M, N), "float32", name="x")
    c, c2 = tc.reduce_axis(N, name="c"), tc.reduce_axis(N, name="c2")
    m = tc.compute((M,), lambda r: tc.max(x[r, c], axis=c), name="m")
    d = tc.compute((M,), lambda r: tc.sum(tc.exp(x[r, c2] - m[r]), axis=c2), name="d")
    s = tc.auto_schedule(d)
    assert [st.name for st in s["d"].online_stats] == ["m"]
    src = tc.lower(s).source()
    kernel = src[src.index("def d_kernel("):]
    assert "tl.program_id(0)" in kernel and "for r in" not in kernel
    assert {"d_BR", "d_BS"} <= set(s.knobs)
    a = torch.randn(37, 300)
    torch.testing.assert_close(tc.build(s, [x, d])(a), torch.exp(a - a.amax(1, keepdim=True)).sum(1))


def test_a_row_output_beside_the_rows_elements_is_computed_at_the_row():
    """cross_entropy's loss[r] reads the row's lse (inlined, reading d[r]) as dX[r, v] does: fuse_rows computes the
    loss, and the smoothing sum it alone reads, at dX's row: with the count n, two kernels, as the hand schedule
    (five before: the loss's 256-row tiles made 16 programs at 4096 rows, 5x the hand kernel on the H100)."""
    mod = importlib.import_module("suite.cross_entropy")
    s0, args = mod.make(False)
    s = tc.auto_schedule(list(s0.outputs))
    kernels = tc.lower(s).kernels
    assert [k.name for k in kernels] == ["n_kernel", "loss_dX_kernel"]
    assert {"d", "loss", "xs", "dX"} <= set(kernels[1].stages)
    sizes = dict(M=37, V=1000)
    ins = mod.inputs(sizes, "cpu")
    for got, want in zip(tc.build(s, args)(*ins), mod.reference(*ins)):
        torch.testing.assert_close(got.float(), want.float(), atol=2e-3, rtol=2e-2)


def test_attention_is_one_kernel_with_the_scores_in_its_loop():
    """fuse_scores (after online_statistics, tried on O before l): O carries m and l, and S is computed in O's loop
    over key tiles, as the hand FlashAttention schedules (H100, issue 27: 0.07x and 0.12x the hand schedules while
    S was a kernel of its own). The decode kernels' S read K through a block table: their reads compare by
    identity (an `==` on expressions had made every rule on them fail)."""
    for name, out in (("flash_attention", "O"), ("gqa_decode_attention", "O"), ("paged_decode_attention", "out"),
                      ("varlen_decode_attention", "out")):
        mod = importlib.import_module(f"suite.{name}")
        s0, _ = mod.make(False)
        s = tc.auto_schedule(list(s0.outputs))
        (kernel,) = tc.lower(s).kernels
        assert "S" in kernel.stages and {"m", "l"} <= set(kernel.stages), (name, kernel.stages)
        assert [x.name for x in s[out].online_stats] == ["m", "l"] and f"{out}_BN" in s.knobs


@pytest.mark.slow
def test_a_rule_that_does_not_lower_at_its_guesses_is_tried_with_small_tiles_and_undone_rules_say_why():
    """varlen decode attention's scores are no tl.dot (K is read at h // G): at the first guesses (64 x 64 x 64)
    the 3-d tile is past what Triton compiles, so fuse_scores is tried again with each knob's smallest choice
    first (one kernel). A rule undone for good is listed with its reason (`s.auto_undone`); that these are only
    refusals of the schedule itself is checked per suite kernel in test_suite_kernels_auto_scheduled_match_torch
    (here it looped over the whole suite again: 43 s of CI)."""
    mod = importlib.import_module("suite.varlen_decode_attention")
    s0, _ = mod.make(False)
    s = tc.auto_schedule(list(s0.outputs))
    assert s.knobs["out_BM"].choices[0] == 1 and not s.auto_undone  # a head per program: see the next test
    with pytest.MonkeyPatch.context() as mp:  # tiles of heads, as before: 16 x 64 x 64 does not compile
        mp.setattr(auto, "_keys_per_row", lambda scores: False)
        s = tc.auto_schedule(list(s0.outputs))
    assert s.knobs["out_BM"].choices[0] == 16 and s.knobs["out_BN"].choices[0] == 32
    assert len(tc.lower(s).kernels) == 1


def test_a_small_last_axis_is_one_tile_and_rows_fill_the_program():
    """RoPE's head dimension (64) in BLOCK tiles of 1024 left 94% of each program masked (0.14x the hand schedule
    on the H100); now the axis is one tile and the heads before it are split in ROWS."""
    mod = importlib.import_module("suite.rope")
    s0, _ = mod.make(False)
    s = tc.auto_schedule(list(s0.outputs))
    assert {"qo_ROWS", "ko_ROWS"} <= set(s.knobs) and s.knobs["qo_ROWS"].choices[0] == 16
    assert "qo: split(d, 64)" in "\n".join(s.log)


@pytest.mark.slow
def test_a_tuned_auto_schedule_prints_as_code_that_rebuilds_the_tuned_kernel(tmp_path):
    """tc.tune searches an auto schedule's knobs like a hand schedule's (interpreter timings: nothing about
    speed); Tuned.schedule_code is its trace at the tuned config, which pasted back lowers to that config's
    source; a shape outside the mix is refused."""
    args, Y = _gemm_silu()
    s = tc.auto_schedule(Y)
    mix = tc.ShapeMix([({"M": 16}, 3), ({"M": 40}, 1)], fixed={"K": 24, "N": 20})

    def reference(a, w):
        return (torch.nn.functional.silu(a.double() @ w.double()) * 2.0).half()

    tuned = tc.tune(s, mix, trials=4, args=args, reference=reference, storage=f"sqlite:///{tmp_path / 'a.db'}")
    for sizes in ({}, {"M": 40}):
        code = tuned.schedule_code(**sizes)
        key = tc.ShapeMix.key({"K": 24, "N": 20, "M": sizes.get("M", 16)})
        ns = {"tc": tc, "outputs": [Y]}
        exec(compile(code, "<schedule_code>", "exec"), ns)
        assert tc.lower(ns["s"]).source() == tc.lower(s, tuned.chosen.configs[key]).source()
    with pytest.raises(tc.ArgumentError, match="is no shape of the mix"):
        tuned.schedule_code(M=3)


@pytest.mark.slow
def test_autotuned_tunes_each_new_shape_once_and_a_second_process_only_builds(tmp_path):
    """tc.autotuned: the first call of a shape tunes it (its study stored), later calls dispatch; another
    AutoTuned on the same storage (a second process) finds the study measured: no new trial."""
    args, Y = _gemm_silu()
    url = f"sqlite:///{tmp_path / 'auto.db'}"
    op = tc.autotuned(Y, args=args, trials=3, storage=url, progress=False)
    a, w = torch.randn(21, 10), torch.randn(10, 33)
    want = (torch.nn.functional.silu(a @ w) * 2.0).half()
    torch.testing.assert_close(op(a, w), want, atol=2e-3, rtol=2e-3)
    (key,) = op.tuned
    n = len(op.tuned[key].study.trials)
    torch.testing.assert_close(op(a, w), want, atol=2e-3, rtol=2e-3)
    assert len(op.tuned) == 1 and len(op.tuned[key].study.trials) == n
    again = tc.autotuned(Y, args=args, trials=3, storage=url, progress=False)
    torch.testing.assert_close(again(a, w), want, atol=2e-3, rtol=2e-3)
    assert len(again.tuned[key].study.trials) == n  # measured by the first: nothing measured again
    assert "C.compute_at(Y, Y_io_jo)" in again.schedule_code(K=10, M=21, N=33)
    with pytest.raises(tc.ArgumentError, match="no shape M=5 was tuned yet"):
        again.schedule_code(M=5)
    with pytest.raises(tc.ArgumentError):
        op(torch.randn(21, 11), w)  # K disagrees between the inputs: refused before any tuning
