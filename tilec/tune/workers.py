"""Measuring candidates in worker processes: a candidate that hangs, crashes (a segfault, an illegal
memory access) or runs out of memory becomes a failed trial with its reason, and the study goes on.

Process model
- Each `tc.tune` call starts one *zygote* process. It holds what a measurement needs (the schedule,
  its args, the mix, the reference, the timer), never runs a kernel and never touches CUDA; it
  forks *workers* on request and reports how each one ended. The zygote comes from one of two places:
  - fork (the default in Triton's interpreter): forked from the tuning process when `tc.tune` starts,
    so user objects cross as they are: lambdas, closures, and schedules (which do not pickle: they
    hold isl objects). `gc.freeze()` before the fork keeps the zygote and workers from running
    finalizers of inherited objects (such as the tuning process's database connections).
  - spawn (the default on a GPU, where a process that has touched CUDA, even through
    `torch.cuda.is_available()`, cannot be forked safely): a fresh interpreter
    (`python -c ZYGOTE_MAIN`, which calls `main`) rebuilds the schedule from a *recipe*, a Python file whose
    `make()` returns (schedule, args) and whose `reference()`, if any, is the reference.
    `tilec tune FILE` passes FILE; from Python, `tc.tune(..., recipe=FILE)`. The zygote checks that
    the rebuilt schedule has the tuning process's fingerprint, knobs and args. The timer crosses by
    name (`module:function`; the default timer as the tuning process has it, so a replaced default
    crosses too); a lambda or a local function cannot.
  On a GPU without a recipe, `tc.tune` warns and measures in its own process, unisolated, as
  `jobs=0` does on purpose (for debuggers and profilers).
- Workers: up to `jobs` at once. Each prepares the mix once (random inputs and reference outputs, on
  the device), then measures one config per request: build, compile and check every shape, then time
  every shape. A worker leads its own process group, ignores SIGINT (the tuning process decides what
  an interrupt means) and dies with the zygote, which dies with the tuning process
  (PR_SET_PDEATHSIG, and each also exits when its socket to its parent closes).
- Parallelism: the study runs `jobs` optuna threads, each handing its trial to a worker, so compiles
  run in parallel on the host's cores. On a GPU, timings must not overlap: before timing, a worker
  asks the tuning process for the GPU and holds it until it answers or dies (a lock in the tuning
  process; waiting for it does not count towards the timeout). Several tuning processes on one GPU
  do not coordinate: run one per GPU. In the interpreter, timings overlap (they mean nothing there).
- Faults: the tuning process waits `timeout` seconds for an answer (compile, check and time of every
  shape); past it, the worker's process group is killed and the trial fails ("timed out after ...").
  A worker that dies is reported by the zygote ("... died of SIGSEGV (a segmentation fault ...)").
  A SIGKILL, which comes from elsewhere (the kernel's OOM killer, an operator), is retried once in a
  fresh worker before it fails the trial. An error after which a CUDA context is unusable (illegal
  memory access, unspecified launch failure, ...) fails the trial and the worker is replaced; an
  out-of-memory error fails the trial and the worker goes on.
- The reference and the recipe's make() are the user's code: when they raise, crash or hang while a
  worker prepares the mix, tuning stops with an ArgumentError (no candidate is to blame).
- Messages between processes are JSON (a config in; times, or a reason, out): nothing is unpickled.

Test-only fault injection: `TILEC_TUNE_FAULT`, read by each worker before it measures a config,
holds rules `ACTION[@knob=value,...]` separated by `;`, e.g. `segv@BN=16;hang@BM=32`. ACTION is
`segv` (the worker sends itself SIGSEGV), `abort`, `kill` (SIGKILL), `exit` (status 3), `hang`
(sleeps forever), `sleep=SECONDS` (then measures), `oom` (raises torch.OutOfMemoryError) or `ima`
(raises CUDA's illegal-memory-access RuntimeError). `TILEC_TUNE_START=fork|spawn` forces where the
zygote comes from (spawn needs a recipe).
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from tilec.errors import ArgumentError, TilecError
from tilec.tune.measure import CandidateFailure

FAULT_ENV = "TILEC_TUNE_FAULT"
START_ENV = "TILEC_TUNE_START"
MAX_MSG = 1 << 20
START_TIMEOUT = 120   # seconds for a spawned zygote to import torch and tilec and rebuild the schedule
POISON = ("illegal memory access", "unspecified launch failure", "illegal instruction", "misaligned address",
          "device-side assert", "launch timed out", "uncorrectable ecc")
DEATHS = {"SIGSEGV": "a segmentation fault: a crash in compiled code", "SIGBUS": "a bus error",
          "SIGABRT": "it aborted", "SIGFPE": "an arithmetic fault", "SIGILL": "an illegal instruction",
          "SIGKILL": "killed from outside: out of host memory (the OOM killer)?"}


class Interrupted(Exception):
    """The tuning process was told to stop (SIGINT, SIGTERM) while a config was being measured."""


@dataclass
class Job:
    """What a worker needs to measure configs: inherited by fork, or rebuilt from a recipe."""
    sched: object
    args: list
    mix: object
    reference: object
    timer: object = None
    exclusive: bool = False       # take turns on the device to time (a GPU)
    inputs: object = None         # inputs(sizes, device) -> the input tensors, or None: random ones


def device_name() -> str:
    from tilec.runtime import triton_compat
    if triton_compat.target() == "cuda":
        import torch
        return torch.cuda.get_device_name()
    return "triton-interpreter"


def _send(sock, msg: dict, fds=()) -> None:
    data = json.dumps(msg).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def _die_with_parent(ppid: int) -> None:
    try:  # Linux: SIGKILL when the parent exits
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != ppid:
        os._exit(1)


def _poisoned(reason: str) -> bool:
    low = reason.lower()
    return any(p in low for p in POISON)


def _fault(config: dict) -> None:
    """The test-only hook (module docstring)."""
    for rule in filter(None, (r.strip() for r in os.environ.get(FAULT_ENV, "").split(";"))):
        action, _, cond = rule.partition("@")
        want = dict(p.split("=", 1) for p in cond.split(",") if "=" in p)
        if any(str(config.get(k.strip())) != v.strip() for k, v in want.items()):
            continue
        name, _, arg = action.strip().partition("=")
        if name == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif name == "abort":
            os.abort()
        elif name == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif name == "exit":
            os._exit(3)
        elif name == "hang":
            while True:
                time.sleep(3600)
        elif name == "sleep":
            time.sleep(float(arg))
        elif name == "oom":
            import torch
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected by "
                                         f"{FAULT_ENV})")
        elif name == "ima":
            raise RuntimeError(f"CUDA error: an illegal memory access was encountered (injected by {FAULT_ENV})")
        time.sleep(5)  # a signal sent to ourselves lands before this returns


# -- the worker and the zygote (child processes) --------------------------------------------------

def _worker(sock, job: Job, ppid: int) -> None:
    os.setpgid(0, 0)
    _die_with_parent(ppid)
    faulthandler.disable()  # a crash is reported by the zygote, in the trial; no traceback dumps
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    import torch

    from tilec.tune.measure import Measurer
    torch.set_num_threads(1)  # `jobs` workers share the host's cores
    try:
        measurer = Measurer(job.sched, job.args, job.mix, job.reference, timer=job.timer, inputs=job.inputs)
        _send(sock, {"op": "ready", "device": device_name()})
    except BaseException as e:  # noqa: BLE001 - the user's reference: reported, then tuning stops
        _send(sock, {"op": "prepare-error", "error": f"{type(e).__name__}: {e}"[:2000]})
        return

    def turn():  # wait for the tuning process to give us the device
        _send(sock, {"op": "turn?"})
        if not sock.recv(MAX_MSG):
            os._exit(0)

    while True:
        data = sock.recv(MAX_MSG)
        if not data:
            return
        msg = json.loads(data)
        if msg.get("op") != "measure":
            continue
        config = msg["config"]
        try:
            _fault(config)
            times = measurer.measure(config, before_timing=turn) if job.exclusive else measurer.measure(config)
            out = {"op": "done", "times": times}
        except CandidateFailure as e:
            out = {"op": "fail", "reason": str(e)[:2000]}
        except Exception as e:  # noqa: BLE001 - anything else a candidate raises fails it
            out = {"op": "fail", "reason": f"{type(e).__name__}: {e}"[:2000]}
        out["recycle"] = out["op"] == "fail" and _poisoned(out["reason"])
        if out["op"] == "fail" and "out of memory" in out["reason"].lower() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
        _send(sock, out)
        if out["recycle"]:
            return


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


def _zygote(ctl, job: Job, ppid: int) -> None:
    _die_with_parent(ppid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    children: set[int] = set()
    try:
        _send(ctl, {"op": "up"})
        while True:
            ready, _, _ = select.select([ctl], [], [], 0.2)
            while children:  # report how workers ended
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                children.discard(pid)
                _send(ctl, {"op": "exit", "pid": pid,
                            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                            "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None})
            if not ready:
                continue
            data = ctl.recv(MAX_MSG)
            if not data or json.loads(data).get("op") != "fork":
                return  # the tuning process is gone, or says quit
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            me = os.getpid()
            pid = os.fork()
            if pid == 0:
                try:
                    ctl.close()
                    mine.close()
                    _worker(theirs, job, me)
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(0)
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            theirs.close()
            children.add(pid)
            _send(ctl, {"op": "forked", "pid": pid}, [mine.fileno()])
            mine.close()
    finally:
        for pid in children:
            _kill_group(pid)


def _rebuild(recipe: dict) -> Job:
    """In a spawned zygote: the Job from the recipe's file, checked against the tuning process's."""
    sys.path[:0] = [p for p in recipe["sys_path"] if p not in sys.path]
    from tilec.tune.mix import ShapeMix
    from tilec.tune.userfile import load_file, make_schedule
    module = load_file(recipe["file"])
    sched, args = make_schedule(module, recipe["file"])
    knobs = {n: list(k.choices) for n, k in sched.knobs.items()}
    if (sched.fingerprint() != recipe["fingerprint"] or knobs != recipe["knobs"]
            or [a.name for a in args] != recipe["args"]):
        raise ArgumentError(f"{recipe['file']}: make() built another schedule in a worker process than in "
                            f"the tuning process; make() must build the same schedule every time")
    reference = getattr(module, "reference", None)
    if reference is None:
        from tilec.runtime.kernel import Kernel
        from tilec.schedule.schedule import create_schedule
        reference = Kernel(create_schedule(list(sched.outputs)), args)
    timer = None
    if recipe.get("timer"):
        import importlib
        mod, _, name = recipe["timer"].partition(":")
        timer = importlib.import_module(mod)
        for part in name.split("."):
            timer = getattr(timer, part)
    inputs = getattr(module, "inputs", None) if recipe.get("inputs") else None
    if recipe.get("inputs") and not callable(inputs):
        raise ArgumentError(f"{recipe['file']}: tuning was given inputs=, but the recipe defines no inputs(sizes, "
                            f"device) for its worker processes; define it there (tc.tune(..., inputs=module.inputs))")
    mix = ShapeMix([(s, w) for s, w in zip(recipe["shapes"], recipe["weights"])])
    return Job(sched, args, mix, reference, timer, recipe["exclusive"], inputs)


ZYGOTE_MAIN = "import sys; from tilec.tune.workers import main; main(sys.argv[1:])"


def main(argv=None) -> None:
    """`python -c ZYGOTE_MAIN FD RECIPE` (or `python -m tilec.tune.workers FD RECIPE`): a spawned zygote."""
    argv = sys.argv[1:] if argv is None else argv
    ctl = socket.socket(fileno=int(argv[0]))
    recipe = json.loads(argv[1])
    try:
        job = _rebuild(recipe)
    except BaseException as e:  # noqa: BLE001 - reported to the tuning process, which raises it
        _send(ctl, {"op": "fatal", "error": f"{type(e).__name__}: {e}"[:2000]})
        os._exit(0)
    try:
        _zygote(ctl, job, recipe["ppid"])
    finally:
        os._exit(0)


# -- the tuning process's side --------------------------------------------------------------------

class _Worker:
    def __init__(self, pid: int, sock):
        self.pid, self.sock = pid, sock


def _timer_name(timer):
    """'module:qualname' of a module-level function (a spawned zygote imports it), else None."""
    mod, qual = getattr(timer, "__module__", None), getattr(timer, "__qualname__", "")
    if not mod or "<" in qual or mod == "__main__":
        return None
    return f"{mod}:{qual}"


class Pool:
    """Up to `jobs` worker processes measuring configs (see the module docstring)."""

    isolated = True

    def __init__(self, job: Job, jobs: int, timeout: float, start: str, recipe: str | None = None):
        self.job, self.jobs, self.timeout, self.start_method, self.recipe = job, jobs, timeout, start, recipe
        self.stopping: str | None = None
        self.device: str | None = None
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._live: dict[int, _Worker] = {}
        self._starting = 0
        self._exits: dict[int, dict] = {}
        self._forked: queue.Queue = queue.Queue()
        self._fork_lock = threading.Lock()
        self._gpu = threading.Lock()
        self._ctl = None
        self._zpid = None
        self._zproc = None
        self._zygote_gone = False
        self._up = False

    # zygote
    def start(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if self.start_method == "fork":
            me = os.getpid()
            gc.freeze()
            pid = os.fork()
            if pid == 0:
                try:
                    mine.close()
                    _zygote(theirs, self.job, me)
                finally:
                    os._exit(0)
            gc.unfreeze()
            self._zpid = pid
        else:
            self._zproc = subprocess.Popen(
                # -c, not -m tilec.tune.workers: runpy warns when the package (tilec.tune, which imports
                # this module) is imported before the module it runs
                [sys.executable, "-c", ZYGOTE_MAIN, str(theirs.fileno()), json.dumps(self._recipe())],
                pass_fds=[theirs.fileno()], env=self._env())
        theirs.close()
        self._ctl = mine
        ready, _, _ = select.select([mine], [], [], START_TIMEOUT)
        first = json.loads(mine.recv(MAX_MSG) or b"{}") if ready else {}
        self._up = first.get("op") == "up"
        if not self._up:
            self.close()
            if first.get("op") == "fatal":
                raise ArgumentError(f"tune: a worker process could not rebuild the schedule from "
                                    f"{self.recipe}: {first['error']}")
            raise TilecError(f"tune: the process that starts measuring workers did not start within "
                             f"{START_TIMEOUT} s")
        threading.Thread(target=self._read_ctl, name="tilec-zygote", daemon=True).start()
        w = self._new_worker()
        with self._cond:
            self._idle.append(w)

    def _recipe(self) -> dict:
        from tilec.tune import measure
        j = self.job
        # the timer as this process has it (the default one, unless something replaced it), by name
        timer = _timer_name(j.timer if j.timer is not None else measure.default_timer)
        if timer is None:
            raise ArgumentError("tune: a spawned worker process cannot take this timer (a lambda or local "
                                "function); give a module-level function, or use the default timer")
        return {"file": str(Path(self.recipe).resolve()), "ppid": os.getpid(), "sys_path": sys.path,
                "fingerprint": j.sched.fingerprint(), "knobs": {n: list(k.choices) for n, k in j.sched.knobs.items()},
                "args": [a.name for a in j.args], "shapes": [dict(s) for s, _ in j.mix],
                "weights": [w for _, w in j.mix], "exclusive": j.exclusive, "timer": timer,
                "inputs": j.inputs is not None}

    @staticmethod
    def _env() -> dict:
        root = str(Path(__file__).resolve().parent.parent.parent)
        return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}

    def _read_ctl(self) -> None:
        ctl = self._ctl
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(ctl, MAX_MSG, 4)
            except (OSError, ValueError):
                data, fds = b"", []
            if not data:
                with self._cond:
                    self._zygote_gone = True
                    self._cond.notify_all()
                self._forked.put(None)
                return
            msg = json.loads(data)
            if msg.get("op") == "forked" and fds:
                self._forked.put((msg["pid"], fds[0]))
            elif msg.get("op") == "exit":
                with self._cond:
                    self._exits[msg["pid"]] = msg
                    self._cond.notify_all()

    # workers
    def _new_worker(self) -> _Worker:
        with self._fork_lock:
            if self._zygote_gone:
                raise TilecError("tune: the process that starts measuring workers died; run the same "
                                 "command again to resume the study")
            _send(self._ctl, {"op": "fork"})
            try:
                item = self._forked.get(timeout=START_TIMEOUT)
            except queue.Empty:
                item = None
        if item is None:
            raise TilecError("tune: the process that starts measuring workers died; run the same command "
                             "again to resume the study")
        pid, fd = item
        w = _Worker(pid, socket.socket(fileno=fd))
        with self._cond:
            self._live[pid] = w
        got = self._wait(w, time.monotonic() + self.timeout)
        if got[0] == "msg" and got[1].get("op") == "ready":
            self.device = got[1].get("device")
            return w
        self._discard(w, kill=True)
        if got[0] == "stop":
            raise Interrupted(self.stopping)
        if got[0] == "msg":
            raise ArgumentError(f"tune: the reference failed while a measuring worker prepared the mix's "
                                f"inputs and reference outputs: {got[1].get('error')}")
        if got[0] == "timeout":
            raise ArgumentError(f"tune: a measuring worker took over {self.timeout:g} s to prepare the mix's "
                                f"inputs and reference outputs: the reference hangs, or give a larger timeout=")
        raise ArgumentError(f"tune: a measuring worker {self._exit_reason(w)} while it prepared the mix's "
                            f"inputs and reference outputs: the reference crashed it")

    def _wait(self, w: _Worker, deadline: float):
        """('msg', dict) | ('eof',) | ('timeout',) | ('stop',)."""
        while True:
            if self.stopping:
                return ("stop",)
            left = deadline - time.monotonic()
            if left <= 0:
                return ("timeout",)
            try:
                ready, _, _ = select.select([w.sock], [], [], min(left, 0.25))
                if not ready:
                    continue
                data = w.sock.recv(MAX_MSG)
            except OSError:
                data = b""
            if not data:
                return ("stop",) if self.stopping else ("eof",)
            return ("msg", json.loads(data))

    def _exit_reason(self, w: _Worker) -> str:
        end = time.monotonic() + 5
        with self._cond:
            while w.pid not in self._exits and not self._zygote_gone and time.monotonic() < end:
                self._cond.wait(0.1)
            st = self._exits.pop(w.pid, None)
        if st is None:
            return "died (its exit status is unknown)"
        if st.get("signal"):
            try:
                name = signal.Signals(st["signal"]).name
            except ValueError:
                name = f"signal {st['signal']}"
            return f"died of {name}" + (f" ({DEATHS[name]})" if name in DEATHS else "")
        return f"exited with status {st.get('code')}"

    def _acquire(self) -> _Worker:
        while True:
            if self.stopping:
                raise Interrupted(self.stopping)
            with self._cond:
                if self._idle:
                    return self._idle.pop()
                if len(self._live) + self._starting < self.jobs:
                    self._starting += 1
                    break
                self._cond.wait(0.25)
        try:
            return self._new_worker()
        finally:
            with self._cond:
                self._starting -= 1

    def _release(self, w: _Worker) -> None:
        with self._cond:
            self._idle.append(w)
            self._cond.notify_all()

    def _discard(self, w: _Worker, kill: bool = False) -> None:
        if kill:
            _kill_group(w.pid)
        with self._cond:
            self._live.pop(w.pid, None)
            self._cond.notify_all()
        w.sock.close()

    def _run(self, w: _Worker, config: dict):
        try:
            _send(w.sock, {"op": "measure", "config": config})
        except OSError:
            return ("eof",)
        deadline = time.monotonic() + self.timeout
        holding = False
        try:
            while True:
                got = self._wait(w, deadline)
                if got[0] != "msg":
                    return got
                m = got[1]
                if m.get("op") == "turn?":
                    t0 = time.monotonic()
                    while not self._gpu.acquire(timeout=0.25):
                        if self.stopping:
                            return ("stop",)
                    holding = True
                    deadline += time.monotonic() - t0
                    _send(w.sock, {"op": "go"})
                elif m.get("op") == "done":
                    return ("done", m.get("times"))
                elif m.get("op") == "fail":
                    return ("fail", str(m.get("reason"))[:2000], bool(m.get("recycle")))
        finally:
            if holding:
                self._gpu.release()

    def measure(self, config: dict) -> dict[str, float]:
        """Per-shape seconds of `config`, measured in a worker; raises CandidateFailure or Interrupted."""
        for attempt in range(2):
            w = self._acquire()
            got = self._run(w, config)
            if got[0] == "done":
                self._release(w)
                return got[1]
            if got[0] == "fail":
                if got[2]:
                    self._discard(w)
                else:
                    self._release(w)
                raise CandidateFailure(got[1])
            if got[0] == "stop":
                self._discard(w, kill=True)
                raise Interrupted(self.stopping)
            if got[0] == "timeout":
                self._discard(w, kill=True)
                raise CandidateFailure(f"timed out after {self.timeout:g} s (compile, check and time of every "
                                       f"shape); its worker process was killed")
            reason = self._exit_reason(w)
            self._discard(w)
            if self.stopping:
                raise Interrupted(self.stopping)
            if "SIGKILL" in reason and attempt == 0:
                continue  # killed from outside: once more in a fresh worker
            raise CandidateFailure(f"the worker process measuring it {reason}"
                                   + (", twice" if attempt else ""))
        raise AssertionError("unreachable")

    def interrupt(self, why: str) -> None:
        """From a signal handler: stop, and kill every worker (no locks taken)."""
        self.stopping = why
        for w in list(self._live.values()):
            _kill_group(w.pid)

    def close(self) -> None:
        for w in list(self._live.values()):
            _kill_group(w.pid)
            w.sock.close()
        self._live.clear()
        if self._ctl is not None:
            try:
                _send(self._ctl, {"op": "quit"})
            except OSError:
                pass
        if self._zpid is not None:
            if not self._up:
                _kill_group(self._zpid)
            end = time.monotonic() + 5
            while time.monotonic() < end:
                try:
                    if os.waitpid(self._zpid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.02)
            else:
                _kill_group(self._zpid)
                os.waitpid(self._zpid, 0)
            self._zpid = None
        if self._zproc is not None:
            if not self._up:
                self._zproc.kill()
            try:
                self._zproc.wait(5)
            except subprocess.TimeoutExpired:
                self._zproc.kill()
                self._zproc.wait()
            self._zproc = None
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None


class InProcess:
    """Measures in the tuning process itself (`jobs=0`): no isolation, no timeout."""

    isolated = False

    def __init__(self, job: Job):
        from tilec.tune.measure import Measurer
        self.measurer = Measurer(job.sched, job.args, job.mix, job.reference, timer=job.timer, inputs=job.inputs)
        self.stopping: str | None = None
        self.device = device_name()

    def start(self) -> None:
        pass

    def measure(self, config: dict) -> dict[str, float]:
        if self.stopping:
            raise Interrupted(self.stopping)
        return self.measurer.measure(config)

    def interrupt(self, why: str) -> None:
        self.stopping = why

    def close(self) -> None:
        pass


def make_pool(job: Job, jobs: int, timeout: float, recipe: str | None = None, *, stacklevel: int = 3):
    """The measuring processes for `tc.tune` (module docstring): a Pool, or InProcess for jobs=0 or
    where isolation is impossible. `stacklevel` is where the warning of an unisolated GPU points, as
    `warnings.warn`'s (3: the caller of make_pool's caller)."""
    from tilec.runtime import triton_compat
    if jobs == 0:
        return InProcess(job)
    start = os.environ.get(START_ENV) or None
    if start not in (None, "fork", "spawn"):
        raise ArgumentError(f"{START_ENV}={start!r}: expected fork or spawn")
    if start is None:
        if triton_compat.target() != "cuda" and hasattr(os, "fork"):
            start = "fork"
        elif recipe is not None:
            start = "spawn"
        else:
            warnings.warn("tc.tune measures candidates in this process, unisolated (a crash or hang of a "
                          "candidate ends tuning): on a GPU, worker processes rebuild the schedule from a "
                          "recipe; pass recipe=FILE (a file defining make() and reference()), or tune with "
                          "`tilec tune FILE`; jobs=0 says you mean it", RuntimeWarning, stacklevel=stacklevel)
            return InProcess(job)
    if start == "spawn" and recipe is None:
        raise ArgumentError(f"{START_ENV}=spawn needs a recipe: tc.tune(..., recipe=FILE), FILE defining "
                            f"make() -> (schedule, args)")
    return Pool(job, jobs, timeout, start, recipe)


if __name__ == "__main__":
    main()
