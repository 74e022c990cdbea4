"""The tuning report: `tuned.report("x.json")` writes the plan and every trial; `tuned.report("x.png")`
also draws a picture that says more than the printed table (and writes the JSON next to it).

`report_data(tuned)` computes everything the picture shows, as plain data (tests read it, and it goes
into the JSON as "summary"); `draw_report(data, path)` only draws it:

- top: the weighted time per call of every measured config, in trial order, with the best so far as
  a step line. Each config is one point labelled with its knobs in short ("BM128 BN64 s3 w8"; long
  knob names are cut to a unique prefix, the text box says which; past LABEL_LIMIT configs only the
  best and the chosen get their knobs, the others their trial number). A repeat of a config
  (`duplicate_of`) is no point of its own: the label says "(x3)" for a config proposed three times.
  The chosen plan's configs are stars; failed configs are red crosses along the top and pruned ones
  grey marks along the bottom, as they have no time.
- bottom left: the per-shape times of the best configs by weighted time, as a table of microseconds
  coloured by how far each is from the best config for that shape (1.00x is the best). Cells with a
  black frame are the ones the chosen plan serves that shape with.
- bottom right: optuna's parameter importances (`optuna.importance.get_param_importances`, computed
  over the measured configs, each once), or why there are none (too few configs, no knob varies), and
  a text box: the plans, the mix and the knob abbreviations.
- the title: the study, and the counts of trials: measured (complete, failed), repeats, pruned,
  refused, interrupted, waiting and running.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import optuna

from tilec.errors import ArgumentError
from tilec.tune.mix import ShapeMix
from tilec.tune.trials import REFUSED, measured_itself

TOP = 10             # configs in the per-shape table
LABEL_LIMIT = 30     # above this many measured configs, only the best ones (and the chosen) get their knobs
LABEL_BEST = 12      # written out; the others get their trial number
MIN_IMPORTANCE = 3   # measured configs needed before importances mean anything


def knob_abbreviations(names) -> dict[str, str]:
    """Short knob names for labels: a name of up to 3 characters stays, a longer one becomes its
    shortest prefix that starts no other knob's name ("stages" -> "s", "warps" -> "w")."""
    names = list(names)
    out: dict[str, str] = {}
    for n in names:
        if len(n) <= 3:
            out[n] = n
            continue
        for k in range(1, len(n) + 1):
            p = n[:k]
            if not any(o != n and o.startswith(p) for o in names) and p not in out.values():
                out[n] = p
                break
        else:
            out[n] = n
    return out


def config_label(cfg: dict, abbr: dict[str, str]) -> str:
    """"BM128 BN64 s3 w8": a config in short."""
    return " ".join(f"{abbr.get(k, k)}{v}" for k, v in cfg.items())


def _key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def _finite(x) -> bool:
    return type(x) in (int, float) and math.isfinite(x)


def counts(study) -> dict[str, int]:
    """How many trials the study holds of each kind: `measured` (what `trials=` counts) split into
    `complete` and `failed`, then `repeats`, `pruned`, `refused`, `interrupted`, `waiting`, `running`."""
    c = dict.fromkeys(("trials", "measured", "complete", "failed", "repeats", "pruned", "refused", "interrupted",
                       "waiting", "running"), 0)
    for t in study.get_trials(deepcopy=False):
        c["trials"] += 1
        ua, state = t.user_attrs, t.state.name
        if measured_itself(t):
            c["measured"] += 1
            c["complete" if state == "COMPLETE" else "failed"] += 1
        elif "duplicate_of" in ua:
            c["repeats"] += 1
        elif state == "PRUNED":
            c["pruned"] += 1
        elif state == "FAIL" and str(ua.get("failure", "")).startswith(REFUSED):
            c["refused"] += 1
        elif state == "FAIL":
            c["interrupted"] += 1
        elif state == "WAITING":
            c["waiting"] += 1
        elif state == "RUNNING":
            c["running"] += 1
    return c


def best_so_far(points) -> list[list]:
    """[[trial number, best weighted time so far], ...] over (number, time) points in trial order."""
    out, best = [], math.inf
    for number, value in sorted(points):
        best = min(best, value)
        out.append([number, best])
    return out


