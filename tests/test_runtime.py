"""The runtime: calling conventions, out=, strided inputs, caching, and the 64-bit index path."""

from __future__ import annotations

import pytest
import torch
from computes import gemm_silu

import tilec as tc
from tilec.runtime import kernel as kernel_mod


def _axpy():
    M, N = tc.size_vars("M N")
    X = tc.placeholder((M, N), "float32", name="X")
    Y = tc.placeholder((M, N), "float32", name="Y")
    Z = tc.compute((M, N), lambda i, j: X[i, j] * 2.0 + Y[i, j], name="Z")
    return X, Y, Z


def test_outputs_allocated_given_positionally_or_by_out():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    x, y = torch.randn(30, 40), torch.randn(30, 40)
    ref = x * 2 + y
    assert torch.equal(k(x, y), ref)
    z = torch.full((30, 40), float("nan"))
    assert k(x, y, z) is z and torch.equal(z, ref)
    z2 = torch.full((30, 40), float("nan"))
    assert k(x, y, out=z2) is z2 and torch.equal(z2, ref)


def test_strided_inputs_and_outputs():
    """Views (transposed, sliced) are read through their strides; a transposed out is written so."""
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    xb, yb = torch.randn(40, 30), torch.randn(30, 80)
    x, y = xb.t(), yb[:, ::2]
    out = torch.empty(40, 30).t()
    k(x, y, out=out)
    assert torch.equal(out, x * 2 + y)


def test_broadcast_input_with_zero_stride():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    x = torch.randn(1, 40).expand(30, 40)
    y = torch.randn(30, 40)
    assert torch.equal(k(x, y), x * 2 + y)


def test_compiled_module_is_cached():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    k(torch.randn(4, 4), torch.randn(4, 4))
    n = len(kernel_mod._MODULES)
    k(torch.randn(9, 5), torch.randn(9, 5))
    k2 = tc.build(tc.create_schedule(Z), [X, Y, Z])
    k2(torch.randn(3, 3), torch.randn(3, 3))
    assert len(kernel_mod._MODULES) == n


def test_int64_indexing_path(monkeypatch):
    """Past 2**31 elements offsets are computed in 64 bits; shown here by lowering the limit."""
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    assert "tl.int64" not in k.source
    monkeypatch.setattr(kernel_mod, "_INT32_LIMIT", 100)
    x, y = torch.randn(30, 40), torch.randn(30, 40)
    assert torch.equal(k(x, y), x * 2 + y)
    wide = [prog for form, prog in k._programs.items() if form[0]]  # form: (int64, descriptors, the call's facts)
    assert wide and all("tl.program_id(0).to(tl.int64)" in prog.source() for prog in wide)


def test_empty_tensor_launches_nothing():
    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    out = k(torch.randn(0, 5), torch.randn(0, 5))
    assert out.shape == (0, 5)


def test_config_selects_knob_values_and_kernel_reports_it():
    X, Y, Z = _axpy()
    s = tc.create_schedule(Z)
    i, j = Z.axis
    io, jo, ii, ji = s[Z].tile(i, j, tc.knob("BM", [8, 16]), tc.knob("BN", [32, 64]))
    s[Z].bind(s[Z].fuse(io, jo), "program_id.0")
    k = tc.build(s, [X, Y, Z], config={"BN": 64})
    assert k.config == {"BM": 8, "BN": 64}
    assert "# config: BM=8, BN=64" in k.source
    x, y = torch.randn(20, 100), torch.randn(20, 100)
    assert torch.equal(k(x, y), x * 2 + y)


def test_grid_dim_limit_is_reported():
    M = tc.size_vars("M")
    X = tc.placeholder((M,), "float32", name="X")
    Z = tc.compute((M,), lambda i: X[i] + 1.0, name="Z")
    s = tc.create_schedule(Z)
    (i,) = Z.axis
    io, ii = s[Z].split(i, 1)
    s[Z].bind(io, "program_id.1")
    k = tc.build(s, [X, Z])
    with pytest.raises(tc.LoweringError, match="65535 on grid dims 1 and 2"):
        k(torch.randn(70000))


