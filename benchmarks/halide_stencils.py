"""Halide's own output for issue 25's stencils (the anchor beside tilec in benchmarks/stencils.py): the 3x3
blur, the separable 5-tap filter and the 3x3 box after a channel sum, written as Halide Funcs with
Halide's GPU schedule (the consumer `gpu_tile`d, the producer `compute_at` the block with `gpu_threads`:
the window in shared memory, the halo recomputed; or the producer inlined), JIT-compiled for CUDA (or the
host, to check on a CPU), over a few tile sizes; the fastest schedule that matches the reference is the
row's.

    python benchmarks/halide_stencils.py            # CPU: checks each pipeline and schedule on small sizes

Timing: `reps` realizes into one device-resident output back to back, then `device_sync`; seconds per
call (wall clock: includes Halide's host dispatch, which a kernel of tens of µs hides). Needs `halide`
(a test dependency here; carried to the GPU host as an unpacked wheel, gpu.md).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

TAPS5 = (1.0 / 16, 4.0 / 16, 6.0 / 16, 4.0 / 16, 1.0 / 16)
TILES = [(32, 8), (16, 16), (32, 16), (64, 4), (32, 32)]


def _target(cuda):
    import halide as hl
    t = hl.get_host_target()
    if cuda:
        t = t.with_feature(hl.TargetFeature.CUDA).with_feature(hl.TargetFeature.CUDACapability86)
    return t


def _pipeline(kind, shape, tile, placement, cuda):
    """(Pipeline, ImageParam, output extents in Halide order) for one stencil and one schedule."""
    import halide as hl
    x, y, xi, yi, xo, yo = (hl.Var(n) for n in ("x", "y", "xi", "yi", "xo", "yo"))
    if kind == "blur":
        inp = hl.ImageParam(hl.Float(32), 2, "inp")
        prod, out = hl.Func("blur_x"), hl.Func("blur_y")
        prod[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3.0
        out[x, y] = (prod[x, y] + prod[x, y + 1] + prod[x, y + 2]) / 3.0
        h, w = shape
        extents = [w - 2, h - 2]
    elif kind == "separable5":
        inp = hl.ImageParam(hl.Float(32), 2, "inp")
        prod, out = hl.Func("hx"), hl.Func("vy")
        prod[x, y] = sum(TAPS5[t] * inp[x + t, y] for t in range(5))
        out[x, y] = sum(TAPS5[t] * prod[x, y + t] for t in range(5))
        h, w = shape
        extents = [w - 4, h - 4]
    elif kind == "energy_box":
        inp = hl.ImageParam(hl.Float(32), 3, "inp")
        c, h, w = shape
        r = hl.RDom([(0, c)], "r")
        prod, out = hl.Func("E"), hl.Func("B")
        prod[x, y] = 0.0
        prod[x, y] += inp[x, y, r.x] * inp[x, y, r.x]
        out[x, y] = sum(prod[x + i, y + j] for i in range(3) for j in range(3)) / 9.0
        extents = [w - 2, h - 2]
    else:
        raise ValueError(kind)
    tx, ty = tile
    if cuda:
        out.gpu_tile(x, y, xo, yo, xi, yi, tx, ty)
        if placement == "at_block":
            prod.compute_at(out, xo).gpu_threads(x, y)
            if kind == "energy_box":
                prod.update().gpu_threads(x, y)
    else:
        out.tile(x, y, xo, yo, xi, yi, tx, ty).parallel(yo)
        if placement == "at_block":
            prod.compute_at(out, xo)
    if placement == "inline" and kind == "energy_box":
        return None  # a reduction cannot be inlined in Halide
    p = hl.Pipeline(out)
    p.compile_jit(_target(cuda))
    return p, inp, extents


def _run(p, inp, extents, x_np, cuda, reps):
    """(output as numpy in the array's axis order, median seconds per call or None when reps == 0)."""
    import halide as hl
    buf = hl.Buffer(np.ascontiguousarray(x_np))
    inp.set(buf)
    out = hl.Buffer(hl.Float(32), extents)
    p.realize(out)
    if cuda:
        out.copy_to_host()
    result = np.array(out)  # Halide order reversed back: the array's (H, W)
    t = wall_seconds(lambda: p.realize(out), out.device_sync if cuda else None, reps) if reps else None
    return result, t


def wall_seconds(call, sync=None, reps=50) -> float:
    """Median over 5 batches of wall-clock seconds per call, `reps` calls back to back then `sync()` (one
    warm-up batch first): how the Halide anchor is timed, and tilec beside it (benchmarks/stencils.py)."""
    ts = []
    for n in range(6):
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        if sync is not None:
            sync()
        if n:
            ts.append((time.perf_counter() - t0) / reps)
    return statistics.median(ts)


def best(kind, x_np, ref_np, cuda, reps=50, log=print):
    """The fastest Halide schedule for `kind` on input `x_np` that matches `ref_np` (rel. error < 1e-4):
    a dict with us, schedule, rel_error and the per-schedule records."""
    records, top = [], None
    for tile in TILES:
        for placement in ("at_block", "inline"):
            try:
                built = _pipeline(kind, x_np.shape, tile, placement, cuda)
                if built is None:
                    continue
                out, t = _run(*built, x_np, cuda, reps)
                err = float(np.abs(out - ref_np).max() / max(np.abs(ref_np).max(), 1e-30))
                if not err < 1e-4:
                    raise AssertionError(f"rel error {err:.1e}")
            except Exception as e:  # noqa: BLE001 - a failing schedule is reported, never chosen
                records.append({"tile": tile, "placement": placement, "failed": f"{type(e).__name__}: {e}"[:200]})
                log(f"  halide {kind} {tile} {placement}: FAILED {records[-1]['failed']}")
                continue
            rec = {"tile": tile, "placement": placement, "rel_error": err}
            if t is not None:
                rec["us"] = t * 1e6
                log(f"  halide {kind} {t * 1e6:9.1f} us  rel err {err:.1e}  tile {tile} {placement}")
                if top is None or t < top["us"] * 1e-6:
                    top = dict(rec)
            records.append(rec)
    return {"best": top, "records": records}


def _reference(kind, x):
    if kind == "blur":
        bx = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3.0
        return (bx[:-2] + bx[1:-1] + bx[2:]) / 3.0
    if kind == "separable5":
        h = sum(TAPS5[t] * x[:, t:x.shape[1] - 4 + t] for t in range(5))
        return sum(TAPS5[t] * h[t:h.shape[0] - 4 + t] for t in range(5))
    e = (x * x).sum(0)
    h, w = e.shape
    return sum(e[i:h - 2 + i, j:w - 2 + j] for i in range(3) for j in range(3)) / 9.0


if __name__ == "__main__":  # CPU check of every pipeline and schedule (the GPU run uses the same code)
    rng = np.random.default_rng(0)
    failed = 0
    for kind, shape in (("blur", (70, 83)), ("separable5", (69, 85)), ("energy_box", (3, 67, 81))):
        x = rng.standard_normal(shape).astype(np.float32)
        res = best(kind, x, _reference(kind, x.astype(np.float64)), cuda=False, reps=0)
        bad = [r for r in res["records"] if "failed" in r]
        failed += len(bad)
        print(f"{kind}: {len(res['records']) - len(bad)} schedules match, {len(bad)} failed")
    raise SystemExit(1 if failed else 0)
