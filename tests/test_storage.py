"""Study files that tilec must not make worse (issue 23): a damaged file, another program's database
with a `studies` table, and a study edited by hand are each one `TilecError` line, from `tc.tune` and
from the CLI, and leave the file byte-identical; `tilec show` writes nothing, not even into an empty
file; a study poisoned by a wrong reference is dropped with `tilec tune --fresh`, `tilec forget` or
`tc.forget`, which say what they removed. Studies are made with optuna directly (no kernel runs) except
in the tests of `--fresh` and `forget`, which tune the tiny GEMM of tune_case.py with a made-up timer."""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import random
import sqlite3
import sys
from pathlib import Path

import optuna
import pytest

import tilec as tc
from tilec.cli import main
from tilec.tune import measure
from tilec.tune.study import study_key

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import tune_case  # noqa: E402

CASE = str(HERE / "tune_case.py")
CLI_MIX = ["--mix", "M=16:3,40:1", "--fixed", "K=24,N=20"]


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def _study_file(p: Path) -> tuple[Path, str]:
    """A study of tune_case.py under its default name, 16 complete trials, written by optuna itself
    (about 30 pages of 4096 bytes)."""
    s, args = tune_case.make()
    name = study_key(s, tune_case.MIX, args)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{p}")
    dists = {n: optuna.distributions.CategoricalDistribution(list(k.choices)) for n, k in s.knobs.items()}
    for i, (bm, bn, bk, w) in enumerate(itertools.product([16, 32], [16, 32], [16, 32], [4, 8])):
        t = 1e-6 * (i + 1)
        study.add_trial(optuna.trial.create_trial(
            params={"BM": bm, "BN": bn, "BK": bk, "warps": w}, distributions=dists, value=t,
            user_attrs={"times": {"K=24,M=16,N=20": t, "K=24,M=40,N=20": t}}))
    return p, name


def _damaged(p: Path) -> Path:
    """`dd if=/dev/urandom of=tuning.db bs=4096 seek=10 count=3 conv=notrunc`: three pages in the middle
    overwritten, SQLite's header intact."""
    _study_file(p)
    with open(p, "r+b") as f:
        f.seek(4096 * 10)
        f.write(random.Random(23).randbytes(3 * 4096))
    return p


def _foreign_studies(p: Path) -> Path:
    """Another program's database, whose table is named `studies` like one of optuna's."""
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE studies (id INTEGER PRIMARY KEY, title TEXT, year INTEGER)")
    con.execute("INSERT INTO studies (title, year) VALUES ('a survey', 1999)")
    con.commit()
    con.close()
    return p


def _edited(p: Path) -> Path:
    """A study whose stored params were edited by hand: BM's value 7 is no index of its choices [16, 32]."""
    _study_file(p)
    con = sqlite3.connect(p)
    con.execute("UPDATE trial_params SET param_value = 7.0 WHERE param_name = 'BM' AND trial_id = 2")
    con.commit()
    con.close()
    return p


def _one_line_error(rc: int, err: str, *parts: str) -> None:
    assert rc == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for part in parts:
        assert part in err, err


# -- 1: a damaged, foreign or hand-edited file is one line, and left as it was -----------------------

@pytest.mark.parametrize("make,says,fix", [
    (_damaged, "is damaged (SQLite's quick_check:", "move it aside"),
    (_foreign_studies, "is the database of something else", "Give a new file"),
    (_edited, "cannot be read", "tilec forget"),
])
@pytest.mark.slow
def test_a_bad_study_file_is_one_tilec_error_and_left_byte_identical(tmp_path, make, says, fix):
    db = make(tmp_path / "tuning.db")
    url = f"sqlite:///{db}"
    before = _digest(db)
    s, args = tune_case.make()
    with pytest.raises(tc.TilecError) as e:
        tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, storage=url, jobs=0,
                progress=False, timer=lambda kernel, inputs: 1e-6)
    message = str(e.value)
    assert "\n" not in message and str(db) in message and says in message and fix in message, message
    assert _digest(db) == before
    for argv in (["tune", CASE, *CLI_MIX, "--trials", 2, "--jobs", 0, "--no-progress", "--storage", url],
                 ["show", "--storage", url],
                 ["show", "--tuned", CASE, *CLI_MIX, "--storage", url]):
        rc, out, err = run(*argv)
        _one_line_error(rc, err, str(db), says, fix)
        assert _digest(db) == before, argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuning.db"]  # no journal left behind either


# -- 2: show only looks -----------------------------------------------------------------------------

