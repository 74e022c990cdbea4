"""Running fuzz cases: each in a worker process with a timeout, classified, and failures reduced.

Outcomes: `refused` (a `tc.TilecError` at build or call, keyed by class and a normalized reason),
`correct`, `wrong` (the oracle disagrees, a sentinel was overwritten, an element was never written, an
input was modified), `internal` (any other exception, at a schedule primitive, at build or at call,
keyed by type and the traceback's last frame), `hung` (past the timeout: the worker is killed), `crash`
(the worker died), and `fuzzer-error` (the oracle itself failed: a bug of this fuzzer, not of tilec).

`Pool` keeps `jobs` worker processes (spawned: a fresh Python each, with Triton's interpreter unless there is a GPU) and
restarts one after `max_tasks` cases. `reduce_case` shrinks a failing case while it fails the same way:
it drops schedule statements one at a time, turns knobs into ints, shrinks sizes, and drops input
specials, strides, facts, specializations and extra outputs; the result prints as a standalone script.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import re
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

REASON_WORDS = 12


# ---------------------------------------------------------------------------------------------
# in the worker


def _names(ns: dict) -> dict[str, str]:
    """Names a message may mention, with the placeholder each is replaced by in a reason key."""
    out: dict[str, str] = {}
    s = ns.get("s")
    if s is None:
        return out
    for n in ns.get("SIZES", {}):
        out[n] = "S"
    for n in s.tensors:
        out[n] = "T"
    for n in s.knobs:
        out[n] = "KNOB"
    for st in list(s.stages.values()) + list(s.caches):
        out.setdefault(st.name, "T")
        axes = list(st.leaves)
        for rel in st.relations:
            axes += [getattr(rel, f) for f in ("parent", "outer", "inner", "fused") if hasattr(rel, f)]
        if st.kind == "compute":
            axes += list(st.tensor.axis) + list(st.tensor.reduce_axis)
        for a in axes:
            out.setdefault(a.name, "a")
    return out


def normalize(msg: str, names: dict[str, str]) -> str:
    """A short reason key: the message's first line, names and numbers replaced, first words."""
    msg = (msg.strip().splitlines() or [""])[0]
    msg = re.sub(r"\b\w+_kernel\b", "K_kernel", msg)
    for n in sorted(names, key=len, reverse=True):
        msg = re.sub(rf"(?<![\w]){re.escape(n)}(?![\w])", names[n], msg)
    msg = re.sub(r"\d+", "N", msg)
    msg = re.sub(r"'[^']*'", "'..'", msg)
    return " ".join(msg.split()[:REASON_WORDS])


