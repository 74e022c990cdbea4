"""`tc.build` and `Kernel`: compile the lowered Triton source, check call-time tensors, launch.

A Kernel lowers its schedule once and renders it in the index width each call needs (int32, or int64
past 2**31); Triton itself caches compiled binaries per config and argument specialization. Kernels
that share source share the loaded module.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import torch

from tilec.errors import ArgumentError, LoweringError
from tilec.ir.expr import SizeVar, evaluate, size_text
from tilec.ir.tensor import Tensor, sizes_of
from tilec.lower.program import Program
from tilec.runtime import triton_compat
from tilec.schedule.schedule import Schedule

_MODULES: dict[str, object] = {}
_INT32_LIMIT = 2**31 - 1


def cache_dir() -> Path:
    d = Path(os.environ.get("TILEC_CACHE_DIR", Path.home() / ".cache" / "tilec")) / "kernels"
    d.mkdir(parents=True, exist_ok=True)
    return d


def load_module(source: str):
    """Load Triton source as a module (Triton's @jit needs the source in a real file)."""
    key = hashlib.sha256(source.encode()).hexdigest()[:20]
    if key not in _MODULES:
        triton_compat.triton()
        path = cache_dir() / f"tilec_{key}.py"
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source)
            tmp.replace(path)
        spec = importlib.util.spec_from_file_location(f"tilec_kernels_{key}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _MODULES[key] = mod
    return _MODULES[key]


class Kernel:
    """A built schedule: call it on torch tensors. `.source` is the Triton code, `.config` the knobs."""

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
        self.sched = sched
        self._config_arg = config
        self.specialize = specialize  # checked (and made a dict of plain ints) by the first Program
        self.target = triton_compat.target()
        self._programs: dict[tuple[bool, bool], Program] = {}
        self._calls: dict[tuple, tuple] = {}  # tensor shapes/strides/dtypes -> prepared launches
        self._in_names = [t.name for t in self.inputs]
        self._out_names = [t.name for t in self.outputs]
        self.program = self._program(False)
        self.specialize = dict(self.program.specialize)
        self.config = dict(self.program.config)
        self._sizes = {}
        for t in self.inputs:
            for d, e in enumerate(t.shape):
                if isinstance(e, SizeVar):
                    self._sizes.setdefault(e.name, (t, d))
        need = set(sizes_of(sched.tensors.values()))
        unbound = sorted(need - set(self._sizes))
        if unbound:
            raise ArgumentError(f"build: size {', '.join(unbound)} appears in no input's shape as a plain "
                                f"dimension, so it cannot be read from the tensors at call time")

    def _program(self, int64: bool, descriptors: bool = True, assume: tuple = ()) -> Program:
        """The program in the form a call needs: int64 indices past 2**31 (then pointer loads), tensor
        descriptors where the schedule asked for them and the tensors allow (else pointer loads), and
        lowered under `assume`, the facts of the call's sizes (`Plan.call_facts`: the loops that run once
        at them are no loops, so a row that fits one tile is read once)."""
        form = (int64, descriptors and not int64, tuple(size_text(f) for f in assume))
        if form not in self._programs:
            if form[:2] == (False, True):
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

    def source_for(self, **sizes: int) -> str:
        """The Triton module a call with these sizes runs (32-bit index form): lowered under the facts the
        sizes give (`Plan.call_facts`: the loops that run once are no loops, the masks the tiles make
        unneeded are gone), as a call lowers it. `kernel.source_for(M=64, N=4096)`."""
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ArgumentError(f"source_for: size {name} must be an int >= 0, got {value!r}")
        return self._program(False, True, self.program.plan.call_facts(dict(sizes))).source()

    def lower(self) -> Program:
        return self.program

    @property
    def resources(self):
        """Footprints and shared-memory/register estimates per kernel under this config (isl)."""
        return self.program.analysis.resources

    # -- call -----------------------------------------------------------------------------------
    def _bind(self, tensors) -> dict[str, int]:
        device = None
        for t, x in zip(self.inputs, tensors):
            if not isinstance(x, torch.Tensor):
                raise ArgumentError(f"{t.name}: expected a torch.Tensor, got {type(x).__name__}")
            if x.layout != torch.strided:
                raise ArgumentError(f"{t.name}: expected a dense (strided) tensor, got layout {x.layout}; convert it "
                                    f"with .to_dense()")
            if x.dim() != t.ndim:
                raise ArgumentError(f"{t.name}: expected {t.ndim} dimensions {list(t.shape)}, got shape {tuple(x.shape)}")
            if str(x.dtype).removeprefix("torch.") != t.dtype:
                raise ArgumentError(f"{t.name}: expected dtype {t.dtype}, got {str(x.dtype).removeprefix('torch.')}")
            device = device or x.device
            if x.device != device:
                raise ArgumentError(f"{t.name} is on {x.device} but {self.inputs[0].name} is on {device}; "
                                    f"put all tensors on one device")
        want = "cuda" if self.target == "cuda" else "cpu"
        if device is not None and device.type != want:
            raise ArgumentError(f"tensors are on {device} but this kernel runs on {want} "
                                f"({'a CUDA device' if want == 'cuda' else 'Triton interpreter, no CUDA device'}); "
                                f"move them with .to({want!r})")
        env: dict[str, int] = {}
        for name, (t, d) in self._sizes.items():
            env[name] = tensors[self.inputs.index(t)].shape[d]
        for t, x in zip(self.inputs, tensors):
            want_shape = [evaluate(e, env) for e in t.shape]
            if list(x.shape) != want_shape:
                bound = f" with {', '.join(f'{k}={v}' for k, v in env.items())}" if env else ""
                raise ArgumentError(f"{t.name}: expected shape {tuple(want_shape)} ({_shape_text(t)}{bound}), "
                                    f"got {tuple(x.shape)}")
        for name, value in self.specialize.items():
            if env.get(name) != value:
                raise ArgumentError(f"this kernel is specialized for {name}={value}, but the tensors give "
                                    f"{name}={env.get(name)}; build another kernel for that size")
        for fact in self.program.facts:
            if not isinstance(fact, tuple) and not evaluate(fact, env):
                raise ArgumentError(f"the sizes {', '.join(f'{k}={v}' for k, v in env.items())} break the fact "
                                    f"tc.assume({fact!r}) this kernel was compiled with (its masks rely on it)")
        return env

    def __call__(self, *tensors, out=None):
        n_in, n_out = len(self.inputs), len(self.outputs)
        if len(tensors) == n_in + n_out and out is None:
            tensors, out = tensors[:n_in], tensors[n_in:]
        if len(tensors) != n_in:
            raise ArgumentError(f"expected {n_in} input tensors ({', '.join(t.name for t in self.inputs)}), "
                                f"got {len(tensors)}")
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
        except (RuntimeError, NotImplementedError):  # a tensor without strides (sparse): _prepare refuses it
            key = None
        # tensor descriptors need 16-byte aligned tensors: the key says so, and _aligned decides the form
        descriptors = bool(self.program.descriptors) and key is not None and self._aligned(tensors, outs_given)
        call = self._calls.get((key, descriptors))
        if call is None:  # first call with these shapes: check everything, then remember the launches
            call = self._prepare(tensors, outs_given, descriptors)
            if len(self._calls) < 256 and key is not None:
                self._calls[key, descriptors] = call
        device, out_shapes, buffer_shapes, launches, extents = call
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

    def _prepare(self, tensors, outs_given, descriptors: bool = False):
        """Check the tensors, bind the sizes, pick the index width and the load form (descriptors where
        every tensor a descriptor reads meets TMA's rules, else pointers), and precompute every launch."""
        env = self._bind(tensors)
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
        mod = load_module(prog.source())
        values = env | prog.config
        launches = []
        for k in prog.kernels:
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
        return device, out_shapes, buffer_shapes, launches, extents

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
    return f"({', '.join(map(repr, t.shape))})"


def _size_vars(e):
    from tilec.ir.expr import walk
    return [n for n in walk(e) if isinstance(n, SizeVar)]


def build(sched: Schedule, args, config=None, specialize=None) -> Kernel:
    """Lower `sched` with `config` (knob name -> value) and return a callable `Kernel`.

    `args` lists the input placeholders and the outputs; call the kernel with the inputs (outputs
    are allocated) or with inputs and outputs, or pass `out=`. `specialize` (size name -> int) bakes
    sizes into the source as constants; calls with other sizes are refused.
    """
    if not isinstance(sched, Schedule):
        raise ArgumentError(f"argument 1, 'sched' to build: expected a Schedule, got {type(sched).__name__}")
    return Kernel(sched, args, config, specialize)
