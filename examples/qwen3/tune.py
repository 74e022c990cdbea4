"""Tune the Qwen3 layer's kernels for the shapes a request really calls them with, and save the plans.

    python examples/qwen3/tune.py --out plans/ [--trials 8] [--only rmsnorm,linear] [--prompt 7] [--steps 4]
    python examples/qwen3/run.py --plans plans/          # the patched model served from those plans

The workflow of docs/serving.md on the example: a request (a prompt, then greedy decode steps) runs through the
tiny model of run.py with its decoder layers patched (model.py); `tc.record()` counts each op's calls by shape;
each op's kernel (kernels.make) is tuned by `tc.tune` for the mix of its recorded calls (`rec.mix(op)`), and the
plan is saved as `<op name>.json` (`tuned.save`), where `kernels.use_plans(DIR)` finds it and serves it with
`tc.load`. The KV-cache write is not tuned (an in-place op whose cache length is given at the call). On a CPU,
the kernels run in Triton's interpreter, so the times are the interpreter's: the code path, not a plan to ship.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # kernels.py must not shadow `kernels`

import torch  # noqa: E402

if not torch.cuda.is_available():  # transformers imports Triton: the interpreter must be chosen before it does
    os.environ.setdefault("TRITON_INTERPRET", "1")

import tilec as tc  # noqa: E402


def _load(module: str, filename: str):
    if module not in sys.modules:
        spec = importlib.util.spec_from_file_location(module, HERE / filename)
        sys.modules[module] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[module])
    return sys.modules[module]


def main(argv=None) -> dict[str, str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, metavar="DIR", help="where the plans go (<op name>.json)")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--only", metavar="NAMES", help="the kernels to tune (kernels.KERNELS names), comma-separated")
    ap.add_argument("--prompt", type=int, default=7)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--storage", metavar="URL", help="the optuna storage of the studies (default: tilec's)")
    a = ap.parse_args(argv)
    run = _load("qwen3_run", "run.py")
    qwen3, kernels = run.tilec_qwen3, run.tilec_qwen3.kernels
    only = set(a.only.split(",")) if a.only else set(kernels.KERNELS) - {"kv_cache_write"}
    unknown = only - set(kernels.KERNELS) | ({"kv_cache_write"} & only)
    if unknown:
        raise SystemExit(f"tune.py: --only {sorted(unknown)}: not a kernel to tune; choose from "
                         f"{sorted(set(kernels.KERNELS) - {'kv_cache_write'})}")

    model = qwen3.patch(run.tiny_model(dtype=getattr(torch, a.dtype), device=a.device))
    torch.manual_seed(1)
    prompt = torch.randint(0, model.config.vocab_size, (1, a.prompt), device=a.device)
    with torch.no_grad(), tc.record() as rec:
        cache = qwen3.tilec_cache(model, a.prompt + a.steps + 1)
        tok = model(input_ids=prompt, cache=cache, use_cache=True).logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(a.steps):
            tok = model(input_ids=tok, cache=cache, use_cache=True).logits[:, -1].argmax(-1, keepdim=True)
    print(rec)
    saved = kernels.tune_plans(rec, a.out, a.trials, only=only, storage=a.storage)
    return saved


if __name__ == "__main__":
    main()
