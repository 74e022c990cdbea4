"""The public API as a user meets it (issue 11, point 6): every name `tilec` exports, every schedule
primitive and `Kernel.__call__` has a docstring with its parameters, what it raises and an example; the
examples run (doctest, from the GEMM + SiLU of `tc.Schedule`'s example) and print what they say;
public signatures are typed and the package says so (`py.typed`); the objects a user prints show the
facts they hold.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.lower.program import Program
from tilec.tune.plans import PlanOption
from tilec.tune.study import Tuned

ROOT = Path(__file__).resolve().parent.parent

# The computation the examples start from: the first lines of tc.Schedule's example (checked below).
PREAMBLE = '''
M, N, K = tc.size_vars("M N K")
A = tc.placeholder((M, K), "float32", name="A")
W = tc.placeholder((K, N), "float32", name="W")
k = tc.reduce_axis(K, name="k")
C = tc.compute((M, N), lambda i, j: tc.sum(A[i, k] * W[k, j], axis=k), name="C")
Y = tc.compute((M, N), lambda i, j: tc.silu(C[i, j]), name="Y")
s = tc.create_schedule(Y)
i, j = C.axis
'''

PUBLIC = [n for n in tc.__all__ if n != "__version__"]
PRIMITIVES = [f"Stage.{n}" for n in ("split", "tile", "reorder", "fuse", "swizzle", "compute_at", "compute_with",
                                     "split_k", "online", "compute_inline", "compute_root", "bind", "pipeline",
                                     "num_warps", "persistent", "unroll")]
METHODS = PRIMITIVES + ["Schedule.cache_read", "Schedule.cache_write", "Schedule.__getitem__",
                        "Schedule.fingerprint", "Kernel.__call__"]



def _obj(name: str):
    """The object a public name (or `Class.method`) stands for."""
    owner, _, attr = name.partition(".")
    obj = getattr(tc, owner)
    if attr:
        obj = inspect.getattr_static(obj, attr)
    return obj


def _doc(name: str) -> str:
    return inspect.getdoc(_obj(name)) or ""


# Classes a user gets from tilec rather than constructs (their docstrings say what makes them): their
# __init__ parameters are not the API.
MADE_BY_TILEC = {"Schedule": "tc.create_schedule", "Stage": "s[C]", "Tensor": "tc.placeholder, tc.compute",
                 "Kernel": "tc.build", "Tuned": "tc.tune"}


def _params(obj) -> list[str]:
    """The parameters a user passes (not self): a function's, or those of the __init__ tilec defines for
    a class (an exception that keeps Exception's takes a message only)."""
    if inspect.isclass(obj):
        if obj.__name__ in MADE_BY_TILEC:
            return []
        own = next((c.__dict__["__init__"] for c in obj.__mro__ if "__init__" in c.__dict__
                    and c.__module__.startswith("tilec")), None)
        if own is None:
            return []
        obj = own
    return [p for p in inspect.signature(obj).parameters if p != "self"]


# ---------------------------------------------------------------------------------------------
# docstrings


@pytest.mark.parametrize("name", PUBLIC + METHODS)
def test_every_public_name_documents_its_parameters_what_it_raises_and_an_example(name):
    doc = _doc(name)
    assert doc, f"{name} has no docstring"
    obj = _obj(name)
    params = _params(obj)
    if params:
        assert "\nArgs:\n" in doc, f"{name}: no Args section for {params}"
        section = doc.split("\nArgs:\n", 1)[1].split("\n\n", 1)[0]
        for p in params:
            assert re.search(rf"^\s+\*{{0,2}}{p}:", section, re.M), f"{name}: parameter {p} is not described"
    if params and not (inspect.isclass(obj) and issubclass(obj, BaseException)):  # an error class: raised, not raising
        assert "\nRaises:\n" in doc, f"{name}: no Raises section"
    assert "\nExample:\n" in doc and ">>> " in doc.split("\nExample:\n", 1)[1], f"{name}: no example"


def test_each_primitive_docstring_keeps_its_golden_file():
    """The primitives' worked examples (tests/test_golden_primitives.py) stay named in the docstrings."""
    for name in PRIMITIVES + ["Schedule.cache_read", "Schedule.cache_write"]:
        files = re.findall(r"tests/golden/primitives/(\w+\.txt)", _doc(name))
        assert files and all((ROOT / "tests" / "golden" / "primitives" / f).exists() for f in files), name


def test_the_examples_start_from_the_schedule_docstrings_computation():
    lines = [f">>> {line}" for line in PREAMBLE.strip().splitlines()]
    doc = _doc("Schedule")
    assert all(line in doc for line in lines)


def _run_examples(name: str) -> str:
    """Run the examples of `name`'s docstring after PREAMBLE; return doctest's report of failures."""
    globs = {"tc": tc, "torch": torch}
    exec(PREAMBLE, globs)
    test = doctest.DocTestParser().get_doctest(_doc(name), globs, name, None, 0)
    out = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=out.append)
    return "".join(out) if runner.failures else ""


