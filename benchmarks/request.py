"""A whole request through Hugging Face's Qwen3 with tilec's decoder layers, measured end to end (issue 28).

    python benchmarks/request.py [--layers 4] [--prompt 7239] [--steps 31] [--rounds 11] [--json out.json]
    python benchmarks/request.py --cpu-check       # CPU, Triton's interpreter, a tiny model: the code paths only
    python benchmarks/request.py --tune 8 --plans plans/   # record, tune each op for its calls, save the plans
    python benchmarks/request.py --plans plans/            # the request with the tilec ops served from them

The model: `transformers`' Qwen3ForCausalLM at Qwen3-8B's layer shapes (hidden 4096, 32 heads, 8 KV heads, head
dim 128, MLP 12288, vocabulary 151936, bfloat16, random weights), `--layers` decoder layers. A request: a prompt
of `--prompt` tokens, then `--steps` greedy decode steps (one token each), the prompt's logits kept for its last
token only (`logits_to_keep=1`, as generate does). Variants, the same weights:
- eager: the model as transformers runs it (sdpa attention, DynamicCache);
- compile: the same, `torch.compile`d (dynamic shapes; compiled before timing);
- tilec: its decoder layers patched to examples/qwen3's tilec ops (`patch`), the tilec KV cache (`tilec_cache`);
- graph: the tilec model with its decode steps replayed from one CUDA graph (examples/qwen3's GraphDecoder:
  attention over the whole preallocated cache, bounded by the position as a tensor); its prefill is tilec's;
- rest: the model with every decoder layer an identity: what the request costs outside the layers (embedding,
  rotary tables, final norm, lm_head, argmax, Python).

What it reports:
(a) from one recorded tilec request (`tc.record`, prefill and decode apart): each op's calls by shape, and each
    (kernel, shape)'s time per call, timed alone (do_bench median) on the inputs the request gave it;
    and the graph variant's decode calls (its static step run eagerly, recorded and timed the same way);
(b) Amdahl's prediction of the tilec request: rest + sum over ops and shapes of calls x time per call, per phase
    (graph's decode: rest + its static step's kernels; rest's own host time, which a graph removes too, is
    kept: an overestimate by at most that);
(c) `--rounds` paired, interleaved rounds (each round runs every variant once, in a shuffled order): per phase
    the median of the paired differences tilec - eager, tilec - compile, graph - eager, graph - compile and
    graph - tilec, with their spread (min .. max), and each variant's median;
(d) the predictions against the tilec and graph medians (and the spread of their times).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch

CPU_CHECK = "--cpu-check" in sys.argv
if CPU_CHECK or not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import tilec as tc  # noqa: E402
from tilec.runtime.custom_op import _REGISTRY  # noqa: E402

QWEN3_8B = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                intermediate_size=12288, vocab_size=151936, max_position_embeddings=40960)


def _load(name: str, path: Path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def build_models(cfg: dict, layers: int, dtype, device: str, compile_: bool, plans: str | None = None):
    """The variants over one set of random weights: eager, compiled, tilec-patched (its kernels from the tuned
    plans in `plans`, where given), and layers-as-identity."""
    from transformers import Qwen3Config, Qwen3ForCausalLM
    qwen3 = _load("qwen3_model", ROOT / "examples" / "qwen3" / "model.py")
    if plans:
        qwen3.kernels.use_plans(plans)
    torch.manual_seed(0)
    config = Qwen3Config(**cfg, num_hidden_layers=layers)
    eager = Qwen3ForCausalLM(config).to(device=device, dtype=dtype).eval()
    with torch.no_grad():  # HF's init gives near-constant logits; larger weights make the argmax vary
        for name, p in eager.named_parameters():
            if not name.endswith("norm.weight"):
                p.normal_(0, 0.05)
    tilec_model = qwen3.patch(copy.deepcopy(eager))
    rest = copy.deepcopy(eager)
    for layer in rest.model.layers:
        layer.forward = lambda hidden_states, *args, **kwargs: hidden_states
    models = {"eager": eager, "tilec": tilec_model, "graph": tilec_model, "rest": rest}
    if compile_:
        models["compile"] = torch.compile(copy.deepcopy(eager), dynamic=True)
    return models, qwen3


def request(model, cache, prompt: torch.Tensor, steps: int, device: str,
            decoder=None) -> tuple[float, float, list[int]]:
    """One request: prefill, then `steps` greedy decode steps (by `decoder(cache)`, a GraphDecoder, where given);
    seconds of each phase and the tokens."""
    with torch.no_grad():
        _sync(device)
        t0 = time.perf_counter()
        out = model(input_ids=prompt, cache=cache, use_cache=True, logits_to_keep=1)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        _sync(device)
        t1 = time.perf_counter()
        toks = [tok]
        step = decoder(cache) if decoder is not None else None
        for _ in range(steps):
            logits = step(tok) if step is not None else model(input_ids=tok, cache=cache, use_cache=True).logits
            tok = logits[:, -1].argmax(-1, keepdim=True)
            toks.append(tok)
        _sync(device)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, [int(t) for t in torch.cat(toks, 1)[0].tolist()]


GRAPH: dict = {}  # the graph variant's one cache and its GraphDecoder (the graph holds the cache's addresses)


def make_cache(name: str, models, qwen3, max_len: int):
    from transformers import DynamicCache
    if name == "graph":  # one cache for every round, emptied (its buffers, in the graph, stay)
        if "cache" not in GRAPH:
            GRAPH["cache"] = qwen3.tilec_cache(models["graph"], max_len)
        GRAPH["cache"].reset()
        return GRAPH["cache"]
    if name == "tilec":
        return qwen3.tilec_cache(models["tilec"], max_len)
    return DynamicCache(config=models["eager"].config)


def decoder_for(name: str, models, qwen3):
    """The graph variant's decode steps: its GraphDecoder, made at the first request (after its prefill: the
    cache's buffers exist), captured at its first step, then replayed by every later request."""
    if name != "graph":
        return None

    def get(cache):
        if "decoder" not in GRAPH:
            GRAPH["decoder"] = qwen3.GraphDecoder(models["graph"], cache)
        return GRAPH["decoder"]
    return get


