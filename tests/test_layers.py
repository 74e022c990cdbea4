"""The pipeline's packages import one way: ir <- schedule <- poly <- plan <- lower <- runtime <- tune <- cli.

Every `import tilec...` in tilec/ (at the top of a file or inside a function) is read with `ast`; one
that reaches a later layer, or the top-level package from inside it, is a back-edge and fails here
with the file and line. `tc.lower` and `tc.tune` are both the API's functions and the packages.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import tilec as tc

ROOT = Path(__file__).resolve().parent.parent / "tilec"
# layer of each top-level module or package of tilec; a module may import its own layer and below
LAYER = {"errors": 0, "version": 0, "_packages": 0, "ir": 1, "schedule": 2, "poly": 3, "plan": 4, "lower": 5,
         "runtime": 6, "tune": 7, "draw": 8, "cli": 8, "__main__": 8}  # __main__: python -m tilec, the cli; draw: its pictures


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []


def test_every_package_imports_only_its_own_layer_and_below():
    back = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).parts
        if rel == ("__init__.py",):
            continue  # the top-level package gathers the API from every layer
        mine = rel[0].removesuffix(".py")
        assert mine in LAYER, f"{path}: a new top-level module; give it a layer in LAYER"
        for line, module, names in _imports(path):
            parts = module.split(".")
            if parts[0] != "tilec":
                continue
            targets = [parts[1]] if len(parts) > 1 else names  # `from tilec import lower` names a package
            for t in targets:
                if t not in LAYER:
                    if mine != "cli":  # only the command may use the top-level API
                        back.append(f"{path.relative_to(ROOT.parent)}:{line}: {mine} imports tilec.{t}, the "
                                    f"top-level package")
                elif LAYER[t] > LAYER[mine]:
                    back.append(f"{path.relative_to(ROOT.parent)}:{line}: {mine} (layer {LAYER[mine]}) imports "
                                f"tilec.{t} (layer {LAYER[t]})")
    assert not back, "back-edges in the import graph:\n" + "\n".join(back)


def test_lower_and_tune_are_the_functions_and_the_packages():
    """tc.tune and tc.lower are plain functions (help(), inspect.signature and IDEs see them); their
    packages are reached by import and through the function's attributes (tilec/_packages.py)."""
    assert inspect.isfunction(tc.tune) and tc.tune.__module__ == "tilec.tune.study"
    assert inspect.isfunction(tc.lower) and tc.lower.__module__ == "tilec.lower.program"
    for name in ("tilec.tune.study", "tilec.tune.storage", "tilec.tune.report", "tilec.lower.builder",
                 "tilec.lower.nest", "tilec.lower.launch"):
        mod = importlib.import_module(name)
        parent, child = name.rsplit(".", 1)
        got = tc
        for part in parent.split(".")[1:]:
            got = getattr(got, part)
        assert getattr(got, child) is mod  # `tilec.tune.study.x` works
        assert importlib.import_module(parent).__name__ == parent  # the package itself, by import
    import tilec.lower.builder as builder
    import tilec.tune.study as study
    from tilec.tune import ShapeMix, storage
    assert study.tune is tc.tune and builder.__name__ == "tilec.lower.builder"
    assert storage.__name__ == "tilec.tune.storage" and ShapeMix is tc.ShapeMix
    assert tc.tune.ShapeMix is tc.ShapeMix  # the package's public names too
    assert tc.tune is importlib.import_module("tilec").tune  # importing the packages did not rebind them
    assert list(inspect.signature(tc.lower).parameters)[:2] == ["sched", "config"]
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    Y = tc.compute((M,), lambda i: X[i] * 2.0, name="Y")
    program = tc.lower(tc.create_schedule(Y))
    assert "def Y_kernel(" in program.source()
