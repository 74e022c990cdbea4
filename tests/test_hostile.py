"""Hostile and odd input: each gets a `tilec.TilecError` (usually `ArgumentError`) that names what was
wrong and what would be right, nothing else is harmed, and no user string reaches generated code unchecked.

Sections: names (each list of tilec/ir/names.py, whole, through every API that takes a name: Triton's
launch keywords, the generated module's names, isl's and Python's keywords, strings that try to escape into
the source; then tables of names in every role whose generated source must be the control program renamed,
and a handful of programs run, showing that the lists are what keep the generated code working), facts (`tc.assume`), knobs and configs, constants, tensors at call time
(aliasing `out=`, strided and odd inputs, zero-size dims, autograd), and the int64 index path.
"""

import ast
import dataclasses
import enum
import inspect
import io
import keyword
import re
import tokenize
import unicodedata

import pytest
import torch
from computes import design_schedule

import tilec as tc
from tilec.ir import names as tc_names
from tilec.runtime import kernel as kernel_mod

# ---------------------------------------------------------------------------------------------
# helpers

NAMERS = {
    "placeholder": lambda n: tc.placeholder((4,), "float32", name=n),
    "compute": lambda n: tc.compute((4,), lambda i: i * 2, name=n),
    "reduce_axis": lambda n: tc.reduce_axis(4, name=n),
    "size_vars": lambda n: tc.size_vars([n]),
    "knob": lambda n: tc.knob(n, [16, 32]),
}
WHAT = {"placeholder": "placeholder name", "compute": "compute name", "reduce_axis": "axis name",
        "size_vars": "size_vars", "knob": "knob name"}


def function_of(params, body):
    """A function whose parameters have the given names (they become axis names), returning body(*axes)."""
    ns = {"body": body}
    exec(f"def f({', '.join(params)}):\n    return body({', '.join(params)})\n", ns)
    return ns["f"]


def elementwise_kernel(dtype="float32"):
    """Z = X * 2 + 1 on a symbolic (M, N) input."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), dtype, name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2 + 1, name="Z")
    return tc.build(tc.create_schedule(Z), [X, Z])


def transpose_kernel():
    """T = X transposed, tiled 4x4 so that several programs read what others write."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    T = tc.compute((N, M), lambda j, i: X[i, j], name="T")
    s = tc.create_schedule(T)
    jo, ji = s[T].split(T.axis[0], 4)
    io, ii = s[T].split(T.axis[1], 4)
    s[T].reorder(jo, io, ji, ii)
    s[T].bind(jo, "program_id.0")
    s[T].bind(io, "program_id.1")
    return tc.build(s, [X, T])


def reduction_kernel(op="sum"):
    """R[i] = op over k of X[i, k]."""
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: getattr(tc, op)(X[i, k], axis=k), name="R")
    return tc.build(tc.create_schedule(R), [X, R])


def gemm_silu_kernel(names=None):
    """DESIGN.md section 1's fused GEMM + SiLU (float32, 16x16x16 tiles, no pipeline); `names` renames any
    of its tensors A, W, C, Y."""
    s, (A, W, C, Y), _ = design_schedule(tiles=(16, 16, 16), stages=None, names=names)
    return tc.build(s, [A, W, Y])


@pytest.fixture(scope="module")
def ew():
    return elementwise_kernel()


@pytest.fixture(scope="module")
def tr():
    return transpose_kernel()


@pytest.fixture(scope="module")
def rsum():
    return reduction_kernel("sum")


@pytest.fixture(scope="module")
def gemm():
    return gemm_silu_kernel()


# ---------------------------------------------------------------------------------------------
# names: the rules of tilec/ir/names.py, each list checked whole through every API that takes a name
# (cheap: nothing is built); then a handful of programs, built and run, showing the lists are what keep
# the generated code working


def refusals(names, expect, apis=NAMERS):
    """Call every API in `apis` with every name; `expect(api, name)` is the regex the ArgumentError must match,
    or None where the name must be accepted. Returns one line per failure (for one assertion message)."""
    failures = []
    for api in apis:
        for name in names:
            want = expect(api, name)
            try:
                NAMERS[api](name)
            except tc.ArgumentError as e:
                if want is None:
                    failures.append(f"{api}({name!r}) refused: {e}")
                elif not re.search(want, str(e)):
                    failures.append(f"{api}({name!r}): {e}\n    does not match {want!r}")
                continue
            if want is not None:
                failures.append(f"{api}({name!r}) was accepted; expected an error matching {want!r}")
    return failures


def test_every_triton_launch_keyword_is_refused_by_every_api():
    # a tensor named `grid` used to crash the launch (fn[grid](grid=...) has two values for `grid`), and a
    # size named `num_warps` silently replaced the kernel's warp count on the GPU
    def expect(api, bad):
        hint = {"num_stages": r"; pipeline\(axis, stages=tc\.knob", "num_warps": r"; num_warps\(tc\.knob"}.get(bad, "")
        return (rf"^{WHAT[api]}: '{bad}' is reserved: Triton's kernel launch takes it as a keyword.*launch{hint}.* "
                rf"\(docs/schedule\.md.*pick another name, e\.g\. '{bad}_'$")

    names = sorted(tc_names.LAUNCH_KEYWORDS)
    assert {"grid", "warmup", "self", "num_warps", "num_stages", "debug", "device", "backend"} <= set(names)
    failures = refusals(names, expect)
    failures += refusals([n + "_" for n in names], lambda api, n: None)  # the suggested name is a good one
    assert not failures, "\n".join(failures)