def run_variant(name: str, models, qwen3, prompt, steps: int, device: str, max_len: int):
    return request(models[name], make_cache(name, models, qwen3, max_len), prompt, steps, device,
                   decoder_for(name, models, qwen3))


def per_kernel(models, qwen3, prompt, steps, device, max_len):
    """(a): one tilec request recorded (prefill and decode apart), then the graph variant's decode steps (its
    static step, eagerly: what the graph captures), each (kernel, shape)'s inputs kept from its first call, then
    timed alone. Returns {phase: [{op, sizes, calls, us}]} (phases prefill, decode, decode_static) and the
    recordings (prefill, decode, and the whole: both requests, what --tune tunes for)."""
    from tilec.runtime.kernel import Kernel
    names = {}  # id of each Kernel an op runs -> the op's name (a plan's kernels too: use_plans)
    for qualname, (target, _) in _REGISTRY.items():
        for k in [target, *getattr(target, "kernels", {}).values(), *getattr(target, "_generic", {}).values()]:
            names[id(k)] = qualname
    kept: dict[tuple, tuple] = {}
    original = Kernel.__call__

    def keeping(self, *tensors, out=None, **sizes):
        key = (id(self), tuple(sorted((self.read_sizes(tensors[:len(self.inputs)]) | sizes).items())))
        if key not in kept:  # the inputs, and any out= (the cache write's in-place buffers), as given
            outs = out if isinstance(out, (list, tuple)) else ([out] if out is not None else [])
            kept[key] = (self, [t.clone() for t in tensors], [o.clone() for o in outs], dict(sizes))
        return original(self, *tensors, out=out, **sizes)

    model = models["tilec"]
    cache = make_cache("tilec", models, qwen3, max_len)
    Kernel.__call__ = keeping
    try:
        with torch.no_grad(), tc.record() as rec_all:  # the whole request, and each phase apart
            with tc.record() as rec_prefill:
                out = model(input_ids=prompt, cache=cache, use_cache=True, logits_to_keep=1)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            with tc.record() as rec_decode:
                for _ in range(steps):
                    tok = model(input_ids=tok, cache=cache, use_cache=True).logits[:, -1].argmax(-1, keepdim=True)
            cache = make_cache("tilec", models, qwen3, max_len)  # the graph variant's decode steps (run eagerly)
            tok = model(input_ids=prompt, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(
                -1, keepdim=True)
            static = qwen3.GraphDecoder(model, cache, use_graph=False)
            with tc.record() as rec_static:
                for _ in range(steps):
                    tok = static(tok)[:, -1].argmax(-1, keepdim=True)
    finally:
        Kernel.__call__ = original
    times = {}
    for (kid, sizes), (kernel, ins, outs, given) in kept.items():
        def call(kernel=kernel, ins=ins, outs=outs, given=given):
            return kernel(*ins, out=outs or None, **given)
        times[kid, sizes] = _time(call, device)
    table = {}
    for phase, rec in (("prefill", rec_prefill), ("decode", rec_decode), ("decode_static", rec_static)):
        rows = []
        for name in rec.names():
            for shape_key, n in rec.calls(name).items():
                sizes = tuple(sorted((k, int(v)) for k, v in (x.split("=") for x in shape_key.split(","))))
                kids = {k for k, q in names.items() if q == name}
                us = next((t for (k, s), t in times.items() if s == sizes and (not kids or k in kids)), None)
                rows.append({"op": name, "sizes": dict(sizes), "calls": n, "us": us})
        table[phase] = rows
    return table, rec_prefill, rec_decode, rec_all


def _time(fn, device: str) -> float:
    """Microseconds per call: do_bench's median on a GPU; on the CPU check, one call (the code path only)."""
    if device == "cuda":
        import triton.testing
        return 1e3 * triton.testing.do_bench(fn, warmup=5, rep=50, return_mode="median")
    t0 = time.perf_counter()
    fn()
    return 1e6 * (time.perf_counter() - t0)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=7239)
    ap.add_argument("--steps", type=int, default=31)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--record", metavar="PATH", help="write the recorded calls (tc.record) to PATH")
    ap.add_argument("--cpu-check", action="store_true", help="a tiny model on the CPU (Triton's interpreter)")
    ap.add_argument("--tune", type=int, metavar="TRIALS", help="tune each op for its recorded calls (prefill and "
                    "decode together) with TRIALS configs, save the plans in --plans, and stop")
    ap.add_argument("--plans", metavar="DIR", help="serve the tilec ops from the tuned plans in DIR (with --tune: "
                    "where to write them)")
    a = ap.parse_args(argv)
    if a.tune and not a.plans:
        ap.error("--tune needs --plans DIR (where the plans go)")
    device = "cuda" if torch.cuda.is_available() and not a.cpu_check else "cpu"
    if a.cpu_check:
        cfg = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=128,
                   vocab_size=256, max_position_embeddings=512)
        a.layers, a.prompt, a.steps, a.rounds = min(a.layers, 1), min(a.prompt, 5), min(a.steps, 2), min(a.rounds, 1)
        dtype = torch.float32
    else:
        cfg, dtype = QWEN3_8B, torch.bfloat16
    t_start = time.perf_counter()
    GRAPH.clear()  # a graph of another call's model and cache must not be replayed here
    models, qwen3 = build_models(cfg, a.layers, dtype, device, compile_=not (a.no_compile or a.cpu_check or a.tune),
                                 plans=None if a.tune else a.plans)
    max_len = a.prompt + a.steps + 1
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(0, cfg["vocab_size"], (1, a.prompt), generator=g).to(device)

    # warm-up (tilec's kernels per shape) and the tokens agree; torch.compile comes last (below), so that a
    # compile that takes the run's time still leaves the other variants' table written
    compiled = models.pop("compile", None)
    tokens, failed = {}, {}
    for name in models:
        t = time.perf_counter()
        tokens[name] = run_variant(name, models, qwen3, prompt, a.steps, device, max_len)[2]
        print(f"warm-up {name}: {time.perf_counter() - t:.1f} s", flush=True)

    # the graph replayed on another prompt (its cache emptied, then filled with other keys): eager's tokens
    other = torch.randint(0, cfg["vocab_size"], (1, a.prompt), generator=g).to(device)
    second = {name: run_variant(name, models, qwen3, other, a.steps, device, max_len)[2] for name in ("eager", "graph")}
    table, rec_p, rec_d, rec_all = per_kernel(models, qwen3, prompt, a.steps, device, max_len)
    if a.record:
        rec_p.save(a.record + ".prefill.json")
        rec_d.save(a.record + ".decode.json")
    if a.tune:
        return tune_ops(qwen3, rec_all, a)
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (interpreter)",
              "torch": torch.__version__, "layers": a.layers, "prompt": a.prompt, "steps": a.steps,
              "rounds": a.rounds, "dtype": str(dtype), "per_kernel": table,
              "graph_tokens_equal_to_eager_on_another_prompt": sum(x == y for x, y in zip(second["graph"],
                                                                                       second["eager"]))}
    _print_kernels(table)
    _rounds_and_report(models, qwen3, prompt, a, device, max_len, table, tokens, failed, result, t_start)
    if compiled is not None:
        t = time.perf_counter()
        try:
            tokens["compile"] = request(compiled, make_cache("compile", models, qwen3, max_len), prompt, a.steps,
                                        device)[2]
            models["compile"] = compiled
            print(f"warm-up compile: {time.perf_counter() - t:.1f} s", flush=True)
        except Exception as e:  # torch.compile of HF's model can fail on a given torch: reported, left out
            failed["compile"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"warm-up compile: FAILED ({failed['compile']}); left out", flush=True)
        if "compile" in models:
            _rounds_and_report(models, qwen3, prompt, a, device, max_len, table, tokens, failed, result, t_start)
    return result


