"""The `tilec` command line: tune, show, lower, worker mode and user errors, on a tiny GEMM file
written into a temporary directory (Triton's interpreter on a CPU; injected timings)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import tilec as tc
from tilec.cli import UserError, main
from tilec.tune import measure
from tilec.tune import study as study_mod
from tilec.tune.trials import fmt_time, measured_itself

REPO = Path(__file__).parent.parent

CASE = '''"""A tiny float32 GEMM with knobs, written by tests/test_cli.py."""
import cli_case_helpers  # a sibling module: the file's directory is on sys.path

import tilec as tc


def make():
    M, N, K = tc.size_vars("M N K")
    A = tc.placeholder((M, K), "float32", name="A")
    W = tc.placeholder((K, N), "float32", name="W")
    k = tc.reduce_axis(K, name="k")
    C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
    s = tc.create_schedule(C)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [16, 32]), tc.knob("BN", [16, 64]))
    ko, ki = s[C].split(k, tc.knob("BK", [16, 32]))
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    return s, [A, W, C]


reference = cli_case_helpers.matmul
'''

MIX = ["--mix", "M=16:3,40:1", "--fixed", "K=24,N=20"]


def fake_timer(kernel, inputs):
    """BM=16 suits M=16, BM=32 suits M=40, BK=32 saves 1 us; BM=32 with BK=32 runs out of resources."""
    cfg, m = kernel.config, inputs[0].shape[0]
    if cfg["BM"] == 32 and cfg["BK"] == 32:
        raise RuntimeError("out of resources: shared memory")
    us = {(16, 16): 5, (16, 40): 20, (32, 16): 8, (32, 40): 10}[(cfg["BM"], m)] - (cfg["BK"] == 32)
    return us * 1e-6


def write_case(d: Path) -> Path:
    (d / "cli_case_helpers.py").write_text("def matmul(a, w):\n    return a @ w\n")
    f = d / "gemm_case.py"
    f.write_text(CASE)
    return f


def run(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One `tilec tune` run shared by the tests that read its study."""
    d = tmp_path_factory.mktemp("cli")
    case = write_case(d)
    url = f"sqlite:///{d / 'study.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measure, "default_timer", fake_timer)
        mp.setattr(sys, "path", list(sys.path))
        mp.setattr(study_mod, "_stderr_is_terminal", lambda: True)  # as a person at a terminal sees it
        rc, out, err = run(["tune", case, *MIX, "--trials", 12, "--storage", url, "--report", d / "r.json"])
    assert rc == 0, err
    name = out.split("study:")[-1].split()[0]
    return {"dir": d, "case": case, "url": url, "out": out, "err": err, "name": name}


def test_tune_prints_trials_plan_and_study(tuned):
    out = tuned["out"]
    assert "measured:" in tuned["err"] and "| 4/12 [" in tuned["err"]  # tilec's progress bar, on a terminal: the
    # configs measured of --trials (the space has only 4 that can be measured)
    assert "best 7.75 us (#" in tuned["err"] and "Best value" not in tuned["err"]  # in microseconds, not optuna's s
    assert tuned["name"].startswith("tilec-")
    for state in ("COMPLETE", "PRUNED", "FAIL"):
        assert state in out
    assert "tile BN=64 exceeds every shape's extent" in out          # pruned before compiling
    assert "out of resources" in out                                  # a failed candidate, with its reason
    assert "plans for 1,000,000 expected calls" in out and "chosen: per-shape" in out
    assert f"storage: {tuned['url']}" in out
    assert f"tilec show --storage {tuned['url']} --study {tuned['name']}" in out
    report = json.loads((tuned["dir"] / "r.json").read_text())
    assert report["plan"] in out and len(report["trials"]) >= 8


def _rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "state"])
    rows = []
    for line in lines[start + 1:]:
        if not line.strip() or not line.split()[0].isdigit():
            break
        rows.append(line.split())
    return rows


def test_tune_says_when_the_space_has_fewer_configs_than_trials(tuned):
    """--trials 12 on a space of 8 configs, 4 of them pruned: 4 are measured (one fails), and it says why."""
    assert "12 configs to measure" in tuned["out"]
    assert ("note: measured 4 configs, fewer than trials=12: the space has only 4 that can be measured (8 in all, 4 "
            "pruned before compiling), and every one has been tried") in tuned["out"]
    study = optuna.load_study(study_name=tuned["name"], storage=tuned["url"])
    assert sum(measured_itself(t) for t in study.trials) == 4
    assert "; 4 configs measured" in tuned["out"]


