"""examples/qwen3: the tilec kernels of a Qwen3 decoder layer against PyTorch on odd sizes (sizes that
divide no tile, size-1 dimensions, strided inputs), and HF transformers' tiny random Qwen3 with its decoder
layers patched to them against the unmodified model: prefill and greedy decode steps, logits and tokens;
a padding mask refused, the tilec KV cache's bounds."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

QWEN3 = Path(__file__).resolve().parent.parent / "examples" / "qwen3"


def _load(module: str, filename: str):
    """Import examples/qwen3/<filename> as `module`, by path (the directory is kept off sys.path: its
    kernels.py would shadow the `kernels` package that transformers imports)."""
    if module not in sys.modules:
        spec = importlib.util.spec_from_file_location(module, QWEN3 / filename)
        sys.modules[module] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[module])
    return sys.modules[module]


kernels = _load("qwen3_kernels", "kernels.py")


def _rms(x, w, eps=1e-6):
    """Qwen3RMSNorm: float32 statistics, x * rstd cast to x's dtype, times the weight."""
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


# -- kernels (fast tier) -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("M,N", [(7, 45), (1, 1), (3, 1031)])
def test_rmsnorm_matches_torch(M, N):
    torch.manual_seed(M * 1000 + N)
    k = kernels.op("rmsnorm", "float32", eps=1e-6)
    x, w = torch.randn(M, 2 * N)[:, ::2], torch.randn(N)  # x strided (every other column)
    torch.testing.assert_close(k(x, w), _rms(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("B,HKV,S,D,start,tmax", [(2, 3, 5, 40, 4, 11), (1, 1, 1, 1, 0, 1), (1, 2, 1, 16, 9, 10)])
def test_kv_cache_write_in_place(B, HKV, S, D, start, tmax):
    """The new tokens land at [start, start + S) of the caches, in place; nothing else changes."""
    torch.manual_seed(S * 100 + D)
    write = kernels.op("kv_cache_write", "float32")
    kc, vc = torch.randn(B, HKV, tmax, D), torch.randn(B, HKV, tmax, D)
    k_new = torch.randn(B, S, HKV, D).transpose(1, 2)  # strided, as the layer passes v
    v_new = torch.randn(B, HKV, S, D)
    want_k, want_v = kc.clone(), vc.clone()
    want_k[:, :, start:start + S], want_v[:, :, start:start + S] = k_new, v_new
    k_ptr = kc.data_ptr()
    write(k_new, v_new, torch.tensor([start]), kc, vc)
    assert kc.data_ptr() == k_ptr
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)


# -- kernels and the model (slow tier) ---------------------------------------------------------------------------

def _attention_ref(q, k, v, scale):
    """q [B, M, H, D], k/v [B, HKV, N, D]: causal with query i at N - M + i, head h reading KV head h // G."""
    M, N, G = q.shape[1], k.shape[2], q.shape[2] // k.shape[1]
    k, v = k.repeat_interleave(G, 1).double(), v.repeat_interleave(G, 1).double()
    s = (q.transpose(1, 2).double() @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(torch.arange(N)[None, :] > torch.arange(N - M, N)[:, None], float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).float()


@pytest.mark.slow
@pytest.mark.parametrize("name,B,M,N,HKV,G", [("attention_prefill", 1, 19, 21, 2, 2), ("attention_prefill", 1, 1, 1, 1, 1),
                                              ("attention_prefill", 1, 5, 5, 3, 1), ("attention_decode", 2, 1, 37, 2, 3),
                                              ("attention_decode", 1, 1, 1, 1, 1)])
def test_attention_matches_torch(name, B, M, N, HKV, G):
    """Prefill and decode attention over a cache view (the first N of N + 3 positions), odd sizes."""
    torch.manual_seed(M * 100 + N)
    D, scale = 16, 0.25
    att = kernels.op(name, "float32", head_dim=D, scale=scale)
    q = torch.randn(B, M, HKV * G, D)
    kc, vc = torch.randn(B, HKV, N + 3, D), torch.randn(B, HKV, N + 3, D)
    o = att(q.view(B, M, HKV, G, D), kc[:, :, :N], vc[:, :, :N])
    torch.testing.assert_close(o.view(B, M, HKV * G, D), _attention_ref(q, kc[:, :, :N], vc[:, :, :N], scale),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_static_decode_attention_reads_the_cache_up_to_the_position():
    """attention_decode_static over a whole cache of 300 positions (ten 32-key tiles, split in parts): the
    position at 0, at and across tile edges, and last; the cache past it NaN and inf, never read."""
    k_op = kernels.op("attention_decode_static", "float32", head_dim=16, scale=0.25)
    torch.manual_seed(7)
    B, HKV, G, N, D = 2, 2, 3, 300, 16
    for pos in (0, 31, 32, 137, 299):
        q, k, v = torch.randn(B, HKV, G, D), torch.randn(B, HKV, N, D), torch.randn(B, HKV, N, D)
        k[:, :, pos + 1:], v[:, :, pos + 1:] = float("nan"), float("inf")
        got = k_op(q, k, v, torch.tensor([pos]))
        kk, vv = k[:, :, :pos + 1].double(), v[:, :, :pos + 1].double()
        want = torch.softmax(q.double() @ kk.transpose(-1, -2) * 0.25, -1) @ vv
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_gemms_and_qk_norm_rope_match_torch():
    """linear (transposed weight), linear_residual, gate_up_silu, qk_norm_rope on sizes that fill no tile."""
    torch.manual_seed(3)
    M, K, N = 19, 45, 70
    x, w, r = torch.randn(M, K), torch.randn(N, K), torch.randn(M, N)
    tol = dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(kernels.op("linear", "float32")(x, w), x @ w.T, **tol)
    torch.testing.assert_close(kernels.op("linear_residual", "float32")(x, w, r), r + x @ w.T, **tol)
    wg, wu = torch.randn(N, K), torch.randn(N, K)
    torch.testing.assert_close(kernels.op("gate_up_silu", "float32")(x, wg, wu),
                               torch.nn.functional.silu(x @ wg.T) * (x @ wu.T), **tol)

    B, S, H, HKV, D = 2, 3, 6, 2, 16
    qkv = torch.randn(B, S, H + 2 * HKV, D)
    q, k = qkv[:, :, :H], qkv[:, :, H:H + HKV]
    ang = torch.randn(B, S, D // 2)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    wq, wk = torch.randn(D), torch.randn(D)
    qo, ko = kernels.op("qk_norm_rope", "float32", head_dim=D, eps=1e-6)(q, k, cos, sin, wq, wk)

    def rope(x):
        half = D // 2
        return x * cos[:, :, None] + torch.cat((-x[..., half:], x[..., :half]), -1) * sin[:, :, None]

    torch.testing.assert_close(qo, rope(_rms(q, wq)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ko, rope(_rms(k, wk)).transpose(1, 2), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def qwen3():
    """(run module, reference model, patched copy)."""
    pytest.importorskip("transformers")
    run = _load("qwen3_run", "run.py")
    ref = run.tiny_model(seed=0)
    return run, ref, run.tilec_qwen3.patch(copy.deepcopy(ref))


@pytest.mark.slow
def test_patched_qwen3_matches_hf(qwen3):
    """Prompt of 7 tokens (batch 2) and 4 greedy decode steps: the logits within 1e-4 at every step, the same
    greedy tokens, and the logits not trivial (the check would pass on a constant model otherwise)."""
    run, ref, patched = qwen3
    torch.manual_seed(1)
    prompt = torch.randint(0, ref.config.vocab_size, (2, 7))
    result = run.compare(ref, patched, prompt, steps=4, verbose=False)
    assert len(result["diffs"]) == 5
    assert max(result["diffs"]) < 1e-4, result["diffs"]
    assert result["tilec_tokens"] == result["ref_tokens"]
    assert len({t for step in result["ref_tokens"] for t in step}) > 2  # greedy tokens vary: logits not trivial
    # the patched forward is installed per instance, on HF's own module class
    assert isinstance(patched.model.layers[0].forward.__self__, type(ref.model.layers[0]))
    assert patched.model.layers[0].forward.__func__ is run.tilec_qwen3.tilec_decoder_forward


class _HostSyncs(TorchDispatchMode):
    """The aten ops run under it, and those that read a tensor's value on the host (a sync, which a CUDA graph's
    capture refuses): item, equal, is_nonzero. It sees the model's own ops (HF's code, the masks), not what runs
    inside a custom op (a tilec launch, which reads no tensor's value), nor .tolist()/.cpu() of a CPU tensor."""

    SYNCS = ("aten._local_scalar_dense.default", "aten.equal.default", "aten.is_nonzero.default",
             "aten.item.default")

    def __init__(self):
        super().__init__()
        self.ops, self.syncs = set(), []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func))
        if str(func) in self.SYNCS:
            self.syncs.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.slow
def test_graph_decoder_steps_match_hf_at_fixed_shapes(qwen3):
    """model.GraphDecoder's static step (what a CUDA graph captures; run eagerly on the CPU): the logits within
    1e-4 of HF's at every step, the same greedy tokens, and every step calling the same ops at the same shapes
    (attention over the whole cache, its bound a tensor): a replay of the first step's graph is each later
    step; a step reads no tensor's value on the host (which a capture refuses). Then its refusals: a full
    cache, a cache not filled by a prefill, a device without CUDA graphs."""
    run, ref, patched = qwen3
    torch.manual_seed(2)
    prompt = torch.randint(0, ref.config.vocab_size, (2, 7))
    result = run.compare(ref, patched, prompt, steps=4, verbose=False, graph=True)
    assert max(result["diffs"]) < 1e-4, result["diffs"]
    assert result["tilec_tokens"] == result["ref_tokens"]
    assert len({t for step in result["ref_tokens"] for t in step}) > 2
    steps = result["calls"][1:]
    static = [n for n in steps[0] if "attention_decode_static" in n]
    assert static and steps[0][static[0]] == ["B=2,G=2,HKV=2,N=11"]  # the whole cache: 7 + 4 positions
    assert not any("attention_decode_" in n and n not in static for n in steps[0])  # no growing view
    assert all(calls == steps[0] for calls in steps), steps

    GraphDecoder = run.tilec_qwen3.GraphDecoder
    cache = run.tilec_qwen3.tilec_cache(patched, max_len=3)
    with pytest.raises(ValueError, match="run the prefill through the cache first"):
        GraphDecoder(patched, cache)
    with torch.no_grad():
        patched(input_ids=prompt[:1, :2], cache=cache, use_cache=True)
    step = GraphDecoder(patched, cache)
    with _HostSyncs() as control:  # the check sees a sync where there is one
        torch.tensor([1.0]).item()
    assert control.syncs
    with _HostSyncs() as seen:  # a capture fails on a host sync (a tensor's value read by Python)
        step(prompt[:1, 2:3])
    assert seen.syncs == [] and any("attention_decode_static" in op for op in seen.ops)
    # nothing of the step depends on Python's count of the cached tokens (a graph would bake it in): with
    # every layer's length wrong, the step (the position given as a tensor) gives the same logits
    ids, position = prompt[:1, 2:3], torch.full((1, 1), 2)
    with torch.no_grad():
        want = step._step(ids, position)
        for layer in cache.layers:
            layer.length = 1
        got = step._step(ids, position)
        for layer in cache.layers:
            layer.length = 3
    assert torch.equal(got, want)
    assert cache.get_seq_length() == 3 and cache.layers[1].keys.shape == (1, 2, 3, 16)
    with pytest.raises(ValueError, match=r"the cache is full \(3 of max_len 3 tokens\)"):
        step(prompt[:1, 3:4])
    with pytest.raises(ValueError, match=r"input_ids must be a tensor \[1, 1\]"):
        GraphDecoder(patched, cache)(prompt[:, :1])
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        GraphDecoder(patched, cache, use_graph=True)
    from transformers import DynamicCache
    with pytest.raises(ValueError, match="must be a tilec_cache"):
        GraphDecoder(patched, DynamicCache(config=patched.config))
    with pytest.raises(ValueError, match="patch\\(model\\) first"):
        GraphDecoder(ref, cache)


@pytest.mark.slow
def test_patched_qwen3_with_hf_cache_and_without(qwen3):
    """The patched layers also run with HF's DynamicCache (its update concatenates) and with no cache."""
    from transformers import DynamicCache

    run, ref, patched = qwen3
    ids = torch.randint(0, ref.config.vocab_size, (1, 5))
    with torch.no_grad():
        want = ref(input_ids=ids, use_cache=False).logits
        torch.testing.assert_close(patched(input_ids=ids, use_cache=False).logits, want, rtol=1e-4, atol=1e-4)
        cache = DynamicCache(config=patched.config)
        got = patched(input_ids=ids, cache=cache, use_cache=True).logits
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert cache.get_seq_length() == 5


@pytest.mark.slow
def test_padding_mask_refused_and_cache_bounds(qwen3):
    run, ref, patched = qwen3
    ids = torch.randint(0, ref.config.vocab_size, (2, 4))
    mask = torch.ones(2, 4, dtype=torch.long)
    mask[0, 0] = 0  # left padding: not supported, must not be ignored
    with torch.no_grad(), pytest.raises(ValueError, match="not the plain causal mask"):
        patched(input_ids=ids, attention_mask=mask, use_cache=False)
    cache = run.tilec_qwen3.tilec_cache(patched, max_len=5)
    with torch.no_grad():
        patched(input_ids=ids, attention_mask=torch.ones_like(mask), cache=cache, use_cache=True)  # all ones: fine
        assert cache.get_seq_length() == 4 and cache.layers[0].keys.shape == (2, 2, 4, 16)
        with pytest.raises(ValueError, match="exceed the cache's max_len 5"):
            patched(input_ids=ids[:, :2], cache=cache, use_cache=True)


@pytest.mark.slow
def test_the_request_benchmark_runs_on_a_cpu(tmp_path):
    """benchmarks/request.py --cpu-check (issue 28 item 4, the GPU host's request table) on the tiny model: the
    tilec variant's greedy tokens are eager's, the recorded calls give each op's counts by shape and a time per
    call, and the prediction (rest + calls x time) is reported beside the paired rounds."""
    import json
    import subprocess

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "request.json"
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "request.py"), "--cpu-check", "--json", str(out),
                        "--record", str(tmp_path / "rec")], capture_output=True, text=True, cwd=root, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["tokens_equal_to_eager"]["tilec"] == data["tokens_equal_to_eager"]["graph"] == data["steps"] + 1
    prefill, decode = data["per_kernel"]["prefill"], data["per_kernel"]["decode"]
    static = data["per_kernel"]["decode_static"]
    ops = {r["op"] for r in prefill}
    assert any("attention_prefill" in o for o in ops) and any("attention_decode_float" in r["op"] for r in decode)
    assert any("attention_decode_static" in r["op"] for r in static)
    assert all(r["calls"] >= 1 and r["us"] > 0 for r in prefill + decode + static)
    layers = data["layers"]
    assert sum(r["calls"] for r in prefill if "rmsnorm" in r["op"]) == 2 * layers  # two norms a layer
    for phase in ("prefill", "decode"):
        e = data["phases"][phase]
        for subject in ("tilec", "graph"):
            assert e["predicted_ms"][subject] == pytest.approx(e["median_ms"]["rest"] + e["kernels_ms"][subject])
        assert set(e["paired"]["tilec"]) == {"eager"} and set(e["paired"]["graph"]) == {"eager", "tilec"}
    steps = data["steps"] + 1
    assert data["tokens_equal_to_eager_worst_round"] == {"eager": steps, "tilec": steps, "graph": steps}
    assert data["graph_tokens_equal_to_eager_on_another_prompt"] == steps
    import tilec as tc
    assert tc.load_recording(str(tmp_path / "rec") + ".decode.json").names()


@pytest.mark.slow
def test_kernels_tuned_for_a_recorded_request_serve_the_model_from_saved_plans(tmp_path):
    """examples/qwen3/tune.py records a request through the patched tiny model, tunes two ops for the mix of
    their recorded calls and saves the plans; run.py --plans serves those ops from them (tc.load) and the model
    still matches the unmodified one. Two processes, as a package that ships its plans would have them."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    plans = tmp_path / "plans"
    p = subprocess.run([sys.executable, str(QWEN3 / "tune.py"), "--out", str(plans), "--only", "linear_residual",
                        "--trials", "2", "--steps", "1", "--storage", f"sqlite:///{tmp_path / 't.db'}"],
                       capture_output=True, text=True, cwd=root, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (plan,) = plans.glob("*.json")
    assert plan.name == "qwen3_linear_residual_float32.json"
    import json
    saved = json.loads(plan.read_text())  # o_proj's K=64 and down_proj's K=128, prefill and decode rows
    assert {s["K"] for s in saved["mix"]["shapes"]} == {64, 128} and {s["M"] for s in saved["mix"]["shapes"]} == {1, 7}
    p = subprocess.run([sys.executable, str(QWEN3 / "run.py"), "--plans", str(plans), "--steps", "1"],
                       capture_output=True, text=True, cwd=root, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"served from the tuned plans in {plans}: qwen3_linear_residual_float32" in p.stdout
    assert "qwen3: OK" in p.stdout
