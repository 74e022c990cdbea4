"""A tiny random Qwen3 from Hugging Face transformers, run unmodified and with its decoder layers patched to
the tilec kernels (model.py), on the same prompt and greedy decode steps: prints the max |delta logit| of
each step and `qwen3: OK` when every step is within the dtype's tolerance and the greedy tokens agree.

    python examples/qwen3/run.py                                  # CPU, float32, Triton's interpreter
    python examples/qwen3/run.py --device cuda --dtype bfloat16   # on a GPU
    python examples/qwen3/run.py --plans DIR                      # kernels from tuned plans (tune.py)
    python examples/qwen3/run.py --graph                          # decode steps by model.GraphDecoder: a CUDA
                                                                  # graph on a GPU (the same static step eagerly
                                                                  # on a CPU)

The reference keeps HF's own attention (sdpa) and DynamicCache; the patched copy uses the tilec cache
(`model.tilec_cache`). Both are fed the reference's greedy tokens, so that each step compares the logits of
the same sequence; the patched model's greedy choice is checked against the reference's too.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script, this directory is sys.path[0], and its kernels.py would shadow the `kernels` package that
# transformers imports: take it off; the sibling modules are imported by path below.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import torch  # noqa: E402

if not torch.cuda.is_available():  # transformers imports Triton: the interpreter must be chosen before it does
    os.environ.setdefault("TRITON_INTERPRET", "1")
from transformers import DynamicCache, Qwen3Config, Qwen3ForCausalLM  # noqa: E402


def _load_model_module():
    if "qwen3_model" not in sys.modules:
        spec = importlib.util.spec_from_file_location("qwen3_model", HERE / "model.py")
        sys.modules["qwen3_model"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["qwen3_model"])
    return sys.modules["qwen3_model"]


tilec_qwen3 = _load_model_module()  # examples/qwen3/model.py: patch, tilec_cache

# max |delta logit| allowed per dtype, for logits of magnitude ~4 (tiny_model's weights). In bfloat16, HF's own
# eager and sdpa attention differ by 0.06 on this model, and its bfloat16 logits from its float32 ones by 0.12.
TOLERANCE = {"float32": 1e-4, "bfloat16": 0.25, "float16": 0.05}

TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=128, vocab_size=256, max_position_embeddings=512)


def tiny_model(seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu", **config) -> Qwen3ForCausalLM:
    """A random Qwen3 of TINY's sizes (overridden by `config`). HF's default init (std 0.02, norm weights 1)
    gives near-constant logits, so the weights are drawn larger: N(0, 0.15), and the norms' 1 + 0.2 N(0, 1)."""
    torch.manual_seed(seed)
    cfg = Qwen3Config(**{**TINY, **config})
    m = Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.15 * torch.randn_like(p))
    return m.to(device=device, dtype=dtype)


