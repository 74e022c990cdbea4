"""The stencils of issue 25 on the GPU: Halide's 3x3 blur (blur_x computed at blur_y's tile: halo
recompute; and per row of a column strip, stored at the strip: a sliding window), the separable 5-tap filter and the 3x3 box after a channel sum, beside eager PyTorch and
torch.compile, in one run (a benchmark, not a test).

    python benchmarks/stencils.py [--json out.json] [--quick] [--no-compile]
    python benchmarks/stencils.py --smoke --no-compile      # CPU, Triton's interpreter: runs, not speed

Each tilec config is checked against the example's reference (relative error) and timed; the fastest that
passed is the row's. Effective TB/s counts the fewest bytes (the input read once, the output written
once): the floor a fused kernel can reach; the halo's recomputed rows and the window's round trip
through L2 are the price of fusing. Ratios are anchor time / tilec time (above 1: tilec faster).
Halide's own CUDA output (benchmarks/halide_stencils.py: Halide's GPU schedule over a few tiles, the fastest
that matches) is the third anchor where `import halide` works and a GPU is there (`--no-halide` skips it);
its time is wall clock per call over back-to-back realizes on one input, and tilec's kernel is timed the same
way beside it (`tilec_wall_us`; vs_halide = halide / tilec, both so timed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import reductions as R  # noqa: E402  (sets TRITON_INTERPRET before triton is imported)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]
import blur  # noqa: E402
import blur_sliding  # noqa: E402
import halide_stencils  # noqa: E402
import separable5  # noqa: E402
import stencil_after_reduction as sar  # noqa: E402
import torch  # noqa: E402

import tilec as tc  # noqa: E402

# what a PyTorch user writes for each (its reference: slices and adds), the eager and torch.compile anchors
for _mod in (blur, blur_sliding, separable5, sar):
    R.B.EAGER[_mod] = _mod.reference


def inlined(make, producer):
    """The example's schedule with its producer inlined instead (recomputed per tap, never stored: what
    torch.compile does, and Halide's default)."""
    def inline_make():
        s, args = make()
        s[producer].compute_inline()
        return s, args
    return inline_make


def configs(make, quick):
    s, _ = make()
    names = sorted(s.knobs)
    grid = [dict(zip(names, vals)) for vals in itertools.product(*(s.knobs[n].choices for n in names))]
    return grid[:2] if quick else grid


def halide_anchor(row, mod, make, kind, sizes, a):
    """Add Halide's CUDA time (its best checked schedule) and vs_halide to a row, or say why not."""
    if a.no_halide or not R.GPU or "tilec_us" not in row:
        return
    try:
        import halide  # noqa: F401
    except ImportError as e:
        row["halide_error"] = f"halide not importable: {e}"
        return
    x = mod.inputs(sizes, "cpu")[0]
    ref = mod.reference(x.double()).numpy()
    res = halide_stencils.best(kind, x.numpy(), ref, cuda=True)
    row["halide_configs"] = res["records"]
    if res["best"] is None:
        row["halide_error"] = "no Halide schedule passed"
        return
    row["halide_us"] = res["best"]["us"]
    row["halide_schedule"] = f"{res['best']['tile']} {res['best']['placement']}"
    # tilec timed as Halide is (back-to-back calls on one input, wall clock), so the ratio compares like with like
    s, args = make()
    kernel = tc.build(s, args, config=row["config"])
    xs = mod.inputs(sizes, "cuda")
    row["tilec_wall_us"] = halide_stencils.wall_seconds(lambda: kernel(*xs), torch.cuda.synchronize) * 1e6
    row["vs_halide"] = row["halide_us"] / row["tilec_wall_us"]
    print(f"  {row['workload']}: halide {row['halide_us']:.1f} us ({row['halide_schedule']}), tilec the same way "
          f"{row['tilec_wall_us']:.1f} us", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-halide", action="store_true")
    a = ap.parse_args()
    copy = R.copy_row()
    big = [dict(H=4096, W=4096), dict(H=1080, W=1920)] if not R.SMOKE else [dict(H=19, W=23)]
    rows = []
    opts = argparse.Namespace(no_compile=a.no_compile, compile_mode=None)
    for mod, name, kind, make in ((blur, "blur 3x3", "blur", blur.make),
                                  (blur, "blur 3x3, blur_x inlined", "blur", inlined(blur.make, "blur_x")),
                                  (blur_sliding, "blur 3x3 sliding (store_at)", "blur", blur_sliding.make),
                                  (separable5, "separable 5-tap", "separable5", separable5.make),
                                  (separable5, "separable 5-tap, hx inlined", "separable5", inlined(separable5.make, "hx"))):
        for sizes in big[:1] if a.quick else big:
            nbytes = 4 * (sizes["H"] * sizes["W"] * 2)
            rows.append(R.memory_row(f"{name} {sizes['H']}x{sizes['W']}", mod, make, mod.inputs, sizes,
                                     configs(make, a.quick), nbytes, opts, copy["tb_s"]))
            halide_anchor(rows[-1], mod, make, kind, sizes, a)
    sizes = dict(C=8, H=2048, W=2048) if not R.SMOKE else dict(C=2, H=11, W=13)
    nbytes = 4 * sizes["H"] * sizes["W"] * (sizes["C"] + 1)
    rows.append(R.memory_row(f"channel energy + 3x3 box {sizes['C']}x{sizes['H']}x{sizes['W']}", sar, sar.make,
                             sar.inputs, sizes, configs(sar.make, a.quick), nbytes, opts, copy["tb_s"]))
    halide_anchor(rows[-1], sar, sar.make, "energy_box", sizes, a)
    R.print_table([copy] + rows)
    for r in rows:
        if "halide_us" in r:
            print(f"{r['workload']:42} halide {r['halide_us']:9.1f} us  tilec (same timing) {r['tilec_wall_us']:9.1f} us"
                  f"  x halide {r['vs_halide']:5.2f}  ({r['halide_schedule']})")
    if a.json:
        a.json.write_text(json.dumps([copy] + rows, indent=1, default=str))


if __name__ == "__main__":
    main()