def importances(study, numbers) -> tuple[dict[str, float] | None, str]:
    """optuna's parameter importances over the completed trials `numbers` (each config once), or None
    and why not."""
    trials = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
              if t.number in numbers and _finite(t.value)]
    if len(trials) < MIN_IMPORTANCE:
        return None, (f"too few measured configs ({len(trials)}) for parameter importances; they need "
                      f"{MIN_IMPORTANCE} or more")
    varying = [p for p in trials[0].params if len({t.params.get(p) for t in trials}) > 1]
    if not varying:
        return None, "no knob varies among the measured configs: no importances"
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created in memory" line
    try:
        tmp = optuna.create_study(direction="minimize")  # each config once: repeats would weigh it more
        tmp.add_trials(trials)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            imp = optuna.importance.get_param_importances(tmp, params=varying)
    except Exception as e:  # noqa: BLE001 - an evaluator that cannot judge these trials
        return None, f"optuna could not compute importances: {type(e).__name__}: {str(e)[:120]}"
    finally:
        optuna.logging.set_verbosity(verbosity)
    if any("will be equal" in str(w.message) for w in caught):
        return None, (f"too few measured configs ({len(trials)}) for optuna to tell the knobs' importances "
                      f"apart")
    return {p: float(v) for p, v in imp.items()}, ""


def report_data(tuned) -> dict:
    """Everything the report's picture shows, as plain data (the module docstring says what)."""
    study, mix = tuned.study, tuned.mix
    shapes = [ShapeMix.key(s) for s, _ in mix]
    weights = {ShapeMix.key(s): w for s, w in mix}
    knobs = list(tuned.sched.knobs) if getattr(tuned, "sched", None) is not None else []
    abbr = knob_abbreviations(knobs)
    configs, failed, pruned, seen = [], [], [], set()
    for t in study.get_trials(deepcopy=False):
        if "duplicate_of" in t.user_attrs or not all(n in t.params for n in knobs):
            continue
        cfg = {n: t.params[n] for n in knobs}
        key = _key(cfg)
        if key in seen:  # the same config twice without duplicate_of (an old study): one point
            continue
        times = t.user_attrs.get("times")
        if (t.state.name == "COMPLETE" and _finite(t.value) and isinstance(times, dict)
                and all(_finite(times.get(k)) for k in shapes)):
            seen.add(key)
            configs.append({"number": t.number, "label": config_label(cfg, abbr), "config": cfg,
                            "value_us": t.value * 1e6, "times_us": {k: times[k] * 1e6 for k in shapes}})
        elif measured_itself(t) and t.state.name == "FAIL":
            seen.add(key)
            failed.append({"number": t.number, "label": config_label(cfg, abbr), "config": cfg,
                           "reason": str(t.user_attrs.get("failure", ""))[:200]})
        elif t.state.name == "PRUNED":
            seen.add(key)
            pruned.append({"number": t.number, "label": config_label(cfg, abbr), "config": cfg,
                           "reason": str(t.user_attrs.get("pruned", ""))[:200]})
    by_key = {_key(c["config"]): c for c in configs}
    by_number = {c["number"]: c for c in configs + failed}
    for c in by_number.values():
        c["repeats"] = 0
    for t in study.get_trials(deepcopy=False):
        first = t.user_attrs.get("duplicate_of")
        if type(first) is int and first in by_number:
            by_number[first]["repeats"] += 1
    chosen = tuned.chosen
    served: dict[int, list[str]] = {}
    for shape, cfg in chosen.configs.items():
        c = by_key.get(_key(cfg))
        if c is not None:
            served.setdefault(c["number"], []).append(shape)
    best_of = {k: min(c["times_us"][k] for c in configs) for k in shapes} if configs else {}
    best_value = min((c["value_us"] for c in configs), default=None)
    top = sorted(configs, key=lambda c: (c["value_us"], c["number"]))[:TOP]
    imp, note = importances(study, {c["number"] for c in configs})
    return {
        "study": study.study_name,
        "shapes": shapes,
        "weights": weights,
        "abbreviations": abbr,
        "configs": configs,
        "failed": failed,
        "pruned": pruned,
        "best_so_far": best_so_far([(c["number"], c["value_us"]) for c in configs]),
        "chosen": {"plan": chosen.name, "T_us": chosen.T * 1e6,
                   "configs": [{"number": n, "label": _label_of(configs, n), "shapes": s}
                               for n, s in sorted(served.items())]},
        "plans": [{"name": o.name, "T_us": o.T * 1e6, "P_s": o.P} for o in tuned.options],
        "counts": counts(study),
        "top": [{"number": c["number"], "label": c["label"], "value_us": c["value_us"],
                 "times_us": c["times_us"],
                 "ratio": {"weighted": c["value_us"] / best_value if best_value > 0 else 1.0,
                           **{k: c["times_us"][k] / best_of[k] if best_of[k] > 0 else 1.0 for k in shapes}}}
                for c in top],
        "importances": imp,
        "importances_note": note,
    }