def test_show_writes_nothing_not_even_into_an_empty_file(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    rc, out, err = run("show", "--storage", f"sqlite:///{empty}")
    assert rc == 0 and "no studies" in out, err
    rc, out, err = run("show", "--storage", f"sqlite:///{empty}", "--study", "x")
    _one_line_error(rc, err, "no study named x")
    rc, out, err = run("show", "--tuned", CASE, *CLI_MIX, "--storage", f"sqlite:///{empty}")
    _one_line_error(rc, err, "has not been tuned for this mix")
    assert empty.read_bytes() == b""
    db, name = _study_file(tmp_path / "tuning.db")
    before = _digest(db)
    for argv in (["show", "--storage", f"sqlite:///{db}"], ["show", "--storage", f"sqlite:///{db}", "--study", name],
                 ["show", "--tuned", CASE, *CLI_MIX, "--storage", f"sqlite:///{db}"]):
        rc, out, err = run(*argv)
        assert rc == 0 and name in out, err
    assert _digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "tuning.db"]


# -- 3: a study poisoned by a wrong reference is dropped, and the same name tunes again --------------

def _timer(kernel, inputs):
    return 1e-6 * kernel.config["BM"]


def test_tc_forget_drops_a_poisoned_study_and_its_name_tunes_again(tmp_path):
    url = f"sqlite:///{tmp_path / 't.db'}"
    s, args = tune_case.make()
    name = study_key(s, tune_case.MIX, args)
    with pytest.raises(tc.ArgumentError) as e:
        tc.tune(s, tune_case.MIX, trials=2, args=args, reference=lambda a, w: a @ w + 1.0, storage=url, jobs=0,
                progress=False, timer=_timer)
    message = str(e.value)
    assert "every config that ran gave a wrong answer" in message and "new study name" not in message, message
    assert f"tilec forget --storage {url} --study {name}" in message and "--fresh" in message, message
    n = len(optuna.load_study(study_name=name, storage=url).trials)
    gone = tc.forget(s, tune_case.MIX, args=args, storage=url)
    assert (gone.study, gone.storage, gone.n_trials, gone.remaining) == (name, url, n, ())
    assert str(gone) == (f"forgot study {name} in {url}: removed its {n} trials ({n} fail); the storage holds no "
                         f"other study")
    tuned = tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, storage=url, jobs=0,
                    progress=False, timer=_timer)
    assert tuned.study.study_name == name and all(t.state.name == "COMPLETE" for t in tuned.study.trials)
    rc, out, err = run("show", "--tuned", CASE, *CLI_MIX, "--storage", url)
    assert rc == 0 and f"study:   {name}" in out and "best generic config" in out, err
    with pytest.raises(tc.ArgumentError, match=rf"forget: no study nope in {url} \(its studies: {name}\); nothing "
                                               rf"was removed"):
        tc.forget(storage=url, study_name="nope")
    with pytest.raises(tc.ArgumentError, match=r"forget: no study nope in sqlite:///.*none.db \(the file does not "
                                               r"exist\); nothing was removed"):
        tc.forget(storage=f"sqlite:///{tmp_path / 'none.db'}", study_name="nope")
    assert not (tmp_path / "none.db").exists()


@pytest.mark.slow
def test_tune_fresh_and_tilec_forget_say_what_they_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "default_timer", _timer)
    monkeypatch.setattr(sys, "path", list(sys.path))
    text = Path(CASE).read_text()
    right = "def reference(a, w):\n    return a @ w\n"
    assert right in text
    case = tmp_path / "case.py"
    case.write_text(text.replace(right, "def reference(a, w):\n    return a @ w + 1.0\n"))
    url = f"sqlite:///{tmp_path / 't.db'}"
    s, args = tune_case.make()
    name = study_key(s, tune_case.MIX, args)
    tune = ["tune", case, *CLI_MIX, "--trials", 2, "--jobs", 0, "--no-progress", "--storage", url]
    rc, out, err = run(*tune)
    _one_line_error(rc, err, "every config that ran gave a wrong answer", f"tilec tune {case} --fresh",
                    f"tilec forget --storage {url} --study {name}")
    case.write_text(text)  # the reference fixed: the study still holds its wrong answers
    rc, out, err = run(*tune)
    _one_line_error(rc, err, "every config that ran gave a wrong answer")
    n = len(optuna.load_study(study_name=name, storage=url).trials)
    rc, out, err = run(*tune, "--fresh")
    assert rc == 0, err
    assert (f"fresh: forgot study {name} in {url}: removed its {n} trials ({n} fail); the storage holds no other "
            f"study") in out
    assert "chosen: " in out and f"study:   {name}" in out
    rc, out, err = run("show", "--tuned", case, *CLI_MIX, "--storage", url)
    assert rc == 0 and f"study:   {name}" in out, err
    rc, out, err = run("tune", case, *CLI_MIX, "--trials", 1, "--jobs", 0, "--no-progress", "--storage",
                       f"sqlite:///{tmp_path / 'new.db'}", "--fresh")
    assert rc == 0 and f"fresh: no study {name} in sqlite:///{tmp_path / 'new.db'} yet; nothing to forget" in out, err
    m = len(optuna.load_study(study_name=name, storage=url).trials)
    rc, out, err = run("forget", case, *CLI_MIX, "--storage", url)
    assert rc == 0 and out == (f"forgot study {name} in {url}: removed its {m} trials ({m} complete); the storage "
                               f"holds no other study\n"), err
    rc, out, err = run("forget", case, *CLI_MIX, "--storage", url)
    _one_line_error(rc, err, f"forget: no study {name} in {url} (its studies: none); nothing was removed")
    rc, out, err = run("forget", "--study", "nope", "--storage", url)
    _one_line_error(rc, err, f"forget: no study nope in {url}")
    rc, out, err = run(*tune, "--fresh", "--worker")
    _one_line_error(rc, err, "--fresh", "tilec forget")


