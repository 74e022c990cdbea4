"""tilec inside PyTorch: a Kernel or a Tuned as a `torch.library` custom op, and CUDA-graph replay.

- `as_op(target, name)` registers `target` (a `Kernel` or a `Tuned`) as the operator `tilec::<name>`
  (or `<namespace>::<name>`) with `torch.library.custom_op`. The op takes the kernel's inputs and
  returns new output tensors (no `out=`); a kernel whose outputs are all in-place scatters (init=None,
  a KV-cache write) takes them after its inputs as tensors it updates (`Tensor(a!)` in its schema,
  `mutates_args`), returns nothing, and reads the sizes in no input's shape from their shapes. Its fake
  implementation, which `torch.compile`, `torch.export` and FakeTensor/meta tensors use, launches
  nothing: it binds the sizes from the inputs' shapes with the kernel's own `_bind` (the same
  dimension, dtype, shape, specialization and `tc.assume` checks as a call, so a wrong call fails
  while tracing) and allocates the outputs with `_outputs` (their shape expressions evaluated on
  those sizes: plain ints, or SymInts under dynamic shapes).
- Registering a name again returns the op already registered when the target is the same object
  (so re-running a script or notebook cell is harmless); another target under a registered name, or
  a name that torch already has from elsewhere, is refused with an `ArgumentError` (torch would
  silently replace the first op, leaving compiled graphs calling whichever registered last).
- The op has no autograd formula: inputs that require grad run, but backward raises torch's
  "no autograd formula" error. `op.register_autograd(...)` adds one (the returned `CustomOpDef`).
- `graphed(target, *example_inputs)` captures one call in a CUDA graph (static input buffers,
  static outputs) and returns a `Graphed`, whose calls copy new inputs into the static buffers and
  replay: for small calls repeated many times, where the host's launch time exceeds the GPU's.
  Each replay counts the tilec calls the graph holds in the open `tc.record` recordings (the capture,
  which runs no kernel, counts none). Without a CUDA device (Triton's interpreter) it raises a `TilecError`.
"""

from __future__ import annotations

import keyword
import re
import threading

import torch

from tilec.errors import ArgumentError, TilecError
from tilec.ir.expr import SizeVar
from tilec.runtime import calls as recording
from tilec.runtime import triton_compat

__all__ = ["Graphed", "as_op", "graphed", "registered_ops"]

DEFAULT_NAMESPACE = "tilec"
_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# namespaces torch owns (prim is refused by torch.library itself; the others hold torch's operators)
_RESERVED_NAMESPACES = {"aten", "prim", "prims", "torch", "quantized", "inductor", "higher_order"}
_REGISTRY: dict[str, tuple[object, object]] = {}  # qualified name -> (target, CustomOpDef)
_LOCK = threading.Lock()


def _parts(target):
    """(inputs, outputs, the Kernel whose _bind/_outputs the fake uses, whether it checks specialization)."""
    from tilec.runtime.kernel import Kernel

    if isinstance(target, Kernel):
        return target.inputs, target.outputs, target, True
    # a Tuned (tc.tune; the tune layer is above this one, so it is known by what it holds, not imported)
    kernels = getattr(target, "kernels", None)
    if isinstance(kernels, dict) and kernels and all(isinstance(k, Kernel) for k in kernels.values()):
        # every kernel of a plan has the same inputs and outputs; the per-shape ones are specialized
        # for their shape, which the fake must not hold other shapes to (the Tuned dispatches them)
        first = next(iter(target.kernels.values()))
        return first.inputs, first.outputs, first, False
    raise ArgumentError(f"as_op: expected a tilec Kernel (tc.build) or Tuned (tc.tune), got {type(target).__name__}")


