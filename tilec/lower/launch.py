"""The launch code of a lowered program, as Python text: what makes a kernel file run on its own.

`launch_source(program, inputs, outputs)` renders, after the `@triton.jit` kernels of `Program.source()`,
a `launch(...)` function that does what `tilec.runtime.Kernel` does for a call (read the sizes from the
inputs' shapes as `bound_sizes` says, the one reading of them, check the facts the kernels were lowered under, allocate the outputs, the buffers between
kernels and split_k's workspaces, compute each grid, pass strides, sizes and knob values, make tensor
descriptors) and a `main()` that runs it on random inputs, so that `python <file>.py M=100 N=64` runs the
kernels tilec wrote. tilec's own calls go through Kernel (checked arguments, cached launches); this text
is for people and for running a dumped file.

Every size expression is rendered with explicit parentheses from the ir (`_py`); an expression it cannot
render is a LoweringError, never a guess.
"""

from __future__ import annotations

from tilec.errors import LoweringError
from tilec.ir.expr import Binary, Const, SizeVar, Unary, show, size_text
from tilec.ir.tensor import Tensor

INTERPRETER_PROGRAMS = 3  # programs of a persistent kernel in Triton's interpreter (runtime.kernel's)

_CMP = ("<", "<=", ">", ">=", "==", "!=")


def _py(e, config: dict, size=lambda name: name) -> str:
    """Python text of an integer size expression; knobs become their values under `config`, each size
    `size(name)` (main() reads them from a dict)."""
    if isinstance(e, bool):
        return str(e)
    if isinstance(e, int):
        return str(e)
    if hasattr(e, "knob_name"):
        return str(int(config[e.knob_name]))
    if isinstance(e, Const):
        return str(int(e.value))
    if isinstance(e, SizeVar):
        return size(e.name)
    if isinstance(e, Binary):
        a, b = _py(e.a, config, size), _py(e.b, config, size)
        if e.op == "cdiv":
            return f"_cdiv({a}, {b})"
        if e.op in ("max", "min"):
            return f"{e.op}({a}, {b})"
        if e.op in ("+", "-", "*", "//", "%", "&", "|") or e.op in _CMP:
            op = {"&": "and", "|": "or"}.get(e.op, e.op)
            return f"({a} {op} {b})"
    if isinstance(e, Unary) and e.op == "-":
        return f"(-{_py(e.a, config, size)})"
    if isinstance(e, Unary) and e.op == "~":
        return f"(not {_py(e.a, config, size)})"
    raise LoweringError(f"launch code: cannot write the size expression {show(e)} as Python")


def _torch_dtype(dtype: str) -> str:
    return f"torch.{dtype}"


def _factors(e) -> list | None:
    """The factors of a product of sizes and positive ints (`3 * C`, `NH * HS`), or None for anything else."""
    if isinstance(e, SizeVar) or (isinstance(e, Const) and type(e.value) is int and e.value > 0):
        return [e]
    if isinstance(e, Binary) and e.op == "*":
        a, b = _factors(e.a), _factors(e.b)
        return None if a is None or b is None else a + b
    return None


def bound_sizes(inputs: list[Tensor]) -> dict[str, tuple[str, int, object]]:
    """How each size is read from the inputs' shapes: name -> (input, dimension, divisor). A size that is a plain
    dimension of an input is that dimension (divisor None, the first input holding it); a size that is the one
    unknown factor of a dimension that is a product (`(B, T, 3 * C)`, `NH * HS` with HS read elsewhere) is that
    dimension divided by the other factors (the divisor, an expression of ints and sizes read before it; the
    shape check then refuses a dimension it does not divide). In reading order: a divisor uses earlier sizes."""
    sizes: dict[str, tuple[str, int, object]] = {}
    for t in inputs:
        for d, e in enumerate(t.shape):
            if isinstance(e, SizeVar):
                sizes.setdefault(e.name, (t.name, d, None))
    changed = True
    while changed:
        changed = False
        for t in inputs:
            for d, e in enumerate(t.shape):
                factors = _factors(e)
                if factors is None or len(factors) < 2:
                    continue
                unknown = [f for f in factors if isinstance(f, SizeVar) and f.name not in sizes]
                if len(unknown) != 1 or sum(f is unknown[0] for f in factors) != 1:
                    continue
                others = [f for f in factors if f is not unknown[0]]
                divisor = others[0]
                for f in others[1:]:
                    divisor = Binary("*", divisor, f)
                sizes[unknown[0].name] = (t.name, d, divisor)
                changed = True
    return sizes