def test_times_people_read_are_in_microseconds(tuned):
    assert [fmt_time(x) for x in (7.75e-6, 5.514e-3, 1.5, None)] == ["7.75 us", "5,514.0 us", "1,500,000.0 us", "-"]
    rc, out, _ = run(["show", "--storage", tuned["url"], "--study", tuned["name"]])
    rows = _rows(out)
    assert rows and all(r[6] == "us" for r in rows if r[1] == "COMPLETE")  # weighted: "7.75 us"
    assert " ms" not in out and " ms" not in tuned["out"]
    assert "us per call, weighted over the mix" in out
    rc, listing, _ = run(["show", "--storage", tuned["url"]])
    assert rc == 0 and "best 7.75 us" in listing


def test_show_lists_trials_best_first(tuned):
    rc, out, _ = run(["show", "--storage", tuned["url"], "--study", tuned["name"]])
    assert rc == 0
    rows = _rows(out)
    study = optuna.load_study(study_name=tuned["name"], storage=tuned["url"])
    assert len(rows) == len(study.trials)
    states = [r[1] for r in rows]
    assert states == sorted(states, key=["COMPLETE", "FAIL", "PRUNED"].index)
    complete = sorted((t for t in study.trials if t.state.name == "COMPLETE"), key=lambda t: (t.value, t.number))
    assert [int(r[0]) for r in rows[: len(complete)]] == [t.number for t in complete]
    assert rows[0][2:5] == ["16", "16", "32"]                          # BM BN BK of the best generic config
    assert rows[0][5:9] == ["7.75", "us", "4.00", "us"] and "K=24,M=16,N=20" in out  # weighted, per-shape
    assert "pruned: tile BN=64" in out and "failed: fails at" in out
    assert "best generic config: BM=16,BN=16,BK=32" in out


def test_show_tuned_finds_the_same_study_and_prints_source(tuned):
    rc, out, _ = run(["show", "--tuned", tuned["case"], *MIX, "--storage", tuned["url"]])
    assert rc == 0
    assert f"study:   {tuned['name']}" in out
    assert "# Triton source for K=24,M=16,N=20" in out and "@triton.jit" in out
    assert "config: BK=32, BM=16, BN=16" in out                         # the best config's kernel
    rc, out2, _ = run(["show", "--storage", tuned["url"], "--study", tuned["name"], "--file", tuned["case"]])
    assert rc == 0 and "@triton.jit" in out2
    rc, listing, _ = run(["show", "--storage", tuned["url"]])          # no study named: list them
    assert rc == 0 and tuned["name"] in listing
    assert f"show one: tilec show --storage {tuned['url']} --study NAME" in listing
    # a mix this file was never tuned for: say so, and what to run (not only the hash tilec made up)
    rc, _, err = run(["show", "--tuned", tuned["case"], "--mix", "M=8:1", "--fixed", "K=24,N=20", "--storage",
                      tuned["url"]])
    assert rc == 2 and err.startswith(f"error: {tuned['case']} has not been tuned for this mix in this storage; "
                                      f'tune it first: tilec tune {tuned["case"]} --mix "M=8:1" --fixed "K=24,N=20" '
                                      f"--storage {tuned['url']} (no study tilec-"), err