def _last_frame(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return "?"
    f = tb[-1]
    path = f.filename
    for root in ("tilec/", "triton/", "torch/", "tests/fuzz/"):
        if root in path:
            path = root + path.split(root, 1)[1]
            break
    return f"{path}:{f.lineno} in {f.name}"


def _frames(exc: BaseException) -> list[str]:
    return [f.filename for f in traceback.extract_tb(exc.__traceback__)]


def _internal(stage: str, exc: BaseException, names: dict) -> dict:
    frame = _last_frame(exc)
    where = re.sub(r":\d+ in ", ":", frame)
    msg = normalize(f"{exc}", names)
    if any("tests/fuzz/oracle.py" in f for f in _frames(exc)[-1:]):
        status = "fuzzer-error"
    else:
        status = "internal"
    key = f"{type(exc).__name__} at {where}: {msg[:80]}"
    return dict(status=status, stage=stage, key=key, message=f"{type(exc).__name__}: {str(exc)[:400]}",
                frame=frame, traceback="".join(traceback.format_exception(exc))[-3000:])


def _refused(stage: str, exc: BaseException, names: dict) -> dict:
    cls = type(exc).__name__
    reason = getattr(exc, "reason", None)
    text = normalize(str(exc), names)
    key = f"{cls}[{reason}]: {text}" if reason else f"{cls}: {text}"
    return dict(status="refused", stage=stage, key=key, cls=cls, message=str(exc)[:300])


def execute(case, ns: dict | None = None) -> dict:
    """Run one case (from its live namespace, or from its text) and classify it."""
    import tilec as tc
    from tests.fuzz import gen
    from tests.fuzz.oracle import check_kernel

    if ns is None:
        try:
            ns = gen.exec_case(case)
        except tc.TilecError as e:
            return _refused("schedule", e, {})
        except Exception as e:  # noqa: BLE001 - classifying is the point
            return _internal("schedule", e, {})
    names = _names(ns)
    if case.error is not None:
        last = case.error.strip().splitlines()[-1]
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', case.error)
        frame = "?"
        if frames:
            path, line, fn = frames[-1]
            for root in ("tilec/", "triton/", "torch/"):
                if root in path:
                    path = root + path.split(root, 1)[1]
            frame = f"{path}:{line} in {fn}"
        where = re.sub(r":\d+ in ", ":", frame)
        etype = last.split(":")[0]
        msg = normalize(last.split(":", 1)[1] if ":" in last else "", names)
        return dict(status="internal", stage="schedule", key=f"{etype} at {where}: {msg[:80]}",
                    message=last[:400], frame=frame, traceback=case.error[-3000:], line=case.error_line)
    for attempt_ in range(6):
        args = ns["CASE"]
        try:
            kernel = tc.build(args["sched"], args["args"], config=args["config"], specialize=args["specialize"])
        except tc.TilecError as e:
            return _refused("build", e, names)
        except Exception as e:  # noqa: BLE001
            return _internal("build", e, names)
        work = estimate_work(kernel, args["sizes"])
        if work is None or work <= MAX_WORK:
            break
        if attempt_ == 5 or not _shrink(case):
            if work > SLOW_WORK:  # the loop extents are constants no size shrinks: not runnable here
                return dict(status="slow", work=work)
            break
        before = dict(case.sizes)
        try:  # too slow for the interpreter: the same case with smaller sizes
            ns = gen.exec_case(case)
        except tc.TilecError:  # a refusal that depends on the sizes (a bind of a loop that now runs once is
            case.sizes.clear()  # legal, and the next bind of that grid axis not): not this case any more,
            case.sizes.update(before)  # so it stays at the sizes it was generated for (seed 155741845)
            if work > SLOW_WORK:
                return dict(status="slow", work=work)
            break
        except Exception as e:  # noqa: BLE001
            return _internal("schedule", e, names)
    try:
        report = check_kernel(**args, kernel=kernel)
    except tc.TilecError as e:
        return _refused("call", e, names)
    except Exception as e:  # noqa: BLE001
        return _internal("call", e, names)
    if report.ok:
        return dict(status="correct", uncertain=report.uncertain)
    return dict(status="wrong", stage="check", key=report.signature, message=str(report), uncertain=report.uncertain)


MAX_WORK = 30_000  # interpreted ops per case (about 150 us each), estimated from the loop nests
SLOW_WORK = 300_000  # past this after shrinking (about 45 s and more) the case is counted "slow", not run


def estimate_work(kernel, sizes: dict) -> int | None:
    """Statements the kernels execute: programs x the statements of each loop nest, loops unrolled."""
    from tilec.ir.expr import evaluate
    from tilec.lower.nest import For
    from tilec.lower.nest_printer import show
    from tilec.lower.triton_printer import statement

    env = {"cdiv": lambda a, b: -(-a // b), **sizes, **kernel.program.config}

    def texts(body):
        for x in body:
            yield from texts(x.body) if isinstance(x, For) else [statement(x, kernel.program.form) or ""]

    def cost(body, tile: int) -> int:
        n = 0
        for x in body:
            if isinstance(x, For):
                n += int(eval(show(x.extent, kernel.program.config), {}, env)) * (1 + cost(x.body, tile))
            else:  # a statement costs about one interpreted op per 25 characters of it
                text = statement(x, kernel.program.form) or ""
                # the interpreter calls a tl.reduce's combine function (the NaN-keeping max) once per element, in
                # Python: bounded by the product of the kernel's tile extents (seed 24801005 ran 86 s); so does a
                # tl.associative_scan's (cummax/cummin/linear_scan), a few ops each (seed 27400453 ran > 10 min)
                n += 1 + len(text) // 25 + text.count("tl.reduce(") * tile + text.count("tl.associative_scan(") * 4 * tile
        return n

    try:
        total = 0
        for k in kernel.program.kernels:
            grid = 1
            for g in k.grid:
                grid *= int(evaluate(g, {**sizes, **kernel.program.config}))
            tile = 1
            for ext in [m for t in texts(k.body) for m in re.findall(r"tl\.arange\(0, (\w+)\)", t)]:
                tile *= int(eval(ext, {}, env))
            total += grid * cost(k.body, tile)
        return total
    except Exception:  # noqa: BLE001 - an estimate only
        return None


def _shrink(case) -> bool:
    """Halve the largest size of `case` (keeping its facts); False if nothing can shrink."""
    big = sorted(case.sizes, key=case.sizes.get, reverse=True)
    for name in big:
        d = case.facts.get(name, 1)
        v = max(d, case.sizes[name] // 2 // d * d)
        if v < case.sizes[name]:
            case.sizes[name] = v
            return True
    return False


def _sched_stats(case) -> dict:
    prims = collections.Counter()
    refused = collections.Counter()
    for line in case.sched:
        m = re.search(r"\.(\w+)\(", line.code)
        p = m.group(1) if m else "?"
        prims[p] += 1
        if line.kind == "refused":
            refused[p] += 1
    return dict(prims=dict(prims), prims_refused=dict(refused))


def run_seed(seed: int, progress=None) -> dict:
    from tests.fuzz import gen

    t0 = time.time()
    try:
        case, ns = gen.generate(seed, progress)
    except Exception as e:  # noqa: BLE001 - a generator bug: report it as the fuzzer's
        out = _internal("generate", e, {})
        out.update(status="fuzzer-error", seed=seed, elapsed=time.time() - t0)
        return out
    out = execute(case, ns)
    out.update(seed=seed, family=case.family, elapsed=time.time() - t0, **_sched_stats(case))
    if out["status"] not in ("correct", "refused"):
        out["case"] = case
    return out


def run_case(case) -> dict:
    t0 = time.time()
    out = execute(case)
    out.update(seed=case.seed, family=case.family, elapsed=time.time() - t0)
    return out


def default_target() -> None:
    """Run kernels compiled where there is a CUDA device, else in Triton's interpreter, unless
    TRITON_INTERPRET says otherwise (as tests/conftest.py does). The interpreter of the GPU host's
    Triton 3.6 fails on its numpy 2.4 (shared/notes/gpu.md), so a GPU never falls back to it."""
    import torch

    os.environ.setdefault("TRITON_INTERPRET", "0" if torch.cuda.is_available() else "1")


def _worker(conn) -> None:
    default_target()
    import warnings

    warnings.filterwarnings("ignore")
    import numpy as np

    np.seterr(all="ignore")
    import torch

    torch.set_num_threads(1)
    import tilec  # noqa: F401
    from tests.fuzz import gen, oracle  # noqa: F401

    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        kind, payload = msg
        if kind == "seed":
            out = run_seed(payload, progress=lambda text: conn.send(("progress", text)))
        else:
            out = run_case(payload)
        conn.send(("done", out))


# ---------------------------------------------------------------------------------------------
# in the parent


class _W:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.tasks = 0
        self.ready = False
        self.task = None
        self.started = 0.0
        self.progress = None

    def stop(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


class Pool:
    """`jobs` worker processes; `run(tasks)` yields (task, outcome) as cases finish."""

    def __init__(self, jobs: int = 1, timeout: float = 60.0, max_tasks: int = 400, start_timeout: float = 180.0):
        default_target()
        root = str(Path(__file__).resolve().parents[2])  # the workers import tests.fuzz from here
        paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root] + [p for p in paths if p])
        self.ctx = mp.get_context("spawn")
        self.jobs, self.timeout, self.max_tasks, self.start_timeout = jobs, timeout, max_tasks, start_timeout
        self.workers: list[_W | None] = [None] * jobs

    def close(self) -> None:
        for w in self.workers:
            if w is not None:
                w.stop()
        self.workers = [None] * self.jobs

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fresh(self, i: int) -> _W:
        w = _W(self.ctx)
        self.workers[i] = w
        w.started = time.time()
        return w

    def run(self, tasks, timeout: float | None = None, deadline: float | None = None):
        """`tasks`: an iterator of ("seed", n) or ("case", Case). Stops taking new tasks at `deadline`."""
        timeout = timeout or self.timeout
        tasks = iter(tasks)
        exhausted = False
        while True:
            for i in range(self.jobs):
                w = self.workers[i]
                if w is None or not w.proc.is_alive() and w.task is None:
                    w = self._fresh(i)
                if w.ready and w.task is None and not exhausted:
                    if deadline is not None and time.time() > deadline:
                        exhausted = True
                        continue
                    task = next(tasks, None)
                    if task is None:
                        exhausted = True
                        continue
                    w.task, w.started, w.progress = task, time.time(), None
                    w.conn.send(task)
            busy = [w for w in self.workers if w is not None and (w.task is not None or not w.ready)]
            if exhausted and not any(w.task is not None for w in busy):
                return
            now = time.time()
            waits = [w.started + (timeout if w.ready else self.start_timeout) - now for w in busy]
            ready = wait([w.conn for w in busy], timeout=max(0.01, min(waits) if waits else 0.1))
            for w in busy:
                if w.conn in ready:
                    try:
                        kind, payload = w.conn.recv()
                    except (EOFError, OSError):
                        yield from self._dead(w, "crash")
                        continue
                    if kind == "ready":
                        w.ready = True
                    elif kind == "progress":
                        w.progress = payload
                    elif kind == "done":
                        task, w.task = w.task, None
                        w.tasks += 1
                        yield task, payload
                        if w.tasks >= self.max_tasks:
                            w.stop()
                            self.workers[self.workers.index(w)] = None
                elif time.time() - w.started > (timeout if w.ready else self.start_timeout):
                    yield from self._dead(w, "hung")

    def _dead(self, w: _W, status: str):
        i = self.workers.index(w)
        task = w.task
        if status == "crash":
            w.proc.join(timeout=5)
        code = w.proc.exitcode
        w.stop(kill=True)
        self.workers[i] = None
        if task is None:
            if not w.ready:
                raise RuntimeError(f"a fuzz worker failed to start ({status}, exit code {code})")
            return
        out = dict(status=status, stage="run", key=status if status == "hung" else f"crash (exit code {code})",
                   message=f"worker {status}" + (f", exit code {code}" if status == "crash" else ""),
                   partial=w.progress)
        kind, payload = task
        if kind == "seed":
            out["seed"] = payload
        else:
            out["seed"] = payload.seed
            out["case"] = payload
        yield task, out

    def run_one(self, task, timeout: float | None = None) -> dict:
        for _, out in self.run([task], timeout=timeout):
            return out
        raise RuntimeError("no outcome")


def signature(out: dict) -> tuple:
    return (out["status"], out.get("key"))


FAILURES = ("wrong", "internal", "hung", "crash")


def recover_case(pool: Pool, out: dict):
    """The Case of a failing outcome; for a worker killed while generating, regenerate it in-process-free
    fashion is impossible, so the partial text is kept in `out['partial']` instead (None here)."""
    return out.get("case")


def reduce_case(pool: Pool, out: dict, budget_s: float = 120.0, max_tries: int = 300, timeout: float | None = None):
    """Shrink the case of failing outcome `out` while it fails with the same signature.

    Returns (case, note): the smallest case found and a note on how it went."""
    case = recover_case(pool, out)
    if case is None:
        return None, "no case text (the worker died while generating it; see the partial text)"
    sig = signature(out)
    t_end = time.time() + budget_s
    tries = 0
    hung = out["status"] == "hung"
    limit = min(timeout or pool.timeout, 30.0) if hung else timeout
    max_tries = 12 if hung else max_tries

    def fails(c) -> bool:
        nonlocal tries
        if tries >= max_tries or time.time() > t_end:
            return False
        tries += 1
        o = pool.run_one(("case", c), timeout=limit)
        return signature(o) == sig

    if not fails(case):
        return case, "the case's text does not reproduce the failure on its own (flaky, or state-dependent)"

    def knob_free(c, n):
        line = c.sched[n]
        m = re.search(r"tc\.knob\('(\w+)', \[([\d, ]+)\]\)", line.code)
        if not m:
            return None
        name = m.group(1)
        value = c.config.get(name, int(m.group(2).split(",")[0]))
        d = c.copy()
        d.sched[n].code = line.code.replace(m.group(0), str(value))
        if not any(f"tc.knob('{name}'" in x.code for x in d.sched):
            d.config.pop(name, None)
        return d

    changed = True
    while changed and tries < max_tries and time.time() < t_end:
        changed = False
        for n in reversed(range(len(case.sched))):
            if n >= len(case.sched) or (case.error is not None and n == len(case.sched) - 1):
                continue
            d = case.copy()
            del d.sched[n]
            if fails(d):
                case, changed = d, True
        for n in range(len(case.sched)):
            while n < len(case.sched) and "tc.knob(" in case.sched[n].code:
                d = knob_free(case, n)
                if d is None or not fails(d):
                    break
                case, changed = d, True
        for name in list(case.sizes):
            v = case.sizes[name]
            step = case.facts.get(name, 1)
            for cand in sorted({step, 2 * step, (v // 2) // step * step, v - step}):
                if 0 < cand < v:
                    d = case.copy()
                    d.sizes[name] = cand
                    if fails(d):
                        case, changed = d, True
                        break
        for name, spec in list(case.inputs.items()):
            for key in list(spec):
                if key not in case.inputs.get(name, {}):
                    continue
                d = case.copy()
                del d.inputs[name][key]
                if key == "special":
                    d.inputs[name].pop("kinds", None)
                if fails(d):
                    case, changed = d, True
        for name in list(case.facts):
            d = case.copy()
            del d.facts[name]
            if fails(d):
                case, changed = d, True
        if case.specialize:
            d = case.copy()
            d.specialize = []
            if fails(d):
                case, changed = d, True
        ns_out = _schedule_outputs(case)
        for a in list(case.args):
            if a in ns_out.get("extra", ()):
                d = case.copy()
                d.args.remove(a)
                if fails(d):
                    case, changed = d, True
        n = 0
        while n < len(case.compute):
            for d in _simpler_computes(case, n):
                if fails(d):
                    case, changed = d, True
                    break
            n += 1
    return case, f"reduced in {tries} runs"


def _schedule_outputs(case) -> dict:
    """Which args are outputs beyond those of create_schedule (they may be dropped)."""
    line = next((x for x in case.compute if x.startswith("s = tc.create_schedule(")), "")
    m = re.search(r"\[(.*)\]", line)
    outs = {x.strip() for x in m.group(1).split(",")} if m else set()
    computed = {x.split(" = ", 1)[0] for x in case.compute if " = tc.compute(" in x}
    return {"extra": [a for a in case.args if a in computed and a not in outs]}


def _get(node, path):
    for field_, idx in path:
        node = getattr(node, field_)
        if idx is not None:
            node = node[idx]
    return node


def _set(node, path, value):
    parent = _get(node, path[:-1])
    field_, idx = path[-1]
    if idx is None:
        setattr(parent, field_, value)
    else:
        getattr(parent, field_)[idx] = value


def _children(node):
    """(path step, child) of the sub-expressions a simpler body may hoist."""
    import ast

    if isinstance(node, ast.BinOp):
        return [(("left", None), node.left), (("right", None), node.right)]
    if isinstance(node, ast.UnaryOp):
        return [(("operand", None), node.operand)]
    if isinstance(node, ast.Compare):
        return [(("left", None), node.left)] + [(("comparators", k), c) for k, c in enumerate(node.comparators)]
    if isinstance(node, ast.Call):
        out = [(("args", k), a) for k, a in enumerate(node.args)]
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("astype", "eq", "ne"):
            out.insert(0, (("func", None), node.func))  # the path goes on to .value below
        return out
    return []


def _simpler_computes(case, n):
    """Cases whose statement n is simpler: its tensor removed, its dtype dropped, a sub-expression of its
    body put in place of an enclosing one, or a computed index made a plain axis."""
    import ast

    line = case.compute[n]
    m = re.match(r"(\w+) = tc\.(compute|placeholder)\(", line)
    if not m:
        return
    name = m.group(1)
    # drop the tensor altogether (statements naming it go too; a dangling name is just a failed try)
    d = case.copy()
    d.compute = [x for k, x in enumerate(d.compute) if k != n and not x.startswith(f"{name}_")]
    d.compute = [re.sub(r"create_schedule\(\[(.*)\]\)", lambda mm: "create_schedule([" + ", ".join(
        a for a in mm.group(1).split(", ") if a != name) + "])", x) for x in d.compute]
    d.sched = [x for x in d.sched if not re.search(rf"(?<![\w]){name}(?![\w])|{name}_\w+", x.code)]
    d.args = [a for a in d.args if a != name]
    d.inputs.pop(name, None)
    yield d
    if m.group(2) != "compute":
        return
    tree = ast.parse(line)
    call = tree.body[0].value
    if any(k.arg == "dtype" for k in call.keywords):
        t2 = ast.parse(line)
        t2.body[0].value.keywords = [k for k in t2.body[0].value.keywords if k.arg != "dtype"]
        d = case.copy()
        d.compute[n] = ast.unparse(t2)
        yield d
    lam = next((k for k, a in enumerate(call.args) if isinstance(a, ast.Lambda)), None)
    if lam is None:
        return
    root = [("body", 0), ("value", None), ("args", lam), ("body", None)]
    todo = [root]
    while todo:
        path = todo.pop(0)
        node = _get(tree, path)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple):
            for k, el in enumerate(node.slice.elts):
                if isinstance(el, ast.Name):
                    continue
                for var in dict.fromkeys(x.id for x in ast.walk(el) if isinstance(x, ast.Name)):
                    t2 = ast.parse(line)
                    _set(t2, path + [("slice", None), ("elts", k)], ast.Name(var))
                    d = case.copy()
                    d.compute[n] = ast.unparse(t2)
                    yield d
            continue
        for step, kid in _children(node):
            kpath = path + [step] + ([("value", None)] if step == ("func", None) else [])
            kid = _get(tree, kpath)
            t2 = ast.parse(line)
            _set(t2, path, _get(t2, kpath))
            d = case.copy()
            d.compute[n] = ast.unparse(t2)
            yield d
            if not isinstance(kid, (ast.Name, ast.Constant)):
                todo.append(kpath)


# ---------------------------------------------------------------------------------------------
# a campaign


class Stats:
    """Counts of outcomes, reasons, and the failures (grouped by signature)."""

    def __init__(self):
        self.n = 0
        self.status = collections.Counter()
        self.refused_cls = collections.Counter()
        self.refused_key = collections.Counter()
        self.refused_stage = collections.Counter()
        self.prims = collections.Counter()
        self.prims_refused = collections.Counter()
        self.failures: dict[tuple, list[dict]] = collections.defaultdict(list)
        self.fuzzer_errors: dict[str, list[dict]] = collections.defaultdict(list)
        self.families = collections.Counter()
        self.correct_families = collections.Counter()
        self.elapsed = 0.0
        self.uncertain = []

    def add(self, out: dict) -> None:
        self.n += 1
        st = out["status"]
        self.status[st] += 1
        self.families[out.get("family", "?")] += 1
        self.prims.update(out.get("prims", {}))
        self.prims_refused.update(out.get("prims_refused", {}))
        if st == "refused":
            self.refused_cls[out["cls"]] += 1
            self.refused_key[out["key"]] += 1
            self.refused_stage[out["stage"]] += 1
        elif st == "correct":
            self.correct_families[out.get("family", "?")] += 1
            self.uncertain.append(out.get("uncertain", 0.0))
        elif st in FAILURES:
            self.failures[signature(out)].append(out)
        elif st == "fuzzer-error":
            self.fuzzer_errors[out.get("key", "?")].append(out)

    @property
    def failed(self) -> int:
        return sum(self.status[s] for s in FAILURES)

    def summary(self, wall: float | None = None, jobs: int = 1) -> str:
        lines = []
        rate = f", {self.n / wall:.2f} cases/s with {jobs} job(s) ({self.n / wall / jobs:.2f} per job)" if wall else ""
        lines.append(f"cases: {self.n}{rate}")
        fam = ", ".join(f"{k} {v} ({self.correct_families[k]} correct)" for k, v in sorted(self.families.items()))
        lines.append(f"  families: {fam}")
        nref = self.status["refused"]
        lines.append(f"refused: {nref} ({100 * nref / max(self.n, 1):.1f}%), at "
                     + ", ".join(f"{k} {v}" for k, v in self.refused_stage.most_common()))
        for cls, cnt in self.refused_cls.most_common():
            lines.append(f"  {cls}: {cnt} ({100 * cnt / max(nref, 1):.1f}% of refusals)")
            keys = [(k, v) for k, v in self.refused_key.most_common() if k.startswith(cls)]
            for k, v in keys[:25 if cls == "LoweringError" else 10]:
                lines.append(f"      {v:5d}  {100 * v / max(cnt, 1):5.1f}%  {k[len(cls) + 2:] if k.startswith(cls + ':') else k}")
            if len(keys) > (25 if cls == "LoweringError" else 10):
                lines.append(f"      ... {len(keys) - (25 if cls == 'LoweringError' else 10)} more reasons")
        unc = sum(self.uncertain) / max(len(self.uncertain), 1)
        lines.append(f"correct: {self.status['correct']} (mean share of output elements the oracle left "
                     f"undecided: {unc:.3f})")
        if self.status["slow"]:
            lines.append(f"slow: {self.status['slow']} (built, but over {SLOW_WORK} interpreted ops even at the "
                         f"smallest sizes: not run)")
        for st in FAILURES:
            lines.append(f"{st}: {self.status[st]}")
        if self.status["fuzzer-error"]:
            lines.append(f"fuzzer errors (bugs of the fuzzer, not tilec): {self.status['fuzzer-error']}")
        total = sum(self.prims.values())
        refused = sum(self.prims_refused.values())
        lines.append(f"schedule statements: {total}, refused at the primitive: {refused} "
                     f"({100 * refused / max(total, 1):.1f}%); by primitive (refused/made): "
                     + ", ".join(f"{p} {self.prims_refused[p]}/{n}" for p, n in self.prims.most_common()))
        return "\n".join(lines)


def campaign(seeds, jobs=1, timeout=60.0, budget=None, reduce=True, reduce_budget=90.0, per_signature=1,
             log=print):
    """Run seeds (an iterable of ints); returns (stats, reduced) where reduced maps a failure signature to
    [(seed, script, note)]."""
    stats = Stats()
    t0 = time.time()
    deadline = t0 + budget if budget else None
    reduced: dict[tuple, list] = {}
    with Pool(jobs, timeout) as pool:
        for _, out in pool.run((("seed", s) for s in seeds), deadline=deadline):
            stats.add(out)
            if out["status"] in FAILURES or out["status"] == "fuzzer-error":
                log(f"seed {out['seed']}: {out['status']} {out.get('key', '')}")
        stats.elapsed = time.time() - t0
        if reduce:
            for sig, outs in stats.failures.items():
                reduced[sig] = []
                for out in outs[:per_signature]:
                    t1 = time.time()
                    try:
                        case, note = reduce_case(pool, out, budget_s=reduce_budget)
                    except Exception as e:  # noqa: BLE001 - a reducer bug must not lose the failure
                        case, note = out.get("case"), f"not reduced: the reducer failed ({type(e).__name__}: {e})"
                    if case is None:
                        script = out.get("partial") or ""
                    else:
                        script = case.script(f"{out['status']}: {out.get('key', '')}")
                    reduced[sig].append((out["seed"], script, f"{note} ({time.time() - t1:.0f} s)"))
    return stats, reduced
