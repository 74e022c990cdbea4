"""Tuned plans as files: `tuned.save(path)` and `tc.load(path, outputs)` (issue 28).

A saved plan is JSON (no pickle: what is read back is data, checked before use):

    format, version         "tilec-plan", 1
    tilec, triton, torch    the versions it was tuned with
    device                  the device it was measured on (torch's name, or "triton-interpreter")
    study                   the tuning study's name (its fingerprint: study.study_key), or null
    fingerprint             a hash of the computation and schedule (Schedule.fingerprint), to refuse a plan
                            loaded onto another computation
    trace                   the schedule's trace (tc.replay rebuilds it on the outputs given to load)
    args                    the kernel's tensors by name, inputs then outputs (tc.build's args)
    mix                     the shapes and weights tuned for, and the fixed sizes
    plan                    the plan chosen ("generic", "buckets" or "per-shape"), T and P (tuning/plans.py)
    configs                 shape key -> config; generic: the best single config over the mix
    expected_calls          what the plan was chosen for

`tc.load` replays the trace on the outputs given, checks that the computation is the one tuned (the
fingerprint), that every config is one of the schedule's (each knob one of its choices), and builds the plan's
kernels. Where the device or Triton version differs from the file's, a config tuned there may be slow or not
compile here: load warns (`PlanMismatch`) and serves every shape with the generic config, never a kernel it
cannot check. A package ships its plans as such files beside its code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tilec.errors import ArgumentError
from tilec.ir.tensor import Tensor
from tilec.runtime import triton_compat
from tilec.schedule.trace import Trace, replay
from tilec.tune.mix import ShapeMix
from tilec.tune.plans import PlanOption
from tilec.version import __version__

if TYPE_CHECKING:
    from tilec.tune.study import Tuned

FORMAT = "tilec-plan"
VERSION = 1
PLANS = ("generic", "buckets", "per-shape")


class PlanMismatch(UserWarning):
    """The warning `tc.load` gives when a plan was tuned on another device or Triton version: every shape is
    then served by the plan's generic config (the message says what differs).

    Args:
        message: what differs, and what is served instead.

    Example:
        >>> import warnings
        >>> issubclass(tc.PlanMismatch, UserWarning)
        True
    """


def _fingerprint(sched, args: list[str]) -> str:
    """The computation, its schedule and the order of the kernel's tensors (which tensor a call's position
    binds to), hashed."""
    return hashlib.sha256((sched.fingerprint() + "\nargs: " + ",".join(args)).encode()).hexdigest()[:16]


def _versions() -> dict[str, str]:
    import torch
    return {"tilec": __version__, "triton": triton_compat.triton().__version__, "torch": torch.__version__}


def to_dict(tuned) -> dict:
    """What `save` writes, as a dict (the module docstring lists the fields)."""
    from tilec.tune.study import _device_name
    generic = next((o for o in tuned.options if o.name == "generic"), tuned.chosen)
    return {"format": FORMAT, "version": VERSION, **_versions(), "device": _device_name(),
            "study": getattr(tuned.study, "study_name", None),
            "fingerprint": _fingerprint(tuned.sched, [t.name for t in tuned.args]),
            "trace": tuned.sched.trace.to_json(), "args": [t.name for t in tuned.args],
            "mix": {"shapes": [dict(s) for s in tuned.mix.shapes], "weights": list(tuned.mix.weights),
                    "fixed": dict(tuned.mix.fixed)},
            "plan": {"name": tuned.chosen.name, "T": tuned.chosen.T, "P": tuned.chosen.P},
            "configs": dict(tuned.chosen.configs), "generic": next(iter(generic.configs.values())),
            "generic_T": generic.T,
            "expected_calls": tuned.calls}


def save(tuned, path: str | os.PathLike) -> str:
    """Write `tuned`'s plan to `path` as JSON (replacing it); `Tuned.save`. Returns the path."""
    text = json.dumps(to_dict(tuned), indent=1, sort_keys=True)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return os.fspath(path)


