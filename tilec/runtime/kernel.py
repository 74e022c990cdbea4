"""`tc.build` and `Kernel`: compile the lowered Triton source, check call-time tensors, launch.

A Kernel checks its schedule once (the plan and its legality, which do not depend on sizes); a call
whose sizes give new facts (loops that run once, tiles that divide their extent) lowers that checked
plan under them, with no legality check, once per set of facts, and renders it in the index width the
call needs (int32, or int64 past 2**31). Triton itself caches compiled binaries per config and argument
specialization. Kernels that share source share the loaded module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from tilec.errors import ArgumentError, LoweringError, TilecError
from tilec.ir.expr import SizeVar, evaluate, size_text
from tilec.ir.tensor import Tensor
from tilec.lower.launch import bound_sizes, call_sizes, launch_source, read_sizes
from tilec.lower.passes import log_names
from tilec.lower.program import Program
from tilec.plan.check import at_sizes
from tilec.runtime import calls as recording
from tilec.runtime import triton_compat
from tilec.schedule.schedule import Schedule

_MODULES: dict[str, object] = {}
_INT32_LIMIT = 2**31 - 1


def cache_dir() -> Path:
    d = Path(os.environ.get("TILEC_CACHE_DIR", Path.home() / ".cache" / "tilec")) / "kernels"
    d.mkdir(parents=True, exist_ok=True)
    return d


def logs() -> set[str]:
    """The TILEC_LOGS switches set (`tilec/lower/passes.py`'s `LOGS`: `output_code` prints each generated
    module and its path as it is built); an unknown name is an error, not silence."""
    return log_names()


_INTERPRETER_PRELUDE = (
    "# Triton's interpreter form (made on a machine without a GPU): run it as it is, or with\n"
    "# TRITON_INTERPRET=1; the GPU form comes from `tilec lower FILE --target cuda`. Run on its own, it\n"
    "# gets Triton's interpreter's float32 -> bfloat16/float8 conversions, which do not round to nearest\n"
    "# as the GPU does (tilec's own runs replace them: tilec/runtime/triton_compat.py)\n"
    "import os\n\nos.environ.setdefault(\"TRITON_INTERPRET\", \"1\")\n"
)


def load_module(source: str, name: str = "tilec", launch: tuple[str, str] | None = None,
                interpreter: bool = False):
    """Load Triton source as a module (Triton's @jit needs the source in a real file), written to
    `<name>_<hash>.py` under the cache directory, followed by its launch code (`launch`: the functions and
    the tail of tilec.lower.launch.launch_source), so that the file runs on its own. Returns the module
    (its `__file__` is the path); the first launch code given for a source is the one its file keeps."""
    body = (_INTERPRETER_PRELUDE if interpreter else "") + source + (launch[0] if launch else "")
    key = hashlib.sha256(source.encode()).hexdigest()[:20]  # kernels that share source share the module
    if key not in _MODULES:
        triton_compat.triton()
        path = cache_dir() / f"{name[:48]}_{key[:12]}.py"
        if not path.exists() or not path.read_text().startswith(body):
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(body + (launch[1] if launch else ""))
            tmp.replace(path)
        if "output_code" in logs():
            print(f"tilec: kernel module {path}\n{path.read_text()}", file=sys.stderr, flush=True)
        spec = importlib.util.spec_from_file_location(f"tilec_kernels_{key}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _MODULES[key] = mod
    return _MODULES[key]


class Kernel:
    """A built schedule: call it on torch tensors. `.source` is the Triton code, `.config` the knobs.

    Made by `tc.build(s, args, config=...)`. `.inputs` and `.outputs` are the tensors of `args` (inputs,
    then outputs), `.program` the lowered program (`print(kernel.program)`: the loop nests),
    `.source_for(M=...)` the Triton code a call with those sizes runs, `.resources` the isl estimates.
    It prints as its signature and config.

    Args:
        sched: the schedule.
        args: the input placeholders and the output tensors the caller passes or gets back.
        config: knob name -> value; knobs it leaves out take their first choice.
        specialize: size name -> int, baked into the source as constants.

    Raises:
        ArgumentError: `args` misses an input or an output, names a tensor twice or one of another schedule,
            or the config or `specialize` is bad.
        IllegalScheduleError: the schedule would compute a wrong answer under this config.
        LoweringError: the schedule cannot be expressed in Triton under this config.

    Example:
        >>> kernel = tc.build(s, [A, W, Y], config={})
        >>> kernel  # doctest: +ELLIPSIS
        <Kernel C_kernel, Y_kernel: (A: float32[M, K], W: float32[K, N]) -> Y: float32[M, N]; ...>
    """

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]" for t in self.inputs)
        outs = ", ".join(f"{t.name}: {t.dtype}[{', '.join(map(str, t.shape))}]" for t in self.outputs)
        config = ", ".join(f"{k}={v}" for k, v in sorted(self.config.items())) or "none (no knobs)"
        spec = f"; specialized {', '.join(f'{k}={v}' for k, v in self.specialize.items())}" if self.specialize else ""
        names = ", ".join(k.name for k in self.program.kernels)
        return f"<Kernel {names}: ({ins}) -> {outs}; config {config}{spec}; target {self.target}>"

    def __init__(self, sched: Schedule, args, config=None, specialize=None):
        if not isinstance(args, (list, tuple)) or not all(isinstance(a, Tensor) for a in args):
            raise ArgumentError(f"argument 2, 'args' to build: expected a list of tensors (inputs, then "
                                f"outputs), got {args!r}")
        names = [a.name for a in args]
        if len(set(names)) != len(names):
            raise ArgumentError(f"build: a tensor is listed twice in args: {names}")
        for a in args:
            if sched.tensors.get(a.name) is not a and not a.is_placeholder:
                raise ArgumentError(f"build: {a.name} is not computed by this schedule (its stages: "
                                    f"{', '.join(sched.stages)})")
        self.inputs = [a for a in args if a.is_placeholder]
        self.outputs = [a for a in args if not a.is_placeholder]
        missing = [t.name for t in sched.placeholders if t not in self.inputs]
        if missing:
            raise ArgumentError(f"build: the schedule reads {', '.join(missing)}, so args must list it "
                                f"(args: {', '.join(names)})")
        for t in sched.outputs:
            if t not in self.outputs:
                raise ArgumentError(f"build: {t.name} is an output of the schedule; list it in args")
        # a scatter with init=None updates the out= tensor in place: it is an output, and every call passes out=
        self._in_place = [t.name for t in self.outputs if t.scatter is not None and t.scatter.init is None
                          and t.scatter.into is None]
        for t in sched.tensors.values():
            if t.scatter is not None and t.scatter.init is None and t.scatter.into is None and t not in self.outputs:
                raise ArgumentError(f"build: scatter {t.name} starts as the out= tensor's values (init=None), so it "
                                    f"must be an output (list it in args), or give it an init")
        self.sched = sched
        self._config_arg = config
        self.specialize = specialize  # checked (and made a dict of plain ints) by the first Program
        self.target = triton_compat.target()
        self._programs: dict[tuple, Program] = {}  # (int64, descriptors, the call's facts) -> program
        self._fingerprint = sched.fingerprint()  # the schedule as built: its checked plan serves every size
        self._calls: dict[tuple, tuple] = {}  # tensor shapes/strides/dtypes -> prepared launches
        self._in_names = [t.name for t in self.inputs]
        self._out_names = [t.name for t in self.outputs]
        self.program = self._program(False)
        self.specialize = dict(self.program.specialize)
        self.config = dict(self.program.config)
        self.path: Path | None = None  # the kernel file the last call ran (a runnable module: `dump`)
        self._sizes = bound_sizes(self.inputs)  # name -> (input, dimension, divisor): how a call reads it
        # the sizes no input's shape gives (a dimension, or a product of it with ints and sizes read from other
        # dimensions, such as 3 * C): each call gives them by name, kernel(x, V=50257)
        self.call_sizes = call_sizes(sched.tensors.values(), self.inputs)

    def _program(self, int64: bool, descriptors: bool = True, assume: tuple = ()) -> Program:
        """The program in the form a call needs: int64 indices past 2**31 (then pointer loads), tensor
        descriptors where the schedule asked for them and the tensors allow (else pointer loads), and
        lowered under `assume`, the facts of the call's sizes (`Plan.call_facts`: the loops that run once
        at them are no loops, so a row that fits one tile is read once)."""
        form = (int64, descriptors and not int64, tuple(size_text(f) for f in assume))
        if form not in self._programs:
            if form == (False, True, ()):  # the plan, checked once (legality does not depend on the sizes)
                self._programs[form] = Program(self.sched, self._config_arg, target=self.target,
                                               outputs=self.outputs, specialize=self.specialize)
            elif form[:2] == (False, True) and self.sched.fingerprint() == self._fingerprint:
                # the checked plan under the call's size facts: its loops that run once and its masks, no
                # legality check again (tilec.plan.check.at_sizes)
                checked = self._program(False, True).analysis
                self._programs[form] = Program(self.sched, target=self.target, analysis=at_sizes(checked, assume))
            elif form[:2] == (False, True):  # the schedule changed since the build: lowered and checked again
                self._programs[form] = Program(self.sched, self._config_arg, target=self.target,
                                               outputs=self.outputs, specialize=self.specialize, assume=assume)
            else:  # another rendering of the same kernels: nothing is lowered again
                self._programs[form] = self._program(False, True, assume).with_form(int64=int64,
                                                                                    descriptors=form[1])
        return self._programs[form]

    @property
    def source(self) -> str:
        """The Triton module this kernel runs (32-bit index form), for sizes that make no loop run once
        and no tile divide its extent; `source_for(**sizes)` for given sizes."""
        return self.program.source()

    def source_for(self, *, target: str | None = None, **sizes: int) -> str:
        """The Triton module a call with these sizes runs (32-bit index form): lowered under the facts the
        sizes give (`Plan.call_facts`: the loops that run once are no loops, the masks the tiles make
        unneeded are gone), as a call lowers it. `target`: "cuda" or "interpreter" (default: this
        machine's, as `.source`): `kernel.source_for(target="cuda", M=64, N=4096)` on a CPU is the GPU's."""
        from tilec.lower.program import TARGETS

        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ArgumentError(f"source_for: size {name} must be an int >= 0, got {value!r}")
        if target is not None and target not in TARGETS:
            raise ArgumentError(f"source_for: target must be one of {', '.join(TARGETS)}, got {target!r}")
        prog = self._program(False, True, self.program.plan.call_facts(dict(sizes)))
        return prog.with_form(target=target).source() if target and target != prog.target else prog.source()

    def _check_sizes(self, what: str, sizes: dict) -> dict[str, int]:
        """Sizes given by name for `what`: every size of the inputs, ints >= 0, meeting the kernel's facts."""
        need = list(bound_sizes(self.inputs)) + self.call_sizes
        missing = [n for n in need if n not in sizes]
        extra = [n for n in sizes if n not in need]
        if missing or extra:
            raise ArgumentError(f"{what}: give every size of the inputs ({', '.join(need) or 'none'}) and only those"
                                + (f"; missing {', '.join(missing)}" if missing else "")
                                + (f"; not a size of the inputs: {', '.join(extra)}" if extra else ""))
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ArgumentError(f"{what}: size {name} must be an int >= 0, got {value!r}")
        for name, value in self.specialize.items():
            if sizes.get(name) != value:
                raise ArgumentError(f"{what}: this kernel is specialized for {name}={value}, got {name}={sizes.get(name)}")
        for fact in self.program.facts:
            if not isinstance(fact, tuple) and not evaluate(fact, sizes):
                raise ArgumentError(f"{what}: the sizes break the fact tc.assume({fact}) of this kernel")
        return {n: sizes[n] for n in need}

    def file_text(self, *, target: str | None = None, **sizes: int) -> str:
        """The kernel file (Triton kernels and their launch code, see `dump`) that a call with contiguous
        inputs of these sizes runs, written for `target` ("cuda" or "interpreter"; default: this machine's)
        without running anything: on a CPU, `kernel.file_text(target="cuda", M=4096, K=4096, N=4096)` is the
        file the GPU would run. A size named `target` cannot be given here (use `dump`)."""
        from tilec.lower.program import TARGETS

        env = self._check_sizes("file_text", sizes)
        target = target or self.target
        if target not in TARGETS:
            raise ArgumentError(f"file_text: target must be one of {', '.join(TARGETS)}, got {target!r}")
        meta = {t.name: torch.empty([evaluate(e, env) for e in t.shape], dtype=getattr(torch, t.dtype), device="meta")
                for t in (*self.inputs, *self.outputs)}
        assume = self.program.plan.call_facts(env)
        prog = self._program(False, True, assume)
        for name in prog.buffers:
            t = self.sched.tensors[name]
            meta[name] = torch.empty([evaluate(e, env) for e in t.shape], dtype=getattr(torch, t.dtype), device="meta")
        for name, (t, _) in prog.workspaces.items():
            meta[name] = torch.empty([evaluate(e, env | prog.config) for e in t.shape], dtype=getattr(torch, t.dtype),
                                     device="meta")
        big = any(x.numel() > _INT32_LIMIT for x in meta.values())
        descriptors = not big and all(_descriptor_fits(meta[p.tensor], block_shape(p, prog.config))
                                      for _, p in prog.descriptors)
        prog = self._program(big, descriptors, assume).with_form(target=target)
        body, tail = launch_source(prog, self.inputs, self.outputs, env)
        return (_INTERPRETER_PRELUDE if target != "cuda" else "") + prog.source() + body + tail

    def dump(self, path: str | os.PathLike | None = None, **sizes: int) -> Path:
        """Write the kernel file a call with these sizes runs, with its launch code, and return its path:
        `python <path>` runs it on random inputs (`python <path> M=100 N=64` at other sizes of the same
        form; a size that breaks the facts it was lowered under is refused there).

        It calls the kernel once on fresh random inputs of these sizes (on this kernel's device), so the
        file is the very one a call runs (for another target's file, see `file_text`). `path`: copy it
        there too (else it stays in tilec's cache, `TILEC_CACHE_DIR`). `kernel.dump(M=100, K=64, N=32)`.

        Raises ArgumentError if a size of the inputs is missing, is not an int >= 0, or breaks a fact."""
        sizes = self._check_sizes("dump", sizes)
        device = "cuda" if self.target == "cuda" else "cpu"
        xs = []
        for t in self.inputs:
            shape = [evaluate(e, sizes) for e in t.shape]
            dt = getattr(torch, t.dtype)
            if dt == torch.bool:
                xs.append(torch.randint(0, 2, shape, device=device).bool())
            elif dt.is_floating_point:
                xs.append(torch.randn(shape, device=device).to(dt))
            else:
                xs.append(torch.randint(-8, 8, shape, device=device).to(dt))
        outs = None
        if self._in_place:  # a scatter that updates out= in place: random values for it to update
            outs = [torch.randn([evaluate(e, sizes) for e in t.shape], device=device).to(getattr(torch, t.dtype))
                    for t in self.outputs]
        with torch.no_grad():
            self(*xs, out=outs, **{n: sizes[n] for n in self.call_sizes})
        # the file's example sizes are the first call's of its form: these sizes, in the dumped copy
        text = re.sub(r"^_EXAMPLE_SIZES = .*$", lambda _: f"_EXAMPLE_SIZES = {sizes!r}", self.path.read_text(),
                      count=1, flags=re.M)
        out = Path(path) if path is not None else self.path
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(out)
        return out

    def lower(self) -> Program:
        return self.program

    @property
    def resources(self):
        """Footprints and shared-memory/register estimates per kernel under this config (isl)."""
        return self.program.analysis.resources

    def as_op(self, name: str):
        """Register this kernel as the torch custom op `tilec::<name>` (torch.compile, export, FakeTensor);
        tilec/runtime/custom_op.py."""
        from tilec.runtime.custom_op import as_op
        return as_op(self, name)

    def graphed(self, *example_inputs, warmup: int = 3, pool=None):
        """A call captured in a CUDA graph, replayed on copies of new inputs (CUDA only); custom_op.py."""
        from tilec.runtime.custom_op import graphed
        return graphed(self, *example_inputs, warmup=warmup, pool=pool)

    # -- call -----------------------------------------------------------------------------------
    def read_sizes(self, tensors) -> dict[str, int]:
        """The sizes these input tensors give (`tilec.lower.launch.bound_sizes`: a plain dimension, or a product's
        one unknown factor), unchecked: `_bind` checks the shapes against them."""
        return read_sizes(self.inputs, [x.shape for x in tensors])

    def given_sizes(self, sizes: dict) -> dict[str, int]:
        """The sizes a call gives by name (`call_sizes`: in no input's shape), checked: each of them, ints >= 0,
        and no other (a size an input's shape holds is read from it)."""
        for name in sizes:
            if name in self._sizes:
                t, d, _ = self._sizes[name]
                raise ArgumentError(f"size {name} is read from {t}'s shape (dimension {d}); give only the sizes no "
                                    f"input's shape holds ({', '.join(self.call_sizes) or 'none'})")
            if name not in self.call_sizes:
                raise ArgumentError(f"unexpected keyword {name}: not a size of this kernel; the sizes a call gives "
                                    f"by name are {', '.join(self.call_sizes) or 'none'} (the others are read from "
                                    f"the tensors' shapes)")
        missing = [n for n in self.call_sizes if n not in sizes]
        if missing:
            raise ArgumentError(f"size {', '.join(missing)} is in no input's shape, so the call gives it: "
                                f"kernel(..., {', '.join(f'{n}=...' for n in missing)})")
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ArgumentError(f"size {name} must be an int >= 0, got {value!r}")
        return {n: sizes[n] for n in self.call_sizes}

    def _bind(self, tensors, check_device: bool = True, check_specialize: bool = True,
              given: dict | None = None) -> dict[str, int]:
        """Check the input tensors and bind the sizes from their shapes. A custom op's fake implementation
        (tilec/runtime/custom_op.py) skips the device check (meta and fake tensors) and, for a Tuned, the
        specialization check (its per-shape kernels are dispatched by shape)."""
        device = None
        for t, x in zip(self.inputs, tensors):
            if not isinstance(x, torch.Tensor):
                raise ArgumentError(f"{t.name}: expected a torch.Tensor, got {type(x).__name__}")
            if x.layout != torch.strided:
                raise ArgumentError(f"{t.name}: expected a dense (strided) tensor, got layout {x.layout}; convert it "
                                    f"with .to_dense()")
            if x.dim() != t.ndim:
                raise ArgumentError(f"{t.name}: expected {t.ndim} dimensions [{', '.join(map(str, t.shape))}], got shape {tuple(x.shape)}")
            if str(x.dtype).removeprefix("torch.") != t.dtype:
                raise ArgumentError(f"{t.name}: expected dtype {t.dtype}, got {str(x.dtype).removeprefix('torch.')}")
            device = device or x.device
            if x.device != device:
                raise ArgumentError(f"{t.name} is on {x.device} but {self.inputs[0].name} is on {device}; "
                                    f"put all tensors on one device")
        want = "cuda" if self.target == "cuda" else "cpu"
        if check_device and device is not None and device.type != want:
            raise ArgumentError(f"tensors are on {device} but this kernel runs on {want} "
                                f"({'a CUDA device' if want == 'cuda' else 'Triton interpreter, no CUDA device'}); "
                                f"move them with .to({want!r})")
        env = self.read_sizes(tensors) | (given or {})
        for t, x in zip(self.inputs, tensors):
            want_shape = [evaluate(e, env) for e in t.shape]
            if list(x.shape) != want_shape:
                bound = f" with {', '.join(f'{k}={v}' for k, v in env.items())}" if env else ""
                raise ArgumentError(f"{t.name}: expected shape {tuple(want_shape)} ({_shape_text(t)}{bound}), "
                                    f"got {tuple(x.shape)}")
        for name, value in (self.specialize if check_specialize else {}).items():
            if env.get(name) != value:
                raise ArgumentError(f"this kernel is specialized for {name}={value}, but the tensors give "
                                    f"{name}={env.get(name)}; build another kernel for that size")
        for fact in self.program.facts:
            if not isinstance(fact, tuple) and not evaluate(fact, env):
                raise ArgumentError(f"the sizes {', '.join(f'{k}={v}' for k, v in env.items())} break the fact "
                                    f"tc.assume({fact}) this kernel was compiled with (its masks rely on it)")
        return env

    def __call__(self, *tensors: torch.Tensor, out: torch.Tensor | list[torch.Tensor] | None = None,
                 **sizes: int) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run the kernels on torch tensors: the inputs in `args` order, returning the output (a tuple of
        them for several), allocated, or written into `out=` (or passed after the inputs). A size that no
        input's shape holds (`kernel.call_sizes`, such as a runtime vocabulary size) is given by name:
        `kernel(x, V=50257)`.

        The first call with given shapes, strides and dtypes checks everything (shapes against the
        sizes and `tc.assume` facts, dtypes, device, dense layout) and keeps the launches; later calls
        with the same ones reuse them. Every call checks autograd and that `out=` shares no memory with
        the inputs.

        Args:
            *tensors: the input tensors (then, optionally, the output tensors).
            out: an output tensor, or a list of them, to write instead of allocating.
            **sizes: the sizes in no input's shape (`call_sizes`), by name; no others.

        Returns:
            The output tensor, or a tuple of them when the kernel has several outputs.

        Raises:
            ArgumentError: a tensor of the wrong number of dimensions, shape, dtype, device or layout;
                sizes that break a fact or a specialization; an input or `out=` that requires grad; an `out=`
                that overlaps an input; a size of `call_sizes` missing, or another size given.

        Example:
            >>> kernel = tc.build(s, [A, W, Y])
            >>> a, w = torch.randn(40, 24), torch.randn(24, 20)
            >>> y = kernel(a, w)
            >>> y.shape, torch.allclose(y, torch.nn.functional.silu(a @ w), atol=1e-4)
            (torch.Size([40, 20]), True)
        """
        if torch.compiler.is_compiling():  # torch.compile tracing this call: it cannot trace a launch
            _refuse_compile(self)
        given = self.given_sizes(sizes) if sizes or self.call_sizes else {}
        n_in, n_out = len(self.inputs), len(self.outputs)
        positional = len(tensors) == n_in + n_out and out is None
        if positional:
            tensors, out = tensors[:n_in], tensors[n_in:]
        if len(tensors) != n_in:
            raise ArgumentError(f"expected {n_in} input tensors ({', '.join(t.name for t in self.inputs)}), "
                                f"got {len(tensors)}")
        if out is None and self._in_place:
            raise ArgumentError(f"{', '.join(self._in_place)} updates the out= tensor in place (a scatter with "
                                f"init=None): pass out= (the tensor to update), or give the scatter an init")
        if out is None or isinstance(out, (list, tuple)):
            outs_given = None if out is None else list(out)
        elif isinstance(out, torch.Tensor):
            outs_given = [out]
        else:
            raise ArgumentError(f"out: expected a torch.Tensor or a list of them "
                                f"({', '.join(self._out_names)}), got {type(out).__name__}")
        try:  # what Triton specializes a kernel on: shapes, strides, dtypes and 16-byte alignment
            key = tuple((x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16 == 0)
                        if isinstance(x, torch.Tensor) else id(x) for x in (*tensors, *(outs_given or ())))
            key += tuple(given.items())
        except (RuntimeError, NotImplementedError):  # a tensor without strides (sparse): _prepare refuses it
            key = None
        # tensor descriptors need 16-byte aligned tensors: the key says so, and _aligned decides the form
        descriptors = bool(self.program.descriptors) and key is not None and self._aligned(tensors, outs_given)
        call = self._calls.get((key, descriptors))
        if call is None:  # first call with these shapes: check everything, then remember the launches
            if self.target == "cuda" and torch.cuda.is_current_stream_capturing():
                _refuse_capture(self)
            try:
                call = self._prepare(tensors, outs_given, descriptors, given)
            except ArgumentError as e:
                if positional and str(e).startswith("out"):  # say why a tensor was taken as an output
                    raise ArgumentError(f"{e} (the call passed {n_in + n_out} tensors: after the {n_in} input(s) "
                                        f"{', '.join(t.name for t in self.inputs)}, the rest are taken as the "
                                        f"output(s) {', '.join(self._out_names)})") from None
                raise
            if len(self._calls) < 256 and key is not None:
                self._calls[key, descriptors] = call
        device, out_shapes, buffer_shapes, launches, extents, self.path = call
        # what the key does not hold is checked on every call: autograd, and where out= points
        if torch.is_grad_enabled():
            self._check_no_grad(tensors, outs_given)
        if outs_given is not None:
            self._check_no_overlap(tensors, outs_given, extents)
        if outs_given is None:
            outs = [torch.empty(shape, dtype=dt, device=device) for shape, dt in out_shapes]
        else:
            outs = outs_given
        buffers = dict(zip(self._in_names, tensors)) | dict(zip(self._out_names, outs))
        for name, shape, dt, zeroed in buffer_shapes:  # zeroed: split_k's atomic workspace
            buffers[name] = (torch.zeros if zeroed else torch.empty)(shape, dtype=dt, device=device)
        for launch in launches:
            launch(buffers)
        if recording.SINKS and not recording.inside():  # tc.record: a call of these sizes (record.py)
            recording.count(self, "_".join(self._out_names), self.read_sizes(tensors) | given)
        return outs[0] if n_out == 1 else tuple(outs)

    def _check_no_grad(self, tensors, outs) -> None:
        for t, x in zip(self.inputs, tensors):
            if x.requires_grad:
                raise ArgumentError(f"{t.name} requires grad, but tilec kernels do not record autograd; pass "
                                    f"{t.name}.detach() (or call under torch.no_grad())")
        for t, x in zip(self.outputs, outs or ()):
            if x.requires_grad:
                raise ArgumentError(f"out {t.name} requires grad; an out= tensor cannot be differentiated "
                                    f"through (as in torch); pass one without requires_grad")

    def _check_no_overlap(self, tensors, outs, extents) -> None:
        """Refuse an out= that shares memory with an input or another out (conservatively: overlapping byte
        ranges), as torch does: the kernel would read what it has already overwritten. `extents`: the bytes
        each input, then each output, spans from its first element (0 if it has none)."""
        starts = [x.data_ptr() for x in tensors]
        spans = [(t.name, (p, p + n)) for t, p, n in zip(self.inputs, starts, extents) if n]
        written = []
        for t, o, n in zip(self.outputs, outs, extents[len(tensors):]):
            if not n:
                continue
            p = o.data_ptr()
            so = (p, p + n)
            for name, sx in spans:
                if so[0] < sx[1] and sx[0] < so[1]:
                    raise ArgumentError(
                        f"out {t.name} overlaps input {name} in memory: some elements of the input and the "
                        f"written-to tensor refer to a single memory location, so the kernel would read values "
                        f"it has already overwritten; pass an out that shares no memory with the inputs (e.g. "
                        f"torch.empty_like(...)) or leave out= unset")
            for name, sw in written:
                if so[0] < sw[1] and sw[0] < so[1]:
                    raise ArgumentError(f"out {name} and out {t.name} overlap in memory: some elements of both "
                                        f"refer to a single memory location; pass outputs that share no memory")
            written.append((t.name, so))

    def _check_extents(self, env) -> None:
        """Dimensions may be 0 (empty results, as in torch) but not negative; a max/min over nothing has no
        value (torch raises), unless there is nothing to write either."""
        def sizes_text(*exprs):
            names = sorted({n.name for e in exprs for n in _size_vars(e)})
            return names, ", ".join(f"{n}={env[n]}" for n in names)

        for t in self.sched.tensors.values():
            shape = [evaluate(e, env) for e in t.shape]
            if any(d < 0 for d in shape):
                names, got = sizes_text(*t.shape)
                raise ArgumentError(f"{t.name}: its shape {_shape_text(t)} is {tuple(shape)} for {got}; call "
                                    f"with sizes that make every dimension at least 0")
            for a in t.reduce_axis:
                extent = evaluate(a.extent, env)
                names, got = sizes_text(a.extent)
                if extent < 0:
                    raise ArgumentError(f"{t.name}: reduce axis {a.name} has extent {extent} for {got}; call with "
                                        f"sizes that make it at least 0")
                if extent == 0 and t.body.op in ("max", "min") and 0 not in shape:
                    op, fix = t.body.op, " and ".join(f"{s} >= 1" for s in names) or "a non-empty axis"
                    raise ArgumentError(f"{t.name}: tc.{op} over {a.name} has no elements to reduce with {got}, "
                                        f"and the {op} of nothing is undefined (torch raises too); call with {fix}")

    def _aligned(self, tensors, outs) -> bool:
        """Whether the tensors given that descriptors read (inputs; an out= that a later kernel reads) start
        at 16-byte aligned addresses (TMA's rule; strides and shapes are checked once per shape, in _prepare)."""
        read = {p.tensor for _, p in self.program.descriptors}
        given = [*zip(self.inputs, tensors), *zip(self.outputs, outs or ())]
        return all(x.data_ptr() % 16 == 0 for t, x in given if t.name in read and isinstance(x, torch.Tensor))

    def _prepare(self, tensors, outs_given, descriptors: bool = False, given: dict | None = None):
        """Check the tensors, bind the sizes (read from their shapes, and `given` at the call), pick the index
        width and the load form (descriptors where every tensor a descriptor reads meets TMA's rules, else
        pointers), and precompute every launch."""
        env = self._bind(tensors, given=given)
        self._check_extents(env)
        device = tensors[0].device if tensors else torch.device("cuda" if self.target == "cuda" else "cpu")
        outs = self._outputs(outs_given, env, device)
        buffers = {t.name: x for t, x in zip(self.inputs, tensors)} | {t.name: x for t, x in zip(self.outputs, outs)}
        big = any(x.numel() > _INT32_LIMIT or _max_offset(x) > _INT32_LIMIT for x in buffers.values())
        assume = self.program.plan.call_facts(env)  # the loops that run once at these sizes
        prog = self._program(big, True, assume)
        buffer_shapes = []
        for name in prog.buffers:
            t = self.sched.tensors[name]
            shape = [evaluate(e, env) for e in t.shape]
            buffer_shapes.append((name, shape, getattr(torch, t.dtype), False))
            buffers[name] = torch.empty(shape, dtype=getattr(torch, t.dtype), device=device)
        for name, (t, zeroed) in prog.workspaces.items():  # split_k's partial sums (tilec/lower/program.py)
            shape = [evaluate(e, env | prog.config) for e in t.shape]
            buffer_shapes.append((name, shape, getattr(torch, t.dtype), zeroed))
            buffers[name] = (torch.zeros if zeroed else torch.empty)(shape, dtype=getattr(torch, t.dtype), device=device)
        big = big or any(_max_offset(x) > _INT32_LIMIT for x in buffers.values())
        # every tensor a descriptor reads, the buffers between kernels too (fuzz seed 6001274: a (33, 5)
        # bool buffer, its 5-byte rows no multiple of 16), meets TMA's rules, or the call reads by pointers
        descriptors = descriptors and not big and all(
            _descriptor_fits(buffers[p.tensor], block_shape(p, prog.config)) for _, p in prog.descriptors)
        prog = self._program(big, descriptors, assume)
        mod = load_module(prog.source(), "_".join(self._out_names) or "tilec",
                          launch_source(prog, self.inputs, self.outputs, env), interpreter=prog.target != "cuda")
        values = env | prog.config
        launches = []
        for k in prog.kernels:
            spec = self.sched.tensors[k.root].scatter
            if spec is not None and (spec.init is not None or spec.into is not None):  # what it starts as
                launches.append(_Fill(k.root, spec.init, None if spec.into is None else spec.into.name))
            grid = tuple(evaluate(g, values) for g in k.grid)
            if 0 in grid:
                continue
            for d, g in enumerate(grid[1:], start=1):
                if g > 65535:
                    raise LoweringError(f"{k.name}: program_id.{d} would need {g} programs, but Triton allows "
                                        f"65535 on grid dims 1 and 2; bind the larger axis to program_id.0 "
                                        f"(or fuse the grid axes)")
            static, tensor_params, descs = {"num_warps": k.num_warps}, [], []
            if k.persistent:  # grid[0] tiles run by at most one program per SM
                grid = (min(grid[0], sm_count(device)),) + grid[1:]
            for p in k.params:
                if p.kind == "tensor":
                    tensor_params.append(p.name)
                elif p.kind == "programs":
                    static[p.name] = grid[0]
                elif p.kind == "descriptor":
                    if prog.form.descriptors:  # made per call: a descriptor holds the tensor's address
                        descs.append((p.name, p.tensor, block_shape(p, prog.config)))
                elif p.kind == "stride":
                    static[p.name] = buffers[p.tensor].stride(p.dim)
                elif p.kind == "size":
                    static[p.name] = env[p.name]
                else:
                    static[p.name] = prog.config[p.name]
            if self.target == "cuda":
                # No mul+add -> fma contraction: each float32 operation rounds as in the unfused
                # program (and in eager PyTorch), which keeps fused kernels bit-compatible; but a kernel
                # with an online rewrite (its rounding is the rewrite's) contracts (KernelIR.fp_fusion).
                static["enable_fp_fusion"] = k.fp_fusion
            launches.append(_Launch(getattr(mod, k.name), grid, static, tensor_params, descs))
        out_shapes = [(list(x.shape), x.dtype) for x in outs]
        extents = tuple(_extent(x) for x in (*tensors, *outs))
        return device, out_shapes, buffer_shapes, launches, extents, Path(mod.__file__)

    def _outputs(self, out, env, device):
        shapes = [[evaluate(e, env) for e in t.shape] for t in self.outputs]
        if out is None:
            return [torch.empty(s, dtype=getattr(torch, t.dtype), device=device) for t, s in zip(self.outputs, shapes)]
        if len(out) != len(self.outputs):
            raise ArgumentError(f"out: expected {len(self.outputs)} tensor(s) "
                                f"({', '.join(t.name for t in self.outputs)}), got {len(out)}")
        for t, s, x in zip(self.outputs, shapes, out):
            if not isinstance(x, torch.Tensor):
                raise ArgumentError(f"out {t.name}: expected a torch.Tensor, got {type(x).__name__}")
            if x.layout != torch.strided:
                raise ArgumentError(f"out {t.name}: expected a dense (strided) tensor, got layout {x.layout}; "
                                    f"pass one made with torch.empty(...)")
            if list(x.shape) != s or str(x.dtype).removeprefix("torch.") != t.dtype:
                raise ArgumentError(f"out {t.name}: expected shape {tuple(s)} and dtype {t.dtype}, got "
                                    f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}")
            if x.device != device:
                raise ArgumentError(f"out {t.name} is on {x.device}, the inputs on {device}")
            if not _dense(x):
                raise ArgumentError(f"out {t.name}: its strides {x.stride()} make elements overlap or leave "
                                    f"gaps; pass a dense tensor (e.g. torch.empty(...) or .contiguous())")
        return out


class _Fill:
    """Before a scatter's kernel: its output filled with its init, or made a copy of the tensor it starts as."""

    def __init__(self, name: str, init, into: str | None):
        self.name, self.init, self.into = name, init, into

    def __call__(self, buffers) -> None:
        if self.into is not None:
            buffers[self.name].copy_(buffers[self.into])
        else:
            buffers[self.name].fill_(self.init)


class _Launch:
    """One kernel launch of a prepared call: the kernel, its grid, and its arguments (constants, the
    call's tensors by name, tensor descriptors made from them). The first launch goes through Triton's
    `fn[grid](...)`, which compiles (or finds) the kernel specialized for these arguments; later ones
    call that compiled kernel directly (triton_compat.direct_launcher), which is valid because a
    prepared call is only reused for tensors that specialize the same way (Kernel.__call__'s key)."""

    def __init__(self, fn, grid, static, tensor_params, descs):
        self.fn, self.grid, self.static = fn, grid, static
        self.tensor_params, self.descs = tensor_params, descs
        self.direct = None
        # the direct launcher's arguments in the kernel's parameter order: a constant, or the name of a
        # call tensor read by pointers ("tensor") or through a descriptor ("descriptor": the launcher gets
        # the tensor and makes the descriptor of the block shape `blocks` gives for that position)
        by_name = {**{p: ("tensor", p) for p in tensor_params}, **{p: ("descriptor", t) for p, t, _ in descs}}
        names = list(getattr(fn, "arg_names", ()))
        covered = all(name in by_name or name in static for name in names)
        self.order = [by_name.get(name) or ("constant", static[name]) for name in names] if covered else []
        block_of = {p: block for p, _, block in descs}
        self.blocks = {i: block_of[name] for i, name in enumerate(names) if name in block_of}  # position -> block

    def __call__(self, buffers) -> None:
        if self.direct is not None:  # a descriptor's place holds its tensor: the launcher makes (or keeps) it
            args = [v if kind == "constant" else buffers[v] for kind, v in self.order]
            if self.direct(self.grid, args):
                return
        made = {p: triton_compat.tensor_descriptor().from_tensor(buffers[t], block) for p, t, block in self.descs}
        try:
            with triton_compat.quiet_launch():  # the interpreter's numpy warnings of masked-out lanes
                compiled = self.fn[self.grid](**self.static, **{p: buffers[p] for p in self.tensor_params}, **made)
        except triton_compat.out_of_resources() as e:
            raise _too_large(self.fn, e) from e
        if self.direct is None and self.order:
            self.direct = triton_compat.direct_launcher(compiled, self.blocks)


# Programs a persistent kernel runs in Triton's interpreter: few, so that each loops over several tiles.
INTERPRETER_PROGRAMS = 3


def sm_count(device) -> int:
    """The programs a persistent kernel launches at most: the device's SM count (132 on the H200); in
    the interpreter, INTERPRETER_PROGRAMS."""
    if torch.device(device).type != "cuda":
        return INTERPRETER_PROGRAMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def _refuse_capture(kernel) -> None:
    """A call with new shapes while a CUDA stream captures a graph: it would compile (cuModuleLoadData is
    not allowed during capture, and the capture would be invalidated): say to warm up first."""
    raise TilecError(f"{kernel.program.kernels[0].name if kernel.program.kernels else 'kernel'}: called with new "
                     f"shapes while a CUDA graph is being captured; compiling and preparing a call cannot be "
                     f"captured. Call the kernel once with the same shapes, strides and dtypes before capturing "
                     f"(torch.cuda.graphs' warm-up), or use kernel.graphed(*inputs), which does")


def _refuse_compile(kernel) -> None:
    """A Kernel (or Tuned) called inside a function torch.compile traces: Dynamo would trace into the launch
    (Triton's launcher, or its interpreter on a CPU) and fail or break the graph; a custom op is opaque."""
    raise TilecError("a tilec kernel was called inside torch.compile; register it as a custom op and call "
                     "that instead: op = kernel.as_op('name') (or tuned.as_op('name')), then op(*inputs) in the "
                     "compiled function (docs/pytorch.md)")


def _too_large(fn, e) -> LoweringError:
    """Triton compiled the kernel but the device cannot run it (tl.dot operands and pipelined loads are
    staged in shared memory, whose use tilec does not know before Triton compiles): say what to change."""
    what = getattr(e, "name", "resources")
    need, limit = getattr(e, "required", None), getattr(e, "limit", None)
    amount = f" ({need} needed, {limit} available)" if need is not None and limit is not None else ""
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", "the kernel")
    return LoweringError(f"{name}: the compiled kernel needs more {what} than one program may use{amount}; "
                         f"use smaller split factors (tiles), fewer pipeline stages, or num_warps that fit")


def block_shape(p, config) -> list[int]:
    """A descriptor parameter's block shape under the config (its texts are ints or knob names)."""
    return [int(b) if b.isdigit() else int(config[b]) for b in p.block]


def _descriptor_fits(x: torch.Tensor, block: list[int]) -> bool:
    """TMA's rules for a tensor and block (Triton's TensorDescriptor, the CUDA tensor-map API): 2 to 5
    dims, a contiguous last dim, other strides and the block's last dim multiples of 16 bytes, at most 256
    elements a block dim (the tensor map's box); and, to be safe, no stride-0 (broadcast) dim, which the
    tensor-map API is not known to take."""
    size = x.element_size()
    return (x.dtype != torch.bool and 2 <= x.dim() <= 5 and x.stride(-1) == 1
            and all(st * size % 16 == 0 for st in x.stride()[:-1])
            and all(st > 0 for st, n in zip(x.stride(), x.shape) if n > 1)  # no broadcast (stride 0) dims
            and block[-1] * size % 16 == 0 and all(b <= 256 for b in block)  # TMA's box: 256 a dim
            and x.numel() > 0)


def _dense(x: torch.Tensor) -> bool:
    """Whether x's elements tile its storage exactly once (in any order of dims): no overlap, no gaps."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(x.shape, x.stride()) if s > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _max_offset(x: torch.Tensor) -> int:
    return sum((s - 1) * st for s, st in zip(x.shape, x.stride()) if s > 0)


def _extent(x: torch.Tensor) -> int:
    """How many bytes x's elements span from its first one (data_ptr); 0 when it has none."""
    return 0 if x.numel() == 0 else (_max_offset(x) + 1) * x.element_size()


def _shape_text(t: Tensor) -> str:
    return f"({', '.join(map(str, t.shape))})"


def _size_vars(e):
    from tilec.ir.expr import walk
    return [n for n in walk(e) if isinstance(n, SizeVar)]


def build(sched: Schedule, args: Sequence[Tensor], config: Mapping[str, int] | None = None,
          specialize: Mapping[str, int] | None = None) -> Kernel:
    """Lower `sched` with `config` and return a callable `Kernel`, in this machine's form (the GPU's, or
    Triton's interpreter where there is none: `.target`).

    The schedule is checked and lowered here; Triton compiles at the first call with new shapes (then
    keeps the launches). Call the kernel with the inputs (the outputs are allocated) or with inputs
    and outputs, or pass `out=`.

    Args:
        sched: the schedule.
        args: the input placeholders and the output tensors, in the order calls pass them (inputs first):
            every input the schedule reads and every output of the schedule; each size of the schedule
            must be a dimension of some input, where calls read it: the size itself, or the one unknown
            factor of a product (`2 * D`, `3 * NH * HS` with HS read elsewhere).
        config: knob name -> value; knobs it leaves out take their first choice.
        specialize: size name -> positive int, baked into the source as constants (masks dropped where
            isl proves it); calls with other sizes are refused.

    Returns:
        The `Kernel`.

    Raises:
        ArgumentError: `sched` is not a Schedule; `args` is no list of tensors, lists a tensor twice or one
            another schedule computes, misses an input the schedule reads or one of its outputs; the config
            or `specialize` is bad (a knob or size the schedule
            lacks, a value that is not a choice, a size that breaks a `tc.assume` fact).
        IllegalScheduleError: the schedule would compute a wrong answer under this config.
        LoweringError: the schedule cannot be expressed in Triton under this config.

    Example:
        >>> io, ii = s[C].split(i, tc.knob("BM", [16, 32]))
        >>> kernel = tc.build(s, [A, W, Y], config={"BM": 32})
        >>> kernel.config, [t.name for t in kernel.inputs], [t.name for t in kernel.outputs]
        ({'BM': 32}, ['A', 'W'], ['Y'])
        >>> a, w = torch.randn(40, 24), torch.randn(24, 20)
        >>> torch.allclose(kernel(a, w), torch.nn.functional.silu(a @ w), atol=1e-4)
        True
        >>> tc.build(s, [A, Y])
        Traceback (most recent call last):
        ...
        tilec.errors.ArgumentError: build: the schedule reads W, so args must list it (args: A, Y)
    """
    if not isinstance(sched, Schedule):
        raise ArgumentError(f"argument 1, 'sched' to build: expected a Schedule, got {type(sched).__name__}")
    return Kernel(sched, args, config, specialize)