def test_launch_keywords_cover_the_installed_triton():
    # every keyword JITFunction.run and the launch options take, so a Triton upgrade cannot add one unnoticed
    from triton.backends.nvidia.compiler import CUDAOptions
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    want = {f.name for f in dataclasses.fields(CUDAOptions)}
    for run in (JITFunction.run, InterpretedFunction.run):
        want |= {p.name for p in inspect.signature(run).parameters.values()
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    try:
        from triton.backends.amd.compiler import HIPOptions
        want |= {f.name for f in dataclasses.fields(HIPOptions)}
    except ImportError:  # pragma: no cover - a Triton without the AMD backend
        pass
    assert want <= tc_names.LAUNCH_KEYWORDS, sorted(want - tc_names.LAUNCH_KEYWORDS)


def test_every_name_the_generated_module_uses_is_refused_by_every_api():
    # `tl`, `triton`, `libdevice.tanh(x)` (CUDA), `float("inf")`, and the interpreter's `interpreter_semantic`
    # would resolve to the user's tensor; names starting with '_' are the generated code's too
    names = sorted(tc_names.RESERVED) + ["_", "__", "_A", "__import__", "__class__", "__init__"]
    assert {"tl", "triton", "torch", "libdevice", "interpreter_semantic", "pid", "float"} <= set(names)
    failures = refusals(names, lambda api, bad: rf"^{WHAT[api]}: '{bad}' is reserved for the generated code "
                                                rf"\(names starting with '_' and {', '.join(sorted(tc_names.RESERVED))}\)"
                                                rf"; pick another name$")
    assert not failures, "\n".join(failures)


def test_every_isl_keyword_in_any_case_is_refused_by_every_api():
    # a size named `nan` or `floor` used to fail inside isl ("syntax error in isl_stream.c") at build
    spellings = sorted({s for w in tc_names.ISL_KEYWORDS for s in (w, w.upper(), w.capitalize())}
                       | {"NaN", "Infty", "FALSE", "cEiLd"})

    def expect(api, bad):
        if keyword.iskeyword(bad):  # and, or, not, True, False: Python's keywords first
            return rf"^{WHAT[api]}: '{bad}' is a Python keyword"
        if bad in tc_names.RESERVED:  # min, max: reserved for the generated code next
            return rf"^{WHAT[api]}: '{bad}' is reserved for the generated code"
        return rf"^{WHAT[api]}: '{bad}' is reserved: isl.*reads it as a keyword.*pick another name, e\.g\. '{bad}_'$"

    failures = refusals(spellings, expect)
    failures += refusals([w + "_" for w in spellings], lambda api, n: None)
    assert not failures, "\n".join(failures)


def test_isl_keywords_are_what_isl_refuses():
    # the list is neither short (each word fails as an isl parameter) nor long (ordinary words parse)
    import islpy as isl

    def parses(name):
        try:
            isl.Set.read_from_str(isl.DEFAULT_CONTEXT, f"[{name}] -> {{ : {name} >= 1 }}")
            return True
        except isl.Error:
            return False

    for word in tc_names.ISL_KEYWORDS:
        for spelled in (word, word.upper(), word.capitalize()):
            assert not parses(spelled), spelled
    for word in ["M", "N", "floor_", "modulo", "inf", "nan_", "e", "xor", "div", "K2"]:
        assert parses(word), word


def test_every_python_keyword_is_refused_and_soft_keywords_are_names():
    # `class` or `None` would be a syntax error in the source; `match`, `case`, `type`, `_` are soft keywords
    # (ordinary identifiers; `_` is refused as the generated code's)
    failures = refusals(keyword.kwlist, lambda api, bad: rf"^{WHAT[api]}: '{bad}' is a Python keyword, and names "
                                                         rf"become variables.*e\.g\. '{bad}_'$")
    failures += refusals([w for w in keyword.softkwlist if w != "_"], lambda api, n: None)
    assert not failures, "\n".join(failures)


NOT_IDENTIFIERS = ["A); import os #", 'A"', "A'", "a\nb", "A\n", "A\\", "A.b", "A[0]", "A b", "", " ", "\tA", "1A",
                   "A\x00", "名前", "ſ", "ﬁ", "Ａ", "Ⅸ", "A\u200b", "é", "A-B", "A\r", "A\u2028"]


def test_every_string_that_is_no_plain_ascii_identifier_is_refused_by_every_api():
    # quotes, newlines, code, NUL, non-ASCII letters (which Python would NFKC-fold: ſ -> s, ﬁ -> fi,
    # Ａ -> A) and zero-width characters never reach the source
    failures = refusals(NOT_IDENTIFIERS, lambda api, bad: rf"^{WHAT[api]}: {re.escape(repr(bad))} is not a valid "
                                                          rf"identifier; names become variables.*e\.g\. 'A' or 'k'$")
    failures += refusals([None, 3, b"A", ("A",)], lambda api, bad: rf"^{WHAT[api]}: expected a name \(str\), got "
                                                                  rf"{type(bad).__name__} {re.escape(repr(bad))}$")
    assert not failures, "\n".join(failures)


def test_odd_but_legal_names_are_accepted_by_every_api():
    # builtins the generated code does not use, soft keywords, names like the generated code's own
    # temporaries (the lowering keeps those apart: see the tables below), long names
    names = ["print", "len", "exec", "eval", "open", "globals", "match", "case", "type", "inf", "x", "e", "offs_i",
             "acc_S", "S_val", "Z_kernel", "stride_X_0", "io", "A_", "a1", "A" * 200]
    failures = refusals(names, lambda api, n: None)
    assert not failures, "\n".join(failures)


def test_lambda_parameters_are_normalized_by_python():
    # `ſ` NFKC-normalizes to `s`: Python names the parameter `s`, so the axis is the plain `s`
    X = tc.placeholder((4,), "float32", name="X")
    Z = tc.compute((4,), function_of(["ſ"], lambda a: X[a] * 2.0), name="Z")
    assert [a.name for a in Z.axis] == ["s"]
    with pytest.raises(tc.ArgumentError, match=r"axis name: '名前' is not a valid identifier"):
        tc.compute((4,), function_of(["名前"], lambda a: X[a] * 2.0), name="Z2")


# ---------------------------------------------------------------------------------------------
# names: the program every name below is tried in, its source's checks, and the lists shown to guard it

ROLES = ["placeholder", "compute", "size", "reduce_axis", "axis", "knob"]
NEUTRAL = "qq"  # a name nothing else in the programs uses: the control each odd name's source is compared with


def collision_program(role, name):
    """S[i] = sum_k X[i, k]; Z[i, j] = tanh(X[i, j]) + S[i] // 3 + X[i, j] % 2 (tiles, loops, temporaries,
    two kernels), with `name` given to the tensor, the compute, a size, an axis or a knob."""
    n = dict(placeholder="X", compute="S", size="M", reduce_axis="k", axis="i", knob="BN")
    n[role] = name
    M, N = tc.size_vars([n["size"], "N"])
    X = tc.placeholder((M, N), "float32", name=n["placeholder"])
    k = tc.reduce_axis(N, name=n["reduce_axis"])
    S = tc.compute((M,), function_of([n["axis"]], lambda i: tc.sum(X[i, k], axis=k)), name=n["compute"])
    Z = tc.compute((M, N), lambda a, b: tc.tanh(X[a, b]) + S[a] // 3.0 + X[a, b] % 2.0, name="Z")
    s = tc.create_schedule(Z)
    s[Z].split(Z.axis[1], tc.knob(n["knob"], [8]))
    return tc.build(s, [X, Z])


def collision_reference(x):
    return torch.tanh(x) + x.sum(1, keepdim=True) // 3.0 + x % 2.0


@pytest.fixture
def unchecked_primitives(monkeypatch):
    """Schedule primitives skip their own isl check (it is the same for every name): `tc.build` still checks
    the whole schedule once, so a table of a hundred names builds in a second or two."""
    from tilec.schedule import schedule as schedule_mod
    monkeypatch.setattr(schedule_mod, "_primitive_check", lambda sched, **kw: None)


def renamed(source: str, control: str) -> str | None:
    """None if `source` is `control` with its identifiers renamed one-to-one (comments aside) within each
    kernel, and the kernels' own names one-to-one among the module's names: the same program. Otherwise the
    first token where they differ, or the name that stands for two of the other's names (a user's name
    shadowing a generated one). Each kernel is a scope of its own: they never name each other's variables."""
    def tokens(text):
        return [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL)]

    a, b = tokens(source), tokens(control)
    module = ({}, {})
    there, back = module
    after_def = False
    for ta, tb in zip(a, b):
        if ta.type != tb.type or (ta.type != tokenize.NAME and ta.string != tb.string):
            return f"line {ta.start[0]}: {ta.string!r} where the control has {tb.string!r}"
        if ta.type != tokenize.NAME:
            continue
        if after_def:  # a kernel's name: the module's; what follows is the kernel's own scope
            there, back = module
        if there.setdefault(ta.string, tb.string) != tb.string:
            return f"line {ta.start[0]}: {ta.string!r} stands for both {there[ta.string]!r} and {tb.string!r}"
        if back.setdefault(tb.string, ta.string) != ta.string:
            return f"line {ta.start[0]}: {back[tb.string]!r} and {ta.string!r} both stand for {tb.string!r}"
        if after_def:
            there, back = {}, {}
        after_def = ta.string == "def" and ta.start[1] == 0
    return None if len(a) == len(b) else f"{len(a)} tokens, the control {len(b)}"


def test_renamed_sees_a_shadowing_name():
    # the comparison itself: a consistent renaming is the same program; a name reused for a second thing is
    # not; each kernel is a scope of its own (a kernel's parameter may take another kernel's or its own name)
    control = "def f(A, B):\n    x = A + 1  # A\n    return x * B\n\n\ndef g(C):\n    return C\n"
    assert renamed(control.replace("A", "qq"), control) is None
    assert renamed(control.replace("x", "x_1"), control) is None
    assert renamed(control.replace("C", "x"), control) is None
    assert renamed(control.replace("(C)", "(g)").replace("return C", "return g"), control) is None
    assert "stands for both" in renamed(control.replace("A", "x"), control)
    assert "stands for both" in renamed(control.replace("B", "x"), control)
    assert "both stand for" in renamed(control.replace("return x", "return y"), control)
    assert "stands for both" in renamed(control.replace("def g", "def f"), control)
    assert renamed(control.replace("+ 1", "- 1"), control) is not None


CALLS_OK = {"float"}  # builtins the generated code may call; everything else is tl.*, libdevice.* or .to()
STRINGS_OK = {"inf", "-inf", "ieee"}  # float("inf"); tl.dot(..., input_precision="ieee")
IMPORTS_OK = {"import triton", "import triton.language as tl", "from triton.language.extra import libdevice"}


def assert_clean_source(source: str):
    """The emitted module is the tilec template and nothing else: its own imports, one decorated function
    per kernel, calls only to tl/libdevice/float/.to, no strings but its own, ASCII identifiers."""
    compile(source, "<tilec>", "exec")
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert ast.unparse(node) in IMPORTS_OK, ast.unparse(node)
        else:
            assert isinstance(node, ast.FunctionDef), ast.unparse(node)
            assert [ast.unparse(d) for d in node.decorator_list] == ["triton.jit"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            root = f
            while isinstance(root, ast.Attribute):
                root = root.value
            ok = (isinstance(f, ast.Name) and f.id in CALLS_OK) or (isinstance(f, ast.Attribute) and f.attr == "to") \
                or (isinstance(root, ast.Name) and root.id in ("tl", "libdevice"))
            assert ok, ast.unparse(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value in STRINGS_OK, node.value
        elif isinstance(node, ast.Name):
            assert node.id.isascii() and node.id.isidentifier() and not node.id.startswith("_"), node.id
        elif isinstance(node, ast.arg):
            assert node.arg.isascii() and node.arg.isidentifier() and not node.arg.startswith("_"), node.arg
        elif isinstance(node, (ast.Lambda, ast.ClassDef, ast.Global, ast.Nonlocal, ast.With, ast.Try, ast.Delete)):
            raise AssertionError(ast.unparse(node))
    for line in source.splitlines():  # comments are single lines of the header or a loop's role
        assert line.isascii(), line


def name_in_program(role, name, controls):
    """Build the collision program with `name` in `role`: None if it is refused clearly (ArgumentError) or
    the lowering says the name is taken (LoweringError); else a failure line if its source is not clean or
    not the control's program renamed. `controls` caches the control (NEUTRAL in the role) per role."""
    reached = unicodedata.normalize("NFKC", name) if role == "axis" else name  # Python normalizes parameters
    try:
        kern = collision_program(role, name)
    except tc.ArgumentError as e:
        if not re.search(r"is not a valid identifier|is a Python keyword|is reserved|expected a name"
                         r"|axis names must differ|two different tensors", str(e)):
            return f"{role}={name!r}: {e}"
        return None
    except tc.LoweringError as e:
        if not re.search(rf"the name {re.escape(repr(reached))} is used for two different things in kernel \w+ "
                         r".*rename one", str(e)):
            return f"{role}={name!r}: {e}"
        return None
    except Exception as e:  # anything else: the name broke the build
        return f"{role}={name!r}: {type(e).__name__}: {e}"
    # accepted: then it is a plain ASCII identifier, the source is the template, and it is the control's
    # program with the name in the role (nothing the generated code names is shadowed)
    if not (reached.isascii() and reached.isidentifier() and not keyword.iskeyword(reached)
            and not reached.startswith("_")):
        return f"{role}={name!r} accepted as {reached!r}"
    if role not in controls:
        controls[role] = collision_program(role, NEUTRAL)
    failures = []
    sizes = {"size": reached} if role == "size" else {}
    try:  # the whole file a call runs, with its launch code (names passed by keyword), is Python
        compile(kern.file_text(**{sizes.get("size", "M"): 5, "N": 19}), "<tilec file>", "exec")
    except SyntaxError as e:
        failures.append(f"{role}={name!r}: the kernel file is no Python: {e}")
    for int64 in (False, True):
        source, control = kern._program(int64).source(), controls[role]._program(int64).source()
        try:
            assert_clean_source(source)
        except AssertionError as e:
            failures.append(f"{role}={name!r}{' (int64)' * int64}: not clean: {e}")
        if re.search(rf"\b{re.escape(reached)}\b", source) is None:
            failures.append(f"{role}={name!r}{' (int64)' * int64}: the name is not in the source")
        why = renamed(source, control)
        if why:
            failures.append(f"{role}={name!r}{' (int64)' * int64}: not the control's program renamed: {why}")
    return "\n".join(failures) or None


# names the generated code uses for itself: a user name equal to one is correct or refused clearly
GENERATED = ["offs_i", "mask_i", "offs_k", "acc_S", "S_val", "Z_val", "x_tile", "x", "e", "n", "d", "r", "io", "ii",
             "ko", "ki", "jo", "stride_X_0", "stride_Z_1", "Z_kernel", "S_kernel", "i", "j", "k", "N"]

# names that try to reach the emitted source
HOSTILE = ["A); import os #", 'A"', "A'", "a\nb", "A\n", "A\\", "A.b", "A[0]", "A b", "", " ", "\tA", "1A", "A\x00",
           "__import__", "__class__", "__init__", "_", "__", "_A", "名前", "ſ", "ﬁ", "Ａ", "Ⅸ", "A\u200b", "é",
           "class", "None", "True", "lambda", "import", "match", "case", "type", "print", "len", "exec", "eval",
           "open", "globals", "float", "int", "range", "abs", "tl", "triton", "libdevice", "torch", "pid", "self",
           "grid", "num_warps", "floor", "nan", "inf", "x", "e", "offs_i", "A" * 200]


@pytest.mark.slow
def test_name_the_generated_code_uses(unchecked_primitives):
    # each name the generated code gives a tile, loop, temporary, stride or kernel, given by the user to each
    # role: refused clearly, or the source is the control's program renamed one-to-one (nothing shadowed)
    controls = {}
    failures = [f for role in ROLES for name in GENERATED
                if not (name == "N" and role == "size")  # two sizes of one name are one size
                and (f := name_in_program(role, name, controls))]
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_hostile_name_never_reaches_the_source(unchecked_primitives):
    # every hostile name in every role: refused, or a plain identifier that reaches the source only as itself
    controls = {}
    failures = [f for role in ROLES for name in HOSTILE
                if not (role == "axis" and (not name.isidentifier() or keyword.iskeyword(name)))  # Python refuses it
                and (f := name_in_program(role, name, controls))]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("role,name", [("compute", "x"), ("axis", "e"), ("knob", "x_tile"), ("placeholder", "match"),
                                       ("size", "print"), ("reduce_axis", "ko"), ("axis", "ſ"), ("compute", "A" * 200),
                                       ("placeholder", "Z_kernel")],
                         ids=lambda v: ascii(v)[:12])
def test_odd_name_end_to_end(role, name):
    # a sample of the tables above, run (each role at least once, so each role's control program, which the
    # tables compare every accepted name's source with, is shown right): the name reaches the source and the
    # kernel is right; a tensor named like a kernel is launched through an alias of the kernel
    kern = collision_program(role, name)
    assert_clean_source(kern.source)
    assert unicodedata.normalize("NFKC", name) in kern.source
    x = torch.randn(5, 19)
    torch.testing.assert_close(kern(x), collision_reference(x), rtol=1e-5, atol=1e-5)


def test_name_the_generated_code_uses_refused_end_to_end():
    # a tensor named like the offsets of the axis it is indexed by: the lowering says so (no wrong kernel)
    with pytest.raises(tc.LoweringError, match=r"the name 'offs_i' is used for two different things in kernel S "
                                               r"\(a tensor, size, knob or axis\); rename one"):
        collision_program("placeholder", "offs_i")


GUARDED = [("placeholder", "grid", "LAUNCH_KEYWORDS"), ("placeholder", "warmup", "LAUNCH_KEYWORDS"),
           ("size", "num_warps", "LAUNCH_KEYWORDS"), ("placeholder", "tl", "RESERVED"),
           ("placeholder", "interpreter_semantic", "RESERVED"), ("size", "floor", "ISL_KEYWORDS")]


@pytest.mark.parametrize("role,name,table", GUARDED, ids=[f"{r}-{n}" for r, n, _ in GUARDED])
def test_the_name_lists_guard_the_generated_code(monkeypatch, role, name, table):
    # refused; with the name taken off its list the same program breaks (at build or in the launch); and the
    # suggested name works
    with pytest.raises(tc.ArgumentError, match=rf"'{name}' is reserved"):
        collision_program(role, name)
    x = torch.randn(5, 19)
    torch.testing.assert_close(collision_program(role, name + "_")(x), collision_reference(x), rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(tc_names, table, getattr(tc_names, table) - {name})
    kern = None
    with pytest.raises(Exception) as broke:  # noqa: PT011 - Triton's and isl's own errors, whatever they are
        kern = collision_program(role, name)
        if name == "interpreter_semantic" and kern.target != "interpreter":
            pytest.skip("only Triton's interpreter inserts interpreter_semantic")
        kern(x)
    assert not isinstance(broke.value, tc.ArgumentError), broke.value


def test_soft_keywords_and_builtin_names_work():
    # `match`, `case`, `type`, `print` are ordinary identifiers in generated code: accepted, and correct
    M, N = tc.size_vars(["match", "case"])
    X = tc.placeholder((M, N), "float32", name="type")
    Z = tc.compute((M, N), function_of(["print", "len"], lambda a, b: X[a, b] * 3.0), name="open")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    assert_clean_source(kern.source)
    x = torch.randn(3, 7)
    torch.testing.assert_close(kern(x), x * 3)


def test_isl_keyword_size_used_to_break_build():
    # the control: the same program with an ordinary size name builds and runs
    for name, ok in [("floor", False), ("floor_", True)]:
        try:
            (F,) = tc.size_vars([name])
        except tc.ArgumentError:
            assert not ok
            continue
        X = tc.placeholder((F,), "float32", name="X")
        Z = tc.compute((F,), lambda i, X=X: X[i] + 1.0, name="Z")
        x = torch.randn(5)
        torch.testing.assert_close(tc.build(tc.create_schedule(Z), [X, Z])(x), x + 1)


# names the fused GEMM's caches, accumulator and epilogue use, given to its tensors
GEMM_GENERATED = ["a_tile", "w_tile", "acc_C", "C_val", "Y_val", "x", "offs_i", "mask_j", "io", "stride_A_0", "C_local",
                  "A_shared", "C_kernel", "Y_kernel"]


@pytest.mark.slow
def test_name_the_fused_gemm_uses(unchecked_primitives):
    # cache_read tiles, the cache_write accumulator and the SiLU epilogue's temporary, named by the user:
    # refused clearly, or the control's program renamed one-to-one
    failures = []
    for role in ["A", "W", "Y"]:
        control = gemm_silu_kernel({role: NEUTRAL}).source
        for name in GEMM_GENERATED:
            try:
                kern = gemm_silu_kernel({role: name})
            except tc.LoweringError as e:
                if not re.search(rf"the name '{name}' is used for two different things", str(e)):
                    failures.append(f"{role}={name}: {e}")
                continue
            why = renamed(kern.source, control)
            if why:
                failures.append(f"{role}={name}: not the control's program renamed: {why}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("role,name", [("A", "a_tile"), ("W", "C_val")])
def test_name_the_fused_gemm_uses_end_to_end(unchecked_primitives, role, name):
    kern = gemm_silu_kernel({role: name})
    a, w = torch.randn(20, 40), torch.randn(40, 18)
    torch.testing.assert_close(kern(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("role,name", [("Y", "A_shared"), ("Y", "C_local")])
def test_a_tensor_named_like_a_cache_stage(role, name):
    # Y named A_shared (or C_local): the cache stage cache_read(A) (cache_write(C)) makes used to take the same
    # name, and the trace, which finds stages by name, placed Y where the cache was asked for (refused as
    # "compute_at(A_shared, ...) makes A_shared read C"); the cache now takes a name nothing has
    s, (A, W, C, Y), _ = design_schedule(tiles=(16, 16, 16), stages=None, names={role: name})
    assert {c.name for c in s.caches}.isdisjoint(s.stages)
    kern = tc.build(s, [A, W, Y])
    a, w = torch.randn(20, 40), torch.randn(40, 18)
    torch.testing.assert_close(kern(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# facts: tc.assume


def sizes():
    return tc.size_vars("M N")


@pytest.mark.parametrize("make,divisor", [(lambda M: M % 0 == 0, "0"), (lambda M: M // 0 >= 1, "0"),
                                          (lambda M: M % -4 == 0, "-4"), (lambda M: (M + 1) // -2 >= 1, "-2")],
                         ids=["mod0", "floordiv0", "mod-4", "floordiv-2"])
def test_assume_divisor_not_positive(make, divisor):
    # M % 0 used to raise ZeroDivisionError on every call
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=rf"tc.assume\(.*\): the divisor in .* must be a positive int "
                                               rf"\(got {divisor}\), e\.g\. M % 64 == 0"):
        tc.assume(make(M))
    assert M.facts == []


def test_assume_divisor_a_size():
    # isl reads no fact with a symbolic divisor (and it used to drop every other fact's mask proofs)
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=r"tc.assume\(\(\(M % N\) == 0\)\): the divisor in \(M % N\) must be a "
                                               r"positive int \(got N\)"):
        tc.assume(M % N == 0)


@pytest.mark.parametrize("make,bad", [(lambda M: M >= 0.5, "0.5"), (lambda M: M % 4.0 == 0, "4.0"),
                                      (lambda M: M % True == 0, "True"), (lambda M: M >= False, "False")],
                         ids=["float", "float-mod", "bool-mod", "bool"])
def test_assume_non_int_constant(make, bad):
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=rf"tc.assume\(.*\): {bad} is not an int; a fact compares integer "
                                               rf"expressions of sizes and ints, e\.g\. M >= 128"):
        tc.assume(make(M))


@pytest.mark.parametrize("fact", [True, False, None, "M >= 4", 3])
def test_assume_not_a_comparison(fact):
    with pytest.raises(tc.ArgumentError, match=r"tc.assume: expected a comparison of sizes, such as M % 64 == 0"):
        tc.assume(fact)


def test_assume_expression_not_a_comparison():
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=r"tc.assume: expected a comparison of sizes.*got \(M \+ 1\)"):
        tc.assume(M + 1)


@pytest.mark.parametrize("make,op,hint", [(lambda M, N: M / 2 >= 1, "/", "use // for division"),
                                          (lambda M, N: (M & 1).eq(0), "&", "isl reads no other"),
                                          (lambda M, N: (M > 1) >= 1, ">", "isl reads no other"),
                                          (lambda M, N: tc.maximum(M, N) >= 2, "max", "isl reads no other")],
                         ids=["truediv", "and", "nested-comparison", "maximum"])
def test_assume_operation_isl_cannot_read(make, op, hint):
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=rf"tc.assume\(.*\): .* uses {re.escape(op)}, but a fact may only use "
                                               rf"\+, -, \* by an int, and // and % by a positive int.*{hint}"):
        tc.assume(make(M, N))


def test_assume_product_of_sizes():
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=r"tc.assume\(\(\(M \* N\) >= 4\)\): \(M \* N\) multiplies two sizes; "
                                               r"isl can only use facts that are affine"):
        tc.assume(M * N >= 4)


def test_assume_of_an_axis_or_a_knob():
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=r"tc.assume: a fact may only use sizes and ints"):
        tc.assume(M >= tc.knob("B", [16]))
    X = tc.placeholder((M,), "int32", name="X")
    with pytest.raises(tc.ArgumentError, match=r"tc.assume: a fact may only use sizes and ints"):
        tc.assume(M >= X[0])


@pytest.mark.parametrize("make", [lambda M: M < 1, lambda M: M <= 0, lambda M: M.eq(0), lambda M: M.ne(M),
                                  lambda M: M - M >= 1, lambda M: M % 4 == 5, lambda M: 2 * M == 3],
                         ids=["<1", "<=0", "==0", "M!=M", "M-M>=1", "mod4==5", "2M==3"])
def test_assume_no_size_satisfies(make):
    # these used to be accepted, and then every call failed
    M, N = sizes()
    with pytest.raises(tc.ArgumentError, match=r"tc.assume\(.*\): no sizes satisfy it \(sizes are at least 1\), so "
                                               r"every call would fail; fix or drop it"):
        tc.assume(make(M))
    assert M.facts == []


def test_assume_contradicts_an_earlier_fact():
    M, N = sizes()
    tc.assume(M >= 8)
    tc.assume(N.eq(M * 2))
    with pytest.raises(tc.ArgumentError, match=r"tc.assume\(\(N <= 4\)\): no sizes satisfy it together with "
                                               r"tc.assume\(\(N == \(M \* 2\)\)\), tc.assume\(\(M >= 8\)\) \(sizes are "
                                               r"at least 1\)"):
        tc.assume(N <= 4)
    assert [repr(f) for f in N.facts] == ["(N == (M * 2))"]


def test_assume_accepted_facts_still_work():
    # the control: facts isl can read are kept, a kernel uses them to drop masks, and calls check them
    M, N = sizes()
    tc.assume(M % 64 == 0)
    tc.assume(2 * N + 1 >= 3)
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    x = torch.randn(64, 5)
    torch.testing.assert_close(kern(x), x * 2)
    with pytest.raises(tc.ArgumentError, match=r"the sizes M=63, N=5 break the fact tc.assume\(\(\(M % 64\) == 0\)\)"):
        kern(torch.randn(63, 5))


def test_assume_int64_constant():
    # an int past int32 is allowed in a fact (sizes can pass 2**31) and checked at call time as an int
    M, N = sizes()
    tc.assume(M <= 2**40)
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    x = torch.randn(7)
    torch.testing.assert_close(kern(x), x * 2)


def test_specialize_contradicting_a_fact():
    M, N = sizes()
    tc.assume(M % 64 == 0)
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] * 2.0, name="Z")
    with pytest.raises(tc.ArgumentError, match=r"specialize: M=100 breaks tc.assume\(\(\(M % 64\) == 0\)\)"):
        tc.build(tc.create_schedule(Z), [X, Z], specialize={"M": 100})


@pytest.mark.parametrize("spec,got", [("M=64", "str 'M=64'"), ([("M", 64)], r"list \[\('M', 64\)\]"), (64, "int 64")])
def test_specialize_not_a_dict(spec, got):
    M, N = sizes()
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] * 2.0, name="Z")
    with pytest.raises(tc.ArgumentError, match=rf"specialize: expected a dict of size name -> int, e\.g\. "
                                               rf"{{'N': 4096}}, got {got}"):
        tc.build(tc.create_schedule(Z), [X, Z], specialize=spec)


@pytest.mark.parametrize("value", [64.0, True, "64", None])
def test_specialize_value_not_an_int(value):
    M, N = sizes()
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] * 2.0, name="Z")
    with pytest.raises(tc.ArgumentError, match=rf"specialize: M must be a positive int, got {re.escape(repr(value))}"):
        tc.lower(tc.create_schedule(Z), specialize={"M": value})


