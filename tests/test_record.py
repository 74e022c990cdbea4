"""Recording a program's shape mix (`tc.record`) and tuned plans as files (`tuned.save`, `tc.load`): issue 28."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.tune import saved

sys.path.insert(0, str(Path(__file__).parent))
import tune_case  # noqa: E402


def _timer(kernel, inputs):  # a made-up time per config: BM 16 wins at M=16, BM 32 at M=40
    m = inputs[0].shape[0]
    return 1e-6 * (kernel.config["BM"] if m <= 16 else 64 / kernel.config["BM"]) * (1 + kernel.config["warps"] / 100)


def _tuned(tmp_path, mix=None, trials=8):
    s, args = tune_case.make()
    return tc.tune(s, mix or tune_case.MIX, trials=trials, args=args, reference=tune_case.reference,
                   storage=f"sqlite:///{tmp_path / 't.db'}", timer=_timer, jobs=0, progress=False, seed=1)


def _gemm():
    s, args = tune_case.make()
    return tc.build(s, args)


# -- recording ---------------------------------------------------------------------------------------------

def test_a_recording_counts_each_kernels_calls_by_shape_and_gives_their_mix():
    kernel = _gemm()
    with tc.record() as rec:
        for m in (16, 16, 16, 40):
            out = kernel(torch.randn(m, 24), torch.randn(24, 20))
    assert out.shape == (40, 20)
    assert rec.names() == ["C"] and rec.total(kernel) == 4
    assert rec.calls(kernel) == {"K=24,M=16,N=20": 3, "K=24,M=40,N=20": 1}
    mix = rec.mix(kernel)
    assert [dict(s) for s in mix.shapes] == [{"K": 24, "M": 16, "N": 20}, {"K": 24, "M": 40, "N": 20}]
    assert mix.weights == pytest.approx([0.75, 0.25])
    kernel(torch.randn(3, 24), torch.randn(24, 20))  # after the block: not counted
    assert rec.total("C") == 4


def test_a_call_is_counted_once_by_the_outermost_caller_and_a_failed_call_not_at_all(tmp_path):
    tuned = _tuned(tmp_path)
    op = tuned.as_op("record_test_gemm")
    kernel = _gemm()
    with tc.record() as rec:
        tuned(torch.randn(16, 24), torch.randn(24, 20))          # the plan, not its kernel
        op(torch.randn(40, 24), torch.randn(24, 20))             # the op, not the plan nor its kernel
        op(torch.randn(40, 24), torch.randn(24, 20))
        kernel(torch.randn(7, 24), torch.randn(24, 20))
        with pytest.raises(tc.ArgumentError):
            kernel(torch.randn(7, 24), torch.randn(25, 20))    # K differs: refused, not counted
    assert rec.calls(tuned) == {"K=24,M=16,N=20": 1}
    assert rec.calls(op) == rec.calls("tilec::record_test_gemm") == {"K=24,M=40,N=20": 2}
    assert rec.calls("record_test_gemm") == {"K=24,M=40,N=20": 2}
    assert rec.calls(kernel) == {"K=24,M=7,N=20": 1}
    assert rec.names() == ["C", "tilec::record_test_gemm", "C#2"]


def test_calls_through_torch_compile_count_and_its_tracing_does_not(tmp_path):
    op = _gemm().as_op("record_test_compiled")
    f = torch.compile(lambda a, w: op(a, w) * 2, fullgraph=True, backend="eager")
    with tc.record() as rec:
        for _ in range(3):
            f(torch.randn(5, 24), torch.randn(24, 20))
    assert rec.calls(op) == {"K=24,M=5,N=20": 3}


def test_a_captured_graphs_calls_count_at_each_replay_and_not_at_the_capture(tmp_path):
    """tc.graphed's capture runs the call's Python once and no kernel: its calls go to a CallLog, counted in
    no recording; each replay counts them (op, plan, kernel: the outermost, as a call) in the recordings open
    then. The mechanism on the CPU (graphed itself needs a CUDA device)."""
    from tilec.runtime.calls import CallLog
    op = _gemm().as_op("record_test_graphed")
    kernel = _gemm()
    log = CallLog()
    with tc.record() as rec:
        with log.capturing():
            op(torch.randn(5, 24), torch.randn(24, 20))
            kernel(torch.randn(3, 24), torch.randn(24, 20))
        assert rec.names() == []  # the capture counted nothing
        for _ in range(3):
            log.replay()
    assert rec.calls(op) == {"K=24,M=5,N=20": 3} and rec.calls(kernel) == {"K=24,M=3,N=20": 3}
    log.replay()  # no recording open: nothing to count, nothing raised
    assert rec.total(op) == 3


def test_a_long_tail_of_shapes_is_bucketed_as_the_plans_bucket_them():
    """A decode position per step: 60 shapes become the power-of-two buckets of M, each stood for by its largest
    shape recorded and weighted by all its calls."""
    kernel = _gemm()
    with tc.record() as rec:
        for m in range(1, 61):
            kernel(torch.randn(m, 24), torch.randn(24, 20))
        kernel(torch.randn(0, 24), torch.randn(24, 20))  # no work: kept in the counts, not in a mix
    assert len(rec.calls(kernel)) == 61
    mix = rec.mix(kernel)
    by_m = {s["M"]: w for s, w in mix}
    assert sorted(by_m) == [1, 2, 4, 8, 16, 32, 60]
    assert by_m[60] == pytest.approx(28 / 60) and by_m[32] == pytest.approx(16 / 60) and by_m[1] == pytest.approx(1 / 60)
    assert len(rec.mix(kernel, max_shapes=100).shapes) == 60
    with pytest.raises(tc.ArgumentError, match="max_shapes"):
        rec.mix(kernel, max_shapes=0)


def test_a_saved_recording_reads_back_and_bad_files_are_named(tmp_path):
    kernel = _gemm()
    with tc.record() as rec:
        kernel(torch.randn(9, 24), torch.randn(24, 20))
        kernel(torch.randn(9, 24), torch.randn(24, 20))
    path = rec.save(tmp_path / "rec.json")
    back = tc.load_recording(path)
    assert back.calls("C") == {"K=24,M=9,N=20": 2} and back.mix("C").shapes == rec.mix(kernel).shapes
    with pytest.raises(tc.ArgumentError, match="was not called.*recorded C"):
        back.calls("D")
    bad = tmp_path / "bad.json"
    for text, match in (("{", "is not JSON"), ('{"format": "x"}', "not a tilec recording"),
                        ('{"format": "tilec-recording", "version": 1, "kernels": {"C": [[{"M": -1}, 1]]}}',
                         "is not \\[sizes, count\\]")):
        bad.write_text(text)
        with pytest.raises(tc.ArgumentError, match=match):
            tc.load_recording(bad)
    with pytest.raises(tc.ArgumentError, match="cannot read"):
        tc.load_recording(tmp_path / "missing.json")


# -- saved plans -------------------------------------------------------------------------------------------

def test_a_saved_plan_serves_the_same_configs_without_tuning(tmp_path):
    tuned = _tuned(tmp_path)
    path = tuned.save(tmp_path / "plan.json")
    data = json.loads(Path(path).read_text())
    assert data["device"] == "triton-interpreter" and data["study"] == tuned.study.study_name
    assert data["tilec"] == tc.__version__ and data["plan"]["name"] == tuned.chosen.name
    s, args = tune_case.make()  # a fresh compute, as another process makes it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same device and Triton: no warning
        loaded = tc.load(path, args[-1])
    assert loaded.study is None and loaded.chosen.configs == tuned.chosen.configs
    assert {k: v.config for k, v in loaded.kernels.items()} == {k: v.config for k, v in tuned.kernels.items()}
    for m in (16, 40, 3, 1):  # in the mix and outside it
        a, w = torch.randn(m, 24), torch.randn(24, 20)
        torch.testing.assert_close(loaded(a, w), a @ w, atol=1e-4, rtol=1e-4)
    assert loaded.source(M=16) == tuned.source(M=16)
    with pytest.raises(tc.ArgumentError, match="holds no study"):
        loaded.trials()


def test_a_plan_from_another_device_warns_and_serves_its_generic_config(tmp_path):
    tuned = _tuned(tmp_path)
    data = saved.to_dict(tuned)
    data["device"] = "NVIDIA H100 80GB HBM3"
    data["configs"] = {k: {**c, "BM": 16 if c["BM"] == 32 else 32} for k, c in data["configs"].items()}
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    s, args = tune_case.make()
    with pytest.warns(tc.PlanMismatch, match="another machine.*device 'NVIDIA H100 80GB HBM3' there"):
        loaded = tc.load(path, args[-1])
    assert loaded.chosen.name == "generic" and all(c == data["generic"] for c in loaded.chosen.configs.values())
    a, w = torch.randn(40, 24), torch.randn(24, 20)
    torch.testing.assert_close(loaded(a, w), a @ w, atol=1e-4, rtol=1e-4)


def test_a_plan_is_refused_for_another_computation_or_a_config_it_cannot_have(tmp_path):
    tuned = _tuned(tmp_path)
    path = Path(tuned.save(tmp_path / "plan.json"))
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    other = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j] * 2.0, axis=k), name="C")
    with pytest.raises(tc.ArgumentError, match="compute something else"):
        tc.load(path, other)
    data = json.loads(path.read_text())
    first = next(iter(data["configs"]))
    for change, match in ((lambda d: d["configs"][first].update(BM=48), "not a config of the schedule's knobs"),
                          (lambda d: d["configs"].pop(first), "must give a config for each shape"),
                          (lambda d: d.update(format="x"), "not a tilec plan"),
                          (lambda d: d.pop("trace"), "field 'trace' is missing"),
                          (lambda d: d["plan"].update(name="fastest"), "\"plan\" must be")):
        bad = json.loads(path.read_text())
        change(bad)
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        s, args = tune_case.make()
        with pytest.raises(tc.ArgumentError, match=match):
            tc.load(tmp_path / "bad.json", args[-1])


def test_record_then_tune_the_recorded_mix_then_save_and_serve(tmp_path):
    """The workflow end to end on the CPU: a program's calls recorded, tuned for that mix, saved, served."""
    kernel = _gemm()
    with tc.record() as rec:
        for m in [16] * 5 + [40]:
            kernel(torch.randn(m, 24), torch.randn(24, 20))
    tuned = _tuned(tmp_path, mix=rec.mix(kernel), trials=6)
    assert tuned.mix.weights == pytest.approx([5 / 6, 1 / 6])
    s, args = tune_case.make()
    served = tc.load(tuned.save(tmp_path / "p.json"), args[-1])
    a, w = torch.randn(40, 24), torch.randn(24, 20)
    torch.testing.assert_close(served(a, w), a @ w, atol=1e-4, rtol=1e-4)


