"""KL divergence, Liger-Kernel's forward kernel in a reducing mode ('batchmean', 'sum', 'mean'): a program per
row sums the pointwise loss of its row; the host then sums the rows (and divides by the batch for
'batchmean').

    loss[r] = sum_v y_true[r, v] * (log(max(y_true[r, v], eps)) - y_pred[r, v])      (log_target=False)

y_pred holds log-probabilities, y_true probabilities; float32. Fast schedule: ROWS rows per program, the
row sum over column tiles.
"""

import torch

import tilec as tc
from suite import harness

ORIGINAL = ("Liger-Kernel src/liger_kernel/ops/kl_div.py: _kldiv_kernel_forward (log_target=False, reduction "
            "!= 'none': loss_sum per row)")
EPS = 1e-10
SIZES = [dict(M=37, V=45), dict(M=1, V=1), dict(M=5, V=1), dict(M=3, V=1100)]


def make(fast: bool):
    M, V = tc.size_vars("M V")
    y_pred = tc.placeholder((M, V), "float32", name="y_pred")
    y_true = tc.placeholder((M, V), "float32", name="y_true")
    v = tc.reduce_axis(V, name="v")
    loss = tc.compute((M,), lambda r: tc.sum(y_true[r, v] * (tc.log(tc.maximum(y_true[r, v], EPS)) - y_pred[r, v]),
                                             axis=v), name="loss")
    s = tc.create_schedule(loss)
    if fast:
        (r,) = loss.axis
        ro, ri = s[loss].split(r, tc.knob("ROWS", [1, 4, 16]))
        vo, vi = s[loss].split(v, tc.knob("BLOCK", [1024, 2048, 256]))
        s[loss].reorder(ro, vo, ri, vi)
        s[loss].bind(ro, "program_id.0")
        s[loss].num_warps(tc.knob("warps", [4, 8]))
    return s, [y_pred, y_true, loss]


def inputs(sizes, device):
    M, V = sizes["M"], sizes["V"]
    y_pred = torch.log_softmax(harness.randn((M, V), torch.float32, device, scale=2.0), 1)
    y_true = torch.softmax(harness.randn((M, V), torch.float32, device, scale=2.0), 1)
    return [y_pred, y_true]


def reference(y_pred, y_true):
    t, p = y_true.double(), y_pred.double()
    return (t * (torch.log(torch.clamp_min(t, EPS)) - p)).sum(1).float()


# The benchmark's (benchmarks/suite.py): its sizes on the GPU (4096 tokens over a 32000-word vocabulary), what a
# PyTorch user runs, Liger-Kernel's kernel.
BENCH = dict(M=4096, V=32000)


def torch_ref(y_pred, y_true):
    """F.kl_div (log_target False) pointwise, then summed over each row, float32."""
    return torch.nn.functional.kl_div(y_pred, y_true, reduction="none").sum(-1)


def original(y_pred, y_true):
    """Liger-Kernel's forward (liger_kernel.ops.kl_div.kldiv_forward_triton, reduction 'sum': the kernel sums each
    row, the host sums the rows). It returns that total, not the rows: the benchmark compares it with the rows'
    sum. liger_kernel is imported here (it may be missing)."""
    from liger_kernel.ops.kl_div import kldiv_forward_triton

    return kldiv_forward_triton(y_pred, y_true, False, "sum", EPS)
