"""README's Python blocks run as pasted: extracted in order and run as one script, in a fresh
interpreter, from an empty directory, without TRITON_INTERPRET set (tilec sets it itself where there is
no GPU), with the tuning study in a temporary cache. The blocks of docs/ are not run yet (issue 11)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


def test_readme_python_blocks_run_as_pasted(tmp_path):
    blocks = python_blocks(REPO / "README.md")
    assert len(blocks) == 2  # the tour, then tuning, which uses the tour's schedule
    script = tmp_path / "readme.py"
    script.write_text("\n".join(blocks))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TILEC_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout
    assert "kernel C_kernel  (stages: C, Y" in out  # print(tc.lower(...))
    assert out.count("@triton.jit") == 2  # kernel.source, tuned.source(M=64)
    assert "plans for 1,000,000 expected calls" in out and "chosen: " in out  # print(tuned.plan)