def test_a_loaded_plan_saves_the_same_file_and_a_tampered_one_is_refused(tmp_path):
    """Review findings, regression tests: the generic config survives load and save (it was the first shape's
    config), the order of the kernel's tensors is part of the fingerprint (reversed, a call would bind other
    tensors), and a mix that misses one of the schedule's sizes is an ArgumentError (was a KeyError)."""
    tuned = _tuned(tmp_path)
    first = json.loads(Path(tuned.save(tmp_path / "a.json")).read_text())
    s, args = tune_case.make()
    again = json.loads(Path(tc.load(tmp_path / "a.json", args[-1]).save(tmp_path / "b.json")).read_text())
    assert again["generic"] == first["generic"] and again["configs"] == first["configs"]
    for change, match in ((lambda d: d.update(args=list(reversed(d["args"]))), "compute something else"),
                          (lambda d: [sh.pop("K") for sh in d["mix"]["shapes"]] and d["mix"].update(fixed={}),
                           "does not give size K")):
        bad = json.loads(json.dumps(first))
        change(bad)
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        s, args = tune_case.make()
        with pytest.raises(tc.ArgumentError, match=match):
            tc.load(tmp_path / "bad.json", args[-1])


def test_a_recording_whose_calls_give_different_size_names_is_refused(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"format": "tilec-recording", "version": 1,
                               "kernels": {"C": [[{"M": 1, "N": 2}, 1], [{"M": 1, "K": 2}, 1]]}}))
    with pytest.raises(tc.ArgumentError, match="same size names"):
        tc.load_recording(bad)
    bad.write_text(json.dumps({"format": "tilec-recording", "version": 1, "kernels": {"C": [[{}, 1]]}}))
    with pytest.raises(tc.ArgumentError, match="same size names, at least one"):
        tc.load_recording(bad)


def test_another_threads_calls_during_a_capture_are_not_logged(tmp_path):
    """Review finding: CallLog joined the global sinks, so a call in another thread while one thread captured
    went into the capture's log and was counted again at every replay."""
    import threading

    from tilec.runtime.calls import CallLog
    kernel = _gemm()
    log = CallLog()
    inside, done = threading.Event(), threading.Event()

    def capture():
        with log.capturing():
            inside.set()
            done.wait(30)

    t = threading.Thread(target=capture)
    with tc.record() as rec:
        t.start()
        inside.wait(30)
        kernel(torch.randn(4, 24), torch.randn(24, 20))  # this thread's call, during the other's capture
        done.set()
        t.join()
        log.replay()
    assert log.calls == [] and rec.calls(kernel) == {"K=24,M=4,N=20": 1}
