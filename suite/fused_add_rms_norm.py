"""vLLM's fused residual add and RMSNorm: the residual stream gets the layer's output added (rounded to the
activation dtype, and stored back), then RMSNorm of the new residual, in one kernel with two outputs.

    z[r, c]   = bf16(x[r, c] + residual[r, c])                   (the new residual, an output)
    rstd[r]   = 1 / sqrt(sum_c z[r, c]^2 / N + eps)               (float32)
    out[r, c] = bf16(z[r, c] * rstd[r]) * w[c]                    (rounded to bfloat16)

Fast schedule: ROWS rows per program (vLLM's block takes a row), the sum of squares and the new residual
computed at out's rows over column tiles, then out's loop.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("vLLM csrc/layernorm_kernels.cu: fused_add_rms_norm_kernel (the generic, non-vectorized "
            "overload: z = input + residual in scalar_t, residual = z, input = (scalar_t)(x * s_variance) * weight)")
EPS = 1e-6
SIZES = [dict(M=19, N=45), dict(M=1, N=300), dict(M=5, N=1), dict(M=3, N=1031)]


def make(fast: bool):
    M, N = tc.size_vars("M N")
    x = tc.placeholder((M, N), "bfloat16", name="x")
    residual = tc.placeholder((M, N), "bfloat16", name="residual")
    w = tc.placeholder((N,), "bfloat16", name="w")
    c = tc.reduce_axis(N, name="c")
    z = tc.compute((M, N), lambda r, col: x[r, col] + residual[r, col], name="z", dtype="bfloat16")
    ss = tc.compute((M,), lambda r: tc.sum(z[r, c].astype("float32") * z[r, c], axis=c), name="ss")
    out = tc.compute((M, N), lambda r, col: (z[r, col] * tc.rsqrt(ss[r] / N + EPS)).astype("bfloat16") * w[col],
                     name="out", dtype="bfloat16")
    s = tc.create_schedule([out, z])
    if fast:
        r, col = out.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        ro, ri = s[out].split(r, tc.knob("ROWS", [1, 2, 4]))
        co, ci = s[out].split(col, block)
        s[out].reorder(ro, co, ri, ci)
        s[out].bind(ro, "program_id.0")
        s[ss].split(c, block)
        s[z].split(z.axis[1], block)
        s[z].compute_at(s[out], ro)
        s[ss].compute_at(s[out], ro)
        s[out].num_warps(tc.knob("warps", [4, 8, 16]))
    return s, [x, residual, w, out, z]


def inputs(sizes, device):
    M, N = sizes["M"], sizes["N"]
    return [harness.randn((M, N), torch.bfloat16, device), harness.randn((M, N), torch.bfloat16, device),
            harness.randn((N,), torch.bfloat16, device)]


def reference(x, residual, w):
    z = (x.float() + residual.float()).to(torch.bfloat16)
    zf = z.float()
    rstd = torch.rsqrt((zf * zf).mean(1, keepdim=True) + EPS)
    out = ((zf * rstd).to(torch.bfloat16).float() * w.float()).to(torch.bfloat16)
    return out, z


# The benchmark's (benchmarks/suite.py): its sizes on the GPU and what a PyTorch user runs (vLLM's CUDA kernel is
# not imported: no `original`).
BENCH = dict(M=4096, N=8192)


def torch_ref(x, residual, w):
    """Eagerly in bfloat16: the residual add, then HF Llama's RMSNorm of the new residual (the mean square in
    float32, x * rstd rounded to bfloat16, times the weight); returns the normalized output and the residual."""
    z = x + residual
    zf = z.float()
    out = (zf * torch.rsqrt(zf.pow(2).mean(-1, keepdim=True) + EPS)).to(z.dtype) * w
    return out, z