def _label_of(configs, number: int) -> str:
    """The label of the measured config of trial `number`."""
    return next(c["label"] for c in configs if c["number"] == number)


def title_text(data: dict) -> str:
    """The picture's title: the study and the counts of trials."""
    c = data["counts"]
    parts = [f"{c['measured']} config{'s' * (c['measured'] != 1)} measured ({c['complete']} complete, "
             f"{c['failed']} failed)", f"{c['repeats']} repeat{'s' * (c['repeats'] != 1)}", f"{c['pruned']} pruned"]
    parts += [f"{c[k]} {k}" for k in ("refused", "interrupted", "waiting", "running") if c[k]]
    return f"tilec tuning report: study {data['study']}\n{c['trials']} trials: " + ", ".join(parts)


def labelled(data: dict) -> list[int]:
    """The trial numbers whose points carry their knobs: all, or past LABEL_LIMIT configs the best
    LABEL_BEST and the chosen ones (the others carry their trial number)."""
    configs = data["configs"]
    if len(configs) <= LABEL_LIMIT:
        return [c["number"] for c in configs]
    best = sorted(configs, key=lambda c: c["value_us"])[:LABEL_BEST]
    keep = {c["number"] for c in best} | {c["number"] for c in data["chosen"]["configs"]}
    return [c["number"] for c in configs if c["number"] in keep]