def test_specialize_int_subclass_is_emitted_as_a_plain_int():
    class Size(enum.IntEnum):
        M = 8

    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] * 2.0, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z], specialize={"M": Size.M})
    assert "Size" not in kern.source and type(kern.specialize["M"]) is int
    x = torch.randn(8)
    torch.testing.assert_close(kern(x), x * 2)


# ---------------------------------------------------------------------------------------------
# knobs and configs


def knob_schedule():
    M, N = sizes()
    X = tc.placeholder((M, N), "float32", name="X")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Z")
    s = tc.create_schedule(Z)
    s[Z].split(Z.axis[1], tc.knob("BN", [16, 32]))
    return s, X, Z


@pytest.mark.parametrize("value", [16.0, True, "16", None, [16], 16.5])
@pytest.mark.parametrize("entry", ["lower", "build"])
def test_config_value_not_an_int(entry, value):
    # 16.0 == 16 used to pass, and Triton then failed on tl.arange(0, 16.0)
    s, X, Z = knob_schedule()
    with pytest.raises(tc.ArgumentError, match=rf"config BN={re.escape(repr(value))}: expected an int, one of the "
                                               rf"choices of knob 'BN': \[16, 32\]"):
        tc.lower(s, {"BN": value}) if entry == "lower" else tc.build(s, [X, Z], config={"BN": value})


