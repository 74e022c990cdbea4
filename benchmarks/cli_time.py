"""How much CPU the `tilec` command spends before it does anything: `tilec --help`, `tilec --version`,
an argument error, and `import tilec` (a benchmark, not a test; runs on a CPU).

    python benchmarks/cli_time.py [--runs 15] [--json out.json]

Each command runs `--runs` times in a fresh interpreter (the installed `tilec` script where it is on
PATH, else `python -m tilec`); the figure is the median of the child's user+system CPU seconds
(`resource.getrusage(RUSAGE_CHILDREN)` around each run), which a loaded machine inflates far less than
wall time. The heavy libraries each command imported are listed too (a fresh run with
`-X importtime`). Target (issue 23): `tilec --help` under 0.3 s of CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

HEAVY = ("torch", "triton", "optuna", "islpy", "networkx", "numpy", "sqlalchemy")


def _cpu_seconds(cmd: list[str]) -> tuple[float, float, int]:
    """(user+system CPU seconds, wall seconds, exit status) of one run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, rc


def _heavy_imports(cmd: list[str]) -> list[str]:
    """The HEAVY top-level packages `cmd` imports (from python's -X importtime log on stderr)."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    err = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env).stderr
    seen = set()
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.split(".")[0] in HEAVY:
                seen.add(name.split(".")[0])
    return sorted(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args()
    script = shutil.which("tilec")
    tilec = [script] if script else [sys.executable, "-m", "tilec"]
    commands = {
        "tilec --help": tilec + ["--help"],
        "tilec --version": tilec + ["--version"],
        "tilec tune --help": tilec + ["tune", "--help"],
        "tilec tune (argument error)": tilec + ["tune"],
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import tilec'": [sys.executable, "-c", "import tilec"],
        "python -c 'import tilec; tilec.compute'": [sys.executable, "-c", "import tilec; tilec.compute"],
    }
    rows = []
    print(f"{'command':<42} {'CPU s (median)':>14} {'wall s':>8}  heavy imports")
    for label, cmd in commands.items():
        runs = [_cpu_seconds(cmd) for _ in range(a.runs)]
        cpu = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        heavy = _heavy_imports(cmd)
        rows.append({"command": label, "cpu_s": cpu, "wall_s": wall, "exit": runs[0][2], "heavy": heavy,
                     "runs": a.runs})
        print(f"{label:<42} {cpu:>14.3f} {wall:>8.3f}  {', '.join(heavy) or '-'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"python": sys.version.split()[0], "cores": os.cpu_count(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