def test_show_lists_waiting_trials_with_their_config(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.db'}"
    optuna.create_study(study_name="q", storage=url).enqueue_trial({"BM": 32, "BN": 16},
                                                                   user_attrs={"seed": "cost model"})
    rc, out, _ = run(["show", "--storage", url, "--study", "q"])
    assert rc == 0 and "no trial completed yet" in out
    assert _rows(out)[0][:4] == ["0", "WAITING", "32", "16"]


def test_worker_only_adds_trials(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "default_timer", fake_timer)
    monkeypatch.setattr(sys, "path", list(sys.path))
    case, url = write_case(tmp_path), f"sqlite:///{tmp_path / 'w.db'}"
    rc, out, err = run(["tune", case, *MIX, "--trials", 3, "--storage", url, "--worker", "--study", "shared",
                        "--no-progress"])
    assert rc == 0 and err == "", err
    assert f"study shared in {url} now has " in out and "; 3 configs measured" in out
    assert "plans for" not in out
    rc, out, _ = run(["tune", case, *MIX, "--trials", 5, "--storage", url, "--worker", "--study", "shared"])
    # the space has 8 configs, 4 of them pruned (BN=64 is wider than every shape): 4 can be measured, not 5
    assert rc == 0 and "; 4 configs measured" in out
    assert ("note: measured 4 configs, fewer than trials=5: the space has only 4 that can be measured (8 in all, "
            "4 pruned before compiling)") in out
    trials = optuna.load_study(study_name="shared", storage=url).trials
    assert sum(measured_itself(t) for t in trials) == 4


def test_lower_prints_the_nest_and_the_source(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    case = write_case(tmp_path)
    rc, out, _ = run(["lower", case, "--config", "BM=32,BK=32"])
    assert rc == 0
    assert "# loop nest (BM=32,BN=16,BK=32)" in out
    assert "kernel C_kernel" in out and "for ko in [0, cdiv(K, 32))" in out
    assert "# Triton source" in out and "@triton.jit" in out and "config: BK=32, BM=32, BN=16" in out


@pytest.mark.parametrize("argv,message", [
    (["tune", "{case}", "--mix", "M=abc", "--fixed", "K=24,N=20"], "bad --mix 'M=abc'"),
    (["tune", "{case}", "--mix", "M=16:0", "--fixed", "K=24,N=20"], "weight must be a positive number"),
    (["tune", "{case}", "--mix", "M=16"], "does not give size K, N"),
    (["tune", "{case}", "--mix", "M=16", "--fixed", "K=24,N=20,Q=3"], "the mix gives size Q, which"),
    (["tune", "{dir}/missing.py", *MIX], "no such file"),
    (["tune", "{dir}/cli_case_helpers.py", *MIX], "defines no make()"),
    (["lower", "{case}", "--config", "BM=48"], "not one of the choices of knob 'BM'"),
    (["lower", "{case}", "--config", "BM"], "bad --config"),
    (["show", "--storage", "sqlite:///{dir}/none.db", "--study", "nope"], "no study named nope"),
    (["tune", "{case}"], "one of the arguments --mix --mix-from is required"),
])
def test_user_errors_exit_2_with_one_line(tmp_path, monkeypatch, argv, message):
    monkeypatch.setattr(sys, "path", list(sys.path))
    case = write_case(tmp_path)
    rc, out, err = run([a.format(case=case, dir=tmp_path) for a in argv])
    assert rc == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err


def test_traceback_flag_raises_instead(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        run(["tune", tmp_path / "missing.py", *MIX, "--traceback"])


@pytest.mark.slow
def test_python_m_tilec_cli(tmp_path):
    case = write_case(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-m", "tilec.cli", "lower", str(case), "--config", "BN=16"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "kernel C_kernel" in p.stdout and "@triton.jit" in p.stdout
    p = subprocess.run([sys.executable, "-m", "tilec.cli", "tune", str(tmp_path / "gone.py"), *MIX],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    assert p.stderr.startswith("error: no such file") and "Traceback" not in p.stderr


@pytest.mark.slow
def test_a_reader_that_closes_stdout_early_ends_the_command_quietly(tmp_path):
    """`tilec lower FILE | head -3`: the reader is gone before the output is written; the command ends
    with status 141 (as if killed by SIGPIPE) and no BrokenPipeError traceback. `--version` prints
    through argparse, which ignores the failed write itself and exits 0 (or the last flush fails: 141)."""
    case = write_case(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    for argv in (["lower", str(case)], ["--version"]):
        read, write = os.pipe()
        os.close(read)  # the reader has gone before the first line is written
        try:
            p = subprocess.run([sys.executable, "-m", "tilec", *argv], stdout=write, stderr=subprocess.PIPE,
                               text=True, env=env, timeout=120)
        finally:
            os.close(write)
        ok = p.returncode == 141 if argv[0] == "lower" else p.returncode in (0, 141)
        assert ok, (p.returncode, p.stderr)
        assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr


def test_a_broken_pipe_that_is_not_stdout_is_not_swallowed(tmp_path):
    """Only a closed stdout ends the command quietly: a BrokenPipeError of another pipe, with stdout
    open, is an error with its traceback."""
    script = ("import sys\nimport tilec.cli as cli\n"
              "def boom(a):\n    raise BrokenPipeError(32, 'Broken pipe (a worker)')\n"
              "cli.cmd_lower = boom\nsys.exit(cli.main(['lower', 'x.py']))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert p.returncode == 1 and "BrokenPipeError: [Errno 32] Broken pipe (a worker)" in p.stderr, p.stderr


def test_version_and_python_m_tilec(capsys):
    """`tilec --version` names tilec's version and the Triton and torch it runs with; `python -m tilec`
    is the same command."""
    import importlib.metadata

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tilec {tc.__version__} (triton {importlib.metadata.version('triton')}, torch ")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-m", "tilec", "--version"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0 and p.stdout == out, p.stderr
    p = subprocess.run([sys.executable, "-m", "tilec"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "required: command" in p.stderr


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["tune", "--help"], ["show", "--help"],
                                  ["tune"], ["tune", "x.py", "--mix", "M=1:1", "--trials", "0"], ["nosuch"]])
def test_help_version_and_argument_errors_import_nothing_heavy(argv):
    """`tilec --help` took 1.9 s of CPU importing torch, Triton and optuna (issue 23 point 4): --help,
    --version and argument errors import none of them (benchmarks/cli_time.py times it)."""
    code = ("import sys\nfrom tilec.cli import main\ntry:\n    rc = main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    rc = e.code\nheavy = sorted(m for m in ('torch', 'triton', 'optuna', 'islpy', 'networkx', 'numpy')"
            " if m in sys.modules)\nprint('HEAVY', heavy, 'RC', rc, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("HEAVY [] RC "), proc.stderr
    assert last.endswith("RC 0") == (argv[-1] in ("--help", "--version")), proc.stderr
    if argv[-1] not in ("--help", "--version"):
        assert proc.stderr.startswith("error: "), proc.stderr  # one line, as before


def test_no_progress_bar_off_a_terminal_or_with_no_progress(tmp_path, monkeypatch):
    """Where stderr is no terminal (a log, CI), or with --no-progress, `tilec tune` shows no progress bar."""
    case = write_case(tmp_path)
    monkeypatch.setattr(measure, "default_timer", fake_timer)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for terminal, flags in ((False, []), (True, ["--no-progress"])):
        monkeypatch.setattr(study_mod, "_stderr_is_terminal", lambda terminal=terminal: terminal)
        rc, out, err = run(["tune", case, *MIX, "--trials", 2, "--storage", f"sqlite:///{tmp_path / 'q.db'}",
                            *flags])
        assert rc == 0 and "chosen: " in out, err
        assert "it/s" not in err and "Best trial" not in err


TRITON_FIRST = '"""The CLI case, importing triton before tilec does (as a file with kernels of its own would)."""\nimport triton  # noqa: F401\n'


@pytest.mark.slow
def test_tune_show_and_draw_need_no_triton_interpret_on_a_cpu(tmp_path):
    """Without a GPU, tilec sets TRITON_INTERPRET=1 itself before the file is imported: a file that imports
    triton at its top failed `tilec tune` ("needs TRITON_INTERPRET=1 before triton is imported"). tc.tune
    from a script needs no variable either."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("on a GPU host kernels run compiled; the interpreter is for machines without one")
    write_case(tmp_path)
    case = tmp_path / "triton_first.py"
    case.write_text(TRITON_FIRST + CASE.split('"""\n', 2)[-1])
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    url = f"sqlite:///{tmp_path / 'i.db'}"

    def cli(*argv):
        p = subprocess.run([sys.executable, "-m", "tilec.cli", *map(str, argv)], capture_output=True, text=True,
                           env=env, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return p.stdout
    out = cli("tune", case, *MIX, "--trials", 2, "--storage", url, "--no-progress", "--jobs", 1, "--expected-calls", 10)
    assert "chosen: " in out and "2 configs measured" in out
    out = cli("show", "--tuned", case, *MIX, "--storage", url)
    assert "@triton.jit" in out and "best generic config" in out
    out = cli("draw", case, "--png", tmp_path / "s.png")
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    script = (f"import sys; sys.path.insert(0, {str(tmp_path)!r})\nimport gemm_case, tilec as tc\n"
              f"s, args = gemm_case.make()\n"
              f"t = tc.tune(s, tc.ShapeMix.parse('M=16:3,40:1', 'K=24,N=20'), trials=1, args=args, jobs=1,\n"
              f"            reference=gemm_case.reference, storage={url!r}, study_name='py', progress=False)\n"
              f"print('chosen', t.chosen.name)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                       cwd=tmp_path)
    assert p.returncode == 0 and "chosen " in p.stdout, p.stderr[-2000:]


def test_draw_writes_the_stage_graph_and_the_loop_nest(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    case = write_case(tmp_path)
    png = tmp_path / "schedule.png"
    rc, out, err = run(["draw", case, "--png", png, "--config", "BM=32"])
    assert rc == 0, err
    assert f"drew the stage graph and loop nest of {case} (BM=32,BN=16,BK=16) into {png}" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_draw_graph_data_says_where_each_stage_runs():
    """The data behind the picture: stages, caches, placements, kernels and how each value travels."""
    from tilec.draw import layers, schedule_graph
    from tilec.tune.userfile import load_file, make_schedule
    s, _ = make_schedule(load_file(str(REPO / "examples" / "matmul_silu.py")), "matmul_silu.py")
    g = schedule_graph(s)
    assert set(g.nodes) == {"A", "W", "C", "Y", "A_shared", "W_shared", "C_local"}
    assert {n: g.nodes[n]["placement"] for n in ("C", "Y", "A_shared", "C_local")} == {
        "C": "root", "Y": "at C.jo", "A_shared": "at C.ko", "C_local": "at C.jo"}
    assert {g.nodes[n]["kernel"] for n in ("C", "Y", "A_shared", "C_local")} == {"Y_kernel"}
    assert g.nodes["A"]["kind"] == "input" and g.nodes["A_shared"]["kind"] == "cache_read"
    assert not g.has_edge("A", "C")                                     # A's tiles reach C through A_shared
    assert g.edges["A", "A_shared"]["how"] == "tiles loaded at C.ko"
    assert g.edges["A_shared", "C"]["how"] == "reads the tiles"
    assert g.edges["C", "Y"]["how"] == "Y at C.jo"
    assert layers(g)["A"] == 0 and layers(g)["A_shared"] == 1 and layers(g)["C"] == 2
    # an inlined stage, and a consumer in another kernel
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    A = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="A")
    B = tc.compute((M, N), lambda i, j: A[i, j] + 1.0, name="B")
    k = tc.reduce_axis(N, name="k")
    B3 = tc.compute((M, N), lambda i, j: B[i, j] * 3.0, name="B3")
    R = tc.compute((M,), lambda i: tc.sum(B3[i, k], axis=k), name="R")
    s = tc.create_schedule(R)
    s[A].compute_inline()
    s[B3].compute_inline()
    g = schedule_graph(s)
    assert g.nodes["A"]["placement"] == "inline" and g.nodes["A"]["kernel"] is None
    assert g.edges["A", "B"]["how"] == "inlined" and g.edges["X", "A"]["how"] == "read from memory"
    assert g.edges["B", "B3"]["how"] == "read by the inlined B3" and g.edges["B3", "R"]["how"] == "inlined"
    assert "B" in tc.lower(s).plan.stored and g.nodes["B"]["label"] == "B\nroot of B_kernel\n(stored)"
    assert (g.nodes["B"]["kernel"], g.nodes["R"]["kernel"]) == ("B_kernel", "R_kernel")


@pytest.mark.parametrize("argv,message", [
    (["draw", "{case}", "--png", "{dir}/s.jpg"], "draw: '{dir}/s.jpg' is not a .png path; give e.g. schedule.png"),
    (["draw", "{case}"], "required: --png"),
    (["draw", "{case}", "--png", "{dir}/s.png", "--config", "BM=48"], "not one of the choices of knob 'BM'"),
])
def test_draw_errors_exit_2_with_one_line(tmp_path, monkeypatch, argv, message):
    monkeypatch.setattr(sys, "path", list(sys.path))
    case = write_case(tmp_path)
    rc, out, err = run([a.format(case=case, dir=tmp_path) for a in argv])
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert message.format(dir=tmp_path) in err


def test_tune_refuses_a_cost_model_it_does_not_have(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    case = write_case(tmp_path)
    rc, out, err = run(["tune", case, *MIX, "--cost-model", "xgboost"])
    assert rc == 2 and "--cost-model: invalid choice: 'xgboost' (choose from" in err, err  # quoting: Python's
    assert "learned" in err and "analytic" in err and err.count("\n") == 1


def test_tune_auto_emits_the_tuned_schedule_as_code(tmp_path):
    """`tilec tune FILE --auto --emit-schedule PATH`: the file's outputs scheduled by tc.auto_schedule (its knobs,
    not the file's BM/BN/BK), tuned, and the most-called shape's config written as code that, run after
    `outputs = [C]`, makes the schedule again (one tl.dot kernel)."""
    case = write_case(tmp_path)
    emitted = tmp_path / "sched.py"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "path", list(sys.path))
        rc, out, err = run(["tune", case, *MIX, "--trials", 3, "--storage", f"sqlite:///{tmp_path / 'a.db'}",
                            "--auto", "--emit-schedule", emitted, "--no-progress", "--cost-model", "analytic"])
    assert rc == 0, err
    assert f"schedule code: {emitted}" in out
    code = emitted.read_text()
    assert code.startswith("# the tuned schedule of") and 'C_BK = tc.knob("C_BK"' in code and '"BM"' not in code
    import importlib.util
    spec = importlib.util.spec_from_file_location("gemm_case_auto", case)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(tmp_path))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(tmp_path))
    s0, _ = mod.make()
    ns = {"tc": tc, "outputs": list(s0.outputs)}
    exec(compile(code, str(emitted), "exec"), ns)
    assert tc.lower(ns["s"]).source().count("tl.dot(") == 1


def test_tune_takes_a_recorded_mix_and_saves_the_plan(tmp_path):
    """`tilec tune FILE --mix-from REC --save PLAN` (issue 28): the mix is the calls a run recorded (tc.record,
    rec.save), the tuned plan a file that tc.load serves. A recording of several kernels needs --kernel."""
    case = write_case(tmp_path)
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"format": "tilec-recording", "version": 1, "kernels": {
        "C": [[{"K": 24, "M": 16, "N": 20}, 3], [{"K": 24, "M": 40, "N": 20}, 1]],
        "tilec::other": [[{"M": 2}, 1]]}}))
    plan = tmp_path / "plan.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measure, "default_timer", fake_timer)
        mp.setattr(sys, "path", list(sys.path))
        rc, out, err = run(["tune", case, "--mix-from", rec, "--trials", 4, "--storage",
                            f"sqlite:///{tmp_path / 'r.db'}", "--save", plan, "--no-progress"])
        assert rc == 0, err
        assert "K=24,M=16,N=20: 0.750" in out and f"plan: {plan}" in out
        saved = json.loads(plan.read_text())
        assert saved["format"] == "tilec-plan" and set(saved["configs"]) == {"K=24,M=16,N=20", "K=24,M=40,N=20"}
        rc, out, err = run(["tune", case, "--mix-from", rec, "--kernel", "other", "--no-progress"])
        assert rc == 2 and "M=2" not in out and "error:" in err, err
        rc, out, err = run(["tune", case, "--mix-from", rec, "--fixed", "K=24"])
        assert rc == 2 and "--fixed goes with --mix" in err
        rc, out, err = run(["tune", case, *MIX, "--kernel", "C"])
        assert rc == 2 and "--kernel needs --mix-from" in err
        two = json.loads(rec.read_text())  # two kernels of outputs C (C, C#2): which one is not guessed
        two["kernels"]["C#2"] = [[{"K": 24, "M": 8, "N": 20}, 100]]
        rec.write_text(json.dumps(two))
        rc, out, err = run(["tune", case, "--mix-from", rec, "--no-progress"])
        assert rc == 2 and "2 of them named after the outputs C" in err and "--kernel NAME" in err, err


def test_tune_takes_the_files_inputs(tmp_path, monkeypatch):
    """FILE's inputs(sizes, device) are what tuning checks candidates on: sqrt(X) is wrong on the default
    normal inputs (NaN) and right on the file's positive ones."""
    f = tmp_path / "sqrt_case.py"
    f.write_text('''import torch

import tilec as tc


def make():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    Y = tc.compute((M,), lambda i: tc.sqrt(X[i]), name="Y")
    s = tc.create_schedule(Y)
    io, ii = s[Y].split(Y.axis[0], tc.knob("B", [16, 32]))
    s[Y].bind(io, "program_id.0")
    return s, [X, Y]


def inputs(sizes, device):
    return [torch.rand(sizes["M"], device=device) + 0.5]
''')
    monkeypatch.setattr(measure, "default_timer", lambda kernel, inputs: 1e-6)
    monkeypatch.setattr(sys, "path", list(sys.path))
    url = f"sqlite:///{tmp_path / 's.db'}"
    rc, out, err = run(["tune", f, "--mix", "M=37:1", "--trials", 2, "--storage", url, "--jobs", 0])
    assert rc == 0, err + out
    assert "COMPLETE" in out and "FAIL" not in out
    f.write_text(f.read_text().replace("def inputs(", "def unused("))  # no inputs(): the normal ones, all wrong
    rc, out, err = run(["tune", f, "--mix", "M=37:1", "--trials", 2, "--storage", f"sqlite:///{tmp_path / 'u.db'}",
                        "--jobs", 0])
    assert rc != 0 and "wrong answer" in out + err