def _killed_mid_write(p: Path) -> Path:
    """`p` as a writer killed in the middle of a transaction leaves it: its changes spilled into the file,
    the original pages in `p-journal` beside it (a hot journal), which the next writer rolls back."""
    import os
    import signal
    import subprocess

    code = ("import os, sqlite3, sys\ncon = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "con.execute('PRAGMA cache_size=5'); con.execute('BEGIN IMMEDIATE')\n"
            "con.execute(\"UPDATE studies SET study_name = study_name || 'x'\")\n"
            "for i in range(3000):\n    con.execute('INSERT INTO study_user_attributes (study_id, key, value_json) "
            "VALUES (1, ?, ?)', (f'k{i}', 'x' * 200))\n"
            "print('ready', flush=True)\nimport time; time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(p)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    journal = Path(f"{p}-journal")
    assert journal.exists() and journal.stat().st_size > 0
    return journal


def test_a_write_cut_off_is_not_called_damaged_and_the_next_tune_rolls_it_back(tmp_path):
    """A study file whose writer was killed mid-transaction (a hot journal beside it) was called damaged, with
    advice to move it aside, which would have kept the half-written changes and lost the journal (a review's
    find). `show` says so and leaves both files; the check a tune runs rolls the write back, as SQLite does."""
    p, name = _study_file(tmp_path / "s.db")
    journal = _killed_mid_write(p)
    before, jbefore = _digest(p), _digest(journal)
    rc, out, err = run("show", "--storage", f"sqlite:///{p}")
    assert rc == 2 and "damaged" not in err and "mv " not in err, err
    assert "unfinished write of a process that stopped" in err and "s.db-journal" in err, err
    assert _digest(p) == before and _digest(journal) == jbefore
    from tilec.tune.storage import check_storage
    assert check_storage(f"sqlite:///{p}")  # a writer's check: SQLite rolls the cut-off write back
    assert not journal.exists() or journal.stat().st_size == 0
    assert optuna.get_all_study_names(f"sqlite:///{p}") == [name]  # as it was before the write
    rc, out, err = run("show", "--storage", f"sqlite:///{p}")
    assert rc == 0 and name in out, err


def test_a_study_file_of_an_older_optuna_is_not_called_another_programs(tmp_path):
    """A study file written by an older optuna (fewer columns, an older alembic version) was refused as
    "the database of something else" (a review's find); optuna's own version check speaks instead, and
    the file is left as it was."""
    p, _ = _study_file(tmp_path / "old.db")
    con = sqlite3.connect(p)
    con.execute("ALTER TABLE trial_intermediate_values DROP COLUMN intermediate_value_type")
    con.execute("UPDATE alembic_version SET version_num = 'v2.6.0.a'")
    con.commit()
    con.close()
    before = _digest(p)
    rc, out, err = run("show", "--storage", f"sqlite:///{p}")
    assert rc == 2 and "something else" not in err and "upgrade" in err, err
    assert _digest(p) == before


def test_show_reads_a_path_with_hash_and_percent_signs_and_writes_nothing(tmp_path):
    """A `#` (or `%`) in the storage's path made `tilec show` open another file read-write, creating it
    (SQLAlchemy decoded the path of its read-only URL before SQLite read it; a review's find)."""
    made, name = _study_file(tmp_path / "t.db")  # (optuna itself cannot open such a path to write it)
    d = tmp_path / "a#b%c"  # in the URL, % is written %25 (SQLAlchemy decodes %XX in a URL's path)
    d.mkdir()
    p = made.rename(d / "t.db")
    before = sorted(x.name for x in tmp_path.rglob("*"))
    digest = _digest(p)
    rc, out, err = run("show", "--storage", f"sqlite:///{str(p).replace('%', '%25')}")
    assert rc == 0 and name in out, err
    assert sorted(x.name for x in tmp_path.rglob("*")) == before and _digest(p) == digest


def test_a_study_file_locked_by_another_process_is_said_to_be_locked(tmp_path, monkeypatch):
    """A file another process holds locked past the wait was called damaged, with advice to move it aside
    (a review's find): it is said to be locked, and left as it was."""
    from tilec.tune import storage

    p, _ = _study_file(tmp_path / "l.db")
    monkeypatch.setattr(storage, "SQLITE_BUSY_TIMEOUT", 0.2)
    holder = sqlite3.connect(p, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(tc.ArgumentError, match=r"l\.db is locked by another process \(sqlite: database is "
                                                   r"locked\) for more than 0 s; tilec leaves it untouched"):
            storage.check_storage(f"sqlite:///{p}")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
