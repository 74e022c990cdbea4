"""tilec inside PyTorch (tilec/runtime/custom_op.py): kernels and tuned plans as torch.library custom ops,
in torch.compile graphs (eager and aot_eager backends, fullgraph, static and dynamic shapes), their fake
implementation (no launch), opcheck, the name rules; CUDA-graph capture and graphed replay (GPU tests,
skipped without CUDA) and their refusal on the CPU; the CUDA-graph benchmark's smoke mode."""

from __future__ import annotations

import importlib
import itertools
import sys
from pathlib import Path

import pytest
import torch

import tilec as tc
from tilec.runtime import triton_compat
from tilec.runtime.custom_op import as_op, graphed, registered_ops

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests"))
import common  # noqa: E402
import computes  # noqa: E402
import matmul_silu  # noqa: E402
import rmsnorm  # noqa: E402
import rowscale_fp8  # noqa: E402
import tune_case  # noqa: E402

CUDA = triton_compat.target() == "cuda"
needs_cuda = pytest.mark.skipif(not CUDA, reason="CUDA graphs need a CUDA device (the lead runs these on the H200)")
DEVICE = "cuda" if CUDA else "cpu"
GEMM_CONFIG = {"BM": 64, "BN": 64, "BK": 32, "stages": 2, "warps": 4}
NORM_CONFIG = {"ROWS": 1, "BLOCK": 1024, "warps": 4}
_names = itertools.count()


def fresh(prefix: str) -> str:
    """An op name no other test registered (ops live for the whole process)."""
    return f"{prefix}_{next(_names)}"


def gemm(config=GEMM_CONFIG):
    s, args = matmul_silu.make()
    return tc.build(s, args, config=config)


def norm():
    s, args = rmsnorm.make()
    return tc.build(s, args, config=NORM_CONFIG)


def gemm_inputs(m, n, k):
    return matmul_silu.inputs(dict(M=m, N=n, K=k), DEVICE)


# -- the op ------------------------------------------------------------------------------------------

def test_op_matches_kernel_and_reference():
    k = gemm()
    op = k.as_op(fresh("mm_silu"))
    a, w = gemm_inputs(37, 70, 53)  # no size divides its tile
    y = op(a, w)
    assert torch.equal(y, k(a, w))
    common.check(y, matmul_silu.reference(a, w))
    name = op._qualname.split("::")[1]
    assert torch.equal(getattr(torch.ops.tilec, name)(a, w), y)
    assert registered_ops()[op._qualname] is op


def test_schema_names_the_inputs_and_outputs():
    k = gemm()
    op = k.as_op(fresh("schema"))
    schema = str(getattr(torch.ops.tilec, op._qualname.split("::")[1]).default._schema)
    assert "(Tensor A, Tensor W) -> Tensor" in schema
    s, args = rowscale_fp8.make()
    op2 = tc.build(s, args, config={"BLOCK": 1024, "warps": 4}).as_op(fresh("rowscale"))
    schema = str(getattr(torch.ops.tilec, op2._qualname.split("::")[1]).default._schema)
    assert "(Tensor X) -> (Tensor, Tensor)" in schema


def _gemm_norm_fn(mm, nm):
    """What a model does: the ops and torch ops around them."""
    def fn(a, w, x, g):
        y = mm(a, w)
        z = nm(x, g)
        return torch.relu(y.float()) * 2 + 1, z.float().sum(dim=1)
    return fn


