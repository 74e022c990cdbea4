"""Pictures of a schedule: its stage graph and its loop nest, in one PNG (`tilec draw FILE --png PATH`).

`schedule_graph(sched, config)` is the data: a networkx DiGraph of the compute's tensors (inputs,
computed stages) and the schedule's cache stages, with an edge producer -> consumer per read (a
cache_read stage sits between the tensor it caches and its readers; a cache_write stage hangs off the
stage it accumulates). Each node says where the schedule puts it (`placement`: "root", "inline",
"at C.jo", "online in O", ...) and in which kernel it runs (`kernel`, from the plan of
`tc.lower(sched, config)`); each edge says how the value gets from producer to consumer (`how`:
"inlined", "Y at C.jo", "through memory", ...). `draw_schedule` lays the graph out in layers, left to
right, colours each kernel's stages alike, and prints the loop nest (`str(tc.lower(sched, config))`)
below it.
"""

from __future__ import annotations

import math
from pathlib import Path

import networkx as nx

from tilec.errors import ArgumentError

KERNEL_COLOURS = ["#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9", "#fce5cd", "#d0e0e3", "#ead1dc"]


def _place(st) -> str:
    """Where a stage's `attach` puts it: root, inline, or at a stage's axis."""
    if st.attach == "inline":
        return "inline"
    if isinstance(st.attach, tuple):
        return f"at {st.attach[0].name}.{st.attach[1].name}"
    return "root"


def schedule_graph(sched, config: dict | None = None) -> nx.DiGraph:
    """The stage graph of `sched` under `config` (knobs not given: their first choice), as the module
    docstring describes: node attributes `kind`, `placement`, `kernel`, `label`; edge attribute `how`."""
    import tilec as tc
    prog = tc.lower(sched, config)
    plan = prog.plan
    kernels = {r.stage.name: plan.kernel_name(r.stage.name) for r in plan.kernels}
    g = nx.DiGraph()
    for name, t in sched.tensors.items():
        if t.is_placeholder:
            g.add_node(name, kind="input", placement="input", kernel=None, label=f"{name}\ninput {t.dtype}")
            continue
        st = sched.stages[name]
        root = plan.kernel_of.get(name)
        placement = _place(st)
        if name in plan.online_of:
            placement = f"online in {plan.online_of[name].name}"
        elif placement == "root" and root is not None and root != name:
            placement = f"in {root}'s kernel"
        kernel = kernels.get(root) if root is not None else None
        where = placement if kernel is None or placement != "root" else f"root of {kernel}"
        g.add_node(name, kind="compute", placement=placement, kernel=kernel,
                   label=f"{name}\n{where}" + ("\n(stored)" if name in plan.stored and name not in plan.out_names
                                               else ""))
    for p, c in sched.graph.edges:
        g.add_edge(p, c, how=_how(sched, plan, p, c))
    for cache in sched.caches:
        if isinstance(cache.attach, tuple):
            owner = cache.attach[0].name
        else:  # not placed: it lives in the loops of the stage it serves
            owner = cache.readers[0].name if cache.kind == "cache_read" and cache.readers else cache.tensor.name
        root = plan.kernel_of.get(owner)
        kernel = kernels.get(root) if root is not None else None
        placement = _place(cache)
        where = placement if placement.startswith("at ") else f"in {owner}'s loops"
        g.add_node(cache.name, kind=cache.kind, placement=placement, kernel=kernel,
                   label=f"{cache.name}\n{cache.kind} ({cache.scope})\n{where}")
        if cache.kind == "cache_read":
            g.add_edge(cache.tensor.name, cache.name, how=f"tiles loaded {where}")
            for r in cache.readers:
                if g.has_edge(cache.tensor.name, r.name):
                    g.remove_edge(cache.tensor.name, r.name)
                g.add_edge(cache.name, r.name, how="reads the tiles")
        else:
            g.add_edge(cache.tensor.name, cache.name, how=f"accumulates {where}")
    return g