def call_sizes(tensors, inputs: list[Tensor]) -> list[str]:
    """The sizes of `tensors` (a schedule's: shapes and extents) that no input's shape gives (`bound_sizes`): a
    call passes them by name, `kernel(x, V=50257)`, as a runtime vocabulary size. In first-use order."""
    from tilec.ir.tensor import sizes_of

    bound = bound_sizes(inputs)
    return [n for n in sizes_of(list(tensors)) if n not in bound]


def read_sizes(inputs: list[Tensor], shapes: list) -> dict[str, int]:
    """The sizes' values for inputs of these `shapes` (`bound_sizes`' reading; a divisor of 0 reads 0). The values
    are the shapes' own (a torch.export trace's symbolic ints stay symbolic)."""
    from tilec.ir.expr import evaluate

    where = {t.name: n for n, t in enumerate(inputs)}
    env: dict[str, int] = {}
    for name, (t, d, divisor) in bound_sizes(inputs).items():
        dim = shapes[where[t]][d]
        if divisor is None:
            env[name] = dim
        else:
            by = evaluate(divisor, env)
            env[name] = 0 if isinstance(by, int) and by == 0 else dim // by
    return env


def launch_source(program, inputs: list[Tensor], outputs: list[Tensor],
                  example_sizes: dict | None = None) -> tuple[str, str]:
    """The launch code of `program` (its form: target, index width, descriptors, call facts) as Python
    text to append to `program.source()`: (the functions, the tail: _EXAMPLE_SIZES and the `__main__`
    guard). `inputs`/`outputs`: the kernel's arguments in call order; `example_sizes`: the sizes
    `main()` uses when the command line gives none (the tail is the only part that depends on them).

    The user's tensor and size names are the variables of `launch`; every other name it uses starts with
    '_', which no user name may (tilec.ir.names), and a kernel whose name a tensor or size also has is
    called through an alias, so no user name can shadow what the launch code calls."""
    config = dict(program.config)
    cfg = lambda e: _py(e, config)  # noqa: E731
    sched = program.sched
    sizes = bound_sizes(inputs)
    given = call_sizes(sched.tensors.values(), inputs)  # keyword arguments of `launch`
    in_names = [t.name for t in inputs]
    out_names = [t.name for t in outputs]
    users = set(in_names) | set(out_names) | set(program.buffers) | set(program.workspaces) | set(sizes) | set(given)
    users |= {p.name for k in program.kernels for p in k.params}
    kref = {k.name: f"_{k.name}" if k.name in users else k.name for k in program.kernels}

    def tup(items: list[str]) -> str:
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

    lines = [
        "",
        "",
        "# " + "-" * 98,
        "# launch code (tilec/lower/launch.py): the host side of the kernels above, as tilec runs them; run",
        "# this file (`python <file>.py M=100 ...`, sizes by name) to launch them on random inputs",
        "# " + "-" * 98,
        "import sys as _sys  # noqa: E402",
        "",
        "import torch  # noqa: E402",
        "",
    ]
    lines += [f"_{k} = {k}  # a tensor or size has this kernel's name" for k, ref in kref.items() if ref != k]
    lines += [
        "",
        "",
        "def _cdiv(a, b):",
        "    return -(-a // b)",
        "",
        "",
    ]
    keywords = given + [f"{n}=None" for n in out_names]
    sig = ", ".join(in_names + (["*"] + keywords if keywords else []))  # no inputs: (*, Y=None)
    ret = ", ".join(out_names) if out_names else "None"
    lines.append(f"def launch({sig}):")
    doc = (f"{ret} = launch({', '.join(in_names)}): the kernels of this file in order "
           f"({', '.join(k.name for k in program.kernels)}); outputs may be passed by keyword, else they are "
           f"allocated" + (f"; the sizes {', '.join(given)} are given by keyword (no input's shape holds them)"
                           if given else ""))
    lines.append(f'    """{doc}."""')
    lines.append(f"    _device = {in_names[0]}.device" if in_names else
                 "    _device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')")
    for name, (t, d, divisor) in sizes.items():
        lines.append(f"    {name} = {t}.shape[{d}]" + ("" if divisor is None else f" // max({cfg(divisor)}, 1)"))
    for name in given:
        lines.append(f"    if isinstance({name}, bool) or not isinstance({name}, int) or {name} < 0:")
        lines.append(f"        raise ValueError(f\"size {name} must be an int >= 0, got {{{name}!r}}\")")
    for t in inputs:
        shape = tup([cfg(e) for e in t.shape])
        lines.append(f"    if tuple({t.name}.shape) != {shape} or {t.name}.dtype != {_torch_dtype(t.dtype)}:")
        lines.append(f"        raise ValueError(f\"{t.name}: expected shape {{{shape}}} and {t.dtype}, got "
                     f"{{tuple({t.name}.shape)}} {{{t.name}.dtype}}\")")
    for name, value in sorted(program.specialize.items()):
        lines.append(f"    if {name} != {value}:")
        lines.append(f"        raise ValueError(f\"these kernels are specialized for {name}={value}, got {name}={{{name}}}\")")
    facts = [f for f in program.facts if not isinstance(f, tuple)]  # tc.assume's and the call's (Analysis)
    for fact in facts:
        lines.append(f"    if not {cfg(fact)}:")
        lines.append(f"        raise ValueError(\"these kernels were lowered for sizes where {size_text(fact)} holds; "
                     f"ask tilec for the file of these sizes (kernel.dump(**sizes))\")")
    for t in outputs:
        lines.append(f"    if {t.name} is None:")
        if t.scatter is not None and t.scatter.init is None and t.scatter.into is None:
            lines.append(f"        raise ValueError(\"{t.name} updates the tensor given in place (a scatter with "
                         f"init=None): pass {t.name}=\")")
            continue
        lines.append(f"        {t.name} = torch.empty({tup([cfg(e) for e in t.shape])}, "
                     f"dtype={_torch_dtype(t.dtype)}, device=_device)")
    for name in program.buffers:
        t = sched.tensors[name]
        lines.append(f"    {name} = torch.empty({tup([cfg(e) for e in t.shape])}, "
                     f"dtype={_torch_dtype(t.dtype)}, device=_device)  # between kernels")
    for name, (t, zeroed) in program.workspaces.items():
        make = "zeros" if zeroed else "empty"
        lines.append(f"    {name} = torch.{make}({tup([cfg(e) for e in t.shape])}, "
                     f"dtype={_torch_dtype(t.dtype)}, device=_device)  # split_k's partial sums")
    if not program.int64:
        every = in_names + out_names + list(program.buffers) + list(program.workspaces)
        lines.append(f"    if any(_x.numel() >= 2**31 for _x in {tup(every)}):")
        lines.append("        raise ValueError(\"this file is the 32-bit index form; a tensor has 2**31 elements or "
                     "more (tilec lowers an int64 form for such calls)\")")
    if program.form.descriptors and program.descriptors:
        lines.append("    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor")
    for k in program.kernels:
        lines.append(f"    # {k.name}: computes {', '.join(k.stages)}; stores {', '.join(k.outputs)}")
        spec = sched.tensors[k.root].scatter
        if spec is not None and spec.into is not None:
            lines.append(f"    {k.root}.copy_({spec.into.name})  # the scatter starts as a copy of {spec.into.name}")
        elif spec is not None and spec.init is not None:  # (a float as float('inf'), never a bare inf)
            value = f"float({str(spec.init)!r})" if isinstance(spec.init, float) else repr(spec.init)
            lines.append(f"    {k.root}.fill_({value})  # what the scatter starts as")
        lines.append(f"    _grid = {tup([cfg(g) for g in k.grid])}")
        if k.persistent:
            lines.append("    _programs = min(_grid[0], torch.cuda.get_device_properties(_device).multi_processor_count "
                         f"if _device.type == 'cuda' else {INTERPRETER_PROGRAMS})  # persistent: one per SM at most")
            lines.append("    _grid = (_programs,) + _grid[1:]")
        args = []
        for p in k.params:
            if p.kind == "tensor":
                args.append(f"{p.name}={p.name}")
            elif p.kind == "descriptor":
                if program.form.descriptors:
                    block = [int(b) if b.isdigit() else int(config[b]) for b in p.block]
                    args.append(f"{p.name}=_TensorDescriptor.from_tensor({p.tensor}, {block})")
            elif p.kind == "stride":
                args.append(f"{p.name}={p.tensor}.stride({p.dim})")
            elif p.kind == "size":
                args.append(f"{p.name}={p.name}")
            elif p.kind == "programs":
                args.append(f"{p.name}=_programs")
            elif p.kind == "constexpr":
                args.append(f"{p.name}={config[p.name]!r}")
            else:
                raise LoweringError(f"launch code: kernel {k.name}'s parameter {p.name} has unknown kind {p.kind!r}")
        args.append(f"num_warps={k.num_warps}")
        if program.target == "cuda":
            args.append(f"enable_fp_fusion={k.fp_fusion}")
        lines.append("    if 0 not in _grid:")
        lines.append(f"        {kref[k.name]}[_grid](")
        lines += [f"            {a}," for a in args]
        lines.append("        )")
    lines.append(f"    return {ret}")
    lines += [
        "",
        "",
        "def _random_tensor(shape, dtype, device):",
        '    """Fresh random values: normal floats (fp8 from float32), small ints, random bools."""',
        "    if dtype == torch.bool:",
        "        return torch.randint(0, 2, shape, device=device).bool()",
        "    if dtype.is_floating_point:",
        "        return torch.randn(shape, device=device).to(dtype)",
        "    return torch.randint(-8, 8, shape, device=device).to(dtype)",
        "",
        "",
        "def main(argv=None):",
        '    """Launch the kernels on random inputs: sizes from the command line (`M=100 N=64`), else _EXAMPLE_SIZES."""',
        "    _sizes = dict(_EXAMPLE_SIZES)",
        "    for _arg in _sys.argv[1:] if argv is None else argv:",
        "        _name, _, _value = _arg.partition('=')",
        "        if _name not in _NEEDED_SIZES or not _value.isdigit():",
        "            raise SystemExit(f'expected NAME=INT for the sizes {_NEEDED_SIZES}, got {_arg!r}')",
        "        _sizes[_name] = int(_value)",
        "    _missing = [_n for _n in _NEEDED_SIZES if _n not in _sizes]",
        "    if _missing:",
        "        raise SystemExit(f'give the sizes {_missing} on the command line, e.g. ' "
        "+ ' '.join(f'{_n}=64' for _n in _missing))",
        "    _device = 'cuda' if torch.cuda.is_available() else 'cpu'",
        "    torch.manual_seed(0)",
        "    _inputs = [",
    ]
    needed = list(sizes) + given
    for t in inputs:
        shape = tup([_py(e, config, lambda n: f"_sizes[{n!r}]") for e in t.shape])
        lines.append(f"        _random_tensor({shape}, {_torch_dtype(t.dtype)}, _device),  # {t.name}")
    lines.append("    ]")
    in_place = [t for t in outputs if t.scatter is not None and t.scatter.init is None and t.scatter.into is None]
    for t in in_place:  # a scatter that updates its out= tensor: random values to update
        shape = tup([_py(e, config, lambda n: f"_sizes[{n!r}]") for e in t.shape])
        lines.append(f"    {t.name}_given = _random_tensor({shape}, {_torch_dtype(t.dtype)}, _device)  # updated in place")
    keys = "".join(f", {n}=_sizes[{n!r}]" for n in given) + "".join(f", {t.name}={t.name}_given" for t in in_place)
    lines.append(f"    _outs = launch(*_inputs{keys})")
    lines.append("    _outs = _outs if isinstance(_outs, tuple) else (_outs,)")
    lines.append(f"    for _name, _x in zip({out_names!r}, _outs):")
    lines.append("        print(f'{_name}: shape {tuple(_x.shape)} {_x.dtype}, sum {_x.double().sum().item():.6g}')")
    lines.append("    return _outs")
    lines += ["", "", f"_NEEDED_SIZES = {needed!r}"]
    body = "\n".join(lines) + "\n"
    example = {n: int(example_sizes[n]) for n in needed if example_sizes and n in example_sizes}
    tail = f"_EXAMPLE_SIZES = {example!r}\n\nif __name__ == \"__main__\":\n    main()\n"
    return body, tail