def tune_ops(qwen3, rec_all, a) -> dict:
    """Each op's kernel tuned for the mix of its calls in the whole recorded request (kernels.tune_plans), the
    plans saved in a.plans, where examples/qwen3's kernels.use_plans serves them."""
    return {"plans": qwen3.kernels.tune_plans(rec_all, a.plans, a.tune, jobs=0)}


def _print_kernels(table) -> None:
    print(f"\n{'op':52s} {'phase':8s} {'sizes':40s} {'calls':>6s} {'us/call':>9s} {'total ms':>9s}")
    for phase, rows in table.items():
        for r in rows:
            sizes = ",".join(f"{k}={v}" for k, v in r["sizes"].items())
            us = r["us"] if r["us"] is not None else float("nan")
            print(f"{r['op'][:52]:52s} {phase:8s} {sizes[:40]:40s} {r['calls']:6d} {us:9.1f} "
                  f"{us * r['calls'] / 1e3:9.3f}")


def _rounds_and_report(models, qwen3, prompt, a, device, max_len, table, tokens, failed, result, t_start) -> None:
    """(c) and (d): `a.rounds` paired, interleaved rounds of `models`, the medians, the paired differences and
    the prediction per phase; printed, and the JSON written."""
    rng = random.Random(0)
    runs = {n: {"prefill": [], "decode": []} for n in models}
    rounds_same = {n: [] for n in models if n != "rest"}  # each round's tokens against eager's warm-up ones
    for _ in range(a.rounds):
        order = list(models)
        rng.shuffle(order)
        for name in order:
            p, d, toks = run_variant(name, models, qwen3, prompt, a.steps, device, max_len)
            runs[name]["prefill"].append(p)
            runs[name]["decode"].append(d)
            if name != "rest":
                rounds_same[name].append(sum(x == y for x, y in zip(toks, tokens["eager"])))
    same = {n: sum(x == y for x, y in zip(tokens[n], tokens["eager"])) for n in tokens if n != "rest"}
    worst = {n: min(v) for n, v in rounds_same.items()}
    print(f"\nvariants {sorted(models)}; greedy tokens equal to eager's (of {a.steps + 1}): warm-up {same}, "
          f"worst round {worst}; graph on another prompt: "
          f"{result['graph_tokens_equal_to_eager_on_another_prompt']}")
    result.update(tokens_equal_to_eager=same, tokens_equal_to_eager_worst_round=worst, failed=failed, phases={})
    subjects = [n for n in ("tilec", "graph") if n in models]
    print(f"{'phase':8s} {'variant':8s} {'median ms':>10s}   paired subject - variant: median [min .. max] ms")
    for phase in ("prefill", "decode"):
        med = {n: 1e3 * statistics.median(runs[n][phase]) for n in models}
        entry = {"median_ms": med, "predicted_ms": {}, "kernels_ms": {}, "range_ms": {}, "paired": {}}
        for subject in subjects:  # the graph variant's prefill is tilec's; its decode runs the static step
            rows = table["decode_static" if subject == "graph" and phase == "decode" else phase]
            kernels_ms = sum(r["us"] * r["calls"] for r in rows if r["us"] is not None) / 1e3
            entry["kernels_ms"][subject] = kernels_ms
            entry["predicted_ms"][subject] = med["rest"] + kernels_ms
            entry["range_ms"][subject] = [1e3 * min(runs[subject][phase]), 1e3 * max(runs[subject][phase])]
            entry["paired"][subject] = {}
            for other in (n for n in models if n not in (subject, "rest") and not (subject == "tilec" and n == "graph")):
                diffs = [1e3 * (x - y) for x, y in zip(runs[subject][phase], runs[other][phase])]
                entry["paired"][subject][other] = {"median_ms": statistics.median(diffs), "min_ms": min(diffs),
                                                   "max_ms": max(diffs)}
        for n in models:
            print(f"{phase:8s} {n:8s} {med[n]:10.2f}")
        for subject, pairs in entry["paired"].items():
            for other, pair in pairs.items():
                print(f"{phase:8s} {subject} - {other}: {pair['median_ms']:+9.2f} [{pair['min_ms']:+.2f} .. "
                      f"{pair['max_ms']:+.2f}] ms")
            lo, hi = entry["range_ms"][subject]
            print(f"{phase:8s} predicted {subject} = rest {med['rest']:.2f} + kernels "
                  f"{entry['kernels_ms'][subject]:.2f} = {entry['predicted_ms'][subject]:.2f} ms; measured median "
                  f"{med[subject]:.2f} (range {lo:.2f} .. {hi:.2f})", flush=True)
        result["phases"][phase] = entry
    result["wall_s"] = time.perf_counter() - t_start
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
        print(f"wrote {a.json}", flush=True)


if __name__ == "__main__":
    main()
