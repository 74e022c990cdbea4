"""Loading a user's schedule file (`make()` -> (schedule, args)), for the `tilec` command and for
tuning workers that rebuild the schedule from the file where they cannot be forked; and setting up
Triton's interpreter before such a file is imported, where there is no GPU."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from tilec.errors import TilecError, UserError  # noqa: F401 (UserError: also this module's, as before)
from tilec.schedule import Schedule


def use_interpreter_without_gpu() -> None:
    """Where there is no GPU, set TRITON_INTERPRET=1 before a user's file is imported: Triton reads it
    once, when it is first imported, so a file that imports triton itself (at its top) then runs in the
    interpreter too, instead of failing at the first kernel. Nothing changes on a GPU, where the
    variable is set already, or once Triton is imported (then `triton_compat.triton()` says what to do).
    Not for tuning workers' zygotes: asking whether there is a GPU touches CUDA."""
    from tilec.runtime import triton_compat
    if "triton" not in sys.modules and triton_compat.target() == "interpreter":
        os.environ["TRITON_INTERPRET"] = "1"


def load_file(path: str):
    """Import a Python file by path (its directory first on sys.path, so `import common` works)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"no such file: {path}")
    p = p.resolve()
    if str(p.parent) not in sys.path:
        sys.path.insert(0, str(p.parent))
    name = f"tilec_user_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except TilecError:
        raise
    except Exception as e:
        raise UserError(f"{path}: importing it raised {type(e).__name__}: {e}") from e
    return module


def make_schedule(module, path: str):
    """Call the file's make(); check it returned (schedule, args)."""
    make = getattr(module, "make", None)
    if not callable(make):
        raise UserError(f"{path} defines no make(); it must define make() -> (schedule, args), "
                        f"like examples/matmul.py")
    try:
        out = make()
    except TilecError:
        raise
    except Exception as e:
        raise UserError(f"{path}: make() raised {type(e).__name__}: {e}") from e
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], Schedule)
            and isinstance(out[1], (list, tuple))):
        raise UserError(f"{path}: make() must return (schedule, args), e.g. (s, [A, W, Y]); got "
                        f"{type(out).__name__}")
    return out[0], list(out[1])