@pytest.mark.parametrize("name", PUBLIC + METHODS)
@pytest.mark.slow
def test_the_docstring_examples_run_and_print_what_they_say(name):
    report = _run_examples(name)
    assert not report, report


# ---------------------------------------------------------------------------------------------
# types


@pytest.mark.parametrize("name", [n for n in PUBLIC + METHODS if _params(_obj(n))])
def test_public_signatures_are_typed(name):
    obj = _obj(name)
    fn = next(c.__dict__["__init__"] for c in obj.__mro__ if "__init__" in c.__dict__) if inspect.isclass(obj) else obj
    sig = inspect.signature(fn)
    untyped = [p.name for p in sig.parameters.values() if p.name != "self" and p.annotation is inspect.Parameter.empty]
    assert not untyped, f"{name}: untyped parameters {untyped}"
    if not inspect.isclass(obj):
        assert sig.return_annotation is not inspect.Signature.empty, f"{name}: no return type"


def test_the_package_ships_its_py_typed_marker():
    assert (ROOT / "tilec" / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["tilec"]


# ---------------------------------------------------------------------------------------------
# what printing shows


def _gemm():
    globs = {"tc": tc}
    exec(PREAMBLE, globs)
    return globs


def test_a_schedule_prints_as_the_python_of_its_trace():
    g = _gemm()
    s, C, Y, i, j = g["s"], g["C"], g["Y"], g["i"], g["j"]
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [16, 32]), 16)
    s[C].bind(io, "program_id.0")
    s.cache_write(C, "local").compute_at(s[C], jo)
    text = repr(s)
    assert text == str(s)
    head, body = text.split("\n", 1)
    assert head == "# Schedule of Y (stages: C, Y; caches: C_local; knobs: BM)"
    assert body == str(s.trace)
    assert 'BM = tc.knob("BM", [16, 32])' in body and 'C.bind(C_io, "program_id.0")' in body
    ns = {"tc": tc, "outputs": Y}
    exec(text, ns)  # the whole print is Python that rebuilds the schedule
    assert ns["s"].fingerprint() == s.fingerprint()


def test_a_kernel_prints_its_signature_and_config():
    g = _gemm()
    s, A, W, C, Y, i = g["s"], g["A"], g["W"], g["C"], g["Y"], g["i"]
    s[C].split(i, tc.knob("BM", [16, 32]))
    kernel = tc.build(s, [A, W, Y], config={"BM": 32}, specialize={"K": 24})
    text = repr(kernel)
    assert text.startswith("<Kernel C_kernel, Y_kernel: ")
    assert "(A: float32[M, K], W: float32[K, N]) -> Y: float32[M, N]" in text
    assert "config BM=32" in text and "specialized K=24" in text and f"target {kernel.target}>" in text


def test_a_program_prints_a_summary():
    g = _gemm()
    s, C, Y, i, j = g["s"], g["C"], g["Y"], g["i"], g["j"]
    io, jo, ii, ji = s[C].tile(i, j, tc.knob("BM", [16, 32]), 16)
    s[C].bind(io, "program_id.0")
    s[Y].compute_at(s[C], jo)
    one = repr(tc.lower(s, config={"BM": 32}))
    assert re.fullmatch(r"<Program: \w+_kernel \(stages C, Y\); config BM=32; target cuda>", one), one
    two = repr(Program(tc.create_schedule(Y), target="interpreter"))
    assert "(stages C); " in two and "(stages Y); " in two and "; buffers C; target interpreter>" in two
    assert str(tc.lower(s)) != one  # print() still shows the loop nests


def test_tuned_prints_its_plan():
    g = _gemm()
    s, A, W, Y = g["s"], g["A"], g["W"], g["Y"]
    kernel = tc.build(s, [A, W, Y])
    mix = tc.ShapeMix([({"M": 64}, 3), ({"M": 128}, 1)], fixed={"K": 32, "N": 16})
    shapes = [tc.ShapeMix.key(shape) for shape, _ in mix]
    chosen = PlanOption("buckets", {shapes[0]: {"BM": 16}, shapes[1]: {"BM": 32}}, T=12.5e-6, P=3.0)
    generic = PlanOption("generic", {k: {"BM": 16} for k in shapes}, T=20e-6, P=1.0)
    tuned = Tuned(s, [A, W, Y], mix, None, chosen, [generic, chosen], 1e6, {k: kernel for k in shapes})
    text = repr(tuned)
    assert text.startswith("<Tuned: plan buckets for 2 shape(s) (")
    assert f"{shapes[0]}: BM=16; {shapes[1]}: BM=32" in text and "12.50 us/call" in text
    assert text.endswith("other plans: generic>")