def draw_report(data: dict, path) -> None:
    """Draw `report_data`'s picture into `path` (PNG; matplotlib's Agg backend): the trials above, the
    best configs' per-shape times below left, parameter importance and the plans below right."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ArgumentError("report to .png needs matplotlib (pip install matplotlib, or pip install -e "
                            "\".[plot]\"); or give a .json path") from e
    chosen = {c["number"]: c for c in data["chosen"]["configs"]}
    fig = plt.figure(figsize=(16, 10.5))
    grid = fig.add_gridspec(2, 2, height_ratios=[1.2, 1], width_ratios=[1.55, 1], hspace=0.32, wspace=0.12)
    _draw_trials(fig, fig.add_subplot(grid[0, :]), data, chosen)
    _draw_table(fig.add_subplot(grid[1, 0]), data, chosen)
    right = grid[1, 1].subgridspec(2, 1, height_ratios=[1, 1.1], hspace=0.35)
    _draw_importances(fig.add_subplot(right[0]), data)
    _draw_plans(fig.add_subplot(right[1]), data)
    fig.suptitle(title_text(data), fontsize=12)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _draw_trials(fig, ax, data: dict, chosen: dict) -> None:
    """The top panel: each measured config's weighted time by trial, the best so far, the chosen
    configs, the failed and pruned trials at the edges, and the labels."""
    from matplotlib.ticker import MaxNLocator
    from matplotlib.transforms import blended_transform_factory

    configs = data["configs"]
    xs = [c["number"] for c in configs]
    ys = [c["value_us"] for c in configs]
    ax.plot(xs, ys, "o", color="tab:blue", ms=6, zorder=3, label=f"measured config ({len(configs)})")
    if data["best_so_far"]:
        last = max([xs[-1], *(f["number"] for f in data["failed"]), *(p["number"] for p in data["pruned"])])
        bx = [n for n, _ in data["best_so_far"]] + [last]
        by = [v for _, v in data["best_so_far"]] + [data["best_so_far"][-1][1]]
        ax.step(bx, by, where="post", color="tab:orange", lw=2, zorder=2, label="best so far")
    for n in chosen:
        v = next(x["value_us"] for x in configs if x["number"] == n)
        ax.plot([n], [v], marker="*", ms=20, color="gold", mec="black", mew=1.2, zorder=5, ls="none")
    if chosen:
        ax.plot([], [], marker="*", ms=14, color="gold", mec="black", ls="none",
                label=f"chosen: {data['chosen']['plan']} plan ({data['chosen']['T_us']:,.2f} µs/call)")
    edge = blended_transform_factory(ax.transData, ax.transAxes)
    if data["failed"]:
        ax.plot([f["number"] for f in data["failed"]], [0.95] * len(data["failed"]), "x", color="tab:red",
                ms=9, mew=2, transform=edge, ls="none", label=f"failed ({len(data['failed'])}, no time)")
    if data["pruned"]:
        ax.plot([p["number"] for p in data["pruned"]], [0.04] * len(data["pruned"]), "v", color="grey",
                ms=7, transform=edge, ls="none", label=f"pruned ({len(data['pruned'])}, never compiled)")
    if ys and max(ys) > 20 * min(ys):
        ax.set_yscale("log")
    if ys:  # room for the labels and for the failed and pruned marks at the edges
        lo, hi = min(ys), max(ys)
        if ax.get_yscale() == "log":
            ax.set_ylim(lo / 1.6, hi * 2.2)
        else:
            pad = (hi - lo) or hi * 0.1 or 1.0
            ax.set_ylim(lo - 0.22 * pad, hi + 0.4 * pad)
    numbers = xs + [f["number"] for f in data["failed"]] + [p["number"] for p in data["pruned"]]
    if numbers:  # room on the right for the last label
        span = max(max(numbers) - min(numbers), 1)
        ax.set_xlim(min(numbers) - 0.03 * span - 0.5, max(numbers) + 0.14 * span + 0.5)
    keep = set(labelled(data))
    def text(c, full=False):
        return ((c["label"] if full or c["number"] in keep else f"#{c['number']}")
                + (f" (x{c['repeats'] + 1})" if c["repeats"] else ""))
    notes = [(text(c), (c["number"], c["value_us"]), ax.transData,
              {"fontsize": 7 if c["number"] in keep else 6, "color": "black" if c["number"] in keep else "dimgrey",
               "fontweight": "bold" if c["number"] in chosen else "normal"})
             for c in sorted(configs, key=lambda c: (c["number"] not in chosen, c["value_us"]))]
    notes += [(text(f, full=True), (f["number"], 0.95), edge, {"fontsize": 6.5, "color": "tab:red"}) for f in data["failed"]]
    _place_labels(fig, ax, notes)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    ax.set_ylabel("weighted time per call (µs)")
    shown = "" if len(keep) == len(configs) else f"; knobs written out for {len(keep)}, the best and the chosen, trial numbers for the rest"
    ax.set_title(f"weighted time of each measured config (a config proposed again is no new point: (x3) says it was "
                 f"proposed 3 times{shown})",
                 fontsize=10, pad=30)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=5, frameon=False)


def _draw_table(tab, data: dict, chosen: dict) -> None:
    """The bottom left panel: the best configs' per-shape times and ratios; framed, what the plan runs."""
    from matplotlib.patches import Rectangle

    shapes = data["shapes"]
    top = data["top"]
    cols = ["weighted", *shapes]
    if top:
        ratios = [[r["ratio"][c] for c in cols] for r in top]
        tab.imshow(ratios, cmap="RdYlGn_r", vmin=1.0, vmax=2.0, aspect="auto")
        for i, r in enumerate(top):
            for j, c in enumerate(cols):
                us = r["value_us"] if c == "weighted" else r["times_us"][c]
                dark = r["ratio"][c] < 1.12 or r["ratio"][c] > 1.75  # the ends of the colour map
                tab.text(j, i, f"{us:,.2f}\n{r['ratio'][c]:.2f}x", ha="center", va="center", fontsize=7,
                         color="white" if dark else "black")
                if c in chosen.get(r["number"], {}).get("shapes", []):
                    tab.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2.2, ec="black"))
        tab.set_yticks(range(len(top)))
        tab.set_yticklabels([("★ " if r["number"] in chosen else "") + f"#{r['number']} {r['label']}" for r in top],
                            fontsize=7.5)
        tab.set_xticks(range(len(cols)))
        tab.set_xticklabels(["weighted"] + [f"{k}\n(weight {data['weights'][k]:.2f})" for k in shapes],
                            fontsize=7.5)
        tab.xaxis.tick_top()
    else:
        tab.axis("off")
        tab.text(0.5, 0.5, "no config completed", ha="center", va="center", transform=tab.transAxes)
    tab.set_title(f"per-shape time (µs) of the {len(top)} best configs, and x the best for that shape; framed: "
                  f"what the chosen plan runs", fontsize=9, pad=38)