@pytest.mark.parametrize("config,got", [("BN=16", "str 'BN=16'"), ([("BN", 16)], r"list \[\('BN', 16\)\]"),
                                        (16, "int 16")])
def test_config_not_a_dict(config, got):
    s, X, Z = knob_schedule()
    with pytest.raises(tc.ArgumentError, match=rf"config: expected a dict of knob name -> int, e\.g\. "
                                               rf"{{'BM': 128}}, got {got}"):
        tc.lower(s, config)


def test_config_name_not_a_str():
    s, X, Z = knob_schedule()
    with pytest.raises(tc.ArgumentError, match=r"config: knob names are strs, got 3 \(the schedule's knobs: BN\)"):
        tc.lower(s, {3: 16, "BN": 16})


def test_config_unknown_name_among_good_ones():
    s, X, Z = knob_schedule()
    with pytest.raises(tc.ArgumentError, match=r"config names 'BX', which the schedule does not use; its knobs are: BN"):
        tc.lower(s, {"BN": 16, "BX": 16})


def test_config_numpy_int_is_a_plain_int():
    np = pytest.importorskip("numpy")
    s, X, Z = knob_schedule()
    kern = tc.build(s, [X, Z], config={"BN": np.int64(32)})
    assert kern.config == {"BN": 32} and type(kern.config["BN"]) is int
    x = torch.randn(3, 40)
    torch.testing.assert_close(kern(x), x * 2)