def _qualified(name) -> str:
    if not isinstance(name, str):
        raise ArgumentError(f"as_op: the op name must be a str like 'mm_silu' or 'mylib::mm_silu', got {name!r}")
    namespace, sep, op = name.rpartition("::")
    namespace = namespace if sep else DEFAULT_NAMESPACE
    for what, part in (("namespace", namespace), ("name", op)):
        if not _IDENT.match(part) or keyword.iskeyword(part):
            raise ArgumentError(f"as_op: op {what} {part!r} (in {name!r}) is not an identifier: use letters, digits "
                                f"and underscores, starting with a letter (not a Python keyword), e.g. "
                                f"'mm_silu' or 'mylib::mm_silu'")
    if namespace in _RESERVED_NAMESPACES:
        raise ArgumentError(f"as_op: namespace {namespace!r} belongs to torch; register in your own namespace "
                            f"(default {DEFAULT_NAMESPACE!r})")
    if op == "name" or op == "default":  # torch.ops.<ns>.name is the namespace's name; .default an overload
        raise ArgumentError(f"as_op: op name {op!r} clashes with an attribute of torch.ops.{namespace}; pick another")
    return f"{namespace}::{op}"


def _torch_has(qualname: str) -> bool:
    namespace, _, op = qualname.partition("::")
    try:
        getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return False
    return True


def _schema(inputs, outputs, mutated=()) -> tuple[str, list[str]]:
    """`(Tensor A, Tensor W) -> Tensor`: the tilec names where they make schema argument names. The
    `mutated` outputs (in-place scatters) come after the inputs as written arguments, `Tensor(a!) C`, and
    the op returns nothing. Returns the schema and the mutated arguments' names."""
    names, seen = [], set()
    for i, t in enumerate([*inputs, *mutated]):
        n = t.name
        if not _IDENT.match(n) or keyword.iskeyword(n) or n in ("self", "out") or n in seen:
            n = f"x{i}"
        while n in seen:
            n = f"{n}_"
        seen.add(n)
        names.append(n)
    if mutated:
        args = [f"Tensor {n}" for n in names[:len(inputs)]]
        args += [f"Tensor({chr(ord('a') + k)}!) {n}" for k, n in enumerate(names[len(inputs):])]
        return f"({', '.join(args)}) -> ()", names[len(inputs):]
    ret = "Tensor" if len(outputs) == 1 else f"({', '.join('Tensor' for _ in outputs)})"
    return f"({', '.join(f'Tensor {n}' for n in names)}) -> {ret}", []


def _sizes_from_outputs(name, call_sizes, outputs) -> dict[str, tuple[int, int]]:
    """Where each size a call gives by name is a dimension of an in-place output (the tensor the op updates):
    size -> (output index, dimension). Refused where one is in none of their shapes."""
    where = {}
    for size in call_sizes:
        for i, t in enumerate(outputs):
            d = next((d for d, e in enumerate(t.shape) if isinstance(e, SizeVar) and e.name == size), None)
            if d is not None:
                where[size] = (i, d)
                break
        else:
            raise ArgumentError(f"as_op({name!r}): the size {size} is in no input's shape nor as a dimension of an "
                                f"updated tensor (a call gives it by name); a custom op reads its sizes from its "
                                f"tensors here. Give the kernel an input whose shape holds it")
    return where


