"""Mamba's selective scan (the S6 layer's recurrence), one direction, real negative A, with the D skip and the
softplus of delta + delta_bias that Mamba's blocks ask for, no z gating. Per batch b and channel d, with a
state of N values:

    dt[t]   = softplus(delta[b, d, t] + delta_bias[d])
    h[t, n] = exp(dt[t] * A[d, n]) * h[t - 1, n] + dt[t] * B[b, n, t] * u[b, d, t]        (h[-1] = 0)
    y[b, d, t] = sum_n h[t, n] * C[b, n, t] + Dskip[d] * u[b, d, t]

The formulation is dense, the recurrence unrolled into its quadratic "attention" form (Mamba-2's SSD; its
Triton chunk kernels compute exp(dA_cumsum[t] - dA_cumsum[s]) the same way):

    cum[t]  = sum_r where(r <= t, dt[r], 0)                                  (a triangular sum, O(L^2))
    W[t, s] = sum_n C[b, n, t] * exp(A[d, n] * (cum[t] - cum[s])) * B[b, n, s]    (O(L^2 * N); s <= t,
              the exponent -inf above the diagonal, as Mamba-2's segsum masks it: no overflow there)
    y[b, d, t] = sum_s where(s <= t, W[t, s] * dt[s] * u[b, d, s], 0) + Dskip[d] * u[b, d, t]

since h[t, n] = sum_{s <= t} exp(A[d, n] * sum_{s < r <= t} dt[r]) * dt[s] * B[b, n, s] * u[b, d, s]. The
work is O(L^2 * N) per (b, d), quadratic in the sequence length, where the original's scan is O(L * N): it
carries h along t (selective_scan_ref loops over t; the CUDA kernel runs a parallel associative scan of the
pairs (exp(dt A), dt B u) within a chunk and carries the state across chunks). A scan primitive in the
language (an associative scan along an axis, or a loop-carried value) would make it that algorithm
(docs/language.md, "Not in the language yet": scans). The cumulative sum is itself the triangular-sum
stand-in for torch.cumsum; the difference cum[t] - cum[s] loses digits as cum grows along a long sequence
(the SSD kernels keep their chunks to 64-256 steps), so L stays small here (<= 40). The reference runs
selective_scan_ref's loop in float64. Fast schedule: a program per (b, d) channel, the sequence in tiles of
BL (one tile where L <= BL, as Mamba's CUDA kernel takes a chunk of the sequence per block): cum first, then
for each tile of t, W's (BL x BL) tile over tiles of s with the masked sum, in one kernel.
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py: selective_scan_ref (delta_softplus=True, "
            "delta_bias, D, no z; real A), as csrc/selective_scan/selective_scan_fwd_kernel.cuh computes it")
# Not the same NaN/inf pattern: the recurrence carries an infinite u[t] in each of the N state values, and
# C's sum over n mixes their signs into NaN; the unrolled form sums over n first (W) and multiplies by u[s]
# after, giving +-inf there (u = inf at one t: NaN from t on in the reference, +-inf here). Which outputs are
# NaN and which infinite is a property of the order of the recurrence's operations, not of the scan
SPECIAL = False
SIZES = [dict(B=2, D=3, L=37, N=16), dict(B=1, D=1, L=1, N=4), dict(B=1, D=5, L=40, N=5)]


def _softplus(x):
    return tc.where(x > 20.0, x, tc.log1p(tc.exp(x)))  # torch's softplus: beta 1, threshold 20


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take seconds here
def make(fast: bool):
    B, D, L, N = tc.size_vars("B D L N")
    u = tc.placeholder((B, D, L), "float32", name="u")
    delta = tc.placeholder((B, D, L), "float32", name="delta")
    A = tc.placeholder((D, N), "float32", name="A")
    Bm = tc.placeholder((B, N, L), "float32", name="Bm")
    Cm = tc.placeholder((B, N, L), "float32", name="Cm")
    Dskip = tc.placeholder((D,), "float32", name="Dskip")
    delta_bias = tc.placeholder((D,), "float32", name="delta_bias")
    r = tc.reduce_axis(L, name="r")
    n = tc.reduce_axis(N, name="n")
    sr = tc.reduce_axis(L, name="sr")
    dt = tc.compute((B, D, L), lambda b, d, t: _softplus(delta[b, d, t] + delta_bias[d]), name="dt")
    cum = tc.compute((B, D, L), lambda b, d, t: tc.sum(tc.where(r <= t, dt[b, d, r], 0.0), axis=r), name="cum")
    W = tc.compute((B, D, L, L), lambda b, d, t, s: tc.sum(
        Cm[b, n, t] * tc.exp(tc.where(s <= t, A[d, n] * (cum[b, d, t] - cum[b, d, s]), float("-inf"))) * Bm[b, n, s],
        axis=n), name="W")
    ysum = tc.compute((B, D, L), lambda b, d, t: tc.sum(
        tc.where(sr <= t, W[b, d, t, sr] * dt[b, d, sr] * u[b, d, sr], 0.0), axis=sr), name="ysum")
    y = tc.compute((B, D, L), lambda b, d, t: ysum[b, d, t] + Dskip[d] * u[b, d, t], name="y")
    s = tc.create_schedule(y)
    if fast:
        BL = tc.knob("BL", [64, 32, 16])
        b, d, t = y.axis
        bd = s[y].fuse(b, d)
        s[y].bind(bd, "program_id.0")
        to, ti = s[y].split(t, BL)
        s[cum].split(cum.axis[2], BL)
        s[cum].split(r, BL)
        s[ysum].split(ysum.axis[2], BL)
        sro, sri = s[ysum].split(sr, BL)
        s[W].split(n, tc.knob("BN", [16, 4]))
        s[dt].compute_inline()
        s[cum].compute_at(s[y], bd)
        s[ysum].compute_at(s[y], to)
        s[W].compute_at(s[ysum], sro)
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