@torch.no_grad()
def compare(ref: Qwen3ForCausalLM, patched: Qwen3ForCausalLM, prompt: torch.Tensor, steps: int,
            verbose: bool = True, graph: bool = False) -> dict:
    """Prefill `prompt` [B, S] then `steps` greedy decode steps in both models (with `graph`, the patched
    model's decode steps by model.GraphDecoder). Returns the max |delta logit| per step (step 0: the prefill's
    logits at every position), both models' greedy tokens per step, per step the reference's logit gap between
    its token and the patched model's (0 where they agree), and per step the tilec calls made (tc.record: op
    -> sorted shapes)."""
    import tilec as tc

    max_len = prompt.shape[1] + steps
    ref_cache = DynamicCache(config=ref.config)
    tilec_cache = tilec_qwen3.tilec_cache(patched, max_len)
    ids, diffs, gaps, ref_tokens, tilec_tokens, calls = prompt, [], [], [], [], []
    decoder = None
    for step in range(steps + 1):
        t0 = time.perf_counter()
        want = ref(input_ids=ids, cache=ref_cache, use_cache=True).logits.float()
        t1 = time.perf_counter()
        with tc.record() as rec:
            if decoder is not None:
                got = decoder(ids).float()
            else:
                got = patched(input_ids=ids, cache=tilec_cache, use_cache=True).logits.float()
        t2 = time.perf_counter()
        calls.append({name: sorted(rec.calls(name)) for name in rec.names()})
        if graph and decoder is None:
            decoder = tilec_qwen3.GraphDecoder(patched, tilec_cache)
        if not torch.isfinite(got).all():
            raise AssertionError(f"qwen3: step {step}: the patched model's logits hold NaN or inf")
        diffs.append((got - want).abs().max().item())
        ids = want[:, -1].argmax(-1, keepdim=True)  # both models continue with the reference's token
        mine = got[:, -1].argmax(-1, keepdim=True)
        ref_tokens.append(ids.flatten().tolist())
        tilec_tokens.append(mine.flatten().tolist())
        # how much better the reference finds its token than the patched model's choice (0 where they agree)
        gaps.append((want[:, -1].gather(-1, ids) - want[:, -1].gather(-1, mine)).max().item())
        if verbose:
            what = f"prefill {prompt.shape[1]} tokens" if step == 0 else f"decode step {step}"
            print(f"{what:>18}: max |delta logit| {diffs[-1]:.2e}  (max |logit| {want.abs().max().item():.2f}; "
                  f"reference {1e3 * (t1 - t0):.0f} ms, tilec {1e3 * (t2 - t1):.0f} ms)")
    return dict(diffs=diffs, gaps=gaps, ref_tokens=ref_tokens, tilec_tokens=tilec_tokens, calls=calls)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=sorted(TOLERANCE))
    ap.add_argument("--prompt-len", type=int, default=7)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--plans", metavar="DIR", help="serve the kernels from the tuned plans in DIR (tune.py)")
    ap.add_argument("--graph", action="store_true", help="decode steps by model.GraphDecoder (a CUDA graph on a GPU)")
    args = ap.parse_args(argv)
    if args.plans:
        tilec_qwen3.kernels.use_plans(args.plans)

    dtype = getattr(torch, args.dtype)
    ref = tiny_model(dtype=dtype, device=args.device)
    patched = tilec_qwen3.patch(copy.deepcopy(ref))
    if args.plans:
        print(f"served from the tuned plans in {args.plans}: {', '.join(tilec_qwen3.kernels.planned()) or 'none'}")
    torch.manual_seed(1)
    prompt = torch.randint(0, ref.config.vocab_size, (args.batch, args.prompt_len), device=args.device)
    result = compare(ref, patched, prompt, args.steps, graph=args.graph)
    tol = TOLERANCE[args.dtype]
    worst = max(result["diffs"])
    if worst > tol:
        raise AssertionError(f"qwen3: max |delta logit| {worst:.3g} > {tol:g} ({args.dtype})")
    # float32: the greedy tokens must agree. In a 16-bit dtype a near-tie may flip within the rounding; a
    # different token is an error only where the reference prefers its own by more than twice the tolerance.
    allowed_gap = 0.0 if args.dtype == "float32" else 2 * tol
    if max(result["gaps"]) > allowed_gap:
        raise AssertionError(f"qwen3: greedy tokens differ: reference {result['ref_tokens']}, tilec "
                             f"{result['tilec_tokens']} (logit gaps {result['gaps']})")
    if result["ref_tokens"] != result["tilec_tokens"]:
        print(f"note: near-tie tokens differ (reference gap <= {allowed_gap:g}): {result['tilec_tokens']}")
    print(f"greedy tokens {result['ref_tokens']}")
    decode = "decode in a CUDA graph" if args.graph and args.device.startswith("cuda") else \
        "decode by GraphDecoder's static step, eagerly" if args.graph else "decode eagerly"
    print(f"qwen3: OK (max |delta logit| {worst:.2e} <= {tol:g}, {args.dtype} on {args.device}, {decode})")
    return result


if __name__ == "__main__":
    main()