def _reference_fn(a, w, x, g):
    y, z = matmul_silu.reference(a, w), rmsnorm.reference(x, g)
    return torch.relu(y.float()) * 2 + 1, z.float().sum(dim=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_fullgraph(backend):
    """Both ops in one graph with torch ops around them, compiled with fullgraph=True: the same answers as
    the ops called eagerly (bit for bit) and as PyTorch (to the dtype's tolerance), at sizes that divide no
    tile."""
    torch._dynamo.reset()
    mm, nm = gemm().as_op(fresh("mm")), norm().as_op(fresh("norm"))
    fn = _gemm_norm_fn(mm, nm)
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    a, w = gemm_inputs(37, 70, 53)
    x, g = rmsnorm.inputs(dict(M=3, N=1000), DEVICE)
    got, want = compiled(a, w, x, g), fn(a, w, x, g)
    for o, e in zip(got, want):
        assert torch.equal(o, e)
    ref = _reference_fn(a, w, x, g)
    assert common.rel_error(got[0], ref[0]) < 2e-2 and common.rel_error(got[1], ref[1]) < 2e-2


def test_torch_compile_dynamic_shapes():
    """dynamic=True: the fake implementation sees SymInts, and one graph serves several shapes."""
    torch._dynamo.reset()
    k = gemm()
    mm = k.as_op(fresh("mm_dyn"))
    compiled = torch.compile(lambda a, w: mm(a, w) * 2, backend="aot_eager", fullgraph=True, dynamic=True)
    for m, n, kk in ((37, 70, 53), (5, 9, 66), (64, 64, 64)):
        a, w = gemm_inputs(m, n, kk)
        assert torch.equal(compiled(a, w), k(a, w) * 2)


def test_torch_export():
    """torch.export keeps the op as one node (torch.ops.tilec.<name>.default), at a static shape and with a
    dynamic dimension."""
    k = gemm()
    mm = k.as_op(fresh("export"))

    class Layer(torch.nn.Module):
        def forward(self, a, w):
            return mm(a, w) * 2

    a, w = gemm_inputs(37, 70, 53)
    ep = torch.export.export(Layer(), (a, w))
    assert f"torch.ops.tilec.{mm._qualname.split('::')[1]}.default" in ep.graph_module.code
    assert torch.equal(ep.module()(a, w), k(a, w) * 2)
    dyn = torch.export.export(Layer(), (a, w), dynamic_shapes={"a": {0: torch.export.Dim("m")}, "w": None})
    assert torch.equal(dyn.module()(a[:21], w), k(a[:21], w) * 2)


def test_multiple_outputs_in_a_graph():
    s, args = rowscale_fp8.make()
    k = tc.build(s, args, config={"BLOCK": 1024, "warps": 4})
    op = k.as_op(fresh("rowscale"))
    (x,) = rowscale_fp8.inputs(dict(M=5, N=1000), DEVICE)
    q, scale = op(x)
    q0, s0 = k(x)
    assert torch.equal(q.float(), q0.float()) and torch.equal(scale, s0)
    compiled = torch.compile(lambda x: tuple(t.float() * 2 for t in op(x)), backend="aot_eager", fullgraph=True)
    cq, cs = compiled(x)
    assert torch.equal(cq, q0.float() * 2) and torch.equal(cs, s0 * 2)


def test_fake_implementation_launches_nothing():
    """FakeTensor and meta inputs: output shapes and dtypes from the kernel's shape expressions; no call is
    prepared (nothing compiled or launched)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    k = gemm()
    op = k.as_op(fresh("fake"))
    with FakeTensorMode():
        a = torch.empty(37, 53, dtype=torch.bfloat16, device=DEVICE)
        w = torch.empty(53, 70, dtype=torch.bfloat16, device=DEVICE)
        y = op(a, w)
        assert y.shape == (37, 70) and y.dtype == torch.bfloat16 and y.device.type == DEVICE
    y = op(torch.empty(5, 9, dtype=torch.bfloat16, device="meta"), torch.empty(9, 3, dtype=torch.bfloat16, device="meta"))
    assert y.shape == (5, 3) and y.is_meta and y.is_contiguous()
    assert not k._calls


def test_wrong_inputs_fail_while_tracing():
    """The fake implementation checks what a call checks (dtypes, shapes that disagree on a size), so a
    compiled graph fails at trace time with tilec's message."""
    torch._dynamo.reset()
    op = gemm().as_op(fresh("wrong"))
    a, w = gemm_inputs(8, 8, 8)
    with pytest.raises(tc.ArgumentError, match="expected dtype bfloat16"):
        op(a.float(), w)  # eager: the kernel's own check
    compiled = torch.compile(lambda a, w: op(a, w) + 1, backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="expected dtype bfloat16"):
        compiled(a.float(), w)
    bad_w = torch.randn(9, 8, dtype=torch.bfloat16, device=DEVICE)
    with pytest.raises(Exception, match="expected shape"):
        compiled(a, bad_w)


def test_a_plain_kernel_call_in_a_compiled_graph_is_refused():
    """Dynamo cannot trace a launch; with fullgraph=True the kernel says to call its op instead."""
    torch._dynamo.reset()
    k = gemm()
    a, w = gemm_inputs(8, 8, 8)
    compiled = torch.compile(lambda a, w: k(a, w) + 1, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="register it as a custom op"):
        compiled(a, w)


def test_specialized_kernel_fake_checks_the_size():
    s, args = matmul_silu.make()
    k = tc.build(s, args, config=GEMM_CONFIG, specialize={"K": 16})
    op = k.as_op(fresh("spec"))
    y = op(torch.empty(4, 16, dtype=torch.bfloat16, device="meta"), torch.empty(16, 8, dtype=torch.bfloat16, device="meta"))
    assert y.shape == (4, 8)
    with pytest.raises(tc.ArgumentError, match="specialized for K=16"):
        op(torch.empty(4, 17, dtype=torch.bfloat16, device="meta"), torch.empty(17, 8, dtype=torch.bfloat16, device="meta"))


def test_opcheck():
    """torch.library.opcheck: schema, autograd registration, fake tensors, aot dispatch (static and
    dynamic); tiny sizes, since every real call runs in the interpreter on the CPU."""
    op = gemm().as_op(fresh("opcheck"))
    a, w = gemm_inputs(5, 7, 9)
    result = torch.library.opcheck(op, (a, w))
    assert set(result.values()) == {"SUCCESS"}, result
    nm = norm().as_op(fresh("opcheck_norm"))
    x, g = rmsnorm.inputs(dict(M=2, N=33), DEVICE)
    assert set(torch.library.opcheck(nm, (x, g)).values()) == {"SUCCESS"}


def test_inputs_that_require_grad_run_but_have_no_backward():
    op = gemm().as_op(fresh("grad"))
    a, w = gemm_inputs(5, 7, 9)
    y = op(a.requires_grad_(), w)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="no autograd formula"):
        y.float().sum().backward()