def test_a_kernel_too_large_for_the_device_is_a_lowering_error(monkeypatch):
    """Fuzz seed 922140 on the H200: a tl.dot whose operand tile (64 x 1024 float32) Triton stages in
    shared memory needs more than the device has; Triton raises OutOfResources at the first launch,
    which must reach the user as a LoweringError that says what to change, not an internal error."""
    from triton.runtime.errors import OutOfResources

    X, Y, Z = _axpy()
    k = tc.build(tc.create_schedule(Z), [X, Y, Z])
    mod = kernel_mod.load_module(k.source)
    name = k.program.kernels[0].name

    class TooLarge:
        __name__ = name

        def __getitem__(self, grid):
            def launch(**kwargs):
                raise OutOfResources(262144, 232448, "shared memory")
            return launch

    monkeypatch.setattr(mod, name, TooLarge())
    x = torch.randn(37, 45)
    with pytest.raises(tc.LoweringError, match=rf"{name}: the compiled kernel needs more shared memory .*"
                                               r"262144 needed, 232448 available.*smaller split factors"):
        k(x, x)


def _gemm_silu_tma():
    """A GEMM+SiLU with TMA loads and store and a persistent, grouped tile loop: kernel parameters of every
    kind (tensors, descriptors of three block shapes, strides, sizes, knobs, the program count)."""
    A, W, C, Y = gemm_silu("float16")
    s = tc.create_schedule(Y)
    io, ii = s[C].split(C.axis[0], 16)
    jo, ji = s[C].split(C.axis[1], 32)
    ko, ki = s[C].split(C.reduce_axis[0], 64)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    tiles = s[C].swizzle(io, jo, group=2)
    s[C].bind(tiles, "program_id.0")
    s[C].persistent(tiles)
    s.cache_read(A, "shared", readers=[C], tma=True).compute_at(s[C], ko)
    s.cache_read(W, "shared", readers=[C], tma=True).compute_at(s[C], ko)
    s[Y].compute_at(s[C], tiles)
    s.cache_write(Y, "local", tma=True)
    return s, [A, W, Y]


def test_later_launches_pass_the_arguments_in_the_kernels_parameter_order(monkeypatch):
    """After a prepared call's first launch, tilec calls the compiled kernel directly (on a GPU:
    triton_compat.direct_launcher), passing the arguments by position, each descriptor as its tensor
    and the block shape by position. Here a stand-in launcher runs the same kernel through fn[grid] with
    the positional arguments named by the kernel's parameters: any argument out of order, stale (the
    first call's tensors) or with another descriptor's block shape gives a wrong result."""
    from tilec.runtime import triton_compat

    direct_calls = []

    def fake_direct_launcher(compiled, blocks):
        def launch(grid, args):
            fn = launch.fn
            direct_calls.append(len(args))
            args = [triton_compat.tensor_descriptor().from_tensor(a, blocks[i]) if i in blocks else a
                    for i, a in enumerate(args)]
            with triton_compat.quiet_launch():  # as tilec's own launches in the interpreter
                fn[grid](**dict(zip(fn.arg_names, args)), **launch.options)
            return True
        return launch

    monkeypatch.setattr(triton_compat, "direct_launcher", fake_direct_launcher)
    s, args = _gemm_silu_tma()
    kern = tc.build(s, args)
    ref = lambda a, w: torch.nn.functional.silu((a.float() @ w.float()).half().float()).half()  # noqa: E731
    for m, n, kk in ((40, 48, 72), (40, 48, 72), (40, 48, 72), (17, 64, 32)):  # 16-byte rows: descriptors
        a, w = torch.randn(m, kk, dtype=torch.float16), torch.randn(kk, n, dtype=torch.float16)
        for launch in (launch for call in kern._calls.values() for launch in call[3]):
            if launch.direct is not None:  # tell the stand-in which kernel and options it runs
                launch.direct.fn = launch.fn
                launch.direct.options = {o: launch.static[o] for o in ("num_warps",) if o in launch.static}
        torch.testing.assert_close(kern(a, w), ref(a, w), rtol=2e-3, atol=2e-3)
    # the first call of each shape went through fn[grid]; the second and third calls directly
    assert len(direct_calls) == 2
    assert all(launch.descs for call in kern._calls.values() for launch in call[3])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the direct launcher runs compiled CUDA kernels")