def test_knobs_and_axes_show_their_facts_and_print_as_their_names():
    """repr() of a knob is the call that makes it, an axis's shows its kind, its extent and the primitive
    that made it; str() of both is the name, as in the expressions they appear in (`cdiv(M, BM)`,
    `A[i, k]`): what messages, loop nests, generated code, traces and fingerprints are made of."""
    g = _gemm()
    s, A, C, i, j, k = g["s"], g["A"], g["C"], g["i"], g["j"], g["k"]
    BM = tc.knob("BM", [64, 128])
    assert (repr(BM), str(BM), BM.name, BM.choices, BM.default) == ('tc.knob("BM", [64, 128])', "BM", "BM", (64, 128), 64)
    assert (repr(tc.flag("TMA")), str(tc.flag("TMA")), tc.flag("TMA").choices) == ('tc.flag("TMA")', "TMA", (0, 1))
    assert (repr(i), repr(k)) == ("<axis i: spatial, extent M>", "<axis k: reduce, extent K>")
    assert repr(C.axis) == "(<axis i: spatial, extent M>, <axis j: spatial, extent N>)"
    io, ii = s[C].split(i, BM)
    assert repr(io) == "<axis io: spatial, extent cdiv(M, BM), outer of split(i, BM)>"
    assert repr(ii) == "<axis ii: spatial, extent BM, inner of split(i, BM)>"
    jo, ji = s[C].split(j, 32)
    assert repr(ji) == "<axis ji: spatial, extent 32, inner of split(j, 32)>"
    s[C].reorder(io, jo, ii, ji)
    tiles = s[C].swizzle(io, jo, 8)
    assert repr(tiles) == "<axis io_jo: spatial, extent cdiv(M, BM) * cdiv(N, 32), swizzle(io, jo, group=8)>"
    # str(), and every text made of them, keeps the names
    assert [str(x) for x in (BM, i, k, io, tiles)] == ["BM", "i", "k", "io", "io_jo"]
    assert (repr(A[i, k] * 2.0), str(BM * 2 + io)) == ("(A[i, k] * 2.0)", "((BM * 2) + io)")
    assert f"{io}, {BM}" == "io, BM" and (k, k.name, k.kind, repr(k.extent)) == (k, "k", "reduce", "K")
    assert s.fingerprint().splitlines()[-4:-2] == ["C: split(i, BM) -> io, ii", "C: split(j, 32) -> jo, ji"]
    assert 'BM = tc.knob("BM", [64, 128])' in str(s.trace) and "C.split(C_i, BM)" in str(s.trace)
    s[C].bind(tiles, "program_id.0")
    nest = str(tc.lower(s))
    assert "grid (cdiv(M, 64) * cdiv(N, 32))" in nest and "io, jo = swizzle(io_jo, group=8)" in nest
    with pytest.raises(tc.ArgumentError, match=r"^tc.sum: axis must be a reduce_axis or a list of them, got \[i, k\] "):
        tc.sum(A[i, k], axis=[i, k])
    assert repr(s[C]) == "Stage(C)"


def test_knobs_in_shapes_print_by_name_in_programs_and_fingerprints():
    """A split_k knob is a dimension of the partial sums' workspace: the loop nest and the schedule's
    log name it (not its repr)."""
    g = _gemm()
    s, C, i, j, k = g["s"], g["C"], g["i"], g["j"], g["k"]
    io, jo, ii, ji = s[C].tile(i, j, 16, 16)
    ko, ki = s[C].split(k, 16)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(io, "program_id.0")
    s[C].bind(jo, "program_id.1")
    s[C].split_k(ko, tc.knob("SK", [2, 4]))
    assert "split_k workspaces: C_part[SK, M, N] float32" in str(tc.lower(s))
    assert s.fingerprint().splitlines()[-1] == "C: split_k(ko, parts=SK)"


@pytest.mark.parametrize("name", ["lower", "analyze", "build", "tune"])
def test_a_non_schedule_is_refused_with_the_argument_named(name):
    """The API's functions of a schedule say what they got, as build does (not an AttributeError)."""
    mix = tc.ShapeMix([({"M": 8}, 1)])
    call = {"lower": lambda: tc.lower("s"), "analyze": lambda: tc.analyze("s"),
            "build": lambda: tc.build("s", []), "tune": lambda: tc.tune("s", mix)}[name]
    with pytest.raises(tc.ArgumentError, match=rf"^argument 1, 'sched' to {name}: expected a Schedule, got str$"):
        call()


