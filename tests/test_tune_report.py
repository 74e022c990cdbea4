"""The tuning report's picture (`tuned.report("x.png")`, tilec/tune/report.py): the data it draws is
checked value by value (each measured config once, labels, the best so far, the chosen configs, the
counts, the per-shape table, importances), and the picture is produced. On a CPU (Triton's
interpreter), with injected timings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import optuna
import pytest

import tilec as tc
from tilec.tune.report import (
    best_so_far,
    config_label,
    importances,
    knob_abbreviations,
    labelled,
    report_data,
    title_text,
)

sys.path.insert(0, str(Path(__file__).parent))
import tune_case  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
FAILING = {"BM": 32, "BN": 32, "BK": 16, "warps": 8}
REPEATED = {"BM": 16, "BN": 16, "BK": 16, "warps": 4}
TOO_BIG = {"BM": 32, "BN": 16, "BK": 32, "warps": 4}  # its A tile (32x32 float32) exceeds shared_limit=2048


def timer(kernel, inputs):
    """us = 10 - 2 (BK=32) + 1.5 (warps=8), + 3 at M=16 for BM=32, - 4 at M=40 for BN=32; FAILING fails."""
    c, m = kernel.config, inputs[0].shape[0]
    if c == FAILING:
        raise RuntimeError("out of resources: shared memory")
    return 1e-6 * (10 - 2 * (c["BK"] == 32) + 1.5 * (c["warps"] == 8) + 3 * (c["BM"] == 32 and m == 16)
                   - 4 * (c["BN"] == 32 and m == 40))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A study with a repeated config (three trials of one), a pruned one, a failed one, then the sampler's."""
    d = tmp_path_factory.mktemp("report")
    storage = f"sqlite:///{d / 'r.db'}"
    st = optuna.create_study(study_name="r", storage=storage)
    for cfg in (REPEATED, REPEATED, TOO_BIG, FAILING, REPEATED):
        st.enqueue_trial(cfg)
    s, args = tune_case.make()
    s.cache_read(args[0], "shared", readers=[s[args[2]]]).compute_at(s[args[2]], s[args[2]].leaves[2])
    t = tc.tune(s, tune_case.MIX, trials=9, args=args, reference=tune_case.reference, storage=storage,
                study_name="r", shared_limit=2048, timer=timer, jobs=0, seed=3)
    return t, d


def test_knob_abbreviations_are_short_and_unique():
    assert knob_abbreviations(["BM", "BN", "BK", "stages", "warps"]) == {
        "BM": "BM", "BN": "BN", "BK": "BK", "stages": "s", "warps": "w"}
    assert knob_abbreviations(["GROUP_M", "FLATTEN", "TMA"]) == {"GROUP_M": "G", "FLATTEN": "F", "TMA": "TMA"}
    assert knob_abbreviations(["stages", "steps", "s"]) == {"stages": "sta", "steps": "ste", "s": "s"}
    assert config_label({"BM": 128, "stages": 3}, {"BM": "BM", "stages": "s"}) == "BM128 s3"


def test_best_so_far_is_the_running_minimum_in_trial_order():
    assert best_so_far([(3, 5.0), (0, 9.0), (5, 7.0), (7, 2.0)]) == [[0, 9.0], [3, 5.0], [5, 5.0], [7, 2.0]]
    assert best_so_far([]) == []


