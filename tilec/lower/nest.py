"""Loop-nest IR: what one kernel does, as loops and statements, each with its Triton line.

The builder (`tilec.lower.builder`) produces it; `render_triton` turns it into source text and
`render_nest` into the loop nest `tc.lower` prints. A statement carries both its Triton code and its
reading in the loop-nest notation, so the two views can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Stmt:
    """One Triton statement; `nest` is how the loop nest shows it (None: an index detail, hidden)."""

    code: str
    nest: str | None = None


@dataclass
class Comment:
    text: str


@dataclass
class For:
    """A serial loop over `var` in [0, extent): `tl.range` (pipelined with `stages`) or unrolled."""

    var: str
    extent: str          # Triton expression
    extent_text: str     # the same, for people
    kind: str            # "serial" | "unroll"
    stages: str | None
    role: str            # e.g. "C.ko: serial reduction loop"
    body: list = field(default_factory=list)
    stages_text: str | None = None  # the pipeline depth under the config, for people


@dataclass
class Param:
    name: str
    kind: str            # "tensor" | "stride" | "size" | "constexpr"
    tensor: str | None = None
    dim: int | None = None


@dataclass
class KernelIR:
    """One Triton kernel: its parameters, grid (one extent per program_id dim) and body."""

    name: str
    root: str
    stages: list[str]
    params: list[Param]
    grid: list              # ir Exprs, evaluated at launch
    grid_text: list[str]
    body: list
    header: list[str]
    num_warps: int
    outputs: list[str]      # tensors this kernel stores
    inputs: list[str]       # tensors it loads


def _stages_kw(stages: str | None) -> str:
    return f", num_stages={stages}" if stages else ""


def render_triton(kernel: KernelIR) -> str:
    """The kernel as Triton source: header comment, signature, body with a comment per loop."""
    lines = [f"# {h}" if h else "#" for h in kernel.header]
    lines += ["@triton.jit"]
    sig = [p.name + (": tl.constexpr" if p.kind == "constexpr" else "") for p in kernel.params]
    lines.append(f"def {kernel.name}(")
    lines += [f"    {s}," for s in sig]
    lines.append("):")

    def walk(body, indent):
        pad = "    " * indent
        for node in body:
            if isinstance(node, Comment):
                lines.append(f"{pad}# {node.text}")
            elif isinstance(node, Stmt):
                lines.append(pad + node.code)
            else:
                lines.append(f"{pad}# {node.role}")
                if node.kind == "unroll":
                    lines.append(f"{pad}for {node.var} in tl.static_range({node.extent}):")
                else:
                    lines.append(f"{pad}for {node.var} in tl.range(0, {node.extent}{_stages_kw(node.stages)}):")
                walk(node.body, indent + 1)

    walk(kernel.body, 1)
    return "\n".join(lines) + "\n"


def render_nest(kernel: KernelIR) -> str:
    """The kernel as a loop nest for people: grid, loops with their roles, stores and computes."""
    out = [f"kernel {kernel.name}  (stages: {', '.join(kernel.stages)}; num_warps={kernel.num_warps})"]
    if kernel.header[1] != "config: none (no knobs)":
        out.append(f"  {kernel.header[1]}")
    dims = ", ".join(kernel.grid_text) or "1"
    out.append(f"  grid ({dims})")

    def walk(body, indent):
        pad = "  " * indent
        for node in body:
            if isinstance(node, For):
                how = "unrolled" if node.kind == "unroll" else "serial"
                if node.stages:
                    how += f", pipelined stages={node.stages_text or node.stages}"
                out.append(f"{pad}for {node.var} in [0, {node.extent_text}):  {how}  # {node.role}")
                walk(node.body, indent + 1)
            elif isinstance(node, Stmt) and node.nest:
                out.append(pad + node.nest)

    walk(kernel.body, 2)
    return "\n".join(out) + "\n"
