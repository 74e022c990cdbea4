"""The differential test against Halide (tests/halide_diff/): its generator, mapping and classifier, and a
time-budgeted campaign.

`test_halide_campaign` (slow tier) runs random and friendly cases for a bounded wall time (45 s;
`TILEC_HALIDE_SECONDS` overrides it, 0 skips it) from a seed derived from the git commit, and fails on any
wrong answer, internal error or harness error, printing each case. Replay one with
`python scripts/halide_diff.py --mode MODE --case SEED`. Without the `halide` package (a dev dependency)
every test here is skipped.
"""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

hl = pytest.importorskip("halide", reason="the Halide differential test needs `halide` (pip install -e '.[dev]')")

from tests.halide_diff import classify, gen, halide_side, reference, tilec_side  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _canonical(name: str) -> gen.Case:
    return next(c for c in gen.canonical() if c.name == name)


def test_cases_are_reproducible_from_their_seed():
    for mode in ("random", "friendly"):
        a, b = gen.generate(mode, 7), gen.generate(mode, 7)
        assert a.describe() == b.describe()
        assert a.describe() != gen.generate(mode, 8).describe()


def test_generated_pipelines_read_inside_their_tensors():
    """Shapes are derived forward, so the reference (which slices) and Halide's bounds agree for every seed."""
    for seed in range(40):
        case = gen.generate("random", seed)
        assert 2 <= len(case.pipe.stages) <= 5
        ref, mag, _, _ = reference.evaluate(case.pipe, classify.make_inputs(case.pipe, seed))
        # mag bounds |ref| up to the rounding of narrow rounding points (bfloat16 rounds up by 2**-8 at most)
        assert ref.shape == case.pipe.output.shape and (mag * 1.01 + 1e-12 >= np.abs(ref)).all()


def test_friendly_schedules_use_powers_of_two_and_non_tile_places():
    for seed in range(30):
        case = gen.generate("friendly", seed)
        for st in case.steps:
            if st[0] == "split":
                assert st[3] in gen.POW2
            if st[0] == "tile":
                assert st[4] in gen.POW2 and st[5] in gen.POW2
            if st[0] == "compute_at":
                assert not st[3].endswith("i") or st[3] == "i", st  # not the inner axis of a split


@pytest.mark.slow  # a second: Halide's JIT and Triton's interpreter, on their first case
def test_canonical_blur_at_root_matches_in_both():
    case = _canonical("blur: blur_x at root, tiled and parallel")
    inputs = classify.make_inputs(case.pipe, 0)
    hout, log = halide_side.run(case.pipe, case.steps, inputs)
    assert "blur_x.parallel(io)" in log
    t = tilec_side.TilecRun(case.pipe)
    t.apply(case.steps)
    assert 's[blur_x].bind(io, "program_id.0")' in t.log
    got = tilec_side.run_kernel(t.build(), case.pipe, inputs)
    ref, mag, rel, abs_ = reference.evaluate(case.pipe, inputs)
    assert reference.compare(hout, ref, mag, rel, abs_) is None
    assert reference.compare(got, ref, mag, rel, abs_) is None
    assert reference.compare(got, hout.astype(np.float64), mag, 2 * rel, 2 * abs_) is None


def test_run_case_classifies_a_correct_canonical_case():
    n = next(k for k, c in enumerate(gen.canonical()) if c.name == "normalization: the row sum per row")
    out = classify.run_case("canonical", n)
    assert out["status"] == "correct", classify.show(out)
    assert "s[R].compute_at(s[Y], i)" in out["tilec_log"] and "R.compute_at(Y, i)" in out["halide_log"]


def test_the_classifier_buckets_a_refusal_by_its_reason():
    """Friendly case 4: s1 (at s2.io) reads s0 (at s1.i) at positions its own tiles do not give; the key keeps
    the reason, names and numbers made generic."""
    out = classify.run_case("friendly", 4)
    assert out["status"] == "refused", classify.show(out)
    assert out["key"] == "LoweringError: T reads T[a, a], but T is computed in the same kernel"
    assert "s1 reads s0[i, j], but s0 is computed in the same kernel" in out["message"]


def test_a_fusion_of_a_fixed_axis_with_an_own_one_builds():
    """Friendly case 295 (was refused): s0 at s1.io fuses its row tiles (fixed by the place) with its own column
    tiles; the fused loop runs over the column tiles alone."""
    out = classify.run_case("friendly", 295)
    assert out["status"] == "correct", classify.show(out)