@pytest.mark.slow
def test_the_picture_data_counts_each_config_once(tuned):
    t, _ = tuned
    data = report_data(t)
    trials = t.study.trials
    assert data["counts"]["repeats"] == sum("duplicate_of" in x.user_attrs for x in trials) >= 2
    assert data["counts"]["measured"] == 9
    assert data["counts"]["failed"] == 1 and data["counts"]["pruned"] >= 1
    assert data["counts"]["trials"] == len(trials)
    numbers = [c["number"] for c in data["configs"]]
    assert numbers == sorted(numbers) and 0 in numbers
    assert not {x.number for x in trials if "duplicate_of" in x.user_attrs} & set(numbers)  # repeats: no points
    assert len({json.dumps(c["config"], sort_keys=True) for c in data["configs"]}) == len(numbers) == 8
    first = data["configs"][0]
    assert first["config"] == REPEATED and first["label"] == "BM16 BN16 BK16 w4"
    assert first["times_us"] == {"K=24,M=16,N=20": pytest.approx(10.0), "K=24,M=40,N=20": pytest.approx(10.0)}
    assert first["value_us"] == pytest.approx(10.0)
    repeats = sum(x.user_attrs.get("duplicate_of") == 0 for x in trials)
    assert first["repeats"] == repeats >= 2                             # the label says "(x3)" or more
    assert [f["config"] for f in data["failed"]] == [FAILING] and "out of resources" in data["failed"][0]["reason"]
    assert TOO_BIG in [p["config"] for p in data["pruned"]]
    best, expected = float("inf"), []
    for c in data["configs"]:
        best = min(best, c["value_us"])
        expected.append(pytest.approx([c["number"], best]))
    assert data["best_so_far"] == expected
    assert data["abbreviations"]["warps"] == "w"


def test_the_picture_data_marks_the_chosen_configs(tuned):
    t, _ = tuned
    data = report_data(t)
    chosen = data["chosen"]
    assert chosen["plan"] == t.chosen.name and chosen["T_us"] == pytest.approx(t.chosen.T * 1e6)
    served = {}
    for c in chosen["configs"]:
        cfg = next(x["config"] for x in data["configs"] if x["number"] == c["number"])
        for shape in c["shapes"]:
            served[shape] = cfg
    assert served == t.chosen.configs                                   # every shape's config, marked once
    assert set(labelled(data)) == {c["number"] for c in data["configs"]}  # few configs: every one labelled
    top = data["top"]
    assert [r["value_us"] for r in top] == sorted(r["value_us"] for r in top)
    for col in ("weighted", *data["shapes"]):  # the best of each column is 1.00x
        assert min(r["ratio"][col] for r in top) == pytest.approx(1.0)
    assert data["importances"] is not None and set(data["importances"]) <= {"BM", "BN", "BK", "warps"}
    assert sum(data["importances"].values()) == pytest.approx(1.0)
    title = title_text(data)
    assert "9 configs measured (8 complete, 1 failed)" in title and f"{data['counts']['repeats']} repeats" in title


def test_the_report_png_is_drawn_with_its_json(tuned):
    pytest.importorskip("matplotlib")
    t, d = tuned
    path = Path(t.report(str(d / "report.png")))
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 50_000
    saved = json.loads(path.with_suffix(".json").read_text())
    assert saved["plan"] == t.plan and saved["summary"]["counts"]["measured"] == 9
    assert len(saved["trials"]) == len(t.study.trials)


def test_a_report_of_one_config_says_why_there_are_no_importances(tmp_path):
    pytest.importorskip("matplotlib")
    s, args = tune_case.make()
    t = tc.tune(s, tune_case.MIX, trials=1, args=args, reference=tune_case.reference, jobs=0,
                storage=f"sqlite:///{tmp_path / 'one.db'}", timer=lambda kernel, inputs: 3e-6)
    data = report_data(t)
    assert data["importances"] is None
    assert data["importances_note"] == ("too few measured configs (1) for parameter importances; they need 3 or "
                                        "more")
    assert data["best_so_far"] == [[0, pytest.approx(3.0)]]
    path = Path(t.report(str(tmp_path / "one.png")))
    assert path.read_bytes()[:8] == PNG


def test_importances_need_a_knob_that_varies():
    st = optuna.create_study()
    dist = {"BM": optuna.distributions.CategoricalDistribution([16, 32]),
            "BN": optuna.distributions.CategoricalDistribution([16, 32])}
    for v in (1.0, 2.0, 3.0):
        st.add_trial(optuna.trial.create_trial(params={"BM": 16, "BN": 16}, distributions=dist, value=v))
    imp, note = importances(st, {0, 1, 2})
    assert imp is None and note == "no knob varies among the measured configs: no importances"
