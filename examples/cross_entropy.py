"""Cross-entropy's loss and its gradient in one kernel, as Liger-Kernel computes them
(liger_kernel/ops/cross_entropy.py): a program per row reads the logits to find the row's max and its
sum of exponentials (two loops over the vocabulary), then writes the gradient and the loss.

    lse[r]   = m[r] + log(sum_v exp(X[r, v] - m[r]))
    loss[r]  = lse[r] - X[r, y[r]]
    dX[r, v] = exp(X[r, v] - lse[r]) - (v == y[r])

loss and dX do not read each other; both read lse (inlined), so loss is placed at dX's row (compute_at
through the tensors both read) and stored beside it. Liger's kernel also folds in the mean over rows,
label smoothing and ignore_index; here the plain per-row loss.
"""

import common
import torch

import tilec as tc

SIZES = [dict(M=64, V=1000), dict(M=7, V=33), dict(M=1, V=1), dict(M=5, V=4099)]


def make():
    M, V = tc.size_vars("M V")
    X = tc.placeholder((M, V), "float32", name="X")
    y = tc.placeholder((M,), "int32", name="y")
    c, c2 = tc.reduce_axis(V, name="c"), tc.reduce_axis(V, name="c2")
    m = tc.compute((M,), lambda r: tc.max(X[r, c], axis=c), name="m")
    se = tc.compute((M,), lambda r: tc.sum(tc.exp(X[r, c2] - m[r]), axis=c2), name="se")
    lse = tc.compute((M,), lambda r: m[r] + tc.log(se[r]), name="lse")
    loss = tc.compute((M,), lambda r: lse[r] - X[r, y[r]], name="loss")
    dX = tc.compute((M, V), lambda r, v: tc.exp(X[r, v] - lse[r]) - tc.where(v == y[r], 1.0, 0.0), name="dX")

    s = tc.create_schedule([loss, dX])
    r, v = dX.axis
    s[dX].split(v, tc.knob("BLOCK", [1024, 2048, 4096]))
    s[dX].bind(r, "program_id.0")
    s[lse].compute_inline()
    s[m].split(c, tc.knob("BLOCK", [1024, 2048, 4096]))
    s[se].split(c2, tc.knob("BLOCK", [1024, 2048, 4096]))
    s[m].compute_at(s[dX], r)
    s[se].compute_at(s[dX], r)
    s[loss].compute_at(s[dX], r)  # no read between loss and dX: their rows follow lse's, which both read
    return s, [X, y, loss, dX]


def inputs(sizes, device):
    x = common.randn((sizes["M"], sizes["V"]), torch.float32, device)
    return [x, torch.randint(0, sizes["V"], (sizes["M"],), dtype=torch.int32, device=device)]


def reference(x, y):
    lse = torch.logsumexp(x.double(), 1)
    rows = torch.arange(x.shape[0], device=x.device)
    loss = (lse - x.double()[rows, y.long()]).float()
    dx = (torch.softmax(x.double(), 1) - torch.nn.functional.one_hot(y.long(), x.shape[1]).double()).float()
    return loss, dx


if __name__ == "__main__":
    import sys
    common.run(sys.modules[__name__])