def _draw_importances(imp_ax, data: dict) -> None:
    """The right panel's top: optuna's parameter importances, or why there are none."""
    if data["importances"]:
        names = sorted(data["importances"], key=lambda k: data["importances"][k])
        imp_ax.barh(names, [data["importances"][k] for k in names], color="tab:purple")
        imp_ax.set_xlim(0, 1)
        for i, k in enumerate(names):
            imp_ax.text(data["importances"][k] + 0.01, i, f"{data['importances'][k]:.2f}", va="center", fontsize=8)
        imp_ax.set_title("parameter importance (optuna, over the measured configs)", fontsize=9)
        imp_ax.tick_params(labelsize=8)
    else:
        imp_ax.axis("off")
        imp_ax.set_title("parameter importance", fontsize=9)
        imp_ax.text(0.5, 0.5, data["importances_note"], ha="center", va="center", wrap=True, fontsize=8,
                    transform=imp_ax.transAxes)


def _draw_plans(box, data: dict) -> None:
    """The right panel's bottom: the plans' T and P, the mix's weights and the knobs' abbreviations."""
    shapes = data["shapes"]
    box.axis("off")
    lines = ["plans (T per call, P preparation):"]
    for o in data["plans"]:
        mark = "->" if o["name"] == data["chosen"]["plan"] else "  "
        lines.append(f" {mark} {o['name']:9s} T = {o['T_us']:10,.2f} µs   P = {o['P_s']:.2f} s")
    lines.append("mix: " + ", ".join(f"{k}: {data['weights'][k]:.2f}" for k in shapes))
    long = [f"{a} = {k}" for k, a in data["abbreviations"].items() if a != k]
    if long:
        lines.append("knobs: " + ", ".join(long))
    box.text(0, 1, "\n".join(_wrap(x, 78) for x in lines), va="top", ha="left", family="monospace", fontsize=8,
             transform=box.transAxes, bbox={"boxstyle": "round", "fc": "whitesmoke", "ec": "grey"})


def _place_labels(fig, ax, notes) -> None:
    """Annotate each point with its text where it overlaps no label placed before it (the chosen and
    the fastest first): the first free one of a few offsets around the point, else the least crowded."""
    renderer = fig.canvas.get_renderer()
    offsets = [(5, 6), (5, -13), (-5, 6), (-5, -13), (5, 17), (5, -24), (-5, 17), (-5, -24), (5, 28), (5, -35)]
    placed = []
    for text, xy, transform, style in notes:
        best = None
        for dx, dy in offsets:
            ann = ax.annotate(text, xy, xycoords=transform, xytext=(dx, dy), textcoords="offset points",
                              ha="left" if dx > 0 else "right", **style)
            box = ann.get_window_extent(renderer)
            hits = sum(box.overlaps(b) for b in placed)
            if best is None or hits < best[0]:
                if best is not None:
                    best[1].remove()
                best = (hits, ann, box)
            else:
                ann.remove()
            if hits == 0:
                break
        placed.append(best[2])


def _wrap(line: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(line, width, subsequent_indent="    ")) or line


def write_report(tuned, path) -> str:
    """`tuned.report(path)`: JSON (the plan, every trial, and `report_data` as "summary") to `path`, or
    to `path` with .json when `path` ends in .png, which gets the picture. Returns `path`."""
    p = Path(path)
    if p.suffix == ".png":  # before writing anything: the picture needs matplotlib
        try:
            import matplotlib  # noqa: F401
        except ImportError as e:
            raise ArgumentError("report to .png needs matplotlib (pip install matplotlib, or pip install -e "
                                "\".[plot]\"); or give a .json path") from e
    summary = report_data(tuned)
    data = {"plan": tuned.plan, "trials": tuned.trials(), "summary": summary}
    text = json.dumps(data, indent=2, default=str)
    if p.suffix != ".png":
        p.write_text(text)
        return str(p)
    draw_report(summary, p)
    p.with_suffix(".json").write_text(text)
    return str(p)