def as_op(target, name: str):
    """Register a Kernel or Tuned as the custom op `tilec::<name>` (or `ns::name`) and return it (a
    `torch.library.CustomOpDef`: call it, or `torch.ops.tilec.<name>`, on the inputs; see the module
    docstring for what is checked and refused)."""
    inputs, outputs, shape_kernel, specialized = _parts(target)
    qualname = _qualified(name)
    if not inputs:
        raise ArgumentError(f"as_op({name!r}): the kernel has no input tensors, so a call says neither the device "
                            f"nor the sizes; a custom op needs at least one tensor input")
    in_place = [t for t in outputs if t.scatter is not None and t.scatter.init is None and t.scatter.into is None]
    if in_place and len(in_place) != len(outputs):
        new = [t.name for t in outputs if t not in in_place]
        verb = "updates" if len(in_place) == 1 else "update"
        noun = "is a new tensor" if len(new) == 1 else "are new tensors"
        raise ArgumentError(f"as_op({name!r}): {', '.join(t.name for t in in_place)} {verb} the out= tensor in place "
                            f"(a scatter with init=None) but {', '.join(new)} {noun}; an op here either updates all "
                            f"its outputs in place or returns them all: give the in-place scatters an init, or make "
                            f"two kernels")
    if shape_kernel.call_sizes and not in_place:
        raise ArgumentError(f"as_op({name!r}): the size {', '.join(shape_kernel.call_sizes)} is in no input's shape "
                            f"(a call gives it by name); a custom op reads its sizes from its tensors here. Give "
                            f"the kernel an input whose shape holds it")
    if in_place and shape_kernel is not target:
        raise ArgumentError(f"as_op({name!r}): a tuned plan of in-place scatters ({', '.join(t.name for t in in_place)})"
                            f"; make the op of the kernel (tc.tune tunes no in-place kernel)")
    size_at = _sizes_from_outputs(name, shape_kernel.call_sizes, in_place) if in_place else {}
    # Import Triton now, the way tilec needs it (with TRITON_INTERPRET=1 set first where there is no GPU):
    # torch.compile imports Triton itself, and a Triton imported without it cannot run the interpreter.
    triton_compat.triton()
    with _LOCK:
        known = _REGISTRY.get(qualname)
        if known is not None:
            if known[0] is target:
                return known[1]
            raise ArgumentError(f"as_op: {qualname} is already registered for another {type(known[0]).__name__}; "
                                f"give this one another name (torch would replace the first op, and graphs "
                                f"compiled with it would run this kernel)")
        if _torch_has(qualname):
            raise ArgumentError(f"as_op: torch already has an operator {qualname} (not registered by tilec.as_op); "
                                f"give another name or namespace")
        n_in, n_out = len(inputs), len(outputs)

        def run(tensors):
            if not in_place:
                return target(*tensors)
            given = {size: tensors[n_in + i].shape[d] for size, (i, d) in size_at.items()}
            target(*tensors[:n_in], out=list(tensors[n_in:]), **given)  # updated in place; the op returns nothing
            return None

        def impl(*tensors):
            if recording.SINKS and not recording.inside():  # tc.record: counted once, under the op's name
                with recording.counted_call():
                    out = run(tensors)
                sizes = shape_kernel.read_sizes(tensors[:n_in])
                sizes.update({size: int(tensors[n_in + i].shape[d]) for size, (i, d) in size_at.items()})
                recording.count(target, qualname, sizes)
            else:
                out = run(tensors)
            return out if n_out == 1 or out is None else tuple(out)

        def fake(*tensors):
            given = {size: tensors[n_in + i].shape[d] for size, (i, d) in size_at.items()}
            env = shape_kernel._bind(tensors[:n_in], check_device=False, check_specialize=specialized,
                                     given=given or None)
            if all(type(v) is int for v in env.values()):  # symbolic sizes (dynamic shapes) are not checked here
                shape_kernel._check_extents(env)
            if in_place:  # the updated tensors must have the shapes the sizes give them
                shape_kernel._outputs(list(tensors[n_in:]), env, tensors[0].device)
                return None
            outs = shape_kernel._outputs(None, env, tensors[0].device)
            return outs[0] if n_out == 1 else tuple(outs)

        schema, mutated = _schema(inputs, outputs, in_place)
        op = torch.library.custom_op(qualname, impl, mutates_args=mutated, schema=schema)
        op.register_fake(fake)
        _REGISTRY[qualname] = (target, op)
        return op


def registered_ops() -> dict[str, object]:
    """The ops `as_op` registered in this process: qualified name -> CustomOpDef."""
    with _LOCK:
        return {name: op for name, (_, op) in _REGISTRY.items()}


# -- CUDA graphs ---------------------------------------------------------------------------------