def test_knob_choices_of_an_int_subclass_are_plain_ints():
    class Tile(enum.IntEnum):
        SMALL = 16
        LARGE = 32

    k = tc.knob("BN", [Tile.SMALL, Tile.LARGE])
    assert k.choices == (16, 32) and all(type(c) is int for c in k.choices)


@pytest.mark.parametrize("choices", [[16, 16.0], [16, "32"], {16, 32}, (c for c in [16])], ids=["float", "str", "set",
                                                                                                 "generator"])
def test_knob_odd_choices(choices):
    with pytest.raises(tc.ArgumentError, match=r"knob 'B': choices must be a non-empty list of positive ints"):
        tc.knob("B", choices)


# ---------------------------------------------------------------------------------------------
# constants in computes


def constant_kernel(dtype, value):
    N = tc.size_vars("N")
    X = tc.placeholder((N,), dtype, name="X")
    Z = tc.compute((N,), lambda i: X[i] + value, name="Z")
    return Z, tc.build(tc.create_schedule(Z), [X, Z])


@pytest.mark.parametrize("value", [3_000_000_000, -3_000_000_000, 2**62])
@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_int_constant_past_int32_computes_in_int64(dtype, value):
    # X[i] + 3_000_000_000 used to fail inside Triton ("Scalar 3000000000 is out of range for type int32")
    Z, kern = constant_kernel(dtype, value)
    assert Z.dtype == "int64"
    x = torch.randint(-100, 100, (37,), dtype=getattr(torch, dtype))
    got = kern(x)
    assert got.dtype == torch.int64
    assert torch.equal(got, x.to(torch.int64) + value)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_int_constant_past_int32_with_a_float(dtype):
    Z, kern = constant_kernel(dtype, 3_000_000_000)
    assert Z.dtype == dtype
    x = torch.randn(37).to(getattr(torch, dtype))
    torch.testing.assert_close(kern(x).float(), (x.float() + 3e9).to(getattr(torch, dtype)).float(),
                               rtol=1e-2, atol=0)