def test_registering_again():
    """The same kernel under its name again: the same op. Another kernel under a taken name, or a name
    torch already has: refused."""
    k = gemm()
    name = fresh("again")
    op = k.as_op(name)
    assert k.as_op(name) is op and as_op(k, f"tilec::{name}") is op
    with pytest.raises(tc.ArgumentError, match="already registered for another Kernel"):
        gemm().as_op(name)
    lib_name = fresh("tilecext")
    lib = torch.library.Library(lib_name, "DEF")
    lib.define("existing(Tensor x) -> Tensor")
    with pytest.raises(tc.ArgumentError, match="torch already has an operator"):
        k.as_op(f"{lib_name}::existing")
    other = k.as_op(f"{lib_name}::fresh_one")  # another namespace is fine
    assert other._qualname == f"{lib_name}::fresh_one"


@pytest.mark.parametrize("name", ["1mm", "mm silu", "", "a::b::c", "aten::mm_silu", "tilec::", "_private", "for",
                                  "tilec::name", "x-y", 3])
@pytest.mark.slow
def test_bad_names_are_refused(name):
    with pytest.raises(tc.ArgumentError, match="as_op"):
        gemm().as_op(name)


def test_as_op_refuses_other_things():
    with pytest.raises(tc.ArgumentError, match="expected a tilec Kernel"):
        as_op(lambda a: a, fresh("fn"))


def test_tuned_as_op(tmp_path):
    """A tuned plan as an op: dispatches per shape (in and outside the mix) eagerly and compiled; its fake
    implementation is not held to the per-shape kernels' specializations."""
    torch._dynamo.reset()
    s, args = tune_case.make()
    tuned = tc.tune(s, tune_case.MIX, trials=2, args=args, reference=tune_case.reference, jobs=0, progress=False,
                    storage=f"sqlite:///{tmp_path / 't.db'}", timer=lambda kernel, inputs: 1e-6 * inputs[0].shape[0],
                    expected_calls=10)
    op = tuned.as_op(fresh("tuned"))
    assert tuned.as_op(op._qualname) is op
    compiled = torch.compile(lambda a, w: op(a, w) - 1, backend="aot_eager", fullgraph=True)
    for m in (16, 40, 7):
        a, w = torch.randn(m, 24, device=DEVICE), torch.randn(24, 20, device=DEVICE)
        assert torch.allclose(op(a, w), a @ w, atol=1e-4)
        assert torch.allclose(compiled(a, w), a @ w - 1, atol=1e-4)
    a, w = torch.randn(16, 24, device=DEVICE), torch.randn(24, 20, device=DEVICE)
    if CUDA:
        assert torch.allclose(tuned.graphed(a, w)(a, w), a @ w, atol=1e-4)
    else:
        with pytest.raises(tc.TilecError, match="CUDA graphs need a CUDA device"):
            tuned.graphed(a, w)