def load(path: str | os.PathLike, outputs: Tensor | Sequence[Tensor]) -> Tuned:
    """A tuned plan saved by `tuned.save(path)`, served without tuning: the schedule replayed from the file's
    trace on `outputs`, built with the file's configs for the shapes it was tuned for (a shape outside them
    gets the nearest one's config, as a tuned plan's call does).

    A plan tuned on another device or Triton version warns (`tc.PlanMismatch`) and serves every shape with
    its generic config.

    Args:
        path: the JSON file `tuned.save` wrote.
        outputs: the computed tensors the plan was tuned for (a tensor or a list), made by the same compute
            code: the file holds the schedule, not the computation.

    Returns:
        A `Tuned` (callable like the one saved; it holds no study: `.trials()` is refused).

    Raises:
        ArgumentError: the file cannot be read or is not a saved plan (what is wrong is named), the trace
            does not fit `outputs`, `outputs` compute something else than the plan was tuned for, or a config
            is not one of the schedule's.

    Example:
        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "plan.json"
        >>> tc.load(path, Y)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tilec.errors.ArgumentError: load: cannot read '...plan.json': No such file or directory
    """
    from tilec.tune.study import Tuned, _device_name, _valid_config, plan_kernels
    where = f"load({os.fspath(path)!r})"
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ArgumentError(f"load: cannot read {os.fspath(path)!r}: {e.strerror or e}") from None
    except ValueError as e:
        raise ArgumentError(f"{where}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ArgumentError(f"{where}: not a tilec plan of version {VERSION} (expected an object with \"format\": "
                            f"\"{FORMAT}\" and \"version\": {VERSION}, as tuned.save writes)")
    for field, kind in (("trace", str), ("fingerprint", str), ("args", list), ("mix", dict), ("plan", dict),
                        ("configs", dict), ("generic", dict), ("device", str), ("triton", str)):
        if not isinstance(data.get(field), kind):
            raise ArgumentError(f"{where}: field {field!r} is missing or not a{'n' if kind is dict else ''} "
                                f"{ {str: 'string', list: 'list', dict: 'object'}[kind]}")
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    sched = replay(Trace.from_json(data["trace"]), outs)
    names = data["args"]
    if not all(isinstance(n, str) for n in names) or _fingerprint(sched, names) != data["fingerprint"]:
        raise ArgumentError(f"{where}: these outputs ({', '.join(t.name for t in outs)}) compute something else "
                            f"than the plan was tuned for (the computation or its schedule differs from the "
                            f"saved one's fingerprint); pass the outputs of the compute the plan was tuned on, "
                            f"or tune this one")
    if not all(n in sched.tensors for n in names) or len(set(names)) != len(names):
        raise ArgumentError(f"{where}: args {str(names)[:200]} are not distinct tensors of the schedule "
                            f"({', '.join(sched.tensors)})")
    args = [sched.tensors[n] for n in names]
    mix = _mix(data["mix"], where)
    try:  # each shape gives exactly the schedule's sizes
        mix.check_sizes(sched, "the plan's schedule", "a saved mix names every size of its schedule")
    except ArgumentError as e:
        raise ArgumentError(f"{where}: \"mix\": {e}") from None
    knobs = {n: list(k.choices) for n, k in sched.knobs.items()}
    keys = [ShapeMix.key(s) for s in mix.shapes]
    configs, generic = data["configs"], data["generic"]
    for cfg in [generic, *configs.values()]:
        if not _valid_config(cfg, knobs):
            raise ArgumentError(f"{where}: {str(cfg)[:200]} is not a config of the schedule's knobs "
                                f"({', '.join(f'{n} in {c}' for n, c in knobs.items()) or 'none'})"[:500])
    if sorted(configs) != sorted(keys):
        raise ArgumentError(f"{where}: \"configs\" must give a config for each shape of the mix ({', '.join(keys)}); "
                            f"it gives {', '.join(configs)[:300]}")
    plan = data["plan"]
    name = plan.get("name")
    T, P = plan.get("T"), plan.get("P")
    if name not in PLANS or not all(type(x) in (int, float) and math.isfinite(x) for x in (T, P)):
        raise ArgumentError(f"{where}: \"plan\" must be {{\"name\": one of {PLANS}, \"T\": seconds, \"P\": seconds}}")
    here = {"device": _device_name(), "triton": triton_compat.triton().__version__}
    differs = [f"{k} {data[k]!r} there, {here[k]!r} here" for k in ("device", "triton") if data[k] != here[k]]
    notes = [f"loaded from {os.fspath(path)}"]
    if differs:
        warnings.warn(PlanMismatch(f"{where}: the plan was tuned on another machine ({'; '.join(differs)}): "
                                   f"serving every shape with its generic config {generic}; tune here for this "
                                   f"machine's plan"), stacklevel=2)
        name, configs = "generic", {k: generic for k in keys}
        notes.append("generic config on every shape: tuned on another device or Triton version (its time was "
                     "measured there: T is unknown here)")
    calls = data.get("expected_calls")
    calls = calls if type(calls) in (int, float) and calls > 0 else 1e6
    gT = data.get("generic_T")
    gT = float(gT) if type(gT) in (int, float) and math.isfinite(gT) else math.nan  # measured there, not here
    generic_opt = PlanOption("generic", {k: dict(generic) for k in keys}, gT if not differs else math.nan,
                             float(P), list(notes))
    if name == "generic":
        chosen, opts = generic_opt, [generic_opt]
    else:  # the generic option kept beside the chosen one: a loaded plan saves the same file again
        chosen = PlanOption(name, {k: dict(configs[k]) for k in keys}, float(T), float(P), notes)
        opts = [chosen, generic_opt]
    return Tuned(sched, args, mix, None, chosen, opts, calls, plan_kernels(sched, args, mix, chosen))


def _mix(m: dict, where: str) -> ShapeMix:
    shapes, weights, fixed = m.get("shapes"), m.get("weights"), m.get("fixed", {})
    if not (isinstance(shapes, list) and isinstance(weights, list) and len(shapes) == len(weights)
            and isinstance(fixed, dict)):
        raise ArgumentError(f"{where}: \"mix\" must be {{\"shapes\": [sizes, ...], \"weights\": [w, ...], "
                            f"\"fixed\": sizes}} with one weight per shape")
    try:
        return ShapeMix(list(zip(shapes, weights)), fixed=fixed)
    except ArgumentError as e:
        raise ArgumentError(f"{where}: \"mix\": {e}") from None