# ---------------------------------------------------------------------------------------------
# call time


def test_an_input_that_requires_grad_is_refused_on_every_call():
    """The launches of a call are kept per shapes (tilec/runtime/kernel.py); requires_grad is not part of
    that key, so a second call with the same shapes must still be checked."""
    g = _gemm()
    kernel = tc.build(g["s"], [g["A"], g["W"], g["Y"]])
    a, w = torch.randn(8, 4), torch.randn(4, 8)
    kernel(a, w)  # the launches for these shapes are kept
    with pytest.raises(tc.ArgumentError, match=r"^A requires grad, but tilec kernels do not record autograd; pass "
                                               r"A.detach\(\) \(or call under torch.no_grad\(\)\)$"):
        kernel(a.requires_grad_(), w)
    with torch.no_grad():
        torch.testing.assert_close(kernel(a, w), torch.nn.functional.silu(a.detach() @ w), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# help() and the lazy top-level package


@pytest.mark.parametrize("name", ["tune", "lower"])
def test_help_opens_on_the_function(name):
    """help(tc.tune) opens on tune's signature and docstring, not on a package (issue 23 point 5: it
    showed the package, with the parameters under FUNCTIONS, and inspect.signature said (*args, **kwargs))."""
    import pydoc

    fn = getattr(tc, name)
    text = pydoc.render_doc(fn, renderer=pydoc.plaintext)
    first = text.splitlines()[0]
    assert first.startswith(f"Python Library Documentation: function {name} in module tilec."), first
    assert "PACKAGE CONTENTS" not in text and "FUNCTIONS" not in text
    sig = inspect.signature(fn)
    assert list(sig.parameters)[:2] == (["sched", "mix"] if name == "tune" else ["sched", "config"])
    assert "Args:" in text and f"{name}(sched" in text


def test_the_lazy_table_is_what_type_checkers_read():
    """tilec/__init__.py resolves names from _HOMES at first use; its TYPE_CHECKING block (what IDEs
    and type checkers read) must import the same names from the same modules, and __all__ lists them."""
    import ast

    from tilec import _HOMES

    tree = ast.parse((ROOT / "tilec" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    read = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        read.setdefault(node.module, set()).update(a.name for a in node.names)
    assert read == {module: set(names) for module, names in _HOMES.items()}
    for module, names in _HOMES.items():
        for name in names:
            assert name in tc.__all__
            assert getattr(tc, name) is getattr(importlib.import_module(module), name)
    assert set(dir(tc)) >= set(tc.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'nosuch'"):
        tc.nosuch  # noqa: B018


def test_the_old_knob_import_path_names_the_same_objects():
    """Knobs moved to tilec.ir.knob; tilec.schedule.knob keeps the old import path for user code and names
    the very same objects (no test imported it: 0 coverage in the fast tier)."""
    old, new = importlib.import_module("tilec.schedule.knob"), importlib.import_module("tilec.ir.knob")
    assert sorted(old.__all__) == ["Knob", "factor_value", "knob", "resolve_config"]
    for name in old.__all__:
        assert getattr(old, name) is getattr(new, name)


@pytest.mark.slow
def test_import_tilec_imports_nothing_heavy():
    """`import tilec` alone imports neither torch, Triton, optuna nor isl: names come at first use."""
    code = ("import sys, tilec; heavy = [m for m in ('torch', 'triton', 'optuna', 'islpy', 'networkx') "
            "if m in sys.modules]; print(heavy); tilec.ShapeMix; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"], out


def test_subpackages_and_schedules_work_without_the_api_names():
    """`import tilec; tilec.ir` and a schedule made through tilec.schedule alone worked when `import tilec`
    imported everything; they still do (a review's find: an AttributeError, and a RuntimeError at the first
    primitive, because nothing had installed the legality check)."""
    code = ("import tilec\nprint(tilec.ir.__name__, tilec.schedule.__name__)\n"
            "from tilec.ir import compute, placeholder, size_vars\nfrom tilec.schedule import create_schedule\n"
            "M = size_vars('M'); X = placeholder((M,), 'float32', name='X')\n"
            "Y = compute((M,), lambda i: X[i] * 2.0, name='Y'); Z = compute((M,), lambda i: Y[i] + 1.0, name='Z')\n"
            "s = create_schedule(Z); io, ii = s[Z].split(Z.axis[0], 16)\n"
            "try:\n    s[Y].compute_at(s[Z], io)\nexcept Exception as e:\n    print(type(e).__name__)\n"
            "else:\n    print('placed')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["tilec.ir", "tilec.schedule", "placed"], out.stderr
