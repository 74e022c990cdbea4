"""Shared pytest configuration for tilec.

Without a CUDA device, kernels run through Triton's interpreter. The variable must be set before
triton is first imported, so it is set here, at the top of the first module pytest loads.
"""

import difflib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

# Kernel files and tuning studies of the tests go to a directory of their own, not the user's
# ~/.cache/tilec (a test that wants another sets TILEC_CACHE_DIR itself).
# Under pytest-xdist (CI's `-n 2`) each worker has its own: the controller's setting is not shared.
if os.environ.get("PYTEST_XDIST_WORKER") and os.path.basename(os.environ.get("TILEC_CACHE_DIR", "")).startswith(
        "tilec-tests-"):
    os.environ["TILEC_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"tilec-tests-{os.environ['PYTEST_XDIST_WORKER']}-")
os.environ.setdefault("TILEC_CACHE_DIR", tempfile.mkdtemp(prefix="tilec-tests-"))

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
else:
    # On the GPU host the same tests run compiled: tensors the tests make go to the GPU.
    torch.set_default_device("cuda")

import pytest  # noqa: E402

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="(re)write tests/golden/<name> files from the current output instead of comparing",
    )
    parser.addoption(
        "--full",
        action="store_true",
        default=False,
        help="run the slow tier too (tests marked slow: doc pages, fuzz and tuning campaigns, examples in "
        "the interpreter); what CI runs",
    )


# Tests in tiers. `pytest` runs the fast tier: every test not marked `slow`, a few minutes of CPU that still
# reach every module. `pytest --full` (CI) adds the slow tier: tests that run many kernels in the
# interpreter, tune, or run the doc pages and the fuzz campaigns; `pytest -m slow` runs only it. A test is
# marked slow where it stands (`@pytest.mark.slow`) when it takes a second or more of its own, so that the
# fast tier stays fast (README says how long each tier takes).


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: the slow tier, run by `pytest --full` (CI) or `pytest -m slow`")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--full") or config.getoption("markexpr"):  # -m chooses the tests itself
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """Return ``check(name, text)``: compare ``text`` verbatim with ``tests/golden/<name>``.

    With ``--update-golden`` the file is (re)written and the check passes.
    """
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="")
            return
        if not path.exists():
            pytest.fail(
                f"golden file {path.relative_to(GOLDEN_DIR.parent.parent)} is missing; "
                "run `pytest --update-golden` to create it, then review and commit it",
                pytrace=False,
            )
        with path.open(encoding="utf-8", newline="") as f:  # verbatim: no newline translation
            expected = f.read()
        if text != expected:
            diff = "".join(
                line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                for line in difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"golden/{name}",
                    tofile="actual",
                )
            )
            raise AssertionError(
                f"output differs from golden/{name} "
                f"(run `pytest --update-golden` if the change is intended):\n{diff}"
            )

    return check


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest) -> None:
    """Random inputs differ from test to test but are the same on every run (reproducible CI)."""
    import zlib

    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
