"""Mamba's selective scan (the S6 layer's recurrence), one direction, real negative A, with the D skip and the
softplus of delta + delta_bias that Mamba's blocks ask for, no z gating. Per batch b and channel d, with a
state of N values:

    dt[t]   = softplus(delta[b, d, t] + delta_bias[d])
    h[t, n] = exp(dt[t] * A[d, n]) * h[t - 1, n] + dt[t] * B[b, n, t] * u[b, d, t]        (h[-1] = 0)
    y[b, d, t] = sum_n h[t, n] * C[b, n, t] + Dskip[d] * u[b, d, t]

The recurrence is `tc.linear_scan(a, b, axis=t)`, as the CUDA kernel computes it: an associative scan of the
pairs (exp(dt A), dt B u) within a chunk of the sequence and the state carried from chunk to chunk, O(L * N)
per (b, d). Fast schedule: a program per (b, d) channel; h's chunks of BL steps for BN states at a time
(the carry holds the BN states), written to the program's region of memory, then y's loop over the sequence
sums C * h over the states. The CUDA kernel keeps h in registers and sums over the states in the same chunk
loop; here h goes through memory (the scan's loops cannot hold a reduction over n placed inside them while n
has a loop of its own), which costs B * D * N * L floats of traffic. The reference runs selective_scan_ref's
loop in float64.

Before scans were in the language this kernel was the recurrence unrolled into its quadratic "attention"
form (Mamba-2's SSD), O(L^2 * N), with a triangular sum standing in for the cumulative sum of dt.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py: selective_scan_ref (delta_softplus=True, "
            "delta_bias, D, no z; real A), as csrc/selective_scan/selective_scan_fwd_kernel.cuh computes it")
# Not the same NaN/inf pattern: the associative scan multiplies and adds the pairs in another order than the
# sequential loop (the products of the a's first), so where an infinity meets a zero (inf * 0) or another
# infinity the two orders can differ between NaN and +-inf: with NaN/inf inputs the special variant gave NaN at 2
# places where the reference differs (plain and strided inputs agree to 1e-7). The CUDA kernel's chunked scan
# associates as this one does
SPECIAL = False
SIZES = [dict(B=2, D=3, L=37, N=16), dict(B=1, D=1, L=1, N=4), dict(B=1, D=5, L=300, N=5)]


def _softplus(x):
    return tc.where(x > 20.0, x, tc.log1p(tc.exp(x)))  # torch's softplus: beta 1, threshold 20


def make(fast: bool):
    B, D, L, N = tc.size_vars("B D L N")
    u = tc.placeholder((B, D, L), "float32", name="u")
    delta = tc.placeholder((B, D, L), "float32", name="delta")
    A = tc.placeholder((D, N), "float32", name="A")
    Bm = tc.placeholder((B, N, L), "float32", name="Bm")
    Cm = tc.placeholder((B, N, L), "float32", name="Cm")
    Dskip = tc.placeholder((D,), "float32", name="Dskip")
    delta_bias = tc.placeholder((D,), "float32", name="delta_bias")
    n = tc.reduce_axis(N, name="n")
    dt = tc.compute((B, D, L), lambda b, d, t: _softplus(delta[b, d, t] + delta_bias[d]), name="dt")
    h = tc.compute((B, D, N, L), lambda b, d, sn, t: tc.linear_scan(
        tc.exp(dt[b, d, t] * A[d, sn]), dt[b, d, t] * Bm[b, sn, t] * u[b, d, t], axis=t), name="h")
    ysum = tc.compute((B, D, L), lambda b, d, t: tc.sum(h[b, d, n, t] * Cm[b, n, t], axis=n), name="ysum")
    y = tc.compute((B, D, L), lambda b, d, t: ysum[b, d, t] + Dskip[d] * u[b, d, t], name="y")
    s = tc.create_schedule(y)
    if fast:
        BL, BN = tc.knob("BL", [64, 32, 128]), tc.knob("BN", [16, 8, 32])
        b, d, t = y.axis
        bd = s[y].fuse(b, d)
        s[y].bind(bd, "program_id.0")
        to, ti = s[y].split(t, BL)
        s[dt].compute_inline()
        hno, hni = s[h].split(h.axis[2], BN)
        hto, hti = s[h].split(h.axis[3], BL)
        s[h].reorder(hno, hto, hni, hti)
        s[h].compute_at(s[y], bd)
        s[ysum].split(n, BN)
        s[ysum].compute_at(s[y], to)
    return s, [u, delta, A, Bm, Cm, Dskip, delta_bias, y]


def inputs(sizes, device):
    B, D, L, N = (sizes[n] for n in ("B", "D", "L", "N"))
    return [harness.randn((B, D, L), torch.float32, device), harness.randn((B, D, L), torch.float32, device),
            -torch.exp(harness.randn((D, N), torch.float32, device, scale=0.5)),
            harness.randn((B, N, L), torch.float32, device), harness.randn((B, N, L), torch.float32, device),
            harness.randn((D,), torch.float32, device), harness.randn((D,), torch.float32, device, scale=0.5)]


def reference(u, delta, A, Bm, Cm, Dskip, delta_bias):
    """selective_scan_ref (delta_softplus=True, no z, real A), in float64."""
    u, delta, A, Bm, Cm, Dskip, delta_bias = (x.double() for x in (u, delta, A, Bm, Cm, Dskip, delta_bias))
    delta = torch.nn.functional.softplus(delta + delta_bias[..., None])
    batch, dim, L = u.shape
    deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
    deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, Bm, u)
    x = A.new_zeros((batch, dim, A.shape[1]))
    ys = []
    for i in range(L):
        x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
        ys.append(torch.einsum("bdn,bn->bd", x, Cm[:, :, i]))
    y = torch.stack(ys, dim=2)
    return (y + u * Dskip[..., None]).float()


# The benchmark's (benchmarks/suite.py): a Mamba-130m layer's channels (d_inner 1536, state 16) over 1024 steps;
# what a PyTorch user runs without the CUDA extension is selective_scan_ref's loop over the sequence, in float32.
BENCH = dict(B=2, D=1536, L=1024, N=16)


def torch_ref(u, delta, A, Bm, Cm, Dskip, delta_bias):
    """selective_scan_ref (delta_softplus=True, no z, real A), float32."""
    delta = torch.nn.functional.softplus(delta + delta_bias[..., None])
    deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
    deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, Bm, u)
    x = A.new_zeros((u.shape[0], u.shape[1], A.shape[1]))
    ys = []
    for i in range(u.shape[2]):
        x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
        ys.append(torch.einsum("bdn,bn->bd", x, Cm[:, :, i]))
    return torch.stack(ys, dim=2) + u * Dskip[..., None]
