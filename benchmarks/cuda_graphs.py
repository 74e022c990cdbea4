"""Small repeated calls: a tilec kernel called plainly, as a torch custom op, and replayed from a CUDA graph
(`kernel.graphed`), beside eager PyTorch (called, and graphed) and torch.compile (a benchmark, not a test).

    python benchmarks/cuda_graphs.py [--json out.json] [--no-compile]
    python benchmarks/cuda_graphs.py --smoke [--json out.json]     # CPU too: tiny sizes, no timing

Workloads: GEMM+SiLU 64x64x64 (examples/matmul_silu.py) and RMSNorm 1x4096 (examples/rmsnorm.py): calls
whose GPU time is a few microseconds, so that a plain call's host time (tilec's checks, the launch)
decides how fast a program that makes them one after another runs. Each variant is checked against
PyTorch first (relative error), then timed after warm-up:

- `loop_us`: per call, 100 calls back to back on the same inputs between two CUDA events, the median of 7
  such loops: what a program calling it repeatedly gets (host-bound when the host is the slower);
- `host_us`: host time per call, 200 calls queued without waiting (benchmarks/gpu_time.py: host_us);
- `do_bench_us`: triton.testing.do_bench's median (each call timed on its own, L2 flushed between).

Variants: tilec `call` (the direct launcher), the tilec `op` (Kernel.as_op, called eagerly), `graphed`
(copies the inputs into the static buffers, then replays), `graphed replay()` (the replay alone, inputs
already in place), eager PyTorch, eager graphed (the same wrapper around the eager function), and with
compile: torch.compile of the eager function (Inductor, default mode and mode="reduce-overhead", which
replays CUDA graphs itself) and torch.compile of a function calling the tilec op. Ratios are each
variant's loop_us over the `graphed` row's (above 1: graph replay is faster).

`--smoke` runs the same paths on tiny sizes wherever it is (through Triton's interpreter on a CPU):
correctness of the call, the op and torch.compile(backend="eager") of the op against PyTorch, and graph
replay on a GPU or its refusal (a TilecError) on a CPU; it prints no times and claims nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import matmul_silu  # noqa: E402
import rmsnorm  # noqa: E402
from gpu_time import host_us  # noqa: E402  (host time per call: the same measure as gpu_time.py)

import tilec as tc  # noqa: E402
from tilec.runtime import graphed, triton_compat  # noqa: E402

F = torch.nn.functional

# (name, example module, sizes on the GPU, sizes for --smoke, config, the eager PyTorch a user writes)
WORKLOADS = [
    ("gemm_silu", matmul_silu, dict(M=64, N=64, K=64), dict(M=24, N=40, K=33),
     {"BM": 64, "BN": 64, "BK": 64, "stages": 2, "warps": 4}, lambda a, w: F.silu(a @ w)),
    ("rmsnorm", rmsnorm, dict(M=1, N=4096), dict(M=1, N=300), {"ROWS": 1, "BLOCK": 4096, "warps": 8},
     lambda x, w: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + rmsnorm.EPS)).to(x.dtype) * w),
]
_ops = 0


def loop_us(fn, xs, n=100, loops=7) -> float:
    """Microseconds per call of n back-to-back calls of fn(*xs) between CUDA events: the median of `loops`."""
    for _ in range(10):
        fn(*xs)
    torch.cuda.synchronize()
    times = []
    for _ in range(loops):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            fn(*xs)
        e1.record()
        torch.cuda.synchronize()
        times.append(1e3 * e0.elapsed_time(e1) / n)
    return sorted(times)[loops // 2]


def do_bench_us(fn, xs) -> float:
    from triton.testing import do_bench
    return do_bench(lambda: fn(*xs), warmup=25, rep=100, return_mode="median") * 1e3


def _op(kernel, name):
    global _ops
    _ops += 1
    return kernel.as_op(f"bench_{name}_{_ops}")


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def variants(name, mod, sizes, config, eager, smoke, compile_ref):
    """(label, callable) pairs, each checked against the example's reference before use."""
    s, args = mod.make()
    kernel = tc.build(s, args, config=config)
    op = _op(kernel, name)
    xs = mod.inputs(sizes, common.device())
    cuda = triton_compat.target() == "cuda"
    out = [("tilec call", kernel), ("tilec op", op)]
    if cuda:
        g = kernel.graphed(*xs)
        out += [("tilec graphed", g), ("tilec graphed replay()", lambda *_: g.replay())]
    out.append(("eager", eager))
    if cuda and not smoke:
        out.append(("eager graphed", graphed(eager, *xs)))
    if smoke:  # a graph with the op and torch ops, no Inductor (it needs a C++ compiler on a CPU)
        out.append(("torch.compile(op, backend=eager)",
                    torch.compile(lambda *t: op(*t) * 1, backend="eager", fullgraph=True)))
    elif compile_ref:
        out += [("torch.compile(eager)", torch.compile(eager, fullgraph=True)),
                ("torch.compile(eager, reduce-overhead)", torch.compile(eager, fullgraph=True, mode="reduce-overhead")),
                ("torch.compile(tilec op)", torch.compile(lambda *t: op(*t), fullgraph=True))]
    return kernel, xs, out