def test_direct_launches_on_the_gpu_match_torch_on_fresh_and_misaligned_inputs(monkeypatch):
    """On a GPU the second call of a shape launches the compiled kernel directly. Fresh inputs each call
    must give fresh results, and a tensor at an address that is not 16-byte aligned (a slice) is another
    prepared call (Triton specializes on alignment), not the aligned call's kernel."""
    s, args = _gemm_silu_tma()
    kern = tc.build(s, args)
    ref = lambda a, w: torch.nn.functional.silu((a.float() @ w.float()).half().float()).half()  # noqa: E731
    from triton.runtime.jit import JITFunction

    jit_runs = []
    real_run = JITFunction.run
    monkeypatch.setattr(JITFunction, "run", lambda self, *a, **kw: jit_runs.append(1) or real_run(self, *a, **kw))
    for _ in range(3):
        a, w = torch.randn(200, 64, dtype=torch.float16), torch.randn(64, 96, dtype=torch.float16)
        torch.testing.assert_close(kern(a, w), ref(a, w), rtol=2e-3, atol=2e-3)
    launches = [launch for call in kern._calls.values() for launch in call[3]]
    assert all(launch.direct is not None for launch in launches)
    assert len(jit_runs) == len(launches)  # Triton's JITFunction.run only for the first call
    for _ in range(3):  # the same addresses again (the allocator reuses freed blocks), other values
        del a, w
        a, w = torch.randn(200, 64, dtype=torch.float16), torch.randn(64, 96, dtype=torch.float16)
        torch.testing.assert_close(kern(a, w), ref(a, w), rtol=2e-3, atol=2e-3)
    base = torch.randn(200 * 64 + 1, dtype=torch.float16)
    a = base[1:].view(200, 64)  # 2-byte offset: neither TMA nor 16-byte alignment
    w = torch.randn(64, 96, dtype=torch.float16)
    torch.testing.assert_close(kern(a, w), ref(a, w), rtol=2e-3, atol=2e-3)
    assert len(kern._calls) == 2


def test_a_launch_hook_sends_launches_through_triton():
    """A profiler's launch hook (Triton's knobs.runtime.launch_enter_hook) needs Triton's launch metadata,
    so the direct launcher steps aside whenever a hook is set; Triton 3.6's empty HookChain is no hook."""
    from tilec.runtime import triton_compat

    triton_compat.triton()
    from triton.knobs import HookChain

    chain = HookChain()
    assert not triton_compat._hooked(None) and not triton_compat._hooked(chain)
    chain.add(print)
    assert triton_compat._hooked(chain) and triton_compat._hooked(print)


def test_direct_launcher_keeps_no_tensor_alive_before_hopper(monkeypatch):
    """Review find: below compute capability 9.0 Triton rewrites descriptors to pointers, its compiled
    kernel has no tensor-map metadata, and a descriptor's launcher args hold the tensor itself. Keeping
    those per address kept every call's fresh output alive (up to 256 per launch). Here a stand-in CUDA
    launcher of that kind: the direct launcher must leave no output alive after the calls."""
    import gc
    import types
    import weakref

    from tilec.runtime import triton_compat as tcmp

    tcmp.triton()
    from triton.backends.nvidia import driver as nv
    from triton.runtime.driver import driver

    class FakeActive:  # the CUDA driver's device and stream queries
        def get_current_device(self):
            return 0

        def get_current_stream(self, device):
            return 0

    monkeypatch.setattr(driver, "_active", FakeActive(), raising=False)
    monkeypatch.setattr(type(driver), "active", property(lambda self: self._active), raising=False)
    monkeypatch.setattr(tcmp, "target", lambda: "cuda")
    launched = []
    sig = {"X": "*fp32", "Y_desc": "tensordesc<fp32[16, 16]>", "M": "i32"}
    run = nv.CudaLauncher.__new__(nv.CudaLauncher)
    run.launch = nv.wrap_handle_tensordesc(lambda *a: launched.append(len(a)), sig, [])
    run.global_scratch_size = run.profile_scratch_size = 0
    run.launch_cooperative_grid = run.launch_pdl = 0
    run.global_scratch_align = run.profile_scratch_align = run.num_ctas = 1
    compiled = types.SimpleNamespace(run=run, function=0, packed_metadata=(4, 1, 0),
                                     src=types.SimpleNamespace(signature=sig),
                                     metadata=types.SimpleNamespace(tensordesc_meta=[]))
    launch = tcmp.direct_launcher(compiled, {1: [16, 16]})
    x, refs = torch.zeros(64, 64), []
    for _ in range(10):
        out = torch.empty(64, 64)  # a fresh output each call, as Kernel.__call__ makes
        refs.append(weakref.ref(out))
        assert launch((1,), [x, out, 64])
        del out
    gc.collect()
    assert len(launched) == 10 and sum(r() is not None for r in refs) == 0