# -- CUDA graphs: refused without CUDA -------------------------------------------------------------

@pytest.mark.skipif(CUDA, reason="on a CUDA device graphs are captured (the tests below)")
def test_graphed_is_refused_without_cuda():
    k = gemm()
    a, w = gemm_inputs(8, 8, 8)
    with pytest.raises(tc.TilecError, match="CUDA graphs need a CUDA device.*interpreter"):
        k.graphed(a, w)
    with pytest.raises(tc.TilecError, match="CUDA graphs need a CUDA device"):
        graphed(k.as_op(fresh("graphed_cpu")), a, w)


def test_a_new_call_while_capturing_is_refused(monkeypatch):
    """A call with shapes not prepared before capture would compile inside the capture (cuModuleLoadData
    is not allowed then): it is refused, with the fix. On the CPU, the capture is simulated."""
    k = gemm()
    a, w = gemm_inputs(8, 8, 8)
    monkeypatch.setattr(k, "target", "cuda")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(tc.TilecError, match="while a CUDA graph is being captured.*once with the same shapes"):
        k(a, w)
    assert not k._calls


# -- CUDA graphs on the GPU (the lead runs these on the H200) --------------------------------------

def _capture(fn, *xs):
    """Warm up on a side stream, then capture fn(*xs) in a graph: torch.cuda.graphs' recipe."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*xs)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*xs)
    return g, out


@needs_cuda
@pytest.mark.parametrize("as_an_op", [False, True])
def test_capture_a_kernel_call(as_an_op):
    """A plain Kernel call (direct launcher) and the op are captured after warm-up; replays on new values in
    the static inputs give the new answers."""
    k = gemm()
    fn = k.as_op(fresh("capture")) if as_an_op else k
    a, w = gemm_inputs(37, 70, 53)
    g, y = _capture(fn, a, w)
    for _ in range(3):
        a2, w2 = gemm_inputs(37, 70, 53)
        a.copy_(a2)
        w.copy_(w2)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, k(a2, w2))


@needs_cuda
def test_capture_without_warm_up_is_refused():
    k = gemm()
    a, w = gemm_inputs(37, 70, 53)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(tc.TilecError, match="while a CUDA graph is being captured"):
        with torch.cuda.graph(g):
            k(a, w)
    torch.cuda.synchronize()
    assert torch.equal(k(a, w), k(a, w))  # the device is fine afterwards


@needs_cuda
def test_graphed_replay():
    k = gemm()
    a, w = gemm_inputs(64, 64, 64)
    g = k.graphed(a, w)
    assert "Graphed" in repr(g)
    for _ in range(3):
        a2, w2 = gemm_inputs(64, 64, 64)
        y = g(a2, w2)
        assert y is g.outputs  # static: overwritten by the next replay
        assert torch.equal(y, k(a2, w2))
    a3 = gemm_inputs(64, 64, 64)[0].t().contiguous().t()  # other strides: copied into the static buffer
    assert torch.equal(g(a3, w2), k(a3.contiguous(), w2))
    with pytest.raises(tc.ArgumentError, match="captured for"):
        g(*gemm_inputs(65, 64, 64))
    with pytest.raises(tc.ArgumentError, match="expected 2 input tensors"):
        g(a2)
    with tc.record() as rec:  # each replay counts the kernel's call, as a call would
        g(a2, w2)
        g.replay()
    assert rec.total(k) == 2 and list(rec.calls(k)) == ["K=64,M=64,N=64"]
    with tc.record() as rec:  # the capture counts nothing (it runs no kernel)
        k.graphed(a, w)
    assert rec.total(k) == 3  # its three warm-up calls, which run


@needs_cuda
def test_graphed_rmsnorm_and_op():
    k = norm()
    x, w = rmsnorm.inputs(dict(M=1, N=4096), "cuda")
    g = tc.runtime.graphed(k.as_op(fresh("graphed_norm")), x, w)
    x2, w2 = rmsnorm.inputs(dict(M=1, N=4096), "cuda")
    assert torch.equal(g(x2, w2), k(x2, w2))


def atomic_split_k():
    """A float32 GEMM whose K loop is split in 2 parts added with atomics into a zeroed workspace."""
    A, W, C = computes.gemm()
    s = tc.create_schedule(C)
    i, j = C.axis
    io, jo, ii, ji = s[C].tile(i, j, 32, 32)
    ko, ki = s[C].split(C.reduce_axis[0], 32)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    s[C].bind(s[C].fuse(io, jo), "program_id.0")
    s[C].split_k(ko, 2, deterministic=False)
    return tc.build(s, [A, W, C])


def test_atomic_split_k_zeroes_its_workspace_per_call():
    """What the graphed test below relies on: the workspace is zeroed by every call (a memset, captured)."""
    k = atomic_split_k()
    a, w = torch.randn(40, 100, device=DEVICE), torch.randn(100, 50, device=DEVICE)
    assert torch.allclose(k(a, w), a @ w, atol=1e-4) and torch.allclose(k(a, w), a @ w, atol=1e-4)
    (_, _, buffers, launches, *_), = k._calls.values()
    assert [zeroed for *_, zeroed in buffers] == [True] and len(launches) == 2


@needs_cuda
def test_graphed_tma_persistent_and_split_k():
    """Tensor descriptors (TMA loads and store: the tensor maps are encoded for the static buffers' addresses
    and baked into the graph), split-K's workspace of partial sums and its second kernel, and atomic
    split-K's zeroed workspace (a memset node) replay right on new inputs, several times."""
    import persistent_gemm
    import splitk_gemm

    cases = [(persistent_gemm, {"BM": 128, "BN": 128, "BK": 64, "stages": 3, "GROUP_M": 8, "FLATTEN": 0, "TMA": 1,
                                "TMA_STORE": 1}, dict(M=200, N=256, K=192)),
             (splitk_gemm, {"BM": 64, "BN": 64, "BK": 64, "stages": 3, "GROUP_M": 8, "TMA": 1, "SPLIT_K": 2},
              dict(M=64, N=128, K=1024))]
    for mod, cfg, sizes in cases:
        s, args = mod.make()
        k = tc.build(s, args, config=cfg)
        g = k.graphed(*mod.inputs(sizes, "cuda"))
        for _ in range(3):
            xs = mod.inputs(sizes, "cuda")
            y = g(*xs)
            common.check(y, mod.reference(*xs))
            assert torch.equal(y, k(*xs))
    k = atomic_split_k()
    g = k.graphed(torch.randn(40, 100, device="cuda"), torch.randn(100, 50, device="cuda"))
    for _ in range(3):  # a workspace not zeroed by each replay would accumulate the previous sums
        a, w = torch.randn(40, 100, device="cuda"), torch.randn(100, 50, device="cuda")
        torch.testing.assert_close(g(a, w), a @ w, rtol=1e-3, atol=1e-3)


