"""Docs that run (issue 11): every ```python and ```bash / ```sh / ```shell block of README.md and
docs/*.md is run, and the outputs pasted under them are checked. docs/index.md states the same rules
for writers of docs.

Python blocks. The ```python blocks of one file run in order as one script (later blocks use the names
earlier ones made, as a reader pasting them into one session would), in a fresh interpreter, from an
empty temporary directory, with the repository on PYTHONPATH, TRITON_INTERPRET unset (tilec sets it
itself where there is no GPU) and TILEC_CACHE_DIR in a temporary directory.

Outputs. A ```text block that starts on the line right after a ```python (or shell) block's closing
fence is what that block prints (pasted from a CPU run, and compared there; under a `<!-- gpu -->`
block, from the GPU host, and compared there), and must match it: line for line, exactly, after stripping trailing
whitespace from every line and blank lines from both ends. `...` is the one wildcard: a line that is
only `...` matches any number of lines (none included), and `...` inside a line matches any text within
that line (timings, paths, the part of a long line the page leaves out).

Errors. A one-line statement followed by a comment `# tilec.ArgumentError: message` (any error class of tilec;
the message may go on over further comment lines, `#   more`) must raise that error with that message.
Whitespace is compared collapsed (line breaks in the comment are spaces), and `...` matches any text.
The script goes on after it: a refused primitive leaves the schedule as it was.

Inline outputs. docs/pytorch.md (and docs/tuning.md) paste a print's output as `# ` comment lines
directly under the line that prints. Those lines must be printed, in that order, by the file's script;
they are pasted from a CPU run, and are checked where there is no GPU.

Markers, an HTML comment on the line right before a block's opening fence:

- `<!-- gpu -->`: the block needs a CUDA device. It is left out of the script on a CPU and run where
  torch.cuda.is_available() (the H200 host).
- `<!-- norun: REASON -->`: the block is never run (installing packages, a long tuning run, the
  whole test suite); it is still compiled (Python) or parsed (`bash -n`). A marker without a reason
  fails the test.
- `<!-- from: tests/golden/NAME -->` before a ```text block: the block quotes that file; its lines must
  be in it, in order, each run of lines between `...` lines contiguous there.

Another HTML comment right before a fence fails the test, as a misspelt marker would be. Files in
PENDING are being rewritten elsewhere: they run only with TILEC_DOCS_PENDING=1. A page in
KNOWN_FAILURES shows a bug of tilec: its run is an expected failure that names the bug.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
PENDING: set[str] = set()  # pages being rewritten elsewhere (none now); TILEC_DOCS_PENDING=1 runs them
# Pages whose blocks show a bug of tilec (not a stale page): page -> the bug. The page's test is an expected
# failure, reported as such, and fails once the bug is fixed, so that the entry is removed.
KNOWN_FAILURES: dict[str, str] = {}
CUDA = torch.cuda.is_available()
PYTHON, SHELL, TEXT = "python", ("bash", "sh", "shell"), "text"
ALIASES = {"py", "python3", "pycon", "console", "zsh", "shell-session", "txt"}  # say python/bash/text
TIMEOUT = 300  # seconds for one page's script or one shell block


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def rel(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str
    marker: str | None = None  # "gpu", "norun", "from"
    arg: str = ""  # the norun reason, the quoted file
    end: int = 0  # line of the closing fence
    output: Block | None = None  # the ```text block right after it
    problems: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{rel(self.path)}:{self.line}"


MARKER = re.compile(r"<!--\s*(.*?)\s*-->\s*$")


@cache
def blocks_of(path: Path) -> tuple[Block, ...]:
    lines = path.read_text().splitlines()
    out: list[Block] = []
    n = 0
    while n < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[n])
        if not m:
            n += 1
            continue
        start, lang = n, m.group(1)
        n += 1
        while n < len(lines) and not re.match(r"^```\s*$", lines[n]):
            n += 1
        if n == len(lines):  # reported by test_markers_have_reasons_and_blocks_are_well_formed
            out.append(Block(path, start + 1, "unclosed", "", problems=["a fence that is never closed"]))
            break
        b = Block(path, start + 1, lang, "\n".join(lines[start + 1:n]) + "\n", end=n + 1)
        prev = lines[start - 1] if start else ""
        mk = MARKER.search(prev) if prev.lstrip().startswith("<!--") else None
        if mk:
            text = mk.group(1)
            kind, _, arg = text.partition(":")
            kind, arg = kind.strip(), arg.strip()
            if kind == "gpu" and not arg:
                b.marker = "gpu"
            elif kind == "norun":
                b.marker, b.arg = "norun", arg
                if not arg:
                    b.problems.append("a norun marker needs a reason: <!-- norun: why -->")
            elif kind == "from" and arg:
                b.marker, b.arg = "from", arg
                if lang != TEXT:
                    b.problems.append("a from: marker goes before a ```text block")
                elif not (REPO / arg).is_file():
                    b.problems.append(f"the quoted file {arg} does not exist")
            else:
                b.problems.append(f"unknown marker <!-- {text} --> (gpu, norun: REASON, from: FILE)")
        if lang in ALIASES:
            b.problems.append(f"```{lang}: write ```python, ```bash or ```text")
        if out and lang == TEXT and out[-1].end == b.line - 1 and out[-1].lang in (PYTHON, *SHELL) \
                and b.marker is None:
            out[-1].output = b
        out.append(b)
        n += 1
    return tuple(out)


def runnable(b: Block) -> bool:
    return b.lang in (PYTHON, *SHELL) and b.marker != "norun" and (CUDA or b.marker != "gpu")


def output_checked(b: Block) -> bool:
    """Whether the output pasted under a block is compared with what it prints: outputs of unmarked
    blocks are pasted from a CPU run (the interpreter's form of a kernel, its dtypes), so they are
    compared where there is no GPU; those of `<!-- gpu -->` blocks on the GPU host."""
    return b.output is not None and (b.marker == "gpu" or not CUDA)


def env_for(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TILEC_CACHE_DIR"] = str(tmp / "cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    path = [str(Path(sys.executable).parent)]  # python, and tilec where pip installed it
    if not (Path(sys.executable).parent / "tilec").exists() and shutil.which("tilec") is None:
        # a host with tilec on PYTHONPATH only (the GPU host): the command pip would install
        shim = tmp / "bin" / "tilec"
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tilec "$@"\n')
        shim.chmod(0o755)
        path.append(str(shim.parent))
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def skip_pending(path: Path) -> None:
    if path.name in PENDING and not os.environ.get("TILEC_DOCS_PENDING"):
        pytest.skip(f"{path.name} is pending (being rewritten): TILEC_DOCS_PENDING=1 runs it")


# -- matching ----------------------------------------------------------------------------------------

def _clean(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _line_pattern(line: str) -> str:
    return ".*?".join(re.escape(part) for part in line.split("..."))


def _pattern(lines: list[str]) -> str:
    return "".join(r"(?:[^\n]*\n)*?" if line.strip() == "..." else _line_pattern(line) + r"\n" for line in lines)


def matches(expected: str, actual: str) -> bool:
    """`actual` is what `expected` shows, with the `...` wildcards of the module docstring."""
    return re.fullmatch(_pattern(_clean(expected)), "".join(line + "\n" for line in _clean(actual))) is not None


def _diff(expected: str, actual: str) -> str:
    """Where the doc and the output part (the first line of the doc that nothing printed matches, after
    the lines before it matched), then the diff."""
    exp, act = _clean(expected), "".join(line + "\n" for line in _clean(actual))
    k = next(k for k in range(len(exp), -1, -1) if re.match(_pattern(exp[:k]), act))
    where = (f"the doc's line {k + 1} of the block, {exp[k]!r}, is where they part" if k < len(exp)
             else "the output goes on past the doc's last line")
    diff = list(difflib.unified_diff(exp, _clean(actual), "doc", "printed", lineterm=""))
    return "\n".join([where, *diff[:80], *(["..."] if len(diff) > 80 else [])])


# -- python scripts ----------------------------------------------------------------------------------

PRELUDE = '''\
import contextlib as _doc_contextlib
import re as _doc_re
import sys as _doc_sys


@_doc_contextlib.contextmanager
def _doc_raises(name, message, where):
    import tilec
    cls = getattr(tilec, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise AssertionError(f"{where}: tilec.{name} is not an error class of tilec")
    try:
        yield
    except cls as e:
        got = " ".join(str(e).split())
        pattern = ".*?".join(_doc_re.escape(part) for part in message.split("..."))
        if not _doc_re.fullmatch(pattern, got, _doc_re.S):
            _doc_wrong(f"{where}: tilec.{name} raised with another message\\n  doc:    {message}\\n  raised: {got}")
    else:
        _doc_wrong(f"{where}: tilec.{name} expected, nothing was raised")


def _doc_wrong(text):  # reported by the test; the script goes on, to find every stale message in one run
    print("@@doc-wrong@@ " + text.replace("\\n", "@@nl@@"), file=_doc_sys.stderr, flush=True)


'''
SEP = "@@doc-block {}@@\n"
ERROR = re.compile(r"^# tilec\.(\w+): (.*)$")
MORE = re.compile(r"^#\s{2,}(\S.*)$")


def _rewrite(b: Block) -> tuple[list[tuple[str, int | None]], list[tuple[int, list[str]]]]:
    """The block's lines for the script, each with its line in the doc, the error comments turned into
    `with _doc_raises(...)`; and the inline outputs (`# ` lines under a print) with their doc lines."""
    src = b.body.splitlines()
    out: list[tuple[str, int | None]] = []
    inline: list[tuple[int, list[str]]] = []
    n = 0
    while n < len(src):
        line, doc_line = src[n], b.line + 1 + n
        m = ERROR.match(src[n + 1]) if n + 1 < len(src) else None
        if m and line.strip() and not line.lstrip().startswith("#"):
            name, msg = m.group(1), [m.group(2)]
            k = n + 2
            while k < len(src) and MORE.match(src[k]):
                msg.append(MORE.match(src[k]).group(1))
                k += 1
            message = " ".join(" ".join(msg).split())
            indent = line[:len(line) - len(line.lstrip())]
            where = f"{rel(b.path)}:{doc_line}"
            out.append((f"{indent}with _doc_raises({name!r}, {message!r}, {where!r}):", doc_line))
            out.append((f"{indent}    {line.lstrip()}", doc_line))
            n = k
            continue
        if ERROR.match(line):
            raise AssertionError(f"{rel(b.path)}:{doc_line}: an error comment under no statement")
        out.append((line, doc_line))
        if "print(" in line and not line.lstrip().startswith("#"):
            k, shown = n + 1, []
            while k < len(src) and src[k].startswith("# ") and not ERROR.match(src[k]):
                shown.append(src[k][2:])
                k += 1
            if shown:
                inline.append((doc_line + 1, shown))
        n += 1
    return out, inline


def python_script(path: Path) -> tuple[str, dict[int, int], list[Block], list[tuple[int, list[str]]]]:
    """The file's script, a map from script lines to doc lines, the blocks it runs and the inline
    outputs to check."""
    lines: list[tuple[str, int | None]] = [(line, None) for line in PRELUDE.splitlines()]
    ran: list[Block] = []
    inline: list[tuple[int, list[str]]] = []
    for b in blocks_of(path):
        if b.lang != PYTHON or not runnable(b):
            continue
        body, shown = _rewrite(b)
        lines.append((f"# --- {b.where} ---", None))
        lines += body
        lines.append((f"print({SEP.format(len(ran))[:-1]!r}, flush=True)", None))
        ran.append(b)
        inline += shown
    script = "\n".join(line for line, _ in lines) + "\n"
    where = {n + 1: doc for n, (_, doc) in enumerate(lines) if doc is not None}
    return script, where, ran, inline


def _explain(stderr: str, script: Path, where: dict[int, int], doc: str) -> str:
    """Tracebacks with each line of the script given as its line in the doc."""
    def sub(m: re.Match) -> str:
        n = int(m.group(1))
        return m.group(0) + (f" ({doc}:{where[n]})" if n in where else "")
    return re.sub(rf'File "{re.escape(str(script))}", line (\d+)', sub, stderr)


def _params(kind: str) -> list:
    params = []
    for path in doc_files():
        for b in blocks_of(path):
            if kind == "shell" and b.lang in SHELL and b.marker != "norun":
                params.append(pytest.param(b, id=b.where))
        if kind == "python" and any(b.lang == PYTHON for b in blocks_of(path)):
            params.append(pytest.param(path, id=path.name))
    return params


def check_python(path: Path, tmp_path: Path) -> list[str]:
    """Run the file's python blocks as one script; what is wrong, as messages (none: all is well)."""
    script, where, ran, inline = python_script(path)
    if not ran:
        return []
    doc = rel(path)
    for b in ran:  # a syntax error stops the whole script before it runs: name its block and line
        body = _rewrite(b)[0]
        try:
            compile("\n".join(line for line, _ in body), b.where, "exec")
        except SyntaxError as e:
            at = body[min(max((e.lineno or 1) - 1, 0), len(body) - 1)][1]
            return [f"{b.where}: does not compile: {e.msg} at {doc}:{at}"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    file = tmp_path / (path.stem + "_md.py")
    file.write_text(script)
    try:
        p = subprocess.run([sys.executable, str(file)], cwd=run_dir, capture_output=True, text=True,
                           env=env_for(tmp_path), timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return [f"{doc}: its blocks ran past {TIMEOUT} s (use smaller sizes, or mark a block norun)"]
    out = p.stdout
    wrong = [line.removeprefix("@@doc-wrong@@ ").replace("@@nl@@", "\n") for line in p.stderr.split("\n")
             if line.startswith("@@doc-wrong@@ ")]
    segments, rest = [], out
    for n in range(len(ran)):
        head, sep, rest = rest.partition(SEP.format(n))
        if not sep:
            break
        segments.append(head)
    wrong += [f"{b.where}: the output at {b.output.where} is not what the block prints:\n"
              f"{_diff(b.output.body, seg)}"
              for b, seg in zip(ran, segments) if output_checked(b) and not matches(b.output.body, seg)]
    if p.returncode != 0:
        failed = ran[len(segments)] if len(segments) < len(ran) else ran[-1]
        stderr = "\n".join(line for line in p.stderr.split("\n") if not line.startswith("@@doc-wrong@@ "))
        return [*wrong, f"the block at {failed.where} failed:\n{_explain(stderr, file, where, doc)[-6000:]}"
                        f"\n--- its output so far ---\n{rest[-2000:]}"]
    if not CUDA:  # inline outputs are pasted from a CPU run
        printed, k = out.splitlines(), 0
        for doc_line, shown in inline:
            for line in shown:
                while k < len(printed) and printed[k].rstrip() != line.rstrip():
                    k += 1
                if k == len(printed):
                    wrong.append(f"{doc}:{doc_line}: not printed (in this order): {line!r}")
                    k = 0
                    break
                k += 1
    return wrong


@pytest.mark.parametrize("path", _params("python"))
@pytest.mark.slow
def test_python_blocks_run_and_print_what_the_doc_shows(path: Path, tmp_path: Path):
    skip_pending(path)
    if not any(runnable(b) for b in blocks_of(path) if b.lang == PYTHON):
        pytest.skip("every python block of this file needs a GPU or is marked norun")
    wrong = check_python(path, tmp_path)
    if path.name in KNOWN_FAILURES:
        if wrong:
            pytest.xfail(f"known tilec bug: {KNOWN_FAILURES[path.name]}\n" + "\n\n".join(wrong))
        pytest.fail(f"{path.name} runs now: remove it from KNOWN_FAILURES ({KNOWN_FAILURES[path.name]})")
    if wrong:
        pytest.fail("\n\n".join(wrong), pytrace=False)


@pytest.mark.parametrize("block", _params("shell"))
@pytest.mark.slow
def test_shell_blocks_run(block: Block, tmp_path: Path):
    """Shell blocks run with bash from a directory that holds links to the repository's files, so
    that `python examples/matmul_silu.py` works as from the root and files they write go to tmp_path."""
    skip_pending(block.path)
    if block.marker == "gpu" and not CUDA:
        pytest.skip("needs a CUDA device (<!-- gpu -->)")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name not in ("build", "dist"):
            (run_dir / entry.name).symlink_to(entry)
    try:
        p = subprocess.run(["bash", "-c", "set -eo pipefail\n" + block.body], cwd=run_dir, capture_output=True,
                           text=True, env=env_for(tmp_path), timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: ran past {TIMEOUT} s (use smaller sizes, or mark it norun)", pytrace=False)
    assert p.returncode == 0, f"{block.where}: exit status {p.returncode}\n{p.stderr[-4000:]}\n{p.stdout[-2000:]}"
    if output_checked(block):
        assert matches(block.output.body, p.stdout), _diff(block.output.body, p.stdout)


# -- what is not run ---------------------------------------------------------------------------------

def test_markers_have_reasons_and_blocks_are_well_formed():
    """Every marker is known and a norun one gives its reason; norun blocks still compile (Python) or
    parse (bash -n); a ```text block after a block is not also a quote."""
    problems = []
    for path in doc_files():
        if path.name in PENDING and not os.environ.get("TILEC_DOCS_PENDING"):
            continue
        for b in blocks_of(path):
            problems += [f"{b.where}: {p}" for p in b.problems]
            if b.marker in ("gpu", "norun") and b.lang not in (PYTHON, *SHELL):
                problems.append(f"{b.where}: a {b.marker} marker on a ```{b.lang} block, which never runs")
            if b.marker == "norun" and b.lang == PYTHON:
                try:
                    compile(b.body, b.where, "exec")
                except SyntaxError as e:
                    problems.append(f"{b.where}: does not compile: {e}")
            if b.marker == "norun" and b.lang in SHELL:
                p = subprocess.run(["bash", "-n"], input=b.body, capture_output=True, text=True)
                if p.returncode:
                    problems.append(f"{b.where}: bash -n: {p.stderr.strip()}")
    print("\n".join(f"{name:16} {row}" for name, row in inventory().items()))  # pytest -s shows the counts
    assert not problems, "\n".join(problems)


def test_readmes_test_commands_are_the_tiers_the_suite_has(pytestconfig):
    """README's test commands (issue 23 point 10) are the tiers tests/conftest.py makes: the fast one by
    default and `--full`, an option the suite knows, on the two workers CI uses (`-n 2`, pytest-xdist, issue 26),
    so that they cannot go stale silently; .ci/run runs README's second one."""
    block = next(b for b in blocks_of(REPO / "README.md") if b.lang in SHELL and "pytest" in b.body)
    commands = [line.split("pytest", 1)[1].split() for line in block.body.splitlines() if "pytest" in line]
    assert commands == [["-q", "-n", "2"], ["-q", "--full", "-n", "2"]], commands
    assert pytestconfig.getoption("--full") in (True, False)  # an option of this suite (conftest.py)
    assert "python -m pytest -q --full -n 2" in (REPO / ".ci" / "run").read_text()
    assert pytestconfig.pluginmanager.hasplugin("xdist")  # -n is an option this environment knows


def test_quoted_files_hold_what_the_docs_quote():
    """A ```text block marked `<!-- from: FILE -->` is lines of FILE: each run of lines between `...`
    lines is in FILE, contiguous, after the run before it (`...` inside a line matches any text)."""
    wrong = []
    for path in doc_files():
        for b in blocks_of(path):
            if b.marker != "from" or b.problems:
                continue
            have = [line.rstrip() for line in (REPO / b.arg).read_text().splitlines()]
            runs, run = [], []
            for line in b.body.splitlines():
                if line.strip() == "...":
                    runs.append(run)
                    run = []
                else:
                    run.append(line.rstrip())
            runs.append(run)
            k = 0
            for run in filter(None, runs):
                pats = [re.compile(_line_pattern(line)) for line in run]
                at = next((i for i in range(k, len(have) - len(run) + 1)
                           if all(p.fullmatch(h) for p, h in zip(pats, have[i:i + len(run)]))), None)
                if at is None:
                    first = next((i for i in range(len(have)) if pats[0].fullmatch(have[i])), None)
                    wrong.append(f"{b.where}: these lines are not in {b.arg} (in this order, contiguous): "
                                 + repr(run) + (f"; the first is at its line {first + 1}" if first is not None else ""))
                    break
                k = at + len(run)
    assert not wrong, "\n".join(wrong)


SAMPLE = """\
# a page

```python
x = 1
print(x + 1)
```
```text
2
```

<!-- gpu -->
```python
import torch
print(torch.cuda.get_device_name())
```

```python
import tilec as tc
tc.knob("B", [1, 1])
# tilec.ArgumentError: knob 'B': choices repeat a
#   value: ...
tc.knob("B", [2, 2])
# tilec.ArgumentError: knob 'B': another message
print(x, "after")
# 1 after
print("printed")
# not printed
```

<!-- norun: it would fail -->
```python
raise SystemExit(1)
```

<!-- norun -->
```bash
exit 1
```

<!-- gpus -->
```python
print("wrong")
```
```text
right
```
"""


@pytest.mark.slow
def test_the_conventions_on_a_sample_page(tmp_path: Path):
    """The module docstring's rules, on a page made for it: outputs, errors, inline outputs, markers."""
    page = tmp_path / "sample.md"
    page.write_text(SAMPLE)
    blocks = blocks_of(page)
    assert [(b.lang, b.marker) for b in blocks if b.lang != TEXT] == [
        ("python", None), ("python", "gpu"), ("python", None), ("python", "norun"), ("bash", "norun"),
        ("python", None)]
    assert [p for b in blocks for p in b.problems] == [
        "a norun marker needs a reason: <!-- norun: why -->",
        "unknown marker <!-- gpus --> (gpu, norun: REASON, from: FILE)"]
    wrong = check_python(page, tmp_path)
    assert len(wrong) == (1 if CUDA else 3), wrong  # outputs pasted from a CPU run are compared on a CPU
    assert wrong[0].startswith("sample.md:22: tilec.ArgumentError raised with another message")
    if not CUDA:
        assert wrong[1].startswith("sample.md:41: the output at sample.md:44 is not what the block prints")
        assert "'right', is where they part" in wrong[1]
        assert wrong[2] == "sample.md:27: not printed (in this order): 'not printed'"


def test_wildcards():
    assert matches("a\n...\nd\n", "a\nb\nc\nd\n") and matches("a\n...\nd", "a\nd")
    assert matches("x = ... ms\n", "x = 1.5 ms  \n") and not matches("x = 1 ms", "x = 2 ms")
    assert not matches("a\nb\n", "a\nb\nc\n") and matches("\na\n\n", "a\n")


def inventory() -> dict[str, dict[str, int]]:
    """Per file: its python and shell blocks, how many are gpu- and norun-marked, the outputs and error
    messages checked, the quotes of files checked."""
    table = {}
    for path in doc_files():
        code = [b for b in blocks_of(path) if b.lang in (PYTHON, *SHELL)]
        table[path.name] = {"python": sum(b.lang == PYTHON for b in code), "shell": sum(b.lang in SHELL for b in code),
                            "gpu": sum(b.marker == "gpu" for b in code), "norun": sum(b.marker == "norun" for b in code),
                            "outputs": sum(b.output is not None for b in code),
                            "errors": sum(bool(ERROR.match(line)) for b in code for line in b.body.splitlines()),
                            "quotes": sum(b.marker == "from" for b in blocks_of(path))}
    return table


if __name__ == "__main__":
    for name, row in inventory().items():
        print(f"{name:20} {row}")