def test_a_window_inside_a_window_builds():
    """Friendly case 66 (was refused): three stencils, each computed in the next one's loops; s0's window is
    taken around s1's rows, which are themselves a window (its values a run of consecutive rows)."""
    out = classify.run_case("friendly", 66)
    assert out["status"] == "correct", classify.show(out)


def test_store_at_over_an_axis_the_target_does_not_loop_over():
    """Friendly case 338 (an internal KeyError in the campaign at 4b25b69): s1 stored at s2.io, computed at
    s2.jo, read shifted along s2's rows, which s2's own place (at s3.jo) gives: no loop of s2 advances them,
    so nothing slides."""
    out = classify.run_case("friendly", 338)
    assert out["status"] == "correct", classify.show(out)


def test_the_halide_blur_builds_and_matches():
    n = next(k for k, c in enumerate(gen.canonical()) if c.name == "blur: blur_x at blur_y's tile")
    out = classify.run_case("canonical", n)
    assert out["status"] == "correct", classify.show(out)


def test_halide_refusals_are_skipped_not_counted():
    pipe = gen._pointwise2()
    case = gen.Case("canonical", 0, pipe, [("compute_at", "f", "g", "nosuchloop")])
    h = halide_side.HalideRun(pipe, classify.make_inputs(pipe, 0))
    with pytest.raises(KeyError):  # a loop the consumer does not have is our generator's bug, not Halide's
        h.apply(case.steps)
    # a parallel reduction loop: Halide refuses it (a race), so the case is halide-refused
    A = gen._inp("A", (6, 5))
    R = gen._t("R", (6,), kind="reduce", src="A", axis=1)
    P = gen.Pipeline([A, R, gen._t("Y", (6,), kind="map", op="affine", src="R", c1=0.5, c2=0.0)])
    h = halide_side.HalideRun(P, classify.make_inputs(P, 0))
    with pytest.raises(hl.HalideError, match="race"):
        h.apply([("parallel", "R", "k")])
        h.realize()


def test_a_fourth_parallel_loop_has_no_tilec_counterpart():
    A = gen._inp("A", (9, 9))
    pipe = gen.Pipeline([A, gen._t("Y", (9, 9), kind="map", op="square", src="A")])
    steps = [("split", "Y", "i", 4), ("split", "Y", "j", 4), ("parallel", "Y", "io"), ("parallel", "Y", "ii"),
             ("parallel", "Y", "jo"), ("parallel", "Y", "ji")]
    t = tilec_side.TilecRun(pipe)
    with pytest.raises(tilec_side.NoCounterpart, match="three dimensions"):
        t.apply(steps)


def test_the_comparison_flags_a_wrong_element():
    pipe = gen._gemm_epilogue(5, 4, 3)
    inputs = classify.make_inputs(pipe, 3)
    ref, mag, rel, abs_ = reference.evaluate(pipe, inputs)
    assert reference.compare(ref.astype(np.float32), ref, mag, rel, abs_) is None
    bad = ref.copy()
    bad[2, 1] += 1e-3 * (1 + abs(bad[2, 1]))
    msg = reference.compare(bad, ref, mag, rel, abs_)
    assert msg is not None and "(2, 1)" in msg


def test_rounding_points_widen_the_bound_to_the_narrow_type():
    pipe = gen._round_stencil(4, 6, to="bfloat16", store=True)
    inputs = classify.make_inputs(pipe, 1)
    ref, mag, rel, _ = reference.evaluate(pipe, inputs)
    assert rel >= gen.NARROW_ULP["bfloat16"]
    unrounded = reference.evaluate(gen._round_stencil(4, 6, to="bfloat16", store=False), inputs)[0]
    assert np.allclose(ref, unrounded)  # stored narrow or a round trip: the same values


def _start_seed() -> int:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return zlib.crc32(head.encode()) % 1_000_000 * 100


@pytest.mark.slow
def test_halide_campaign():
    budget = float(os.environ.get("TILEC_HALIDE_SECONDS", "45"))
    if budget <= 0:
        pytest.skip("TILEC_HALIDE_SECONDS=0")
    seed0 = _start_seed()
    failing = []
    ran = 0
    for mode, share in (("friendly", 0.5), ("random", 0.5)):
        stats, outcomes = classify.campaign(mode, range(seed0, seed0 + 100_000), jobs=1, timeout=60.0,
                                            budget=budget * share)
        print(stats.summary())
        ran += stats.n
        failing += [o for o in outcomes if o["status"] in classify.FAILURES]
    assert ran > 0
    assert not failing, "\n\n".join(
        classify.show(o) + f"\nreproduce: python scripts/halide_diff.py --mode {o['mode']} --case {o['seed']}"
        for o in failing)