def _how(sched, plan, p: str, c: str) -> str:
    """How producer p's values reach consumer c."""
    if p not in sched.stages:
        return "read from memory"
    ps, cs = sched.stages[p], sched.stages[c]
    if ps.attach == "inline":
        return "inlined"
    if isinstance(cs.attach, tuple) and cs.attach[0] is ps:
        return f"{c} at {p}.{cs.attach[1].name}"
    if isinstance(ps.attach, tuple) and ps.attach[0] is cs:
        return f"{p} at {c}.{ps.attach[1].name}"
    if cs.attach == "inline":
        return f"read by the inlined {c}"
    if p in plan.online_of:
        return "online"
    if p in plan.stored and plan.kernel_of.get(p) != plan.kernel_of.get(c):
        return "through memory"
    return "in one kernel"


def _edge_point(box, towards) -> tuple[float, float]:
    """Where the line from the centre of `box` ([[x0, y0], [x1, y1]], data coordinates) to `towards`
    leaves the box."""
    (x0, y0), (x1, y1) = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    dx, dy = towards[0] - cx, towards[1] - cy
    scale = min(abs((x1 - x0) / 2 / dx) if dx else float("inf"), abs((y1 - y0) / 2 / dy) if dy else float("inf"))
    return (cx + dx * scale, cy + dy * scale) if scale != float("inf") else (cx, cy)


def layers(g: nx.DiGraph) -> dict[str, int]:
    """Each node's column: the longest path to it from an input; an input (or any node without
    producers) sits just before its first reader, not far left of a late one."""
    out: dict[str, int] = {}
    for n in nx.topological_sort(g):
        out[n] = max((out[p] + 1 for p in g.predecessors(n)), default=0)
    for n in g.nodes:
        if g.in_degree(n) == 0 and g.out_degree(n) > 0:
            out[n] = max(0, min(out[c] for c in g.successors(n)) - 1)
    return out


