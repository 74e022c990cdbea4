"""tc.tune's progress bar says how long the rest will take and, in Triton's interpreter, that its times
say nothing about a GPU (issue 23, point 9: the H200 mix run on a CPU showed 0/64 configs after 90 s and
said nothing). The estimate is tested on a fake clock; the bar once, on a real tuning run."""

import re
import sys
from pathlib import Path

import tilec as tc
from tilec.runtime import triton_compat
from tilec.tune import progress
from tilec.tune import study as study_mod

sys.path.insert(0, str(Path(__file__).parent))
import tune_case  # noqa: E402


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_estimate_says_nothing_before_the_first_config_then_the_rest_at_the_measured_rate():
    clock = FakeClock()
    est = progress.Estimate(total=64, done=0, clock=clock)
    clock.now += 60
    assert est.text(0) == ""  # no config measured yet: no rate to speak of
    assert est.text(1) == "~63 min left at 60 s/config"  # the first config after 60 s: 63 left
    clock.now += 60  # two more in 60 s (parallel workers): 40 s a config, 61 left
    assert est.text(3) == "~41 min left at 40 s/config"
    clock.now = 1000.0 + 64 * 40
    assert est.text(64) == ""  # nothing left


def test_estimate_of_a_resumed_study_counts_only_this_runs_configs():
    clock = FakeClock()
    est = progress.Estimate(total=24, done=20, clock=clock)  # 20 measured by an earlier run
    clock.now += 5
    assert est.text(20) == ""
    assert est.text(21) == "~15 s left at 5.0 s/config"


def test_durations_read_as_a_person_reads_them():
    assert [progress.duration_text(s) for s in (0.314, 4.23, 45.4, 99, 100, 12 * 60 + 10, 99 * 60, 3.5 * 3600)] == [
        "0.31 s", "4.2 s", "45 s", "99 s", "2 min", "12 min", "99 min", "3.5 h"]


def test_interpreter_note_only_in_the_interpreter():
    assert progress.interpreter_note("cuda") is None
    note = progress.interpreter_note("interpreter")
    assert "interpreter" in note and "say nothing about GPU speed" in note


def test_the_bar_shows_the_estimate_and_the_interpreter_note_once(tmp_path, monkeypatch, capsys):
    """A run of 3 configs: after each of the first two, the time the rest will take; tqdm's own
    `<remaining, rate` is not shown beside it. In the interpreter, the note is printed once."""
    monkeypatch.setattr(study_mod, "_stderr_is_terminal", lambda: True)
    s, args = tune_case.make()
    tc.tune(s, tune_case.MIX, trials=3, args=args, reference=tune_case.reference, jobs=0,
            storage=f"sqlite:///{tmp_path / 'e.db'}", timer=lambda kernel, inputs: 12.5e-6)
    err = capsys.readouterr().err
    states = err.replace("\r", "\n").splitlines()
    assert any(re.search(r"\| 1/3 \[.*, ~\S+ (s|min|h) left at \S+ (s|min|h)/config\]", line) for line in states), err
    assert any(re.search(r"\| 2/3 \[.*, ~\S+ (s|min|h) left at \S+ (s|min|h)/config\]", line) for line in states), err
    assert not any(re.search(r"\ds/config|config/s|<", line) for line in states), err  # tqdm's: gone
    assert not any("left at" in line for line in states if "3/3" in line), err
    note = progress.INTERPRETER_NOTE
    assert err.count(note) == (1 if triton_compat.target() == "interpreter" else 0), err


def test_without_a_bar_the_interpreter_note_is_still_said_once_unless_asked_for_quiet(tmp_path, monkeypatch, capsys):
    """Off a terminal (a log, CI, a pipe) there is no bar, but a CPU run still says once that its times say
    nothing about a GPU; progress=False (`--no-progress`) is silence."""
    monkeypatch.setattr(study_mod, "_stderr_is_terminal", lambda: False)
    s, args = tune_case.make()
    note = progress.INTERPRETER_NOTE
    for prog, want in ((None, 1), (False, 0)):
        tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, jobs=0, progress=prog,
                storage=f"sqlite:///{tmp_path / f'q{want}.db'}", timer=lambda kernel, inputs: 12.5e-6)
        err = capsys.readouterr().err
        assert err.count(note) == (want if triton_compat.target() == "interpreter" else 0), (prog, err)
        assert "left at" not in err