def run_workload(name, mod, sizes, config, eager, smoke, compile_ref):
    print(f"{name} {', '.join(f'{k}={v}' for k, v in sizes.items())} config {config}", flush=True)
    kernel, xs, vs = variants(name, mod, sizes, config, eager, smoke, compile_ref)
    ref = mod.reference(*xs)
    rows = []
    for label, fn in vs:
        if label.endswith("replay()"):
            err = None  # the same graph as the row before, inputs not copied
        else:
            err = max(common.check(_first(fn(*xs)), _first(ref)))
        row = {"workload": name, "variant": label, "sizes": sizes, "rel_err": err}
        if not smoke:
            try:
                row |= {"loop_us": loop_us(fn, xs), "host_us": host_us(fn, xs), "do_bench_us": do_bench_us(fn, xs)}
            except Exception as e:  # e.g. a CUDA-graph replay of Inductor's output under do_bench
                row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        rows.append(row)
        times = (f"loop {row['loop_us']:7.2f}  host {row['host_us']:7.2f}  do_bench {row['do_bench_us']:7.2f}"
                 if "loop_us" in row else row.get("error", "checked"))
        print(f"  {label:40} {times}" + (f"  rel err {err:.1e}" if err is not None else ""), flush=True)
    if triton_compat.target() != "cuda":
        try:
            kernel.graphed(*xs)
            refusal = "not refused"
        except tc.TilecError as e:
            refusal = f"refused: {e}"
        rows.append({"workload": name, "variant": "tilec graphed", "sizes": sizes, "rel_err": None,
                     "graphed": refusal})
        print(f"  {'tilec graphed':40} {refusal[:100]}", flush=True)
        if refusal == "not refused":
            raise AssertionError("kernel.graphed was not refused without a CUDA device")
    base = next((r for r in rows if r["variant"] == "tilec graphed" and "loop_us" in r), None)
    if base is not None:
        for r in rows:
            if "loop_us" in r:
                r["vs_graphed"] = r["loop_us"] / base["loop_us"]
        print("  loop_us / graphed: " + ", ".join(f"{r['variant']} {r['vs_graphed']:.2f}" for r in rows
                                                  if "vs_graphed" in r), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, correctness only (runs on a CPU)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    a = ap.parse_args(argv)
    if not a.smoke and triton_compat.target() != "cuda":
        raise SystemExit("cuda_graphs.py times CUDA graphs: it needs a CUDA device (or --smoke for a check)")
    rows = []
    with torch.no_grad():
        for name, mod, sizes, smoke_sizes, config, eager in WORKLOADS:
            rows += run_workload(name, mod, smoke_sizes if a.smoke else sizes, config, eager, a.smoke,
                                 not a.no_compile)
    device = torch.cuda.get_device_name() if triton_compat.target() == "cuda" else "triton-interpreter"
    if a.json:
        Path(a.json).write_text(json.dumps({"device": device, "smoke": a.smoke, "rows": rows}, indent=2, default=str))
    if a.smoke:
        print(f"cuda_graphs smoke on {device}: OK")


if __name__ == "__main__":
    main()