def positions(g: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """(column, row) of each node: columns by `layers`, rows in a column ordered by the mean row of
    the node's producers (fewer crossings), centred on 0."""
    col = layers(g)
    by_col: dict[int, list[str]] = {}
    for n in nx.topological_sort(g):
        by_col.setdefault(col[n], []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    for x in sorted(by_col):
        names = by_col[x]
        if x > 0:
            def mean_row(n, names=names):
                rows = [pos[p][1] for p in g.predecessors(n) if p in pos]
                return -sum(rows) / len(rows) if rows else names.index(n)
            names = sorted(names, key=mean_row)
        for i, n in enumerate(names):
            pos[n] = (float(x), -(i - (len(names) - 1) / 2))
    return pos


def draw_schedule(sched, path, config: dict | None = None, title: str | None = None) -> str:
    """Draw `sched`'s stage graph and loop nest under `config` into the PNG `path`; returns the path."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.transforms import offset_copy
    except ImportError as e:
        raise ArgumentError("drawing a schedule needs matplotlib (pip install matplotlib, or pip install -e "
                            "\".[plot]\")") from e
    import tilec as tc
    p = Path(path)
    if p.suffix.lower() != ".png":
        raise ArgumentError(f"draw: {str(path)!r} is not a .png path; give e.g. schedule.png")
    g = schedule_graph(sched, config)
    nest = str(tc.lower(sched, config)).rstrip()
    pos = positions(g)
    kernels = list(dict.fromkeys(k for _, k in g.nodes(data="kernel") if k))
    colour = {k: KERNEL_COLOURS[i % len(KERNEL_COLOURS)] for i, k in enumerate(kernels)}
    lines = nest.splitlines()
    cols = len({x for x, _ in pos.values()})
    label_w = max(len(x) for _, lab in g.nodes(data="label") for x in lab.splitlines())
    edge_w = max((len(h) for _, _, h in g.edges(data="how")), default=0)
    width = max(12.0, min(40.0, 0.075 * max((len(x) for x in lines), default=80) + 1),
                min(40.0, cols * (0.085 * label_w + 0.065 * edge_w + 0.5)))
    rows = max(1, int(round(max(y for _, y in pos.values()) - min(y for _, y in pos.values()))) + 1)
    graph_h = max(3.0, 1.15 * rows + 1.4)
    nest_h = 0.17 * len(lines) + 0.8
    fig, (ga, na) = plt.subplots(2, 1, figsize=(width, graph_h + nest_h),
                                 gridspec_kw={"height_ratios": [graph_h, nest_h]})
    xs = [x for x, _ in pos.values()]
    ys = [y for _, y in pos.values()]
    ga.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
    ga.set_ylim(min(ys) - 0.8, max(ys) + 0.8)
    boxes = {}
    for n, d in g.nodes(data=True):
        fc = "#eeeeee" if d["kind"] == "input" else colour.get(d["kernel"], "white")
        style = "round,pad=0.4" if d["kind"] in ("compute", "input") else "sawtooth,pad=0.4"
        boxes[n] = ga.text(*pos[n], d["label"], ha="center", va="center", fontsize=8.5, zorder=3,
                           fontweight="bold" if d["kind"] == "compute" else "normal",
                           bbox={"boxstyle": style, "fc": fc, "ec": "black" if d["kind"] == "compute" else "grey",
                                 "lw": 1.1})
    fig.canvas.draw()  # the boxes' sizes are known from here: the arrows run from outline to outline
    inv = ga.transData.inverted()
    row_px = abs(ga.transData.transform((0, 1))[1] - ga.transData.transform((0, 0))[1])  # one row, in pixels
    extent = {n: inv.transform(t.get_bbox_patch().get_window_extent()) for n, t in boxes.items()}
    for k, (a, b, how) in enumerate(g.edges(data="how")):
        # an edge past other columns bends (alternately up and down) so that it does not run through the
        # stages between; its label sits on the middle of the curve
        start, end = _edge_point(extent[a], pos[b]), _edge_point(extent[b], pos[a])
        span = abs(pos[b][0] - pos[a][0])
        length = math.dist(ga.transData.transform(start), ga.transData.transform(end))
        rad = 0.0 if span <= 1 else min(0.35, 2 * 0.45 * row_px / max(length, 1.0)) * (1 if k % 2 else -1)
        dashed = g.nodes[a]["kind"] not in ("compute", "input") or g.nodes[b]["kind"] not in ("compute", "input") \
            or how == "inlined"
        ga.annotate("", xy=end, xytext=start, zorder=2,
                    arrowprops={"arrowstyle": "-|>", "color": "dimgrey", "lw": 1.4, "ls": "--" if dashed else "-",
                                "shrinkA": 2, "shrinkB": 2, "mutation_scale": 14,
                                "connectionstyle": f"arc3,rad={rad}"})
        (x0, y0), (x1, y1) = ga.transData.transform(start), ga.transData.transform(end)
        mid = inv.transform(((x0 + x1) / 2 + rad * (y1 - y0) / 2, (y0 + y1) / 2 - rad * (x1 - x0) / 2))
        ga.text(mid[0], mid[1], how, ha="center", va="bottom" if rad >= 0 else "top", fontsize=7.5,
                color="#333333", zorder=2.5, transform=offset_copy(ga.transData, fig=fig, y=3 if rad >= 0 else -3,
                                                                    units="points"),
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
    for k in kernels:
        ga.plot([], [], "s", ms=10, color=colour[k], mec="black", label=f"kernel {k}")
    ga.plot([], [], "s", ms=10, color="#eeeeee", mec="grey", label="input")
    ga.legend(loc="upper left", fontsize=8, frameon=False, ncol=len(kernels) + 1, bbox_to_anchor=(0, 1.08))
    ga.axis("off")
    ga.set_title("stage graph: producer -> consumer, where the schedule places each stage (dashed: caches, inlined)",
                 fontsize=10, pad=22)
    na.axis("off")
    na.text(0, 1, nest, family="monospace", fontsize=8, va="top", ha="left", transform=na.transAxes)
    na.set_title("loop nest (tc.lower)", fontsize=10, loc="left")
    fig.suptitle(title or "schedule", fontsize=12)
    fig.savefig(p, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return str(p)