@needs_cuda
def test_inductor_and_reduce_overhead():
    """The default backend (Inductor calls the op as an extern kernel) and mode='reduce-overhead' (Inductor's
    CUDA graphs around it)."""
    torch._dynamo.reset()
    mm, nm = gemm().as_op(fresh("ind_mm")), norm().as_op(fresh("ind_norm"))
    fn = _gemm_norm_fn(mm, nm)
    a, w = gemm_inputs(37, 70, 53)
    x, g = rmsnorm.inputs(dict(M=3, N=1000), "cuda")
    want = fn(a, w, x, g)
    for mode in (None, "reduce-overhead"):
        compiled = torch.compile(fn, fullgraph=True, mode=mode)
        for _ in range(3):
            got = compiled(a, w, x, g)
        for o, e in zip(got, want):
            torch.testing.assert_close(o, e, rtol=1e-2, atol=1e-2)


# -- the benchmark's smoke mode ---------------------------------------------------------------------

def test_cuda_graphs_benchmark_smoke(tmp_path, capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    bench = importlib.import_module("cuda_graphs")
    out = tmp_path / "smoke.json"
    bench.main(["--smoke", "--json", str(out)])
    text = capsys.readouterr().out
    assert "smoke" in text and text.rstrip().endswith("OK")
    import json
    rows = json.loads(out.read_text())["rows"]
    assert {r["workload"] for r in rows} == {"gemm_silu", "rmsnorm"}
    checked = [r for r in rows if r["rel_err"] is not None]
    assert {r["variant"] for r in checked} >= {"tilec call", "tilec op", "eager"}
    assert all(r["rel_err"] <= 2e-2 for r in checked)
    graphed_rows = [r for r in rows if r["variant"] == "tilec graphed"]
    assert len(graphed_rows) == 2 and all(
        (r["rel_err"] is not None) if CUDA else r["graphed"].startswith("refused: ") for r in graphed_rows)


def _cache_write():
    """k_cache[b, start[0] + t, d] = k[b, t, d], in place (a scatter with init=None); TMAX, the cache's length,
    is in no input's shape: a call gives it, and the op reads it from the cache it updates."""
    B, S, D, TMAX = tc.size_vars("B S D TMAX")
    k = tc.placeholder((B, S, D), "float32", name="k")
    start = tc.placeholder((1,), "int64", name="start")
    cache = tc.scatter((B, TMAX, D), (B, S, D), lambda b, t, d: (b, start[0] + t, d), lambda b, t, d: k[b, t, d],
                       unique=True, init=None, dtype="float32", name="k_cache")
    return tc.build(tc.create_schedule(cache), [k, start, cache])


def test_an_in_place_kernel_is_an_op_that_mutates_its_outputs():
    """A kernel whose outputs are in-place scatters is an op taking them after its inputs as updated tensors
    (`Tensor(a!)`), returning nothing: eagerly, in torch.compile's graph (functionalized: the update is kept)
    and through opcheck; the size in no input's shape is read from the updated tensor's."""
    op = _cache_write().as_op(fresh("cache_write"))
    assert str(op._opoverload._schema).endswith("(Tensor k, Tensor start, Tensor(a!) k_cache) -> ()")
    k, cache = torch.randn(2, 3, 5), torch.randn(2, 11, 5)
    want = cache.clone()
    want[:, 4:7] = k
    ptr = cache.data_ptr()
    assert op(k, torch.tensor([4]), cache) is None
    assert cache.data_ptr() == ptr and torch.equal(cache, want)

    def step(k, start, cache):
        op(k, start, cache)
        return cache * 2

    cache2 = torch.randn(2, 11, 5)
    want2 = cache2.clone()
    want2[:, 0:3] = k
    got = torch.compile(step, backend="aot_eager", fullgraph=True)(k, torch.tensor([0]), cache2)
    assert torch.equal(cache2, want2) and torch.equal(got, 2 * want2)
    result = torch.library.opcheck(op, (k, torch.tensor([1]), torch.randn(2, 11, 5)))
    assert set(result.values()) == {"SUCCESS"}, result
    with pytest.raises(tc.ArgumentError, match=r"k_cache"):  # the cache's shape against the new keys'
        op(k, torch.tensor([0]), torch.randn(2, 11, 4))


def test_an_op_of_in_place_and_new_outputs_is_refused():
    B, S, TMAX = tc.size_vars("B S TMAX")
    k = tc.placeholder((B, S), "float32", name="k")
    start = tc.placeholder((1,), "int64", name="start")
    cache = tc.scatter((B, TMAX), (B, S), lambda b, t: (b, start[0] + t), lambda b, t: k[b, t], unique=True,
                       init=None, dtype="float32", name="k_cache")
    twice = tc.compute((B, S), lambda b, t: k[b, t] * 2, name="twice")
    kern = tc.build(tc.create_schedule([cache, twice]), [k, start, cache, twice])
    with pytest.raises(tc.ArgumentError, match=r"k_cache updates the out= tensor in place .* but twice is a new "
                                               r"tensor"):
        kern.as_op(fresh("mixed"))