def test_int_constant_in_int32_range_stays_weak():
    # the control: an int that fits int32 does not widen an int32 tensor (as in torch)
    Z, kern = constant_kernel("int32", 2**31 - 1)
    assert Z.dtype == "int32"
    x = torch.randint(-5, 0, (9,), dtype=torch.int32)
    assert torch.equal(kern(x), x + (2**31 - 1))


@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 2**100])
def test_int_constant_past_int64(value):
    X = tc.placeholder((4,), "int64", name="X")
    with pytest.raises(tc.ArgumentError, match=rf"the int constant {value} does not fit in int64.*use a float"):
        X[0] + value


def test_nan_constant():
    # `nan` used to reach the source as a bare name (NameError inside Triton); now float("nan")
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    Z = tc.compute((N,), lambda i: tc.where(X[i] > 0.0, X[i], float("nan")), name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    assert 'float("nan")' in kern.source
    x = torch.randn(9)
    torch.testing.assert_close(kern(x), torch.where(x > 0, x, float("nan")), equal_nan=True)


@pytest.mark.parametrize("value", [1e39, -1e39, 1e-50, float("inf")])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_float_constant_past_float32(dtype, value):
    # rounds as torch rounds it: beyond float32's range it is inf, below its smallest value 0
    Z, kern = constant_kernel(dtype, value)
    x = (torch.randn(11) * 10).to(getattr(torch, dtype))
    torch.testing.assert_close(kern(x).float(), (x + value).float())


def test_numpy_and_enum_scalars_are_plain_numbers():
    # repr(np.float32(1.5)) is 'np.float32(1.5)' and repr of an IntEnum member is '<E.A: 3>': they would be
    # written into the source as they are
    np = pytest.importorskip("numpy")

    class E(enum.IntEnum):
        A = 3

    N = tc.size_vars("N")
    X = tc.placeholder((N,), "float32", name="X")
    Z = tc.compute((N,), lambda i: X[i] * np.float32(1.5) + np.int64(2) + E.A, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    assert "np." not in kern.source and "E.A" not in kern.source
    assert_clean_source(kern.source)
    x = torch.randn(6)
    torch.testing.assert_close(kern(x), x * 1.5 + 2 + 3)


@pytest.mark.parametrize("value", [1 + 2j, "1", None, torch.tensor(1.0)], ids=["complex", "str", "None", "tensor"])
def test_constant_not_a_number(value):
    X = tc.placeholder((4,), "float32", name="X")
    with pytest.raises(tc.ArgumentError, match=r"expected a tilec expression or a number"):
        X[0] * value


# ---------------------------------------------------------------------------------------------
# call time: out= aliasing an input or another output


def test_out_is_the_input_of_a_transpose(tr):
    # a transpose written into its own input used to give a silently wrong result
    x = torch.randn(8, 8)
    with pytest.raises(tc.ArgumentError, match=r"out T overlaps input X in memory: some elements of the input and the "
                                               r"written-to tensor refer to a single memory location.*pass an out "
                                               r"that shares no memory with the inputs"):
        tr(x, out=x)
    with pytest.raises(tc.ArgumentError, match=r"out T overlaps input X in memory"):
        tr(x, out=x.t())


def test_out_is_the_input_of_an_elementwise_op(ew):
    x = torch.randn(6, 8)
    before = x.clone()
    with pytest.raises(tc.ArgumentError, match=r"out Z overlaps input X in memory"):
        ew(x, out=x)
    assert torch.equal(x, before)  # nothing was written


def test_out_overlaps_part_of_an_input(ew):
    base = torch.randn(12, 8)
    with pytest.raises(tc.ArgumentError, match=r"out Z overlaps input X in memory"):
        ew(base[:6], out=base[3:9])
    with pytest.raises(tc.ArgumentError, match=r"out Z overlaps input X in memory"):
        ew(base[:6], base[5:11])  # outputs given positionally are checked too


def test_out_next_to_an_input_in_one_storage(ew):
    # the control: disjoint halves of one storage are fine, and a cached launch checks again
    base = torch.randn(12, 8)
    ref = base[:6] * 2 + 1
    assert ew(base[:6], out=base[6:]) is not None
    torch.testing.assert_close(base[6:], ref)
    with pytest.raises(tc.ArgumentError, match=r"out Z overlaps input X in memory"):
        ew(base[:6], out=base[:6])


def test_two_outputs_overlap():
    M, N = sizes()
    X = tc.placeholder((M, N), "float32", name="X")
    P = tc.compute((M, N), lambda i, j: X[i, j] + 1.0, name="P")
    Q = tc.compute((M, N), lambda i, j: X[i, j] * 2.0, name="Q")
    s = tc.create_schedule([P, Q])
    kern = tc.build(s, [X, P, Q])
    x, o = torch.randn(4, 4), torch.empty(4, 4)
    with pytest.raises(tc.ArgumentError, match=r"out P and out Q overlap in memory.*pass outputs that share no memory"):
        kern(x, out=[o, o])
    p, q = kern(x, out=[torch.empty(4, 4), torch.empty(4, 4)])  # the control
    torch.testing.assert_close(p, x + 1)
    torch.testing.assert_close(q, x * 2)


@pytest.mark.parametrize("out,got", [("abc", "str"), (3, "int"), ({"Z": None}, "dict")])
def test_out_not_a_tensor_or_a_list(ew, out, got):
    with pytest.raises(tc.ArgumentError, match=rf"out: expected a torch.Tensor or a list of them \(Z\), got {got}"):
        ew(torch.randn(2, 2), out=out)


# ---------------------------------------------------------------------------------------------
# call time: inputs may be any strided view (outputs must be dense)


def views():
    return {
        "sliced": torch.randn(6, 16)[:, ::2],
        "offset": torch.randn(9, 11)[3:, 3:],
        "transposed": torch.randn(8, 6).t(),
        "expanded-rows": torch.randn(6, 1).expand(6, 8),
        "expanded-cols": torch.randn(1, 8).expand(6, 8),
        "expanded-all": torch.randn(1, 1).expand(6, 8),
        "overlapping": torch.randn(20).as_strided((6, 8), (1, 1)),
        "overlapping-rows": torch.randn(30).as_strided((6, 8), (3, 1)),
        "size-1": torch.randn(1, 1),
        "size-1-odd-strides": torch.randn(1, 8).as_strided((1, 8), (1000, 1)),
    }


@pytest.mark.parametrize("view", list(views()))
def test_strided_input_view(ew, tr, rsum, view):
    x = views()[view]
    torch.testing.assert_close(ew(x), x * 2 + 1)
    torch.testing.assert_close(tr(x), x.t().contiguous())
    torch.testing.assert_close(rsum(x), x.sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["transposed", "expanded", "sliced", "overlapping"])
def test_strided_inputs_of_a_fused_gemm(gemm, layout):
    a = {"transposed": torch.randn(40, 20).t(), "expanded": torch.randn(20, 1).expand(20, 40),
         "sliced": torch.randn(20, 80)[:, ::2], "overlapping": torch.randn(100).as_strided((20, 40), (2, 1))}[layout]
    w = torch.randn(18, 40).t()
    torch.testing.assert_close(gemm(a, w), torch.nn.functional.silu(a @ w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad,what", [(lambda: torch.randn(6, 8).cpu().numpy(), "ndarray"), (lambda: None, "NoneType"),
                                      (lambda: 3, "int"), (lambda: [[1.0]], "list")])
def test_input_not_a_tensor(ew, bad, what):
    with pytest.raises(tc.ArgumentError, match=rf"X: expected a torch.Tensor, got {what}"):
        ew(bad())


def test_input_sparse(ew):
    x = torch.randn(4, 4).to_sparse()
    with pytest.raises(tc.ArgumentError, match=r"X: expected a dense \(strided\) tensor, got layout torch.sparse_coo; "
                                               r"convert it with \.to_dense\(\)"):
        ew(x)


def test_input_wrong_dtype_and_shape(ew):
    with pytest.raises(tc.ArgumentError, match=r"X: expected dtype float32, got float64"):
        ew(torch.randn(2, 2, dtype=torch.float64))
    with pytest.raises(tc.ArgumentError, match=r"X: expected 2 dimensions \[M, N\], got shape \(2, 2, 2\)"):
        ew(torch.randn(2, 2, 2))
    with pytest.raises(tc.ArgumentError, match=r"expected 1 input tensors \(X\), got 3"):
        ew(torch.randn(2, 2), torch.randn(2, 2), torch.randn(2, 2))


# ---------------------------------------------------------------------------------------------
# call time: zero-size dims (empty results, as torch gives them) and reductions over nothing


@pytest.mark.parametrize("shape", [(0, 8), (6, 0), (0, 0)])
def test_zero_size_elementwise_and_transpose(ew, tr, shape):
    x = torch.randn(shape)
    assert ew(x).shape == shape and tr(x).shape == shape[::-1]


def test_sum_over_an_empty_axis_is_zero(rsum):
    torch.testing.assert_close(rsum(torch.randn(6, 0)), torch.zeros(6))
    assert rsum(torch.randn(0, 5)).shape == (0,)


def test_sum_over_an_empty_axis_with_a_fact():
    # N % 16 == 0 holds for N = 0, and the mask it drops must not let the kernel read anything
    M, N = sizes()
    tc.assume(N % 16 == 0)
    X = tc.placeholder((M, N), "float32", name="X")
    k = tc.reduce_axis(N, name="k")
    R = tc.compute((M,), lambda i: tc.sum(X[i, k] * 2.0, axis=k), name="R")
    s = tc.create_schedule(R)
    s[R].split(R.reduce_axis[0], 16)
    kern = tc.build(s, [X, R])
    torch.testing.assert_close(kern(torch.randn(5, 0)), torch.zeros(5))
    torch.testing.assert_close(kern(x := torch.randn(5, 32)), (x * 2).sum(1), rtol=1e-5, atol=1e-5)


def test_gemm_with_an_empty_inner_dimension(gemm):
    torch.testing.assert_close(gemm(torch.randn(20, 0), torch.randn(0, 18)), torch.zeros(20, 18))


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_over_an_empty_axis(op):
    # torch raises for amax over nothing; the kernel used to return -inf (or inf)
    kern = reduction_kernel(op)
    with pytest.raises(tc.ArgumentError, match=rf"R: tc.{op} over k has no elements to reduce with N=0, and the "
                                               rf"{op} of nothing is undefined \(torch raises too\); call with N >= 1"):
        kern(torch.randn(3, 0))
    assert kern(torch.randn(0, 0)).shape == (0,)  # nothing to reduce and nothing to write: fine
    x = torch.randn(3, 5)
    torch.testing.assert_close(kern(x), getattr(x, f"a{op}")(1))


# ---------------------------------------------------------------------------------------------
# call time: autograd


def test_input_requires_grad(ew):
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(tc.ArgumentError, match=r"X requires grad, but tilec kernels do not record autograd; pass "
                                               r"X\.detach\(\) \(or call under torch\.no_grad\(\)\)"):
        ew(x)
    with torch.no_grad():  # the control: nothing is recorded, so nothing is lost
        torch.testing.assert_close(ew(x), x * 2 + 1)
    torch.testing.assert_close(ew(x.detach()), x.detach() * 2 + 1)


def test_out_requires_grad(ew):
    out = torch.empty(3, 4, requires_grad=True)
    with pytest.raises(tc.ArgumentError, match=r"out Z requires grad; an out= tensor cannot be differentiated "
                                               r"through \(as in torch\); pass one without requires_grad"):
        ew(torch.randn(3, 4), out=out)


# ---------------------------------------------------------------------------------------------
# the int64 index path (offsets past 2**31; the real sizes run in scripts/int64_check.py on a GPU)


@pytest.fixture
def small_limit(monkeypatch):
    """Pretend int32 offsets end at 100, so the int64 program is chosen for small tensors too."""
    monkeypatch.setattr(kernel_mod, "_INT32_LIMIT", 100)


def launched_int64(kern) -> bool:
    (call,) = kern._calls.values()
    mods = {fn.fn.__module__ if hasattr(fn, "fn") else fn.__module__ for fn in (launch.fn for launch in call[3])}
    int64 = {kernel_mod.load_module(prog.source()).__name__  # form: (int64, descriptors, the call's facts)
             for form, prog in kern._programs.items() if form[0]}
    return bool(mods) and mods <= int64


def test_int64_program_past_the_element_limit(small_limit):
    kern = elementwise_kernel()
    x = torch.randn(8, 16)  # 128 elements > 100
    torch.testing.assert_close(kern(x), x * 2 + 1)
    assert launched_int64(kern)


def test_int32_program_below_the_limit(small_limit):
    kern = elementwise_kernel()
    x = torch.randn(8, 10)  # 80 elements, offsets up to 79
    torch.testing.assert_close(kern(x), x * 2 + 1)
    assert not any(int64 for int64, *_ in kern._programs)  # keys: (int64, descriptors, the call's facts)
    assert not launched_int64(kern)


def test_int64_program_for_a_view_with_far_offsets(small_limit):
    kern = elementwise_kernel()
    x = torch.randn(4, 64)[:, ::32]  # 8 elements, but the last lies 224 elements past the first
    torch.testing.assert_close(kern(x), x * 2 + 1)
    assert launched_int64(kern)


def test_int64_program_for_an_expanded_input(small_limit):
    # 128 elements at offsets 0..15: conservative (numel decides) and right
    kern = elementwise_kernel()
    x = torch.randn(1, 16).expand(8, 16)
    torch.testing.assert_close(kern(x), x * 2 + 1)
    assert launched_int64(kern)


def test_int64_program_for_a_large_buffer_between_kernels(small_limit):
    # inputs and output of 12 elements, but the buffer P between the kernels has 144
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    P = tc.compute((M, M), lambda i, j: X[i] * X[j], name="P")
    k = tc.reduce_axis(M, name="k")
    R = tc.compute((M,), lambda i: tc.sum(P[i, k], axis=k), name="R")
    kern = tc.build(tc.create_schedule(R), [X, R])
    x = torch.randn(12)
    torch.testing.assert_close(kern(x), x * x.sum(), rtol=1e-5, atol=1e-5)
    assert launched_int64(kern)


@pytest.mark.parametrize("make", [elementwise_kernel, transpose_kernel, reduction_kernel, gemm_silu_kernel])
def test_int64_source_casts_every_offset(make):
    kern = make()
    wide, narrow = kern._program(True).source(), kern.source
    assert "int64" not in narrow
    # every offset is made of program ids and loop counters widened to int64 before any arithmetic
    pids = [line.strip() for line in wide.splitlines() if "tl.program_id(" in line]
    assert pids and all(line.endswith(".to(tl.int64)") for line in pids), pids
    loops = re.findall(r"for (\w+) in tl\.", wide)
    offs = [line.strip() for line in wide.splitlines() if re.match(r"\s*offs_\w+ = ", line)]
    assert offs
    for var in loops:
        for line in offs:
            assert not re.search(rf"(?<!tl\.cast\(){var}\b(?!, tl\.int64\))", line.split(" = ", 1)[1]), (var, line)
    assert_clean_source(wide)


def test_int64_offsets_are_computed_in_int64():
    N = tc.size_vars("N")
    X = tc.placeholder((N,), "int8", name="X")
    Z = tc.compute((N,), lambda i: X[i] + 1, name="Z")
    kern = tc.build(tc.create_schedule(Z), [X, Z])
    offs = [line.strip() for line in kern._program(True).source().splitlines() if re.match(r"\s*offs_\w+ = ", line)]
    assert offs and not any(re.search(r"tl\.cast\(\w+ \* ", line) for line in offs), offs
