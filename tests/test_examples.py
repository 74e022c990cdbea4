"""Every example against PyTorch on fresh random inputs, at each of its sizes (including sizes that
do not divide the tiles and size-1 dimensions), at the default config and at a second config.

Each example runs once per size: the run at its last sizes also shows what `python examples/<name>.py`
prints (the loop nest, the Triton source and OK) and checks that output."""

from __future__ import annotations

import importlib
import sys
import zlib
from pathlib import Path

import pytest
import torch

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
import common  # noqa: E402

NAMES = ["matmul", "matmul_silu", "persistent_gemm", "swiglu", "splitk_gemm", "rmsnorm", "softmax", "transpose_bias", "batched_matmul",
         "silu_mul_fp8", "rowscale_fp8", "attention", "blur", "separable5", "stencil_after_reduction",
         "attention_lse", "cross_entropy", "blur_sliding"]


def _cases():
    for name in NAMES:
        mod = importlib.import_module(name)
        for sizes in mod.SIZES:
            yield pytest.param(name, sizes, id=f"{name}-{'-'.join(f'{k}{v}' for k, v in sizes.items())}")


@pytest.mark.parametrize("name,sizes", list(_cases()))
@pytest.mark.slow
def test_example_matches_torch(name, sizes, capsys):
    """The example's kernel matches PyTorch at `sizes`; at its last sizes the run prints what the script
    prints (`common.run` with show, as `python examples/<name>.py` does): the loop nest, the source and OK."""
    torch.manual_seed(zlib.crc32(name.encode()))
    mod = importlib.import_module(name)
    show = sizes == mod.SIZES[-1]
    errs = common.run(mod, sizes=sizes, show=show)
    assert all(e == e for e in errs)  # not NaN (run() already bounds the error per dtype)
    if show:
        out = capsys.readouterr().out
        assert "@triton.jit" in out and "kernel " in out and out.rstrip().endswith("OK")


# Examples whose last knob choices make tiles so large (BLOCK 16384 x ROWS 4) that the interpreter takes half
# a minute at their second sizes: fewer rows, sizes that still divide no tile
FEWER_ROWS = {"softmax": dict(M=5, N=3000), "rowscale_fp8": dict(M=5, N=1000)}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow
def test_example_other_config(name):
    """The last choice of every knob (other tiles, stages, warps) is correct too."""
    mod = importlib.import_module(name)
    s, _ = mod.make()
    config = {n: k.choices[-1] for n, k in s.knobs.items()}
    common.run(mod, sizes=FEWER_ROWS.get(name, mod.SIZES[1]), config=config, show=False)
