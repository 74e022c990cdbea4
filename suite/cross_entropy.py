"""Cross-entropy's loss and its gradient in one kernel, as Liger-Kernel computes them: hard labels, label
smoothing, ignore_index and the mean reduction's scale, a program per row.

    m[r]     = max_v X[r, v]             d[r] = sum_v exp(X[r, v] - m[r])      lse[r] = m[r] + log(d[r])
    n        = #{r : y[r] != ignore_index}                                     eps = ls / V
    loss[r]  = (lse[r] - X[r, y[r]]) * (1 - ls) + sum_v (-eps * X[r, v]) + ls * lse[r]     (0 if ignored)
    dX[r, v] = (exp(X[r, v] - lse[r]) - eps - (1 - ls) * (v == y[r])) / n                      (0 if ignored)

X and dX bfloat16, the loss per row in X's dtype (Liger's loss_1d; the host sums it and divides by n), n
counted by a reduction over y (Liger counts it on the host). Fast schedule: a program per row; the max and
the sum run in one loop over column tiles (`online`, Liger's online softmax), the smoothing sum beside
them, then the gradient's loop; the loss is stored beside the gradient; the count is its own small kernel.
dX reads lse (Liger writes exp(X - m) / d, the same value): written with m and d, dX and the loss share no
computed tensor both read at the row, and compute_at(loss, dX.r) is refused (loss's rows do not follow dX's).
The smoothing sum is placed at the loss (placed at dX.r beside it, the kernel fails to lower: the loss
would read it before its loop).
"""

import functools

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel src/liger_kernel/ops/cross_entropy.py: liger_cross_entropy_kernel (hard labels, "
            "label_smoothing, ignore_index, 'mean' reduction's 1 / n_non_ignore; no z-loss)")
IGNORE = -100
LS = 0.1
SIZES = [dict(M=11, V=45), dict(M=1, V=1), dict(M=3, V=300)]


@functools.cache  # built once: the fast schedule's isl checks, one per primitive, take about 0.6 s here
def make(fast: bool):
    M, V = tc.size_vars("M V")
    X = tc.placeholder((M, V), "bfloat16", name="X")
    y = tc.placeholder((M,), "int64", name="y")
    c, c2, c3 = (tc.reduce_axis(V, name=n) for n in ("c", "c2", "c3"))
    r2 = tc.reduce_axis(M, name="r2")
    eps = LS / V
    m = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="m")
    d = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - m[r]), axis=c2), name="d")
    xs = tc.compute((M,), lambda r: tc.sum(-eps * X[r, c3], axis=c3), name="xs")
    n = tc.compute((1,), lambda z: tc.sum(y[r2] != IGNORE, axis=r2), name="n")
    lse = tc.compute((M,), lambda r: m[r] + tc.log(d[r]), name="lse")
    loss = tc.compute((M,), lambda r: tc.where(y[r] == IGNORE, 0.0,
                                               (lse[r] - X[r, y[r]]) * (1 - LS) + xs[r] + LS * lse[r]),
                      name="loss", dtype="bfloat16")
    dX = tc.compute((M, V), lambda r, v: tc.where(
        y[r] == IGNORE, 0.0,
        (tc.exp(X[r, v] - lse[r]) - eps - tc.where(v == y[r], 1 - LS, 0.0)) / n[0]), name="dX",
        dtype="bfloat16")
    s = tc.create_schedule([loss, dX])
    if fast:
        r, v = dX.axis
        block = tc.knob("BLOCK", [1024, 2048, 4096, 256])
        s[dX].split(v, block)
        s[dX].bind(r, "program_id.0")
        s[m].split(c, block)
        s[d].split(c2, block)
        s[xs].split(c3, block)
        s[d].online(s[m])
        s[lse].compute_inline()
        for T in (m, d, loss):
            s[T].compute_at(s[dX], r)
        s[xs].compute_at(s[loss], loss.axis[0])
        s[dX].num_warps(tc.knob("warps", [8, 16, 32]))
    return s, [X, y, loss, dX]


def inputs(sizes, device):
    M, V = sizes["M"], sizes["V"]
    y = torch.randint(0, V, (M,), dtype=torch.int64, device=device)
    y[torch.rand(M, device=device) < 0.25] = IGNORE
    return [harness.randn((M, V), torch.bfloat16, device, scale=2.0), y]


def reference(x, y):
    xd = x.double()
    M, V = x.shape
    keep = y != IGNORE
    n = keep.sum()
    m = xd.amax(1)
    d = torch.exp(xd - m[:, None]).sum(1)
    lse = m + torch.log(d)
    x_y = torch.where(keep, xd.gather(1, y.clamp_min(0)[:, None])[:, 0], 0.0)
    eps = LS / V
    loss = (lse - x_y) * (1 - LS) + (-eps * xd).sum(1) + LS * lse
    loss = torch.where(keep, loss, 0.0).to(x.dtype)
    onehot = torch.nn.functional.one_hot(y.clamp_min(0), V).double() * keep[:, None]
    dx = (torch.exp(xd - lse[:, None]) - eps - (1 - LS) * onehot) / n
    dx = torch.where(keep[:, None], dx, 0.0).to(x.dtype)
    return loss, dx


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (Llama 3's vocabulary, 4096 tokens), what a PyTorch
# user runs, Liger-Kernel's kernel.
BENCH = dict(M=4096, V=128256)


def torch_ref(x, y):
    """PyTorch eagerly, in bfloat16: the per-row loss (F.cross_entropy, reduction 'none', the same label smoothing
    and ignore_index) and its gradient through autograd for the 'mean' loss, sum(loss) / n (n the rows not
    ignored): the forward and the backward a training step runs."""
    xg = x.detach().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(xg, y, ignore_index=IGNORE, label_smoothing=LS, reduction="none")
    (dx,) = torch.autograd.grad(loss.sum() / (y != IGNORE).sum(), xg)
    return loss.detach(), dx


def original(x, y):
    """Liger-Kernel's forward (liger_kernel.ops.cross_entropy.cross_entropy_forward, reduction 'mean': one kernel
    computes the loss and writes the gradient over its input, which must require grad). It returns the mean loss,
    not the per-row one: that output is None here, and dX is compared. x is overwritten with dX (Liger's in-place
    trick; the benchmark gives it copies). liger_kernel is imported here (it may be missing)."""
    from liger_kernel.ops.cross_entropy import cross_entropy_forward

    xg = x.detach().requires_grad_(True)  # the same storage: the kernel writes dX into it
    _, _, _, _, dx = cross_entropy_forward(xg, y, None, IGNORE, 0.0, LS, "mean", None, False)
    return None, dx.detach()