def _require_cuda(what: str) -> None:
    if triton_compat.target() != "cuda":
        raise TilecError(f"{what}: CUDA graphs need a CUDA device, but tilec runs kernels through Triton's "
                         f"interpreter here (no CUDA device, or TRITON_INTERPRET=1): there is nothing to capture; "
                         f"call the kernel directly")


class Graphed:
    """One call of a Kernel, Tuned or op captured in a CUDA graph. `g(*inputs)` copies the inputs into
    the static buffers `g.inputs` and replays the graph; it returns the static outputs `g.outputs`,
    which the next replay overwrites (`.clone()` what must be kept). Inputs must have the captured
    shapes, dtypes and device (strides may differ: they are copied). `g.replay()` replays without
    copying, for callers that write into `g.inputs` themselves."""

    def __init__(self, fn, example_inputs, warmup: int = 3, pool=None, name: str = "graphed"):
        _require_cuda(name)
        if not example_inputs or not all(isinstance(x, torch.Tensor) for x in example_inputs):
            raise ArgumentError(f"{name}: give the example input tensors (their shapes, dtypes and device are "
                                f"the graph's), got {[type(x).__name__ for x in example_inputs]}")
        for x in example_inputs:
            if x.device.type != "cuda":
                raise ArgumentError(f"{name}: example inputs must be CUDA tensors, got one on {x.device}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
            raise ArgumentError(f"{name}: warmup must be an int >= 1 (the calls before capture compile and "
                                f"prepare the launches), got {warmup!r}")
        self.name = name
        with torch.no_grad():
            # static buffers of their own: the caller's tensors may be freed or reused
            self.inputs = tuple(torch.empty_like(x, memory_format=torch.preserve_format).copy_(x)
                                for x in example_inputs)
            # Warm-up outside capture (torch.cuda.graphs' rule): the first call compiles (cuModuleLoadData
            # is not allowed while a stream captures) and prepares the launches the capture replays.
            side = torch.cuda.Stream(device=self.inputs[0].device)
            side.wait_stream(torch.cuda.current_stream(self.inputs[0].device))
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    fn(*self.inputs)
            torch.cuda.current_stream(self.inputs[0].device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            self.calls = recording.CallLog()  # the tilec calls the graph holds: tc.record counts them per replay
            with self.calls.capturing(), torch.cuda.graph(self.graph, pool=pool):
                self.outputs = fn(*self.inputs)

    def replay(self):
        self.graph.replay()
        self.calls.replay()
        return self.outputs

    def __call__(self, *tensors):
        if len(tensors) != len(self.inputs):
            raise ArgumentError(f"{self.name}: expected {len(self.inputs)} input tensors (as captured), got "
                                f"{len(tensors)}")
        for i, (x, s) in enumerate(zip(tensors, self.inputs)):
            if not isinstance(x, torch.Tensor):
                raise ArgumentError(f"{self.name}: input {i}: expected a torch.Tensor, got {type(x).__name__}")
            if x.shape != s.shape or x.dtype != s.dtype or x.device != s.device:
                raise ArgumentError(f"{self.name}: input {i} is {_describe(x)}, but the graph was captured for "
                                    f"{_describe(s)}; capture another graph (.graphed(...)) for other shapes")
        with torch.no_grad():
            for x, s in zip(tensors, self.inputs):
                if x is not s:
                    s.copy_(x)
        return self.replay()

    def __repr__(self) -> str:
        return f"<Graphed {self.name} for {', '.join(map(_describe, self.inputs))}>"


def _describe(x: torch.Tensor) -> str:
    return f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} on {x.device}"


def graphed(target, *example_inputs, warmup: int = 3, pool=None) -> Graphed:
    """Capture `target(*example_inputs)` (a Kernel, Tuned, op or any function of CUDA tensors that can be
    captured) in a CUDA graph; returns a `Graphed`. `pool`: a `torch.cuda.graph_pool_handle()` to share
    memory between graphs."""
    name = getattr(target, "_name", None) or type(target).__name__
    return Graphed(target, example_inputs, warmup=warmup, pool=pool, name=f"{name}.graphed")
